"""The consumer group coordinator (KIP-848), beside the classic one and on its partitions.

:class:`ConsumerGroups` answers ConsumerGroupHeartbeat and ConsumerGroupDescribe for the groups
of the ``__consumer_offsets`` partitions its
:class:`~broker.groups.metadata_manager.GroupMetadataManager` leads and has loaded: it uses that
manager's leadership, loading and acks=all appends, and keeps committed offsets where the
manager keeps the classic groups' (a consumer group's offsets live in an empty classic group of
the same id, which only the offset APIs see). Everything runs on the broker's event loop.

A heartbeat is handled as Kafka's ``GroupMetadataManager.consumerGroupHeartbeat``: validate the
member and its epoch (FENCED_MEMBER_EPOCH when it does not match: a member that missed the
answer to its last bump may come back with the previous epoch, if it owns nothing it should
not), update what it subscribes to, bump the group epoch when the subscriptions or the
subscribed topics changed, compute the target assignment when it is older than the group
epoch, reconcile the member (:func:`~broker.groups.consumer_group.reconcile`), and write what
changed to the group's partition in Kafka's record formats before answering. A member is
fenced (removed, the group epoch bumped) when its session times out
(``group.consumer.session.timeout.ms``) or when it holds partitions to revoke past its rebalance
timeout. A static member (instance id) that leaves with epoch -2 keeps its place and its
partitions until its session times out; coming back under a new member id it takes them over.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from broker.groups.assignors import ASSIGNORS
from broker.groups.consumer_group import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    Partitions,
    reconcile,
    regex_matches,
    subscribed,
)
from broker.groups.consumer_records import (
    CURRENT_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    PARTITION_METADATA,
    TARGET_MEMBER,
    TARGET_METADATA,
    ConsumerGroupKey,
    ConsumerMemberKey,
    CurrentAssignmentValue,
    GroupEpochValue,
    MemberMetadataValue,
    PartitionMetadataValue,
    TargetAssignmentEpochValue,
    TargetMemberValue,
    encode_consumer_key,
    encode_consumer_value,
)

if TYPE_CHECKING:
    from broker.groups.loading import Loaded
    from broker.groups.metadata_manager import GroupMetadataManager

__all__ = ["ConsumerGroups", "HeartbeatRequest", "HeartbeatResult"]

log = logging.getLogger(__name__)

Records = list[tuple[bytes, bytes | None]]


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    subscribed_topic_names: tuple[str, ...] | None
    subscribed_topic_regex: str | None
    server_assignor: str | None
    owned: Partitions | None
    client_id: str
    client_host: str
    may_describe: Callable[[str], bool] | None = None
    """Whether the member's principal, from its host, may Describe a topic (None: no
    authorizer, everything is allowed): what its regex resolves to is narrowed by it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatResult:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    assignment: Partitions | None = None


def _copy(parts: Partitions) -> Partitions:
    return {t: set(ps) for t, ps in parts.items() if ps}


def _sorted(parts: Partitions) -> tuple[tuple[uuid.UUID, tuple[int, ...]], ...]:
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(parts.items(), key=lambda x: str(x[0]))
                 if ps)


class ConsumerGroups:
    """The consumer groups of the partitions one broker's group metadata manager holds."""

    def __init__(self, manager: GroupMetadataManager) -> None:
        self.manager = manager
        self._groups: dict[str, ConsumerGroup] = {}
        self.authorizing = False
        """Whether the broker has an authorizer: then a member loaded from the records, whose
        principal is not known until it heartbeats, keeps its regex to the topics it already
        holds or is targeted (nothing it was not allowed)."""

    @property
    def _loop(self) -> asyncio.AbstractEventLoop:
        return self.manager.loop

    # -- what the classic side and the manager ask ---------------------------------------------

    def get(self, group_id: str) -> ConsumerGroup | None:
        return self._groups.get(group_id)

    def groups(self) -> list[ConsumerGroup]:
        return list(self._groups.values())

    def keeps_offsets(self, group_id: str) -> bool:
        """A consumer group's committed offsets are kept while it has members."""
        group = self._groups.get(group_id)
        return group is not None and bool(group.members)

    def check_offsets_member(self, group_id: str, member_id: str, member_epoch: int, *,
                             commit_version: int | None = None) -> ErrorCode | None:
        """For OffsetCommit/OffsetFetch: None when ``group_id`` is not a consumer group here,
        else the error (NONE: go on). A request without a member (epoch < 0) is an admin's:
        a commit only into an empty group."""
        group = self._groups.get(group_id)
        if group is None:
            return None
        if member_epoch < 0 and not member_id:
            if commit_version is not None and group.members:
                return ErrorCode.unknown_member_id
            return ErrorCode.none
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if commit_version is not None and commit_version < 9:
            return ErrorCode.unsupported_version
        if member_epoch != member.member_epoch:
            return ErrorCode.stale_member_epoch
        return ErrorCode.none

    # -- loading -------------------------------------------------------------------------------

    def loaded(self, p: int, records: Loaded) -> list[str]:
        """Rebuild partition ``p``'s consumer groups from its records (log order)."""
        built: dict[str, ConsumerGroup] = {}
        metadata: dict[tuple[str, str], MemberMetadataValue] = {}
        for key, value in records:
            if isinstance(key, ConsumerGroupKey):
                if key.record_type == GROUP_METADATA and value is None:
                    built.pop(key.group, None)
                    continue
                group = built.setdefault(key.group, ConsumerGroup(group_id=key.group,
                                                                  partition=p))
                if isinstance(value, GroupEpochValue):
                    group.group_epoch = value.epoch
                elif isinstance(value, PartitionMetadataValue):
                    group.topics = {name: (tid, n) for tid, name, n in value.topics}
                elif isinstance(value, TargetAssignmentEpochValue):
                    group.assignment_epoch = value.assignment_epoch
            elif isinstance(key, ConsumerMemberKey):
                group = built.setdefault(key.group, ConsumerGroup(group_id=key.group,
                                                                  partition=p))
                member = group.members.get(key.member_id)
                if value is None:
                    if key.record_type == MEMBER_METADATA:
                        group.members.pop(key.member_id, None)
                        metadata.pop((key.group, key.member_id), None)
                    elif key.record_type == TARGET_MEMBER:
                        group.target.pop(key.member_id, None)
                    continue
                if member is None:
                    member = group.members[key.member_id] = ConsumerMember(
                        member_id=key.member_id)
                if isinstance(value, MemberMetadataValue):
                    member.instance_id = value.instance_id
                    member.rack_id = value.rack_id
                    member.client_id = value.client_id
                    member.client_host = value.client_host
                    member.subscribed_topic_names = value.subscribed_topic_names
                    member.subscribed_topic_regex = value.subscribed_topic_regex
                    member.server_assignor = value.server_assignor
                    member.rebalance_timeout_ms = value.rebalance_timeout_ms
                    metadata[(key.group, key.member_id)] = value
                elif isinstance(value, TargetMemberValue):
                    group.target[key.member_id] = {t: set(ps) for t, ps in value.partitions}
                elif isinstance(value, CurrentAssignmentValue):
                    member.member_epoch = value.member_epoch
                    member.previous_epoch = value.previous_member_epoch
                    member.state = MemberState(value.state) if value.state in \
                        MemberState._value2member_map_ else MemberState.UNKNOWN
                    member.assigned = {t: set(ps) for t, ps in value.assigned}
                    member.pending_revocation = {t: set(ps)
                                                 for t, ps in value.pending_revocation}
        for group in built.values():
            # members whose metadata was deleted (or never written) are not members
            for member_id in [m for m in group.members if (group.group_id, m) not in metadata]:
                del group.members[member_id]
            self._groups[group.group_id] = group
            names = self.topic_names(group)
            for member in group.members.values():
                if self.authorizing and member.subscribed_topic_regex:
                    held = (member.assigned, member.pending_revocation,
                            group.target.get(member.member_id, {}))
                    member.regex_topics = frozenset(names[t] for parts in held
                                                    for t in parts if t in names)
                self._session(group, member)
                self._revocation_deadline(group, member)
        return list(built)

    def unloaded(self, partition: int) -> None:
        """Drop partition ``partition``'s consumer groups (this broker no longer leads it)."""
        for group in list(self._groups.values()):
            if group.partition != partition:
                continue
            for member in group.members.values():
                self._cancel_timers(member)
            del self._groups[group.group_id]

    # -- records -------------------------------------------------------------------------------

    @staticmethod
    def _group_key(record_type: int, group: ConsumerGroup) -> bytes:
        return encode_consumer_key(ConsumerGroupKey(record_type, group.group_id))

    @staticmethod
    def _member_key(record_type: int, group: ConsumerGroup, member_id: str) -> bytes:
        return encode_consumer_key(ConsumerMemberKey(record_type, group.group_id, member_id))

    def _epoch_record(self, group: ConsumerGroup) -> tuple[bytes, bytes]:
        return (self._group_key(GROUP_METADATA, group),
                encode_consumer_value(GroupEpochValue(group.group_epoch)))

    def _topics_record(self, group: ConsumerGroup) -> tuple[bytes, bytes]:
        topics = tuple((tid, name, n) for name, (tid, n) in sorted(group.topics.items()))
        return (self._group_key(PARTITION_METADATA, group),
                encode_consumer_value(PartitionMetadataValue(topics)))

    def _member_record(self, group: ConsumerGroup, m: ConsumerMember) -> tuple[bytes, bytes]:
        return (self._member_key(MEMBER_METADATA, group, m.member_id), encode_consumer_value(
            MemberMetadataValue(instance_id=m.instance_id, rack_id=m.rack_id,
                                client_id=m.client_id, client_host=m.client_host,
                                subscribed_topic_names=m.subscribed_topic_names,
                                subscribed_topic_regex=m.subscribed_topic_regex,
                                rebalance_timeout_ms=m.rebalance_timeout_ms,
                                server_assignor=m.server_assignor)))

    def _current_record(self, group: ConsumerGroup, m: ConsumerMember) -> tuple[bytes, bytes]:
        return (self._member_key(CURRENT_ASSIGNMENT, group, m.member_id), encode_consumer_value(
            CurrentAssignmentValue(member_epoch=m.member_epoch,
                                   previous_member_epoch=m.previous_epoch, state=int(m.state),
                                   assigned=_sorted(m.assigned),
                                   pending_revocation=_sorted(m.pending_revocation))))

    def _target_records(self, group: ConsumerGroup, changed: set[str]) -> Records:
        out: Records = [(self._member_key(TARGET_MEMBER, group, m), encode_consumer_value(
            TargetMemberValue(_sorted(group.target.get(m, {}))))) for m in sorted(changed)]
        out.append((self._group_key(TARGET_METADATA, group),
                    encode_consumer_value(TargetAssignmentEpochValue(group.assignment_epoch))))
        return out

    def _member_tombstones(self, group: ConsumerGroup, member_id: str) -> Records:
        return [(self._member_key(t, group, member_id), None)
                for t in (CURRENT_ASSIGNMENT, TARGET_MEMBER, MEMBER_METADATA)]

    def _write(self, group: ConsumerGroup, records: Records) -> asyncio.Future:
        if not records:
            future: asyncio.Future = self._loop.create_future()
            future.set_result(ErrorCode.none)
            return future
        return self.manager.append(group.partition, records)

    # -- timers --------------------------------------------------------------------------------

    @staticmethod
    def _cancel_timers(member: ConsumerMember) -> None:
        for timer in (member.session_timer, member.revocation_timer):
            if timer is not None:
                timer.cancel()
        member.session_timer = member.revocation_timer = None

    def _session(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        timeout = self.manager.config.consumer_session_timeout_ms / 1000
        member.session_timer = self._loop.call_later(timeout, self._expired, group, member)

    def _expired(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        member.session_timer = None
        if self._groups.get(group.group_id) is not group or \
                group.members.get(member.member_id) is not member:
            return
        log.info("group %s: member %s failed its session timeout; fencing it",
                 group.group_id, member.member_id)
        self._fence(group, member)

    def _revocation_deadline(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if member.state is not MemberState.UNREVOKED_PARTITIONS:
            if member.revocation_timer is not None:
                member.revocation_timer.cancel()
                member.revocation_timer = None
            return
        if member.revocation_timer is not None:
            return
        epoch = member.member_epoch

        def fire() -> None:
            member.revocation_timer = None
            if group.members.get(member.member_id) is member and member.member_epoch == epoch \
                    and member.state is MemberState.UNREVOKED_PARTITIONS:
                log.info("group %s: member %s did not revoke its partitions within %d ms; "
                         "fencing it", group.group_id, member.member_id,
                         member.rebalance_timeout_ms)
                self._fence(group, member)

        member.revocation_timer = self._loop.call_later(member.rebalance_timeout_ms / 1000, fire)

    def _fence(self, group: ConsumerGroup, member: ConsumerMember) -> asyncio.Future:
        records = self._remove(group, member)
        return self._write(group, records)

    def _remove(self, group: ConsumerGroup, member: ConsumerMember) -> Records:
        """Remove ``member``, bump the group epoch and recompute the target."""
        self._cancel_timers(member)
        del group.members[member.member_id]
        group.target.pop(member.member_id, None)
        records = self._member_tombstones(group, member.member_id)
        group.group_epoch += 1
        records.append(self._epoch_record(group))
        records += self._refresh_target(group)
        return records

    # -- the assignment ------------------------------------------------------------------------

    def _assignor(self, group: ConsumerGroup) -> str:
        configured = self.manager.config.consumer_assignors
        chosen = Counter(m.server_assignor for m in group.members.values()
                         if m.server_assignor in configured)
        return chosen.most_common(1)[0][0] if chosen else configured[0]

    def _subscription_metadata(self, group: ConsumerGroup) -> dict[str, tuple[uuid.UUID, int]]:
        snap = self.manager.metadata.snapshot
        out = {}
        for name in sorted(group.subscribed_names(snap.topics)):
            partitions = snap.topics.get(name)
            topic_id = snap.topic_ids.get(name)
            if partitions and topic_id is not None and topic_id.int:
                out[name] = (topic_id, len(partitions))
        return out

    def _refresh_target(self, group: ConsumerGroup) -> Records:
        """Recompute the target when the group epoch passed it: the records to write."""
        if group.group_epoch <= group.assignment_epoch:
            return []
        ids = {name: tid for name, (tid, _) in group.topics.items()}
        subscriptions = {m.member_id: {ids[t] for t in subscribed(m, ids) if t in ids}
                         for m in group.members.values()}
        counts = {tid: n for tid, n in group.topics.values()}
        assignor = self._assignor(group)
        new = ASSIGNORS[assignor](subscriptions, counts, group.target)
        changed = {m for m in set(new) | set(group.target)
                   if _copy(new.get(m, {})) != _copy(group.target.get(m, {}))}
        group.target = {m: _copy(parts) for m, parts in new.items()}
        group.assignment_epoch = group.group_epoch
        log.info("group %s: target assignment at epoch %d by %s (%d member(s))",
                 group.group_id, group.assignment_epoch, assignor, len(group.members))
        return self._target_records(group, changed)

    def _reconcile(self, group: ConsumerGroup, member: ConsumerMember,
                   owned: Partitions | None) -> bool:
        """Advance ``member`` towards the target; whether anything changed."""
        result = reconcile(
            member, group.assignment_epoch, group.target.get(member.member_id, {}), owned,
            lambda t, p: group.owner(t, p, besides=member.member_id) is None)
        changed = (result.member_epoch, result.previous_epoch, result.state, result.assigned,
                   result.pending_revocation) != (member.member_epoch, member.previous_epoch,
                                                  member.state, member.assigned,
                                                  member.pending_revocation)
        member.member_epoch = result.member_epoch
        member.previous_epoch = result.previous_epoch
        member.state = result.state
        member.assigned = _copy(result.assigned)
        member.pending_revocation = _copy(result.pending_revocation)
        self._revocation_deadline(group, member)
        return changed

    # -- ConsumerGroupHeartbeat ----------------------------------------------------------------

    def _fail(self, error: ErrorCode, message: str | None = None) -> asyncio.Future:
        future: asyncio.Future = self._loop.create_future()
        future.set_result(HeartbeatResult(error=error, message=message))
        return future

    def heartbeat(self, req: HeartbeatRequest) -> asyncio.Future:
        """A future of :class:`HeartbeatResult`, answered once its records are written."""
        error = self.manager.check_group(req.group_id)
        if error is not ErrorCode.none:
            return self._fail(error)
        group = self._groups.get(req.group_id)
        if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(group, req)
        if group is None:
            if req.member_epoch != 0:
                return self._fail(ErrorCode.group_id_not_found,
                                  f"group {req.group_id} does not exist")
            if self.manager.has_classic_members(req.group_id):
                return self._fail(ErrorCode.group_id_not_found,
                                  f"group {req.group_id} is not a consumer group")
            partition = self.manager.partition_of(req.group_id)
            assert partition is not None
            group = self._groups[req.group_id] = ConsumerGroup(group_id=req.group_id,
                                                               partition=partition)
        records: Records = []
        joined = req.member_epoch == 0
        new = False  # a member the group did not have (a static member back is not one)
        member = group.members.get(req.member_id) if req.member_id else None
        if joined:
            if req.instance_id:
                static = group.static_member(req.instance_id)
                if static is not None and static.member_id != req.member_id:
                    if static.member_epoch != STATIC_LEAVE_EPOCH:
                        return self._fail(ErrorCode.unreleased_instance_id,
                                          f"instance {req.instance_id} is in use")
                    member = self._take_over(group, static, req.member_id or str(uuid.uuid4()),
                                             records)
            if member is not None and member.member_epoch != 0 and \
                    member.instance_id is None:
                records += self._remove(group, member)  # a rejoin: it starts afresh
                member = None
            if member is None:
                member = ConsumerMember(member_id=req.member_id or str(uuid.uuid4()),
                                        instance_id=req.instance_id)
                group.members[member.member_id] = member
                new = True
                log.info("group %s: member %s joins", group.group_id, member.member_id)
        else:
            if member is None:
                return self._fail(ErrorCode.unknown_member_id,
                                  f"member {req.member_id} is not in group {req.group_id}")
            if req.member_epoch != member.member_epoch:
                lost_answer = (req.member_epoch == member.previous_epoch
                               and req.owned is not None
                               and all(ps <= member.assigned.get(t, set())
                                       for t, ps in req.owned.items()))
                if not lost_answer:
                    return self._fail(ErrorCode.fenced_member_epoch,
                                      f"epoch {req.member_epoch} is not the member's "
                                      f"({member.member_epoch})")
        bump = self._update_member(member, req) or new
        if bump or joined:
            records.append(self._member_record(group, member))
        topics = self._subscription_metadata(group)
        if topics != group.topics:
            group.topics = topics
            records.append(self._topics_record(group))
            bump = True
        if bump:
            group.group_epoch += 1
            records.append(self._epoch_record(group))
        records += self._refresh_target(group)
        before = _copy(member.assigned)
        changed = self._reconcile(group, member, req.owned)
        if changed or joined:
            records.append(self._current_record(group, member))
        self._session(group, member)
        send = joined or member.assigned != before or (
            req.owned is not None and _copy(req.owned) != member.assigned)
        result = HeartbeatResult(
            error=ErrorCode.none, member_id=member.member_id, member_epoch=member.member_epoch,
            heartbeat_interval_ms=self.manager.config.consumer_heartbeat_interval_ms,
            assignment=_copy(member.assigned) if send else None)
        return self._answer_when_written(group, records, result)

    def _answer_when_written(self, group: ConsumerGroup, records: Records,
                             result: HeartbeatResult) -> asyncio.Future:
        answer: asyncio.Future = self._loop.create_future()

        def written(f: asyncio.Future) -> None:
            error = f.result()
            if not answer.done():  # cancelled: the request's connection is gone
                answer.set_result(result if error is ErrorCode.none
                                  else HeartbeatResult(error=error))

        self._write(group, records).add_done_callback(written)
        return answer

    def _update_member(self, member: ConsumerMember, req: HeartbeatRequest) -> bool:
        """Apply what the heartbeat changed; whether the subscription (or assignor) did."""
        bump = False
        if req.subscribed_topic_names is not None and \
                tuple(sorted(req.subscribed_topic_names)) != member.subscribed_topic_names:
            member.subscribed_topic_names = tuple(sorted(req.subscribed_topic_names))
            bump = True
        if req.subscribed_topic_regex is not None and \
                (req.subscribed_topic_regex or None) != member.subscribed_topic_regex:
            member.subscribed_topic_regex = req.subscribed_topic_regex or None
            bump = True
        regex_topics = None
        if member.subscribed_topic_regex and req.may_describe is not None:
            # resolved anew at each of its heartbeats, with its own principal: topics created
            # and ACLs changed since count from its next heartbeat
            matched = regex_matches(member.subscribed_topic_regex,
                                    self.manager.metadata.snapshot.topics)
            regex_topics = frozenset(t for t in matched if req.may_describe(t))
        if regex_topics != member.regex_topics:
            member.regex_topics = regex_topics
            bump = True
        if req.server_assignor is not None and req.server_assignor != member.server_assignor:
            member.server_assignor = req.server_assignor
            bump = True
        if req.rebalance_timeout_ms > 0:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        member.client_id = req.client_id
        member.client_host = req.client_host
        return bump

    def _take_over(self, group: ConsumerGroup, old: ConsumerMember, new_id: str,
                   records: Records) -> ConsumerMember:
        """A static member back under a new id: the new id takes the old one's place."""
        self._cancel_timers(old)
        del group.members[old.member_id]
        records += self._member_tombstones(group, old.member_id)
        member = ConsumerMember(
            member_id=new_id, instance_id=old.instance_id, rack_id=old.rack_id,
            subscribed_topic_names=old.subscribed_topic_names,
            subscribed_topic_regex=old.subscribed_topic_regex, regex_topics=old.regex_topics,
            server_assignor=old.server_assignor, rebalance_timeout_ms=old.rebalance_timeout_ms,
            member_epoch=old.previous_epoch, previous_epoch=old.previous_epoch,
            state=old.state, assigned=old.assigned,
            pending_revocation=old.pending_revocation)
        group.members[new_id] = member
        if old.member_id in group.target:
            group.target[new_id] = group.target.pop(old.member_id)
            records += self._target_records(group, {new_id})
        log.info("group %s: static member %s is back as %s", group.group_id, old.instance_id,
                 new_id)
        return member

    def _leave(self, group: ConsumerGroup | None, req: HeartbeatRequest) -> asyncio.Future:
        member = group.members.get(req.member_id) if group is not None else None
        if group is None:
            return self._fail(ErrorCode.group_id_not_found,
                              f"group {req.group_id} does not exist")
        if member is None:
            return self._fail(ErrorCode.unknown_member_id,
                              f"member {req.member_id} is not in group {req.group_id}")
        result = HeartbeatResult(error=ErrorCode.none, member_id=member.member_id,
                                 member_epoch=req.member_epoch)
        if req.member_epoch == STATIC_LEAVE_EPOCH and member.instance_id:
            log.info("group %s: static member %s leaves for now", group.group_id,
                     member.instance_id)
            member.previous_epoch = member.member_epoch if member.member_epoch >= 0 \
                else member.previous_epoch
            member.member_epoch = STATIC_LEAVE_EPOCH
            self._session(group, member)
            return self._answer_when_written(group, [self._current_record(group, member)],
                                             result)
        log.info("group %s: member %s leaves", group.group_id, member.member_id)
        return self._answer_when_written(group, self._remove(group, member), result)

    # -- DeleteGroups --------------------------------------------------------------------------

    def delete(self, group_id: str) -> asyncio.Future | ErrorCode | None:
        """None when ``group_id`` is no consumer group here; NON_EMPTY_GROUP; else a future of
        the error of writing its tombstones (the group is gone at once)."""
        group = self._groups.get(group_id)
        if group is None:
            return None
        if group.members:
            return ErrorCode.non_empty_group
        del self._groups[group_id]
        records: Records = [(self._member_key(TARGET_MEMBER, group, m), None)
                            for m in group.target]
        records += [(self._group_key(t, group), None)
                    for t in (TARGET_METADATA, PARTITION_METADATA, GROUP_METADATA)]
        log.info("consumer group %s deleted", group_id)
        return self._write(group, records)

    # -- describing ----------------------------------------------------------------------------

    def describe(self, group_id: str) -> tuple[ErrorCode, ConsumerGroup | None, str]:
        """(error, group, assignor) for ConsumerGroupDescribe."""
        error = self.manager.check_group(group_id)
        if error is not ErrorCode.none:
            return error, None, ""
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.group_id_not_found, None, ""
        return ErrorCode.none, group, self._assignor(group)

    def topic_names(self, group: ConsumerGroup) -> dict[uuid.UUID, str]:
        return {tid: name for name, (tid, _) in group.topics.items()}

