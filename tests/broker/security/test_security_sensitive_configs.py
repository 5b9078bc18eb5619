"""Secrets in a broker's config are never answered (DescribeConfigs, as Kafka): a broker
process on ZooKeeper with ``zookeeper.connect=user:password@host/chroot``, a SASL listener's
JAAS entry (with PLAIN users' passwords) and a key store password answers each of them with a
null value and ``is_sensitive``, in synonyms too, to confluent-kafka's AdminClient and on the
wire, while a plain key is shown; neither its log nor the answer hold a secret."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from kafkaclient.messages import build
from tests.broker.processes import BrokerProcess, coordinator_settings, start_broker
from tests.broker.security_fixtures import PLAIN_MODULE, listener_ports, secret
from tests.broker.wire_client import RawClient, request, request_module

pytestmark = pytest.mark.servers

BROKER = 4
PASSWORD = 9
JAAS_KEY = "listener.name.sasl_plaintext.plain.sasl.jaas.config"


@pytest.fixture(scope="module")
def secrets() -> dict[str, str]:
    return {"zk": secret("zk-digest"), "bob": secret("bob-plain"), "key": secret("key-store")}


@pytest.fixture(scope="module")
def broker(zookeeper_server, tmp_path_factory: pytest.TempPathFactory,  # type: ignore[no-untyped-def]
           secrets: dict[str, str]) -> Iterator[BrokerProcess]:
    settings = coordinator_settings(zookeeper_server)
    hosts_and_chroot = settings[0].strip().removeprefix("zookeeper.connect=")
    extra = (f"zookeeper.connect=kafka:{secrets['zk']}@{hosts_and_chroot}\n"
             "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0\n"
             "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,"
             "SASL_PLAINTEXT:SASL_PLAINTEXT\n"
             "inter.broker.listener.name=PLAINTEXT\n"
             "sasl.enabled.mechanisms=PLAIN\n"
             f"{JAAS_KEY}={PLAIN_MODULE} required user_bob=\"{secrets['bob']}\";\n"
             f"ssl.key.password={secrets['key']}\n"
             "num.partitions=3\n")
    running = start_broker(tmp_path_factory.mktemp("sensitive") / "broker", zookeeper_server,
                           settings=settings, extra=extra)
    yield running
    status = running.stop()
    assert status == 0, running.log()[-3000:]


SECRET_KEYS = ("zookeeper.connect", JAAS_KEY, "ssl.key.password")


def test_secrets_are_null_and_sensitive_to_confluent_kafka(broker: BrokerProcess,
                                                           secrets: dict[str, str]) -> None:
    port = listener_ports(broker)["PLAINTEXT"]
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
    own = ConfigResource(ConfigResource.Type.BROKER, "1")
    described = admin.describe_configs([own])[own].result(30)
    for key in SECRET_KEYS:
        assert described[key].value is None, key
        assert described[key].is_sensitive, key
    assert described["num.partitions"].value == "3"
    assert not described["num.partitions"].is_sensitive
    assert all(s not in repr(e.value) for e in described.values() for s in secrets.values())
    log = broker.log()
    assert not [s for s in secrets.values() if s in log]


def test_secrets_are_null_in_synonyms_on_the_wire(broker: BrokerProcess) -> None:
    port = listener_ports(broker)["PLAINTEXT"]
    m = request_module(32, 4)
    ask = request(32, 4, resources=(
        build(m.DescribeConfigsResource, resource_type=BROKER, resource_name="1",
              configuration_keys=(*SECRET_KEYS, "num.partitions")),),
        include_synonyms=True, include_documentation=False)
    with RawClient(("127.0.0.1", port)) as client:
        answer = client.call(ask)
    configs = {c.name: c for c in answer.results[0].configs}
    assert set(configs) == {*SECRET_KEYS, "num.partitions"}
    for key in SECRET_KEYS:
        entry = configs[key]
        assert entry.value is None and entry.is_sensitive, entry
        assert [(s.name, s.value) for s in entry.synonyms] == [(key, None)]
    assert configs[JAAS_KEY].config_type == PASSWORD
    plain = configs["num.partitions"]
    assert plain.value == "3" and not plain.is_sensitive
    assert [(s.name, s.value) for s in plain.synonyms] == [("num.partitions", "3")]

