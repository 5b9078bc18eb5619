"""InitProducerId (key 22): producer ids for idempotent producers, without transactions.

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

A transactional id is answered COORDINATOR_NOT_AVAILABLE. There is no transaction coordinator
in this broker (no ``__transaction_state``, no AddPartitionsToTxn or EndTxn), and Kafka has no
error that says "transactions are not supported": it answers COORDINATOR_NOT_AVAILABLE when
there is no transaction coordinator to be had (FindCoordinator for a transactional id), and
NOT_COORDINATOR from a broker that owns none of the transaction log's partitions, which would
send the client looking for another broker that is. COORDINATOR_NOT_AVAILABLE is the one that
says what is true here; clients retry it until their own timeout and then fail.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.apis.base import Api, Reply, RequestContext
from broker.security.acls import Operation, ResourceType
from broker.wire import response_module
from kafkaclient.messages import build
from replication.producer_ids import ProducerIdAndEpoch, ProducerIdsUnavailable

if TYPE_CHECKING:
    from broker.apis.messages import InitProducerIdRequest, InitProducerIdResponse
    from broker.apis.services import ProducerIdServices

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


def handle(ctx: RequestContext[ProducerIdServices],
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
        return _answer(ctx, ErrorCode.coordinator_not_available)
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
