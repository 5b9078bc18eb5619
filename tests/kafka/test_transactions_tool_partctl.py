"""Kafka 3.9.1's own ``kafka-transactions`` (``TransactionsCommand``, by main class) against
three partctl broker processes: a hanging transaction (a transactional batch of an idempotent
producer id, one no transaction coordinator knows) that ``find-hanging`` finds and
``abort --start-offset`` ends, moving the partition's last stable offset; and the same batch
refused by a leader that verifies with the coordinator first (KIP-890 part 1), so that
nothing hangs.

One cluster serves both: brokers 1 and 2 run with ``transaction.partition.verification.enable
=false`` (as a broker before 3.6 did), broker 3 with the default (true); partition 0 of the
topic is led by broker 1, partition 1 by broker 3."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import confluent_kafka as ck
import pytest
from kio.schema.errors import ErrorCode

import coordinator
from broker.cluster import LaunchedBroker, LocalCluster, launch_broker
from coordinator.admin import Admin
from kafkaclient.messages import build
from replication.records import Record, encode_batch
from tests.broker.processes import TEST_SETTINGS
from tests.broker.wire_client import RawClient, request, request_module
from tests.servers import Server
from tests.waiting import wait_until

from .conftest import require_kafka
from .harness import KAFKA_3, run_tool

pytestmark = pytest.mark.servers

TOPIC = "hang"
UNVERIFIED, VERIFIED = 0, 1  # the topic's partitions: led by broker 1 (off), broker 3 (on)
SETTINGS = {**dict(line.split("=", 1) for line in TEST_SETTINGS.splitlines() if "=" in line),
            "transaction.state.log.num.partitions": "3",
            "offsets.topic.num.partitions": "3"}
OLD = 20 * 60_000
"""How old the hanging batch's timestamp is: past find-hanging's default 15 minutes."""


@pytest.fixture(scope="module")
def mixed(zookeeper_server: Server, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[LocalCluster]:
    require_kafka(KAFKA_3)
    root = tmp_path_factory.mktemp("txn-tool-partctl")
    url = zookeeper_server.url(f"/txn-tool-{uuid.uuid4().hex[:10]}")
    cluster = LocalCluster(directory=root, remove_directory=False, coordinator_url=url,
                           server=None)
    off = {**SETTINGS, "transaction.partition.verification.enable": "false"}
    try:
        for broker_id in (1, 2, 3):
            cluster.brokers.append(launch_broker(root / f"broker-{broker_id}", broker_id, url,
                                                 extra=off if broker_id < 3 else SETTINGS))
        for broker in cluster.brokers:
            broker.wait_serving(120)
        store = coordinator.connect(url, timeout=10)
        try:  # the assignment by hand (confluent-kafka 2.16 refuses replica_assignment)
            Admin(store).create_topic(TOPIC, assignment={UNVERIFIED: [1, 2, 3],
                                                         VERIFIED: [3, 1, 2]})
        finally:
            store.close()
        m = request_module(3, 12)
        metadata = request(3, 12, topics=(m.MetadataRequestTopic(topic_id=None, name=TOPIC),),
                           allow_auto_topic_creation=False,
                           include_topic_authorized_operations=False)

        def led(broker: LaunchedBroker) -> bool:
            with RawClient(broker.address, timeout=10) as client:
                (topic,) = client.call(metadata).topics
            return topic.error_code == ErrorCode.none and {
                p.partition_index: p.leader_id for p in topic.partitions} == {
                UNVERIFIED: 1, VERIFIED: 3}

        # every broker's own answer: a raw produce goes to a leader that may not have the
        # topic yet when another broker's metadata already names it
        wait_until(lambda: all(led(b) for b in cluster.brokers), timeout=60, interval=0.2,
                   message=f"{TOPIC}'s leaders, as every broker has them")
        yield cluster
    finally:
        statuses = cluster.stop()
    assert all(status == 0 for status in statuses.values()), statuses


def _broker(cluster: LocalCluster, broker_id: int) -> LaunchedBroker:
    return next(b for b in cluster.brokers if b.broker_id == broker_id)


def _settled(client: RawClient, body: Any) -> Any:
    """``body``'s answer once it is not one a client retries (a coordinator loading, or not
    there yet)."""
    answers: list[Any] = []
    retried = (ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available,
               ErrorCode.not_coordinator)
    wait_until(lambda: (answers.append(client.call(body)) or answers[-1].error_code
                        not in retried), timeout=60, interval=0.2, message=f"{body!r}")
    return answers[-1]


def _producer_id(cluster: LocalCluster, transactional_id: str | None = None) -> tuple[int, int]:
    """InitProducerId (idempotent, or for ``transactional_id`` at its coordinator)."""
    broker = _broker(cluster, 1)
    with RawClient(broker.address, timeout=30) as client:
        if transactional_id is not None:
            found = _settled(client, request(10, 3, key=transactional_id, key_type=1))
            broker = _broker(cluster, int(found.node_id))
    with RawClient(broker.address, timeout=30) as client:
        answer = _settled(client, request(
            22, 4, transactional_id=transactional_id, transaction_timeout=timedelta(minutes=1),
            producer_id=-1, producer_epoch=-1))
    assert answer.error_code == ErrorCode.none, answer
    return int(answer.producer_id), int(answer.producer_epoch)


def _raw_batch(cluster: LocalCluster, partition: int, pid: int, epoch: int,
               transactional_id: str, timestamp: int) -> Any:
    """One transactional batch of one record to ``partition``'s leader, Produce v9, acks=all:
    its partition answer."""
    m = request_module(0, 9)
    batch = encode_batch([Record(key=None, value=b"stuck", timestamp=timestamp)],
                         producer_id=pid, producer_epoch=epoch, base_sequence=0,
                         transactional=True)
    leader = _broker(cluster, 1 if partition == UNVERIFIED else 3)
    with RawClient(leader.address, timeout=30) as client:
        response = client.call(request(
            0, 9, transactional_id=transactional_id, acks=-1, timeout=timedelta(seconds=30),
            topic_data=(build(m.TopicProduceData, name=TOPIC, partition_data=(build(
                m.PartitionProduceData, index=partition, records=batch),)),)))
    (answer,) = response.responses[0].partition_responses
    return answer


def _ends(cluster: LocalCluster, partition: int) -> tuple[int, int]:
    """(last stable offset, high watermark) of ``partition``: ListOffsets read_committed and
    read_uncommitted, through librdkafka."""
    ends = []
    for isolation in ("read_committed", "read_uncommitted"):
        consumer = ck.Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                                "group.id": "ends", "isolation.level": isolation})
        try:
            ends.append(consumer.get_watermark_offsets(ck.TopicPartition(TOPIC, partition),
                                                       10)[1])
        finally:
            consumer.close()
    return ends[0], ends[1]


def _tool(cluster: LocalCluster, *args: str) -> list[list[str]]:
    """Kafka 3.9.1's kafka-transactions: its table's rows, header first."""
    result = run_tool(KAFKA_3, "transactions", "--bootstrap-server",
                      cluster.bootstrap_servers, *args)
    assert result.returncode == 0, result.stdout + result.stderr
    return [[cell.strip() for cell in line.rstrip("\t").split("\t")]
            for line in result.stdout.splitlines() if line.strip()]


HEADER = ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
          "StartOffset", "LastTimestamp", "Duration(min)"]


def test_kafkas_tool_finds_and_aborts_a_hanging_transaction(mixed: LocalCluster) -> None:
    pid, epoch = _producer_id(mixed)
    stamp = int(time.time() * 1000) - OLD
    answer = _raw_batch(mixed, UNVERIFIED, pid, epoch, "ghost", stamp)
    assert answer.error_code == ErrorCode.none, answer  # broker 1 does not ask: it hangs
    wait_until(lambda: _ends(mixed, UNVERIFIED) == (0, 1), timeout=30, interval=0.2,
               message="the LSO held at the open transaction")

    rows = _tool(mixed, "find-hanging", "--topic", TOPIC)
    assert rows[0] == HEADER and len(rows) == 2, rows
    assert rows[1][:7] == [TOPIC, str(UNVERIFIED), str(pid), str(epoch), "-1", "0", str(stamp)]
    assert int(rows[1][7]) >= OLD // 60_000

    assert _tool(mixed, "abort", "--topic", TOPIC, "--partition", str(UNVERIFIED),
                 "--start-offset", "0") == []
    # the abort marker is written: the LSO passes the batch and the marker
    wait_until(lambda: _ends(mixed, UNVERIFIED) == (2, 2), timeout=30, interval=0.2,
               message="the LSO past the abort marker")


def test_a_verifying_leader_refuses_the_batch_and_nothing_hangs(mixed: LocalCluster) -> None:
    """Broker 3 asks the coordinator first (AddPartitionsToTxn ``verify_only``): a producer id
    no coordinator holds for the transactional id is INVALID_PRODUCER_ID_MAPPING (Kafka 3.9
    passes the coordinator's answer on); a known id whose transaction does not hold the
    partition is INVALID_TXN_STATE. Nothing reaches the log."""
    tid = f"known-{uuid.uuid4().hex[:6]}"
    known, known_epoch = _producer_id(mixed, tid)  # creates __transaction_state too
    pid, epoch = _producer_id(mixed)
    stamp = int(time.time() * 1000) - OLD
    ghost = _raw_batch(mixed, VERIFIED, pid, epoch, "ghost", stamp)
    assert ghost.error_code == ErrorCode.invalid_producer_id_mapping, ghost
    unadded = _raw_batch(mixed, VERIFIED, known, known_epoch, tid, stamp)
    assert unadded.error_code == ErrorCode.invalid_txn_state, unadded
    assert unadded.error_message == "Partition was not added to the transaction"
    assert _ends(mixed, VERIFIED) == (0, 0)
    assert _tool(mixed, "find-hanging", "--topic", TOPIC, "--partition", str(VERIFIED)) == [
        HEADER]
