"""KIP-405's follower scenarios on replica managers wired in process (and over Kafka's protocol on
loopback sockets): a follower whose fetch offset is below the leader's local log start is told
OFFSET_MOVED_TO_TIERED_STORAGE, builds its epochs and producer state from the remote segment
below the leader's local log start, truncates fully, starts at the leader's local log start and
fetches only the local part; once leader, it serves the remote part and its log start is the
whole log's.

1. A new, empty follower (a replica added by a reassignment).
2. An out-of-sync follower catching up after the leader's local retention removed what it
   missed.
3. Multiple hard failures: an unclean election leaves remote segments of two lineages on both
   sides of the truncation point; the returning replica truncates to the new leader's lineage,
   rebuilds from its remote segments, and never serves the other lineage's uploads.
"""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

import pytest

from coordinator.codecs import PartitionStateNode
from elections.leader import elect_offline
from interbroker.errors import ErrorCode
from replication.config import ReplicaConfig
from replication.log import Log, LogConfig
from replication.protocol import ACKS_ALL, EpochAnswer
from replication.records import Record, decode_batch, encode_batch, iter_batches, validate_batches
from replication.replica_manager import ReplicaManager
from replication.tiered import RemoteLogConfig, RemoteLogSegmentState, TopicIdPartition
from replication.tiered.follower import target_epoch

from .loopback import IN_PROCESS, NETWORK
from .test_replica_manager_cluster import TP, MiniCluster

TOPIC_ID = uuid.UUID(int=0x405)
TID = TopicIdPartition(topic_id=TOPIC_ID, topic=TP.topic, partition=TP.partition)
PRODUCER_ID = 4005
VALUE = 100


def _batch(value: bytes, seq: int) -> bytes:
    return encode_batch([Record(key=None, value=value, timestamp=1_000)],
                        producer_id=PRODUCER_ID, producer_epoch=0, base_sequence=seq)


ONE = len(_batch(b"x" * VALUE, 0))


class Tiered:
    """A MiniCluster whose topic is tiered: segments of two one-record batches, the local part
    kept to about two segments, remote storage on a shared directory."""

    def __init__(self, root: Path, brokers: tuple[int, ...], transport: str = IN_PROCESS):
        remote = RemoteLogConfig(system_enable=True, storage_url=f"file://{root}/remote")
        log_cfg = LogConfig(segment_bytes=2 * ONE, remote_storage_enable=True, retention_ms=-1,
                            local_retention_bytes=4 * ONE)
        cfg = ReplicaConfig(log=log_cfg, remote=remote, replica_lag_time_max_ms=10_000)
        self.cluster = MiniCluster(root, brokers, config=cfg, transport=transport)
        self.cluster.topic_ids[TP.topic] = base64.urlsafe_b64encode(
            TOPIC_ID.bytes).rstrip(b"=").decode()
        self.seq = 0
        self.values: dict[int, bytes] = {}

    def produce(self, n: int, tag: str) -> None:
        c = self.cluster
        for _ in range(n):
            value = f"{tag}-{self.seq}".encode().ljust(VALUE, b".")
            future = c.leader_manager().produce(TP, _batch(value, self.seq), acks=ACKS_ALL)
            c.settle()
            result = future.result(5)
            assert result.error == ErrorCode.NONE, result
            self.values[result.base_offset] = value
            self.seq += 1

    def tier(self) -> None:
        """A remote log manager pass and retention on every live broker (leaders copy)."""
        for rm in self.cluster.brokers.values():
            assert rm.remote is not None
            rm.remote.run_once()
            rm.logs.cleanup_logs()


def local_values(log: Log) -> dict[int, bytes | None]:
    out: dict[int, bytes | None] = {}
    offset = log.local_log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 22).records
        for pos, *_ in validate_batches(data):
            for record in decode_batch(data, pos).records:
                out[record.offset] = record.value
        offset = max(out) + 1
    return out


def read_all(rm: ReplicaManager) -> dict[int, bytes | None]:
    """Every record from offset 0 as a consumer reads it from ``rm`` (the leader), the remote
    part included."""
    out: dict[int, bytes | None] = {}
    offset = 0
    while True:
        read = rm.read(TP, offset, 1 << 20)
        assert read.error == ErrorCode.NONE, (offset, read)
        if not read.records:
            return out
        for pos, *_ in validate_batches(read.records):
            for record in decode_batch(read.records, pos).records:
                out[record.offset] = record.value
        offset = read.next_offset


def local_bytes(log: Log) -> int:
    return log.size_bytes


def epochs(log: Log) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries]


def finished_segments(rm: ReplicaManager) -> list[tuple[int, int, tuple[tuple[int, int], ...]]]:
    assert rm.remote is not None
    rm.remote.metadata.refresh([TID])
    return [(m.start_offset, m.end_offset, m.segment_leader_epochs)
            for m in rm.remote.metadata.list_remote_log_segments(TID)
            if m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED]


@pytest.fixture
def make(tmp_path: Path):
    made: list[Tiered] = []

    def build(brokers: tuple[int, ...], transport: str = IN_PROCESS) -> Tiered:
        t = Tiered(tmp_path, brokers, transport)
        made.append(t)
        return t

    yield build
    for t in made:
        t.cluster.shutdown()


def test_target_epoch_is_the_previous_epoch_when_the_local_start_opens_an_epoch() -> None:
    assert target_epoch(10, 0, None) == 0
    # epoch 3 starts before 10: offset 9 is epoch 3's
    assert target_epoch(10, 3, EpochAnswer(error=ErrorCode.NONE, epoch=1, end_offset=6)) == 3
    # epoch 3 starts at 10 exactly: offset 9 is the previous epoch's
    assert target_epoch(10, 3, EpochAnswer(error=ErrorCode.NONE, epoch=1, end_offset=10)) == 1


@pytest.mark.parametrize("transport", [IN_PROCESS, NETWORK])
def test_a_new_empty_follower_builds_from_remote_and_copies_only_the_local_part(
        make, transport: str) -> None:
    t = make((1, 2, 3), transport)
    c = t.cluster
    c.create(TP, replicas=(1, 2))
    t.produce(12, "a")
    t.tier()
    leader_log = c.log(1)
    assert leader_log.local_log_start_offset > 4, leader_log  # local retention ran
    assert leader_log.log_start_offset == 0
    # A reassignment adds broker 3 (the controller bumps the leader epoch): it starts empty.
    c.assignments[TP] = (1, 2, 3)
    c.write(TP, lambda s: PartitionStateNode(leader=s.leader, leader_epoch=s.leader_epoch + 1,
                                             isr=s.isr, controller_epoch=c.epoch.epoch))
    c.send(TP, [1, 2, 3])
    c.settle()
    new = c.log(3)
    assert c.brokers[3].fetcher.remote_restarts == 1
    assert new.local_log_start_offset == leader_log.local_log_start_offset
    assert new.log_start_offset == leader_log.log_start_offset == 0
    assert local_values(new) == local_values(leader_log)
    # It moved the local part only.
    assert local_bytes(new) == local_bytes(leader_log) < (12 * ONE) // 2
    assert epochs(new) == [(0, 0)] and epochs(leader_log) == [(0, 0), (1, 12)]
    # The producer state came with the remote snapshot: the next sequence follows on.
    assert new.producer_entry(PRODUCER_ID) == leader_log.producer_entry(PRODUCER_ID)
    assert 3 in c.state(TP)[0].isr
    # Once leader, it serves the whole log, remote part included, and ListOffsets -2 is 0.
    c.crash(1)
    c.crash(2)
    assert c.leader() == 3
    t.produce(1, "b")  # the producer state carried over: sequence 12 is accepted
    assert read_all(c.brokers[3]) == t.values
    assert c.brokers[3].partition(TP).status().log_start_offset == 0


def test_an_out_of_sync_follower_catches_up_after_local_retention(make) -> None:
    t = make((1, 2))
    c = t.cluster
    c.create(TP, replicas=(1, 2))
    t.produce(3, "a")
    c.crash(2)  # out of the ISR; its log ends at 3
    t.produce(12, "b")
    t.tier()
    leader_log = c.log(1)
    assert leader_log.local_log_start_offset > 3
    c.start(2)
    c.settle()
    follower = c.log(2)
    assert c.brokers[2].fetcher.remote_restarts == 1
    assert follower.local_log_start_offset == leader_log.local_log_start_offset
    assert follower.log_start_offset == 0
    assert local_values(follower) == local_values(leader_log)
    assert epochs(follower) == epochs(leader_log)
    assert follower.producer_entry(PRODUCER_ID) == leader_log.producer_entry(PRODUCER_ID)
    assert 2 in c.state(TP)[0].isr
    # The follower's own remote log manager pass agrees with what it installed.
    assert c.brokers[2].remote is not None
    c.brokers[2].remote.run_once()
    assert follower.log_start_offset == 0
    c.crash(1)
    assert c.leader() == 2
    assert read_all(c.brokers[2]) == t.values


def test_multiple_hard_failures_with_remote_segments_on_both_sides_of_an_unclean_truncation(
        make) -> None:
    t = make((1, 2))
    c = t.cluster
    c.create(TP, replicas=(1, 2))
    t.produce(4, "a")  # 0..3 in epoch 0 on both
    c.crash(2)  # broker 2 leaves the ISR (epoch 1)
    t.produce(8, "zombie")  # 4..11 on broker 1 only, epoch 1
    t.tier()
    first_lineage = finished_segments(c.brokers[1])
    assert any(e == ((1, 4),) for _s, _e, e in first_lineage), first_lineage
    # Broker 1 dies hard; broker 2 comes back and is elected uncleanly.
    c.crash(1, notice=False)
    c.start(2)

    def unclean(current: PartitionStateNode) -> PartitionStateNode:
        election = elect_offline(c.assignments[TP], current.isr, c.brokers, unclean=True)
        assert election is not None and election.leader == 2
        return PartitionStateNode(leader=2, leader_epoch=current.leader_epoch + 1,
                                  isr=tuple(election.isr), controller_epoch=c.epoch.epoch)

    c.write(TP, unclean)
    c.send(TP, [2])
    new_epoch = c.state(TP)[0].leader_epoch
    del_values = {o: v for o, v in t.values.items() if o >= 4}
    for o in del_values:
        del t.values[o]
    t.seq = 4  # the new leader's producer state ends at sequence 3
    t.produce(12, "c")  # 4..15 in the new epoch, on broker 2
    t.tier()
    both = finished_segments(c.brokers[2])
    starts = sorted(s for s, _e, _ep in both)
    # Remote segments of both lineages cover offsets 4.. (broker 1's epoch 1, broker 2's).
    assert any(ep[0][0] == 1 for s, _e, ep in both if s >= 4)
    assert any(ep[-1][0] == new_epoch for _s, _e, ep in both)
    assert starts.count(4) == 2, both
    leader_log = c.log(2)
    assert leader_log.local_log_start_offset > 4
    # Broker 1 comes back: it diverged at 4, which is below the leader's local log start.
    c.start(1)
    c.settle()
    back = c.log(1)
    assert c.brokers[1].fetcher.remote_restarts == 1
    assert back.local_log_start_offset == leader_log.local_log_start_offset
    assert back.log_start_offset == 0
    assert epochs(back) == epochs(leader_log) == [(0, 0), (new_epoch, 4)]
    assert local_values(back) == local_values(leader_log)
    # Broker 2 dies too; broker 1 leads and serves the new lineage only, from both tiers.
    c.crash(2)
    assert c.leader() == 1
    served = read_all(c.brokers[1])
    assert served == t.values
    assert not any(v is not None and v.startswith(b"zombie") for v in served.values())
    for header in iter_batches(c.brokers[1].read(TP, 4, 1 << 20).records):
        assert header.partition_leader_epoch == new_epoch
