"""The group APIs (classic protocol): JoinGroup (11), Heartbeat (12), LeaveGroup (13),
SyncGroup (14), DescribeGroups (15), ListGroups (16) and DeleteGroups (42); FindCoordinator (10)
is in :mod:`broker.apis.find_coordinator` and the offset APIs in :mod:`broker.apis.group_offsets`.

Each handler translates between kio's messages and the broker's
:class:`~broker.groups.GroupCoordinator` and its group metadata manager, which hold the groups
and decide; the request-level checks Kafka's ``KafkaApis`` makes before the coordinator sees a
request are made here: an empty group id is INVALID_GROUP_ID, and a broker without a group
coordinator answers COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.apis.admin_support import milliseconds
from broker.apis.base import Api, Reply, RequestContext
from broker.apis.cluster import NOT_ASKED
from broker.groups.coordinator import GroupCoordinator
from broker.security.acls import Operation, ResourceType
from broker.wire import response_module
from kafkaclient.messages import build

if TYPE_CHECKING:
    from typing import TypeAlias

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

    _BatchedLeaveGroup: TypeAlias = (kio.schema.leave_group.v3.LeaveGroupRequest
                                     | kio.schema.leave_group.v4.LeaveGroupRequest
                                     | kio.schema.leave_group.v5.LeaveGroupRequest)

__all__ = ["APIS"]

log = logging.getLogger(__name__)

JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
DELETE_GROUPS = 42

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

def _join_v0(request: JoinGroupRequest, version: int
             ) -> TypeIs[kio.schema.join_group.v0.JoinGroupRequest]:
    return version < 1  # no rebalance_timeout


def _batched_leave(request: LeaveGroupRequest, version: int) -> TypeIs[_BatchedLeaveGroup]:
    return version >= 3  # members, not member_id




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
