"""The four partition leader elections, as pure functions.

Every election is a filter over the replica assignment: walk the replicas in a fixed order and
take the first one that passes. Keeping them pure (no I/O, no metrics, no logging) lets the
controller recompute a decision after a conflicting write, and lets tests pin Kafka's rules as
plain tables. Callers count unclean elections from `Election.unclean`, not from inside here.

What "live" means is the caller's business. For Offline, Reassign and Preferred elections Kafka
passes the brokers that are up and not shutting down; for a controlled shutdown it passes brokers
that are up *including* the ones shutting down, and names the latter separately.

These functions are also the controller's mass elections, run ten thousand times in a row: a
strategy is resolved once (:func:`elector`), the ISR given as the stored tuple and the live
brokers as a set pass through unconverted, and the results are named tuples built without
their Python-level constructor. That is why an :class:`Election` is a tuple and not a
dataclass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

__all__ = [
    "NO_LEADER",
    "ControlledShutdown",
    "Election",
    "ElectionStrategy",
    "Elector",
    "LeaderAndIsr",
    "Offline",
    "Preferred",
    "Reassign",
    "apply_election",
    "elect",
    "elect_controlled_shutdown",
    "elect_offline",
    "elect_preferred",
    "elect_reassign",
    "elector",
]

NO_LEADER = -1
"""Leader id recorded when a partition has no leader (Kafka's `LeaderAndIsr.NoLeader`)."""


class Election(NamedTuple):
    """The outcome of a successful election: who leads, and the ISR to write with it.

    `unclean` is true only when the leader was taken from outside the ISR, which can lose
    committed records; the controller counts and reports those.

    A named tuple (immutable; the ISR a tuple, as in :class:`LeaderAndIsr`): a mass election
    builds one per partition, and a frozen dataclass took several times longer to build.
    """

    leader: int
    isr: tuple[int, ...]
    unclean: bool = False


class LeaderAndIsr(NamedTuple):
    """A partition's leader and ISR as stored in its state node, with the node's version: the
    controller's value per partition (the node's content alone, as read and written, is
    `coordinator.codecs.PartitionStateNode`, the version beside it).

    `partition_epoch` is the version of that node (Kafka's zkVersion). An election does not
    change it: it is the version the conditional write expects, and the store bumps it when
    the write lands.

    A named tuple: the controller holds one per partition and builds two per election, ten
    thousand at a time in a mass election: the cheapest typed value to build.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    partition_epoch: int = 0


_tuple_new = tuple.__new__
"""Builds a named tuple from a plain one without its generated ``__new__`` (a Python call:
about a third of the time); the results below are built this way."""


def _as_set(ids: Iterable[int]) -> set[int] | frozenset[int]:
    # Membership tests run once per replica; a list or generator would make them linear (or
    # consume them), so anything that is not already a set or frozenset is copied into one.
    # (Exact type tests: a controller's live brokers are a frozenset, checked in one step.)
    kind = type(ids)
    if kind is frozenset or kind is set:
        return ids  # type: ignore[return-value]
    return frozenset(ids)


# ISRs are short tuples (at most the replication factor), so membership in them is a scan of a
# few items: cheaper than building a set per partition. Any other iterable is copied into a
# tuple once (it may be a generator).


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
    if type(isr) is not tuple:
        isr = tuple(isr)
    if type(live) is not frozenset:
        live = _as_set(live)
    for replica in assignment:
        if replica in live and replica in isr:
            return _tuple_new(Election, (replica, tuple([r for r in isr if r in live]), False))
    if unclean:
        for replica in assignment:
            if replica in live:
                return _tuple_new(Election, (replica, (replica,), True))
    return None


def elect_reassign(
    target_replicas: Sequence[int],
    isr: Iterable[int],
    live: Iterable[int],
) -> Election | None:
    """Elect a leader from the reassignment's target replicas, in target order.

    The ISR is left as is: the replicas leaving the assignment are removed from it later, by
    the reassignment itself.
    """
    if type(isr) is not tuple:
        isr = tuple(isr)
    if type(live) is not frozenset:
        live = _as_set(live)
    for replica in target_replicas:
        if replica in live and replica in isr:
            return _tuple_new(Election, (replica, isr, False))
    return None


def elect_preferred(
    assignment: Sequence[int],
    isr: Iterable[int],
    live: Iterable[int],
) -> Election | None:
    """Move leadership to the preferred replica (the head of the assignment), and only to it.

    Falling back to another replica would defeat the point: a preferred election exists to put
    leadership back where the assignment planned it. The ISR is unchanged.
    """
    if not assignment:
        return None
    if type(isr) is not tuple:
        isr = tuple(isr)
    if type(live) is not frozenset:
        live = _as_set(live)
    preferred = assignment[0]
    if preferred in live and preferred in isr:
        return _tuple_new(Election, (preferred, isr, False))
    return None


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
    if type(isr) is not tuple:
        isr = tuple(isr)
    if type(live) is not frozenset:
        live = _as_set(live)
    if type(shutting_down) is not frozenset:
        shutting_down = _as_set(shutting_down)
    for replica in assignment:
        if replica in live and replica in isr and replica not in shutting_down:
            return _tuple_new(Election, (
                replica, tuple([r for r in isr if r not in shutting_down]), False))
    return None


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
"""An election as a function of (assignment, isr, live)."""


def elector(strategy: ElectionStrategy) -> Elector:
    """The election `strategy` names as a function of (assignment, isr, live), resolved once
    for a batch of partitions: the ``elect_*`` function itself where its arguments are those
    three (Preferred, and Offline without unclean), else that function with the strategy's
    own argument bound. `Reassign` ignores the assignment: its target travels with it."""
    match strategy:
        case Offline(unclean=False):
            return elect_offline
        case Offline():
            return _unclean_offline
        case Reassign(target=target):
            def by_target(assignment: Sequence[int], isr: Iterable[int], live: Iterable[int]
                          ) -> Election | None:
                return elect_reassign(target, isr, live)

            return by_target
        case Preferred():
            return elect_preferred
        case ControlledShutdown(shutting_down=shutting_down):
            leaving = _as_set(shutting_down)

            def away_from(assignment: Sequence[int], isr: Iterable[int], live: Iterable[int]
                          ) -> Election | None:
                return elect_controlled_shutdown(assignment, isr, live, leaving)

            return away_from
    raise TypeError(f"not an election strategy: {strategy!r}")


def _unclean_offline(assignment: Sequence[int], isr: Iterable[int], live: Iterable[int]
                     ) -> Election | None:
    return elect_offline(assignment, isr, live, True)


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
    return _tuple_new(LeaderAndIsr, (election.leader, current.leader_epoch + 1, election.isr,
                                     controller_epoch, current.partition_epoch))
