"""Fencing, resignation, zombies, and failover with a hot standby or a cold candidate."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future

import pytest

from coordinator import layout
from coordinator.codecs import PartitionState, TopicAssignment, TopicPartition
from coordinator.errors import CoordinatorError
from elections import Fence, NotController, stand_for_controller
from statemachines.controller import ControllerConfig
from statemachines.requests import UpdateMetadataRequest
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
    pending = ctl1.request_controlled_shutdown(1, p1.broker.epoch or 0)
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
    assert [a.controller_epoch for a in after][1] == 1  # broker 2's partition was left alone
    assert after[2] == before[2] or after[2].controller_epoch == 2


def test_zombie_deposed_by_another_candidate_is_refused_by_the_epoch_check(live: Cluster) -> None:
    p1 = live.participants[1]
    ctl1 = p1.controller
    spy = WriteSpy(p1.coordinator)
    ctl1.events.pause()
    live.participants.pop(3).close()  # queued first: the zombie will try to act on it
    spy.armed = True
    p1.coordinator.sync()
    pending = ctl1.request_controlled_shutdown(1, p1.broker.epoch or 0)
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
    b3 = three.participants[3].broker
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
    assert three.participants[3].broker.controller_epoch == 2


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
        shrunk = PartitionState(leader=1, leader_epoch=before.value.leader_epoch, isr=(1, 2),
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


def test_failover_sends_leader_and_isr_for_every_partition(three: Cluster) -> None:
    from statemachines.requests import LeaderAndIsrRequest

    three.participants[3].broker.clear()
    three.kill(1)
    got = three.participants[3].broker.received(LeaderAndIsrRequest)
    told = {TopicPartition(topic=p.topic, partition=p.partition)
            for r in got for p in r.partitions}
    assert told == {tp("t", p) for p in range(3)}


def test_a_hot_candidate_that_wins_at_once_starts_from_the_whole_store() -> None:
    """Arming the view's watches can take a while (etcd lists big subtrees); a candidate must
    not win before their first reports are queued, or its view would start empty and it
    would take the existing topics for new ones."""
    import coordinator
    from coordinator.metadata import MetadataClient
    from statemachines.channel import InProcessNetwork
    from statemachines.controller import Controller

    url = f"memory://slow-arm-{time.monotonic_ns()}"
    admin = coordinator.connect(url)
    md = MetadataClient(admin)
    md.ensure_layout()
    states = {}
    for t in ("a", "b"):
        md.create_topic(TopicAssignment(topic=t, partitions={p: (1, 2) for p in range(4)}))
        for p in range(4):
            states[tp(t, p)] = PartitionState(leader=1, leader_epoch=7, isr=(1, 2),
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
        assert {s.leader_epoch for s in ctl.ctx.leaders.values()} == {7}
        ctl.events.wait_idle(10)
        assert set(ctl.ctx.topics) == {"a", "b"}
        assert md.partition_states([tp("a", 0)])[tp("a", 0)].value.leader_epoch == 7
    finally:
        ctl.close()
        client.close()
        admin.close()
