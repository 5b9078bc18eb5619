"""DeleteRecords in the data plane: the pure rules (the offset named, the low watermark) and
the log start moving inside a segment, as Kafka's maybeIncrementLogStartOffset moves it."""

from pathlib import Path

import pytest

from replication.delete_records import low_watermark, resolve_delete_offset
from replication.errors import OffsetOutOfRangeError
from replication.log import Log, LogConfig

from ._util import batch

ONE = len(batch(1, value_size=100))


def open_log(tmp_path: Path, start: int | None = None, **config: object) -> Log:
    return Log.open(tmp_path / "t-0", config=LogConfig(segment_bytes=4 * ONE, **config),
                    log_start_offset=start)


def fill(log: Log, count: int, epoch_every: int = 0) -> None:
    for i in range(count):
        log.append_as_leader(batch(1, value_size=100),
                             leader_epoch=i // epoch_every if epoch_every else 0)


@pytest.mark.parametrize(("offset", "hw", "expected"), [
    (-1, 100, 100), (40, 100, 40), (0, 100, 0), (100, 100, 100), (101, 100, None),
    (-2, 100, None), (-1, 0, 0)])
def test_the_offset_named_is_the_hw_for_minus_one_and_never_above_it(
        offset: int, hw: int, expected: int | None) -> None:
    assert resolve_delete_offset(offset, hw) == expected


def test_the_low_watermark_is_the_lowest_log_start_over_live_replicas() -> None:
    live = {2, 3}.__contains__
    assert low_watermark(40, {2: 40, 3: 40}, live) == 40
    assert low_watermark(40, {2: 40, 3: 10}, live) == 10
    assert low_watermark(40, {2: 40, 3: -1}, live) == -1  # a follower not heard from yet
    assert low_watermark(40, {2: 40, 4: 0}, live) == 40  # broker 4 is not live
    assert low_watermark(40, {}, live) == 40


def test_the_log_start_moves_inside_a_segment_and_hides_what_is_below(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 10)  # segments 0-3, 4-7, 8-9
    assert log.maybe_increment_log_start_offset(6, high_watermark=10)
    assert (log.log_start_offset, log.local_log_start_offset) == (6, 6)
    assert log.segment_base_offsets == (0, 4, 8)  # the files go on the retention pass
    with pytest.raises(OffsetOutOfRangeError):
        log.read(5, 1 << 20)
    assert log.read(6, 1 << 20).first_offset == 6
    assert not log.maybe_increment_log_start_offset(3)  # never back
    assert log.log_start_offset == 6


def test_the_log_start_never_passes_the_high_watermark(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 10)
    assert log.maybe_increment_log_start_offset(9, high_watermark=7)
    assert log.log_start_offset == 7


def test_retention_deletes_the_segments_wholly_below_the_log_start_even_when_compacted(
        tmp_path: Path) -> None:
    log = open_log(tmp_path, cleanup_delete=False, compact=True, retention_ms=-1)
    fill(log, 10)
    log.maybe_increment_log_start_offset(9, high_watermark=10)
    assert log.delete_old_segments(now_ms=0, high_watermark=10) == 2
    assert log.segment_base_offsets == (8,)  # the active segment stays
    assert log.log_start_offset == 9


def test_the_epoch_cache_starts_at_the_new_log_start(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 10, epoch_every=3)  # epochs 0 at 0, 1 at 3, 2 at 6, 3 at 9
    log.maybe_increment_log_start_offset(4, high_watermark=10)
    assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] == [
        (1, 4), (2, 6), (3, 9)]


def test_a_checkpointed_log_start_inside_a_segment_survives_reopening(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 10)
    log.maybe_increment_log_start_offset(6, high_watermark=10)
    log.close()
    again = open_log(tmp_path, start=6)
    assert again.log_start_offset == 6
    with pytest.raises(OffsetOutOfRangeError):
        again.read(4, 1 << 20)
    again.close()
    beyond = open_log(tmp_path, start=50)  # never past the log end
    assert beyond.log_start_offset == 10


def test_a_truncation_below_the_log_start_moves_it_back(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 10)
    log.maybe_increment_log_start_offset(6, high_watermark=10)
    log.truncate_to(5)
    assert (log.log_start_offset, log.log_end_offset) == (5, 5)


def test_a_tiered_log_start_past_the_local_one_moves_the_local_start_with_it(
        tmp_path: Path) -> None:
    log = open_log(tmp_path, start=0, remote_storage_enable=True)
    fill(log, 10)
    assert (log.log_start_offset, log.local_log_start_offset) == (0, 0)
    log.maybe_increment_log_start_offset(6, high_watermark=10)
    assert (log.log_start_offset, log.local_log_start_offset) == (6, 6)
    # nothing is in remote storage, yet the segment wholly below the log start goes
    assert log.delete_old_segments(now_ms=0, high_watermark=10) == 1
    assert log.segment_base_offsets == (4, 8)
    assert log.log_start_offset == 6


def test_a_search_by_timestamp_never_answers_below_the_log_start(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for i in range(10):
        log.append_as_leader(batch(1, value_size=100, timestamp=1000 + i), leader_epoch=0)
    log.maybe_increment_log_start_offset(6, high_watermark=10)
    assert log.offset_for_timestamp(0) == 6
    assert log.offset_for_timestamp(1003) == 6
    assert log.offset_for_timestamp(1008) == 8
    assert log.offset_for_timestamp(2000) is None
