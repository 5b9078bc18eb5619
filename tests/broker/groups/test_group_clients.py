"""Consumer groups of Kafka's own clients on three broker processes, under faults.

Three members (processes of their own, :mod:`tests.broker.group_member`) consume a topic that a
producer keeps writing to, committing after each message. Mid-run one member is SIGKILLed (its
session times out and the group rebalances without it), a fourth joins, and the broker that is
the group's coordinator is SIGKILLed and started again (another broker leads the group's
partition of ``__consumer_offsets``, loads it, and takes over). Meanwhile a watcher reads the
group's committed offsets over and over. In the end every message written was consumed at least
once, the committed offsets reach the end of every partition, and no committed offset the
watcher saw ever moved backwards, across the coordinator's failover included."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka as ck
import pytest

from broker.groups import partition_for
from tests.broker.data.test_cluster_clients import Producing, Trio, create, serving
from tests.broker.processes import TEST_SETTINGS, coordinator_url
from tests.servers import Server
from tests.waiting import wait_until, wait_while_progressing

pytestmark = pytest.mark.servers

REPO = Path(__file__).resolve().parents[3]
OFFSETS_PARTITIONS = 5
SETTINGS = TEST_SETTINGS + (
    "replica.fetch.wait.max.ms=100\nreplica.lag.time.max.ms=10000\n"
    f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}\n"
    "group.initial.rebalance.delay.ms=300\n"
    # the killed coordinator's session over in 6 s (not 18): its partitions of
    # __consumer_offsets move only then
    "zookeeper.session.timeout.ms=6000\n")
TOPIC = "orders"
PARTITIONS = 6
PACE = 100.0
"""Values a second the group tests produce: under what the slowest member set consumes (a
kafka-python member commits each message, about 60 a second), so the fault phases see steady
traffic and the final drain is short, on any machine."""


class GroupTrio(Trio):
    def settings(self) -> str:
        return SETTINGS


@pytest.fixture
def trio(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[GroupTrio]:
    store = request.node.callspec.params.get("store", "zookeeper")
    server: Server = request.getfixturevalue(f"{store}_server")
    with serving(GroupTrio(coordinator_url(server), tmp_path, {})) as cluster:
        yield cluster


class Member:
    def __init__(self, name: str, client: str, bootstrap: str, group: str, strategy: str,
                 directory: Path) -> None:
        self.out = directory / f"member-{name}.txt"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.broker.group_member", client, bootstrap, TOPIC,
             group, strategy, str(self.out)], cwd=REPO, stderr=subprocess.DEVNULL)

    def lines(self) -> list[tuple[str, int, int]]:
        if not self.out.exists():
            return []
        out = []
        for line in self.out.read_text().splitlines():
            parts = line.split()
            if len(parts) == 3:
                out.append((parts[0], int(parts[1]), int(parts[2])))
        return out

    def consumed(self) -> int:
        return sum(1 for kind, _, _ in self.lines() if kind == "C")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


class Watcher:
    """Reads the group's committed offsets every 200 ms; keeps every answer per partition."""

    def __init__(self, bootstrap: str, group: str) -> None:
        self.consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                     "enable.auto.commit": False})
        self.seen: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asked = [ck.TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        while not self._stop.wait(0.2):
            try:
                answer = self.consumer.committed(asked, timeout=5)
            except ck.KafkaException:
                continue
            for tp in answer:
                if tp.error is None and tp.offset >= 0:
                    self.seen[tp.partition].append(tp.offset)

    def latest(self) -> dict[int, int]:
        return {p: (s[-1] if s else -1) for p, s in self.seen.items()}

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self.consumer.close()


def coordinator_of(trio: GroupTrio, group: str) -> int:
    admin = trio.admin()
    topics = admin.list_topics(timeout=10).topics
    partition = partition_for(group, len(topics["__consumer_offsets"].partitions))
    return topics["__consumer_offsets"].partitions[partition].leader


def progress(members: list[Member], by: int, timeout: float = 60.0) -> None:
    target = sum(m.consumed() for m in members) + by
    wait_until(lambda: sum(m.consumed() for m in members) >= target, timeout=timeout,
               interval=0.1, message=f"{by} more messages consumed")


@pytest.mark.parametrize(("client", "strategy", "store"), [
    # every time: librdkafka's cooperative protocol; the long tier adds kafka-python and the
    # eager protocol on each store (kafka-python's group every time: tests/broker/data/
    # test_clients.py, test_kafka_python_consumers_share_a_group_and_commit)
    ("confluent", "cooperative-sticky", "zookeeper"),
    pytest.param("kafka-python", "range", "zookeeper", marks=pytest.mark.long),
    pytest.param("confluent", "range", "zookeeper", marks=pytest.mark.long),
    pytest.param("confluent", "range", "etcd", marks=pytest.mark.long)])
def test_a_group_consumes_everything_through_member_and_coordinator_failures(
        trio: GroupTrio, tmp_path: Path, client: str, strategy: str, store: str) -> None:
    group = f"g-{client}-{strategy}"
    create(trio, TOPIC, PARTITIONS, num_partitions=PARTITIONS, replication_factor=3)
    producing = Producing(trio.bootstrap, TOPIC, PARTITIONS, rate=PACE)
    members: list[Member] = []
    watcher = None
    try:
        for name in "abc":
            members.append(Member(name, client, trio.bootstrap, group, strategy, tmp_path))
        progress(members, 300, timeout=90)
        watcher = Watcher(trio.bootstrap, group)
        members[0].proc.kill()  # SIGKILL: no LeaveGroup, the session timeout must notice
        members[0].proc.wait(10)
        progress(members, 300)
        members.append(Member("d", client, trio.bootstrap, group, strategy, tmp_path))
        progress(members, 300)
        coordinator = coordinator_of(trio, group)
        trio.brokers[coordinator].kill()
        before_failover = watcher.latest()
        progress(members, 300, timeout=90)
        trio.start(coordinator)
        progress(members, 200, timeout=90)
        ends = commits_reach_the_end(producing, watcher)
    finally:
        wind_down(producing, members, watcher)
    everything_consumed_in_order(members, producing, watcher, ends, before_failover)


def commits_reach_the_end(producing: Producing, watcher: Watcher) -> dict[int, int]:
    """Stop producing and wait for the group's commits to reach every partition's end;
    returns those ends."""
    producing.stop()
    ends = {p: max(o for o, _ in acked) + 1 for p, acked in producing.acked.items()}
    assert producing.errors == []
    # The members may lag far behind a fast producer on a slow machine: they must keep
    # catching up, not do so in a fixed time.
    wait_while_progressing(
        lambda: all(watcher.latest()[p] >= ends[p] for p in range(PARTITIONS)),
        watcher.latest, stall=30, limit=300,
        message=f"commits at the end of every partition {ends}")
    return ends


def wind_down(producing: Producing, members: list[Member], watcher: Watcher | None) -> None:
    if not producing._stop.is_set():
        producing.stop()
    for m in members:
        m.stop()
    if watcher is not None:
        watcher.stop()


def everything_consumed_in_order(members: list[Member], producing: Producing,
                                 watcher: Watcher | None, ends: dict[int, int],
                                 before_failover: dict[int, int]) -> None:
    """Every acknowledged record was consumed by some member; no committed offset ever moved
    backwards; the commits ended at each partition's end, at or past where they stood when
    the coordinator was killed (they survived the failover)."""
    assert watcher is not None
    consumed = {(p, o) for m in members for kind, p, o in m.lines() if kind == "C"}
    written = {(p, o) for p, acked in producing.acked.items() for o, _ in acked}
    assert written - consumed == set()
    for p, seen in watcher.seen.items():
        assert seen == sorted(seen), f"partition {p}: a committed offset moved backwards"
        assert seen[-1] == ends[p]
    after = {p: [o for o in seen if o >= 0] for p, seen in watcher.seen.items()}
    assert all(after[p][-1] >= before_failover[p] for p in range(PARTITIONS))
