"""Leader imbalance per broker, and which preferred elections would fix it (pure).

Leadership drifts away from the preferred replica (the first in the assignment) whenever a
broker fails or shuts down, and does not come back by itself. Kafka's controller checks on a
timer: for each broker, the share of the partitions it should lead that someone else leads; past
`leader.imbalance.per.broker.percentage`, it runs preferred elections for those partitions that
can take one right now. This module is that check with the cluster state passed in: the
controller's timer (statemachines/handlers/rebalance.py) calls it and does the elections, and the
scheduled preferred-election job (rebalancer/jobs/tasks.py) calls it over what the coordinator
holds and requests them.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Generic, TypeVar

__all__ = [
    "DEFAULT_IMBALANCE_PERCENTAGE",
    "BrokerImbalance",
    "LeaderImbalance",
    "leader_imbalance",
]

DEFAULT_IMBALANCE_PERCENTAGE = 10
"""Kafka's default for `leader.imbalance.per.broker.percentage`."""

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerImbalance:
    """How far one broker's actual leadership is from what the assignments prefer."""

    broker: int
    preferred: int
    """Partitions whose preferred replica is this broker."""
    not_led: int
    """Of those, the ones another broker (or nobody) leads."""
    ratio: float
    imbalanced: bool
    """Whether `ratio` exceeds the configured percentage."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderImbalance(Generic[K]):
    """The per-broker picture and the partitions to run a preferred election for.

    `candidates` lists, for each imbalanced broker in broker-id order, its eligible partitions in
    the order they were given. An empty tuple means there is nothing to do.
    """

    brokers: Mapping[int, BrokerImbalance]
    candidates: tuple[K, ...]

    @property
    def ratios(self) -> dict[int, float]:
        return {broker: b.ratio for broker, b in self.brokers.items()}

    @property
    def imbalanced_brokers(self) -> tuple[int, ...]:
        return tuple(broker for broker, b in self.brokers.items() if b.imbalanced)


def leader_imbalance(
    partitions: Mapping[K, tuple[Sequence[int], int | None, Iterable[int]]],
    live: Iterable[int],
    *,
    percentage: float = DEFAULT_IMBALANCE_PERCENTAGE,
    reassigning: Collection[K] = (),
    deleting: Collection[K] = (),
) -> LeaderImbalance[K]:
    """Compute leader imbalance from `partition -> (assignment, leader, isr)`.

    A leader of None means the controller knows no leader-and-ISR for the partition yet; such a
    partition counts toward its preferred broker's total but not as misled (Kafka counts only
    partitions whose known leader differs). A leader of -1 (no leader) does count as misled.

    Partitions being deleted are left out entirely: they are going away and must not trigger
    elections or weigh on the ratios. Partitions being reassigned still count toward the ratios
    but are never candidates, since the reassignment will choose their leader itself.

    A candidate is a misled partition of an imbalanced broker whose preferred replica is live and
    in the ISR, i.e. one where a preferred election would succeed now.
    """
    if percentage < 0:
        raise ValueError(f"imbalance percentage must not be negative, got {percentage}")
    live_set = frozenset(live)
    skip_reassigning = frozenset(reassigning)
    skip_deleting = frozenset(deleting)
    threshold = percentage / 100

    totals: dict[int, int] = {}
    misled: dict[int, list[tuple[K, frozenset[int]]]] = {}
    for key, (assignment, leader, isr) in partitions.items():
        if key in skip_deleting or not assignment:
            continue
        preferred = assignment[0]
        totals[preferred] = totals.get(preferred, 0) + 1
        bucket = misled.setdefault(preferred, [])
        if leader is not None and leader != preferred:
            bucket.append((key, frozenset(isr)))

    brokers: dict[int, BrokerImbalance] = {}
    candidates: list[K] = []
    for broker in sorted(totals):
        not_led = misled[broker]
        ratio = len(not_led) / totals[broker]
        imbalanced = ratio > threshold
        brokers[broker] = BrokerImbalance(
            broker=broker,
            preferred=totals[broker],
            not_led=len(not_led),
            ratio=ratio,
            imbalanced=imbalanced,
        )
        if imbalanced and broker in live_set:
            candidates.extend(
                key for key, isr in not_led if broker in isr and key not in skip_reassigning
            )
    return LeaderImbalance(brokers=MappingProxyType(brokers), candidates=tuple(candidates))
