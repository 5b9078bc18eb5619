"""A typed client for Kafka's metadata layout over any coordinator (Kafka's KafkaZkClient).

It owns the codecs and the batched, fenced operations: every write made on behalf of a controller
is a multi (or a chunked series of multis) whose first op checks the version of
``/controller_epoch``; a failed check raises :class:`ControllerMoved` and writes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from coordinator import layout
from coordinator.base import Coordinator
from coordinator.codecs import (
    PRODUCER_ID_BLOCK_SIZE,
    BrokerInfo,
    ControllerInfo,
    CorruptMetadata,
    PartitionStateNode,
    ProducerIdBlock,
    ReassignmentOwner,
    TopicAssignment,
    TopicPartition,
    decode_cluster_id,
    decode_config_change,
    decode_entity_config,
    decode_epoch,
    decode_partitions,
    decode_reassignment,
    encode_cluster_id,
    encode_config_change,
    encode_entity_config,
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
    RequestTooLarge,
)
from coordinator.model import Check, Create, Delete, Op, OpResult, SetData, Stat, op_size
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


class AssignmentTooLarge(RequestTooLarge):
    """A topic's assignment would not fit in one node of the coordinator."""


class RequestInProgress(CoordinatorError):
    """An admin request node already exists: the controller is still working on the last one."""


class ReassignmentClaimLost(CoordinatorError):
    """The owner node of a run executing a reassignment is gone (its session ended): it must
    claim the node again before writing it."""


class ProducerIdsExhausted(CoordinatorError):
    """The next producer id block would pass the largest 64-bit id (Kafka's fatal error)."""


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

    def topic_config(self, topic: str) -> dict[str, str] | None:
        """A topic's config overrides (``/config/topics/<t>``); None without a config node."""
        try:
            data, _ = self._get(layout.topic_config(topic))
        except NoNode:
            return None
        return decode_entity_config(layout.topic_config(topic), data)

    def topic_configs(self, topics: Iterable[str]) -> dict[str, Versioned[dict[str, str]]]:
        """Config overrides of the given topics, with their node versions, in one bulk read;
        topics without a config node are left out."""
        names = list(topics)
        items = self._get_many([layout.topic_config(t) for t in names])
        out: dict[str, Versioned[dict[str, str]]] = {}
        for name, item in zip(names, items, strict=True):
            if item is not None:
                data, stat = item
                out[name] = Versioned(value=decode_entity_config(layout.topic_config(name), data),
                                      version=stat.version)
        return out

    def all_topic_configs(self) -> dict[str, dict[str, str]]:
        """Every topic's config overrides (Kafka's fetchAllEntityConfigs for topics)."""
        try:
            names = self._children(layout.CONFIG_TOPICS)
        except NoNode:
            return {}
        return {t: v.value for t, v in self.topic_configs(names).items()}

    def set_topic_config(self, topic: str, config: Mapping[str, str], version: int | None
                         ) -> str:
        """Replace a topic's overrides, conditional on the config node's ``version`` (None: the
        node is created, as Kafka's setOrCreateEntityConfigs does for a topic without one),
        and announce the change (``/config/changes/config_change_<seq>``,
        ``{"version":2,"entity_path":"topics/<t>"}``), in one atomic multi that also checks the
        topic exists. Kafka writes the node and then the notification, so a tool that dies
        between the two leaves a change no broker hears of until it restarts; here both land or
        neither does. An admin write, not fenced. Returns the notification's name.

        :class:`UnknownTopic` when the topic is gone; BadVersion when the config node changed
        (or appeared, or went) since it was read: read again and retry."""
        layout.validate_topic(topic)
        config_path = layout.topic_config(topic)
        data = encode_entity_config(config)
        ops: list[Op] = [
            Check(path=layout.topic(topic), version=-1),
            Create(path=config_path, data=data) if version is None
            else SetData(path=config_path, data=data, version=version),
            Create(path=layout.CONFIG_CHANGE_SEQUENTIAL,
                   data=encode_config_change(f"topics/{topic}"), sequential=True),
        ]
        for attempt in range(2):
            try:
                results = self.coordinator.multi(ops)
            except MultiFailed as failure:
                cause = failure.cause
                if failure.index == 0 and isinstance(cause, (NoNode, BadVersion)):
                    raise UnknownTopic(topic) from None
                if failure.index == 1 and isinstance(cause, (NoNode, NodeExists, BadVersion)):
                    if isinstance(cause, NoNode) and version is None and attempt == 0:
                        self.ensure_layout()  # /config/topics is missing
                        continue
                    raise BadVersion(config_path) from None
                if failure.index == 2 and isinstance(cause, NoNode) and attempt == 0:
                    self.ensure_layout()  # /config/changes is missing
                    continue
                raise cause from None
            created = results[2]
            assert isinstance(created, str)
            return created.rsplit("/", 1)[1]
        raise CoordinatorError(f"{config_path}: the config layout kept missing")

    def user_config(self, user: str) -> Versioned[dict[str, str]] | None:
        """A user's config (``/config/users/<user>``: SCRAM credentials by mechanism), with
        the node's version; None without a node."""
        path = layout.user_config(user)
        try:
            data, stat = self._get(path)
        except NoNode:
            return None
        return Versioned(value=decode_entity_config(path, data), version=stat.version)

    def all_user_configs(self) -> dict[str, dict[str, str]]:
        """Every user's config, by (desanitized) user name."""
        try:
            names = self._children(layout.CONFIG_USERS)
        except NoNode:
            return {}
        paths = [f"{layout.CONFIG_USERS}/{n}" for n in names]
        out: dict[str, dict[str, str]] = {}
        for name, path, item in zip(names, paths, self._get_many(paths), strict=True):
            if item is not None:
                try:
                    out[layout.desanitize_entity(name)] = decode_entity_config(path, item[0])
                except CorruptMetadata as exc:
                    log.warning("ignoring user config: %s", exc)
        return out

    def set_user_config(self, user: str, config: Mapping[str, str], version: int | None
                        ) -> str:
        """Write a user's config, conditional on ``version`` (None: create the node), and
        announce it (``{"version":2,"entity_path":"users/<user>"}``) in one multi, as Kafka's
        AdminZkClient.changeUserOrUserClientIdConfig. BadVersion when the node changed since
        it was read (or appeared). Returns the notification's name."""
        path = layout.user_config(user)
        return self._set_entity_config(
            path, config, version, f"users/{layout.sanitize_entity(user)}")

    def broker_config(self, broker_id: int | str) -> Versioned[dict[str, str]] | None:
        """A broker's dynamic config (``/config/brokers/<id>``; ``<default>`` for the
        cluster's defaults), with the node's version; None without a node."""
        path = layout.config_entity("brokers", str(broker_id))
        try:
            data, stat = self._get(path)
        except NoNode:
            return None
        return Versioned(value=decode_entity_config(path, data), version=stat.version)

    def set_broker_config(self, broker_id: int | str, config: Mapping[str, str],
                          version: int | None) -> str:
        """Write a broker's dynamic config, conditional on ``version`` (None: create the
        node), and announce it (``{"version":2,"entity_path":"brokers/<id>"}``) in one multi,
        as Kafka's AdminZkClient.changeBrokerConfig. BadVersion when the node changed since
        it was read (or appeared). Returns the notification's name."""
        path = layout.config_entity("brokers", str(broker_id))
        return self._set_entity_config(path, config, version, f"brokers/{broker_id}")

    def _set_entity_config(self, path: str, config: Mapping[str, str], version: int | None,
                           entity_path: str) -> str:
        """Write an entity's config node at ``path`` conditionally on ``version`` (None:
        create it) and announce ``entity_path`` under /config/changes, in one multi; creates
        the config layout once if a parent is missing. Returns the notification's name."""
        ops: list[Op] = [
            Create(path=path, data=encode_entity_config(config)) if version is None
            else SetData(path=path, data=encode_entity_config(config), version=version),
            Create(path=layout.CONFIG_CHANGE_SEQUENTIAL, data=encode_config_change(entity_path),
                   sequential=True),
        ]
        for attempt in range(2):
            try:
                results = self.coordinator.multi(ops)
            except MultiFailed as failure:
                cause = failure.cause
                if isinstance(cause, NoNode) and attempt == 0 and (
                        failure.index == 1 or version is None):
                    self.ensure_layout()  # /config/<entities> or /config/changes is missing
                    continue
                if failure.index == 0 and isinstance(cause, (NoNode, NodeExists, BadVersion)):
                    raise BadVersion(path) from None
                raise cause from None
            created = results[1]
            assert isinstance(created, str)
            return created.rsplit("/", 1)[1]
        raise CoordinatorError(f"{path}: the config layout kept missing")

    def config_change_notifications(self) -> list[str]:
        """Names of the config change notifications, oldest first (by sequence)."""
        try:
            names = self._children(layout.CONFIG_CHANGES)
        except NoNode:
            return []
        return sorted(n for n in names if n.startswith(layout.CONFIG_CHANGE_PREFIX))

    def read_config_changes(self, names: Sequence[str]
                            ) -> list[tuple[str, tuple[str, str] | None]]:
        """Each notification's entity (type, name), None where it is gone or unreadable."""
        items = self._get_many([f"{layout.CONFIG_CHANGES}/{n}" for n in names])
        out: list[tuple[str, tuple[str, str] | None]] = []
        for name, item in zip(names, items, strict=True):
            entity = None
            if item is not None:
                try:
                    entity = decode_config_change(f"{layout.CONFIG_CHANGES}/{name}", item[0])
                except CorruptMetadata as exc:
                    log.warning("ignoring config change notification: %s", exc)
            out.append((name, entity))
        return out

    def delete_config_changes(self, names: Sequence[str]) -> None:
        """Delete notifications (the purge of expired ones); those already gone are fine."""
        for name in names:
            try:
                self.coordinator.delete(f"{layout.CONFIG_CHANGES}/{name}")
            except NoNode:
                pass

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

    def partitions_of(self, topic: str) -> list[int]:
        try:
            return sorted(int(p) for p in self._children(layout.partitions(topic)))
        except NoNode:
            return []

    # --- partition states ----------------------------------------------------------------

    def partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, Versioned[PartitionStateNode] | None]:
        """Leader and ISR of each partition, with its partition epoch, in one bulk read."""
        tps = list(partitions)
        items = self._get_many(
            [layout.partition_state(tp.topic, tp.partition) for tp in tps])
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

    # --- admin: who executes the reassignment (partctl's own node) ------------------------

    def reassignment_and_owner(
        self,
    ) -> tuple[Versioned[dict[TopicPartition, tuple[int, ...]]] | None,
               tuple[ReassignmentOwner, Stat] | None]:
        """The pending moves and the run executing them (with its node's stat: its
        ``ephemeral_owner`` is that run's session), in one read."""
        node, owner = self._get_many([layout.REASSIGN_PARTITIONS,
                                      layout.REASSIGN_PARTITIONS_OWNER])
        moves = None if node is None else Versioned(
            value=decode_reassignment(layout.REASSIGN_PARTITIONS, node[0]), version=node[1].version)
        holder = None if owner is None else (
            ReassignmentOwner.decode(layout.REASSIGN_PARTITIONS_OWNER, owner[0]), owner[1])
        return moves, holder

    def claim_reassignment(
        self, owner: ReassignmentOwner,
        moves: Mapping[TopicPartition, Iterable[int]] | None = None, *,
        node_version: int | None = None,
    ) -> bool:
        """Become the run that executes the reassignment, in one atomic multi: the ephemeral
        owner node, with either the reassignment node created with ``moves`` (create-if-absent:
        of two runs, one wins) or a check that it is still at ``node_version`` (taking over the
        moves an earlier run of the same plan left). False, with nothing written, when another
        run, a tool or the controller came first: re-read and decide again."""
        ops: list[Op] = [Create(path=layout.REASSIGN_PARTITIONS_OWNER, data=owner.encode(),
                                ephemeral=True)]
        if moves is not None:
            ops.append(Create(path=layout.REASSIGN_PARTITIONS, data=encode_reassignment(moves)))
        else:
            assert node_version is not None, "taking over needs the node's version"
            ops.append(Check(path=layout.REASSIGN_PARTITIONS, version=node_version))
        try:
            self.coordinator.multi(ops)
        except MultiFailed as failure:
            if isinstance(failure.cause, NoNode) and failure.cause.path == layout.ADMIN:
                self.coordinator.ensure_path(layout.ADMIN)
                return False
            if isinstance(failure.cause, (NodeExists, NoNode, BadVersion)):
                return False
            raise failure.cause from None
        return True

    def submit_reassignment(self, moves: Mapping[TopicPartition, Iterable[int]],
                            node_version: int | None) -> bool:
        """The claiming run's write of the node: replaced at the version read (created when
        ``node_version`` is None), only while its owner node is there. False on a conflict
        (the controller wrote in between, or a tool created the node: re-read and decide
        again); :class:`ReassignmentClaimLost` when the owner node is gone."""
        data = encode_reassignment(moves)
        write: Op = (Create(path=layout.REASSIGN_PARTITIONS, data=data) if node_version is None
                     else SetData(path=layout.REASSIGN_PARTITIONS, data=data,
                                  version=node_version))
        try:
            self.coordinator.multi([Check(path=layout.REASSIGN_PARTITIONS_OWNER, version=0),
                                    write])
        except MultiFailed as failure:
            if failure.index == 0:
                raise ReassignmentClaimLost(
                    f"{layout.REASSIGN_PARTITIONS_OWNER} is gone (the session ended?)"
                ) from failure
            if isinstance(failure.cause, (NodeExists, NoNode, BadVersion)):
                return False
            raise failure.cause from None
        return True

    def release_reassignment(self, owner: ReassignmentOwner, *, retry: Retry | None = None
                             ) -> None:
        """Delete the owner node if it is still ``owner``'s, of this session. ``retry``, when
        given, replaces the client's policy for the read (a run ending in an outage releases
        once, without riding the outage out)."""
        c = self.coordinator
        try:
            data, stat = (retry or self.retry)(c.get, layout.REASSIGN_PARTITIONS_OWNER)
            held = ReassignmentOwner.decode(layout.REASSIGN_PARTITIONS_OWNER, data)
            if held.run == owner.run and stat.ephemeral_owner == c.session_id:
                c.delete(layout.REASSIGN_PARTITIONS_OWNER, stat.version)
        except (NoNode, BadVersion):
            pass

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
        """ValueError for a name Kafka would refuse: ``a/partitions`` would otherwise find a
        node and ask the controller to delete topic ``a``."""
        layout.validate_topic(topic)
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
            # Kafka's order: the topic, its config, then the deletion request.
            [layout.topic(topic), layout.topic_config(topic), layout.delete_topic(topic)],
        ]
        for paths_ in layers:
            present = [p for p, item in zip(paths_, c.get_many(paths_), strict=True)
                       if item is not None]
            results = self.fenced_write_many(epoch, [Delete(path=p) for p in present])
            for result in results:
                if isinstance(result, CoordinatorError) and not isinstance(result, NoNode):
                    raise result

    # --- producer id blocks ---------------------------------------------------------------

    def producer_id_block(self) -> Versioned[ProducerIdBlock | None] | None:
        """The latest block of producer ids any broker claimed, with the node's version: a
        value of None when the node holds no data (the broker start-up creates it empty, as
        Kafka's does: no block claimed yet), None when the node does not exist at all."""
        try:
            data, stat = self._get(layout.LATEST_PRODUCER_ID_BLOCK)
        except NoNode:
            return None
        block = ProducerIdBlock.decode(layout.LATEST_PRODUCER_ID_BLOCK, data) if data else None
        return Versioned(value=block, version=stat.version)

    def claim_producer_id_block(
        self, broker_id: int, *, size: int = PRODUCER_ID_BLOCK_SIZE, max_conflicts: int = 100
    ) -> ProducerIdBlock:
        """Claim the next ``size`` producer ids for ``broker_id`` (Kafka's
        ZkProducerIdManager.getNewProducerIdBlock): read ``/latest_producer_id_block``, take
        the block after the one it holds (from 0 when it holds none), and write it
        conditionally on the version read; when another broker claimed in between, read and
        try again. Returns the block, which is this broker's alone.

        A connection lost during the write leaves its outcome unknown; the error goes to the
        caller, who may claim again: a block written without our knowing is skipped, never
        handed out twice. :class:`ProducerIdsExhausted` past the largest 64-bit id."""
        if size < 1:
            raise ValueError(f"a producer id block holds at least one id: {size}")
        c, path = self.coordinator, layout.LATEST_PRODUCER_ID_BLOCK
        for _ in range(max_conflicts):
            current = self.producer_id_block()
            start = 0 if current is None or current.value is None else (
                current.value.next_block_start)
            if start > (1 << 63) - size:
                raise ProducerIdsExhausted(
                    f"{path}: no producer ids left after {start - 1} for a block of {size}")
            block = ProducerIdBlock(broker=broker_id, block_start=start,
                                    block_end=start + size - 1)
            try:
                if current is None:
                    c.create(path, block.encode())
                else:
                    c.set(path, block.encode(), current.version)
            except (BadVersion, NodeExists, NoNode):
                log.debug("broker %d: %s changed while claiming a block; reading it again",
                          broker_id, path)
                continue
            log.info("broker %d claimed producer ids %d..%d", broker_id, block.block_start,
                     block.block_end)
            return block
        raise CoordinatorError(f"{path}: {max_conflicts} conflicting claims in a row")
