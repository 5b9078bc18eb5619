"""ListOffsets (key 2) and OffsetForLeaderEpoch (key 23): where a consumer starts or resumes.

ListOffsets answers, per partition led here (after Kafka's current-leader-epoch check):
earliest (-2, and earliest-local -4: the log start, with the epoch of the oldest epoch entry
when it reaches back that far), latest (-1: the high watermark, which is the last stable offset
too, and the current leader epoch), max timestamp (-3, KIP-734: the record with the largest
timestamp), latest-tiered (-5: -1, there is no remote storage), or the first record whose
timestamp is at or after the one given, found through the time index. A found offset at or above
the HW is not returned (offset and timestamp -1), as Kafka keeps uncommitted records from
consumers; a new leader whose HW still lags the start of its epoch answers OFFSET_NOT_AVAILABLE.

Records are only looked into when a batch is uncompressed: inside a compressed batch (its
records are stored as sent, never decompressed here) the answer is the batch's first offset and
its largest timestamp, which is where a consumer must start to see the record asked for.

OffsetForLeaderEpoch is answered by the data plane, for consumers and followers alike (a
follower names itself by ``replica_id`` from version 3): only the leader answers them. A request
whose replica id is -2 (Kafka's debugging id, the schema's default) may be answered by any
replica of the partition, from its own log, after the current-leader-epoch check, as Kafka does.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from broker.apis import Api, RequestContext
from broker.apis.fetch import check_epoch, leader_partition
from broker.wire import build, error_code, response_module
from coordinator.codecs import TopicPartition
from replication.errors import StorageError
from replication.log import Log
from replication.protocol import EpochAnswer
from replication.protocol import ErrorCode as DataErrorCode
from replication.records import decode_batch, read_batch_header

__all__ = ["APIS", "LIST_OFFSETS", "OFFSET_FOR_LEADER_EPOCH"]

LIST_OFFSETS = 2
OFFSET_FOR_LEADER_EPOCH = 23

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
CONSUMER = -1
DEBUGGING = -2
FIRST_EPOCH_VERSION_WITH_REPLICA_ID = 3

_Found = tuple[int, int, int]  # timestamp, offset, leader epoch


def _epoch_for(log: Log, offset: int) -> int:
    epoch = -1
    for entry in log.leader_epoch_cache.entries:
        if entry.start_offset > offset:
            break
        epoch = entry.epoch
    return epoch


def _earliest_epoch(log: Log) -> int:
    entries = log.leader_epoch_cache.entries
    if entries and entries[0].start_offset <= log.log_start_offset:
        return entries[0].epoch
    return -1


def _record_in_batch(log: Log, offset: int, wanted: Any) -> _Found | None:
    """The first record of the batch holding ``offset`` whose timestamp ``wanted`` accepts."""
    data = log.read(offset, 1).records
    if not data:
        return None
    header = read_batch_header(data)
    epoch = header.partition_leader_epoch if header.partition_leader_epoch >= 0 else -1
    if header.compression:
        return header.max_timestamp, header.base_offset, epoch
    for record in decode_batch(data).records:
        if wanted(record.timestamp):
            return record.timestamp, record.offset, epoch
    return None


def _by_timestamp(log: Log, timestamp: int) -> _Found | None:
    if timestamp == MAX_TIMESTAMP:
        found = log.max_timestamp()
        if found is None:
            return None
        max_ts, offset = found
        return _record_in_batch(log, offset, lambda ts: ts == max_ts)
    offset = log.offset_for_timestamp(timestamp)
    if offset is None:
        return None
    return _record_in_batch(log, offset, lambda ts: ts >= timestamp)


def _list_one(ctx: RequestContext, tp: TopicPartition, timestamp: int, leader_epoch: int,
              isolated: bool) -> tuple[ErrorCode, int, int, int]:
    """(error, timestamp, offset, leader epoch) for one partition."""
    partition, error = leader_partition(ctx, tp, leader_epoch)
    if partition is None or error is not ErrorCode.none:
        return error, -1, -1, -1
    status = partition.status()
    log = partition.log
    hw = status.high_watermark
    fetchable = hw if isolated else status.log_end_offset
    entries = log.leader_epoch_cache.entries
    epoch_start = next((e.start_offset for e in reversed(entries)
                        if e.epoch == status.leader_epoch), None)
    lagging = isolated and epoch_start is not None and epoch_start > hw
    try:
        if timestamp == LATEST:
            if lagging:
                return ErrorCode.offset_not_available, -1, -1, -1
            return ErrorCode.none, -1, fetchable, status.leader_epoch
        if timestamp in (EARLIEST, EARLIEST_LOCAL):
            return ErrorCode.none, -1, status.log_start_offset, _earliest_epoch(log)
        if timestamp == LATEST_TIERED:
            return ErrorCode.none, -1, -1, -1
        found = _by_timestamp(log, timestamp)
    except StorageError:
        return ErrorCode.kafka_storage_error, -1, -1, -1
    if found is not None and found[1] < fetchable:
        return ErrorCode.none, found[0], found[1], found[2]
    if lagging:
        return ErrorCode.offset_not_available, -1, -1, -1
    return ErrorCode.none, -1, -1, -1


def list_offsets(ctx: RequestContext, request: Any) -> Any:
    module = response_module(LIST_OFFSETS, ctx.api_version)
    isolated = request.replica_id == CONSUMER
    topics = []
    for topic in request.topics:
        answers = []
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            error, ts, offset, epoch = _list_one(
                ctx, tp, p.timestamp, getattr(p, "current_leader_epoch", -1), isolated)
            answers.append(build(module.ListOffsetsPartitionResponse,
                                 partition_index=p.partition_index, error_code=error,
                                 timestamp=ts, offset=offset, leader_epoch=epoch))
        topics.append(build(module.ListOffsetsTopicResponse, name=topic.name,
                            partitions=tuple(answers)))
    return build(module.ListOffsetsResponse, throttle_time=timedelta(0), topics=tuple(topics))


def offset_for_leader_epoch(ctx: RequestContext, request: Any) -> Any:
    module = response_module(OFFSET_FOR_LEADER_EPOCH, ctx.api_version)
    rm = ctx.broker.replica_manager
    snap = ctx.broker.metadata.snapshot
    any_replica = (ctx.api_version >= FIRST_EPOCH_VERSION_WITH_REPLICA_ID
                   and request.replica_id == DEBUGGING)
    topics = []
    for topic in request.topics:
        answers = []
        for p in topic.partitions:
            tp = TopicPartition(topic.topic, p.partition)
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
