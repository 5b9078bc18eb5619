"""A consumer group of the KIP-848 protocol: its state and the pure rules of reconciliation.

The group has an epoch, bumped whenever what it assigns from changes (a member joins, leaves
or changes its subscription; a subscribed topic appears, disappears or grows), and a target
assignment computed by a server assignor at some group epoch (the assignment epoch). Each
member converges on its share of the target on its own, through its heartbeats
(:func:`reconcile`, Kafka's ``CurrentAssignmentBuilder``):

- partitions it owns that the target takes away are revoked first: the member keeps its epoch
  and the rest, and the partitions wait as *pending revocation* (state UNREVOKED_PARTITIONS)
  until a heartbeat shows it no longer owns them;
- then it moves to the assignment epoch and gets the new partitions that no other member still
  owns (assigned or pending revocation); those still held elsewhere are *unreleased* (state
  UNRELEASED_PARTITIONS) and come with a later heartbeat, once freed;
- a member with nothing left to do is STABLE at the assignment epoch.

The group's state follows from its members: Empty (none), Assigning (the target is older than
the group epoch), Reconciling (some member is not yet stable at the assignment epoch), Stable.
"""

from __future__ import annotations

import asyncio
import enum
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

__all__ = [
    "LEAVE_EPOCH",
    "STATIC_LEAVE_EPOCH",
    "ConsumerGroup",
    "ConsumerMember",
    "MemberState",
    "Reconciled",
    "reconcile",
    "regex_matches",
    "subscribed",
]

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2

Partitions = dict[uuid.UUID, set[int]]


class MemberState(enum.IntEnum):
    """Kafka's ``MemberState`` (its codes are what the records store)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


@dataclass(slots=True, kw_only=True, eq=False)
class ConsumerMember:
    """One member; owned by the coordinator's loop."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    regex_topics: frozenset[str] | None = None
    """What its regex may resolve to: the matching topics its principal may Describe, as of
    its last heartbeat (None: not narrowed, as without an authorizer). Not written to the
    records: rebuilt from each heartbeat."""
    server_assignor: str | None = None
    rebalance_timeout_ms: int = 300_000
    member_epoch: int = 0
    previous_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Partitions = field(default_factory=dict)
    pending_revocation: Partitions = field(default_factory=dict)
    session_timer: asyncio.TimerHandle | None = None
    revocation_timer: asyncio.TimerHandle | None = None


class GroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(slots=True, kw_only=True, eq=False)
class ConsumerGroup:
    group_id: str
    partition: int
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Partitions] = field(default_factory=dict)
    topics: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)
    """Subscription metadata: each subscribed topic's (id, partition count)."""

    def state(self) -> GroupState:
        if not self.members:
            return GroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return GroupState.ASSIGNING
        if any(m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE
               for m in self.members.values()):
            return GroupState.RECONCILING
        return GroupState.STABLE

    def static_member(self, instance_id: str) -> ConsumerMember | None:
        for m in self.members.values():
            if m.instance_id == instance_id:
                return m
        return None

    def owner(self, topic_id: uuid.UUID, partition: int, *, besides: str) -> str | None:
        """The member (other than ``besides``) that holds the partition or has not yet
        revoked it."""
        for m in self.members.values():
            if m.member_id == besides:
                continue
            if partition in m.assigned.get(topic_id, ()) or \
                    partition in m.pending_revocation.get(topic_id, ()):
                return m.member_id
        return None

    def subscribed_names(self, topics: Iterable[str] = ()) -> set[str]:
        """The topics some member subscribes to, by name or by its regex over ``topics``."""
        listed = list(topics)
        return {t for m in self.members.values() for t in subscribed(m, listed)}


def regex_matches(regex: str, topics: Iterable[str]) -> set[str]:
    """The topics among ``topics`` that ``regex`` matches as a whole, never an internal
    (``__``-prefixed) one, as Kafka's."""
    pattern = re.compile(regex)
    return {t for t in topics if not t.startswith("__") and pattern.fullmatch(t)}


def subscribed(member: ConsumerMember, topics: Iterable[str]) -> set[str]:
    """What ``member`` subscribes to among ``topics`` (plus the names it gives): what its
    regex matches, narrowed to its ``regex_topics`` when it has them (Kafka subscribes a regex
    only to the topics its member's principal may Describe)."""
    names = set(member.subscribed_topic_names)
    if member.subscribed_topic_regex:
        matched = regex_matches(member.subscribed_topic_regex, topics)
        if member.regex_topics is not None:
            matched &= member.regex_topics
        names |= matched
    return names


@dataclass(frozen=True, slots=True, kw_only=True)
class Reconciled:
    member_epoch: int
    previous_epoch: int
    state: MemberState
    assigned: Partitions
    pending_revocation: Partitions


def _minus(a: Mapping[uuid.UUID, set[int]], b: Mapping[uuid.UUID, set[int]]) -> Partitions:
    out = {t: ps - b.get(t, set()) for t, ps in a.items()}
    return {t: ps for t, ps in out.items() if ps}


def _and(a: Mapping[uuid.UUID, set[int]], b: Mapping[uuid.UUID, set[int]]) -> Partitions:
    out = {t: ps & b.get(t, set()) for t, ps in a.items()}
    return {t: ps for t, ps in out.items() if ps}


def _overlaps(a: Mapping[uuid.UUID, set[int]], b: Mapping[uuid.UUID, set[int]]) -> bool:
    return any(ps & b.get(t, set()) for t, ps in a.items())


def reconcile(member: ConsumerMember, target_epoch: int, target: Partitions,
              owned: Partitions | None, is_free: Callable[[uuid.UUID, int], bool]
              ) -> Reconciled:
    """The member's next assignment: ``owned`` is what its heartbeat says it holds (None when
    it did not say), ``is_free`` whether no other member still holds a partition."""
    unchanged = Reconciled(member_epoch=member.member_epoch,
                           previous_epoch=member.previous_epoch, state=member.state,
                           assigned=member.assigned,
                           pending_revocation=member.pending_revocation)
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if owned is None or _overlaps(member.pending_revocation, owned):
            return unchanged
    elif member.member_epoch == target_epoch and member.state is MemberState.STABLE:
        return unchanged
    keep = _and(member.assigned, target)
    revoke = _minus(member.assigned, target)
    if revoke:
        return Reconciled(member_epoch=member.member_epoch,
                          previous_epoch=member.previous_epoch,
                          state=MemberState.UNREVOKED_PARTITIONS, assigned=keep,
                          pending_revocation=revoke)
    add = _minus(target, member.assigned)
    assigned = {t: set(ps) for t, ps in keep.items()}
    unreleased = False
    for t, ps in add.items():
        for p in sorted(ps):
            if is_free(t, p):
                assigned.setdefault(t, set()).add(p)
            else:
                unreleased = True
    moved = member.member_epoch != target_epoch
    return Reconciled(member_epoch=target_epoch,
                      previous_epoch=member.member_epoch if moved else member.previous_epoch,
                      state=MemberState.UNRELEASED_PARTITIONS if unreleased
                      else MemberState.STABLE,
                      assigned=assigned, pending_revocation={})
