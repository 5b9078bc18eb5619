"""``__consumer_offsets`` takes no client writes, and its coordinator believes only what a
coordinator wrote (issue 28): on broker processes, with Kafka's own clients."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import confluent_kafka as ck
import pytest
from kio.schema.errors import ErrorCode

from broker.cluster import coordinator_property
from broker.groups.records import (
    OffsetCommitKey,
    OffsetCommitValue,
    encode_key,
    encode_value,
    partition_for,
)
from replication.log import Log
from replication.records import Record, encode_batch
from tests.broker.processes import coordinator_url, create_topic, start_broker
from tests.broker.protocol.test_apis import errors_of, produce
from tests.broker.wire_client import RawClient
from tests.servers import Server
from tests.waiting import wait_until

from .test_cluster_clients import SETTINGS, Trio, create, serving

pytestmark = pytest.mark.servers

OFFSETS = "__consumer_offsets"
PARTITIONS = 3


@dataclass
class SmallOffsetsTrio(Trio):
    """A :class:`Trio` whose ``__consumer_offsets`` has three partitions (quick to create)."""

    def settings(self) -> str:
        return SETTINGS + f"offsets.topic.num.partitions={PARTITIONS}\n"


@pytest.fixture
def trio(zookeeper_server: Server, tmp_path: Path) -> Iterator[SmallOffsetsTrio]:
    with serving(SmallOffsetsTrio(coordinator_url(zookeeper_server), tmp_path, {})) as cluster:
        yield cluster


def _forged(group: str, topic: str, offset: int) -> tuple[bytes, bytes]:
    return (encode_key(OffsetCommitKey(group, topic, 0)),
            encode_value(OffsetCommitValue(offset=offset, commit_timestamp=int(time.time() * 1e3))))


def _commit(bootstrap: str, group: str, topic: str, offset: int) -> None:
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                            "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[ck.TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def _committed(bootstrap: str, group: str, topic: str) -> int:
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                            "enable.auto.commit": False})
    try:
        return wait_until(lambda: _ask(consumer, topic), timeout=60,
                          message=f"{group}'s committed offset")
    finally:
        consumer.close()


def _ask(consumer: ck.Consumer, topic: str) -> int | None:
    try:
        (tp,) = consumer.committed([ck.TopicPartition(topic, 0)], timeout=5)
    except ck.KafkaException:  # the coordinator is loading or moving: ask again
        return None
    return tp.offset if tp.error is None and tp.offset >= 0 else None


def test_clients_cannot_write_consumer_offsets_and_a_moved_coordinator_has_no_forgery(
        trio: SmallOffsetsTrio) -> None:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    group = f"g-{uuid.uuid4().hex[:8]}"
    create(trio, topic, 1, num_partitions=1, replication_factor=3)
    _commit(trio.bootstrap, group, topic, 5)
    p = partition_for(group, PARTITIONS)
    wait_until(lambda: len(trio.partition_state(OFFSETS).get(p, (-1, ()))[1]) == 3,
               timeout=30, message=f"{OFFSETS}-{p}: a full ISR")
    key, value = _forged(group, topic, 999)

    producer = ck.Producer({"bootstrap.servers": trio.bootstrap, "enable.idempotence": False,
                            "message.send.max.retries": 0, "acks": "all"})
    result: list[ck.KafkaError | None] = []
    producer.produce(OFFSETS, value, key, partition=p,
                     on_delivery=lambda err, _m: result.append(err))
    producer.flush(30)
    assert result and result[0] is not None, "librdkafka's forged commit was taken"
    assert result[0].code() == ck.KafkaError.TOPIC_EXCEPTION

    # kafka-python will not send to an internal topic; the wire, to every broker, leader or not
    batch = encode_batch([Record(key=key, value=value, timestamp=1)])
    for broker in trio.brokers.values():
        with RawClient(broker.address) as client:
            assert errors_of(client.call(produce(data={(OFFSETS, p): batch}))) == {
                (OFFSETS, p): ErrorCode.invalid_topic_exception}

    leader = trio.partition_state(OFFSETS)[p][0]
    assert trio.brokers[leader].stop() == 0
    wait_until(lambda: trio.partition_state(OFFSETS)[p][0] not in (-1, leader), timeout=30,
               message="the group's coordinator moves")
    assert _committed(trio.bootstrap, group, topic) == 5
    trio.start(leader)


def test_a_commit_forged_into_the_log_is_ignored_at_load_with_one_warning(
        zookeeper_server: Server, tmp_path: Path) -> None:
    """A record put in ``__consumer_offsets`` by writing the log itself (past Produce, as a log
    from before the rule might hold one): the coordinator that loads the partition leaves it
    out and says so in one line of its log."""
    broker = start_broker(tmp_path / "b", zookeeper_server,
                          extra="offsets.topic.num.partitions=1\n")
    topic, group = "t", f"g-{uuid.uuid4().hex[:8]}"
    try:
        create_topic(broker, topic)
        _commit(broker.bootstrap, group, topic, 5)
    finally:
        assert broker.stop() == 0
    log = Log.open(tmp_path / "b" / "logs" / f"{OFFSETS}-0")
    try:
        key, value = _forged(group, topic, 999)
        epoch = log.latest_epoch
        log.append_as_leader(encode_batch([Record(key=key, value=value, timestamp=1)]),
                             0 if epoch is None else epoch)
    finally:
        log.close()
    url = broker.coordinator_url
    again = start_broker(tmp_path / "b", zookeeper_server,
                         settings=(coordinator_property(url), url))
    try:
        assert _committed(again.bootstrap, group, topic) == 5
        skipped = [line for line in again.log().splitlines()
                   if "not written by a group coordinator" in line]
        assert len(skipped) == 1, skipped
    finally:
        assert again.stop() == 0
