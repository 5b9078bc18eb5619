"""The admin API: what Kafka's tools did over ZooKeeper, as a library.

Requests go where the controller picks them up (topic nodes, the admin nodes), as Kafka's
AdminZkClient wrote them, and reads are of the coordinator's nodes: nothing here needs the
controller to be up, so this sits with the coordinator's layout, below the controller and the
planner that both use it (as Kafka keeps AdminZkClient with its ZooKeeper client). A controlled
shutdown is not an admin operation: a broker asks for its own, through its ControllerClient
(statemachines/broker_side.py).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from coordinator.assignment import (
    MAX_PARTITIONS,
    assign_replicas,
    start_index_for_added_partitions,
)
from coordinator.base import Coordinator
from coordinator.broker_config import (
    BROKER_DEFAULT,
    NotDynamic,
    apply_broker_incremental,
    check_broker_config,
    describe_dynamic,
)
from coordinator.codecs import TopicAssignment, TopicPartition
from coordinator.configdef import InvalidConfig
from coordinator.errors import BadVersion
from coordinator.layout import validate_topic
from coordinator.metadata import MetadataClient, TopicExists, UnknownTopic
from coordinator.skipped import readable_assignments
from coordinator.topic_config import (
    AlterOp,
    ConfigEntry,
    IncrementalOp,
    apply_incremental,
    describe_config,
    validate_topic_config,
    validate_topic_config_change,
)

__all__ = ["Admin", "BrokerConfigChange", "ControllerStatus", "InvalidRequest",
           "PartitionDescription", "TopicConfigChange", "TopicDescription", "colliding_topics",
           "controller_status"]

CONFIG_WRITE_ATTEMPTS = 10
"""Conditional config writes tried before giving up on a topic whose config keeps changing."""


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


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicConfigChange:
    """What a config alteration wrote (or, validating only, would write)."""

    topic: str
    overrides: dict[str, str]
    """The topic's overrides after the change."""
    notification: str | None
    """The change notification written (``config_change_<seq>``); None when validating only."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerConfigChange:
    """A broker's dynamic config as written (or, validating only, as it would be): ``broker``
    None for the cluster's defaults; ``notification`` None when nothing was written."""

    broker: int | None
    config: Mapping[str, str]
    notification: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerStatus:
    """Who the controller is and at which epoch; ``broker_id`` None when there is none."""

    broker_id: int | None
    epoch: int | None


def controller_status(metadata: MetadataClient) -> ControllerStatus:
    holder = metadata.controller()
    epoch = metadata.controller_epoch()
    return ControllerStatus(
        broker_id=holder[0].broker_id if holder is not None else None,
        epoch=epoch.epoch if epoch is not None else None,
    )


class Admin:
    def __init__(self, coordinator: Coordinator | MetadataClient) -> None:
        """Over a coordinator session, or over a metadata client already made for it (used as
        it is: an execution shares its one client)."""
        self.metadata = (coordinator if isinstance(coordinator, MetadataClient)
                         else MetadataClient(coordinator))
        self.coordinator = self.metadata.coordinator

    # --- topics --------------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int | None = None,
        replication_factor: int | None = None,
        *,
        assignment: Mapping[int, Sequence[int]] | None = None,
        rng: random.Random | None = None,
        config: Mapping[str, str] | None = None,
        broker_config: Mapping[str, str] | None = None,
    ) -> TopicAssignment:
        """Create a topic from an explicit assignment, or from a partition count and
        replication factor (Kafka's rack-aware assignment over the registered brokers).

        Refused with InvalidRequest, before anything is written, as Kafka's AdminZkClient
        refuses: a name Kafka would not accept, one that collides with an existing topic's
        (``.`` and ``_`` are the same character in metric names), a count below 1 or above
        MAX_PARTITIONS, a replication factor below 1 or above the broker count; and with
        AssignmentTooLarge an assignment that does not fit in one coordinator node.
        ``config`` holds the topic's initial overrides (CreateTopics' configs), validated as
        Kafka validates them (InvalidConfig; ``broker_config``: the settings of the broker
        asked, which topic configs default to and remote storage needs) and written with the
        topic in one multi.
        """
        _check_name(name)
        overrides = _check_config_values(config or {})
        validate_topic_config(overrides, broker_config)
        if assignment is None:
            if partitions is None or replication_factor is None:
                raise InvalidRequest("give partitions and replication_factor, or an assignment")
            _check_counts(partitions, replication_factor)
        else:
            _check_assignment(assignment)
        self._check_collisions(name)
        if assignment is None:
            assert partitions is not None and replication_factor is not None  # checked above
            brokers = self.metadata.brokers()
            if not brokers:
                raise InvalidRequest("no brokers are registered")
            racks = {b: r.info.rack for b, r in brokers.items()}
            try:
                assignment = assign_replicas(racks, partitions, replication_factor, rng=rng)
            except ValueError as exc:
                raise InvalidRequest(str(exc)) from None
        else:
            registered = set(self.metadata.broker_ids())
            unknown = sorted({b for r in assignment.values() for b in r} - registered)
            if unknown:
                raise InvalidRequest(f"unknown broker(s) in the assignment: {unknown} "
                                     f"(registered: {sorted(registered)})")
        try:
            return self.metadata.create_topic(TopicAssignment(
                topic=name, partitions={p: tuple(r) for p, r in assignment.items()}),
                config=overrides)
        except ValueError as exc:
            raise InvalidRequest(str(exc)) from None

    def _check_collisions(self, name: str) -> None:
        existing = self.metadata.topics()
        if name in existing:
            raise TopicExists(name)
        colliding = colliding_topics(name, existing)
        if colliding:
            raise InvalidRequest(f"topic {name!r} collides with existing topic(s) "
                                 f"{', '.join(colliding)} ('.' and '_' are the same character "
                                 f"in metric names)")

    def add_partitions(self, topic: str, total: int, *, rng: random.Random | None = None,
                       assignment: Mapping[int, Sequence[int]] | None = None
                       ) -> TopicAssignment:
        """Grow ``topic`` to ``total`` partitions, placed like Kafka places added ones, or as
        ``assignment`` says (replicas of each added partition, numbered from the current
        count: as many replicas as partition 0 has, registered brokers, none twice).
        InvalidRequest past MAX_PARTITIONS or for a bad assignment, AssignmentTooLarge past one
        coordinator node."""
        _check_name(topic)
        _check_int(total, "number of partitions")
        if total > MAX_PARTITIONS:
            raise InvalidRequest(f"a topic has at most {MAX_PARTITIONS:,} partitions, asked "
                                 f"for {total:,}")
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
            added: Mapping[int, Sequence[int]]
            if assignment is not None:
                added = _check_added(assignment, have, total, rf, set(brokers))
            else:
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
                self.metadata.replace_topic(new, current.version)
            except BadVersion:
                continue
            return new
        raise InvalidRequest(f"topic {topic} kept changing; try again")

    def list_topics(self) -> list[str]:
        return sorted(self.metadata.topics())

    def describe_topics(self, topics: Iterable[str] | None = None) -> list[TopicDescription]:
        """The named topics, or every topic the store holds but those another tool wrote with
        an illegal name or an assignment that does not decode (``topics list`` shows them)."""
        if topics is None:
            assignments = readable_assignments(self.metadata)
            names = sorted(assignments)
        else:
            names = list(topics)
            for name in names:
                _check_name(name)
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
        _check_name(topic)
        self.metadata.request_topic_deletion(topic)

    # --- topic configs (Kafka's AdminZkClient.changeTopicConfig and its callers) ---------

    def describe_topic_config(
        self, topic: str, *, names: Iterable[str] | None = None,
        broker_config: Mapping[str, str] | None = None,
    ) -> list[ConfigEntry]:
        """The topic's configs as DescribeConfigs answers for a topic: every key (or the
        ``names`` asked, unknown ones left out), its value and source (TOPIC_CONFIG for an
        override; STATIC_BROKER_CONFIG where ``broker_config``, the broker's own settings by
        their server.properties names, sets a synonym; else DEFAULT_CONFIG), synonyms in
        Kafka's order, never read-only or sensitive, and partctl's ``effect``.
        :class:`UnknownTopic` (UNKNOWN_TOPIC_OR_PARTITION) when the topic does not exist."""
        _check_name(topic)
        if not self.metadata.assignments([topic]):
            raise UnknownTopic(topic)
        node = self.metadata.topic_configs([topic]).get(topic)
        return describe_config(node.value if node is not None else {}, broker_config,
                               names=names)

    def topic_config(self, topic: str) -> dict[str, str]:
        """The topic's overrides as stored (no defaults); UnknownTopic when it does not
        exist."""
        _check_name(topic)
        if not self.metadata.assignments([topic]):
            raise UnknownTopic(topic)
        node = self.metadata.topic_configs([topic]).get(topic)
        return dict(node.value) if node is not None else {}

    def alter_topic_config(
        self,
        topic: str,
        set: Mapping[str, str] | None = None,  # noqa: A002 - Kafka's operation name
        delete: Iterable[str] = (),
        *,
        append: Mapping[str, str] | None = None,
        subtract: Mapping[str, str] | None = None,
        ops: Sequence[IncrementalOp] = (),
        validate_only: bool = False,
        broker_config: Mapping[str, str] | None = None,
    ) -> TopicConfigChange:
        """IncrementalAlterConfigs for one topic: SET, DELETE, APPEND and SUBTRACT (the last
        two for list keys), given as ``ops`` or by the keywords; applied to the stored
        overrides, the result validated whole (Kafka's LogConfig.validate, against
        ``broker_config``'s defaults), then written conditionally on the config node's version
        with its change notification in one multi, re-read and redone on a conflict.

        Errors, each before anything is written: InvalidRequest for a key named twice or a
        value missing from other than a DELETE (INVALID_REQUEST); InvalidConfig for an unknown
        key, a bad value, APPEND/SUBTRACT on a non-list key (INVALID_CONFIG); UnknownTopic
        (UNKNOWN_TOPIC_OR_PARTITION)."""
        every = [*ops,
                 *(IncrementalOp(name=k, op=AlterOp.SET, value=v) for k, v in (set or {}).items()),
                 *(IncrementalOp(name=k, op=AlterOp.DELETE) for k in delete),
                 *(IncrementalOp(name=k, op=AlterOp.APPEND, value=v)
                   for k, v in (append or {}).items()),
                 *(IncrementalOp(name=k, op=AlterOp.SUBTRACT, value=v)
                   for k, v in (subtract or {}).items())]
        _check_ops(every)
        return self._change_topic_config(
            topic, lambda current: apply_incremental(current, every), validate_only,
            broker_config)

    def replace_topic_config(
        self, topic: str, config: Mapping[str, str], *, validate_only: bool = False,
        broker_config: Mapping[str, str] | None = None,
    ) -> TopicConfigChange:
        """AlterConfigs for one topic: ``config`` becomes the whole set of overrides (a key
        left out returns to its default). Errors as :meth:`alter_topic_config`."""
        overrides = _check_config_values(config)
        return self._change_topic_config(topic, lambda _current: dict(overrides),
                                         validate_only, broker_config)

    def _change_topic_config(
        self, topic: str, change: Callable[[dict[str, str]], dict[str, str]],
        validate_only: bool, broker_config: Mapping[str, str] | None,
    ) -> TopicConfigChange:
        _check_name(topic)
        for _ in range(CONFIG_WRITE_ATTEMPTS):
            if not self.metadata.assignments([topic]):
                raise UnknownTopic(topic)
            node = self.metadata.topic_configs([topic]).get(topic)
            current = dict(node.value) if node is not None else {}
            new = change(current)
            validate_topic_config(new, broker_config)
            validate_topic_config_change(current, new)
            if validate_only:
                return TopicConfigChange(topic=topic, overrides=new, notification=None)
            try:
                name = self.metadata.set_topic_config(
                    topic, new, node.version if node is not None else None)
            except BadVersion:
                continue
            return TopicConfigChange(topic=topic, overrides=new, notification=name)
        raise InvalidRequest(f"the config of topic {topic} kept changing; try again")

    # --- dynamic broker configs (Kafka's AdminZkClient.changeBrokerConfig) ---------------

    def broker_config(self, broker: int | None) -> dict[str, str]:
        """A broker's dynamic config as stored (``broker`` None: the cluster's defaults at
        ``/config/brokers/<default>``); empty without a node."""
        node = self.metadata.broker_config(_entity(broker))
        return dict(node.value) if node is not None else {}

    def describe_broker_config(self, broker: int | None, *,
                               names: Iterable[str] | None = None) -> list[ConfigEntry]:
        """The dynamic keys set for ``broker`` (its own, else the defaults'; ``broker`` None:
        the defaults alone), as DescribeConfigs shows them
        (:func:`coordinator.broker_config.describe_dynamic`)."""
        defaults = self.broker_config(None)
        own = None if broker is None else self.broker_config(broker)
        return describe_dynamic(defaults, own, names)

    def alter_broker_config(self, broker: int | None, ops: Sequence[IncrementalOp], *,
                            validate_only: bool = False) -> BrokerConfigChange:
        """IncrementalAlterConfigs for one broker resource (``broker`` None: the cluster's
        defaults): SET and DELETE applied to the stored config, the result checked, then
        written conditionally on the node's version with its change notification, re-read
        and redone on a conflict. Errors, before anything is written: InvalidRequest for a
        key named twice, a missing value, a key that is not dynamic or a bad value (Kafka's
        answer for a broker resource); InvalidConfig for APPEND or SUBTRACT."""
        _check_ops(ops)
        return self._change_broker_config(
            broker, lambda current: apply_broker_incremental(current, ops), validate_only)

    def replace_broker_config(self, broker: int | None, config: Mapping[str, str], *,
                              validate_only: bool = False) -> BrokerConfigChange:
        """AlterConfigs for one broker resource: ``config`` becomes its whole dynamic config
        (a key left out is removed). Errors as :meth:`alter_broker_config`."""
        given = _check_config_values(config)
        return self._change_broker_config(broker, lambda _current: dict(given), validate_only)

    def _change_broker_config(self, broker: int | None,
                              change: Callable[[dict[str, str]], dict[str, str]],
                              validate_only: bool) -> BrokerConfigChange:
        entity = _entity(broker)
        for _ in range(CONFIG_WRITE_ATTEMPTS):
            node = self.metadata.broker_config(entity)
            current = dict(node.value) if node is not None else {}
            new = change(current)
            try:
                new = check_broker_config(new)
            except (NotDynamic, InvalidConfig) as exc:
                raise InvalidRequest(str(exc)) from None
            if validate_only:
                return BrokerConfigChange(broker=broker, config=new, notification=None)
            try:
                name = self.metadata.set_broker_config(
                    entity, new, node.version if node is not None else None)
            except BadVersion:
                continue
            return BrokerConfigChange(broker=broker, config=new, notification=name)
        raise InvalidRequest(f"the config of broker {entity} kept changing; try again")

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
            for tp in tps:
                _check_name(tp.topic)
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
        for tp in moves:
            _check_name(tp.topic)
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

    # --- the controller --------------------------------------------------------------------

    def controller_status(self) -> ControllerStatus:
        return controller_status(self.metadata)


def colliding_topics(name: str, existing: Iterable[str]) -> list[str]:
    """Existing topics other than ``name`` that Kafka deems to collide with it: equal once every
    '.' is read as '_' (metric names replace one with the other)."""
    if "." not in name and "_" not in name:
        return []
    key = name.replace(".", "_")
    return sorted(t for t in existing if t != name and t.replace(".", "_") == key)


def _check_name(name: str) -> None:
    """Kafka's topic name rules, before the name goes into any path (``a/partitions`` would
    name another node)."""
    if not isinstance(name, str):
        raise InvalidRequest(f"a topic name is a string, got {name!r}")
    try:
        validate_topic(name)
    except ValueError as exc:
        raise InvalidRequest(str(exc)) from None


def _entity(broker: int | None) -> str:
    """A broker config's entity name: the id, or ``<default>`` for the cluster's defaults."""
    if broker is None:
        return BROKER_DEFAULT
    _check_int(broker, "a broker id")
    return str(broker)


def _check_ops(ops: Sequence[IncrementalOp]) -> None:
    """IncrementalAlterConfigs' request checks (Kafka's ConfigAdminManager.preprocess)."""
    names = [op.name for op in ops]
    if len(names) != len(set(names)):
        raise InvalidRequest("Error due to duplicate config keys")
    missing = [op.name for op in ops if op.op is not AlterOp.DELETE and op.value is None]
    if missing:
        raise InvalidRequest("Null value not supported for : " + ", ".join(missing))
    for op in ops:
        if not isinstance(op.name, str) or (op.value is not None and not isinstance(op.value, str)):
            raise InvalidConfig(f"config names and values are strings: {op.name!r}={op.value!r}")


def _check_config_values(config: Mapping[str, str]) -> dict[str, str]:
    """A whole set of overrides as given: strings only, no value missing."""
    missing = [k for k, v in config.items() if v is None]
    if missing:
        raise InvalidRequest("Null value not supported for : " + ", ".join(missing))
    for k, v in config.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise InvalidConfig(f"config names and values are strings: {k!r}={v!r}")
    return dict(config)


def _check_int(value: object, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRequest(f"{what} must be an integer, got {value!r}")


def _check_counts(partitions: int, replication_factor: int) -> None:
    _check_int(partitions, "number of partitions")
    _check_int(replication_factor, "replication factor")
    if not 1 <= partitions <= MAX_PARTITIONS:
        raise InvalidRequest(f"number of partitions must be between 1 and {MAX_PARTITIONS:,}, "
                             f"got {partitions:,}")
    if replication_factor < 1:
        raise InvalidRequest(f"replication factor must be at least 1, got {replication_factor:,}")


def _check_added(assignment: Mapping[int, Sequence[int]], have: int, total: int, rf: int,
                 registered: set[int]) -> dict[int, tuple[int, ...]]:
    """An explicit assignment of the partitions ``have`` to ``total`` - 1 (Kafka's
    createNewPartitionsAssignment checks)."""
    if sorted(assignment) != list(range(have, total)):
        raise InvalidRequest(f"increasing the number of partitions by {total - have} but "
                             f"{len(assignment)} assignment(s) given for partitions "
                             f"{sorted(assignment)} (expected {have}..{total - 1})")
    out = {}
    for p, replicas in sorted(assignment.items()):
        replicas = tuple(replicas)
        if not replicas:
            raise InvalidRequest(f"partition {p} has no replicas")
        if len(set(replicas)) != len(replicas):
            raise InvalidRequest(f"partition {p} names a broker twice: {list(replicas)}")
        unknown = sorted(set(replicas) - registered)
        if unknown:
            raise InvalidRequest(f"unknown broker(s) in the assignment of partition {p}: "
                                 f"{unknown} (registered: {sorted(registered)})")
        if len(replicas) != rf:
            raise InvalidRequest(f"partition {p} has {len(replicas)} replicas where the "
                                 f"topic's partition 0 has {rf}")
        out[p] = replicas
    return out


def _check_assignment(assignment: Mapping[int, Sequence[int]]) -> None:
    if not assignment:
        raise InvalidRequest("an assignment needs at least one partition")
    if len(assignment) > MAX_PARTITIONS:
        raise InvalidRequest(f"a topic has at most {MAX_PARTITIONS:,} partitions, the "
                             f"assignment has {len(assignment):,}")
    if sorted(assignment) != list(range(len(assignment))):
        raise InvalidRequest("partitions must be numbered 0..n-1")
    sizes = {len(r) for r in assignment.values()}
    if len(sizes) != 1 or 0 in sizes:
        raise InvalidRequest("every partition needs the same, non-zero number of replicas")
    for p, replicas in assignment.items():
        if len(set(replicas)) != len(replicas):
            raise InvalidRequest(f"partition {p} names a broker twice: {list(replicas)}")
