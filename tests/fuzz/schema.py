"""kio's request schemas, walked two ways for the fuzzer: a small typed value for every field
(so a default instance of any request class can be encoded), and a map of a well-formed
frame's bytes (where each length or count field, each integer and each tagged-field buffer
sits), so that mutations aim at them instead of at random offsets.

The map is read from the bytes, not from a second encoder: it follows the same wire rules as
kio (legacy strings have an int16 length, legacy bytes and arrays an int32 count; flexible
versions use unsigned varints holding length + 1, 0 meaning null; tagged fields sit in a
buffer at the end of every flexible struct; the request header's client id is always a legacy
string). It only needs to be right for frames kio itself wrote or a real client sent.
"""

from __future__ import annotations

import dataclasses
import datetime
import struct
import uuid
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

__all__ = ["FrameMap", "IntSite", "LengthSite", "TagSite", "default_instance", "walk"]

FIXED = {"int8": 1, "uint8": 1, "bool": 1, "int16": 2, "uint16": 2, "error_code": 2,
         "int32": 4, "uint32": 4, "timedelta_i32": 4, "int64": 8, "uint64": 8,
         "timedelta_i64": 8, "datetime_i64": 8, "float64": 8, "uuid": 16}
"""The fixed-width kafka types and their sizes on the wire."""

INTEGER = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
           "error_code", "timedelta_i32", "timedelta_i64", "datetime_i64"}


# --- values -------------------------------------------------------------------------------------


def _scalar(kafka_type: str, name: str, n: int) -> Any:
    match kafka_type:
        case "bool":
            return n % 2 == 1
        case "int8" | "int16" | "int32" | "int64" | "uint8" | "uint16" | "uint32" | "uint64":
            return n % 3 + 1
        case "float64":
            return 0.5
        case "error_code":
            return ErrorCode.none
        case "timedelta_i32" | "timedelta_i64":
            return datetime.timedelta(milliseconds=100)
        case "datetime_i64":
            return datetime.datetime.fromtimestamp(1_700_000_000, datetime.UTC)
        case "uuid":
            return uuid.UUID(int=n + 1)
        case "string":
            return f"fuzz-{name}-{n}"[:24]
        case "bytes" | "records":
            return b"\x00\x01fuzz"
    raise ValueError(f"no value for kafka type {kafka_type!r}")


def _value(field: dataclasses.Field, n: int) -> Any:
    kind = classify_field(field)
    match kind:
        case PrimitiveField():
            return _scalar(field.metadata["kafka_type"], field.name, n)
        case PrimitiveTupleField():
            return tuple(_scalar(field.metadata["kafka_type"], field.name, n + i)
                         for i in range(2))
        case EntityField(entity):
            return default_instance(entity, n)
        case EntityTupleField(entity):
            return (default_instance(entity, n),)
    raise AssertionError(kind)


def default_instance(cls: type, n: int = 0) -> Any:
    """An instance of the kio class ``cls`` with every field set: small typed values, one
    element per array of structs, two per array of scalars; tagged fields keep their default
    (absent). ``n`` varies the values a little."""
    values = {}
    for field in dataclasses.fields(cls):
        if get_field_tag(field) is not None and (
                field.default is not dataclasses.MISSING
                or field.default_factory is not dataclasses.MISSING):
            continue
        values[field.name] = _value(field, n)
    return cls(**values)


# --- the map of a frame -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LengthSite:
    """A length or count on the wire: at ``offset``, encoded as ``encoding`` (``i16``,
    ``i32`` or ``uvarint``, the last holding length + 1) over ``width`` bytes; ``nullable``
    says whether the schema allows null there; ``what`` is ``string``, ``bytes`` or
    ``array``."""

    offset: int
    width: int
    encoding: str
    what: str
    nullable: bool
    field: str


@dataclass(frozen=True, slots=True)
class IntSite:
    offset: int
    width: int
    field: str


@dataclass(frozen=True, slots=True)
class TagSite:
    """A tagged-field buffer: its count (a uvarint of ``width`` bytes at ``offset``) and
    where the buffer ends."""

    offset: int
    width: int
    count: int
    end: int


@dataclass(frozen=True, slots=True)
class FrameMap:
    lengths: tuple[LengthSite, ...]
    ints: tuple[IntSite, ...]
    tags: tuple[TagSite, ...]
    end: int


class _Short(Exception):
    pass


def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    start = pos
    while True:
        if pos >= len(data) or pos - start > 4:
            raise _Short
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


class _Walker:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.lengths: list[LengthSite] = []
        self.ints: list[IntSite] = []
        self.tags: list[TagSite] = []

    def _need(self, pos: int, n: int) -> None:
        if n < 0 or pos + n > len(self.data):
            raise _Short

    def _length(self, pos: int, flexible: bool, legacy: str, what: str, nullable: bool,
                name: str) -> tuple[int | None, int]:
        """(the length, or None for null; the position after it)."""
        if flexible:
            raw, after = _uvarint(self.data, pos)
            self.lengths.append(LengthSite(pos, after - pos, "uvarint", what, nullable, name))
            return (None if raw == 0 else raw - 1), after
        fmt, width = (">h", 2) if legacy == "i16" else (">i", 4)
        self._need(pos, width)
        (value,) = struct.unpack_from(fmt, self.data, pos)
        self.lengths.append(LengthSite(pos, width, legacy, what, nullable, name))
        return (None if value < 0 else value), pos + width

    def _scalar(self, kafka_type: str, pos: int, flexible: bool, nullable: bool, name: str,
                legacy_string: bool = False) -> int:
        if kafka_type in FIXED:
            width = FIXED[kafka_type]
            self._need(pos, width)
            if kafka_type in INTEGER:
                self.ints.append(IntSite(pos, width, name))
            return pos + width
        if kafka_type == "string":
            n, pos = self._length(pos, flexible and not legacy_string, "i16", "string",
                                  nullable, name)
        elif kafka_type in ("bytes", "records"):
            n, pos = self._length(pos, flexible, "i32", "bytes", nullable, name)
        else:
            raise ValueError(kafka_type)
        n = n or 0
        self._need(pos, n)
        return pos + n

    def _field(self, field: dataclasses.Field, pos: int, flexible: bool, tagged: bool,
               header: bool) -> int:
        kind = classify_field(field)
        nullable = not tagged and is_optional(field)
        legacy_string = header and field.name == "client_id"
        match kind:
            case PrimitiveField():
                return self._scalar(field.metadata["kafka_type"], pos, flexible, nullable,
                                    field.name, legacy_string)
            case EntityField(entity):
                if nullable:
                    self._need(pos, 1)
                    marker = self.data[pos]
                    pos += 1
                    if marker == 0xFF:
                        return pos
                return self.entity(entity, pos)
        n, pos = self._length(pos, flexible, "i32", "array", nullable, field.name)
        for _ in range(n or 0):
            if isinstance(kind, PrimitiveTupleField):
                pos = self._scalar(field.metadata["kafka_type"], pos, flexible, False,
                                   field.name)
            else:
                assert isinstance(kind, EntityTupleField)
                pos = self.entity(kind.type_, pos)
        return pos

    def entity(self, cls: type, pos: int) -> int:
        flexible = cls.__flexible__
        header = cls.__name__ == "RequestHeader"
        tagged = {}
        for field in dataclasses.fields(cls):
            tag = get_field_tag(field)
            if tag is not None:
                tagged[int(tag)] = field
                continue
            pos = self._field(field, pos, flexible, False, header)
        if not flexible:
            return pos
        count_at = pos
        count, pos = _uvarint(self.data, pos)
        for _ in range(count):
            tag, pos = _uvarint(self.data, pos)
            size, pos = _uvarint(self.data, pos)
            self._need(pos, size)
            if tag in tagged:
                self._field(tagged[tag], pos, flexible, True, header)
            pos += size
        self.tags.append(TagSite(count_at, _width(self.data, count_at), count, pos))
        return pos


def _width(data: bytes, pos: int) -> int:
    return _uvarint(data, pos)[1] - pos


def walk(frame: bytes, cls: type) -> FrameMap | None:
    """The map of ``frame`` (a request without its size prefix: header then body) read as
    ``cls``; None when the bytes do not follow the schema (a frame already broken)."""
    walker = _Walker(frame)
    try:
        pos = walker.entity(cls.__header_schema__, 0)
        pos = walker.entity(cls, pos)
    except (_Short, ValueError, KeyError):
        return None
    return FrameMap(tuple(walker.lengths), tuple(walker.ints), tuple(walker.tags), pos)

