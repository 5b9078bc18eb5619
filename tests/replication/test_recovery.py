"""Crash recovery: torn and corrupt batches, missing and corrupt indexes, the marker."""

import os
import random
import shutil
import struct
from pathlib import Path

import pytest

from coordinator.clock import ManualClock
from replication.log import Log, LogConfig
from replication.records import validate_batches

from ._util import batch

CONFIG = LogConfig(segment_bytes=2000, index_interval_bytes=200)


def crash(log: Log) -> Path:
    """The log's directory as a killed process would leave it: whatever reached the files, no
    buffered index entries, no clean-shutdown marker. Returns the copy to reopen."""
    crashed = log.directory.parent / "crashed" / log.directory.name
    shutil.copytree(log.directory, crashed)
    return crashed


def fill(directory: Path, batches: int = 40, epochs: tuple[int, ...] = (0,)) -> tuple[Log, list]:
    log = Log.open(directory, config=CONFIG)
    infos = []
    for i in range(batches):
        epoch = epochs[min(i * len(epochs) // batches, len(epochs) - 1)]
        infos.append(log.append_as_leader(batch(2, value_size=50), leader_epoch=epoch))
    return log, infos


def segment_files(directory: Path, suffix: str = ".log") -> list[Path]:
    return sorted(directory.glob(f"*{suffix}"))


def test_clean_close_leaves_the_marker_and_reopens_without_recovery(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log, _ = fill(d)
    log.close()
    assert (d / ".kafka_cleanshutdown").exists()
    reopened = Log.open(d, config=CONFIG)
    assert reopened.log_end_offset == 80
    assert not (d / ".kafka_cleanshutdown").exists()  # a crash from now on must be noticed
    assert len(validate_batches(reopened.read(0, 1 << 20).records)) > 0


def test_torn_last_batch_is_cut_off(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log, infos = fill(d, epochs=(1, 2))
    d = crash(log)
    last = segment_files(d)[-1]
    os.truncate(last, last.stat().st_size - 17)  # the crash hit mid-write
    recovered = Log.open(d, config=CONFIG)
    assert recovered.log_end_offset == infos[-2].last_offset + 1 == 78
    assert recovered.read(76, 1 << 20).next_offset == 78
    # The log takes appends again right where it was cut.
    assert recovered.append_as_leader(batch(1), leader_epoch=2).first_offset == 78


def test_torn_header_is_cut_off(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log, _ = fill(d, batches=3)
    d = crash(log)
    with open(segment_files(d)[-1], "ab") as f:
        f.write(batch(1)[:30])
    assert Log.open(d, config=CONFIG).log_end_offset == 6


def test_corrupt_crc_in_the_middle_cuts_there_and_drops_later_segments(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log, infos = fill(d, epochs=(1, 2, 3))
    bases = log.segment_base_offsets
    assert len(bases) >= 3
    d = crash(log)
    # Corrupt one byte inside the records of the 3rd batch of the second segment.
    second = segment_files(d)[1]
    data = bytearray(second.read_bytes())
    batches = validate_batches(data)
    pos, size, base, *_ = batches[2]
    data[pos + size - 5] ^= 0xFF
    second.write_bytes(bytes(data))
    recovered = Log.open(d, config=CONFIG)
    assert recovered.log_end_offset == base
    assert recovered.segment_base_offsets == bases[:2]
    assert [p.name for p in segment_files(d)] == [f"{b:020d}.log" for b in bases[:2]]
    assert len(segment_files(d, ".index")) == 2
    assert second.stat().st_size == pos
    # The epoch cache was cut to the recovered end: no epoch starts at or past it.
    assert all(e.start_offset < base for e in recovered.leader_epoch_cache.entries)
    assert recovered.end_offset_for_epoch(recovered.latest_epoch).end_offset == base


def test_recovery_rebuilds_the_epoch_cache_from_batches(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log, _ = fill(d, epochs=(1, 2, 3))
    expected = log.leader_epoch_cache.entries
    d = crash(log)
    (d / "leader-epoch-checkpoint").unlink()
    assert Log.open(d, config=CONFIG).leader_epoch_cache.entries == expected


def test_missing_index_is_rebuilt_after_clean_shutdown(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log, _ = fill(d)
    log.close()
    first_index = segment_files(d, ".index")[0]
    original = first_index.read_bytes()
    assert original
    first_index.unlink()
    reopened = Log.open(d, config=CONFIG)
    assert first_index.read_bytes() == original
    assert reopened.log_end_offset == 80
    assert reopened.read(5, 1).first_offset == 4


def test_corrupt_index_is_rebuilt_after_clean_shutdown(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log, _ = fill(d)
    log.close()
    index = segment_files(d, ".index")[0]
    original = index.read_bytes()
    index.write_bytes(original[:8] + struct.pack(">II", 1, 3) + original[16:])
    reopened = Log.open(d, config=CONFIG)
    assert index.read_bytes() == original
    for offset in range(0, 80, 7):
        result = reopened.read(offset, 1)
        assert result.first_offset <= offset < result.next_offset


def test_index_pointing_at_the_wrong_batch_is_rebuilt(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log, _ = fill(d)
    log.close()
    index = segment_files(d, ".index")[0]
    original = index.read_bytes()
    relative, position = struct.unpack_from(">II", original, len(original) - 8)
    index.write_bytes(original[:-8] + struct.pack(">II", relative + 1, position))
    Log.open(d, config=CONFIG)
    assert index.read_bytes() == original


def test_unclean_open_above_the_recovery_point_only_checks_later_segments(
    tmp_path: Path,
) -> None:
    d = tmp_path / "t-0"
    log, _ = fill(d)
    log.flush()
    point = log.recovery_point
    bases = log.segment_base_offsets
    d = crash(log)
    # Damage the first segment's first batch: below the recovery point, and below the segment's
    # last index entry, it is trusted, not re-checked (only the tail past that entry is).
    first = segment_files(d)[0]
    last_indexed = struct.unpack(">II", segment_files(d, ".index")[0].read_bytes()[-8:])[1]
    data = bytearray(first.read_bytes())
    _pos, size, *_ = validate_batches(data)[0]
    assert size <= last_indexed
    data[size - 3] ^= 0xFF
    first.write_bytes(bytes(data))
    recovered = Log.open(d, config=CONFIG, recovery_point=point)
    assert recovered.log_end_offset == 80
    assert recovered.segment_base_offsets == bases


def test_index_rebuild_that_meets_a_corrupt_batch_cuts_the_log_there(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log, _ = fill(d)
    bases = log.segment_base_offsets
    log.close()
    first = segment_files(d)[0]
    data = bytearray(first.read_bytes())
    pos, size, base, *_ = validate_batches(data)[3]
    data[pos + size - 1] ^= 0xFF
    first.write_bytes(bytes(data))
    segment_files(d, ".index")[0].unlink()
    reopened = Log.open(d, config=CONFIG)
    assert len(bases) > 1
    assert reopened.segment_base_offsets == (0,)
    assert reopened.log_end_offset == base
    assert len(segment_files(d)) == 1


def test_an_empty_log_closes_and_reopens_without_index_entries(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    Log.open(d, config=CONFIG).close()
    reopened = Log.open(d, config=CONFIG)
    assert reopened.log_end_offset == 0
    assert [p.stat().st_size for p in sorted(d.glob("*index"))] == [0, 0]
    reopened.append_as_leader(batch(timestamp=-1), leader_epoch=0)  # no timestamp at all
    reopened.close()
    assert Log.open(d, config=CONFIG).log_end_offset == 1
    assert (d / f"{0:020d}.timeindex").stat().st_size == 0


# -- the clean-shutdown marker is a hint: the tail it skips recovery for is still checked --------


def closed_log(directory: Path) -> tuple[list, Path, int]:
    """A cleanly closed log of 40 batches in epochs 1 and 2: its appends, its last segment file
    and that file's size."""
    log, infos = fill(directory, epochs=(1, 2))
    log.close()
    last = segment_files(directory)[-1]
    return infos, last, last.stat().st_size


def test_clean_shutdown_with_a_torn_last_batch_cuts_it_off(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    infos, last, size = closed_log(d)
    os.truncate(last, size - 37)
    reopened = Log.open(d, config=CONFIG)
    assert reopened.log_end_offset == infos[-2].last_offset + 1 == 78
    assert last.stat().st_size == size - infos[-1].size
    # Every offset below the end reads back as whole, valid batches.
    data = reopened.read(76, 1 << 20)
    assert data.next_offset == 78 and len(validate_batches(data.records)) == 1
    assert reopened.append_as_leader(batch(1), leader_epoch=2).first_offset == 78


def test_clean_shutdown_with_garbage_appended_keeps_the_log_end(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    _, last, size = closed_log(d)
    with open(last, "ab") as f:
        f.write(random.Random(14).randbytes(300))
    reopened = Log.open(d, config=CONFIG)
    assert reopened.log_end_offset == 80
    assert last.stat().st_size == size
    assert reopened.leader_epoch_cache.entries[-1].start_offset < 80


def _flip_crc(data: bytearray, pos: int, size: int) -> None:
    data[pos + size - 1] ^= 0xFF


def _bad_magic(data: bytearray, pos: int, size: int) -> None:
    data[pos + 16] = 1


def _repeat_offsets(data: bytearray, pos: int, size: int) -> None:
    data += data[pos : pos + size]  # a whole, valid batch, but its offsets go back


@pytest.mark.parametrize("damage", [_flip_crc, _bad_magic, _repeat_offsets])
def test_clean_shutdown_with_a_bad_last_batch_cuts_it_off(tmp_path: Path, damage) -> None:
    d = tmp_path / "t-0"
    infos, last, size = closed_log(d)
    data = bytearray(last.read_bytes())
    pos, batch_size, base, *_ = validate_batches(data)[-1]
    assert base == infos[-1].first_offset
    damage(data, pos, batch_size)
    last.write_bytes(bytes(data))
    reopened = Log.open(d, config=CONFIG)
    if damage is _repeat_offsets:
        assert (reopened.log_end_offset, last.stat().st_size) == (80, size)
    else:
        assert (reopened.log_end_offset, last.stat().st_size) == (base, pos)
    assert validate_batches(reopened.read(base - 2, 1 << 20).records)


# -- a corrupt leader-epoch-checkpoint is moved aside and rebuilt from the batches -------------


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "crashed"])
def test_corrupt_epoch_checkpoint_is_moved_aside_and_rebuilt_from_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, clean: bool
) -> None:
    d = tmp_path / "t-0"
    log, _ = fill(d, epochs=(1, 2, 3))
    expected = log.leader_epoch_cache.entries
    assert len(expected) == 3
    log.flush()
    point = log.recovery_point
    if clean:
        log.close()
    else:
        d = crash(log)
    checkpoint = d / "leader-epoch-checkpoint"
    checkpoint.write_bytes(b"0\n2\n3 10\n2 20\n")  # out of order
    with caplog.at_level("WARNING", logger="replication.log_loader"):
        reopened = Log.open(d, config=CONFIG, recovery_point=point, clock=ManualClock(1234))
    assert reopened.leader_epoch_cache.entries == expected
    assert reopened.log_end_offset == 80
    assert (d / "leader-epoch-checkpoint.corrupt-1234").read_bytes() == b"0\n2\n3 10\n2 20\n"
    assert checkpoint.read_bytes() == b"0\n3\n" + b"".join(
        f"{e.epoch} {e.start_offset}\n".encode() for e in expected)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and str(checkpoint) in warnings[0]


# -- below the recovery point, segments were flushed: Kafka trusts them and never cuts them -----

BROKER_INDEXING = LogConfig(segment_bytes=2000)  # a broker's index.interval.bytes (4096)


def flushed_then_more(directory: Path, flushed: int = 40) -> tuple[Log, int]:
    """A log of 43 batches of 2 records (11 batches a segment; epochs 1, 2, 3), flushed after
    the first ``flushed``: the log and its recovery point."""
    log = Log.open(directory, config=BROKER_INDEXING)
    for i in range(43):
        log.append_as_leader(batch(2, value_size=50), leader_epoch=1 + i // 15)
        if i + 1 == flushed:
            log.flush()
            point = log.recovery_point
    return log, point


def damage_segment(path: Path, index: int, damage) -> tuple[int, int, int]:
    """Damage batch ``index`` of the segment file ``path``; returns its position, size, base."""
    data = bytearray(path.read_bytes())
    pos, size, base, *_ = validate_batches(data)[index]
    damage(data, pos, size)
    path.write_bytes(bytes(data))
    return pos, size, base


def _flip_record_byte(data: bytearray, pos: int, size: int) -> None:
    data[pos + size - 5] ^= 0xFF  # inside a record: the CRC no longer matches


def _flip_length(data: bytearray, pos: int, size: int) -> None:
    data[pos + 8 : pos + 12] = (1 << 30).to_bytes(4, "big")  # runs past the end of the file


def all_batches(log: Log, start: int) -> list[tuple[int, int]]:
    """(base, last offset) of every batch read from ``start`` to the log end, each validated."""
    out, offset = [], start
    while offset < log.log_end_offset:
        result = log.read(offset, 1 << 20)
        out += [(b, b + d) for _p, _s, b, d, *_ in validate_batches(result.records)]
        offset = result.next_offset
    return out


@pytest.mark.parametrize("clean", [False, True], ids=["crashed", "clean"])
def test_a_damaged_batch_below_the_recovery_point_keeps_every_later_record(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, clean: bool
) -> None:
    d = tmp_path / "t-0"
    log, point = flushed_then_more(d)
    bases, end = log.segment_base_offsets, log.log_end_offset
    epochs = log.leader_epoch_cache.entries
    assert len(bases) >= 3 and len(epochs) == 3 and point < end
    if clean:
        log.close()
    else:
        d = crash(log)
    sizes = [p.stat().st_size for p in segment_files(d)]
    pos, size, base = damage_segment(segment_files(d)[0], 2, _flip_record_byte)
    damaged = segment_files(d)[0].read_bytes()[pos : pos + size]
    with caplog.at_level("WARNING", logger="replication.log_loader"):
        reopened = Log.open(d, config=BROKER_INDEXING, recovery_point=point)
    assert (reopened.log_end_offset, reopened.segment_base_offsets) == (end, bases)
    assert [p.stat().st_size for p in segment_files(d)] == sizes
    assert reopened.leader_epoch_cache.entries == epochs
    # Every batch past the damaged one reads back whole, in order, to the log end.
    after = all_batches(reopened, base + 2)
    assert after[0][0] == base + 2 and after[-1][1] == end - 1
    assert all(b == last + 1 for (_, last), (b, _) in zip(after, after[1:], strict=False))
    # The damaged batch is served as it is on disk (the consumer sees the CRC error, as from
    # Kafka), and the log takes appends at its end.
    assert reopened.read(base, 1).records == damaged
    assert reopened.append_as_leader(batch(1), leader_epoch=3).first_offset == end
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1
    assert f"segment {bases[0]}" in warnings[0] and f"offset {base}" in warnings[0]


def test_a_batch_below_the_recovery_point_that_breaks_the_framing_keeps_later_segments(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    d = tmp_path / "t-0"
    log, point = flushed_then_more(d)
    bases, end = log.segment_base_offsets, log.log_end_offset
    d = crash(log)
    first = segment_files(d)[0]
    size_before = first.stat().st_size
    _pos, _size, base = damage_segment(first, 3, _flip_length)
    with caplog.at_level("WARNING", logger="replication.log_loader"):
        reopened = Log.open(d, config=BROKER_INDEXING, recovery_point=point)
    assert (reopened.log_end_offset, reopened.segment_base_offsets) == (end, bases)
    assert first.stat().st_size == size_before  # nothing cut from the file
    # What precedes the break reads; a read inside the unreadable part moves on to the next
    # segment; every later record is there.
    assert all_batches(reopened, 0)[-1][1] == end - 1
    assert reopened.read(base, 1 << 20).first_offset == bases[1]
    assert all_batches(reopened, bases[1])[0][0] == bases[1]
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "do not frame a batch" in warnings[0]
    # Truncated back into it, as a follower may be, the segment drops the unreadable bytes
    # before taking appends again.
    reopened.truncate_to(2)
    assert reopened.append_as_leader(batch(1), leader_epoch=3).first_offset == 2
    assert [b for b, _ in all_batches(reopened, 0)] == [0, 2]


def test_damage_above_the_recovery_point_is_still_cut_and_below_it_kept(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log, point = flushed_then_more(d, flushed=20)
    bases = log.segment_base_offsets
    d = crash(log)
    files = segment_files(d)
    _pos, _size, below = damage_segment(files[0], 1, _flip_record_byte)
    # The segment holding the recovery point is recovered, as Kafka recovers it: cut at the
    # damaged batch, every later segment dropped.
    holding = max(i for i, b in enumerate(bases) if b <= point)
    assert 0 < holding < len(bases) - 1
    pos, _size, above = damage_segment(files[holding], 2, _flip_record_byte)
    reopened = Log.open(d, config=BROKER_INDEXING, recovery_point=point)
    assert reopened.log_end_offset == above
    assert reopened.segment_base_offsets == bases[: holding + 1]
    assert files[holding].stat().st_size == pos
    assert all(e.start_offset < above for e in reopened.leader_epoch_cache.entries)
    assert all_batches(reopened, below + 2)[-1][1] == above - 1


def test_a_follower_copies_from_a_log_with_damage_below_the_recovery_point(
    tmp_path: Path,
) -> None:
    """A follower caught up past the damage fetches on, and its epochs match the leader's."""
    log, point = flushed_then_more(tmp_path / "t-0")
    d = crash(log)
    follower = Log.open(tmp_path / "f" / "t-0", config=BROKER_INDEXING)
    for_follower = Log.open(d, config=BROKER_INDEXING)  # an undamaged copy, up to the point
    offset = 0
    while offset < point:
        result = for_follower.read(offset, 1 << 20, upto=point)
        follower.append_as_follower(result.records)
        offset = result.next_offset
    for_follower.close()
    (d / ".kafka_cleanshutdown").unlink()
    damage_segment(segment_files(d)[0], 2, _flip_record_byte)
    leader = Log.open(d, config=BROKER_INDEXING, recovery_point=point)
    while offset < leader.log_end_offset:
        result = leader.read(offset, 1 << 20)
        follower.append_as_follower(result.records)
        offset = result.next_offset
    assert follower.log_end_offset == leader.log_end_offset
    assert follower.leader_epoch_cache.entries == leader.leader_epoch_cache.entries
    assert leader.end_offset_for_epoch(2) == follower.end_offset_for_epoch(2)
