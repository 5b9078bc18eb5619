"""Zigzag varints as Kafka writes them in v2 records (protobuf's sint32/sint64 encoding).

Kafka bounds a varint to 5 bytes and a varlong to 10; longer encodings are corrupt input, not
numbers, so the decoders refuse them rather than read an unbounded integer.
"""

from __future__ import annotations

from replication.errors import CorruptRecordError

__all__ = ["read_varint", "read_varlong", "varint_size", "write_varint", "write_varlong"]

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _zigzag(value: int) -> int:
    # Python ints are unbounded: shifting by 63 gives 0 or -1 for any int64 value, which is
    # exactly the sign mask Kafka's (v << 1) ^ (v >> 31|63) computes.
    return (value << 1) ^ (value >> 63)


def _write_unsigned(buf: bytearray, z: int) -> None:
    while z > 0x7F:
        buf.append((z & 0x7F) | 0x80)
        z >>= 7
    buf.append(z)


def write_varint(buf: bytearray, value: int) -> None:
    """Append ``value`` (an int32) to ``buf`` as a zigzag varint."""
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise ValueError(f"varint out of int32 range: {value}")
    _write_unsigned(buf, _zigzag(value))


def write_varlong(buf: bytearray, value: int) -> None:
    """Append ``value`` (an int64) to ``buf`` as a zigzag varlong."""
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"varlong out of int64 range: {value}")
    _write_unsigned(buf, _zigzag(value))


def varint_size(value: int) -> int:
    """Number of bytes ``value`` takes as a zigzag varint or varlong."""
    z = _zigzag(value)
    size = 1
    while z > 0x7F:
        z >>= 7
        size += 1
    return size


def _read_unsigned(buf: bytes | memoryview, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    result = 0
    shift = 0
    for _ in range(max_bytes):
        if pos >= end:
            raise CorruptRecordError("varint runs past the end of the record")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
    raise CorruptRecordError(f"varint longer than {max_bytes} bytes")


def read_varint(buf: bytes | memoryview, pos: int, end: int | None = None) -> tuple[int, int]:
    """Decode a zigzag varint at ``pos``; returns (value, position after it)."""
    value, pos = _read_unsigned(buf, pos, len(buf) if end is None else end, 5)
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise CorruptRecordError(f"varint out of int32 range: {value}")
    return value, pos


def read_varlong(buf: bytes | memoryview, pos: int, end: int | None = None) -> tuple[int, int]:
    """Decode a zigzag varlong at ``pos``; returns (value, position after it)."""
    return _read_unsigned(buf, pos, len(buf) if end is None else end, 10)
