"""What a broker process takes from a producer (issue 28): a batch whose records do not parse,
behind a valid CRC, is refused and the partition stays readable from offset 0; a batch over a
topic's ``segment.bytes`` is RECORD_LIST_TOO_LARGE, over its ``max.message.bytes``
MESSAGE_TOO_LARGE (checked first, as Kafka checks them)."""

from __future__ import annotations

import struct
import time
import uuid

import confluent_kafka as ck
import crc32c
import pytest
from kio.schema.errors import ErrorCode

import coordinator
from coordinator.admin import Admin
from replication.records import ATTRIBUTES_OFFSET, RECORDS_OFFSET, Record, encode_batch
from tests.broker.processes import BrokerProcess, wait_for_leaders
from tests.broker.protocol.test_apis import errors_of, produce
from tests.broker.wire_client import RawClient

pytestmark = pytest.mark.servers


def _topic(broker: BrokerProcess, config: dict[str, str] | None = None) -> str:
    name = f"valid-{uuid.uuid4().hex[:8]}"
    client = coordinator.connect(broker.coordinator_url, timeout=10)
    try:
        Admin(client).create_topic(name, 1, 1, config=config)
    finally:
        client.close()
    wait_for_leaders(broker, name, 1)
    return name


def _poisoned() -> bytes:
    """One record whose length says 40 bytes more than its batch holds, CRC recomputed."""
    good = encode_batch([Record(key=b"k", value=b"poison", timestamp=1_000)])
    out = bytearray(good)
    out[RECORDS_OFFSET] += 80  # the zigzag length varint: +40
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[ATTRIBUTES_OFFSET:])))
    return bytes(out)


def _end_offset(broker: BrokerProcess, topic: str) -> int:
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
    try:
        return consumer.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=20)[1]
    finally:
        consumer.close()


def _read_all(broker: BrokerProcess, topic: str, expected: int) -> list[tuple[int, bytes]]:
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused",
                            "enable.auto.commit": False})
    consumer.assign([ck.TopicPartition(topic, 0, 0)])
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < expected and time.monotonic() < deadline:
            for msg in consumer.consume(10, 0.5):
                assert msg.error() is None, msg.error()
                got.append((msg.offset(), msg.value()))
    finally:
        consumer.close()
    return got


def test_a_poisoned_batch_is_refused_and_the_partition_stays_readable(
        broker: BrokerProcess) -> None:
    topic = _topic(broker)
    before = encode_batch([Record(key=b"k", value=b"before", timestamp=1_000)])
    after = encode_batch([Record(key=b"k", value=b"after", timestamp=1_001)])
    claims_more = bytearray(before)  # 1 record claiming 2^31-1 (lastOffsetDelta to match)
    struct.pack_into(">i", claims_more, 23, (1 << 31) - 2)
    struct.pack_into(">i", claims_more, 57, (1 << 31) - 1)
    struct.pack_into(">I", claims_more, 17, crc32c.crc32c(bytes(claims_more[ATTRIBUTES_OFFSET:])))
    with RawClient(broker.address) as client:
        assert errors_of(client.call(produce(data={(topic, 0): before}))) == {
            (topic, 0): ErrorCode.none}
        for hostile in (_poisoned(), bytes(claims_more)):
            assert errors_of(client.call(produce(data={(topic, 0): hostile}))) == {
                (topic, 0): ErrorCode.invalid_record}
        assert _end_offset(broker, topic) == 1
        assert errors_of(client.call(produce(data={(topic, 0): after}))) == {
            (topic, 0): ErrorCode.none}
    assert _end_offset(broker, topic) == 2
    assert _read_all(broker, topic, 2) == [(0, b"before"), (1, b"after")]


def test_a_batch_over_segment_bytes_is_record_list_too_large_over_max_message_bytes_not(
        broker: BrokerProcess) -> None:
    topic = _topic(broker, {"segment.bytes": "1000", "max.message.bytes": "3000"})
    middling = encode_batch([Record(key=b"k", value=b"x" * 1_500, timestamp=1)])
    big = encode_batch([Record(key=b"k", value=b"x" * 5_000, timestamp=1)])
    small = encode_batch([Record(key=b"k", value=b"x" * 100, timestamp=1)])
    with RawClient(broker.address) as client:
        assert errors_of(client.call(produce(data={(topic, 0): middling}))) == {
            (topic, 0): ErrorCode.record_list_too_large}
        assert errors_of(client.call(produce(data={(topic, 0): big}))) == {
            (topic, 0): ErrorCode.message_too_large}
        assert errors_of(client.call(produce(data={(topic, 0): small}))) == {
            (topic, 0): ErrorCode.none}
    assert _end_offset(broker, topic) == 1
