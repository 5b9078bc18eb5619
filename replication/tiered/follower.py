"""A follower below its leader's local log start (KIP-405's follower fetch, Kafka's
ReplicaFetcherTierStateMachine).

The leader answers a fetch below its local log start with OFFSET_MOVED_TO_TIERED_STORAGE: what
lies there is in remote storage, which followers share rather than copy. The follower then:

1. asks the leader where its local log starts and with which epoch (ListOffsets EARLIEST_LOCAL,
   -4, from a replica);
2. works out the epoch of the offset just below it: the epoch of the local log start, unless
   that epoch starts exactly there, when the leader's previous epoch (OffsetsForLeaderEpoch of
   the epoch below) owns it (:func:`target_epoch`, pure);
3. finds the remote segment holding (that epoch, local log start - 1) through the remote log
   metadata manager, and fetches its leader-epoch checkpoint and producer snapshot from the
   remote storage manager;
4. truncates its log fully and starts it at that segment's end + 1 (the leader's local log
   start when the segments line up), with the leader's log start offset, the epochs and the
   producer state installed (:meth:`replication.partition.Partition.start_from_remote_as_follower`),
   and fetches on from there.

This module does steps 1 to 3 (:func:`build_remote_aux_state`); the fetcher does the rest.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from coordinator.codecs import TopicPartition
from interbroker.errors import ErrorCode
from replication.checkpoints import parse_checkpoint_bytes, parse_int
from replication.errors import CorruptCheckpointError
from replication.protocol import EpochAnswer, FetchEndpoint, OffsetAnswer
from replication.tiered.metadata import RemoteLogSegmentMetadata, TopicIdPartition
from replication.tiered.metadata_manager import RemoteLogMetadataManager
from replication.tiered.storage import (
    IndexType,
    RemoteResourceNotFoundError,
    RemoteStorageError,
    RemoteStorageManager,
)

__all__ = ["RemoteAuxState", "TierStateError", "build_remote_aux_state", "target_epoch"]

log = logging.getLogger(__name__)


class TierStateError(Exception):
    """The follower cannot build its state from remote storage yet (the leader did not
    answer, or remote storage has no segment or files for it): retried on a later round."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoteAuxState:
    """What a follower installs before fetching from ``next_offset``: the leader's log start
    offset, the leader epochs and producer snapshot of ``segment``, the remote segment that
    ends just below ``next_offset``."""

    next_offset: int
    log_start_offset: int
    epochs: tuple[tuple[int, int], ...]
    producer_snapshot: bytes | None
    segment: RemoteLogSegmentMetadata


def target_epoch(local_start: int, local_start_epoch: int, earlier: EpochAnswer | None) -> int:
    """The leader epoch of offset ``local_start - 1``: that of the local log start, unless the
    leader's previous epoch (``earlier``: its OffsetsForLeaderEpoch answer for
    ``local_start_epoch - 1``, None when not asked) ends after it, that is, the local log start
    epoch begins exactly at the local log start. Pure."""
    if local_start_epoch <= 0 or earlier is None or earlier.epoch < 0:
        return local_start_epoch
    if earlier.end_offset > local_start - 1:
        return earlier.epoch
    return local_start_epoch


def _read_all(storage: RemoteStorageManager, segment: RemoteLogSegmentMetadata,
              kind: IndexType) -> bytes:
    with storage.fetch_index(segment, kind) as stream:
        return stream.read()


def build_remote_aux_state(
    tp: TopicPartition, tid: TopicIdPartition, endpoint: FetchEndpoint,
    current_leader_epoch: int, leader_log_start_offset: int,
    storage: RemoteStorageManager, metadata: RemoteLogMetadataManager,
) -> RemoteAuxState:
    """Steps 1 to 3 of the module docstring for ``tp`` (``tid`` in remote storage), the
    follower at ``current_leader_epoch``. Raises :class:`TierStateError` when it cannot be
    done now."""
    earliest_local = getattr(endpoint, "earliest_local_offset", None)
    if earliest_local is None:
        raise TierStateError(f"{tp}: the leader's endpoint cannot list its local log start")
    answer: OffsetAnswer = earliest_local(tp, current_leader_epoch)
    if answer.error != ErrorCode.NONE or answer.offset < 0:
        raise TierStateError(f"{tp}: ListOffsets EARLIEST_LOCAL answered "
                             f"{ErrorCode(answer.error).name} ({answer.offset})")
    local_start, local_epoch = answer.offset, answer.leader_epoch
    earlier = None
    if local_epoch > 0:
        earlier = endpoint.offsets_for_leader_epoch(tp, local_epoch - 1, current_leader_epoch)
        if earlier.error != ErrorCode.NONE:
            raise TierStateError(f"{tp}: OffsetsForLeaderEpoch({local_epoch - 1}) answered "
                                 f"{ErrorCode(earlier.error).name}")
    epoch = target_epoch(local_start, local_epoch, earlier)
    previous = local_start - 1
    try:
        metadata.refresh([tid])
        segment = metadata.remote_log_segment_metadata(tid, epoch, previous)
        if segment is None:
            raise TierStateError(f"{tp}: no remote segment holds offset {previous} of epoch "
                                 f"{epoch} (the leader's local log starts at {local_start})")
        checkpoint = _read_all(storage, segment, IndexType.LEADER_EPOCH)
        try:
            snapshot: bytes | None = _read_all(storage, segment, IndexType.PRODUCER_SNAPSHOT)
        except RemoteResourceNotFoundError:
            snapshot = None  # the leader had no producer snapshot at the segment's end
    except RemoteStorageError as exc:
        raise TierStateError(f"{tp}: remote storage: {exc}") from exc
    name = f"remote {IndexType.LEADER_EPOCH.value} of {segment.segment_id}"
    try:
        epochs = tuple((parse_int(name, e), parse_int(name, o))
                       for e, o in parse_checkpoint_bytes(checkpoint, 2, name))
    except CorruptCheckpointError as exc:
        raise TierStateError(str(exc)) from exc
    log.info("%s: building the log below the leader's local log start %d from remote segment "
             "%d..%d (%s): epochs %s, %s", tp, local_start, segment.start_offset,
             segment.end_offset, segment.segment_id.id, list(epochs),
             "a producer snapshot" if snapshot is not None else "no producer snapshot")
    return RemoteAuxState(next_offset=segment.end_offset + 1,
                          log_start_offset=leader_log_start_offset, epochs=epochs,
                          producer_snapshot=snapshot, segment=segment)
