"""Tiered storage (KIP-405) on three broker processes under librdkafka: a topic with
remote.storage.enable, small segments and no local retention; the leader copies rolled segments
to the filesystem remote store and deletes them locally once copied; a consumer reads from
offset 0 across the remote/local boundary and gets every record as produced; ListOffsets
answers the log start (-2), the local log start (-4) and the highest remote offset (-5); and
deleting the topic deletes its remote data."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import NewTopic

from broker.cluster import LaunchedBroker
from tests.broker.data.test_cluster_clients import Trio, serving
from tests.broker.processes import TEST_SETTINGS, coordinator_url
from tests.broker.protocol.test_apis import list_offsets
from tests.broker.wire_client import RawClient
from tests.servers import Server
from tests.waiting import wait_until

pytestmark = pytest.mark.servers

TOPIC = "t"  # the name test_apis.list_offsets asks about


class TieredTrio(Trio):
    def settings(self) -> str:
        return (TEST_SETTINGS + "replica.fetch.wait.max.ms=100\n"
                "replica.lag.time.max.ms=10000\n"
                "remote.log.storage.system.enable=true\n"
                f"remote.log.storage.url=file://{self.root / 'remote'}\n"
                "remote.log.manager.task.interval.ms=200\n"
                "log.retention.check.interval.ms=200\n")


@pytest.fixture
def trio(zookeeper_server: Server, tmp_path: Path) -> Iterator[TieredTrio]:
    with serving(TieredTrio(coordinator_url(zookeeper_server), tmp_path, {})) as cluster:
        yield cluster


def list_offsets_at(broker: LaunchedBroker, version: int, timestamps: list[int]
                    ) -> list[tuple[int, int]]:
    with RawClient(broker.address) as client:
        answer = client.call(list_offsets(version, timestamps))
    return [(p.offset, getattr(p, "leader_epoch", -1)) for p in answer.topics[0].partitions]


def copied_ranges(remote: Path) -> list[tuple[int, int, int]]:
    """(start, end, broker) of every segment COPY_SEGMENT_FINISHED in the metadata store."""
    out = []
    for started in remote.glob("__remote_log_metadata/*/*.0.json"):
        if started.with_name(started.name.replace(".0.json", ".1.json")).exists():
            body = json.loads(started.read_bytes())
            out.append((body["start_offset"], body["end_offset"], body["broker_id"]))
    return sorted(out)


def produce(bootstrap: str, values: list[bytes]) -> None:
    producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all",
                            "linger.ms": 0, "batch.num.messages": 4})
    failed: list[ck.KafkaError] = []
    for i, value in enumerate(values):
        producer.produce(TOPIC, value=value,
                         on_delivery=lambda e, m: failed.append(e) if e else None)
        if i % 20 == 19:
            producer.flush(30)
    assert producer.flush(30) == 0 and failed == []


def consume_from_zero(bootstrap: str, expect: int) -> list[tuple[int, bytes | None]]:
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                            "enable.auto.commit": False, "message.max.bytes": 4000,
                            "fetch.max.bytes": 4000, "max.partition.fetch.bytes": 2000})
    consumer.assign([ck.TopicPartition(TOPIC, 0, ck.OFFSET_BEGINNING)])
    got: list[tuple[int, bytes | None]] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < expect and time.monotonic() < deadline:
            for msg in consumer.consume(100, 0.5):
                assert msg.error() is None, msg.error()
                got.append((msg.offset(), msg.value()))
    finally:
        consumer.close()
    return got


def test_a_tiered_topic_on_broker_processes(trio: TieredTrio) -> None:
    admin = trio.admin()  # kept while its requests run: a dropped client cancels them
    config = {"remote.storage.enable": "true", "segment.bytes": "1500",
              "local.retention.bytes": "0", "min.insync.replicas": "2"}
    assert admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=3,
                                         config=config)])[TOPIC].result(30) is None
    wait_until(lambda: len(trio.partition_state(TOPIC)) == 1 and all(
        leader >= 0 and len(isr) == 3 for leader, isr in trio.partition_state(TOPIC).values()),
        timeout=30, message="a leader and a full ISR")
    sent = [b"record %04d " % i + bytes([i % 251]) * 90 for i in range(240)]
    produce(trio.bootstrap, sent)

    leader = trio.brokers[trio.partition_state(TOPIC)[0][0]]
    remote = trio.root / "remote"
    # The leader copies rolled segments and, each copied, deletes it locally: the local log
    # now starts above 0, the whole log still at 0.
    wait_until(lambda: list_offsets_at(leader, 8, [-4])[0][0] > 100, timeout=60,
               message="segments copied to remote storage and deleted locally")
    (earliest, _e), (local, local_epoch), (tiered, _t), (latest, _l) = list_offsets_at(
        leader, 9, [-2, -4, -5, -1])
    assert earliest == 0 and latest == 240
    assert 100 < local <= tiered + 1 <= latest
    assert local_epoch >= 0
    # Older versions are answered the same (Kafka's broker gates nothing; clients send -4
    # from version 8).
    (v1_earliest, _), (v1_local, _) = list_offsets_at(leader, 1, [-2, -4])
    assert v1_earliest == 0 and v1_local >= local
    assert len(list(remote.rglob("*.log"))) >= 3

    # A consumer from offset 0 reads across the remote/local boundary: every record, in order,
    # byte for byte.
    got = consume_from_zero(trio.bootstrap, len(sent))
    assert [o for o, _v in got] == list(range(len(sent)))
    assert [v for _o, v in got] == sent

    log = leader.log()
    assert "copied segment" in log and "to remote storage as" in log
    assert "deleting local segment" in log

    # The leader goes; the new one resumes copying after the highest offset of its lineage
    # (nothing copied twice, nothing skipped) and serves the whole log, remote part included.
    old_id = trio.partition_state(TOPIC)[0][0]
    copied_before = copied_ranges(remote)
    assert trio.brokers[old_id].stop() == 0
    wait_until(lambda: trio.partition_state(TOPIC)[0][0] not in (-1, old_id), timeout=30,
               message="a new leader")
    new_id = trio.partition_state(TOPIC)[0][0]
    more = [b"later %04d " % i + bytes([i % 13]) * 90 for i in range(80)]
    produce(trio.bootstrap, more)
    wait_until(lambda: any(b == new_id for _s, _e, b in copied_ranges(remote)), timeout=60,
               message="the new leader copies")
    ranges = copied_ranges(remote)
    assert ranges[:len(copied_before)] == copied_before
    assert all(nxt[0] == cur[1] + 1 for cur, nxt in zip(ranges, ranges[1:], strict=False)), \
        ranges
    got = consume_from_zero(trio.bootstrap, len(sent) + len(more))
    assert [v for _o, v in got] == sent + more
    assert [o for o, _v in got] == list(range(len(sent) + len(more)))
    assert "copied segment" in trio.brokers[new_id].log()
    trio.start(old_id)

    # Deleting the topic deletes its remote data.
    assert admin.delete_topics([TOPIC])[TOPIC].result(30) is None
    wait_until(lambda: not list(remote.rglob("*.log")), timeout=60,
               message="the topic's remote segments deleted")
