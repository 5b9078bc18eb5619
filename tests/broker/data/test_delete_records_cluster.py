"""DeleteRecords (what ``kafka-delete-records`` sends) on three broker processes, through
librdkafka's ``AdminClient.delete_records``: the answer's low watermark is the requested offset
once every replica's log start reached it, a consumer below it is out of range (and reset to
it), the records from it on are read intact, the segments wholly below it go on every broker,
and the log start survives the brokers' restart. -1 deletes up to the high watermark, an offset
above it is OFFSET_OUT_OF_RANGE, a compacted topic POLICY_VIOLATION, an internal topic
INVALID_TOPIC_EXCEPTION."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import NewTopic

from coordinator.codecs import TopicPartition as Tp
from replication.checkpoints import OffsetCheckpointFile
from tests.broker.processes import TEST_SETTINGS, coordinator_url
from tests.broker.wire_client import RawClient, request, request_module
from tests.servers import Server
from tests.waiting import wait_until

from .test_cluster_clients import Trio, serving

pytestmark = pytest.mark.servers

SETTINGS = TEST_SETTINGS + ("replica.fetch.wait.max.ms=100\nreplica.lag.time.max.ms=10000\n"
                            "log.retention.check.interval.ms=300\n")
SEGMENT_BYTES = 1200
"""About ten 100-byte records a segment, so the deletion spans several."""


class DeletingTrio(Trio):
    def settings(self) -> str:
        return SETTINGS

    def logs(self, broker_id: int) -> Path:
        return self.root / f"broker-{broker_id}" / "logs"

    def checkpointed_log_start(self, broker_id: int, topic: str) -> int | None:
        path = self.logs(broker_id) / "log-start-offset-checkpoint"
        return OffsetCheckpointFile(path).read().get(Tp(topic, 0)) if path.exists() else None

    def segment_bases(self, broker_id: int, topic: str) -> list[int]:
        return sorted(int(p.stem) for p in (self.logs(broker_id) / f"{topic}-0").glob("*.log"))


@pytest.fixture
def trio(zookeeper_server: Server, tmp_path: Path) -> Iterator[DeletingTrio]:
    with serving(DeletingTrio(coordinator_url(zookeeper_server), tmp_path, {})) as cluster:
        yield cluster


def create(trio: DeletingTrio, topic: str, **config: str) -> None:
    admin = trio.admin()
    future = admin.create_topics([NewTopic(topic, 1, 3, config={
        "min.insync.replicas": "2", "segment.bytes": str(SEGMENT_BYTES), **config})])[topic]
    assert future.result(30) is None
    wait_until(lambda: (state := trio.partition_state(topic).get(0)) is not None
               and state[0] >= 0 and len(state[1]) == 3, timeout=60,
               message=f"{topic} led with an ISR of three")


def produce(trio: DeletingTrio, topic: str, count: int) -> None:
    # one record a batch; idempotent, so that a record retried (a leader not yet serving the
    # new topic) keeps its place: the test reads the values back by offset
    producer = ck.Producer({"bootstrap.servers": trio.bootstrap, "acks": "all",
                            "linger.ms": 0, "batch.size": 150, "enable.idempotence": True})
    for i in range(count):
        producer.produce(topic, value=f"{i:03d}".encode() * 33, key=str(i).encode())
    assert producer.flush(60) == 0


def delete(trio: DeletingTrio, topic: str, offset: int) -> int:
    """The low watermark DeleteRecords answers (KafkaException for an error)."""
    admin = trio.admin()  # kept until answered: a dropped client cancels its requests
    futures = admin.delete_records([ck.TopicPartition(topic, 0, offset)],
                                   request_timeout=30, operation_timeout=30)
    return futures[ck.TopicPartition(topic, 0)].result(60).low_watermark


def watermarks(trio: DeletingTrio, topic: str) -> tuple[int, int]:
    consumer = ck.Consumer({"bootstrap.servers": trio.bootstrap, "group.id": "wm"})
    try:
        return consumer.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=30)
    finally:
        consumer.close()


def consume_from(trio: DeletingTrio, topic: str, offset: int, count: int) -> list[ck.Message]:
    consumer = ck.Consumer({"bootstrap.servers": trio.bootstrap, "group.id": f"g-{offset}",
                            "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.assign([ck.TopicPartition(topic, 0, offset)])
        got: list[ck.Message] = []
        wait_until(lambda: got.extend(m for m in consumer.consume(count, 1)
                                      if m.error() is None) or len(got) >= count,
                   timeout=60, message=f"{count} records of {topic}")
        return got
    finally:
        consumer.close()


def raw_fetch_error(trio: DeletingTrio, topic: str, offset: int) -> int:
    """The error a consumer's Fetch at ``offset`` gets from the partition's leader."""
    leader = trio.partition_state(topic)[0][0]
    m = request_module(1, 12)
    with RawClient(trio.brokers[leader].address) as client:
        response = client.call(request(
            1, 12, replica_id=-1, max_wait=timedelta(0), min_bytes=1, max_bytes=1 << 20,
            isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=(),
            rack_id="", topics=(m.FetchTopic(topic=topic, partitions=(m.FetchPartition(
                partition=0, current_leader_epoch=-1, fetch_offset=offset,
                last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20),)),)))
    return int(response.responses[0].partitions[0].error_code)


def test_delete_records_moves_every_replicas_log_start(trio: DeletingTrio) -> None:
    create(trio, "dr")
    produce(trio, "dr", 100)
    assert watermarks(trio, "dr") == (0, 100)

    assert delete(trio, "dr", 40) == 40  # the low watermark: every replica starts at 40 now

    assert watermarks(trio, "dr") == (40, 100)  # ListOffsets earliest
    assert raw_fetch_error(trio, "dr", 0) == 1  # OFFSET_OUT_OF_RANGE
    assert raw_fetch_error(trio, "dr", 40) == 0
    records = consume_from(trio, "dr", 0, 60)  # reset to the log start
    assert [m.offset() for m in records] == list(range(40, 100))
    assert [m.value() for m in records] == [f"{i:03d}".encode() * 33 for i in range(40, 100)]

    for b in (1, 2, 3):  # checkpointed, and the segments wholly below 40 deleted, everywhere
        wait_until(lambda b=b: trio.checkpointed_log_start(b, "dr") == 40, timeout=30,
                   message=f"broker {b}'s checkpointed log start")
        wait_until(lambda b=b: (bases := trio.segment_bases(b, "dr"))[0] <= 40 and (
            len(bases) < 2 or bases[1] > 40), timeout=30,
            message=f"broker {b}'s segments below 40 deleted")

    for b in (1, 2, 3):  # stopped cleanly and started again, one by one
        assert trio.brokers[b].stop() == 0
        trio.start(b)
        wait_until(lambda: len(trio.partition_state("dr")[0][1]) == 3, timeout=60,
                   message="the ISR whole again")
    assert watermarks(trio, "dr") == (40, 100)
    assert {trio.checkpointed_log_start(b, "dr") for b in (1, 2, 3)} == {40}


def test_delete_records_errors_and_the_high_watermark(trio: DeletingTrio) -> None:
    create(trio, "hw")
    create(trio, "compacted", **{"cleanup.policy": "compact"})
    create(trio, "both", **{"cleanup.policy": "compact,delete"})
    for topic in ("hw", "compacted", "both"):
        produce(trio, topic, 20)

    with pytest.raises(ck.KafkaException) as above:
        delete(trio, "hw", 21)
    assert above.value.args[0].code() == ck.KafkaError.OFFSET_OUT_OF_RANGE
    with pytest.raises(ck.KafkaException) as compacted:
        delete(trio, "compacted", 5)
    assert compacted.value.args[0].code() == ck.KafkaError.POLICY_VIOLATION
    assert delete(trio, "both", 5) == 5

    assert delete(trio, "hw", ck.OFFSET_END) == 20  # -1: up to the high watermark
    assert watermarks(trio, "hw") == (20, 20)
    produce(trio, "hw", 5)
    assert [m.offset() for m in consume_from(trio, "hw", 0, 5)] == list(range(20, 25))
