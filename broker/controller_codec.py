"""The bodies of the controller's two large requests, LeaderAndIsr v7 and UpdateMetadata v8,
written straight from the controller's values.

:func:`broker.controller_channel.encode_request` builds kio's classes and has kio write them:
every field a checked value object, every integer parsed again on the way in. For 5,000
partitions that is 61 ms (LeaderAndIsr) and 50 ms (UpdateMetadata) of the interpreter on this
machine when nothing else runs, and it ran on the controller's sender threads in the middle of
a controlled shutdown, beside the election and the broker's own work, where a profile found it
an eighth of the controller's process. These functions write the same bytes (Kafka's layout
for those versions, flexible: compact arrays and strings, an empty tagged-field section after
each struct) with ``struct``, a replica list encoded once per distinct tuple: 5.9 ms and
4.0 ms. kio stays the reference: ``tests/broker/controller/test_controller_codec.py`` checks
byte for byte that both agree, on requests of every shape.

The layouts (fields in order; ``[x]`` a compact array, ``str`` a compact string, ``tags`` the
empty tagged fields, one zero byte):

- LeaderAndIsr v7: controller id i32, KRaft controller bool (false), controller epoch i32,
  broker epoch i64, type i8 (0), [topic: name str, id uuid, [partition: index i32,
  controller epoch i32, leader i32, leader epoch i32, [isr i32], partition epoch i32,
  [replicas i32], [adding i32], [removing i32], is new bool, leader recovery state i8 (0),
  tags], tags], [live leader: id i32, host str, port i32, tags], tags.
- UpdateMetadata v8: controller id i32, KRaft controller bool (false), controller epoch i32,
  broker epoch i64, [topic: name str, id uuid, [partition: index i32, controller epoch i32,
  leader i32, leader epoch i32, [isr i32], zk version i32, [replicas i32], [offline i32],
  tags], tags], [broker: id i32, [endpoint: port i32, host str, listener str, security
  protocol i16, tags], rack nullable str, tags], tags (the type is a tagged field, left out at
  its default).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TypeVar

from broker.wire_values import count, ints, string
from interbroker.requests import (
    Endpoint,
    LeaderAndIsrPartition,
    LeaderAndIsrRequest,
    LiveBroker,
    UpdateMetadataPartition,
    UpdateMetadataRequest,
)

__all__ = ["encode_leader_and_isr_v7", "encode_update_metadata_v8"]

_HEAD = struct.Struct(">i?iq")  # controller id, KRaft flag, controller epoch, broker epoch
_FOUR = struct.Struct(">iiii")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_TAGS = b"\x00"
_LAI_TAIL = {False: b"\x00\x00" + _TAGS, True: b"\x01\x00" + _TAGS}
"""is new, leader recovery state 0 (recovered), no tags."""


def _arrays() -> Callable[[tuple[int, ...]], bytes]:
    """A compact array of int32s, each distinct tuple encoded once (most partitions share
    their replica lists with many others)."""
    cache: dict[tuple[int, ...], bytes] = {}

    def array(values: tuple[int, ...]) -> bytes:
        data = cache.get(values)
        if data is None:
            data = cache[values] = ints(values, True)
        return data

    return array


_P = TypeVar("_P", LeaderAndIsrPartition, UpdateMetadataPartition)


def _by_topic(parts: Iterable[_P]) -> dict[str, list[_P]]:
    """The partitions of each topic, topics in the order first named (as the kio encoder
    groups them)."""
    out: dict[str, list[_P]] = {}
    for p in parts:
        group = out.get(p.topic)
        if group is None:
            group = out[p.topic] = []
        group.append(p)
    return out


def _topics(partitions: Iterable[_P], ids: Mapping[str, str],
            topic_id: Callable[[str | None], bytes], entry: Callable[[_P], bytes]
            ) -> Iterator[bytes]:
    """The topic states array of both requests: each topic's name, id and partitions (each
    written by ``entry``), in the order first named."""
    by_topic = _by_topic(partitions)
    yield count(len(by_topic), True)
    for name, parts in by_topic.items():
        yield string(name, True) + topic_id(ids.get(name)) + count(len(parts), True)
        yield from map(entry, parts)
        yield _TAGS


def encode_leader_and_isr_v7(request: LeaderAndIsrRequest, listener: str,
                             topic_id: Callable[[str | None], bytes]) -> bytes:
    """The body of ``request`` as LeaderAndIsr v7 (Kafka 3.9's ZooKeeper-mode controller's);
    ``topic_id`` turns a topic id's text into its 16 bytes. Live leaders with no endpoint on
    ``listener`` are left out."""
    array = _arrays()
    four, i32, tail = _FOUR.pack, _I32.pack, _LAI_TAIL
    out = [_HEAD.pack(request.controller_id, False, request.controller_epoch,
                      request.broker_epoch), b"\x00"]

    def entry(p: LeaderAndIsrPartition) -> bytes:
        return b"".join((
            four(p.partition, p.controller_epoch, p.leader, p.leader_epoch), array(p.isr),
            i32(p.partition_epoch), array(p.replicas), array(p.adding_replicas),
            array(p.removing_replicas), tail[bool(p.is_new)]))

    out.extend(_topics(request.partitions, request.topic_ids, topic_id, entry))
    leaders = [(b.id, e) for b in request.live_leaders
               if (e := _endpoint(b.endpoints, listener)) is not None]
    out.append(count(len(leaders), True))
    for broker_id, endpoint in leaders:
        out.append(i32(broker_id) + string(endpoint.host, True) + i32(endpoint.port) + _TAGS)
    out.append(_TAGS)
    return b"".join(out)


def encode_update_metadata_v8(request: UpdateMetadataRequest,
                              topic_id: Callable[[str | None], bytes],
                              protocol_id: Callable[[str], int]) -> bytes:
    """The body of ``request`` as UpdateMetadata v8; ``topic_id`` as above, ``protocol_id``
    a security protocol's number."""
    array = _arrays()
    four, i32 = _FOUR.pack, _I32.pack
    out = [_HEAD.pack(request.controller_id, False, request.controller_epoch,
                      request.broker_epoch)]

    def entry(p: UpdateMetadataPartition) -> bytes:
        return b"".join((
            four(p.partition, p.controller_epoch, p.leader, p.leader_epoch), array(p.isr),
            i32(p.partition_epoch), array(p.replicas), array(p.offline_replicas), _TAGS))

    out.extend(_topics(request.partitions, request.topic_ids, topic_id, entry))
    out.append(count(len(request.live_brokers), True))
    for b in request.live_brokers:
        out.append(_broker(b, protocol_id))
    out.append(_TAGS)
    return b"".join(out)


def _broker(b: LiveBroker, protocol_id: Callable[[str], int]) -> bytes:
    parts = [_I32.pack(b.id), count(len(b.endpoints), True)]
    for e in b.endpoints:
        parts.append(_I32.pack(e.port) + string(e.host, True) + string(e.listener, True)
                     + _I16.pack(protocol_id(e.security_protocol)) + _TAGS)
    parts.append(string(b.rack, True) + _TAGS)
    return b"".join(parts)


def _endpoint(endpoints: Iterable[Endpoint], listener: str) -> Endpoint | None:
    return next((e for e in endpoints if e.listener == listener), None)
