import struct

import crc32c
import pytest

from replication.errors import CorruptRecordError, UnsupportedCompressionError
from replication.records import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    Header,
    Record,
    decode_batch,
    encode_batch,
    read_batch_header,
    stamp_batch,
    validate_batches,
)

from ._util import batch, reference_crc32c

# A batch written by a Kafka 0.11 broker (published in kafka-python's test suite as captured
# wire data): offset 0, leader epoch 1, one record, null key, value b"123",
# timestamp 1503229838908, CRC 0x0318a270.
KAFKA_BATCH = bytes.fromhex(
    "0000000000000000"  # baseOffset 0
    "0000003b"  # batchLength 59
    "00000001"  # partitionLeaderEpoch 1
    "02"  # magic
    "0318a270"  # crc
    "0000"  # attributes
    "00000000"  # lastOffsetDelta
    "0000015dff7b063c"  # baseTimestamp
    "0000015dff7b063c"  # maxTimestamp
    "ffffffffffffffff"  # producerId -1
    "ffff"  # producerEpoch -1
    "ffffffff"  # baseSequence -1
    "00000001"  # recordsCount
    "12"  # record length 9
    "00"  # attributes
    "00"  # timestampDelta 0
    "00"  # offsetDelta 0
    "01"  # key length -1 (null)
    "06313233"  # value length 3, "123"
    "00"  # no headers
)


def test_reference_crc32c_has_the_standard_check_value() -> None:
    assert reference_crc32c(b"123456789") == 0xE3069283
    assert crc32c.crc32c(b"123456789") == 0xE3069283


def test_encoding_matches_a_batch_written_by_kafka() -> None:
    encoded = encode_batch(
        [Record(key=None, value=b"123", timestamp=1503229838908)], partition_leader_epoch=1
    )
    assert encoded == KAFKA_BATCH


def test_decoding_a_batch_written_by_kafka() -> None:
    decoded = decode_batch(KAFKA_BATCH)
    assert decoded.header.crc == 0x0318A270
    assert decoded.header.partition_leader_epoch == 1
    assert decoded.records == (
        Record(key=None, value=b"123", timestamp=1503229838908, headers=(), offset=0),
    )


def test_crc_covers_attributes_to_end_against_reference_implementation() -> None:
    data = batch(5, value_size=300)
    stored = struct.unpack_from(">I", data, CRC_OFFSET)[0]
    assert stored == reference_crc32c(data[ATTRIBUTES_OFFSET:])


def test_round_trip_with_keys_headers_nulls_and_timestamps() -> None:
    records = [
        Record(key=b"a", value=b"x" * 200, timestamp=10_000),
        Record(key=None, value=None, timestamp=9_000, headers=(Header(key="h", value=None),)),
        Record(
            key=b"",
            value=b"",
            timestamp=12_345,
            headers=(Header(key="trace", value=b"\x00\x01"), Header(key="ü", value=b"")),
        ),
    ]
    data = encode_batch(
        records,
        base_offset=100,
        partition_leader_epoch=7,
        producer_id=42,
        producer_epoch=3,
        base_sequence=11,
    )
    decoded = decode_batch(data)
    h = decoded.header
    assert (h.base_offset, h.partition_leader_epoch, h.records_count) == (100, 7, 3)
    assert (h.last_offset_delta, h.base_timestamp, h.max_timestamp) == (2, 10_000, 12_345)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (42, 3, 11)
    assert h.size == len(data)
    expected = tuple(
        Record(key=r.key, value=r.value, timestamp=r.timestamp, headers=r.headers, offset=100 + i)
        for i, r in enumerate(records)
    )
    assert decoded.records == expected


def test_stamping_changes_only_offset_and_epoch_and_keeps_crc_valid() -> None:
    original = batch(3)
    stamped = bytearray(original)
    stamp_batch(stamped, 0, 1_000_000_007, 12)
    validate_batches(stamped)  # no CRC recomputation was needed
    header = read_batch_header(stamped)
    assert (header.base_offset, header.partition_leader_epoch) == (1_000_000_007, 12)
    assert header.crc == read_batch_header(original).crc
    diff = [i for i in range(len(original)) if original[i] != stamped[i]]
    assert diff and all(i < 8 or 12 <= i < 16 for i in diff)
    assert [r.offset for r in decode_batch(stamped).records] == [
        1_000_000_007,
        1_000_000_008,
        1_000_000_009,
    ]


@pytest.mark.parametrize("position", [ATTRIBUTES_OFFSET, 40, -1])
def test_a_flipped_byte_inside_the_crc_range_is_corrupt(position: int) -> None:
    data = bytearray(batch(2))
    data[position] ^= 0x40
    with pytest.raises(CorruptRecordError, match="CRC"):
        validate_batches(data)


def test_bad_magic_is_corrupt() -> None:
    data = bytearray(batch())
    data[16] = 1
    with pytest.raises(CorruptRecordError, match="magic"):
        validate_batches(data)


@pytest.mark.parametrize("cut", [1, 30, 61])
def test_truncated_batch_is_corrupt(cut: int) -> None:
    data = batch(2) + batch(1)
    with pytest.raises(CorruptRecordError):
        validate_batches(data[:-cut])


def test_length_below_header_is_corrupt() -> None:
    data = bytearray(batch())
    struct.pack_into(">i", data, 8, 10)
    with pytest.raises(CorruptRecordError, match="length"):
        validate_batches(data)


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_a_codec_kafka_does_not_have_is_rejected_clearly(codec: int) -> None:
    data = bytearray(batch())
    struct.pack_into(">h", data, ATTRIBUTES_OFFSET, codec)
    struct.pack_into(">I", data, CRC_OFFSET, crc32c.crc32c(bytes(data[ATTRIBUTES_OFFSET:])))
    with pytest.raises(UnsupportedCompressionError, match=f"codec {codec}"):
        validate_batches(data)
    with pytest.raises(CorruptRecordError):  # a produce answers CORRUPT_MESSAGE
        validate_batches(data)


def test_validate_reports_every_batch_in_a_buffer() -> None:
    data = batch(2, timestamp=5) + batch(3, timestamp=9)
    facts = validate_batches(data)
    assert [(pos, last_delta, max_ts, pid) for pos, _s, _b, last_delta, _e, max_ts, pid
            in facts] == [
        (0, 1, 5, -1),
        (len(batch(2, timestamp=5)), 2, 9, -1),
    ]


def test_record_count_mismatch_is_corrupt() -> None:
    data = bytearray(batch(2))
    struct.pack_into(">i", data, 57, 3)
    struct.pack_into(">I", data, CRC_OFFSET, crc32c.crc32c(bytes(data[ATTRIBUTES_OFFSET:])))
    with pytest.raises(CorruptRecordError):
        decode_batch(data)
