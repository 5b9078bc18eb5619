"""Idempotent producers in the log and on leaders: a retried batch is answered with its original
offsets and written once; gaps and fenced epochs are refused before anything is written; the
state is snapshotted at rolls and on close, survives restarts, crashes and corrupt snapshots,
and follows truncation and retention."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from coordinator.clock import ManualClock
from replication.crash import cut_unflushed
from replication.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    OutOfOrderSequenceError,
    UnknownProducerIdError,
)
from replication.log import Log, LogConfig
from replication.producer_state import decode_snapshot, snapshot_file_name
from replication.records import Record, encode_batch

from ._util import idempotent_batch


def open_log(directory: Path, **config: int) -> Log:
    return Log.open(directory / "t-0", config=LogConfig(**config), clock=ManualClock())


def plain(n: int = 1) -> bytes:
    return encode_batch([Record(key=None, value=b"p%d" % i, timestamp=1_000) for i in range(n)])


def files(log: Log) -> list[tuple[str, bytes]]:
    return sorted((p.name, p.read_bytes()) for p in log.directory.iterdir())


def fill(log: Log, batches: int, *, n: int = 2, pid: int = 7) -> None:
    """``batches`` batches of ``n`` records from ``pid``, sequences from 0."""
    for i in range(batches):
        log.append_as_leader(idempotent_batch(i * n, n, pid=pid), leader_epoch=0)


# -- the leader's append ------------------------------------------------------------------------


def test_a_retried_batch_gets_its_original_offsets_and_is_not_written_again(
    tmp_path: Path
) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(plain(2), leader_epoch=0)
    first = log.append_as_leader(idempotent_batch(0, 3, timestamp=4_242), leader_epoch=0)
    assert (first.first_offset, first.last_offset, first.duplicate) == (2, 4, False)
    size = log.size_bytes
    again = log.append_as_leader(idempotent_batch(0, 3, timestamp=4_242), leader_epoch=0)
    assert (again.first_offset, again.last_offset) == (2, 4)
    assert again.duplicate and again.batches == 0 and again.log_append_time == 4_242
    assert (log.log_end_offset, log.size_bytes) == (5, size)
    following = log.append_as_leader(idempotent_batch(3, 1), leader_epoch=0)
    assert following.first_offset == 5


def test_batches_without_a_producer_id_are_appended_every_time(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    data = plain(2)
    assert [log.append_as_leader(data, leader_epoch=0).first_offset for _ in range(3)] == [0, 2, 4]
    assert log.producer_entries() == {}


def test_only_the_last_five_batches_are_recognised_as_retries(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 6)
    for i in range(1, 6):
        retry = log.append_as_leader(idempotent_batch(i * 2, 2), leader_epoch=0)
        assert retry.duplicate and retry.first_offset == i * 2
    with pytest.raises(OutOfOrderSequenceError):  # batch 0 is no longer retained
        log.append_as_leader(idempotent_batch(0, 2), leader_epoch=0)
    assert log.log_end_offset == 12


@pytest.mark.parametrize(("data", "error"), [
    pytest.param(idempotent_batch(5), OutOfOrderSequenceError, id="gap"),  # 3 expected
    pytest.param(idempotent_batch(2), OutOfOrderSequenceError, id="inside-the-last-batch"),
    pytest.param(idempotent_batch(3, epoch=1), OutOfOrderSequenceError, id="new-epoch-not-at-0"),
    pytest.param(idempotent_batch(3, epoch=-1), InvalidProducerEpochError, id="older-epoch"),
    pytest.param(idempotent_batch(3) + idempotent_batch(4), InvalidRecordError,
                 id="two-batches"),
    pytest.param(idempotent_batch(-1, pid=8), InvalidRecordError, id="no-sequence"),
])
def test_a_refused_batch_changes_nothing(tmp_path: Path, data: bytes, error: type) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(idempotent_batch(0, 3), leader_epoch=0)
    log.flush()
    before, state = files(log), log.producer_entries()
    with pytest.raises(error):
        log.append_as_leader(data, leader_epoch=0)
    log.flush()
    assert files(log) == before and log.producer_entries() == state
    assert log.log_end_offset == 3


def test_a_new_epoch_fences_the_old_one(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(idempotent_batch(0, 2, epoch=0), leader_epoch=0)
    bumped = log.append_as_leader(idempotent_batch(0, 1, epoch=1), leader_epoch=0)
    assert bumped.first_offset == 2 and not bumped.duplicate
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(idempotent_batch(2, 1, epoch=0), leader_epoch=0)
    with pytest.raises(InvalidProducerEpochError):  # not even a retry of the old epoch's batch
        log.append_as_leader(idempotent_batch(0, 2, epoch=0), leader_epoch=0)


def test_a_follower_builds_the_state_from_what_it_replicates(tmp_path: Path) -> None:
    leader = Log.open(tmp_path / "a" / "t-0", clock=ManualClock())
    follower = Log.open(tmp_path / "b" / "t-0", clock=ManualClock())
    fill(leader, 3, pid=7)
    fill(leader, 2, pid=9)
    leader.append_as_leader(plain(), leader_epoch=0)
    follower.append_as_follower(leader.read(0, 1 << 20).records)
    assert follower.producer_entries() == leader.producer_entries()
    # promoted, the follower recognises the old leader's batch when the producer retries it
    follower.assign_leader_epoch(1)
    retry = follower.append_as_leader(idempotent_batch(4, 2, pid=7), leader_epoch=1)
    assert retry.duplicate and (retry.first_offset, retry.last_offset) == (4, 5)
    assert follower.log_end_offset == leader.log_end_offset


# -- snapshots and recovery ---------------------------------------------------------------------


def snapshots(log: Log) -> list[int]:
    return sorted(int(p.name[:20]) for p in log.directory.glob("*.snapshot"))


def test_snapshots_are_taken_at_segment_rolls_and_on_close(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=400)  # four batches per segment
    fill(log, 10)
    bases = list(log.segment_base_offsets)
    assert len(bases) > 2
    assert snapshots(log) == bases[1:] == list(log.producer_snapshot_offsets)
    state, end = log.producer_entries(), log.log_end_offset
    log.close()
    assert snapshots(log) == [*bases[1:], end]
    at_end = decode_snapshot((log.directory / snapshot_file_name(end)).read_bytes())
    # a snapshot keeps each producer's last batch (as Kafka's)
    assert [(e.producer_id, e.epoch, e.batches) for e in at_end] == [
        (7, 0, state[7].batches[-1:])]


def test_the_state_survives_a_clean_restart(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=400)
    fill(log, 8)
    fill(log, 2, pid=9)
    state = log.producer_entries()
    log.close()
    log = open_log(tmp_path, segment_bytes=400)
    assert {pid: e.batches[-1] for pid, e in log.producer_entries().items()} == {
        pid: e.batches[-1] for pid, e in state.items()}
    retry = log.append_as_leader(idempotent_batch(2, 2, pid=9), leader_epoch=0)
    assert retry.duplicate and retry.first_offset == state[9].last_offset - 1


@pytest.mark.parametrize("recovery_point", [16, 0])
def test_after_a_crash_recovery_rebuilds_the_state_from_the_last_snapshot_before_it(
    tmp_path: Path, recovery_point: int
) -> None:
    log = open_log(tmp_path, segment_bytes=400)
    fill(log, 10)  # segments at 0, 8 and 16: the last holds two batches
    state, end = log.producer_entries(), log.log_end_offset
    log.close(clean=False)  # a killed process: no snapshot at the end, no marker
    assert snapshots(log) == [8, 16]
    log = Log.open(tmp_path / "t-0", config=LogConfig(segment_bytes=400), clock=ManualClock(),
                   recovery_point=recovery_point)
    entry = log.producer_entry(7)
    assert entry is not None
    if recovery_point == 16:
        # the snapshot at 16 (each producer's last batch, as Kafka keeps), then the two batches
        # of the segment recovery walks
        assert entry.batches == state[7].batches[-3:]
    else:  # recovery walks the whole log: everything back
        assert entry == state[7]
    assert snapshots(log) == [8, 16, end]  # snapshotted: the next open need not replay
    for seq in (14, 16, 18):
        assert log.append_as_leader(idempotent_batch(seq, 2), leader_epoch=0).duplicate


def test_after_a_power_failure_the_state_is_what_the_log_kept(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=400)
    fill(log, 4)
    log.flush()
    flushed = log.log_end_offset
    fill(log, 5)  # rolls: snapshots past what will survive
    log.close(clean=False)
    cut_unflushed(log.directory, flushed)
    log = open_log(tmp_path, segment_bytes=400)
    assert log.log_end_offset == flushed
    assert all(offset <= flushed for offset in snapshots(log))
    entry = log.producer_entry(7)
    assert entry is not None and (entry.last_seq, entry.last_offset) == (7, 7)
    # the producer's lost batches are taken again, at new offsets
    assert not log.append_as_leader(idempotent_batch(8, 2), leader_epoch=0).duplicate


@pytest.mark.parametrize("clean", [True, False])
def test_a_corrupt_snapshot_is_moved_aside_and_the_state_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, clean: bool
) -> None:
    log = open_log(tmp_path, segment_bytes=400)
    fill(log, 10)
    state, end = log.producer_entries(), log.log_end_offset
    log.close(clean=clean)  # the latest snapshot: at the end (20) after a clean close, else 16
    latest = log.directory / snapshot_file_name(snapshots(log)[-1])
    latest.write_bytes(b"\x00\x01garbage")
    with caplog.at_level(logging.WARNING, logger="replication.producer_state"):
        log = Log.open(tmp_path / "t-0", config=LogConfig(segment_bytes=400), clock=ManualClock(),
                       recovery_point=16)
    assert "is corrupt" in caplog.text
    assert log.log_end_offset == end
    assert log.producer_entry(7).last_offset == state[7].last_offset  # type: ignore[union-attr]
    for seq in (16, 18):  # rebuilt from the snapshot before, and the log after it
        assert log.append_as_leader(idempotent_batch(seq, 2), leader_epoch=0).duplicate
    assert list(log.directory.glob(f"{latest.name}.corrupt-*"))
    # and the rebuilt state is snapshotted at the end, whole
    assert decode_snapshot((log.directory / snapshot_file_name(end)).read_bytes())


def test_a_log_without_snapshots_is_read_once_on_open(tmp_path: Path) -> None:
    """A log written before producer state was kept (no snapshots): its batch headers are read
    on open, across the reads' window (200 batches of 40 records, 125 KiB), then snapshotted."""
    log = open_log(tmp_path)
    for i in range(200):
        log.append_as_leader(idempotent_batch(i // 2 * 40, 40, pid=3 + i % 2), leader_epoch=0)
    state = log.producer_entries()
    log.close()
    assert log.size_bytes > 64 << 10  # the window
    for path in log.directory.glob("*.snapshot"):
        path.unlink()
    log = open_log(tmp_path)
    assert log.producer_entries() == state
    assert snapshots(log) == [log.log_end_offset]


# -- truncation and retention -------------------------------------------------------------------


def test_truncation_takes_the_producer_state_back(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=400)
    fill(log, 9)  # offsets 0..17, sequences 0..17
    log.truncate_to(9)  # inside the batch at 8..9: it goes too
    assert log.log_end_offset == 8
    entry = log.producer_entry(7)
    assert entry is not None and (entry.last_seq, entry.last_offset) == (7, 7)
    assert all(offset <= 8 for offset in snapshots(log))
    # the batches cut off are not retries any more: the producer's resend is appended
    resent = log.append_as_leader(idempotent_batch(8, 2), leader_epoch=0)
    assert (resent.first_offset, resent.duplicate) == (8, False)
    log.truncate_fully_and_start_at(20)
    assert log.producer_entries() == {} and snapshots(log) == []
    with pytest.raises(UnknownProducerIdError):  # unknown now: from sequence 0 only
        log.append_as_leader(idempotent_batch(40, 2), leader_epoch=0)
    fresh = log.append_as_leader(idempotent_batch(0, 2), leader_epoch=0)
    assert fresh.first_offset == 20


def test_retention_deletes_the_snapshots_below_the_log_start(tmp_path: Path) -> None:
    clock = ManualClock()
    log = Log.open(tmp_path / "t-0", config=LogConfig(segment_bytes=400, retention_bytes=100),
                   clock=clock)
    fill(log, 12)
    assert snapshots(log) == [8, 16]
    assert log.delete_old_segments() == 2
    assert log.log_start_offset == 16 and snapshots(log) == [16]
    assert log.producer_entry(7) is not None  # the state itself stays (as Kafka's)
