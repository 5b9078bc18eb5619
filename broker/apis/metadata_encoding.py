"""The Metadata response (key 3, versions 0-12) encoded straight to bytes, byte for byte what
kio's generic writer gives for the same response (``tests/broker/protocol/
test_metadata_encoding.py`` compares the two for every version), and the encoded topics kept
between metadata changes.

kio's writer walks a response field by field through its schema, and the handler first builds
a kio object per partition: about 30 µs a partition on this machine, so 0.6 s for a client's
all-topics request at 20,000 partitions. A client asks for every topic often (librdkafka every
``topic.metadata.refresh.interval.ms``, at each leader change, at start), and between two
UpdateMetadata requests the answer for a topic does not change. So the partitions of a topic
are encoded here with :mod:`struct` from the metadata cache's entries, and the encoded topic is
kept: keyed by the topic's partitions (the cache's mapping, which an update replaces for the
topics it touches and keeps for the others), the request's listener and version, and the
brokers live on that listener (which decide a partition's leader error).

Which fields a version carries is read from kio's classes for that version (the same schema
kio writes from); how they are written is Kafka's: before version 9 int16-length strings and
int32-count arrays, from version 9 (flexible) unsigned-varint lengths plus one and an empty
tagged-field section after each struct.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import fields
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode

from broker.wire import response_module
from broker.wire_values import count, ints, string
from interbroker.requests import LiveBroker, UpdateMetadataPartition

__all__ = ["Shape", "TopicCache", "empty_partitions", "encode_partitions", "encode_response",
           "encode_topic", "live_on", "shape"]

API_KEY = 3
NO_LEADER = -1
FIRST_FLEXIBLE = 9
_ZERO_UUID = bytes(16)
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_HEAD = struct.Struct(">hii")  # error code, partition index, leader id
_HEAD_EPOCH = struct.Struct(">hiii")  # ... and the leader epoch (version 7+)
_NONE = int(ErrorCode.none)
_LEADER_NOT_AVAILABLE = int(ErrorCode.leader_not_available)
_LISTENER_NOT_FOUND = int(ErrorCode.listener_not_found)
_REPLICA_NOT_AVAILABLE = int(ErrorCode.replica_not_available)


class Shape:
    """What one response version carries and how it writes lengths (read from kio's classes
    for that version)."""

    __slots__ = ("broker_rack", "cluster_authorized_operations", "cluster_id", "controller_id",
                 "flexible", "header_class", "is_internal", "leader_epoch", "module",
                 "offline_replicas", "throttle_time", "topic_authorized_operations", "topic_id",
                 "version")

    def __init__(self, version: int) -> None:
        module = response_module(API_KEY, version)
        response = {f.name for f in fields(module.MetadataResponse)}
        topic = {f.name for f in fields(module.MetadataResponseTopic)}
        partition = {f.name for f in fields(module.MetadataResponsePartition)}
        broker = {f.name for f in fields(module.MetadataResponseBroker)}
        self.version = version
        self.module = module
        self.header_class = module.MetadataResponse.__header_schema__
        self.flexible = bool(module.MetadataResponse.__flexible__)
        self.throttle_time = "throttle_time" in response
        self.cluster_id = "cluster_id" in response
        self.controller_id = "controller_id" in response
        self.cluster_authorized_operations = "cluster_authorized_operations" in response
        self.broker_rack = "rack" in broker
        self.topic_id = "topic_id" in topic
        self.is_internal = "is_internal" in topic
        self.topic_authorized_operations = "topic_authorized_operations" in topic
        self.leader_epoch = "leader_epoch" in partition
        self.offline_replicas = "offline_replicas" in partition


@cache
def shape(version: int) -> Shape:
    return Shape(version)


def encode_partitions(partitions: Mapping[int, UpdateMetadataPartition], live: frozenset[int],
                      registered: Mapping[int, Any], s: Shape) -> bytes:
    """The partitions array of one topic, by partition index, as the handler answers them:
    ``live`` are the brokers with an endpoint on the request's listener, ``registered`` every
    live broker (a leader registered without that listener is LISTENER_NOT_FOUND from version
    6)."""
    flexible = s.flexible
    filter_unavailable = s.version == 0
    with_epoch = s.leader_epoch
    with_offline = s.offline_replicas
    listener_error = _LISTENER_NOT_FOUND if s.version >= 6 else _LEADER_NOT_AVAILABLE
    out = [count(len(partitions), flexible)]
    append = out.append
    for index in sorted(partitions):
        state = partitions[index]
        replicas, isr = state.replicas, state.isr
        if filter_unavailable:
            replicas = tuple(r for r in replicas if r in live)
            isr = tuple(r for r in isr if r in live)
        leader = state.leader
        if leader not in live:
            error = listener_error if leader in registered else _LEADER_NOT_AVAILABLE
            leader = NO_LEADER
        elif len(replicas) < len(state.replicas) or len(isr) < len(state.isr):
            error = _REPLICA_NOT_AVAILABLE
        else:
            error = _NONE
        if with_epoch:
            append(_HEAD_EPOCH.pack(error, index, leader, state.leader_epoch))
        else:
            append(_HEAD.pack(error, index, leader))
        append(ints(replicas, flexible))
        append(ints(isr, flexible))
        if with_offline:
            append(ints(state.offline_replicas, flexible))
        if flexible:
            append(b"\x00")
    return b"".join(out)


def encode_topic(s: Shape, error: ErrorCode, name: str | None, topic_id: uuid.UUID | None,
                 is_internal: bool, partitions: bytes, operations: int) -> bytes:
    """One topic of the topics array; ``partitions`` encoded by :func:`encode_partitions` (or
    the empty array, :func:`empty_partitions`)."""
    flexible = s.flexible
    out = [_I16.pack(int(error)), string(name, flexible)]
    if s.topic_id:
        out.append(topic_id.bytes if topic_id is not None else _ZERO_UUID)
    if s.is_internal:
        out.append(b"\x01" if is_internal else b"\x00")
    out.append(partitions)
    if s.topic_authorized_operations:
        out.append(_I32.pack(operations))
    if flexible:
        out.append(b"\x00")
    return b"".join(out)


def empty_partitions(s: Shape) -> bytes:
    return count(0, s.flexible)


def encode_response(s: Shape, brokers: Sequence[tuple[int, str, int, str | None]],
                    cluster_id: str | None, controller_id: int, topics: Sequence[bytes],
                    cluster_operations: int) -> bytes:
    """The response body (no header): ``brokers`` as (node id, host, port, rack), ``topics``
    each encoded by :func:`encode_topic`; throttle time zero."""
    flexible = s.flexible
    out = [_I32.pack(0)] if s.throttle_time else []
    out.append(count(len(brokers), flexible))
    for node_id, host, port, rack in brokers:
        out.append(_I32.pack(node_id) + string(host, flexible) + _I32.pack(port))
        if s.broker_rack:
            out.append(string(rack, flexible))
        if flexible:
            out.append(b"\x00")
    if s.cluster_id:
        out.append(string(cluster_id, flexible))
    if s.controller_id:
        out.append(_I32.pack(controller_id))
    out.append(count(len(topics), flexible))
    out.extend(topics)
    if s.cluster_authorized_operations:
        out.append(_I32.pack(cluster_operations))
    if flexible:
        out.append(b"\x00")
    return b"".join(out)


class TopicCache:
    """Encoded partitions arrays, by (topic, listener, version), valid while the topic's
    partitions mapping (the metadata cache replaces it when the topic changes), the brokers
    live on the listener and the live brokers (a leader live without the listener is
    LISTENER_NOT_FOUND, not LEADER_NOT_AVAILABLE) are the same. Bounded: cleared when it holds more entries than
    ``limit_per_topic`` per topic of the snapshot it was last used with."""

    __slots__ = ("_entries", "limit_per_topic")

    def __init__(self, limit_per_topic: int = 4) -> None:
        self._entries: dict[tuple[str, str, int],
                            tuple[object, frozenset[int], frozenset[int], bytes]] = {}
        self.limit_per_topic = limit_per_topic

    def partitions(self, name: str, partitions: Mapping[int, UpdateMetadataPartition],
                   brokers: Mapping[int, LiveBroker], live: frozenset[int], listener: str,
                   s: Shape, topic_count: int) -> bytes:
        key = (name, listener, s.version)
        entry = self._entries.get(key)
        registered = brokers.keys()
        if (entry is not None and entry[0] is partitions and entry[1] == live
                and entry[2] == registered):
            return entry[3]
        encoded = encode_partitions(partitions, live, brokers, s)
        if len(self._entries) >= self.limit_per_topic * max(topic_count, 1):
            self._entries.clear()
        self._entries[key] = (partitions, live, frozenset(registered), encoded)
        return encoded

    def __len__(self) -> int:
        return len(self._entries)


def live_on(brokers: Mapping[int, LiveBroker], listener: str) -> frozenset[int]:
    """The brokers with an endpoint on ``listener``."""
    return frozenset(b.id for b in brokers.values()
                     if any(e.listener == listener for e in b.endpoints))
