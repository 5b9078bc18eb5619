"""The JSON of Kafka's ZooKeeper layout, decoded into frozen values and encoded back.

Keys and value types are exactly Kafka's; fields a newer Kafka may add are kept in ``extra`` so
that a decode followed by an encode gives the same JSON. Malformed content raises
:class:`CorruptMetadata` naming the path.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, NamedTuple

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
    """``sorted(tps)``, about three times faster for the ten thousands of a mass election:
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
        raise CorruptMetadata(path, f"{key!r} must be an integer, found {value!r}")
    return value


_INTS = frozenset({int})


def is_int_list(value: Any) -> bool:
    """Whether decoded JSON ``value`` is a list of integers (JSON gives exact ints; a bool is
    not one). The set of element types is built in C: a topic of thousands of partitions checks
    its lists in a fraction of a generator's time."""
    return type(value) is list and _INTS.issuperset(map(type, value))


def _int_list(path: str, value: Any, what: str) -> tuple[int, ...]:
    if not is_int_list(value):
        raise CorruptMetadata(path, f"{what} must be a list of integers, found {value!r}")
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
    broker_id: int
    timestamp: str = field(default_factory=now_ms)
    extra: Mapping[str, Any] = field(default_factory=dict)

    def encode(self) -> bytes:
        return _dumps({**self.extra, "version": 1, "brokerid": self.broker_id,
                       "timestamp": self.timestamp})

    @classmethod
    def decode(cls, path: str, data: bytes) -> ControllerInfo:
        obj = _loads(path, data)
        return cls(broker_id=_int(path, obj, "brokerid"), timestamp=str(obj.get("timestamp", "")),
                   extra=_extra(obj, ("version", "brokerid", "timestamp")))


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


def _partition_map(path: str, value: Any, what: str) -> dict[int, tuple[int, ...]]:
    if not isinstance(value, dict):
        raise CorruptMetadata(path, f"{what} must be an object, found {value!r}")
    out: dict[int, tuple[int, ...]] = {}
    for key, replicas in value.items():
        try:
            index = int(key)
        except ValueError:
            raise CorruptMetadata(path, f"{what} key {key!r} is not a partition number") from None
        out[index] = _int_list(path, replicas, f"{what}[{key}]")
    return out


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
            raise CorruptMetadata(path, f"topic_id must be a string: {topic_id!r}")
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


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionState:
    """Leader, leader epoch, ISR and the controller epoch that wrote them (JSON version 1).

    ``leader`` is -1 when the partition has none. The node's version (the partition epoch)
    travels beside it, not inside.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    extra: Mapping[str, Any] = field(default_factory=dict)

    def encode(self) -> bytes:
        return _dumps({**self.extra, "version": 1, "leader": self.leader,
                       "leader_epoch": self.leader_epoch, "controller_epoch": self.controller_epoch,
                       "isr": list(self.isr)})

    @classmethod
    def decode(cls, path: str, data: bytes) -> PartitionState:
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


# --- /cluster/id -------------------------------------------------------------------------------


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(path: str, data: bytes) -> str:
    obj = _loads(path, data)
    value = obj.get("id")
    if not isinstance(value, str):
        raise CorruptMetadata(path, f"'id' must be a string: {value!r}")
    return value
