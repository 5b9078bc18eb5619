"""Control batches: the transaction markers a transaction coordinator writes (KIP-98).

A control batch has the control and transactional attribute bits set, the producer id and epoch
of the transaction it ends, no base sequence (-1), and exactly one record. Kafka's formats:

- the record's key: ``version int16 (0) | type int16`` (0 abort, 1 commit);
- an end-transaction marker's value: ``version int16 (0) | coordinatorEpoch int32``.

A key of another version is still read for its type (Kafka reads the type of any version); a
key or value shorter than its fields, or a type other than abort and commit, is a
:class:`~replication.errors.InvalidRecordError`: the batch came from the wire or a disk and is
not trusted. Kafka ignores control records of unknown types when reading; a reader here that
must skip them asks :func:`control_type` and looks at :data:`KNOWN_TYPES`.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from replication.errors import InvalidRecordError, StorageError
from replication.records import (
    NO_PARTITION_LEADER_EPOCH,
    Buffer,
    Record,
    RecordBatch,
    decode_batch,
    encode_batch,
)

__all__ = [
    "CURRENT_VERSION",
    "KNOWN_TYPES",
    "ControlType",
    "Marker",
    "control_type",
    "decode_marker",
    "encode_marker_batch",
    "marker_fields",
    "marker_of",
    "read_marker",
]

CURRENT_VERSION = 0
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


class ControlType(enum.IntEnum):
    """The control record types of Kafka 3.9 that end a transaction."""

    ABORT = 0
    COMMIT = 1


KNOWN_TYPES = frozenset(int(t) for t in ControlType)


@dataclass(frozen=True, slots=True, kw_only=True)
class Marker:
    """An end-transaction marker as it sits in a partition's log."""

    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    offset: int = 0

    @property
    def control_type(self) -> ControlType:
        return ControlType.COMMIT if self.commit else ControlType.ABORT


def control_type(key: bytes | None) -> int:
    """The type in a control record's key (any version); raise if the key is too short."""
    if key is None or len(key) < _KEY.size:
        raise InvalidRecordError("a control record's key must hold a version and a type")
    return _KEY.unpack_from(key)[1]


def decode_marker(key: bytes | None, value: bytes | None) -> tuple[bool, int]:
    """(commit, coordinator epoch) of an end-transaction marker's record; raise if it is not one."""
    kind = control_type(key)
    if kind not in KNOWN_TYPES:
        raise InvalidRecordError(f"control record type {kind} is not a transaction marker")
    if value is None or len(value) < _VALUE.size:
        raise InvalidRecordError("a transaction marker's value must hold a version and an epoch")
    _, coordinator_epoch = _VALUE.unpack_from(value)
    return kind == ControlType.COMMIT, coordinator_epoch


def marker_of(batch: RecordBatch) -> Marker | None:
    """The end-transaction marker a decoded control batch carries, or None if the batch is not
    a control batch or carries a control record of another type."""
    header = batch.header
    if not header.is_control or not batch.records:
        return None
    record = batch.records[0]
    if control_type(record.key) not in KNOWN_TYPES:
        return None
    commit, coordinator_epoch = decode_marker(record.key, record.value)
    return Marker(producer_id=header.producer_id, producer_epoch=header.producer_epoch,
                  commit=commit, coordinator_epoch=coordinator_epoch, offset=record.offset)


def read_marker(data: Buffer, pos: int = 0) -> Marker | None:
    """:func:`marker_of` for the batch at ``pos`` of ``data``."""
    return marker_of(decode_batch(data, pos))


def marker_fields(data: Buffer, pos: int = 0) -> tuple[bool, int] | None:
    """(commit, coordinator epoch) of the control batch at ``pos`` of ``data``, for the
    producer state of a follower or of recovery, which take the log as it is: None when the
    batch is not a whole end-transaction marker (an empty control batch, another control
    type, or bytes that do not decode), which they skip as Kafka skips them. Never raises."""
    try:
        marker = read_marker(data, pos)
    except (InvalidRecordError, StorageError, ValueError, IndexError):
        return None
    return None if marker is None else (marker.commit, marker.coordinator_epoch)


def encode_marker_batch(*, producer_id: int, producer_epoch: int, commit: bool,
                        coordinator_epoch: int, timestamp: int, base_offset: int = 0,
                        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH) -> bytes:
    """One control batch holding one end-transaction marker, as a partition leader appends it."""
    key = _KEY.pack(CURRENT_VERSION, ControlType.COMMIT if commit else ControlType.ABORT)
    value = _VALUE.pack(CURRENT_VERSION, coordinator_epoch)
    return encode_batch([Record(key=key, value=value, timestamp=timestamp)],
                        base_offset=base_offset, partition_leader_epoch=partition_leader_epoch,
                        producer_id=producer_id, producer_epoch=producer_epoch,
                        base_sequence=-1, transactional=True, control=True)
