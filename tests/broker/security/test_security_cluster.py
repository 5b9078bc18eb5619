"""Three broker processes whose only listener is SASL_SSL, inter-broker traffic included
(``inter.broker.listener.name=SASL_SSL``, SCRAM-SHA-512 as the brokers' own user): the
controller's requests and the followers' fetches authenticate like any client, a topic of
replication factor 3 written with acks=all over SASL_SSL has an ISR of 3, and its messages are
read back from another broker once the leader is killed; on ZooKeeper and on etcd. Sessions last 4 s
(``connections.max.reauth.ms``): the brokers' connections are renewed before theirs end."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient

import coordinator
from coordinator.admin import Admin
from coordinator.credentials import ENV_PASSWORD_FILE, ENV_USER, from_environment
from tests.broker.processes import BrokerProcess, coordinator_settings, start_broker
from tests.broker.security_fixtures import (
    SCRAM_MODULE,
    listener_ports,
    partctl,
    secret,
    ssl_properties,
)
from tests.broker.tls_material import Material, make_material

pytestmark = pytest.mark.servers


@pytest.fixture(scope="module", params=["zookeeper", pytest.param("etcd", marks=pytest.mark.long)])
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[SecureTrio]:
    """The secure trio on each coordinator: SCRAM credentials at /config/users and the
    brokers' authentication work the same over ZooKeeper and etcd (etcd's run is in the long
    tier, tests/conftest.py: ZooKeeper's has the locked-down chroot too)."""
    server = request.getfixturevalue(f"{request.param}_server")
    directory: Path = tmp_path_factory.mktemp("secure-cluster")
    material = make_material(directory / "tls")
    settings = coordinator_settings(server)
    secrets = {"admin": secret("admin-scram"), "alice": secret("alice-scram")}
    locked, env = "", {}
    if request.param == "zookeeper":  # a locked-down chroot: digest identity, Kafka's ACLs
        secrets["zookeeper"] = secret("zk-digest")
        zk_password = directory / "zookeeper.password"
        zk_password.write_text(secrets["zookeeper"] + "\n")
        zk_password.chmod(0o600)
        locked = (f"zookeeper.digest.user=kafka\nzookeeper.digest.password.file={zk_password}\n"
                  "zookeeper.set.acl=true\n")
        env = {ENV_USER: "kafka", ENV_PASSWORD_FILE: str(zk_password)}
    outputs = []
    for user in ("admin", "alice"):
        path = directory / f"{user}.password"
        path.write_text(secrets[user])
        made = partctl("users", "create", user, "--mechanism", "SCRAM-SHA-512",
                       "--password-file", str(path), url=settings[1], env=env)
        outputs += [made.stdout, made.stderr]
        assert made.returncode == 0, made.stderr
    jaas = f'{SCRAM_MODULE} required username="admin" password="{secrets["admin"]}";'
    extra = ("listeners=SASL_SSL://127.0.0.1:0\n"
             "inter.broker.listener.name=SASL_SSL\n"
             "sasl.enabled.mechanisms=SCRAM-SHA-512\n"
             "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512\n"
             f"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={jaas}\n"
             + ssl_properties(material) +
             "replica.lag.time.max.ms=10000\n"
             # sessions of 2 s (KIP-368): the brokers' own connections renew theirs in time
             "listener.name.sasl_ssl.connections.max.reauth.ms=4000\n" + locked)
    brokers = []
    try:
        for broker_id in (1, 2, 3):
            brokers.append(start_broker(directory / f"b{broker_id}", server,
                                        broker_id=broker_id, settings=settings, extra=extra))
        yield SecureTrio(brokers, material, secrets, settings[1], outputs, env)
    finally:
        for broker in brokers:
            broker.stop()


@dataclass
class SecureTrio:
    brokers: list[BrokerProcess]
    material: Material
    secrets: dict[str, str]
    """Every secret of the run: the SCRAM users' passwords and, on ZooKeeper, the digest one."""
    url: str
    outputs: list[str]
    """What the CLI tools of the run printed."""
    env: dict[str, str]
    """The environment that gives the tools the coordinator credentials ({} on etcd)."""


def client_conf(brokers: list[BrokerProcess], material: Material, password: str
                ) -> dict[str, object]:
    servers = ",".join(f"127.0.0.1:{listener_ports(b)['SASL_SSL']}" for b in brokers)
    return {"bootstrap.servers": servers, "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(material.ca), "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "alice", "sasl.password": password}


def test_a_sasl_ssl_inter_broker_listener_replicates_with_an_isr_of_three(
        cluster: SecureTrio) -> None:
    brokers, material, secrets, url, outputs = (cluster.brokers, cluster.material,
                                                cluster.secrets, cluster.url, cluster.outputs)
    topic = f"replicated-{uuid.uuid4().hex[:8]}"
    client = coordinator.connect(url, timeout=10, credentials=from_environment(cluster.env))
    try:
        Admin(client).create_topic(topic, 1, 3)
    finally:
        client.close()
    conf = client_conf(brokers, material, secrets["alice"])
    producer = ck.Producer({**conf, "acks": "all", "enable.idempotence": True})
    acked, errors = [], []
    for i in range(50):
        producer.produce(topic, value=f"m{i}".encode(), partition=0, on_delivery=lambda e, m: (
            errors.append(e) if e is not None else acked.append(m.offset())))
    assert producer.flush(90) == 0
    assert errors == [] and sorted(acked) == list(range(50))
    admin = AdminClient(conf)
    deadline = time.monotonic() + 60
    while True:
        partition = admin.list_topics(topic, timeout=10).topics[topic].partitions[0]
        if sorted(partition.isrs) == [1, 2, 3]:
            break
        assert time.monotonic() < deadline, f"ISR stayed {partition.isrs}"
        time.sleep(0.5)
    assert sorted(partition.replicas) == [1, 2, 3]
    time.sleep(5)  # the followers keep fetching past their first sessions' end
    # the followers really hold the messages: with the leader killed, another broker of the
    # ISR leads and serves all 50 (unclean election is off)
    leader = next(b for b in brokers if b.broker_id == partition.leader)
    leader.kill()
    survivors = [b for b in brokers if b is not leader]
    conf = client_conf(survivors, material, secrets["alice"])
    admin = AdminClient(conf)
    deadline = time.monotonic() + 60
    while True:
        partition = admin.list_topics(topic, timeout=10).topics[topic].partitions[0]
        if partition.leader in {b.broker_id for b in survivors}:
            break
        assert time.monotonic() < deadline, f"no new leader: {partition.leader}"
        time.sleep(0.5)
    consumer = ck.Consumer({**conf, "group.id": "readers", "enable.auto.commit": False})
    try:
        consumer.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
        got = []
        deadline = time.monotonic() + 60
        while len(got) < 50 and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        assert got == [f"m{i}".encode() for i in range(50)]
    finally:
        consumer.close()
    # the operator's tools, authenticated from the environment as the brokers are from files
    for args in (("topics", "describe", "--topic", topic), ("topics", "list"),
                 ("controller", "status"), ("cluster", "status"), ("users", "describe"),
                 ("acls", "list")):
        shown = partctl(*args, url=url, env=cluster.env)
        assert shown.returncode == 0, (args, shown.stdout, shown.stderr)
        outputs += [shown.stdout, shown.stderr]
    assert topic in outputs[-12]  # topics describe named it: the tools really read the cluster
    text = "".join(b.log() for b in brokers) + "".join(outputs)
    for name, value in secrets.items():
        assert value not in text, f"{name}'s password is in the output"
    assert "Traceback" not in text, text[text.find("Traceback") - 300:][:3000]
    assert "its SASL session expired" not in text
    assert all(b.stop() == 0 for b in survivors)
