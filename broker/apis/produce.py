"""Produce (key 0): batches appended by the data plane as sent, acks 0, 1 and all.

Each partition's records pass through as bytes. Before the data plane sees them they get
Kafka's request checks: exactly one v2 batch (INVALID_RECORD otherwise; CORRUPT_MESSAGE when it
is cut short), zstd only from version 7 (UNSUPPORTED_COMPRESSION_TYPE), at most the topic's
``max.message.bytes`` (MESSAGE_TOO_LARGE) and then at most its ``segment.bytes``
(RECORD_LIST_TOO_LARGE), as Kafka's log checks them; and no client writes to an internal topic
(INVALID_TOPIC_EXCEPTION, see :data:`INTERNAL_TOPICS`). The data plane then checks the CRC and
every record's framing (CORRUPT_MESSAGE, INVALID_RECORD: :mod:`replication.validation`), leadership
(NOT_LEADER_OR_FOLLOWER, or UNKNOWN_TOPIC_OR_PARTITION when the metadata does not know the
partition either), ``min.insync.replicas`` for acks=all (NOT_ENOUGH_REPLICAS), assigns offsets
and appends.

acks 0 and 1 are answered from the append; acks=all waits, parked in the partition, until the
high watermark passes the batch or the request's timeout (REQUEST_TIMED_OUT): the partition
completes its future on whichever thread moves the HW or runs the ticker, and the completion is
carried onto the event loop with ``call_soon_threadsafe`` (``call_soon`` on the loop's own
thread, where a follower's Fetch moves the HW: no wake-up written). An acks=0 request gets no response,
unless a partition failed: then the connection is closed, as Kafka closes it. Every append
wakes the fetches parked on its partition.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Future
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.apis.base import CLOSE_CONNECTION, NO_RESPONSE, Api, Reply, RequestContext
from broker.security.acls import Operation, ResourceType
from broker.wire import error_code, response_module
from coordinator.codecs import TopicPartition
from interbroker.errors import ErrorCode as DataErrorCode
from kafkaclient.messages import build
from replication.protocol import ProduceResult
from replication.records import (
    ATTRIBUTES_OFFSET,
    BATCH_OVERHEAD,
    COMPRESSION_MASK,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_V2,
)

if TYPE_CHECKING:
    from broker.apis.messages import ProduceRequest, ProduceResponse
    from broker.apis.services import ProduceServices

__all__ = ["APIS", "API_KEY", "INTERNAL_TOPICS", "check_records", "when_all_done"]

API_KEY = 0
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
"""Kafka's internal topics: written by their coordinators only (the group coordinator appends
through the replica manager, never through Produce), so a client's Produce to one is refused
with INVALID_TOPIC_EXCEPTION for that partition, whatever its ACLs allow."""
ZSTD = 4
FIRST_ZSTD_VERSION = 7

_Outcome = ErrorCode | Future


def check_records(records: bytes | None, version: int, max_message_bytes: int,
                  segment_bytes: int) -> ErrorCode:
    """Kafka's checks of a produce request's records before they reach the log."""
    if not records:
        return ErrorCode.invalid_record
    size = len(records)
    if size < BATCH_OVERHEAD:
        return ErrorCode.corrupt_message
    batch_size = int.from_bytes(records[8:12], "big", signed=True) + LOG_OVERHEAD
    if batch_size > size or batch_size < BATCH_OVERHEAD:
        return ErrorCode.corrupt_message
    if batch_size < size or records[MAGIC_OFFSET] != MAGIC_V2:
        return ErrorCode.invalid_record  # one v2 batch per partition from version 3 on
    codec = records[ATTRIBUTES_OFFSET + 1] & COMPRESSION_MASK
    if codec == ZSTD and version < FIRST_ZSTD_VERSION:
        return ErrorCode.unsupported_compression_type
    if size > max_message_bytes:
        return ErrorCode.message_too_large
    if size > segment_bytes:
        return ErrorCode.record_list_too_large
    return ErrorCode.none


def handle(ctx: RequestContext[ProduceServices], request: ProduceRequest) -> Reply[ProduceResponse]:
    broker = ctx.broker
    rm = broker.replica_manager
    snap = broker.metadata.snapshot
    traffic = broker.traffic
    acks = request.acks
    timeout_ms = int(request.timeout / timedelta(milliseconds=1))
    outcomes: list[tuple[str, list[tuple[int, _Outcome]]]] = []
    for topic in request.topic_data:
        partitions: list[tuple[int, _Outcome]] = []
        outcomes.append((topic.name, partitions))
        if not ctx.authorized(Operation.WRITE, ResourceType.TOPIC, topic.name):
            partitions += [(d.index, ErrorCode.topic_authorization_failed)
                           for d in topic.partition_data]
            continue
        for data in topic.partition_data:
            tp = TopicPartition(topic.name, data.index)
            if acks not in (0, 1, -1):
                partitions.append((data.index, ErrorCode.invalid_required_acks))
                continue
            partition = rm.partition(tp)
            if partition is None and not snap.contains(tp):
                partitions.append((data.index, ErrorCode.unknown_topic_or_partition))
                continue
            if topic.name in INTERNAL_TOPICS:  # on every broker, leader or not, as Kafka
                partitions.append((data.index, ErrorCode.invalid_topic_exception))
                continue
            if partition is None:
                partitions.append((data.index, ErrorCode.not_leader_or_follower))
                continue
            log_config = partition.log.config  # the topic's: its overrides included
            problem = check_records(data.records, ctx.api_version,
                                    log_config.max_message_bytes, log_config.segment_bytes)
            if problem is not ErrorCode.none:
                partitions.append((data.index, problem))
                continue
            records = data.records
            assert records is not None  # check_records refuses null records
            future = rm.produce(tp, records, acks, timeout_ms)
            if traffic is not None:
                traffic.produced(topic.name, records)
            broker.purgatory.wake(tp)
            partitions.append((data.index, future))
    if acks == 0:
        failed = any(_error(o) is not ErrorCode.none for _t, ps in outcomes for _i, o in ps
                     if not isinstance(o, Future) or o.done())
        return CLOSE_CONNECTION if failed else NO_RESPONSE
    waiting = [o for _t, ps in outcomes for _i, o in ps
               if isinstance(o, Future) and not o.done()]
    if not waiting:
        return _response(ctx, outcomes)
    return _when_done(ctx, outcomes, waiting)


def _when_done(ctx: RequestContext, outcomes: list[tuple[str, list[tuple[int, _Outcome]]]],
               waiting: list[Future]) -> asyncio.Future:
    """A loop future answered once every waiting append is complete (HW passed, timed out,
    or failed), whichever thread completes them."""
    return when_all_done(ctx.broker.loop, waiting, lambda: _response(ctx, outcomes))


def when_all_done(loop: asyncio.AbstractEventLoop, waiting: list[Future],
                  answer: Callable[[], Any]) -> asyncio.Future:
    """A future of ``loop`` set to ``answer()`` once every future of ``waiting`` (appends'
    futures, completed on any thread) is done; ``answer`` runs on the loop."""
    result: asyncio.Future = loop.create_future()
    left = [len(waiting)]

    def one_done() -> None:
        left[0] -= 1
        if left[0] == 0 and not result.done():
            result.set_result(answer())

    def on_done(_future: Future) -> None:
        running = _running_loop()
        if running is not None and running is loop:  # a follower's Fetch moved the HW here
            running.call_soon(one_done)
            return
        try:
            loop.call_soon_threadsafe(one_done)
        except RuntimeError:  # the loop is closed: the connection is gone
            pass

    for future in waiting:
        future.add_done_callback(on_done)
    return result


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # a thread without a loop (the replica ticker timing a produce out)
        return None


def _error(outcome: _Outcome) -> ErrorCode:
    if isinstance(outcome, Future):
        return error_code(outcome.result().error)
    return outcome


def _response(ctx: RequestContext, outcomes: list[tuple[str, list[tuple[int, _Outcome]]]]
              ) -> Any:
    module = response_module(API_KEY, ctx.api_version)
    rm = ctx.broker.replica_manager
    topics = []
    for name, partitions in outcomes:
        answers = []
        for index, outcome in partitions:
            base, log_start, error = -1, -1, _error(outcome)
            if isinstance(outcome, Future):
                result: ProduceResult = outcome.result()
                if result.error == DataErrorCode.NONE or \
                        result.error == DataErrorCode.UNKNOWN_PRODUCER_ID:
                    # Kafka's Java producer resends a batch answered UNKNOWN_PRODUCER_ID
                    # unchanged until the answer carries the log start (base offset -1 then)
                    base = result.base_offset
                    partition = rm.partition(TopicPartition(name, index))
                    log_start = partition.log.log_start_offset if partition is not None else -1
            answers.append(build(module.PartitionProduceResponse, index=index, error_code=error,
                                 base_offset=base, log_append_time=None,
                                 log_start_offset=log_start, record_errors=(),
                                 error_message=None))
        topics.append(build(module.TopicProduceResponse, name=name,
                            partition_responses=tuple(answers)))
    return build(module.ProduceResponse, responses=tuple(topics), throttle_time=timedelta(0))


APIS = [Api(key=API_KEY, name="Produce", min_version=3, max_version=11, handle=handle)]
