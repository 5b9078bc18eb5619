"""A request's bytes checked against its schema before kio's reader sees them.

kio's native reader (0.6.2) trusts the lengths it reads: an array that claims 2^32-1 elements is
allocated up front, and the process aborts. So every request frame is first walked here, field
by field, from the same schema kio reads it with (the generated dataclasses and their
``kafka_type`` metadata), building nothing. The walk refuses, as Kafka's generated readers do:

- a length or element count larger than what the bytes that remain can hold (each element
  takes at least one byte, or the smallest encoding of its type), before anything is read;
- null where the field is not nullable (a -1 length in a non-nullable array or string);
- a string longer than 32,767 bytes, a varint longer than 5 bytes, a negative length other
  than the null marker, a nullable struct with a marker other than -1 or 1;
- a tagged field whose value does not fit the size it claims.

Tagged fields the schema does not know are skipped, as Kafka skips them (it keeps them as
unknown tagged fields): kio raises KeyError for them, so the walk hands kio a copy of the frame
without them. Every refusal is a :class:`FrameError` saying which field and why; its cost is
the connection. The walk is linear in the frame and allocates nothing in proportion to what a
length field claims.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from functools import cache
from typing import Any

from kio.serial import entity_reader
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

__all__ = ["MAX_STRING", "FrameError", "check_frame", "check_header", "read_checked"]

MAX_STRING = 0x7FFF
"""The longest string Kafka's readers accept (bytes fields may be longer)."""

_FIXED = {
    "bool": 1, "int8": 1, "uint8": 1,
    "int16": 2, "uint16": 2, "error_code": 2,
    "int32": 4, "uint32": 4, "timedelta_i32": 4,
    "int64": 8, "uint64": 8, "float64": 8, "timedelta_i64": 8, "datetime_i64": 8,
    "uuid": 16,
}
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

Edit = tuple[int, int, bytes]
"""Bytes ``[start, end)`` of the frame replaced by the third item."""
Scan = Callable[[bytes, int, int, list[Edit]], int]
"""Walks one value from a position up to a limit, appending edits; returns the next position."""


class FrameError(Exception):
    """A request that costs its connection (Kafka closes it): the message says why."""


def check_frame(frame: bytes, body_class: type, header_class: type) -> bytes:
    """``frame`` (a request: header then body) walked against ``header_class`` and
    ``body_class``; the frame itself, or a copy without the tagged fields the schema does not
    know. Raises :class:`FrameError` for anything kio's reader must not see."""
    edits: list[Edit] = []
    end = len(frame)
    position = _entity_scan(header_class)(frame, 0, end, edits)
    _entity_scan(body_class)(frame, position, end, edits)
    return _apply(frame, edits, 0, end) if edits else frame


def check_header(frame: bytes, header_class: type) -> bytes:
    """The header alone (the body is not read): as :func:`check_frame`."""
    edits: list[Edit] = []
    position = _entity_scan(header_class)(frame, 0, len(frame), edits)
    return _apply(frame, edits, 0, position) + frame[position:] if edits else frame


def read_checked(cls: type, data: bytes, offset: int = 0) -> tuple[Any, int]:
    """An entity of ``cls`` read by kio from ``data`` at ``offset`` once the walk passed it
    (what a peer answered, or bytes a client stored, such as a member's assignment):
    (value, size read). Raises :class:`FrameError` for what the walk refuses."""
    edits: list[Edit] = []
    _entity_scan(cls)(data, offset, len(data), edits)
    if edits:
        data = _apply(data, edits, offset, len(data))
        offset = 0
    return entity_reader(cls)(data, offset)


def _apply(frame: bytes, edits: list[Edit], start: int, end: int) -> bytes:
    parts: list[bytes] = []
    at = start
    for first, last, replacement in edits:
        parts.append(frame[at:first])
        parts.append(replacement)
        at = last
    parts.append(frame[at:end])
    return b"".join(parts)


def _fail(message: str) -> FrameError:
    return FrameError(message)


def _uvarint(buf: bytes, pos: int, end: int, what: str) -> tuple[int, int]:
    if pos < end:
        value = buf[pos]
        if value < 0x80:  # one byte: most lengths, counts and tags
            return value, pos + 1
    value = 0
    for shift in range(0, 35, 7):
        if pos >= end:
            raise _fail(f"{what}: a varint runs past the end of the request")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            if value > 0xFFFFFFFF:
                raise _fail(f"{what}: a varint over 32 bits")
            return value, pos
    raise _fail(f"{what}: a varint longer than 5 bytes")


def _encode_uvarint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _need(pos: int, size: int, end: int, what: str) -> None:
    if size > end - pos:
        raise _fail(f"{what}: needs {size} bytes, {end - pos} remain")


def _fixed_scan(size: int, what: str) -> Scan:
    def scan(buf: bytes, pos: int, end: int, edits: list[Edit]) -> int:
        if pos + size > end:
            raise _fail(f"{what}: needs {size} bytes, {max(end - pos, 0)} remain")
        return pos + size
    return scan


def _length(buf: bytes, pos: int, end: int, flexible: bool, legacy: struct.Struct,
            nullable: bool, what: str) -> tuple[int, int]:
    """A length prefix: (length, position after it); -1 for null (allowed or refused)."""
    if flexible:
        raw, pos = _uvarint(buf, pos, end, what)
        length = raw - 1
    else:
        _need(pos, legacy.size, end, what)
        (length,) = legacy.unpack_from(buf, pos)
        pos += legacy.size
    if length == -1:
        if not nullable:
            raise _fail(f"{what}: null in a non-nullable field")
        return -1, pos
    if length < -1:
        raise _fail(f"{what}: a negative length {length}")
    return length, pos


def _blob_scan(flexible: bool, nullable: bool, string: bool, what: str) -> Scan:
    legacy = _I16 if string else _I32

    def scan(buf: bytes, pos: int, end: int, edits: list[Edit]) -> int:
        length, pos = _length(buf, pos, end, flexible, legacy, nullable, what)
        if length <= 0:
            return pos
        if string and length > MAX_STRING:
            raise _fail(f"{what}: a string of {length} bytes (at most {MAX_STRING})")
        _need(pos, length, end, what)
        return pos + length
    return scan


def _array_scan(item: Scan, item_size: int, fixed: bool, flexible: bool, nullable: bool,
                what: str) -> Scan:
    def scan(buf: bytes, pos: int, end: int, edits: list[Edit]) -> int:
        if flexible and pos < end and 0 < buf[pos] < 0x80:  # a short array, not null
            count = buf[pos] - 1
            pos += 1
        else:
            count, pos = _length(buf, pos, end, flexible, _I32, nullable, what)
        if count <= 0:
            return pos
        if count * item_size > end - pos:
            raise _fail(f"{what}: {count} elements claimed, {end - pos} bytes remain")
        if fixed:
            return pos + count * item_size
        for _ in range(count):
            pos = item(buf, pos, end, edits)
        return pos
    return scan


def _nullable_struct(inner: Scan, what: str) -> Scan:
    def scan(buf: bytes, pos: int, end: int, edits: list[Edit]) -> int:
        _need(pos, 1, end, what)
        marker = buf[pos]
        if marker == 0xFF:  # -1: null
            return pos + 1
        if marker != 1:
            raise _fail(f"{what}: a nullable struct's marker is {marker}")
        return inner(buf, pos + 1, end, edits)
    return scan


def _field_scan(owner: type, field: dataclasses.Field[Any], flexible: bool,
                tagged: bool) -> tuple[Scan, int]:
    """The walk of one field and the fewest bytes it can take."""
    what = f"{owner.__name__}.{field.name}"
    # kio reads tagged fields as not nullable (their absence is their null); the request
    # header's client id is a legacy nullable string in every header version (Kafka's rule)
    nullable = not tagged and is_optional(field)
    if owner.__name__ == "RequestHeader" and field.name == "client_id":
        return _blob_scan(False, True, True, what), 2
    kind = classify_field(field)
    if isinstance(kind, EntityField | EntityTupleField):
        inner = _entity_scan(kind.type_)
        inner_size = _entity_min_size(kind.type_)
    else:
        kafka_type = get_schema_field_type(field)
        fixed = _FIXED.get(kafka_type)
        if fixed is not None:
            inner, inner_size = _fixed_scan(fixed, what), fixed
        elif kafka_type in ("string", "bytes", "records"):
            string = kafka_type == "string"
            # an array's items are never null; a plain field is as the schema says
            item_nullable = nullable and not kind.is_array
            inner = _blob_scan(flexible, item_nullable, string, what)
            inner_size = 1 if flexible else (2 if string else 4)
        else:
            raise _fail(f"{what}: unknown type {kafka_type!r}")
    if kind.is_array:
        fixed_items = isinstance(kind, PrimitiveTupleField) and \
            get_schema_field_type(field) in _FIXED
        return (_array_scan(inner, max(inner_size, 1), fixed_items, flexible, nullable, what),
                1 if flexible else 4)
    if isinstance(kind, EntityField) and nullable:
        return _nullable_struct(inner, what), 1
    assert isinstance(kind, PrimitiveField | EntityField)
    return inner, inner_size


@cache
def _entity_plan(cls: type) -> tuple[tuple[Scan, ...], dict[int, Scan], bool, int]:
    """(walks of the untagged fields in order, walks of the tagged fields by tag, flexible,
    fewest bytes). Neighbouring fixed-size fields are walked as one step."""
    flexible = bool(getattr(cls, "__flexible__", False))
    plain: list[Scan] = []
    tagged: dict[int, Scan] = {}
    size = 1 if flexible else 0
    run = 0  # bytes of the fixed-size fields not yet given a step
    for field in dataclasses.fields(cls):
        tag = get_field_tag(field)
        if tag is not None:
            tagged[int(tag)] = _field_scan(cls, field, flexible, True)[0]
            continue
        fixed = _fixed_size(field)
        if fixed is not None:
            run += fixed
            size += fixed
            continue
        if run:
            plain.append(_fixed_scan(run, f"{cls.__name__} before {field.name}"))
            run = 0
        scan, least = _field_scan(cls, field, flexible, False)
        plain.append(scan)
        size += least
    if run:
        plain.append(_fixed_scan(run, f"{cls.__name__}'s last fields"))
    return tuple(plain), tagged, flexible, size


def _fixed_size(field: dataclasses.Field[Any]) -> int | None:
    """The size of a plain (not array, not struct) fixed-size field, else None."""
    if not isinstance(classify_field(field), PrimitiveField):
        return None
    return _FIXED.get(get_schema_field_type(field))


def _entity_min_size(cls: type) -> int:
    return _entity_plan(cls)[3]


@cache
def _entity_scan(cls: type) -> Scan:
    plain, tagged, flexible, _size = _entity_plan(cls)
    name = cls.__name__

    def scan(buf: bytes, pos: int, end: int, edits: list[Edit]) -> int:
        for step in plain:
            pos = step(buf, pos, end, edits)
        if not flexible:
            return pos
        if pos < end and buf[pos] == 0:  # no tagged fields, the usual case
            return pos + 1
        return _tagged_fields(buf, pos, end, edits, tagged, name)
    return scan


def _tagged_fields(buf: bytes, pos: int, end: int, edits: list[Edit],
                   tagged: dict[int, Scan], name: str) -> int:
    """The tagged-field section at ``pos``: known tags walked within their size, unknown ones
    skipped; where any was unknown (or a known one held unknown ones itself) an edit rewrites
    the section without them."""
    start = pos
    count, pos = _uvarint(buf, pos, end, f"{name} tagged fields")
    if count > end - pos:  # each takes at least two bytes
        raise _fail(f"{name}: {count} tagged fields claimed, {end - pos} bytes remain")
    kept: list[tuple[int, int, int, list[Edit]]] = []  # tag, value start, value end, edits
    dropped = False
    for _ in range(count):
        tag, pos = _uvarint(buf, pos, end, f"{name} tag")
        size, pos = _uvarint(buf, pos, end, f"{name} tag {tag} size")
        _need(pos, size, end, f"{name} tag {tag}")
        value_end = pos + size
        scan = tagged.get(tag)
        if scan is None:
            dropped = True
        else:
            inner: list[Edit] = []
            if scan(buf, pos, value_end, inner) != value_end:
                raise _fail(f"{name} tag {tag}: its value does not fill its {size} bytes")
            kept.append((tag, pos, value_end, inner))
        pos = value_end
    if dropped or any(inner for *_, inner in kept):
        section = [_encode_uvarint(len(kept))]
        for tag, first, last, inner in kept:
            value = _apply(buf, inner, first, last) if inner else buf[first:last]
            section += [_encode_uvarint(tag), _encode_uvarint(len(value)), value]
        edits.append((start, pos, b"".join(section)))
    return pos
