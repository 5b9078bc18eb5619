"""An idempotent producer's retry after leader changes is never answered as a duplicate of a
batch the answering leader's log does not hold, and a duplicate is always answered at the
batch's own offsets: the broker side of "an acknowledged write is never lost" when the
producer retries.

librdkafka takes a later batch's success as proof that the earlier batches of the same
producer and partition were written (it acknowledges them without offsets: its "implicit
ack"), so a leader that accepted a batch in sequence after one it does not hold, or answered
a retry as a duplicate of a batch it does not hold, would lose acknowledged records. These
tests drive the ways a replica's log can lose a batch its producer state once knew of: a
follower truncated below it before it leads (KIP-101/279 truncation), a follower whose log is
restarted at the leader's log start, a replica restarted from disk, and a new replica that
joins by a reassignment and then leads."""

from __future__ import annotations

from pathlib import Path

import pytest

from coordinator.codecs import PartitionStateNode
from interbroker.errors import ErrorCode
from replication.config import ReplicaConfig
from replication.protocol import ACKS_ALL

from ._util import idempotent_batch
from .loopback import TRANSPORTS
from .test_replica_manager_cluster import TP, MiniCluster, make_batch, values_by_offset


def produce(cluster: MiniCluster, data: bytes, acks: int = ACKS_ALL):  # noqa: ANN201
    return cluster.leader_manager().produce(TP, data, acks=acks)


def lead(cluster: MiniCluster, broker: int) -> None:
    """Make ``broker`` the leader by a clean election (it must be in the ISR)."""
    assert cluster.elect(prefer=broker) == broker


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_follower_truncated_below_a_batch_takes_its_retry_anew_when_it_leads(
    tmp_path: Path, transport: str
) -> None:
    cluster = MiniCluster(tmp_path, transport=transport)
    try:
        cluster.create()
        produce(cluster, idempotent_batch(0, 2))
        cluster.settle()  # offsets 0..1 committed everywhere
        retried = idempotent_batch(2, 2, tag="r")
        first = produce(cluster, retried)  # offsets 2..3 on broker 1 ...
        cluster.step([2])  # ... copied by broker 2 only, not committed
        assert cluster.log(2).log_end_offset == 4 and not first.done()
        entry = cluster.log(2).producer_entry(7)
        assert entry is not None and entry.last_seq == 3  # broker 2 knows the batch
        cluster.crash(1, notice=False)
        lead(cluster, 3)  # broker 3 never had it; the producer's answer is lost
        other, other_values = make_batch(2, tag="other")
        assert produce(cluster, other, acks=1).result(0).base_offset == 2
        cluster.settle()  # broker 2 truncates its copy away and takes the other batch
        assert values_by_offset(cluster.log(2)) == values_by_offset(cluster.log(3))
        entry = cluster.log(2).producer_entry(7)
        assert entry is not None and entry.last_seq == 1  # the state went back with the log
        cluster.crash(3, notice=False)
        lead(cluster, 2)
        retry = produce(cluster, retried, acks=1).result(0)
        # appended after the other batch, not answered as a duplicate at 2 (which holds it)
        assert (retry.error, retry.base_offset, retry.duplicate) == (ErrorCode.NONE, 4, False)
        values = values_by_offset(cluster.log(2))
        assert [values[o] for o in (2, 3)] == other_values
        assert values[4] == b"r2-0" and values[5] == b"r2-1"
    finally:
        cluster.shutdown()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_later_batch_is_refused_when_the_leader_lost_the_earlier_one(
    tmp_path: Path, transport: str
) -> None:
    # librdkafka would acknowledge the earlier batch (offset unknown) on the later one's
    # success: the new leader must refuse the later one, the earlier one being gone.
    cluster = MiniCluster(tmp_path, transport=transport)
    try:
        cluster.create()
        produce(cluster, idempotent_batch(0, 2))
        cluster.settle()
        produce(cluster, idempotent_batch(2, 2))  # on broker 1 and broker 2 only
        cluster.step([2])
        cluster.crash(1, notice=False)
        lead(cluster, 3)
        cluster.settle()  # broker 2 follows 3 and truncates the batch away
        later = produce(cluster, idempotent_batch(4, 1), acks=1).result(0)
        assert later.error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        cluster.crash(3, notice=False)
        lead(cluster, 2)
        later = produce(cluster, idempotent_batch(4, 1), acks=1).result(0)
        assert later.error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert cluster.log(2).log_end_offset == 2
    finally:
        cluster.shutdown()


def test_a_replica_restarted_from_disk_after_truncation_knows_only_what_its_log_holds(
    tmp_path: Path
) -> None:
    cluster = MiniCluster(tmp_path)
    try:
        cluster.create()
        produce(cluster, idempotent_batch(0, 2))
        cluster.settle()
        retried = idempotent_batch(2, 2, tag="r")
        produce(cluster, retried)
        cluster.step([2])  # broker 2 holds offsets 2..3, uncommitted
        cluster.log(2).roll()  # a snapshot at 4 that describes the batch
        cluster.crash(1, notice=False)
        lead(cluster, 3)
        produce(cluster, make_batch(1)[0], acks=1)
        cluster.settle()  # broker 2 truncates to 2
        assert 4 not in cluster.log(2).producer_snapshot_offsets
        cluster.crash(2, notice=False)  # and comes back from its disk
        cluster.start(2)
        cluster.settle()
        cluster.crash(3, notice=False)
        lead(cluster, 2)
        retry = produce(cluster, retried, acks=1).result(0)
        assert (retry.base_offset, retry.duplicate) == (3, False)
    finally:
        cluster.shutdown()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_replica_added_by_a_reassignment_answers_retries_at_their_offsets_when_it_leads(
    tmp_path: Path, transport: str
) -> None:
    cluster = MiniCluster(tmp_path, broker_ids=(1, 2, 3, 4), transport=transport)
    try:
        cluster.create(replicas=(1, 2, 3))
        batches = [idempotent_batch(2 * i, 2, tag=f"b{i}") for i in range(3)]
        for data in batches:
            produce(cluster, data)
        cluster.settle()
        # the reassignment: 4 added, caught up, in the ISR; 1 removed; 4 elected
        cluster.assignments[TP] = (4, 2, 3, 1)
        cluster.write(TP, lambda s: PartitionStateNode(
            leader=s.leader, leader_epoch=s.leader_epoch + 1, isr=s.isr,
            controller_epoch=cluster.epoch.epoch))
        cluster.send(TP, [1, 2, 3, 4])
        cluster.settle()
        assert 4 in cluster.state()[0].isr
        assert cluster.log(4).producer_entries() == cluster.log(1).producer_entries()
        lead(cluster, 4)
        cluster.settle()
        for i, data in enumerate(batches):
            retry = produce(cluster, data, acks=1).result(0)
            assert (retry.base_offset, retry.duplicate) == (2 * i, True)
        assert cluster.log(4).log_end_offset == 6
        later = produce(cluster, idempotent_batch(6, 1), acks=1).result(0)
        assert (later.base_offset, later.duplicate) == (6, False)
    finally:
        cluster.shutdown()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_new_producers_batch_that_overtook_its_refused_first_one_is_refused(
    tmp_path: Path, transport: str
) -> None:
    # A new producer id (a new producer, or librdkafka's after an epoch bump: a new id) sends
    # its first two batches to a leader whose ISR is short: the first is refused before it is
    # appended, the ISR is whole again when the second arrives. Taken, the second would let
    # librdkafka report the first delivered (the fault harness's loss, "@None").
    cluster = MiniCluster(tmp_path, config=ReplicaConfig(min_insync_replicas=2),
                          transport=transport)
    try:
        cluster.create()
        cluster.crash(2)
        cluster.crash(3)
        first = produce(cluster, idempotent_batch(0, 2, pid=40)).result(0)
        assert first.error == ErrorCode.NOT_ENOUGH_REPLICAS
        cluster.start(2)
        cluster.settle()
        assert cluster.state()[0].isr == (1, 2)
        second = produce(cluster, idempotent_batch(2, 1, pid=40)).result(0)
        assert second.error == ErrorCode.UNKNOWN_PRODUCER_ID and second.base_offset == -1
        assert cluster.log(1).log_end_offset == 0 and cluster.log(1).producer_entry(40) is None
        # the client's answer to that: a new producer id, its batches again from sequence 0
        again = [produce(cluster, idempotent_batch(s, n, pid=41)) for s, n in ((0, 2), (2, 1))]
        cluster.settle()
        assert [f.result(0).base_offset for f in again] == [0, 2]
    finally:
        cluster.shutdown()
