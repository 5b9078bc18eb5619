"""The consumer group protocol's APIs (KIP-848): ConsumerGroupHeartbeat (68) versions 0-1 (v1
declared in :mod:`broker.wire_schemas`) and ConsumerGroupDescribe (69) version 0.

The heartbeat's request checks are Kafka's (``throwIfConsumerGroupHeartbeatRequestIsInvalid``),
each an INVALID_REQUEST with a message: a group id and, unless joining, a member id; a joining
member (epoch 0) names its rebalance timeout and its subscription and owns no partitions; a
static member leaving for now (epoch -2) names its instance id; no epoch below -2. A server
assignor this broker does not run (``group.consumer.assignors``) is UNSUPPORTED_ASSIGNOR.
A ``SubscribedTopicRegex`` (v1) is a Python regular expression matched against whole topic
names, internal topics excluded (Kafka uses RE2/J: the common syntax is the same); one that
does not compile is INVALID_REQUEST. With an authorizer, a regex subscribes only to the topics
the member's principal may Describe (Kafka's regex resolution filters its matches so, the
topics left out silently; named topics it may not Describe fail the heartbeat): the member's
regex is resolved anew at each of its heartbeats, with that heartbeat's principal and host, so
a topic created or an ACL granted or removed counts from its next heartbeat (Kafka resolves
a group's regexes on a heartbeat, with that heartbeat's context, when one is new or topics
were created, at most every few seconds, and every ``group.consumer.regex.refresh.interval.ms``).
The ids of the subscribed topics are looked up (off the loop) before the coordinator sees the
request, as the assignment names topics by id.
"""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.apis.base import Api, Reply, RequestContext
from broker.apis.cluster import NOT_ASKED
from broker.apis.topic_ids import ensure_topic_ids
from broker.groups.consumer_coordinator import HeartbeatRequest, HeartbeatResult
from broker.groups.consumer_group import STATIC_LEAVE_EPOCH, Partitions, regex_matches
from broker.security.acls import Operation, ResourceType
from broker.wire import response_module
from kafkaclient.messages import build

if TYPE_CHECKING:
    from broker.apis.messages import (
        ConsumerGroupDescribeRequest,
        ConsumerGroupDescribeResponse,
        ConsumerGroupHeartbeatRequest,
        ConsumerGroupHeartbeatResponse,
    )
    from broker.apis.services import ConsumerGroupServices
    from broker.groups.coordinator import GroupCoordinator

__all__ = ["APIS"]

CONSUMER_GROUP_HEARTBEAT = 68
CONSUMER_GROUP_DESCRIBE = 69
_ZERO = timedelta(0)


def _invalid(request: Any, assignors: tuple[str, ...]) -> tuple[ErrorCode, str] | None:
    epoch = request.member_epoch
    regex = getattr(request, "subscribed_topic_regex", None)
    if regex:
        try:
            re.compile(regex)
        except re.error as exc:
            return ErrorCode.invalid_request, f"SubscribedTopicRegex {regex} is not a valid " \
                f"regular expression: {exc}."
    if not request.group_id:
        return ErrorCode.invalid_request, "GroupId can't be empty."
    if request.instance_id is not None and not request.instance_id:
        return ErrorCode.invalid_request, "InstanceId can't be empty."
    if request.rack_id is not None and not request.rack_id:
        return ErrorCode.invalid_request, "RackId can't be empty."
    if epoch < STATIC_LEAVE_EPOCH:
        return ErrorCode.invalid_request, f"MemberEpoch {epoch} is invalid."
    if epoch != 0 and not request.member_id:
        return ErrorCode.invalid_request, "MemberId can't be empty."
    if epoch == 0:
        if _ms(request.rebalance_timeout) <= 0:
            return ErrorCode.invalid_request, "RebalanceTimeoutMs must be provided in first request."
        if request.topic_partitions is None or any(t.partitions
                                                   for t in request.topic_partitions):
            return ErrorCode.invalid_request, "TopicPartitions must be empty when (re-)joining."
        if request.subscribed_topic_names is None and regex is None:
            return ErrorCode.invalid_request, \
                "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
    if epoch == STATIC_LEAVE_EPOCH and not request.instance_id:
        return ErrorCode.invalid_request, "InstanceId can't be null."
    if request.server_assignor is not None and request.server_assignor not in assignors:
        return ErrorCode.unsupported_assignor, \
            f"ServerAssignor {request.server_assignor} is not supported. Supported " \
            f"assignors: {', '.join(assignors)}."
    return None


def _ms(value: timedelta | int) -> int:
    return int(value.total_seconds() * 1000) if isinstance(value, timedelta) else int(value)


def consumer_group_heartbeat(
        ctx: RequestContext[ConsumerGroupServices], request: ConsumerGroupHeartbeatRequest,
) -> Reply[ConsumerGroupHeartbeatResponse]:
    module = response_module(CONSUMER_GROUP_HEARTBEAT, ctx.api_version)
    groups: GroupCoordinator | None = getattr(ctx.broker, "groups", None)

    def answer(result: HeartbeatResult) -> Any:
        assignment = None
        if result.assignment is not None:
            assignment = build(module.Assignment, topic_partitions=tuple(
                build(module.TopicPartitions, topic_id=t, partitions=tuple(sorted(ps)))
                for t, ps in sorted(result.assignment.items(), key=lambda x: str(x[0]))))
        return build(module.ConsumerGroupHeartbeatResponse, throttle_time=_ZERO,
                     error_code=result.error, error_message=result.message,
                     member_id=result.member_id, member_epoch=result.member_epoch,
                     heartbeat_interval=timedelta(milliseconds=result.heartbeat_interval_ms),
                     assignment=assignment)

    if groups is None:
        return answer(HeartbeatResult(error=ErrorCode.coordinator_not_available))
    if not ctx.authorized(Operation.READ, ResourceType.GROUP, request.group_id):
        return answer(HeartbeatResult(error=ErrorCode.group_authorization_failed))
    invalid = _invalid(request, groups.config.consumer_assignors)
    if invalid is not None:
        return answer(HeartbeatResult(error=invalid[0], message=invalid[1]))
    hidden = sorted(n for n in request.subscribed_topic_names or ()
                    if not ctx.authorized(Operation.DESCRIBE, ResourceType.TOPIC, n))
    if hidden:
        return answer(HeartbeatResult(
            error=ErrorCode.topic_authorization_failed,
            message=f"not authorized to describe the subscribed topics {', '.join(hidden)}"))
    owned: Partitions | None = None
    if request.topic_partitions is not None:
        owned = {}
        for t in request.topic_partitions:
            if t.topic_id is not None and t.partitions:
                owned.setdefault(t.topic_id, set()).update(t.partitions)
    host = ctx.peer.rsplit(":", 1)[0] if ctx.peer else ""
    may_describe = None
    if getattr(ctx.broker, "authorizer", None) is not None:
        def may_describe(name: str) -> bool:
            return ctx.authorized(Operation.DESCRIBE, ResourceType.TOPIC, name)
    heartbeat = HeartbeatRequest(
        group_id=request.group_id, member_id=request.member_id,
        member_epoch=request.member_epoch, instance_id=request.instance_id,
        rack_id=request.rack_id, rebalance_timeout_ms=_ms(request.rebalance_timeout),
        subscribed_topic_names=None if request.subscribed_topic_names is None
        else tuple(request.subscribed_topic_names),
        subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
        server_assignor=request.server_assignor, owned=owned,
        client_id=ctx.client_id or "", client_host=f"/{host}", may_describe=may_describe)

    async def run() -> Any:
        group = groups.consumer.get(request.group_id)
        names = set(heartbeat.subscribed_topic_names or ())
        topics = ctx.broker.metadata.snapshot.topics
        regex = heartbeat.subscribed_topic_regex
        if regex is None and group is not None and request.member_id in group.members:
            regex = group.members[request.member_id].subscribed_topic_regex
        if regex:
            matched = regex_matches(regex, topics)
            names |= matched if may_describe is None else set(filter(may_describe, matched))
        if group is not None:
            names |= group.subscribed_names(topics)
        await ensure_topic_ids(ctx.broker, names)
        return answer(await groups.consumer.heartbeat(heartbeat))

    return asyncio.ensure_future(run())


def consumer_group_describe(
        ctx: RequestContext[ConsumerGroupServices], request: ConsumerGroupDescribeRequest,
) -> Reply[ConsumerGroupDescribeResponse]:
    module = response_module(CONSUMER_GROUP_DESCRIBE, ctx.api_version)
    groups: GroupCoordinator | None = getattr(ctx.broker, "groups", None)
    described = []

    def assignment(parts: dict, names: dict) -> Any:
        return build(module.Assignment, topic_partitions=tuple(
            build(module.TopicPartitions, topic_id=t, topic_name=names.get(t, ""),
                  partitions=tuple(sorted(ps)))
            for t, ps in sorted(parts.items(), key=lambda x: str(x[0])) if ps))

    asked_operations = getattr(request, "include_authorized_operations", False)
    for group_id in request.group_ids:
        if groups is None:
            error, group, assignor = ErrorCode.coordinator_not_available, None, ""
        elif not ctx.authorized(Operation.DESCRIBE, ResourceType.GROUP, group_id):
            error, group, assignor = ErrorCode.group_authorization_failed, None, ""
        else:
            error, group, assignor = groups.consumer.describe(group_id)
        if group is not None and groups is not None:
            names = groups.consumer.topic_names(group)
            if not all(ctx.authorized(Operation.DESCRIBE, ResourceType.TOPIC, n)
                       for n in names.values()):
                # Kafka: a group whose assignments name a topic the principal may not
                # Describe is not described
                error, group = ErrorCode.topic_authorization_failed, None
        if group is None:
            described.append(build(module.DescribedGroup, error_code=error, group_id=group_id,
                                   group_state="", group_epoch=-1, assignment_epoch=-1,
                                   assignor_name="", members=()))
            continue
        members = tuple(build(
            module.Member, member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
            member_epoch=m.member_epoch, client_id=m.client_id, client_host=m.client_host,
            subscribed_topic_names=m.subscribed_topic_names,
            subscribed_topic_regex=m.subscribed_topic_regex,
            assignment=assignment(m.assigned, names),
            target_assignment=assignment(group.target.get(m.member_id, {}), names))
            for m in group.members.values())
        described.append(build(module.DescribedGroup, error_code=ErrorCode.none,
                               group_id=group_id, group_state=group.state().value,
                               group_epoch=group.group_epoch,
                               assignment_epoch=group.assignment_epoch, assignor_name=assignor,
                               members=members, authorized_operations=(
                                   ctx.authorized_operations(ResourceType.GROUP, group_id)
                                   if asked_operations else NOT_ASKED)))
    return build(module.ConsumerGroupDescribeResponse, throttle_time=_ZERO,
                 groups=tuple(described))


APIS = [
    Api(key=CONSUMER_GROUP_HEARTBEAT, name="ConsumerGroupHeartbeat", min_version=0,
        max_version=1, handle=consumer_group_heartbeat),
    Api(key=CONSUMER_GROUP_DESCRIBE, name="ConsumerGroupDescribe", min_version=0,
        max_version=0, handle=consumer_group_describe),
]
