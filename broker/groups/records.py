"""The records of ``__consumer_offsets``, in Kafka's formats, and which partition holds a group.

Kafka keeps a group's state in the compacted ``__consumer_offsets`` topic, keyed so that
compaction keeps what matters: one record per (group, topic, partition) for a committed offset
and one per group for its membership, a record with a null value (a tombstone) deleting either.
The formats are Kafka's own (its ``group-coordinator`` message schemas), so the topic reads the
same to Kafka's tools:

- ``OffsetCommitKey`` version 1: group, topic, partition;
- ``OffsetCommitValue`` version 3: offset, leader epoch, metadata, commit timestamp (version 1,
  with an expire timestamp, when an old OffsetCommit gave a retention time);
- ``GroupMetadataKey`` version 2: group;
- ``GroupMetadataValue`` version 3: protocol type, generation, protocol, leader, the time of the
  last state change, and each member (id, instance id, client id and host, rebalance and session
  timeouts, subscription, assignment).

Each is a big-endian int16 version followed by the fields (strings as an int16 length, null as
-1; bytes as an int32 length). Decoding accepts every version Kafka wrote before the flexible
ones (keys 0-2, offset values 0-3, group values 0-3), and a consumer group's records (key
types 3-8, :mod:`broker.groups.consumer_records`); a newer version is refused with
:class:`RecordFormatError`, which the loader logs and skips.

The group's partition is ``abs(groupId.hashCode()) % partitions`` with Java's ``String.hashCode``
(over UTF-16 code units, wrapping at 32 bits) and Kafka's ``Utils.abs`` (``Integer.MIN_VALUE``
gives 0), so a group lands on the partition a Kafka cluster would put it on.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from broker.groups.consumer_records import (
    CONSUMER_KEY_TYPES,
    ConsumerGroupKey,
    ConsumerKey,
    ConsumerMemberKey,
    ConsumerRecordError,
    ConsumerValue,
    decode_consumer_key,
    decode_consumer_value,
    encode_consumer_key,
    encode_consumer_value,
)
from replication.records import Header

__all__ = [
    "COORDINATOR_HEADER",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "Key",
    "MemberRecord",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "RecordFormatError",
    "Value",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
    "java_string_hash",
    "partition_for",
]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3


COORDINATOR_HEADER = Header(key="partctl.coordinator", value=None)
"""The one header every record a group coordinator writes carries, and what the loader
requires of a record before it believes it (see :mod:`broker.groups.loading`). Kafka's tools
read ``__consumer_offsets`` by key and value and pass over headers."""


class RecordFormatError(ValueError):
    """Bytes that are not a record of ``__consumer_offsets`` this broker can read."""


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition of ``group_id`` (Kafka's ``partitionFor``)."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int
    expire_timestamp: int = -1
    """-1: none (the broker's ``offsets.retention.minutes`` applies)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberRecord, ...]


Key = OffsetCommitKey | GroupMetadataKey | ConsumerKey
Value = OffsetCommitValue | GroupMetadataValue | ConsumerValue


# --- writing ----------------------------------------------------------------------------------


def _string(out: bytearray, text: str | None) -> None:
    if text is None:
        out += _I16.pack(-1)
        return
    data = text.encode("utf-8")
    out += _I16.pack(len(data))
    out += data


def _bytes(out: bytearray, data: bytes) -> None:
    out += _I32.pack(len(data))
    out += data


def encode_key(key: Key) -> bytes:
    if isinstance(key, ConsumerGroupKey | ConsumerMemberKey):
        return encode_consumer_key(key)
    out = bytearray()
    if isinstance(key, OffsetCommitKey):
        out += _I16.pack(OFFSET_COMMIT_KEY_VERSION)
        _string(out, key.group)
        _string(out, key.topic)
        out += _I32.pack(key.partition)
    else:
        out += _I16.pack(GROUP_METADATA_KEY_VERSION)
        _string(out, key.group)
    return bytes(out)


def encode_value(value: Value) -> bytes:
    if not isinstance(value, OffsetCommitValue | GroupMetadataValue):
        return encode_consumer_value(value)
    out = bytearray()
    if isinstance(value, OffsetCommitValue):
        if value.expire_timestamp >= 0:
            out += _I16.pack(OFFSET_COMMIT_VALUE_WITH_EXPIRY)
            out += _I64.pack(value.offset)
            _string(out, value.metadata)
            out += _I64.pack(value.commit_timestamp)
            out += _I64.pack(value.expire_timestamp)
        else:
            out += _I16.pack(OFFSET_COMMIT_VALUE_VERSION)
            out += _I64.pack(value.offset)
            out += _I32.pack(value.leader_epoch)
            _string(out, value.metadata)
            out += _I64.pack(value.commit_timestamp)
        return bytes(out)
    out += _I16.pack(GROUP_METADATA_VALUE_VERSION)
    _string(out, value.protocol_type)
    out += _I32.pack(value.generation)
    _string(out, value.protocol)
    _string(out, value.leader)
    out += _I64.pack(value.current_state_timestamp)
    out += _I32.pack(len(value.members))
    for m in value.members:
        _string(out, m.member_id)
        _string(out, m.group_instance_id)
        _string(out, m.client_id)
        _string(out, m.client_host)
        out += _I32.pack(m.rebalance_timeout_ms)
        out += _I32.pack(m.session_timeout_ms)
        _bytes(out, m.subscription)
        _bytes(out, m.assignment)
    return bytes(out)


# --- reading ----------------------------------------------------------------------------------


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, s: struct.Struct) -> int:
        if self.pos + s.size > len(self.data):
            raise RecordFormatError("record cut short")
        (value,) = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return value

    def i16(self) -> int:
        return self._take(_I16)

    def i32(self) -> int:
        return self._take(_I32)

    def i64(self) -> int:
        return self._take(_I64)

    def _blob(self, size: int) -> bytes:
        if size < 0 or self.pos + size > len(self.data):
            raise RecordFormatError("record cut short")
        blob = self.data[self.pos:self.pos + size]
        self.pos += size
        return bytes(blob)

    def nullable_string(self) -> str | None:
        size = self.i16()
        if size == -1:
            return None
        try:
            return self._blob(size).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RecordFormatError("a string that is not UTF-8") from exc

    def string(self) -> str:
        text = self.nullable_string()
        if text is None:
            raise RecordFormatError("a null string where one is required")
        return text

    def bytes_(self) -> bytes:
        size = self.i32()
        return b"" if size == -1 else self._blob(size)

    def end(self) -> None:
        """Refuse bytes after the last field: the record is not in the schema it names."""
        if self.pos != len(self.data):
            raise RecordFormatError(f"{len(self.data) - self.pos} bytes after the record")


def decode_key(data: bytes) -> Key:
    r = _Reader(data)
    version = r.i16()
    key: Key
    if version in (0, 1):
        key = OffsetCommitKey(r.string(), r.string(), r.i32())
        r.end()
        return key
    if version == 2:
        key = GroupMetadataKey(r.string())
        r.end()
        return key
    if version in CONSUMER_KEY_TYPES:
        try:
            return decode_consumer_key(version, data, r.pos)
        except ConsumerRecordError as exc:
            raise RecordFormatError(str(exc)) from exc
    raise RecordFormatError(f"unknown key version {version}")


def decode_value(key: Key, data: bytes | None) -> Value | None:
    """The value of a record under ``key``; None for a tombstone."""
    if data is None:
        return None
    if isinstance(key, ConsumerGroupKey | ConsumerMemberKey):
        try:
            return decode_consumer_value(key, data)
        except ConsumerRecordError as exc:
            raise RecordFormatError(str(exc)) from exc
    r = _Reader(data)
    version = r.i16()
    if isinstance(key, OffsetCommitKey):
        if not 0 <= version <= 3:
            raise RecordFormatError(f"unknown offset commit value version {version}")
        offset = r.i64()
        epoch = r.i32() if version >= 3 else -1
        metadata = r.string()
        committed = r.i64()
        expire = r.i64() if version == 1 else -1
        r.end()
        return OffsetCommitValue(offset=offset, leader_epoch=epoch, metadata=metadata,
                                 commit_timestamp=committed, expire_timestamp=expire)
    if not 0 <= version <= 3:
        raise RecordFormatError(f"unknown group metadata value version {version}")
    protocol_type = r.string()
    generation = r.i32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    timestamp = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.i32()):
        member_id = r.string()
        instance = r.nullable_string() if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        rebalance = r.i32() if version >= 1 else -1
        session = r.i32()
        if rebalance < 0:
            rebalance = session
        members.append(MemberRecord(member_id=member_id, group_instance_id=instance,
                                    client_id=client_id, client_host=client_host,
                                    rebalance_timeout_ms=rebalance, session_timeout_ms=session,
                                    subscription=r.bytes_(), assignment=r.bytes_()))
    r.end()
    return GroupMetadataValue(protocol_type=protocol_type, generation=generation,
                              protocol=protocol, leader=leader,
                              current_state_timestamp=timestamp, members=tuple(members))
