"""A typed client for Kafka's metadata layout over any coordinator (Kafka's KafkaZkClient).

It owns the codecs and the batched, fenced operations: every write made on behalf of a controller
is a multi (or a chunked series of multis) whose first op checks the version of
``/controller_epoch``; a failed check raises :class:`ControllerMoved` and writes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from coordinator import layout
from coordinator.base import Coordinator
from coordinator.codecs import (
    BrokerInfo,
    ControllerInfo,
    PartitionState,
    TopicAssignment,
    TopicPartition,
    decode_cluster_id,
    decode_epoch,
    decode_partitions,
    decode_reassignment,
    encode_cluster_id,
    encode_epoch,
    encode_partitions,
    encode_reassignment,
    new_kafka_uuid,
)
from coordinator.errors import (
    BadVersion,
    CoordinatorError,
    GuardFailed,
    MultiFailed,
    NodeExists,
    NoNode,
)
from coordinator.model import Check, Create, Delete, Op, OpResult, SetData, Stat
from coordinator.retry import Retry

log = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_RETRY = Retry(max_tries=5, delay=0.1, max_delay=1.0, deadline=10.0)


class ControllerMoved(CoordinatorError):
    """The controller epoch moved on: another controller was elected. Resign; write nothing."""


class ControllerExists(CoordinatorError):
    """Another broker is the controller; ``broker_id`` names it (-1 if it just went away)."""

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        super().__init__(f"broker {broker_id} is already the controller")


class BrokerIdInUse(CoordinatorError):
    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        super().__init__(f"broker id {broker_id} is already registered by another session")


class TopicExists(CoordinatorError):
    def __init__(self, topic: str) -> None:
        self.topic = topic
        super().__init__(f"topic {topic!r} already exists")


class UnknownTopic(CoordinatorError):
    def __init__(self, topic: str) -> None:
        self.topic = topic
        super().__init__(f"topic {topic!r} does not exist")


class RequestInProgress(CoordinatorError):
    """An admin request node already exists: the controller is still working on the last one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Versioned(Generic[T]):
    value: T
    version: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisteredBroker:
    info: BrokerInfo
    epoch: int
    """The broker epoch: the registration node's create id (czxid / create_revision)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerEpoch:
    """A controller's epoch and the version of ``/controller_epoch`` it wrote: the fencing token."""

    epoch: int
    version: int
    revision: int = 0
    """The store's id of that write (``Stat.modify_id``: zxid, etcd revision): a watch that
    reports ids has shown every earlier change once it reports this one or a later one."""

    def guard(self) -> Check:
        return Check(path=layout.CONTROLLER_EPOCH, version=self.version)


@dataclass(frozen=True, slots=True, kw_only=True)
class StateUpdateResult:
    """Kafka's updateLeaderAndIsr outcome: written (with the new partition epoch), to retry after
    a re-read (the partition epoch moved), or failed for another reason."""

    finished: dict[TopicPartition, int] = field(default_factory=dict)
    retry: list[TopicPartition] = field(default_factory=list)
    failed: dict[TopicPartition, CoordinatorError] = field(default_factory=dict)


class MetadataClient:
    """Kafka's ZooKeeper layout, typed, over one coordinator session."""

    def __init__(self, coordinator: Coordinator, *, retry: Retry = DEFAULT_RETRY) -> None:
        """``retry`` applies to reads, which are idempotent. Writes are never retried here: after
        a lost reply a retried create or conditional set would report a false conflict; the
        caller re-reads and decides (see :class:`StateUpdateResult`)."""
        self.coordinator = coordinator
        self.retry = retry

    def _get_many(self, paths_: Sequence[str]) -> list[tuple[bytes, Stat] | None]:
        return self.retry(self.coordinator.get_many, paths_)

    def _children(self, path: str) -> list[str]:
        return self.retry(self.coordinator.children, path)

    def _get(self, path: str) -> tuple[bytes, Stat]:
        return self.retry(self.coordinator.get, path)

    # --- set-up --------------------------------------------------------------------------

    def ensure_layout(self) -> None:
        """Create the persistent paths Kafka expects, where missing."""
        existing = self._get_many(list(layout.PERSISTENT_PATHS))
        for path, item in zip(layout.PERSISTENT_PATHS, existing, strict=True):
            if item is None:
                self.coordinator.ensure_path(path)

    def cluster_id(self) -> str:
        """The cluster id, created on first use (Kafka's ``/cluster/id``)."""
        c = self.coordinator
        try:
            return decode_cluster_id(layout.CLUSTER_ID, self._get(layout.CLUSTER_ID)[0])
        except NoNode:
            pass
        c.ensure_path(layout.CLUSTER)
        try:
            c.create(layout.CLUSTER_ID, encode_cluster_id(new_kafka_uuid()))
        except NodeExists:
            pass
        return decode_cluster_id(layout.CLUSTER_ID, self._get(layout.CLUSTER_ID)[0])

    # --- brokers -------------------------------------------------------------------------

    def register_broker(self, info: BrokerInfo) -> int:
        """Register ``info`` as an ephemeral node of this session; returns the broker epoch."""
        path = layout.broker(info.id)
        c = self.coordinator
        try:
            c.create(path, info.encode(), ephemeral=True)
        except NoNode:
            self.ensure_layout()
            c.create(path, info.encode(), ephemeral=True)
        except NodeExists:
            stat = c.exists(path)
            if stat is None or stat.ephemeral_owner != c.session_id:
                raise BrokerIdInUse(info.id) from None
            c.set(path, info.encode())
        stat = c.exists(path)
        if stat is None or stat.ephemeral_owner != c.session_id:
            raise BrokerIdInUse(info.id)
        return stat.create_id

    def broker_ids(self) -> list[int]:
        try:
            names = self._children(layout.BROKER_IDS)
        except NoNode:
            return []
        return sorted(int(n) for n in names if n.isdigit())

    def brokers(self, ids: Iterable[int] | None = None) -> dict[int, RegisteredBroker]:
        """Registered brokers with their epochs, read in one bulk call."""
        wanted = self.broker_ids() if ids is None else sorted(set(ids))
        items = self._get_many([layout.broker(i) for i in wanted])
        out: dict[int, RegisteredBroker] = {}
        for broker_id, item in zip(wanted, items, strict=True):
            if item is not None:
                data, stat = item
                info = BrokerInfo.decode(layout.broker(broker_id), data, broker_id)
                out[broker_id] = RegisteredBroker(info=info, epoch=stat.create_id)
        return out

    # --- controller ----------------------------------------------------------------------

    def controller(self) -> tuple[ControllerInfo, Stat] | None:
        try:
            data, stat = self._get(layout.CONTROLLER)
        except NoNode:
            return None
        return ControllerInfo.decode(layout.CONTROLLER, data), stat

    def controller_epoch(self) -> ControllerEpoch | None:
        try:
            data, stat = self._get(layout.CONTROLLER_EPOCH)
        except NoNode:
            return None
        return ControllerEpoch(epoch=decode_epoch(layout.CONTROLLER_EPOCH, data),
                               version=stat.version, revision=stat.modify_id)

    def register_controller(self, broker_id: int) -> ControllerEpoch:
        """Become controller: one multi creates the ephemeral ``/controller`` and bumps
        ``/controller_epoch`` at the version read. Returns the new epoch and fencing token.

        On a lost race (or an unknown outcome) the nodes are re-read and the election accepted
        only if ``/controller`` is ours at the new epoch; otherwise :class:`ControllerExists`.
        """
        c = self.coordinator
        current = self.controller_epoch()
        if current is None:
            try:
                c.create(layout.CONTROLLER_EPOCH, encode_epoch(0))
            except NodeExists:
                pass
            current = self.controller_epoch()
            assert current is not None
        new_epoch = current.epoch + 1
        info = ControllerInfo(broker_id=broker_id)
        try:
            results = c.multi([
                Create(path=layout.CONTROLLER, data=info.encode(), ephemeral=True),
                SetData(path=layout.CONTROLLER_EPOCH, data=encode_epoch(new_epoch),
                        version=current.version),
            ])
        except (MultiFailed, CoordinatorError) as exc:
            holder = self.controller()
            epoch = self.controller_epoch()
            if (holder is not None and holder[0].broker_id == broker_id
                    and holder[1].ephemeral_owner == c.session_id
                    and epoch is not None and epoch.epoch == new_epoch):
                return epoch
            raise ControllerExists(holder[0].broker_id if holder else -1) from exc
        stat = results[1]
        assert isinstance(stat, Stat)
        return ControllerEpoch(epoch=new_epoch, version=stat.version, revision=stat.modify_id)

    def resign_controller(self, epoch: ControllerEpoch) -> None:
        """Delete ``/controller`` if we still hold the epoch (fenced); otherwise do nothing."""
        try:
            self.fenced(epoch, [Delete(path=layout.CONTROLLER)])
        except (ControllerMoved, MultiFailed):
            pass

    # --- fenced writes -------------------------------------------------------------------

    def fenced(self, epoch: ControllerEpoch, ops: Sequence[Op]) -> list[OpResult]:
        """One atomic multi guarded by the controller epoch; :class:`ControllerMoved` if stale.

        Other failures raise :class:`MultiFailed` with the index into ``ops``.
        """
        try:
            results = self.coordinator.multi([epoch.guard(), *ops])
        except MultiFailed as failure:
            if failure.index == 0:
                raise ControllerMoved(
                    f"controller epoch {epoch.epoch} is stale: {failure.cause}") from failure
            raise MultiFailed(failure.index - 1, failure.cause) from failure
        return results[1:]

    def fenced_write_many(
        self, epoch: ControllerEpoch, ops: Sequence[Op]
    ) -> list[OpResult | CoordinatorError]:
        """Many independent ops in guarded chunks; one result per op (see ``write_many``)."""
        (results,) = self.fenced_write_stream(epoch, [ops])
        return results

    def fenced_write_stream(
        self, epoch: ControllerEpoch, batches: Iterable[Sequence[Op]]
    ) -> Iterator[list[OpResult | CoordinatorError]]:
        """Batches of independent ops in guarded chunks, each batch's results as soon as it is
        done (see ``write_stream``); :class:`ControllerMoved` if the epoch is stale."""
        try:
            yield from self.coordinator.write_stream(batches, guard=epoch.guard())
        except GuardFailed as failure:
            raise ControllerMoved(f"controller epoch {epoch.epoch} is stale") from failure

    # --- topics --------------------------------------------------------------------------

    def topics(self) -> list[str]:
        try:
            return self._children(layout.TOPICS)
        except NoNode:
            return []

    def create_topic(self, assignment: TopicAssignment) -> TopicAssignment:
        """Write a new topic's assignment (an admin write, like Kafka's tools: not fenced).

        A topic id is generated when missing. The controller creates the partition states.
        """
        layout.validate_topic(assignment.topic)
        if assignment.topic_id is None:
            assignment = TopicAssignment(
                topic=assignment.topic, partitions=assignment.partitions,
                topic_id=new_kafka_uuid(), adding=assignment.adding,
                removing=assignment.removing, extra=assignment.extra)
        try:
            self.coordinator.create(layout.topic(assignment.topic), assignment.encode())
        except NoNode:
            self.ensure_layout()
            self.coordinator.create(layout.topic(assignment.topic), assignment.encode())
        except NodeExists:
            raise TopicExists(assignment.topic) from None
        return assignment

    def assignments(self, topics: Iterable[str]) -> dict[str, Versioned[TopicAssignment]]:
        """Assignments of the given topics in one bulk read; absent topics are left out."""
        names = list(topics)
        items = self._get_many([layout.topic(t) for t in names])
        out: dict[str, Versioned[TopicAssignment]] = {}
        for name, item in zip(names, items, strict=True):
            if item is not None:
                data, stat = item
                out[name] = Versioned(
                    value=TopicAssignment.decode(layout.topic(name), data, name),
                    version=stat.version)
        return out

    def set_assignment(
        self, epoch: ControllerEpoch, assignment: TopicAssignment, version: int = -1
    ) -> int:
        """Replace a topic's assignment (fenced, conditional); returns the node's new version."""
        try:
            result = self.fenced(epoch, [SetData(path=layout.topic(assignment.topic),
                                                 data=assignment.encode(), version=version)])
        except MultiFailed as failure:
            raise failure.cause from None
        stat = result[0]
        assert isinstance(stat, Stat)
        return stat.version

    def partitions_of(self, topic: str) -> list[int]:
        try:
            return sorted(int(p) for p in self._children(layout.partitions(topic)))
        except NoNode:
            return []

    # --- partition states ----------------------------------------------------------------

    def partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, Versioned[PartitionState] | None]:
        """Leader and ISR of each partition, with its partition epoch, in one bulk read."""
        tps = list(partitions)
        items = self._get_many(
            [layout.partition_state(tp.topic, tp.partition) for tp in tps])
        out: dict[TopicPartition, Versioned[PartitionState] | None] = {}
        for tp, item in zip(tps, items, strict=True):
            if item is None:
                out[tp] = None
            else:
                data, stat = item
                path = layout.partition_state(tp.topic, tp.partition)
                out[tp] = Versioned(value=PartitionState.decode(path, data), version=stat.version)
        return out

    def create_partition_states(
        self, epoch: ControllerEpoch, states: Mapping[TopicPartition, PartitionState]
    ) -> dict[TopicPartition, int | CoordinatorError]:
        """Create the state nodes (and their parents) of new partitions, fenced.

        Per partition: the new partition epoch (0), or the error (e.g. NodeExists).
        """
        tps = sorted(states)
        # Parents first, in two dependent rounds; existing ones are fine.
        rounds = (
            [layout.partitions(topic) for topic in sorted({tp.topic for tp in tps})],
            [layout.partition(tp.topic, tp.partition) for tp in tps],
        )
        for round_paths in rounds:
            results = self.fenced_write_many(epoch, [Create(path=p) for p in round_paths])
            for path, result in zip(round_paths, results, strict=True):
                if isinstance(result, CoordinatorError) and not isinstance(result, NodeExists):
                    log.warning("could not create %s: %s", path, result)
        ops = [Create(path=layout.partition_state(tp.topic, tp.partition),
                      data=states[tp].encode()) for tp in tps]
        results = self.fenced_write_many(epoch, ops)
        return {tp: (r if isinstance(r, CoordinatorError) else 0)
                for tp, r in zip(tps, results, strict=True)}

    def update_partition_states(
        self,
        epoch: ControllerEpoch,
        updates: Mapping[TopicPartition, tuple[PartitionState, int]],
    ) -> StateUpdateResult:
        """Conditional writes of leader and ISR (Kafka's updateLeaderAndIsr), fenced.

        ``updates`` maps a partition to (new state, expected partition epoch). A partition whose
        epoch moved is returned for retry: re-read, recompute the pure decision, write again.
        """
        tps = list(updates)
        ops = [SetData(path=layout.partition_state(tp.topic, tp.partition),
                       data=updates[tp][0].encode(), version=updates[tp][1]) for tp in tps]
        results = self.fenced_write_many(epoch, ops)
        outcome = StateUpdateResult()
        for tp, result in zip(tps, results, strict=True):
            if isinstance(result, Stat):
                outcome.finished[tp] = result.version
            elif isinstance(result, BadVersion):
                outcome.retry.append(tp)
            elif isinstance(result, CoordinatorError):
                outcome.failed[tp] = result
        return outcome

    # --- ISR change notifications --------------------------------------------------------

    def notify_isr_change(self, partitions: Iterable[TopicPartition]) -> str:
        """Announce ISR changes (a leader's write): a persistent sequential node."""
        data = encode_partitions(partitions)
        try:
            return self.coordinator.create(layout.ISR_CHANGE_SEQUENTIAL, data, sequential=True)
        except NoNode:
            self.ensure_layout()
            return self.coordinator.create(layout.ISR_CHANGE_SEQUENTIAL, data, sequential=True)

    def isr_change_notifications(self) -> list[str]:
        """Names of pending notifications, oldest first."""
        try:
            names = self._children(layout.ISR_CHANGE_NOTIFICATION)
        except NoNode:
            return []
        return sorted(n for n in names if n.startswith(layout.ISR_CHANGE_PREFIX))

    def read_isr_change_notifications(
        self, names: Sequence[str]
    ) -> dict[str, list[TopicPartition]]:
        items = self._get_many([layout.isr_change(n) for n in names])
        return {name: decode_partitions(layout.isr_change(name), item[0])
                for name, item in zip(names, items, strict=True) if item is not None}

    def delete_isr_change_notifications(self, epoch: ControllerEpoch, names: Sequence[str]) -> None:
        self.fenced_write_many(epoch, [Delete(path=layout.isr_change(n)) for n in names])

    # --- admin: reassignment -------------------------------------------------------------

    def reassignment(self) -> Versioned[dict[TopicPartition, tuple[int, ...]]] | None:
        try:
            data, stat = self._get(layout.REASSIGN_PARTITIONS)
        except NoNode:
            return None
        return Versioned(value=decode_reassignment(layout.REASSIGN_PARTITIONS, data),
                         version=stat.version)

    def request_reassignment(self, moves: Mapping[TopicPartition, Iterable[int]]) -> None:
        """Submit a reassignment (the admin side). Fails if one is still in progress."""
        try:
            self.coordinator.create(layout.REASSIGN_PARTITIONS, encode_reassignment(moves),
                                    make_parents=True)
        except NodeExists:
            raise RequestInProgress("a partition reassignment is already in progress") from None

    def update_reassignment(
        self, epoch: ControllerEpoch, moves: Mapping[TopicPartition, Iterable[int]],
        version: int = -1,
    ) -> None:
        """The controller's rewrite of the pending moves; deletes the node when none are left."""
        if moves:
            op: Op = SetData(path=layout.REASSIGN_PARTITIONS, data=encode_reassignment(moves),
                             version=version)
        else:
            op = Delete(path=layout.REASSIGN_PARTITIONS, version=version)
        try:
            self.fenced(epoch, [op])
        except MultiFailed as failure:
            if not isinstance(failure.cause, NoNode):
                raise failure.cause from None

    # --- admin: preferred replica election -----------------------------------------------

    def preferred_election(self) -> list[TopicPartition] | None:
        try:
            data, _ = self._get(layout.PREFERRED_REPLICA_ELECTION)
        except NoNode:
            return None
        return decode_partitions(layout.PREFERRED_REPLICA_ELECTION, data)

    def request_preferred_election(self, partitions: Iterable[TopicPartition]) -> None:
        try:
            self.coordinator.create(layout.PREFERRED_REPLICA_ELECTION,
                                    encode_partitions(partitions), make_parents=True)
        except NodeExists:
            raise RequestInProgress("a preferred replica election is already in progress") from None

    def delete_preferred_election(self, epoch: ControllerEpoch) -> None:
        try:
            self.fenced(epoch, [Delete(path=layout.PREFERRED_REPLICA_ELECTION)])
        except MultiFailed as failure:
            if not isinstance(failure.cause, NoNode):
                raise failure.cause from None

    # --- admin: topic deletion -----------------------------------------------------------

    def topics_to_delete(self) -> list[str]:
        try:
            return self._children(layout.DELETE_TOPICS)
        except NoNode:
            return []

    def request_topic_deletion(self, topic: str) -> None:
        if self.coordinator.exists(layout.topic(topic)) is None:
            raise UnknownTopic(topic)
        try:
            self.coordinator.create(layout.delete_topic(topic), make_parents=True)
        except NodeExists:
            pass  # already requested

    def complete_topic_deletion(self, epoch: ControllerEpoch, topic: str) -> None:
        """Remove a deleted topic's nodes, leaves first, and its deletion request (fenced)."""
        c = self.coordinator
        partitions = self.partitions_of(topic)
        layers: list[list[str]] = [
            [layout.partition_state(topic, p) for p in partitions],
            [layout.partition(topic, p) for p in partitions],
            [layout.partitions(topic)],
            [layout.topic(topic), layout.delete_topic(topic)],
        ]
        for paths_ in layers:
            present = [p for p, item in zip(paths_, c.get_many(paths_), strict=True)
                       if item is not None]
            results = self.fenced_write_many(epoch, [Delete(path=p) for p in present])
            for result in results:
                if isinstance(result, CoordinatorError) and not isinstance(result, NoNode):
                    raise result
