"""The transaction APIs: AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26),
DescribeTransactions (65) and ListTransactions (66). InitProducerId (22) is in
:mod:`broker.apis.producers`, FindCoordinator for transactional ids in :mod:`broker.apis.groups`.

Each handler makes the checks Kafka's ``KafkaApis`` makes before its transaction coordinator
sees a request, then hands it to :class:`~broker.txns.TransactionCoordinator`:

- WRITE on the TransactionalId for AddPartitionsToTxn (versions 0-3, from clients),
  AddOffsetsToTxn and EndTxn (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); WRITE on each topic for
  AddPartitionsToTxn (internal topics never pass), where one partition refused
  (TOPIC_AUTHORIZATION_FAILED) or unknown (UNKNOWN_TOPIC_OR_PARTITION) fails the transaction's
  request and the others are OPERATION_NOT_ATTEMPTED; READ on the group for AddOffsetsToTxn
  (GROUP_AUTHORIZATION_FAILED); CLUSTER_ACTION for versions 4 and 5, which only brokers send
  (KIP-890 part 1: ``verify_only`` asks whether partitions are in the ongoing transaction);
  DESCRIBE on the TransactionalId for DescribeTransactions (and on each topic it shows) and
  for each id ListTransactions lists (the others are left out).
- Versions 4 and 5 are answered alike, as Kafka 3.9 answers them: version 5 only says that
  the asking broker knows TRANSACTION_ABORTABLE, which the coordinator answers to both for a
  partition that is not in the transaction (the asking broker turns it into what its own
  client's version knows: :mod:`broker.apis.produce`).
- Clients of versions below 2 of AddPartitionsToTxn, AddOffsetsToTxn and EndTxn do not know
  PRODUCER_FENCED: they get INVALID_PRODUCER_EPOCH.
- AddOffsetsToTxn adds the group's ``__consumer_offsets`` partition to the transaction, so its
  markers reach the offsets committed in it.

A broker without a transaction coordinator answers COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.apis.base import Api, Reply, RequestContext
from broker.groups.metadata_manager import OFFSETS_TOPIC
from broker.groups.records import partition_for
from broker.security.acls import Operation, ResourceType
from broker.wire import response_module
from coordinator.codecs import TopicPartition
from kafkaclient.messages import build

if TYPE_CHECKING:
    from broker.apis.messages import (
        AddOffsetsToTxnRequest,
        AddOffsetsToTxnResponse,
        AddPartitionsToTxnRequest,
        AddPartitionsToTxnResponse,
        DescribeTransactionsRequest,
        DescribeTransactionsResponse,
        EndTxnRequest,
        EndTxnResponse,
        ListTransactionsRequest,
        ListTransactionsResponse,
    )
    from broker.apis.services import TransactionServices
    from broker.txns import TransactionCoordinator, TxnSummary

__all__ = ["APIS"]

ADD_PARTITIONS_TO_TXN = 24
ADD_OFFSETS_TO_TXN = 25
END_TXN = 26
DESCRIBE_TRANSACTIONS = 65
LIST_TRANSACTIONS = 66
_ZERO = timedelta(0)
_INTERNAL = ("__consumer_offsets", "__transaction_state")
TP = tuple[str, int]


def _coordinator(ctx: RequestContext) -> TransactionCoordinator | None:
    return getattr(ctx.broker, "transactions", None)


def _fenced(error: ErrorCode, version: int, first_knowing: int) -> ErrorCode:
    """PRODUCER_FENCED for the clients that know it, INVALID_PRODUCER_EPOCH for older ones."""
    if error is ErrorCode.producer_fenced and version < first_knowing:
        return ErrorCode.invalid_producer_epoch
    return error


# --- AddPartitionsToTxn -----------------------------------------------------------------------


def _results(module: Any, errors: dict[TP, ErrorCode]) -> tuple:
    by_topic: dict[str, list[tuple[int, ErrorCode]]] = {}
    for (topic, partition), error in errors.items():
        by_topic.setdefault(topic, []).append((partition, error))
    return tuple(build(module.AddPartitionsToTxnTopicResult, name=topic,
                       results_by_partition=tuple(
                           build(module.AddPartitionsToTxnPartitionResult, partition_index=p,
                                 partition_error_code=e) for p, e in sorted(parts)))
                 for topic, parts in by_topic.items())


async def _one_transaction(ctx: RequestContext, coordinator: TransactionCoordinator | None,
                           tid: str, pid: int, epoch: int, verify_only: bool,
                           wanted: list[TP]) -> dict[TP, ErrorCode]:
    """The per-partition errors of one transaction of an AddPartitionsToTxn."""
    version = ctx.api_version
    if version < 4 and not ctx.authorized(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
        return dict.fromkeys(wanted, ErrorCode.transactional_id_authorization_failed)
    errors: dict[TP, ErrorCode] = {}
    for topic, partition in wanted:
        if version < 4 and (topic in _INTERNAL or not ctx.authorized(
                Operation.WRITE, ResourceType.TOPIC, topic)):
            errors[(topic, partition)] = ErrorCode.topic_authorization_failed
        elif not ctx.broker.metadata.snapshot.contains(TopicPartition(topic, partition)):
            errors[(topic, partition)] = ErrorCode.unknown_topic_or_partition
    if errors:
        return {tp: errors.get(tp, ErrorCode.operation_not_attempted) for tp in wanted}
    if coordinator is None:
        return dict.fromkeys(wanted, ErrorCode.coordinator_not_available)
    if verify_only:
        return coordinator.verify_partitions(tid, pid, epoch, wanted)
    error = await coordinator.add_partitions(tid, pid, epoch, wanted)
    return dict.fromkeys(wanted, _fenced(error, version, 2))


def add_partitions_to_txn(ctx: RequestContext[TransactionServices],
                          request: AddPartitionsToTxnRequest
                          ) -> Reply[AddPartitionsToTxnResponse]:
    module = response_module(ADD_PARTITIONS_TO_TXN, ctx.api_version)
    coordinator = _coordinator(ctx)
    if ctx.api_version < 4:
        r: Any = request
        wanted = [(str(t.name), int(p)) for t in r.v3_and_below_topics for p in t.partitions]

        async def one() -> Any:
            errors = await _one_transaction(ctx, coordinator, r.v3_and_below_transactional_id,
                                            r.v3_and_below_producer_id,
                                            r.v3_and_below_producer_epoch, False, wanted)
            return build(module.AddPartitionsToTxnResponse, throttle_time=_ZERO,
                         results_by_topic_v3_and_below=_results(module, errors))
        return one()
    batched: Any = request
    if not ctx.authorized(Operation.CLUSTER_ACTION, ResourceType.CLUSTER):
        return build(module.AddPartitionsToTxnResponse, throttle_time=_ZERO,
                     error_code=ErrorCode.cluster_authorization_failed,
                     results_by_transaction=())

    async def every() -> Any:
        results = await asyncio.gather(*(
            _one_transaction(ctx, coordinator, t.transactional_id, t.producer_id,
                             t.producer_epoch, t.verify_only,
                             [(str(x.name), int(p)) for x in t.topics for p in x.partitions])
            for t in batched.transactions))
        return build(module.AddPartitionsToTxnResponse, throttle_time=_ZERO,
                     error_code=ErrorCode.none, results_by_transaction=tuple(
                         build(module.AddPartitionsToTxnResult,
                               transactional_id=t.transactional_id,
                               topic_results=_results(module, errors))
                         for t, errors in zip(batched.transactions, results, strict=True)))
    return every()


# --- AddOffsetsToTxn, EndTxn ------------------------------------------------------------------


def add_offsets_to_txn(ctx: RequestContext[TransactionServices],
                       request: AddOffsetsToTxnRequest) -> Reply[AddOffsetsToTxnResponse]:
    module = response_module(ADD_OFFSETS_TO_TXN, ctx.api_version)

    def answer(error: ErrorCode) -> Any:
        return build(module.AddOffsetsToTxnResponse, throttle_time=_ZERO,
                     error_code=_fenced(error, ctx.api_version, 2))

    tid = request.transactional_id
    if not ctx.authorized(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
        return answer(ErrorCode.transactional_id_authorization_failed)
    if not ctx.authorized(Operation.READ, ResourceType.GROUP, request.group_id):
        return answer(ErrorCode.group_authorization_failed)
    coordinator = _coordinator(ctx)
    count = len(ctx.broker.metadata.snapshot.topics.get(OFFSETS_TOPIC, {}))
    if coordinator is None or not count:
        return answer(ErrorCode.coordinator_not_available)
    offsets_partition = (OFFSETS_TOPIC, partition_for(request.group_id, count))

    async def add() -> Any:
        return answer(await coordinator.add_partitions(
            tid, request.producer_id, request.producer_epoch, [offsets_partition]))
    return add()


def end_txn(ctx: RequestContext[TransactionServices],
            request: EndTxnRequest) -> Reply[EndTxnResponse]:
    module = response_module(END_TXN, ctx.api_version)

    def answer(error: ErrorCode) -> Any:
        return build(module.EndTxnResponse, throttle_time=_ZERO,
                     error_code=_fenced(error, ctx.api_version, 2))

    tid = request.transactional_id
    if not ctx.authorized(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
        return answer(ErrorCode.transactional_id_authorization_failed)
    coordinator = _coordinator(ctx)
    if coordinator is None:
        return answer(ErrorCode.coordinator_not_available)

    async def end() -> Any:
        return answer(await coordinator.end_txn(tid, request.producer_id,
                                                request.producer_epoch, request.committed))
    return end()


# --- DescribeTransactions, ListTransactions ---------------------------------------------------


def _time(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def describe_transactions(ctx: RequestContext[TransactionServices],
                          request: DescribeTransactionsRequest
                          ) -> Reply[DescribeTransactionsResponse]:
    module = response_module(DESCRIBE_TRANSACTIONS, ctx.api_version)
    coordinator = _coordinator(ctx)
    states = []
    for tid in request.transactional_ids:
        error, txn = ErrorCode.coordinator_not_available, None
        if not ctx.authorized(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid):
            error = ErrorCode.transactional_id_authorization_failed
        elif coordinator is not None:
            error, txn = coordinator.describe(tid)
        topics: dict[str, list[int]] = {}
        if txn is not None:
            for topic, partition in sorted(txn.partitions):
                if ctx.authorized(Operation.DESCRIBE, ResourceType.TOPIC, topic):
                    topics.setdefault(topic, []).append(partition)
        states.append(build(
            module.TransactionState, error_code=error, transactional_id=tid,
            transaction_state=txn.state.label if txn is not None else "",
            transaction_timeout=timedelta(milliseconds=txn.timeout_ms if txn else 0),
            transaction_start_time=_time(txn.start_ms if txn is not None else -1),
            producer_id=txn.producer_id if txn is not None else -1,
            producer_epoch=txn.producer_epoch if txn is not None else -1,
            topics=tuple(build(module.TopicData, topic=t, partitions=tuple(ps))
                         for t, ps in topics.items())))
    return build(module.DescribeTransactionsResponse, throttle_time=_ZERO,
                 transaction_states=tuple(states))


def list_transactions(ctx: RequestContext[TransactionServices],
                      request: ListTransactionsRequest) -> Reply[ListTransactionsResponse]:
    module = response_module(LIST_TRANSACTIONS, ctx.api_version)
    coordinator = _coordinator(ctx)
    unknown: list[str] = []
    found: list[TxnSummary] = []
    if coordinator is None:
        error = ErrorCode.coordinator_not_available
    else:
        error, unknown, found = coordinator.list_transactions(
            list(request.state_filters), [int(p) for p in request.producer_id_filters],
            int(getattr(request, "duration_filter", -1)))
    return build(module.ListTransactionsResponse, throttle_time=_ZERO, error_code=error,
                 unknown_state_filters=tuple(unknown), transaction_states=tuple(
                     build(module.TransactionState, transactional_id=s.transactional_id,
                           producer_id=s.producer_id, transaction_state=s.state)
                     for s in found if ctx.authorized(
                         Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, s.transactional_id)))


APIS = [
    Api(key=ADD_PARTITIONS_TO_TXN, name="AddPartitionsToTxn", min_version=0, max_version=5,
        handle=add_partitions_to_txn),
    Api(key=ADD_OFFSETS_TO_TXN, name="AddOffsetsToTxn", min_version=0, max_version=4,
        handle=add_offsets_to_txn),
    Api(key=END_TXN, name="EndTxn", min_version=0, max_version=4, handle=end_txn),
    Api(key=DESCRIBE_TRANSACTIONS, name="DescribeTransactions", min_version=0, max_version=0,
        handle=describe_transactions),
    Api(key=LIST_TRANSACTIONS, name="ListTransactions", min_version=0, max_version=1,
        handle=list_transactions),
]
