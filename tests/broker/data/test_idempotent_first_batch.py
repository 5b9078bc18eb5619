"""A new idempotent producer's first batch refused before it was appended, while its next
batch is already on its way: the next batch must not be taken, or librdkafka loses the first.

librdkafka takes a later batch's success as proof that the earlier batches of its producer and
partition were written, and reports them delivered without an offset (its "implicit ack",
rdkafka_request.c's rd_kafka_handle_idempotent_Produce_success). A producer id the partition
does not know (a new producer, and every producer after librdkafka bumps its epoch: the broker
hands out a new id then, as Kafka's does) is the one case in which the sequence check cannot
tell that earlier batches are missing, so the broker answers a batch of an unknown producer
that does not start at sequence 0 UNKNOWN_PRODUCER_ID (Kafka 0.11 to 2.4's answer); librdkafka
then takes a new producer id and sends both batches again, in order.

The first batch is refused by a test double on the broker's replica manager: it answers the
first produce of the topic NOT_ENOUGH_REPLICAS (what a leader answers, before appending, when its
ISR is short, as during a failover) after a short delay, so that librdkafka has sent its next
batch by then. The fault harness found the loss this way (a failover during a reassignment)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import pytest
from kio.schema.errors import ErrorCode as KioErrorCode

from coordinator.codecs import TopicPartition
from interbroker.errors import ErrorCode
from replication.protocol import ProduceResult
from replication.records import Record, decode_batch, encode_batch
from tests.broker.admin_fixtures import backend_url, topic_name, wait_serving
from tests.broker.cluster_harness import ClusterBroker
from tests.broker.harness import InProcessBroker
from tests.broker.protocol.test_apis import produce
from tests.broker.wire_client import RawClient
from tests.waiting import wait_until

pytestmark = pytest.mark.servers


@pytest.fixture(scope="module")
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[ClusterBroker]:
    b = ClusterBroker(backend_url(request, "memory"), tmp_path_factory.mktemp("first") / "logs")
    try:
        wait_serving(b)
        yield b
    finally:
        b.close()


def values(broker: ClusterBroker, tp: TopicPartition) -> list[bytes | None]:
    partition = broker.node.replica_manager.partition(tp)
    assert partition is not None
    data = partition.log.read(0, 1 << 24).records
    out, pos = [], 0
    while pos < len(data):
        batch = decode_batch(data, pos)
        out += [r.value for r in batch.records]
        pos += batch.header.size
    return out


class RefuseFirst:
    """The replica manager's ``produce`` for ``topic``: its first call answered
    NOT_ENOUGH_REPLICAS, nothing appended, ``delay`` seconds later; the rest passed on."""

    def __init__(self, broker: ClusterBroker, topic: str, delay: float) -> None:
        self.rm = broker.node.replica_manager
        self.real = self.rm.produce
        self.topic = topic
        self.delay = delay
        self.refused = threading.Event()

    def __call__(self, tp: TopicPartition, records: Any, acks: int,
                 timeout_ms: int | None = None, **more: Any) -> Future:
        if tp.topic != self.topic or self.refused.is_set():
            return self.real(tp, records, acks, timeout_ms, **more)
        self.refused.set()
        future: Future = Future()
        threading.Timer(self.delay, future.set_result,
                        [ProduceResult(error=ErrorCode.NOT_ENOUGH_REPLICAS)]).start()
        return future


def test_a_later_batch_does_not_acknowledge_a_refused_first_one(
        broker: ClusterBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    name = topic_name("first")
    broker.admin.create_topic(name, 1, 1)
    tp = TopicPartition(name, 0)
    wait_until(lambda: (p := broker.metadata.snapshot.partition(tp)) is not None
               and p.leader == broker.config.broker_id, timeout=30, message="a leader")
    refuse = RefuseFirst(broker, name, delay=1.0)
    monkeypatch.setattr(broker.node.replica_manager, "produce", refuse)
    producer = ck.Producer({"bootstrap.servers": f"127.0.0.1:{broker.port}",
                            "enable.idempotence": True, "acks": "all", "linger.ms": 0,
                            "retry.backoff.ms": 20})
    reports: dict[bytes, tuple[object, int | None]] = {}

    def on_delivery(err: ck.KafkaError | None, msg: ck.Message) -> None:
        reports[msg.value()] = (err, msg.offset())

    producer.produce(name, value=b"first", partition=0, on_delivery=on_delivery)
    wait_until(lambda: producer.poll(0.01) >= 0 and refuse.refused.is_set(), timeout=30,
               message="the first batch at the broker")
    producer.produce(name, value=b"second", partition=0, on_delivery=on_delivery)
    assert producer.flush(60) == 0
    stored = values(broker, tp)
    # every value reported delivered is in the log (no loss), and each once, in order
    delivered = [v for v, (err, _offset) in reports.items() if err is None]
    assert sorted(delivered) == [b"first", b"second"], reports
    assert stored == [b"first", b"second"], (stored, reports)
    assert {v: o for v, (_e, o) in reports.items()} == {b"first": 0, b"second": 1}


def test_the_answer_carries_the_log_start(tmp_path: Path) -> None:
    # Kafka's Java producer resends a batch answered UNKNOWN_PRODUCER_ID without a log start
    # unchanged (it waits for one); with it, the producer bumps its epoch and starts over.
    broker = InProcessBroker(tmp_path / "logs")
    try:
        broker.set_partition("t", 0)
        batches = [encode_batch([Record(key=None, value=b"plain", timestamp=1_000)]),
                   encode_batch([Record(key=None, value=b"late", timestamp=1_000)],
                                producer_id=77, producer_epoch=0, base_sequence=5)]
        with RawClient(broker.address) as client:
            answers = [client.call(produce(acks=-1, data={("t", 0): b})) for b in batches]
        assert [(p.error_code, p.base_offset, p.log_start_offset) for a in answers
                for r in a.responses for p in r.partition_responses] == [
            (KioErrorCode.none, 0, 0), (KioErrorCode.unknown_producer_id, -1, 0)]
    finally:
        broker.close()
