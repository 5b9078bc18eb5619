"""The log of one partition: an ordered list of segments, the epoch cache, and recovery.

Appends take raw v2 batches. As leader, the log assigns offsets and stamps its epoch by
overwriting each batch's base offset and partition leader epoch, which lie outside the CRC, so
the append path costs one header parse, one CRC check and one write per batch whatever the batch
holds. As follower, it keeps the leader's offsets and epochs and only checks that they move
forward. Every check runs before the first byte is written: bad input changes nothing.

Opening a log without the clean-shutdown marker recovers it: every batch from the recovery point
on is re-checked (size, magic, CRC, increasing offsets), the log is cut at the first that fails,
later segments are dropped, indexes are rebuilt and the epoch cache is cut to what survived.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from replication.checkpoints import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    clear_clean_shutdown,
    fsync_directory,
    has_clean_shutdown,
    mark_clean_shutdown,
    parse_log_directory_name,
)
from replication.epochs import EpochEndOffset, LeaderEpochCache
from replication.errors import (
    InvalidEpochError,
    OffsetOutOfRangeError,
    OutOfOrderOffsetError,
    RecordTooLargeError,
    StorageError,
)
from replication.records import BATCH_OVERHEAD, stamp_batch, validate_batches
from replication.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    MAX_RELATIVE_OFFSET,
    TIME_INDEX_SUFFIX,
    BatchFacts,
    LogSegment,
)
from replication.truncation import FollowerEpochView

__all__ = ["AppendInfo", "Log", "LogConfig", "ReadResult"]

_DAY_MS = 24 * 3600 * 1000
_STRAY_SUFFIXES = (".tmp", ".deleted", ".cleaned", ".swap")


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True, kw_only=True)
class LogConfig:
    """Per-log settings, named after Kafka's topic configs, with Kafka's defaults.

    ``retention_ms`` / ``retention_bytes`` of -1 mean unlimited.
    """

    segment_bytes: int = 1 << 30  # segment.bytes
    segment_ms: int = 7 * _DAY_MS  # segment.ms
    retention_ms: int = 7 * _DAY_MS  # retention.ms
    retention_bytes: int = -1  # retention.bytes
    index_interval_bytes: int = 4096  # index.interval.bytes

    def __post_init__(self) -> None:
        if not BATCH_OVERHEAD <= self.segment_bytes <= (1 << 31) - 1:
            raise ValueError(f"segment_bytes must fit a uint32 position: {self.segment_bytes}")
        if self.segment_ms < 1:
            raise ValueError(f"segment_ms must be positive: {self.segment_ms}")
        if self.retention_ms < -1 or self.retention_bytes < -1:
            raise ValueError("retention_ms and retention_bytes must be >= -1")
        if self.index_interval_bytes < 0:
            raise ValueError(f"index_interval_bytes must be >= 0: {self.index_interval_bytes}")


@dataclass(frozen=True, slots=True, kw_only=True)
class AppendInfo:
    """Where an append landed: its first and last offsets, batch count and bytes."""

    first_offset: int
    last_offset: int
    batches: int
    size: int


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


class Log:
    """The log of one partition, in a directory named ``<topic>-<partition>``.

    Thread-safe: one lock serialises appends, reads, truncation and retention.
    """

    def __init__(self, directory: Path, config: LogConfig, clock: Callable[[], int]) -> None:
        self.directory = directory
        self.topic_partition = parse_log_directory_name(directory.name)
        self.config = config
        self._clock = clock
        self._lock = threading.RLock()
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._leo = 0
        self._recovery_point = 0
        self._dir_dirty = False
        self._closed = False
        self.leader_epoch_cache = LeaderEpochCache(directory / LEADER_EPOCH_CHECKPOINT_FILE)

    # -- opening -------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: Path | str,
        *,
        config: LogConfig | None = None,
        recovery_point: int = 0,
        clock: Callable[[], int] | None = None,
    ) -> Log:
        """Open (creating if needed) the log in ``directory``.

        After a clean shutdown, segments are trusted and only indexes that are missing or
        corrupt are rebuilt. Otherwise every segment from the one holding ``recovery_point``
        (the offset up to which the log was known flushed; 0 checks all) is recovered.
        ``clock`` returns milliseconds and drives ``segment.ms`` and retention.
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        log = cls(directory, config or LogConfig(), clock or _wall_clock_ms)
        log._load(recovery_point)
        return log

    def _load(self, recovery_point: int) -> None:
        directory, cfg, now = self.directory, self.config, self._clock()
        clean = has_clean_shutdown(directory)
        bases = self._scan_directory()
        first_unchecked = len(bases)
        if not clean:
            first_unchecked = max(bisect_right(bases, recovery_point) - 1, 0)
        cache = self.leader_epoch_cache
        latest = [cache.latest_epoch if cache.latest_epoch is not None else -1]
        rebuilt_epochs: list[tuple[int, int]] = []

        def on_epoch(epoch: int, base: int) -> None:
            if epoch > latest[0]:
                latest[0] = epoch
                rebuilt_epochs.append((epoch, base))

        for i, base in enumerate(bases):
            if i < first_unchecked:
                seg, cut = LogSegment.open_existing(
                    directory, base, index_interval_bytes=cfg.index_interval_bytes, now_ms=now
                )
            else:
                seg, cut = LogSegment.recover_existing(
                    directory,
                    base,
                    index_interval_bytes=cfg.index_interval_bytes,
                    now_ms=now,
                    on_epoch=on_epoch,
                )
                seg.flush()
            self._segments.append(seg)
            if cut:
                # Whatever follows a corrupt batch cannot be trusted to continue the log.
                for later in bases[i + 1 :]:
                    self._delete_files(later)
                break
        if not self._segments:
            self._segments.append(
                LogSegment.create(
                    directory, 0, index_interval_bytes=cfg.index_interval_bytes, now_ms=now
                )
            )
        self._bases = [s.base_offset for s in self._segments]
        self._leo = self._segments[-1].next_offset
        if clean:
            # An epoch may start at the log end (a leader that has not appended yet), not past it.
            cache.truncate_from_end(self._leo + 1)
        else:
            for epoch, base in rebuilt_epochs:
                cache.assign(epoch, base)
            cache.truncate_from_end(self._leo)
        cache.truncate_from_start(self.log_start_offset)
        self._recovery_point = self._leo
        fsync_directory(directory)
        clear_clean_shutdown(directory)

    def _scan_directory(self) -> list[int]:
        """Base offsets of the segments on disk; clears leftovers of interrupted operations."""
        bases = []
        index_files = []
        for path in self.directory.iterdir():
            name = path.name
            if name.endswith(_STRAY_SUFFIXES):
                path.unlink()
            elif name.endswith(LOG_SUFFIX) and len(name) == 24 and name[:20].isdigit():
                bases.append(int(name[:20]))
            elif name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX)):
                index_files.append(path)
        known = set(bases)
        for path in index_files:
            if not path.name[:20].isdigit() or int(path.name[:20]) not in known:
                path.unlink()  # an index without its log is meaningless
        return sorted(bases)

    def _delete_files(self, base: int) -> None:
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            (self.directory / f"{base:020d}{suffix}").unlink(missing_ok=True)
        self._dir_dirty = True

    # -- state ---------------------------------------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        """The offset the next record will get (LEO)."""
        return self._leo

    @property
    def log_start_offset(self) -> int:
        """The first offset still in the log."""
        return self._segments[0].base_offset

    @property
    def recovery_point(self) -> int:
        """Everything below this offset is fsynced; persist it to recover less after a crash."""
        return self._recovery_point

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def segment_base_offsets(self) -> tuple[int, ...]:
        return tuple(self._bases)

    @property
    def latest_epoch(self) -> int | None:
        return self.leader_epoch_cache.latest_epoch

    def assign_leader_epoch(self, epoch: int) -> None:
        """Record that this replica leads ``epoch`` from the log end offset on.

        Called on becoming leader, before any append (Kafka's makeLeader does the same), so that
        the leader's latest epoch is never below a follower's and its answers for older epochs
        end exactly where its leadership began.
        """
        with self._lock:
            self._check_open()
            self.leader_epoch_cache.assign(epoch, self._leo)

    def end_offset_for_epoch(self, epoch: int) -> EpochEndOffset:
        """This log's answer to OffsetsForLeaderEpoch(``epoch``)."""
        with self._lock:
            return self.leader_epoch_cache.end_offset_for(epoch, self._leo)

    def epoch_view(self) -> FollowerEpochView:
        """The snapshot a follower feeds to :func:`replication.truncation.decide_truncation`."""
        with self._lock:
            return FollowerEpochView(
                entries=self.leader_epoch_cache.entries,
                log_start_offset=self.log_start_offset,
                log_end_offset=self._leo,
            )

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError(f"log {self.directory.name} is closed")

    # -- appending -----------------------------------------------------------------------------

    def append_as_leader(
        self, records: bytes | bytearray | memoryview, leader_epoch: int
    ) -> AppendInfo:
        """Append raw batches as the leader in ``leader_epoch``: assign offsets from the log end
        and stamp the epoch into each batch header.

        A ``bytearray`` (or writable memoryview) is stamped in place, handing it over to the
        log; ``bytes`` are copied once. Raises :class:`CorruptRecordError` for an invalid batch
        and :class:`InvalidEpochError` for an epoch older than the log's latest.
        """
        facts = validate_batches(records, from_client=True)
        if leader_epoch < 0:
            raise InvalidEpochError(f"leader epoch {leader_epoch} is negative")
        if isinstance(records, bytearray) or (
            isinstance(records, memoryview) and not records.readonly
        ):
            buf = records
        else:
            buf = bytearray(records)
        with self._lock:
            self._check_open()
            latest = self.leader_epoch_cache.latest_epoch
            if latest is not None and leader_epoch < latest:
                raise InvalidEpochError(
                    f"leader epoch {leader_epoch} is older than the log's latest epoch {latest}"
                )
            offset = self._leo
            stamped: list[BatchFacts] = []
            for pos, size, _base, last_delta, _epoch, max_ts in facts:
                stamp_batch(buf, pos, offset, leader_epoch)
                stamped.append((pos, size, offset, last_delta, leader_epoch, max_ts))
                offset += last_delta + 1
            return self._append(memoryview(buf), stamped, [(leader_epoch, self._leo)])

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> AppendInfo:
        """Append batches fetched from the leader, keeping their offsets and epochs.

        Offsets must start at or after the log end offset and increase; epochs must not go
        below the log's latest. Raises :class:`OutOfOrderOffsetError` or
        :class:`InvalidEpochError` otherwise (and :class:`CorruptRecordError` for bad bytes).
        """
        facts = validate_batches(records)
        with self._lock:
            self._check_open()
            expected = self._leo
            latest = self.leader_epoch_cache.latest_epoch
            latest = -1 if latest is None else latest
            new_epochs: list[tuple[int, int]] = []
            for _pos, _size, base, last_delta, epoch, _ts in facts:
                if base < expected:
                    raise OutOfOrderOffsetError(
                        f"batch at offset {base} does not follow offset {expected - 1} "
                        f"in {self.directory.name}"
                    )
                if epoch >= 0:
                    if epoch < latest:
                        raise InvalidEpochError(
                            f"batch at offset {base} has epoch {epoch}, below epoch {latest}"
                        )
                    if epoch > latest:
                        new_epochs.append((epoch, base))
                        latest = epoch
                expected = base + last_delta + 1
            return self._append(memoryview(records), facts, new_epochs)

    def _append(
        self, data: memoryview, facts: list[BatchFacts], epochs: list[tuple[int, int]]
    ) -> AppendInfo:
        size = len(data)
        if size > self.config.segment_bytes:
            raise RecordTooLargeError(
                f"{size} bytes of batches exceed segment.bytes {self.config.segment_bytes}"
            )
        first_offset = facts[0][2]
        last_offset = facts[-1][2] + facts[-1][3]
        max_ts = max(f[5] for f in facts) if len(facts) > 1 else facts[0][5]
        segment = self._maybe_roll(size, max_ts, first_offset, last_offset)
        cache = self.leader_epoch_cache
        old_leo = self._leo
        for epoch, start in epochs:
            cache.assign(epoch, start)
        try:
            segment.append(data, facts)
        except OSError:
            cache.truncate_from_end(old_leo)
            raise
        self._leo = last_offset + 1
        return AppendInfo(
            first_offset=first_offset, last_offset=last_offset, batches=len(facts), size=size
        )

    def _maybe_roll(
        self, size: int, max_ts: int, first_offset: int, last_offset: int
    ) -> LogSegment:
        """Kafka's roll rule: the batch would overflow ``segment.bytes``, or the segment is older
        than ``segment.ms`` (measured in record time from its first batch, or wall time if it
        has none), or the offsets would not fit its 32-bit relative offsets."""
        active = self._segments[-1]
        cfg = self.config
        now = self._clock()
        if active.first_batch_timestamp is not None and active.first_batch_timestamp >= 0:
            waited = max_ts - active.first_batch_timestamp
        else:
            waited = now - active.created_ms
        if not (
            active.size > cfg.segment_bytes - size
            or (active.size > 0 and waited > cfg.segment_ms)
            or last_offset - active.base_offset > MAX_RELATIVE_OFFSET
        ):
            return active
        return self._roll(first_offset, now)

    def _roll(self, base_offset: int, now: int) -> LogSegment:
        active = self._segments[-1]
        if active.size == 0:
            # An empty active segment is replaced rather than left behind (only an offset
            # jump can get here).
            active.delete()
            self._segments.pop()
            self._bases.pop()
        else:
            active.on_become_inactive()
        segment = LogSegment.create(
            self.directory,
            base_offset,
            index_interval_bytes=self.config.index_interval_bytes,
            now_ms=now,
        )
        self._segments.append(segment)
        self._bases.append(base_offset)
        self._dir_dirty = True
        return segment

    def roll(self) -> None:
        """Start a new segment at the log end offset (if the active one is not empty)."""
        with self._lock:
            self._check_open()
            if self._segments[-1].size:
                self._roll(self._leo, self._clock())

    # -- reading -------------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, upto: int | None = None) -> ReadResult:
        """Whole batches from ``offset`` on, at most ``max_bytes`` (but never less than the first
        batch), and none that reaches ``upto`` (e.g. the high watermark, for consumers).

        Raises :class:`OffsetOutOfRangeError` below the log start or past the log end.
        """
        with self._lock:
            self._check_open()
            leo = self._leo
            if offset < self.log_start_offset or offset > leo:
                raise OffsetOutOfRangeError(
                    f"offset {offset} is outside [{self.log_start_offset}, {leo}] of "
                    f"{self.directory.name}"
                )
            limit = leo if upto is None else min(upto, leo)
            if offset >= limit:
                return ReadResult(records=b"", first_offset=offset, next_offset=offset)
            i = max(bisect_right(self._bases, offset) - 1, 0)
            for segment in self._segments[i:]:
                found = segment.read(offset, max_bytes, limit)
                if found is not None:
                    data, first, nxt = found
                    if not data:
                        break
                    return ReadResult(records=data, first_offset=first, next_offset=nxt)
            return ReadResult(records=b"", first_offset=offset, next_offset=offset)

    def offset_for_timestamp(self, timestamp: int) -> int | None:
        """The first offset of the first batch with a timestamp >= ``timestamp`` (ListOffsets)."""
        with self._lock:
            self._check_open()
            for segment in self._segments:
                if segment.max_timestamp >= timestamp:
                    found = segment.offset_for_timestamp(timestamp)
                    if found is not None:
                        return found
            return None

    # -- durability ----------------------------------------------------------------------------

    def flush(self) -> None:
        """fsync every segment holding data past the recovery point, then move the point to the
        log end offset."""
        with self._lock:
            self._check_open()
            i = max(bisect_right(self._bases, self._recovery_point) - 1, 0)
            for segment in self._segments[i:]:
                segment.flush()
            if self._dir_dirty:
                fsync_directory(self.directory)
                self._dir_dirty = False
            self._recovery_point = self._leo

    def close(self) -> None:
        """Flush, close every file and leave the clean-shutdown marker.

        The marker lives in the partition's directory, so each log's crash state stands alone;
        Kafka keeps one per log directory, and the same helpers serve a log manager there.
        """
        with self._lock:
            if self._closed:
                return
            self.flush()
            for segment in self._segments:
                segment.close()
            self._closed = True
            mark_clean_shutdown(self.directory)

    def __enter__(self) -> Log:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- truncation and retention --------------------------------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Remove every batch ending at or after ``offset`` (follower truncation); the epoch
        cache follows. A batch is never split, so the new end may fall below ``offset``.
        Returns whether anything was removed."""
        with self._lock:
            self._check_open()
            if offset < 0:
                raise ValueError(f"cannot truncate to negative offset {offset}")
            if offset >= self._leo:
                return False
            if offset < self.log_start_offset:
                self.truncate_fully_and_start_at(offset)
                return True
            while len(self._segments) > 1 and self._segments[-1].base_offset > offset:
                self._segments.pop().delete()
                self._bases.pop()
                self._dir_dirty = True
            self._segments[-1].truncate_to(offset)
            self._leo = self._segments[-1].next_offset
            self.leader_epoch_cache.truncate_from_end(self._leo)
            self._recovery_point = min(self._recovery_point, self._leo)
            return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop everything and restart the log, empty, at ``offset`` (a follower whose log is
        entirely below or unrelated to the leader's log start)."""
        with self._lock:
            self._check_open()
            for segment in self._segments:
                segment.delete()
            now = self._clock()
            self._segments = [
                LogSegment.create(
                    self.directory,
                    offset,
                    index_interval_bytes=self.config.index_interval_bytes,
                    now_ms=now,
                )
            ]
            self._bases = [offset]
            self._leo = self._recovery_point = offset
            self.leader_epoch_cache.clear()
            self._dir_dirty = True

    def delete_old_segments(
        self, *, now_ms: int | None = None, high_watermark: int | None = None
    ) -> int:
        """Apply ``retention.ms`` and ``retention.bytes``; returns the segments deleted.

        Deletes oldest first, never the active segment, and never a segment holding records at
        or past ``high_watermark`` (when given): uncommitted data is not retention's to drop.
        Time retention uses each segment's largest record timestamp.
        """
        with self._lock:
            self._check_open()
            cfg = self.config
            now = self._clock() if now_ms is None else now_ms
            bound = self._leo if high_watermark is None else min(high_watermark, self._leo)
            candidates = [
                seg
                for seg, nxt in zip(self._segments, self._bases[1:], strict=False)
                if nxt <= bound
            ]
            by_time = 0
            if cfg.retention_ms >= 0:
                for seg in candidates:
                    if now - seg.largest_timestamp() <= cfg.retention_ms:
                        break
                    by_time += 1
            by_size = 0
            if cfg.retention_bytes >= 0:
                excess = self.size_bytes - cfg.retention_bytes
                for seg in candidates:
                    if excess - seg.size < 0:
                        break
                    excess -= seg.size
                    by_size += 1
            count = max(by_time, by_size)
            for seg in self._segments[:count]:
                seg.delete()
            if count:
                del self._segments[:count]
                del self._bases[:count]
                self._dir_dirty = True
                self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
                self._recovery_point = max(self._recovery_point, self.log_start_offset)
            return count

    def __repr__(self) -> str:
        return (
            f"Log({self.directory.name}, start={self.log_start_offset}, end={self._leo}, "
            f"segments={len(self._segments)})"
        )
