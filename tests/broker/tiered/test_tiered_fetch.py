"""Consumer fetches of a tiered partition below its local log start, over the wire: served
from remote storage through the remote offset index, byte for byte (from the filesystem store
as a slice of the remote file, sent with sendfile), on the remote log manager's reader threads,
so a slow remote store holds up neither the event loop nor another connection's fetch; a
failing remote store answers KAFKA_STORAGE_ERROR (retriable). ListOffsets by time below the
local log start is answered from the remote time index, as asynchronously, and the max
timestamp (-3) counts the remote segments."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka as ck
import pytest
from kio.schema.errors import ErrorCode

from coordinator.codecs import TopicPartition
from replication.tiered import (
    FileSystemRemoteStorageManager,
    RemoteLogConfig,
    RemoteStorageError,
    kafka_uuid_text,
)
from tests.broker.harness import InProcessBroker
from tests.broker.protocol.test_apis import fetch, list_offsets, records
from tests.broker.wire_client import RawClient

TOPIC_ID = kafka_uuid_text(uuid.uuid4())
TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)
GATE = threading.Event()
FAIL = threading.Event()


class SlowStorage(FileSystemRemoteStorageManager):
    """The filesystem store, whose segment reads wait for ``GATE`` (or fail with ``FAIL``)."""

    def __init__(self, url: str, *, broker_id: int) -> None:
        super().__init__(Path(url[len("file://"):]))

    def fetch_log_segment(self, metadata, start_position, end_position=None):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
        _wait_or_fail()
        return super().fetch_log_segment(metadata, start_position, end_position)

    def open_log_segment(self, metadata):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
        """The zero-copy read's way in (LocalSegmentFiles): gated alike."""
        _wait_or_fail()
        return super().open_log_segment(metadata)


def _wait_or_fail() -> None:
    assert GATE.wait(30)
    if FAIL.is_set():
        raise RemoteStorageError("the remote store is down")


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[InProcessBroker]:
    GATE.clear()
    FAIL.clear()
    remote = RemoteLogConfig(system_enable=True, storage_url=f"file://{tmp_path}/remote",
                             manager_class_name=f"{__name__}:SlowStorage",
                             task_interval_ms=3_600_000)
    b = InProcessBroker(tmp_path / "logs", remote_log=remote)
    try:
        yield b
    finally:
        GATE.set()
        b.close()


def test_a_slow_remote_read_blocks_no_other_fetch(broker: InProcessBroker) -> None:
    rm = broker.replica_manager
    rm.update_topic_config("t", {"remote.storage.enable": "true", "segment.bytes": "300",
                                 "local.retention.bytes": "0", "retention.ms": "-1"})
    broker.set_partition("t", 0, topic_id=TOPIC_ID)
    broker.set_partition("t", 1, topic_id=TOPIC_ID)
    sent = []
    for i in range(12):
        batch = records(2, timestamp=1_000 + i, value=b"%03d" % i * 20)
        sent.append(batch)
        rm.produce(TP0, batch, 1).result(5)
    rm.produce(TP1, records(1), 1).result(5)
    assert rm.remote is not None
    rm.remote.run_once()
    assert rm.logs.cleanup_logs() > 0
    p0 = rm.partition(TP0)
    assert p0 is not None and p0.log.log_start_offset == 0
    local = p0.log.local_log_start_offset
    assert local > 2

    with RawClient(broker.address) as slow, RawClient(broker.address) as quick:
        correlation = slow.send(fetch(12, partitions=[(0, 0)], max_bytes=1 << 20))
        # The remote read waits on the gate; another connection's fetch is answered meanwhile.
        answer = quick.call(fetch(12, partitions=[(1, 0)]))
        assert answer.responses[0].partitions[0].error_code == ErrorCode.none
        assert answer.responses[0].partitions[0].records
        assert [p.offset for p in quick.call(list_offsets(9, [-2, -4])).topics[0].partitions
                ] == [0, local]
        GATE.set()
        got, response = slow.receive(1, 12)
    assert got == correlation
    part = response.responses[0].partitions[0]
    assert part.error_code == ErrorCode.none and part.log_start_offset == 0
    # The first remote segment's batches, exactly as produced: the same bytes past the base
    # offset, length and leader epoch the leader stamped (the CRC covers the rest).
    data = bytes(part.records)
    size = len(sent[0])
    assert data and len(data) % size == 0 and len(data) // size * 2 <= local
    for i in range(len(data) // size):
        batch = data[i * size:(i + 1) * size]
        assert int.from_bytes(batch[:8], "big") == 2 * i
        assert batch[16:] == sent[i][16:], i


def test_a_failing_remote_store_answers_a_retriable_error(broker: InProcessBroker) -> None:
    rm = broker.replica_manager
    rm.update_topic_config("t", {"remote.storage.enable": "true", "segment.bytes": "300",
                                 "local.retention.bytes": "0", "retention.ms": "-1"})
    broker.set_partition("t", 0, topic_id=TOPIC_ID)
    for i in range(8):
        rm.produce(TP0, records(2, timestamp=1_000 + i), 1).result(5)
    assert rm.remote is not None
    rm.remote.run_once()
    rm.logs.cleanup_logs()
    FAIL.set()
    GATE.set()
    with RawClient(broker.address) as client:
        part = client.call(fetch(12, partitions=[(0, 0)])).responses[0].partitions[0]
        assert part.error_code == ErrorCode.kafka_storage_error
        by_time, max_time = client.call(list_offsets(9, [1_000, -3])).topics[0].partitions
    assert (by_time.error_code, by_time.offset) == (ErrorCode.kafka_storage_error, -1)
    assert (max_time.error_code, max_time.offset) == (ErrorCode.kafka_storage_error, -1)


def test_megabytes_read_from_remote_storage_arrive_whole(broker: InProcessBroker) -> None:
    """A remote read of several MiB is bytes, not a file slice: the server writes it in
    pieces (see broker.server), and the client gets every byte in order."""
    rm = broker.replica_manager
    rm.update_topic_config("t", {"remote.storage.enable": "true",
                                 "segment.bytes": str(6 << 20), "local.retention.bytes": "0",
                                 "retention.ms": "-1"})
    broker.set_partition("t", 0, topic_id=TOPIC_ID)
    sent = [records(4, timestamp=1_000 + i, value=bytes([i]) * 100_000) for i in range(16)]
    for batch in sent:
        rm.produce(TP0, batch, 1).result(5)
    assert rm.remote is not None
    rm.remote.run_once()
    assert rm.logs.cleanup_logs() > 0
    GATE.set()
    with RawClient(broker.address) as client:
        part = client.call(fetch(12, partitions=[(0, 0)], max_bytes=16 << 20,
                                 partition_max_bytes=16 << 20)).responses[0].partitions[0]
    assert part.error_code == ErrorCode.none
    data = bytes(part.records)
    assert len(data) > 4 << 20
    size = len(sent[0])
    assert len(data) % size == 0
    for i in range(len(data) // size):
        batch = data[i * size:(i + 1) * size]
        assert int.from_bytes(batch[:8], "big") == 4 * i
        assert batch[16:] == sent[i][16:], i


def _tiered_batches(broker: InProcessBroker, count: int) -> list[int]:
    """``count`` batches of two records produced to t-0 (batch i: offsets 2i and 2i+1, at
    10,000 + 100 i ms and 1 ms later), the rolled segments copied and deleted locally; the
    records' timestamps in offset order."""
    rm = broker.replica_manager
    rm.update_topic_config("t", {"remote.storage.enable": "true", "segment.bytes": "300",
                                 "local.retention.bytes": "0", "retention.ms": "-1"})
    broker.set_partition("t", 0, topic_id=TOPIC_ID)
    for i in range(count):
        rm.produce(TP0, records(2, timestamp=10_000 + 100 * i), 1).result(5)
    assert rm.remote is not None
    rm.remote.run_once()
    assert rm.logs.cleanup_logs() > 0
    return [10_000 + 100 * i + r for i in range(count) for r in (0, 1)]


def test_offsets_for_times_below_the_local_log_start_come_from_remote_storage(
        broker: InProcessBroker) -> None:
    """A real client's offsets_for_times for every time around every record, the remote
    part and the local part and their boundary: the first record at or after the time asked.
    The local segments below the local log start are gone, so an answer there (or one record
    into a batch) can only come from the remote time and offset indexes."""
    GATE.set()
    stamps = _tiered_batches(broker, 12)
    p0 = broker.replica_manager.partition(TP0)
    assert p0 is not None
    local = p0.log.local_log_start_offset
    assert p0.log.log_start_offset == 0 and 4 <= local < len(stamps) - 2
    asked = sorted({t + d for t in stamps for d in (-1, 0)} | {stamps[-1] + 1})
    expected = [next((o for o, s in enumerate(stamps) if s >= t), -1) for t in asked]
    assert expected.count(local) == 2  # the boundary is asked about, from both sides
    consumer = ck.Consumer({"bootstrap.servers": f"127.0.0.1:{broker.port}",
                            "group.id": "unused", "enable.auto.commit": False})
    try:
        # one partition per request: the client keeps one time per partition
        found = [consumer.offsets_for_times([ck.TopicPartition("t", 0, t)], 10)[0]
                 for t in asked]
    finally:
        consumer.close()
    assert [(f.offset, f.error) for f in found] == [(o, None) for o in expected]


def test_a_slow_remote_search_by_time_blocks_no_other_request(
        broker: InProcessBroker) -> None:
    stamps = _tiered_batches(broker, 12)
    with RawClient(broker.address) as slow, RawClient(broker.address) as quick:
        correlation = slow.send(list_offsets(9, [stamps[1]]))
        # The remote search waits on the gate; another connection is answered meanwhile.
        assert [p.offset for p in quick.call(list_offsets(9, [-2])).topics[0].partitions
                ] == [0]
        GATE.set()
        got, response = slow.receive(2, 9)
    assert got == correlation
    (part,) = response.topics[0].partitions
    assert (part.error_code, part.timestamp, part.offset, part.leader_epoch) == (
        ErrorCode.none, stamps[1], 1, 0)


def test_a_fetch_reads_every_partition_below_its_local_log_start(
        broker: InProcessBroker) -> None:
    """Two partitions below their local log starts and a local one in one fetch: both remote
    ones are served (in parallel, while another connection is answered), byte for byte, and
    the request's byte budget is shared in order over them."""
    rm = broker.replica_manager
    rm.update_topic_config("t", {"remote.storage.enable": "true", "segment.bytes": "700",
                                 "local.retention.bytes": "0", "retention.ms": "-1"})
    sent: dict[int, list[bytes]] = {0: [], 1: []}
    for p in (0, 1, 2):
        broker.set_partition("t", p, topic_id=TOPIC_ID)
    for i in range(12):
        for p in (0, 1):
            sent[p].append(records(2, timestamp=1_000 + i, value=b"%d-%03d" % (p, i) * 12))
            rm.produce(TopicPartition("t", p), sent[p][-1], 1).result(5)
    rm.produce(TopicPartition("t", 2), records(1), 1).result(5)
    assert rm.remote is not None
    rm.remote.run_once()
    assert rm.logs.cleanup_logs() > 0
    for p in (0, 1):
        tiered = rm.partition(TopicPartition("t", p))
        assert tiered is not None and tiered.log.local_log_start_offset > 2
    size = len(sent[0][0])  # three batches a segment

    def batches(part: object) -> list[bytes]:
        data = bytes(part.records)  # type: ignore[attr-defined]
        assert len(data) % size == 0
        return [data[i:i + size] for i in range(0, len(data), size)]

    def check(part: object, p: int, count: int) -> None:
        assert part.error_code == ErrorCode.none  # type: ignore[attr-defined]
        got = batches(part)
        assert len(got) == count
        for i, batch in enumerate(got):
            assert int.from_bytes(batch[:8], "big") == 2 * i
            assert batch[16:] == sent[p][i][16:], (p, i)

    with RawClient(broker.address) as slow, RawClient(broker.address) as quick:
        correlation = slow.send(fetch(12, partitions=[(0, 0), (2, 0), (1, 0)],
                                      max_bytes=1 << 20, partition_max_bytes=1 << 16))
        answer = quick.call(fetch(12, partitions=[(2, 0)]))
        assert answer.responses[0].partitions[0].records
        GATE.set()
        got, response = slow.receive(1, 12)
        assert got == correlation
        first, local, second = response.responses[0].partitions
        assert [first.partition_index, local.partition_index, second.partition_index] == [
            0, 2, 1]
        check(first, 0, len(batches(first)))
        check(second, 1, len(batches(second)))
        assert len(batches(first)) == len(batches(second)) == 3  # a remote segment each
        assert local.error_code == ErrorCode.none and local.records
        # The budget in order: two batches to the first, the one left to the second.
        shared = quick.call(fetch(12, partitions=[(1, 0), (0, 0)], max_bytes=3 * size,
                                  partition_max_bytes=2 * size))
        first, second = shared.responses[0].partitions
        check(first, 1, 2)
        check(second, 0, 1)
        # Half a batch left: nothing for the second (only the first gets one regardless).
        tight = quick.call(fetch(12, partitions=[(1, 0), (0, 0)], max_bytes=5 * size // 2,
                                 partition_max_bytes=2 * size))
        first, second = tight.responses[0].partitions
        check(first, 1, 2)
        check(second, 0, 0)


def test_the_max_timestamp_counts_the_remote_part(broker: InProcessBroker) -> None:
    """ListOffsets MAX_TIMESTAMP (-3) of a tiered partition: the first record with the largest
    timestamp in the whole log, remote segments included (the local segments holding them are
    gone), from the log start on; a local record wins only with a larger timestamp."""
    GATE.set()
    rm = broker.replica_manager
    rm.update_topic_config("t", {"remote.storage.enable": "true", "segment.bytes": "300",
                                 "local.retention.bytes": "0", "retention.ms": "-1"})
    broker.set_partition("t", 0, topic_id=TOPIC_ID)
    # Batch i: offsets 2i and 2i+1, 1 ms apart; two batches a segment. The latest records are
    # in the remote part: batch 1 (segment 0-3), then batches 3 and 4 (segments 4-7, 8-11).
    firsts = [10_000 + 100 * i for i in range(12)]
    firsts[1], firsts[3], firsts[4] = 90_000, 50_000, 50_000
    for ts in firsts:
        rm.produce(TP0, records(2, timestamp=ts), 1).result(5)
    assert rm.remote is not None
    rm.remote.run_once()
    assert rm.logs.cleanup_logs() > 0
    p0 = rm.partition(TP0)
    assert p0 is not None
    assert p0.log.log_start_offset == 0 and p0.log.local_log_start_offset > 11

    def max_timestamp() -> tuple[ErrorCode, int, int, int]:
        with RawClient(broker.address) as client:
            (part,) = client.call(list_offsets(9, [-3])).topics[0].partitions
        return part.error_code, part.timestamp, part.offset, part.leader_epoch

    assert max_timestamp() == (ErrorCode.none, 90_001, 3, 0)
    # Once the log start passes the first segment: the first of the two records at 50,001.
    assert p0.log.maybe_increment_log_start_offset(4)
    assert max_timestamp() == (ErrorCode.none, 50_001, 7, 0)
    # A local record as late: the remote one, at the lower offset, stays the answer.
    rm.produce(TP0, records(1, timestamp=50_001), 1).result(5)
    assert max_timestamp() == (ErrorCode.none, 50_001, 7, 0)
    rm.produce(TP0, records(1, timestamp=50_002), 1).result(5)
    assert max_timestamp() == (ErrorCode.none, 50_002, 25, 0)


def test_remote_retention_moves_the_earliest_offset_to_one_a_fetch_serves(
        broker: InProcessBroker) -> None:
    """Remote retention deletes the old segments while the local log still holds them: the
    pass that deletes moves the log start (Kafka's rule), so once local retention has run too,
    ListOffsets' EARLIEST still names an offset a fetch serves, and a consumer resetting to
    earliest reads from there instead of looping on OFFSET_OUT_OF_RANGE."""
    GATE.set()
    rm = broker.replica_manager
    config = {"remote.storage.enable": "true", "segment.bytes": "300", "retention.ms": "-1"}
    rm.update_topic_config("t", config)
    broker.set_partition("t", 0, topic_id=TOPIC_ID)
    now = int(time.time() * 1000)
    for i in range(12):  # batch i: offsets 2i, 2i+1; the first six are a day old
        rm.produce(TP0, records(2, timestamp=now - (86_400_000 if i < 6 else 0)), 1).result(5)
    assert rm.remote is not None
    rm.remote.run_once()  # copies every rolled segment; nothing expires yet
    p0 = rm.partition(TP0)
    assert p0 is not None and p0.log.local_log_start_offset == 0
    rm.update_topic_config("t", {**config, "retention.ms": "3600000"})
    rm.remote.run_once()  # remote retention: the day-old segments go
    rm.logs.cleanup_logs()  # and local retention, on its own timer
    with RawClient(broker.address) as client:
        answer = client.call(list_offsets(7, [-2]))
        earliest = answer.topics[0].partitions[0].offset
        got = client.call(fetch(12, partitions=[(0, earliest)])).responses[0].partitions[0]
        assert got.error_code == ErrorCode.none
        assert int.from_bytes(bytes(got.records)[:8], "big") == earliest
        assert earliest == p0.log.log_start_offset == 12
    # A consumer at offset 0, gone: OFFSET_OUT_OF_RANGE resets it to the earliest offset.
    consumer = ck.Consumer({"bootstrap.servers": f"127.0.0.1:{broker.port}",
                            "group.id": "unused", "enable.auto.commit": False,
                            "auto.offset.reset": "earliest"})
    offsets: list[int] = []
    try:
        consumer.assign([ck.TopicPartition("t", 0, 0)])
        deadline = time.monotonic() + 30
        while len(offsets) < 24 - earliest and time.monotonic() < deadline:
            for msg in consumer.consume(100, 0.5):
                assert msg.error() is None, msg.error()
                offsets.append(msg.offset())
    finally:
        consumer.close()
    assert offsets == list(range(earliest, 24))


def test_a_segment_tiered_away_during_a_local_read_is_read_from_remote_storage(
        broker: InProcessBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fetch found the offset in the local log, and before it read there the segment was
    copied and deleted locally (local.retention.bytes 0): the read is made from remote
    storage, as Kafka's broker does, not answered OFFSET_OUT_OF_RANGE (a consumer would reset
    to the log end and skip the rest). The race is pinned by handing the fetch the
    partition's status from before the local deletion, once."""
    GATE.set()
    rm = broker.replica_manager
    rm.update_topic_config("t", {"remote.storage.enable": "true", "segment.bytes": "300",
                                 "local.retention.bytes": "0", "retention.ms": "-1"})
    broker.set_partition("t", 0, topic_id=TOPIC_ID)
    sent = []
    for i in range(12):
        sent.append(records(2, timestamp=1_000 + i, value=b"%03d" % i * 20))
        rm.produce(TP0, sent[-1], 1).result(5)
    p0 = rm.partition(TP0)
    assert p0 is not None
    before = p0.status()
    assert before.local_log_start_offset == 0
    assert rm.remote is not None
    rm.remote.run_once()
    assert rm.logs.cleanup_logs() > 0 and p0.log.local_log_start_offset > 2
    real, stale = p0.status, [before]
    monkeypatch.setattr(p0, "status", lambda: stale.pop() if stale else real())
    with RawClient(broker.address) as client:
        answer = client.call(fetch(12, partitions=[(0, 0)], max_bytes=1 << 20))
    assert not stale  # the fetch did see the old status
    part = answer.responses[0].partitions[0]
    assert part.error_code == ErrorCode.none
    data = bytes(part.records)
    assert data[:8] == (0).to_bytes(8, "big") and data[16:len(sent[0])] == sent[0][16:]
