"""A compacted topic on three broker processes under librdkafka: a keyless record is refused
(INVALID_RECORD), the leader's cleaner compacts in the background, a consumer reads the latest
value of every key through the offset gaps (and the empty batch an idempotent producer leaves),
and a broker that was down while the leader compacted copies the compacted log: at the end the
three replicas read the same latest value per key at the same offsets."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import NewTopic

from broker.cluster import start_broker as launch_and_wait
from replication.log import Log
from tests.replication.test_cleaner_cluster import latest_per_key
from tests.servers import Server
from tests.waiting import wait_until

from .processes import TEST_SETTINGS, coordinator_url
from .test_cluster_clients import Trio, serving

pytestmark = pytest.mark.servers

SETTINGS = (TEST_SETTINGS + "replica.fetch.wait.max.ms=100\nreplica.lag.time.max.ms=10000\n"
            "log.cleaner.backoff.ms=100\n")


CONFIG = {"cleanup.policy": "compact", "segment.bytes": "4000",
          "min.cleanable.dirty.ratio": "0.01", "min.insync.replicas": "2"}


class CleaningTrio(Trio):
    def start(self, broker_id: int, more: str = ""):  # type: ignore[no-untyped-def]
        broker = launch_and_wait(self.root / f"broker-{broker_id}", broker_id, self.url,
                                 extra=SETTINGS + more)
        self.brokers[broker_id] = broker
        return broker


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
