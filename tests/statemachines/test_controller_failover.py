"""Fencing, resignation, zombies, and failover with a hot standby or a cold candidate."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future

import pytest

from coordinator import Delete, layout
from coordinator.clock import ManualClock
from coordinator.codecs import PartitionStateNode, TopicAssignment, TopicPartition
from coordinator.errors import CoordinatorError
from elections import Fence, NotController, stand_for_controller
from interbroker.requests import UpdateMetadataRequest
from statemachines.controller import ControllerConfig
from tests.recording_broker import change_isr
from tests.statemachines.conftest import Cluster, tp
from tests.waiting import wait_until


class WriteSpy:
    """Wraps a coordinator's ``multi_async`` (every multi and bulk chunk goes through it) and
    records which writes landed and which were refused."""

    def __init__(self, client) -> None:  # type: ignore[no-untyped-def]
        self.landed: list[list[object]] = []
        self.refused: list[CoordinatorError] = []
        self.armed = False
        inner = client.multi_async

        def spy(ops):  # type: ignore[no-untyped-def]
            future: Future = inner(ops)
            if self.armed:
                try:
                    future.result()
                    self.landed.append(list(ops))
                except CoordinatorError as exc:
                    self.refused.append(exc)
            return future

        client.multi_async = spy


@pytest.fixture
def live() -> Iterator[Cluster]:
    """Threaded controllers: brokers 1 (controller), 2, 3; topic t as in ``three``."""
    c = Cluster(threaded=True)
    for b in (1, 2, 3):
        c.add(b)
    c.admin.create_topic("t", assignment={0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]})
    c.pump()
    yield c
    c.close()


def _wait_active(c: Cluster, broker_id: int) -> None:
    wait_until(lambda: c.participants[broker_id].controller.active, timeout=10,
               message=f"controller {broker_id} active")


def test_zombie_after_session_expiry_writes_nothing_and_resigns(live: Cluster) -> None:
    p1, p2 = live.participants[1], live.participants[2]
    ctl1 = p1.controller
    spy = WriteSpy(p1.coordinator)
    ctl1.events.pause()
    live.participants.pop(3).close()  # a broker dies: the paused controller has work queued
    spy.armed = True
    p1.coordinator.expire_session()  # type: ignore[attr-defined]
    _wait_active(live, 2)
    # Broker 3's partition gets a new leader from controller 2. Which one is a race: the expiry
    # also removed broker 1's registration, and controller 2 may fail over before broker 1
    # registers again (then broker 2 leads). Either way it is written at epoch 2.
    wait_until(lambda: live.state("t", 2).leader in (1, 2)
               and live.state("t", 2).controller_epoch == 2)
    before = [live.state("t", p) for p in range(3)]
    pending = ctl1.request_controlled_shutdown(1, p1.broker_epoch or 0)
    ctl1.events.resume()
    wait_until(lambda: ctl1.resignations >= 1 and ctl1.events.pending() == 0)
    p1.coordinator.sync()
    ctl1.events.wait_idle()
    assert spy.landed == []
    assert not ctl1.active
    with pytest.raises(NotController):
        pending.result(1)
    assert p2.controller.active
    after = [live.state("t", p) for p in range(3)]
    assert all(a.controller_epoch <= 2 for a in after), "nothing written at a zombie's epoch"
    # broker 2's partition keeps its leader; controller 2 took the dead broker 3 out of its
    # ISR at failover, as Kafka's replica state machine does at startup
    assert after[1].leader == before[1].leader and 3 not in after[1].isr
    assert after[2] == before[2] or after[2].controller_epoch == 2


def test_zombie_deposed_by_another_candidate_is_refused_by_the_epoch_check(live: Cluster) -> None:
    p1 = live.participants[1]
    ctl1 = p1.controller
    spy = WriteSpy(p1.coordinator)
    ctl1.events.pause()
    live.participants.pop(3).close()  # queued first: the zombie will try to act on it
    spy.armed = True
    p1.coordinator.sync()
    pending = ctl1.request_controlled_shutdown(1, p1.broker_epoch or 0)
    live.admin_client.delete(layout.CONTROLLER)  # an operator forces a new election
    _wait_active(live, 2)
    wait_until(lambda: live.state("t", 2).controller_epoch == 2)
    before = [live.state("t", p) for p in range(3)]
    ctl1.events.resume()
    wait_until(lambda: ctl1.resignations >= 1)
    ctl1.events.wait_idle()
    assert spy.landed == []
    assert spy.refused, "the zombie should have tried, and been refused by the epoch check"
    assert not ctl1.active
    with pytest.raises(NotController):
        pending.result(1)
    assert [live.state("t", p) for p in range(3)] == before
    assert live.participants[2].controller.active


def test_fence_refuses_every_write_once_closed(cluster: Cluster) -> None:
    cluster.add(1)
    fence = cluster.active().controller.fence
    assert isinstance(fence, Fence)
    fence.close()
    with pytest.raises(NotController):
        fence.write([])
    cluster.pump()


def test_a_resigned_controller_stands_again_and_wins_a_new_epoch(cluster: Cluster) -> None:
    p = cluster.add(1)
    md = p.metadata
    assert stand_for_controller(md, 1) is not None  # our own stale node is replaced
    cluster.pump()
    assert p.controller.active and p.controller.epoch == 3
    assert p.controller.resignations >= 1


def test_controller_session_loss_moves_control_to_a_standby(three: Cluster) -> None:
    three.participants[1].coordinator.expire_session()  # type: ignore[attr-defined]
    three.pump()
    assert three.active().controller.epoch == 2
    assert three.participants[1].controller.resignations == 1
    b3 = three.participants[3].handler
    assert b3.controller_epoch == 2
    assert b3.received(UpdateMetadataRequest)[-1].controller_epoch == 2


# --- hot standby -------------------------------------------------------------------------------


def _view(ctl) -> tuple:  # type: ignore[no-untyped-def]
    ctx = ctl.ctx
    return ({b: r.epoch for b, r in ctx.brokers.items()}, dict(ctx.replicas),
            {t: (v.leader, v.leader_epoch, v.isr, v.partition_epoch)
             for t, v in ctx.leaders.items()})


def test_standby_view_follows_the_store(three: Cluster) -> None:
    three.admin.create_topic("u", assignment={0: [2, 3], 1: [3, 1]})
    three.pump()
    three.bounce(3)
    standby = three.participants[2].controller
    assert _view(standby) == _view(three.active().controller)
    assert set(standby.ctx.brokers) == {1, 2, 3}
    assert tp("u", 1) in standby.ctx.leaders


def test_a_standby_shares_one_value_among_the_equal_states_it_follows(three: Cluster) -> None:
    three.admin.create_topic("u", assignment={0: [2, 3], 1: [2, 3]})
    three.pump()
    three.kill(2)  # both elect broker 3: the same bytes, written at the same version
    standby = three.participants[3].controller
    assert not standby.active
    first, second = standby.ctx.leaders[tp("u", 0)], standby.ctx.leaders[tp("u", 1)]
    assert first.leader == 3 and first.isr == (3,) == tuple(three.state("u", 0).isr)
    assert second is first


def test_hot_failover_reads_no_partition_state(three: Cluster) -> None:
    standby = three.participants[2]
    reads: list[int] = []
    inner = standby.coordinator.get_many

    def counting(paths):  # type: ignore[no-untyped-def]
        reads.append(sum(1 for p in paths if p.endswith("/state")))
        return inner(paths)

    standby.coordinator.get_many = counting  # type: ignore[method-assign]
    three.kill(1)
    assert three.active().id == 2
    timings = standby.controller.last_failover
    assert timings is not None and timings.warm
    assert sum(reads) == 0
    assert three.state("t", 0).leader == 2
    assert three.participants[3].handler.controller_epoch == 2


class LaggingTree:
    """Holds a client's tree-watch deliveries back by ``lag`` seconds, in order: a watch
    stream that has not caught up with the store when its client wins the election."""

    def __init__(self, client, lag: float) -> None:  # type: ignore[no-untyped-def]
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        inner = client._deliver_tree

        def later(handle, event) -> None:  # type: ignore[no-untyped-def]
            self._queue.put((time.monotonic() + lag, handle, event))

        def run() -> None:
            while (item := self._queue.get()) is not None:
                due, handle, event = item
                time.sleep(max(0.0, due - time.monotonic()))
                inner(handle, event)

        client._deliver_tree = later
        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._queue.put(None)
        self._thread.join(5)


def test_hot_failover_waits_until_its_tree_watch_shows_the_election(three: Cluster) -> None:
    """Changes just before the election reach the standby late; the new controller waits
    for its tree watch to show its own election write, then has them all without reading
    a topic list or a partition state."""
    lagging = {b: LaggingTree(three.participants[b].coordinator, 0.3) for b in (2, 3)}
    calls: list[str] = []

    def spy(client) -> None:  # type: ignore[no-untyped-def]
        children, get_many = client.children, client.get_many

        def listing(path):  # type: ignore[no-untyped-def]
            if path == layout.TOPICS:
                calls.append("list topics")
            return children(path)

        def reading(paths):  # type: ignore[no-untyped-def]
            if any(p.startswith("/brokers/topics/t/") and p.endswith("/state") for p in paths):
                calls.append("read states of t")  # (a new topic's are read once, as new)
            return get_many(paths)

        client.children, client.get_many = listing, reading

    for b in (2, 3):
        spy(three.participants[b].coordinator)
    try:
        # leader 1 shrinks an ISR, and a topic node appears, right before the controller goes
        before = three.metadata.partition_states([tp("t", 0)])[tp("t", 0)]
        assert before is not None
        shrunk = PartitionStateNode(leader=1, leader_epoch=before.value.leader_epoch, isr=(1, 2),
                                    controller_epoch=before.value.controller_epoch)
        three.metadata.coordinator.set(layout.partition_state("t", 0), shrunk.encode(),
                                       before.version)
        three.metadata.create_topic(TopicAssignment(topic="late", partitions={0: (3, 2)}))
        three.participants[1].controller.close()
        three.pump()
        winner = three.active()
        ctl = winner.controller
        assert winner.id in (2, 3) and ctl.last_failover is not None
        assert ctl.last_failover.warm and ctl.last_failover.exact
        assert calls == []
        assert ctl.ctx.leaders[tp("t", 0)].isr == (1, 2)
        assert tp("late", 0) in ctl.ctx.replicas
        assert three.state("late", 0).leader == 3
    finally:
        for lag in lagging.values():
            lag.stop()


def test_cold_candidate_reads_everything_at_failover(cluster: Cluster) -> None:
    cold = ControllerConfig(hot_standby=False)
    for b in (1, 2, 3):
        cluster.add(b, config=cold)
    cluster.admin.create_topic("t", assignment={0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]})
    cluster.pump()
    assert not cluster.participants[2].controller.ctx.leaders  # nothing kept while standing by
    cluster.kill(1)
    ctl = cluster.active().controller
    assert ctl.last_failover is not None and not ctl.last_failover.warm
    assert cluster.state("t", 0).leader == 2
    assert set(ctl.ctx.leaders) == {tp("t", p) for p in range(3)}
    cluster.admin.create_topic("after", assignment={0: [3, 2]})
    cluster.pump()
    assert cluster.state("after", 0).leader == 3


def test_a_cold_candidate_names_dead_replicas_offline_before_it_indexes_them(
        cluster: Cluster) -> None:
    """A cold load leaves the index of each broker's partitions for later: the failover's
    metadata names the dead brokers' replicas offline from the brokers alone, and the steps
    after it (dead replicas out of the ISRs) build the index, equal to the assignment's."""
    cold = ControllerConfig(hot_standby=False)
    for b in (1, 2, 3, 4):
        cluster.add(b, config=cold)
    cluster.admin.create_topic("t", assignment={0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 4, 2]})
    cluster.pump()
    cluster.participants[2].handler.clear()
    cluster.kill(1)  # 2 takes over, cold, with 1 down and still in the ISRs
    ctl = cluster.active().controller
    assert ctl.broker_id == 2 and not ctl.last_failover.warm  # type: ignore[union-attr]
    first = cluster.participants[2].handler.received(UpdateMetadataRequest)[0]
    offline = {p.partition: p.offline_replicas for p in first.partitions if p.topic == "t"}
    assert offline == {0: (1,), 1: (1,), 2: ()}
    assert ctl.ctx.replicas_on(1) == {tp("t", 0), tp("t", 1)}
    assert ctl.ctx.replicas_on(4) == {tp("t", 2)}
    assert all(1 not in cluster.state("t", p).isr for p in range(3))


def test_failover_sends_leader_and_isr_for_every_partition(three: Cluster) -> None:
    from interbroker.requests import LeaderAndIsrRequest

    three.participants[3].handler.clear()
    three.kill(1)
    got = three.participants[3].handler.received(LeaderAndIsrRequest)
    told = {TopicPartition(topic=p.topic, partition=p.partition)
            for r in got for p in r.partitions}
    assert told == {tp("t", p) for p in range(3)}


def test_a_hot_candidate_that_wins_at_once_starts_from_the_whole_store() -> None:
    """Arming the view's watches can take a while (etcd lists big subtrees); a candidate must
    not win before their first reports are queued, or its view would start empty and it
    would take the existing topics for new ones."""
    import coordinator
    from coordinator.metadata import MetadataClient
    from statemachines.controller import Controller
    from statemachines.in_process import InProcessNetwork

    url = f"memory://slow-arm-{time.monotonic_ns()}"
    admin = coordinator.connect(url)
    md = MetadataClient(admin)
    md.ensure_layout()
    states = {}
    for t in ("a", "b"):
        md.create_topic(TopicAssignment(topic=t, partitions={p: (1, 2) for p in range(4)}))
        for p in range(4):
            states[tp(t, p)] = PartitionStateNode(leader=1, leader_epoch=7, isr=(1, 2),
                                                  controller_epoch=0)
            admin.create(layout.partition_state(t, p), states[tp(t, p)].encode(),
                         make_parents=True)
    client = coordinator.connect(url)
    inner = client.watch_children

    def slow(path, callback):  # type: ignore[no-untyped-def]
        time.sleep(0.1)
        return inner(path, callback)

    client.watch_children = slow  # type: ignore[method-assign]
    ctl = Controller(client, 1, InProcessNetwork().channel(),
                     config=ControllerConfig(auto_leader_rebalance_enable=False))
    try:
        ctl.start()
        wait_until(lambda: ctl.active and ctl.last_failover is not None, timeout=10)
        assert ctl.last_failover.exact
        assert set(ctl.ctx.leaders) == set(states)
        # from the store's epoch 7, not a new topic's 0: + 1 for the dead replicas leaving
        # every ISR at failover (no broker is registered: 1 leaves, 2 stays as the last member)
        assert {(s.leader_epoch, s.isr) for s in ctl.ctx.leaders.values()} == {(8, (2,))}
        ctl.events.wait_idle(10)
        assert set(ctl.ctx.topics) == {"a", "b"}
        assert md.partition_states([tp("a", 0)])[tp("a", 0)].value.leader_epoch == 8
    finally:
        ctl.close()
        client.close()
        admin.close()


def test_failover_leaves_the_replicas_on_dead_brokers_offline(three: Cluster) -> None:
    """Issue 14 #8. Kafka's ReplicaStateMachine.startup puts replicas on dead brokers in
    OfflineReplica, and the partition machine's startup elects the never-led partitions
    without touching replica states. Here n-0 was never led (its replicas 4 and 5 were never
    up); broker 4 registers just as controller 1 dies, so controller 2 elects 4 at failover:
    replica 5 must stay Offline (it was moved Online with the partition)."""
    from coordinator.codecs import BrokerInfo
    from statemachines.states import PartitionState, ReplicaState

    three.metadata.create_topic(TopicAssignment(topic="n", partitions={0: (4, 5)}))
    three.pump()
    n0 = tp("n", 0)
    assert three.active().controller.ctx.partition_states[n0] is PartitionState.NEW
    three.metadata.register_broker(BrokerInfo(id=4, host="127.0.0.1", port=9094))
    three.kill(1)  # before it hears of broker 4
    ctl = three.active().controller
    assert ctl.broker_id == 2
    assert (three.state("n", 0).leader, three.state("n", 0).isr) == (4, (4,))
    assert ctl.ctx.replica_states[(n0, 4)] is ReplicaState.ONLINE
    assert ctl.ctx.replica_states[(n0, 5)] is ReplicaState.OFFLINE
    assert ctl.ctx.replica_states[(tp("t", 0), 1)] is ReplicaState.OFFLINE


# --- an unexpected error in a handler ----------------------------------------------------------


def _fail_isr_handler_of(monkeypatch: pytest.MonkeyPatch, broker_id: int,
                         corrupt=None) -> list[int]:  # type: ignore[no-untyped-def]
    """A bug in controller ``broker_id``'s ISR change handler (the failover runs it too, so
    it strikes again at each of its failovers while a notification is pending), which may
    ``corrupt`` the controller's view first. Returns the epochs it failed at."""
    from statemachines.handlers import isr

    real = isr.on_isr_change_notification
    failed: list[int] = []

    def handler(svc):  # type: ignore[no-untyped-def]
        if svc.broker_id == broker_id:
            failed.append(svc.epoch)
            if corrupt is not None:
                corrupt(svc)
            raise RuntimeError("injected bug")
        return real(svc)

    monkeypatch.setattr(isr, "on_isr_change_notification", handler)
    return failed


def test_an_unexpected_error_in_a_handler_makes_the_controller_resign(
    three: Cluster, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 14 #11: the controller logs the error with the event, resigns (its fence closes,
    it gives up /controller and writes nothing more) and another candidate wins, rebuilding
    its view from the store; the resigned one holds back meanwhile."""
    p1 = three.participants[1]
    failed = _fail_isr_handler_of(monkeypatch, 1)
    spy = WriteSpy(p1.coordinator)
    spy.armed = True
    writes = p1.controller.fence.writes  # type: ignore[union-attr]
    assert change_isr(three.participants[2].metadata, tp("t", 1), [2, 3])  # its leader: 2
    three.pump()
    assert failed == [1]
    assert "unexpected error processing IsrChangeNotified()" in caplog.text
    ctl1 = p1.controller
    assert not ctl1.active and ctl1.error_resignations == 1
    assert ctl1.fence is not None and not ctl1.fence.is_open
    assert ctl1.fence.writes == writes
    # All it wrote after the failure: giving up /controller (checked against its epoch).
    assert [[op for op in ops if op.path != layout.CONTROLLER_EPOCH] for ops in spy.landed] \
        == [[Delete(path=layout.CONTROLLER)]]
    assert ctl1.stand_held_until is not None
    new = three.active()
    assert new.id != 1 and new.controller.epoch == 2
    assert new.controller.ctx.leaders[tp("t", 1)].isr == (2, 3)
    assert three.metadata.isr_change_notifications() == []
    for b in (1, 3):
        assert three.participants[b].handler.metadata()[tp("t", 1)].isr == (2, 3)
    store = three.metadata.partition_states([tp("t", p) for p in range(3)])
    assert {k: (v.value.leader, v.value.isr) for k, v in store.items()} == {
        k: (v.leader, v.isr) for k, v in new.controller.ctx.leaders.items()}


def test_a_bug_that_strikes_again_cannot_make_a_lone_candidate_resign_in_a_loop(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lone candidate stands again only once its hold is over, and each resignation in a
    row doubles the hold (up to its cap): however often it is asked to stand meanwhile. When
    it wins again it reads its view whole from the store: the bug had left it wrong."""
    from statemachines import events as ev
    from statemachines.controller import StandBackoff

    clock = ManualClock(start_ms=1_000_000)
    config = ControllerConfig(error_backoff=StandBackoff(base=1.0, cap=4.0, clock=clock))
    ctl = cluster.add(1, config=config).controller
    cluster.admin.create_topic("s", assignment={0: [1]})
    cluster.pump()
    failed = _fail_isr_handler_of(
        monkeypatch, 1, lambda svc: svc.ctx.set_replicas(tp("s", 0), (1, 7)))
    assert change_isr(cluster.participants[1].metadata, tp("s", 0), [1])
    holds = []
    for _ in range(4):
        cluster.pump()
        assert not ctl.active
        assert ctl.stand_held_until is not None
        holds.append(ctl.stand_held_until - clock.monotonic())
        for _ in range(50):  # asked to stand, again and again, while held
            ctl.events.put(ev.Stand())
            cluster.pump()
        assert not ctl.active
        clock.set(round(ctl.stand_held_until * 1000))
        ctl.events.put(ev.Stand())  # what the hold's timer does (threaded controllers)
    assert holds == [1.0, 2.0, 4.0, 4.0]
    assert failed == [1, 2, 3, 4]
    assert ctl.error_resignations == 4
    monkeypatch.undo()  # the bug is fixed: the next term holds
    cluster.pump()
    assert ctl.active and ctl.epoch == 5
    assert cluster.metadata.isr_change_notifications() == []
    assert ctl.ctx.replicas[tp("s", 0)] == (1,)
