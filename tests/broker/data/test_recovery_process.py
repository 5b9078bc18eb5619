"""A broker process killed with SIGKILL after it checkpointed its recovery point, then a byte
of its first segment flipped: restarted, it keeps every record (Kafka trusts the flushed
segments below the recovery point), reports the damage in one warning, and its log end is
where it was."""

from __future__ import annotations

from pathlib import Path

import confluent_kafka as ck
import pytest

import coordinator
from coordinator.codecs import TopicPartition
from replication.checkpoints import RECOVERY_POINT_CHECKPOINT_FILE, OffsetCheckpointFile
from replication.records import validate_batches
from tests.broker.processes import (
    coordinator_settings,
    create_topic,
    start_broker,
    wait_for_leaders,
)
from tests.broker.protocol.test_apis import list_offsets
from tests.broker.wire_client import RawClient
from tests.servers import Server
from tests.waiting import wait_until

pytestmark = pytest.mark.servers

SETTINGS = ("log.segment.bytes=1500\n"  # several segments, none indexed (index.interval.bytes)
            "log.flush.interval.ms=100\n"
            "zookeeper.session.timeout.ms=4000\n")  # the killed broker's registration goes
TP = TopicPartition(topic="t", partition=0)


def latest_offset(address: tuple[str, int]) -> int:
    with RawClient(address) as client:
        return client.call(list_offsets(1, [-1])).topics[0].partitions[0].offset


def test_a_flipped_byte_below_the_recovery_point_loses_nothing_after_a_kill(
        tmp_path: Path, zookeeper_server: Server) -> None:
    settings = coordinator_settings(zookeeper_server)
    broker = start_broker(tmp_path, zookeeper_server, extra=SETTINGS, settings=settings)
    try:
        create_topic(broker, "t")
        producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0,
                                "batch.num.messages": 1})
        for i in range(60):
            producer.produce("t", key=b"k", value=b"value %03d " % i + b"x" * 60)
            producer.flush(30)
        assert producer.flush(30) == 0
        end = latest_offset(broker.address)
        assert end == 60
        checkpoint = OffsetCheckpointFile(tmp_path / "logs" / RECOVERY_POINT_CHECKPOINT_FILE)
        wait_until(lambda: checkpoint.read().get(TP, 0) == end, timeout=30,
                   message="the recovery point checkpointed at the log end")
    finally:
        broker.kill()
    client = coordinator.connect(broker.coordinator_url, timeout=10)
    try:
        wait_until(lambda: not client.exists("/brokers/ids/1"), timeout=30,
                   message="the killed broker's session expired")
    finally:
        client.close()
    segments = sorted((tmp_path / "logs" / "t-0").glob("*.log"))
    assert len(segments) >= 3
    data = bytearray(segments[0].read_bytes())
    pos, size, *_ = validate_batches(data)[1]
    data[pos + size - 3] ^= 0xFF  # inside a record of the second batch: its CRC fails
    segments[0].write_bytes(bytes(data))

    again = start_broker(tmp_path, zookeeper_server, extra=SETTINGS, settings=settings)
    try:
        wait_for_leaders(again, "t", 1)
        assert latest_offset(again.address) == end
        assert sorted((tmp_path / "logs" / "t-0").glob("*.log")) == segments
        log = again.log()
        assert log.count("damage below the recovery point") == 1, log
        assert "cut" not in log and "Traceback" not in log
    finally:
        assert again.stop() == 0
