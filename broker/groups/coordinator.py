"""The classic group coordinator: membership and rebalances (JoinGroup, SyncGroup, Heartbeat,
LeaveGroup), and the member checks of an offset commit.

The groups, their partitions of ``__consumer_offsets`` and every append live in the
:class:`~broker.groups.metadata_manager.GroupMetadataManager` this coordinator runs over; it
hears from the manager when a partition is loaded (the members loaded start their sessions
again) or dropped (its groups die, whatever they parked is answered NOT_COORDINATOR). The
KIP-848 coordinator of the same partitions (:class:`~broker.groups.consumer_coordinator.
ConsumerGroups`) runs over the same manager, beside this one.

All state lives on the broker's event loop: requests come from the API handlers on the loop,
and timers (sessions, rebalance delays) are loop timers. JoinGroup and SyncGroup answers that
must wait (for the other members, for the leader's assignment) are loop futures, parked as
Kafka parks them in its join purgatory.

The rebalance follows Kafka's GroupCoordinator: a join moves the group to PreparingRebalance;
the join phase ends when every known member has rejoined or at the largest rebalance timeout
(members that did not rejoin are dropped, static ones kept), or for a group that was empty
after ``group.initial.rebalance.delay.ms`` extended while members keep arriving; then the next
generation forms (CompletingRebalance), the leader gets every member's metadata and the chosen
protocol, and its SyncGroup assignment is stored and handed out (Stable). A member that misses
its session timeout is removed and the group rebalances. Static members
(``group.instance.id``) keep their place across restarts: a rejoin with the same instance id
takes the old member's place without a rebalance when nothing changed. Assignors run in the
clients: the coordinator relays protocol metadata and assignments, so eager and cooperative
assignors both work unchanged.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from broker.groups.consumer_coordinator import ConsumerGroups
from broker.groups.group import CommittedOffset, Group, GroupState, Member, select_protocol
from broker.groups.loading import Loaded
from broker.groups.metadata_manager import GroupConfig, GroupMetadataManager, resolved
from broker.groups.txn_offsets import TxnOffsets
from broker.metadata_cache import MetadataCache
from broker.purgatory import Purgatory
from replication.replica_manager import ReplicaManager

__all__ = ["GroupCoordinator", "JoinResult", "MemberInfo", "SyncResult"]

log = logging.getLogger(__name__)

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
"""How long a new member's parked JoinGroup may wait (Kafka's NewMemberJoinTimeoutMs)."""
S = GroupState


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberInfo:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinResult:
    error: ErrorCode
    member_id: str = ""
    generation: int = -1
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str = ""
    members: tuple[MemberInfo, ...] = ()
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol: str | None = None
    assignment: bytes = b""


def _group_error(error: ErrorCode) -> ErrorCode:
    return ErrorCode.unknown_server_error if error is ErrorCode.invalid_commit_offset_size \
        else error


class GroupCoordinator:
    """The classic group coordinator of broker ``broker_id``, over its group metadata manager
    (:attr:`manager`, which it builds), with the KIP-848 coordinator of the same partitions
    beside it (:attr:`consumer`); every method runs on ``loop``."""

    def __init__(self, broker_id: int, replica_manager: ReplicaManager, metadata: MetadataCache,
                 purgatory: Purgatory, loop: asyncio.AbstractEventLoop,
                 config: GroupConfig | None = None,
                 now_ms: Callable[[], int] | None = None) -> None:
        self.manager = GroupMetadataManager(broker_id, replica_manager, metadata, purgatory,
                                            loop, config, now_ms)
        """The partitions, groups and offsets; its life cycle is the coordinators'."""
        self.loop = loop
        self.config = self.manager.config
        self.consumer = ConsumerGroups(self.manager)
        """The KIP-848 groups of the same partitions."""
        self.txn = TxnOffsets(self.manager)  # TxnOffsetCommit, and the markers ending them
        for listener in (self, self.consumer, self.txn):
            self.manager.listen(listener)

    # -- partitions loaded and dropped (the manager tells) ---------------------------------------

    def loaded(self, partition: int, records: Loaded) -> None:
        """The members of the groups loaded start their sessions again."""
        for group in self.manager.groups_in(partition):
            for member in group.members.values():
                self._heartbeat(group, member)

    def unloaded(self, partition: int) -> None:
        """The groups dropped die: whatever they parked is answered NOT_COORDINATOR."""
        for group in self.manager.groups_in(partition):
            self._kill(group, ErrorCode.not_coordinator)

    def keeps_offsets(self, group_id: str) -> bool:
        return False  # a classic group's offsets expire by expired_offsets' rules alone

    def _kill(self, group: Group, error: ErrorCode) -> None:
        """Mark ``group`` Dead and answer whatever it parked with ``error``."""
        group.transition(S.DEAD, self.manager.now_ms())
        self._clear_pending_sync(group)
        if group.rebalance_timer is not None:
            group.rebalance_timer.cancel()
        for handle in group.pending_members.values():
            if handle is not None:
                handle.cancel()
        for member in group.members.values():
            if member.heartbeat is not None:
                member.heartbeat.cancel()
            self._answer_join(member, JoinResult(error=error, member_id=member.member_id))
            self._answer_sync(member, SyncResult(error=error))

    # -- timers ----------------------------------------------------------------------------------

    def _heartbeat(self, group: Group, member: Member, timeout_ms: int | None = None) -> None:
        """Restart ``member``'s session timer (Kafka's completeAndScheduleNextHeartbeat)."""
        if member.heartbeat is not None:
            member.heartbeat.cancel()
        member.last_heartbeat = self.loop.time()
        timeout = (member.session_timeout_ms if timeout_ms is None else timeout_ms) / 1000
        member.heartbeat = self.loop.call_later(timeout, self._session_expired, group, member)

    def _session_expired(self, group: Group, member: Member) -> None:
        member.heartbeat = None
        if group.members.get(member.member_id) is not member or group.is_(S.DEAD):
            return
        if member.awaiting_join is not None and not member.is_new:
            self._heartbeat(group, member)  # the rebalance timeout decides for it
            return
        if member.awaiting_sync is not None:
            self._heartbeat(group, member)
            return
        log.info("group %s: member %s failed its session timeout (%d ms); removing it",
                 group.group_id, member.member_id, member.session_timeout_ms)
        self._remove_member(group, member)

    # -- membership ------------------------------------------------------------------------------

    def _answer_join(self, member: Member, result: JoinResult) -> None:
        future, member.awaiting_join = member.awaiting_join, None
        if future is not None and not future.done():
            future.set_result(result)

    def _answer_sync(self, member: Member, result: SyncResult) -> None:
        future, member.awaiting_sync = member.awaiting_sync, None
        if future is not None and not future.done():
            future.set_result(result)

    def _remove_member(self, group: Group, member: Member) -> None:
        """Remove ``member`` and let the group react (Kafka's removeMemberAndUpdateGroup)."""
        group.members.pop(member.member_id, None)
        if member.group_instance_id and \
                group.static_members.get(member.group_instance_id) == member.member_id:
            del group.static_members[member.group_instance_id]
        if member.heartbeat is not None:
            member.heartbeat.cancel()
            member.heartbeat = None
        self._answer_join(member, JoinResult(error=ErrorCode.unknown_member_id,
                                             member_id=member.member_id))
        self._answer_sync(member, SyncResult(error=ErrorCode.unknown_member_id))
        if group.leader_id == member.member_id:
            group.leader_id = next(iter(group.members), None)
        if group.is_(S.STABLE, S.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"member {member.member_id} left")
        elif group.is_(S.PREPARING_REBALANCE):
            self._check_join(group)

    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY):
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        self._clear_pending_sync(group)
        if group.is_(S.COMPLETING_REBALANCE):
            for member in group.members.values():
                member.assignment = b""
                self._answer_sync(member, SyncResult(error=ErrorCode.rebalance_in_progress))
        initial = group.is_(S.EMPTY)
        if not group.transition(S.PREPARING_REBALANCE, self.manager.now_ms()):
            return
        log.info("group %s: preparing to rebalance (generation %d): %s", group.group_id,
                 group.generation, reason)
        timeout_ms = group.max_rebalance_timeout_ms()
        if group.rebalance_timer is not None:
            group.rebalance_timer.cancel()
        if initial:
            delay_ms = min(self.config.group_initial_rebalance_delay_ms, timeout_ms)
            group.initial_delay_left = max(timeout_ms - delay_ms, 0) / 1000
            group.new_member_added = False
            group.rebalance_timer = self.loop.call_later(delay_ms / 1000, self._initial_delay_over,
                                                         group)
            group.rebalance_deadline = -1.0  # an initial join waits for its delay
        else:
            group.initial_delay_left = 0.0
            group.rebalance_deadline = self.loop.time() + timeout_ms / 1000
            group.rebalance_timer = self.loop.call_later(timeout_ms / 1000, self._complete_join,
                                                         group)
            self._check_join(group)

    def _initial_delay_over(self, group: Group) -> None:
        group.rebalance_timer = None
        if not group.is_(S.PREPARING_REBALANCE):
            return
        if group.new_member_added and group.initial_delay_left > 0:
            group.new_member_added = False
            delay = min(self.config.group_initial_rebalance_delay_ms / 1000,
                        group.initial_delay_left)
            group.initial_delay_left -= delay
            group.rebalance_timer = self.loop.call_later(delay, self._initial_delay_over, group)
            return
        self._complete_join(group)

    def _check_join(self, group: Group) -> None:
        """End the join phase early when every member has rejoined (not during the initial
        delay, which waits on purpose)."""
        if group.is_(S.PREPARING_REBALANCE) and group.rebalance_deadline >= 0 \
                and group.all_joined():
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        """The join phase is over: form the next generation (Kafka's onCompleteJoin)."""
        if not group.is_(S.PREPARING_REBALANCE):
            return
        if group.rebalance_timer is not None:
            group.rebalance_timer.cancel()
            group.rebalance_timer = None
        for member in [m for m in group.members.values()
                       if m.awaiting_join is None and not m.group_instance_id]:
            log.info("group %s: member %s did not rejoin in time; removing it", group.group_id,
                     member.member_id)
            group.members.pop(member.member_id, None)
            if member.heartbeat is not None:
                member.heartbeat.cancel()
            self._answer_sync(member, SyncResult(error=ErrorCode.unknown_member_id))
        joined = [m for m in group.members.values() if m.awaiting_join is not None]
        if group.leader_id not in group.members or \
                group.members[group.leader_id].awaiting_join is None:
            group.leader_id = joined[0].member_id if joined else None
        if not joined and group.members:
            # only static members that have not rejoined: wait for them (or their sessions)
            timeout = group.max_rebalance_timeout_ms() / 1000
            group.rebalance_deadline = self.loop.time() + timeout
            group.rebalance_timer = self.loop.call_later(timeout, self._complete_join, group)
            return
        now = self.manager.now_ms()
        group.generation += 1
        if group.members:
            group.protocol = select_protocol(list(group.members.values()))
            group.protocol_type = next(iter(group.members.values())).protocol_type
            group.transition(S.COMPLETING_REBALANCE, now)
            log.info("group %s: generation %d formed with %d member(s), protocol %s",
                     group.group_id, group.generation, len(group.members), group.protocol)
        else:
            group.protocol = None
            group.leader_id = None
            group.transition(S.EMPTY, now)
            log.info("group %s: generation %d is empty", group.group_id, group.generation)

            def stored(f: asyncio.Future) -> None:
                if f.result() is not ErrorCode.none:
                    log.warning("group %s: storing the empty generation failed: %s",
                                group.group_id, f.result().name)

            self.manager.store_group(group).add_done_callback(stored)
            return
        group.pending_sync = set(group.members)
        group.sync_timer = self.loop.call_later(group.max_rebalance_timeout_ms() / 1000,
                                                self._sync_expired, group, group.generation)
        protocol = group.protocol
        everyone = tuple(MemberInfo(member_id=m.member_id,
                                    group_instance_id=m.group_instance_id,
                                    metadata=m.metadata(protocol))
                         for m in group.members.values())
        for member in group.members.values():
            is_leader = member.member_id == group.leader_id
            self._answer_join(member, JoinResult(
                error=ErrorCode.none, member_id=member.member_id, generation=group.generation,
                protocol_type=group.protocol_type, protocol=protocol,
                leader=group.leader_id or "", members=everyone if is_leader else ()))
            member.is_new = False
            self._heartbeat(group, member)

    def _clear_pending_sync(self, group: Group) -> None:
        group.pending_sync.clear()
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None

    def _sync_expired(self, group: Group, generation: int) -> None:
        """The rebalance timeout passed since the generation formed: members that never sent
        SyncGroup are removed and the group rebalances (Kafka 3.x's pending-sync timeout)."""
        group.sync_timer = None
        if group.generation != generation or not group.is_(S.COMPLETING_REBALANCE, S.STABLE):
            return
        missing = [group.members[m] for m in group.pending_sync if m in group.members]
        group.pending_sync.clear()
        for member in missing:
            log.info("group %s: member %s did not sync in generation %d; removing it",
                     group.group_id, member.member_id, generation)
            self._remove_member(group, member)

    def _current_join(self, group: Group, member: Member, *, with_members: bool,
                      skip_assignment: bool = False) -> JoinResult:
        members: tuple[MemberInfo, ...] = ()
        if with_members:
            members = tuple(MemberInfo(member_id=m.member_id,
                                       group_instance_id=m.group_instance_id,
                                       metadata=m.metadata(group.protocol or ""))
                            for m in group.members.values())
        return JoinResult(error=ErrorCode.none, member_id=member.member_id,
                          generation=group.generation, protocol_type=group.protocol_type,
                          protocol=group.protocol, leader=group.leader_id or "",
                          members=members, skip_assignment=skip_assignment)

    def _await_join(self, member: Member) -> asyncio.Future:
        if member.awaiting_join is not None and not member.awaiting_join.done():
            member.awaiting_join.set_result(JoinResult(error=ErrorCode.rebalance_in_progress,
                                                       member_id=member.member_id))
        future: asyncio.Future = self.loop.create_future()
        member.awaiting_join = future
        return future

    def _done(self, result: object) -> asyncio.Future:
        return resolved(self.loop, result)

    def join(self, *, group_id: str, member_id: str, group_instance_id: str | None,
             client_id: str, client_host: str, session_timeout_ms: int,
             rebalance_timeout_ms: int, protocol_type: str,
             protocols: tuple[tuple[str, bytes], ...], require_known_member_id: bool,
             version: int) -> asyncio.Future:
        """JoinGroup: a future of :class:`JoinResult` (answered when the join phase ends)."""
        error = self.manager.check_group(group_id)
        if error is not ErrorCode.none:
            return self._done(JoinResult(error=error, member_id=member_id))
        if not (self.config.group_min_session_timeout_ms <= session_timeout_ms
                <= self.config.group_max_session_timeout_ms):
            return self._done(JoinResult(error=ErrorCode.invalid_session_timeout,
                                         member_id=member_id))
        group = self.manager.group(group_id)
        unknown = member_id == ""
        if group is None:
            if not unknown:
                return self._done(JoinResult(error=ErrorCode.unknown_member_id,
                                             member_id=member_id))
            group = self.manager.new_group(group_id)
        if group.is_(S.DEAD):
            return self._done(JoinResult(error=ErrorCode.coordinator_not_available,
                                         member_id=member_id))
        if not group.supports(protocol_type, protocols):
            return self._done(JoinResult(error=ErrorCode.inconsistent_group_protocol,
                                         member_id=member_id))
        details = dict(client_id=client_id, client_host=client_host,
                       session_timeout_ms=session_timeout_ms,
                       rebalance_timeout_ms=rebalance_timeout_ms, protocol_type=protocol_type,
                       protocols=protocols)
        if unknown:
            if len(group.members) + len(group.pending_members) >= self.config.group_max_size:
                return self._done(JoinResult(error=ErrorCode.group_max_size_reached))
            new_id = f"{group_instance_id or client_id}-{uuid.uuid4()}"
            if group_instance_id:
                old_id = group.static_members.get(group_instance_id)
                if old_id is not None and old_id in group.members:
                    return self._replace_static(group, group.members[old_id], new_id, details,
                                                version)
                return self._add_and_rebalance(group, new_id, group_instance_id, details)
            if require_known_member_id:
                group.pending_members[new_id] = self.loop.call_later(
                    session_timeout_ms / 1000, self._pending_expired, group, new_id)
                return self._done(JoinResult(error=ErrorCode.member_id_required,
                                             member_id=new_id))
            return self._add_and_rebalance(group, new_id, None, details)
        if group_instance_id:
            known = group.static_members.get(group_instance_id)
            if known is not None and known != member_id:
                return self._done(JoinResult(error=ErrorCode.fenced_instance_id,
                                             member_id=member_id))
        if member_id in group.pending_members:
            handle = group.pending_members.pop(member_id)
            if handle is not None:
                handle.cancel()
            return self._add_and_rebalance(group, member_id, group_instance_id, details)
        member = group.members.get(member_id)
        if member is None or group.is_(S.EMPTY, S.DEAD):
            return self._done(JoinResult(error=ErrorCode.unknown_member_id, member_id=member_id))
        if group.is_(S.COMPLETING_REBALANCE) and member.matches(protocols):
            return self._done(self._current_join(
                group, member, with_members=member_id == group.leader_id))
        if group.is_(S.STABLE) and member_id != group.leader_id and member.matches(protocols):
            self._heartbeat(group, member)
            return self._done(self._current_join(group, member, with_members=False))
        self._update_member(member, details)
        future = self._await_join(member)
        member.join_version = version
        self._maybe_prepare_rebalance(group, f"member {member_id} rejoined")
        self._check_join(group)
        return future

    def _update_member(self, member: Member, details: dict) -> None:
        member.client_id = details["client_id"]
        member.client_host = details["client_host"]
        member.session_timeout_ms = details["session_timeout_ms"]
        member.rebalance_timeout_ms = details["rebalance_timeout_ms"]
        member.protocol_type = details["protocol_type"]
        member.protocols = details["protocols"]

    def _pending_expired(self, group: Group, member_id: str) -> None:
        if group.pending_members.pop(member_id, "gone") == "gone":
            return
        self._check_join(group)

    def _add_and_rebalance(self, group: Group, member_id: str, instance_id: str | None,
                           details: dict) -> asyncio.Future:
        member = Member(member_id=member_id, group_instance_id=instance_id, is_new=True,
                        **details)
        future = self._await_join(member)
        if group.is_(S.PREPARING_REBALANCE) and group.generation == 0:
            group.new_member_added = True
        if not group.members:
            group.protocol_type = member.protocol_type
        group.members[member_id] = member
        if instance_id:
            group.static_members[instance_id] = member_id
        if group.leader_id is None:
            group.leader_id = member_id
        # a new member cannot heartbeat while its join is parked: bound the wait instead
        self._heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"member {member_id} joined")
        self._check_join(group)
        return future

    def _replace_static(self, group: Group, old: Member, new_id: str, details: dict,
                        version: int) -> asyncio.Future:
        """A static member came back under a new member id: it takes the old one's place."""
        instance = old.group_instance_id
        assert instance is not None
        if old.heartbeat is not None:
            old.heartbeat.cancel()
        self._answer_join(old, JoinResult(error=ErrorCode.fenced_instance_id,
                                          member_id=old.member_id))
        self._answer_sync(old, SyncResult(error=ErrorCode.fenced_instance_id))
        del group.members[old.member_id]
        member = Member(member_id=new_id, group_instance_id=instance, assignment=old.assignment,
                        **details)
        group.members[new_id] = member
        group.static_members[instance] = new_id
        was_leader = group.leader_id == old.member_id
        if was_leader:
            group.leader_id = new_id
        log.info("group %s: static member %s rejoined as %s", group.group_id, instance, new_id)
        # Kafka's rule: a Stable group takes the new member as it is unless the protocol the
        # next generation would choose changes (its assignment stays the member's)
        if group.is_(S.STABLE) and select_protocol(list(group.members.values())) == \
                group.protocol:
            self._heartbeat(group, member)
            answer: asyncio.Future = self.loop.create_future()

            def stored(f: asyncio.Future) -> None:
                error = _group_error(f.result())
                if answer.done():  # cancelled: the request's connection is gone
                    return
                answer.set_result(JoinResult(error=error, member_id=new_id)
                                  if error is not ErrorCode.none else self._current_join(
                                      group, member, with_members=was_leader,
                                      skip_assignment=was_leader and version >= 9))

            self.manager.store_group(group).add_done_callback(stored)
            return answer
        future = self._await_join(member)
        self._heartbeat(group, member)
        self._maybe_prepare_rebalance(group, f"static member {instance} rejoined")
        self._check_join(group)
        return future

    def sync(self, *, group_id: str, generation: int, member_id: str,
             group_instance_id: str | None, protocol_type: str | None,
             protocol: str | None, assignments: dict[str, bytes]) -> asyncio.Future:
        """SyncGroup: a future of :class:`SyncResult`."""
        error = self.manager.check_group(group_id)
        if error is ErrorCode.coordinator_load_in_progress:
            error = ErrorCode.rebalance_in_progress  # Kafka: the client rejoins
        if error is not ErrorCode.none:
            return self._done(SyncResult(error=error))
        group = self.manager.group(group_id)
        if group is None:
            return self._done(SyncResult(error=ErrorCode.unknown_member_id))
        if group.is_(S.DEAD):
            return self._done(SyncResult(error=ErrorCode.coordinator_not_available))
        error = self._check_member(group, member_id, group_instance_id, generation)
        if error is ErrorCode.none and (
                (protocol_type is not None and protocol_type != group.protocol_type)
                or (protocol is not None and protocol != group.protocol)):
            error = ErrorCode.inconsistent_group_protocol
        if error is not ErrorCode.none:
            return self._done(SyncResult(error=error))
        member = group.members[member_id]
        if group.is_(S.PREPARING_REBALANCE):
            return self._done(SyncResult(error=ErrorCode.rebalance_in_progress))
        group.pending_sync.discard(member_id)
        if not group.pending_sync and group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None
        if group.is_(S.STABLE):
            self._heartbeat(group, member)
            return self._done(SyncResult(error=ErrorCode.none, protocol_type=group.protocol_type,
                                         protocol=group.protocol, assignment=member.assignment))
        # CompletingRebalance: park until the leader's assignment is stored
        if member.awaiting_sync is not None and not member.awaiting_sync.done():
            member.awaiting_sync.set_result(SyncResult(error=ErrorCode.rebalance_in_progress))
        future: asyncio.Future = self.loop.create_future()
        member.awaiting_sync = future
        self._heartbeat(group, member)
        if member_id == group.leader_id:
            full = {m: assignments.get(m, b"") for m in group.members}
            formed = group.generation

            def stored(f: asyncio.Future) -> None:
                if not group.is_(S.COMPLETING_REBALANCE) or group.generation != formed:
                    return
                error = _group_error(f.result())
                if error is not ErrorCode.none:
                    for m in group.members.values():
                        m.assignment = b""
                        self._answer_sync(m, SyncResult(error=error))
                    self._prepare_rebalance(group, f"storing the assignment failed: "
                                                   f"{error.name}")
                    return
                for m in group.members.values():
                    m.assignment = full.get(m.member_id, b"")
                group.transition(S.STABLE, self.manager.now_ms())
                log.info("group %s: generation %d is stable", group.group_id, group.generation)
                for m in group.members.values():
                    self._answer_sync(m, SyncResult(error=ErrorCode.none,
                                                    protocol_type=group.protocol_type,
                                                    protocol=group.protocol,
                                                    assignment=m.assignment))

            self.manager.store_group(group, full).add_done_callback(stored)
        return future

    def _check_member(self, group: Group, member_id: str, instance_id: str | None,
                      generation: int) -> ErrorCode:
        if instance_id:
            known = group.static_members.get(instance_id)
            if known is not None and known != member_id:
                return ErrorCode.fenced_instance_id
        if member_id not in group.members:
            return ErrorCode.unknown_member_id
        if generation != group.generation:
            return ErrorCode.illegal_generation
        return ErrorCode.none

    def heartbeat(self, *, group_id: str, generation: int, member_id: str,
                  group_instance_id: str | None) -> ErrorCode:
        """Heartbeat: the error to answer."""
        error = self.manager.check_group(group_id)
        if error is ErrorCode.coordinator_load_in_progress:
            return ErrorCode.none  # Kafka answers blindly while the group loads
        if error is not ErrorCode.none:
            return error
        group = self.manager.group(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        if group.is_(S.DEAD):
            return ErrorCode.coordinator_not_available
        error = self._check_member(group, member_id, group_instance_id, generation)
        if error is not ErrorCode.none:
            return error
        if group.is_(S.EMPTY):
            return ErrorCode.unknown_member_id
        self._heartbeat(group, group.members[member_id])
        if group.is_(S.PREPARING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave(self, group_id: str, members: Sequence[tuple[str, str | None]]
              ) -> tuple[ErrorCode, list[ErrorCode]]:
        """LeaveGroup: (the request's error, one error per member given)."""
        error = self.manager.check_group(group_id)
        if error is not ErrorCode.none:
            return error, []
        group = self.manager.group(group_id)
        if group is None:
            return ErrorCode.none, [ErrorCode.unknown_member_id] * len(members)
        if group.is_(S.DEAD):
            return ErrorCode.coordinator_not_available, []
        errors = []
        for member_id, instance_id in members:
            target = member_id
            if instance_id:
                known = group.static_members.get(instance_id)
                if known is None:
                    errors.append(ErrorCode.unknown_member_id)
                    continue
                if member_id and member_id != known:
                    errors.append(ErrorCode.fenced_instance_id)
                    continue
                target = known
            if target in group.pending_members:
                handle = group.pending_members.pop(target)
                if handle is not None:
                    handle.cancel()
                errors.append(ErrorCode.none)
                self._check_join(group)
                continue
            member = group.members.get(target)
            if member is None:
                errors.append(ErrorCode.unknown_member_id)
                continue
            log.info("group %s: member %s leaves", group_id, target)
            self._remove_member(group, member)
            errors.append(ErrorCode.none)
        return ErrorCode.none, errors

    # -- offsets ---------------------------------------------------------------------------------

    def commit(self, *, group_id: str, generation: int, member_id: str,
               group_instance_id: str | None,
               offsets: dict[tuple[str, int], CommittedOffset]) -> asyncio.Future:
        """OffsetCommit for the partitions that passed the request checks: a future of the
        error that applies to all of them."""
        error = self.manager.check_group(group_id)
        if error is not ErrorCode.none:
            return self._done(error)
        group = self.manager.group(group_id)
        if group is None:
            if generation >= 0 or member_id or group_instance_id:
                return self._done(ErrorCode.illegal_generation)
            group = self.manager.new_group(group_id)
        if group.is_(S.DEAD):
            return self._done(ErrorCode.coordinator_not_available)
        if generation >= 0 or member_id or group_instance_id:
            error = self._check_member(group, member_id, group_instance_id, generation)
            if error is not ErrorCode.none:
                return self._done(error)
            if group.is_(S.COMPLETING_REBALANCE):
                return self._done(ErrorCode.rebalance_in_progress)
            self._heartbeat(group, group.members[member_id])
        elif not group.is_(S.EMPTY):
            return self._done(ErrorCode.unknown_member_id)  # not a member of an active group
        if not offsets:
            return self._done(ErrorCode.none)
        return self.manager.store_offsets(group, offsets)

    def delete_groups(self, group_ids: Sequence[str]) -> asyncio.Future:
        """DeleteGroups: a future of the error per group, in the order given."""
        results: dict[str, ErrorCode | asyncio.Future] = {}
        for group_id in group_ids:
            error = self.manager.check_group(group_id)
            if error is not ErrorCode.none:
                results[group_id] = error
                continue
            group = self.manager.group(group_id)
            if group is None or group.is_(S.DEAD):
                results[group_id] = ErrorCode.group_id_not_found
            elif not group.is_(S.EMPTY):
                results[group_id] = ErrorCode.non_empty_group
            else:
                offsets = group.offset_partitions()
                self._kill(group, ErrorCode.coordinator_not_available)
                self.manager.drop_group(group)
                log.info("group %s deleted (%d committed offset(s))", group_id, len(offsets))
                results[group_id] = self.manager.tombstones(group, offsets, whole_group=True)
        waiting = [f for f in results.values() if isinstance(f, asyncio.Future)]

        async def gather() -> list[ErrorCode]:
            for f in waiting:
                await f
            return [r.result() if isinstance(r, asyncio.Future) else r
                    for r in (results[g] for g in group_ids)]

        return asyncio.ensure_future(gather())

