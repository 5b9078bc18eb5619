"""A classic group's state: its members, its generation, its state machine, its offsets.

Kafka's states and their legal predecessors (``GroupMetadata.validPreviousStates``):

- **Empty**: no members (offsets may still be held); from PreparingRebalance (the rebalance
  ended with nobody) or at creation.
- **PreparingRebalance**: members are (re)joining; from Empty, Stable and CompletingRebalance.
- **CompletingRebalance**: the generation is formed, the leader's assignment awaited; from
  PreparingRebalance.
- **Stable**: the assignment is handed out; from CompletingRebalance.
- **Dead**: the group is gone (deleted, expired, or its partition moved away); from any state.

:func:`check_transition` is that table: a transition not in it is logged and refused, never
half-applied. The other pure rules a coordinator needs live here too: which protocol a
generation uses (:func:`select_protocol`), and which topics a consumer's subscription names
(:func:`subscribed_topics`), for OffsetDelete, and which offsets have expired
(:func:`expired_offsets`).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from broker.groups.records import MemberRecord, OffsetCommitValue

__all__ = [
    "VALID_PREVIOUS",
    "CommittedOffset",
    "Group",
    "GroupState",
    "Member",
    "PendingOffset",
    "check_transition",
    "expired_offsets",
    "select_protocol",
    "subscribed_topics",
]

state_log = logging.getLogger(__name__ + ".state")

CONSUMER_PROTOCOL = "consumer"


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


S = GroupState
VALID_PREVIOUS: Mapping[GroupState, frozenset[GroupState]] = {
    S.EMPTY: frozenset({S.PREPARING_REBALANCE}),
    S.PREPARING_REBALANCE: frozenset({S.EMPTY, S.STABLE, S.COMPLETING_REBALANCE}),
    S.COMPLETING_REBALANCE: frozenset({S.PREPARING_REBALANCE}),
    S.STABLE: frozenset({S.COMPLETING_REBALANCE}),
    S.DEAD: frozenset(GroupState),
}
"""Kafka's ``validPreviousStates``: the states each state may be entered from."""


def check_transition(current: GroupState, target: GroupState) -> bool:
    """Whether ``current`` -> ``target`` is legal."""
    return current in VALID_PREVIOUS[target]


CommittedOffset = OffsetCommitValue
"""A committed offset as the group holds it: what its record in __consumer_offsets says."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingOffset:
    """An offset a transaction committed, held until the transaction ends: the value, and
    where its record sits in ``__consumer_offsets`` (None while it is being written)."""

    offset: CommittedOffset
    position: int | None = None


@dataclass(slots=True, kw_only=True, eq=False)
class Member:
    """One member of a classic group. The futures are the parked JoinGroup and SyncGroup
    answers; ``heartbeat`` the session timer."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes = b""
    awaiting_join: asyncio.Future | None = None
    awaiting_sync: asyncio.Future | None = None
    join_version: int = 0
    is_new: bool = False
    last_heartbeat: float = 0.0
    heartbeat: asyncio.TimerHandle | None = None

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""

    def matches(self, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        return self.protocols == protocols

    def record(self, protocol: str | None) -> MemberRecord:
        return MemberRecord(member_id=self.member_id, group_instance_id=self.group_instance_id,
                            client_id=self.client_id, client_host=self.client_host,
                            rebalance_timeout_ms=self.rebalance_timeout_ms,
                            session_timeout_ms=self.session_timeout_ms,
                            subscription=self.metadata(protocol) if protocol else b"",
                            assignment=self.assignment)


@dataclass(slots=True, kw_only=True, eq=False)
class Group:
    """One group: membership, generation and committed offsets. Owned by the coordinator's
    event loop; nothing else touches it."""

    group_id: str
    partition: int
    state: GroupState = GroupState.EMPTY
    protocol_type: str | None = None
    protocol: str | None = None
    generation: int = 0
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    """group.instance.id -> member id."""
    pending_members: dict[str, asyncio.TimerHandle | None] = field(default_factory=dict)
    """Member ids handed out with MEMBER_ID_REQUIRED, not joined yet (with their expiry)."""
    offsets: dict[tuple[str, int], CommittedOffset] = field(default_factory=dict)
    positions: dict[tuple[str, int], int] = field(default_factory=dict)
    """Where each committed offset's record sits in ``__consumer_offsets`` (when known): a
    transaction's offsets, committed later, replace only older ones (Kafka's rule)."""
    pending_txn: dict[int, dict[tuple[str, int], PendingOffset]] = field(default_factory=dict)
    """Transactional offset commits not decided yet, per producer id (KIP-98): invisible to
    OffsetFetch until their transaction's commit marker (:mod:`broker.groups.txn_offsets`)."""
    state_timestamp: int = -1
    new_member_added: bool = False
    pending_sync: set[str] = field(default_factory=set)
    """Members of the current generation that have not sent SyncGroup yet."""
    sync_timer: asyncio.TimerHandle | None = None
    rebalance_timer: asyncio.TimerHandle | None = None
    rebalance_deadline: float = 0.0
    """When the current join phase ends at the latest (loop time)."""
    initial_delay_left: float = 0.0

    def transition(self, target: GroupState, now_ms: int) -> bool:
        """Move to ``target`` if the table allows it; refuse (and log) otherwise."""
        if not check_transition(self.state, target):
            state_log.error("group %s: illegal transition %s -> %s refused", self.group_id,
                            self.state.value, target.value)
            return False
        self.state = target
        self.state_timestamp = now_ms
        return True

    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    def has_pending(self, tp: tuple[str, int]) -> bool:
        """Whether an open transaction committed an offset of ``tp`` (KIP-447's unstable)."""
        return any(tp in held for held in self.pending_txn.values())

    def pending_partitions(self) -> set[tuple[str, int]]:
        """Every partition an open transaction committed an offset for."""
        return {tp for held in self.pending_txn.values() for tp in held}

    def offset_partitions(self) -> list[tuple[str, int]]:
        """The partitions with a committed offset, then those only a transaction committed
        for: what deleting the group writes tombstones for (Kafka 3.9)."""
        return [*self.offsets, *sorted(self.pending_partitions() - self.offsets.keys())]

    def drop_pending(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Forget what open transactions committed for ``partitions`` (their tombstones are
        written: an OffsetDelete, a deletion)."""
        doomed = set(partitions)
        for producer_id in list(self.pending_txn):
            held = self.pending_txn[producer_id]
            for tp in doomed & held.keys():
                del held[tp]
            if not held:
                del self.pending_txn[producer_id]

    def protocols_supported(self) -> set[str]:
        sets = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports(self, protocol_type: str, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        """Kafka's ``supportsProtocols``: an empty group takes any non-empty list; otherwise
        the type must match and one protocol be shared with every member."""
        names = {name for name, _ in protocols}
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(names & self.protocols_supported())

    def all_joined(self) -> bool:
        return not self.pending_members and all(
            m.awaiting_join is not None for m in self.members.values())

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def subscribed_topics(self) -> set[str] | None:
        """The topics the members subscribe to; None when unknown (not the consumer protocol,
        or a subscription that does not parse)."""
        if self.protocol_type != CONSUMER_PROTOCOL or self.protocol is None:
            return None if self.members else set()
        topics: set[str] = set()
        for m in self.members.values():
            found = subscribed_topics(m.metadata(self.protocol))
            if found is None:
                return None
            topics |= found
        return topics


def expired_offsets(group: Group, now_ms: int, retention_ms: int) -> list[tuple[str, int]]:
    """The offsets of ``group`` past their retention at ``now_ms`` (Kafka's
    ``removeExpiredOffsets``): an offset with an expire timestamp (an old OffsetCommit's
    retention time) goes then; otherwise ``retention_ms`` counts from when an Empty group with
    a protocol became empty, from the commit for a group that never had one, and, in a Stable
    consumer group, from the commit for the topics no member subscribes to any more. A group
    rebalancing, or whose subscriptions cannot be read, keeps everything; so does a partition
    an open transaction committed an offset for (Kafka 3.9's OffsetMetadataManager)."""
    base: int | None = None
    if group.protocol_type is None or group.is_(GroupState.EMPTY):
        if group.protocol_type is not None and group.state_timestamp >= 0:
            base = group.state_timestamp
        candidates = list(group.offsets)
    elif group.protocol_type == CONSUMER_PROTOCOL and group.is_(GroupState.STABLE):
        subscribed = group.subscribed_topics()
        if subscribed is None:
            return []
        candidates = [tp for tp in group.offsets if tp[0] not in subscribed]
    else:
        return []
    expired = []
    for tp in candidates:
        if group.has_pending(tp):
            continue  # an open transaction will commit it again: not expired yet (Kafka)
        o = group.offsets[tp]
        if o.expire_timestamp >= 0:
            due = now_ms >= o.expire_timestamp
        else:
            due = now_ms - (base if base is not None else o.commit_timestamp) >= retention_ms
        if due:
            expired.append(tp)
    return expired


def select_protocol(members: list[Member]) -> str:
    """Kafka's vote: each member votes for its first protocol that every member supports; the
    one with the most votes wins (the first named, on a tie)."""
    common = set.intersection(*[{n for n, _ in m.protocols} for m in members])
    votes: dict[str, int] = {}
    for m in members:
        choice = next(n for n, _ in m.protocols if n in common)
        votes[choice] = votes.get(choice, 0) + 1
    return max(votes, key=lambda n: votes[n])


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def subscribed_topics(metadata: bytes) -> set[str] | None:
    """The topics of a ``ConsumerProtocolSubscription`` (any version: the topics come first);
    None when it does not parse."""
    try:
        pos = _I16.size
        (count,) = _I32.unpack_from(metadata, pos)
        pos += _I32.size
        if count < 0 or count > len(metadata):
            return None
        topics = set()
        for _ in range(count):
            (size,) = _I16.unpack_from(metadata, pos)
            pos += _I16.size
            if size < 0 or pos + size > len(metadata):
                return None
            topics.add(metadata[pos:pos + size].decode("utf-8"))
            pos += size
        return topics
    except (struct.error, UnicodeDecodeError):
        return None
