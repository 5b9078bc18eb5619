"""read_committed consumers of librdkafka (confluent-kafka) and kafka-python on three broker
processes: transactions written as a transactional producer writes them (raw Produce of
transactional batches) and ended as a coordinator ends them (raw WriteTxnMarkers). A
read_committed consumer gets the committed records, never the aborted ones, and nothing past
an open transaction until it commits; a read_uncommitted consumer gets every record. ListOffsets
LATEST is the last stable offset for read_committed, the high watermark otherwise."""

from __future__ import annotations

import time
from collections.abc import Iterator

import confluent_kafka as ck
import kafka
import pytest

from tests.broker.wire_client import RawClient

from ..data.test_cluster_clients import Trio
from .test_txn_data_markers import (
    codes,
    leader_and_follower,
    markers,
    produce_transactional,
)
from .trios import UnverifiedTrio, two_partitions

pytestmark = pytest.mark.servers

TOPIC = "committed"
A, B, C = 5100, 5200, 5300


@pytest.fixture(scope="module")
def trio(unverified_trio: UnverifiedTrio) -> Iterator[Trio]:
    """The shared cluster (tests/broker/txn/conftest.py) with this module's topic on it."""
    cluster = unverified_trio
    two_partitions(cluster, TOPIC)
    for partition in (0, 1):  # one a test: each commits A's second transaction in its own
        write_transactions(cluster, partition)
    yield cluster


def write_transactions(trio: Trio, partition: int) -> None:
    leader, follower = leader_and_follower(trio, partition, TOPIC)
    with leader, follower:
        def send(pid: int, seq: int, value: bytes, transactional: bool = True) -> None:
            answer = produce_transactional(leader, partition, pid, seq, topic=TOPIC, value=value,
                                           transactional=transactional)
            assert answer.error_code == 0, answer

        def end(pid: int, commit: bool) -> None:
            ended(leader, partition, pid, commit)

        send(A, 0, b"a0")  # 0
        send(A, 1, b"a1")  # 1
        end(A, True)  # 2
        send(B, 0, b"b0")  # 3
        end(B, False)  # 4
        send(-1, -1, b"p0", transactional=False)  # 5
        send(A, 2, b"a2")  # 6: A's second transaction, left open
        send(C, 0, b"c0")  # 7
        end(C, True)  # 8


def ended(leader: RawClient, partition: int, pid: int, commit: bool) -> None:
    answer = leader.call(markers((pid, 0, commit, 0, [(TOPIC, [partition])])))
    assert set(codes(answer).values()) == {0}, answer


def commit_a(trio: Trio, partition: int) -> None:
    """A's open transaction is committed: its marker at 9, the LSO at 10."""
    leader, follower = leader_and_follower(trio, partition, TOPIC)
    with leader, follower:
        ended(leader, partition, A, True)


def confluent_read(consumer: ck.Consumer, until: int, quiet_s: float = 2.0) -> list[bytes]:
    """Values until ``until`` arrived, then whatever comes within ``quiet_s``."""
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < until and time.monotonic() < deadline:
        got += [m.value() for m in consumer.consume(100, 0.5) if m.error() is None]
    quiet = time.monotonic() + quiet_s
    while time.monotonic() < quiet:
        got += [m.value() for m in consumer.consume(100, 0.2) if m.error() is None]
    return got


def test_librdkafka_read_committed_skips_aborted_and_stops_at_the_open_transaction(
        trio: Trio) -> None:
    def consumer(isolation: str) -> ck.Consumer:
        c = ck.Consumer({"bootstrap.servers": trio.bootstrap, "group.id": f"rc-{isolation}",
                         "enable.auto.commit": False, "isolation.level": isolation})
        c.assign([ck.TopicPartition(TOPIC, 0, ck.OFFSET_BEGINNING)])
        return c

    uncommitted = consumer("read_uncommitted")
    try:
        assert confluent_read(uncommitted, 6) == [b"a0", b"a1", b"b0", b"p0", b"a2", b"c0"]
    finally:
        uncommitted.close()
    committed = consumer("read_committed")
    try:
        assert confluent_read(committed, 3) == [b"a0", b"a1", b"p0"]
        low, high = committed.get_watermark_offsets(ck.TopicPartition(TOPIC, 0), timeout=10)
        assert (low, high) == (0, 6)  # read_committed: the LSO
        commit_a(trio, 0)
        assert confluent_read(committed, 2) == [b"a2", b"c0"]
    finally:
        committed.close()


def test_kafka_python_read_committed_sees_committed_records_only(trio: Trio) -> None:
    tp = kafka.TopicPartition(TOPIC, 1)
    uncommitted = kafka_python_read(trio, "read_uncommitted", 6)
    assert uncommitted == [b"a0", b"a1", b"b0", b"p0", b"a2", b"c0"]
    consumer = kafka.KafkaConsumer(bootstrap_servers=trio.bootstrap, group_id=None,
                                   enable_auto_commit=False, isolation_level="read_committed")
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning()
        assert poll_values(consumer, 3) == [b"a0", b"a1", b"p0"]
        assert consumer.end_offsets([tp])[tp] == 6  # the LSO
        commit_a(trio, 1)
        assert poll_values(consumer, 2) == [b"a2", b"c0"]
        assert consumer.end_offsets([tp])[tp] == 10
    finally:
        consumer.close()


def poll_values(consumer: kafka.KafkaConsumer, until: int, quiet_s: float = 2.0
                ) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < until and time.monotonic() < deadline:
        for records in consumer.poll(500).values():
            got += [r.value for r in records]
    quiet = time.monotonic() + quiet_s
    while time.monotonic() < quiet:
        for records in consumer.poll(200).values():
            got += [r.value for r in records]
    return got


def kafka_python_read(trio: Trio, isolation: str, until: int) -> list[bytes]:
    consumer = kafka.KafkaConsumer(bootstrap_servers=trio.bootstrap, group_id=None,
                                   enable_auto_commit=False, isolation_level=isolation)
    try:
        consumer.assign([kafka.TopicPartition(TOPIC, 1)])
        consumer.seek_to_beginning()
        return poll_values(consumer, until)
    finally:
        consumer.close()
