"""Controller-to-broker requests as values, and the batch that records them during a transition;
the ISR changes a partition leader proposes to the controller (AlterPartition) and its answers.

A state transition never talks to brokers. It records what each broker must be told in a
`RequestBatch`; when the transition is done the controller builds the batch once and hands the
requests to the channel. Building merges everything for one broker into at most one request of
each kind, so a transition over ten thousand partitions sends each broker three requests, not
thirty thousand.

Every request carries the controller's id and epoch (brokers ignore requests from an older
controller) and the target broker's epoch (a broker ignores requests meant for an earlier
incarnation of itself, e.g. one sent just before it bounced).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import NamedTuple

from coordinator.codecs import TopicPartition, sorted_partitions
from elections.leader import LeaderAndIsr
from interbroker.errors import ErrorCode

__all__ = [
    "EPOCH_DURING_DELETE",
    "NO_EPOCH",
    "AlterPartitionResult",
    "BrokerRequest",
    "Endpoint",
    "IsrProposal",
    "LeaderAndIsrPartition",
    "LeaderAndIsrRequest",
    "LiveBroker",
    "RequestBatch",
    "StopReplicaPartition",
    "StopReplicaRequest",
    "TopicPartition",
    "UpdateMetadataPartition",
    "UpdateMetadataRequest",
]

NO_EPOCH = -1
"""Leader epoch sent in a StopReplica when the controller does not know the partition's epoch."""

_NO_IDS: Mapping[str, str] = MappingProxyType({})

EPOCH_DURING_DELETE = -2
"""Leader epoch sent in a StopReplica that deletes the partition: it overrides any epoch check."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Endpoint:
    """One listener a broker accepts connections on."""

    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveBroker:
    """A registered broker as other brokers must see it: where to reach it, which rack."""

    id: int
    endpoints: tuple[Endpoint, ...] = ()
    rack: str | None = None


class LeaderAndIsrPartition(NamedTuple):
    """What one replica's broker must know to lead or follow one partition.

    `controller_epoch` is the epoch of the controller that wrote this leader and ISR, which may
    be older than the sending controller's. `partition_epoch` is the version of the partition's
    state node. `is_new` tells the broker the partition was just created, so a missing log is
    expected rather than a sign of a lost disk.

    A named tuple, like the other per-partition values built by the ten thousand in a mass
    election (``TopicPartition``, ``Stat``): immutable, typed and the cheapest to build.
    """

    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    is_new: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: tuple[LeaderAndIsrPartition, ...]
    live_leaders: tuple[LiveBroker, ...] = ()
    """The live brokers that lead a partition in this request, so followers can reach them."""
    topic_ids: Mapping[str, str] = field(default_factory=lambda: _NO_IDS)
    """The ids (Kafka's text form) of the request's topics that have one (KIP-516)."""


class UpdateMetadataPartition(NamedTuple):
    """One partition's metadata as every broker caches it to answer clients (a named tuple, as
    :class:`LeaderAndIsrPartition`)."""

    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()

    @classmethod
    def of(
        cls,
        tp: TopicPartition,
        state: LeaderAndIsr,
        replicas: Sequence[int],
        offline_replicas: Iterable[int] = (),
    ) -> UpdateMetadataPartition:
        """The metadata for `tp` from its stored leader and ISR and its assignment."""
        return cls(tp.topic, tp.partition, state.controller_epoch, state.leader,
                   state.leader_epoch, _tuple(state.isr), state.partition_epoch,
                   _tuple(replicas), _tuple(offline_replicas))


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: tuple[UpdateMetadataPartition, ...]
    live_brokers: tuple[LiveBroker, ...]
    topic_ids: Mapping[str, str] = field(default_factory=lambda: _NO_IDS)
    """The ids (Kafka's text form) of the request's topics that have one (KIP-516)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaPartition:
    """Stop fetching or leading one partition; with `delete`, also remove its log."""

    topic: str
    partition: int
    delete: bool = False
    leader_epoch: int = NO_EPOCH


@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: tuple[StopReplicaPartition, ...]


BrokerRequest = LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest


@dataclass(frozen=True, slots=True, kw_only=True)
class IsrProposal:
    """One partition of an AlterPartition request: the ISR its leader proposes, with the
    leader epoch and partition epoch (the state node's version) it holds. ``topic`` is the
    topic's name, or its id (text) when the request names topics by id (version 2 and up)."""

    topic: str
    partition: int
    leader_epoch: int
    new_isr: tuple[int, ...]
    partition_epoch: int
    leader_recovery_state: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartitionResult:
    """The controller's answer to one :class:`IsrProposal`: the leader and ISR now stored (with
    the partition epoch), or Kafka's error code."""

    proposal: IsrProposal
    state: LeaderAndIsr | None = None
    error: ErrorCode | None = None


class RequestBatch:
    """Records what each broker must be told during one transition; builds the requests once.

    Recording is cheap and merges as it goes: a later LeaderAndIsr for the same broker and
    partition replaces the earlier one (the latest decision wins) but stays `is_new` if either
    was; a StopReplica stays a delete if either was. UpdateMetadata works as in Kafka: one set
    of partition states for the whole batch, sent to every broker that was named (or, when
    asked with `brokers=None`, to every registered broker, those in controlled shutdown too:
    Kafka's liveOrShuttingDownBrokerIds), together with the live broker list. That list
    leaves out the brokers in `shutting_down` (a leader takes no broker into its ISR that the
    latest metadata does not list live); LeaderAndIsr still finds every leader's endpoints.

    Broker ids below zero (Kafka's "no leader") are ignored. Brokers with no epoch in `build`
    are not registered any more and get nothing: a request to them could only be refused.
    Use one batch per transition.
    """

    def __init__(
        self, *, live_brokers: Iterable[LiveBroker] = (), shutting_down: Iterable[int] = ()
    ) -> None:
        self._live: dict[int, LiveBroker] = {b.id: b for b in live_brokers}
        self._shutting_down = frozenset(shutting_down)
        self._leader_and_isr: dict[int, dict[TopicPartition, LeaderAndIsrPartition]] = {}
        self._stop_replica: dict[int, dict[TopicPartition, StopReplicaPartition]] = {}
        self._metadata_brokers: set[int] = set()
        self._metadata_to_all_live = False
        self._metadata_partitions: dict[TopicPartition, UpdateMetadataPartition] = {}
        self._metadata_ordered: tuple[UpdateMetadataPartition, ...] | None = None
        self._metadata_topics: Collection[str] | None = None  # theirs, when known

    @property
    def is_empty(self) -> bool:
        return not (
            self._leader_and_isr
            or self._stop_replica
            or self._metadata_brokers
            or self._metadata_to_all_live
        )

    def add_leader_and_isr(
        self,
        brokers: Iterable[int],
        tp: TopicPartition,
        state: LeaderAndIsr,
        replicas: Sequence[int],
        is_new: bool = False,
        *,
        adding: Sequence[int] = (),
        removing: Sequence[int] = (),
    ) -> None:
        """Tell `brokers` (the partition's replicas, usually) its leader, ISR and replicas."""
        entry = LeaderAndIsrPartition(
            tp.topic, tp.partition, state.controller_epoch, state.leader, state.leader_epoch,
            _tuple(state.isr), state.partition_epoch, _tuple(replicas), _tuple(adding),
            _tuple(removing), is_new)
        by_broker = self._leader_and_isr
        for broker in brokers:
            if broker < 0:
                continue
            per_broker = by_broker.get(broker)
            if per_broker is None:
                per_broker = by_broker[broker] = {}
            previous = per_broker.get(tp)
            if previous is not None and previous.is_new and not is_new:
                per_broker[tp] = entry._replace(is_new=True)
            else:
                per_broker[tp] = entry

    def add_update_metadata(
        self,
        brokers: Iterable[int] | None,
        partitions: Iterable[UpdateMetadataPartition] = (),
    ) -> None:
        """Send the batch's metadata to `brokers`, or to every registered broker if None.

        With no partitions this still sends the live broker list, which is how brokers learn
        of a broker joining or leaving.
        """
        if brokers is None:
            self._metadata_to_all_live = True
        else:
            self._metadata_brokers.update(_valid_ids(brokers))
        self._unorder()
        for p in partitions:
            self._metadata_partitions[TopicPartition(p.topic, p.partition)] = p

    def add_update_metadata_entries(
        self,
        brokers: Iterable[int] | None,
        entries: Iterable[tuple[TopicPartition, UpdateMetadataPartition]],
    ) -> None:
        """Like :meth:`add_update_metadata`, with each entry's partition given beside it."""
        if brokers is None:
            self._metadata_to_all_live = True
        else:
            self._metadata_brokers.update(_valid_ids(brokers))
        self._unorder()
        self._metadata_partitions.update(entries)

    def add_full_metadata(
        self,
        brokers: Iterable[int] | None,
        partitions: tuple[UpdateMetadataPartition, ...],
        topics: Collection[str] | None = None,
    ) -> None:
        """Like :meth:`add_update_metadata`, with ``partitions`` already in the order
        :meth:`build` sends them (by topic, then partition) and none named twice: a failover's
        or a new broker's metadata of every partition, sent as given rather than indexed and
        sorted again (a million partitions take seconds to). ``topics``, when given, holds
        every topic of ``partitions`` (more do no harm): their ids are then looked up without
        a pass over the partitions, a twentieth of a second at a million per broker back."""
        if self._metadata_partitions or self._metadata_ordered is not None:
            self.add_update_metadata(brokers, partitions)
            return
        if brokers is None:
            self._metadata_to_all_live = True
        else:
            self._metadata_brokers.update(_valid_ids(brokers))
        self._metadata_ordered = partitions
        self._metadata_topics = topics

    def _unorder(self) -> None:
        """Index the ordered partitions by partition, before others are added to them."""
        ordered, self._metadata_ordered = self._metadata_ordered, None
        self._metadata_topics = None
        if ordered:
            self._metadata_partitions.update(
                (TopicPartition(p.topic, p.partition), p) for p in ordered)

    def add_stop_replica(
        self,
        brokers: Iterable[int],
        tp: TopicPartition,
        delete: bool,
        *,
        leader_epoch: int | None = None,
    ) -> None:
        """Tell `brokers` to stop replicating `tp`, and with `delete` to remove its log.

        The leader epoch defaults to `EPOCH_DURING_DELETE` for deletes (the replica must go
        whatever epoch it has seen) and to `NO_EPOCH` otherwise.
        """
        if leader_epoch is None:
            leader_epoch = EPOCH_DURING_DELETE if delete else NO_EPOCH
        for broker in _valid_ids(brokers):
            per_broker = self._stop_replica.setdefault(broker, {})
            previous = per_broker.get(tp)
            if previous is not None and previous.delete and not delete:
                continue  # a delete already recorded outranks a plain stop
            per_broker[tp] = StopReplicaPartition(
                topic=tp.topic, partition=tp.partition, delete=delete, leader_epoch=leader_epoch
            )

    def build(
        self,
        controller_id: int,
        controller_epoch: int,
        broker_epochs: Mapping[int, int],
        topic_id: Callable[[str], str | None] | None = None,
    ) -> dict[int, list[BrokerRequest]]:
        """One list per broker: its LeaderAndIsr, then UpdateMetadata, then StopReplica (each
        at most once, each only if recorded), in the order Kafka sends them. ``topic_id``
        gives a topic's id, which LeaderAndIsr and UpdateMetadata then carry."""

        def ids_of(parts: Iterable[LeaderAndIsrPartition | UpdateMetadataPartition],
                   topics: Collection[str] | None = None) -> Mapping[str, str]:
            if topic_id is None:
                return _NO_IDS
            names = topics if topics is not None else {p.topic for p in parts}
            found = {t: i for t in names if (i := topic_id(t))}
            return MappingProxyType(found) if found else _NO_IDS

        shutting = self._shutting_down
        live_brokers = tuple(self._live[b] for b in sorted(self._live) if b not in shutting)
        metadata_targets = set(self._metadata_brokers)
        if self._metadata_to_all_live:
            metadata_targets.update(self._live)
        metadata_partitions = self._metadata_ordered
        if metadata_partitions is None:
            metadata_partitions = tuple(self._metadata_partitions[tp] for tp in
                                        sorted_partitions(self._metadata_partitions))
        metadata_ids = (ids_of(metadata_partitions, self._metadata_topics) if metadata_targets
                        else _NO_IDS)

        targets = set(self._leader_and_isr) | metadata_targets | set(self._stop_replica)
        result: dict[int, list[BrokerRequest]] = {}
        for broker in sorted(targets):
            epoch = broker_epochs.get(broker)
            if epoch is None:
                continue
            requests: list[BrokerRequest] = []
            lai = self._leader_and_isr.get(broker)
            if lai:
                parts = tuple(lai[tp] for tp in sorted_partitions(lai))
                leaders = sorted({p.leader for p in parts if p.leader in self._live})
                requests.append(
                    LeaderAndIsrRequest(
                        controller_id=controller_id,
                        controller_epoch=controller_epoch,
                        broker_epoch=epoch,
                        partitions=parts,
                        live_leaders=tuple(self._live[b] for b in leaders),
                        topic_ids=ids_of(parts),
                    )
                )
            if broker in metadata_targets:
                requests.append(
                    UpdateMetadataRequest(
                        controller_id=controller_id,
                        controller_epoch=controller_epoch,
                        broker_epoch=epoch,
                        partitions=metadata_partitions,
                        live_brokers=live_brokers,
                        topic_ids=metadata_ids,
                    )
                )
            stop = self._stop_replica.get(broker)
            if stop:
                requests.append(
                    StopReplicaRequest(
                        controller_id=controller_id,
                        controller_epoch=controller_epoch,
                        broker_epoch=epoch,
                        partitions=tuple(stop[tp] for tp in sorted_partitions(stop)),
                    )
                )
            result[broker] = requests
        return result


def _tuple(ids: Iterable[int]) -> tuple[int, ...]:
    return ids if type(ids) is tuple else tuple(ids)


def _valid_ids(brokers: Iterable[int]) -> list[int]:
    return [b for b in brokers if b >= 0]
