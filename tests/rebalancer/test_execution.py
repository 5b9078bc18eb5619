"""Executing plans through a live controller: snapshot, validate, execute in batches, verify,
cancel. A memory cluster of participants (recording brokers) carries the moves out; a
``Followers`` thread plays the data plane: once the controller adds replicas, the partition's
leader puts them in the ISR (tests.recording_broker.change_isr), as a caught-up follower would.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import pytest

import coordinator
from coordinator import layout
from coordinator.admin import Admin
from coordinator.codecs import TopicPartition
from coordinator.metadata import MetadataClient
from interbroker.requests import StopReplicaRequest
from rebalancer import (
    Balance,
    ExecutionProgress,
    MoveState,
    NoActiveController,
    PartitionMove,
    Plan,
    PlanError,
    ReassignmentInProgress,
    SnapshotError,
    cancel_reassignment,
    execute_plan,
    plan_reassignment,
    render_plan,
    score_plan,
    snapshot_from_coordinator,
    validate_plan,
    verify_plan,
)
from rebalancer.live_snapshot import parse_topics_to_move, scope_snapshot
from statemachines.in_process import InProcessNetwork
from statemachines.participant import Participant
from tests.recording_broker import RecordingBroker, change_isr
from tests.waiting import wait_until


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


class Followers(threading.Thread):
    """Replicas the controller adds catch up after ``delay`` seconds, unless paused."""

    def __init__(self, url: str, delay: float = 0.0) -> None:
        super().__init__(daemon=True)
        self.md = MetadataClient(coordinator.connect(url))
        self.delay = delay
        self.running = threading.Event()
        self.running.set()
        self._stop_event = threading.Event()
        self._seen: dict[TopicPartition, float] = {}

    def run(self) -> None:
        while not self._stop_event.wait(0.01):
            if self.running.is_set():
                try:
                    self.step()
                except Exception:  # the cluster is closing
                    pass

    def step(self) -> None:
        md = self.md
        now = time.monotonic()
        for topic, a in md.assignments(md.topics()).items():
            for p, adding in a.value.adding.items():
                key = tp(topic, p)
                if now - self._seen.setdefault(key, now) < self.delay:
                    continue
                state = md.partition_states([key])[key]
                if state is None:
                    continue
                isr = list(state.value.isr)
                missing = [b for b in adding if b not in isr]
                if missing:
                    change_isr(md, key, isr + missing)

    def close(self) -> None:
        self._stop_event.set()
        self.join(5)
        self.md.coordinator.close()


class Live:
    def __init__(self, brokers: tuple[int, ...] = (1, 2, 3, 4), delay: float = 0.0,
                 url: str | None = None) -> None:
        self.url = url or f"memory://exec-{uuid.uuid4().hex[:10]}"
        self.network = InProcessNetwork()
        self.participants = {b: Participant(self.url, b, handler=RecordingBroker,
                                            rack=f"r{b % 2}", network=self.network).start()
                             for b in brokers}
        self.client = coordinator.connect(self.url)
        self.md = MetadataClient(self.client)
        self.admin = Admin(self.client)
        wait_until(lambda: self.md.controller() is not None, timeout=15)
        self.followers = Followers(self.url, delay)
        self.followers.start()

    def create(self, topic: str, assignment: dict[int, list[int]]) -> None:
        self.admin.create_topic(topic, assignment=assignment)
        keys = [tp(topic, p) for p in assignment]
        wait_until(lambda: all(s is not None for s in self.md.partition_states(keys).values()),
                   timeout=15, message=f"{topic} online")

    def replicas(self, topic: str) -> dict[int, tuple[int, ...]]:
        return dict(self.md.assignments([topic])[topic].value.partitions)

    def close(self) -> None:
        self.followers.close()
        for p in self.participants.values():
            p.close()
        self.client.close()


@pytest.fixture
def live() -> Iterator[Live]:
    cluster = Live()
    yield cluster
    cluster.close()


def plan_of(moves: dict[TopicPartition, list[int]]) -> Plan:
    return Plan(partitions=tuple(PartitionMove(topic=k.topic, partition=k.partition,
                                               replicas=tuple(v))
                                 for k, v in sorted(moves.items())))


# --- snapshot ----------------------------------------------------------------------------------


def test_snapshot_from_a_live_coordinator(live: Live) -> None:
    live.create("a", {0: [1, 2], 1: [2, 3], 2: [3, 1]})
    live.create("b", {0: [4, 1, 2]})
    snap = snapshot_from_coordinator(live.client, sizes={("a", 1): 500, tp("b", 0): 7},
                                     decommission=[4], new_brokers=[3])
    assert [(b.id, b.rack) for b in snap.brokers] == [(1, "r1"), (2, "r0"), (3, "r1"), (4, "r0")]
    assert [(p.topic, p.partition, p.replicas, p.size_bytes) for p in snap.partitions] == [
        ("a", 0, (1, 2), None), ("a", 1, (2, 3), 500), ("a", 2, (3, 1), None),
        ("b", 0, (4, 1, 2), 7)]
    assert snap.decommission == {4} and snap.new_brokers == {3}
    assert snap.meta["source"] == "coordinator"
    no_sizes = snapshot_from_coordinator(live.md)  # a metadata client works too
    assert not no_sizes.has_sizes and not no_sizes.decommission

    with pytest.raises(SnapshotError) as err:
        snapshot_from_coordinator(live.client, decommission=[9, 4], new_brokers=[8, 4])
    assert err.value.problems == (
        "cannot decommission broker 9: it is not registered",
        "new broker 8 is not registered",
        "broker 4 cannot be both new and decommissioned")

    # broker 4 goes away: its replicas can only be drained
    live.participants.pop(4).close()
    wait_until(lambda: 4 not in live.md.broker_ids(), timeout=10)
    with pytest.raises(SnapshotError, match="broker 4 holds replicas but is not registered"):
        snapshot_from_coordinator(live.client)
    drained = snapshot_from_coordinator(live.client, decommission=[4])
    assert drained.meta["offline_brokers"] == [4] and 4 in drained.broker_ids
    plan = plan_reassignment(drained, [Balance()], engine="local")
    assert all(4 not in r.replicas for r in plan.partitions)
    assert score_plan(drained, plan).valid


def test_scoping_like_kafkas_broker_list_and_topics_to_move(live: Live) -> None:
    live.create("a", {0: [1, 2], 1: [2, 1]})
    live.create("b", {0: [1, 2]})
    snap = snapshot_from_coordinator(live.client)
    topics = parse_topics_to_move('{"version": 1, "topics": [{"topic": "a"}]}')
    scoped = scope_snapshot(snap, brokers=[3, 4], topics=topics)
    assert {p.topic for p in scoped.partitions} == {"a"} and scoped.decommission == {1, 2}
    plan = plan_reassignment(scoped, [Balance()], engine="local")
    assert {(r.topic, r.partition) for r in plan.partitions} == {("a", 0), ("a", 1)}
    assert all(set(r.replicas) == {3, 4} for r in plan.partitions)
    with pytest.raises(SnapshotError) as err:
        scope_snapshot(snap, brokers=[3, 9], topics=["a", "zz"])
    assert err.value.problems == ("topic zz does not exist",
                                  "broker 9 (--brokers) is not in the cluster")
    for bad in ('{"topics": [{"topic": 1}]}', "nope", '{"version": 1, "topics": []}'):
        with pytest.raises(SnapshotError):
            parse_topics_to_move(bad)


# --- execution ---------------------------------------------------------------------------------


def test_execute_carries_out_the_plan_at_most_n_moves_at_a_time() -> None:
    cluster = Live(delay=0.05)  # moves take a little while, so they overlap
    try:
        cluster.create("t", {p: [1 + p % 2, 1 + (p + 1) % 2] for p in range(10)})
        snap = snapshot_from_coordinator(cluster.client)
        plan = plan_reassignment(snap, [Balance()], engine="local")
        assert len(plan.partitions) >= 5
        sizes: list[int] = []
        watch = cluster.client.watch_data(
            layout.REASSIGN_PARTITIONS,
            lambda e: sizes.append(0 if e.data is None else e.data.count(b'"topic"')))
        seen: list[ExecutionProgress] = []
        result = execute_plan(cluster.client, plan, max_concurrent_moves=3, poll_interval=0.05,
                              timeout=30, progress=seen.append)
        watch.cancel()
        assert not result.failed and not result.timed_out and result.ok
        assert set(result.done) == {tp(r.topic, r.partition) for r in plan.partitions}
        assert max(sizes) == 3  # the window was full, and never more than full
        assert all(p.in_flight <= 3 for p in seen)
        assert seen[-1] == ExecutionProgress(total=len(plan.partitions),
                                             done=len(plan.partitions), in_flight=0, failed=0)
        assert cluster.md.reassignment() is None
        now = cluster.replicas("t")
        for r in plan.partitions:
            assert now[r.partition] == r.replicas
        assert not cluster.md.assignments(["t"])["t"].value.adding
        report = verify_plan(cluster.client, plan)
        assert report.all_done and len(report.done) == len(plan.partitions)
        # the plan done, a new snapshot is balanced: nothing left to move
        assert plan_reassignment(snapshot_from_coordinator(cluster.client), [Balance()],
                                 engine="local").partitions == ()
    finally:
        cluster.close()


def test_partitions_already_at_their_target_are_done_without_a_move(live: Live) -> None:
    live.create("t", {0: [1, 2], 1: [2, 3]})
    plan = plan_of({tp("t", 0): [1, 2], tp("t", 1): [3, 4]})
    result = execute_plan(live.client, plan, poll_interval=0.05, timeout=20)
    assert result.done == (tp("t", 0), tp("t", 1)) and not result.failed
    assert live.replicas("t") == {0: (1, 2), 1: (3, 4)}


def test_bad_plans_are_rejected_whole_and_nothing_is_written(live: Live) -> None:
    live.create("t", {0: [1, 2], 1: [2, 3], 2: [3, 4]})
    live.create("u", {0: [1, 2], 1: [2, 1]})
    text = ('{"version":1,"partitions":['
            '{"topic":"t","partition":0,"replicas":[1,9]},'
            '{"topic":"t","partition":1,"replicas":[3,3]},'
            '{"topic":"t","partition":2,"replicas":[1,2,3]},'
            '{"topic":"t","partition":7,"replicas":[1,2]},'
            '{"topic":"nope","partition":0,"replicas":[1,2]},'
            '{"topic":"u","partition":0,"replicas":[3,4]}]}')
    with pytest.raises(PlanError) as err:
        validate_plan(live.client, text)
    assert err.value.problems == (
        "partition t-0 names unknown brokers [9]",
        "partition t-1 lists broker(s) [3] more than once",
        "partition t-7 does not exist",
        "partition nope-0 does not exist",
        "partition t-2 changes replication factor 2 -> 3, but not every partition of topic t "
        "goes to 3 replicas",
    )
    for malformed, message in (("{not json", "not valid JSON"),
                               ('{"version": 1}', "needs a 'partitions' list"),
                               ('{"version": 1, "partitions": [{"topic": "t"}]}',
                                "needs 'topic', 'partition' and 'replicas'")):
        with pytest.raises(PlanError, match=message):
            validate_plan(live.client, malformed)
    with pytest.raises(PlanError):
        execute_plan(live.client, plan_of({tp("t", 0): [1, 9]}))
    assert live.md.reassignment() is None
    assert live.replicas("t") == {0: (1, 2), 1: (2, 3), 2: (3, 4)}
    # an RF change for every partition of a topic, alike, is a legitimate plan
    rf = validate_plan(live.client, plan_of({tp("u", 0): [1, 2, 3], tp("u", 1): [2, 3, 4]}))
    assert len(rf.partitions) == 2


def test_execute_refuses_while_a_reassignment_is_in_progress(live: Live) -> None:
    live.create("t", {0: [1, 2], 1: [2, 3]})
    live.followers.running.clear()
    live.md.request_reassignment({tp("t", 0): [3, 4]})
    with pytest.raises(ReassignmentInProgress, match="already in progress"):
        execute_plan(live.client, plan_of({tp("t", 1): [3, 4]}))
    assert live.md.reassignment().value == {tp("t", 0): (3, 4)}
    cancel_reassignment(live.client, wait=10)


def test_execute_needs_an_active_controller() -> None:
    url = f"memory://nocontroller-{uuid.uuid4().hex[:8]}"
    client = coordinator.connect(url)
    try:
        from coordinator.codecs import BrokerInfo

        md = MetadataClient(client)
        for b in (1, 2):
            md.register_broker(BrokerInfo(id=b, host="h", port=1))
        Admin(client).create_topic("t", assignment={0: [1, 2]})
        with pytest.raises(NoActiveController):
            execute_plan(client, plan_of({tp("t", 0): [2, 1]}))
        assert md.reassignment() is None
    finally:
        client.close()


# --- verify, timeout and cancel ----------------------------------------------------------------


def test_verify_reports_done_in_progress_and_failed(live: Live) -> None:
    live.create("t", {0: [1, 2], 1: [2, 3], 2: [3, 4], 3: [4, 1]})
    live.followers.running.clear()
    live.md.request_reassignment({tp("t", 1): [3, 4], tp("t", 3): [1, 2]})
    wait_until(lambda: live.md.assignments(["t"])["t"].value.adding, timeout=10)
    plan = plan_of({tp("t", 0): [1, 2], tp("t", 1): [3, 4], tp("t", 2): [1, 2],
                    tp("t", 3): [2, 3]})
    report = verify_plan(live.client, plan)
    states = {s.partition.partition: (s.state, s.reason) for s in report.statuses}
    assert states[0] == (MoveState.DONE, None)
    assert states[1] == (MoveState.IN_PROGRESS, None)
    assert states[2] == (MoveState.FAILED,
                         "replicas are [3, 4], not [1, 2], and no move is pending")
    assert states[3] == (MoveState.FAILED, "another move, to [1, 2], is in progress")
    assert not report.all_done and len(report.failed) == 2
    live.followers.running.set()
    wait_until(lambda: live.md.reassignment() is None, timeout=10)
    assert verify_plan(live.client, plan_of({tp("t", 1): [3, 4]})).all_done


def test_a_timeout_leaves_moves_to_the_controller_and_reports_them(live: Live) -> None:
    live.create("t", {0: [1, 2], 1: [2, 3], 2: [3, 4]})
    live.followers.running.clear()  # nothing catches up
    plan = plan_of({tp("t", 0): [3, 4], tp("t", 1): [4, 1], tp("t", 2): [1, 2]})
    result = execute_plan(live.client, plan, max_concurrent_moves=2, poll_interval=0.05,
                          timeout=0.5)
    assert result.timed_out and not result.done
    assert result.failed[tp("t", 0)].startswith("still moving to [3, 4] when the timeout")
    assert result.failed[tp("t", 2)] == "not started: the timeout passed first"
    assert set(live.md.reassignment().value) == {tp("t", 0), tp("t", 1)}
    live.followers.running.set()
    wait_until(lambda: live.md.reassignment() is None, timeout=10)
    assert verify_plan(live.client, plan_of({tp("t", 0): [3, 4], tp("t", 1): [4, 1]})).all_done


def test_cancel_reverts_pending_moves_and_stops_the_added_replicas(live: Live) -> None:
    live.create("t", {0: [1, 2], 1: [2, 3], 2: [3, 4], 3: [4, 1]})
    live.followers.running.clear()  # the moves stall in phase A
    plan = plan_of({tp("t", 0): [3, 4], tp("t", 1): [1, 4], tp("t", 2): [1, 2],
                    tp("t", 3): [2, 3]})
    results = []
    runner = threading.Thread(target=lambda: results.append(execute_plan(
        live.client, plan, max_concurrent_moves=2, poll_interval=0.05, timeout=30)))
    runner.start()
    wait_until(lambda: len(live.md.assignments(["t"])["t"].value.adding) == 2, timeout=10,
               message="two moves started")
    assert live.replicas("t")[0] == (3, 4, 1, 2)
    for p in live.participants.values():
        p.handler.clear()

    report = cancel_reassignment(live.client, wait=10)
    assert [(m.partition, m.target, m.original, m.reverted) for m in report.moves] == [
        (tp("t", 0), (3, 4), (1, 2), True), (tp("t", 1), (1, 4), (2, 3), True)]
    assert report.still_reverting == () and len(report.reverted) == 2
    runner.join(10)
    result = results[0]
    assert not result.done and set(result.failed) == set(tp("t", p) for p in range(4))
    assert result.failed[tp("t", 2)].startswith("not started: a pending move was cancelled")
    a = live.md.assignments(["t"])["t"].value
    assert dict(a.partitions) == {0: (1, 2), 1: (2, 3), 2: (3, 4), 3: (4, 1)}
    assert not a.adding and not a.removing and live.md.reassignment() is None

    def stopped(broker: int) -> set[TopicPartition]:
        return {tp(s.topic, s.partition)
                for r in live.participants[broker].handler.received(StopReplicaRequest)
                for s in r.partitions if s.delete}

    # the replicas the moves had added are stopped and deleted; the original ones are kept
    assert stopped(1) == {tp("t", 1)} and stopped(2) == set()
    assert stopped(3) == {tp("t", 0)} and stopped(4) == {tp("t", 0), tp("t", 1)}
    for p, replicas in ((0, (1, 2)), (1, (2, 3))):
        state = live.md.partition_states([tp("t", p)])[tp("t", p)].value
        assert state.leader in replicas and set(state.isr) <= set(replicas)
    statuses = verify_plan(live.client, plan)
    assert [s.state for s in statuses.statuses] == [MoveState.FAILED] * 4
    assert cancel_reassignment(live.client).moves == ()  # nothing left to cancel
    # the cluster is usable again: the same plan now runs to the end
    live.followers.running.set()
    assert execute_plan(live.client, plan, poll_interval=0.05, timeout=20).ok


def test_render_plan_round_trips_through_validation(live: Live) -> None:
    live.create("t", {0: [1, 2]})
    plan = plan_of({tp("t", 0): [2, 3]})
    assert validate_plan(live.client, render_plan(plan)) == plan
    assert validate_plan(live.client, plan) == plan
