"""Removing records from a log: follower truncation, retention (by time, by size, below the log
start offset) and the remote tier's share of both (KIP-405), as Kafka's UnifiedLog does them.

:class:`LogRetention` is the part of :class:`replication.log.Log` that moves the log start
offset and cuts or deletes segments; the log's state and lock are the log's (it is a base class
of :class:`~replication.log.Log`, which owns everything else: opening, appends, reads, epochs,
producer state and durability).
"""

from __future__ import annotations

import logging
import threading
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from coordinator.clock import Clock
from replication.checkpoints import fsync_directory
from replication.epochs import LeaderEpochCache
from replication.errors import CorruptSnapshotError
from replication.local_log import LocalLog
from replication.producer_state import ProducerStateManager, decode_snapshot, snapshot_file_name
from replication.txn_index import TxnIndexes

__all__ = ["LogRetention", "RetentionSettings", "SegmentCopySource"]

_logger = logging.getLogger(__name__)


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


class RetentionSettings(Protocol):
    """What retention goes by (a :class:`replication.log.LogConfig`)."""

    @property
    def cleanup_delete(self) -> bool: ...

    @property
    def remote_storage_enable(self) -> bool: ...

    @property
    def retention_ms(self) -> int: ...

    @property
    def retention_bytes(self) -> int: ...

    @property
    def effective_local_retention_ms(self) -> int: ...

    @property
    def effective_local_retention_bytes(self) -> int: ...


class LogRetention:
    """Truncation, retention and the log start offset of a :class:`replication.log.Log`."""

    directory: Path
    config: RetentionSettings
    leader_epoch_cache: LeaderEpochCache
    _clock: Clock
    _lock: threading.RLock
    _local: LocalLog
    _producers: ProducerStateManager
    _txn_index: TxnIndexes
    _start: int
    _highest_remote_offset: int
    start_moves = 0
    """How many times a log start, or a first local segment, moved in this process (any
    log's; read as ``LogRetention.start_moves``): a leader answering follower fetch
    sessions looks at its partitions' log starts again only when it moves."""
    _truncated_to: int | None

    if TYPE_CHECKING:
        def _check_open(self) -> None: ...

        @property
        def size_bytes(self) -> int: ...

        @property
        def log_start_offset(self) -> int: ...

        @property
        def local_log_start_offset(self) -> int: ...

    @property
    def _log_start_offset(self) -> int:
        return self._start

    @_log_start_offset.setter
    def _log_start_offset(self, offset: int) -> None:
        LogRetention.start_moves += 1
        self._start = offset

    def _note_truncation(self, offset: int) -> None:
        if self._truncated_to is None or offset < self._truncated_to:
            self._truncated_to = offset

    # -- truncation ----------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Remove every batch ending at or after ``offset`` (follower truncation); the epoch
        cache follows, also when no batch goes (its entries from the log end on are dropped).
        A batch is never split, so the new end may fall below ``offset``. Returns whether any
        batch was removed."""
        with self._lock:
            self._check_open()
            if offset < 0:
                raise ValueError(f"cannot truncate to negative offset {offset}")
            if offset >= self._local.leo:
                # No batch goes, but an epoch this replica led without writing anything
                # (an entry at the log end) may still be in the cache: the new leader never
                # had it, and a follower that kept it would keep naming it as its last
                # fetched epoch, be told it diverged, and cut here again, for ever.
                self.leader_epoch_cache.truncate_from_end(self._local.leo)
                return False
            self._note_truncation(offset)
            if offset < self._local.first_base:
                self.truncate_fully_and_start_at(offset)
                return True
            # Kafka's rule: records below the log start come back no more, but a truncation
            # below it (to what the leader holds) moves the log start back with it.
            self._log_start_offset = min(self._log_start_offset, offset)
            self._local.truncate_to(offset)
            self.leader_epoch_cache.truncate_from_end(self._local.leo)
            self._txn_index.truncate_to(self._local.leo)
            self._reload_producer_state()
            return True

    def _reload_producer_state(self) -> None:
        """After a truncation: the state of what is left, from the latest snapshot below the new
        end. The snapshots past the end are deleted durably at once: one resurrected by a
        power failure would describe batches the log no longer holds."""
        before = self._producers.snapshot_offsets
        self._producers.reload(log_start=self._local.first_base, log_end=self._local.leo,
                               replay=self._local.producer_batches)
        if self._producers.snapshot_offsets != before:
            fsync_directory(self.directory)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop everything and restart the log, empty, at ``offset`` (a follower whose log is
        entirely below or unrelated to the leader's log start)."""
        with self._lock:
            self._check_open()
            self._note_truncation(offset)
            self._local.reset_at(offset)
            self._log_start_offset = offset
            self._highest_remote_offset = -1
            self.leader_epoch_cache.clear()
            self._producers.truncate_fully()
            self._txn_index.delete_all()

    # -- the log start, retention and the remote tier ------------------------------------------

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
            new_start = min(log_start_offset, self._local.segments[0].base_offset)
            if new_start > self._log_start_offset:
                self._log_start_offset = new_start
                self.leader_epoch_cache.truncate_from_start(new_start)

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
            bound = self._local.leo if high_watermark is None else min(high_watermark, self._local.leo)
            new = min(offset, bound)
            if new <= self.log_start_offset:
                return False
            self._log_start_offset = new
            self._local.recovery_point = max(self._local.recovery_point, min(new, self._local.leo))
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
            now = self._clock.now_ms() if now_ms is None else now_ms
            bound = self._local.leo if high_watermark is None else min(high_watermark, self._local.leo)
            tiered = cfg.remote_storage_enable
            if tiered:
                bound = min(bound, self._highest_remote_offset + 1)
                retention_ms = cfg.effective_local_retention_ms
                retention_bytes = cfg.effective_local_retention_bytes
            else:
                retention_ms, retention_bytes = cfg.retention_ms, cfg.retention_bytes
            candidates = [
                seg
                for seg, nxt in self._local.rolled()
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
                             "storage)", self.directory.name, self._local.bases[:count],
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
        count = max(bisect_right(self._local.bases, start) - 1, 0)
        if count:
            _logger.info("%s: deleting segments %s below the log start %d",
                         self.directory.name, self._local.bases[:count], start)
            self._drop_oldest_segments(count)
        return count

    def _drop_oldest_segments(self, count: int) -> None:
        """Delete the ``count`` oldest segments (never the active one; lock held)."""
        LogRetention.start_moves += 1
        self._local.drop_oldest(count)
        self._producers.delete_snapshots_below(self._local.first_base)
        self._txn_index.delete_below(self._local.first_base)

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
            count = max(min(bisect_right(self._local.bases, offset) - 1, len(self._local.bases) - 1), 0)
            if count:
                _logger.info("%s: deleting local segments %s below the log start %d (remote "
                             "retention)", self.directory.name, self._local.bases[:count], offset)
                self._drop_oldest_segments(count)
            new_start = min(offset, self._local.segments[0].base_offset)
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
            for seg, nxt in self._local.rolled():
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
