"""The log of one partition: an ordered list of segments, the epoch cache, and recovery.

Appends take raw v2 batches. As leader, the log assigns offsets and stamps its epoch by
overwriting each batch's base offset and partition leader epoch, which lie outside the CRC, so
the append path costs one header parse, one CRC check and one write per batch whatever the batch
holds. As follower, it keeps the leader's offsets and epochs and only checks that they move
forward. Every check runs before the first byte is written: bad input changes nothing.

Opening a log without the clean-shutdown marker recovers it: every batch from the recovery point
on is re-checked (size, magic, CRC, increasing offsets), the log is cut at the first that fails,
later segments are dropped, indexes are rebuilt and the epoch cache is cut to what survived.
Segments wholly below the recovery point were fsynced and are trusted, as Kafka trusts them:
damage an open finds there is reported in one warning and kept (see
:meth:`LogSegment.open_flushed`), never a reason to cut the log or drop a later segment.
With the marker, each segment is trusted up to its last index entry and the batches past it (the
only ones an open reads anyway) get the same checks; one that fails sends its segment through the
same recovery, since a marker says the log was closed whole, not that nothing touched it since.
A ``leader-epoch-checkpoint`` that does not parse is moved aside (``.corrupt-<ms>``) and the
epoch cache is rebuilt from the leader epochs in the batch headers of the whole log.

The log also owns its partition's producer state (:mod:`replication.producer_state`): a leader
append of an idempotent producer's batch is checked against it before anything is written (a
retry is answered with the original offsets and not written again), follower appends update it
unchecked, and it is snapshotted at segment rolls and on close, reloaded on open and on
truncation.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from replication.checkpoints import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    clear_clean_shutdown,
    fsync_directory,
    has_clean_shutdown,
    make_private_directory,
    mark_clean_shutdown,
    move_aside,
    parse_log_directory_name,
)
from replication.compression import inflate_limit
from replication.epochs import EpochEndOffset, LeaderEpochCache
from replication.errors import (
    CorruptCheckpointError,
    CorruptSnapshotError,
    InvalidEpochError,
    OffsetOutOfRangeError,
    OutOfOrderOffsetError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    StorageError,
)
from replication.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    Duplicate,
    ProducerBatch,
    ProducerEntry,
    ProducerStateManager,
    decode_snapshot,
    snapshot_file_name,
)
from replication.records import (
    stamp_batch,
    validate_batches,
)
from replication.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    MAX_RELATIVE_OFFSET,
    TIME_INDEX_SUFFIX,
    BatchFacts,
    LogSegment,
    next_offset_of_file,
)
from replication.truncation import FollowerEpochView
from replication.validation import check_client_records

__all__ = ["AppendInfo", "DuplicateAppend", "Log", "LogConfig", "LogSlice", "ReadResult",
           "SegmentCopySource"]

_logger = logging.getLogger(__name__)

_DAY_MS = 24 * 3600 * 1000
MIN_SEGMENT_BYTES = 14
"""Kafka's least segment.bytes (a v0 record's overhead): below a batch's size, every append
is refused as too large, as in Kafka."""
_SWAP_SUFFIX = ".swap"
_CLEANED_SUFFIX = ".cleaned"
_STRAY_SUFFIXES = (".tmp", ".deleted", _CLEANED_SUFFIX, _SWAP_SUFFIX)


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True, kw_only=True)
class LogConfig:
    """Per-log settings, named after Kafka's topic configs, with Kafka's defaults.

    ``retention_ms`` / ``retention_bytes`` of -1 mean unlimited. A topic's overrides make
    one of these per topic (``replication.topic_settings``), swapped in by :meth:`Log.reconfigure`.
    """

    segment_bytes: int = 1 << 30  # segment.bytes
    segment_ms: int = 7 * _DAY_MS  # segment.ms
    retention_ms: int = 7 * _DAY_MS  # retention.ms
    retention_bytes: int = -1  # retention.bytes
    index_interval_bytes: int = 4096  # index.interval.bytes
    max_message_bytes: int = 1024 * 1024 + 12  # max.message.bytes (a batch, as leader)
    cleanup_delete: bool = True
    """``delete`` is in cleanup.policy: retention by time and size applies (Kafka's
    LogConfig.delete); a compact-only log keeps its segments."""
    compact: bool = False
    """``compact`` is in cleanup.policy: the cleaner keeps the latest record per key
    (:mod:`replication.cleaner`) and a leader refuses records without a key."""
    min_cleanable_dirty_ratio: float = 0.5  # min.cleanable.dirty.ratio
    min_compaction_lag_ms: int = 0  # min.compaction.lag.ms
    max_compaction_lag_ms: int = (1 << 63) - 1  # max.compaction.lag.ms
    delete_retention_ms: int = _DAY_MS  # delete.retention.ms
    remote_storage_enable: bool = False  # remote.storage.enable (KIP-405)
    """Rolled segments are copied to remote storage, local retention applies to the local
    part (and deletes only what is copied), the log start offset may lie below the first local
    segment."""
    local_retention_ms: int = -2  # local.retention.ms; -2: retention_ms
    local_retention_bytes: int = -2  # local.retention.bytes; -2: retention_bytes

    @property
    def effective_local_retention_ms(self) -> int:
        """``local.retention.ms``, with -2 meaning ``retention.ms`` (Kafka's default)."""
        return self.retention_ms if self.local_retention_ms == -2 else self.local_retention_ms

    @property
    def effective_local_retention_bytes(self) -> int:
        """``local.retention.bytes``, with -2 meaning ``retention.bytes``."""
        return (self.retention_bytes if self.local_retention_bytes == -2
                else self.local_retention_bytes)

    def __post_init__(self) -> None:
        if not MIN_SEGMENT_BYTES <= self.segment_bytes <= (1 << 31) - 1:
            raise ValueError(f"segment_bytes must be at least {MIN_SEGMENT_BYTES} and fit a "
                             f"uint32 position: {self.segment_bytes}")
        if self.max_message_bytes < 0:
            raise ValueError(f"max_message_bytes must be >= 0: {self.max_message_bytes}")
        if self.segment_ms < 1:
            raise ValueError(f"segment_ms must be positive: {self.segment_ms}")
        if self.retention_ms < -1 or self.retention_bytes < -1:
            raise ValueError("retention_ms and retention_bytes must be >= -1")
        if self.local_retention_ms < -2 or self.local_retention_bytes < -2:
            raise ValueError("local_retention_ms and local_retention_bytes must be >= -2")
        if self.index_interval_bytes < 0:
            raise ValueError(f"index_interval_bytes must be >= 0: {self.index_interval_bytes}")
        if not 0 <= self.min_cleanable_dirty_ratio <= 1:
            raise ValueError("min_cleanable_dirty_ratio must be in [0, 1]: "
                             f"{self.min_cleanable_dirty_ratio}")
        if (self.min_compaction_lag_ms < 0 or self.max_compaction_lag_ms < 1
                or self.delete_retention_ms < 0):
            raise ValueError("compaction lags and delete_retention_ms out of range")


@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentCopySource:
    """A rolled segment as a remote copy takes it (see :meth:`Log.copy_candidates`)."""

    base_offset: int
    end_offset: int
    """``next_segment_base - 1``, as Kafka counts a copied segment's end."""
    next_segment_base: int
    size: int
    max_timestamp: int
    log_path: Path
    offset_index_path: Path
    time_index_path: Path
    producer_snapshot: Path | None
    segment_epochs: tuple[tuple[int, int], ...]
    """``(epoch, start offset)`` of each epoch in the segment, the first clamped to its base."""
    epochs_to_end: tuple[tuple[int, int], ...]
    """Every epoch entry of the log starting below the segment's end."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AppendInfo:
    """Where an append landed: its first and last offsets, batch count and bytes.

    ``log_append_time`` is -1: timestamps are the producers' (CreateTime). ``duplicate`` is
    False: see :class:`DuplicateAppend`. (Both are class attributes, not fields: every append
    builds one of these, and each field of a frozen dataclass costs its constructor.)"""

    first_offset: int
    last_offset: int
    batches: int
    size: int
    duplicate: ClassVar[bool] = False
    log_append_time: ClassVar[int] = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class DuplicateAppend(AppendInfo):
    """An append that wrote nothing: the batch was an idempotent producer's retry of one the
    log holds. The offsets are the original batch's, ``log_append_time`` its timestamp (what
    Kafka answers a duplicate with); ``batches`` and ``size`` are 0."""

    log_append_time: int  # type: ignore[misc]
    duplicate: ClassVar[bool] = True


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


class LogSlice:
    """Bytes of a segment file to send as they are (``os.sendfile``), never read into memory:
    ``size`` bytes at ``position`` of the file open as ``fd``, starting with the batch whose base
    offset is ``first_offset``.

    The slice owns ``fd``, a duplicate of the segment's descriptor, so the bytes stay readable
    if retention deletes the segment meanwhile; :meth:`close` it once sent. A truncation may
    still shorten the file under it: a sender that gets fewer bytes than ``size`` must give up
    on the message it was framing."""

    __slots__ = ("fd", "first_offset", "position", "size")

    def __init__(self, fd: int, position: int, size: int, first_offset: int) -> None:
        self.fd = fd
        self.position = position
        self.size = size
        self.first_offset = first_offset

    def read(self) -> bytes:
        """The bytes themselves (tests, and senders that cannot use sendfile)."""
        return os.pread(self.fd, self.size, self.position)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"LogSlice(fd={self.fd}, position={self.position}, size={self.size})"


class Log:
    """The log of one partition, in a directory named ``<topic>-<partition>``.

    Thread-safe: one lock serialises appends, reads, truncation and retention.
    """

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        clock: Callable[[], int],
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
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
        self._epochs_lost = False
        self._delete_horizon = -1
        self._truncated_to: int | None = None
        self._log_start_offset = 0
        self._highest_remote_offset = -1
        self.leader_epoch_cache = self._open_epoch_cache()
        self._producers = ProducerStateManager(
            directory, expiration_ms=producer_id_expiration_ms, clock=clock)

    # -- opening -------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: Path | str,
        *,
        config: LogConfig | None = None,
        recovery_point: int = 0,
        log_start_offset: int | None = None,
        clock: Callable[[], int] | None = None,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> Log:
        """Open (creating if needed) the log in ``directory``.

        After a clean shutdown, segments are trusted up to their last index entry, the batches
        past it are checked, and indexes that are missing or corrupt are rebuilt. Otherwise every
        segment from the one holding ``recovery_point`` (the offset up to which the log was
        known flushed; 0 checks all) is recovered. Either way, the segments wholly below
        ``recovery_point`` are never cut (damage found there is logged once and kept).
        ``clock`` returns milliseconds and drives ``segment.ms``, retention and the expiry of
        idle producers' state after ``producer_id_expiration_ms`` (a broker setting in Kafka,
        ``producer.id.expiration.ms``). ``log_start_offset`` is the checkpointed log start
        (``log-start-offset-checkpoint``): with remote storage it may be below the first local
        segment (None: 0, until the remote tier says more); otherwise the log start is the later
        of it and the first local offset (records deleted below it by DeleteRecords stay gone
        while their segment is still on disk). Either way it never passes the log end.
        """
        directory = Path(directory)
        make_private_directory(directory)
        log = cls(directory, config or LogConfig(), clock or _wall_clock_ms,
                  producer_id_expiration_ms)
        log._load(recovery_point)
        local = log._first_base
        if not log.config.remote_storage_enable:
            start = local if log_start_offset is None else max(log_start_offset, local)
            log._log_start_offset = min(start, log._leo)
            log.leader_epoch_cache.truncate_from_start(log._log_start_offset)
        else:
            # Without a checkpointed one (a broker killed before it wrote one), a tiered log
            # starts at 0, as Kafka's does: the remote log manager's first pass moves it up to
            # what remote storage holds; starting at the first local offset would hide the
            # remote part for good, as the log start never moves back.
            start = 0 if log_start_offset is None else log_start_offset
            log._log_start_offset = min(max(start, 0), log._leo)
            log.leader_epoch_cache.truncate_from_start(log._log_start_offset)
        return log

    def _open_epoch_cache(self) -> LeaderEpochCache:
        """The epoch cache from its checkpoint. A corrupt checkpoint is moved aside, with one
        warning, and the cache starts empty, to be rebuilt from the batches once the segments
        are open: one partition's bad file must not keep a broker's other partitions down, and
        the log holds every epoch that wrote a batch in it."""
        path = self.directory / LEADER_EPOCH_CHECKPOINT_FILE
        try:
            return LeaderEpochCache(path)
        except CorruptCheckpointError as exc:
            moved = move_aside(path, self._clock())
            _logger.warning(
                "%s is corrupt (%s); moved to %s, rebuilding the leader epoch cache from the "
                "batches of the log", path, exc, moved.name,
            )
            self._epochs_lost = True
            return LeaderEpochCache(path)

    def _rebuild_epoch_cache(self) -> None:
        """Fill the (empty) epoch cache from the leader epochs stamped in every batch header,
        as recovery does for the batches it checks: an entry where each larger epoch first
        appears."""
        found: list[tuple[int, int]] = []

        def on_epoch(epoch: int, base: int) -> None:
            if not found or epoch > found[-1][0]:
                found.append((epoch, base))

        for segment in self._segments:
            segment.scan_epochs(on_epoch)
        self.leader_epoch_cache.assign_all(found)

    def _load(self, recovery_point: int) -> None:
        directory, cfg, now = self.directory, self.config, self._clock()
        clean = has_clean_shutdown(directory)
        bases = self._scan_directory()
        # Segments wholly below the recovery point were fsynced: trusted, never cut (Kafka's
        # rule); from the one holding it on, recovered after a crash, checked after a clean one.
        flushed = max(bisect_right(bases, recovery_point) - 1, 0)
        first_unchecked = len(bases) if clean else flushed
        damage: list[str] = []
        cache = self.leader_epoch_cache
        latest = [cache.latest_epoch if cache.latest_epoch is not None else -1]
        rebuilt_epochs: list[tuple[int, int]] = []

        def on_epoch(epoch: int, base: int) -> None:
            if epoch > latest[0]:
                latest[0] = epoch
                rebuilt_epochs.append((epoch, base))

        producers, recovering = self._producers, False
        for i, base in enumerate(bases):
            if i < flushed:
                seg, found = LogSegment.open_flushed(
                    directory, base, index_interval_bytes=cfg.index_interval_bytes, now_ms=now,
                    next_base=bases[i + 1])
                if found is not None:
                    damage.append(found)
                cut = 0
            elif i < first_unchecked:
                seg, cut = LogSegment.open_existing(
                    directory, base, index_interval_bytes=cfg.index_interval_bytes, now_ms=now
                )
            else:
                if not recovering:
                    # The producer state up to the first segment recovery walks, from the
                    # snapshots and the trusted segments below it; recovery feeds it the rest
                    # in the same pass.
                    self._bases = [s.base_offset for s in self._segments]
                    producers.start_load(segment_bases=bases, log_start=bases[0], upto=base,
                                         replay=self._producer_batches)
                    recovering = True
                seg, cut = LogSegment.recover_existing(
                    directory,
                    base,
                    index_interval_bytes=cfg.index_interval_bytes,
                    now_ms=now,
                    on_epoch=on_epoch,
                    on_producer=producers.replay_batch,
                )
                seg.flush()
            self._segments.append(seg)
            if cut:
                _logger.warning(
                    "%s: cut %d bytes that failed validation off the end of segment %d%s",
                    directory, cut, base,
                    f"; dropped {len(bases) - i - 1} later segments" if i + 1 < len(bases) else "",
                )
                # Whatever follows a corrupt batch cannot be trusted to continue the log.
                for later in bases[i + 1 :]:
                    self._delete_files(later)
                break
        if damage:
            _logger.warning(
                "%s: damage below the recovery point %d, in segments that were flushed and are "
                "kept whole, as Kafka keeps them (a fetch of a damaged batch gets its bytes as "
                "they are): %s", directory, recovery_point, "; ".join(damage))
        if not self._segments:
            self._segments.append(
                LogSegment.create(
                    directory, 0, index_interval_bytes=cfg.index_interval_bytes, now_ms=now
                )
            )
        self._bases = [s.base_offset for s in self._segments]
        self._leo = self._segments[-1].next_offset
        if self._epochs_lost:
            self._rebuild_epoch_cache()
        elif clean:
            # An epoch may start at the log end (a leader that has not appended yet), not past it.
            cache.truncate_from_end(self._leo + 1)
        else:
            cache.assign_all(rebuilt_epochs)
            cache.truncate_from_end(self._leo)
        if not cfg.remote_storage_enable:
            # A tiered log keeps the epochs of its remote part: open() cuts at the log start.
            cache.truncate_from_start(self._first_base)
        self._recovery_point = self._leo
        self._load_producer_state(recovered=recovering)
        fsync_directory(directory)
        clear_clean_shutdown(directory)

    def _load_producer_state(self, *, recovered: bool) -> None:
        """The producer state at the log end: the latest snapshot at or below it, and the batch
        headers after it (``recovered``: the recovery walk has built it already, up to the log
        end it found). When the log had to be replayed past its latest snapshot, the result is
        snapshotted at the log end (as Kafka does), so the next open need not replay it."""
        producers = self._producers
        if recovered:
            producers.finish_load(self._leo)
        else:
            producers.load(segment_bases=self._bases, log_start=self._first_base,
                           log_end=self._leo, replay=self._producer_batches)
        snapshots = producers.snapshot_offsets
        if self._leo > (snapshots[-1] if snapshots else self._first_base):
            producers.take_snapshot(self._leo, sync=True)

    def _producer_batches(self, start: int, end: int) -> Iterator[ProducerBatch]:
        """The idempotent batches from offset ``start`` to before ``end``, headers only."""
        i = max(bisect_right(self._bases, start) - 1, 0)
        for segment in self._segments[i:]:
            if segment.base_offset >= end:
                return
            yield from segment.producer_batches(start, end)

    def _scan_directory(self) -> list[int]:
        """Base offsets of the segments on disk; clears leftovers of interrupted operations.

        A cleaner's swap interrupted by a crash is settled as Kafka's LogLoader settles it: a
        ``.cleaned`` file was never complete and goes; a ``.log.swap`` file is complete (it is
        fsynced before it gets that name), so it replaces every segment whose base offset lies
        in its range (its own base up to its next offset), which the cleaner had begun to
        delete in offset order, and becomes a segment. Its indexes are rebuilt on open."""
        bases = []
        index_files = []
        swaps = []
        for path in self.directory.iterdir():
            name = path.name
            if name.endswith(LOG_SUFFIX + _SWAP_SUFFIX) and name[:20].isdigit():
                swaps.append(path)
            elif name.endswith(_STRAY_SUFFIXES):
                path.unlink()
            elif name.endswith(LOG_SUFFIX) and len(name) == 24 and name[:20].isdigit():
                bases.append(int(name[:20]))
            elif name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX)):
                index_files.append(path)
        for swap in sorted(swaps):
            base = int(swap.name[:20])
            end = max(next_offset_of_file(swap), base + 1)
            replaced = [b for b in bases if base <= b < end]
            for b in replaced:
                self._delete_files(b)
                bases.remove(b)
            for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                (self.directory / f"{base:020d}{suffix}").unlink(missing_ok=True)
            os.replace(swap, self.directory / f"{base:020d}{LOG_SUFFIX}")
            bases.append(base)
            _logger.warning("%s: finished an interrupted clean: segment %d replaces %s",
                            self.directory, base, replaced)
        if swaps:
            fsync_directory(self.directory)
        index_files = [p for p in index_files if p.exists()]
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
        """The first offset still in the log: in the remote tier too when the log is tiered
        (``remote.storage.enable``), else the first local offset, or later when records were
        deleted (DeleteRecords) inside the first local segment."""
        if not self.config.remote_storage_enable:
            return max(self._log_start_offset, self._segments[0].base_offset)
        return self._log_start_offset

    @property
    def local_log_start_offset(self) -> int:
        """The first offset readable on local disk (Kafka's localLogStartOffset): the first
        local segment's base, or the log start when that is later."""
        return max(self._segments[0].base_offset, self._log_start_offset)

    @property
    def _first_base(self) -> int:
        """The base offset of the first local segment (where its files begin)."""
        return self._segments[0].base_offset

    @property
    def highest_offset_in_remote_storage(self) -> int:
        """The highest offset known copied to remote storage for this log's lineage (-1:
        none); local retention deletes no segment above it."""
        return self._highest_remote_offset

    def update_remote_state(self, *, highest_remote_offset: int, log_start_offset: int) -> None:
        """What the remote tier holds, as the remote log manager found it: the highest copied
        offset, and the log start (the first remote offset still kept, or the first local one
        when the remote tier holds nothing below it). The log start never moves back."""
        with self._lock:
            self._highest_remote_offset = highest_remote_offset
            new_start = min(log_start_offset, self._segments[0].base_offset)
            if new_start > self._log_start_offset:
                self._log_start_offset = new_start
                self.leader_epoch_cache.truncate_from_start(new_start)

    @property
    def recovery_point(self) -> int:
        """Everything below this offset is fsynced; persist it to recover less after a crash."""
        return self._recovery_point

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    def size_bytes_from(self, offset: int) -> int:
        """The bytes of the local segments whose base offset is at or after ``offset``."""
        with self._lock:
            return sum(s.size for s in self._segments if s.base_offset >= offset)

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

        Raises :class:`InvalidEpochError` if the log already holds a later epoch. Kafka's cache
        would take the older epoch and drop the later entries, but the later epoch's batches
        would stay in the log ahead of the new leader's, and followers, which refuse epochs
        that go back, could never copy them: refusing the leadership is the visible failure.
        """
        with self._lock:
            self._check_open()
            latest = self.leader_epoch_cache.latest_epoch
            if latest is not None and epoch < latest:
                raise InvalidEpochError(
                    f"leader epoch {epoch} is older than the log's latest epoch {latest}"
                )
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
                log_start_offset=self.local_log_start_offset,
                log_end_offset=self._leo,
            )

    def producer_entry(self, producer_id: int) -> ProducerEntry | None:
        """What the log knows of idempotent producer ``producer_id`` (None: nothing)."""
        with self._lock:
            return self._producers.entry(producer_id)

    def producer_entries(self) -> dict[int, ProducerEntry]:
        """The producer state: producer id -> entry (a copy)."""
        with self._lock:
            return self._producers.entries()

    @property
    def producer_snapshot_offsets(self) -> tuple[int, ...]:
        """Offsets of the producer state snapshots on disk."""
        with self._lock:
            return self._producers.snapshot_offsets

    def remove_expired_producers(self, now_ms: int | None = None) -> int:
        """Forget the producers idle for ``producer.id.expiration.ms`` (by their last batch's
        timestamp, as Kafka measures it); returns how many."""
        with self._lock:
            return self._producers.remove_expired(self._clock() if now_ms is None else now_ms)

    def reconfigure(self, config: LogConfig) -> None:
        """Take new settings (a topic config change): the next append rolls and the next
        retention pass deletes by them; segments rolled from now on index at its interval."""
        with self._lock:
            self.config = config

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

        An idempotent producer's batch is first checked against the producer state: a retry
        of a batch the log holds returns that batch's offsets with ``duplicate`` set, writing
        nothing (a :class:`DuplicateAppend`); :class:`OutOfOrderSequenceError`,
        :class:`InvalidProducerEpochError` and
        :class:`InvalidRecordError` refuse it (see :mod:`replication.producer_state`).
        """
        facts = validate_batches(records, from_client=True)
        limit = self.config.max_message_bytes
        for fact in facts:
            if fact[1] > limit:
                raise RecordTooLargeError(
                    f"a batch of {fact[1]} bytes exceeds max.message.bytes {limit}")
        check_client_records(records, facts, limit=inflate_limit(limit),
                             compacted=self.config.compact, where=self.directory.name)
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
            checked = (
                self._producers.check_client_append(buf, facts, offset)
                if len(facts) > 1 or facts[0][6] >= 0 else None  # a producer id: idempotent
            )
            if checked is not None and type(checked) is Duplicate:
                batch = checked.batch
                return DuplicateAppend(first_offset=batch.first_offset,
                                       last_offset=batch.last_offset, batches=0, size=0,
                                       log_append_time=batch.timestamp)
            stamped: list[BatchFacts] = []
            for pos, size, _base, last_delta, _epoch, max_ts, pid in facts:
                stamp_batch(buf, pos, offset, leader_epoch)
                stamped.append((pos, size, offset, last_delta, leader_epoch, max_ts, pid))
                offset += last_delta + 1
            info = self._append(memoryview(buf), stamped, [(leader_epoch, self._leo)])
            if checked is not None:
                self._producers.apply(checked)  # type: ignore[arg-type]
            return info

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
            for _pos, _size, base, last_delta, epoch, _ts, _pid in facts:
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
            producers = self._producers.replicated_entries(records, facts)
            info = self._append(memoryview(records), facts, new_epochs)
            if producers is not None:
                self._producers.apply(producers)
            return info

    def _append(
        self, data: memoryview, facts: list[BatchFacts], epochs: list[tuple[int, int]]
    ) -> AppendInfo:
        size = len(data)
        if size > self.config.segment_bytes:
            raise RecordBatchTooLargeError(
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
        # The state of everything below the new segment, so that recovery can start from it
        # and replay the new segment alone (fsynced by the next flush, as Kafka does).
        self._producers.take_snapshot(base_offset, sync=False)
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

    def _read_limit(self, offset: int, upto: int | None) -> int:
        """Where a read from ``offset`` must stop (the log end, or ``upto`` below it); raises
        :class:`OffsetOutOfRangeError` below the log start or past the log end. Under the lock."""
        self._check_open()
        leo = self._leo
        if offset < self.local_log_start_offset or offset > leo:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside [{self.local_log_start_offset}, {leo}] of "
                f"{self.directory.name}"
            )
        return leo if upto is None else min(upto, leo)

    def read(self, offset: int, max_bytes: int, upto: int | None = None) -> ReadResult:
        """Whole batches from ``offset`` on, at most ``max_bytes`` (but never less than the first
        batch), and none that reaches ``upto`` (e.g. the high watermark, for consumers).

        Raises :class:`OffsetOutOfRangeError` below the log start or past the log end.
        """
        with self._lock:
            limit = self._read_limit(offset, upto)
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

    def read_slice(
        self, offset: int, max_bytes: int, upto: int | None = None, *, min_one: bool = True
    ) -> LogSlice | None:
        """Where a read of ``offset`` would find its bytes, as a :class:`LogSlice` of the segment
        file, or ``None`` when there is nothing to send. The region is what a Kafka broker hands
        to ``sendfile``: from the batch holding ``offset``, ``max_bytes`` long (at least the first
        batch with ``min_one``), never reaching ``upto``, possibly ending inside a batch (see
        :meth:`LogSegment.extent`). One segment at most, as Kafka reads one.

        Raises :class:`OffsetOutOfRangeError` below the log start or past the log end.
        """
        with self._lock:
            limit = self._read_limit(offset, upto)
            if offset >= limit:
                return None
            i = max(bisect_right(self._bases, offset) - 1, 0)
            for segment in self._segments[i:]:
                found = segment.extent(offset, max_bytes, limit, min_one=min_one)
                if found is not None:
                    position, size, first = found
                    if not size:
                        return None
                    return LogSlice(segment.duplicate_fd(), position, size, first)
            return None

    def offset_for_timestamp(self, timestamp: int) -> int | None:
        """The first offset of the first batch with a timestamp >= ``timestamp`` (ListOffsets)
        that ends at or after the log start; never below the log start (the batch may begin
        below it when records were deleted inside it)."""
        with self._lock:
            self._check_open()
            start = self.local_log_start_offset
            for segment, nxt in zip(self._segments, [*self._bases[1:], None], strict=True):
                if segment.max_timestamp >= timestamp and (nxt is None or nxt > start):
                    found = segment.offset_for_timestamp(timestamp, start)
                    if found is not None:
                        return max(found, start)
            return None

    def max_timestamp(self) -> tuple[int, int] | None:
        """The largest record timestamp in the log and the last offset of a batch holding it
        (ListOffsets' MAX_TIMESTAMP, KIP-734); None when no batch carries a timestamp."""
        with self._lock:
            self._check_open()
            best = max(self._segments, key=lambda s: s.max_timestamp)
            if best.max_timestamp < 0:
                return None
            return best.max_timestamp, best.offset_of_max_timestamp

    # -- durability ----------------------------------------------------------------------------

    def flush(self) -> None:
        """fsync every segment holding data past the recovery point, then move the point to the
        log end offset."""
        with self._lock:
            self._check_open()
            i = max(bisect_right(self._bases, self._recovery_point) - 1, 0)
            for segment in self._segments[i:]:
                segment.flush()
            self._producers.sync_snapshots()
            if self._dir_dirty:
                fsync_directory(self.directory)
                self._dir_dirty = False
            self._recovery_point = self._leo

    def close(self, *, clean: bool = True) -> None:
        """Flush, snapshot the producer state at the log end, close every file and leave the
        clean-shutdown marker.

        The marker lives in the partition's directory, so each log's crash state stands alone;
        Kafka keeps one per log directory, and the same helpers serve a log manager there.
        ``clean=False`` closes as a killed process leaves the log (tests): no snapshot, no
        marker.
        """
        with self._lock:
            if self._closed:
                return
            self.flush()
            if clean:
                self._producers.take_snapshot(self._leo, sync=True)
            for segment in self._segments:
                segment.close()
            self._closed = True
            if clean:
                mark_clean_shutdown(self.directory)

    def __enter__(self) -> Log:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- compaction ----------------------------------------------------------------------------

    def segment_infos(self) -> list[tuple[int, int, int, int]]:
        """``(base offset, next offset, size, largest timestamp)`` of each segment, the active
        one last: what the cleaner decides from."""
        with self._lock:
            self._check_open()
            return [(s.base_offset, s.next_offset, s.size, s.largest_timestamp())
                    for s in self._segments]

    def dirty_stats(self, first_dirty: int, upto: int) -> tuple[int, int, int]:
        """``(clean bytes, dirty bytes, first dirty timestamp)``: the sizes of the segments
        below ``first_dirty`` and of those from it to ``upto`` (never the active one), and the
        first batch timestamp of the first dirty segment (-1 if unknown), which
        ``max.compaction.lag.ms`` is measured from."""
        with self._lock:
            self._check_open()
            clean = dirty = 0
            first_ts = -1
            for seg, nxt in zip(self._segments, self._bases[1:], strict=False):
                if seg.base_offset >= upto:
                    break
                if nxt <= first_dirty:
                    clean += seg.size
                else:
                    if not dirty and seg.first_batch_timestamp is not None:
                        first_ts = seg.first_batch_timestamp
                    dirty += seg.size
            return clean, dirty, first_ts

    def open_cleanable(self, upto: int) -> tuple[list[LogSegment], list[tuple[int, int, int, int]]]:
        """The segments the cleaner may rewrite (every one below the active segment whose base
        is below ``upto``) and, for each, ``(base offset, next offset, size, fd)`` with a
        duplicate descriptor the caller closes: the files stay readable whatever the log does
        meanwhile, and :meth:`replace_segments` checks that they are still the log's."""
        with self._lock:
            self._check_open()
            chosen = [s for s in self._segments[:-1] if s.base_offset < upto]
            return chosen, [(s.base_offset, s.next_offset, s.size, s.duplicate_fd())
                            for s in chosen]

    def replace_segments(self, old: list[LogSegment], cleaned: Path,
                         stage: Callable[[str], None] | None = None,
                         sizes: list[int] | None = None) -> bool:
        """Swap the consecutive segments ``old`` for the cleaned file ``cleaned`` (named
        ``<base of old[0]>.log.cleaned``, fsynced): rename it to ``.log.swap``, delete the old
        segments in offset order, rename the swap file to the segment's name and open it. A
        crash between any two steps is settled by the next open (:meth:`_scan_directory`).

        Returns False, changing nothing, if ``old`` are no longer the log's segments as they
        were (a truncation or retention got there first), or no longer ``sizes`` bytes long.
        ``stage(name)`` is called after each step (tests inject crashes there)."""
        def step(name: str) -> None:
            if stage is not None:
                stage(name)

        with self._lock:
            self._check_open()
            first = self._segments.index(old[0]) if old[0] in self._segments else -1
            if (first < 0 or self._segments[first:first + len(old)] != old
                    or first + len(old) >= len(self._segments)
                    or (sizes is not None and [s.size for s in old] != sizes)):
                return False
            base = old[0].base_offset
            swap = self.directory / f"{base:020d}{LOG_SUFFIX}{_SWAP_SUFFIX}"
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
                now_ms=self._clock())
            segment.on_become_inactive()
            self._segments[first:first + len(old)] = [segment]
            self._bases = [s.base_offset for s in self._segments]
            return True

    def _note_truncation(self, offset: int) -> None:
        if self._truncated_to is None or offset < self._truncated_to:
            self._truncated_to = offset

    def take_truncation(self) -> int | None:
        """The lowest offset the log was truncated to since the last call (None: no
        truncation): the cleaner's checkpoint must not stay above it, or what a follower
        fetches again there would count as clean (Kafka's maybeTruncateCheckpoint)."""
        with self._lock:
            offset, self._truncated_to = self._truncated_to, None
            return offset

    def note_delete_horizon(self, horizon: int) -> None:
        """The latest delete horizon a cleaner pass stamped on tombstones it kept (-1: it kept
        none): when it passes, the log is due a clean even if it is not dirty."""
        with self._lock:
            self._delete_horizon = horizon

    def delete_horizon_due(self, now_ms: int) -> bool:
        """Whether tombstones kept by the last clean may now be removed."""
        return 0 <= self._delete_horizon <= now_ms

    # -- truncation and retention --------------------------------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Remove every batch ending at or after ``offset`` (follower truncation); the epoch
        cache follows, also when no batch goes (its entries from the log end on are dropped).
        A batch is never split, so the new end may fall below ``offset``. Returns whether any
        batch was removed."""
        with self._lock:
            self._check_open()
            if offset < 0:
                raise ValueError(f"cannot truncate to negative offset {offset}")
            if offset >= self._leo:
                # No batch goes, but an epoch this replica led without writing anything
                # (an entry at the log end) may still be in the cache: the new leader never
                # had it, and a follower that kept it would keep naming it as its last
                # fetched epoch, be told it diverged, and cut here again, for ever.
                self.leader_epoch_cache.truncate_from_end(self._leo)
                return False
            self._note_truncation(offset)
            if offset < self._first_base:
                self.truncate_fully_and_start_at(offset)
                return True
            # Kafka's rule: records below the log start come back no more, but a truncation
            # below it (to what the leader holds) moves the log start back with it.
            self._log_start_offset = min(self._log_start_offset, offset)
            while len(self._segments) > 1 and self._segments[-1].base_offset > offset:
                self._segments.pop().delete()
                self._bases.pop()
                self._dir_dirty = True
            self._segments[-1].truncate_to(offset)
            self._leo = self._segments[-1].next_offset
            self.leader_epoch_cache.truncate_from_end(self._leo)
            self._recovery_point = min(self._recovery_point, self._leo)
            self._reload_producer_state()
            return True

    def _reload_producer_state(self) -> None:
        """After a truncation: the state of what is left, from the latest snapshot below the new
        end. The snapshots past the end are deleted durably at once: one resurrected by a
        power failure would describe batches the log no longer holds."""
        before = self._producers.snapshot_offsets
        self._producers.reload(log_start=self._first_base, log_end=self._leo,
                               replay=self._producer_batches)
        if self._producers.snapshot_offsets != before:
            fsync_directory(self.directory)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop everything and restart the log, empty, at ``offset`` (a follower whose log is
        entirely below or unrelated to the leader's log start)."""
        with self._lock:
            self._check_open()
            self._note_truncation(offset)
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
            self._log_start_offset = offset
            self._highest_remote_offset = -1
            self.leader_epoch_cache.clear()
            self._producers.truncate_fully()
            self._dir_dirty = True

    def start_from_remote_state(
        self, offset: int, *, log_start_offset: int, epochs: Sequence[tuple[int, int]],
        producer_snapshot: bytes | None,
    ) -> None:
        """Restart a tiered log empty at ``offset`` on top of what remote storage holds below
        it (a follower of a leader whose local log starts there, KIP-405): the log start
        ``log_start_offset``, the leader ``epochs`` (``(epoch, start offset)``, ascending, all
        starting below ``offset``: the remote segment's leader-epoch checkpoint) and the
        producer state at ``offset`` (the remote segment's snapshot; None: no producers).
        Checks everything before changing anything: ValueError for epochs out of order or
        past ``offset``, a snapshot that does not decode, or a log that is not tiered."""
        if not self.config.remote_storage_enable:
            raise ValueError(f"{self.directory.name} is not tiered (remote.storage.enable)")
        pairs = [(int(e), int(o)) for e, o in epochs]
        for (e1, o1), (e2, o2) in zip(pairs, pairs[1:], strict=False):
            if e2 <= e1 or o2 < o1:
                raise ValueError(f"remote leader epochs out of order: {pairs}")
        if any(o < 0 or e < 0 or o >= offset for e, o in pairs):
            raise ValueError(f"remote leader epochs {pairs} do not end below {offset}")
        if producer_snapshot is not None:
            try:
                decode_snapshot(producer_snapshot)
            except CorruptSnapshotError as exc:
                raise ValueError(str(exc)) from exc
        with self._lock:
            self.truncate_fully_and_start_at(offset)
            start = min(max(log_start_offset, 0), offset)
            self._log_start_offset = start
            self.leader_epoch_cache.assign_all(pairs)
            self.leader_epoch_cache.truncate_from_start(start)
            if producer_snapshot is not None:
                self._producers.install_snapshot(offset, producer_snapshot)

    def maybe_increment_log_start_offset(self, offset: int, *,
                                         high_watermark: int | None = None) -> bool:
        """Move the log start up to ``offset`` (DeleteRecords on a leader, or the leader's log
        start from a fetch answer on a follower), never past ``high_watermark`` (when given)
        nor the log end, never back (Kafka's maybeIncrementLogStartOffset); returns whether
        it moved. The records below it are gone for readers at once; the segments wholly
        below it go on the next retention pass (:meth:`delete_old_segments`), the active
        one never. The epoch cache is cut at the new start, as the recovery point."""
        with self._lock:
            self._check_open()
            bound = self._leo if high_watermark is None else min(high_watermark, self._leo)
            new = min(offset, bound)
            if new <= self.log_start_offset:
                return False
            self._log_start_offset = new
            self._recovery_point = max(self._recovery_point, min(new, self._leo))
            self.leader_epoch_cache.truncate_from_start(new)
            _logger.info("%s: log start offset moved to %d", self.directory.name, new)
            return True

    def delete_old_segments(
        self, *, now_ms: int | None = None, high_watermark: int | None = None
    ) -> int:
        """Apply ``retention.ms`` and ``retention.bytes``; returns the segments deleted.

        Deletes oldest first, never the active segment, and never a segment holding records at
        or past ``high_watermark`` (when given): uncommitted data is not retention's to drop.
        Time retention uses each segment's largest record timestamp.

        A tiered log (``remote.storage.enable``) applies ``local.retention.ms|bytes`` instead
        (-2: the same as the whole log's), and deletes only segments whose every offset is in
        remote storage (at or below :attr:`highest_offset_in_remote_storage`): the log start
        offset stays where the remote tier begins, only the local log start moves.
        """
        with self._lock:
            self._check_open()
            cfg = self.config
            breached = self._delete_below_log_start()
            if not cfg.cleanup_delete:
                return breached
            now = self._clock() if now_ms is None else now_ms
            bound = self._leo if high_watermark is None else min(high_watermark, self._leo)
            tiered = cfg.remote_storage_enable
            if tiered:
                bound = min(bound, self._highest_remote_offset + 1)
                retention_ms = cfg.effective_local_retention_ms
                retention_bytes = cfg.effective_local_retention_bytes
            else:
                retention_ms, retention_bytes = cfg.retention_ms, cfg.retention_bytes
            candidates = [
                seg
                for seg, nxt in zip(self._segments, self._bases[1:], strict=False)
                if nxt <= bound
            ]
            by_time = 0
            if retention_ms >= 0:
                for seg in candidates:
                    if now - seg.largest_timestamp() <= retention_ms:
                        break
                    by_time += 1
            by_size = 0
            if retention_bytes >= 0:
                excess = self.size_bytes - retention_bytes
                for seg in candidates:
                    if excess - seg.size < 0:
                        break
                    excess -= seg.size
                    by_size += 1
            count = max(by_time, by_size)
            if tiered and count:
                _logger.info("%s: deleting local segments %s (offsets up to %d are in remote "
                             "storage)", self.directory.name, self._bases[:count],
                             self._highest_remote_offset)
            if count:
                self._drop_oldest_segments(count)
                if not tiered:
                    self._log_start_offset = self.local_log_start_offset
                self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
            return breached + count

    def _delete_below_log_start(self) -> int:
        """Delete the segments wholly below the log start (the local log start of a tiered
        log), whatever ``cleanup.policy`` says, never the active one (Kafka's
        deleteLogStartOffsetBreachedSegments); returns how many (lock held)."""
        start = self.local_log_start_offset
        count = max(bisect_right(self._bases, start) - 1, 0)
        if count:
            _logger.info("%s: deleting segments %s below the log start %d",
                         self.directory.name, self._bases[:count], start)
            self._drop_oldest_segments(count)
        return count

    def _drop_oldest_segments(self, count: int) -> None:
        """Delete the ``count`` oldest segments (never the active one; lock held)."""
        for seg in self._segments[:count]:
            seg.delete()
        del self._segments[:count]
        del self._bases[:count]
        self._dir_dirty = True
        self._producers.delete_snapshots_below(self._first_base)
        self._recovery_point = max(self._recovery_point, self._first_base)

    def move_start_for_remote_retention(self, offset: int) -> int:
        """Remote retention is deleting every remote segment below ``offset`` (the first one it
        keeps, or the local log start when it keeps none): the log start moves there in the
        same pass, as Kafka's updateLogStartOffsetFromRemoteTier moves it, so that ListOffsets'
        EARLIEST never names an offset that no tier serves. The local segments wholly below
        it go with it (Kafka deletes the segments below the log start; their remote copies
        are going, expired by the same retention), never the active one; the start is then
        ``offset``, or the first local offset if that is lower (that segment holds it).
        Returns the local segments deleted; a log that is not tiered is left alone."""
        with self._lock:
            self._check_open()
            if not self.config.remote_storage_enable or offset <= self.log_start_offset:
                return 0
            count = max(min(bisect_right(self._bases, offset) - 1, len(self._bases) - 1), 0)
            if count:
                _logger.info("%s: deleting local segments %s below the log start %d (remote "
                             "retention)", self.directory.name, self._bases[:count], offset)
                self._drop_oldest_segments(count)
            new_start = min(offset, self._segments[0].base_offset)
            if new_start > self._log_start_offset:
                self._log_start_offset = new_start
                self.leader_epoch_cache.truncate_from_start(new_start)
            return count

    def copy_candidates(self, from_offset: int, upto: int) -> list[SegmentCopySource]:
        """The rolled segments a remote copy may take, in offset order: every one but the
        active segment whose offsets all lie below ``upto`` (the HW) and that holds offsets
        at or after ``from_offset`` (the segment holding ``from_offset`` included, as Kafka's
        copier takes it). Each with its files, the producer snapshot at its end if the log
        has one, and the leader epochs: those in the segment (the first one starting at its
        base) and every entry up to its end (the sliced checkpoint)."""
        with self._lock:
            self._check_open()
            out = []
            entries = self.leader_epoch_cache.entries
            for seg, nxt in zip(self._segments, self._bases[1:], strict=False):
                if nxt > upto:
                    break
                if nxt - 1 < from_offset or seg.size == 0:
                    continue
                upto_end = tuple((e.epoch, e.start_offset) for e in entries
                                 if e.start_offset < nxt)
                inside: list[tuple[int, int]] = []
                for epoch, start in upto_end:
                    if start <= seg.base_offset:
                        inside = [(epoch, seg.base_offset)]
                    else:
                        inside.append((epoch, start))
                snapshot = self.directory / snapshot_file_name(nxt)
                out.append(SegmentCopySource(
                    base_offset=seg.base_offset, end_offset=nxt - 1,
                    next_segment_base=nxt, size=seg.size,
                    max_timestamp=seg.largest_timestamp(), log_path=seg.log_path,
                    offset_index_path=seg.offset_index.path,
                    time_index_path=seg.time_index.path,
                    producer_snapshot=snapshot if snapshot.exists() else None,
                    segment_epochs=tuple(inside), epochs_to_end=upto_end))
            return out

    def __repr__(self) -> str:
        return (
            f"Log({self.directory.name}, start={self.log_start_offset}, end={self._leo}, "
            f"segments={len(self._segments)})"
        )
