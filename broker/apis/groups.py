"""The group APIs (classic protocol): FindCoordinator (10), OffsetCommit (8), OffsetFetch (9),
JoinGroup (11), Heartbeat (12), LeaveGroup (13), SyncGroup (14), DescribeGroups (15),
ListGroups (16), DeleteGroups (42) and OffsetDelete (47).

Each handler translates between kio's messages and the broker's
:class:`~broker.groups.GroupCoordinator`, which holds the groups and decides; the request-level
checks Kafka's ``KafkaApis`` makes before the coordinator sees a request are made here:
partitions of topics the metadata cache does not know are UNKNOWN_TOPIC_OR_PARTITION, commit
metadata longer than ``offset.metadata.max.bytes`` OFFSET_METADATA_TOO_LARGE, an empty group id
INVALID_GROUP_ID. A broker without a group coordinator answers COORDINATOR_NOT_AVAILABLE.

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
import logging
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from broker.apis import Api, RequestContext
from broker.apis.admin_support import blocking, milliseconds
from broker.groups.coordinator import OFFSETS_TOPIC, GroupCoordinator
from broker.groups.group import CommittedOffset
from broker.groups.records import partition_for
from broker.wire import build, response_module
from coordinator.admin import InvalidRequest
from coordinator.codecs import TopicPartition
from coordinator.errors import CoordinatorError
from coordinator.metadata import TopicExists

__all__ = ["APIS"]

log = logging.getLogger(__name__)

OFFSET_COMMIT = 8
OFFSET_FETCH = 9
FIND_COORDINATOR = 10
JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
DELETE_GROUPS = 42
OFFSET_DELETE = 47

GROUP_KEY = 0
TRANSACTION_KEY = 1
CLASSIC = "classic"
NO_OFFSET = -1
_ZERO = timedelta(0)


def _groups(ctx: RequestContext) -> GroupCoordinator | None:
    return getattr(ctx.broker, "groups", None)


def _ms(value: timedelta | int) -> int:
    return milliseconds(value)


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
    count = groups.partition_count()
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
    if admin is None or groups.creating is not None:
        return
    config = groups.config
    live = max(len(ctx.broker.metadata.snapshot.brokers), 1)
    replication = min(config.offsets_topic_replication_factor, live)

    def create() -> None:
        try:
            admin.create_topic(OFFSETS_TOPIC, config.offsets_topic_num_partitions, replication,
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
            groups.creating = None

    groups.creating = asyncio.ensure_future(run())


def find_coordinator(ctx: RequestContext, request: Any) -> Any:
    module = response_module(FIND_COORDINATOR, ctx.api_version)
    key_type = getattr(request, "key_type", GROUP_KEY)
    keys = [request.key] if ctx.api_version < 4 else list(request.coordinator_keys)
    groups = _groups(ctx)
    if key_type == GROUP_KEY and groups is not None and not groups.partition_count():
        _create_offsets_topic(ctx, groups)
    found = [_locate(ctx, key_type, key) for key in keys]
    if ctx.api_version < 4:
        error, node, host, port = found[0] if found else (ErrorCode.invalid_request, -1, "", -1)
        return build(module.FindCoordinatorResponse, throttle_time=_ZERO, error_code=error,
                     error_message=None, node_id=node, host=host, port=port)
    return build(module.FindCoordinatorResponse, throttle_time=_ZERO, coordinators=tuple(
        build(module.Coordinator, key=key, node_id=node, host=host, port=port,
              error_code=error, error_message=None)
        for key, (error, node, host, port) in zip(keys, found, strict=True)))


# --- JoinGroup, SyncGroup, Heartbeat, LeaveGroup ----------------------------------------------


def _client_host(ctx: RequestContext) -> str:
    host = ctx.peer.rsplit(":", 1)[0] if ctx.peer else ""
    return f"/{host}"


def join_group(ctx: RequestContext, request: Any) -> Any:
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

    if groups is None:
        from broker.groups.coordinator import JoinResult
        return answer(JoinResult(error=ErrorCode.coordinator_not_available,
                                 member_id=request.member_id))
    session = _ms(request.session_timeout)
    rebalance = _ms(request.rebalance_timeout) if version >= 1 else session
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


def sync_group(ctx: RequestContext, request: Any) -> Any:
    module = response_module(SYNC_GROUP, ctx.api_version)
    groups = _groups(ctx)

    def answer(result: Any) -> Any:
        return build(module.SyncGroupResponse, throttle_time=_ZERO, error_code=result.error,
                     protocol_type=result.protocol_type, protocol_name=result.protocol,
                     assignment=result.assignment)

    if groups is None:
        from broker.groups.coordinator import SyncResult
        return answer(SyncResult(error=ErrorCode.coordinator_not_available))
    future = groups.sync(
        group_id=request.group_id, generation=request.generation_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=getattr(request, "protocol_type", None),
        protocol=getattr(request, "protocol_name", None),
        assignments={a.member_id: bytes(a.assignment) for a in request.assignments})
    return _then(future, answer)


def heartbeat(ctx: RequestContext, request: Any) -> Any:
    module = response_module(HEARTBEAT, ctx.api_version)
    groups = _groups(ctx)
    error = ErrorCode.coordinator_not_available if groups is None else groups.heartbeat(
        group_id=request.group_id, generation=request.generation_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None))
    return build(module.HeartbeatResponse, throttle_time=_ZERO, error_code=error)


def leave_group(ctx: RequestContext, request: Any) -> Any:
    module = response_module(LEAVE_GROUP, ctx.api_version)
    groups = _groups(ctx)
    batched = ctx.api_version >= 3
    leaving = ([(m.member_id, m.group_instance_id) for m in request.members] if batched
               else [(request.member_id, None)])
    if groups is None:
        error, errors = ErrorCode.coordinator_not_available, []
    else:
        error, errors = groups.leave(request.group_id, leaving)
    if not batched:
        if error is ErrorCode.none and errors:
            error = errors[0]
        return build(module.LeaveGroupResponse, throttle_time=_ZERO, error_code=error)
    members = tuple(build(module.MemberResponse, member_id=m, group_instance_id=i,
                          error_code=e) for (m, i), e in zip(leaving, errors, strict=True))
    return build(module.LeaveGroupResponse, throttle_time=_ZERO, error_code=error,
                 members=members)


# --- OffsetCommit, OffsetFetch, OffsetDelete --------------------------------------------------


def offset_commit(ctx: RequestContext, request: Any) -> Any:
    module = response_module(OFFSET_COMMIT, ctx.api_version)
    version = ctx.api_version
    groups = _groups(ctx)
    snap = ctx.broker.metadata.snapshot
    now = groups.now_ms() if groups is not None else 0
    retention = _ms(getattr(request, "retention_time", -1)) if 2 <= version <= 4 else -1
    max_metadata = groups.config.offset_metadata_max_bytes if groups is not None else 4096
    errors: dict[tuple[str, int], ErrorCode] = {}
    valid: dict[tuple[str, int], CommittedOffset] = {}
    order: list[tuple[str, list[int]]] = []
    for topic in request.topics:
        indexes = []
        order.append((topic.name, indexes))
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            indexes.append(p.partition_index)
            metadata = p.committed_metadata or ""
            if not snap.contains(TopicPartition(*tp)):
                errors[tp] = ErrorCode.unknown_topic_or_partition
            elif len(metadata.encode("utf-8")) > max_metadata:
                errors[tp] = ErrorCode.offset_metadata_too_large
            else:
                stamp = getattr(p, "commit_timestamp", -1) if version == 1 else -1
                committed = now if stamp is None or stamp < 0 else stamp
                valid[tp] = CommittedOffset(
                    offset=p.committed_offset,
                    leader_epoch=getattr(p, "committed_leader_epoch", -1),
                    metadata=metadata, commit_timestamp=committed,
                    expire_timestamp=committed + retention if retention >= 0 else -1)

    def answer(error: ErrorCode) -> Any:
        for tp in valid:
            errors[tp] = error
        return build(module.OffsetCommitResponse, throttle_time=_ZERO, topics=tuple(
            build(module.OffsetCommitResponseTopic, name=name, partitions=tuple(
                build(module.OffsetCommitResponsePartition, partition_index=i,
                      error_code=errors[(name, i)]) for i in indexes))
            for name, indexes in order))

    if groups is None:
        return answer(ErrorCode.coordinator_not_available)
    if not request.group_id:
        return answer(ErrorCode.invalid_group_id)
    future = groups.commit(
        group_id=request.group_id,
        generation=getattr(request, "generation_id_or_member_epoch", -1),
        member_id=getattr(request, "member_id", "") or "",
        group_instance_id=getattr(request, "group_instance_id", None), offsets=valid)
    return _then(future, answer)


def _fetch_one(ctx: RequestContext, group_id: str, topics: Any | None
               ) -> tuple[ErrorCode, list[tuple[str, list[tuple[int, CommittedOffset | None,
                                                             ErrorCode]]]]]:
    groups = _groups(ctx)
    wanted = None if topics is None else [(t.name, i) for t in topics
                                          for i in t.partition_indexes]
    if groups is None:
        error, found = ErrorCode.coordinator_not_available, {}
    else:
        error, found = groups.fetch_offsets(group_id, wanted)
    by_topic: dict[str, list[tuple[int, CommittedOffset | None, ErrorCode]]] = {}
    if wanted is None:
        for (t, i), o in found.items():
            by_topic.setdefault(t, []).append((i, o, ErrorCode.none))
    else:
        for t, i in wanted:
            by_topic.setdefault(t, []).append((i, found.get((t, i)), error))
    return error, list(by_topic.items())


def offset_fetch(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    module = response_module(OFFSET_FETCH, version)

    def partitions(cls: Any, items: list) -> tuple:
        return tuple(build(cls, partition_index=i,
                           committed_offset=o.offset if o is not None else NO_OFFSET,
                           committed_leader_epoch=o.leader_epoch if o is not None else -1,
                           metadata=o.metadata if o is not None else "",
                           error_code=e if version < 2 else ErrorCode.none)
                     for i, o, e in items)

    if version >= 8:
        answered = []
        for group in request.groups:
            error, topics = _fetch_one(ctx, group.group_id, group.topics)
            answered.append(build(
                module.OffsetFetchResponseGroup, group_id=group.group_id, error_code=error,
                topics=() if error is not ErrorCode.none else tuple(
                    build(module.OffsetFetchResponseTopics, name=t,
                          partitions=partitions(module.OffsetFetchResponsePartitions, ps))
                    for t, ps in topics)))
        return build(module.OffsetFetchResponse, throttle_time=_ZERO, groups=tuple(answered))
    error, topics = _fetch_one(ctx, request.group_id, request.topics)
    if version >= 2 and error is not ErrorCode.none:
        topics = []
    return build(module.OffsetFetchResponse, throttle_time=_ZERO, error_code=error,
                 topics=tuple(build(module.OffsetFetchResponseTopic, name=t,
                                    partitions=partitions(module.OffsetFetchResponsePartition,
                                                          ps))
                              for t, ps in topics))


def offset_delete(ctx: RequestContext, request: Any) -> Any:
    module = response_module(OFFSET_DELETE, ctx.api_version)
    groups = _groups(ctx)
    snap = ctx.broker.metadata.snapshot
    asked = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    known = [tp for tp in asked if snap.contains(TopicPartition(*tp))]

    def answer(outcome: tuple[ErrorCode, dict]) -> Any:
        error, results = outcome
        topics: dict[str, list[Any]] = {}
        if error is ErrorCode.none:
            for tp in asked:
                e = results.get(tp, ErrorCode.unknown_topic_or_partition)
                topics.setdefault(tp[0], []).append(build(
                    module.OffsetDeleteResponsePartition, partition_index=tp[1], error_code=e))
        return build(module.OffsetDeleteResponse, error_code=error, throttle_time=_ZERO,
                     topics=tuple(build(module.OffsetDeleteResponseTopic, name=t,
                                        partitions=tuple(ps)) for t, ps in topics.items()))

    if groups is None:
        return answer((ErrorCode.coordinator_not_available, {}))
    return _then(groups.delete_offsets(request.group_id, known), answer)


# --- DescribeGroups, ListGroups, DeleteGroups -------------------------------------------------


def describe_groups(ctx: RequestContext, request: Any) -> Any:
    module = response_module(DESCRIBE_GROUPS, ctx.api_version)
    groups = _groups(ctx)
    described = []
    for group_id in request.groups:
        if groups is None:
            error, summary = ErrorCode.coordinator_not_available, None
        else:
            error, summary = groups.describe(group_id)
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
        described.append(build(module.DescribedGroup, error_code=error, group_id=group_id,
                               group_state=summary.state, protocol_type=summary.protocol_type,
                               protocol_data=summary.protocol, members=members))
    return build(module.DescribeGroupsResponse, throttle_time=_ZERO, groups=tuple(described))


def list_groups(ctx: RequestContext, request: Any) -> Any:
    module = response_module(LIST_GROUPS, ctx.api_version)
    groups = _groups(ctx)
    if groups is None:
        return build(module.ListGroupsResponse, throttle_time=_ZERO,
                     error_code=ErrorCode.coordinator_not_available, groups=())
    error, found = groups.list_groups()
    states = {s.lower() for s in getattr(request, "states_filter", ())}
    types = {t.lower() for t in getattr(request, "types_filter", ())}
    if types and CLASSIC not in types:
        found = []
    listed = tuple(build(module.ListedGroup, group_id=g.group_id, protocol_type=g.protocol_type,
                         group_state=g.state, group_type=CLASSIC)
                   for g in sorted(found, key=lambda g: g.group_id)
                   if not states or g.state.lower() in states)
    return build(module.ListGroupsResponse, throttle_time=_ZERO, error_code=error,
                 groups=listed)


def delete_groups(ctx: RequestContext, request: Any) -> Any:
    module = response_module(DELETE_GROUPS, ctx.api_version)
    names = list(request.groups_names)
    groups = _groups(ctx)

    def answer(errors: list[ErrorCode]) -> Any:
        return build(module.DeleteGroupsResponse, throttle_time=_ZERO, results=tuple(
            build(module.DeletableGroupResult, group_id=g, error_code=e)
            for g, e in zip(names, errors, strict=True)))

    if groups is None:
        return answer([ErrorCode.coordinator_not_available] * len(names))
    return _then(groups.delete_groups(names), answer)


APIS = [
    Api(key=OFFSET_COMMIT, name="OffsetCommit", min_version=0, max_version=9,
        handle=offset_commit),
    Api(key=OFFSET_FETCH, name="OffsetFetch", min_version=0, max_version=9, handle=offset_fetch),
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
    Api(key=OFFSET_DELETE, name="OffsetDelete", min_version=0, max_version=0,
        handle=offset_delete),
]
