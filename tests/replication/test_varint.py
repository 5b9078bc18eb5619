import pytest

from replication.errors import CorruptRecordError
from replication.varint import read_varint, read_varlong, varint_size, write_varint, write_varlong

# Zigzag encodings as Kafka's ByteUtils writes them.
KNOWN = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (-2, "03"),
    (63, "7e"),
    (-64, "7f"),
    (64, "8001"),
    (300, "d804"),
    (2**31 - 1, "feffffff0f"),
    (-(2**31), "ffffffff0f"),
]


@pytest.mark.parametrize(("value", "hexed"), KNOWN)
def test_varint_matches_kafka_zigzag_bytes(value: int, hexed: str) -> None:
    buf = bytearray()
    write_varint(buf, value)
    assert buf.hex() == hexed
    assert read_varint(bytes(buf), 0) == (value, len(buf))
    assert varint_size(value) == len(buf)


@pytest.mark.parametrize("value", [0, -1, 2**40, -(2**40), 2**63 - 1, -(2**63)])
def test_varlong_round_trip(value: int) -> None:
    buf = bytearray()
    write_varlong(buf, value)
    assert read_varlong(bytes(buf), 0) == (value, len(buf))
    assert varint_size(value) == len(buf)


def test_varint_range_is_enforced() -> None:
    with pytest.raises(ValueError):
        write_varint(bytearray(), 2**31)
    with pytest.raises(CorruptRecordError):
        read_varint(b"\xff\xff\xff\xff\xff\x01", 0)  # six bytes: longer than any int32


def test_truncated_varint_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError):
        read_varint(b"\x80", 0)
