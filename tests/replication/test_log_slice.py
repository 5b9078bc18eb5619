"""Log.read_slice: where a fetch's bytes lie in a segment file, for sendfile, without reading
them; the region Kafka's broker hands to sendfile (from the batch holding the offset, at most
max_bytes but the whole first batch, never reaching the bound, maybe ending inside a batch)."""

from __future__ import annotations

from pathlib import Path

import pytest

from replication.errors import OffsetOutOfRangeError
from replication.log import Log, LogConfig
from replication.records import validate_batches

from ._util import batch


def filled(tmp_path: Path, batches: int = 5, records: int = 3, **config: int) -> Log:
    log = Log.open(tmp_path / "t-0", config=LogConfig(**config))
    for _ in range(batches):
        log.append_as_leader(batch(records, value_size=50), leader_epoch=0)
    return log


def sliced(log: Log, *args: int, **kwargs: bool) -> bytes | None:
    s = log.read_slice(*args, **kwargs)
    if s is None:
        return None
    try:
        assert len(s) == s.size and s.size > 0
        return s.read()
    finally:
        s.close()


def test_a_slice_holds_what_a_read_returns(tmp_path: Path) -> None:
    log = filled(tmp_path)
    everything = log.read(0, 1 << 20).records
    assert sliced(log, 0, 1 << 20) == everything
    s = log.read_slice(4, 1 << 20)  # offset 4 is inside the second batch
    assert s is not None
    assert s.first_offset == 3
    assert s.read() == log.read(4, 1 << 20).records
    s.close()
    assert s.fd == -1


def test_a_slice_stops_before_the_batch_reaching_the_bound(tmp_path: Path) -> None:
    log = filled(tmp_path)
    size = len(batch(3, value_size=50))
    assert sliced(log, 0, 1 << 20, 9) == log.read(0, 1 << 20).records[:3 * size]
    assert sliced(log, 0, 1 << 20, 8) == log.read(0, 1 << 20).records[:2 * size]  # 8 is inside
    assert sliced(log, 9, 1 << 20, 9) is None
    assert sliced(log, 15, 1 << 20) is None  # at the log end


def test_max_bytes_may_cut_inside_a_batch_but_the_first_batch_comes_whole(tmp_path: Path) -> None:
    log = filled(tmp_path)
    size = len(batch(3, value_size=50))
    data = log.read(0, 1 << 20).records
    assert sliced(log, 0, size + 10) == data[:size + 10]
    with pytest.raises(Exception):  # noqa: B017 - a partial batch is not a whole one
        validate_batches(data[:size + 10])
    assert sliced(log, 0, 10) == data[:size]  # KIP-74
    assert sliced(log, 0, 10, min_one=False) == data[:10]
    assert sliced(log, 0, 0, min_one=False) is None


def test_out_of_range_offsets_raise(tmp_path: Path) -> None:
    log = filled(tmp_path)
    with pytest.raises(OffsetOutOfRangeError):
        log.read_slice(16, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read_slice(-1, 100)


def test_a_slice_covers_one_segment(tmp_path: Path) -> None:
    size = len(batch(3, value_size=50))
    log = filled(tmp_path, batches=6, segment_bytes=2 * size)
    assert log.segment_base_offsets == (0, 6, 12)
    segments = [log.read(base, 1 << 20).records for base in (0, 6, 12)]
    assert [len(s) for s in segments] == [2 * size] * 3
    assert sliced(log, 0, 1 << 20) == segments[0]
    assert sliced(log, 7, 1 << 20) == segments[1]
    assert sliced(log, 12, 1 << 20, 15) == segments[2][:size]


def test_a_slice_outlives_the_segment_it_points_into(tmp_path: Path) -> None:
    log = filled(tmp_path)
    expected = log.read(0, 1 << 20).records
    s = log.read_slice(0, 1 << 20)
    assert s is not None
    log.truncate_fully_and_start_at(100)  # deletes the segment's files
    assert s.read() == expected
    s.close()


def test_a_whole_slice_holds_exactly_what_a_read_returns(tmp_path: Path) -> None:
    """A follower's fetch is sent from a slice of whole batches: the bytes Log.read returns for
    every offset, byte budget and bound, across segments, never a partial batch."""
    size = len(batch(3, value_size=50))
    log = filled(tmp_path, batches=7, segment_bytes=3 * size)
    assert log.segment_base_offsets == (0, 9, 18)
    for offset in range(log.log_end_offset):
        for max_bytes in (0, 10, size, size + 10, 2 * size - 1, 2 * size, 5 * size, 1 << 20):
            for upto in (None, 5, 9, 13, 20):
                if upto is not None and upto < offset:
                    continue
                expected = log.read(offset, max_bytes, upto).records
                got = sliced(log, offset, max_bytes, upto, whole=True)
                assert (got or b"") == expected, (offset, max_bytes, upto)


def test_a_region_under_copy_below_is_its_bytes_and_a_larger_one_a_slice(tmp_path: Path) -> None:
    """A small fetch (a follower keeping up, a consumer at the tail) is copied, a pread, rather
    than sent from the file: the same bytes either way, for every offset, budget, bound and
    threshold, with no descriptor left to close; a region of copy_below bytes or more stays
    a slice of the file."""
    size = len(batch(3, value_size=50))
    log = filled(tmp_path, batches=7, segment_bytes=3 * size)
    for whole in (False, True):
        for offset in range(log.log_end_offset):
            for max_bytes in (0, size - 1, size, 2 * size + 10, 1 << 20):
                for upto in (None, 9, 20):
                    if upto is not None and upto < offset:
                        continue
                    expected = sliced(log, offset, max_bytes, upto, whole=whole)
                    for below in (1, size, 2 * size + 1, 1 << 20):
                        got = log.read_slice(offset, max_bytes, upto, whole=whole,
                                             copy_below=below)
                        where = (whole, offset, max_bytes, upto, below)
                        if expected is None:
                            assert got is None, where
                        elif len(expected) < below:
                            assert got == expected, where  # the bytes themselves
                        else:
                            assert got is not None and not isinstance(got, bytes), where
                            assert got.read() == expected, where
                            got.close()


def _every_read(log: Log) -> list[object]:
    out: list[object] = []
    for offset in range(log.log_start_offset, log.log_end_offset + 1):
        for whole in (False, True):
            for max_bytes, upto in ((1, None), (700, None), (1 << 20, None), (1 << 20, 150)):
                if upto is not None and upto < offset:
                    continue
                out.append(sliced(log, offset, max_bytes, upto, whole=whole))
    return out


def test_the_batches_appended_last_are_found_as_the_headers_would_find_them(
        tmp_path: Path) -> None:
    """A segment keeps where its last appended batches lie, so that a read at the log end
    reads no batch header; every read finds what a segment opened afresh (which knows none of
    them and walks the headers) finds, after many appends, a truncation, and appends after
    it."""
    log = Log.open(tmp_path / "t-0", config=LogConfig(segment_bytes=1 << 20,
                                                      index_interval_bytes=4096))
    for i in range(300):  # one record a batch, and some of three: more than it keeps
        log.append_as_leader(batch(1 + (i % 7 == 0) * 2, value_size=40), leader_epoch=0)
    kept = _every_read(log)
    log.close()
    reopened = Log.open(tmp_path / "t-0", config=LogConfig(segment_bytes=1 << 20,
                                                           index_interval_bytes=4096))
    assert _every_read(reopened) == kept
    for _ in range(20):
        reopened.append_as_leader(batch(2, value_size=40), leader_epoch=0)
    reopened.truncate_to(reopened.log_end_offset - 25)  # inside the batches it keeps
    for _ in range(10):
        reopened.append_as_leader(batch(1, value_size=40), leader_epoch=0)
    after = _every_read(reopened)
    reopened.close()
    again = Log.open(tmp_path / "t-0", config=LogConfig(segment_bytes=1 << 20,
                                                        index_interval_bytes=4096))
    assert _every_read(again) == after
    again.close()


def test_a_read_at_the_log_end_reads_no_batch_header(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    log = filled(tmp_path, batches=200, segment_bytes=1 << 20)
    end = log.log_end_offset
    reads: list[int] = []
    pread = os.pread

    def counting(fd: int, n: int, offset: int) -> bytes:
        reads.append(n)
        return pread(fd, n, offset)

    monkeypatch.setattr(os, "pread", counting)
    s = log.read_slice(end - 3, 1 << 20, whole=True)  # a follower a batch behind
    assert s is not None and s.size == len(batch(3, value_size=50))
    s.close()
    assert log.read_slice(end, 1 << 20, whole=True) is None  # caught up
    assert reads == []
