"""FindCoordinator (key 10): the broker that coordinates a group or a transactional id.

It answers, per key (one in versions 0-3, a batch from 4), the broker leading the key's
partition (``abs(Java hashCode) % partitions``) of ``__consumer_offsets`` (a group, key type 0)
or ``__transaction_state`` (a transactional id, key type 1) on the listener the request came in
on; DESCRIBE on the group or the TransactionalId is needed (GROUP_AUTHORIZATION_FAILED,
TRANSACTIONAL_ID_AUTHORIZATION_FAILED). An empty group id is INVALID_GROUP_ID at the
coordinator; an empty transactional id is INVALID_REQUEST. A broker without the coordinator of
the kind asked answers COORDINATOR_NOT_AVAILABLE.

The first FindCoordinator for a cluster without the topic creates it, as Kafka does, and is
answered COORDINATOR_NOT_AVAILABLE until its leaders are elected; the client asks again:

- ``__consumer_offsets``: ``offsets.topic.num.partitions`` partitions,
  ``offsets.topic.replication.factor`` replicas but no more than the live brokers,
  ``cleanup.policy=compact``;
- ``__transaction_state``: ``transaction.state.log.num.partitions`` partitions,
  ``transaction.state.log.replication.factor`` replicas but no more than the live brokers,
  ``min.insync.replicas`` from ``transaction.state.log.min.isr``, ``cleanup.policy=compact``,
  no compression, unclean leader election off.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.apis.admin_support import blocking
from broker.apis.base import Api, Reply, RequestContext
from broker.groups.metadata_manager import OFFSETS_TOPIC
from broker.groups.records import partition_for
from broker.open_files import Budget
from broker.security.acls import Operation, ResourceType
from broker.txns.config import TRANSACTION_STATE_TOPIC
from broker.wire import response_module
from coordinator.admin import InvalidRequest
from coordinator.assignment import assign_replicas
from coordinator.codecs import TopicPartition
from coordinator.errors import CoordinatorError
from coordinator.metadata import TopicExists
from kafkaclient.messages import build

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.find_coordinator.v4
    import kio.schema.find_coordinator.v5
    from typing_extensions import TypeIs

    from broker.apis.messages import FindCoordinatorRequest, FindCoordinatorResponse
    from broker.apis.services import GroupServices
    from broker.groups import GroupCoordinator
    from broker.txns import TransactionCoordinator

    _BatchedFindCoordinator: TypeAlias = (kio.schema.find_coordinator.v4.FindCoordinatorRequest
                                          | kio.schema.find_coordinator.v5.FindCoordinatorRequest)

__all__ = ["APIS", "FIND_COORDINATOR"]

log = logging.getLogger(__name__)

FIND_COORDINATOR = 10
GROUP_KEY = 0
TRANSACTION_KEY = 1
_ZERO = timedelta(0)


def _groups(ctx: RequestContext) -> GroupCoordinator | None:
    return getattr(ctx.broker, "groups", None)


def _transactions(ctx: RequestContext) -> TransactionCoordinator | None:
    return getattr(ctx.broker, "transactions", None)


def _batched_find(request: FindCoordinatorRequest, version: int
                  ) -> TypeIs[_BatchedFindCoordinator]:
    return version >= 4  # coordinator_keys, not key


def _endpoint(ctx: RequestContext, broker_id: int) -> tuple[str, int] | None:
    broker = ctx.broker.metadata.snapshot.brokers.get(broker_id)
    if broker is None:
        return None
    for endpoint in broker.endpoints:
        if endpoint.listener == ctx.listener:
            return endpoint.host, endpoint.port
    return None


def _locate(ctx: RequestContext, key_type: int, key: str) -> tuple[ErrorCode, int, str, int]:
    """(error, node, host, port) of the coordinator of ``key``."""
    none = (-1, "", -1)
    if key_type == TRANSACTION_KEY:
        transactions = _transactions(ctx)
        if transactions is None:
            return (ErrorCode.coordinator_not_available, *none)
        if not key:
            return (ErrorCode.invalid_request, *none)
        topic, count = TRANSACTION_STATE_TOPIC, transactions.manager.partition_count()
    elif key_type == GROUP_KEY:
        groups = _groups(ctx)
        if groups is None:
            return (ErrorCode.coordinator_not_available, *none)
        topic, count = OFFSETS_TOPIC, groups.manager.partition_count()
    else:
        return (ErrorCode.invalid_request, *none)
    if not count:
        return (ErrorCode.coordinator_not_available, *none)
    state = ctx.broker.metadata.snapshot.partition(
        TopicPartition(topic, partition_for(key, count)))
    endpoint = _endpoint(ctx, state.leader) if state is not None else None
    if state is None or endpoint is None:
        return (ErrorCode.coordinator_not_available, *none)
    return ErrorCode.none, state.leader, endpoint[0], endpoint[1]


def _create_topic(ctx: RequestContext, holder: Any, topic: str, partitions: int,
                  replication_factor: int, config: dict[str, str]) -> None:
    """Create internal ``topic`` once (``holder.creating`` says a creation is under way)."""
    admin = ctx.broker.admin
    if admin is None or holder.creating is not None:
        return
    live = max(len(ctx.broker.metadata.snapshot.brokers), 1)
    replication = min(replication_factor, live)

    def create() -> None:
        try:
            racks = {b: r.info.rack for b, r in admin.metadata.brokers().items()}
            assignment = assign_replicas(racks, partitions, replication)
            too_many = Budget.now(ctx.broker.broker_id,
                                  ctx.broker.metadata.snapshot).admit(assignment)
            if too_many is not None:
                log.warning("not creating %s: %s", topic, too_many)
                return
            admin.create_topic(topic, assignment=assignment, config=config)
            log.info("created %s (%d partitions, replication factor %d)", topic, partitions,
                     replication)
        except TopicExists:
            pass
        except (InvalidRequest, CoordinatorError, ValueError) as exc:
            log.warning("creating %s failed: %s", topic, exc)

    async def run() -> None:
        try:
            await blocking(ctx, create)
        finally:
            holder.creating = None

    holder.creating = asyncio.ensure_future(run())


def _create_if_missing(ctx: RequestContext, key_type: int) -> None:
    groups, transactions = _groups(ctx), _transactions(ctx)
    if key_type == GROUP_KEY and groups is not None and not groups.manager.partition_count():
        g = groups.config
        _create_topic(ctx, groups.manager, OFFSETS_TOPIC, g.offsets_topic_num_partitions,
                      g.offsets_topic_replication_factor,
                      {"cleanup.policy": "compact", "compression.type": "producer",
                       "segment.bytes": str(g.offsets_topic_segment_bytes)})
    elif key_type == TRANSACTION_KEY and transactions is not None \
            and not transactions.manager.partition_count():
        t = transactions.config
        _create_topic(ctx, transactions.manager, TRANSACTION_STATE_TOPIC,
                      t.state_log_num_partitions, t.state_log_replication_factor,
                      {"cleanup.policy": "compact", "compression.type": "uncompressed",
                       "unclean.leader.election.enable": "false",
                       "min.insync.replicas": str(t.state_log_min_isr),
                       "segment.bytes": str(t.state_log_segment_bytes)})


def find_coordinator(ctx: RequestContext[GroupServices],
                     request: FindCoordinatorRequest) -> Reply[FindCoordinatorResponse]:
    module = response_module(FIND_COORDINATOR, ctx.api_version)
    key_type = getattr(request, "key_type", GROUP_KEY)
    keys = (list(request.coordinator_keys) if _batched_find(request, ctx.api_version)
            else [request.key])
    _create_if_missing(ctx, key_type)
    found = [_locate(ctx, key_type, key) if _may_describe_key(ctx, key_type, key)
             else (_key_denied(key_type), -1, "", -1) for key in keys]
    if ctx.api_version < 4:
        error, node, host, port = found[0] if found else (ErrorCode.invalid_request, -1, "", -1)
        return build(module.FindCoordinatorResponse, throttle_time=_ZERO, error_code=error,
                     error_message=None, node_id=node, host=host, port=port)
    return build(module.FindCoordinatorResponse, throttle_time=_ZERO, coordinators=tuple(
        build(module.Coordinator, key=key, node_id=node, host=host, port=port,
              error_code=error, error_message=None)
        for key, (error, node, host, port) in zip(keys, found, strict=True)))


def _may_describe_key(ctx: RequestContext, key_type: int, key: str) -> bool:
    if key_type == GROUP_KEY:
        return ctx.authorized(Operation.DESCRIBE, ResourceType.GROUP, key)
    return ctx.authorized(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key)


def _key_denied(key_type: int) -> ErrorCode:
    return (ErrorCode.group_authorization_failed if key_type == GROUP_KEY
            else ErrorCode.transactional_id_authorization_failed)


APIS = [Api(key=FIND_COORDINATOR, name="FindCoordinator", min_version=0, max_version=5,
            handle=find_coordinator)]
