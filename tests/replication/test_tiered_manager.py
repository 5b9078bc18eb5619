"""The remote log manager over a real log, the filesystem storage manager and the file metadata
manager: what it copies (below the HW, never the active segment, leaders only, resuming after a
leader change), two-tier retention (nothing local deleted before it is remote; a failing remote
store deletes nothing), remote retention, and reads below the local log start."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from coordinator.clock import ManualClock
from replication.errors import OffsetOutOfRangeError
from replication.log import Log, LogConfig, LogSlice
from replication.records import Record, encode_batch, validate_batches
from replication.tiered import (
    FileRemoteLogMetadataManager,
    FileSystemRemoteStorageManager,
    MetadataCompaction,
    RemoteLogManager,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemoteStorageError,
    RetryBackoff,
    TieredPartition,
    TopicIdPartition,
    highest_remote_offset,
)

from ._util import batch

S = RemoteLogSegmentState
TP = TopicIdPartition(topic_id=uuid.UUID(int=9), topic="t", partition=0)
ONE = len(batch(1, value_size=100))



def tiered_log(tmp_path: Path, clock: ManualClock, **config: int) -> Log:
    config.setdefault("retention_ms", -1)
    cfg = LogConfig(segment_bytes=2 * ONE, remote_storage_enable=True, **config)
    return Log.open(tmp_path / "logs" / "t-0", config=cfg, clock=clock)


def fill(log: Log, n: int, epoch: int = 0, ts: int = 1_000) -> None:
    for _ in range(n):
        log.append_as_leader(batch(1, value_size=100, timestamp=ts), leader_epoch=epoch)


def whole(log: Log) -> bytes:
    """Every batch of the log, read segment by segment."""
    out, offset = b"", log.local_log_start_offset
    while offset < log.log_end_offset:
        read = log.read(offset, 1 << 20)
        out, offset = out + read.records, read.next_offset
    return out


def manager(tmp_path: Path, clock: ManualClock, broker_id: int = 1,
            storage: object | None = None,
            compaction: MetadataCompaction | None = None) -> RemoteLogManager:
    rsm = storage or FileSystemRemoteStorageManager(tmp_path / "remote")
    rlmm = FileRemoteLogMetadataManager(tmp_path / "remote" / "__remote_log_metadata")
    return RemoteLogManager(broker_id, rsm, rlmm, clock,  # type: ignore[arg-type]
                            compaction=compaction)


def leader(log: Log, hw: int | None = None, epoch: int = 0, *, is_leader: bool = True,
           leads: bool = True) -> TieredPartition:
    return TieredPartition(id=TP, log=log, is_leader=is_leader, leader_epoch=epoch,
                           high_watermark=log.log_end_offset if hw is None else hw,
                           still_leads=lambda e: leads)


def finished(rlm: RemoteLogManager) -> list[tuple[int, int]]:
    return [(m.start_offset, m.end_offset) for m in rlm.metadata.list_remote_log_segments(TP)
            if m.state is S.COPY_SEGMENT_FINISHED]


def test_copies_rolled_segments_below_the_hw_only_and_never_the_active_one(
        tmp_path: Path) -> None:
    clock = ManualClock(10_000)
    log = tiered_log(tmp_path, clock)
    fill(log, 9)  # segments 0-1, 2-3, 4-5, 6-7, active 8
    rlm = manager(tmp_path, clock)
    assert rlm.copy_log_segments(leader(log, hw=5)) == 2  # 4-5 reaches the HW
    assert finished(rlm) == [(0, 1), (2, 3)]
    assert log.highest_offset_in_remote_storage == 3
    assert rlm.copy_log_segments(leader(log)) == 2  # up to the active segment, not into it
    assert finished(rlm) == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert rlm.copy_log_segments(leader(log)) == 0
    m = rlm.metadata.list_remote_log_segments(TP)[0]
    assert m.segment_leader_epochs == ((0, 0),) and m.broker_id == 1
    assert m.segment_size_in_bytes == 2 * ONE
    assert rlm.copied_bytes == 4 * 2 * ONE  # the metrics' remote copy bytes


def test_followers_never_copy(tmp_path: Path) -> None:
    clock = ManualClock(10_000)
    log = tiered_log(tmp_path, clock)
    fill(log, 5)
    rlm = manager(tmp_path, clock)
    rlm.run_once([leader(log, is_leader=False)])
    assert rlm.metadata.list_remote_log_segments(TP) == []
    assert not list((tmp_path / "remote").rglob("*.log"))


def test_a_leader_that_lost_leadership_stops_copying(tmp_path: Path) -> None:
    clock = ManualClock(10_000)
    log = tiered_log(tmp_path, clock)
    fill(log, 5)
    rlm = manager(tmp_path, clock)
    assert rlm.copy_log_segments(leader(log, leads=False)) == 0
    assert rlm.metadata.list_remote_log_segments(TP) == []


def test_a_new_leader_resumes_after_the_highest_offset_of_its_lineage(tmp_path: Path) -> None:
    clock = ManualClock(10_000)
    log = tiered_log(tmp_path, clock)
    fill(log, 5, epoch=0)  # 0-1, 2-3, active 4
    first = manager(tmp_path, clock, broker_id=1)
    assert first.copy_log_segments(leader(log)) == 2
    # Leadership moves (epoch 1), on another broker with its own view of the metadata.
    log.assign_leader_epoch(1)
    fill(log, 4, epoch=1)  # 4-5 (epochs 0 and 1), 6-7, active 8
    second = manager(tmp_path, clock, broker_id=2)
    assert second.highest_copied_offset(leader(log, epoch=1)) == 3
    assert second.copy_log_segments(leader(log, epoch=1)) == 2
    segments = second.metadata.list_remote_log_segments(TP)
    assert [(m.start_offset, m.end_offset, m.broker_id) for m in segments] == [
        (0, 1, 1), (2, 3, 1), (4, 5, 2), (6, 7, 2)]
    assert segments[2].segment_leader_epochs == ((0, 4), (1, 5))
    assert second.metadata.highest_offset_for_epoch(TP, 0) == 4


def test_highest_remote_offset_is_capped_at_the_epochs_end_in_this_log() -> None:
    # This log's epoch 1 ended at 20 (epoch 3 began there); a zombie copied epoch 1 up to 30.
    copied = {1: 30}
    assert highest_remote_offset([(0, 0), (1, 10), (3, 20)], 40, copied.get) == 19
    assert highest_remote_offset([(0, 0)], 40, copied.get) == -1
    assert highest_remote_offset([(0, 0), (1, 10)], 40, {0: 5, 1: 12}.get) == 12


def test_nothing_local_is_deleted_before_it_is_copied(tmp_path: Path) -> None:
    clock = ManualClock(10_000)
    log = tiered_log(tmp_path, clock, local_retention_bytes=0)
    fill(log, 9)
    before = whole(log)
    assert log.delete_old_segments() == 0  # nothing remote yet
    assert log.segment_base_offsets == (0, 2, 4, 6, 8)
    rlm = manager(tmp_path, clock)
    rlm.copy_log_segments(leader(log, hw=5))
    assert log.delete_old_segments() == 2  # exactly what is remote
    assert log.segment_base_offsets == (4, 6, 8)
    assert log.local_log_start_offset == 4
    assert log.log_start_offset == 0  # the whole log still starts at 0
    rlm.sync_remote_state(leader(log))
    assert log.log_start_offset == 0
    # Reads below the local log start come back from the remote tier, byte for byte.
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    remote = rlm.read(TP, log, 0, 1 << 20, upto=log.log_end_offset)
    assert remote == before[:len(remote)] and len(remote) == 2 * ONE  # one segment's worth
    assert rlm.read(TP, log, 3, ONE, upto=9) == before[3 * ONE:4 * ONE]


def test_local_time_retention_uses_local_retention_ms(tmp_path: Path) -> None:
    clock = ManualClock(10_000)
    log = tiered_log(tmp_path, clock, local_retention_ms=100)
    fill(log, 5, ts=1_000)
    rlm = manager(tmp_path, clock)
    rlm.copy_log_segments(leader(log))
    assert log.delete_old_segments(now_ms=1_050) == 0  # younger than local.retention.ms
    assert log.delete_old_segments(now_ms=1_200) == 2
    assert log.local_log_start_offset == 4 and log.log_start_offset == 0


class FailingStorage(FileSystemRemoteStorageManager):
    def copy_log_segment_data(self, metadata: object, data: object) -> None:
        raise RemoteStorageError("the bucket is on fire")


def test_a_failing_remote_store_deletes_nothing_locally(tmp_path: Path) -> None:
    clock = ManualClock(10_000)
    log = tiered_log(tmp_path, clock, local_retention_bytes=0)
    fill(log, 9)
    rlm = manager(tmp_path, clock, storage=FailingStorage(tmp_path / "remote"))
    rlm.run_once([leader(log)])
    assert log.highest_offset_in_remote_storage == -1
    assert log.delete_old_segments() == 0
    assert log.segment_base_offsets == (0, 2, 4, 6, 8)
    # The failed copy was taken back: its metadata went to DELETE_SEGMENT_FINISHED.
    assert rlm.metadata.list_remote_log_segments(TP) == []
    assert finished(rlm) == []
    assert rlm.copied_bytes == 0  # a failed copy is not counted


class FlakyStorage(FileSystemRemoteStorageManager):
    """Fails every copy while ``down``; counts the copies tried."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.down = True
        self.tries = 0

    def copy_log_segment_data(self, metadata: object, data: object) -> None:
        self.tries += 1
        if self.down:
            raise RemoteStorageError("503 slow down")
        super().copy_log_segment_data(metadata, data)  # type: ignore[arg-type]


def test_retry_backoff_doubles_up_to_its_cap_within_its_jitter() -> None:
    b = RetryBackoff(initial_ms=500, max_ms=30_000, jitter=0.2)
    assert b.delay_ms(0, 0.5) == 0
    assert [b.delay_ms(n, 0.5) for n in (1, 2, 3, 4, 7, 8, 100)] == [
        500, 1000, 2000, 4000, 30_000, 30_000, 30_000]
    assert b.delay_ms(1, 0.0) == 400 and b.delay_ms(1, 0.999999) == 600
    for bad in ({"initial_ms": -1}, {"initial_ms": 10, "max_ms": 5}, {"jitter": 1.5}):
        with pytest.raises(ValueError):
            RetryBackoff(**bad)  # type: ignore[arg-type]


def test_failed_copies_are_retried_after_a_growing_pause_not_at_every_pass(
        tmp_path: Path) -> None:
    clock = ManualClock(10_000)
    log = tiered_log(tmp_path, clock, local_retention_bytes=0)
    fill(log, 9)
    storage = FlakyStorage(tmp_path / "remote")
    rlmm = FileRemoteLogMetadataManager(tmp_path / "remote" / "__remote_log_metadata")
    rlm = RemoteLogManager(1, storage, rlmm, clock,
                           backoff=RetryBackoff(initial_ms=1_000, max_ms=4_000, jitter=0.0))
    tries = []
    for _ in range(60):  # a pass every 100 ms for 6 s
        rlm.run_once([leader(log)])
        tries.append(storage.tries)
        clock.advance(100)
    # Tries at 0 s, 1 s and 3 s (pauses of 1 s, then 2 s, then 4 s, the cap): 3, not 60.
    assert storage.tries == 3, tries
    assert tries.index(2) == 10 and tries.index(3) == 30
    assert log.delete_old_segments() == 0  # nothing local went
    assert log.segment_base_offsets == (0, 2, 4, 6, 8)
    # The store recovers: the next try (4 s after the last failure) copies everything due,
    # and the pause is over for good.
    storage.down = False
    clock.advance(4_000)
    rlm.run_once([leader(log)])
    assert finished(rlm) == [(0, 1), (2, 3), (4, 5), (6, 7)]
    fill(log, 2)
    rlm.run_once([leader(log)])
    assert finished(rlm)[-1] == (8, 9)


def test_remote_retention_deletes_expired_segments_and_moves_the_log_start(
        tmp_path: Path) -> None:
    clock = ManualClock(10_000)
    log = tiered_log(tmp_path, clock, local_retention_bytes=0)
    fill(log, 4, ts=1_000)   # 0-1, 2-3
    fill(log, 5, ts=9_000)   # 4-5, 6-7, active 8
    rlm = manager(tmp_path, clock)
    rlm.copy_log_segments(leader(log))
    log.delete_old_segments()
    assert log.local_log_start_offset == 8
    log.reconfigure(LogConfig(segment_bytes=2 * ONE, remote_storage_enable=True,
                              retention_ms=5_000, local_retention_bytes=0))
    clock.set(10_000)
    assert rlm.expire_remote_segments(leader(log)) == 2
    assert finished(rlm) == [(4, 5), (6, 7)]
    assert log.log_start_offset == 4
    assert not [p for p in (tmp_path / "remote").rglob("00000000000000000000-*")]
    with pytest.raises(OffsetOutOfRangeError):
        rlm.read(TP, log, 1, 100, upto=9)
    assert rlm.read(TP, log, 4, 1, upto=9)  # what is kept still reads
    # By time: nothing below the log start is found any more, though its time is asked.
    assert rlm.find_offset_by_timestamp(TP, log, 0) == (9_000, 4, 0)
    assert rlm.find_offset_by_timestamp(TP, log, 9_001) is None  # not in the remote part


def fetch_at_log_start(rlm: RemoteLogManager, log: Log) -> bytes:
    """What a fetch at the log start (ListOffsets' EARLIEST answer) gets, as a broker serves
    it: from remote storage below the local log start, else from the local log."""
    offset = log.log_start_offset
    if offset < log.local_log_start_offset:
        data = rlm.read(TP, log, offset, 1, upto=log.log_end_offset)
        assert isinstance(data, bytes)
        return data
    return log.read(offset, 1).records


def test_remote_retention_moves_the_log_start_in_the_same_pass_past_local_copies(
        tmp_path: Path) -> None:
    """Retention deletes remote segments whose offsets the local log still holds (local
    retention runs on its own timer): the pass that deletes them moves the log start at once,
    as Kafka's does, and the local segments below it go with it, so that local retention
    afterwards never leaves the log start on an offset nothing serves."""
    clock = ManualClock(10_000)
    log = tiered_log(tmp_path, clock)
    fill(log, 4, ts=1_000)   # 0-1, 2-3
    fill(log, 5, ts=9_000)   # 4-5, 6-7, active 8
    rlm = manager(tmp_path, clock)
    rlm.run_once([leader(log)])
    assert finished(rlm) == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert (log.log_start_offset, log.local_log_start_offset) == (0, 0)
    log.reconfigure(LogConfig(segment_bytes=2 * ONE, remote_storage_enable=True,
                              retention_ms=5_000))
    rlm.run_once([leader(log)])
    assert finished(rlm) == [(4, 5), (6, 7)]
    assert (log.log_start_offset, log.local_log_start_offset) == (4, 4)
    assert validate_batches(fetch_at_log_start(rlm, log))[0][2] == 4
    log.delete_old_segments(high_watermark=9)  # the broker's local retention, later
    assert log.log_start_offset == 4
    assert validate_batches(fetch_at_log_start(rlm, log))[0][2] == 4


@pytest.mark.parametrize(("offset", "start", "bases"), [
    (3, 2, (2, 4, 6, 8)),    # inside a local segment: it stays, and holds the start
    (6, 6, (6, 8)),          # at a segment's base
    (9, 8, (8,)),            # past the active segment's base: the active one stays
    (0, 0, (0, 2, 4, 6, 8)),  # not past the start: nothing moves
])
def test_the_start_remote_retention_sets_drops_the_local_segments_below_it(
        tmp_path: Path, offset: int, start: int, bases: tuple[int, ...]) -> None:
    log = tiered_log(tmp_path, ManualClock(10_000))
    fill(log, 9)
    epochs_before = log.leader_epoch_cache.entries
    assert log.move_start_for_remote_retention(offset) == 5 - len(bases)
    assert (log.log_start_offset, log.segment_base_offsets) == (start, bases)
    assert log.leader_epoch_cache.entries[0].start_offset == start
    assert [e.epoch for e in log.leader_epoch_cache.entries] == [e.epoch for e in epochs_before]
    assert validate_batches(log.read(start, 1).records)[0][2] == start
    plain = Log.open(tmp_path / "plain" / "t-0", config=LogConfig(segment_bytes=2 * ONE))
    fill(plain, 9)
    assert plain.move_start_for_remote_retention(offset) == 0  # not tiered: left alone
    assert plain.segment_base_offsets == (0, 2, 4, 6, 8)


def test_remote_size_retention_counts_both_tiers(tmp_path: Path) -> None:
    clock = ManualClock(10_000)
    log = tiered_log(tmp_path, clock, local_retention_bytes=0)
    fill(log, 9)
    rlm = manager(tmp_path, clock)
    rlm.copy_log_segments(leader(log))
    log.delete_old_segments()
    # 4 remote segments (2 batches each) + the active one (1 batch): keep at most 5 batches.
    log.reconfigure(LogConfig(segment_bytes=2 * ONE, remote_storage_enable=True,
                              retention_ms=-1, retention_bytes=5 * ONE,
                              local_retention_bytes=0))
    assert rlm.expire_remote_segments(leader(log)) == 2
    assert finished(rlm) == [(4, 5), (6, 7)]
    assert log.log_start_offset == 4


def test_a_pass_compacts_the_metadata_of_what_retention_deleted(tmp_path: Path) -> None:
    """Retention deletes eight remote segments in a pass, which then sums their 32 metadata
    records up: after a restart the same segments are served and nothing is copied again."""
    clock = ManualClock(10_000)
    log = tiered_log(tmp_path, clock, local_retention_bytes=0)
    fill(log, 21)  # ten segments of two, active 20
    rlm = manager(tmp_path, clock)
    rlm.run_once([leader(log)])
    log.delete_old_segments()
    assert len(finished(rlm)) == 10
    log.reconfigure(LogConfig(segment_bytes=2 * ONE, remote_storage_enable=True,
                              retention_ms=-1, retention_bytes=5 * ONE,
                              local_retention_bytes=0))
    rlm.run_once([leader(log)])
    assert finished(rlm) == [(16, 17), (18, 19)]
    records = sorted(p.name for p in (tmp_path / "remote" / "__remote_log_metadata").rglob("*"))
    summaries = [n for n in records if n.startswith("compacted-")]
    assert len(summaries) == 1 and len(records) == 2 * 2 + 1 + 1  # and the partition's dir
    rlm.close()
    again = manager(tmp_path, clock)
    assert finished(again) == [(16, 17), (18, 19)]
    assert again.highest_copied_offset(leader(log)) == 19
    assert again.copy_log_segments(leader(log)) == 0
    assert again.read(TP, log, 16, ONE, upto=21)
    again.close()


def test_the_compaction_settings_say_when_a_pass_compacts(tmp_path: Path) -> None:
    """``partctl.remote.log.metadata.compaction.min.stale.records``: a pass whose retention left fewer
    records of deleted segments compacts nothing, one that left as many does;
    ``.delete.retention.ms``: a later compaction no longer names the segments deleted longer
    ago than that whose events are gone."""
    clock = ManualClock(10_000)
    log = tiered_log(tmp_path, clock, local_retention_bytes=0)
    fill(log, 21)  # ten segments of two, active 20
    metadata_dir = tmp_path / "remote" / "__remote_log_metadata"

    def summaries() -> list[dict[str, list[list[object]]]]:
        return [json.loads(p.read_bytes()) for p in metadata_dir.rglob("compacted-*")]

    rlm = manager(tmp_path, clock, compaction=MetadataCompaction(min_stale_records=33))
    rlm.run_once([leader(log)])
    log.delete_old_segments()

    def retain(segments: int) -> None:
        log.reconfigure(LogConfig(segment_bytes=2 * ONE, remote_storage_enable=True,
                                  retention_ms=-1, retention_bytes=(2 * segments + 1) * ONE,
                                  local_retention_bytes=0))

    retain(2)
    rlm.run_once([leader(log)])  # eight segments deleted: 32 records
    assert finished(rlm) == [(16, 17), (18, 19)]
    assert summaries() == []
    rlm.close()
    rlm = manager(tmp_path, clock, compaction=MetadataCompaction(min_stale_records=4,
                                                                 delete_retention_ms=1_000))
    rlm.run_once([leader(log)])
    (summary,) = summaries()
    assert len(summary["deleted"]) == 8
    clock.advance(1_001)
    retain(1)
    rlm.run_once([leader(log)])  # one more deleted: 4 records, and the 8 are forgotten
    assert finished(rlm) == [(18, 19)]
    (summary,) = summaries()
    assert len(summary["deleted"]) == 1
    assert rlm.highest_copied_offset(leader(log)) == 19
    rlm.close()


def test_a_zombie_segment_is_never_served_and_goes_when_the_log_start_passes_it(
        tmp_path: Path) -> None:
    clock = ManualClock(10_000)
    log = tiered_log(tmp_path, clock, local_retention_bytes=0)
    fill(log, 5)
    rlm = manager(tmp_path, clock)
    # A zombie leader at epoch 7, which this log never had, uploaded offsets 0-1.
    zombie = RemoteLogSegmentMetadata(
        segment_id=RemoteLogSegmentId.generate(TP), start_offset=0, end_offset=1,
        max_timestamp_ms=1_000, broker_id=3, event_timestamp_ms=1,
        segment_leader_epochs=((7, 0),), segment_size_in_bytes=10)
    rlm.metadata.add_remote_log_segment_metadata(zombie)
    rlm.metadata.update_remote_log_segment_metadata(RemoteLogSegmentMetadataUpdate(
        segment_id=zombie.segment_id, event_timestamp_ms=2, state=S.COPY_SEGMENT_FINISHED,
        broker_id=3))
    assert rlm.highest_copied_offset(leader(log)) == -1  # not this log's lineage
    rlm.copy_log_segments(leader(log))
    log.delete_old_segments()
    assert rlm.read(TP, log, 0, 1, upto=5)  # served from this lineage's copy
    log.reconfigure(LogConfig(segment_bytes=2 * ONE, remote_storage_enable=True,
                              retention_ms=5_000, local_retention_bytes=0))
    clock.set(100_000)
    rlm.expire_remote_segments(leader(log))
    assert zombie.segment_id not in {m.segment_id
                                     for m in rlm.metadata.list_remote_log_segments(TP)}


def test_the_log_start_offset_survives_a_reopen(tmp_path: Path) -> None:
    clock = ManualClock(10_000)
    log = tiered_log(tmp_path, clock, local_retention_bytes=0)
    fill(log, 9)
    rlm = manager(tmp_path, clock)
    rlm.copy_log_segments(leader(log))
    log.delete_old_segments()
    entries = log.leader_epoch_cache.entries
    start = log.log_start_offset
    log.close()
    again = Log.open(tmp_path / "logs" / "t-0", config=log.config, clock=clock,
                     log_start_offset=start)
    assert (again.log_start_offset, again.local_log_start_offset) == (0, 8)
    assert again.leader_epoch_cache.entries == entries  # the remote part's epochs kept
    assert rlm.read(TP, again, 0, 1, upto=9)


def test_a_tiered_log_without_a_checkpointed_start_reopens_at_0_until_the_remote_tier_says(
        tmp_path: Path) -> None:
    """A broker killed before it checkpointed the log start: the tiered log opens at 0 (not at
    its first local offset, which would hide the remote part for good), and the remote log
    manager's pass moves it to what remote storage holds."""
    clock = ManualClock(10_000)
    log = tiered_log(tmp_path, clock, local_retention_bytes=0)
    fill(log, 9)
    rlm = manager(tmp_path, clock)
    rlm.copy_log_segments(leader(log))
    log.delete_old_segments()
    entries = log.leader_epoch_cache.entries
    log.close()
    again = Log.open(tmp_path / "logs" / "t-0", config=log.config, clock=clock)
    assert (again.log_start_offset, again.local_log_start_offset) == (0, 8)
    assert again.leader_epoch_cache.entries == entries
    # Remote retention took the first remote segment meanwhile: the pass moves the start up.
    first = rlm.metadata.list_remote_log_segments(TP)[0]
    rlm._delete(first, "test")
    rlm.sync_remote_state(leader(again))
    assert again.log_start_offset == 2
    assert rlm.read(TP, again, 2, 1, upto=9)


def test_segments_below_the_leaders_known_epochs_are_left_to_time_retention(
        tmp_path: Path) -> None:
    """A replica that started from the local part of the log (its epochs begin there) and
    leads now cannot judge older remote segments against its lineage: it neither serves nor
    deletes them for that; retention.ms still applies."""
    clock = ManualClock(10_000)
    old = tiered_log(tmp_path / "old", clock)
    fill(old, 5)
    rlm = manager(tmp_path, clock)
    rlm.copy_log_segments(leader(old))  # 0-1, 2-3 in epoch 0
    new = tiered_log(tmp_path / "new", clock, retention_ms=60_000)
    new.truncate_fully_and_start_at(4)
    new.assign_leader_epoch(1)
    fill(new, 3, epoch=1)
    assert rlm.expire_remote_segments(leader(new, epoch=1)) == 0
    assert finished(rlm) == [(0, 1), (2, 3)]
    with pytest.raises(OffsetOutOfRangeError):
        rlm.read(TP, new, 0, 1, upto=7)
    clock.set(1_000 + 60_001)
    assert rlm.expire_remote_segments(leader(new, epoch=1)) == 2
    assert finished(rlm) == []


def test_a_copy_left_unfinished_by_a_killed_broker_is_never_served_and_cleaned_up(
        tmp_path: Path) -> None:
    clock = ManualClock(10_000)
    log = tiered_log(tmp_path, clock)
    fill(log, 5)

    class Killed(BaseException):
        pass

    def die(step: str) -> None:
        if step == "renamed-leader_epoch_checkpoint":
            raise Killed

    dying = manager(tmp_path, clock, broker_id=1,
                    storage=FileSystemRemoteStorageManager(tmp_path / "remote", stage=die))
    with pytest.raises(Killed):  # not an error it handles: the process is gone
        dying.copy_log_segments(leader(log))
    (orphan,) = dying.metadata.list_remote_log_segments(TP)
    assert orphan.state is S.COPY_SEGMENT_STARTED
    # What a kill leaves (the exception's cleanup would not have run): renamed indexes and a
    # temporary log file, no .log.
    directory = FileSystemRemoteStorageManager(tmp_path / "remote").partition_directory(orphan)
    stem = f"{orphan.start_offset:020d}-{orphan.segment_id.id}"
    for name in (f"{stem}.index", f"{stem}.timeindex", f"{stem}.log.tmp"):
        (directory / name).write_bytes(b"x")
    # The next leader never serves it, copies the offsets again, and deletes the orphan.
    rlm = manager(tmp_path, clock, broker_id=2)
    assert rlm.highest_copied_offset(leader(log)) == -1
    assert rlm.copy_log_segments(leader(log)) == 2
    assert rlm.expire_remote_segments(leader(log)) == 1
    assert [m.state for m in rlm.metadata.list_remote_log_segments(TP)] == [
        S.COPY_SEGMENT_FINISHED, S.COPY_SEGMENT_FINISHED]
    assert not [p for p in (tmp_path / "remote").rglob(f"*{orphan.segment_id.id}*")
                if "__remote_log_metadata" not in str(p)]


class RecordingStorage(FileSystemRemoteStorageManager):
    positions: list[int] = []

    def fetch_log_segment(self, metadata, start_position, end_position=None):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
        self.positions.append(start_position)
        return super().fetch_log_segment(metadata, start_position, end_position)


def test_remote_reads_start_where_the_remote_offset_index_points(tmp_path: Path) -> None:
    clock = ManualClock(10_000)
    log = Log.open(tmp_path / "logs" / "t-0", clock=clock, config=LogConfig(
        segment_bytes=10 * ONE, index_interval_bytes=1, remote_storage_enable=True,
        retention_ms=-1, local_retention_bytes=0))
    fill(log, 21)  # 0-9, 10-19, active 20
    before = whole(log)
    storage = RecordingStorage(tmp_path / "remote")
    rlm = manager(tmp_path, clock, storage=storage)
    assert rlm.copy_log_segments(leader(log)) == 2
    assert log.delete_old_segments() == 2
    for offset in (0, 7, 13, 19):
        got = rlm.read(TP, log, offset, ONE, upto=21)
        assert got == before[offset * ONE:(offset + 1) * ONE], offset
    # Every batch is indexed: each read starts right at its batch.
    assert storage.positions == [0, 7 * ONE, 3 * ONE, 9 * ONE]
    # More than one batch while they fit, never reaching upto.
    assert rlm.read(TP, log, 12, 3 * ONE, upto=21) == before[12 * ONE:15 * ONE]
    assert rlm.read(TP, log, 12, 10 * ONE, upto=14) == before[12 * ONE:14 * ONE]


def test_a_zero_copy_read_slices_the_same_bytes_a_copying_read_returns(tmp_path: Path) -> None:
    """From the filesystem store (whose segments are local files) a read may be a LogSlice of
    the remote file, found by reading batch headers only: the same bytes, for every offset,
    size and limit; a store without local files gives bytes."""
    clock = ManualClock(10_000)
    log = Log.open(tmp_path / "logs" / "t-0", clock=clock, config=LogConfig(
        segment_bytes=10 * ONE, index_interval_bytes=3 * ONE, remote_storage_enable=True,
        retention_ms=-1, local_retention_bytes=0))
    fill(log, 21)
    rlm = manager(tmp_path, clock)
    assert rlm.copy_log_segments(leader(log)) == 2
    assert log.delete_old_segments() == 2
    for offset in (0, 4, 9, 10, 15):
        for max_bytes, upto, min_one in (
                (1, 21, True), (1, 21, False), (ONE, 21, True), (ONE, 21, False),
                (3 * ONE + 1, 21, True), (1 << 20, 21, False), (1 << 20, offset + 2, True),
                (1 << 20, offset, True)):
            copied = rlm.read(TP, log, offset, max_bytes, upto, min_one=min_one)
            sliced = rlm.read(TP, log, offset, max_bytes, upto, zero_copy=True,
                              min_one=min_one)
            if isinstance(sliced, LogSlice):
                try:
                    assert sliced.read() == copied and sliced.first_offset <= offset
                finally:
                    sliced.close()
            else:
                assert sliced == copied == b"", (offset, max_bytes, upto)
            # Without min_one (a partition after the first of a fetch) a first batch that
            # does not fit is not sent.
            if not min_one:
                assert copied == (b"" if max_bytes < ONE else rlm.read(
                    TP, log, offset, max_bytes, upto)), (offset, max_bytes)

    class Streams:  # Kafka's interface only, as the S3 store
        def __init__(self, inner: FileSystemRemoteStorageManager) -> None:
            self.inner = inner

        def __getattr__(self, name: str) -> object:
            if name == "open_log_segment":
                raise AttributeError(name)
            return getattr(self.inner, name)

    plain = RemoteLogManager(1, Streams(FileSystemRemoteStorageManager(tmp_path / "remote")),  # type: ignore[arg-type]
                             rlm.metadata, clock)
    got = plain.read(TP, log, 0, ONE, 21, zero_copy=True)
    assert isinstance(got, bytes) and got == rlm.read(TP, log, 0, ONE, 21)


def test_the_largest_timestamp_of_the_remote_part(tmp_path: Path) -> None:
    """MAX_TIMESTAMP over the remote part: the first record with the largest timestamp, from
    the log start on (a batch the log start cuts counts only for its records above it)."""
    clock = ManualClock(10_000)
    log = tiered_log(tmp_path, clock, local_retention_bytes=0)
    # One batch of two records a segment: its timestamps, offsets 2i and 2i+1.
    for stamps in [(5_000, 1_000), (2_000, 2_001), (4_000, 5_000), (3_000, 3_001), (1, 2)]:
        log.append_as_leader(encode_batch([Record(key=b"k", value=b"v" * 100, timestamp=ts)
                                           for ts in stamps]), leader_epoch=0)
    rlm = manager(tmp_path, clock)
    assert rlm.copy_log_segments(leader(log)) == 4
    log.delete_old_segments()
    assert (log.log_start_offset, log.local_log_start_offset) == (0, 8)
    assert rlm.find_max_timestamp(TP, log) == (5_000, 0, 0)
    first, second, *_rest = rlm.metadata.list_remote_log_segments(TP)
    assert rlm._segment_max(first, 1) == (1_000, 1, 0)
    assert rlm._segment_max(second, 2) == (2_001, 3, 0)
    log.update_remote_state(highest_remote_offset=7, log_start_offset=2)
    assert rlm.find_max_timestamp(TP, log) == (5_000, 5, 0)
    log.update_remote_state(highest_remote_offset=7, log_start_offset=6)
    assert rlm.find_max_timestamp(TP, log) == (3_001, 7, 0)
    log.update_remote_state(highest_remote_offset=7, log_start_offset=8)
    assert rlm.find_max_timestamp(TP, log) is None
    rlm.close()
