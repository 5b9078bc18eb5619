"""Kafka's own clients against a broker process, on ZooKeeper and on etcd: librdkafka
(confluent-kafka) and kafka-python produce with acks=all and acks=1, librdkafka also with each
of gzip, snappy, lz4 and zstd, and both consume back with assign() from the beginning: every
acknowledged message is read exactly once, at the offset it was acknowledged at. With acks=all
both producers are idempotent (InitProducerId, then numbered batches: librdkafka with
enable.idempotence, kafka-python by default); with acks=1 they cannot be. ListOffsets
(earliest, latest, by timestamp) and Metadata as the clients see them."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterable

import confluent_kafka as ck
import kafka
import pytest
from confluent_kafka.admin import AdminClient

import coordinator
from coordinator.metadata import MetadataClient
from kafkaclient.messages import build
from replication.records import NO_PRODUCER_ID, iter_batches
from tests.broker.processes import BrokerProcess, create_topic
from tests.broker.wire_client import RawClient, request, request_module
from tests.waiting import wait_until

pytestmark = pytest.mark.servers

Message = tuple[int, int, bytes | None, bytes]  # partition, offset, key, value


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def confluent_produce(broker: BrokerProcess, topic: str, count: int, *, acks: str,
                      compression: str = "none", partitions: int = 3,
                      timestamp: int | None = None) -> list[Message]:
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "acks": acks,
                            "compression.type": compression, "linger.ms": 5,
                            "enable.idempotence": acks == "all"})
    acked: list[Message] = []
    errors = []

    def delivered(err: ck.KafkaError | None, msg: ck.Message) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked.append((msg.partition(), msg.offset(), msg.key(), msg.value()))

    for i in range(count):
        kwargs = {"timestamp": timestamp} if timestamp is not None else {}
        producer.produce(topic, key=f"{compression}-{acks}-{i}".encode(),
                         value=f"value {i} ".encode() * 20, partition=i % partitions,
                         on_delivery=delivered, **kwargs)
    assert producer.flush(60) == 0
    assert errors == []
    assert len(acked) == count
    return acked


def kafka_python_produce(broker: BrokerProcess, topic: str, count: int, *, acks: object,
                         compression: str | None = None, partitions: int = 3) -> list[Message]:
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, acks=acks,
                                   compression_type=compression, linger_ms=5)
    # idempotent by default, unless acks is set to anything but all
    assert (producer._transaction_manager is not None) == (acks == "all")
    sent = []
    for i in range(count):
        key, value = f"kp-{acks}-{i}".encode(), f"kafka-python {i}".encode()
        sent.append((key, value, producer.send(topic, key=key, value=value,
                                               partition=i % partitions)))
    producer.flush(60)
    acked = []
    for key, value, future in sent:
        meta = future.get(30)
        acked.append((meta.partition, meta.offset, key, value))
    producer.close(10)
    return acked


def confluent_consume(broker: BrokerProcess, topic: str, partitions: int, expected: int
                      ) -> list[Message]:
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused",
                            "enable.auto.commit": False})
    consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
    got: list[Message] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < expected and time.monotonic() < deadline:
            for msg in consumer.consume(500, 0.5):
                assert msg.error() is None, msg.error()
                got.append((msg.partition(), msg.offset(), msg.key(), msg.value()))
        # anything more would be a duplicate: one more poll must find nothing new
        got += [(m.partition(), m.offset(), m.key(), m.value())
                for m in consumer.consume(500, 0.5) if m.error() is None]
    finally:
        consumer.close()
    return got


def kafka_python_consume(broker: BrokerProcess, topic: str, partitions: int, expected: int
                         ) -> list[Message]:
    consumer = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None,
                                   enable_auto_commit=False)
    consumer.assign([kafka.TopicPartition(topic, p) for p in range(partitions)])
    consumer.seek_to_beginning()
    got: list[Message] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < expected and time.monotonic() < deadline:
            for records in consumer.poll(500).values():
                got += [(r.partition, r.offset, r.key, r.value) for r in records]
        for records in consumer.poll(500).values():
            got += [(r.partition, r.offset, r.key, r.value) for r in records]
    finally:
        consumer.close()
    return got


def producer_ids_in_log(broker: BrokerProcess, topic: str) -> set[int]:
    """The producer ids of the batches stored for ``topic`` (read from the segment files)."""
    ids = set()
    for segment in (broker.config_path.parent / "logs").glob(f"{topic}-*/*.log"):
        ids |= {h.producer_id for h in iter_batches(segment.read_bytes())}
    return ids


def assert_read_once_at_acked_offsets(acked: Iterable[Message], got: list[Message]) -> None:
    acked = list(acked)
    positions = [(p, o) for p, o, _k, _v in got]
    assert len(positions) == len(set(positions)), "a message was read twice"
    assert sorted(got) == sorted(acked)


def test_librdkafka_produces_with_every_acks_and_codec_and_reads_back(
        broker: BrokerProcess) -> None:
    topic = topic_name("librdkafka")
    create_topic(broker, topic, 3)
    acked = confluent_produce(broker, topic, 300, acks="all")
    acked += confluent_produce(broker, topic, 300, acks="1")
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        acked += confluent_produce(broker, topic, 150, acks="all", compression=codec)
    got = confluent_consume(broker, topic, 3, len(acked))
    assert_read_once_at_acked_offsets(acked, got)
    # five idempotent producers, one producer id each; acks=1 batches carry none
    ids = producer_ids_in_log(broker, topic)
    assert len(ids - {NO_PRODUCER_ID}) == 5 and NO_PRODUCER_ID in ids


def test_kafka_python_produces_and_both_clients_read_back(broker: BrokerProcess) -> None:
    topic = topic_name("kafka-python")
    create_topic(broker, topic, 3)
    acked = kafka_python_produce(broker, topic, 200, acks="all")
    acked += kafka_python_produce(broker, topic, 200, acks=1)
    acked += kafka_python_produce(broker, topic, 100, acks="all", compression="gzip")
    acked += confluent_produce(broker, topic, 100, acks="all", compression="gzip")
    assert_read_once_at_acked_offsets(acked, kafka_python_consume(broker, topic, 3, len(acked)))
    assert_read_once_at_acked_offsets(acked, confluent_consume(broker, topic, 3, len(acked)))
    assert len(producer_ids_in_log(broker, topic) - {NO_PRODUCER_ID}) == 3


def test_list_offsets_earliest_latest_and_by_timestamp(broker: BrokerProcess) -> None:
    topic = topic_name("offsets")
    create_topic(broker, topic, 1)
    base = int(time.time() * 1000) - 3_600_000
    acked = []
    for step in range(4):  # 4 rounds of 5 messages, each round one timestamp later
        acked += confluent_produce(broker, topic, 5, acks="all", partitions=1,
                                   timestamp=base + step * 1000)
    first_at = {base + step * 1000: min(o for _p, o, _k, _v in acked[step * 5:step * 5 + 5])
                for step in range(4)}
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused",
                            "enable.auto.commit": False})
    try:
        assert consumer.get_watermark_offsets(ck.TopicPartition(topic, 0), 10) == (0, 20)
        for ts, offset in first_at.items():
            (found,) = consumer.offsets_for_times([ck.TopicPartition(topic, 0, ts)], 10)
            assert found.offset == offset
            (found,) = consumer.offsets_for_times([ck.TopicPartition(topic, 0, ts - 1)], 10)
            assert found.offset == offset  # the first at or after the time asked
        (late,) = consumer.offsets_for_times([ck.TopicPartition(topic, 0, base + 10_000)], 10)
        assert late.offset == ck.OFFSET_END  # none that late: -1
    finally:
        consumer.close()
    kc = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None)
    try:
        tp = kafka.TopicPartition(topic, 0)
        assert kc.beginning_offsets([tp]) == {tp: 0}
        assert kc.end_offsets([tp]) == {tp: 20}
        found = kc.offsets_for_times({tp: base + 2000})[tp]
        assert (found.offset, found.timestamp) == (first_at[base + 2000], base + 2000)
    finally:
        kc.close()


def test_metadata_as_the_clients_see_it(broker: BrokerProcess) -> None:
    topic = topic_name("metadata")
    create_topic(broker, topic, 2)
    client = coordinator.connect(broker.coordinator_url, timeout=10)
    try:
        cluster_id = MetadataClient(client).cluster_id()
    finally:
        client.close()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    md = admin.list_topics(topic, timeout=10)
    assert md.cluster_id == cluster_id
    assert md.controller_id == 1
    assert {b.id: (b.host, b.port) for b in md.brokers.values()} == {1: ("127.0.0.1",
                                                                        broker.port)}
    partitions = md.topics[topic].partitions
    assert {p: (m.leader, m.replicas, m.isrs) for p, m in partitions.items()} == {
        0: (1, [1], [1]), 1: (1, [1], [1])}
    kc = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None)
    try:
        assert kc.partitions_for_topic(topic) == {0, 1}
    finally:
        kc.close()
    m = request_module(3, 12)
    with RawClient(broker.address) as raw:
        (answer,) = raw.call(request(3, 12, topics=(build(m.MetadataRequestTopic, name=topic,
                                                          topic_id=None),),
                                     allow_auto_topic_creation=False,
                                     include_topic_authorized_operations=False)).topics
    assert [(p.partition_index, p.leader_id, p.leader_epoch, p.offline_replicas)
            for p in answer.partitions] == [(0, 1, 0, ()), (1, 1, 0, ())]


def test_a_topic_is_created_when_a_client_asks_for_it(broker: BrokerProcess) -> None:
    """auto.create.topics.enable (on by default) with num.partitions=2: the producer's
    Metadata request creates the topic, answered LEADER_NOT_AVAILABLE until it has leaders."""
    topic = topic_name("auto")
    acked = confluent_produce(broker, topic, 10, acks="all", partitions=2)
    assert {p for p, _o, _k, _v in acked} == {0, 1}
    client = coordinator.connect(broker.coordinator_url, timeout=10)
    try:
        assert MetadataClient(client).partitions_of(topic) == [0, 1]
    finally:
        client.close()
    assert "created topic " + topic in broker.log()


def test_kafka_python_consumers_share_a_group_and_commit(broker: BrokerProcess) -> None:
    """kafka-python's side of a classic group (JoinGroup, SyncGroup with the client's range
    assignor, Heartbeat, OffsetCommit and OffsetFetch): two members split the partitions, read
    everything and commit it. Its run through member and coordinator failures on three brokers
    is in the long tier (tests/broker/groups/test_group_clients.py).

    Three of kafka-python 3.0.12's own races are kept out of the way, as applications avoid
    them. Each member polls on a thread of its own: driven in turn from one thread, a member's
    join could finish between its polls, and the client drops such a result and joins again.
    The session is longer than the test: after a rejoin, the client's heartbeat loop can
    disable heartbeats the user thread has just enabled (it checks the member's state without
    the lock), and the member then sends nothing more. The broker rightly expired such a member
    30 s later, and the member never rejoined (CI, twice: the leader's rejoin after its first
    assignment lacked the topic's metadata). And each member knows the topic's partitions
    before its first poll: a leader whose first assignment lacked them rejoins when they arrive,
    and if that join ends between two polls the client never takes its result (the leader's
    assignment snapshot now matches its metadata, so it sees no reason to rejoin and keeps no
    partitions, heartbeats off; CI, and 1 run in 42 on one loaded core)."""
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.errors import CommitFailedError, RebalanceInProgressError

    topic = topic_name("kp-group")
    create_topic(broker, topic, 3)
    acked = kafka_python_produce(broker, topic, 90, acks="all")
    ends = {p: max(o for q, o, _k, _v in acked if q == p) + 1 for p in range(3)}
    members = [kafka.KafkaConsumer(
        topic, bootstrap_servers=broker.bootstrap, group_id=topic, enable_auto_commit=False,
        auto_offset_reset="earliest", partition_assignment_strategy=[RangePartitionAssignor],
        session_timeout_ms=120_000, heartbeat_interval_ms=500) for _ in range(2)]
    for member in members:
        wait_until(lambda m=member: m.partitions_for_topic(topic) == {0, 1, 2}, 30,
                   message="the member's metadata for the topic")
    read: set[tuple[int, int]] = set()
    split: list[set[int]] = [set(), set()]
    lock = threading.Lock()
    stop = threading.Event()
    failures: list[BaseException] = []

    def run(index: int) -> None:
        member = members[index]
        try:
            while not stop.is_set():
                polled = member.poll(200)
                try:
                    member.commit()
                except (CommitFailedError, RebalanceInProgressError):
                    pass  # a rebalance under way: committed again on the next turn
                with lock:
                    for records in polled.values():
                        read.update((r.partition, r.offset) for r in records)
                    split[index] = {tp.partition for tp in member.assignment()}
        except BaseException as exc:  # handed to the test's thread
            failures.append(exc)

    def settled() -> bool:
        assert not failures, failures
        with lock:
            return (sorted(map(len, split)) == [1, 2] and set.union(*split) == {0, 1, 2}
                    and read >= {(p, o) for p, o, _k, _v in acked})

    def state() -> str:
        with lock:
            return f"{split}, {len(read)} read, broker: " + "; ".join(
                line for line in broker.log().splitlines() if f"group {topic}" in line)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(2)]
    try:
        for thread in threads:
            thread.start()
        try:
            wait_until(settled, 90, interval=0.1, message="the members to split and read all")
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {state()}") from None
        stop.set()
        for thread in threads:
            thread.join(30)
        for member in members:
            member.commit()
        committed = {p: members[0].committed(kafka.TopicPartition(topic, p)) for p in range(3)}
        assert committed == ends
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
        for member in members:
            member.close()
