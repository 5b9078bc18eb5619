"""partctl's planner and executor on real Apache Kafka by ``--bootstrap-server`` alone: a Kafka
4.x KRaft cluster of three combined nodes, and a Kafka 3.9.1 ZooKeeper-mode cluster of three
brokers reached by bootstrap only (partctl is never given its ZooKeeper). On each: generate
with sizes read by DescribeLogDirs, a throttled execute (Kafka's throttle configs set while it
runs, none left after), verify, list, a preferred election, a cancel that lands mid-way with
the overlap refusal before it; Kafka's own ``kafka-topics --describe``,
``kafka-configs --describe`` and ``kafka-reassign-partitions --list`` confirm each result.

Then :class:`kafkaclient.admin.AdminClient` alone on the same clusters: controller-bound calls
go to any broker in KRaft mode (which forwards) and to the controller Metadata names in
ZooKeeper mode; describe cluster, topics, log dirs, configs, a reassignment and a preferred
election, confirmed by ``kafka-topics --describe``."""

from __future__ import annotations

import io
import json
import os
import re
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient as KafkaAdmin
from confluent_kafka.admin import NewTopic

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


# --- kafkaclient.admin.AdminClient itself, on the same clusters (after the tests above: their
# topics stay, and the tests above read the whole cluster) ---------------------------------------


def create_numbered(kafka: KafkaCluster, assignment: list[list[int]]) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    client = KafkaAdmin({"bootstrap.servers": kafka.bootstrap})  # alive until answered
    futures = client.create_topics(
        [NewTopic(name, num_partitions=len(assignment), replica_assignment=assignment)],
        operation_timeout=30)
    futures[name].result(60)
    return name


def full_isr(admin: AdminClient, topic: str, count: int) -> bool:
    info = admin.topics([topic]).get(topic)
    return info is not None and len(info.partitions) == count and all(
        p.leader >= 0 and sorted(p.isr) == sorted(p.replicas) for p in info.partitions)


def test_cluster_topics_log_dirs_and_configs(kafka: KafkaCluster) -> None:
    with AdminClient(kafka.bootstrap, timeout=60) as admin:
        info = admin.describe_cluster()
        assert [b.id for b in info.brokers] == [1, 2, 3]
        assert info.controller_id in (1, 2, 3)
        if kafka.cluster_id is not None:
            assert info.cluster_id == kafka.cluster_id
        topic = create_numbered(kafka, [[1, 2, 3], [2, 3, 1]])
        wait_until(lambda: full_isr(admin, topic, 2), timeout=60, interval=0.2,
                   message="leaders and full ISRs")
        every = admin.topics()
        assert [p.replicas for p in every[topic].partitions] == [(1, 2, 3), (2, 3, 1)]
        assert admin.topics([topic, "missing"], batch=1) == {topic: every[topic]}
        producer = ck.Producer({"bootstrap.servers": kafka.bootstrap, "acks": "all"})
        for _ in range(100):
            producer.produce(topic, value=b"v" * 1000, partition=0)
        assert producer.flush(60) == 0

        def sized() -> dict[int, int] | None:
            found = {b: r.size for b, dirs in admin.log_dirs().items() for d in dirs
                     for r in d.replicas if (r.topic, r.partition) == (topic, 0)}
            return found if len(found) == 3 and min(found.values()) >= 100_000 else None

        wait_until(sized, timeout=60, interval=0.2, message="the replicas' bytes")
        dirs = admin.log_dirs([1])[1]
        assert all(d.total_bytes and d.usable_bytes for d in dirs)  # DescribeLogDirs v4
        rate = "leader.replication.throttled.rate"
        changes = {("topic", topic): {"retention.ms": "7200000"},
                   ("broker", "3"): {rate: "54321"}}
        assert admin.incremental_alter_configs(changes) == {k: None for k in changes}
        wait_until(lambda: admin.describe_configs([("broker", "3")])[("broker", "3")].get(
            rate) == "54321", timeout=30, interval=0.2, message="the broker's throttle")
        assert admin.describe_configs([("topic", topic)])[("topic", topic)][
            "retention.ms"] == "7200000"
        assert admin.incremental_alter_configs({("broker", "3"): {rate: None}}) == {
            ("broker", "3"): None}
        wait_until(lambda: admin.describe_configs([("broker", "3")])[("broker", "3")].get(
            rate) != "54321", timeout=30, interval=0.2, message="the throttle removed")


def test_a_reassignment_and_a_preferred_election_as_kafkas_tools_see_them(
        kafka: KafkaCluster) -> None:
    with AdminClient(kafka.bootstrap, timeout=60) as admin:
        moved = create_numbered(kafka, [[1, 2]])
        reordered = create_numbered(kafka, [[1, 2, 3]])
        wait_until(lambda: full_isr(admin, moved, 1) and full_isr(admin, reordered, 1), timeout=60,
                   interval=0.2, message="leaders and full ISRs")
        a, b = TopicPartition(moved, 0), TopicPartition(reordered, 0)
        assert admin.alter_reassignments({a: [2, 3], b: [3, 1, 2]}) == {a: None, b: None}
        wait_until(lambda: not admin.list_reassignments([a, b]), timeout=90, interval=0.2,
                   message="the moves to finish")
        wait_until(lambda: admin.topics([moved])[moved].partitions[0].replicas == (2, 3),
                   timeout=30, interval=0.2, message="the moved replicas")
        described = run_shared(kafka.version, "topics", "--bootstrap-server", kafka.bootstrap,
                               "--describe", "--topic", moved)
        assert described.returncode == 0, described.stderr
        assert "Replicas: 2,3" in described.stdout, described.stdout
        # reordered: the preferred leader is now 3; ZooKeeper-mode Kafka keeps the leader a
        # reorder does not remove, so the election is needed there
        first = admin.elect_leaders([b])
        if kafka.mode == "zookeeper":
            assert first == {b: None}
        else:  # a KRaft controller may already have made it the leader
            assert first[b] in (None, "ELECTION_NOT_NEEDED")
        wait_until(lambda: admin.topics([reordered])[reordered].partitions[0].leader == 3,
                   timeout=30, interval=0.2, message="the preferred leader")
        assert admin.elect_leaders([b]) == {b: "ELECTION_NOT_NEEDED"}
        # a cancellation of a partition that is not moving is answered for that partition
        result = admin.alter_reassignments({a: None})
        assert result[a] is not None and result[a].startswith("NO_REASSIGNMENT_IN_PROGRESS")
