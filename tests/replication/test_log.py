"""Appends, reads through the sparse index across segment rolls, rolling and truncation."""

import struct
from pathlib import Path

import crc32c
import pytest

from coordinator.clock import ManualClock
from replication.errors import (
    CorruptRecordError,
    InvalidEpochError,
    OffsetOutOfRangeError,
    OutOfOrderOffsetError,
    RecordTooLargeError,
)
from replication.log import Log, LogConfig
from replication.records import decode_batch, read_batch_header, validate_batches

from ._util import batch


def open_log(tmp_path: Path, **config: int) -> Log:
    return Log.open(tmp_path / "topic-0", config=LogConfig(**config), clock=ManualClock())


def offsets_in(data: bytes) -> list[int]:
    out = []
    for pos, *_ in validate_batches(data):
        out.extend(r.offset for r in decode_batch(data, pos).records)
    return out


def files(log: Log, suffix: str) -> list[str]:
    return sorted(p.name for p in log.directory.glob(f"*{suffix}"))


def test_leader_append_assigns_offsets_and_stamps_the_epoch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    first = log.append_as_leader(batch(3, base=777), leader_epoch=4)
    second = log.append_as_leader(bytearray(batch(2)), leader_epoch=4)
    assert (first.first_offset, first.last_offset) == (0, 2)
    assert (second.first_offset, second.last_offset) == (3, 4)
    assert log.log_end_offset == 5
    data = log.read(0, 1 << 20).records
    headers = [read_batch_header(data, pos) for pos, *_ in validate_batches(data)]
    assert [(h.base_offset, h.partition_leader_epoch) for h in headers] == [(0, 4), (3, 4)]
    assert offsets_in(data) == [0, 1, 2, 3, 4]
    assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] == [(4, 0)]


def test_a_multi_batch_append_is_stamped_batch_by_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(2) + batch(4) + batch(1), leader_epoch=0)
    assert offsets_in(log.read(0, 1 << 20).records) == list(range(7))


def test_corrupt_input_is_rejected_and_changes_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(2), leader_epoch=1)
    before = sorted((p.name, p.read_bytes()) for p in log.directory.iterdir())
    bad = bytearray(batch(2) + batch(2))
    bad[-3] ^= 1  # the second batch is corrupt: the first must not be written either
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(bad, leader_epoch=2)
    with pytest.raises(CorruptRecordError):
        log.append_as_follower(bytes(bad))
    assert log.log_end_offset == 2
    assert log.latest_epoch == 1
    assert sorted((p.name, p.read_bytes()) for p in log.directory.iterdir()) == before


def test_leader_refuses_a_batch_whose_count_disagrees_with_its_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    bad = bytearray(batch(3))
    struct.pack_into(">i", bad, 57, 2)  # recordsCount 2, lastOffsetDelta 2
    struct.pack_into(">I", bad, 17, crc32c.crc32c(bytes(bad[21:])))
    with pytest.raises(CorruptRecordError, match="holds 2 records"):
        log.append_as_leader(bad, leader_epoch=0)
    assert log.log_end_offset == 0


def test_leader_append_with_an_older_epoch_is_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(), leader_epoch=5)
    with pytest.raises(InvalidEpochError):
        log.append_as_leader(batch(), leader_epoch=4)
    assert log.log_end_offset == 1


def test_becoming_leader_in_an_older_epoch_than_the_log_holds_is_refused(tmp_path: Path) -> None:
    # The epoch cache alone would take it (Kafka's rule) and drop epoch 5's entry, leaving its
    # batches ahead of epoch 4's, which no follower could copy; the log refuses instead.
    log = open_log(tmp_path)
    log.append_as_leader(batch(), leader_epoch=5)
    before = log.leader_epoch_cache.entries
    with pytest.raises(InvalidEpochError):
        log.assign_leader_epoch(4)
    assert log.leader_epoch_cache.entries == before


def test_follower_append_keeps_offsets_and_epochs_and_checks_order(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_follower(batch(2, base=0, epoch=1) + batch(3, base=2, epoch=3))
    assert log.log_end_offset == 5
    assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] == [(1, 0), (3, 2)]
    with pytest.raises(OutOfOrderOffsetError):
        log.append_as_follower(batch(1, base=4, epoch=3))
    with pytest.raises(InvalidEpochError):
        log.append_as_follower(batch(1, base=5, epoch=2))
    with pytest.raises(OutOfOrderOffsetError):  # offsets inside one append must increase too
        log.append_as_follower(batch(2, base=5, epoch=3) + batch(1, base=6, epoch=3))
    assert log.log_end_offset == 5
    log.append_as_follower(batch(1, base=5, epoch=3))
    assert log.log_end_offset == 6


def test_reads_find_every_offset_through_the_index_across_segment_rolls(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=2500, index_interval_bytes=300)
    sizes = [1, 3, 2, 5, 1, 4]
    offset = 0
    starts = {}
    for i in range(60):
        n = sizes[i % len(sizes)]
        info = log.append_as_leader(batch(n, value_size=40), leader_epoch=0)
        for o in range(info.first_offset, info.last_offset + 1):
            starts[o] = info.first_offset
        offset = info.last_offset + 1
    assert len(log.segment_base_offsets) > 3
    assert files(log, ".log") == [f"{b:020d}.log" for b in log.segment_base_offsets]
    # The indexes are sparse: fewer entries than batches, but some in every full segment.
    log.flush()
    index_sizes = [p.stat().st_size for p in sorted(log.directory.glob("*.index"))]
    assert all(0 < s < 60 * 8 for s in index_sizes[:-1])
    for o in range(offset):
        result = log.read(o, 1)  # max_bytes 1: exactly the batch holding o
        found = offsets_in(result.records)
        assert result.first_offset == starts[o]
        assert found[0] == starts[o] and o in found
        assert result.next_offset == found[-1] + 1


def test_read_returns_whole_batches_up_to_max_bytes(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    one = len(batch(2, value_size=100))
    for _ in range(10):
        log.append_as_leader(batch(2, value_size=100), leader_epoch=0)
    result = log.read(4, 3 * one + one // 2)
    assert len(result.records) == 3 * one
    assert offsets_in(result.records) == [4, 5, 6, 7, 8, 9]
    assert result.next_offset == 10
    # A batch larger than max_bytes still comes back whole, so a consumer makes progress.
    assert offsets_in(log.read(5, 10).records) == [4, 5]


def test_read_never_returns_batches_at_or_past_upto(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for _ in range(5):
        log.append_as_leader(batch(2), leader_epoch=0)
    assert offsets_in(log.read(0, 1 << 20, upto=6).records) == [0, 1, 2, 3, 4, 5]
    # A high watermark inside a batch keeps that batch back.
    assert offsets_in(log.read(0, 1 << 20, upto=5).records) == [0, 1, 2, 3]
    empty = log.read(6, 1 << 20, upto=6)
    assert (empty.records, empty.next_offset) == (b"", 6)
    assert log.read(10, 100).records == b""  # at the log end: nothing yet


def test_reads_outside_the_log_are_out_of_range(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(2), leader_epoch=0)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(3, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)


def test_segment_rolls_on_size(tmp_path: Path) -> None:
    one = len(batch(1, value_size=100))
    log = open_log(tmp_path, segment_bytes=3 * one)
    for _ in range(7):
        log.append_as_leader(batch(1, value_size=100), leader_epoch=0)
    assert log.segment_base_offsets == (0, 3, 6)
    assert all(p.stat().st_size <= 3 * one for p in log.directory.glob("*.log"))
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader(batch(5, value_size=100), leader_epoch=0)


def test_segment_rolls_on_age_in_record_time(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_ms=1000)
    log.append_as_leader(batch(timestamp=10_000), leader_epoch=0)
    log.append_as_leader(batch(timestamp=11_000), leader_epoch=0)  # exactly 1000: not older
    log.append_as_leader(batch(timestamp=11_001), leader_epoch=0)
    assert log.segment_base_offsets == (0, 2)


def test_segment_rolls_on_wall_clock_age_without_timestamps(tmp_path: Path) -> None:
    clock = ManualClock()
    log = Log.open(tmp_path / "t-0", config=LogConfig(segment_ms=1000), clock=clock)
    log.append_as_leader(batch(timestamp=-1), leader_epoch=0)
    clock.advance(1001)
    log.append_as_leader(batch(timestamp=-1), leader_epoch=0)
    assert log.segment_base_offsets == (0, 1)


def test_truncate_to_removes_later_segments_and_epochs(tmp_path: Path) -> None:
    one = len(batch(2))
    log = open_log(tmp_path, segment_bytes=2 * one)
    for i in range(6):
        log.append_as_leader(batch(2), leader_epoch=i // 2)
    assert log.segment_base_offsets == (0, 4, 8)
    assert log.truncate_to(5)  # inside batch 4..5: that batch goes
    assert log.log_end_offset == 4
    assert log.segment_base_offsets == (0, 4)
    assert files(log, ".log") == [f"{0:020d}.log", f"{4:020d}.log"]
    # Epoch 1 began at offset 4: nothing of it is left.
    assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] == [(0, 0)]
    assert offsets_in(log.read(0, 1 << 20).records) == [0, 1, 2, 3]
    assert not log.truncate_to(10)
    log.append_as_follower(batch(2, base=4, epoch=7))
    assert offsets_in(log.read(4, 1 << 20).records) == [4, 5]


def test_truncate_fully_and_start_at(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(3), leader_epoch=2)
    log.truncate_fully_and_start_at(1000)
    assert (log.log_start_offset, log.log_end_offset) == (1000, 1000)
    assert log.leader_epoch_cache.entries == ()
    assert files(log, ".log") == [f"{1000:020d}.log"]
    log.append_as_follower(batch(1, base=1000, epoch=3))
    assert log.read(1000, 100).first_offset == 1000


def test_leader_answers_offsets_for_leader_epoch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(3), leader_epoch=1)
    log.assign_leader_epoch(4)
    assert log.end_offset_for_epoch(1).end_offset == 3
    log.append_as_leader(batch(2), leader_epoch=4)
    assert (log.end_offset_for_epoch(3).epoch, log.end_offset_for_epoch(3).end_offset) == (1, 3)
    assert log.end_offset_for_epoch(4).end_offset == 5
    view = log.epoch_view()
    assert (view.log_start_offset, view.log_end_offset, len(view.entries)) == (0, 5, 2)


def test_offset_for_timestamp_uses_the_time_index(tmp_path: Path) -> None:
    log = open_log(tmp_path, index_interval_bytes=100, segment_bytes=2000)
    for i in range(40):
        log.append_as_leader(batch(1, value_size=50, timestamp=1000 + 10 * i), leader_epoch=0)
    assert len(log.segment_base_offsets) > 1
    assert log.offset_for_timestamp(0) == 0
    assert log.offset_for_timestamp(1205) == 21
    assert log.offset_for_timestamp(1390) == 39
    assert log.offset_for_timestamp(1391) is None
