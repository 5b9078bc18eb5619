"""The local part of a partition's log: its segments on disk (Kafka's LocalLog).

A :class:`LocalLog` holds the ordered segments of one log directory, their base offsets, the
log end offset and the recovery point (everything below it is fsynced), and does what touches
segments alone: rolling, appending bytes to the active segment, reading, flushing, closing,
cutting and deleting segments, and the segment swap of a compaction. It knows nothing of leader
epochs, producer state or the log start offset: :class:`replication.log.Log` (Kafka's
UnifiedLog) owns those and calls this under its own lock; a LocalLog is not thread-safe by
itself. :mod:`replication.log_loader` fills one when a log opens.
"""

from __future__ import annotations

import os
from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from coordinator.clock import Clock
from replication.checkpoints import fsync_directory
from replication.producer_state import ProducerBatch
from replication.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    MAX_RELATIVE_OFFSET,
    TIME_INDEX_SUFFIX,
    LogSegment,
)

__all__ = ["COPY_BELOW", "SWAP_SUFFIX", "LocalLog", "ReadResult", "SegmentSettings"]

SWAP_SUFFIX = ".swap"
"""A cleaned segment file, complete and fsynced, taking the place of the segments it replaces
(see :meth:`LocalLog.replace_segments`; the loader finishes an interrupted swap)."""
COPY_BELOW = 16 << 10
"""The fetch reads (a follower's, a consumer's) a broker copies rather than sends from the
file: a region under 16 KiB (a follower keeping up, a consumer at the tail) costs one
``pread`` and is written with the rest of the response in one ``send``; from the file, it
costs a descriptor duplicated and closed, ``TCP_CORK`` set and cleared around the response,
and a ``sendfile``, each a system call that lets the interpreter's lock go. Larger regions
go by ``sendfile``, as Kafka sends every one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadResult:
    """Raw whole batches read from the log.

    ``first_offset`` is the base offset of the first batch (which may be below the offset asked
    for: the batch containing it is returned whole); ``next_offset`` is where the next read
    continues, equal to the requested offset when nothing was returned.
    """

    records: bytes
    first_offset: int
    next_offset: int


class SegmentSettings(Protocol):
    """What the segments are rolled and indexed by (a :class:`replication.log.LogConfig`)."""

    @property
    def segment_bytes(self) -> int: ...

    @property
    def segment_ms(self) -> int: ...

    @property
    def index_interval_bytes(self) -> int: ...


class LocalLog:
    """The segments of the log in ``directory``, rolled and indexed by ``config``, timed by
    ``clock`` (its wall-clock milliseconds). Starts empty: the loader (or :meth:`reset_at`) gives it its
    segments."""

    __slots__ = ("_clock", "bases", "closed", "config", "dir_dirty", "directory", "leo",
                 "recovery_point", "segments")

    def __init__(self, directory: Path, config: SegmentSettings,
                 clock: Clock) -> None:
        self.directory = directory
        self.config = config
        self._clock = clock
        self.segments: list[LogSegment] = []
        self.bases: list[int] = []
        """The segments' base offsets, in order (kept beside them for bisection)."""
        self.leo = 0
        """The log end offset: the offset the next record will get."""
        self.recovery_point = 0
        self.dir_dirty = False
        """Files were created or deleted since the directory was last fsynced."""
        self.closed = False

    @property
    def first_base(self) -> int:
        """The base offset of the first segment (where the local files begin)."""
        return self.segments[0].base_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def size_bytes_from(self, offset: int) -> int:
        """The bytes of the segments whose base offset is at or after ``offset``."""
        return sum(s.size for s in self.segments if s.base_offset >= offset)

    def create_segment(self, base_offset: int, now: int) -> LogSegment:
        return LogSegment.create(self.directory, base_offset,
                                 index_interval_bytes=self.config.index_interval_bytes,
                                 now_ms=now)

    def delete_files(self, base: int) -> None:
        """Delete the files of the segment at ``base`` (not open here)."""
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            (self.directory / f"{base:020d}{suffix}").unlink(missing_ok=True)
        self.dir_dirty = True

    # -- appending -----------------------------------------------------------------------------

    def should_roll(self, size: int, max_ts: int, last_offset: int, now: int) -> bool:
        """Kafka's roll rule: the batch would overflow ``segment.bytes``, or the segment is older
        than ``segment.ms`` (measured in record time from its first batch, or wall time if it
        has none), or the offsets would not fit its 32-bit relative offsets."""
        active = self.segments[-1]
        cfg = self.config
        if active.first_batch_timestamp is not None and active.first_batch_timestamp >= 0:
            waited = max_ts - active.first_batch_timestamp
        else:
            waited = now - active.created_ms
        return (
            active.size > cfg.segment_bytes - size
            or (active.size > 0 and waited > cfg.segment_ms)
            or last_offset - active.base_offset > MAX_RELATIVE_OFFSET
        )

    def roll(self, base_offset: int, now: int) -> LogSegment:
        """Start a new active segment at ``base_offset``."""
        active = self.segments[-1]
        if active.size == 0:
            # An empty active segment is replaced rather than left behind (only an offset
            # jump can get here).
            active.delete()
            self.segments.pop()
            self.bases.pop()
        else:
            active.on_become_inactive()
        segment = self.create_segment(base_offset, now)
        self.segments.append(segment)
        self.bases.append(base_offset)
        self.dir_dirty = True
        return segment

    # -- reading -------------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, limit: int) -> ReadResult | None:
        """Whole batches from the segment holding ``offset`` on, stopping before ``limit``;
        None when there is nothing."""
        i = max(bisect_right(self.bases, offset) - 1, 0)
        for segment in self.segments[i:]:
            found = segment.read(offset, max_bytes, limit)
            if found is not None:
                data, first, nxt = found
                if not data:
                    return None
                return ReadResult(records=data, first_offset=first, next_offset=nxt)
        return None

    def extent(self, offset: int, max_bytes: int, limit: int, *, min_one: bool,
               whole: bool = False, copy_below: int = 0
               ) -> tuple[int, int, int, int] | bytes | None:
        """``(duplicate descriptor, position, size, first offset)`` of the bytes a read of
        ``offset`` would send (see :meth:`LogSegment.extent`; with ``whole``, the whole batches
        :meth:`read` would return, :meth:`LogSegment.whole_extent`); None when there are none.
        The caller owns the descriptor. Fewer than ``copy_below`` bytes are read and returned
        instead: a copy of a few KiB costs less than a descriptor to duplicate and close and a
        ``sendfile`` between two changes of the socket's ``TCP_CORK``."""
        i = max(bisect_right(self.bases, offset) - 1, 0)
        for segment in self.segments[i:]:
            found = (segment.whole_extent(offset, max_bytes, limit) if whole
                     else segment.extent(offset, max_bytes, limit, min_one=min_one))
            if found is not None:
                position, size, first = found
                if not size:
                    return None
                if size < copy_below:
                    return segment.read_at(position, size)
                return segment.duplicate_fd(), position, size, first
        return None

    def fetch_upper_bound(self, offset: int, size: int) -> int:
        """An offset past every record of the ``size`` bytes a read of ``offset`` found
        (:meth:`extent`): see :meth:`LogSegment.fetch_upper_bound`; the log end when no batch
        ends at or after ``offset``."""
        i = max(bisect_right(self.bases, offset) - 1, 0)
        for segment in self.segments[i:]:
            bound = segment.fetch_upper_bound(offset, size)
            if bound is not None:
                return bound
        return self.leo

    def offset_for_timestamp(self, timestamp: int, start: int) -> int | None:
        """The first offset of the first batch with a timestamp >= ``timestamp`` that ends at
        or after ``start``, never below ``start``."""
        for segment, nxt in zip(self.segments, [*self.bases[1:], None], strict=True):
            if segment.max_timestamp >= timestamp and (nxt is None or nxt > start):
                found = segment.offset_for_timestamp(timestamp, start)
                if found is not None:
                    return max(found, start)
        return None

    def max_timestamp(self) -> tuple[int, int] | None:
        """The largest record timestamp and the last offset of a batch holding it."""
        best = max(self.segments, key=lambda s: s.max_timestamp)
        if best.max_timestamp < 0:
            return None
        return best.max_timestamp, best.offset_of_max_timestamp

    def producer_batches(self, start: int, end: int) -> Iterator[ProducerBatch]:
        """The idempotent batches from offset ``start`` to before ``end``, headers only."""
        i = max(bisect_right(self.bases, start) - 1, 0)
        for segment in self.segments[i:]:
            if segment.base_offset >= end:
                return
            yield from segment.producer_batches(start, end)

    # -- durability ----------------------------------------------------------------------------

    def flush_segments(self) -> None:
        """fsync every segment holding data past the recovery point."""
        i = max(bisect_right(self.bases, self.recovery_point) - 1, 0)
        for segment in self.segments[i:]:
            segment.flush()

    def sync_directory(self) -> None:
        """fsync the directory if files came or went since the last time."""
        if self.dir_dirty:
            fsync_directory(self.directory)
            self.dir_dirty = False

    def close(self) -> None:
        for segment in self.segments:
            segment.close()
        self.closed = True

    # -- cutting and deleting ------------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Remove every batch ending at or after ``offset`` (``offset`` at or above the first
        base): later segments go, the last one left is cut."""
        while len(self.segments) > 1 and self.segments[-1].base_offset > offset:
            self.segments.pop().delete()
            self.bases.pop()
            self.dir_dirty = True
        self.segments[-1].truncate_to(offset)
        self.leo = self.segments[-1].next_offset
        self.recovery_point = min(self.recovery_point, self.leo)

    def reset_at(self, offset: int) -> None:
        """Delete every segment and start again, empty, at ``offset``."""
        for segment in self.segments:
            segment.delete()
        self.segments = [self.create_segment(offset, self._clock.now_ms())]
        self.bases = [offset]
        self.leo = self.recovery_point = offset
        self.dir_dirty = True

    def drop_oldest(self, count: int) -> None:
        """Delete the ``count`` oldest segments (never the active one)."""
        for seg in self.segments[:count]:
            seg.delete()
        del self.segments[:count]
        del self.bases[:count]
        self.dir_dirty = True
        self.recovery_point = max(self.recovery_point, self.first_base)

    def rolled(self) -> Iterator[tuple[LogSegment, int]]:
        """Each segment but the active one, with the base offset of the one after it."""
        return zip(self.segments, self.bases[1:], strict=False)

    # -- compaction ----------------------------------------------------------------------------

    def segment_infos(self) -> list[tuple[int, int, int, int]]:
        """``(base offset, next offset, size, largest timestamp)`` of each segment."""
        return [(s.base_offset, s.next_offset, s.size, s.largest_timestamp())
                for s in self.segments]

    def dirty_stats(self, first_dirty: int, upto: int) -> tuple[int, int, int]:
        """See :meth:`replication.log.Log.dirty_stats`."""
        clean = dirty = 0
        first_ts = -1
        for seg, nxt in self.rolled():
            if seg.base_offset >= upto:
                break
            if nxt <= first_dirty:
                clean += seg.size
            else:
                if not dirty and seg.first_batch_timestamp is not None:
                    first_ts = seg.first_batch_timestamp
                dirty += seg.size
        return clean, dirty, first_ts

    def open_cleanable(self, upto: int
                       ) -> tuple[list[LogSegment], list[tuple[int, int, int, int]]]:
        """See :meth:`replication.log.Log.open_cleanable`."""
        chosen = [s for s in self.segments[:-1] if s.base_offset < upto]
        return chosen, [(s.base_offset, s.next_offset, s.size, s.duplicate_fd())
                        for s in chosen]

    def replace_segments(self, old: list[LogSegment], cleaned: Path,
                         step: Callable[[str], None], sizes: list[int] | None) -> bool:
        """See :meth:`replication.log.Log.replace_segments`."""
        first = self.segments.index(old[0]) if old[0] in self.segments else -1
        if (first < 0 or self.segments[first:first + len(old)] != old
                or first + len(old) >= len(self.segments)
                or (sizes is not None and [s.size for s in old] != sizes)):
            return False
        base = old[0].base_offset
        swap = self.directory / f"{base:020d}{LOG_SUFFIX}{SWAP_SUFFIX}"
        os.replace(cleaned, swap)
        fsync_directory(self.directory)
        step("swap")
        for i, segment in enumerate(old):
            segment.delete()
            step(f"deleted-{i}")
        os.replace(swap, self.directory / f"{base:020d}{LOG_SUFFIX}")
        fsync_directory(self.directory)
        step("renamed")
        segment, _cut = LogSegment.recover_existing(
            self.directory, base, index_interval_bytes=self.config.index_interval_bytes,
            now_ms=self._clock.now_ms())
        segment.on_become_inactive()
        self.segments[first:first + len(old)] = [segment]
        self.bases = [s.base_offset for s in self.segments]
        return True

    def __repr__(self) -> str:
        return f"LocalLog({self.directory.name}, end={self.leo}, segments={len(self.segments)})"

