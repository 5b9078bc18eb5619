"""Value types of the planning kernel: the resolved problem, per-shard statistics and quotas.

Pure: no I/O, no engine. A partition travels through the kernel as a ``Row``:
``(topic, partition, replicas, size_bytes)`` with ``size_bytes == -1`` when unknown.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field

Row = tuple[str, int, tuple[int, ...], int]


class PlanningError(ValueError):
    """The goals cannot be met on this cluster; carries one line per problem."""

    def __init__(self, problems: list[str] | tuple[str, ...]) -> None:
        self.problems: tuple[str, ...] = tuple(problems)
        super().__init__("cannot plan:\n" + "\n".join(self.problems))


@dataclass(frozen=True, slots=True, kw_only=True)
class Cluster:
    """Everything a shard needs to know about the cluster, small enough to ship to executors.

    ``rack`` maps every broker to a rack index (brokers without racks each count as rack 0 of a
    rackless cluster, ``n_racks == 1``); ``active`` are the brokers that may hold replicas.
    ``target_rf`` overrides the replication factor of the topics it names. ``rebalance`` selects
    full balancing (quotas even over the active brokers, leaders balanced) rather than the
    minimal repair (keep every legal replica, refill holes on the least-loaded brokers).
    """

    rack: Mapping[int, int]
    active: tuple[int, ...]
    n_racks: int
    target_rf: Mapping[str, int] = field(default_factory=dict)
    rebalance: bool = True
    has_sizes: bool = False
    disk_slack: float | None = None
    """Set by the disk goal: bytes per broker are evened, each broker's replica count staying
    within this fraction of its count-balanced quota."""
    seed: int = 0
    n_shards: int = 1
    receivers: frozenset[int] | None = None
    """The only brokers that may gain replicas (``AddBrokers(only_onto_them=True)``: Cruise
    Control's add_broker); the others keep or shed. None: every active broker may."""

    @property
    def disk(self) -> bool:
        """Bytes per broker are balanced (sizes known and the disk goal asked for)."""
        return self.has_sizes and self.disk_slack is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class ShardStats:
    """What one shard contributes to the global quota computation (a small aggregation).

    ``kept`` counts, per broker, the replicas that survive the hard constraints (decommission,
    duplicates, rack caps, RF decreases); ``leaders`` the partitions whose current leader
    survives; ``holes`` the replicas still to place; ``rack_cap`` how many replicas one rack can
    hold in this shard (one per partition when RF <= #racks).
    """

    shard: int
    partitions: int
    replicas: int
    holes: int
    rack_cap: int
    bytes: int
    kept: Mapping[int, int]
    leaders: Mapping[int, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class ShardQuota:
    """Targets one shard must reach: replicas and leaders per broker, and bytes per broker.

    ``leaders`` is None in minimal mode (leaders stay where they are when they can).
    """

    shard: int
    replicas: Mapping[int, int]
    leaders: Mapping[int, int] | None
    bytes: Mapping[int, float] | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ShardResult:
    """A shard's changed partitions, and how far it ended from its quotas (zero when met)."""

    shard: int
    changed: tuple[Row, ...]
    replica_residual: Mapping[int, int]
    leader_residual: Mapping[int, int]

    @property
    def exact(self) -> bool:
        return not self.replica_residual and not self.leader_residual


def shard_of(topic: str, partition: int, n_shards: int) -> int:
    """Stable shard of a partition: CRC-32 of ``topic NUL partition`` (UTF-8) mod n_shards.

    Spark computes the same value with ``crc32(concat(topic, '\\0', partition))``.
    """
    if n_shards <= 1:
        return 0
    return zlib.crc32(f"{topic}\0{partition}".encode()) % n_shards
