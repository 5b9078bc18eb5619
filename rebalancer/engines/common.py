"""From a snapshot and goals to the kernel's inputs; from the kernel's output to a Plan."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from rebalancer.plan import PartitionMove, Plan
from rebalancer.planner.goals import (
    AddBrokers,
    Balance,
    BalanceDisk,
    ChangeReplicationFactor,
    Decommission,
    Goal,
    RepairRacks,
)
from rebalancer.planner.model import Cluster, PlanningError, Row
from rebalancer.snapshot import Snapshot, SnapshotError, snapshot_problems

# Partitions per shard. Shards are the unit of parallel work (one Spark task each) and both
# engines cut the same shards, so they give the same plan. 50k partitions solve in ~1-3 s.
DEFAULT_SHARD_SIZE = 50_000


def build_cluster(snap: Snapshot, goals: Iterable[Goal] = (), *, seed: int = 0,
                  shard_size: int = DEFAULT_SHARD_SIZE) -> Cluster:
    """Resolve goals against a snapshot; SnapshotError / PlanningError list every problem."""
    problems = snapshot_problems(snap)
    if problems:
        raise SnapshotError(problems)
    goals = tuple(goals) or (Balance(),)
    ids = set(snap.broker_ids)
    topics = {p.topic for p in snap.partitions}
    leaving = set(snap.decommission)
    target_rf: dict[str, int] = {}
    disk_slack: float | None = None
    receivers: set[int] | None = None
    errors: list[str] = []
    for g in goals:
        match g:
            case Decommission(brokers=bs):
                errors += [f"cannot decommission unknown broker {b}" for b in sorted(bs - ids)]
                leaving |= bs & ids
            case AddBrokers(brokers=bs, only_onto_them=only):
                errors += [f"cannot add broker {b}: not in the snapshot" for b in sorted(bs - ids)]
                if only:
                    receivers = (receivers or set()) | (bs & ids)
            case ChangeReplicationFactor(topics=pairs):
                for t, rf in pairs:
                    if t not in topics:
                        errors.append(f"topic {t} does not exist")
                    elif rf < 1:
                        errors.append(f"topic {t}: replication factor must be >= 1, got {rf}")
                    else:
                        target_rf[t] = rf
            case BalanceDisk(count_slack=slack):
                if not 0.0 <= slack < 1.0:
                    errors.append(f"disk goal: count slack must be in [0, 1), got {slack}")
                else:
                    disk_slack = slack
            case Balance() | RepairRacks():
                pass
    active = tuple(sorted(ids - leaving))
    if not active:
        errors.append("no broker is left to hold replicas")
    if receivers is not None and not receivers & set(active):
        errors.append("no broker to add is left to take replicas")
    errors += [f"topic {t}: replication factor {rf} exceeds the {len(active)} brokers left"
               for t, rf in sorted(target_rf.items()) if rf > len(active)]
    if not errors:
        widest = max((len(p.replicas) for p in snap.partitions if p.topic not in target_rf),
                     default=0)
        if widest > len(active):
            errors.append(f"replication factor {widest} exceeds the {len(active)} brokers left")
    if errors:
        raise PlanningError(errors)
    rack_names = {b.id: b.rack for b in snap.brokers}
    if any(r is None for r in rack_names.values()):
        rack = {b: 0 for b in ids}
        n_racks = 1
    else:
        named = {b: r for b, r in rack_names.items() if r is not None}  # all, as checked above
        names = sorted({named[b] for b in active})
        names += sorted({r for r in named.values() if r not in names})
        index = {r: i for i, r in enumerate(names)}
        rack = {b: index[r] for b, r in named.items()}
        n_racks = len({rack[b] for b in active})
    return Cluster(
        rack=rack, active=active, n_racks=n_racks, target_rf=target_rf,
        rebalance=any(isinstance(g, Balance | BalanceDisk | AddBrokers | Decommission)
                      for g in goals),
        has_sizes=snap.has_sizes, disk_slack=disk_slack, seed=seed,
        n_shards=max(1, math.ceil(len(snap.partitions) / max(1, shard_size))),
        receivers=None if receivers is None else frozenset(receivers & set(active)),
    )


def snapshot_rows(snap: Snapshot) -> list[Row]:
    return [(p.topic, p.partition, p.replicas, -1 if p.size_bytes is None else p.size_bytes)
            for p in snap.partitions]


def plan_of(changed: Sequence[Row]) -> Plan:
    return Plan(partitions=tuple(PartitionMove(topic=t, partition=n, replicas=tuple(r))
                                 for t, n, r, _ in changed))
