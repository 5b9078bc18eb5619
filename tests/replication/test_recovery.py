"""Crash recovery: torn and corrupt batches, missing and corrupt indexes, the marker."""

import os
import shutil
import struct
from pathlib import Path

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
    # Damage the first segment: below the recovery point it is trusted, not re-checked.
    first = segment_files(d)[0]
    data = bytearray(first.read_bytes())
    data[-3] ^= 0xFF
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
