"""Kafka record batches, format v2 (magic 2), encoded and validated byte for byte.

Layout of a batch (big-endian)::

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 | crc uint32
    | attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 | maxTimestamp int64
    | producerId int64 | producerEpoch int16 | baseSequence int32 | recordsCount int32 | records

``batchLength`` counts the bytes after itself. The CRC-32C covers ``attributes`` to the end of
the batch, which leaves ``baseOffset`` and ``partitionLeaderEpoch`` outside it: that is what lets
a leader assign offsets and stamp its epoch by overwriting twelve bytes (:func:`stamp_batch`)
without touching, or re-checksumming, the records. The append path therefore never looks inside
a batch; only :func:`decode_batch` walks records.

Batches a producer compressed (gzip, snappy, lz4, zstd: codecs 1 to 4 in the attributes) are
stored as sent, as Kafka stores them when the topic's compression is the producer's: validation
reads the header and checks the CRC over the compressed bytes, and the append path never
decompresses. What must see their records does: :func:`batch_records` and :func:`decode_batch`
inflate the records section (see :mod:`replication.compression`, bounded), as the key check of
a compacted topic and the cleaner do.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import crc32c

from replication.compression import MIN_INFLATE_LIMIT, compress, decompress
from replication.errors import (
    CorruptRecordError,
    SegmentChangedError,
    UnsupportedCompressionError,
)
from replication.varint import read_varint, read_varlong, write_varint, write_varlong

__all__ = [
    "BATCH_OVERHEAD",
    "CREATE_TIME",
    "LOG_APPEND_TIME",
    "LOG_OVERHEAD",
    "MAGIC_V2",
    "MAX_COMPRESSION_CODEC",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_ID",
    "BatchHeader",
    "Header",
    "Record",
    "RecordBatch",
    "batch_records",
    "decode_batch",
    "encode_batch",
    "file_batches",
    "find_record",
    "inflate_section",
    "iter_batches",
    "read_batch_header",
    "read_zigzag",
    "record_spans",
    "stamp_batch",
    "validate_batches",
]

MAGIC_V2 = 2
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part of a batch its length does not count
BATCH_OVERHEAD = 61  # a v2 header with zero records
NO_PARTITION_LEADER_EPOCH = -1
NO_PRODUCER_ID = -1
CREATE_TIME = 0
LOG_APPEND_TIME = 1

# Byte offsets of header fields inside a batch.
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
RECORDS_OFFSET = 61

COMPRESSION_MASK = 0x07
MAX_COMPRESSION_CODEC = 4
"""Kafka's codecs: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd; 5 to 7 are not codecs."""
COMPRESSION_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20

_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC_BODY = struct.Struct(">hiqqqhii")  # attributes .. recordsCount: the start of the CRC'd part
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT8 = struct.Struct(">b")
_MIN_BATCH_LENGTH = BATCH_OVERHEAD - LOG_OVERHEAD
_FILE_CHUNK = 8 << 20  # what file_batches reads at a time

Buffer = bytes | bytearray | memoryview


@dataclass(frozen=True, slots=True, kw_only=True)
class Header:
    """A record header: a string key and an optional byte value."""

    key: str
    value: bytes | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
    """One record. ``offset`` is absolute when decoded and ignored when encoding (a batch's
    records take consecutive offset deltas in the order given)."""

    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple[Header, ...] = ()
    offset: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchHeader:
    """The fixed 61-byte header of a v2 batch, as found on disk."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch takes, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return (self.attributes & TIMESTAMP_TYPE_MASK) >> 3

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordBatch:
    """A decoded batch: its header and its records (with absolute offsets)."""

    header: BatchHeader
    records: tuple[Record, ...]

    @property
    def base_offset(self) -> int:
        return self.header.base_offset

    @property
    def last_offset(self) -> int:
        return self.header.last_offset

    @property
    def partition_leader_epoch(self) -> int:
        return self.header.partition_leader_epoch


def _encode_record(out: bytearray, record: Record, delta: int, base_timestamp: int) -> None:
    body = bytearray(b"\x00")  # record attributes: unused in v2
    write_varlong(body, record.timestamp - base_timestamp)
    write_varint(body, delta)
    for blob in (record.key, record.value):
        if blob is None:
            write_varint(body, -1)
        else:
            write_varint(body, len(blob))
            body += blob
    write_varint(body, len(record.headers))
    for header in record.headers:
        key = header.key.encode("utf-8")
        write_varint(body, len(key))
        body += key
        if header.value is None:
            write_varint(body, -1)
        else:
            write_varint(body, len(header.value))
            body += header.value
    write_varint(out, len(body))
    out += body


def encode_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    timestamp_type: int = CREATE_TIME,
    transactional: bool = False,
    control: bool = False,
    compression: int = 0,
) -> bytes:
    """Encode ``records`` as one v2 batch, as a producer would: uncompressed, or with its
    records section compressed with ``compression`` (1 gzip, 2 snappy, 3 lz4, 4 zstd, in the
    framings of Kafka's Java producer).

    ``baseTimestamp`` is the first record's timestamp and ``maxTimestamp`` the largest, as in
    Kafka's builder. This is the client side; the broker's append path takes the bytes as they are.
    """
    if not records:
        raise ValueError("a batch needs at least one record")
    if timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
        raise ValueError(f"unknown timestamp type {timestamp_type}")
    if not 0 <= compression <= MAX_COMPRESSION_CODEC:
        raise ValueError(f"unknown compression codec {compression}")
    base_timestamp = records[0].timestamp
    max_timestamp = max(r.timestamp for r in records)
    body = bytearray(RECORDS_OFFSET)
    for delta, record in enumerate(records):
        _encode_record(body, record, delta, base_timestamp)
    if compression:
        body[RECORDS_OFFSET:] = compress(compression, memoryview(body)[RECORDS_OFFSET:])
    attributes = ((timestamp_type << 3) | (TRANSACTIONAL_MASK if transactional else 0)
                  | (CONTROL_MASK if control else 0) | compression)
    _CRC_BODY.pack_into(
        body,
        ATTRIBUTES_OFFSET,
        attributes,
        len(records) - 1,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    crc = crc32c.crc32c(memoryview(body)[ATTRIBUTES_OFFSET:])
    _HEADER.pack_into(
        body,
        0,
        base_offset,
        len(body) - LOG_OVERHEAD,
        partition_leader_epoch,
        MAGIC_V2,
        crc,
        attributes,
        len(records) - 1,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    return bytes(body)


def stamp_batch(buf: bytearray | memoryview, pos: int, base_offset: int, epoch: int) -> None:
    """Overwrite a batch's base offset and partition leader epoch in place.

    Both fields sit before the CRC'd range, so the batch stays valid: the leader's whole
    per-batch cost of assigning offsets is these two writes.
    """
    _INT64.pack_into(buf, pos, base_offset)
    _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def read_batch_header(data: Buffer, pos: int = 0) -> BatchHeader:
    """Parse the header at ``pos`` without checking the CRC."""
    if len(data) - pos < BATCH_OVERHEAD:
        raise CorruptRecordError(
            f"batch header at position {pos} is truncated: {len(data) - pos} of "
            f"{BATCH_OVERHEAD} bytes"
        )
    return BatchHeader(
        **dict(zip(BatchHeader.__slots__, _HEADER.unpack_from(data, pos), strict=True))
    )


def validate_batches(
    data: Buffer, *, from_client: bool = False
) -> list[tuple[int, int, int, int, int, int, int]]:
    """Check that ``data`` is a sequence of whole, valid v2 batches.

    Checks per batch: a full header, a length that neither undercuts the header nor runs past the
    buffer, magic 2, a known codec (compressed batches are taken as they are: the CRC covers
    the compressed bytes), a non-negative last offset delta, and the CRC. Returns one
    tuple per batch: ``(position, size, base_offset, last_offset_delta, partition_leader_epoch,
    max_timestamp, producer_id)``, the facts the log needs to assign offsets, index and roll,
    and to tell an idempotent producer's batch, so that the append path parses each header
    exactly once.

    ``from_client`` adds the check Kafka makes on produce: a producer's batch holds exactly
    ``lastOffsetDelta + 1`` records (a follower may see fewer, after compaction on the leader).

    Raises :class:`CorruptRecordError` (or :class:`UnsupportedCompressionError`) on the first
    bad batch; nothing is modified.
    """
    view = memoryview(data)
    end = len(view)
    if end == 0:
        raise CorruptRecordError("no record batch to append")
    unpack = _HEADER.unpack_from
    crc_of = crc32c.crc32c
    out = []
    pos = 0
    while pos < end:
        if end - pos < BATCH_OVERHEAD:
            raise CorruptRecordError(
                f"truncated batch header at position {pos}: {end - pos} bytes left"
            )
        (
            base,
            length,
            epoch,
            magic,
            crc,
            attributes,
            last_delta,
            _bts,
            max_ts,
            pid,
            _pep,
            _seq,
            count,
        ) = unpack(view, pos)
        size = length + LOG_OVERHEAD
        if length < _MIN_BATCH_LENGTH or pos + size > end:
            raise CorruptRecordError(
                f"batch at position {pos} has length {length}, {end - pos - LOG_OVERHEAD} "
                "bytes available"
            )
        if magic != MAGIC_V2:
            raise CorruptRecordError(f"batch at position {pos} has magic {magic}, expected 2")
        if attributes & COMPRESSION_MASK > MAX_COMPRESSION_CODEC:
            raise UnsupportedCompressionError(
                f"batch at position {pos} names compression codec "
                f"{attributes & COMPRESSION_MASK}, which is none of Kafka's (0 to 4)"
            )
        if last_delta < 0 or count < 0:
            raise CorruptRecordError(
                f"batch at position {pos} has lastOffsetDelta {last_delta}, recordsCount {count}"
            )
        if from_client and count != last_delta + 1:
            raise CorruptRecordError(
                f"batch at position {pos} spans {last_delta + 1} offsets but holds {count} records"
            )
        actual = crc_of(view[pos + ATTRIBUTES_OFFSET : pos + size])
        if actual != crc:
            raise CorruptRecordError(
                f"batch at position {pos} (base offset {base}) fails its CRC: stored "
                f"{crc:#010x}, computed {actual:#010x}"
            )
        out.append((pos, size, base, last_delta, epoch, max_ts, pid))
        pos += size
    return out


def iter_batches(data: Buffer) -> Iterator[BatchHeader]:
    """Yield the headers of the (validated) batches in ``data``."""
    for pos, *_ in validate_batches(data):
        yield read_batch_header(data, pos)


def batch_records(data: Buffer, pos: int = 0, *, limit: int = MIN_INFLATE_LIMIT) -> bytes:
    """The records section of the (validated) batch at ``pos``, inflated if its producer
    compressed it. Raises :class:`CorruptRecordError` when a compressed section does not
    decode or inflates past ``limit`` bytes."""
    header = read_batch_header(data, pos)
    section = bytes(memoryview(data)[pos + RECORDS_OFFSET : pos + header.size])
    if not header.compression:
        return section
    try:
        return decompress(header.compression, section, limit)
    except CorruptRecordError as exc:
        raise CorruptRecordError(f"batch at offset {header.base_offset}: {exc}") from exc


def decode_batch(data: Buffer, pos: int = 0, *, limit: int = MIN_INFLATE_LIMIT) -> RecordBatch:
    """Decode the single batch at ``pos`` (validated first), records included; a compressed
    batch's records are inflated (at most ``limit`` bytes, see :func:`batch_records`)."""
    view = memoryview(data)
    header = read_batch_header(view, pos)
    end = pos + header.size
    validate_batches(view[pos:end])
    if header.compression:
        section = memoryview(batch_records(view, pos, limit=limit))
        records = tuple(_decode_records(section, 0, len(section), header))
    else:
        records = tuple(_decode_records(view, pos + RECORDS_OFFSET, end, header))
    return RecordBatch(header=header, records=records)


def find_record(data: Buffer, wanted: Callable[[int], bool], *, min_offset: int = 0
                ) -> tuple[int, int, int] | None:
    """``(timestamp, offset, leader epoch)`` of the first record at or after ``min_offset`` of
    the batch at the start of ``data`` whose timestamp ``wanted`` accepts (ListOffsets by
    time), None when none does; the epoch is the batch's (-1 when it has none). Inside a
    compressed batch (never inflated for this) the answer is the batch's first offset and
    largest timestamp, where a consumer must start to see the record. Pure."""
    header = read_batch_header(data)
    epoch = max(header.partition_leader_epoch, -1)
    if header.compression:
        if header.last_offset < min_offset or not wanted(header.max_timestamp):
            return None
        return header.max_timestamp, header.base_offset, epoch
    for record in decode_batch(data).records:
        if record.offset >= min_offset and wanted(record.timestamp):
            return record.timestamp, record.offset, epoch
    return None


def _decode_blob(view: memoryview, pos: int, end: int) -> tuple[bytes | None, int]:
    length, pos = read_varint(view, pos, end)
    if length < 0:
        return None, pos
    if pos + length > end:
        raise CorruptRecordError("record field runs past the end of its record")
    return bytes(view[pos : pos + length]), pos + length


def _decode_records(view: memoryview, pos: int, end: int, header: BatchHeader) -> Iterable[Record]:
    for _ in range(header.records_count):
        length, pos = read_varint(view, pos, end)
        record_end = pos + length
        if length < 1 or record_end > end:
            raise CorruptRecordError(f"record of length {length} runs past its batch")
        pos += 1  # attributes
        ts_delta, pos = read_varlong(view, pos, record_end)
        offset_delta, pos = read_varint(view, pos, record_end)
        key, pos = _decode_blob(view, pos, record_end)
        value, pos = _decode_blob(view, pos, record_end)
        count, pos = read_varint(view, pos, record_end)
        if count < 0:
            raise CorruptRecordError(f"negative header count {count}")
        headers = []
        for _h in range(count):
            key_len, pos = read_varint(view, pos, record_end)
            if key_len < 0 or pos + key_len > record_end:
                raise CorruptRecordError("record header key runs past its record")
            try:
                hkey = bytes(view[pos : pos + key_len]).decode("utf-8")
            except UnicodeDecodeError as exc:
                raise CorruptRecordError("record header key is not UTF-8") from exc
            hvalue, pos = _decode_blob(view, pos + key_len, record_end)
            headers.append(Header(key=hkey, value=hvalue))
        if pos != record_end:
            raise CorruptRecordError(f"record declares {length} bytes but uses a different size")
        yield Record(
            key=key,
            value=value,
            timestamp=header.base_timestamp + ts_delta,
            headers=tuple(headers),
            offset=header.base_offset + offset_delta,
        )
    if pos != end:
        raise CorruptRecordError(
            f"batch declares {header.records_count} records but {end - pos} bytes are left over"
        )


# -- reading records without decoding them (the cleaner's passes) -------------------------------


def read_zigzag(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """A zigzag varint (or varlong) at ``pos`` and the position after it, Kafka's bound of 10
    bytes enforced: the fast reader of the cleaner's passes (IndexError past the buffer)."""
    b = buf[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    z = b & 0x7F
    shift = 7
    i = pos + 1
    while True:
        if i - pos >= 10:
            raise CorruptRecordError(f"varint at {pos} runs past 10 bytes")
        b = buf[i]
        z |= (b & 0x7F) << shift
        i += 1
        if b < 0x80:
            return (z >> 1) ^ -(z & 1), i
        shift += 7


def record_spans(data: bytes, start: int, end: int, count: int
             ) -> Iterable[tuple[int, int, int, bytes | None, bool]]:
    """Each record of a batch's (uncompressed or inflated) records section ``data[start:end]``:
    ``(record start, record end, offset delta, key, value is null)``. Raises
    :class:`CorruptRecordError` if the records do not fill the section exactly."""
    pos = start
    for _ in range(count):
        length, body = read_zigzag(data, pos)
        rec_end = body + length
        if length < 1 or rec_end > end:
            raise CorruptRecordError(f"record of length {length} runs past its batch")
        _ts, p = read_zigzag(data, body + 1)
        delta, p = read_zigzag(data, p)
        key_len, p = read_zigzag(data, p)
        if key_len < 0:
            key = None
        else:
            key = data[p : p + key_len]
            p += key_len
        value_len, p = read_zigzag(data, p)
        if p > rec_end or (value_len > 0 and p + value_len > rec_end):
            raise CorruptRecordError("record fields run past the end of their record")
        yield pos, rec_end, delta, key, value_len < 0
        pos = rec_end
    if pos != end:
        raise CorruptRecordError(f"batch declares {count} records but {end - pos} bytes are "
                                 "left over")


def file_batches(fd: int, size: int, check_crc: bool = True) -> Iterable[tuple[bytes, int, tuple]]:
    """The batches of a segment file of ``size`` bytes, read in large chunks: ``(buffer,
    position in it, header fields)``. Each batch's CRC is checked (unless this pass checked
    it already): a segment that does not parse raises :class:`CorruptRecordError`, one that
    got shorter (truncated meanwhile) :class:`SegmentChangedError`."""
    file_pos = 0
    while file_pos < size:
        want = min(_FILE_CHUNK, size - file_pos)
        chunk = os.pread(fd, want, file_pos)
        n = len(chunk)
        if n < want:
            raise SegmentChangedError(f"segment got shorter during the clean: {file_pos + n} of "
                                      f"{size} bytes")
        rel = 0
        while rel < n:
            if n - rel < RECORDS_OFFSET:
                if file_pos + rel + RECORDS_OFFSET > size:
                    raise CorruptRecordError(f"torn batch header at position {file_pos + rel}")
                break
            head = _HEADER.unpack_from(chunk, rel)
            length = head[1]
            total = length + LOG_OVERHEAD
            if length < RECORDS_OFFSET - LOG_OVERHEAD or head[3] != MAGIC_V2:
                raise CorruptRecordError(f"bad batch at position {file_pos + rel}")
            if rel + total > n:
                if file_pos + rel + total > size:
                    raise CorruptRecordError(f"batch at position {file_pos + rel} runs past "
                                             "the end of its segment")
                if rel == 0:  # a batch larger than the chunk
                    chunk = os.pread(fd, total, file_pos)
                    n = len(chunk)
                    if n < total:
                        raise SegmentChangedError("segment got shorter during the clean")
                    continue
                break
            if check_crc and (crc32c.crc32c(memoryview(chunk)[rel + ATTRIBUTES_OFFSET :
                                                              rel + total]) != head[4]):
                raise CorruptRecordError(f"batch at position {file_pos + rel} (base offset "
                                         f"{head[0]}) fails its CRC")
            yield chunk, rel, head
            rel += total
        file_pos += rel


def inflate_section(chunk: bytes, rel: int, head: tuple, limit: int) -> bytes:
    """The records section of the compressed batch at ``chunk[rel:]``, inflated to at most
    ``limit`` bytes (:class:`CorruptRecordError` past that, or if it does not decode)."""
    try:
        return decompress(head[5] & COMPRESSION_MASK,
                          memoryview(chunk)[rel + RECORDS_OFFSET : rel + head[1] + LOG_OVERHEAD],
                          limit)
    except CorruptRecordError as exc:
        raise CorruptRecordError(f"batch at offset {head[0]}: {exc}") from exc
