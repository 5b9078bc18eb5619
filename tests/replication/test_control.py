"""Control batches: the end-transaction markers' bytes, read back and refused when malformed."""

from __future__ import annotations

import pytest

from replication.control import (
    ControlType,
    control_type,
    decode_marker,
    encode_marker_batch,
    marker_of,
    read_marker,
)
from replication.errors import InvalidRecordError
from replication.records import Record, decode_batch, encode_batch, validate_batches


def test_a_commit_marker_has_kafkas_bytes_and_reads_back() -> None:
    data = encode_marker_batch(producer_id=7, producer_epoch=3, commit=True,
                               coordinator_epoch=5, timestamp=1_000, base_offset=42)
    batch = decode_batch(data)
    header = batch.header
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 3, -1)
    assert len(batch.records) == 1
    record = batch.records[0]
    assert record.key == b"\x00\x00\x00\x01"
    assert record.value == b"\x00\x00\x00\x00\x00\x05"
    marker = read_marker(data)
    assert marker is not None
    assert (marker.commit, marker.coordinator_epoch, marker.offset) == (True, 5, 42)
    assert marker.control_type is ControlType.COMMIT
    validate_batches(data)


def test_an_abort_marker_reads_as_abort() -> None:
    data = encode_marker_batch(producer_id=1, producer_epoch=0, commit=False,
                               coordinator_epoch=0, timestamp=0)
    marker = read_marker(data)
    assert marker is not None and not marker.commit


def test_a_data_batch_is_no_marker() -> None:
    data = encode_batch([Record(key=None, value=b"v", timestamp=0)], producer_id=1,
                        producer_epoch=0, base_sequence=0, transactional=True)
    assert read_marker(data) is None


def test_an_unknown_control_type_is_skipped_not_read_as_a_marker() -> None:
    data = encode_batch([Record(key=b"\x00\x00\x00\x09", value=None, timestamp=0)],
                        transactional=True, control=True)
    assert marker_of(decode_batch(data)) is None


@pytest.mark.parametrize(("key", "value"), [
    (None, b"\x00\x00\x00\x00\x00\x00"),
    (b"\x00", b"\x00\x00\x00\x00\x00\x00"),
    (b"\x00\x00\x00\x01", None),
    (b"\x00\x00\x00\x01", b"\x00\x00\x00"),
    (b"\x00\x00\x00\x07", b"\x00\x00\x00\x00\x00\x00"),
])
def test_a_malformed_marker_is_refused(key: bytes | None, value: bytes | None) -> None:
    with pytest.raises(InvalidRecordError):
        decode_marker(key, value)


def test_control_type_reads_any_key_version() -> None:
    assert control_type(b"\x00\x03\x00\x00") == ControlType.ABORT
