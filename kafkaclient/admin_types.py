"""The values :class:`kafkaclient.admin.AdminClient` answers with, and its one error.

Frozen, slotted, keyword-only: what a cluster said, checked on the way in (see
:mod:`kafkaclient.admin_checks`), so a caller never meets a replica list that names a broker
twice or a partition listed twice.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["AdminError", "BrokerNode", "ClusterInfo", "LogDirInfo", "PartitionInfo",
           "Reassignment", "ReplicaInfo", "TopicInfo"]


class AdminError(Exception):
    """What the cluster could not do, or why it could not be asked, in one line for the user;
    never a secret. ``code``: Kafka's error name (``CLUSTER_AUTHORIZATION_FAILED``) when a
    broker answered one, else None."""

    def __init__(self, message: str, *, code: str | None = None) -> None:
        line = " ".join(message.split())
        super().__init__(line if len(line) <= 1000 else line[:997] + "...")
        self.code = code


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerNode:
    """A live broker: its id, where it listens (as it advertises itself), its rack."""

    id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> tuple[str, int]:
        return (self.host, self.port)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterInfo:
    """DescribeCluster's answer (Metadata's on a broker without it)."""

    cluster_id: str | None
    controller_id: int | None
    """The broker controller-bound calls go to (in KRaft: any broker, which forwards); None
    when the cluster names none."""
    brokers: tuple[BrokerNode, ...]
    """By id."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int
    """-1: no leader."""
    leader_epoch: int
    """-1: not known (Metadata before version 7)."""
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...]
    error: str | None = None
    """Kafka's error name for this partition (``LEADER_NOT_AVAILABLE``...), None when fine."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicInfo:
    name: str
    internal: bool
    partitions: tuple[PartitionInfo, ...]
    """By partition number."""
    error: str | None = None
    """Kafka's error name for the whole topic (``LEADER_NOT_AVAILABLE`` while it is being
    created...), None when fine."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaInfo:
    """One replica in one log directory (DescribeLogDirs)."""

    topic: str
    partition: int
    size: int
    """Bytes of its segments."""
    offset_lag: int
    future: bool
    """A replica moving into this directory (AlterReplicaLogDirs), not the current one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LogDirInfo:
    path: str
    error: str | None
    """Kafka's error name (``KAFKA_STORAGE_ERROR``: an offline directory), None when fine."""
    total_bytes: int | None
    """The volume's size; None when not known (DescribeLogDirs before version 4, or -1)."""
    usable_bytes: int | None
    replicas: tuple[ReplicaInfo, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Reassignment:
    """A partition being moved (ListPartitionReassignments)."""

    replicas: tuple[int, ...]
    """The full replica set while it moves: the target and the replicas being removed."""
    adding: tuple[int, ...]
    removing: tuple[int, ...]
