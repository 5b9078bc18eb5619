"""A compacted topic on three broker processes under librdkafka: a keyless record is refused
(INVALID_RECORD), the leader's cleaner compacts in the background, a consumer reads the latest
value of every key through the offset gaps (and the empty batch an idempotent producer leaves),
and a broker that was down while the leader compacted copies the compacted log: at the end the
three replicas read the same latest value per key at the same offsets. The same with batches
compressed by each of Kafka's codecs, written and read by librdkafka and kafka-python."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka as ck
import kafka
import pytest
from confluent_kafka.admin import NewTopic

from replication.compression import is_xerial
from replication.log import Log
from replication.records import RECORDS_OFFSET, decode_batch
from tests.broker.processes import TEST_SETTINGS, coordinator_url
from tests.replication.test_cleaner_cluster import latest_per_key
from tests.servers import Server
from tests.waiting import wait_until

from .test_cluster_clients import Trio, serving

pytestmark = pytest.mark.servers

SETTINGS = (TEST_SETTINGS + "replica.fetch.wait.max.ms=100\nreplica.lag.time.max.ms=10000\n"
            "log.cleaner.backoff.ms=100\n")


CONFIG = {"cleanup.policy": "compact", "segment.bytes": "4000",
          "min.cleanable.dirty.ratio": "0.01", "min.insync.replicas": "2"}


class CleaningTrio(Trio):
    def settings(self) -> str:
        return SETTINGS


@pytest.fixture
def trio(zookeeper_server: Server, tmp_path: Path) -> Iterator[CleaningTrio]:
    with serving(CleaningTrio(coordinator_url(zookeeper_server), tmp_path, {}),
                 only_running=True) as cluster:
        yield cluster


def consume_all(bootstrap: str, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                            "enable.auto.commit": False})
    consumer.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    got: list[tuple[int, bytes | None, bytes | None]] = []
    idle_until = time.monotonic() + 3
    try:
        while time.monotonic() < idle_until:
            for msg in consumer.consume(500, 0.5):
                assert msg.error() is None, msg.error()
                got.append((msg.offset(), msg.key(), msg.value()))
                idle_until = time.monotonic() + 3
    finally:
        consumer.close()
    return got


def latest_in(path: Path) -> tuple[dict[bytes | None, tuple[int, bytes | None]], list[int]]:
    log = Log.open(path)
    try:
        return latest_per_key(log)
    finally:
        log.close()


def test_a_compacted_topic_on_broker_processes(trio: CleaningTrio) -> None:
    topic = "compacted"
    admin = trio.admin()  # kept while its request runs: a dropped client cancels it
    future = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3,
                                           config=CONFIG)])[topic]
    assert future.result(30) is None
    wait_until(lambda: len(trio.partition_state(topic)) == 1 and all(
        leader >= 0 and len(isr) == 3 for leader, isr in trio.partition_state(topic).values()),
        timeout=30, message="a leader and a full ISR")
    producer = ck.Producer({"bootstrap.servers": trio.bootstrap, "acks": "all",
                            "enable.idempotence": True, "linger.ms": 5})
    errors: list[ck.KafkaError] = []
    producer.produce(topic, value=b"no key", on_delivery=lambda e, m: errors.append(e))
    producer.flush(30)
    assert errors and errors[0] is not None and errors[0].code() == ck.KafkaError.INVALID_RECORD

    state = trio.partition_state(topic)
    leader = state[0][0]
    late = next(b for b in (1, 2, 3) if b != leader)
    assert trio.brokers[late].stop() == 0
    producer = ck.Producer({"bootstrap.servers": trio.bootstrap, "acks": "all",
                            "enable.idempotence": True, "linger.ms": 0,
                            "batch.num.messages": 10})
    failed: list[ck.KafkaError] = []
    for i in range(400):
        producer.produce(topic, key=b"k%d" % (i % 10), value=b"v%d " % i * 10,
                         on_delivery=lambda e, m: failed.append(e) if e else None)
        if i % 50 == 49:
            producer.flush(30)
    assert producer.flush(30) == 0 and failed == []
    expected = {b"k%d" % k: b"v%d " % (390 + k) * 10 for k in range(10)}
    # The leader compacts in the background: a consumer soon reads few records, the latest
    # value of each key among them, through the gaps.
    def compacted() -> bool:
        got = consume_all(trio.bootstrap, topic)
        latest = {key: value for _o, key, value in got}
        return len(got) < 200 and latest == expected
    wait_until(compacted, 60, message="the leader compacts and consumers read through it")

    # Its own cleaner off, whatever the late broker's log lacks, it copied from the leader.
    trio.start(late, "log.cleaner.enable=false\n")
    wait_until(lambda: len(trio.partition_state(topic)[0][1]) == 3, 60,
               message="the late broker catches up and rejoins the ISR")
    for b in (1, 2, 3):
        assert trio.brokers[b].stop() == 0
    found = {b: latest_in(trio.root / f"broker-{b}" / "logs" / f"{topic}-0") for b in (1, 2, 3)}
    for b, (latest, _offsets) in found.items():
        assert {k: v for k, (_o, v) in latest.items()} == expected, f"broker {b}"
        assert latest == found[leader][0], f"broker {b} keeps the leader's offsets"
    offsets = found[late][1]
    assert offsets[-1] == 399 and len(offsets) < 200, "the late broker copied the leader's gaps"


CODECS = ("gzip", "snappy", "lz4", "zstd")


def kafka_python_consume(bootstrap: str, topic: str) -> list[tuple[int, bytes | None, bytes]]:
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                   group_id=None)
    tp = kafka.TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    got: list[tuple[int, bytes | None, bytes]] = []
    idle_until = time.monotonic() + 3
    try:
        while time.monotonic() < idle_until:
            for records in consumer.poll(timeout_ms=500).values():
                for r in records:
                    got.append((r.offset, r.key, r.value))
                    idle_until = time.monotonic() + 3
    finally:
        consumer.close()
    return got


def last_per_key(got: list[tuple[int, bytes | None, bytes | None]]
                 ) -> dict[bytes | None, tuple[int, bytes | None]]:
    """The last (offset, value) read per key: the latest, read through an uncleaned head
    too."""
    return {key: (offset, value) for offset, key, value in got}


Latest = dict[bytes | None, tuple[int, bytes | None]]


def write_compressed(bootstrap: str, codec: str, topic: str) -> Latest:
    """A keyless produce refused, then keyed writes by librdkafka and kafka-python, compressed
    with ``codec``; returns the last (offset, value) acknowledged per key."""
    config = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
              "enable.idempotence": True, "compression.type": codec}
    producer = ck.Producer(config)
    errors: list[ck.KafkaError] = []
    for _ in range(5):  # one batch that compresses well, so that librdkafka compresses it
        producer.produce(topic, value=b"no key " * 50, on_delivery=lambda e, m: errors.append(e))
    producer.flush(30)
    assert len(errors) == 5 and all(e is not None for e in errors), codec
    assert {e.code() for e in errors} == {ck.KafkaError.INVALID_RECORD}, (codec, errors)

    acked: Latest = {}
    failed: list[ck.KafkaError] = []

    def delivered(err: ck.KafkaError | None, msg: ck.Message) -> None:
        if err is not None:
            failed.append(err)
        else:
            acked[msg.key()] = (msg.offset(), msg.value())

    producer = ck.Producer({**config, "batch.num.messages": 10})
    for i in range(240):
        value = b"%s %d %s" % (codec.encode(), i, os.urandom(16).hex().encode()) * 3
        producer.produce(topic, key=b"k%d" % (i % 13), value=value, on_delivery=delivered)
        if i % 40 == 39:
            producer.flush(30)
    assert producer.flush(30) == 0 and failed == []
    # kafka-python frames snappy as Kafka's Java clients do (xerial), and rewrites only some
    # keys, so batches of both producers keep some records and lose others. (Both clients send
    # a batch uncompressed when compressing does not shrink it: values repeat to make it.)
    python_producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, acks="all",
                                          compression_type=codec, linger_ms=5, batch_size=1000)
    sent = []
    for i in range(60):
        key, value = b"k%d" % (i % 6), b"py %d %s" % (i, os.urandom(16).hex().encode()) * 3
        sent.append((key, value, python_producer.send(topic, key=key, value=value)))
    python_producer.flush(30)
    for key, value, future in sent:
        acked[key] = (future.get(30).offset, value)
    python_producer.close()
    return acked


@pytest.mark.long
def test_compressed_compacted_topics_on_broker_processes(trio: CleaningTrio) -> None:
    """A compacted topic per codec, written by librdkafka (raw snappy) and kafka-python (xerial
    snappy), compressed batches and all: a keyless compressed produce is refused with
    INVALID_RECORD; the leader's cleaner compacts the compressed batches, rebuilding in their
    codec those that keep some records; librdkafka and kafka-python consumers read the latest
    value of every key at the offset it was acknowledged at; the stored batches inflate.

    In the long tier (tests/conftest.py): every run has the compacted topic above on these
    processes, and compressed batches of every codec compacted by the cleaner itself
    (tests/replication/test_cleaner.py)."""
    topics = {codec: f"compacted-{codec}" for codec in CODECS}
    admin = trio.admin()
    futures = admin.create_topics([NewTopic(t, num_partitions=1, replication_factor=3,
                                            config={**CONFIG, "segment.bytes": "2000"})
                                   for t in topics.values()])
    for future in futures.values():
        assert future.result(30) is None
    wait_until(lambda: all(len(s := trio.partition_state(t)) == 1 and s[0][0] >= 0
                           and len(s[0][1]) == 3 for t in topics.values()),
               timeout=30, message="a leader and a full ISR for every topic")
    expected = {codec: write_compressed(trio.bootstrap, codec, topic)
                for codec, topic in topics.items()}

    def matches(codec: str, got: list[tuple[int, bytes | None, bytes | None]]) -> bool:
        return last_per_key(got) == expected[codec]

    for codec, topic in topics.items():
        def compacted(codec: str = codec, topic: str = topic) -> bool:
            got = consume_all(trio.bootstrap, topic)
            return len(got) < 150 and matches(codec, got)
        wait_until(compacted, 90, message=f"the {codec} topic compacts")
        got = kafka_python_consume(trio.bootstrap, topic)
        assert matches(codec, got), f"kafka-python reads the {codec} topic compacted"

    leader = {codec: trio.partition_state(t)[0][0] for codec, t in topics.items()}
    for b in (1, 2, 3):
        assert trio.brokers[b].stop() == 0
    for codec, topic in topics.items():
        log = Log.open(trio.root / f"broker-{leader[codec]}" / "logs" / f"{topic}-0")
        try:
            headers, framings = [], set()
            offset = log.log_start_offset
            while offset < log.log_end_offset:
                got = log.read(offset, 1 << 20)
                assert got.records
                pos = 0
                while pos < len(got.records):
                    batch = decode_batch(got.records, pos)  # inflates what the clients sent
                    h = batch.header
                    headers.append(h)
                    if h.compression == 2:
                        framings.add(is_xerial(got.records[pos + RECORDS_OFFSET : pos + h.size]))
                    pos += h.size
                offset = got.next_offset
        finally:
            log.close()
        number = CODECS.index(codec) + 1
        assert {h.compression for h in headers if h.records_count} == {number}, codec
        assert any(h.compression and 0 < h.records_count < h.last_offset_delta + 1
                   for h in headers), f"some {codec} batch was rebuilt with fewer records"
        if codec == "snappy":
            assert framings == {True, False}, "librdkafka's raw and kafka-python's xerial"
