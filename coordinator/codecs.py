"""The JSON of Kafka's ZooKeeper layout, decoded into frozen values and encoded back.

Keys and value types are exactly Kafka's; fields a newer Kafka may add are kept in ``extra`` so
that a decode followed by an encode gives the same JSON. Malformed content raises
:class:`CorruptMetadata` naming the path.
"""

from __future__ import annotations

import base64
import json
import re
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import chain
from operator import itemgetter
from typing import Any, NamedTuple, Protocol, TypeVar

from coordinator import layout
from coordinator.errors import CoordinatorError


class CorruptMetadata(CoordinatorError):
    """A node's content is not what Kafka's layout says it must be."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        super().__init__(f"corrupt metadata at {path}: {reason}")


class TopicPartition(NamedTuple):
    """A partition of a topic. A named tuple rather than a dataclass: a controller hashes and
    sorts hundreds of thousands of these, and tuple hashing and ordering run in C."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


def sorted_partitions(tps: Iterable[TopicPartition]) -> list[TopicPartition]:
    """``sorted(tps)`` for the ten thousands of a mass election, cheaper:
    grouped by topic, each group ordered by partition number alone (sorting the tuples
    compares the topic names again at every step)."""
    by_topic: dict[str, list[TopicPartition]] = {}
    for tp in tps:
        group = by_topic.get(tp[0])
        if group is None:
            by_topic[tp[0]] = [tp]
        else:
            group.append(tp)
    out: list[TopicPartition] = []
    for topic in sorted(by_topic):
        group = by_topic[topic]
        group.sort(key=_PARTITION)
        out.extend(group)
    return out


_PARTITION = itemgetter(1)


def now_ms() -> str:
    return str(int(time.time() * 1000))


def new_kafka_uuid() -> str:
    """A random UUID in Kafka's text form: URL-safe base64 of its 16 bytes, unpadded."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def _dumps(obj: Mapping[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _loads(path: str, data: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CorruptMetadata(path, f"not JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise CorruptMetadata(path, "not a JSON object")
    return obj


def _int(path: str, obj: Mapping[str, Any], key: str) -> int:
    value = obj.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise CorruptMetadata(path, f"{key!r} must be an integer, found {value!r:.200}")
    return value


_INTS = frozenset({int})


def is_int_list(value: Any) -> bool:
    """Whether decoded JSON ``value`` is a list of integers (JSON gives exact ints; a bool is
    not one). The set of element types is built in C: a topic of thousands of partitions checks
    its lists in a fraction of a generator's time."""
    return type(value) is list and _INTS.issuperset(map(type, value))


def _int_list(path: str, value: Any, what: str) -> tuple[int, ...]:
    if not is_int_list(value):
        raise CorruptMetadata(path, f"{what} must be a list of integers, found {value!r:.200}")
    return tuple(value)


def _extra(obj: Mapping[str, Any], known: Iterable[str]) -> dict[str, Any]:
    skip = set(known)
    return {k: v for k, v in obj.items() if k not in skip}


# --- /controller_epoch -------------------------------------------------------------------------


def encode_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_epoch(path: str, data: bytes) -> int:
    try:
        return int(data.decode().strip())
    except (ValueError, UnicodeDecodeError):
        raise CorruptMetadata(path, f"epoch is not an integer: {data[:40]!r}") from None


# --- /controller -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerInfo:
    """Who holds ``/controller``. Written as Kafka 3.4+ writes it (JSON version 2, with
    ``kraftControllerEpoch`` -1: a ZooKeeper-mode controller); version 1, as older Kafka wrote
    it, is read as well (its KRaft epoch reads as -1)."""

    broker_id: int
    timestamp: str = field(default_factory=now_ms)
    kraft_controller_epoch: int = -1
    extra: Mapping[str, Any] = field(default_factory=dict)

    def encode(self) -> bytes:
        return _dumps({**self.extra, "version": 2, "brokerid": self.broker_id,
                       "timestamp": self.timestamp,
                       "kraftControllerEpoch": self.kraft_controller_epoch})

    @classmethod
    def decode(cls, path: str, data: bytes) -> ControllerInfo:
        obj = _loads(path, data)
        kraft = _int(path, obj, "kraftControllerEpoch") if "kraftControllerEpoch" in obj else -1
        return cls(broker_id=_int(path, obj, "brokerid"), timestamp=str(obj.get("timestamp", "")),
                   kraft_controller_epoch=kraft,
                   extra=_extra(obj, ("version", "brokerid", "timestamp", "kraftControllerEpoch")))


# --- /brokers/ids/<id> -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerInfo:
    """A broker registration (JSON version 5)."""

    id: int
    host: str
    port: int
    rack: str | None = None
    endpoints: tuple[str, ...] = ()
    security_protocol_map: Mapping[str, str] = field(
        default_factory=lambda: {"PLAINTEXT": "PLAINTEXT"})
    jmx_port: int = -1
    timestamp: str = field(default_factory=now_ms)
    features: Mapping[str, Any] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def listeners(self) -> tuple[str, ...]:
        return self.endpoints or (f"PLAINTEXT://{self.host}:{self.port}",)

    def encode(self) -> bytes:
        obj: dict[str, Any] = {
            **self.extra,
            "version": 5,
            "host": self.host,
            "port": self.port,
            "endpoints": list(self.listeners),
            "listener_security_protocol_map": dict(self.security_protocol_map),
            "jmx_port": self.jmx_port,
            "timestamp": self.timestamp,
            "features": dict(self.features),
        }
        if self.rack is not None:
            obj["rack"] = self.rack
        return _dumps(obj)

    @classmethod
    def decode(cls, path: str, data: bytes, broker_id: int) -> BrokerInfo:
        obj = _loads(path, data)
        endpoints = obj.get("endpoints", [])
        if not isinstance(endpoints, list) or not all(isinstance(e, str) for e in endpoints):
            raise CorruptMetadata(path, f"endpoints must be a list of strings: {endpoints!r}")
        rack = obj.get("rack")
        if rack is not None and not isinstance(rack, str):
            raise CorruptMetadata(path, f"rack must be a string: {rack!r}")
        return cls(
            id=broker_id,
            host=str(obj.get("host", "")),
            port=_int(path, obj, "port") if "port" in obj else -1,
            rack=rack,
            endpoints=tuple(endpoints),
            security_protocol_map=dict(obj.get("listener_security_protocol_map", {})),
            jmx_port=obj.get("jmx_port", -1),
            timestamp=str(obj.get("timestamp", "")),
            features=dict(obj.get("features", {})),
            extra=_extra(obj, ("version", "host", "port", "endpoints", "rack", "jmx_port",
                               "listener_security_protocol_map", "timestamp", "features")),
        )


# --- /brokers/topics/<t> -----------------------------------------------------------------------


MAX_INT32 = 2**31 - 1
MAX_REPLICAS = 1000
"""The most replicas a partition's list may name in a topic node: Kafka sets no bound, but a
list longer than any cluster's broker count is another tool's garbage, not an assignment."""


def _partition_map(path: str, value: Any, what: str) -> dict[int, tuple[int, ...]]:
    """A partition -> replicas object, as Kafka's rules have it: keys are partition numbers
    (decimal, 0 to 2^31-1), each list names distinct broker ids (0 to 2^31-1), at most
    :data:`MAX_REPLICAS` of them. Anything else is another tool's writing: CorruptMetadata."""
    if not isinstance(value, dict):
        raise CorruptMetadata(path, f"{what} must be an object, found {value!r:.200}")
    fast = _partition_map_checked(value)
    if fast is not None:
        return fast
    out: dict[int, tuple[int, ...]] = {}
    for key, replicas in value.items():
        if not (key.isascii() and key.isdigit()) or int(key) > MAX_INT32:
            raise CorruptMetadata(path, f"{what} key {key!r:.50} is not a partition number")
        index = int(key)
        ids = _int_list(path, replicas, f"{what}[{key}]")
        if len(ids) > MAX_REPLICAS:
            raise CorruptMetadata(path, f"{what}[{key}] names {len(ids)} replicas, more than "
                                        f"{MAX_REPLICAS}")
        if ids and (min(ids) < 0 or max(ids) > MAX_INT32):
            raise CorruptMetadata(path, f"{what}[{key}] has a broker id out of range: "
                                        f"{list(ids)!r:.200}")
        if len(set(ids)) != len(ids):
            raise CorruptMetadata(path, f"{what}[{key}] names a broker twice: {list(ids)!r:.200}")
        out[index] = ids
    return out


_LISTS = frozenset({list})


def _partition_map_checked(value: dict[Any, Any]) -> dict[int, tuple[int, ...]] | None:
    """:func:`_partition_map` of an object that keeps every rule, each checked over the whole
    object at once (a topic of thousands of partitions, in a fraction of the loop's time);
    None for anything else, which the loop then says what is wrong with."""
    keys, lists = list(value), list(value.values())
    if not lists or "" in value:
        return None
    joined = "".join(keys)
    if not (joined.isascii() and joined.isdigit() and max(map(len, keys)) <= 9):
        return None  # (nine digits stay below 2^31)
    if not _LISTS.issuperset(map(type, lists)):
        return None
    ids = list(chain.from_iterable(lists))
    if ids and not (_INTS.issuperset(map(type, ids)) and min(ids) >= 0 and max(ids) <= MAX_INT32):
        return None
    if max(map(len, lists)) > MAX_REPLICAS or sum(map(len, map(set, lists))) != len(ids):
        return None
    return dict(zip(map(int, keys), map(tuple, lists), strict=True))


def _encode_partition_map(value: Mapping[int, Iterable[int]]) -> dict[str, list[int]]:
    return {str(p): list(r) for p, r in sorted(value.items())}


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicAssignment:
    """A topic's replica assignment (JSON version 3): partition -> replicas, first preferred."""

    topic: str
    partitions: Mapping[int, tuple[int, ...]]
    topic_id: str | None = None
    adding: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    removing: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)

    def encode(self) -> bytes:
        obj: dict[str, Any] = {**self.extra, "version": 3}
        if self.topic_id is not None:
            obj["topic_id"] = self.topic_id
        obj["partitions"] = _encode_partition_map(self.partitions)
        obj["adding_replicas"] = _encode_partition_map(self.adding)
        obj["removing_replicas"] = _encode_partition_map(self.removing)
        return _dumps(obj)

    @classmethod
    def decode(cls, path: str, data: bytes, topic: str) -> TopicAssignment:
        obj = _loads(path, data)
        topic_id = obj.get("topic_id")
        if topic_id is not None and not isinstance(topic_id, str):
            raise CorruptMetadata(path, f"topic_id must be a string: {topic_id!r:.200}")
        return cls(
            topic=topic,
            topic_id=topic_id,
            partitions=_partition_map(path, obj.get("partitions"), "partitions"),
            adding=_partition_map(path, obj.get("adding_replicas", {}), "adding_replicas"),
            removing=_partition_map(path, obj.get("removing_replicas", {}), "removing_replicas"),
            extra=_extra(obj, ("version", "topic_id", "partitions", "adding_replicas",
                               "removing_replicas")),
        )


# --- /brokers/topics/<t>/partitions/<p>/state --------------------------------------------------
#
# One codec for the node, with a fast path for the form every controller writes: a controller
# electing 10,000 leaders encodes and decodes a state node per partition, and a standby
# decodes every state the active one writes. The fast paths give exactly what the general
# ones give (tests pin it); anything unusual goes through the general ones, which say what is
# wrong with it.


class StateFields(Protocol):
    """What a state node holds: :class:`PartitionStateNode` has it, and so has the controller's
    own per-partition value (``elections.LeaderAndIsr``, a named tuple)."""

    @property
    def leader(self) -> int: ...
    @property
    def leader_epoch(self) -> int: ...
    @property
    def isr(self) -> tuple[int, ...]: ...
    @property
    def controller_epoch(self) -> int: ...


_ISR_JSON: dict[tuple[int, ...], bytes] = {}  # an ISR's JSON list body; a few hundred distinct
_ISR_JSON_MAX = 4096


def encode_partition_state(state: StateFields) -> bytes:
    """The node's bytes for ``state`` without extra fields: exactly what ``json.dumps`` gives
    for Kafka's keys, built without the intermediate objects (a mass election's path). ISRs
    repeat across partitions, so their text is kept (a bounded cache)."""
    isr = _ISR_JSON.get(state.isr)
    if isr is None:
        if len(_ISR_JSON) >= _ISR_JSON_MAX:
            _ISR_JSON.clear()
        isr = _ISR_JSON[state.isr] = ",".join(map(str, state.isr)).encode()
    return b'{"version":1,"leader":%d,"leader_epoch":%d,"controller_epoch":%d,"isr":[%s]}' % (
        state.leader, state.leader_epoch, state.controller_epoch, isr)


_T = TypeVar("_T")
_NUMBER = rb"(?:0|[1-9][0-9]{0,17})"  # a JSON integer (no leading zero) well within int64
_CANONICAL_STATE = re.compile(
    rb'\{"version":1,"leader":(-1|%s),"leader_epoch":(%s),"controller_epoch":(%s),'
    rb'"isr":\[(%s(?:,%s)*)?\]\}' % ((_NUMBER,) * 5)).fullmatch
"""The bytes :func:`encode_partition_state` writes, for the numbers JSON reads as they are:
a match decodes to what the JSON path gives (tests pin it), anything else takes that path."""
_STATES: dict[bytes, tuple[int, int, tuple[int, ...], int]] = {}
"""Well-formed state nodes' bytes and their fields (a bounded cache, as _ISR_JSON)."""
_STATES_MAX = 1 << 16
_scan_json = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # (text, index) -> (value, end); StopIteration if none


def decode_partition_state(
    tp: TopicPartition,
    data: bytes,
    version: int,
    make: Callable[[int, int, tuple[int, ...], int, int], _T],
) -> _T:
    """The state node of ``tp`` at ``version``, as ``make(leader, leader_epoch, isr,
    controller_epoch, version)``: positional, so that a named tuple's constructor (the
    controller's ``LeaderAndIsr``) takes the fields as they come, without an intermediate
    object per partition. The common, well-formed node is read straight from its bytes (the
    form partctl writes) or its JSON, and its fields kept for the next node of the same bytes
    (states repeat across partitions: a cold load reads each distinct one once); anything else
    goes through :meth:`PartitionStateNode.decode`, which says what is wrong with it
    (:class:`CorruptMetadata` naming the path)."""
    known = _STATES.get(data) if type(data) is bytes else None
    if known is not None:
        return make(*known, version)
    try:
        m = _CANONICAL_STATE(data)  # what partctl writes: no JSON text, no dict
        if m is not None:
            leader, leader_epoch, controller_epoch, isr_text = m.groups()
            fields = (int(leader), int(leader_epoch),
                      tuple(map(int, isr_text.split(b","))) if isr_text else (),
                      int(controller_epoch))
        else:
            text = data.decode()
            obj, end = _scan_json(text, 0)  # json.loads without its checks: a third of the time
            if end != len(text):
                raise ValueError("trailing data")
            leader, leader_epoch = obj["leader"], obj["leader_epoch"]
            controller_epoch, isr = obj["controller_epoch"], obj["isr"]
            if not (type(leader) is int and type(leader_epoch) is int
                    and type(controller_epoch) is int and is_int_list(isr)):
                raise TypeError("not the common form")
            fields = (leader, leader_epoch, tuple(isr), controller_epoch)
        if type(data) is bytes:
            if len(_STATES) >= _STATES_MAX:
                _STATES.clear()
            _STATES[data] = fields
        return make(*fields, version)
    except (ValueError, UnicodeDecodeError, KeyError, TypeError, StopIteration):
        pass
    s = PartitionStateNode.decode(layout.partition_state(tp.topic, tp.partition), data)
    return make(s.leader, s.leader_epoch, s.isr, s.controller_epoch, version)


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionStateNode:
    """What ``/brokers/topics/<t>/partitions/<p>/state`` holds: leader, leader epoch, ISR and
    the controller epoch that wrote them (JSON version 1), and any other field the node had
    (``extra``, written back as read). What the metadata client reads and writes, and what a
    leader writes when it changes its ISR (``ControllerClient.write_isr``).

    ``leader`` is -1 when the partition has none. The node's version (the partition epoch)
    travels beside it, not inside (``Versioned``, or the write's expected version). The
    controller keeps its own per-partition value with the version inside,
    ``elections.LeaderAndIsr``, a named tuple that is several times cheaper to build.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    extra: Mapping[str, Any] = field(default_factory=dict)

    def encode(self) -> bytes:
        if not self.extra and type(self.isr) is tuple:
            return encode_partition_state(self)
        return _dumps({**self.extra, "version": 1, "leader": self.leader,
                       "leader_epoch": self.leader_epoch, "controller_epoch": self.controller_epoch,
                       "isr": list(self.isr)})

    @classmethod
    def decode(cls, path: str, data: bytes) -> PartitionStateNode:
        obj = _loads(path, data)
        return cls(
            leader=_int(path, obj, "leader"),
            leader_epoch=_int(path, obj, "leader_epoch"),
            controller_epoch=_int(path, obj, "controller_epoch"),
            isr=_int_list(path, obj.get("isr"), "isr"),
            extra=_extra(obj, ("version", "leader", "leader_epoch", "controller_epoch", "isr")),
        )


# --- admin requests and notifications ----------------------------------------------------------


def _partition_entries(path: str, data: bytes) -> list[dict[str, Any]]:
    obj = _loads(path, data)
    entries = obj.get("partitions")
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise CorruptMetadata(path, "'partitions' must be a list of objects")
    for entry in entries:
        if not isinstance(entry.get("topic"), str):
            raise CorruptMetadata(path, f"entry without a topic name: {entry!r}")
        _int(path, entry, "partition")
    return entries


def encode_reassignment(moves: Mapping[TopicPartition, Iterable[int]]) -> bytes:
    """``/admin/reassign_partitions``: target replicas per partition."""
    return _dumps({"version": 1, "partitions": [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas)}
        for tp, replicas in sorted(moves.items())
    ]})


def decode_reassignment(path: str, data: bytes) -> dict[TopicPartition, tuple[int, ...]]:
    out: dict[TopicPartition, tuple[int, ...]] = {}
    for entry in _partition_entries(path, data):
        tp = TopicPartition(topic=entry["topic"], partition=entry["partition"])
        out[tp] = _int_list(path, entry.get("replicas"), f"replicas of {tp}")
    return out


def encode_partitions(partitions: Iterable[TopicPartition]) -> bytes:
    """``/admin/preferred_replica_election`` and ISR change notifications: a partition list.

    The bytes ``json.dumps`` would give, built entry by entry: a request may name every
    partition of the cluster, and this is twice as fast as building the objects to dump."""
    quoted: dict[str, str] = {}
    entries = []
    for tp in sorted(set(partitions)):
        topic = quoted.get(tp.topic)
        if topic is None:
            topic = quoted[tp.topic] = json.dumps(tp.topic)
        entries.append(f'{{"topic":{topic},"partition":{tp.partition:d}}}')
    return ('{"version":1,"partitions":[' + ",".join(entries) + "]}").encode()


def decode_partitions(path: str, data: bytes) -> list[TopicPartition]:
    tp = TopicPartition  # positional: a request may name every partition of the cluster
    return [tp(e["topic"], e["partition"]) for e in _partition_entries(path, data)]


# --- /admin/reassign_partitions_owner (partctl's own) ------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ReassignmentOwner:
    """The run that executes the moves in ``/admin/reassign_partitions`` (partctl's own node,
    ephemeral, beside Kafka's): how a refused run names the plan in its way, and how a run tells
    its own claim from a later one. ``run`` is unique per run; ``plan`` a label (the plan file,
    the job) and ``digest`` the sha256 of the plan's JSON, so two runs of one plan are told
    apart from two plans."""

    run: str
    digest: str
    partitions: int
    plan: str = ""
    host: str = ""
    pid: int = 0
    timestamp: str = field(default_factory=now_ms)
    extra: Mapping[str, Any] = field(default_factory=dict)

    def encode(self) -> bytes:
        return _dumps({**self.extra, "version": 1, "run": self.run, "plan": self.plan,
                       "digest": self.digest, "partitions": self.partitions, "host": self.host,
                       "pid": self.pid, "timestamp": self.timestamp})

    @classmethod
    def decode(cls, path: str, data: bytes) -> ReassignmentOwner:
        obj = _loads(path, data)
        for key in ("run", "digest"):
            if not isinstance(obj.get(key), str):
                raise CorruptMetadata(path, f"{key!r} must be a string: {obj.get(key)!r}")
        return cls(run=obj["run"], digest=obj["digest"],
                   partitions=_int(path, obj, "partitions"), plan=str(obj.get("plan", "")),
                   host=str(obj.get("host", "")),
                   pid=obj["pid"] if isinstance(obj.get("pid"), int) else 0,
                   timestamp=str(obj.get("timestamp", "")),
                   extra=_extra(obj, ("version", "run", "plan", "digest", "partitions", "host",
                                      "pid", "timestamp")))

    def describe(self) -> str:
        """One line naming the plan and who runs it, for an error message."""
        name = f"plan {self.plan}" if self.plan else "a plan"
        since = ""
        if self.timestamp.isdigit():
            when = time.gmtime(int(self.timestamp) / 1000)
            since = f" since {time.strftime('%Y-%m-%d %H:%M:%S', when)} UTC"
        return (f"{name} (sha256 {self.digest[:12]}, {self.partitions} partition(s)), executed "
                f"by pid {self.pid} on {self.host or '?'}{since}")


# --- /config/<entity type>/<name> --------------------------------------------------------------


def encode_entity_config(config: Mapping[str, str]) -> bytes:
    """A config entity's overrides (``/config/topics/<t>`` and the like), as Kafka writes them:
    ``{"version":1,"config":{...}}``, values as strings."""
    return _dumps({"version": 1, "config": {str(k): str(v) for k, v in config.items()}})


def decode_entity_config(path: str, data: bytes) -> dict[str, str]:
    obj = _loads(path, data)
    config = obj.get("config", {})
    if not isinstance(config, dict) or not all(isinstance(v, str) for v in config.values()):
        raise CorruptMetadata(path, f"'config' must be an object of strings: {config!r}")
    return dict(config)


# --- /config/changes/config_change_<seq> ------------------------------------------------------


def encode_config_change(entity_path: str) -> bytes:
    """A config change notification as Kafka writes it (version 2):
    ``{"version":2,"entity_path":"topics/<t>"}``."""
    return _dumps({"version": 2, "entity_path": entity_path})


def decode_config_change(path: str, data: bytes) -> tuple[str, str]:
    """The entity a notification names, as (entity type, entity name): version 2's
    ``entity_path`` (``topics/<t>``; the name may hold more slashes, as
    ``users/<u>/clients/<c>``) or version 1's ``entity_type`` and ``entity_name``, as
    Kafka's ZkConfigManager reads them."""
    obj = _loads(path, data)
    version = obj.get("version")
    if version == 2:
        entity_path = obj.get("entity_path")
        if not isinstance(entity_path, str) or "/" not in entity_path:
            raise CorruptMetadata(path, f"'entity_path' must be '<type>/<name>': "
                                        f"{entity_path!r}")
        entity_type, _, name = entity_path.partition("/")
        return entity_type, name
    if version == 1:
        kind, entity = obj.get("entity_type"), obj.get("entity_name")
        if kind not in ("topics", "clients") or not isinstance(entity, str):
            raise CorruptMetadata(path, "version 1 needs 'entity_type' topics or clients and "
                                        "an 'entity_name'")
        return str(kind), entity
    raise CorruptMetadata(path, f"unsupported config change version {version!r} "
                                f"(supported: 1 and 2)")


# --- /cluster/id -------------------------------------------------------------------------------


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(path: str, data: bytes) -> str:
    obj = _loads(path, data)
    value = obj.get("id")
    if not isinstance(value, str):
        raise CorruptMetadata(path, f"'id' must be a string: {value!r}")
    return value


# --- /latest_producer_id_block -----------------------------------------------------------------

PRODUCER_ID_BLOCK_SIZE = 1000
"""Producer ids a broker claims at a time (Kafka's ``ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE``)."""

_MAX_INT64 = (1 << 63) - 1


def _id_text(path: str, obj: Mapping[str, Any], key: str) -> int:
    """A producer id written as a decimal string (Kafka writes these longs as JSON strings)."""
    value = obj.get(key)
    if not isinstance(value, str) or not value.isascii() or not value.isdigit():
        raise CorruptMetadata(path, f"{key!r} must be a decimal string, found {value!r}")
    number = int(value)
    if number > _MAX_INT64:
        raise CorruptMetadata(path, f"{key!r} exceeds a 64-bit id: {value}")
    return number


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerIdBlock:
    """The producer ids ``block_start`` to ``block_end`` (both included) that broker ``broker``
    claimed: the content of ``/latest_producer_id_block`` (Kafka's ProducerIdBlockZNode, JSON
    version 1, the ids as strings). The node holds the latest block any broker claimed, so the
    next claim starts right after it and no two brokers ever hand out the same id."""

    broker: int
    block_start: int
    block_end: int
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0 <= self.block_start <= self.block_end <= _MAX_INT64:
            raise ValueError(f"invalid producer id block {self.block_start}..{self.block_end}")

    @property
    def size(self) -> int:
        return self.block_end - self.block_start + 1

    @property
    def next_block_start(self) -> int:
        """Where the block claimed after this one starts."""
        return self.block_end + 1

    def encode(self) -> bytes:
        return _dumps({**self.extra, "version": 1, "broker": self.broker,
                       "block_start": str(self.block_start), "block_end": str(self.block_end)})

    @classmethod
    def decode(cls, path: str, data: bytes) -> ProducerIdBlock:
        obj = _loads(path, data)
        start, end = _id_text(path, obj, "block_start"), _id_text(path, obj, "block_end")
        if end < start:
            raise CorruptMetadata(path, f"block_end {end} is below block_start {start}")
        return cls(broker=_int(path, obj, "broker"), block_start=start, block_end=end,
                   extra=_extra(obj, ("version", "broker", "block_start", "block_end")))
