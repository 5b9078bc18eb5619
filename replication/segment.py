"""One log segment: a ``.log`` file of whole batches plus its sparse ``.index`` and ``.timeindex``.

Files are named by the segment's base offset in 20 digits, as Kafka names them, so that a
directory listing sorts them by offset. A segment only ever holds whole, valid batches at rest;
the one exception is a crash mid-write, which :meth:`LogSegment.recover` cuts away.
"""

from __future__ import annotations

import os
import struct
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from operator import itemgetter
from pathlib import Path

import crc32c

from replication.checkpoints import PRIVATE_FILE_MODE
from replication.control import marker_fields
from replication.errors import CorruptIndexError, StorageError
from replication.index import OffsetIndex, TimeIndex
from replication.producer_state import ProducerBatch
from replication.records import (
    ATTRIBUTES_OFFSET,
    BATCH_OVERHEAD,
    COMPRESSION_MASK,
    CONTROL_MASK,
    LOG_OVERHEAD,
    MAGIC_V2,
    MAX_COMPRESSION_CODEC,
)

__all__ = [
    "INDEX_SUFFIX",
    "LOG_SUFFIX",
    "TIME_INDEX_SUFFIX",
    "LogSegment",
    "next_offset_of_file",
    "segment_file_name",
]

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp: all a scan needs, without the producer fields.
_SCAN = struct.Struct(">qiibIhiqq")
# ... and the producer fields (producerId, producerEpoch, baseSequence): what recovery reads.
_RECOVER = struct.Struct(">qiibIhiqqqhi")
_PREFIX = struct.Struct(">qi11xi")  # baseOffset, batchLength, lastOffsetDelta
_EPOCH = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch
# baseOffset, batchLength, attributes, lastOffsetDelta, maxTimestamp, producerId, producerEpoch,
# baseSequence: what producer state is rebuilt from.
_PRODUCER = struct.Struct(">qi9xhi8xqqhi")
_MIN_BATCH_LENGTH = BATCH_OVERHEAD - LOG_OVERHEAD
_RECOVERY_CHUNK = 8 << 20
_TAIL_BATCHES = 64  # the last batches appended a segment keeps where they lie
_LAST = itemgetter(3)
_POSITION = itemgetter(0)
_HEADER_WINDOW = 64 << 10
MAX_RELATIVE_OFFSET = (1 << 31) - 1

# Per-batch facts handed over by the log's validation: position within the appended buffer,
# size, base offset, last offset delta, partition leader epoch, max timestamp, producer id.
BatchFacts = tuple[int, int, int, int, int, int, int]


def _batch_ok(view: memoryview, rel: int, size: int, base: int, magic: int, crc: int,
              attributes: int, last_delta: int, expected: int, limit: int) -> bool:
    """Whether the whole batch of ``size`` bytes at ``rel`` in ``view``, with these header
    fields, may continue a segment whose next offset is ``expected`` and whose offsets end at
    ``limit``: magic 2, a known codec, a non-negative offset span inside the segment's range, and
    its CRC. The caller has checked that it fits."""
    return (
        magic == MAGIC_V2
        and attributes & COMPRESSION_MASK <= MAX_COMPRESSION_CODEC
        and last_delta >= 0
        and expected <= base
        and base + last_delta <= limit
        and crc32c.crc32c(view[rel + ATTRIBUTES_OFFSET : rel + size]) == crc
    )


def next_offset_of_file(path: Path) -> int:
    """The offset after the last whole, valid batch of a segment file not opened as a segment
    (a cleaner's swap file), or its base offset (from its name) if it holds none."""
    base = int(path.name[:20])
    next_offset = base
    with open(path, "rb") as f:
        data = memoryview(f.read())
    pos, end = 0, len(data)
    while end - pos >= BATCH_OVERHEAD:
        (batch_base, length, _epoch, magic, crc, attributes, last_delta, _bts, _mts) = (
            _SCAN.unpack_from(data, pos))
        size = length + LOG_OVERHEAD
        if length < _MIN_BATCH_LENGTH or pos + size > end:
            break
        if not _batch_ok(data, pos, size, batch_base, magic, crc, attributes, last_delta,
                         next_offset, base + MAX_RELATIVE_OFFSET):
            break
        next_offset = batch_base + last_delta + 1
        pos += size
    return next_offset


def segment_file_name(base_offset: int, suffix: str) -> str:
    """``00000000000000000042.log`` for base offset 42 and suffix ``.log``."""
    return f"{base_offset:020d}{suffix}"


class LogSegment:
    """A segment file and its indexes. Not thread-safe: the owning log serialises access."""

    def __init__(
        self, directory: Path, base_offset: int, index_interval_bytes: int, created_ms: int
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.created_ms = created_ms
        self.log_path = directory / segment_file_name(base_offset, LOG_SUFFIX)
        self.size = 0
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.first_batch_timestamp: int | None = None
        self._bytes_since_index = 0
        # (position, size, base, last offset) of the last batches appended, to the file's end
        # (none until an append after opening, truncating or recovering): no header reads
        self._tail: list[tuple[int, int, int, int]] = []
        self._fd = -1
        self.offset_index: OffsetIndex
        self.time_index: TimeIndex

    # -- opening -------------------------------------------------------------------------------

    @classmethod
    def create(
        cls, directory: Path, base_offset: int, *, index_interval_bytes: int, now_ms: int
    ) -> LogSegment:
        """A new, empty segment (any files left under its name are emptied)."""
        seg = cls(directory, base_offset, index_interval_bytes, now_ms)
        seg._fd = os.open(seg.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, PRIVATE_FILE_MODE)
        os.ftruncate(seg._fd, 0)
        seg.offset_index = OffsetIndex(seg._index_path(INDEX_SUFFIX), base_offset)
        seg.time_index = TimeIndex(seg._index_path(TIME_INDEX_SUFFIX), base_offset)
        seg.offset_index.flush(fsync=False)  # trims a stale file left under this name
        seg.time_index.flush(fsync=False)
        return seg

    @classmethod
    def open_existing(
        cls, directory: Path, base_offset: int, *, index_interval_bytes: int, now_ms: int
    ) -> tuple[LogSegment, int]:
        """Open a segment written before and trusted to be whole (a clean shutdown). Its
        indexes are checked, and so is every batch past the last index entry (see
        :meth:`_load_tail`); if either fails, the segment is recovered, which rebuilds the
        indexes and cuts the log at the first bad batch. Returns the segment and the bytes cut
        off its end."""
        seg = cls(directory, base_offset, index_interval_bytes, now_ms)
        if seg._open_checked():
            return seg, 0
        return seg, seg.recover()

    @classmethod
    def open_flushed(
        cls, directory: Path, base_offset: int, *, index_interval_bytes: int, now_ms: int,
        next_base: int,
    ) -> tuple[LogSegment, str | None]:
        """Open a segment that lies wholly below the recovery point (every byte was fsynced
        before the last flush; the next segment starts at ``next_base``). Kafka trusts such a
        segment and never cuts it: nothing is removed from it, and no later segment goes on
        its account.

        It is checked as :meth:`open_existing` checks one; if that fails, its indexes are
        rebuilt by walking the batches, keeping those whose bytes fail their checks (a fetch
        serves them as they are, and the client sees the CRC error, as from Kafka). Should a
        batch's length or offsets not frame the batches after it, the segment ends there for
        readers and the bytes past it stay in the file. Returns the segment and a description
        of the damage found (None: none, the indexes only were stale)."""
        seg = cls(directory, base_offset, index_interval_bytes, now_ms)
        if seg._open_checked():
            return seg, None
        limit = min(base_offset + MAX_RELATIVE_OFFSET, next_base - 1)
        end, damaged, first_damaged = seg._walk(limit=limit, keep_damaged=True)
        seg.size = end
        seg.offset_index.flush()
        seg.time_index.flush()
        unreadable = os.fstat(seg._fd).st_size - end
        if not damaged and not unreadable:
            return seg, None
        parts = []
        if damaged:
            parts.append(f"{damaged} batch(es) failing their checks from offset {first_damaged}"
                         " (kept as they are)")
        if unreadable:
            parts.append(f"{unreadable} bytes from position {end} that do not frame a batch "
                         "(left in the file, not read)")
        return seg, f"segment {base_offset}: " + "; ".join(parts)

    def _open_checked(self) -> bool:
        """Open the file and its indexes, checking them and the batches past the last index
        entry. False when a check failed: the indexes are then new and empty, to be rebuilt."""
        base_offset = self.base_offset
        self._fd = os.open(self.log_path, os.O_RDWR | os.O_APPEND)
        self.size = os.fstat(self._fd).st_size
        try:
            self.offset_index = OffsetIndex.open(self._index_path(INDEX_SUFFIX), base_offset,
                                                 self.size)
            try:
                self._load_tail()
                self.time_index = TimeIndex.open(self._index_path(TIME_INDEX_SUFFIX), base_offset,
                                                 self.next_offset)
            except BaseException:
                self.offset_index.close_and_delete()
                raise
        except CorruptIndexError:
            self.offset_index = OffsetIndex(self._index_path(INDEX_SUFFIX), base_offset)
            self.time_index = TimeIndex(self._index_path(TIME_INDEX_SUFFIX), base_offset)
            return False
        last = self.time_index.last_entry()
        if last is not None and last[0] > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = last
        self._load_first_timestamp()
        return True

    @classmethod
    def recover_existing(
        cls,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        now_ms: int,
        on_epoch: Callable[[int, int], None] | None = None,
        on_producer: Callable[[ProducerBatch], None] | None = None,
    ) -> tuple[LogSegment, int]:
        """Open a segment that may end in a torn or corrupt write (no clean shutdown, above the
        recovery point) and recover it; returns the segment and the bytes cut off its end."""
        seg = cls(directory, base_offset, index_interval_bytes, now_ms)
        seg._fd = os.open(seg.log_path, os.O_RDWR | os.O_APPEND)
        seg.offset_index = OffsetIndex(seg._index_path(INDEX_SUFFIX), base_offset)
        seg.time_index = TimeIndex(seg._index_path(TIME_INDEX_SUFFIX), base_offset)
        return seg, seg.recover(on_epoch, on_producer)

    def _index_path(self, suffix: str) -> Path:
        return self.directory / segment_file_name(self.base_offset, suffix)

    def _load_first_timestamp(self) -> None:
        if self.size >= BATCH_OVERHEAD:
            self.first_batch_timestamp = _SCAN.unpack(os.pread(self._fd, _SCAN.size, 0))[8]

    def _load_tail(self) -> None:
        """Find the next offset by checking every batch from the last index entry to the end.

        The clean-shutdown marker only says the file was closed whole; the disk, or someone with
        an editor, may have changed it since. So each batch in this region is checked exactly as
        recovery checks it (fits in the file, magic 2, a known codec, CRC, offsets increasing
        and within the segment's relative range), and any failure raises
        :class:`CorruptIndexError`, which sends the segment through :meth:`recover`. Only the
        region past the last index entry is read, which is what keeps a clean open fast: what
        lies below that entry was indexed as it was written.

        The last entry must name the batch found at its position; anything else means the index
        does not belong to this log and is treated as corrupt as well.
        """
        last = self.offset_index.last_entry()
        pos = 0
        if last is not None:
            offset, pos = last
            head = os.pread(self._fd, _SCAN.size, pos)
            if len(head) < _SCAN.size:
                raise CorruptIndexError(f"{self.log_path.name}: index points past the log")
            base, _length, *_mid, last_delta, _bts, _mts = _SCAN.unpack(head)
            if base + last_delta != offset:
                raise CorruptIndexError(
                    f"{self.log_path.name}: index entry for offset {offset} finds a batch ending "
                    f"at {base + last_delta}"
                )
        tail = memoryview(os.pread(self._fd, self.size - pos, pos))
        end = len(tail)
        expected = self.base_offset
        limit = self.base_offset + MAX_RELATIVE_OFFSET
        rel = 0
        while rel < end:
            if end - rel < BATCH_OVERHEAD:
                raise CorruptIndexError(f"{self.log_path.name}: torn batch at {pos + rel}")
            base, length, _epoch, magic, crc, attributes, last_delta, _bts, max_ts = (
                _SCAN.unpack_from(tail, rel))
            size = length + LOG_OVERHEAD
            if length < _MIN_BATCH_LENGTH or rel + size > end:
                raise CorruptIndexError(
                    f"{self.log_path.name}: batch at {pos + rel} of length {length} does not fit "
                    f"the {end - rel} bytes left"
                )
            if not _batch_ok(tail, rel, size, base, magic, crc, attributes, last_delta, expected,
                             limit):
                raise CorruptIndexError(
                    f"{self.log_path.name}: batch at {pos + rel} (base offset {base}) fails its "
                    "checks"
                )
            if max_ts > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = max_ts, base + last_delta
            expected = self.next_offset = base + last_delta + 1
            rel += size
        self._bytes_since_index = end

    # -- writing -------------------------------------------------------------------------------

    def append(self, data: memoryview, batches: Sequence[BatchFacts]) -> None:
        """Append whole, validated, stamped batches; ``batches`` describes them (see BatchFacts).

        A failed write is cut back off so the segment is unchanged.
        """
        start = self.size
        try:
            written = os.write(self._fd, data)
            while written < len(data):
                written += os.write(self._fd, data[written:])
        except OSError:
            os.ftruncate(self._fd, start)
            raise
        interval = self.index_interval_bytes
        for pos, size, base, last_delta, _epoch, max_ts, _pid in batches:
            last_offset = base + last_delta
            self._tail.append((start + pos, size, base, last_offset))
            if max_ts > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = max_ts, last_offset
            if self._bytes_since_index > interval:
                self.offset_index.append(last_offset, start + pos)
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
                self._bytes_since_index = 0
            self._bytes_since_index += size
        if self.first_batch_timestamp is None:
            self.first_batch_timestamp = batches[0][5]
        self.size = start + len(data)
        if len(self._tail) > 2 * _TAIL_BATCHES:
            del self._tail[:-_TAIL_BATCHES]
        self.next_offset = batches[-1][2] + batches[-1][3] + 1

    def flush(self) -> None:
        """fsync the log file and write and fsync both indexes."""
        os.fsync(self._fd)
        self.offset_index.flush()
        self.time_index.flush()

    def on_become_inactive(self) -> None:
        """Record the segment's largest timestamp in the time index, as Kafka does on roll, so a
        reopened segment knows it without a scan; write the indexes out."""
        self._record_max_timestamp()
        self.offset_index.flush(fsync=False)
        self.time_index.flush(fsync=False)

    def _record_max_timestamp(self) -> None:
        if self.size and self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)

    def close(self) -> None:
        if self._fd >= 0:
            self._record_max_timestamp()
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = -1
            self.offset_index.close()
            self.time_index.close()

    def delete(self) -> None:
        """Close and remove the segment's three files."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self.log_path.unlink(missing_ok=True)
        self.offset_index.close_and_delete()
        self.time_index.close_and_delete()

    def largest_timestamp(self) -> int:
        """The largest record timestamp, or the file's mtime if no batch carries one (Kafka)."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return os.stat(self.log_path).st_mtime_ns // 1_000_000

    # -- reading -------------------------------------------------------------------------------

    def _find(self, offset: int) -> tuple[int, int, int, int] | None:
        """(position, size, base offset, last offset) of the first batch ending at or after
        ``offset``: among the last appended, or by the index and a short scan of headers."""
        tail = self._tail
        if tail and offset >= tail[0][2]:
            return tail[bisect_left(tail, offset, key=_LAST)] if offset <= tail[-1][3] else None
        pos = self.offset_index.lookup(offset)
        fd, end, unpack = self._fd, self.size, _PREFIX.unpack
        while pos < end:
            base, length, last_delta = unpack(os.pread(fd, _PREFIX.size, pos))
            if base + last_delta >= offset:
                return pos, length + LOG_OVERHEAD, base, base + last_delta
            pos += length + LOG_OVERHEAD
        return None

    def read(self, offset: int, max_bytes: int, upto: int) -> tuple[bytes, int, int] | None:
        """Whole batches starting with the one that contains ``offset``.

        Returns ``(data, first_offset, next_offset)``; ``None`` if no batch here ends at or after
        ``offset``. Batches are added while they fit in ``max_bytes`` and end before ``upto``;
        the first batch is returned whole even if larger than ``max_bytes`` (KIP-74), so a
        consumer always makes progress. ``data`` is empty if the first batch reaches ``upto``.
        """
        found = self._find(offset)
        if found is None:
            return None
        start, first_size, first_base, first_last = found
        if first_last >= upto:
            return b"", first_base, first_base
        if first_size >= max_bytes:
            return os.pread(self._fd, first_size, start), first_base, first_last + 1
        buf = os.pread(self._fd, min(max_bytes, self.size - start), start)
        cut, next_offset, n = 0, first_base, len(buf)
        unpack = _PREFIX.unpack_from
        while cut + _PREFIX.size <= n:
            base, length, last_delta = unpack(buf, cut)
            if cut + length + LOG_OVERHEAD > n or base + last_delta >= upto:
                break
            cut += length + LOG_OVERHEAD
            next_offset = base + last_delta + 1
        return (buf if cut == n else buf[:cut]), first_base, next_offset

    def extent(
        self, offset: int, max_bytes: int, upto: int, *, min_one: bool = True
    ) -> tuple[int, int, int] | None:
        """Where the bytes a read of ``offset`` would send lie in the ``.log`` file, without
        reading them: ``(position, size, first_offset)``, or ``None`` if no batch here ends at or
        after ``offset``.

        The region starts at the batch holding ``offset`` and stops before the first batch that
        reaches ``upto``; within that it is ``max_bytes`` long, or, with ``min_one``, at least
        the whole first batch (KIP-74). Unlike :meth:`read` it may end inside a batch, as a
        Kafka broker's file slice does: clients drop a partial last batch and fetch it again.
        ``size`` is 0 if the first batch reaches ``upto``.
        """
        found = self._find(offset)
        if found is None:
            return None
        start, first_size, first_base, first_last = found
        if first_last >= upto:
            return start, 0, first_base
        end = self.size
        if upto < self.next_offset:
            bound = self._find(upto)
            if bound is not None:
                end = bound[0]
        wanted = max(max_bytes, first_size) if min_one else max(max_bytes, 0)
        return start, min(end - start, wanted), first_base

    def fetch_upper_bound(self, offset: int, size: int) -> int | None:
        """An offset past every record of ``size`` bytes read from the batch holding ``offset``
        (None when no batch here ends at or after it): the first of the last batches appended
        that starts after them, else the offset of the first indexed batch that does (Kafka's
        fetchUpperBoundOffset), else the end of the segment."""
        found = self._find(offset)
        if found is None:
            return None
        end, tail = found[0] + size, self._tail
        if tail and end >= tail[0][0]:
            i = bisect_left(tail, end, key=_POSITION)
            return tail[i][2] if i < len(tail) else self.next_offset
        bound = self.offset_index.offset_at_or_after(end)
        return self.next_offset if bound is None else bound

    def whole_extent(self, offset: int, max_bytes: int, upto: int
                     ) -> tuple[int, int, int] | None:
        """Where the bytes :meth:`read` would return lie in the ``.log`` file, without reading
        them: ``(position, size, first_offset)`` of the same whole batches (the first one even
        if larger than ``max_bytes``), or ``None`` if no batch here ends at or after ``offset``.
        A follower's fetch is sent so, with ``sendfile``. Only a region that ends before the
        end of the segment has its batch headers walked."""
        found = self._find(offset)
        if found is None:
            return None
        start, first_size, first_base, first_last = found
        if first_last >= upto:
            return start, 0, first_base
        if first_size >= max_bytes:
            return start, first_size, first_base
        n = min(max_bytes, self.size - start)
        if n == self.size - start and upto >= self.next_offset:
            return start, n, first_base  # the rest of the segment: whole batches
        fd, unpack, cut = self._fd, _PREFIX.unpack, 0
        while cut + _PREFIX.size <= n:
            base, length, last_delta = unpack(os.pread(fd, _PREFIX.size, start + cut))
            if cut + length + LOG_OVERHEAD > n or base + last_delta >= upto:
                break
            cut += length + LOG_OVERHEAD
        return start, cut, first_base

    def read_at(self, position: int, size: int) -> bytes:
        """``size`` bytes of the ``.log`` file at ``position`` (located by :meth:`extent`)."""
        data = os.pread(self._fd, size, position)
        if len(data) != size:
            raise StorageError(f"{self.log_path}: {len(data)} of {size} bytes at {position}")
        return data

    def duplicate_fd(self) -> int:
        """A new descriptor of the ``.log`` file: it stays valid after the segment is closed,
        deleted or rolled, so bytes located by :meth:`extent` can be sent later."""
        return os.dup(self._fd)

    def scan_epochs(self, on_epoch: Callable[[int, int], None]) -> None:
        """Call ``on_epoch(epoch, base_offset)`` for each batch carrying a leader epoch, in log
        order, from the batch headers alone: what a lost epoch cache is rebuilt from."""
        fd, end, unpack = self._fd, self.size, _EPOCH.unpack
        pos = 0
        while pos + _EPOCH.size <= end:
            base, length, epoch = unpack(os.pread(fd, _EPOCH.size, pos))
            if length < _MIN_BATCH_LENGTH:
                break  # not a batch; the segment was checked on open, so never in practice
            if epoch >= 0:
                on_epoch(epoch, base)
            pos += length + LOG_OVERHEAD

    def producer_batches(self, start: int, end: int) -> Iterator[ProducerBatch]:
        """The batches carrying a producer id from the one holding ``start`` to before ``end``,
        in log order, from their headers alone: what producer state is rebuilt from.

        Headers are read through a window of the file (one read serves the many headers of
        small batches; a large batch costs one read of the window, not of the batch)."""
        found = self._find(start)
        if found is None:
            return
        fd, size, unpack, need = self._fd, self.size, _PRODUCER.unpack_from, _PRODUCER.size
        pos = found[0]
        window_start, window = pos, b""
        while pos + need <= size:
            rel = pos - window_start
            if rel + need > len(window):
                window_start, rel = pos, 0
                window = os.pread(fd, min(_HEADER_WINDOW, size - pos), pos)
            base, length, attributes, last_delta, max_ts, pid, epoch, seq = unpack(window, rel)
            if base >= end or length < _MIN_BATCH_LENGTH:
                return
            if pid >= 0:
                marker = (marker_fields(os.pread(fd, length + LOG_OVERHEAD, pos))
                          if attributes & CONTROL_MASK else None)
                yield ProducerBatch(base, last_delta, max_ts, pid, epoch, seq, attributes,
                                    marker)
            pos += length + LOG_OVERHEAD

    def offset_for_timestamp(self, timestamp: int, min_offset: int = 0) -> int | None:
        """Base offset of the first batch whose max timestamp is >= ``timestamp``, if any,
        among the batches ending at or after ``min_offset`` (the log start)."""
        pos = self.offset_index.lookup(max(self.time_index.lookup(timestamp), min_offset))
        fd, end = self._fd, self.size
        while pos < end:
            base, length, *_mid, last_delta, _base_ts, max_ts = _SCAN.unpack(
                os.pread(fd, _SCAN.size, pos))
            if max_ts >= timestamp and base + last_delta >= min_offset:
                return base
            pos += length + LOG_OVERHEAD
        return None

    # -- truncation and recovery -----------------------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Remove every batch that ends at or after ``offset``; returns the bytes removed.

        A batch is never split: if ``offset`` falls inside one, that whole batch goes.
        """
        found = self._find(offset)
        if found is None:
            if os.fstat(self._fd).st_size > self.size:
                # Unreadable bytes :meth:`open_flushed` left past the batches: they go once
                # the segment is the log's end, or appends would land after them.
                os.ftruncate(self._fd, self.size)
            return 0
        pos, _size, new_next, _last = found
        self._tail = []
        removed = self.size - pos
        os.ftruncate(self._fd, pos)
        self.size = pos
        self.next_offset = new_next
        self.offset_index.truncate_to(new_next)
        self.time_index.truncate_to(new_next)
        self.offset_index.flush(fsync=False)
        self.time_index.flush(fsync=False)
        self._rescan_max_timestamp()
        self._bytes_since_index = 0
        if pos == 0:
            self.first_batch_timestamp = None
        return removed

    def _rescan_max_timestamp(self) -> None:
        last = self.time_index.last_entry()
        self.max_timestamp, self.offset_of_max_timestamp = last or (-1, self.base_offset)
        entry = self.offset_index.last_entry()
        pos = entry[1] if entry else 0
        tail = os.pread(self._fd, self.size - pos, pos)
        rel = 0
        while rel + _SCAN.size <= len(tail):
            base, length, *_mid, last_delta, _bts, max_ts = _SCAN.unpack_from(tail, rel)
            if max_ts > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = max_ts, base + last_delta
            rel += length + LOG_OVERHEAD

    def recover(
        self,
        on_epoch: Callable[[int, int], None] | None = None,
        on_producer: Callable[[ProducerBatch], None] | None = None,
    ) -> int:
        """Walk every batch, checking size, magic, CRC and increasing offsets; cut the file at
        the first batch that fails; rebuild both indexes. Returns the number of bytes cut.

        ``on_epoch(epoch, base_offset)`` is called for each batch so the log can rebuild its
        leader epoch cache from what survived, and ``on_producer`` with each batch of an
        idempotent producer that survived, so that it can rebuild its producer state in the
        same pass (as Kafka's recovery does).
        """
        fd = self._fd
        end, _damaged, _first = self._walk(
            limit=self.base_offset + MAX_RELATIVE_OFFSET, keep_damaged=False,
            on_epoch=on_epoch, on_producer=on_producer)
        self._tail = []
        truncated = os.fstat(fd).st_size - end
        if truncated:
            os.ftruncate(fd, end)
            os.fsync(fd)
        self.size = end
        self.offset_index.flush()
        self.time_index.flush()
        return truncated

    def _walk(
        self,
        *,
        limit: int,
        keep_damaged: bool,
        on_epoch: Callable[[int, int], None] | None = None,
        on_producer: Callable[[ProducerBatch], None] | None = None,
    ) -> tuple[int, int, int]:
        """Walk the batches from the start, rebuilding both indexes (in memory), up to the
        first that fails its checks, or with ``keep_damaged`` up to the first whose length or
        offsets do not frame it (its magic, codec and CRC are then counted, not required).
        Offsets must increase and end at or below ``limit``. Returns the position where the
        walk stopped, the damaged batches kept and the base offset of the first (-1: none)."""
        self.offset_index.reset()
        self.time_index.reset()
        self.max_timestamp, self.offset_of_max_timestamp = -1, self.base_offset
        self._bytes_since_index = 0
        self.first_batch_timestamp = None
        fd = self._fd
        file_size = os.fstat(fd).st_size
        unpack = _RECOVER.unpack_from
        interval = self.index_interval_bytes
        pos, next_offset = 0, self.base_offset
        damaged, first_damaged = 0, -1
        window_start, view = 0, memoryview(b"")
        while file_size - pos >= BATCH_OVERHEAD:
            rel = pos - window_start
            if rel + BATCH_OVERHEAD > len(view):
                window_start, rel = pos, 0
                view = memoryview(os.pread(fd, min(_RECOVERY_CHUNK, file_size - pos), pos))
            (base, length, epoch, magic, crc, attributes, last_delta, _bts, max_ts, pid,
             producer_epoch, sequence) = unpack(view, rel)
            size = length + LOG_OVERHEAD
            if length < _MIN_BATCH_LENGTH or pos + size > file_size:
                break  # torn: the length runs past the end of the file
            if rel + size > len(view):
                window_start, rel = pos, 0
                view = memoryview(
                    os.pread(fd, min(max(_RECOVERY_CHUNK, size), file_size - pos), pos)
                )
            whole = _batch_ok(view, rel, size, base, magic, crc, attributes, last_delta,
                              next_offset, limit)
            if not whole:
                if not keep_damaged or not 0 <= last_delta <= limit - base or base < next_offset:
                    break
                damaged += 1
                if first_damaged < 0:
                    first_damaged = base
                max_ts = -1  # a damaged batch's timestamp is not believed (retention uses it)
            last_offset = base + last_delta
            if max_ts > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = max_ts, last_offset
            if self._bytes_since_index > interval:
                self.offset_index.append(last_offset, pos)
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
                self._bytes_since_index = 0
            self._bytes_since_index += size
            if self.first_batch_timestamp is None and whole:
                self.first_batch_timestamp = max_ts
            if on_epoch is not None and epoch >= 0:
                on_epoch(epoch, base)
            if on_producer is not None and pid >= 0:
                marker = (marker_fields(view[rel:rel + size])
                          if whole and attributes & CONTROL_MASK else None)
                on_producer(ProducerBatch(base, last_delta, max_ts, pid, producer_epoch, sequence,
                                          attributes, marker))
            next_offset = last_offset + 1
            pos += size
        self.next_offset = next_offset
        return pos, damaged, first_damaged
