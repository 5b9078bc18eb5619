"""What a plan should achieve: a closed set of goals, as a tagged union.

Every plan honours the hard constraints (no replica on a broker being removed, no broker twice in
a partition, rack-aware placement, RF unchanged unless asked). ``Balance``, ``AddBrokers`` and
``Decommission`` make the planner rebalance the whole cluster: replicas and leaders even, and
when sizes are known the smallest replicas moving, so that as few bytes as count balance allows
are copied. ``BalanceDisk`` evens bytes per broker instead, letting replica counts stray by a
stated slack. ``ChangeReplicationFactor`` and ``RepairRacks`` alone only change what they must,
placing the new replicas on the least-loaded brokers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class Balance:
    """Even replicas and leaders per broker with the fewest moves (and, with sizes, the fewest
    bytes moved)."""


DEFAULT_COUNT_SLACK = 0.05


@dataclass(frozen=True, slots=True, kw_only=True)
class BalanceDisk:
    """Even bytes per broker; each broker's replica count stays within ``count_slack`` (a
    fraction) of its count-balanced quota, and leaders stay balanced. Without sizes this is
    ``Balance``."""

    count_slack: float = DEFAULT_COUNT_SLACK


@dataclass(frozen=True, slots=True, kw_only=True)
class AddBrokers:
    """Spread load onto new, empty brokers (default: the snapshot's ``new_brokers``).

    With ``only_onto_them`` the other brokers gain no replica: every replica that moves moves
    onto one of ``brokers`` (Cruise Control's add_broker), the others only shed; else the
    whole cluster is rebalanced with them."""

    brokers: frozenset[int] = frozenset()
    only_onto_them: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Decommission:
    """Drain these brokers (in addition to the snapshot's ``decommission`` list)."""

    brokers: frozenset[int]


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangeReplicationFactor:
    """Set the replication factor of the named topics: ``((topic, rf), ...)``."""

    topics: tuple[tuple[str, int], ...]

    @classmethod
    def of(cls, topics: Mapping[str, int]) -> ChangeReplicationFactor:
        return cls(topics=tuple(sorted(topics.items())))


@dataclass(frozen=True, slots=True, kw_only=True)
class RepairRacks:
    """Fix partitions that span fewer racks than min(RF, #racks)."""


Goal = Balance | BalanceDisk | AddBrokers | Decommission | ChangeReplicationFactor | RepairRacks
