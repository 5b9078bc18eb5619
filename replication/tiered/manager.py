"""The remote log manager (Kafka's RemoteLogManager, KIP-405): copies, remote retention, reads.

On a leader only, for each tiered partition (``remote.storage.enable``), a pass:

1. **copies** the rolled segments whose every offset is below the HW (never the active one), in
   offset order, starting after the highest offset already copied for the leader's lineage
   (for each epoch of its epoch cache, newest first, the highest copied offset of that epoch,
   capped at the epoch's end in this log: what a new leader resumes from). Each copy adds the
   metadata (COPY_SEGMENT_STARTED, with the segment's epochs), uploads the files and marks it
   COPY_SEGMENT_FINISHED; a copy that fails is deleted again (DELETE_SEGMENT_STARTED, data
   deleted, DELETE_SEGMENT_FINISHED) and retried after a pause that grows with each failure
   in a row (:class:`~replication.tiered.config.RetryBackoff`; passes in between copy nothing
   for that partition); a copy that succeeds ends the pause. Leadership is checked before
   each segment: a broker that lost it stops copying.
2. **expires** remote segments: past ``retention.ms`` (by their largest timestamp), beyond
   ``retention.bytes`` (counted over remote segments and the local part not yet copied), and
   what a zombie leader uploaded outside the lineage once the log start passes it, and copies
   left unfinished by a broker killed mid-copy once a finished copy covers their offsets (see
   :meth:`RemoteLogManager.expire_remote_segments`). Each goes DELETE_SEGMENT_STARTED, data
   deleted, DELETE_SEGMENT_FINISHED.
3. **compacts** the metadata when the manager can
   (:class:`~replication.tiered.metadata_manager.CompactableMetadata`): the records of
   deleted segments are summed up, as ``compaction``
   (:class:`~replication.tiered.config.MetadataCompaction`) says when.

On every replica, leader or follower, it then tells the log what the remote tier holds (the
highest copied offset, which local retention waits for, and the log start). Reads below the
local log start are served from the remote segment holding the offset for the epoch that wrote
it, found through the segment's remote offset index, on a pool of reader threads; a
read_committed read lists the aborted transactions of the remote ``.txnindex`` files each
copy uploads with its segment (:mod:`replication.tiered.txn_reads`).

Each copy and delete is logged at INFO.
"""

from __future__ import annotations

import logging
import random
import struct
import sys
import threading
from array import array
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from coordinator.clock import Clock
from replication.checkpoints import format_checkpoint
from replication.errors import OffsetOutOfRangeError, StorageError
from replication.log import Log, LogSlice
from replication.log_retention import SegmentCopySource
from replication.records import (
    BATCH_OVERHEAD,
    find_record,
    read_batch_header,
)
from replication.tiered.config import MetadataCompaction, RetryBackoff
from replication.tiered.metadata import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    TopicIdPartition,
)
from replication.tiered.metadata_manager import (
    CompactableMetadata,
    InvalidTransitionError,
    RemoteLogMetadataManager,
    UnknownSegmentError,
)
from replication.tiered.segment_reads import batch_max, read_batches, read_exact, slice_batches
from replication.tiered.storage import (
    IndexType,
    LocalSegmentFiles,
    LogSegmentData,
    RemoteStorageError,
    RemoteStorageManager,
)
from replication.tiered.txn_reads import RemoteTxnIndexes
from replication.txn_index import AbortedTxn
from replication.txn_index import file_name as txn_index_file_name

__all__ = ["RemoteLogManager", "TieredPartition", "highest_remote_offset"]

log = logging.getLogger(__name__)

_S = RemoteLogSegmentState
_INDEX_ENTRY = struct.Struct(">II")
_TIME_ENTRY = struct.Struct(">qI")  # timestamp, offset relative to the segment's base


@dataclass(frozen=True, slots=True, kw_only=True)
class TieredPartition:
    """What the manager needs of one hosted partition at the start of a pass: its id, its
    log, whether this broker leads it, at which leader epoch, and its HW."""

    id: TopicIdPartition
    log: Log
    is_leader: bool
    leader_epoch: int
    high_watermark: int
    still_leads: Callable[[int], bool]
    """Whether this broker still leads the partition at that leader epoch (checked before
    each copy)."""


def highest_remote_offset(entries: Iterable[tuple[int, int]], log_end_offset: int,
                          highest_for_epoch: Callable[[int], int | None]) -> int:
    """The highest offset copied for a log whose epoch cache is ``entries`` (``(epoch, start
    offset)``, ascending): for each epoch, newest first, the highest copied offset of that
    epoch, capped at the end of the epoch in this log; -1 if none (Kafka's
    findHighestRemoteOffset). Pure."""
    pairs = list(entries)
    for i in range(len(pairs) - 1, -1, -1):
        epoch = pairs[i][0]
        found = highest_for_epoch(epoch)
        if found is not None:
            end = pairs[i + 1][1] if i + 1 < len(pairs) else log_end_offset
            return min(found, end - 1)
    return -1


def in_lineage(metadata: RemoteLogSegmentMetadata, entries: tuple[tuple[int, int], ...],
               log_end_offset: int) -> bool:
    """Whether every epoch of a remote segment is one of this log's epochs, over offsets that
    the log's epoch covers: a segment uploaded by a zombie leader (an epoch this log does not
    have, or offsets this log has in another epoch) is not. Pure."""
    if metadata.end_offset >= log_end_offset or not entries:
        return False
    ranges = {}
    for i, (epoch, start) in enumerate(entries):
        ranges[epoch] = (start, entries[i + 1][1] - 1 if i + 1 < len(entries)
                         else log_end_offset - 1)
    first_epoch, first_start = entries[0]
    for epoch, start, end in metadata.epoch_ranges():
        if epoch < first_epoch:
            return False
        found = ranges.get(epoch)
        if found is None:
            return False
        low = found[0] if epoch != first_epoch else min(found[0], first_start)
        if start < low or end > found[1]:
            return False
    return True


class RemoteLogManager:
    """One broker's remote log manager over ``storage`` and ``metadata``.

    ``partitions()`` names the tiered partitions hosted here at each pass; :meth:`start` runs
    a pass every ``interval_ms`` on a thread of its own, :meth:`run_once` runs one (tests)."""

    def __init__(self, broker_id: int, storage: RemoteStorageManager,
                 metadata: RemoteLogMetadataManager, clock: Clock, *,
                 interval_ms: int = 30_000, reader_threads: int = 4,
                 partitions: Callable[[], list[TieredPartition]] | None = None,
                 backoff: RetryBackoff | None = None,
                 compaction: MetadataCompaction | None = None,
                 rng: random.Random | None = None) -> None:
        self.broker_id = broker_id
        self.storage = storage
        self.metadata = metadata
        self._clock = clock
        self._interval_ms = interval_ms
        self._partitions = partitions
        self._backoff = backoff or RetryBackoff()
        self._compaction = compaction or MetadataCompaction()
        self._rng = rng or random.Random()
        self._copy_failures: dict[TopicIdPartition, tuple[int, int]] = {}
        """Per partition: the copy failures in a row, and when copying may be tried again."""
        self._readers = ThreadPoolExecutor(reader_threads, thread_name_prefix="remote-reader")
        self._deleter = ThreadPoolExecutor(1, thread_name_prefix="remote-deleter")
        self._indexes: OrderedDict[RemoteLogSegmentId, tuple[array[int], array[int]]] = (
            OrderedDict())
        self._index_lock = threading.Lock()
        self._txn_indexes = RemoteTxnIndexes(storage, metadata)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._pass_lock = threading.Lock()
        self.copied_bytes = 0
        """The bytes of the segments copied to remote storage so far (Kafka's
        RemoteCopyBytesPerSec), for the metrics."""

    # -- passes --------------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, daemon=True,
                                            name=f"remote-log-manager-{self.broker_id}")
            self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self._interval_ms / 1000):
            try:
                self.run_once()
            except Exception:
                log.exception("broker %d: remote log manager pass failed", self.broker_id)

    def run_once(self, partitions: Iterable[TieredPartition] | None = None) -> None:
        """One pass over ``partitions`` (default: what ``partitions()`` names)."""
        if partitions is None:
            partitions = self._partitions() if self._partitions is not None else []
        with self._pass_lock:
            for p in partitions:
                if self._stop.is_set():
                    return
                try:
                    self.metadata.refresh([p.id])
                    if p.is_leader:
                        self.copy_log_segments(p)
                        self.expire_remote_segments(p)
                        if isinstance(self.metadata, CompactableMetadata):
                            self.metadata.compact(
                                p.id, self._clock.now_ms(),
                                min_stale=self._compaction.min_stale_records,
                                forget_after_ms=self._compaction.delete_retention_ms)
                    self.sync_remote_state(p)
                except (RemoteStorageError, StorageError, OSError) as exc:
                    log.warning("broker %d: remote tier of %s: %s", self.broker_id, p.id, exc)

    def _lineage(self, log_: Log) -> tuple[tuple[int, int], ...]:
        return tuple((e.epoch, e.start_offset) for e in log_.leader_epoch_cache.entries)

    def highest_copied_offset(self, p: TieredPartition) -> int:
        return highest_remote_offset(
            self._lineage(p.log), p.log.log_end_offset,
            lambda epoch: self.metadata.highest_offset_for_epoch(p.id, epoch))

    def sync_remote_state(self, p: TieredPartition) -> None:
        """Tell the log what the remote tier holds for its lineage."""
        log_ = p.log
        highest = self.highest_copied_offset(p)
        lineage = self._lineage(log_)
        starts = [m.start_offset for m in self.metadata.list_remote_log_segments(p.id)
                  if m.state is _S.COPY_SEGMENT_FINISHED
                  and in_lineage(m, lineage, log_.log_end_offset)]
        start = min(starts) if starts else log_.local_log_start_offset
        log_.update_remote_state(highest_remote_offset=highest, log_start_offset=start)

    def remote_size(self, partition: TopicIdPartition, log_: Log) -> int:
        """The bytes of ``log_`` in remote storage: its COPY_SEGMENT_FINISHED segments of the
        log's lineage that still hold offsets at or above its log start (what a reader may be
        served; unfinished copies, deletions under way and a zombie's uploads not counted)."""
        lineage = self._lineage(log_)
        end = log_.log_end_offset
        start = log_.log_start_offset
        return sum(m.segment_size_in_bytes
                   for m in self.metadata.list_remote_log_segments(partition)
                   if m.state is _S.COPY_SEGMENT_FINISHED and m.end_offset >= start
                   and in_lineage(m, lineage, end))

    # -- copying -------------------------------------------------------------------------------

    def copy_log_segments(self, p: TieredPartition) -> int:
        """Copy what is due (see the module docstring); returns the segments copied."""
        if not p.is_leader:
            self._copy_failures.pop(p.id, None)
            return 0  # followers never copy
        failures, retry_at = self._copy_failures.get(p.id, (0, 0))
        if failures and self._clock.now_ms() < retry_at:
            return 0
        highest = self.highest_copied_offset(p)
        copied = 0
        # Below the last stable offset only, as Kafka's copier: a segment holding an undecided
        # transaction stays local until its marker is committed.
        stable = p.log.last_stable_offset(p.high_watermark)
        for source in p.log.copy_candidates(highest + 1, stable):
            if not p.still_leads(p.leader_epoch):
                log.info("broker %d no longer leads %s at epoch %d: copying stops",
                         self.broker_id, p.id, p.leader_epoch)
                break
            if not source.segment_epochs:
                log.warning("broker %d: segment %d of %s has no leader epoch; not copied",
                            self.broker_id, source.base_offset, p.id)
                break
            if not self._copy_one(p, source):
                failures += 1
                pause = self._backoff.delay_ms(failures, self._rng.random())
                self._copy_failures[p.id] = (failures, self._clock.now_ms() + pause)
                log.warning("broker %d: copying %s pauses %d ms after %d failure%s in a row",
                            self.broker_id, p.id, pause, failures, "" if failures == 1 else "s")
                break
            self._copy_failures.pop(p.id, None)
            copied += 1
            p.log.update_remote_state(highest_remote_offset=source.end_offset,
                                      log_start_offset=p.log.log_start_offset)
        return copied

    def _copy_one(self, p: TieredPartition, source: SegmentCopySource) -> bool:
        now = self._clock.now_ms()
        metadata = RemoteLogSegmentMetadata(
            segment_id=RemoteLogSegmentId.generate(p.id), start_offset=source.base_offset,
            end_offset=source.end_offset, max_timestamp_ms=source.max_timestamp,
            broker_id=self.broker_id, event_timestamp_ms=now,
            segment_leader_epochs=source.segment_epochs, segment_size_in_bytes=source.size)
        txn_index = p.log.directory / txn_index_file_name(source.base_offset)
        data = LogSegmentData(
            log_segment=source.log_path, offset_index=source.offset_index_path,
            time_index=source.time_index_path, producer_snapshot=source.producer_snapshot,
            leader_epoch_index=format_checkpoint(f"{e} {o}" for e, o in source.epochs_to_end),
            transaction_index=txn_index if txn_index.exists() else None)
        self.metadata.add_remote_log_segment_metadata(metadata)
        try:
            self.storage.copy_log_segment_data(metadata, data)
        except (RemoteStorageError, OSError) as exc:
            log.warning("broker %d: copy of segment %d of %s failed: %s",
                        self.broker_id, source.base_offset, p.id, exc)
            self._delete(metadata, "failed copy")
            return False
        self.metadata.update_remote_log_segment_metadata(RemoteLogSegmentMetadataUpdate(
            segment_id=metadata.segment_id, event_timestamp_ms=self._clock.now_ms(),
            state=_S.COPY_SEGMENT_FINISHED, broker_id=self.broker_id))
        self.copied_bytes += source.size
        log.info("broker %d copied segment %d..%d of %s (%d bytes, epochs %s) to remote "
                 "storage as %s", self.broker_id, source.base_offset, source.end_offset, p.id,
                 source.size, [e for e, _o in source.segment_epochs], metadata.segment_id.id)
        return True

    # -- deleting ------------------------------------------------------------------------------

    def _delete(self, metadata: RemoteLogSegmentMetadata, reason: str) -> bool:
        """DELETE_SEGMENT_STARTED, the data, DELETE_SEGMENT_FINISHED; False if the remote
        store failed (the segment stays DELETE_SEGMENT_STARTED: never served, deleted again
        by a later pass)."""
        def update(state: RemoteLogSegmentState) -> None:
            self.metadata.update_remote_log_segment_metadata(RemoteLogSegmentMetadataUpdate(
                segment_id=metadata.segment_id, event_timestamp_ms=self._clock.now_ms(), state=state,
                broker_id=self.broker_id))

        try:
            update(_S.DELETE_SEGMENT_STARTED)
            self.storage.delete_log_segment_data(metadata)
            update(_S.DELETE_SEGMENT_FINISHED)
        except (InvalidTransitionError, UnknownSegmentError) as exc:
            log.info("broker %d: segment %s already going: %s", self.broker_id,
                     metadata.segment_id, exc)
            return False
        except RemoteStorageError as exc:
            log.warning("broker %d: deleting remote segment %s failed, will retry: %s",
                        self.broker_id, metadata.segment_id, exc)
            return False
        with self._index_lock:
            self._indexes.pop(metadata.segment_id, None)
        self._txn_indexes.forget(metadata.segment_id)
        log.info("broker %d deleted remote segment %d..%d of %s (%s): %s", self.broker_id,
                 metadata.start_offset, metadata.end_offset, metadata.partition, reason,
                 metadata.segment_id.id)
        return True

    def expire_remote_segments(self, p: TieredPartition) -> int:
        """Apply retention to the remote tier; returns the segments deleted.

        The segments of the leader's lineage go by ``retention.ms`` and ``retention.bytes``
        (oldest first; bytes counted over them and the local part not copied yet). A segment
        entirely below the leader's oldest epoch entry cannot be judged against the lineage
        (a replica that started from the local part of the log knows no older epochs): it goes
        by ``retention.ms`` only, never for being outside the lineage. A segment over offsets
        whose epochs the leader knows but which is not of its lineage (a zombie's upload) goes
        once the log start passes it, and a deletion that was started is finished. The log
        start moves before anything is deleted, so no read is served from a segment going."""
        if not p.is_leader or not p.log.config.cleanup_delete:
            return 0
        cfg = p.log.config
        log_ = p.log
        lineage = self._lineage(log_)
        known_from = lineage[0][1] if lineage else log_.local_log_start_offset
        segments = self.metadata.list_remote_log_segments(p.id)
        finished = [m for m in segments if m.state is _S.COPY_SEGMENT_FINISHED
                    and in_lineage(m, lineage, log_.log_end_offset)]
        unknown = [m for m in segments if m.state is _S.COPY_SEGMENT_FINISHED
                   and m.end_offset < known_from]
        doomed: dict[RemoteLogSegmentId, tuple[RemoteLogSegmentMetadata, str]] = {}
        now = self._clock.now_ms()
        if cfg.retention_ms >= 0:
            for m in finished:
                if now - m.max_timestamp_ms <= cfg.retention_ms:
                    break
                doomed[m.segment_id] = (m, f"retention.ms {cfg.retention_ms}")
            for m in unknown:
                if now - m.max_timestamp_ms > cfg.retention_ms:
                    doomed[m.segment_id] = (m, f"retention.ms {cfg.retention_ms}")
        if cfg.retention_bytes >= 0:
            highest = self.highest_copied_offset(p)
            local_only = log_.size_bytes_from(highest + 1)
            excess = local_only + sum(m.segment_size_in_bytes for m in finished) \
                - cfg.retention_bytes
            for m in finished:
                if excess - m.segment_size_in_bytes < 0:
                    break
                excess -= m.segment_size_in_bytes
                doomed.setdefault(m.segment_id, (m, f"retention.bytes {cfg.retention_bytes}"))
        kept = [m for m in finished if m.segment_id not in doomed]
        new_start = min((m.start_offset for m in kept), default=log_.local_log_start_offset)
        new_start = max(new_start, log_.log_start_offset)
        highest = self.highest_copied_offset(p)
        for m in segments:
            if m.segment_id in doomed:
                continue
            if m.state is _S.DELETE_SEGMENT_STARTED:
                doomed[m.segment_id] = (m, "finishing a deletion")
            elif m.state is _S.COPY_SEGMENT_STARTED and m.end_offset <= highest:
                # A copy that never finished (a broker killed mid-copy) whose offsets a
                # finished copy holds: not this leader's copy in flight, which lies above.
                doomed[m.segment_id] = (m, "an unfinished copy")
            elif (m.state is _S.COPY_SEGMENT_FINISHED and m.end_offset < new_start
                  and m.end_offset >= known_from):
                doomed[m.segment_id] = (m, f"below the log start offset {new_start}")
        # The log start moves first, in this pass: nothing is served from a segment about to
        # go, and ListOffsets' EARLIEST names an offset a fetch serves. Past local copies of
        # what retention expired too (they go with it); otherwise only up to the local start.
        if any(m.segment_id in doomed for m in finished):
            log_.move_start_for_remote_retention(new_start)
        else:
            log_.update_remote_state(highest_remote_offset=log_.highest_offset_in_remote_storage,
                                     log_start_offset=new_start)
        deleted = 0
        for m, reason in sorted(doomed.values(), key=lambda item: item[0].start_offset):
            if self._delete(m, reason):
                deleted += 1
        return deleted

    def delete_partition(self, partition: TopicIdPartition) -> Future[int]:
        """Delete every remote segment of a deleted partition, then its metadata (on a thread of
        the manager's); the future gives how many segments went."""
        def run() -> int:
            self.metadata.refresh([partition])
            count = sum(self._delete(m, "topic deleted")
                        for m in self.metadata.list_remote_log_segments(partition))
            left = self.metadata.list_remote_log_segments(partition)
            if left:
                log.warning("broker %d: %d remote segments of deleted %s are left",
                            self.broker_id, len(left), partition)
            else:
                self.metadata.remove_partition(partition)
            return count
        return self._deleter.submit(run)

    # -- reading -------------------------------------------------------------------------------

    def read_async(self, partition: TopicIdPartition, log_: Log, offset: int, max_bytes: int,
                   upto: int, *, zero_copy: bool = False, min_one: bool = True
                   ) -> Future[bytes | LogSlice]:
        """:meth:`read` on a reader thread."""
        return self._readers.submit(self.read, partition, log_, offset, max_bytes, upto,
                                    zero_copy=zero_copy, min_one=min_one)

    def read(self, partition: TopicIdPartition, log_: Log, offset: int, max_bytes: int,
             upto: int, *, zero_copy: bool = False, min_one: bool = True) -> bytes | LogSlice:
        """Whole batches from the remote segment holding ``offset``: the batch holding it
        whole (with ``min_one``; without, nothing when it is larger than ``max_bytes``, as
        for a partition after the first of a fetch), then more while they fit in
        ``max_bytes`` and end below ``upto``. With
        ``zero_copy`` and a store whose segments are local files (:class:`LocalSegmentFiles`),
        a :class:`LogSlice` of the remote file (only the batch headers are read; the caller
        sends it with sendfile and closes it), else bytes. Raises
        :class:`OffsetOutOfRangeError` when no remote segment of the log's lineage holds it,
        :class:`RemoteStorageError` when the store fails."""
        metadata = self._segment_of(partition, log_, offset)
        position = self._position(metadata, offset)
        if zero_copy and isinstance(self.storage, LocalSegmentFiles):
            return slice_batches(self.storage.open_log_segment(metadata), position, offset,
                                  max_bytes, upto, min_one)
        with self.storage.fetch_log_segment(metadata, position) as stream:
            return read_batches(stream, offset, max_bytes, upto, min_one)

    def _segment_of(self, partition: TopicIdPartition, log_: Log, offset: int
                    ) -> RemoteLogSegmentMetadata:
        """The remote segment holding ``offset`` for the epoch that wrote it;
        :class:`OffsetOutOfRangeError` when there is none."""
        epoch = log_.leader_epoch_cache.epoch_at(offset)
        metadata = (self.metadata.remote_log_segment_metadata(partition, epoch, offset)
                    if epoch >= 0 else None)
        if metadata is None or offset < log_.log_start_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} of {partition} is in no remote segment (epoch {epoch})")
        return metadata

    def aborted_transactions_async(self, partition: TopicIdPartition, log_: Log, offset: int
                                   ) -> Future[list[AbortedTxn]]:
        """:meth:`aborted_transactions` on a reader thread."""
        return self._readers.submit(self.aborted_transactions, partition, log_, offset)

    def aborted_transactions(self, partition: TopicIdPartition, log_: Log, offset: int
                             ) -> list[AbortedTxn]:
        """What a read_committed read from the remote segment holding ``offset`` lists as
        aborted (:mod:`replication.tiered.txn_reads`); raises as :meth:`read`."""
        return self._txn_indexes.collect(partition, log_, self._segment_of(partition, log_,
                                                                            offset),
                                         offset, log_.aborted_transactions)

    def find_offset_by_timestamp_async(self, partition: TopicIdPartition, log_: Log,
                                       timestamp: int) -> Future[tuple[int, int, int] | None]:
        """:meth:`find_offset_by_timestamp` on a reader thread."""
        return self._readers.submit(self.find_offset_by_timestamp, partition, log_, timestamp)

    def find_offset_by_timestamp(self, partition: TopicIdPartition, log_: Log, timestamp: int
                                 ) -> tuple[int, int, int] | None:
        """``(timestamp, offset, leader epoch)`` of the first record at or after ``timestamp``
        in the remote part of ``log_`` (below its local log start, from its log start), None
        when no remote segment holds one (the caller searches the local part then, as Kafka's
        findOffsetByTimestamp does). The segments of the log's lineage are tried in offset
        order, each whose largest timestamp reaches ``timestamp`` through its remote time
        index and offset index, then its batch headers. Raises :class:`RemoteStorageError`
        when the store fails."""
        start, local = log_.log_start_offset, log_.local_log_start_offset
        lineage = self._lineage(log_)
        for m in self.metadata.list_remote_log_segments(partition):
            if (m.state is not _S.COPY_SEGMENT_FINISHED or m.end_offset < start
                    or m.start_offset >= local or m.max_timestamp_ms < timestamp
                    or not in_lineage(m, lineage, log_.log_end_offset)):
                continue
            found = self._search_segment(m, timestamp, max(start, m.start_offset))
            if found is not None:
                return found
        return None

    def find_max_timestamp_async(self, partition: TopicIdPartition, log_: Log
                                 ) -> Future[tuple[int, int, int] | None]:
        """:meth:`find_max_timestamp` on a reader thread."""
        return self._readers.submit(self.find_max_timestamp, partition, log_)

    def find_max_timestamp(self, partition: TopicIdPartition, log_: Log
                           ) -> tuple[int, int, int] | None:
        """``(timestamp, offset, leader epoch)`` of the record with the largest timestamp in
        the remote part of ``log_`` (from its log start; the first such record by offset), None
        when no remote segment holds a timestamped record there (ListOffsets' MAX_TIMESTAMP,
        which the caller weighs against the local part). The segments of the log's lineage are
        tried largest ``max_timestamp_ms`` first: each is scanned by its batch headers from
        the batch its remote time index names for its largest timestamp (from the log start in
        the segment the log start cuts), and the search stops at a segment that cannot beat
        what was found. Raises :class:`RemoteStorageError` when the store fails."""
        start, local = log_.log_start_offset, log_.local_log_start_offset
        lineage = self._lineage(log_)
        candidates = sorted(
            (m for m in self.metadata.list_remote_log_segments(partition)
             if m.state is _S.COPY_SEGMENT_FINISHED and m.end_offset >= start
             and m.start_offset < local and m.max_timestamp_ms >= 0
             and in_lineage(m, lineage, log_.log_end_offset)),
            key=lambda m: (-m.max_timestamp_ms, m.start_offset))
        best: tuple[int, int, int] | None = None
        for m in candidates:
            if best is not None and (m.max_timestamp_ms, -m.start_offset) <= (best[0], -best[1]):
                break  # neither larger nor as large and earlier
            found = self._segment_max(m, max(start, m.start_offset))
            if found is not None and (best is None or (found[0], -found[1]) > (best[0], -best[1])):
                best = found
        return best

    def _segment_max(self, metadata: RemoteLogSegmentMetadata, min_offset: int
                     ) -> tuple[int, int, int] | None:
        """The first record at or after ``min_offset`` with the largest timestamp of those in
        one remote segment: the scan starts at the batch the time index's largest entry names
        (a rolled segment's last entry is its largest timestamp) and ends at a batch holding
        ``max_timestamp_ms`` or the segment's end."""
        with self.storage.fetch_index(metadata, IndexType.TIMESTAMP) as f:
            data = f.read()
        scan_from = min_offset
        top = max(_TIME_ENTRY.iter_unpack(data[:len(data) - len(data) % _TIME_ENTRY.size]),
                  key=lambda entry: entry[0], default=None)
        if (top is not None and top[0] == metadata.max_timestamp_ms
                and metadata.start_offset + top[1] >= min_offset):
            scan_from = metadata.start_offset + top[1]
        best_ts, best_batch = -1, b""
        with self.storage.fetch_log_segment(metadata, self._position(metadata, scan_from)
                                            ) as stream:
            while best_ts < metadata.max_timestamp_ms:
                head = read_exact(stream, BATCH_OVERHEAD)
                if head is None:
                    break
                header = read_batch_header(head)
                rest = read_exact(stream, header.size - BATCH_OVERHEAD)
                if rest is None:
                    break  # a torn last batch: never served
                if header.last_offset < min_offset or header.max_timestamp <= best_ts:
                    continue
                ts = header.max_timestamp
                if header.base_offset < min_offset:  # the log start cuts this batch
                    found = batch_max(head + rest, min_offset)
                    ts = found[0] if found is not None else -1
                if ts > best_ts:
                    best_ts, best_batch = ts, head + rest
        if not best_batch:
            return None
        return find_record(best_batch, best_ts.__eq__, min_offset=min_offset)

    def _search_segment(self, metadata: RemoteLogSegmentMetadata, timestamp: int,
                        min_offset: int) -> tuple[int, int, int] | None:
        """The first record at or after ``min_offset`` and ``timestamp`` in one remote segment:
        from the batch the remote time index points at (the last entry at or before
        ``timestamp``, as the local segment's lookup), batch headers read until one whose
        largest timestamp reaches it."""
        with self.storage.fetch_index(metadata, IndexType.TIMESTAMP) as f:
            data = f.read()
        relative = 0
        for entry_ts, entry_offset in _TIME_ENTRY.iter_unpack(
                data[:len(data) - len(data) % _TIME_ENTRY.size]):
            if entry_ts > timestamp:
                break
            relative = entry_offset
        position = self._position(metadata, max(metadata.start_offset + relative, min_offset))
        wanted = timestamp.__le__
        with self.storage.fetch_log_segment(metadata, position) as stream:
            while True:
                head = read_exact(stream, BATCH_OVERHEAD)
                if head is None:
                    return None
                header = read_batch_header(head)
                if header.last_offset < min_offset or header.max_timestamp < timestamp:
                    if read_exact(stream, header.size - BATCH_OVERHEAD) is None:
                        return None
                    continue
                rest = read_exact(stream, header.size - BATCH_OVERHEAD)
                if rest is None:
                    return None  # a torn last batch: never served
                found = find_record(head + rest, wanted, min_offset=min_offset)
                if found is not None:
                    return found

    def _position(self, metadata: RemoteLogSegmentMetadata, offset: int) -> int:
        """Where to start scanning for ``offset``: the position of the last batch the remote
        offset index says ends at or before it (the parsed indexes are cached)."""
        with self._index_lock:
            cached = self._indexes.get(metadata.segment_id)
            if cached is not None:
                self._indexes.move_to_end(metadata.segment_id)
        if cached is None:
            with self.storage.fetch_index(metadata, IndexType.OFFSET) as f:
                data = f.read()
            data = data[:len(data) - len(data) % _INDEX_ENTRY.size]
            pairs = array("I", data)
            if sys.byteorder == "little":
                pairs.byteswap()  # the index is big-endian
            cached = (pairs[0::2], pairs[1::2])
            with self._index_lock:
                self._indexes[metadata.segment_id] = cached
                while len(self._indexes) > 256:
                    self._indexes.popitem(last=False)
        keys, positions = cached
        i = bisect_right(keys, offset - metadata.start_offset)
        return positions[i - 1] if i else 0

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._readers.shutdown(wait=True, cancel_futures=True)
        self._deleter.shutdown(wait=True)
        self.storage.close()
        self.metadata.close()
