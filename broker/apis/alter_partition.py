"""What a Kafka 3.x broker sends its ZooKeeper-mode controller besides ControlledShutdown:
AlterPartition (key 56, KIP-497) and AllocateProducerIds (key 67, KIP-730), answered by this
process's controller candidate when it is the active controller, so that Kafka's brokers can
run under partctl's controller in one cluster.

AlterPartition (versions 0 to 3; topics by id from 2, ISR members with broker epochs from 3)
becomes one controller event (:mod:`statemachines.handlers.alter_partition`, which says what is
checked); the answer is the controller's per partition: the leader, ISR and partition epoch
stored, or Kafka's error code. The whole request is answered NOT_CONTROLLER when this process
is not the active controller, STALE_BROKER_EPOCH when the broker's registration is not the
one the request names, CLUSTER_AUTHORIZATION_FAILED without ClusterAction on the cluster.

AllocateProducerIds (version 0) hands the broker the next block of producer ids at
``/latest_producer_id_block``, claimed as partctl's own brokers claim theirs (Kafka's
ZooKeeper-mode controller does the same for its brokers): NOT_CONTROLLER, STALE_BROKER_EPOCH
and CLUSTER_AUTHORIZATION_FAILED as above, UNKNOWN_SERVER_ERROR when the coordinator cannot be
reached or the ids are exhausted (the broker asks again).
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from broker.apis.admin_support import controller_reply
from broker.apis.base import Api, Reply, RequestContext
from broker.apis.topic_ids import text_of
from broker.controller_channel import topic_uuid
from broker.security.acls import Operation, ResourceType
from broker.wire import response_module
from coordinator.errors import CoordinatorError
from elections.controller_election import NotController
from interbroker.errors import ErrorCode, StaleBrokerEpoch
from interbroker.requests import AlterPartitionResult, IsrProposal
from kafkaclient.messages import build
from statemachines import events as ev

if TYPE_CHECKING:
    from broker.apis.messages import (
        AllocateProducerIdsRequest,
        AllocateProducerIdsResponse,
        AlterPartitionRequest,
        AlterPartitionResponse,
    )
    from broker.apis.services import AlterPartitionServices

__all__ = ["ALLOCATE_PRODUCER_IDS", "ALTER_PARTITION", "APIS"]

log = logging.getLogger(__name__)

ALTER_PARTITION = 56
ALLOCATE_PRODUCER_IDS = 67
_NO_TIME = timedelta(0)


def _active_controller(ctx: RequestContext) -> Any | None:
    find = getattr(ctx.broker, "controller", None)
    controller = find() if find is not None else None
    return controller if controller is not None and controller.active else None


def _proposals(request: Any, version: int) -> tuple[IsrProposal, ...]:
    out = []
    for t in request.topics:
        if version >= 2:  # the zero id (read as None) names no topic: UNKNOWN_TOPIC_ID
            topic = text_of(t.topic_id) if t.topic_id is not None else ""
        else:
            topic = t.topic_name
        for p in t.partitions:
            isr = (tuple(s.broker_id for s in p.new_isr_with_epochs) if version >= 3
                   else tuple(p.new_isr))
            out.append(IsrProposal(
                topic=topic, partition=p.partition_index, leader_epoch=p.leader_epoch,
                new_isr=isr, partition_epoch=p.partition_epoch,
                leader_recovery_state=p.leader_recovery_state if version >= 1 else 0))
    return tuple(out)


def _alter_answer(version: int, code: ErrorCode,
                  results: tuple[AlterPartitionResult, ...] = ()) -> Any:
    m = response_module(ALTER_PARTITION, version)
    topics: dict[str, list[Any]] = {}
    for r in results:
        fields: dict[str, Any] = {"partition_index": r.proposal.partition}
        if r.state is not None:
            fields.update(error_code=ErrorCode.NONE, leader_id=r.state.leader,
                          leader_epoch=r.state.leader_epoch, isr=tuple(r.state.isr),
                          partition_epoch=r.state.partition_epoch)
        else:
            fields.update(error_code=r.error or ErrorCode.UNKNOWN_SERVER_ERROR,
                          leader_id=-1, leader_epoch=-1, isr=(), partition_epoch=-1)
        if version >= 1:
            fields["leader_recovery_state"] = 0
        topics.setdefault(r.proposal.topic, []).append(build(m.PartitionData, **fields))
    return build(m.AlterPartitionResponse, throttle_time=_NO_TIME, error_code=code, topics=tuple(
        build(m.TopicData, partitions=tuple(parts),
              **({"topic_id": topic_uuid(t)} if version >= 2 else {"topic_name": t}))
        for t, parts in topics.items()))


def handle_alter_partition(ctx: RequestContext[AlterPartitionServices],
                           request: AlterPartitionRequest) -> Reply[AlterPartitionResponse]:
    return _alter_partition(ctx, request)


async def _alter_partition(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    if not ctx.authorized(Operation.CLUSTER_ACTION, ResourceType.CLUSTER):
        return _alter_answer(version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    controller = _active_controller(ctx)
    if controller is None:
        return _alter_answer(version, ErrorCode.NOT_CONTROLLER)
    event = ev.AlterPartitionRequested(broker_id=request.broker_id,
                                       broker_epoch=request.broker_epoch,
                                       proposals=_proposals(request, version), version=version)
    try:
        results = await controller_reply(controller.request_alter_partition(event))
    except NotController:
        return _alter_answer(version, ErrorCode.NOT_CONTROLLER)
    except StaleBrokerEpoch:
        return _alter_answer(version, ErrorCode.STALE_BROKER_EPOCH)
    return _alter_answer(version, ErrorCode.NONE, results)


def handle_allocate_producer_ids(
        ctx: RequestContext[AlterPartitionServices], request: AllocateProducerIdsRequest,
) -> Reply[AllocateProducerIdsResponse]:
    return _allocate_producer_ids(ctx, request)


async def _allocate_producer_ids(ctx: RequestContext, request: Any) -> Any:
    m = response_module(ALLOCATE_PRODUCER_IDS, ctx.api_version)

    def answer(code: ErrorCode, start: int = -1, length: int = 0) -> Any:
        return build(m.AllocateProducerIdsResponse, throttle_time=_NO_TIME, error_code=code,
                     producer_id_start=start, producer_id_len=length)

    if not ctx.authorized(Operation.CLUSTER_ACTION, ResourceType.CLUSTER):
        return answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    controller = _active_controller(ctx)
    if controller is None:
        return answer(ErrorCode.NOT_CONTROLLER)
    registered = controller.ctx.brokers.get(request.broker_id)
    if registered is None or registered.epoch != request.broker_epoch:
        log.info("AllocateProducerIds from broker %d with a stale broker epoch %d",
                 request.broker_id, request.broker_epoch)
        return answer(ErrorCode.STALE_BROKER_EPOCH)
    loop = asyncio.get_running_loop()
    try:
        block = await loop.run_in_executor(None, lambda: controller.metadata.
                                           claim_producer_id_block(request.broker_id))
    except CoordinatorError as exc:
        log.warning("AllocateProducerIds from broker %d failed: %s", request.broker_id, exc)
        return answer(ErrorCode.UNKNOWN_SERVER_ERROR)
    return answer(ErrorCode.NONE, block.block_start, block.block_end - block.block_start + 1)


APIS = [
    Api(key=ALTER_PARTITION, name="AlterPartition", min_version=0, max_version=3,
        handle=handle_alter_partition),
    Api(key=ALLOCATE_PRODUCER_IDS, name="AllocateProducerIds", min_version=0, max_version=0,
        handle=handle_allocate_producer_ids),
]
"""What a controller candidate serves Kafka's brokers besides ControlledShutdown."""
