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
import struct
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.apis.base import CLOSE_CONNECTION, NO_RESPONSE, Api, Reply, RequestContext
from broker.security.acls import Operation, ResourceType
from broker.wire import error_code, response_module
from coordinator.codecs import TopicPartition
from interbroker.errors import ErrorCode as DataErrorCode
from kafkaclient.messages import build
from replication.partition import Role
from replication.protocol import ProduceResult
from replication.records import (
    ATTRIBUTES_OFFSET,
    BATCH_OVERHEAD,
    COMPRESSION_MASK,
    CONTROL_MASK,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_V2,
    TRANSACTIONAL_MASK,
)
from replication.txn_verification import NO_GUARD

if TYPE_CHECKING:
    from broker.apis.messages import ProduceRequest, ProduceResponse
    from broker.apis.services import ProduceServices
    from broker.txns.verifier import TxnVerifier

__all__ = ["APIS", "API_KEY", "INTERNAL_TOPICS", "check_records", "when_all_done"]

API_KEY = 0
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
"""Kafka's internal topics: written by their coordinators only (the group coordinator appends
through the replica manager, never through Produce), so a client's Produce to one is refused
with INVALID_TOPIC_EXCEPTION for that partition, whatever its ACLs allow."""
ZSTD = 4
FIRST_ZSTD_VERSION = 7


@dataclass(frozen=True, slots=True)
class _Refused:
    """An outcome decided before the log: Kafka's error and the message it sends with it."""

    error: ErrorCode
    message: str


_Outcome = ErrorCode | Future | _Refused


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
    acks = request.acks
    timeout_ms = int(request.timeout / timedelta(milliseconds=1))
    tid = request.transactional_id
    if any(_transactional_attributes(d.records) for t in request.topic_data
           for d in t.partition_data) and (tid is None or not ctx.authorized(
               Operation.WRITE, ResourceType.TRANSACTIONAL_ID, tid)):
        return _refuse_all(ctx, request, acks, ErrorCode.transactional_id_authorization_failed)
    outcomes: list[tuple[str, list[tuple[int, _Outcome]]]] = []
    ready: list[_Ready] = []
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
            ready.append(_Ready(tp, records, partitions, len(partitions)))
            partitions.append((data.index, ErrorCode.none))  # the append's, filled in below
    verifier = _verifier(ctx, tid)
    deferred = _append_or_defer(ctx, ready, acks, timeout_ms, verifier)
    if deferred:
        assert verifier is not None and tid is not None
        return _verify_in_turn(ctx, outcomes, deferred, acks, timeout_ms, verifier, tid)
    return _answer(ctx, outcomes, acks)


def _answer(ctx: RequestContext, outcomes: list[tuple[str, list[tuple[int, _Outcome]]]],
            acks: int) -> Any:
    if acks == 0:
        failed = any(_error(o) is not ErrorCode.none for _t, ps in outcomes for _i, o in ps
                     if not isinstance(o, Future) or o.done())
        return CLOSE_CONNECTION if failed else NO_RESPONSE
    waiting = [o for _t, ps in outcomes for _i, o in ps
               if isinstance(o, Future) and not o.done()]
    if not waiting:
        return _response(ctx, outcomes)
    return _when_done(ctx, outcomes, waiting)


def _refuse_all(ctx: RequestContext, request: ProduceRequest, acks: int,
                error: ErrorCode) -> Any:
    """Every partition of the request answered ``error`` (Kafka's error response)."""
    outcomes: list[tuple[str, list[tuple[int, _Outcome]]]] = [
        (t.name, [(d.index, error) for d in t.partition_data]) for t in request.topic_data]
    return _answer(ctx, outcomes, acks)


# -- appends, and KIP-890's verification of transactional ones --------------------------------


@dataclass(frozen=True, slots=True)
class _Ready:
    """A partition's records that passed the request's checks, and where its outcome goes."""

    tp: TopicPartition
    records: bytes
    slots: list[tuple[int, _Outcome]]
    slot: int

    def put(self, outcome: _Outcome) -> None:
        self.slots[self.slot] = (self.slots[self.slot][0], outcome)


_PRODUCER_FIELDS = struct.Struct(">qhi")  # producerId, producerEpoch, baseSequence
_PRODUCER_OFFSET = ATTRIBUTES_OFFSET + 22
_TXN_DATA = TRANSACTIONAL_MASK | CONTROL_MASK

_RETRIABLE_UNVERIFIED = frozenset({
    ErrorCode.concurrent_transactions, ErrorCode.network_exception,
    ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available,
    ErrorCode.not_coordinator})
"""Verification errors a produce answers NOT_ENOUGH_REPLICAS, which every producer retries
without a metadata refresh (Kafka's choice: older clients retry no coordinator error here)."""
FIRST_TRANSACTION_ABORTABLE_VERSION = 11


def _transactional_attributes(records: bytes | None) -> bool:
    """Whether ``records`` (unchecked) start with a transactional batch."""
    return records is not None and len(records) > ATTRIBUTES_OFFSET + 1 and bool(
        records[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_MASK)


def _txn_data(records: bytes) -> tuple[int, int, int] | None:
    """(producer id, epoch, base sequence) of a transactional data batch (checked records)."""
    if records[ATTRIBUTES_OFFSET + 1] & _TXN_DATA != TRANSACTIONAL_MASK:
        return None
    pid, epoch, seq = _PRODUCER_FIELDS.unpack_from(records, _PRODUCER_OFFSET)
    return (pid, epoch, seq) if pid >= 0 else None


def _verifier(ctx: RequestContext[ProduceServices], tid: str | None) -> TxnVerifier | None:
    transactions = ctx.broker.transactions
    if tid is None or transactions is None or not transactions.verifier.enabled:
        return None
    return transactions.verifier


def _append(ctx: RequestContext, item: _Ready, acks: int, timeout_ms: int,
            guard: int | None) -> None:
    broker = ctx.broker
    item.put(broker.replica_manager.produce(item.tp, item.records, acks, timeout_ms,
                                            guard=guard))
    if broker.traffic is not None:
        broker.traffic.produced(item.tp.topic, item.records)
    broker.purgatory.wake(item.tp)


def _append_or_defer(ctx: RequestContext, ready: list[_Ready], acks: int, timeout_ms: int,
                     verifier: TxnVerifier | None) -> list[tuple[_Ready, tuple[int, int, int]]]:
    """Append what needs no verification; return the transactional batches that need the
    coordinator first (a producer's first batch of a transaction on the partition, or one
    behind a verification under way)."""
    if verifier is None:
        for item in ready:
            _append(ctx, item, acks, timeout_ms, None)
        return []
    txns = [_txn_data(item.records) for item in ready]
    if len({t[0] for t in txns if t is not None}) > 1:  # Kafka refuses the whole request
        for item in ready:
            item.put(ErrorCode.invalid_producer_id_mapping)
        return []
    deferred = []
    rm = ctx.broker.replica_manager
    for item, txn in zip(ready, txns, strict=True):
        if txn is not None:
            partition = rm.partition(item.tp)
            pid, epoch, seq = txn
            # only a leader verifies (Kafka's too): elsewhere the append answers why not
            if partition is not None and partition.role is Role.LEADER and (
                    verifier.busy(item.tp, pid)
                    or partition.log.start_txn_verification(pid, seq, epoch) != NO_GUARD):
                deferred.append((item, txn))
                continue
        _append(ctx, item, acks, timeout_ms, None if txn is None else NO_GUARD)
    return deferred


def _verify_in_turn(ctx: RequestContext, outcomes: list[tuple[str, list[tuple[int, _Outcome]]]],
                    deferred: list[tuple[_Ready, tuple[int, int, int]]], acks: int,
                    timeout_ms: int, verifier: TxnVerifier, tid: str) -> asyncio.Task:
    """The deferred partitions' turn, taken now, and their verification, started now.

    The turn is taken while the request is dispatched, before the connection's next request
    is read: a later batch of the producer to the same partition then waits behind this one
    instead of being appended ahead of it (the transaction is open on the partition once an
    earlier batch is in, so the later one needs no verification of its own). The verification
    runs at once rather than when the connection's earlier answers have gone out: those wait
    for acks=all. The turn ends however the task ends, cancelled before it ran included."""
    pid = deferred[0][1][0]
    before, done = verifier.turn((item.tp, pid) for item, _txn in deferred)
    task = asyncio.ensure_future(_verify_then_answer(ctx, outcomes, deferred, acks, timeout_ms,
                                                     verifier, tid, before, done))
    task.add_done_callback(lambda _task: done())
    return task


async def _verify_then_answer(ctx: RequestContext,
                              outcomes: list[tuple[str, list[tuple[int, _Outcome]]]],
                              deferred: list[tuple[_Ready, tuple[int, int, int]]], acks: int,
                              timeout_ms: int, verifier: TxnVerifier, tid: str,
                              before: list[asyncio.Future], done: Callable[[], None]) -> Any:
    """Ask the coordinator about the deferred partitions (once any earlier produce of the
    producer to them is appended or refused), append the verified ones with their guards,
    then answer."""
    pid, epoch = deferred[0][1][0], deferred[0][1][1]
    try:
        for earlier in before:
            await asyncio.shield(earlier)
        rm = ctx.broker.replica_manager
        guards: dict[TopicPartition, int] = {}
        for item, (_pid, _epoch, seq) in deferred:
            partition = rm.partition(item.tp)
            leads = partition is not None and partition.role is Role.LEADER
            guards[item.tp] = NO_GUARD if partition is None or not leads else \
                partition.log.start_txn_verification(pid, seq, epoch)
        asked = [item.tp for item, _txn in deferred if guards[item.tp] != NO_GUARD]
        unverified = await verifier.verify(tid, pid, epoch, asked) if asked else {}
        for item, _txn in deferred:
            error = unverified.get(item.tp)
            if error is None:
                _append(ctx, item, acks, timeout_ms, guards[item.tp])
            else:
                item.put(_unverified(error, ctx.api_version))
    finally:
        done()
    result = _answer(ctx, outcomes, acks)
    return await result if isinstance(result, asyncio.Future) else result


def _unverified(error: ErrorCode, version: int) -> _Outcome:
    """What a produce answers for a partition the coordinator did not verify (Kafka's)."""
    if error is ErrorCode.transaction_abortable and version < FIRST_TRANSACTION_ABORTABLE_VERSION:
        error = ErrorCode.invalid_txn_state
    if error is ErrorCode.invalid_txn_state:
        return _Refused(error, "Partition was not added to the transaction")
    if error in _RETRIABLE_UNVERIFIED:
        return _Refused(ErrorCode.not_enough_replicas, "Unable to verify the partition has been "
                        f"added to the transaction. Underlying error: {error.name.upper()}")
    return error


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
    if isinstance(outcome, _Refused):
        return outcome.error
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
            message = outcome.message if isinstance(outcome, _Refused) else None
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
                                 error_message=message))
        topics.append(build(module.TopicProduceResponse, name=name,
                            partition_responses=tuple(answers)))
    return build(module.ProduceResponse, responses=tuple(topics), throttle_time=timedelta(0))


APIS = [Api(key=API_KEY, name="Produce", min_version=3, max_version=11, handle=handle)]
