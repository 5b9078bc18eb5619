"""The log of one partition: an ordered list of segments, the epoch cache, and recovery.

Appends take raw v2 batches. As leader, the log assigns offsets and stamps its epoch by
overwriting each batch's base offset and partition leader epoch, which lie outside the CRC, so
the append path costs one header parse, one CRC check and one write per batch whatever the batch
holds. As follower, it keeps the leader's offsets and epochs and only checks that they move
forward. Every check runs before the first byte is written: bad input changes nothing.

This is Kafka's UnifiedLog: the partition's log with its log start offset, leader epochs and
producer state. The segments themselves are a :class:`~replication.local_log.LocalLog`, which
this class drives under its lock; opening a log recovers it (:mod:`replication.log_loader`).

The log also owns its partition's producer state (:mod:`replication.producer_state`): a leader
append of an idempotent producer's batch is checked against it before anything is written (a
retry is answered with the original offsets and not written again), follower appends update it
unchecked, and it is snapshotted at segment rolls and on close, reloaded on open and on
truncation.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from coordinator.clock import SYSTEM_CLOCK, Clock
from replication.checkpoints import (
    make_private_directory,
    mark_clean_shutdown,
    parse_log_directory_name,
)
from replication.compression import inflate_limit
from replication.epochs import EpochEndOffset
from replication.errors import (
    InvalidEpochError,
    OffsetOutOfRangeError,
    OutOfOrderOffsetError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    StorageError,
)
from replication.local_log import LocalLog, ReadResult
from replication.log_loader import initial_log_start, load_log, open_epoch_cache
from replication.log_retention import LogRetention
from replication.log_transactions import LogTransactions
from replication.origin import AppendOrigin
from replication.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    Duplicate,
    ProducerEntry,
    ProducerStateManager,
)
from replication.records import (
    stamp_batch,
    validate_batches,
)
from replication.segment import BatchFacts, LogSegment
from replication.truncation import FollowerEpochView
from replication.txn_index import AbortedTxn, TxnIndexes
from replication.validation import check_client_records

__all__ = ["AppendInfo", "DuplicateAppend", "Log", "LogConfig", "LogSlice"]

_DAY_MS = 24 * 3600 * 1000
MIN_SEGMENT_BYTES = 14
"""Kafka's least segment.bytes (a v0 record's overhead): below a batch's size, every append
is refused as too large, as in Kafka."""


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


class Log(LogRetention, LogTransactions):
    """The log of one partition, in a directory named ``<topic>-<partition>``.

    Thread-safe: one lock serialises appends, reads, truncation and retention.
    """

    config: LogConfig

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        clock: Clock,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
        self.directory = directory
        self.topic_partition = parse_log_directory_name(directory.name)
        self.config = config
        self._clock = clock
        self._lock = threading.RLock()
        self._local = LocalLog(directory, config, clock)
        self._delete_horizon = -1
        self._truncated_to: int | None = None
        self._log_start_offset = 0
        self._highest_remote_offset = -1
        self.leader_epoch_cache, self._epochs_lost = open_epoch_cache(directory, clock)
        self._producers = ProducerStateManager(
            directory, expiration_ms=producer_id_expiration_ms, clock=clock)
        self._txn_index = TxnIndexes(directory)

    # -- opening -------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: Path | str,
        *,
        config: LogConfig | None = None,
        recovery_point: int = 0,
        log_start_offset: int | None = None,
        clock: Clock = SYSTEM_CLOCK,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> Log:
        """Open (creating if needed) the log in ``directory``.

        After a clean shutdown, segments are trusted up to their last index entry, the batches
        past it are checked, and indexes that are missing or corrupt are rebuilt. Otherwise every
        segment from the one holding ``recovery_point`` (the offset up to which the log was
        known flushed; 0 checks all) is recovered (:mod:`replication.log_loader`). Either way,
        the segments wholly below ``recovery_point`` are never cut (damage found there is
        logged once and kept).
        ``clock``'s wall-clock milliseconds drive ``segment.ms``, retention and the expiry of
        idle producers' state after ``producer_id_expiration_ms`` (a broker setting in Kafka,
        ``producer.id.expiration.ms``). ``log_start_offset`` is the checkpointed log start
        (``log-start-offset-checkpoint``): with remote storage it may be below the first local
        segment (None: 0, until the remote tier says more); otherwise the log start is the later
        of it and the first local offset (records deleted below it by DeleteRecords stay gone
        while their segment is still on disk). Either way it never passes the log end.
        """
        directory = Path(directory)
        make_private_directory(directory)
        log = cls(directory, config or LogConfig(), clock,
                  producer_id_expiration_ms)
        tiered = log.config.remote_storage_enable
        load_log(log._local, recovery_point, cache=log.leader_epoch_cache,
                 epochs_lost=log._epochs_lost, producers=log._producers, now=log._clock.now_ms(),
                 tiered=tiered)
        log._load_txn_index()
        log._log_start_offset = initial_log_start(log._local, log_start_offset, tiered=tiered)
        log.leader_epoch_cache.truncate_from_start(log._log_start_offset)
        return log

    # -- state ---------------------------------------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        """The offset the next record will get (LEO)."""
        return self._local.leo

    @property
    def log_start_offset(self) -> int:
        """The first offset still in the log: in the remote tier too when the log is tiered
        (``remote.storage.enable``), else the first local offset, or later when records were
        deleted (DeleteRecords) inside the first local segment."""
        if not self.config.remote_storage_enable:
            return max(self._start, self._local.segments[0].base_offset)
        return self._start

    @property
    def local_log_start_offset(self) -> int:
        """The first offset readable on local disk (Kafka's localLogStartOffset): the first
        local segment's base, or the log start when that is later."""
        return max(self._local.segments[0].base_offset, self._start)

    @property
    def recovery_point(self) -> int:
        """Everything below this offset is fsynced; persist it to recover less after a crash."""
        return self._local.recovery_point

    @property
    def size_bytes(self) -> int:
        return self._local.size_bytes

    def size_bytes_from(self, offset: int) -> int:
        """The bytes of the local segments whose base offset is at or after ``offset``."""
        with self._lock:
            return self._local.size_bytes_from(offset)

    @property
    def segment_base_offsets(self) -> tuple[int, ...]:
        return tuple(self._local.bases)

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
            self.leader_epoch_cache.assign(epoch, self._local.leo)

    def end_offset_for_epoch(self, epoch: int) -> EpochEndOffset:
        """This log's answer to OffsetsForLeaderEpoch(``epoch``)."""
        with self._lock:
            return self.leader_epoch_cache.end_offset_for(epoch, self._local.leo)

    def epoch_view(self) -> FollowerEpochView:
        """The snapshot a follower feeds to :func:`replication.truncation.decide_truncation`."""
        with self._lock:
            return FollowerEpochView(
                entries=self.leader_epoch_cache.entries,
                log_start_offset=self.local_log_start_offset,
                log_end_offset=self._local.leo,
            )

    def reconfigure(self, config: LogConfig) -> None:
        """Take new settings (a topic config change): the next append rolls and the next
        retention pass deletes by them; segments rolled from now on index at its interval."""
        with self._lock:
            self.config = self._local.config = config

    def _check_open(self) -> None:
        if self._local.closed:
            raise StorageError(f"log {self.directory.name} is closed")

    # -- appending -----------------------------------------------------------------------------

    def append_as_leader(
        self, records: bytes | bytearray | memoryview, leader_epoch: int,
        origin: AppendOrigin = AppendOrigin.CLIENT, guard: int | None = None,
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

        ``origin`` :attr:`~AppendOrigin.COORDINATOR` is a coordinator's append (see
        :class:`AppendOrigin`): control batches are taken, and the producer state checks the
        epochs but not the sequence (nor looks for a retry). ``guard``: the append's KIP-890
        verification (:meth:`start_txn_verification`; None: not verified, unchecked).
        """
        coordinator = origin is AppendOrigin.COORDINATOR
        facts = validate_batches(records, from_client=True)
        limit = self.config.max_message_bytes
        for fact in facts:
            if fact[1] > limit:
                raise RecordTooLargeError(
                    f"a batch of {fact[1]} bytes exceeds max.message.bytes {limit}")
        check_client_records(records, facts, limit=inflate_limit(limit),
                             compacted=self.config.compact, where=self.directory.name,
                             control=coordinator)
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
            offset = self._local.leo
            if coordinator:
                checked: ProducerEntry | Duplicate | None = (
                    self._producers.check_coordinator_append(buf, facts, offset, guard))
            else:
                checked = (
                    self._producers.check_client_append(buf, facts, offset, guard)
                    if len(facts) > 1 or facts[0][6] >= 0 else None  # a producer id
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
            info = self._append(memoryview(buf), stamped, [(leader_epoch, self._local.leo)])
            if checked is not None:
                aborted = self._producers.apply(checked)  # type: ignore[arg-type]
                if aborted:
                    self._index_aborted(aborted)
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
            expected = self._local.leo
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
                aborted = self._producers.apply(producers)
                if aborted:
                    self._index_aborted(aborted)
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
        old_leo = self._local.leo
        for epoch, start in epochs:
            cache.assign(epoch, start)
        try:
            segment.append(data, facts)
        except OSError:
            cache.truncate_from_end(old_leo)
            raise
        self._local.leo = last_offset + 1
        return AppendInfo(
            first_offset=first_offset, last_offset=last_offset, batches=len(facts), size=size
        )

    def _maybe_roll(
        self, size: int, max_ts: int, first_offset: int, last_offset: int
    ) -> LogSegment:
        """The segment the batches go to: a new one when the roll rule says so
        (:meth:`LocalLog.should_roll`)."""
        now = self._clock.now_ms()
        if not self._local.should_roll(size, max_ts, last_offset, now):
            return self._local.segments[-1]
        return self._roll(first_offset, now)

    def _roll(self, base_offset: int, now: int) -> LogSegment:
        # The state of everything below the new segment, so that recovery can start from it
        # and replay the new segment alone (fsynced by the next flush, as Kafka does).
        self._producers.take_snapshot(base_offset, sync=False)
        return self._local.roll(base_offset, now)

    def roll(self) -> None:
        """Start a new segment at the log end offset (if the active one is not empty)."""
        with self._lock:
            self._check_open()
            if self._local.segments[-1].size:
                self._roll(self._local.leo, self._clock.now_ms())

    # -- reading -------------------------------------------------------------------------------

    def _read_limit(self, offset: int, upto: int | None) -> int:
        """Where a read from ``offset`` must stop (the log end, or ``upto`` below it); raises
        :class:`OffsetOutOfRangeError` below the log start or past the log end. Under the lock."""
        self._check_open()
        leo = self._local.leo
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
            found = None if offset >= limit else self._local.read(offset, max_bytes, limit)
            if found is None:
                return ReadResult(records=b"", first_offset=offset, next_offset=offset)
            return found

    def read_slice(
        self, offset: int, max_bytes: int, upto: int | None = None, *, min_one: bool = True,
        whole: bool = False, copy_below: int = 0,
    ) -> LogSlice | bytes | None:
        """Where a read of ``offset`` would find its bytes, as a :class:`LogSlice` of the segment
        file, or ``None`` when there is nothing to send. The region is what a Kafka broker hands
        to ``sendfile``: from the batch holding ``offset``, ``max_bytes`` long (at least the first
        batch with ``min_one``), never reaching ``upto``, possibly ending inside a batch (see
        :meth:`LogSegment.extent`). One segment at most, as Kafka reads one. With ``whole``
        it holds the same whole batches as :meth:`read` (what a follower's fetch sends). A
        region smaller than ``copy_below`` is returned as its bytes (:meth:`LocalLog.extent`).

        Raises :class:`OffsetOutOfRangeError` below the log start or past the log end.
        """
        with self._lock:
            limit = self._read_limit(offset, upto)
            found = (None if offset >= limit
                     else self._local.extent(offset, max_bytes, limit, min_one=min_one,
                                             whole=whole, copy_below=copy_below))
            return found if found is None or isinstance(found, bytes) else LogSlice(*found)

    def offset_for_timestamp(self, timestamp: int) -> int | None:
        """The first offset of the first batch with a timestamp >= ``timestamp`` (ListOffsets)
        that ends at or after the log start; never below the log start (the batch may begin
        below it when records were deleted inside it)."""
        with self._lock:
            self._check_open()
            return self._local.offset_for_timestamp(timestamp, self.local_log_start_offset)

    def max_timestamp(self) -> tuple[int, int] | None:
        """The largest record timestamp in the log and the last offset of a batch holding it
        (ListOffsets' MAX_TIMESTAMP, KIP-734); None when no batch carries a timestamp."""
        with self._lock:
            self._check_open()
            return self._local.max_timestamp()

    # -- durability ----------------------------------------------------------------------------

    def flush(self) -> None:
        """fsync every segment holding data past the recovery point, then move the point to the
        log end offset. An epoch-cache change a batch has not written yet is written first:
        recovery rebuilds epochs only past the point."""
        with self._lock:
            self._check_open()
            self.leader_epoch_cache.sync()
            self._local.flush_segments()
            self._producers.sync_snapshots()
            self._txn_index.sync()
            self._local.sync_directory()
            self._local.recovery_point = self._local.leo

    def close(self, *, clean: bool = True) -> None:
        """Flush, snapshot the producer state at the log end, close every file and leave the
        clean-shutdown marker.

        The marker lives in the partition's directory, so each log's crash state stands alone;
        Kafka keeps one per log directory, and the same helpers serve a log manager there.
        ``clean=False`` closes as a killed process leaves the log (tests): no snapshot, no
        marker.
        """
        with self._lock:
            if self._local.closed:
                return
            self.flush()
            if clean:
                self._producers.take_snapshot(self._local.leo, sync=True)
            self._local.close()
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
            return self._local.segment_infos()

    def dirty_stats(self, first_dirty: int, upto: int) -> tuple[int, int, int]:
        """``(clean bytes, dirty bytes, first dirty timestamp)``: the sizes of the segments
        below ``first_dirty`` and of those from it to ``upto`` (never the active one), and the
        first batch timestamp of the first dirty segment (-1 if unknown), which
        ``max.compaction.lag.ms`` is measured from."""
        with self._lock:
            self._check_open()
            return self._local.dirty_stats(first_dirty, upto)

    def open_cleanable(self, upto: int) -> tuple[list[LogSegment], list[tuple[int, int, int, int]]]:
        """The segments the cleaner may rewrite (every one below the active segment whose base
        is below ``upto``) and, for each, ``(base offset, next offset, size, fd)`` with a
        duplicate descriptor the caller closes: the files stay readable whatever the log does
        meanwhile, and :meth:`replace_segments` checks that they are still the log's."""
        with self._lock:
            self._check_open()
            return self._local.open_cleanable(upto)

    def replace_segments(self, old: list[LogSegment], cleaned: Path,
                         stage: Callable[[str], None] | None = None,
                         sizes: list[int] | None = None,
                         keep_txn: Callable[[AbortedTxn], bool] | None = None) -> bool:
        """Swap the consecutive segments ``old`` for the cleaned file ``cleaned`` (named
        ``<base of old[0]>.log.cleaned``, fsynced): rename it to ``.log.swap``, delete the old
        segments in offset order, rename the swap file to the segment's name and open it. A
        crash between any two steps is settled by the next open
        (:func:`replication.log_loader.scan_directory`).

        Returns False, changing nothing, if ``old`` are no longer the log's segments as they
        were (a truncation or retention got there first), or no longer ``sizes`` bytes long.
        ``stage(name)`` is called after each step (tests inject crashes there); the cleaned
        segment's ``.txnindex`` holds the entries of the old ones ``keep_txn`` keeps (all
        without it)."""
        def step(name: str) -> None:
            if stage is not None:
                stage(name)

        with self._lock:
            self._check_open()
            bases = [segment.base_offset for segment in old]
            if not self._local.replace_segments(old, cleaned, step, sizes):
                return False
            self._txn_index.merge(bases, keep_txn)
            return True

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

    def __repr__(self) -> str:
        return (
            f"Log({self.directory.name}, start={self.log_start_offset}, end={self._local.leo}, "
            f"segments={len(self._local.segments)})"
        )
