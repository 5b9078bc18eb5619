"""partctl's planner and executor on real Apache Kafka by ``--bootstrap-server`` alone: a Kafka
4.x KRaft cluster of three combined nodes, and a Kafka 3.9.1 ZooKeeper-mode cluster of three
brokers reached by bootstrap only (partctl is never given its ZooKeeper). On each: generate
with sizes read by DescribeLogDirs, a throttled execute (Kafka's throttle configs set while it
runs, none left after), verify, list, a preferred election, a cancel that lands mid-way with
the overlap refusal before it; Kafka's own ``kafka-topics --describe``,
``kafka-configs --describe`` and ``kafka-reassign-partitions --list`` confirm each result."""

from __future__ import annotations

import io
import json
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient as KafkaAdmin

from coordinator.codecs import TopicPartition
from kafkaclient.admin import AdminClient
from partctl.cli import main
from rebalancer.admin_access import AdminAccess
from rebalancer.execution import ExecutionResult
from rebalancer.plan import PartitionMove, Plan
from rebalancer.throttles import BROKER_RATE_KEYS, TOPIC_REPLICA_KEYS
from tests.servers import Server
from tests.waiting import wait_until

from .conftest import require_kafka
from .harness import KAFKA_3, KAFKA_4, KafkaCluster, start_kafka_kraft, start_kafka_zk
from .tool_shell import run_shared

pytestmark = pytest.mark.servers

TP = TopicPartition
VALUE = 32 * 1024
THROTTLE_KEYS = (*BROKER_RATE_KEYS, *TOPIC_REPLICA_KEYS)


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module", params=["kraft", "zookeeper"])
def kafka(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[KafkaCluster]:
    """Three Kafka nodes: 4.x in KRaft combined mode, or 3.9.1 in ZooKeeper mode."""
    if request.param == "kraft":
        require_kafka(KAFKA_4)
        cluster = start_kafka_kraft(tmp_path_factory.mktemp("kraft"), version=KAFKA_4,
                                    node_ids=(1, 2, 3))
    else:
        require_kafka(KAFKA_3)
        server: Server = request.getfixturevalue("zookeeper_server")
        cluster = start_kafka_zk(tmp_path_factory.mktemp("zk"), server, version=KAFKA_3,
                                 broker_ids=(1, 2, 3))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def access(kafka: KafkaCluster) -> Iterator[AdminAccess]:
    with AdminAccess(AdminClient(kafka.bootstrap), description="test") as a:
        yield a


def tool(kafka: KafkaCluster, name: str, *args: str) -> str:
    done = run_shared(kafka.version, name, "--bootstrap-server", kafka.bootstrap, *args)
    assert done.returncode == 0, (name, args, done.stdout, done.stderr[-2000:])
    return done.stdout


def described(kafka: KafkaCluster, topic: str) -> dict[int, tuple[int, ...]]:
    """Each partition's replicas as Kafka's ``kafka-topics --describe`` prints them."""
    out = tool(kafka, "topics", "--describe", "--topic", topic)
    return {int(m.group(1)): tuple(int(b) for b in m.group(2).split(","))
            for m in re.finditer(r"Partition: (\d+)\s+Leader: \S+\s+Replicas: ([\d,]+)", out)}


def kafka_throttles(kafka: KafkaCluster, topic: str) -> str:
    """Every throttle key ``kafka-configs --describe`` shows set on the three brokers and on
    ``topic`` (dynamic configs only), one line each."""
    lines = []
    for kind, name in (("brokers", "1"), ("brokers", "2"), ("brokers", "3"), ("topics", topic)):
        out = tool(kafka, "configs", "--describe", "--entity-type", kind, "--entity-name", name)
        lines += [line for line in out.splitlines() if any(k in line for k in THROTTLE_KEYS)]
    return "\n".join(lines)


def create(kafka: KafkaCluster, access: AdminAccess, topic: str,
           assignment: dict[int, list[int]], fill: dict[int, int] | None = None) -> None:
    admin = KafkaAdmin({"bootstrap.servers": kafka.bootstrap})
    new = ck.admin.NewTopic(topic, num_partitions=len(assignment),
                            replica_assignment=[assignment[p] for p in sorted(assignment)])
    admin.create_topics([new])[topic].result(60)
    wait_until(lambda: (t := access.admin.topics([topic]).get(topic)) is not None
               and len(t.partitions) == len(assignment)
               and all(p.leader >= 0 for p in t.partitions), timeout=60,
               message=f"{topic} has leaders")
    if fill:
        producer = ck.Producer({"bootstrap.servers": kafka.bootstrap, "acks": "1",
                                "linger.ms": 5, "compression.type": "none"})
        for partition, count in fill.items():
            for _ in range(count):
                producer.produce(topic, value=os.urandom(VALUE), partition=partition)
                producer.poll(0)
        assert producer.flush(60) == 0


def write_plan(path: Path, moves: dict[TopicPartition, list[int]]) -> str:
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": tp.topic, "partition": tp.partition, "replicas": r}
        for tp, r in moves.items()]}))
    return str(path)


def test_generate_execute_verify_list_and_elect_by_bootstrap(
        kafka: KafkaCluster, access: AdminAccess, tmp_path: Path) -> None:
    create(kafka, access, "moved", {0: [1], 1: [1]}, fill={0: 32, 1: 4})
    boot = ("--bootstrap-server", kafka.bootstrap)
    view = access.view()
    assert set(view.brokers) == {1, 2, 3} and view.sizes_known
    sizes = {p.partition: p.size_bytes for p in view.partitions if p.topic == "moved"}
    assert (sizes[0] or 0) >= 32 * VALUE > (sizes[1] or 0) > 0, sizes
    code, out, err = run("reassign", "generate", *boot, "--goal", "disk", "--engine", "local",
                         "-o", str(tmp_path / "generated.json"))
    assert code == 0 and "Disk goal" in out, (out, err)

    plan = write_plan(tmp_path / "plan.json", {TP("moved", 0): [2, 1], TP("moved", 1): [3, 1]})
    seen: list[dict[tuple[str, str], dict[str, str | None]]] = []
    halt = threading.Event()

    def watch() -> None:
        with AdminClient(kafka.bootstrap) as admin:
            while not halt.is_set() and not seen:
                if admin.list_reassignments():
                    seen.append(admin.describe_configs([("broker", "1"), ("topic", "moved")]))
                halt.wait(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        code, out, err = run("reassign", "execute", *boot, "--reassignment-json-file", plan,
                             "--throttle", "1MB/s", "--poll-interval", "0.1", "--timeout", "180")
    finally:
        halt.set()
        watcher.join(30)
    assert code == 0 and "Reassignment finished: 2 done, 0 failed" in out, (out, err)
    assert seen, "the moves were never seen in progress"
    broker, topic = seen[0][("broker", "1")], seen[0][("topic", "moved")]
    assert [broker.get(k) for k in BROKER_RATE_KEYS] == ["1000000", "1000000"], broker
    assert topic.get(TOPIC_REPLICA_KEYS[0]) == "0:1,1:1", topic
    assert topic.get(TOPIC_REPLICA_KEYS[1]) == "0:2,1:3", topic
    assert described(kafka, "moved") == {0: (2, 1), 1: (3, 1)}
    assert kafka_throttles(kafka, "moved") == ""  # execute took them off at the end

    code, out, err = run("reassign", "verify", *boot, "--reassignment-json-file", plan)
    assert code == 0 and "2 done, 0 in progress, 0 failed." in out, (out, err)
    assert run("reassign", "list", *boot)[1] == "No partition reassignments found.\n"
    code, out, err = run("elect", "preferred", *boot, "--topic", "moved")
    assert code == 0 and "0 failed" in out, (out, err)
    wait_until(lambda: {p.partition: p.leader for p in
                        access.admin.topics(["moved"])["moved"].partitions} == {0: 2, 1: 3},
               timeout=60, message="the preferred leaders lead")


def test_a_cancel_lands_mid_way_after_the_overlap_is_refused(
        kafka: KafkaCluster, access: AdminAccess, tmp_path: Path) -> None:
    create(kafka, access, "slow", {0: [1]}, fill={0: 64})  # 2 MiB at 50 kB/s: 40 s
    create(kafka, access, "beside", {0: [1]})
    boot = ("--bootstrap-server", kafka.bootstrap)
    results: list[ExecutionResult] = []
    plan = Plan(partitions=(PartitionMove(topic="slow", partition=0, replicas=(1, 2)),))

    def move() -> None:
        with AdminAccess(AdminClient(kafka.bootstrap), description="mover") as mine:
            results.append(mine.execute(plan, throttle=50_000, poll_interval=0.1,
                                        timeout=180))

    mover = threading.Thread(target=move)
    mover.start()
    try:
        wait_until(lambda: TP("slow", 0) in access.in_progress(), timeout=60,
                   message="slow-0 moving")
        listed = tool(kafka, "reassign-partitions", "--list")
        assert "slow-0: replicas: 1,2. adding: 2." in listed, listed
        assert run("reassign", "list", *boot)[1] == (
            "Current partition reassignments:\nslow-0: replicas: 1,2. adding: 2.\n")
        clash = write_plan(tmp_path / "clash.json", {TP("slow", 0): [1, 3]})
        code, _, err = run("reassign", "execute", *boot, "--reassignment-json-file", clash)
        assert code == 1 and len(err.splitlines()) == 1, err
        assert "already being moved elsewhere (slow-0 -> [1, 2])" in err
        other = write_plan(tmp_path / "other.json", {TP("beside", 0): [2]})
        code, _, err = run("reassign", "execute", *boot, "--reassignment-json-file", other)
        assert code == 1 and "--additional" in err, err
        code, out, err = run("reassign", "cancel", *boot)
        assert code == 0 and "slow-0: reverted to [1] (was moving to [1, 2])" in out, (out, err)
    finally:
        mover.join(180)
    (result,) = results
    assert not result.ok and "dropped before reaching [1, 2]" in result.failed[TP("slow", 0)]
    assert described(kafka, "slow") == {0: (1,)} and described(kafka, "beside") == {0: (1,)}
    assert "slow-0" not in tool(kafka, "reassign-partitions", "--list")
    assert kafka_throttles(kafka, "slow") != ""  # the move never finished: still throttled
    removed = access.remove_throttles(["slow"])
    assert removed.brokers == (1, 2) and set(removed.topics) == {"slow"}
    assert kafka_throttles(kafka, "slow") == ""
