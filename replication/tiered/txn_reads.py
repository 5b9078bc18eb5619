"""The aborted transactions a read_committed fetch served from remote storage lists (Kafka's
``RemoteLogManager.collectAbortedTransactions``).

A copied segment carries its ``.txnindex`` (only a segment where a transaction was aborted has
one; a segment without is an empty index). For a read from the remote segment holding
``offset``, the transactions listed are those that overlap ``[offset, end of that segment]``:
searched in that segment's index, then in the next remote segments of the log's lineage, then
in the local log, stopping as soon as an index holds an entry whose last stable offset reaches
the end of the range (no transaction aborted later can have begun inside it).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

from replication.log import Log
from replication.tiered.metadata import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    TopicIdPartition,
)
from replication.tiered.metadata_manager import RemoteLogMetadataManager
from replication.tiered.storage import (
    IndexType,
    RemoteResourceNotFoundError,
    RemoteStorageError,
    RemoteStorageManager,
)
from replication.txn_index import AbortedTxn, CorruptTxnIndexError, decode_entries

__all__ = ["RemoteTxnIndexes"]

_CACHED = 256
"""Remote segments whose parsed ``.txnindex`` is kept (they are small, and never change)."""


class RemoteTxnIndexes:
    """The ``.txnindex`` of remote segments, fetched from ``storage`` once and kept."""

    def __init__(self, storage: RemoteStorageManager, metadata: RemoteLogMetadataManager
                 ) -> None:
        self.storage = storage
        self.metadata = metadata
        self._cache: OrderedDict[RemoteLogSegmentId, tuple[AbortedTxn, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def entries(self, segment: RemoteLogSegmentMetadata) -> tuple[AbortedTxn, ...]:
        """The segment's aborted transactions; none when it has no index. Raises
        :class:`RemoteStorageError` when the store fails or the index is corrupt."""
        with self._lock:
            cached = self._cache.get(segment.segment_id)
            if cached is not None:
                self._cache.move_to_end(segment.segment_id)
                return cached
        try:
            with self.storage.fetch_index(segment, IndexType.TRANSACTION) as f:
                data = f.read()
        except RemoteResourceNotFoundError:
            data = b""
        try:
            found = tuple(decode_entries(data, f"{segment.segment_id.id}.txnindex"))
        except CorruptTxnIndexError as exc:
            raise RemoteStorageError(f"remote segment {segment.segment_id}: {exc}") from exc
        with self._lock:
            self._cache[segment.segment_id] = found
            while len(self._cache) > _CACHED:
                self._cache.popitem(last=False)
        return found

    def forget(self, segment_id: RemoteLogSegmentId) -> None:
        with self._lock:
            self._cache.pop(segment_id, None)

    def collect(self, partition: TopicIdPartition, log_: Log, first: RemoteLogSegmentMetadata,
                offset: int, local: Callable[[int, int], list[AbortedTxn]]) -> list[AbortedTxn]:
        """The aborted transactions overlapping ``[offset, first.end_offset]`` (see the module
        docstring); ``local`` is the local log's search of ``[start, upper)``."""
        upper = first.end_offset + 1
        found: dict[AbortedTxn, None] = {}
        segment: RemoteLogSegmentMetadata | None = first
        while segment is not None:
            for txn in self.entries(segment):
                if txn.last_offset >= offset and txn.first_offset < upper:
                    found[txn] = None
                if txn.last_stable_offset >= upper:
                    return list(found)
            nxt = segment.end_offset + 1
            epoch = log_.leader_epoch_cache.epoch_at(nxt)
            segment = (self.metadata.remote_log_segment_metadata(partition, epoch, nxt)
                       if epoch >= 0 else None)
        for txn in local(offset, upper):
            found[txn] = None
        return list(found)
