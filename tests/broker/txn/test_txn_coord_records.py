"""``__transaction_state`` records in Kafka's formats: round trips, Kafka's exact bytes, the
partition of an id, and hostile bytes refused with one clear line."""

from __future__ import annotations

import struct

import pytest

from broker.groups.records import partition_for
from broker.txns.loading import build_txns
from broker.txns.metadata import TxnState
from broker.txns.records import (
    TxnLogValue,
    TxnRecordError,
    decode_txn_key,
    decode_txn_value,
    encode_txn_key,
    encode_txn_value,
)

ONGOING = TxnLogValue(producer_id=4000, producer_epoch=3, timeout_ms=60_000, status=1,
                      partitions=(("a", 0), ("a", 2), ("b", 1)), last_update_ms=1_700_000_000_123,
                      start_ms=1_700_000_000_000)


def test_key_is_kafkas_version_0_bytes() -> None:
    assert encode_txn_key("tx-1") == b"\x00\x00\x00\x04tx-1"
    assert decode_txn_key(encode_txn_key("tx-é")) == "tx-é"


def test_value_is_kafkas_version_0_bytes() -> None:
    expected = b"".join([
        struct.pack(">hqhib", 0, 4000, 3, 60_000, 1),
        struct.pack(">i", 2),  # two topics
        struct.pack(">h", 1), b"a", struct.pack(">iii", 2, 0, 2),
        struct.pack(">h", 1), b"b", struct.pack(">ii", 1, 1),
        struct.pack(">qq", 1_700_000_000_123, 1_700_000_000_000)])
    assert encode_txn_value(ONGOING) == expected
    assert decode_txn_value(expected) == ONGOING


def test_empty_is_written_with_null_partitions() -> None:
    empty = TxnLogValue(producer_id=7, producer_epoch=0, timeout_ms=1000, status=0,
                        last_update_ms=5, start_ms=-1)
    data = encode_txn_value(empty)
    assert data[17:21] == struct.pack(">i", -1)
    assert decode_txn_value(data) == empty
    assert decode_txn_value(None) is None


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def test_flexible_version_1_is_read_with_its_tagged_fields_skipped() -> None:
    data = b"".join([
        struct.pack(">hqhib", 1, 4000, 3, 60_000, 1),
        _uvarint(2),  # one topic (compact array: n + 1)
        _uvarint(2), b"a", _uvarint(3), struct.pack(">ii", 0, 2), _uvarint(0),
        struct.pack(">qq", 1_700_000_000_123, 1_700_000_000_000),
        _uvarint(1), _uvarint(0), _uvarint(8), struct.pack(">q", 99)])  # a tagged field
    value = decode_txn_value(data)
    assert value is not None and value.partitions == (("a", 0), ("a", 2))
    assert value.producer_id == 4000 and value.status == 1


@pytest.mark.parametrize(("data", "says"), [
    (b"", "the record ends"),
    (struct.pack(">h", 9) + b"x" * 40, "version 9"),
    (struct.pack(">hqhib", 0, 1, 0, 10, 8) + b"\x00" * 20, "status 8"),
    (struct.pack(">hqhibi", 0, 1, 0, 10, 1, 1 << 30) + b"\x00" * 16, "items claimed"),
    (struct.pack(">hqhibi", 0, 1, 0, 10, 1, 1) + struct.pack(">h", 500) + b"ab" * 10,
     "bytes claimed"),
    (encode_txn_value(ONGOING) + b"!", "left over"),
])
def test_hostile_values_are_refused_in_one_line(data: bytes, says: str) -> None:
    with pytest.raises(TxnRecordError, match=says) as caught:
        decode_txn_value(data)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("data", [b"\x00", b"\x00\x01\x00\x01a", b"\x00\x00\x00\x05ab",
                                  b"\x00\x00\x00\x02\xff\xfe"])
def test_hostile_keys_are_refused(data: bytes) -> None:
    with pytest.raises(TxnRecordError):
        decode_txn_key(data)


def test_the_partition_of_an_id_is_kafkas() -> None:
    # abs(String.hashCode) % partitions: "hello".hashCode() is 99162322 in Java
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("polygenelubricants", 50) == 0  # hashCode is Integer.MIN_VALUE


def test_replay_keeps_the_last_value_and_tombstones_remove() -> None:
    done = TxnLogValue(producer_id=4000, producer_epoch=3, timeout_ms=60_000, status=4,
                       last_update_ms=9, start_ms=1)
    txns = build_txns([("t1", ONGOING), ("t2", ONGOING), ("t1", done), ("t2", None)])
    assert set(txns) == {"t1"}
    assert txns["t1"].state is TxnState.COMPLETE_COMMIT and not txns["t1"].partitions
