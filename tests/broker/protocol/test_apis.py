"""The client APIs' answers, on the real server over a real replica manager in this process
(the test plays the controller): Produce's checks and errors and its acks, Fetch's epochs,
limits, HW bound, sessions and long polls, ListOffsets, OffsetForLeaderEpoch, Metadata's
per-partition errors, and the request size limit checked before a body is read."""

from __future__ import annotations

import asyncio
import inspect
import socket
import struct
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import crc32c
import pytest
from kio.schema.errors import ErrorCode

from broker.apis import default_registry
from broker.server import KafkaServer, _Connection
from coordinator.codecs import TopicPartition
from kafkaclient.messages import build
from replication.records import ATTRIBUTES_OFFSET, CRC_OFFSET, Record, encode_batch
from tests.broker.harness import InProcessBroker
from tests.broker.wire_client import RawClient, encode_request, request, request_module
from tests.replication.test_compressed import compressed
from tests.waiting import wait_until

TP0 = TopicPartition("t", 0)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[InProcessBroker]:
    b = InProcessBroker(tmp_path / "logs")
    yield b
    b.close()


def records(n: int = 1, *, timestamp: int = 1_000, value: bytes = b"v" * 20) -> bytes:
    return encode_batch([Record(key=b"k%d" % i, value=value, timestamp=timestamp + i)
                         for i in range(n)])


def produce(version: int = 9, *, acks: int = -1, timeout_ms: int = 10_000,
            data: dict[tuple[str, int], bytes | None]) -> object:
    m = request_module(0, version)
    topics: dict[str, list[object]] = {}
    for (topic, partition), value in data.items():
        topics.setdefault(topic, []).append(build(m.PartitionProduceData, index=partition,
                                                  records=value))
    return request(0, version, transactional_id=None, acks=acks,
                   timeout=timedelta(milliseconds=timeout_ms),
                   topic_data=tuple(build(m.TopicProduceData, name=t, partition_data=tuple(ps))
                                    for t, ps in topics.items()))


def errors_of(response: object) -> dict[tuple[str, int], ErrorCode]:
    return {(t.name, p.index): p.error_code for t in response.responses
            for p in t.partition_responses}


def fetch(version: int = 12, *, partitions: list[tuple[int, int]] | None = None, topic: str = "t",
          max_wait_ms: int = 0, min_bytes: int = 1, max_bytes: int = 1 << 20,
          partition_max_bytes: int = 1 << 20, epoch: int = -1, session_id: int = 0,
          session_epoch: int = -1, isolation: int = 0) -> object:
    m = request_module(1, version)
    parts = tuple(build(m.FetchPartition, partition=p, current_leader_epoch=epoch,
                        fetch_offset=o, log_start_offset=-1,
                        partition_max_bytes=partition_max_bytes)
                  for p, o in (partitions or [(0, 0)]))
    return request(1, version, replica_id=-1, max_wait=timedelta(milliseconds=max_wait_ms),
                   min_bytes=min_bytes, max_bytes=max_bytes, isolation_level=isolation,
                   session_id=session_id, session_epoch=session_epoch,
                   topics=(build(m.FetchTopic, topic=topic, partitions=parts),),
                   forgotten_topics_data=(), rack_id="")


def only_partition(response: object) -> object:
    (topic,) = response.responses
    (partition,) = topic.partitions
    return partition


# --- Produce ----------------------------------------------------------------------------------


def test_produce_acks_1_and_all_answer_with_offsets(broker: InProcessBroker) -> None:
    broker.set_partition("t", 0)
    with RawClient(broker.address) as client:
        first = client.call(produce(acks=1, data={("t", 0): records(3)}))
        second = client.call(produce(acks=-1, data={("t", 0): records(2)}))
    assert [(p.error_code, p.base_offset, p.log_start_offset)
            for t in (first, second) for r in t.responses for p in r.partition_responses] == [
        (ErrorCode.none, 0, 0), (ErrorCode.none, 3, 0)]


def test_produce_errors(broker: InProcessBroker) -> None:
    broker.set_partition("t", 0)
    broker.set_partition("t", 1, leader=2, replicas=(2, 1))  # this broker follows
    broker.set_partition("elsewhere", 0, leader=2, replicas=(2,))  # known, not hosted
    bad_crc = bytearray(records())
    bad_crc[-1] ^= 1
    two_batches = records() + records()
    v1_magic = bytearray(records())
    v1_magic[16] = 1
    unknown_codec = bytearray(records(2))  # codec 7 in the attributes, no such codec
    struct.pack_into(">h", unknown_codec, ATTRIBUTES_OFFSET, 7)
    struct.pack_into(">I", unknown_codec, CRC_OFFSET,
                     crc32c.crc32c(bytes(unknown_codec[ATTRIBUTES_OFFSET:])))
    unknown_codec = bytes(unknown_codec)
    with RawClient(broker.address) as client:
        answer = errors_of(client.call(produce(data={
            ("t", 0): bytes(bad_crc), ("t", 1): records(),
            ("elsewhere", 0): records(), ("nowhere", 0): records()})))
        assert answer == {("t", 0): ErrorCode.corrupt_message,
                          ("t", 1): ErrorCode.not_leader_or_follower,
                          ("elsewhere", 0): ErrorCode.not_leader_or_follower,
                          ("nowhere", 0): ErrorCode.unknown_topic_or_partition}
        for data, error in [(two_batches, ErrorCode.invalid_record),
                            (bytes(v1_magic), ErrorCode.invalid_record),
                            (None, ErrorCode.invalid_record),
                            (records()[:-3], ErrorCode.corrupt_message),
                            (unknown_codec, ErrorCode.corrupt_message)]:
            assert errors_of(client.call(produce(data={("t", 0): data}))) == {("t", 0): error}
        assert errors_of(client.call(produce(acks=2, data={("t", 0): records()}))) == {
            ("t", 0): ErrorCode.invalid_required_acks}
        zstd = compressed(2, 4)
        assert errors_of(client.call(produce(6, data={("t", 0): zstd}))) == {
            ("t", 0): ErrorCode.unsupported_compression_type}
        assert errors_of(client.call(produce(7, data={("t", 0): zstd}))) == {
            ("t", 0): ErrorCode.none}
    assert broker.replica_manager.partition(TP0).log.log_end_offset == 2  # the zstd batch only



def test_a_broker_whose_topics_compact_by_default_refuses_records_without_a_key(
        tmp_path: Path) -> None:
    """``log.cleanup.policy=compact`` in server.properties: a topic without a policy of its own
    is compacted, so a record without a key is refused (INVALID_RECORD), one with a key taken."""
    b = InProcessBroker(tmp_path / "logs", log_cleanup_policy=("compact",))
    try:
        b.set_partition("t", 0)
        keyless = encode_batch([Record(key=None, value=b"v", timestamp=1_000)])
        with RawClient(b.address) as client:
            assert errors_of(client.call(produce(data={("t", 0): keyless}))) == {
                ("t", 0): ErrorCode.invalid_record}
            assert errors_of(client.call(produce(data={("t", 0): records()}))) == {
                ("t", 0): ErrorCode.none}
        assert b.replica_manager.partition(TP0).log.log_end_offset == 1
    finally:
        b.close()

def test_message_max_bytes_then_segment_bytes(tmp_path: Path) -> None:
    b = InProcessBroker(tmp_path / "logs", message_max_bytes=2_000, log_segment_bytes=1_500)
    try:
        b.set_partition("t", 0)
        with RawClient(b.address) as client:
            big = records(value=b"x" * 2_500)
            middling = records(value=b"x" * 1_700)
            assert errors_of(client.call(produce(data={("t", 0): big}))) == {
                ("t", 0): ErrorCode.message_too_large}
            assert errors_of(client.call(produce(data={("t", 0): middling}))) == {
                ("t", 0): ErrorCode.record_list_too_large}
    finally:
        b.close()


def test_acks_all_waits_for_the_hw_and_times_out(tmp_path: Path) -> None:
    b = InProcessBroker(tmp_path / "logs", min_insync_replicas=2)
    try:
        b.set_partition("t", 0, replicas=(1, 2), isr=(1, 2))
        b.set_partition("t", 1, replicas=(1, 2), isr=(1,))
        with RawClient(b.address) as client:
            assert errors_of(client.call(produce(data={("t", 1): records()}))) == {
                ("t", 1): ErrorCode.not_enough_replicas}
            client.send(produce(timeout_ms=200, data={("t", 0): records()}))
            _, timed_out = client.receive(0, 9)  # the follower never fetched
            assert errors_of(timed_out) == {("t", 0): ErrorCode.request_timed_out}
            correlation = client.send(produce(timeout_ms=60_000, data={("t", 0): records(2)}))
            rm = b.replica_manager
            log = rm.partition(TP0).log
            wait_until(lambda: log.log_end_offset == 3, message="the append")
            rm.fetch(TP0, 3, 1 << 20, 2, 0)  # the follower has it all: the HW passes the batch
            got, done = client.receive(0, 9)
            assert got == correlation
            (p,) = done.responses[0].partition_responses
            assert (p.error_code, p.base_offset) == (ErrorCode.none, 1)
    finally:
        b.close()


def test_acks_0_gets_no_answer_unless_it_fails_then_the_connection_closes(
        broker: InProcessBroker) -> None:
    broker.set_partition("t", 0)
    with RawClient(broker.address) as client:
        client.send(produce(acks=0, data={("t", 0): records()}))
        # the next answer is the Metadata's: the produce got none
        correlation = client.send(request(3, 12, topics=None, allow_auto_topic_creation=False,
                                          include_topic_authorized_operations=False))
        assert client.receive(3, 12)[0] == correlation
        client.send(produce(acks=0, data={("nowhere", 0): records()}))
        assert client.closed_by_peer()
    assert broker.replica_manager.partition(TP0).log.log_end_offset == 1


# --- Fetch ------------------------------------------------------------------------------------


def test_fetch_checks_epoch_leadership_and_offset(broker: InProcessBroker) -> None:
    broker.set_partition("t", 0, leader_epoch=5)
    broker.set_partition("t", 1, leader=2, leader_epoch=5, replicas=(2, 1))
    broker.replica_manager.produce(TP0, records(3), 1).result(5)
    with RawClient(broker.address) as client:
        def error(**kwargs: object) -> ErrorCode:
            return only_partition(client.call(fetch(**kwargs))).error_code

        assert error(epoch=4) == ErrorCode.fenced_leader_epoch
        assert error(epoch=6) == ErrorCode.unknown_leader_epoch
        assert error(epoch=5) == ErrorCode.none
        assert error(epoch=-1) == ErrorCode.none
        assert error(partitions=[(1, 0)]) == ErrorCode.not_leader_or_follower
        assert error(partitions=[(0, 4)]) == ErrorCode.offset_out_of_range
        assert error(topic="nowhere") == ErrorCode.unknown_topic_or_partition
        ok = only_partition(client.call(fetch(partitions=[(0, 3)])))
        assert (ok.error_code, ok.records, ok.high_watermark) == (ErrorCode.none, b"", 3)


def test_fetch_reads_only_below_the_high_watermark(broker: InProcessBroker) -> None:
    broker.set_partition("t", 0, replicas=(1, 2), isr=(1, 2))
    broker.replica_manager.produce(TP0, records(3), 1).result(5)  # the follower has none of it
    with RawClient(broker.address) as client:
        p = only_partition(client.call(fetch()))
        assert (p.error_code, p.records, p.high_watermark, p.last_stable_offset) == (
            ErrorCode.none, b"", 0, 0)
        broker.replica_manager.fetch(TP0, 3, 1 << 20, 2, 0)  # now it has
        p = only_partition(client.call(fetch(isolation=1)))
        assert (p.high_watermark, p.last_stable_offset) == (3, 3)
        assert p.records == broker.replica_manager.partition(TP0).log.read(0, 1 << 20).records
        assert p.aborted_transactions == ()  # read_committed: none were aborted


def test_a_read_committed_fetch_lists_the_aborted_transactions_of_what_it_sends(
        broker: InProcessBroker) -> None:
    """A read_committed answer lists the aborted transactions its records overlap, up to
    Kafka's bound past them (the first indexed batch after them), not every one up to the
    LSO: an answer of 1,000 bytes from the start of 300 aborted transactions lists tens."""
    broker.set_partition("t", 0)
    rm = broker.replica_manager
    now_ms = int(time.time() * 1000)  # (an old timestamp rolls the segment: segment.ms)
    for i in range(300):
        pid = 7_000 + i
        batch = encode_batch([Record(key=b"k", value=b"v" * 20, timestamp=now_ms)],
                             producer_id=pid, producer_epoch=0, base_sequence=0,
                             transactional=True)
        assert rm.produce(TP0, batch, 1).result(5).error == 0
        assert rm.write_txn_marker(TP0, producer_id=pid, producer_epoch=0, commit=False,
                                   coordinator_epoch=0).result(5).error == 0
    with RawClient(broker.address) as client:
        def listed(offset: int, limit: int) -> list[int]:
            p = only_partition(client.call(fetch(partitions=[(0, offset)], isolation=1,
                                                 partition_max_bytes=limit)))
            assert p.error_code == ErrorCode.none and p.last_stable_offset == 600
            return [t.producer_id for t in p.aborted_transactions]

        start = listed(0, 1_000)
        assert start[:6] == list(range(7_000, 7_006)) and len(start) < 50
        assert listed(300, 1_000)[:3] == [7_150, 7_151, 7_152]
        assert listed(0, 1 << 20) == list(range(7_000, 7_300))


def test_fetch_limits_first_batch_whole_then_request_budget(broker: InProcessBroker) -> None:
    broker.set_partition("t", 0)
    broker.set_partition("t", 1)
    rm = broker.replica_manager
    batch = records(5)
    for tp in (TP0, TopicPartition("t", 1)):
        for _ in range(3):
            rm.produce(tp, batch, 1).result(5)
    size = len(batch)
    with RawClient(broker.address) as client:
        small = client.call(fetch(partitions=[(0, 0), (1, 0)], partition_max_bytes=10))
        p0, p1 = small.responses[0].partitions
        assert len(p0.records) == size  # the first batch whole (KIP-74)
        assert len(p1.records) == 10  # later partitions keep to their limit
        budget = client.call(fetch(partitions=[(0, 0), (1, 0)], max_bytes=size + 7))
        p0, p1 = budget.responses[0].partitions
        assert (len(p0.records), len(p1.records)) == (size + 7, 0)


def test_a_fetch_at_the_final_epoch_gets_no_session(broker: InProcessBroker) -> None:
    """(Sessions themselves: tests/broker/protocol/test_fetch_sessions.py.)"""
    broker.set_partition("t", 0)
    with RawClient(broker.address) as client:
        new = client.call(fetch(session_id=0, session_epoch=-1))
        assert (new.error_code, new.session_id) == (ErrorCode.none, 0)
        incremental = client.call(fetch(session_id=123, session_epoch=1))
        assert (incremental.error_code, incremental.responses) == (
            ErrorCode.fetch_session_id_not_found, ())


def test_a_long_poll_is_parked_until_an_append(broker: InProcessBroker) -> None:
    broker.set_partition("t", 0)
    with RawClient(broker.address) as poller, RawClient(broker.address) as producer:
        poller.sock.settimeout(30)
        correlation = poller.send(fetch(max_wait_ms=60_000, min_bytes=1))
        poller.sock.settimeout(0.3)
        with pytest.raises(TimeoutError):  # nothing to read: parked (for up to 60 s)
            poller.sock.recv(1)
        poller.sock.settimeout(30)
        producer.call(produce(acks=1, data={("t", 0): records(2)}))
        got, response = poller.receive(1, 12)
    assert got == correlation
    p = only_partition(response)
    assert (p.error_code, p.high_watermark, len(p.records)) == (ErrorCode.none, 2,
                                                               len(records(2)))


def test_a_long_poll_ends_empty_at_max_wait(broker: InProcessBroker) -> None:
    broker.set_partition("t", 0)
    with RawClient(broker.address) as client:
        p = only_partition(client.call(fetch(max_wait_ms=100, min_bytes=1)))
    assert (p.error_code, p.records, p.high_watermark) == (ErrorCode.none, b"", 0)


def test_a_long_poll_answers_when_leadership_moves(broker: InProcessBroker) -> None:
    broker.set_partition("t", 0, leader_epoch=1, replicas=(1, 2))
    with RawClient(broker.address) as client:
        client.sock.settimeout(30)
        client.send(fetch(max_wait_ms=60_000, epoch=1))
        broker.set_partition("t", 0, leader=2, leader_epoch=2, replicas=(1, 2))
        _, response = client.receive(1, 12)
    assert only_partition(response).error_code == ErrorCode.fenced_leader_epoch


# --- ListOffsets and OffsetForLeaderEpoch -------------------------------------------------------


def list_offsets(version: int, timestamps: list[int], *, epoch: int = -1) -> object:
    m = request_module(2, version)
    parts = tuple(build(m.ListOffsetsPartition, partition_index=0, current_leader_epoch=epoch,
                        timestamp=ts) for ts in timestamps)
    return request(2, version, replica_id=-1, isolation_level=0,
                   topics=(build(m.ListOffsetsTopic, name="t", partitions=parts),))


def test_list_offsets(broker: InProcessBroker) -> None:
    broker.set_partition("t", 0, leader_epoch=3)
    rm = broker.replica_manager
    rm.produce(TP0, records(3, timestamp=1_000), 1).result(5)  # offsets 0-2, ts 1000-1002
    rm.produce(TP0, records(2, timestamp=5_000), 1).result(5)  # offsets 3-4, ts 5000-5001
    rm.produce(TP0, records(2, timestamp=2_000), 1).result(5)  # offsets 5-6, ts 2000-2001
    with RawClient(broker.address) as client:
        answer = client.call(list_offsets(9, [-2, -1, -3, -4, -5, 1_001, 1_003, 4_000, 9_999]))
        got = [(p.error_code, p.timestamp, p.offset, p.leader_epoch)
               for p in answer.topics[0].partitions]
        assert got == [
            (ErrorCode.none, -1, 0, 3),  # earliest
            (ErrorCode.none, -1, 7, 3),  # latest: the HW
            (ErrorCode.none, 5_001, 4, 3),  # max timestamp: the record holding it
            (ErrorCode.none, -1, 0, 3),  # earliest local
            (ErrorCode.none, -1, -1, -1),  # latest tiered: no remote storage
            (ErrorCode.none, 1_001, 1, 3),  # the first record at or after 1001
            (ErrorCode.none, 5_000, 3, 3),
            (ErrorCode.none, 5_000, 3, 3),
            (ErrorCode.none, -1, -1, -1),  # none that late
        ]
        v1 = client.call(list_offsets(1, [-1, 1_001]))
        assert [(p.error_code, p.offset) for p in v1.topics[0].partitions] == [
            (ErrorCode.none, 7), (ErrorCode.none, 1)]
        fenced = client.call(list_offsets(9, [-1], epoch=2)).topics[0].partitions[0]
        assert fenced.error_code == ErrorCode.fenced_leader_epoch


def test_list_offsets_hide_what_is_not_committed(broker: InProcessBroker) -> None:
    broker.set_partition("t", 0, replicas=(1, 2), isr=(1, 2))
    broker.replica_manager.produce(TP0, records(3, timestamp=1_000), 1).result(5)
    with RawClient(broker.address) as client:
        answer = client.call(list_offsets(9, [-1, 1_000, -3]))
    assert [(p.timestamp, p.offset) for p in answer.topics[0].partitions] == [
        (-1, 0), (-1, -1), (-1, -1)]


def test_list_offsets_in_a_compressed_batch_answer_its_first_offset(
        broker: InProcessBroker) -> None:
    broker.set_partition("t", 0)
    broker.replica_manager.produce(TP0, records(2, timestamp=1_000), 1).result(5)
    broker.replica_manager.produce(TP0, compressed(4, 1, timestamp=7_000), 1).result(5)
    with RawClient(broker.address) as client:
        answer = client.call(list_offsets(9, [6_000]))
    (p,) = answer.topics[0].partitions
    assert (p.error_code, p.timestamp, p.offset) == (ErrorCode.none, 7_000, 2)


def test_offset_for_leader_epoch(broker: InProcessBroker) -> None:
    broker.set_partition("t", 0, leader_epoch=1)
    broker.replica_manager.produce(TP0, records(3), 1).result(5)
    broker.set_partition("t", 0, leader_epoch=4, partition_epoch=1)
    broker.replica_manager.produce(TP0, records(2), 1).result(5)
    broker.set_partition("elsewhere", 0, leader=2, replicas=(2,))
    with RawClient(broker.address) as client:
        for version in (0, 2, 4):
            m = request_module(23, version)
            parts = tuple(build(m.OffsetForLeaderPartition, partition=0,
                                current_leader_epoch=cur, leader_epoch=e)
                          for e, cur in ((1, -1), (3, -1), (4, 4), (1, 2)))
            topics = (build(m.OffsetForLeaderTopic, topic="t", partitions=parts),
                      build(m.OffsetForLeaderTopic, topic="elsewhere", partitions=(
                          build(m.OffsetForLeaderPartition, partition=0, leader_epoch=0),)))
            answer = client.call(request(23, version, replica_id=-1, topics=topics))
            got = [(p.error_code, p.end_offset) for t in answer.topics for p in t.partitions]
            expected = [(ErrorCode.none, 3), (ErrorCode.none, 3), (ErrorCode.none, 5),
                        (ErrorCode.fenced_leader_epoch, -1),
                        (ErrorCode.not_leader_or_follower, -1)]
            if version < 2:  # no current leader epoch to check
                expected[3] = (ErrorCode.none, 3)
            assert got == expected
            if version >= 1:
                assert [p.leader_epoch for p in answer.topics[0].partitions][:3] == [1, 1, 4]


# --- Metadata ---------------------------------------------------------------------------------


def metadata(version: int, topics: list[str] | None, auto: bool = False) -> object:
    m = request_module(3, version)
    named = None if topics is None else tuple(build(m.MetadataRequestTopic, name=t,
                                                    topic_id=None) for t in topics)
    return request(3, version, topics=named, allow_auto_topic_creation=auto,
                   include_topic_authorized_operations=False)


def test_metadata_per_partition(broker: InProcessBroker) -> None:
    broker.set_partition("t", 0, leader_epoch=7, replicas=(1, 2), isr=(1, 2))
    broker.set_partition("t", 1, leader=-1, leader_epoch=8, replicas=(1,), isr=())
    with RawClient(broker.address) as client:
        answer = client.call(metadata(12, ["t", "nowhere", "bad/name"]))
        v0 = client.call(metadata(0, []))  # version 0: an empty list means every topic
    assert answer.controller_id == 1 and answer.cluster_id == "test-cluster"
    assert sorted(b.node_id for b in answer.brokers) == [1, 2]
    t, nowhere, bad = answer.topics
    assert (nowhere.error_code, bad.error_code) == (ErrorCode.unknown_topic_or_partition,
                                                   ErrorCode.invalid_topic_exception)
    assert [(p.partition_index, p.error_code, p.leader_id, p.leader_epoch, p.replica_nodes,
             p.isr_nodes) for p in t.partitions] == [
        (0, ErrorCode.none, 1, 7, (1, 2), (1, 2)),
        (1, ErrorCode.leader_not_available, -1, 8, (1,), ())]
    assert [x.name for x in v0.topics] == ["t"]


def test_auto_creation_needs_a_creator_and_the_clients_consent(broker: InProcessBroker) -> None:
    with RawClient(broker.address) as client:
        (topic,) = client.call(metadata(12, ["fresh"], auto=True)).topics
    assert topic.error_code == ErrorCode.unknown_topic_or_partition  # no admin path here


# --- framing ----------------------------------------------------------------------------------


def test_the_size_limit_is_checked_before_the_body_is_read(tmp_path: Path) -> None:
    b = InProcessBroker(tmp_path / "logs", socket_request_max_bytes=1_000)
    try:
        with socket.create_connection(b.address, timeout=10) as sock:
            sock.sendall(struct.pack(">i", 1_001))  # and not one byte of the body
            assert sock.recv(1) == b""
        fits = encode_request(metadata(12, None), 1)
        assert len(fits) - 4 <= 1_000
        with RawClient(b.address) as client:
            client.send_bytes(fits)
            assert client.receive(3, 12)[0] == 1
    finally:
        b.close()


def test_responses_leave_in_request_order_behind_a_parked_one(broker: InProcessBroker) -> None:
    broker.set_partition("t", 0)
    with RawClient(broker.address) as client:
        client.sock.settimeout(30)
        client.send(fetch(max_wait_ms=500, min_bytes=1 << 20), correlation_id=1)
        client.send(metadata(12, None), correlation_id=2)
        client.send(produce(acks=1, data={("t", 0): records()}), correlation_id=3)
        order = [client.receive(1, 12)[0], client.receive(3, 12)[0], client.receive(0, 9)[0]]
    assert order == [1, 2, 3]


def test_a_crc_is_what_guards_a_batch(broker: InProcessBroker) -> None:
    """A batch whose attributes were changed after its CRC was computed is refused; recomputed,
    the same bytes are taken (here the timestamp type, which leaves the records as they are)."""
    broker.set_partition("t", 0)
    data = bytearray(records())
    struct.pack_into(">h", data, ATTRIBUTES_OFFSET, 8)
    with RawClient(broker.address) as client:
        assert errors_of(client.call(produce(data={("t", 0): bytes(data)}))) == {
            ("t", 0): ErrorCode.corrupt_message}
        struct.pack_into(">I", data, CRC_OFFSET, crc32c.crc32c(bytes(data[ATTRIBUTES_OFFSET:])))
        assert errors_of(client.call(produce(data={("t", 0): bytes(data)}))) == {
            ("t", 0): ErrorCode.none}


# --- Fetch by topic id (versions 13-16) -------------------------------------------------------


def fetch_by_id(version: int, topic_id: uuid.UUID | None, partitions: list[int],
                *, epoch: int = -1) -> object:
    m = request_module(1, version)
    parts = tuple(build(m.FetchPartition, partition=p, current_leader_epoch=epoch,
                        fetch_offset=0, log_start_offset=-1, partition_max_bytes=1 << 20)
                  for p in partitions)
    state = {"replica_state": m.ReplicaState(replica_id=-1)} if version >= 15 else {}
    return request(1, version, replica_id=-1, max_wait=timedelta(0), min_bytes=1,
                   max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                   topics=(build(m.FetchTopic, topic_id=topic_id, partitions=parts),),
                   forgotten_topics_data=(), rack_id="", **state)


def test_fetch_names_topics_by_id_from_version_13(broker: InProcessBroker) -> None:
    broker.set_partition("t", 0, leader_epoch=3)
    broker.set_partition("t", 1, leader=2, leader_epoch=4, replicas=(2, 1))  # led elsewhere
    broker.replica_manager.produce(TP0, records(2), 1).result(5)
    t_id = uuid.uuid4()
    broker.metadata.set_topic_ids({"t": t_id})
    with RawClient(broker.address) as client:
        for version in (13, 14, 15, 16):
            (topic,) = client.call(fetch_by_id(version, t_id, [0, 1])).responses
            assert topic.topic_id == t_id
            ok, moved = topic.partitions
            assert (ok.error_code, ok.high_watermark, len(ok.records)) == (
                ErrorCode.none, 2, len(records(2)))
            assert moved.error_code == ErrorCode.not_leader_or_follower
        unknown = client.call(fetch_by_id(13, uuid.uuid4(), [0]))
        zero = client.call(fetch_by_id(13, None, [0]))
        old = client.call(fetch(12))  # by name, as before
        fenced = client.call(fetch_by_id(16, t_id, [0], epoch=2))
        moved16 = client.call(fetch_by_id(16, t_id, [1]))
        moved15 = client.call(fetch_by_id(15, t_id, [1]))
    assert [p.error_code for t in unknown.responses + zero.responses for p in t.partitions] == [
        ErrorCode.unknown_topic_id] * 2
    assert only_partition(old).error_code == ErrorCode.none
    # version 16 names the current leader and where it is (KIP-951); 15 does not
    (f,) = fenced.responses[0].partitions
    assert (f.error_code, f.current_leader.leader_id, f.current_leader.leader_epoch) == (
        ErrorCode.fenced_leader_epoch, 1, 3)
    assert [(n.node_id, n.port) for n in fenced.node_endpoints] == [(1, broker.port)]
    (m,) = moved16.responses[0].partitions
    assert (m.current_leader.leader_id, m.current_leader.leader_epoch) == (2, 4)
    assert [(n.node_id, n.host, n.port) for n in moved16.node_endpoints] == [
        (2, "127.0.0.1", broker.port + 1)]
    (m15,) = moved15.responses[0].partitions
    assert m15.current_leader.leader_id == -1  # and version 15 has no node endpoints


def test_a_connection_closed_with_answers_not_started_closes_them_unrun() -> None:
    """A handler that must wait (Metadata creating a topic) answers with a coroutine; if the
    client goes away before the writer reaches it, it is closed, not left for the garbage
    collector to warn about ("coroutine ... was never awaited")."""
    class _Writer:
        def get_extra_info(self, name: str) -> tuple[str, int]:
            return ("127.0.0.1", 1)

    async def answer() -> None:
        return None

    async def scenario() -> tuple[str, bool]:
        server = KafkaServer((), default_registry(), max_request_bytes=1 << 20)
        conn = _Connection(server, "PLAINTEXT", asyncio.StreamReader(), _Writer())  # type: ignore[arg-type]
        waiting = answer()
        started = asyncio.get_running_loop().create_future()
        conn.queue.put_nowait((None, waiting))
        conn.pending.append((None, started))
        conn._drop_pending()
        return inspect.getcoroutinestate(waiting), started.cancelled()

    state, cancelled = asyncio.run(scenario())
    assert state == inspect.CORO_CLOSED
    assert cancelled
