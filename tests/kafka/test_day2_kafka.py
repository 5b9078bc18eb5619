"""The day-2 operations (``partctl rebalance``) on real Apache Kafka by ``--bootstrap-server``
alone: a Kafka 4.x KRaft cluster of three combined nodes, and a Kafka 3.9.1 ZooKeeper-mode
cluster of three brokers (partctl is never given its ZooKeeper). Kafka's own
``kafka-topics --describe`` and ``kafka-configs --describe`` confirm each result, and that no
replication throttle is left behind.

One cluster per kind serves the whole module, and its steps run in order, each a test that
depends on the previous ones only through the cluster they leave (a step whose predecessor
failed is skipped, saying which):

1. ``add-brokers 4``: topics on brokers 1-3, a fourth broker joins (KRaft: a broker-only node
   of the same quorum; ZooKeeper mode: a broker on the same chroot); a dry run writes the plan
   and moves nothing; ``--execute --throttle`` moves replicas onto broker 4 only, throttled
   while it runs.
2. ``demote-brokers 1``: leadership leaves broker 1 wherever another replica is in sync; the
   replica sets stay, broker 1 last in each list.
3. ``remove-brokers 4``: broker 4 drained, the replication factors kept.
4. ``fix-offline-replicas``: broker 3 stopped for good (in KRaft a voter of the quorum too: two
   of three still make one); its replicas re-placed on the live brokers 1, 2 and 4, every
   partition back to a full ISR.

Four JVM brokers at most at any time: the kinds run one after the other.
"""

from __future__ import annotations

import io
import json
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient as KafkaAdmin

from kafkaclient.admin import AdminClient
from partctl.cli import main
from rebalancer.throttles import BROKER_RATE_KEYS, TOPIC_REPLICA_KEYS
from tests.servers import Server
from tests.waiting import wait_until

from .conftest import require_kafka
from .harness import (
    KAFKA_3,
    KAFKA_4,
    KafkaCluster,
    add_kafka_broker,
    start_kafka_kraft,
    start_kafka_zk,
)
from .tool_shell import run_shared

pytestmark = pytest.mark.servers

VALUE = 16 * 1024
THROTTLE_KEYS = (*BROKER_RATE_KEYS, *TOPIC_REPLICA_KEYS)
TOPICS = {
    # six partitions at RF 2 and three at RF 3, on brokers 1-3, leaders spread
    "alpha": {p: [1 + p % 3, 1 + (p + 1) % 3] for p in range(6)},
    "beta": {p: [1 + (p + q) % 3 for q in range(3)] for p in range(3)},
}
STEPS = ("add", "demote", "remove", "fix")
THROTTLES_GONE = "Throttles removed: none is left on the brokers or the topics moved."


def throttles_said_removed(out: str) -> bool:
    """The run's last word on throttles: none left, or taken off the brokers or topics it
    names, never "from broker(s) none and topic(s) none". Either may come: a ZooKeeper-mode
    Kafka broker answers DescribeConfigs from its own copy of its dynamic configs, which takes
    the execute's removal a moment later, so the final check may still find (and take off)
    what is already going. What is left is checked with Kafka's tool after."""
    return THROTTLES_GONE in out or (
        "Throttles removed from broker(s) " in out and "none and topic(s) none" not in out)


@dataclass(frozen=True, slots=True)
class Row:
    """One partition as ``kafka-topics --describe`` prints it."""

    leader: int | None
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(eq=False)
class Day2:
    """The module's cluster, and the steps done on it so far."""

    kafka: KafkaCluster
    done: list[str] = field(default_factory=list)
    rows: dict[tuple[str, int], Row] = field(default_factory=dict)
    """The partitions as the previous step left them (Kafka's tool)."""

    def after(self, step: str) -> None:
        wanted = STEPS[:STEPS.index(step)]
        if list(wanted) != self.done[:len(wanted)]:
            pytest.skip(f"the steps before {step} ({', '.join(wanted)}) did not all pass "
                        f"(done: {', '.join(self.done) or 'none'})")


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def rebalance(kafka: KafkaCluster, *argv: str) -> str:
    code, out, err = run("rebalance", *argv, "--bootstrap-server", kafka.bootstrap,
                         "--poll-interval", "0.2", "--status-every", "0")
    assert code == 0, (argv, out, err)
    return out


def tool(kafka: KafkaCluster, name: str, *args: str) -> str:
    done = run_shared(kafka.version, name, "--bootstrap-server", kafka.bootstrap, *args)
    assert done.returncode == 0, (name, args, done.stdout, done.stderr[-2000:])
    return done.stdout


ROW = re.compile(r"Topic: (\S+)\s+Partition: (\d+)\s+Leader: (\S+)\s+Replicas: ([\d,]*)\s+"
                 r"Isr: ([\d,]*)")


def described(kafka: KafkaCluster) -> dict[tuple[str, int], Row]:
    """Every partition of every topic, as Kafka's ``kafka-topics --describe`` prints it."""
    out = tool(kafka, "topics", "--describe")

    def ids(text: str) -> tuple[int, ...]:
        return tuple(int(b) for b in text.split(",") if b)

    return {(m.group(1), int(m.group(2))): Row(
        leader=int(m.group(3)) if m.group(3).lstrip("-").isdigit() and int(m.group(3)) >= 0
        else None, replicas=ids(m.group(4)), isr=ids(m.group(5)))
        for m in ROW.finditer(out)}


def throttles_left(kafka: KafkaCluster) -> str:
    """Every throttle key ``kafka-configs --describe`` shows on any broker or any topic
    (dynamic configs), one line each: empty when none is left."""
    lines = []
    for kind in ("brokers", "topics"):
        out = tool(kafka, "configs", "--describe", "--entity-type", kind)
        lines += [line for line in out.splitlines() if any(k in line for k in THROTTLE_KEYS)]
    return "\n".join(lines)


def in_sync(kafka: KafkaCluster, brokers: set[int]) -> bool:
    """Every partition of the test's topics on ``brokers`` only, with a leader and a full ISR
    (partctl's own client: the quick way to wait before Kafka's tool confirms)."""
    with AdminClient(kafka.bootstrap) as admin:
        topics = admin.topics(list(TOPICS))
    return all(set(p.replicas) <= brokers and set(p.isr) == set(p.replicas) and p.leader >= 0
               for t in topics.values() for p in t.partitions)


def full(rows: dict[tuple[str, int], Row]) -> list[str]:
    """The partitions without a leader or with a replica out of sync: none, when all is well."""
    return [f"{t}-{p}: {r}" for (t, p), r in sorted(rows.items())
            if r.leader is None or set(r.isr) != set(r.replicas)]


def per_broker(rows: dict[tuple[str, int], Row]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for r in rows.values():
        for b in r.replicas:
            counts[b] = counts.get(b, 0) + 1
    return counts


@pytest.fixture(scope="module", params=["kraft", "zookeeper"])
def day2(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[Day2]:
    """Three Kafka nodes (4.x KRaft combined, or 3.9.1 ZooKeeper mode) with the topics of
    :data:`TOPICS` on them, some data in each partition."""
    if request.param == "kraft":
        require_kafka(KAFKA_4)
        cluster = start_kafka_kraft(tmp_path_factory.mktemp("day2-kraft"), version=KAFKA_4,
                                    node_ids=(1, 2, 3))
    else:
        require_kafka(KAFKA_3)
        server: Server = request.getfixturevalue("zookeeper_server")
        cluster = start_kafka_zk(tmp_path_factory.mktemp("day2-zk"), server, version=KAFKA_3,
                                 broker_ids=(1, 2, 3))
    try:
        admin = KafkaAdmin({"bootstrap.servers": cluster.bootstrap})
        news = [ck.admin.NewTopic(t, num_partitions=len(a),
                                  replica_assignment=[a[p] for p in sorted(a)])
                for t, a in TOPICS.items()]
        for future in admin.create_topics(news).values():
            future.result(60)
        wait_until(lambda: in_sync(cluster, {1, 2, 3}), timeout=60, interval=0.2,
                   message="the topics have leaders and full ISRs")
        producer = ck.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                                "linger.ms": 5, "compression.type": "none"})
        for topic, assignment in TOPICS.items():
            for partition in assignment:
                for _ in range(4 + 2 * partition):
                    producer.produce(topic, value=os.urandom(VALUE), partition=partition)
                    producer.poll(0)
        assert producer.flush(60) == 0
        yield Day2(kafka=cluster)
    finally:
        cluster.stop()


def test_add_brokers_moves_replicas_onto_the_new_broker_only(day2: Day2, tmp_path: Path
                                                               ) -> None:
    kafka = day2.kafka
    before = described(kafka)
    assert set(before) >= {(t, p) for t, a in TOPICS.items() for p in a}
    assert set(per_broker(before)) == {1, 2, 3} and not full(before)
    add_kafka_broker(kafka, 4)

    plan_file = tmp_path / "add.json"
    out = rebalance(kafka, "add-brokers", "4", "-o", str(plan_file))
    assert "Dry run: nothing was moved." in out, out
    plan = json.loads(plan_file.read_text())["partitions"]
    assert plan and all(4 in m["replicas"] for m in plan), plan
    assert described(kafka) == before  # the dry run moved nothing

    seen: list[dict[tuple[str, str], dict[str, str | None]]] = []
    halt = threading.Event()

    def watch() -> None:  # the throttles as Kafka has them while the moves run
        with AdminClient(kafka.bootstrap) as admin:
            while not halt.is_set() and not seen:
                moving = admin.list_reassignments()
                if moving:
                    topic = sorted(moving)[0].topic
                    seen.append(admin.describe_configs([("broker", "4"), ("topic", topic)]))
                halt.wait(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        out = rebalance(kafka, "add-brokers", "4", "--execute", "--throttle", "5MB/s",
                        "--max-concurrent-moves", "3", "--max-moves-per-broker", "2")
    finally:
        halt.set()
        watcher.join(30)
    assert f"Reassignment finished: {len(plan)} done, 0 failed" in out, out
    assert throttles_said_removed(out), out
    assert seen, "the moves were never seen in progress"
    assert [seen[0][("broker", "4")].get(k) for k in BROKER_RATE_KEYS] == ["5000000"] * 2, seen

    wait_until(lambda: in_sync(kafka, {1, 2, 3, 4}), timeout=60, interval=0.2,
               message="every partition in sync after add-brokers")
    after = described(kafka)
    assert set(after) == set(before) and not full(after), after
    for key, row in after.items():
        old = before[key]
        assert len(row.replicas) == len(old.replicas), (key, old, row)
        assert set(row.replicas) - set(old.replicas) <= {4}, (key, old, row)  # 4 only gains
    gained = per_broker(after)
    assert gained.get(4, 0) >= 4, gained
    assert all(gained.get(b, 0) <= n for b, n in per_broker(before).items()), gained
    assert {m["topic"] for m in plan} <= set(TOPICS) | {"__consumer_offsets"}
    assert {(m["topic"], m["partition"]): tuple(m["replicas"]) for m in plan}.items() <= {
        k: r.replicas for k, r in after.items()}.items()
    assert throttles_left(kafka) == ""
    day2.rows = after
    day2.done.append("add")


def test_demote_brokers_moves_leadership_off_broker_1(day2: Day2) -> None:
    day2.after("demote")
    kafka = day2.kafka
    before = day2.rows
    assert any(r.leader == 1 for r in before.values()), before
    out = rebalance(kafka, "demote-brokers", "1", "--execute")
    assert "0 failed" in out, out

    def settled() -> bool:
        with AdminClient(kafka.bootstrap) as admin:
            topics = admin.topics(list(TOPICS))
        return not any(p.leader == 1 and set(p.isr) - {1}
                       for t in topics.values() for p in t.partitions)

    wait_until(settled, timeout=60, interval=0.2, message="broker 1 leads nothing it can hand")
    # The broker Kafka's tool asks may learn the new leaders (UpdateMetadata) a moment after
    # the one partctl's client asked: wait until the tool's answer says it too.
    seen: list[dict[tuple[str, int], Row]] = []

    def described_settled() -> bool:
        seen[:] = [described(kafka)]
        return not any(r.leader == 1 and set(r.isr) - {1} for r in seen[0].values())

    wait_until(described_settled, timeout=60, interval=0.5,
               message="Kafka's tool sees broker 1 lead nothing it can hand")
    after = seen[0]
    assert set(after) == set(before) and not full(after), after
    for key, row in after.items():
        old = before[key]
        assert set(row.replicas) == set(old.replicas), (key, old, row)  # no data moved
        if 1 in row.replicas and len(row.replicas) > 1:
            assert row.replicas[-1] == 1, (key, row)
            assert row.leader != 1, (key, row)
    assert throttles_left(kafka) == ""
    day2.rows = after
    day2.done.append("demote")


def test_remove_brokers_drains_broker_4(day2: Day2) -> None:
    day2.after("remove")
    kafka = day2.kafka
    before = day2.rows
    assert per_broker(before).get(4, 0) > 0
    out = rebalance(kafka, "remove-brokers", "4", "--execute", "--throttle", "5MB/s")
    assert "Reassignment finished:" in out and " 0 failed" in out, out
    assert throttles_said_removed(out), out
    wait_until(lambda: in_sync(kafka, {1, 2, 3}), timeout=60, interval=0.2,
               message="every partition off broker 4 and in sync")
    after = described(kafka)
    assert set(after) == set(before) and not full(after), after
    for key, row in after.items():
        assert 4 not in row.replicas, (key, row)
        assert len(row.replicas) == len(before[key].replicas), (key, before[key], row)
    assert set(per_broker(after)) == {1, 2, 3}
    assert throttles_left(kafka) == ""
    day2.rows = after
    day2.done.append("remove")


def test_fix_offline_replicas_after_a_broker_stopped_for_good(day2: Day2) -> None:
    day2.after("fix")
    kafka = day2.kafka
    before = day2.rows
    assert per_broker(before).get(3, 0) > 0
    kafka.broker(3).stop()

    def fenced() -> bool:
        with AdminClient(kafka.bootstrap) as admin:
            if 3 in {b.id for b in admin.describe_cluster().brokers}:
                return False
            topics = admin.topics(list(TOPICS))
        return all(3 not in p.isr and p.leader not in (3, -1)
                   for t in topics.values() for p in t.partitions)

    wait_until(fenced, timeout=60, interval=0.2, message="broker 3 gone from the cluster")
    out = rebalance(kafka, "fix-offline-replicas")
    assert "Dry run: nothing was moved." in out and "fix-offline-replicas 3" in out, out
    out = rebalance(kafka, "fix-offline-replicas", "--execute", "--throttle", "5MB/s")
    assert "Reassignment finished:" in out and " 0 failed" in out, out
    assert throttles_said_removed(out), out
    wait_until(lambda: in_sync(kafka, {1, 2, 4}), timeout=60, interval=0.2,
               message="every partition on live brokers and in sync")
    after = described(kafka)
    assert set(after) == set(before) and not full(after), after
    for key, row in after.items():
        old = before[key]
        assert 3 not in row.replicas and len(row.replicas) == len(old.replicas), (key, old, row)
        kept = [b for b in old.replicas if b != 3]
        assert set(kept) <= set(row.replicas), (key, old, row)  # only 3's replicas moved
    assert throttles_left(kafka) == ""
    day2.done.append("fix")
