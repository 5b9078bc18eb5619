"""Batches a producer compressed (gzip, snappy, lz4, zstd) are stored as sent: validated by
their header and CRC, given offsets and the leader epoch outside the CRC, read back byte for
byte, kept by recovery; their records are inflated only when asked for (decode_batch)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from replication.errors import CorruptRecordError
from replication.log import Log, LogConfig
from replication.records import (
    Record,
    decode_batch,
    encode_batch,
    read_batch_header,
    validate_batches,
)

from ._util import batch


def compressed(n: int = 3, codec: int = 1, *, timestamp: int = 1_000) -> bytes:
    """A batch of ``n`` records compressed with ``codec`` as Kafka's Java producer does."""
    records = [Record(key=f"k{i}".encode(), value=bytes([i % 251]) * 10, timestamp=timestamp)
               for i in range(n)]
    return encode_batch(records, compression=codec)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_every_kafka_codec_validates_by_header_and_crc(codec: int) -> None:
    data = compressed(4, codec)
    ((pos, size, _base, last_delta, _epoch, max_ts, _pid),) = validate_batches(data, from_client=True)
    assert (pos, size, last_delta, max_ts) == (0, len(data), 3, 1_000)
    assert read_batch_header(data).compression == codec


def test_a_compressed_batch_with_a_bad_crc_is_corrupt() -> None:
    data = bytearray(compressed())
    data[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        validate_batches(data)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_records_of_a_compressed_batch_are_inflated_when_decoded(codec: int) -> None:
    decoded = decode_batch(compressed(3, codec))
    assert decoded.header.compression == codec
    assert [(r.offset, r.key, r.value) for r in decoded.records] == [
        (i, f"k{i}".encode(), bytes([i]) * 10) for i in range(3)]


def test_leader_stores_compressed_batches_as_sent(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", config=LogConfig())
    log.append_as_leader(batch(2), leader_epoch=3)
    sent = [compressed(3, codec) for codec in (1, 2, 3, 4)]
    infos = [log.append_as_leader(b, leader_epoch=3) for b in sent]
    assert [(i.first_offset, i.last_offset) for i in infos] == [(2, 4), (5, 7), (8, 10), (11, 13)]
    data = log.read(2, 1 << 20).records
    assert validate_batches(data)  # the CRCs still hold after stamping
    pos = 0
    for original, info in zip(sent, infos, strict=True):
        stored = data[pos:pos + len(original)]
        header = read_batch_header(stored)
        assert (header.base_offset, header.partition_leader_epoch) == (info.first_offset, 3)
        assert stored[12:16] == struct.pack(">i", 3)
        assert stored[16:] == original[16:]  # everything but offset and epoch as sent
        pos += len(original)
    assert pos == len(data)


@pytest.mark.parametrize("clean", [True, False])
def test_compressed_batches_survive_reopening(tmp_path: Path, clean: bool) -> None:
    log = Log.open(tmp_path / "t-0", config=LogConfig())
    for codec in (1, 2, 3, 4):
        log.append_as_leader(compressed(2, codec), leader_epoch=1)
    before = log.read(0, 1 << 20).records
    if clean:
        log.close()
    else:
        log.close(clean=False)  # die without the clean-shutdown marker
    again = Log.open(tmp_path / "t-0", config=LogConfig())
    assert again.log_end_offset == 8
    assert again.read(0, 1 << 20).records == before
