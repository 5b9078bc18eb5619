"""What a partition replica reports of itself: its role, a consistent snapshot of its state
(:class:`ReplicaStatus`, for metadata answers and tests), and the ISR changes a leader wrote
(:class:`IsrCounts`, for the metrics). Kept apart from :mod:`replication.partition`, which
re-exports them."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from coordinator.codecs import TopicPartition

__all__ = ["IsrCounts", "ReplicaStatus", "Role"]


class Role(Enum):
    NONE = "none"
    LEADER = "leader"
    FOLLOWER = "follower"


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaStatus:
    """A consistent snapshot of a partition, for metadata answers and tests."""

    tp: TopicPartition
    role: Role
    leader: int
    leader_epoch: int
    partition_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    local_log_start_offset: int = -1
    """The first offset on local disk (below it, a tiered log's records are remote)."""
    leading_since: int = -1
    """The leader epoch this replica's present leadership began at, kept through later epochs
    it goes on leading at (an ISR change, a reassignment); -1 when it does not lead. What
    Kafka's group and transaction coordinators key their loads by: a broker that stays leader
    keeps its coordinator state."""


class IsrCounts:
    """The ISR shrinks and expands this leader wrote, over all the partitions that share it
    (Kafka's IsrShrinksPerSec and IsrExpandsPerSec): a write that drops a replica is a shrink,
    one that adds a replica an expand. Counts only grow (read by the metrics, from another
    thread)."""

    __slots__ = ("expands", "shrinks")

    def __init__(self) -> None:
        self.shrinks = 0
        self.expands = 0
