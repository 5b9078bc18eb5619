"""Kafka's primitive wire values written by hand, for the encoders that write whole messages
without kio's classes (:mod:`broker.apis.metadata_encoding`, :mod:`broker.controller_codec`):
unsigned varints, array counts and strings in both the classic and the flexible (compact)
forms, and arrays of int32."""

from __future__ import annotations

import struct
from collections.abc import Sequence

__all__ = ["count", "ints", "string", "uvarint"]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def uvarint(value: int) -> bytes:
    """``value`` (>= 0) as an unsigned varint."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SMALL_UVARINTS = [uvarint(i) for i in range(128)]


def count(n: int, flexible: bool) -> bytes:
    """An array's length: n + 1 as a varint in a flexible version, else an int32."""
    if flexible:
        return _SMALL_UVARINTS[n + 1] if n < 127 else uvarint(n + 1)
    return _I32.pack(n)


def string(value: str | None, flexible: bool) -> bytes:
    """A (nullable) string: compact in a flexible version, else int16-prefixed."""
    if value is None:
        return b"\x00" if flexible else b"\xff\xff"
    data = value.encode()
    return (uvarint(len(data) + 1) if flexible else _I16.pack(len(data))) + data


def ints(values: Sequence[int], flexible: bool) -> bytes:
    """An array of int32s."""
    return count(len(values), flexible) + struct.pack(f">{len(values)}i", *values)
