"""The partitions hosted here as the remote tier sees them (KIP-405).

:class:`TieredReplicas` joins the replica manager's partitions (their roles, logs and high
watermarks, and the topic ids LeaderAndIsr brings) to the log manager's remote log manager: the
tiered partitions its passes take, the state a follower installs below its leader's local log
start, the remote size of a log, and the reads a leader serves from remote storage below its
local log start (consumer fetches with the aborted transactions a read_committed one lists,
ListOffsets by time and MAX_TIMESTAMP).
"""

from __future__ import annotations

import base64
import binascii
import logging
import uuid
from collections.abc import Iterable, Mapping
from concurrent.futures import Future

from coordinator.codecs import TopicPartition
from interbroker.errors import ErrorCode
from replication.errors import OffsetOutOfRangeError, StorageError
from replication.log import Log, LogSlice
from replication.partition import Partition, Role
from replication.protocol import ConsumerRead, FetchEndpoint
from replication.records import read_batch_header
from replication.tiered import (
    RemoteLogManager,
    RemoteStorageError,
    TieredPartition,
    TopicIdPartition,
)
from replication.tiered.follower import RemoteAuxState, TierStateError, build_remote_aux_state
from replication.txn_index import AbortedTxn

__all__ = ["TieredReplicas", "topic_id_of"]

log = logging.getLogger(__name__)


def topic_id_of(text: str) -> uuid.UUID | None:
    """A topic id from Kafka's text form (url-safe base64 of 16 bytes), None if it is not."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return None
    return uuid.UUID(bytes=raw) if len(raw) == 16 else None


class TieredReplicas:
    """The tiered side of broker ``broker_id``'s partitions: ``partitions`` is the replica
    manager's live map of them, ``topic_ids`` its live map of the topic ids LeaderAndIsr gave,
    ``remote`` the remote log manager (None: remote storage is off, and every read here is
    None)."""

    def __init__(self, broker_id: int, partitions: Mapping[TopicPartition, Partition],
                 topic_ids: Mapping[str, uuid.UUID]) -> None:
        self.broker_id = broker_id
        self._partitions = partitions
        self._topic_ids = topic_ids
        self.remote: RemoteLogManager | None = None
        """Set by the replica manager once its log manager has opened the remote tier."""

    def tiered_id(self, tp: TopicPartition) -> TopicIdPartition | None:
        """``tp`` with its topic id, None while the id is not known here."""
        topic_id = self._topic_ids.get(tp.topic)
        if topic_id is None:
            return None
        return TopicIdPartition(topic_id=topic_id, topic=tp.topic, partition=tp.partition)

    def tell_remote_of_roles(self, tps: Iterable[TopicPartition]) -> None:
        """The remote log metadata manager's onPartitionLeadershipChange."""
        if self.remote is None:
            return
        leaders: list[TopicIdPartition] = []
        followers: list[TopicIdPartition] = []
        for tp in tps:
            p, tid = self._partitions.get(tp), self.tiered_id(tp)
            if p is None or tid is None or not p.log.config.remote_storage_enable:
                continue
            (leaders if p.role is Role.LEADER else followers).append(tid)
        if leaders or followers:
            try:
                self.remote.metadata.on_partition_leadership_changes(leaders, followers)
            except (RemoteStorageError, OSError) as exc:
                log.warning("broker %d: remote log metadata: %s", self.broker_id, exc)

    def remote_aux_state(self, tp: TopicPartition, endpoint: FetchEndpoint, leader_epoch: int,
                         leader_log_start_offset: int) -> RemoteAuxState:
        """What a follower of ``tp`` installs below its leader's local log start, from remote
        storage (see :mod:`replication.tiered.follower`)."""
        tid = self.tiered_id(tp)
        if self.remote is None or tid is None:
            raise TierStateError(f"{tp}: its topic id is not known here yet")
        return build_remote_aux_state(tp, tid, endpoint, leader_epoch, leader_log_start_offset,
                                      self.remote.storage, self.remote.metadata)

    def tiered_partitions(self) -> list[TieredPartition]:
        """The hosted partitions of tiered topics whose topic id is known, as the remote log
        manager's pass takes them."""
        out = []
        for tp, p in list(self._partitions.items()):
            tid = self.tiered_id(tp)
            if tid is None or not p.log.config.remote_storage_enable:
                continue
            status = p.status()

            def still_leads(epoch: int, p: Partition = p) -> bool:
                return p.role is Role.LEADER and p.leader_epoch == epoch

            out.append(TieredPartition(
                id=tid, log=p.log, is_leader=status.role is Role.LEADER,
                leader_epoch=status.leader_epoch, high_watermark=status.high_watermark,
                still_leads=still_leads))
        return out

    def remote_log_size(self, tp: TopicPartition) -> int | None:
        """The bytes of ``tp``'s log in remote storage (:meth:`RemoteLogManager.remote_size`);
        None unless ``tp`` is hosted here, tiered, with its topic id known. May block on the
        remote log metadata: not for the event loop."""
        partition = self._partitions.get(tp)
        tid = self.tiered_id(tp)
        if (self.remote is None or partition is None or tid is None
                or not partition.log.config.remote_storage_enable):
            return None
        return self.remote.remote_size(tid, partition.log)

    def read_with_remote(self, tp: TopicPartition, partition: Partition, offset: int,
                         max_bytes: int) -> ConsumerRead:
        """A consumer's read of ``partition``: from the local log, or from remote storage
        below its local log start."""
        read = partition.read_committed(offset, max_bytes)
        if read.error is not ErrorCode.OFFSET_OUT_OF_RANGE:
            return read
        remote = self.read_remote(tp, offset, max_bytes)
        if remote is None:
            return read
        try:
            records = remote.result()
            assert isinstance(records, bytes)  # not asked for a slice
        except OffsetOutOfRangeError:
            return read
        except (RemoteStorageError, StorageError, OSError) as exc:
            log.warning("broker %d: remote read of %s at %d failed: %s", self.broker_id, tp,
                        offset, exc)
            return ConsumerRead(error=ErrorCode.KAFKA_STORAGE_ERROR,
                                high_watermark=read.high_watermark)
        next_offset = offset
        pos = 0
        while pos < len(records):
            header = read_batch_header(records, pos)
            next_offset = header.base_offset + header.last_offset_delta + 1
            pos += header.size
        return ConsumerRead(error=ErrorCode.NONE, records=records,
                            high_watermark=read.high_watermark, next_offset=next_offset)

    def read_remote(self, tp: TopicPartition, offset: int, max_bytes: int, *,
                    zero_copy: bool = False, min_one: bool = True
                    ) -> Future[bytes | LogSlice] | None:
        """A consumer's read below the local log start of a tiered partition led here, from
        remote storage, on the remote log manager's reader threads (the future fails with
        :class:`OffsetOutOfRangeError` or :class:`RemoteStorageError`); None when the offset
        is not in the remote part of a tiered log (the caller reads locally or answers
        OFFSET_OUT_OF_RANGE). ``zero_copy``: a :class:`LogSlice` where the store allows it
        (see :meth:`RemoteLogManager.read`), which the caller closes; without ``min_one``,
        nothing when the first batch is larger than ``max_bytes``."""
        remote = self._remote_reading(tp, offset)
        if remote is None:
            return None
        manager, tid, partition = remote
        return manager.read_async(tid, partition.log, offset, max_bytes,
                                  partition.high_watermark, zero_copy=zero_copy,
                                  min_one=min_one)

    def remote_aborted_transactions(self, tp: TopicPartition, offset: int
                                    ) -> Future[list[AbortedTxn]] | None:
        """The aborted transactions a read_committed read of ``tp`` from ``offset``, in the
        remote part of its log, lists (those overlapping the remote segment holding
        ``offset``, from the remote ``.txnindex`` files and then the local ones), found on the
        remote log manager's reader threads (the future fails as :meth:`read_remote`'s); None
        as :meth:`read_remote`."""
        remote = self._remote_reading(tp, offset)
        if remote is None:
            return None
        manager, tid, partition = remote
        return manager.aborted_transactions_async(tid, partition.log, offset)

    def _remote_reading(self, tp: TopicPartition, offset: int
                        ) -> tuple[RemoteLogManager, TopicIdPartition, Partition] | None:
        """(the remote log manager, the topic id, the partition) when ``offset`` is in the
        remote part of the tiered log of ``tp``, led here; else None."""
        led = self._tiered_leader(tp)
        if led is None or self.remote is None:
            return None
        tid, partition = led
        log_ = partition.log
        if not log_.log_start_offset <= offset < log_.local_log_start_offset:
            return None
        return self.remote, tid, partition

    def remote_offset_for_timestamp(self, tp: TopicPartition, timestamp: int
                                    ) -> Future[tuple[int, int, int] | None] | None:
        """ListOffsets by ``timestamp`` over the remote part of a tiered partition led here:
        ``(timestamp, offset, leader epoch)`` of the first record at or after it in remote
        storage, or None in the future when none is there (the caller then searches the local
        part), found on the remote log manager's reader threads (the future fails with
        :class:`RemoteStorageError`). None when the log has no remote part."""
        found = self._remote_part(tp)
        if found is None or self.remote is None:
            return None
        return self.remote.find_offset_by_timestamp_async(*found, timestamp)

    def remote_max_timestamp(self, tp: TopicPartition
                             ) -> Future[tuple[int, int, int] | None] | None:
        """ListOffsets' MAX_TIMESTAMP over the remote part of a tiered partition led here:
        ``(timestamp, offset, leader epoch)`` of the record with the largest timestamp in remote
        storage, or None in the future when none is there (the caller weighs it against the
        local part), found on the remote log manager's reader threads (the future fails with
        :class:`RemoteStorageError`). None when the log has no remote part."""
        found = self._remote_part(tp)
        if found is None or self.remote is None:
            return None
        return self.remote.find_max_timestamp_async(*found)

    def _tiered_leader(self, tp: TopicPartition) -> tuple[TopicIdPartition, Partition] | None:
        """The id and partition of a tiered partition led here, with remote storage on, else
        None."""
        partition = self._partitions.get(tp)
        tid = self.tiered_id(tp)
        if (self.remote is None or partition is None or tid is None
                or partition.role is not Role.LEADER
                or not partition.log.config.remote_storage_enable):
            return None
        return tid, partition

    def _remote_part(self, tp: TopicPartition) -> tuple[TopicIdPartition, Log] | None:
        """The id and log of a tiered partition led here whose log reaches below its local
        log start, else None."""
        led = self._tiered_leader(tp)
        if led is None:
            return None
        tid, partition = led
        log_ = partition.log
        if log_.log_start_offset >= log_.local_log_start_offset:
            return None
        return tid, log_
