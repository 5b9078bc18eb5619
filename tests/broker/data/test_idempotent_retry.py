"""An idempotent producer's retry is not a duplicate: the broker appended a batch, the
connection dropped before its answer reached the client, the client sent the batch again on a
new connection, and the log holds it once. Real clients (librdkafka, kafka-python) through a TCP
proxy that swallows the broker's answers and then cuts the connection; the broker advertises
the proxy, so every request of the client passes through it. On memory, ZooKeeper and etcd."""

from __future__ import annotations

from collections.abc import Iterator

import confluent_kafka as ck
import kafka
import pytest

from coordinator.codecs import TopicPartition
from replication.records import NO_PRODUCER_ID, decode_batch
from tests.broker.admin_fixtures import BACKENDS, backend_url, topic_name, wait_serving
from tests.broker.cluster_harness import ClusterBroker
from tests.proxy import TcpProxy
from tests.waiting import wait_until

pytestmark = pytest.mark.servers


@pytest.fixture(scope="module", params=BACKENDS)
def proxied(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[tuple[ClusterBroker, TcpProxy]]:
    proxy = TcpProxy("127.0.0.1", 1)  # its target is the broker, once bound
    broker = ClusterBroker(
        backend_url(request, request.param), tmp_path_factory.mktemp("retry") / "logs",
        extra=f"advertised.listeners=PLAINTEXT://127.0.0.1:{proxy.port}\n")
    proxy.target = ("127.0.0.1", broker.port)
    try:
        wait_serving(broker)
        yield broker, proxy
    finally:
        proxy.close()
        broker.close()


def stored(broker: ClusterBroker, tp: TopicPartition) -> list[tuple[int, bytes | None]]:
    """(producer id, value) of every record in the partition's log, in order."""
    data = broker.node.replica_manager.partition(tp).log.read(0, 1 << 24).records
    out, pos = [], 0
    while pos < len(data):
        batch = decode_batch(data, pos)
        out += [(batch.header.producer_id, r.value) for r in batch.records]
        pos += batch.header.size
    return out


def new_topic(broker: ClusterBroker) -> TopicPartition:
    name = topic_name("retry")
    broker.admin.create_topic(name, 1, 1)
    tp = TopicPartition(name, 0)
    wait_until(lambda: (p := broker.metadata.snapshot.partition(tp)) is not None
               and p.leader == broker.config.broker_id, timeout=30, message="a leader")
    return tp


def answer_lost_then_cut(broker: ClusterBroker, proxy: TcpProxy, tp: TopicPartition,
                         log_end_before: int) -> None:
    """Once the broker has appended the batch sent while answers were swallowed, cut."""
    log = broker.node.replica_manager.partition(tp).log
    wait_until(lambda: log.log_end_offset > log_end_before, timeout=30,
               message="the broker appending the batch whose answer is lost")
    proxy.cut()


def test_librdkafka_retry_after_a_lost_answer_is_stored_once(
        proxied: tuple[ClusterBroker, TcpProxy]) -> None:
    broker, proxy = proxied
    tp = new_topic(broker)
    producer = ck.Producer({"bootstrap.servers": proxy.address, "enable.idempotence": True,
                            "acks": "all", "linger.ms": 0, "retry.backoff.ms": 20,
                            "reconnect.backoff.ms": 20})
    delivered: list[tuple[object, int]] = []

    def on_delivery(err: ck.KafkaError | None, msg: ck.Message) -> None:
        delivered.append((err, msg.offset()))

    producer.produce(tp.topic, value=b"first", partition=0, on_delivery=on_delivery)
    assert producer.flush(30) == 0
    proxy.swallow_replies()
    producer.produce(tp.topic, value=b"second", partition=0, on_delivery=on_delivery)
    producer.poll(0)
    answer_lost_then_cut(broker, proxy, tp, 1)
    producer.produce(tp.topic, value=b"third", partition=0, on_delivery=on_delivery)
    assert producer.flush(60) == 0
    assert delivered == [(None, 0), (None, 1), (None, 2)]
    records = stored(broker, tp)
    assert [v for _pid, v in records] == [b"first", b"second", b"third"]
    assert all(pid != NO_PRODUCER_ID for pid, _v in records)  # idempotent batches


def test_kafka_python_retry_after_a_lost_answer_is_stored_once(
        proxied: tuple[ClusterBroker, TcpProxy]) -> None:
    broker, proxy = proxied
    tp = new_topic(broker)
    producer = kafka.KafkaProducer(bootstrap_servers=proxy.address, linger_ms=0,
                                   retry_backoff_ms=20, reconnect_backoff_ms=20)
    try:
        assert producer._transaction_manager is not None  # idempotent by default
        assert producer.send(tp.topic, value=b"first", partition=0).get(30).offset == 0
        proxy.swallow_replies()
        second = producer.send(tp.topic, value=b"second", partition=0)
        answer_lost_then_cut(broker, proxy, tp, 1)
        third = producer.send(tp.topic, value=b"third", partition=0)
        assert (second.get(60).offset, third.get(60).offset) == (1, 2)
    finally:
        producer.close(10)
    records = stored(broker, tp)
    assert [v for _pid, v in records] == [b"first", b"second", b"third"]
    assert all(pid != NO_PRODUCER_ID for pid, _v in records)
