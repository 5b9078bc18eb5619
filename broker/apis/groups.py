"""The group APIs (classic protocol): FindCoordinator (10), JoinGroup (11), Heartbeat (12),
LeaveGroup (13), SyncGroup (14), DescribeGroups (15), ListGroups (16) and DeleteGroups (42);
the offset APIs are in :mod:`broker.apis.group_offsets`.

Each handler translates between kio's messages and the broker's
:class:`~broker.groups.GroupCoordinator` and its group metadata manager, which hold the groups
and decide; the request-level
checks Kafka's ``KafkaApis`` makes before the coordinator sees a request are made here: an
empty group id is INVALID_GROUP_ID, and a broker without a group coordinator answers
COORDINATOR_NOT_AVAILABLE.

FindCoordinator answers, per key (one in versions 0-3, a batch from 4), the broker leading the
key's partition of ``__consumer_offsets`` on the listener the request came in on. The first
FindCoordinator for a cluster without that topic creates it, as Kafka does
(``offsets.topic.num.partitions`` partitions, ``offsets.topic.replication.factor`` replicas but
no more than the live brokers, ``cleanup.policy=compact``), and is answered
COORDINATOR_NOT_AVAILABLE until its leaders are elected; the client asks again. Transaction
coordinators (key type 1) are not served: COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.apis.admin_support import blocking, milliseconds
from broker.apis.base import Api, Reply, RequestContext
from broker.apis.cluster import NOT_ASKED
from broker.groups.coordinator import GroupCoordinator
from broker.groups.metadata_manager import OFFSETS_TOPIC
from broker.groups.records import partition_for
from broker.open_files import Budget
from broker.security.acls import Operation, ResourceType
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
    import kio.schema.join_group.v0
    import kio.schema.leave_group.v3
    import kio.schema.leave_group.v4
    import kio.schema.leave_group.v5
    from typing_extensions import TypeIs

    from broker.apis.messages import (
        DeleteGroupsRequest,
        DeleteGroupsResponse,
        DescribeGroupsRequest,
        DescribeGroupsResponse,
        FindCoordinatorRequest,
        FindCoordinatorResponse,
        HeartbeatRequest,
        HeartbeatResponse,
        JoinGroupRequest,
        JoinGroupResponse,
        LeaveGroupRequest,
        LeaveGroupResponse,
        ListGroupsRequest,
        ListGroupsResponse,
        SyncGroupRequest,
        SyncGroupResponse,
    )
    from broker.apis.services import GroupServices

    _BatchedFindCoordinator: TypeAlias = (kio.schema.find_coordinator.v4.FindCoordinatorRequest
                                          | kio.schema.find_coordinator.v5.FindCoordinatorRequest)
    _BatchedLeaveGroup: TypeAlias = (kio.schema.leave_group.v3.LeaveGroupRequest
                                     | kio.schema.leave_group.v4.LeaveGroupRequest
                                     | kio.schema.leave_group.v5.LeaveGroupRequest)

__all__ = ["APIS"]

log = logging.getLogger(__name__)

FIND_COORDINATOR = 10
JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
DELETE_GROUPS = 42

GROUP_KEY = 0
TRANSACTION_KEY = 1
CLASSIC = "classic"
CONSUMER = "consumer"
_ZERO = timedelta(0)


def _groups(ctx: RequestContext) -> GroupCoordinator | None:
    return getattr(ctx.broker, "groups", None)


def _ms(value: timedelta | int) -> int:
    return milliseconds(value)


# Where versions' requests differ in their fields: a request's class is its version's
# (broker.wire.request_class), so the version tells which class it is; these say so to the
# type checker without importing every version's classes at run time.

def _batched_find(request: FindCoordinatorRequest, version: int
                  ) -> TypeIs[_BatchedFindCoordinator]:
    return version >= 4  # coordinator_keys, not key


def _join_v0(request: JoinGroupRequest, version: int
             ) -> TypeIs[kio.schema.join_group.v0.JoinGroupRequest]:
    return version < 1  # no rebalance_timeout


def _batched_leave(request: LeaveGroupRequest, version: int) -> TypeIs[_BatchedLeaveGroup]:
    return version >= 3  # members, not member_id


# --- FindCoordinator --------------------------------------------------------------------------


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
        return (ErrorCode.coordinator_not_available, *none)
    if key_type != GROUP_KEY:
        return (ErrorCode.invalid_request, *none)
    groups = _groups(ctx)
    if groups is None:
        return (ErrorCode.coordinator_not_available, *none)
    count = groups.manager.partition_count()
    if not count:
        return (ErrorCode.coordinator_not_available, *none)
    state = ctx.broker.metadata.snapshot.partition(
        TopicPartition(OFFSETS_TOPIC, partition_for(key, count)))
    endpoint = _endpoint(ctx, state.leader) if state is not None else None
    if state is None or endpoint is None:
        return (ErrorCode.coordinator_not_available, *none)
    return ErrorCode.none, state.leader, endpoint[0], endpoint[1]


def _create_offsets_topic(ctx: RequestContext, groups: GroupCoordinator) -> None:
    """Create ``__consumer_offsets`` once (a creation already under way is not repeated)."""
    admin = ctx.broker.admin
    if admin is None or groups.manager.creating is not None:
        return
    config = groups.config
    live = max(len(ctx.broker.metadata.snapshot.brokers), 1)
    replication = min(config.offsets_topic_replication_factor, live)

    def create() -> None:
        try:
            racks = {b: r.info.rack for b, r in admin.metadata.brokers().items()}
            assignment = assign_replicas(racks, config.offsets_topic_num_partitions, replication)
            too_many = Budget.now(ctx.broker.broker_id,
                                  ctx.broker.metadata.snapshot).admit(assignment)
            if too_many is not None:
                log.warning("not creating %s: %s", OFFSETS_TOPIC, too_many)
                return
            admin.create_topic(OFFSETS_TOPIC, assignment=assignment,
                               config={"cleanup.policy": "compact",
                                       "compression.type": "producer",
                                       "segment.bytes": str(config.offsets_topic_segment_bytes)})
            log.info("created %s (%d partitions, replication factor %d)", OFFSETS_TOPIC,
                     config.offsets_topic_num_partitions, replication)
        except TopicExists:
            pass
        except (InvalidRequest, CoordinatorError, ValueError) as exc:
            log.warning("creating %s failed: %s", OFFSETS_TOPIC, exc)

    async def run() -> None:
        try:
            await blocking(ctx, create)
        finally:
            groups.manager.creating = None

    groups.manager.creating = asyncio.ensure_future(run())


def find_coordinator(ctx: RequestContext[GroupServices],
                     request: FindCoordinatorRequest) -> Reply[FindCoordinatorResponse]:
    module = response_module(FIND_COORDINATOR, ctx.api_version)
    key_type = getattr(request, "key_type", GROUP_KEY)
    keys = (list(request.coordinator_keys) if _batched_find(request, ctx.api_version)
            else [request.key])
    groups = _groups(ctx)
    if key_type == GROUP_KEY and groups is not None and not groups.manager.partition_count():
        _create_offsets_topic(ctx, groups)
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


def _may(ctx: RequestContext, operation: Operation, group_id: str) -> bool:
    return ctx.authorized(operation, ResourceType.GROUP, group_id)


# --- JoinGroup, SyncGroup, Heartbeat, LeaveGroup ----------------------------------------------


def _client_host(ctx: RequestContext) -> str:
    host = ctx.peer.rsplit(":", 1)[0] if ctx.peer else ""
    return f"/{host}"


def join_group(ctx: RequestContext[GroupServices],
               request: JoinGroupRequest) -> Reply[JoinGroupResponse]:
    module = response_module(JOIN_GROUP, ctx.api_version)
    version = ctx.api_version
    groups = _groups(ctx)

    def answer(result: Any) -> Any:
        protocol = result.protocol
        if protocol is None and version < 7:
            protocol = ""
        members = tuple(build(module.JoinGroupResponseMember, member_id=m.member_id,
                              group_instance_id=m.group_instance_id, metadata=m.metadata)
                        for m in result.members)
        return build(module.JoinGroupResponse, throttle_time=_ZERO, error_code=result.error,
                     generation_id=result.generation, protocol_type=result.protocol_type,
                     protocol_name=protocol, leader=result.leader,
                     skip_assignment=result.skip_assignment, member_id=result.member_id,
                     members=members)

    if groups is None or not _may(ctx, Operation.READ, request.group_id):
        from broker.groups.coordinator import JoinResult
        return answer(JoinResult(error=ErrorCode.coordinator_not_available if groups is None
                                 else ErrorCode.group_authorization_failed,
                                 member_id=request.member_id))
    if groups.manager.check_group(request.group_id) is ErrorCode.none and \
            groups.consumer.get(request.group_id) is not None:
        from broker.groups.coordinator import JoinResult
        return answer(JoinResult(error=ErrorCode.inconsistent_group_protocol,
                                 member_id=request.member_id))
    session = _ms(request.session_timeout)
    rebalance = session if _join_v0(request, version) else _ms(request.rebalance_timeout)
    future = groups.join(
        group_id=request.group_id, member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        client_id=ctx.client_id or "", client_host=_client_host(ctx),
        session_timeout_ms=session, rebalance_timeout_ms=rebalance,
        protocol_type=request.protocol_type,
        protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
        require_known_member_id=version >= 4, version=version)
    return _then(future, answer)


def _then(future: asyncio.Future, fn: Any) -> Any:
    """``fn`` of what ``future`` gives: at once when it is done, else a future of it (a plain
    future, not a coroutine: a connection that closes first just drops it)."""
    if future.done():
        return fn(future.result())
    answer = future.get_loop().create_future()

    def done(f: asyncio.Future) -> None:
        if answer.done():
            return
        if f.cancelled():
            answer.cancel()
            return
        try:
            answer.set_result(fn(f.result()))
        except Exception as exc:  # noqa: BLE001 - the server logs it and closes the connection
            answer.set_exception(exc)

    future.add_done_callback(done)
    return answer


def sync_group(ctx: RequestContext[GroupServices],
               request: SyncGroupRequest) -> Reply[SyncGroupResponse]:
    module = response_module(SYNC_GROUP, ctx.api_version)
    groups = _groups(ctx)

    def answer(result: Any) -> Any:
        return build(module.SyncGroupResponse, throttle_time=_ZERO, error_code=result.error,
                     protocol_type=result.protocol_type, protocol_name=result.protocol,
                     assignment=result.assignment)

    if groups is None or not _may(ctx, Operation.READ, request.group_id):
        from broker.groups.coordinator import SyncResult
        return answer(SyncResult(error=ErrorCode.coordinator_not_available if groups is None
                                 else ErrorCode.group_authorization_failed))
    future = groups.sync(
        group_id=request.group_id, generation=request.generation_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=getattr(request, "protocol_type", None),
        protocol=getattr(request, "protocol_name", None),
        assignments={a.member_id: bytes(a.assignment) for a in request.assignments})
    return _then(future, answer)


def heartbeat(ctx: RequestContext[GroupServices],
              request: HeartbeatRequest) -> Reply[HeartbeatResponse]:
    module = response_module(HEARTBEAT, ctx.api_version)
    groups = _groups(ctx)
    error = ErrorCode.coordinator_not_available if groups is None else \
        ErrorCode.group_authorization_failed if not _may(ctx, Operation.READ, request.group_id) \
        else groups.heartbeat(
        group_id=request.group_id, generation=request.generation_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None))
    return build(module.HeartbeatResponse, throttle_time=_ZERO, error_code=error)


def leave_group(ctx: RequestContext[GroupServices],
                request: LeaveGroupRequest) -> Reply[LeaveGroupResponse]:
    module = response_module(LEAVE_GROUP, ctx.api_version)
    groups = _groups(ctx)
    batched = ctx.api_version >= 3
    leaving: list[tuple[str, str | None]] = (
        [(m.member_id, m.group_instance_id) for m in request.members]
        if _batched_leave(request, ctx.api_version) else [(request.member_id, None)])
    errors: list[ErrorCode]
    if groups is None:
        error, errors = ErrorCode.coordinator_not_available, []
    elif not _may(ctx, Operation.READ, request.group_id):
        error, errors = ErrorCode.group_authorization_failed, []
    else:
        error, errors = groups.leave(request.group_id, leaving)
    if not batched:
        if error is ErrorCode.none and errors:
            error = errors[0]
        return build(module.LeaveGroupResponse, throttle_time=_ZERO, error_code=error)
    # an error for the whole request (not the coordinator, no group id, not authorized)
    # comes alone, with no members, as Kafka answers it
    members = () if error is not ErrorCode.none else tuple(
        build(module.MemberResponse, member_id=m, group_instance_id=i, error_code=e)
        for (m, i), e in zip(leaving, errors, strict=True))
    return build(module.LeaveGroupResponse, throttle_time=_ZERO, error_code=error,
                 members=members)


# --- DescribeGroups, ListGroups, DeleteGroups -------------------------------------------------


def describe_groups(ctx: RequestContext[GroupServices],
                    request: DescribeGroupsRequest) -> Reply[DescribeGroupsResponse]:
    module = response_module(DESCRIBE_GROUPS, ctx.api_version)
    groups = _groups(ctx)
    described = []
    for group_id in request.groups:
        if groups is None:
            error, summary = ErrorCode.coordinator_not_available, None
        elif not _may(ctx, Operation.DESCRIBE, group_id):
            error, summary = ErrorCode.group_authorization_failed, None
        else:
            error, summary = groups.manager.describe(group_id)
            if error is ErrorCode.none and summary is not None \
                    and groups.consumer.get(group_id) is not None:
                # Kafka's answer below version 6 for a group that is not classic: Dead
                summary = dataclasses.replace(summary, state="Dead", protocol_type="",
                                              protocol="", members=())
        if summary is None:
            described.append(build(module.DescribedGroup, error_code=error, group_id=group_id,
                                   group_state="", protocol_type="", protocol_data="",
                                   members=()))
            continue
        members = tuple(build(module.DescribedGroupMember, member_id=m.member_id,
                              group_instance_id=m.group_instance_id, client_id=m.client_id,
                              client_host=m.client_host, member_metadata=meta,
                              member_assignment=assignment)
                        for m, meta, assignment in summary.members)
        operations = (ctx.authorized_operations(ResourceType.GROUP, group_id)
                      if getattr(request, "include_authorized_operations", False)
                      else NOT_ASKED)
        described.append(build(module.DescribedGroup, error_code=error, group_id=group_id,
                               group_state=summary.state, protocol_type=summary.protocol_type,
                               protocol_data=summary.protocol, members=members,
                               authorized_operations=operations))
    return build(module.DescribeGroupsResponse, throttle_time=_ZERO, groups=tuple(described))


def list_groups(ctx: RequestContext[GroupServices],
                request: ListGroupsRequest) -> Reply[ListGroupsResponse]:
    module = response_module(LIST_GROUPS, ctx.api_version)
    groups = _groups(ctx)
    if groups is None:
        return build(module.ListGroupsResponse, throttle_time=_ZERO,
                     error_code=ErrorCode.coordinator_not_available, groups=())
    error, found = groups.manager.list_groups()
    states = {s.lower() for s in getattr(request, "states_filter", ())}
    types = {t.lower() for t in getattr(request, "types_filter", ())}
    consumer = {g.group_id: g for g in groups.consumer.groups()}
    everything = ctx.authorized(Operation.DESCRIBE, ResourceType.CLUSTER)
    rows = [(g.group_id, g.protocol_type, g.state, CLASSIC) for g in found
            if g.group_id not in consumer]
    rows += [(g.group_id, CONSUMER, g.state().value, CONSUMER) for g in consumer.values()]
    listed = tuple(build(module.ListedGroup, group_id=group_id, protocol_type=protocol_type,
                         group_state=state, group_type=kind)
                   for group_id, protocol_type, state, kind in sorted(rows)
                   if (everything or _may(ctx, Operation.DESCRIBE, group_id))
                   and (not states or state.lower() in states)
                   and (not types or kind in types))
    return build(module.ListGroupsResponse, throttle_time=_ZERO, error_code=error,
                 groups=listed)


def delete_groups(ctx: RequestContext[GroupServices],
                  request: DeleteGroupsRequest) -> Reply[DeleteGroupsResponse]:
    module = response_module(DELETE_GROUPS, ctx.api_version)
    names = list(request.groups_names)
    groups = _groups(ctx)

    def answer(errors: list[ErrorCode]) -> Any:
        return build(module.DeleteGroupsResponse, throttle_time=_ZERO, results=tuple(
            build(module.DeletableGroupResult, group_id=g, error_code=e)
            for g, e in zip(names, errors, strict=True)))

    if groups is None:
        return answer([ErrorCode.coordinator_not_available] * len(names))
    denied = {n for n in names if not _may(ctx, Operation.DELETE, n)}
    consumer: dict[str, Any] = {n: ErrorCode.group_authorization_failed for n in denied}
    for name in names:
        if name in denied:
            continue
        if groups.manager.check_group(name) is ErrorCode.none:
            outcome = groups.consumer.delete(name)
            if outcome is not None:
                consumer[name] = outcome
    classic = [n for n in names if n not in consumer]

    async def gather() -> Any:
        found = dict(zip(classic, await groups.delete_groups(classic), strict=True))
        errors = []
        for name in names:
            if name not in consumer:
                errors.append(found[name])
                continue
            outcome = consumer[name]
            if isinstance(outcome, ErrorCode):
                errors.append(outcome)
                continue
            error = await outcome
            # its offsets (an empty classic shell) go too, if it had any
            if error is ErrorCode.none:
                shell = await groups.delete_groups([name])
                if shell[0] not in (ErrorCode.none, ErrorCode.group_id_not_found):
                    error = shell[0]
            errors.append(error)
        return answer(errors)

    return asyncio.ensure_future(gather())


APIS = [
    Api(key=FIND_COORDINATOR, name="FindCoordinator", min_version=0, max_version=5,
        handle=find_coordinator),
    Api(key=JOIN_GROUP, name="JoinGroup", min_version=0, max_version=9, handle=join_group),
    Api(key=HEARTBEAT, name="Heartbeat", min_version=0, max_version=4, handle=heartbeat),
    Api(key=LEAVE_GROUP, name="LeaveGroup", min_version=0, max_version=5, handle=leave_group),
    Api(key=SYNC_GROUP, name="SyncGroup", min_version=0, max_version=5, handle=sync_group),
    Api(key=DESCRIBE_GROUPS, name="DescribeGroups", min_version=0, max_version=5,
        handle=describe_groups),
    Api(key=LIST_GROUPS, name="ListGroups", min_version=0, max_version=5, handle=list_groups),
    Api(key=DELETE_GROUPS, name="DeleteGroups", min_version=0, max_version=2,
        handle=delete_groups),
]
