"""``partctl transactions`` against Apache Kafka 4.x in KRaft mode (three combined nodes), beside
Kafka's own ``kafka-transactions``: the same rows for ``list``, ``describe`` and
``describe-producers`` of a transaction librdkafka's transactional producer keeps open; an
abort by start offset that moves the partition's last stable offset; and a hanging
transaction (a transactional batch of a producer no coordinator knows, written with the
brokers' KIP-890 verification switched off, as a broker before 3.6 took it) that
``find-hanging`` finds and ``abort --producer-id`` ends."""

from __future__ import annotations

import io
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient as KafkaAdmin
from confluent_kafka.admin import NewTopic
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.types import ProducerId
from kio.static.primitive import i16, i32, i32Timedelta

from coordinator.codecs import TopicPartition
from kafkaclient.connection import KafkaConnection
from kafkaclient.transactions import TransactionAdmin
from partctl.cli import main
from replication.records import Record, encode_batch
from tests.waiting import wait_until

from .conftest import require_kafka
from .harness import KAFKA_4, KafkaCluster, start_kafka_kraft
from .tool_shell import run_shared

pytestmark = pytest.mark.servers

TOPIC = "txn-tool"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def rows(table: str) -> list[list[str]]:
    """A table of Kafka's tool (or ours) as rows of cells, header first."""
    return [[cell.strip() for cell in line.rstrip("\t").split("\t")]
            for line in table.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    require_kafka(KAFKA_4)
    cluster = start_kafka_kraft(tmp_path_factory.mktemp("kraft-txn"), version=KAFKA_4,
                                node_ids=(1, 2, 3),
                                extra={"transaction.partition.verification.enable": "false"})
    try:
        admin = KafkaAdmin({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 2, 3)])[TOPIC].result(60)
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def open_transaction(kafka: KafkaCluster) -> Iterator[tuple[str, ck.Producer]]:
    """librdkafka's transactional producer with a transaction left open on partition 0."""
    txn_id = f"tool-{uuid.uuid4().hex[:6]}"
    producer = ck.Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": txn_id,
                            "transaction.timeout.ms": 600_000})
    producer.init_transactions(60)
    producer.begin_transaction()
    for n in range(3):
        producer.produce(TOPIC, value=b"v%d" % n, partition=0)
    assert producer.flush(30) == 0
    yield txn_id, producer


def test_list_and_describe_read_as_kafkas_tool(kafka: KafkaCluster,
                                               open_transaction: tuple[str, ck.Producer]
                                               ) -> None:
    txn_id, _producer = open_transaction
    code, out, err = run("transactions", "list", "--bootstrap-server", kafka.bootstrap)
    assert code == 0, err
    ours = rows(out)
    assert ours[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    theirs = rows(run_shared(KAFKA_4, "transactions", "--bootstrap-server", kafka.bootstrap,
                             "list").stdout)
    assert sorted(map(tuple, ours[1:])) == sorted(map(tuple, theirs[1:]))
    mine = [r for r in ours[1:] if r[0] == txn_id]
    assert len(mine) == 1 and mine[0][3] == "Ongoing"

    code, out, err = run("transactions", "list", "--bootstrap-server", kafka.bootstrap,
                         "--state", "CompleteCommit")
    assert code == 0, err
    assert txn_id not in out

    code, out, err = run("transactions", "describe", "--bootstrap-server", kafka.bootstrap,
                         "--transactional-id", txn_id)
    assert code == 0, err
    ours = rows(out)
    theirs = rows(run_shared(KAFKA_4, "transactions", "--bootstrap-server", kafka.bootstrap,
                             "describe", "--transactional-id", txn_id).stdout)
    assert ours[0] == theirs[0]
    # every column but the duration, which moves between the two calls
    duration = ours[0].index("TransactionDurationMs")
    assert [c for i, c in enumerate(ours[1]) if i != duration] == [
        c for i, c in enumerate(theirs[1]) if i != duration]
    assert ours[1][4] == "Ongoing" and ours[1][-1] == f"{TOPIC}-0"

    code, _out, err = run("transactions", "describe", "--bootstrap-server", kafka.bootstrap,
                          "--transactional-id", "no-such-txn")
    assert (code, err.count("\n")) == (1, 1) and "TRANSACTIONAL_ID_NOT_FOUND" in err


def test_describe_producers_reads_as_kafkas_tool(kafka: KafkaCluster,
                                                 open_transaction: tuple[str, ck.Producer]
                                                 ) -> None:
    args = ("--topic", TOPIC, "--partition", "0")
    code, out, err = run("transactions", "describe-producers", "--bootstrap-server",
                         kafka.bootstrap, *args)
    assert code == 0, err
    theirs = run_shared(KAFKA_4, "transactions", "--bootstrap-server", kafka.bootstrap,
                        "describe-producers", *args).stdout
    assert rows(out) == rows(theirs)
    assert rows(out)[1][-1] == "0"  # the open transaction starts at offset 0

    code, _out, err = run("transactions", "describe-producers", "--bootstrap-server",
                          kafka.bootstrap, "--topic", "no-such-topic", "--partition", "0")
    assert (code, err) == (1, "partctl: error: topic no-such-topic does not exist\n")


def _lso(kafka: KafkaCluster, partition: int) -> int:
    consumer = ck.Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "lso",
                            "isolation.level": "read_committed"})
    try:
        return consumer.get_watermark_offsets(ck.TopicPartition(TOPIC, partition), 10)[1]
    finally:
        consumer.close()


def test_abort_by_start_offset_ends_the_open_transaction(
    kafka: KafkaCluster, open_transaction: tuple[str, ck.Producer]
) -> None:
    code, out, err = run("transactions", "abort", "--bootstrap-server", kafka.bootstrap,
                         "--topic", TOPIC, "--partition", "0", "--start-offset", "0")
    assert code == 0, err
    assert "Aborted the transaction of producer" in out
    with TransactionAdmin(kafka.bootstrap) as admin:
        states = admin.describe_producers([TopicPartition(TOPIC, 0)])[TopicPartition(TOPIC, 0)]
    assert [p.txn_start_offset for p in states] == [None]
    # the marker is written: the last stable offset is past the three records and it
    wait_until(lambda: _lso(kafka, 0) == 4, timeout=30, interval=0.2,
               message="the LSO past the abort marker")

    code, _out, err = run("transactions", "abort", "--bootstrap-server", kafka.bootstrap,
                          "--topic", TOPIC, "--partition", "0", "--start-offset", "0")
    assert code == 1 and err == (f"partctl: error: no open transaction starts at offset 0 in "
                                 f"{TOPIC}-0\n")


def _hanging_batch(kafka: KafkaCluster) -> tuple[int, int]:
    """A transactional batch on partition 1 from an idempotent producer id (one no transaction
    coordinator knows): what a hanging transaction looks like. Its (producer id, epoch)."""
    host, port = kafka.brokers[1].address
    conn = KafkaConnection(host, port, client_id="hang")
    request = InitProducerIdRequest(transactional_id=None,
                                    transaction_timeout=i32Timedelta.parse(timedelta(seconds=60)),
                                    producer_id=ProducerId(-1), producer_epoch=i16(-1))
    try:  # a new cluster's producer id manager answers COORDINATOR_LOAD_IN_PROGRESS at first
        answer = wait_until(lambda: (a := conn.call(request)).error_code == 0 and a,
                            timeout=60, interval=0.2, message="a producer id")
        pid, epoch = int(answer.producer_id), int(answer.producer_epoch)
    finally:
        conn.close()
    with TransactionAdmin(kafka.bootstrap) as admin:
        leader = admin._leaders([TOPIC])[TopicPartition(TOPIC, 1)]
    host, port = kafka.brokers[leader].address
    conn = KafkaConnection(host, port, client_id="hang")
    try:
        now = int(time.time() * 1000)
        batch = encode_batch([Record(key=None, value=b"stuck", timestamp=now)],
                             producer_id=pid, producer_epoch=epoch, base_sequence=0,
                             transactional=True)
        answer = conn.call(ProduceRequest(
            transactional_id="ghost", acks=i16(-1),
            timeout=i32Timedelta.parse(timedelta(seconds=30)),
            topic_data=(TopicProduceData(name=TOPIC, partition_data=(
                PartitionProduceData(index=i32(1), records=batch),)),)))
        assert int(answer.responses[0].partition_responses[0].error_code) == 0, answer
    finally:
        conn.close()
    return pid, epoch


def test_a_hanging_transaction_is_found_and_aborted(kafka: KafkaCluster) -> None:
    pid, epoch = _hanging_batch(kafka)
    tp = TopicPartition(TOPIC, 1)
    with TransactionAdmin(kafka.bootstrap) as admin:
        # not yet older than the longest transaction timeout: no candidate
        assert admin.find_hanging([tp]) == []
        later = int(time.time() * 1000) + 20 * 60_000
        hanging = admin.find_hanging([tp], now_ms=later)
    assert [(h.tp, h.producer.producer_id, h.producer.txn_start_offset) for h in hanging] == [
        (tp, pid, 0)]
    code, out, err = run("transactions", "find-hanging", "--bootstrap-server", kafka.bootstrap,
                         "--topic", TOPIC)
    assert code == 0, err
    assert rows(out) == [["Topic", "Partition", "ProducerId", "ProducerEpoch",
                          "CoordinatorEpoch", "StartOffset", "LastTimestamp", "Duration(min)"]]
    code, out, err = run("transactions", "abort", "--bootstrap-server", kafka.bootstrap,
                         "--topic", TOPIC, "--partition", "1", "--producer-id", str(pid),
                         "--producer-epoch", str(epoch), "--coordinator-epoch", "-1")
    assert code == 0, err
    wait_until(lambda: _lso(kafka, 1) == 2, timeout=30, interval=0.2,
               message="the LSO past the abort marker")
    with TransactionAdmin(kafka.bootstrap) as admin:
        assert admin.find_hanging([tp], now_ms=later) == []


@pytest.mark.parametrize(("argv", "line"), [
    (["abort", "--topic", TOPIC, "--partition", "0"],
     "the transaction to abort must be given by --start-offset, or by --producer-id, "
     "--producer-epoch and --coordinator-epoch"),
    (["abort", "--topic", TOPIC, "--partition", "0", "--producer-id", "5"],
     "--producer-id needs --producer-epoch"),
    (["find-hanging"], "find-hanging needs --topic or --broker-id to limit the search"),
    (["find-hanging", "--broker-id", "1", "--partition", "0"], "--partition needs --topic"),
    (["list", "--state", "Running"], "--state Running: not a transaction state (one of Empty, "
                                     "Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, "
                                     "CompleteAbort, Dead, PrepareEpochFence)"),
])
def test_mistakes_are_one_line(kafka: KafkaCluster, argv: list[str], line: str) -> None:
    code, out, err = run("transactions", argv[0], "--bootstrap-server", kafka.bootstrap,
                         *argv[1:])
    assert (code, out, err) == (1, "", f"partctl: error: {line}\n")
