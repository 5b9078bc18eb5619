"""DeleteRecords (key 21): move partitions' log start up, as ``kafka-delete-records`` asks.

Per partition, as Kafka's broker answers it: TOPIC_AUTHORIZATION_FAILED without DELETE on the
topic; UNKNOWN_TOPIC_OR_PARTITION when the metadata does not know the partition; an internal
topic (``__consumer_offsets``, ``__transaction_state``) INVALID_TOPIC_EXCEPTION; then the
leader's rules (:meth:`replication.partition.Partition.delete_records`):
NOT_LEADER_OR_FOLLOWER off the leader, POLICY_VIOLATION when ``cleanup.policy`` has no
``delete``, OFFSET_OUT_OF_RANGE for an offset above the high watermark (-1 names the HW).
The log start moves at once (a consumer below it gets OFFSET_OUT_OF_RANGE, ListOffsets'
earliest names it); the segments wholly below it go on the next retention pass.

The answer's ``low_watermark`` is the lowest log start over the leader and its replicas on
live brokers. While it is below the requested offset on some partition, the request is parked
(Kafka's DelayedDeleteRecords), woken by the followers' fetches, which carry their log starts
(each follower moves its own to the leader's on the fetch answer): it completes when every
partition reached its offset or failed (leadership lost), or at ``timeout_ms``, those still
waiting answered REQUEST_TIMED_OUT with the low watermark they had when asked.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.apis.base import Api, Reply, RequestContext
from broker.purgatory import delete_records_key
from broker.security.acls import Operation, ResourceType
from broker.wire import error_code, response_module
from coordinator.codecs import TopicPartition
from kafkaclient.messages import build
from replication.errors import StorageError

if TYPE_CHECKING:
    from broker.apis.messages import DeleteRecordsRequest, DeleteRecordsResponse
    from broker.apis.services import DeleteRecordsServices

__all__ = ["API_KEY", "APIS", "INTERNAL_TOPICS"]

API_KEY = 21
INVALID_LOW_WATERMARK = -1
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
"""Kafka's internal topics, whose records no client deletes."""


@dataclass(slots=True)
class _Status:
    """One partition's answer; ``required`` >= 0 while it waits for the low watermark."""

    index: int
    error: ErrorCode
    low_watermark: int = INVALID_LOW_WATERMARK
    required: int = -1


def _delete_one(ctx: RequestContext, tp: TopicPartition, offset: int) -> _Status:
    broker = ctx.broker
    if not broker.metadata.snapshot.contains(tp):
        return _Status(tp.partition, ErrorCode.unknown_topic_or_partition)
    if tp.topic in INTERNAL_TOPICS:
        return _Status(tp.partition, ErrorCode.invalid_topic_exception)
    partition = broker.replica_manager.partition(tp)
    if partition is None:
        return _Status(tp.partition, ErrorCode.not_leader_or_follower)
    try:
        result = partition.delete_records(offset)
    except StorageError:
        return _Status(tp.partition, ErrorCode.kafka_storage_error)
    error = error_code(result.error)
    if error is not ErrorCode.none:
        return _Status(tp.partition, error)
    status = _Status(tp.partition, ErrorCode.none, result.low_watermark)
    if result.low_watermark < result.requested_offset:
        # Kafka answers REQUEST_TIMED_OUT unless the replicas catch up in time.
        status.error = ErrorCode.request_timed_out
        status.required = result.requested_offset
    return status


def _settle(ctx: RequestContext, tp: TopicPartition, status: _Status) -> None:
    """Check one waiting partition again (Kafka's DelayedDeleteRecords.tryComplete)."""
    partition = ctx.broker.replica_manager.partition(tp)
    if partition is None:
        status.error, status.required = ErrorCode.unknown_topic_or_partition, -1
        status.low_watermark = INVALID_LOW_WATERMARK
        return
    lw = partition.low_watermark()
    if lw is None:
        status.error, status.required = ErrorCode.not_leader_or_follower, -1
        status.low_watermark = INVALID_LOW_WATERMARK
    elif lw >= status.required:
        status.error, status.required, status.low_watermark = ErrorCode.none, -1, lw


def handle(ctx: RequestContext[DeleteRecordsServices],
           request: DeleteRecordsRequest) -> Reply[DeleteRecordsResponse]:
    answers: list[tuple[str, list[tuple[TopicPartition, _Status]]]] = []
    for topic in request.topics:
        statuses: list[tuple[TopicPartition, _Status]] = []
        answers.append((topic.name, statuses))
        allowed = ctx.authorized(Operation.DELETE, ResourceType.TOPIC, topic.name)
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            statuses.append((tp, _delete_one(ctx, tp, p.offset) if allowed else _Status(
                p.partition_index, ErrorCode.topic_authorization_failed)))
    waiting = [(tp, s) for _name, statuses in answers for tp, s in statuses if s.required >= 0]
    if not waiting:
        return _response(ctx, answers)
    answer: asyncio.Future = ctx.broker.loop.create_future()

    def check() -> bool:
        for tp, status in waiting:
            if status.required >= 0:
                _settle(ctx, tp, status)
        return all(status.required < 0 for _tp, status in waiting)

    def complete() -> None:
        if not answer.done():
            answer.set_result(_response(ctx, answers))

    if check():
        return _response(ctx, answers)
    timeout = max(request.timeout / timedelta(seconds=1), 0.0)
    ctx.broker.purgatory.park({delete_records_key(tp) for tp, _s in waiting}, timeout, check,
                              complete)
    return answer


def _response(ctx: RequestContext, answers: list[tuple[str, list[tuple[TopicPartition, _Status]]]]
              ) -> Any:
    module = response_module(API_KEY, ctx.api_version)
    return build(module.DeleteRecordsResponse, throttle_time=timedelta(0), topics=tuple(
        build(module.DeleteRecordsTopicResult, name=name, partitions=tuple(
            build(module.DeleteRecordsPartitionResult, partition_index=s.index,
                  low_watermark=s.low_watermark, error_code=s.error)
            for _tp, s in statuses))
        for name, statuses in answers))


APIS = [Api(key=API_KEY, name="DeleteRecords", min_version=0, max_version=2, handle=handle)]
