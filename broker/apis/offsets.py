"""ListOffsets (key 2) and OffsetForLeaderEpoch (key 23): where a consumer starts or resumes.

ListOffsets answers, per partition led here (after Kafka's current-leader-epoch check):
earliest (-2: the log start, remote storage included for a tiered topic, with the epoch of
the oldest epoch entry when it reaches back that far), earliest-local (-4, KIP-405: the first
offset on local disk, with its epoch; the log start for a topic that is not tiered), latest
(-1: the high watermark, or for read_committed, isolation level 1, the last stable offset;
with the current leader epoch),
max timestamp (-3, KIP-734: the first record with the largest timestamp, in the whole log,
remote storage included for a tiered topic), latest-tiered (-5,
KIP-1005: the highest offset in remote storage with its epoch, -1 when none or not tiered), or
the first record whose timestamp is at or after the one given, found through the time index.
For a tiered topic (KIP-405) the remote part of the log (from the log start to the local log
start) is searched first, through the remote segments' time and offset indexes, on the remote
log manager's reader threads (the response waits for it, the event loop does not; a remote
store that fails answers KAFKA_STORAGE_ERROR, retriable); the local part only when no remote
segment holds such a record, as Kafka's broker does. For the max timestamp the remote segments
are taken largest first by the largest timestamp their metadata carries, and the answer is the
larger of the remote and the local part's. Clients send -4 from version 8 and -5
from version 9; as Kafka's broker, this one answers them whatever the version. A found offset
at or above the HW (the LSO for read_committed) is not returned (offset and timestamp -1), as Kafka keeps uncommitted records
from consumers; a new leader whose HW still lags the start of its epoch answers
OFFSET_NOT_AVAILABLE.

Records are only looked into when a batch is uncompressed: inside a compressed batch (its
records are stored as sent, never decompressed here) the answer is the batch's first offset and
its largest timestamp, which is where a consumer must start to see the record asked for.

OffsetForLeaderEpoch is answered by the data plane, for consumers and followers alike (a
follower names itself by ``replica_id`` from version 3): only the leader answers them. A request
whose replica id is -2 (Kafka's debugging id, the schema's default) may be answered by any
replica of the partition, from its own log, after the current-leader-epoch check, as Kafka does.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.apis.base import Api, Reply, RequestContext
from broker.apis.fetch import check_epoch, leader_partition
from broker.security.acls import Operation, ResourceType
from broker.wire import error_code, response_module
from coordinator.codecs import TopicPartition
from interbroker.errors import ErrorCode as DataErrorCode
from kafkaclient.messages import build
from replication.errors import StorageError
from replication.log import Log
from replication.protocol import EpochAnswer
from replication.records import find_record
from replication.tiered import RemoteStorageError

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.offset_for_leader_epoch.v3
    import kio.schema.offset_for_leader_epoch.v4
    from typing_extensions import TypeIs

    from broker.apis.messages import (
        ListOffsetsRequest,
        ListOffsetsResponse,
        OffsetForLeaderEpochRequest,
        OffsetForLeaderEpochResponse,
    )
    from broker.apis.services import OffsetServices

    _EpochRequestWithReplicaId: TypeAlias = (
        kio.schema.offset_for_leader_epoch.v3.OffsetForLeaderEpochRequest
        | kio.schema.offset_for_leader_epoch.v4.OffsetForLeaderEpochRequest)

__all__ = ["APIS", "LIST_OFFSETS", "OFFSET_FOR_LEADER_EPOCH"]

LIST_OFFSETS = 2
OFFSET_FOR_LEADER_EPOCH = 23

LATEST = -1
READ_COMMITTED = 1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
CONSUMER = -1
DEBUGGING = -2
FIRST_EPOCH_VERSION_WITH_REPLICA_ID = 3

_Found = tuple[int, int, int]  # timestamp, offset, leader epoch
_Answer = tuple[ErrorCode, int, int, int]  # error, timestamp, offset, leader epoch

logger = logging.getLogger(__name__)


def _has_replica_id(request: OffsetForLeaderEpochRequest, version: int
                    ) -> TypeIs[_EpochRequestWithReplicaId]:
    """A request's class is its version's (:func:`broker.wire.request_class`): the version
    tells the type checker which have ``replica_id``, without importing their classes."""
    return version >= FIRST_EPOCH_VERSION_WITH_REPLICA_ID


def _earliest_epoch(log: Log) -> int:
    entries = log.leader_epoch_cache.entries
    if entries and entries[0].start_offset <= log.log_start_offset:
        return entries[0].epoch
    return -1


def _record_in_batch(log: Log, offset: int, wanted: Any) -> _Found | None:
    """The first record of the batch holding ``offset`` whose timestamp ``wanted`` accepts,
    none below the (local) log start: records deleted inside a batch are not answered."""
    offset = max(offset, log.local_log_start_offset)
    data = log.read(offset, 1).records
    return find_record(data, wanted, min_offset=offset) if data else None


def _by_timestamp(log: Log, timestamp: int) -> _Found | None:
    if timestamp == MAX_TIMESTAMP:
        found = log.max_timestamp()
        if found is None:
            return None
        max_ts, offset = found
        return _record_in_batch(log, offset, lambda ts: ts == max_ts)
    first = log.offset_for_timestamp(timestamp)
    if first is None:
        return None
    return _record_in_batch(log, first, lambda ts: ts >= timestamp)


def _list_one(ctx: RequestContext, tp: TopicPartition, timestamp: int, leader_epoch: int,
              isolated: bool, committed: bool = False) -> _Answer | _RemoteSearch:
    """(error, timestamp, offset, leader epoch) for one partition, or the remote search by
    timestamp that will give it."""
    partition, error = leader_partition(ctx, tp, leader_epoch)
    if partition is None or error is not ErrorCode.none:
        return error, -1, -1, -1
    status = partition.status()
    log = partition.log
    hw = status.high_watermark
    fetchable = hw if isolated else status.log_end_offset
    if isolated and committed:
        fetchable = log.last_stable_offset(hw)
    entries = log.leader_epoch_cache.entries
    epoch_start = next((e.start_offset for e in reversed(entries)
                        if e.epoch == status.leader_epoch), None)
    lagging = isolated and epoch_start is not None and epoch_start > hw
    try:
        if timestamp == LATEST:
            if lagging:
                return ErrorCode.offset_not_available, -1, -1, -1
            return ErrorCode.none, -1, fetchable, status.leader_epoch
        if timestamp == EARLIEST:
            return ErrorCode.none, -1, status.log_start_offset, _earliest_epoch(log)
        if timestamp == EARLIEST_LOCAL:
            if not log.config.remote_storage_enable:
                return ErrorCode.none, -1, status.log_start_offset, _earliest_epoch(log)
            local = status.local_log_start_offset
            return ErrorCode.none, -1, local, log.leader_epoch_cache.epoch_at(local)
        if timestamp == LATEST_TIERED:
            highest = log.highest_offset_in_remote_storage
            if not log.config.remote_storage_enable or highest < 0:
                return ErrorCode.none, -1, -1, -1
            return ErrorCode.none, -1, highest, log.leader_epoch_cache.epoch_at(highest)
        if timestamp >= 0 or timestamp == MAX_TIMESTAMP:
            rm = ctx.broker.replica_manager
            remote = (rm.tiered.remote_max_timestamp(tp) if timestamp == MAX_TIMESTAMP
                      else rm.tiered.remote_offset_for_timestamp(tp, timestamp))
            if remote is not None:
                return _RemoteSearch(remote, log, timestamp, fetchable, lagging)
        found = _by_timestamp(log, timestamp)
    except StorageError:
        return ErrorCode.kafka_storage_error, -1, -1, -1
    return _timestamp_answer(found, fetchable, lagging)


def _timestamp_answer(found: _Found | None, fetchable: int, lagging: bool) -> _Answer:
    if found is not None and found[1] < fetchable:
        return ErrorCode.none, found[0], found[1], found[2]
    if lagging:
        return ErrorCode.offset_not_available, -1, -1, -1
    return ErrorCode.none, -1, -1, -1


@dataclass(frozen=True, slots=True)
class _RemoteSearch:
    """A search by timestamp under way in the remote part of a tiered log (on the remote log
    manager's reader threads); the local part is searched after it when it finds nothing, and
    always for MAX_TIMESTAMP, whose answer is the larger timestamp of the two (the remote one,
    at the lower offset, when they are equal)."""

    future: Future[_Found | None]
    log: Log
    timestamp: int
    fetchable: int
    lagging: bool

    async def answer(self) -> _Answer:
        try:
            found = await asyncio.wrap_future(self.future)
            if found is None or self.timestamp == MAX_TIMESTAMP:
                local = _by_timestamp(self.log, self.timestamp)
                if local is not None and (found is None or local[0] > found[0]):
                    found = local
        except (RemoteStorageError, StorageError, OSError):
            logger.warning("ListOffsets by timestamp %d in remote storage failed",
                           self.timestamp, exc_info=True)
            return ErrorCode.kafka_storage_error, -1, -1, -1
        return _timestamp_answer(found, self.fetchable, self.lagging)


_Topics = list[tuple[str, list[tuple[int, _Answer | _RemoteSearch]]]]


def list_offsets(ctx: RequestContext[OffsetServices],
                 request: ListOffsetsRequest) -> Reply[ListOffsetsResponse]:
    isolated = request.replica_id == CONSUMER
    committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
    described: dict[str, bool] = {}
    topics: _Topics = []
    for topic in request.topics:
        answers: list[tuple[int, _Answer | _RemoteSearch]] = []
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            if not described.setdefault(topic.name, ctx.authorized(
                    Operation.DESCRIBE, ResourceType.TOPIC, topic.name)):
                answers.append((p.partition_index,
                                (ErrorCode.topic_authorization_failed, -1, -1, -1)))
            else:
                answers.append((p.partition_index, _list_one(
                    ctx, tp, p.timestamp, getattr(p, "current_leader_epoch", -1), isolated,
                    committed)))
        topics.append((topic.name, answers))
    if any(isinstance(a, _RemoteSearch) for _name, answers in topics for _i, a in answers):
        return _after_remote_searches(ctx, topics)
    return _list_response(ctx, topics)


async def _after_remote_searches(ctx: RequestContext, topics: _Topics) -> Any:
    """The response once every remote search by timestamp is done: the event loop serves
    other requests meanwhile."""
    done: _Topics = [
        (name, [(index, await a.answer() if isinstance(a, _RemoteSearch) else a)
                for index, a in answers])
        for name, answers in topics]
    return _list_response(ctx, done)


def _list_response(ctx: RequestContext, topics: _Topics) -> Any:
    module = response_module(LIST_OFFSETS, ctx.api_version)

    def part(index: int, answer: _Answer | _RemoteSearch) -> Any:
        assert not isinstance(answer, _RemoteSearch)
        error, ts, offset, epoch = answer
        return build(module.ListOffsetsPartitionResponse, partition_index=index,
                     error_code=error, timestamp=ts, offset=offset, leader_epoch=epoch)

    return build(module.ListOffsetsResponse, throttle_time=timedelta(0), topics=tuple(
        build(module.ListOffsetsTopicResponse, name=name,
              partitions=tuple(part(index, a) for index, a in answers))
        for name, answers in topics))


def offset_for_leader_epoch(
        ctx: RequestContext[OffsetServices], request: OffsetForLeaderEpochRequest,
) -> Reply[OffsetForLeaderEpochResponse]:
    module = response_module(OFFSET_FOR_LEADER_EPOCH, ctx.api_version)
    rm = ctx.broker.replica_manager
    snap = ctx.broker.metadata.snapshot
    any_replica = (_has_replica_id(request, ctx.api_version)
                   and request.replica_id == DEBUGGING)
    # Kafka: ClusterAction for a replica, else Describe on each topic
    on_cluster = ctx.authorized(Operation.CLUSTER_ACTION, ResourceType.CLUSTER)
    topics = []
    for topic in request.topics:
        answers = []
        allowed = on_cluster or ctx.authorized(Operation.DESCRIBE, ResourceType.TOPIC,
                                               topic.topic)
        for p in topic.partitions:
            tp = TopicPartition(topic.topic, p.partition)
            if not allowed:
                answers.append(build(module.EpochEndOffset,
                                     error_code=ErrorCode.topic_authorization_failed,
                                     partition=p.partition, leader_epoch=-1, end_offset=-1))
                continue
            current = getattr(p, "current_leader_epoch", -1)
            answer = (_from_any_replica(ctx, tp, p.leader_epoch, current) if any_replica
                      else rm.offsets_for_leader_epoch(tp, p.leader_epoch, current))
            error = error_code(answer.error)
            if error is ErrorCode.unknown_topic_or_partition and snap.contains(tp):
                error = ErrorCode.not_leader_or_follower
            answers.append(build(module.EpochEndOffset, error_code=error, partition=p.partition,
                                 leader_epoch=answer.epoch, end_offset=answer.end_offset))
        topics.append(build(module.OffsetForLeaderTopicResult, topic=topic.topic,
                            partitions=tuple(answers)))
    return build(module.OffsetForLeaderEpochResponse, throttle_time=timedelta(0),
                 topics=tuple(topics))


def _from_any_replica(ctx: RequestContext, tp: TopicPartition, epoch: int, current: int
                      ) -> EpochAnswer:
    """OffsetForLeaderEpoch answered by whichever replica is asked (the debugging id)."""
    partition = ctx.broker.replica_manager.partition(tp)
    if partition is None:
        return EpochAnswer(error=DataErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    error = check_epoch(current, partition.status().leader_epoch)
    if error is not ErrorCode.none:
        return EpochAnswer(error=DataErrorCode(int(error)))
    found = partition.log.end_offset_for_epoch(epoch)
    return EpochAnswer(error=DataErrorCode.NONE, epoch=found.epoch, end_offset=found.end_offset)


APIS = [
    Api(key=LIST_OFFSETS, name="ListOffsets", min_version=1, max_version=9,
        handle=list_offsets),
    Api(key=OFFSET_FOR_LEADER_EPOCH, name="OffsetForLeaderEpoch", min_version=0, max_version=4,
        handle=offset_for_leader_epoch),
]
