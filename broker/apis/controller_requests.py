"""The controller's requests to a broker (LeaderAndIsr, key 4; StopReplica, 5; UpdateMetadata, 6)
and a broker's ControlledShutdown (key 7) to the controller.

Keys 4 to 6 arrive from the active controller's channel (:mod:`broker.controller_channel`): each
is decoded into the controller's request value (:mod:`interbroker.requests`) and handed to the
handler the broker's participant attached to its network, the one behind the participant's fence
(it refuses a stale controller epoch or an earlier registration's broker epoch, as Kafka's
brokers do). Its calls take the replica manager's lock, so they run off the event loop, on the
network's single handler thread, submitted as the frames are read: the order of the controller's
requests is kept. The answer carries the handler's codes (:class:`~interbroker.errors.ErrorCode`,
Kafka's numbers) as they are: per partition for LeaderAndIsr (by topic id, from version 5) and
StopReplica, one code for UpdateMetadata.

ControlledShutdown is answered by this process's controller candidate when it is the active
controller (:meth:`~statemachines.controller.Controller.request_controlled_shutdown`): the
partitions the broker still leads once leadership moved, or NOT_CONTROLLER,
STALE_BROKER_EPOCH, BROKER_NOT_AVAILABLE (the broker is not registered).

Versions: those Kafka 3.x's ZooKeeper-mode controller sent (LeaderAndIsr 5 to 7, UpdateMetadata
7 and 8, StopReplica 3 and 4) and its brokers (ControlledShutdown 2 and 3, with the broker epoch).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Any

from broker.apis import alter_partition
from broker.apis.admin_support import controller_reply
from broker.apis.base import Api, Reply, RequestContext
from broker.apis.topic_ids import text_of
from broker.controller_channel import (
    CONTROLLED_SHUTDOWN,
    LEADER_AND_ISR,
    SECURITY_PROTOCOLS,
    STOP_REPLICA,
    UPDATE_METADATA,
    KafkaNetwork,
    topic_uuid,
)
from broker.security.acls import Operation, ResourceType
from broker.wire import response_module
from coordinator.codecs import TopicPartition
from elections.controller_election import NotController
from interbroker.channel import BrokerResponse, deliver
from interbroker.errors import BrokerNotAvailable, ErrorCode, StaleBrokerEpoch
from interbroker.requests import (
    BrokerRequest,
    Endpoint,
    LeaderAndIsrPartition,
    LeaderAndIsrRequest,
    LiveBroker,
    StopReplicaPartition,
    StopReplicaRequest,
    UpdateMetadataPartition,
    UpdateMetadataRequest,
)
from kafkaclient.messages import build

if TYPE_CHECKING:
    from broker.apis import messages
    from broker.apis.services import ControllerRequestServices

__all__ = ["APIS", "CONTROLLER_APIS", "decode_request"]

_PROTOCOL_NAMES = {v: k for k, v in SECURITY_PROTOCOLS.items()}
_ZERO = uuid.UUID(int=0)


def _id_text(value: uuid.UUID | None) -> str | None:
    return None if value is None or value == _ZERO else text_of(value)


def decode_request(api_key: int, request: Any, listener: str) -> BrokerRequest:
    """The controller's request value of a kio LeaderAndIsr, UpdateMetadata or StopReplica.
    ``listener`` names the endpoints of a LeaderAndIsr's live leaders (the wire gives host and
    port: this broker's inter-broker listener)."""
    ids: dict[str, str] = {}
    if api_key == LEADER_AND_ISR:
        parts = []
        for t in request.topic_states:
            if (text := _id_text(getattr(t, "topic_id", None))) is not None:
                ids[t.topic_name] = text
            for p in t.partition_states:
                parts.append(LeaderAndIsrPartition(
                    t.topic_name, p.partition_index, p.controller_epoch, p.leader,
                    p.leader_epoch, tuple(p.isr), p.partition_epoch, tuple(p.replicas),
                    tuple(p.adding_replicas), tuple(p.removing_replicas), bool(p.is_new)))
        return LeaderAndIsrRequest(
            controller_id=request.controller_id, controller_epoch=request.controller_epoch,
            broker_epoch=request.broker_epoch, partitions=tuple(parts),
            live_leaders=tuple(
                LiveBroker(id=b.broker_id, endpoints=(
                    Endpoint(listener=listener, host=b.host_name, port=b.port),))
                for b in request.live_leaders),
            topic_ids=ids)
    if api_key == UPDATE_METADATA:
        states = []
        for t in request.topic_states:
            if (text := _id_text(getattr(t, "topic_id", None))) is not None:
                ids[t.topic_name] = text
            for p in t.partition_states:
                states.append(UpdateMetadataPartition(
                    t.topic_name, p.partition_index, p.controller_epoch, p.leader,
                    p.leader_epoch, tuple(p.isr), p.zk_version, tuple(p.replicas),
                    tuple(p.offline_replicas)))
        return UpdateMetadataRequest(
            controller_id=request.controller_id, controller_epoch=request.controller_epoch,
            broker_epoch=request.broker_epoch, partitions=tuple(states),
            live_brokers=tuple(
                LiveBroker(id=b.id_, rack=b.rack, endpoints=tuple(
                    Endpoint(listener=e.listener, host=e.host, port=e.port,
                             security_protocol=_PROTOCOL_NAMES.get(e.security_protocol,
                                                                   "PLAINTEXT"))
                    for e in b.endpoints))
                for b in request.live_brokers),
            topic_ids=ids)
    if api_key == STOP_REPLICA:
        return StopReplicaRequest(
            controller_id=request.controller_id, controller_epoch=request.controller_epoch,
            broker_epoch=request.broker_epoch, partitions=tuple(
                StopReplicaPartition(topic=t.topic_name, partition=p.partition_index,
                                     delete=bool(p.delete_partition),
                                     leader_epoch=p.leader_epoch)
                for t in request.topic_states for p in t.partition_states))
    raise ValueError(f"api key {api_key} is not a controller request")


def encode_response(api_key: int, version: int, request: BrokerRequest,
                    response: BrokerResponse) -> Any:
    """The kio answer to ``request`` from the handler's ``response``: a request-level error
    is every partition's too, as Kafka answers a refused request."""
    m = response_module(api_key, version)
    top = response.error

    def code(topic: str, partition: int) -> ErrorCode:
        if top:
            return top
        return response.partition_errors.get(TopicPartition(topic, partition), ErrorCode.NONE)

    if isinstance(request, LeaderAndIsrRequest):
        by_topic: dict[str, list[Any]] = {}
        for p in request.partitions:
            by_topic.setdefault(p.topic, []).append(build(
                m.LeaderAndIsrPartitionError, topic_name=p.topic, partition_index=p.partition,
                error_code=code(p.topic, p.partition)))
        return build(m.LeaderAndIsrResponse, error_code=top, topics=tuple(
            build(m.LeaderAndIsrTopicError, topic_id=topic_uuid(request.topic_ids.get(t)),
                  partition_errors=tuple(errors))
            for t, errors in by_topic.items()))
    if isinstance(request, StopReplicaRequest):
        return build(m.StopReplicaResponse, error_code=top, partition_errors=tuple(
            build(m.StopReplicaPartitionError, topic_name=p.topic, partition_index=p.partition,
                  error_code=code(p.topic, p.partition))
            for p in request.partitions))
    return build(m.UpdateMetadataResponse, error_code=top)


def _call(network: KafkaNetwork, broker_id: int, value: BrokerRequest) -> BrokerResponse:
    handler = network.handler(broker_id)
    if handler is None:
        return BrokerResponse(error=ErrorCode.BROKER_NOT_AVAILABLE)
    return deliver(handler, value)


def handle(ctx: RequestContext[ControllerRequestServices],
           request: (messages.LeaderAndIsrRequest | messages.StopReplicaRequest
                     | messages.UpdateMetadataRequest),
           ) -> Reply[messages.LeaderAndIsrResponse | messages.StopReplicaResponse
                      | messages.UpdateMetadataResponse]:
    """Keys 4 to 6: decoded here, handed to the handler thread now (keeping the order the
    frames came in), answered when it is done."""
    broker = ctx.broker
    network = getattr(broker, "network", None)
    listener = network.listener if network is not None else ctx.listener
    value = decode_request(ctx.api_key, request, listener)
    if not ctx.authorized(Operation.CLUSTER_ACTION, ResourceType.CLUSTER):
        return encode_response(ctx.api_key, ctx.api_version, value,
                               BrokerResponse(error=ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
    if network is None:
        return encode_response(ctx.api_key, ctx.api_version, value,
                               BrokerResponse(error=ErrorCode.BROKER_NOT_AVAILABLE))
    done = broker.loop.run_in_executor(network.executor, _call, network, broker.broker_id,
                                       value)
    return _answer(ctx.api_key, ctx.api_version, value, done)


async def _answer(api_key: int, version: int, value: BrokerRequest,
                  done: asyncio.Future[BrokerResponse]) -> Any:
    return encode_response(api_key, version, value, await done)


def handle_controlled_shutdown(ctx: RequestContext[ControllerRequestServices],
                               request: messages.ControlledShutdownRequest,
                               ) -> Reply[messages.ControlledShutdownResponse]:
    return _controlled_shutdown(ctx, request)


async def _controlled_shutdown(ctx: RequestContext, request: Any) -> Any:
    m = response_module(CONTROLLED_SHUTDOWN, ctx.api_version)

    def answer(code: ErrorCode, remaining: tuple[Any, ...] = ()) -> Any:
        return build(m.ControlledShutdownResponse, error_code=code, remaining_partitions=tuple(
            build(m.RemainingPartition, topic_name=tp.topic, partition_index=tp.partition)
            for tp in remaining))

    if not ctx.authorized(Operation.CLUSTER_ACTION, ResourceType.CLUSTER):
        return answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    find = ctx.broker.controller
    controller = find() if find is not None else None
    if controller is None or not controller.active:
        return answer(ErrorCode.NOT_CONTROLLER)
    try:
        remaining = await controller_reply(controller.request_controlled_shutdown(
            request.broker_id, request.broker_epoch))
    except NotController:
        return answer(ErrorCode.NOT_CONTROLLER)
    except StaleBrokerEpoch:
        return answer(ErrorCode.STALE_BROKER_EPOCH)
    except BrokerNotAvailable:
        return answer(ErrorCode.BROKER_NOT_AVAILABLE)
    return answer(ErrorCode.NONE, tuple(remaining))


CONTROLLER_APIS = [
    Api(key=CONTROLLED_SHUTDOWN, name="ControlledShutdown", min_version=2, max_version=3,
        handle=handle_controlled_shutdown),
    *alter_partition.APIS,
]
"""What a controller candidate serves: brokers ask it for their controlled shutdown, and
Kafka's brokers for ISR changes and producer id blocks (:mod:`broker.apis.alter_partition`)."""

APIS = [
    Api(key=LEADER_AND_ISR, name="LeaderAndIsr", min_version=5, max_version=7, handle=handle),
    Api(key=STOP_REPLICA, name="StopReplica", min_version=3, max_version=4, handle=handle),
    Api(key=UPDATE_METADATA, name="UpdateMetadata", min_version=7, max_version=8,
        handle=handle),
    *CONTROLLER_APIS,
]
