"""The four partition leader elections, as pure functions.

Every election is a filter over the replica assignment: walk the replicas in a fixed order and
take the first one that passes. Keeping them pure (no I/O, no metrics, no logging) lets the
controller recompute a decision after a conflicting write, and lets tests pin Kafka's rules as
plain tables. Callers count unclean elections from `Election.unclean`, not from inside here.

What "live" means is the caller's business. For Offline, Reassign and Preferred elections Kafka
passes the brokers that are up and not shutting down; for a controlled shutdown it passes brokers
that are up *including* the ones shutting down, and names the latter separately.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import NamedTuple

__all__ = [
    "NO_LEADER",
    "ControlledShutdown",
    "Election",
    "ElectionStrategy",
    "LeaderAndIsr",
    "Offline",
    "Preferred",
    "Reassign",
    "Choice",
    "Chooser",
    "apply_choice",
    "apply_election",
    "chooser",
    "elect",
    "elector",
    "Elector",
    "elect_controlled_shutdown",
    "elect_offline",
    "elect_preferred",
    "elect_reassign",
]

NO_LEADER = -1
"""Leader id recorded when a partition has no leader (Kafka's `LeaderAndIsr.NoLeader`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Election:
    """The outcome of a successful election: who leads, and the ISR to write with it.

    `unclean` is true only when the leader was taken from outside the ISR, which can lose
    committed records; the controller counts and reports those.
    """

    leader: int
    isr: list[int] = field(default_factory=list)
    unclean: bool = False


class LeaderAndIsr(NamedTuple):
    """A partition's leader and ISR as stored in its state node.

    `partition_epoch` is the version of that node (Kafka's zkVersion). An election does not
    change it: it is the version the conditional write expects, and the store bumps it when
    the write lands.

    A named tuple: the controller holds one per partition and builds two per election, ten
    thousand at a time in a mass election, several times faster than a frozen dataclass.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    partition_epoch: int = 0


Choice = tuple[int, tuple[int, ...], bool]
"""What an election decides, as the controller's mass elections carry it: (leader, new ISR,
unclean). The public functions below wrap it in an :class:`Election`; a mass election takes it
as it is, through :func:`chooser` and :func:`apply_choice`, without that object per partition."""

Chooser = Callable[[Sequence[int], tuple[int, ...], Collection[int]], "Choice | None"]
"""An election as a function of (assignment, ISR as a tuple, live brokers as a set)."""


def _as_set(ids: Iterable[int]) -> Collection[int]:
    # Membership tests run once per replica; a list or generator would make them linear (or
    # consume them), so anything that is not already a set or frozenset is copied into one.
    return ids if isinstance(ids, set | frozenset) else frozenset(ids)


def _election(choice: Choice | None) -> Election | None:
    if choice is None:
        return None
    return Election(leader=choice[0], isr=list(choice[1]), unclean=choice[2])


# The rules, once each. ISRs are short tuples (at most the replication factor), so membership
# in them is a scan of a few items: cheaper than building a set per partition.


def _offline(unclean: bool, assignment: Sequence[int], isr: tuple[int, ...],
             live: Collection[int]) -> Choice | None:
    for replica in assignment:
        if replica in live and replica in isr:
            return replica, tuple([r for r in isr if r in live]), False
    if unclean:
        for replica in assignment:
            if replica in live:
                return replica, (replica,), True
    return None


def _reassign(target: Sequence[int], assignment: Sequence[int], isr: tuple[int, ...],
              live: Collection[int]) -> Choice | None:
    for replica in target:
        if replica in live and replica in isr:
            return replica, isr, False
    return None


def _preferred(assignment: Sequence[int], isr: tuple[int, ...],
               live: Collection[int]) -> Choice | None:
    if assignment:
        preferred = assignment[0]
        if preferred in live and preferred in isr:
            return preferred, isr, False
    return None


def _controlled_shutdown(leaving: Collection[int], assignment: Sequence[int],
                         isr: tuple[int, ...], live: Collection[int]) -> Choice | None:
    for replica in assignment:
        if replica in live and replica in isr and replica not in leaving:
            return replica, tuple([r for r in isr if r not in leaving]), False
    return None


def elect_offline(
    assignment: Sequence[int],
    isr: Iterable[int],
    live: Iterable[int],
    unclean: bool = False,
) -> Election | None:
    """Elect a leader for a new or offline partition.

    Prefer the first assigned replica that is live and in the ISR; the new ISR is the old one
    with dead brokers dropped, in its old order. Only if none qualifies and unclean election is
    allowed, take the first live assigned replica and restart the ISR with it alone: its log is
    the only one known to be consistent with itself.
    """
    return _election(_offline(unclean, assignment, tuple(isr), _as_set(live)))


def elect_reassign(
    target_replicas: Sequence[int],
    isr: Iterable[int],
    live: Iterable[int],
) -> Election | None:
    """Elect a leader from the reassignment's target replicas, in target order.

    The ISR is left as is: the replicas leaving the assignment are removed from it later, by
    the reassignment itself.
    """
    return _election(_reassign(target_replicas, (), tuple(isr), _as_set(live)))


def elect_preferred(
    assignment: Sequence[int],
    isr: Iterable[int],
    live: Iterable[int],
) -> Election | None:
    """Move leadership to the preferred replica (the head of the assignment), and only to it.

    Falling back to another replica would defeat the point: a preferred election exists to put
    leadership back where the assignment planned it. The ISR is unchanged.
    """
    return _election(_preferred(assignment, tuple(isr), _as_set(live)))


def elect_controlled_shutdown(
    assignment: Sequence[int],
    isr: Iterable[int],
    live: Iterable[int],
    shutting_down: Iterable[int],
) -> Election | None:
    """Move leadership off brokers that are shutting down.

    Shutting-down brokers are still live (they serve until told to stop) but may neither lead
    nor stay in the ISR, so the new ISR is the old one minus every one of them. Nothing else is
    dropped from the ISR: a broker that is down entirely is the offline election's concern.
    """
    return _election(_controlled_shutdown(_as_set(shutting_down), assignment, tuple(isr),
                                          _as_set(live)))


# The strategies as a closed tagged union, so the controller can carry "which election" as data
# (in events, in retries) and dispatch in one place.


@dataclass(frozen=True, slots=True, kw_only=True)
class Offline:
    """Elect for a new or offline partition; `unclean` allows a leader from outside the ISR."""

    unclean: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Reassign:
    """Elect from a reassignment's target replicas, in their order."""

    target: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Preferred:
    """Elect the preferred (first assigned) replica or nobody."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlledShutdown:
    """Elect away from the brokers in `shutting_down`, which still count as live."""

    shutting_down: frozenset[int] = frozenset()


ElectionStrategy = Offline | Reassign | Preferred | ControlledShutdown


Elector = Callable[[Sequence[int], Iterable[int], Iterable[int]], "Election | None"]


def chooser(strategy: ElectionStrategy) -> Chooser:
    """The election `strategy` names as a :data:`Chooser`, resolved once for a batch of
    partitions (the ISR must be a tuple and the live brokers a set). `Reassign` ignores the
    assignment: its target travels with it."""
    match strategy:
        case Offline(unclean=unclean):
            return partial(_offline, unclean)
        case Reassign(target=target):
            return partial(_reassign, target)
        case Preferred():
            return _preferred
        case ControlledShutdown(shutting_down=shutting_down):
            return partial(_controlled_shutdown, _as_set(shutting_down))
    raise TypeError(f"not an election strategy: {strategy!r}")


def elector(strategy: ElectionStrategy) -> Elector:
    """The election `strategy` names as a function of (assignment, isr, live) giving an
    :class:`Election`, resolved once for a batch of partitions."""
    choose = chooser(strategy)

    def run(assignment: Sequence[int], isr: Iterable[int], live: Iterable[int]) -> Election | None:
        return _election(choose(assignment, tuple(isr), _as_set(live)))

    return run


def elect(
    strategy: ElectionStrategy,
    assignment: Sequence[int],
    isr: Iterable[int],
    live: Iterable[int],
) -> Election | None:
    """Run the election `strategy` names. `assignment` is ignored by `Reassign`, whose target
    replicas travel with the strategy."""
    return elector(strategy)(assignment, isr, live)


def apply_election(
    current: LeaderAndIsr, election: Election, controller_epoch: int
) -> LeaderAndIsr:
    """The leader-and-ISR value to write after `election`.

    Every applied election bumps the leader epoch by one, even when the leader stays the same
    (a controlled shutdown may only shrink the ISR): followers and clients fence stale leaders
    by that epoch, so any change decided by the controller must be visible in it. The
    controller epoch records which controller made the decision.
    """
    return apply_choice(current, (election.leader, tuple(election.isr), election.unclean),
                        controller_epoch)


def apply_choice(current: LeaderAndIsr, choice: Choice, controller_epoch: int) -> LeaderAndIsr:
    """:func:`apply_election` for a :data:`Choice`."""
    return LeaderAndIsr(choice[0], current.leader_epoch + 1, choice[1], controller_epoch,
                        current.partition_epoch)
