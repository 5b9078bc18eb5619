"""A broker's DescribeConfigs lists every declared key, as Kafka's does (``kafka-configs
--describe --all``): the keys ``server.properties`` sets as STATIC_BROKER_CONFIG, every other
one with its declared default (null where it has none) as DEFAULT_CONFIG, with its type and
doc; to confluent-kafka's AdminClient and on the wire, from a real broker process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource

from broker.config_keys import BROKER_CONFIG
from kafkaclient.messages import build
from tests.broker.processes import BrokerProcess, start_broker
from tests.broker.wire_client import RawClient, request, request_module

pytestmark = pytest.mark.servers

BROKER = 4


@pytest.fixture(scope="module")
def broker(zookeeper_server, tmp_path_factory: pytest.TempPathFactory,  # type: ignore[no-untyped-def]
           ) -> Iterator[BrokerProcess]:
    running = start_broker(Path(tmp_path_factory.mktemp("defaults")) / "broker",
                           zookeeper_server, extra="num.partitions=3\n")
    yield running
    assert running.stop() == 0, running.log()[-3000:]


def test_every_key_is_listed_with_its_default_to_confluent_kafka(broker: BrokerProcess
                                                                 ) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    own = ConfigResource(ConfigResource.Type.BROKER, "1")
    described = admin.describe_configs([own])[own].result(30)
    assert set(BROKER_CONFIG) <= set(described)
    assert (described["num.partitions"].value, described["num.partitions"].source) == (
        "3", ConfigSource.STATIC_BROKER_CONFIG.value)
    retention = described["log.retention.hours"]  # not set: Kafka's default
    assert (retention.value, retention.source, retention.is_default, retention.is_read_only) == (
        "168", ConfigSource.DEFAULT_CONFIG.value, True, True)
    rack = described["broker.rack"]  # no default: null
    assert (rack.value, rack.source) == (None, ConfigSource.DEFAULT_CONFIG.value)
    defaults = {n for n, e in described.items() if e.source == ConfigSource.DEFAULT_CONFIG.value}
    assert {"auto.leader.rebalance.enable", "log.segment.bytes", "offsets.topic.num.partitions",
            "leader.imbalance.per.broker.percentage"} <= defaults


def test_defaults_on_the_wire_with_synonyms_type_and_doc(broker: BrokerProcess) -> None:
    m = request_module(32, 4)
    ask = request(32, 4, resources=(
        build(m.DescribeConfigsResource, resource_type=BROKER, resource_name="1",
              configuration_keys=None),), include_synonyms=True, include_documentation=True)
    with RawClient(broker.address) as client:
        answer = client.call(ask)
    configs = {c.name: c for c in answer.results[0].configs}
    segment = configs["log.segment.bytes"]
    assert (segment.value, segment.config_source, segment.config_type) == (
        str(1 << 30), 5, 3)  # DEFAULT_CONFIG, INT
    assert [(s.name, s.value, s.source) for s in segment.synonyms] == [
        ("log.segment.bytes", str(1 << 30), 5)]
    assert segment.documentation == BROKER_CONFIG["log.segment.bytes"].doc
    threads = configs["num.io.threads"]  # accepted, not applied: the doc says so
    assert threads.documentation is not None and "partctl: " in threads.documentation
