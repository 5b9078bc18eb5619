"""WriteTxnMarkers (key 27) on three broker processes, sent raw as a transaction coordinator
sends it: the leader appends the marker after the transaction's batches (a control batch,
read back by Fetch and decoded), a follower refuses it with NOT_LEADER_OR_FOLLOWER and no
log changes, and hostile markers (unknown topic, negative producer id, a fenced producer or
coordinator epoch, a partition named twice) get Kafka's per-partition codes with nothing
appended for them. DescribeProducers (key 61) answers from the leader's producer state, raw
and through Kafka's ``kafka-transactions describe-producers``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import confluent_kafka as ck
import pytest
from kio.schema.errors import ErrorCode

from kafkaclient.messages import build
from replication.control import read_marker
from replication.records import Record, decode_batch, encode_batch
from tests.broker.wire_client import RawClient, request, request_module
from tests.kafka.harness import KAFKA_3, run_tool
from tests.waiting import wait_until

from ..data.test_cluster_clients import Trio
from .trios import UnverifiedTrio, two_partitions

pytestmark = pytest.mark.servers

TOPIC = "txdata"
RAW_TXN_ID = "raw-data-plane"
"""The transactional id of the raw batches: no coordinator knows it, as no verification asks."""


@pytest.fixture(scope="module")
def trio(unverified_trio: UnverifiedTrio) -> Iterator[Trio]:
    """The shared cluster (tests/broker/txn/conftest.py) with this module's topic on it."""
    cluster = unverified_trio
    two_partitions(cluster, TOPIC)
    # the state nodes are written before the leaders apply them: wait for the leaders
    consumer = ck.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "ready"})
    try:
        for p in (0, 1):
            wait_until(lambda p=p: _answers(consumer, p), timeout=60,
                       message=f"{TOPIC}-{p}'s leader serving it")
    finally:
        consumer.close()
    yield cluster


def _answers(consumer: ck.Consumer, partition: int) -> bool:
    try:
        consumer.get_watermark_offsets(ck.TopicPartition(TOPIC, partition), timeout=5,
                                       cached=False)
    except ck.KafkaException:
        return False
    return True


def leader_and_follower(trio: Trio, partition: int, topic: str = TOPIC
                        ) -> tuple[RawClient, RawClient]:
    leader, _isr = trio.partition_state(topic)[partition]
    follower = next(b for b in trio.brokers if b != leader)
    return (RawClient(trio.brokers[leader].address, timeout=30),
            RawClient(trio.brokers[follower].address, timeout=30))


def markers(*entries: tuple[int, int, bool, int, list[tuple[str, list[int]]]],
            version: int = 1) -> Any:
    """A WriteTxnMarkers request: (producer id, epoch, commit, coordinator epoch, topics)."""
    m = request_module(27, version)
    return request(27, version, markers=tuple(
        build(m.WritableTxnMarker, producer_id=pid, producer_epoch=epoch,
              transaction_result=commit, coordinator_epoch=coordinator_epoch,
              topics=tuple(build(m.WritableTxnMarkerTopic, name=name,
                                 partition_indexes=tuple(parts)) for name, parts in topics))
        for pid, epoch, commit, coordinator_epoch, topics in entries))


def codes(response: Any) -> dict[tuple[int, str, int], ErrorCode]:
    return {(mk.producer_id, t.name, p.partition_index): p.error_code
            for mk in response.markers for t in mk.topics for p in t.partitions}


def produce_transactional(client: RawClient, partition: int, pid: int, seq: int,
                          epoch: int = 0, *, topic: str = TOPIC, value: bytes = b"in a txn",
                          transactional: bool = True, transactional_id: str | None = RAW_TXN_ID,
                          version: int = 9) -> Any:
    """One batch of one record produced raw, acks=all (a producer id -1: a plain batch)."""
    response = client.call(transactional_request(
        partition, pid, seq, epoch, topic=topic, value=value, transactional=transactional,
        transactional_id=transactional_id, version=version))
    (answer,) = response.responses[0].partition_responses
    return answer


def transactional_request(partition: int, pid: int, seq: int, epoch: int = 0, *,
                          topic: str = TOPIC, value: bytes = b"in a txn",
                          transactional: bool = True, transactional_id: str | None = RAW_TXN_ID,
                          version: int = 9) -> Any:
    """The Produce request of :func:`produce_transactional`, to send as it is."""
    m = request_module(0, version)
    batch = encode_batch([Record(key=b"k", value=value, timestamp=int(time.time() * 1000))],
                         producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                         transactional=transactional)
    return request(0, version, transactional_id=transactional_id, acks=-1,
                   timeout=timedelta(seconds=20), topic_data=(build(
                       m.TopicProduceData, name=topic, partition_data=(build(
                           m.PartitionProduceData, index=partition, records=batch),)),))


def fetch_all(client: RawClient, partition: int, topic: str = TOPIC) -> tuple[int, list[Any]]:
    """(high watermark, decoded batches) of the partition from offset 0 (read_uncommitted),
    fetching again where a read stopped (a read holds one segment at most)."""
    m = request_module(1, 12)
    batches: list[Any] = []
    offset, hw = 0, 1
    while offset < hw:
        response = client.call(request(
            1, 12, replica_id=-1, max_wait=timedelta(0), min_bytes=1, max_bytes=1 << 20,
            isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=(),
            rack_id="", topics=(build(m.FetchTopic, topic=topic, partitions=(build(
                m.FetchPartition, partition=partition, current_leader_epoch=-1,
                fetch_offset=offset, log_start_offset=-1, partition_max_bytes=1 << 20),)),)))
        (answer,) = response.responses[0].partitions
        assert answer.error_code == ErrorCode.none
        hw, data, pos = answer.high_watermark, answer.records or b"", 0
        while pos < len(data):
            batch = decode_batch(data, pos)
            batches.append(batch)
            pos += batch.header.size
            offset = batch.header.base_offset + batch.header.last_offset_delta + 1
        if not data:
            break
    return hw, batches


def test_the_leader_appends_the_marker_and_a_follower_refuses_it(trio: Trio) -> None:
    leader, follower = leader_and_follower(trio, 0)
    with leader, follower:
        assert produce_transactional(leader, 0, 1000, 0).error_code == ErrorCode.none
        assert produce_transactional(leader, 0, 1000, 1).error_code == ErrorCode.none
        hw_before, _ = fetch_all(leader, 0)
        refused = follower.call(markers((1000, 0, True, 4, [(TOPIC, [0])])))
        assert codes(refused) == {(1000, TOPIC, 0): ErrorCode.not_leader_or_follower}
        assert fetch_all(leader, 0)[0] == hw_before
        written = leader.call(markers((1000, 0, True, 4, [(TOPIC, [0])])))
        assert codes(written) == {(1000, TOPIC, 0): ErrorCode.none}
        hw, batches = fetch_all(leader, 0)  # acks=all: the marker is below the HW at once
    assert hw == hw_before + 1
    assert [b.header.is_control for b in batches] == [False, False, True]
    assert all(b.header.is_transactional for b in batches)
    control = batches[-1]
    assert (control.header.producer_id, control.header.producer_epoch,
            control.header.base_offset) == (1000, 0, 2)
    marker = read_marker(encode_batch(list(control.records), producer_id=1000,
                                      producer_epoch=0, transactional=True, control=True))
    assert marker is not None and marker.commit and marker.coordinator_epoch == 4


def test_hostile_markers_get_per_partition_errors_and_append_nothing(trio: Trio) -> None:
    leader, _follower = leader_and_follower(trio, 1)
    with leader:
        assert produce_transactional(leader, 1, 2000, 0, epoch=3).error_code == ErrorCode.none
        hw_before, _ = fetch_all(leader, 1)
        answer = leader.call(markers(
            (2000, 2, False, 5, [(TOPIC, [1])]),             # an older producer epoch
            (-1, 0, True, 5, [(TOPIC, [1])]),                # no producer id
            (3000, 0, True, 5, [("no-such-topic", [0]), (TOPIC, [7])]),
            version=0))
        assert codes(answer) == {
            (2000, TOPIC, 1): ErrorCode.invalid_producer_epoch,
            (-1, TOPIC, 1): ErrorCode.invalid_producer_id_mapping,
            (3000, "no-such-topic", 0): ErrorCode.unknown_topic_or_partition,
            (3000, TOPIC, 7): ErrorCode.unknown_topic_or_partition,
        }
        assert fetch_all(leader, 1)[0] == hw_before
        twice = leader.call(markers((2000, 3, False, 5, [(TOPIC, [1, 1]), (TOPIC, [1])])))
        assert codes(twice) == {(2000, TOPIC, 1): ErrorCode.none}
        hw, batches = fetch_all(leader, 1)
        assert hw == hw_before + 1 and batches[-1].header.is_control
        assert produce_transactional(leader, 1, 2000, 1, epoch=3).error_code == ErrorCode.none
        fenced = leader.call(markers((2000, 3, True, 4, [(TOPIC, [1])])))
        assert codes(fenced) == {(2000, TOPIC, 1): ErrorCode.transaction_coordinator_fenced}
        assert fetch_all(leader, 1)[0] == hw + 1  # the data batch only


def describe_producers(client: RawClient, topics: list[tuple[str, list[int]]]) -> Any:
    m = request_module(61, 0)
    return client.call(request(61, 0, topics=tuple(
        build(m.TopicRequest, name=name, partition_indexes=tuple(parts))
        for name, parts in topics)))


def test_describe_producers_lists_the_leaders_producers(trio: Trio) -> None:
    leader, follower = leader_and_follower(trio, 0)
    with leader, follower:
        answer = produce_transactional(leader, 0, 7000, 0, epoch=2)
        assert answer.error_code == ErrorCode.none
        described = describe_producers(leader, [(TOPIC, [0]), ("no-such-topic", [0]),
                                                ("bad/name", [0])])
        refused = describe_producers(follower, [(TOPIC, [0])])
    (mine, unknown, bad) = described.topics
    (partition,) = mine.partitions
    assert partition.error_code == ErrorCode.none
    state = next(p for p in partition.active_producers if p.producer_id == 7000)
    assert (state.producer_epoch, state.last_sequence, state.coordinator_epoch,
            state.current_txn_start_offset) == (2, 0, -1, answer.base_offset)
    assert state.last_timestamp > 0
    assert [p.error_code for p in unknown.partitions] == [ErrorCode.unknown_topic_or_partition]
    assert [p.error_code for p in bad.partitions] == [ErrorCode.invalid_topic_exception]
    assert [p.error_code for t in refused.topics for p in t.partitions] == [
        ErrorCode.not_leader_or_follower]
    # Kafka's own tool reads the same from the leader
    tool = run_tool(KAFKA_3, "transactions", "--bootstrap-server", trio.bootstrap,
                    "describe-producers", "--topic", TOPIC, "--partition", "0")
    assert tool.returncode == 0, tool.stderr
    row = next(line.split() for line in tool.stdout.splitlines() if line.startswith("7000"))
    assert row[:4] == ["7000", "2", "-1", "0"] and row[-1] == str(answer.base_offset), tool.stdout
