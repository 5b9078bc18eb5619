"""InitProducerId (key 22): producer ids for idempotent producers and transactional ones.

An idempotent producer asks for an id once and numbers its batches per partition; the data
plane then recognises a retried batch (answered with its first offsets, not written again).
A request without a transactional id gets a new id at epoch 0 from the broker's
:class:`~replication.producer_ids.ProducerIdManager`, as Kafka's transaction coordinator hands
one out for a producer without a transactional id (ids it passes along, KIP-360's bump, do not
matter then: a new id is given). The first request, and one that comes while the next block of
ids is still being claimed, waits off the loop for up to :data:`WAIT_FOR_IDS` (Kafka's
ZooKeeper-mode broker claimed a block inside the request, on its handler thread); if no id is
at hand by then it is answered COORDINATOR_LOAD_IN_PROGRESS, which clients retry.

Kafka's checks come first: a producer id given without an epoch, or an epoch without an id, is
INVALID_REQUEST; an empty transactional id is INVALID_REQUEST.

A transactional id needs WRITE on it (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and goes to this
broker's transaction coordinator (:meth:`~broker.txns.TransactionCoordinator.init_producer_id`:
a new producer id or the epoch bumped, the old producer fenced, an ongoing transaction aborted
first, KIP-360's producer id and epoch checked, a ``transaction.timeout.ms`` above
``transaction.max.timeout.ms`` INVALID_TRANSACTION_TIMEOUT); a broker that does not coordinate
the id answers NOT_COORDINATOR and the client looks it up again with FindCoordinator. Clients of
versions below 4 do not know PRODUCER_FENCED: they get INVALID_PRODUCER_EPOCH.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.apis.admin_support import milliseconds
from broker.apis.base import Api, Reply, RequestContext
from broker.security.acls import Operation, ResourceType
from broker.wire import response_module
from kafkaclient.messages import build
from replication.producer_ids import ProducerIdAndEpoch, ProducerIdsUnavailable

if TYPE_CHECKING:
    from broker.apis.messages import InitProducerIdRequest, InitProducerIdResponse
    from broker.apis.services import TransactionServices

__all__ = ["APIS", "API_KEY"]

API_KEY = 22
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
WAIT_FOR_IDS = 5.0
"""Seconds a request waits for a block of ids being claimed (clients time out after 30)."""


def _answer(ctx: RequestContext, error: ErrorCode, producer_id: int = NO_PRODUCER_ID,
            epoch: int = NO_PRODUCER_EPOCH) -> Any:
    module = response_module(API_KEY, ctx.api_version)
    return build(module.InitProducerIdResponse, throttle_time=timedelta(0), error_code=error,
                 producer_id=producer_id, producer_epoch=epoch)


def handle(ctx: RequestContext[TransactionServices],
           request: InitProducerIdRequest) -> Reply[InitProducerIdResponse]:
    given_id = getattr(request, "producer_id", NO_PRODUCER_ID)
    given_epoch = getattr(request, "producer_epoch", NO_PRODUCER_EPOCH)
    if (given_id == NO_PRODUCER_ID) != (given_epoch == NO_PRODUCER_EPOCH):
        return _answer(ctx, ErrorCode.invalid_request)
    transactional_id = request.transactional_id
    if transactional_id is not None:
        if not transactional_id:
            return _answer(ctx, ErrorCode.invalid_request)
        if not ctx.authorized(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            return _answer(ctx, ErrorCode.transactional_id_authorization_failed)
        return _transactional(ctx, transactional_id, milliseconds(request.transaction_timeout),
                              None if given_id == NO_PRODUCER_ID else (given_id, given_epoch))
    # Kafka 3.x: an idempotent producer needs IdempotentWrite on the cluster or Write on a topic
    if not ctx.authorized(Operation.IDEMPOTENT_WRITE, ResourceType.CLUSTER) and \
            not ctx.authorized_any(Operation.WRITE, ResourceType.TOPIC):
        return _answer(ctx, ErrorCode.cluster_authorization_failed)
    manager = ctx.broker.producer_ids
    if manager is None:
        return _answer(ctx, ErrorCode.coordinator_not_available)
    try:
        pid, epoch = manager.init_producer_id(timeout=0)  # an id at hand: no thread needed
    except ProducerIdsUnavailable:
        return _waiting(ctx)
    return _answer(ctx, ErrorCode.none, pid, epoch)


def _transactional(ctx: RequestContext[TransactionServices], transactional_id: str,
                   timeout_ms: int, expected: tuple[int, int] | None) -> Any:
    coordinator = ctx.broker.transactions
    if coordinator is None:
        return _answer(ctx, ErrorCode.coordinator_not_available)

    async def init() -> Any:
        error, pid, epoch = await coordinator.init_producer_id(transactional_id, timeout_ms,
                                                               expected)
        if error is ErrorCode.producer_fenced and ctx.api_version < 4:
            error = ErrorCode.invalid_producer_epoch
        return _answer(ctx, error, pid, epoch)
    return init()


async def _waiting(ctx: RequestContext) -> Any:
    manager = ctx.broker.producer_ids
    assert manager is not None
    try:
        answer: ProducerIdAndEpoch = await ctx.broker.loop.run_in_executor(
            None, manager.init_producer_id, WAIT_FOR_IDS)
    except ProducerIdsUnavailable as exc:
        return _answer(ctx, ErrorCode(int(exc.error_code)))
    return _answer(ctx, ErrorCode.none, answer.producer_id, answer.producer_epoch)


APIS = [Api(key=API_KEY, name="InitProducerId", min_version=0, max_version=5, handle=handle)]
