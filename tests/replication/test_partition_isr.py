"""ISR shrink and expand on a manual clock, conditional ISR writes, batched announcements."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from coordinator import layout
from coordinator.codecs import PartitionStateNode, TopicPartition
from interbroker.fencing import FIELD, LOGGER_NAME
from replication.config import ReplicaConfig
from replication.isr import IsrChangeBatcher

from .loopback import TRANSPORTS
from .test_replica_manager_cluster import TP, MiniCluster

LAG = 10_000
CONFIG = ReplicaConfig(min_insync_replicas=2, replica_lag_time_max_ms=LAG)


@pytest.fixture(params=TRANSPORTS)
def cluster(tmp_path: Path, request: pytest.FixtureRequest):
    """A partition on three brokers, settled; followers fetch in process or over the network
    (the leader's ISR and HW follow the fetches either way)."""
    c = MiniCluster(tmp_path, config=CONFIG, transport=request.param)
    c.create()
    c.settle()
    yield c
    c.shutdown()


def isr(cluster: MiniCluster) -> tuple[int, ...]:
    """The stored ISR, after checking the leader's memory agrees with it."""
    state, version = cluster.state()
    status = cluster.leader_manager().status(TP)
    assert (status.isr, status.partition_epoch) == (state.isr, version)
    return state.isr


def test_a_lagging_follower_leaves_the_isr_only_after_the_lag_time(cluster: MiniCluster) -> None:
    leader = cluster.leader_manager()
    cluster.produce(n=2, acks=1)
    cluster.step([2])  # broker 2 keeps up, broker 3 stopped fetching at the last settle
    cluster.step([2])
    cluster.clock.advance(LAG)
    assert leader.maybe_shrink_isr() == []
    cluster.step([2])
    cluster.clock.advance(1)
    expands = leader.isr_counts.expands
    assert leader.maybe_shrink_isr() == [TP]
    assert isr(cluster) == (1, 2)
    assert (leader.isr_counts.shrinks, leader.isr_counts.expands) == (1, expands)  # metrics


def test_a_caught_up_follower_with_nothing_to_fetch_stays(cluster: MiniCluster) -> None:
    cluster.clock.advance(100 * LAG)
    assert cluster.leader_manager().maybe_shrink_isr() == []
    assert isr(cluster) == (1, 2, 3)


def test_a_follower_one_fetch_behind_a_busy_leader_stays(cluster: MiniCluster) -> None:
    leader = cluster.leader_manager()
    for _ in range(10):
        cluster.produce(n=1, acks=1)  # the leader always has one more than was fetched
        cluster.step()
        # Caught up as of the previous fetch (it reached what the leader had then): so a
        # follower fetching more often than every LAG/2 is never more than LAG behind.
        cluster.clock.advance(LAG * 4 // 10)
        assert leader.maybe_shrink_isr() == []
    assert isr(cluster) == (1, 2, 3)
    cluster.produce(n=1, acks=1)
    cluster.step()
    cluster.clock.advance(LAG * 7 // 10)  # two fetch gaps of 0.4 + 0.7 exceed the lag
    assert leader.maybe_shrink_isr() == [TP]


def test_the_ticker_checks_at_half_the_lag_time(cluster: MiniCluster) -> None:
    leader = cluster.leader_manager()
    cluster.produce(acks=1)
    cluster.clock.advance(LAG + 1)
    leader.tick()  # first check is due LAG/2 after start: runs now
    assert isr(cluster) == (1,)


def test_a_follower_rejoins_when_it_reaches_the_hw(cluster: MiniCluster) -> None:
    cluster.produce(n=3, acks=1)
    cluster.crash(3)  # the controller drops it from the ISR, epoch 1
    cluster.produce(n=2, acks=1)
    cluster.step()
    cluster.step()
    assert isr(cluster) == (1, 2)
    cluster.start(3)
    cluster.step([3])  # truncation, then a fetch from its old log end: behind the HW
    assert isr(cluster) == (1, 2)
    shrinks, expands = cluster.brokers[1].isr_counts.shrinks, cluster.brokers[1].isr_counts.expands
    cluster.step([3])  # fetches at the leader's log end
    assert isr(cluster) == (1, 2, 3)
    assert (cluster.brokers[1].isr_counts.shrinks,
            cluster.brokers[1].isr_counts.expands) == (shrinks, expands + 1)  # metrics
    assert cluster.brokers[1].status(TP).partition_epoch == cluster.state()[1]


def test_a_read_that_does_not_update_state_brings_no_one_back(cluster: MiniCluster) -> None:
    """A parked long poll answered later reads without updating the follower's state (Kafka's
    DelayedFetch): a fetch at the leader's log end from a replica out of the ISR then neither
    brings it back nor moves the HW; the same fetch recorded does both."""
    cluster.produce(n=3, acks=1)
    cluster.crash(3)
    cluster.produce(n=2, acks=1)
    cluster.step()
    leader = cluster.leader_manager()
    epoch = leader.status(TP).leader_epoch
    leo = leader.status(TP).log_end_offset
    read = leader.fetch(TP, leo, 1 << 20, 3, epoch, update_state=False)
    assert read.error.name == "NONE"
    assert isr(cluster) == (1, 2)
    leader.fetch(TP, leo, 1 << 20, 3, epoch)
    assert isr(cluster) == (1, 2, 3)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_new_follower_joins_only_from_the_leaders_epoch_start(tmp_path: Path, transport: str
                                                                ) -> None:
    cluster = MiniCluster(tmp_path, config=CONFIG, transport=transport)
    try:
        cluster.create()
        cluster.produce(n=3, acks=1)
        cluster.step([2])  # broker 2 has the records, the HW is still 0
        cluster.crash(1)
        assert cluster.leader() == 2  # epoch 1 starts at 3, beyond the HW
        leader = cluster.leader_manager()
        assert leader.status(TP).high_watermark == 0
        cluster.step([3])  # broker 3 fetches from 0: reaches the HW but not offset 3
        assert isr(cluster) == (2, 3)  # it was in the ISR all along
        cluster.remove_from_isr(TP, 3)
        cluster.start(1)
        cluster.step([1])  # 1 truncates to 3 (its epoch 0 ends there too) and fetches there
        assert isr(cluster) == (2, 1)
    finally:
        cluster.shutdown()


def test_isr_write_stops_when_the_controller_moved_the_epoch(
        cluster: MiniCluster, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER_NAME)
    leader = cluster.leader_manager()
    cluster.produce(acks=1)
    state, version = cluster.state()
    # The controller decided something (epoch 1) that has not reached the leader yet.
    bumped = PartitionStateNode(leader=1, leader_epoch=1, isr=(1, 2, 3), controller_epoch=1)
    cluster.coordinator.set(layout.partition_state("t", 0), bumped.encode(), version=version)
    cluster.clock.advance(LAG + 1)
    assert leader.maybe_shrink_isr() == []
    assert leader.status(TP).isr == (1, 2, 3)
    assert cluster.state()[0] == bumped  # untouched
    fenced = [getattr(r, FIELD) for r in caplog.records if r.name == LOGGER_NAME]
    assert [(f["event"], f["request"], f["reason"], f["given_epoch"], f["current_epoch"])
            for f in fenced] == [("fenced", "ISR write", "stale leader epoch", 0, 1)]


def test_isr_write_retries_after_a_version_bump_at_the_same_epoch(cluster: MiniCluster) -> None:
    leader = cluster.leader_manager()
    cluster.produce(acks=1)
    state, version = cluster.state()
    # Same content, newer version: e.g. our own write whose answer was lost.
    cluster.coordinator.set(layout.partition_state("t", 0), state.encode(), version=version)
    cluster.clock.advance(LAG + 1)
    assert leader.maybe_shrink_isr() == [TP]
    assert isr(cluster) == (1,)
    assert cluster.state()[1] == version + 2


# -- announcements -------------------------------------------------------------------------------


def notifications(cluster: MiniCluster) -> list[list[TopicPartition]]:
    names = cluster.metadata.isr_change_notifications()
    read = cluster.metadata.read_isr_change_notifications(names)
    return [read[n] for n in names]


def test_isr_changes_are_announced_once_things_settle(cluster: MiniCluster) -> None:
    leader = cluster.leader_manager()
    cluster.produce(acks=1)
    cluster.clock.advance(LAG + 1)
    leader.maybe_shrink_isr()
    assert leader.maybe_propagate_isr_changes() == []  # just changed: wait for the blackout
    cluster.clock.advance(4_999)
    assert leader.maybe_propagate_isr_changes() == []
    assert notifications(cluster) == []
    cluster.clock.advance(1)
    assert leader.maybe_propagate_isr_changes() == [TP]
    assert notifications(cluster) == [[TP]]
    cluster.clock.advance(60_000)
    assert leader.maybe_propagate_isr_changes() == []  # nothing new


def test_batcher_announces_a_flapping_isr_at_the_max_delay() -> None:
    tp1, tp2 = TopicPartition(topic="a", partition=0), TopicPartition(topic="b", partition=1)
    batcher = IsrChangeBatcher(check_interval_ms=2_500, blackout_ms=5_000, max_delay_ms=60_000,
                               now_ms=0)
    due_at = []
    for now in range(0, 61_000, 1_000):
        batcher.record(tp1 if now % 2000 else tp2, now)  # a change every second
        if batcher.take_due(now):
            due_at.append(now)
    assert due_at == [60_000]
    batcher.record(tp1, 61_000)
    assert batcher.take_due(62_000) == []  # within the check interval of the last one
    assert batcher.take_due(66_000) == [tp1]
    batcher.put_back([tp2])
    assert batcher.pending == {tp2}


def _live(cluster: MiniCluster, brokers: tuple[int, ...]) -> None:
    """The controller's UpdateMetadata: these brokers are live (the others shut down)."""
    from interbroker.requests import LiveBroker, UpdateMetadataRequest

    request = UpdateMetadataRequest(controller_id=0, controller_epoch=cluster.epoch.epoch,
                                    broker_epoch=-1, partitions=(),
                                    live_brokers=tuple(LiveBroker(id=b) for b in brokers))
    for manager in cluster.brokers.values():
        manager.handle_update_metadata(request)


def test_a_broker_shutting_down_does_not_rejoin_the_isr(cluster: MiniCluster) -> None:
    """KIP-841's rule: a caught-up follower whose broker the metadata no longer counts live
    (it is in controlled shutdown) stays out of the ISR, so acks=all need not wait for it."""
    cluster.produce(n=3, acks=1)
    cluster.crash(3)
    cluster.produce(n=2, acks=1)
    cluster.step()
    cluster.step()
    cluster.start(3)
    _live(cluster, (1, 2))  # broker 3 is on its way out again
    cluster.step([3])
    cluster.step([3])
    cluster.step([3])  # at the leader's log end: caught up, but not live
    assert isr(cluster) == (1, 2)
    _live(cluster, (1, 2, 3))  # it came back for good
    cluster.step([3])
    assert isr(cluster) == (1, 2, 3)
