"""The reference Apache Kafka runs here, and Kafka's own TopicCommand works against partctl.

Kafka 3.9.1 in ZooKeeper mode (on the session's ZooKeeper) and Kafka 4.x in KRaft mode each
create and describe a topic with Kafka's TopicCommand, take 1,000 records from Kafka's
ProducerPerformance and give them back to its ConsoleConsumer. Then both versions'
TopicCommand, with ``--bootstrap-server``, create a topic (3 partitions, replication factor 3,
``min.insync.replicas=2``) on three partctl broker processes, describe it (a leader, the
replicas and the ISR of each partition, the config), and fail to describe a topic that does not
exist as Kafka does."""

from __future__ import annotations

import re
import subprocess
import uuid
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

import coordinator
from broker.cluster import LocalCluster
from coordinator.metadata import MetadataClient
from tests.servers import Server
from tests.waiting import wait_until

from .conftest import require_kafka
from .harness import (
    KAFKA_3,
    KAFKA_4,
    KafkaCluster,
    kafka_jars,
    kafka_tools,
    run_tool,
)

pytestmark = pytest.mark.servers

REPO = Path(__file__).resolve().parents[2]
PRODUCT = ("coordinator", "elections", "interbroker", "statemachines", "replication", "node",
           "broker", "rebalancer", "partctl", "migrations")
RECORDS = 1000
RECORD_SIZE = 100
PARTITION = re.compile(r"Partition: (\d+)\s+Leader: (\S+)\s+Replicas: (\S+)\s+Isr: (\S*)")


def _topic() -> str:
    return f"ref-{uuid.uuid4().hex[:8]}"


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, (
        f"{result.args[-1] if result.args else ''}: exit {result.returncode}\n"
        f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}")
    return result.stdout


def _partitions(out: str) -> dict[int, tuple[str, list[int], list[int]]]:
    """TopicCommand --describe's partition lines: partition -> (leader, replicas, isr)."""
    return {int(p): (leader, [int(r) for r in replicas.split(",")],
                     [int(i) for i in isr.split(",") if i])
            for p, leader, replicas, isr in PARTITION.findall(out)}


def _describe_until(version: str, bootstrap: str, topic: str, partitions: int,
                    settled: Callable[[dict[int, tuple[str, list[int], list[int]]]], bool]
                    ) -> str:
    """TopicCommand --describe, again until its answer has every partition and ``settled``
    holds (a new topic's leaders are elected after CreateTopics answers)."""
    seen: list[str] = []

    def describe() -> str | None:
        out = _ok(run_tool(version, "topics", "--bootstrap-server", bootstrap, "--describe",
                           "--topic", topic))
        seen[:] = [out]
        parts = _partitions(out)
        return out if len(parts) == partitions and settled(parts) else None

    try:
        return wait_until(describe, timeout=60, interval=0.2, message=f"{topic} described")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last answer:\n{seen[-1] if seen else '(none)'}") from None


def _produce_and_consume(version: str, bootstrap: str) -> None:
    """Kafka's TopicCommand creates and describes a topic, ProducerPerformance writes
    ``RECORDS`` records to it, ConsoleConsumer reads them all back (from its one partition,
    without a group: a group's first join creates __consumer_offsets, seconds more)."""
    topic = _topic()
    out = _ok(run_tool(version, "topics", "--bootstrap-server", bootstrap, "--create",
                       "--topic", topic, "--partitions", "1", "--replication-factor", "1"))
    assert f"Created topic {topic}." in out
    described = _describe_until(version, bootstrap, topic, 1,
                                lambda parts: parts[0][0] == "1")
    assert "PartitionCount: 1" in described and "ReplicationFactor: 1" in described

    out = _ok(run_tool(version, "producer-perf-test", "--topic", topic,
                       "--num-records", str(RECORDS), "--record-size", str(RECORD_SIZE),
                       "--throughput", "-1", "--producer-props",
                       f"bootstrap.servers={bootstrap}", "acks=all"))
    assert f"{RECORDS} records sent" in out, out

    consumed = run_tool(version, "console-consumer", "--bootstrap-server", bootstrap,
                        "--topic", topic, "--partition", "0", "--offset", "earliest",
                        "--max-messages", str(RECORDS), "--timeout-ms", "30000")
    values = _ok(consumed).splitlines()
    assert len(values) == RECORDS and {len(v) for v in values} == {RECORD_SIZE}, values[:3]
    assert f"Processed a total of {RECORDS} messages" in consumed.stderr, consumed.stderr


def test_no_product_package_refers_to_the_reference_kafka() -> None:
    """Kafka is a test and benchmark dependency only."""
    needles = ("tests.kafka", "tests/kafka", "PARTCTL_KAFKA_CACHE", "kafka_2.13", "partctl/kafka")
    found = [f"{path.relative_to(REPO)}: {needle}"
             for package in PRODUCT for path in sorted((REPO / package).rglob("*.py"))
             for needle in needles if needle in path.read_text(errors="replace")]
    assert not found, found


@pytest.mark.parametrize("version", [KAFKA_3, KAFKA_4])
def test_main_classes_of_kafkas_scripts_are_in_the_jars(version: str) -> None:
    require_kafka(version)
    classes: set[str] = set()
    for jar in kafka_jars(version).glob("*.jar"):
        if jar.name.startswith(("kafka", "connect-runtime")):
            with zipfile.ZipFile(jar) as z:
                classes.update(n[:-len(".class")].replace("/", ".") for n in z.namelist()
                               if n.endswith(".class"))
    missing = {tool: main for tool, main in kafka_tools(version).items()
               if main not in classes}
    assert not missing, missing


def test_kafka3_zookeeper_mode_broker_serves_kafkas_tools(
        kafka3_zk: KafkaCluster, zookeeper_server: Server) -> None:
    assert kafka3_zk.zookeeper_connect is not None
    chroot = kafka3_zk.zookeeper_connect.partition("/")[2]
    client = coordinator.connect(zookeeper_server.url(f"/{chroot}"), timeout=10)
    try:  # registered in its chroot of the tests' ZooKeeper, in Kafka's layout
        assert MetadataClient(client).broker_ids() == [1]
    finally:
        client.close()
    _produce_and_consume(KAFKA_3, kafka3_zk.bootstrap)


def test_kafka4_kraft_node_serves_kafkas_tools(kafka4_kraft: KafkaCluster) -> None:
    _produce_and_consume(KAFKA_4, kafka4_kraft.bootstrap)


@pytest.mark.parametrize("version", [KAFKA_3, KAFKA_4])
def test_kafkas_topic_command_on_three_partctl_brokers(version: str,
                                                       partctl_three: LocalCluster) -> None:
    require_kafka(version)
    bootstrap = partctl_three.bootstrap_servers
    topic = _topic()
    out = _ok(run_tool(version, "topics", "--bootstrap-server", bootstrap, "--create",
                       "--topic", topic, "--partitions", "3", "--replication-factor", "3",
                       "--config", "min.insync.replicas=2"))
    assert f"Created topic {topic}." in out

    def settled(parts: dict[int, tuple[str, list[int], list[int]]]) -> bool:
        return all(leader != "none" and int(leader) in replicas
                   and sorted(replicas) == [1, 2, 3] and sorted(isr) == [1, 2, 3]
                   for leader, replicas, isr in parts.values())

    described = _describe_until(version, bootstrap, topic, 3, settled)
    assert re.search(rf"Topic: {topic}\s+TopicId: \S+\s+PartitionCount: 3\s+"
                     rf"ReplicationFactor: 3\s+Configs: .*min\.insync\.replicas=2", described), \
        described
    assert sorted(_partitions(described)) == [0, 1, 2]

    unknown = run_tool(version, "topics", "--bootstrap-server", bootstrap, "--describe",
                       "--topic", f"missing-{topic}")
    # Kafka's answer, from its tool (3.9.1 prints the name as Java's Optional[...])
    assert unknown.returncode == 1, (unknown.stdout, unknown.stderr)
    assert re.search(rf"IllegalArgumentException: Topic '(Optional\[)?missing-{topic}\]?' "
                     r"does not exist as expected", unknown.stderr), unknown.stderr
