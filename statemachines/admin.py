"""The admin API: what Kafka's tools did over ZooKeeper, as a library.

Requests go where the controller picks them up (topic nodes, the admin nodes), as Kafka's
AdminZkClient wrote them; nothing here needs the controller to be up except a controlled
shutdown, which goes to the active controller through the in-process network.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from coordinator.base import Coordinator
from coordinator.codecs import TopicAssignment, TopicPartition
from coordinator.errors import BadVersion
from coordinator.metadata import MetadataClient, UnknownTopic
from elections.controller_election import ControllerStatus, controller_status
from statemachines.assignment import assign_replicas, start_index_for_added_partitions
from statemachines.channel import InProcessNetwork

__all__ = ["Admin", "InvalidRequest", "PartitionDescription", "TopicDescription"]


class InvalidRequest(ValueError):
    """A request that cannot be carried out as given (nothing was written)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionDescription:
    partition: int
    replicas: tuple[int, ...]
    leader: int | None
    leader_epoch: int | None
    isr: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicDescription:
    name: str
    topic_id: str | None
    partitions: tuple[PartitionDescription, ...]
    deleting: bool = False


class Admin:
    def __init__(self, coordinator: Coordinator, network: InProcessNetwork | None = None
                 ) -> None:
        self.coordinator = coordinator
        self.metadata = MetadataClient(coordinator)
        self.network = network

    # --- topics --------------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int | None = None,
        replication_factor: int | None = None,
        *,
        assignment: Mapping[int, Sequence[int]] | None = None,
        rng: random.Random | None = None,
    ) -> TopicAssignment:
        """Create a topic from an explicit assignment, or from a partition count and
        replication factor (Kafka's rack-aware assignment over the registered brokers)."""
        if assignment is None:
            if partitions is None or replication_factor is None:
                raise InvalidRequest("give partitions and replication_factor, or an assignment")
            brokers = self.metadata.brokers()
            if not brokers:
                raise InvalidRequest("no brokers are registered")
            racks = {b: r.info.rack for b, r in brokers.items()}
            try:
                assignment = assign_replicas(racks, partitions, replication_factor, rng=rng)
            except ValueError as exc:
                raise InvalidRequest(str(exc)) from None
        else:
            _check_assignment(assignment)
            registered = set(self.metadata.broker_ids())
            unknown = sorted({b for r in assignment.values() for b in r} - registered)
            if unknown:
                raise InvalidRequest(f"unknown broker(s) in the assignment: {unknown} "
                                     f"(registered: {sorted(registered)})")
        try:
            return self.metadata.create_topic(TopicAssignment(
                topic=name, partitions={p: tuple(r) for p, r in assignment.items()}))
        except ValueError as exc:
            raise InvalidRequest(str(exc)) from None

    def add_partitions(self, topic: str, total: int, *, rng: random.Random | None = None
                       ) -> TopicAssignment:
        """Grow ``topic`` to ``total`` partitions, placed like Kafka places added ones."""
        for _ in range(5):
            current = self.metadata.assignments([topic]).get(topic)
            if current is None:
                raise UnknownTopic(topic)
            a = current.value
            have = len(a.partitions)
            if total <= have:
                raise InvalidRequest(f"topic {topic} has {have} partitions; cannot grow to "
                                     f"{total}")
            brokers = self.metadata.brokers()
            racks = {b: r.info.rack for b, r in brokers.items()}
            rf = len(a.partitions[min(a.partitions)])
            start = start_index_for_added_partitions(racks, a.partitions[0][0]) \
                if 0 in a.partitions else None
            try:
                added = assign_replicas(racks, total - have, rf, start_index=start,
                                        start_partition_id=have, rng=rng)
            except ValueError as exc:
                raise InvalidRequest(str(exc)) from None
            new = TopicAssignment(topic=topic, partitions={**a.partitions, **{
                p: tuple(r) for p, r in added.items()}}, topic_id=a.topic_id,
                adding=a.adding, removing=a.removing, extra=a.extra)
            try:
                self.coordinator.set(f"/brokers/topics/{topic}", new.encode(), current.version)
            except BadVersion:
                continue
            return new
        raise InvalidRequest(f"topic {topic} kept changing; try again")

    def list_topics(self) -> list[str]:
        return sorted(self.metadata.topics())

    def describe_topics(self, topics: Iterable[str] | None = None) -> list[TopicDescription]:
        names = sorted(self.metadata.topics()) if topics is None else list(topics)
        assignments = self.metadata.assignments(names)
        for name in names:
            if name not in assignments:
                raise UnknownTopic(name)
        tps = [TopicPartition(topic=t, partition=p)
               for t in names for p in sorted(assignments[t].value.partitions)]
        states = self.metadata.partition_states(tps)
        deleting = set(self.metadata.topics_to_delete())
        out = []
        for name in names:
            a = assignments[name].value
            parts = []
            for p in sorted(a.partitions):
                s = states.get(TopicPartition(topic=name, partition=p))
                parts.append(PartitionDescription(
                    partition=p, replicas=tuple(a.partitions[p]),
                    leader=s.value.leader if s else None,
                    leader_epoch=s.value.leader_epoch if s else None,
                    isr=tuple(s.value.isr) if s else (),
                    adding=tuple(a.adding.get(p, ())), removing=tuple(a.removing.get(p, ()))))
            out.append(TopicDescription(name=name, topic_id=a.topic_id, partitions=tuple(parts),
                                        deleting=name in deleting))
        return out

    def delete_topic(self, topic: str) -> None:
        self.metadata.request_topic_deletion(topic)

    # --- elections and reassignments -----------------------------------------------------

    def elect_preferred(self, partitions: Iterable[TopicPartition] | None = None
                        ) -> list[TopicPartition]:
        """Request preferred elections for ``partitions`` (all partitions when None)."""
        if partitions is None:
            names = self.metadata.topics()
            tps = [TopicPartition(topic=t, partition=p)
                   for t, a in self.metadata.assignments(names).items()
                   for p in a.value.partitions]
        else:
            tps = list(partitions)
            known = self.metadata.assignments({tp.topic for tp in tps})
            for tp in tps:
                if tp.topic not in known:
                    raise UnknownTopic(tp.topic)
                if tp.partition not in known[tp.topic].value.partitions:
                    raise InvalidRequest(f"partition {tp} does not exist")
        self.metadata.request_preferred_election(tps)
        return sorted(tps)

    def reassign(self, moves: Mapping[TopicPartition, Sequence[int]]) -> None:
        """Submit target replicas per partition (``/admin/reassign_partitions``)."""
        known = self.metadata.assignments({tp.topic for tp in moves})
        for tp, target in moves.items():
            if tp.topic not in known:
                raise UnknownTopic(tp.topic)
            if tp.partition not in known[tp.topic].value.partitions:
                raise InvalidRequest(f"partition {tp} does not exist")
            if not target or len(set(target)) != len(target):
                raise InvalidRequest(f"bad target replicas for {tp}: {list(target)}")
        self.metadata.request_reassignment(moves)

    def reassignments_in_progress(self) -> dict[TopicPartition, tuple[int, ...]]:
        node = self.metadata.reassignment()
        return {} if node is None else dict(node.value)

    # --- brokers and the controller ------------------------------------------------------

    def controlled_shutdown(self, broker_id: int, timeout: float = 30.0
                            ) -> tuple[TopicPartition, ...]:
        """Ask the controller to move leadership off ``broker_id`` (in-process network)."""
        from statemachines.participant import request_controlled_shutdown

        if self.network is None:
            raise InvalidRequest("controlled shutdown needs the in-process network")
        registered = self.metadata.brokers([broker_id]).get(broker_id)
        if registered is None:
            raise InvalidRequest(f"broker {broker_id} is not registered")
        return request_controlled_shutdown(self.metadata, self.network, broker_id,
                                           registered.epoch, timeout)

    def controller_status(self) -> ControllerStatus:
        return controller_status(self.metadata)


def _check_assignment(assignment: Mapping[int, Sequence[int]]) -> None:
    if not assignment:
        raise InvalidRequest("an assignment needs at least one partition")
    if sorted(assignment) != list(range(len(assignment))):
        raise InvalidRequest("partitions must be numbered 0..n-1")
    sizes = {len(r) for r in assignment.values()}
    if len(sizes) != 1 or 0 in sizes:
        raise InvalidRequest("every partition needs the same, non-zero number of replicas")
    for p, replicas in assignment.items():
        if len(set(replicas)) != len(replicas):
            raise InvalidRequest(f"partition {p} names a broker twice: {list(replicas)}")
