"""A leader partition: acks, min ISR, the high watermark, consumer reads, produce completion."""

from __future__ import annotations

from pathlib import Path

import pytest

from interbroker.errors import ErrorCode
from replication.config import ReplicaConfig
from replication.isr import (
    can_join_isr,
    effective_min_isr,
    high_watermark,
    out_of_sync_replicas,
)
from replication.partition import Partition
from replication.protocol import ACKS_ALL, QuietStamp
from replication.records import iter_batches

from .test_replica_manager_cluster import TP, MiniCluster, make_batch

CONFIG = ReplicaConfig(min_insync_replicas=2, replica_lag_time_max_ms=10_000,
                       request_timeout_ms=5_000)


@pytest.fixture
def cluster(tmp_path: Path):
    c = MiniCluster(tmp_path, config=CONFIG)
    c.create()
    yield c
    c.shutdown()


def follower_fetch(cluster: MiniCluster, follower: int, offset: int):
    """What follower ``follower``'s fetch at ``offset`` does on the leader."""
    leader = cluster.leader_manager()
    return leader.fetch(TP, offset, 1 << 20, follower, leader.status(TP).leader_epoch)


# -- pure rules ----------------------------------------------------------------------------------


def test_high_watermark_is_the_minimum_leo_over_the_isr_and_never_goes_back() -> None:
    assert high_watermark(0, 10, (1, 2, 3), 1, {2: 7, 3: 9}, min_isr=1) == 7
    assert high_watermark(8, 10, (1, 2, 3), 1, {2: 7, 3: 9}, min_isr=1) == 8  # never back
    assert high_watermark(0, 10, (1, 2), 1, {2: -1, 3: 0}, min_isr=1) == 0  # unknown LEO holds it
    # Followers outside the ISR don't count.
    assert high_watermark(0, 10, (1,), 1, {2: 3}, min_isr=1) == 10


def test_high_watermark_is_frozen_while_the_isr_is_below_the_minimum() -> None:
    assert high_watermark(4, 10, (1,), 1, {2: 10}, min_isr=2) == 4
    assert high_watermark(4, 10, (1, 2), 1, {2: 8, 3: 10}, min_isr=3) == 4
    # Back to the minimum: the HW takes in what the ISR now holds.
    assert high_watermark(4, 10, (1, 2), 1, {2: 8}, min_isr=2) == 8


def test_min_isr_is_capped_at_the_replication_factor() -> None:
    assert effective_min_isr(2, 3) == 2
    assert effective_min_isr(3, 2) == 2
    assert effective_min_isr(2, 1) == 1
    assert effective_min_isr(2, 0) == 1


def test_out_of_sync_needs_both_lagging_and_stale() -> None:
    leos, caught_up = {2: 5, 3: 10}, {2: 0, 3: 0}
    assert out_of_sync_replicas((1, 2, 3), 1, 10, leos, caught_up, 10_001, 10_000) == {2}
    assert out_of_sync_replicas((1, 2, 3), 1, 10, leos, caught_up, 10_000, 10_000) == set()


def test_join_needs_the_hw_and_the_current_epoch_start() -> None:
    assert can_join_isr(10, 10, 8)
    assert not can_join_isr(9, 9, 10)  # has the committed records, not the epoch's start
    assert not can_join_isr(9, 10, 0)


# -- acks ------------------------------------------------------------------------------------------


def test_acks_one_answers_at_once_and_acks_all_when_the_hw_passes(cluster: MiniCluster) -> None:
    one, _ = cluster.produce(n=2, acks=1)
    assert one.done() and one.result().error == ErrorCode.NONE
    assert (one.result().base_offset, one.result().last_offset) == (0, 1)
    everyone, _ = cluster.produce(n=3, acks=ACKS_ALL)
    assert not everyone.done()
    follower_fetch(cluster, 2, 5)
    assert not everyone.done()  # broker 3 has not fetched: HW is held at 0
    assert cluster.leader_manager().status(TP).high_watermark == 0
    follower_fetch(cluster, 3, 4)
    assert cluster.leader_manager().status(TP).high_watermark == 4
    assert not everyone.done()  # offset 4 is the batch's last: HW must pass it
    follower_fetch(cluster, 3, 5)
    assert everyone.result(timeout=0).error == ErrorCode.NONE
    assert (everyone.result().base_offset, everyone.result().last_offset) == (2, 4)


def test_acks_zero_and_invalid_acks(cluster: MiniCluster) -> None:
    zero, _ = cluster.produce(acks=0)
    assert zero.result(timeout=0).error == ErrorCode.NONE
    bad, _ = cluster.produce(acks=2)
    assert bad.result(timeout=0).error == ErrorCode.INVALID_REQUIRED_ACKS
    assert cluster.log(1).log_end_offset == 1


def test_acks_all_below_min_isr_fails_before_appending(cluster: MiniCluster) -> None:
    cluster.crash(2)
    cluster.crash(3)
    assert cluster.state()[0].isr == (1,)
    leo = cluster.log(1).log_end_offset
    future, _ = cluster.produce(acks=ACKS_ALL)
    assert future.result(timeout=0).error == ErrorCode.NOT_ENOUGH_REPLICAS
    assert cluster.log(1).log_end_offset == leo  # nothing appended
    one, _ = cluster.produce(acks=1)  # acks=1 does not care about min ISR
    assert one.result(timeout=0).error == ErrorCode.NONE


def test_isr_shrinking_below_min_isr_holds_the_hw_and_waiting_produces(
    cluster: MiniCluster,
) -> None:
    cluster.settle()
    future, _ = cluster.produce(acks=ACKS_ALL)
    follower_fetch(cluster, 2, 0)
    follower_fetch(cluster, 3, 0)
    cluster.clock.advance(10_001)
    assert cluster.leader_manager().maybe_shrink_isr() == [TP]
    # ISR is now {1}: only one replica has the batch, so the HW stays and the produce waits
    # (Kafka since KAFKA-15583; it used to pass the batch and answer
    # NOT_ENOUGH_REPLICAS_AFTER_APPEND).
    assert cluster.state()[0].isr == (1,)
    assert cluster.leader_manager().status(TP).high_watermark == 0
    assert not future.done()
    # A follower catches up and rejoins: the batch is on two replicas, committed, answered.
    follower_fetch(cluster, 2, 1)
    assert cluster.state()[0].isr == (1, 2)
    assert cluster.leader_manager().status(TP).high_watermark == 1
    assert future.result(timeout=0).error == ErrorCode.NONE


def test_acks_one_below_min_isr_does_not_move_the_hw(cluster: MiniCluster) -> None:
    cluster.produce(n=2, acks=1)
    cluster.settle()
    leader = cluster.leader_manager()
    assert leader.status(TP).high_watermark == 2
    cluster.crash(2)
    cluster.crash(3)
    assert cluster.state()[0].isr == (1,)
    one, _ = cluster.produce(n=3, acks=1)
    assert one.result(timeout=0).error == ErrorCode.NONE
    assert leader.status(TP).high_watermark == 2  # only the leader has offsets 2..4
    assert leader.read(TP, 2, 1 << 20).records == b""  # so no consumer sees them
    cluster.start(2)
    cluster.settle()
    assert cluster.state()[0].isr == (1, 2)
    assert leader.status(TP).high_watermark == 5
    assert cluster.brokers[2].status(TP).high_watermark == 5


def test_min_isr_above_the_replication_factor_counts_as_the_replication_factor(
    tmp_path: Path,
) -> None:
    cluster = MiniCluster(tmp_path, (1,), config=CONFIG)  # min.insync.replicas 2, RF 1
    try:
        cluster.create(replicas=(1,))
        everyone, _ = cluster.produce(n=2, acks=ACKS_ALL)
        assert everyone.result(timeout=0).error == ErrorCode.NONE
        cluster.produce(n=1, acks=1)
        assert cluster.leader_manager().status(TP).high_watermark == 3
    finally:
        cluster.shutdown()


def test_acks_all_times_out_and_leadership_loss_fails_waiting_produces(
    cluster: MiniCluster,
) -> None:
    slow, _ = cluster.produce(acks=ACKS_ALL)
    cluster.clock.advance(4_999)
    cluster.leader_manager().expire_produces()
    assert not slow.done()
    cluster.clock.advance(1)
    cluster.leader_manager().expire_produces()
    assert slow.result(timeout=0).error == ErrorCode.REQUEST_TIMED_OUT
    assert cluster.log(1).log_end_offset == 1  # the records stay
    lost, _ = cluster.produce(acks=ACKS_ALL)
    cluster.elect(prefer=2)
    assert lost.result(timeout=0).error == ErrorCode.NOT_LEADER_OR_FOLLOWER
    refused = cluster.brokers[1].produce(TP, make_batch()[0], acks=1)
    assert refused.result(timeout=0).error == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_the_expiry_visits_only_partitions_with_produces_waiting(cluster: MiniCluster) -> None:
    """The ticker's expiry walks the partitions where an acks=all produce waits, not every
    partition of the broker: a partition joins that set when it parks one and leaves it when an
    expiry finds none left (answered by the HW, or timed out)."""
    manager = cluster.leader_manager()
    partition = manager.partition(TP)
    assert manager._waiting == set()
    slow, _ = cluster.produce(acks=ACKS_ALL)
    assert manager._waiting == {partition}
    cluster.clock.advance(5_000)
    manager.expire_produces()
    assert slow.result(timeout=0).error == ErrorCode.REQUEST_TIMED_OUT
    assert manager._waiting == set()
    answered, _ = cluster.produce(acks=ACKS_ALL)
    assert manager._waiting == {partition}
    cluster.settle()
    assert answered.result(timeout=0).error == ErrorCode.NONE
    manager.expire_produces()  # nothing left to expire: it leaves the set
    assert manager._waiting == set()


def test_corrupt_batches_are_refused(cluster: MiniCluster) -> None:
    data = bytearray(make_batch(2)[0])
    data[-1] ^= 0xFF
    future = cluster.leader_manager().produce(TP, bytes(data), acks=1)
    assert future.result(timeout=0).error == ErrorCode.CORRUPT_MESSAGE
    assert cluster.log(1).log_end_offset == 0


# -- the high watermark and consumers -------------------------------------------------------------


def test_hw_never_moves_back_and_consumers_never_see_past_it(cluster: MiniCluster) -> None:
    leader = cluster.leader_manager()
    for _ in range(3):
        cluster.produce(n=2, acks=1)
    assert leader.read(TP, 0, 1 << 20).records == b""  # nothing committed yet
    follower_fetch(cluster, 2, 4)
    follower_fetch(cluster, 3, 4)
    assert leader.status(TP).high_watermark == 4
    read = leader.read(TP, 0, 1 << 20)
    assert read.high_watermark == 4 and read.next_offset == 4
    assert [h.last_offset for h in iter_batches(read.records)] == [1, 3]
    assert leader.read(TP, 4, 1 << 20).records == b""
    # A follower fetching from further back (it truncated) does not pull the HW back.
    follower_fetch(cluster, 2, 2)
    assert leader.status(TP).high_watermark == 4
    # A consumer's fetch through the fetch API gets the same view.
    consumer = leader.fetch(TP, 0, 1 << 20, -1, -1)
    assert consumer.high_watermark == 4
    assert max(h.last_offset for h in iter_batches(consumer.records)) < 4
    assert leader.read(TP, 7, 100).error == ErrorCode.OFFSET_OUT_OF_RANGE
    assert cluster.brokers[2].read(TP, 0, 100).error == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_a_new_leader_records_its_epoch_before_any_write(cluster: MiniCluster) -> None:
    cluster.produce(n=2, acks=1)
    cluster.settle()
    cluster.elect(prefer=2)
    entries = cluster.log(2).leader_epoch_cache.entries
    assert [(e.epoch, e.start_offset) for e in entries] == [(0, 0), (1, 2)]
    assert cluster.log(2).log_end_offset == 2


def test_follower_fetches_are_fenced_by_leader_epoch(cluster: MiniCluster) -> None:
    leader = cluster.leader_manager()
    assert leader.fetch(TP, 0, 100, 2, 5).error == ErrorCode.UNKNOWN_LEADER_EPOCH
    cluster.remove_from_isr(TP, 3)  # epoch 1 now
    assert leader.fetch(TP, 0, 100, 2, 0).error == ErrorCode.FENCED_LEADER_EPOCH
    assert leader.fetch(TP, 0, 100, 2, 1).error == ErrorCode.NONE
    assert leader.fetch(TP, 0, 100, 9, 1).error == ErrorCode.REPLICA_NOT_AVAILABLE
    assert cluster.brokers[2].fetch(TP, 0, 100, 3, 1).error == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert leader.fetch(TP, 5, 100, 2, 1).error == ErrorCode.OFFSET_OUT_OF_RANGE


def quiet_follower(cluster: MiniCluster) -> tuple[Partition, int, QuietStamp | None]:
    """Follower 2's empty fetch at the leader's log end on a settled cluster: the leader's
    partition, its log end, and the fetch's stamp."""
    cluster.settle()
    leader = cluster.leader_manager()
    partition = leader.partition(TP)
    assert partition is not None
    leo = leader.status(TP).log_end_offset
    return partition, leo, follower_fetch(cluster, 2, leo).quiet


def test_a_caught_up_follower_s_empty_fetch_is_stamped_and_holds_until_something_moves(
    cluster: MiniCluster,
) -> None:
    partition, leo, stamp = quiet_follower(cluster)
    assert stamp is not None and stamp[1:3] == (leo, leo)
    assert follower_fetch(cluster, 3, leo).quiet == stamp
    assert partition.follower_unchanged(2, stamp)
    cluster.clock.advance(6_000)
    assert partition.follower_unchanged(2, stamp, update_state=False)  # time alone: unchanged
    cluster.crash(2)  # the controller takes it out of the ISR: read it in full again
    assert 2 not in cluster.state()[0].isr
    assert not partition.follower_unchanged(2, stamp, update_state=False)


def test_an_append_or_a_fetch_with_records_ends_the_stamp(cluster: MiniCluster) -> None:
    partition, leo, stamp = quiet_follower(cluster)
    assert stamp is not None
    cluster.produce(acks=1)
    assert not partition.follower_unchanged(2, stamp)
    moved = follower_fetch(cluster, 2, leo)
    assert moved.records and moved.quiet is None  # records: not quiet
    again = follower_fetch(cluster, 2, leo + 1)
    assert again.quiet is not None and again.quiet != stamp and again.quiet[1] == leo + 1
