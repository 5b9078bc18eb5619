"""The records of a consumer group (KIP-848) in ``__consumer_offsets``, in Kafka's formats.

A key is a big-endian int16 record type followed by its fields (non-flexible: strings as an
int16 length); the type is what tells the records apart:

- 3 ``ConsumerGroupMetadata`` (group): value the group epoch;
- 4 ``ConsumerGroupPartitionMetadata`` (group): value the subscribed topics' ids, names and
  partition counts (with each partition's racks: none here);
- 5 ``ConsumerGroupMemberMetadata`` (group, member): value instance id, rack, client id and host,
  subscribed topic names and regex, rebalance timeout, server assignor;
- 6 ``ConsumerGroupTargetAssignmentMetadata`` (group): value the assignment epoch;
- 7 ``ConsumerGroupTargetAssignmentMember`` (group, member): value the member's target
  partitions by topic id;
- 8 ``ConsumerGroupCurrentMemberAssignment`` (group, member): value the member epoch, the
  previous epoch, the member state, the assigned partitions and those pending revocation.

Values are version 0 of flexible schemas: compact strings and arrays (unsigned varint length
plus one, zero for null), 16-byte UUIDs, and an empty tagged-field section after each struct.
Tagged fields a newer writer added are skipped when read.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from uuid import UUID

__all__ = [
    "CONSUMER_KEY_TYPES",
    "ConsumerGroupKey",
    "ConsumerMemberKey",
    "CurrentAssignmentValue",
    "GroupEpochValue",
    "MemberMetadataValue",
    "PartitionMetadataValue",
    "TargetAssignmentEpochValue",
    "TargetMemberValue",
    "TopicPartitions",
    "decode_consumer_key",
    "decode_consumer_value",
    "encode_consumer_key",
    "encode_consumer_value",
]

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_METADATA = 6
TARGET_MEMBER = 7
CURRENT_ASSIGNMENT = 8
CONSUMER_KEY_TYPES = frozenset(range(3, 9))
_GROUP_KEYS = frozenset({GROUP_METADATA, PARTITION_METADATA, TARGET_METADATA})

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

TopicPartitions = Mapping[uuid.UUID, tuple[int, ...]]
"""Partitions by topic id."""


class ConsumerRecordError(ValueError):
    """Bytes that are not a consumer group record this broker can read."""


@dataclass(frozen=True, slots=True)
class ConsumerGroupKey:
    """Keys 3, 4 and 6: one per group."""

    record_type: int
    group: str


@dataclass(frozen=True, slots=True)
class ConsumerMemberKey:
    """Keys 5, 7 and 8: one per member of a group."""

    record_type: int
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class GroupEpochValue:
    epoch: int


@dataclass(frozen=True, slots=True)
class PartitionMetadataValue:
    topics: tuple[tuple[uuid.UUID, str, int], ...]
    """(topic id, name, partition count) of each subscribed topic."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None


@dataclass(frozen=True, slots=True)
class TargetAssignmentEpochValue:
    assignment_epoch: int


@dataclass(frozen=True, slots=True)
class TargetMemberValue:
    partitions: tuple[tuple[uuid.UUID, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class CurrentAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: tuple[tuple[uuid.UUID, tuple[int, ...]], ...]
    pending_revocation: tuple[tuple[uuid.UUID, tuple[int, ...]], ...]


ConsumerKey = ConsumerGroupKey | ConsumerMemberKey
ConsumerValue = (GroupEpochValue | PartitionMetadataValue | MemberMetadataValue
                 | TargetAssignmentEpochValue | TargetMemberValue | CurrentAssignmentValue)
_VALUE_OF = {GROUP_METADATA: GroupEpochValue, PARTITION_METADATA: PartitionMetadataValue,
             MEMBER_METADATA: MemberMetadataValue, TARGET_METADATA: TargetAssignmentEpochValue,
             TARGET_MEMBER: TargetMemberValue, CURRENT_ASSIGNMENT: CurrentAssignmentValue}


# --- keys (non-flexible) ----------------------------------------------------------------------


def _legacy_string(out: bytearray, text: str) -> None:
    data = text.encode("utf-8")
    out += _I16.pack(len(data))
    out += data


def encode_consumer_key(key: ConsumerKey) -> bytes:
    out = bytearray(_I16.pack(key.record_type))
    _legacy_string(out, key.group)
    if isinstance(key, ConsumerMemberKey):
        _legacy_string(out, key.member_id)
    return bytes(out)


def decode_consumer_key(record_type: int, data: bytes, pos: int) -> ConsumerKey:
    """The key of ``record_type`` whose fields start at ``pos`` of ``data``."""
    r = _Reader(data, pos)
    group = r.legacy_string()
    key: ConsumerKey
    if record_type in _GROUP_KEYS:
        key = ConsumerGroupKey(record_type, group)
    elif record_type in CONSUMER_KEY_TYPES:
        key = ConsumerMemberKey(record_type, group, r.legacy_string())
    else:
        raise ConsumerRecordError(f"unknown key type {record_type}")
    r.end()
    return key


# --- values (flexible, version 0) -------------------------------------------------------------


def _varint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _string(out: bytearray, text: str | None) -> None:
    if text is None:
        _varint(out, 0)
        return
    data = text.encode("utf-8")
    _varint(out, len(data) + 1)
    out += data


def _topic_partitions(out: bytearray, items: tuple[tuple[uuid.UUID, tuple[int, ...]], ...]
                      ) -> None:
    _varint(out, len(items) + 1)
    for topic_id, partitions in items:
        out += topic_id.bytes
        _varint(out, len(partitions) + 1)
        for p in partitions:
            out += _I32.pack(p)
        _varint(out, 0)  # tagged fields


def encode_consumer_value(value: ConsumerValue) -> bytes:
    out = bytearray(_I16.pack(0))
    match value:
        case GroupEpochValue(epoch=epoch):
            out += _I32.pack(epoch)
        case PartitionMetadataValue(topics=topics):
            _varint(out, len(topics) + 1)
            for topic_id, name, count in topics:
                out += topic_id.bytes
                _string(out, name)
                out += _I32.pack(count)
                _varint(out, 1)  # no partition racks
                _varint(out, 0)
        case MemberMetadataValue():
            _string(out, value.instance_id)
            _string(out, value.rack_id)
            _string(out, value.client_id)
            _string(out, value.client_host)
            _varint(out, len(value.subscribed_topic_names) + 1)
            for name in value.subscribed_topic_names:
                _string(out, name)
            _string(out, value.subscribed_topic_regex)
            out += _I32.pack(value.rebalance_timeout_ms)
            _string(out, value.server_assignor)
        case TargetAssignmentEpochValue(assignment_epoch=epoch):
            out += _I32.pack(epoch)
        case TargetMemberValue(partitions=partitions):
            _topic_partitions(out, partitions)
        case CurrentAssignmentValue():
            out += _I32.pack(value.member_epoch)
            out += _I32.pack(value.previous_member_epoch)
            out += _I8.pack(value.state)
            _topic_partitions(out, value.assigned)
            _topic_partitions(out, value.pending_revocation)
    _varint(out, 0)  # tagged fields
    return bytes(out)


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def _take(self, size: int) -> bytes:
        if size < 0 or self.pos + size > len(self.data):
            raise ConsumerRecordError("record cut short")
        blob = self.data[self.pos:self.pos + size]
        self.pos += size
        return bytes(blob)

    def fixed(self, s: struct.Struct) -> int:
        return s.unpack(self._take(s.size))[0]

    def end(self) -> None:
        """Refuse bytes after the last field: the record is not in the schema it names."""
        if self.pos != len(self.data):
            raise ConsumerRecordError(f"{len(self.data) - self.pos} bytes after the record")

    def varint(self) -> int:
        value = shift = 0
        while True:
            (byte,) = self._take(1)
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7
            if shift > 28:
                raise ConsumerRecordError("varint too long")

    def _text(self, blob: bytes) -> str:
        try:
            return blob.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConsumerRecordError("a string that is not UTF-8") from exc

    def legacy_string(self) -> str:
        return self._text(self._take(self.fixed(_I16)))

    def nullable_string(self) -> str | None:
        size = self.varint()
        return None if size == 0 else self._text(self._take(size - 1))

    def string(self) -> str:
        text = self.nullable_string()
        if text is None:
            raise ConsumerRecordError("a null string where one is required")
        return text

    def count(self) -> int:
        size = self.varint()
        if size == 0:
            raise ConsumerRecordError("a null array where one is required")
        return size - 1

    # ``UUID``, not ``uuid.UUID``: below this method, ``uuid`` in the class body names it
    def uuid(self) -> UUID:
        return UUID(bytes=self._take(16))

    def tags(self) -> None:
        for _ in range(self.varint()):
            self.varint()
            self._take(self.varint())

    def topic_partitions(self) -> tuple[tuple[UUID, tuple[int, ...]], ...]:
        items = []
        for _ in range(self.count()):
            topic_id = self.uuid()
            partitions = tuple(self.fixed(_I32) for _ in range(self.count()))
            self.tags()
            items.append((topic_id, partitions))
        return tuple(items)


def decode_consumer_value(key: ConsumerKey, data: bytes | None) -> ConsumerValue | None:
    """The value under ``key``; None for a tombstone."""
    if data is None:
        return None
    r = _Reader(data)
    version = r.fixed(_I16)
    if version != 0:
        raise ConsumerRecordError(f"unknown value version {version} of key type "
                                  f"{key.record_type}")
    value: ConsumerValue
    match key.record_type:
        case 3:
            value = GroupEpochValue(r.fixed(_I32))
        case 4:
            topics = []
            for _ in range(r.count()):
                topic_id, name, count = r.uuid(), r.string(), r.fixed(_I32)
                for _ in range(r.count()):
                    r.fixed(_I32)
                    for _ in range(r.count()):
                        r.string()
                    r.tags()
                r.tags()
                topics.append((topic_id, name, count))
            value = PartitionMetadataValue(tuple(topics))
        case 5:
            value = MemberMetadataValue(
                instance_id=r.nullable_string(), rack_id=r.nullable_string(),
                client_id=r.string(), client_host=r.string(),
                subscribed_topic_names=tuple(r.string() for _ in range(r.count())),
                subscribed_topic_regex=r.nullable_string(),
                rebalance_timeout_ms=r.fixed(_I32), server_assignor=r.nullable_string())
        case 6:
            value = TargetAssignmentEpochValue(r.fixed(_I32))
        case 7:
            value = TargetMemberValue(r.topic_partitions())
        case _:
            value = CurrentAssignmentValue(
                member_epoch=r.fixed(_I32), previous_member_epoch=r.fixed(_I32),
                state=r.fixed(_I8), assigned=r.topic_partitions(),
                pending_revocation=r.topic_partitions())
    r.tags()
    r.end()
    return value
