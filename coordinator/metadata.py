"""A typed client for Kafka's metadata layout over any coordinator (Kafka's KafkaZkClient).

It owns the codecs and the batched, fenced operations: every write made on behalf of a controller
is a multi (or a chunked series of multis) whose first op checks the version of
``/controller_epoch``; a failed check raises :class:`ControllerMoved` and writes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence

from coordinator import layout
from coordinator.codecs import (
    BrokerInfo,
    ControllerInfo,
    CorruptMetadata,
    PartitionStateNode,
    TopicAssignment,
    TopicPartition,
    decode_cluster_id,
    decode_epoch,
    decode_partitions,
    encode_cluster_id,
    encode_entity_config,
    encode_epoch,
    encode_partitions,
    new_kafka_uuid,
)
from coordinator.errors import (
    BadVersion,
    CoordinatorError,
    MultiFailed,
    NodeExists,
    NoNode,
)
from coordinator.metadata_admin import AdminNodes
from coordinator.metadata_base import (
    DEFAULT_RETRY,
    AssignmentTooLarge,
    BrokerIdInUse,
    ControllerEpoch,
    ControllerExists,
    ControllerMoved,
    MetadataBase,
    ProducerIdsExhausted,
    ReassignmentClaimLost,
    RegisteredBroker,
    RequestInProgress,
    StateUpdateResult,
    TopicExists,
    UnknownTopic,
    Versioned,
)
from coordinator.metadata_configs import ConfigNodes
from coordinator.model import Create, Delete, Op, SetData, Stat, op_size

__all__ = ["DEFAULT_RETRY", "AssignmentTooLarge", "BrokerIdInUse", "ControllerEpoch", "ControllerExists",
           "ControllerMoved", "MetadataBase", "MetadataClient", "ProducerIdsExhausted",
           "ReassignmentClaimLost", "RegisteredBroker", "RequestInProgress", "StateUpdateResult",
           "TopicExists", "UnknownTopic", "Versioned"]

log = logging.getLogger(__name__)


class MetadataClient(ConfigNodes, AdminNodes):
    """Kafka's ZooKeeper layout, typed, over one coordinator session."""

    def cluster_id(self) -> str:
        """The cluster id, created on first use (Kafka's ``/cluster/id``: a random UUID in
        Kafka's text form). An existing id is never replaced: of concurrent first starts, one
        create wins and every caller returns its id."""
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

    def init_broker(self) -> str:
        """What a Kafka broker does on the coordinator before it registers: create the
        persistent paths where missing, then read the cluster id (the first broker of a
        cluster creates it). Returns the cluster id."""
        self.ensure_layout()
        return self.cluster_id()

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

    # --- topics --------------------------------------------------------------------------

    def topics(self) -> list[str]:
        """The topic nodes' names. Where a listing would read every partition node below
        them (etcd), it reads around the subtrees of the names of the topic configs, which
        Kafka writes before each topic's node (one short listing more)."""
        c = self.coordinator
        try:
            if not c.capabilities.listing_reads_subtrees:
                return self._children(layout.TOPICS)
            try:
                likely = self._children(layout.CONFIG_TOPICS)
            except NoNode:
                likely = []
            return self.retry(c.children_hinted, layout.TOPICS, likely)
        except NoNode:
            return []

    def create_topic(self, assignment: TopicAssignment,
                     config: Mapping[str, str] | None = None) -> TopicAssignment:
        """Write a new topic: its config (``/config/topics/<t>``, ``{"version":1,"config":{}}``
        without overrides) and its assignment, in one atomic multi. An admin write, like
        Kafka's tools: not fenced. Kafka writes the config first, then the assignment; here
        the controller never sees a topic without its config, nor a failed create leave one.

        A topic id is generated when missing. The controller creates the partition states.
        A config node left over from elsewhere is replaced, as Kafka's create does.
        ValueError for a name Kafka would refuse; :class:`AssignmentTooLarge` when the encoded
        assignment does not fit in one node of this coordinator (nothing is sent).
        """
        layout.validate_topic(assignment.topic)
        if assignment.topic_id is None:
            assignment = TopicAssignment(
                topic=assignment.topic, partitions=assignment.partitions,
                topic_id=new_kafka_uuid(), adding=assignment.adding,
                removing=assignment.removing, extra=assignment.extra)
        c = self.coordinator
        topic_path, config_path = layout.topic(assignment.topic), layout.topic_config(
            assignment.topic)
        data, config_data = assignment.encode(), encode_entity_config(config or {})
        self._check_assignment_size(assignment, topic_path, data)
        for _ in range(5):
            stale = c.exists(config_path)
            config_op: Op = (Create(path=config_path, data=config_data) if stale is None
                             else SetData(path=config_path, data=config_data,
                                          version=stale.version))
            try:
                c.multi([Create(path=topic_path, data=data), config_op])
                return assignment
            except MultiFailed as failure:
                cause = failure.cause
                if failure.index == 0 and isinstance(cause, NodeExists):
                    raise TopicExists(assignment.topic) from None
                if isinstance(cause, NoNode) and (failure.index == 0 or stale is None):
                    self.ensure_layout()  # a parent is missing
                elif not isinstance(cause, (NodeExists, NoNode, BadVersion)):
                    raise cause from None
                # else: the config node changed meanwhile: look again
        raise CoordinatorError(f"{config_path} kept changing: try creating the topic again")

    def replace_topic(self, assignment: TopicAssignment, version: int) -> int:
        """An admin's rewrite of a topic's assignment (partitions added), conditional on the
        version read, not fenced (as Kafka's tools wrote it); returns the new version.
        BadVersion when it changed since; :class:`AssignmentTooLarge` as for create_topic."""
        layout.validate_topic(assignment.topic)
        path, data = layout.topic(assignment.topic), assignment.encode()
        self._check_assignment_size(assignment, path, data)
        return self.coordinator.set(path, data, version).version

    def _check_assignment_size(self, assignment: TopicAssignment, path: str, data: bytes
                               ) -> None:
        """A node over the backend's request limit is not refused by it cleanly: ZooKeeper
        drops the connection (jute.maxbuffer) and the write looks like connection loss."""
        caps = self.coordinator.capabilities
        if op_size(Create(path=path, data=data)) > caps.max_multi_bytes:
            raise AssignmentTooLarge(
                f"topic {assignment.topic}: the assignment of {len(assignment.partitions):,} "
                f"partitions is {len(data):,} bytes encoded, more than one {caps.name} node "
                f"holds ({caps.max_multi_bytes:,} bytes): use fewer partitions or replicas")

    def assignments(
        self, topics: Iterable[str], *,
        on_corrupt: Callable[[str, CorruptMetadata], None] | None = None,
    ) -> dict[str, Versioned[TopicAssignment]]:
        """Assignments of the given topics in one bulk read; absent topics are left out.
        A malformed node (another tool's) raises CorruptMetadata, or with ``on_corrupt`` is
        left out too and handed to it."""
        names = list(topics)
        items = self._get_many([layout.topic(t) for t in names])
        out: dict[str, Versioned[TopicAssignment]] = {}
        for name, item in zip(names, items, strict=True):
            if item is not None:
                data, stat = item
                try:
                    value = TopicAssignment.decode(layout.topic(name), data, name)
                except CorruptMetadata as exc:
                    if on_corrupt is None:
                        raise
                    on_corrupt(name, exc)
                    continue
                out[name] = Versioned(value=value, version=stat.version)
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

    # --- partition states ----------------------------------------------------------------

    def partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, Versioned[PartitionStateNode] | None]:
        """Leader and ISR of each partition, with its partition epoch, in one bulk read."""
        tps = list(partitions)
        items = self._get_many(layout.partition_states(tps))
        out: dict[TopicPartition, Versioned[PartitionStateNode] | None] = {}
        for tp, item in zip(tps, items, strict=True):
            if item is None:
                out[tp] = None
            else:
                data, stat = item
                path = layout.partition_state(tp.topic, tp.partition)
                out[tp] = Versioned(value=PartitionStateNode.decode(path, data),
                                    version=stat.version)
        return out

    def create_partition_states(
        self, epoch: ControllerEpoch, states: Mapping[TopicPartition, PartitionStateNode]
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
        updates: Mapping[TopicPartition, tuple[PartitionStateNode, int]],
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
