"""Every record of a client's batch is checked before a leader appends it
(:mod:`replication.validation`, Kafka's ``LogValidator``): hostile batches whose CRC is right
over records that are not, each refused whole with nothing written."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import crc32c
import pytest

from replication.compression import compress
from replication.errors import CorruptRecordError, InvalidRecordError
from replication.log import Log, LogConfig
from replication.records import (
    ATTRIBUTES_OFFSET,
    RECORDS_OFFSET,
    Header,
    Record,
    decode_batch,
    encode_batch,
)
from replication.validation import _walk
from replication.varint import write_varint, write_varlong


def rebuilt(section: bytes, count: int, *, attributes: int = 0) -> bytes:
    """A batch of ``count`` records (lastOffsetDelta ``count - 1``) whose records section is
    ``section``, as sent: length and CRC recomputed, so only the records are wrong."""
    out = bytearray(encode_batch([Record(key=b"k", value=b"v", timestamp=1)])[:RECORDS_OFFSET])
    out += section
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">h", out, ATTRIBUTES_OFFSET, attributes)
    struct.pack_into(">i", out, 23, count - 1)
    struct.pack_into(">i", out, 57, count)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[ATTRIBUTES_OFFSET:])))
    return bytes(out)


def record(delta: int = 0, *, key: bytes | None = b"k", value: bytes | None = b"v",
           headers: list[tuple[int, bytes]] | None = None, header_count: int | None = None,
           key_length: int | None = None, pad: bytes = b"", length_change: int = 0) -> bytes:
    """One record's bytes, with whatever lie asked for."""
    body = bytearray(b"\x00")
    write_varlong(body, 0)
    write_varint(body, delta)
    if key is None:
        write_varint(body, -1 if key_length is None else key_length)
    else:
        write_varint(body, len(key) if key_length is None else key_length)
        body += key
    if value is None:
        write_varint(body, -1)
    else:
        write_varint(body, len(value))
        body += value
    headers = headers or []
    write_varint(body, len(headers) if header_count is None else header_count)
    for key_len, rest in headers:
        write_varint(body, key_len)
        body += rest
    body += pad
    out = bytearray()
    write_varint(out, len(body) + length_change)
    return bytes(out + body)


def log_at(tmp_path: Path, *, compact: bool = False) -> Log:
    return Log.open(tmp_path / "t-0", config=LogConfig(compact=compact))


GOOD = record(0)


HOSTILE = [
    ("a record longer than its batch", rebuilt(record(0, length_change=40), 1)),
    ("a record whose fields take fewer bytes than it declares",
     rebuilt(record(0, pad=b"\x00\x00"), 1)),
    ("a record whose fields take more bytes than it declares",
     rebuilt(record(0, length_change=-2) + b"\x00\x00", 1)),
    ("a zero-length record", rebuilt(b"\x00", 1)),
    ("a negative record length", rebuilt(b"\x03" + GOOD, 1)),
    ("one record claiming 2^31-1", rebuilt(GOOD, (1 << 31) - 1)),
    ("two records claiming three", rebuilt(GOOD + record(1), 3)),
    ("bytes after the last record", rebuilt(GOOD + b"\x02\x00", 1)),
    ("offset deltas out of order", rebuilt(record(1) + record(0), 2)),
    ("an offset delta that skips", rebuilt(record(0) + record(2), 2)),
    ("a key length of -2", rebuilt(record(0, key=None, key_length=-2), 1)),
    ("a key longer than its record", rebuilt(record(0, key=b"k", key_length=60), 1)),
    ("a negative header count", rebuilt(record(0, header_count=-1), 1)),
    ("a header count past the bytes", rebuilt(record(0, header_count=1 << 20), 1)),
    ("a null header key", rebuilt(record(0, headers=[(-1, b"\x00")]), 1)),
    ("a header key past its record", rebuilt(record(0, headers=[(30, b"ab\x00")]), 1)),
    ("a varint of six bytes", rebuilt(b"\xff\xff\xff\xff\xff\x01" + GOOD, 1)),
    ("a gzip batch of bad records", rebuilt(compress(1, record(0, pad=b"\x00")), 1,
                                            attributes=1)),
    ("an lz4 batch claiming more records", rebuilt(compress(3, GOOD), 2, attributes=3)),
    ("a control batch", rebuilt(GOOD, 1, attributes=0x20)),
]


@pytest.mark.parametrize(("name", "batch"), HOSTILE, ids=[n for n, _b in HOSTILE])
def test_a_batch_whose_records_do_not_parse_is_refused_whole(tmp_path: Path, name: str,
                                                            batch: bytes) -> None:
    log = log_at(tmp_path)
    log.append_as_leader(encode_batch([Record(key=b"a", value=b"1", timestamp=1)]), 0)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(batch, 0)
    assert log.log_end_offset == 1, name
    after = encode_batch([Record(key=b"b", value=b"2", timestamp=2)])
    assert log.append_as_leader(after, 0).first_offset == 1
    read = log.read(0, 1 << 20).records
    first = decode_batch(read)
    assert [r.value for r in first.records] == [b"1"]
    assert [r.value for r in decode_batch(read, first.header.size).records] == [b"2"]
    log.close()


def test_a_compressed_section_that_does_not_inflate_is_a_corrupt_message(tmp_path: Path
                                                                         ) -> None:
    log = log_at(tmp_path)
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(rebuilt(b"\x1f\x8b not gzip", 1, attributes=1), 0)
    assert log.log_end_offset == 0
    log.close()


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_well_formed_batches_of_every_shape_are_taken(tmp_path: Path, codec: int) -> None:
    log = log_at(tmp_path)
    records = [Record(key=None, value=None, timestamp=5),
               Record(key=b"", value=b"", timestamp=-1),
               Record(key=b"k" * 300, value=b"v" * 70_000, timestamp=1 << 40,
                      headers=(Header(key="h", value=None), Header(key="", value=b"x" * 200)))]
    info = log.append_as_leader(encode_batch(records, compression=codec), 0)
    assert (info.first_offset, info.last_offset) == (0, 2)
    log.close()


def test_a_compacted_topic_still_refuses_a_record_without_a_key_in_kafka_s_words(
        tmp_path: Path) -> None:
    log = log_at(tmp_path, compact=True)
    keyless = rebuilt(record(0) + record(1, key=None), 2)
    with pytest.raises(InvalidRecordError, match="Compacted topic cannot accept message "
                                                 "without key in topic partition t-0"):
        log.append_as_leader(keyless, 0)
    assert log.log_end_offset == 0
    log.close()


def _sections() -> list[tuple[bytes, int]]:
    """Records sections (and their claimed counts) of the hostile batches and of good ones."""
    out = [(b[RECORDS_OFFSET:], struct.unpack_from(">i", b, 57)[0])
           for _n, b in HOSTILE if not b[ATTRIBUTES_OFFSET + 1] & 0x07]
    good = encode_batch([Record(key=b"k%d" % i, value=b"v" * i, timestamp=i,
                                headers=(Header(key="h", value=b"x"),)) for i in range(20)])
    out.append((good[RECORDS_OFFSET:], 20))
    return out


def test_the_native_walk_gives_the_python_walk_s_verdicts() -> None:
    """Over the hostile sections, good ones, and 3,000 random corruptions of a good one: the
    same answer from both, word for word (the C walk is what leaders run where it is built)."""
    native = pytest.importorskip("replication._records_native")
    cases = _sections()
    rng = random.Random(28)
    good, count = cases[-1]
    for _ in range(3_000):
        bad = bytearray(good)
        for _flip in range(rng.randint(1, 3)):
            bad[rng.randrange(len(bad))] = rng.randrange(256)
        cases.append((bytes(bad[:rng.randint(len(bad) - 5, len(bad))]), count))
    for section, claimed in cases:
        for compacted in (False, True):
            expected = _walk(section, 0, len(section), claimed, compacted)
            assert native.walk_records(section, 0, len(section), claimed, compacted) == expected
    with pytest.raises(ValueError):
        native.walk_records(b"\x02", 0, 5, 1, False)
