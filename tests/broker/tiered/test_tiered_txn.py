"""Transactions in a tiered topic, on a real broker process under librdkafka: each copied segment
takes its ``.txnindex`` to remote storage, and a read_committed consumer reading from offset 0
once the segments are gone locally is told of the aborted transactions of the remote segments
(and of the local ones after them), so it sees no aborted record; read_uncommitted sees them
all."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from replication.txn_index import decode_entries
from tests.broker.processes import BrokerProcess, start_broker
from tests.broker.protocol.test_apis import list_offsets
from tests.broker.wire_client import RawClient
from tests.servers import Server
from tests.waiting import wait_until

pytestmark = pytest.mark.servers

TOPIC = "t"  # the name test_apis.list_offsets asks about
TRANSACTIONS = 12
"""Transactions of three records each; the odd ones are aborted."""


@pytest.fixture
def broker(zookeeper_server: Server, tmp_path: Path) -> Iterator[BrokerProcess]:
    b = start_broker(tmp_path / "broker", zookeeper_server, extra=(
        "transaction.state.log.num.partitions=1\n"
        "transaction.state.log.replication.factor=1\n"
        "transaction.state.log.min.isr=1\n"
        "remote.log.storage.system.enable=true\n"
        f"remote.log.storage.url=file://{tmp_path / 'remote'}\n"
        "remote.log.manager.task.interval.ms=200\n"
        "log.retention.check.interval.ms=200\n"))
    try:
        yield b
    finally:
        assert b.stop() == 0, b.log()[-3000:]


def local_log_start(broker: BrokerProcess) -> int:
    with RawClient(broker.address) as client:
        answer = client.call(list_offsets(8, [-4]))
    return int(answer.topics[0].partitions[0].offset)


def read_from_zero(broker: BrokerProcess, isolation: str, last: bytes) -> list[bytes]:
    """The values of TOPIC from offset 0 until ``last`` is read, in small fetches (each
    within one segment)."""
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": uuid.uuid4().hex,
                            "enable.auto.commit": False, "isolation.level": isolation,
                            "message.max.bytes": 2000, "fetch.max.bytes": 2000,
                            "max.partition.fetch.bytes": 1000})
    consumer.assign([ck.TopicPartition(TOPIC, 0, ck.OFFSET_BEGINNING)])
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while last not in values and time.monotonic() < deadline:
            for msg in consumer.consume(100, 0.5):
                assert msg.error() is None, msg.error()
                values.append(msg.value())
    finally:
        consumer.close()
    assert last in values, values
    return values


def test_a_read_committed_read_from_remote_storage_skips_aborted_records(
        broker: BrokerProcess, tmp_path: Path) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    config = {"remote.storage.enable": "true", "segment.bytes": "400",
              "local.retention.bytes": "0"}
    assert admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=1,
                                         config=config)])[TOPIC].result(30) is None
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "acks": "all",
                            "transactional.id": f"tiered-{uuid.uuid4().hex[:6]}",
                            "linger.ms": 0})
    producer.init_transactions(60)
    committed: list[bytes] = []
    aborted: list[bytes] = []
    for t in range(TRANSACTIONS):
        producer.begin_transaction()
        values = [b"%s-%02d-%d-" % (b"abort" if t % 2 else b"commit", t, i) + b"x" * 20
                  for i in range(3)]
        for value in values:
            producer.produce(TOPIC, value=value, partition=0)
        assert producer.flush(30) == 0
        if t % 2:
            producer.abort_transaction(60)
            aborted += values
        else:
            producer.commit_transaction(60)
            committed += values
    # every transaction is decided: the segments up to the last marker may be copied
    end = len(committed + aborted) + TRANSACTIONS
    wait_until(lambda: local_log_start(broker) >= end - 8, timeout=90,
               message="the transactions' segments copied and deleted locally")

    remote = tmp_path / "remote"
    indexes = sorted(remote.rglob("*.txnindex"))
    assert indexes, sorted(p.name for p in remote.rglob("*"))
    entries = [t for path in indexes for t in decode_entries(path.read_bytes())]
    assert len(entries) >= TRANSACTIONS // 2 - 1  # one per abort copied

    last = committed[-1]
    seen = read_from_zero(broker, "read_committed", last)
    assert seen == committed
    everything = read_from_zero(broker, "read_uncommitted", last)
    assert sorted(everything) == sorted(committed + aborted)
