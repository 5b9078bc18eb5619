"""The controller's events: frozen values, the only thing watches, timers and callers hand it.

Watch callbacks, session listeners, timers, broker responses and API calls never touch controller
state; they build one of these and enqueue it. The event thread is the only one that acts. Events
that carry a ``reply`` future are requests: if the controller resigns before answering, the
future fails with :class:`~elections.NotController`.

Node events carry the state the watch reported (data and stat, or None when the node is gone),
so a standby keeps its view warm without reading anything back.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from coordinator.codecs import TopicPartition
from coordinator.model import SessionState, Stat
from interbroker.requests import IsrProposal

__all__ = [
    "AlterPartitionRequested",
    "AutoRebalanceTick",
    "BrokerIdsChanged",
    "BrokerNodeChanged",
    "ControlledShutdownLeadersMoved",
    "ControlledShutdownRequested",
    "ControllerEvent",
    "ControllerNodeChanged",
    "DeleteTopicsChanged",
    "IsrChangeNotified",
    "PartitionStatesPending",
    "PreferredElectionChanged",
    "ReassignmentChanged",
    "ReplicaDeletionFinished",
    "SessionChanged",
    "StandbyQuiet",
    "Stand",
    "TopicConfigChanged",
    "TopicNodeChanged",
    "TopicsChanged",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Stand:
    """Try to become the controller (at start, after a resignation, after /controller went)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionChanged:
    state: SessionState


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerNodeChanged:
    """``/controller`` changed: data and stat of the new holder, or None when it is gone."""

    data: bytes | None
    stat: Stat | None


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerIdsChanged:
    ids: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerNodeChanged:
    """One broker registration; a new ``stat.create_id`` is a new broker epoch (a bounce)."""

    broker_id: int
    data: bytes | None
    stat: Stat | None


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicsChanged:
    topics: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicNodeChanged:
    """A topic's assignment node: new topic, added partitions, reassignment progress, deletion."""

    topic: str
    data: bytes | None
    stat: Stat | None


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionStatesPending:
    """Watched leader-and-ISR nodes changed: the states wait in the controller's buffer (the
    latest per partition), to be applied together. One such event is queued whenever the
    buffer stops being empty, so a mass election costs the standby one event, not 10,000."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StandbyQuiet:
    """A standby's view may have gone quiet since its last change: time to see whether its
    failover's metadata is to be made ready (:class:`~statemachines.full_metadata.Preparation`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class IsrChangeNotified:
    """Children of ``/isr_change_notification`` changed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReassignmentChanged:
    """``/admin/reassign_partitions`` changed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PreferredElectionChanged:
    """``/admin/preferred_replica_election`` changed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteTopicsChanged:
    """Children of ``/admin/delete_topics`` changed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicConfigChanged:
    """A config change notification named this topic (``/config/changes``)."""

    topic: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AutoRebalanceTick:
    """The leader-imbalance timer fired."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaDeletionFinished:
    """A broker answered a StopReplica with delete: which replicas it removed, which it could
    not. ``controller_epoch`` is the epoch that sent it; answers to an older epoch are dropped."""

    broker_id: int
    controller_epoch: int
    deleted: tuple[TopicPartition, ...] = ()
    failed: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlledShutdownRequested:
    """A broker asks to shut down; ``reply`` gets the partitions it still leads."""

    broker_id: int
    broker_epoch: int
    reply: Future[Any] = field(default_factory=Future, compare=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlledShutdownLeadersMoved:
    """The brokers have answered a controlled shutdown's leadership move (or stopped being
    waited for): its second step, the broker's follower replicas, comes next; ``reply`` is
    the request's. ``controller_epoch`` is the term that moved them: another term's is
    refused with NotController, and the broker asks again."""

    broker_id: int
    broker_epoch: int
    controller_epoch: int
    followed: tuple[TopicPartition, ...]
    """The partitions it followed (did not lead) when the first step began."""
    reply: Future[Any] = field(compare=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderElectionRequested:
    """An admin's request for preferred (or, ``unclean``, offline out-of-sync) elections of
    ``partitions`` (Kafka's ReplicaLeaderElection with AdminClientTriggered); ``reply`` gets
    the result per partition
    (:class:`~statemachines.handlers.elect_leaders.AdminElectionResult`)."""

    partitions: tuple[TopicPartition, ...]
    unclean: bool = False
    reply: Future[Any] = field(default_factory=Future, compare=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartitionRequested:
    """A partition leader's AlterPartition (KIP-497, what Kafka's brokers send their controller
    from ``inter.broker.protocol.version`` 2.7 on); ``reply`` gets an
    :class:`~interbroker.requests.AlterPartitionResult` per proposal."""

    broker_id: int
    broker_epoch: int
    proposals: tuple[IsrProposal, ...]
    version: int = 3
    """The request's version: from 2 on, topics are named by id."""
    reply: Future[Any] = field(default_factory=Future, compare=False)


ControllerEvent = (
    Stand
    | SessionChanged
    | ControllerNodeChanged
    | BrokerIdsChanged
    | BrokerNodeChanged
    | TopicsChanged
    | TopicNodeChanged
    | PartitionStatesPending
    | StandbyQuiet
    | IsrChangeNotified
    | ReassignmentChanged
    | PreferredElectionChanged
    | DeleteTopicsChanged
    | TopicConfigChanged
    | AutoRebalanceTick
    | ReplicaDeletionFinished
    | ControlledShutdownRequested
    | ControlledShutdownLeadersMoved
    | LeaderElectionRequested
    | AlterPartitionRequested
)

VIEW_EVENTS = (BrokerIdsChanged, BrokerNodeChanged, TopicsChanged, TopicNodeChanged,
               PartitionStatesPending, ControllerNodeChanged)
"""Events that only refresh the view of the store: applied even while draining on resignation."""
