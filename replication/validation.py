"""Every record of a producer's batch checked before a leader appends it, as Kafka's
``LogValidator`` checks them.

:func:`~replication.records.validate_batches` checks a batch's frame (its header, its length,
its CRC); a CRC proves only that the bytes arrived as their sender wrote them, not that they
are records. A batch whose records do not parse would be stored, replicated and served, and
every consumer reading past it would stop there (its decoder fails on the batch, so the valid
records after it are never reached either). So a leader walks each record of each batch a
client sends, inflating a compressed batch's records first (bounded by
:func:`~replication.compression.inflate_limit`), and refuses the append whole unless:

- each record's length varint is at least 1 and its record ends inside the batch, and the
  record's fields (attributes, timestamp delta, offset delta, key, value, header count, headers)
  take exactly that many bytes;
- the offset deltas are 0, 1, 2... in order (Kafka's "Invalid offset" for the inner records);
- key and value lengths are -1 (null) or fit the record; a header count is not negative, a
  header key is not null and fits, a header value is -1 or fits; varints take at most 5 bytes
  (10 for the timestamp delta's varlong);
- the batch holds exactly ``recordsCount`` records and no byte after the last one;
- the batch is not a control batch (only a transaction coordinator writes those);
- on a compacted topic, every record has a key.

A violation is an :class:`~replication.errors.InvalidRecordError` (Kafka's INVALID_RECORD);
a compressed section that does not inflate is a :class:`~replication.errors.CorruptRecordError`
(CORRUPT_MESSAGE). Nothing is written either way. This is the produce hot path: the walk is
``replication._records_native`` in C where the install built it (:data:`NATIVE_WALK`), else
:func:`_walk`, its reference, which gives the same verdicts; either skips what it need not
decode (the timestamp delta's value, the fields' bytes).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from replication.compression import decompress
from replication.errors import InvalidRecordError
from replication.records import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_MASK,
    RECORDS_OFFSET,
)

__all__ = ["NATIVE_WALK", "check_client_records"]

_RECORDS_COUNT_OFFSET = 57
_I16 = struct.Struct(">h").unpack_from
_I32 = struct.Struct(">i").unpack_from

Buffer = bytes | bytearray | memoryview
_NO_KEY = "a record without a key"


def check_client_records(data: Buffer, facts: Sequence[tuple[int, ...]], *, limit: int,
                         compacted: bool, where: str, control: bool = False) -> None:
    """Check every record of the batches of ``data`` (whose frames
    :func:`~replication.records.validate_batches` checked and described in ``facts``), as a
    leader must before it appends what a client sent; ``limit`` bounds a compressed section's
    inflation, ``compacted`` requires a key on every record, ``where`` names the partition in
    the errors; ``control`` lets control batches through (a coordinator's append of a
    transaction marker, never a client's). Raises :class:`InvalidRecordError` or
    :class:`CorruptRecordError`."""
    for fact in facts:
        pos, size = fact[0], fact[1]
        (attributes,) = _I16(data, pos + ATTRIBUTES_OFFSET)
        (count,) = _I32(data, pos + _RECORDS_COUNT_OFFSET)
        if attributes & CONTROL_MASK and not control:
            raise InvalidRecordError(f"{where}: clients are not allowed to write control records")
        codec = attributes & COMPRESSION_MASK
        if codec:
            section: Buffer = decompress(codec, memoryview(data)[pos + RECORDS_OFFSET:pos + size],
                                         limit)
            start, end = 0, len(section)
        else:
            section, start, end = data, pos + RECORDS_OFFSET, pos + size
        problem = _walk_records(section, start, end, count, compacted)
        if problem == _NO_KEY:  # Kafka's words
            raise InvalidRecordError("Compacted topic cannot accept message without key in "
                                     f"topic partition {where}")
        if problem is not None:
            raise InvalidRecordError(f"{where}: batch at position {pos}: {problem}")


class _Bad(Exception):
    """A record that does not parse: the walk's own signal, turned into a message."""


def _varint(data: Buffer, p: int, end: int, most: int) -> tuple[int, int]:
    """The zigzag varint of at most ``most`` bytes at ``data[p]`` before ``end``, and the
    position after it (the walk decodes one-byte varints inline and calls this for longer)."""
    z = shift = 0
    for _ in range(most):
        if p >= end:
            raise _Bad("a varint runs past the end of its record")
        b = data[p]
        p += 1
        z |= (b & 0x7F) << shift
        if b < 0x80:
            return (z >> 1) ^ -(z & 1), p
        shift += 7
    raise _Bad(f"a varint longer than {most} bytes")


def _walk(data: Buffer, pos: int, end: int, count: int, compacted: bool) -> str | None:
    """Why the records section ``data[pos:end]`` is not ``count`` well-formed records with the
    offset deltas 0, 1, 2..., or None when it is."""
    index = 0
    try:
        while index < count:
            if pos >= end:
                return f"it declares {count} records but holds {index}"
            b = data[pos]
            if b < 0x80:
                length, p = (b >> 1) ^ -(b & 1), pos + 1
            else:
                length, p = _varint(data, pos, end, 5)
            rec_end = p + length
            if length < 1 or rec_end > end:
                return f"record {index} has length {length}, {end - p} bytes left in its batch"
            p += 1  # attributes
            if p >= rec_end:
                raise _Bad("a varint runs past the end of its record")
            if data[p] < 0x80:  # timestamp delta: its value does not matter here
                p += 1
            else:
                _ts, p = _varint(data, p, rec_end, 10)
            if p >= rec_end:
                raise _Bad("a varint runs past the end of its record")
            b = data[p]
            if b < 0x80:
                delta, p = (b >> 1) ^ -(b & 1), p + 1
            else:
                delta, p = _varint(data, p, rec_end, 5)
            if delta != index:
                return f"record {index} has offset delta {delta} (Invalid offset)"
            for field in ("key", "value"):
                if p >= rec_end:
                    raise _Bad("a varint runs past the end of its record")
                b = data[p]
                if b < 0x80:
                    size, p = (b >> 1) ^ -(b & 1), p + 1
                else:
                    size, p = _varint(data, p, rec_end, 5)
                if size >= 0:
                    p += size
                    if p > rec_end:
                        return f"record {index}: its {field} runs past the end of the record"
                elif size != -1:
                    return f"record {index}: {field} length {size}"
                elif compacted and field == "key":
                    return _NO_KEY
            headers, p = _varint(data, p, rec_end, 5)
            if headers < 0:
                return f"record {index}: header count {headers}"
            for _h in range(headers):
                size, p = _varint(data, p, rec_end, 5)
                if size < 0 or p + size > rec_end:
                    return f"record {index}: a header key of length {size}"
                size, p = _varint(data, p + size, rec_end, 5)
                if size >= 0:
                    p += size
                    if p > rec_end:
                        return f"record {index}: a header value runs past the end of the record"
                elif size != -1:
                    return f"record {index}: a header value length {size}"
            if p != rec_end:
                return (f"record {index} declares {length} bytes but its fields take "
                        f"{p - rec_end + length}")
            pos = rec_end
            index += 1
    except _Bad as exc:
        return f"record {index}: {exc}"
    if pos != end:
        return f"{end - pos} bytes after its {count} records"
    return None


try:  # the same walk in C, built by the install where a C compiler is at hand (pyproject.toml)
    from replication._records_native import walk_records as _walk_records
except ImportError:
    _walk_records = _walk
NATIVE_WALK = _walk_records is not _walk
"""Whether leaders walk records with the C extension ``replication._records_native`` (else
with :func:`_walk`)."""
