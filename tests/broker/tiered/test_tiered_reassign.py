"""A tiered topic (KIP-405) on broker processes, as an operator meets it: ``partctl topics
describe`` shows each partition's log start, local log start and remote bytes, read from the
leaders over Kafka's protocol; and a reassignment to brokers that never held the partition
moves only the local part of the log (the new replicas start at the leader's local log start,
building their state below it from remote storage), after which a librdkafka consumer still
reads everything from offset 0, with the old replicas gone."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import NewTopic

from partctl.cli import main
from tests.broker.data.test_cluster_clients import serving
from tests.broker.processes import bytes_on_disk, coordinator_url
from tests.servers import Server
from tests.waiting import wait_until

from .test_tiered_processes import (
    TOPIC,
    TieredTrio,
    consume_from_zero,
    copied_ranges,
    list_offsets_at,
    produce,
)

pytestmark = pytest.mark.servers

SEGMENT = 4000
LOCAL = 8000


@pytest.fixture
def cluster(zookeeper_server: Server, tmp_path: Path) -> Iterator[TieredTrio]:
    with serving(TieredTrio(coordinator_url(zookeeper_server), tmp_path, {}),
                 only_running=True) as trio:
        yield trio


def create_tiered(trio: TieredTrio, replicas: list[int]) -> None:
    admin = trio.admin()  # kept while its request runs
    config = {"remote.storage.enable": "true", "segment.bytes": str(SEGMENT),
              "local.retention.bytes": str(LOCAL), "min.insync.replicas": "1"}
    topic = NewTopic(TOPIC, num_partitions=1, replica_assignment=[replicas], config=config)
    assert admin.create_topics([topic])[TOPIC].result(30) is None
    wait_until(lambda: len(trio.partition_state(TOPIC)) == 1 and all(
        leader >= 0 and len(isr) == len(replicas)
        for leader, isr in trio.partition_state(TOPIC).values()),
        timeout=30, message="a leader and a full ISR")


def remote_log_bytes(remote: Path) -> int:
    """The bytes of the .log files in the remote store (every copy there finished)."""
    return bytes_on_disk(p for p in remote.rglob("*.log") if "__remote_log_metadata" not in p.parts)


def partition_bytes(trio: TieredTrio, broker_id: int) -> int:
    directory = trio.root / f"broker-{broker_id}" / "logs" / f"{TOPIC}-0"
    return bytes_on_disk(directory.glob("*.log"))


def describe(trio: TieredTrio, topic: str) -> str:
    out = io.StringIO()
    assert main(["topics", "describe", "--coordinator", trio.url, "--topic", topic],
                out=out) == 0
    return out.getvalue()


def field(line: str, name: str) -> str:
    return next(part.split(": ", 1)[1] for part in line.split("\t")
                if part.startswith(f"{name}: "))


def tiered_and_settled(trio: TieredTrio, leader_id: int) -> None:
    """Wait until the leader copied what it can and local retention kept only the recent part:
    local.retention.bytes and the active segment, which is never copied."""
    leader = trio.brokers[leader_id]

    def settled() -> bool:
        (local, _e), (tiered, _t) = list_offsets_at(leader, 9, [-4, -5])
        return (local > 0 and tiered >= local - 1
                and partition_bytes(trio, leader_id) <= LOCAL + 2 * SEGMENT)
    wait_until(settled, timeout=90, message="copies and local retention to settle")


def test_topics_describe_shows_both_tiers_of_a_tiered_topic(cluster: TieredTrio) -> None:
    create_tiered(cluster, [1, 2])
    admin = cluster.admin()
    assert admin.create_topics([NewTopic("plain", num_partitions=1, replication_factor=1)]
                               )["plain"].result(30) is None
    sent = [b"record %05d " % i + bytes([i % 251]) * 90 for i in range(600)]
    produce(cluster.bootstrap, sent)
    leader_id = cluster.partition_state(TOPIC)[0][0]
    tiered_and_settled(cluster, leader_id)

    text = describe(cluster, TOPIC)
    line = next(x for x in text.splitlines() if "Partition: 0" in x)
    (local, _e), = list_offsets_at(cluster.brokers[leader_id], 9, [-4])
    assert field(line, "LogStart") == "0"
    assert int(field(line, "LocalLogStart")) == local > 0
    assert int(field(line, "RemoteBytes")) == remote_log_bytes(cluster.root / "remote") > 0
    # A topic that is not tiered shows no such figures.
    plain = describe(cluster, "plain")
    assert "Partition: 0" in plain and "RemoteBytes" not in plain and "LogStart" not in plain


def test_topics_create_and_alter_config_of_a_tiered_topic_through_the_coordinator(
        cluster: TieredTrio) -> None:
    """The CLI writes to the coordinator; it asks the live brokers whether they tier
    (remote.log.storage.system.enable) and validates against that, as a broker would. Turning
    remote storage off again is refused, as Kafka refuses it."""
    url = ["--coordinator", cluster.url]

    def run(*argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        return main(list(argv), out=out, err=err), out.getvalue(), err.getvalue()

    code, out, err = run("topics", "create", *url, "--topic", "viacli", "--partitions", "1",
                         "--replication-factor", "2", "--config", "remote.storage.enable=true",
                         "--config", "segment.bytes=2000", "--config",
                         "local.retention.bytes=0")
    assert (code, err) == (0, ""), err
    code, out, err = run("topics", "alter-config", *url, "--topic", "viacli", "--set",
                         "local.retention.ms=60000")
    assert (code, err) == (0, ""), err
    code, out, err = run("topics", "alter-config", *url, "--topic", "viacli", "--set",
                         "remote.storage.enable=false")
    assert (code, out) == (1, "")
    assert err == ("partctl: error: Disabling remote storage feature on the topic level is "
                   "not supported.\n")
    wait_until(lambda: len(cluster.partition_state("viacli")) == 1
               and len(cluster.partition_state("viacli")[0][1]) == 2, timeout=30,
               message="viacli's leader and ISR")
    # The brokers tier it: its rolled segments are copied and leave local disk.
    producer_values = [b"v %04d " % i + b"x" * 90 for i in range(100)]
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                            "linger.ms": 0, "batch.num.messages": 4})
    failed: list[object] = []
    for value in producer_values:
        producer.produce("viacli", value=value,
                         on_delivery=lambda e, _m: failed.append(e) if e else None)
        producer.poll(0)
    assert producer.flush(30) == 0 and failed == []
    leader = cluster.brokers[cluster.partition_state("viacli")[0][0]]
    wait_until(lambda: "viacli" in describe(cluster, "viacli")
               and int(field(next(x for x in describe(cluster, "viacli").splitlines()
                                  if "Partition: 0" in x), "RemoteBytes")) > 0,
               timeout=60, message="viacli tiered")
    assert "copied segment" in leader.log()


def test_a_reassigned_tiered_partition_moves_only_its_local_part(cluster: TieredTrio,
                                                                  tmp_path: Path) -> None:
    create_tiered(cluster, [1, 2])
    sent = [b"record %05d " % i + bytes([i % 251]) * 90 for i in range(1200)]
    produce(cluster.bootstrap, sent)
    old_leader = cluster.partition_state(TOPIC)[0][0]
    tiered_and_settled(cluster, old_leader)
    remote = cluster.root / "remote"
    remote_bytes = remote_log_bytes(remote)
    local_bytes = partition_bytes(cluster, old_leader)
    total = remote_bytes + local_bytes
    assert remote_bytes > 4 * local_bytes  # the log is mostly remote

    # Broker 4 joins; the partition moves to brokers 3 and 4, which never held it.
    cluster.start(4)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": TOPIC, "partition": 0, "replicas": [3, 4]}]}))
    out = io.StringIO()
    assert main(["reassign", "execute", "--coordinator", cluster.url,
                 "--reassignment-json-file", str(plan), "--timeout", "120"], out=out) == 0, \
        out.getvalue()
    wait_until(lambda: cluster.partition_state(TOPIC)[0][1] in ((3, 4), (4, 3))
               and cluster.partition_state(TOPIC)[0][0] in (3, 4), timeout=60,
               message="the ISR is the new replicas")
    # Each new replica wrote about the local part, not the whole log.
    for b in (3, 4):
        moved = partition_bytes(cluster, b)
        assert moved <= local_bytes + 2 * SEGMENT, (b, moved, local_bytes, total)
        assert moved < total / 4, (b, moved, total)
        assert "log restarted at" in cluster.brokers[b].log()  # on remote state, not offset 0

    # The old replicas are gone (deleted by the reassignment, and their brokers stopped): a
    # consumer still reads every record from offset 0, the remote part served by the new
    # leader.
    wait_until(lambda: not (cluster.root / "broker-1" / "logs" / f"{TOPIC}-0").exists()
               and not (cluster.root / "broker-2" / "logs" / f"{TOPIC}-0").exists(),
               timeout=60, message="the old replicas deleted")
    for b in (1, 2):
        assert cluster.brokers[b].stop() == 0
    got = consume_from_zero(cluster.bootstrap, len(sent))
    assert [o for o, _v in got] == list(range(len(sent)))
    assert [v for _o, v in got] == sent
    # Nothing was copied twice by the new leader.
    ranges = copied_ranges(remote)
    assert all(nxt[0] == cur[1] + 1 for cur, nxt in zip(ranges, ranges[1:], strict=False))
