"""A throttled reassignment on three broker processes (over real ZooKeeper): ``partctl reassign
execute --throttle`` adds a replica of a partition holding a few MiB at about 1 MB/s, so the
copy takes about size/rate; the throttle configs are set while it runs and ``reassign verify``
removes them. Only the replicas named are throttled: a partition beside a throttled one,
copied to the same follower from the same leader, is not slowed. The leader's throttle alone
holds a copy to its rate too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka as ck
import pytest

import coordinator
from coordinator.admin import Admin
from coordinator.metadata import MetadataClient
from rebalancer import PartitionMove, Plan
from rebalancer.throttles import set_throttles
from tests.broker.processes import bytes_on_disk, coordinator_url
from tests.servers import Server

from .test_cluster_clients import Trio, serving

pytestmark = pytest.mark.servers

REPO = Path(__file__).resolve().parents[3]
RATE = 1_000_000  # bytes per second
VALUE = 32 * 1024
COUNT = 128  # 4 MiB
RATE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")


@pytest.fixture
def trio(zookeeper_server: Server, tmp_path: Path) -> Iterator[Trio]:
    with serving(Trio(coordinator_url(zookeeper_server), tmp_path, {})) as cluster:
        yield cluster


def produce(bootstrap: str, topic: str, count: int) -> None:
    """``count`` incompressible values of VALUE bytes, flushed."""
    producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5,
                            "batch.size": 64 * 1024, "compression.type": "none"})
    failed: list[ck.KafkaError] = []
    for i in range(count):
        producer.produce(topic, value=os.urandom(VALUE), partition=0,
                         on_delivery=lambda e, m: failed.append(e) if e else None)
        if i % 16 == 15:
            producer.poll(0)
    assert producer.flush(60) == 0 and failed == []


def log_size(trio: Trio, broker: int, tp: str) -> int:
    return bytes_on_disk((trio.root / f"broker-{broker}" / "logs").glob(f"{tp}/*.log"))


def filled(trio: Trio, broker: int, tp: str, size: int, out: dict[str, float]) -> None:
    """When ``tp``'s log appears on ``broker`` (``began``, unless set) and when it holds
    ``size`` bytes (``ended``)."""
    logs = trio.root / f"broker-{broker}" / "logs" / tp
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        now = time.monotonic()
        if logs.is_dir():
            out.setdefault("began", now)
            if log_size(trio, broker, tp) >= size:
                out["ended"] = now
                return
        time.sleep(0.01)


def cli(url: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "partctl", *argv, "--coordinator", url],
                          capture_output=True, text=True, timeout=180, cwd=REPO)


def move(trio: Trio, plan: Path, moves: dict[str, list[int]], *extra: str,
         watch: dict[str, tuple[int, int]]) -> tuple[subprocess.CompletedProcess[str],
                                                     dict[str, dict[str, float]]]:
    """``partctl reassign execute`` of ``moves`` ("topic-0" -> replicas) with ``extra``
    options, timing each ``watch`` partition's copy (to broker, of size) as it runs."""
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": t.rsplit("-", 1)[0], "partition": 0, "replicas": r}
        for t, r in moves.items()]}))
    times: dict[str, dict[str, float]] = {tp: {} for tp in watch}
    copiers = [threading.Thread(target=filled, args=(trio, b, tp, n, times[tp]))
               for tp, (b, n) in watch.items()]
    for c in copiers:
        c.start()
    done = cli(trio.url, "reassign", "execute", "--reassignment-json-file", str(plan),
               "--poll-interval", "0.05", "--timeout", "120", *extra)
    for c in copiers:
        c.join(60)
    return done, times


def took(times: dict[str, float]) -> float:
    return times["ended"] - times["began"]


def test_a_throttled_move_takes_size_over_rate_and_verify_removes_the_throttle(
        trio: Trio, tmp_path: Path) -> None:
    client = coordinator.connect(trio.url, timeout=10)
    try:
        admin, md = Admin(client), MetadataClient(client)
        for topic in ("big", "big2", "big3", "free"):
            admin.create_topic(topic, assignment={0: [1]})
        time.sleep(1)
        for topic in ("big", "big2", "big3", "free"):
            produce(trio.bootstrap, topic, COUNT)
        size = log_size(trio, 1, "big-0")
        assert size >= COUNT * VALUE
        expected = size / RATE
        seen: dict[str, object] = {}

        def during() -> None:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and md.reassignment() is None:
                time.sleep(0.02)
            seen["configs"] = {b: (c.value if (c := md.broker_config(b)) else None)
                               for b in (1, 2, 3)}
            seen["topic"] = admin.topic_config("big")

        watcher = threading.Thread(target=during)
        watcher.start()
        done, times = move(trio, tmp_path / "plan.json", {"big-0": [1, 3]}, "--throttle",
                           "1MB/s", watch={"big-0": (3, size)})
        watcher.join(60)
        assert done.returncode == 0, (done.stdout, done.stderr)
        assert 0.7 * expected <= took(times["big-0"]) <= 1.5 * expected, (times, expected)
        rates = {k: str(RATE) for k in RATE_KEYS}
        assert seen["configs"] == {1: rates, 2: None, 3: rates}, seen
        assert seen["topic"] == {"leader.replication.throttled.replicas": "0:1",
                                 "follower.replication.throttled.replicas": "0:3"}, seen
        assert md.broker_config(1).value == rates  # kept until verify
        done = cli(trio.url, "reassign", "verify", "--reassignment-json-file",
                   str(tmp_path / "plan.json"))
        assert done.returncode == 0, (done.stdout, done.stderr)
        assert "Throttles removed" in done.stdout
        for b in (1, 3):
            assert md.broker_config(b).value == {}
        assert admin.topic_config("big") == {}

        # Only the replicas named are throttled: big2-0 and free-0 both gain a replica on
        # broker 2, from leader 1, through one fetcher, with the rates set on both brokers;
        # only big2-0 is in the throttled lists.
        set_throttles(md, Plan(partitions=(
            PartitionMove(topic="big2", partition=0, replicas=(1, 2)),)), RATE)
        assert admin.topic_config("free") == {}
        done, times = move(trio, tmp_path / "plan2.json",
                           {"big2-0": [1, 2], "free-0": [1, 2]},
                           watch={"big2-0": (2, size), "free-0": (2, log_size(trio, 1, "free-0"))})
        assert done.returncode == 0, (done.stdout, done.stderr)
        assert 0.7 * expected <= took(times["big2-0"]) <= 1.5 * expected, (times, expected)
        assert took(times["free-0"]) < expected / 4, times

        # Each side on its own: only the leader's rate (broker 1) and its list, so broker
        # 3's fetcher asks freely and the leader holds back what it sends.
        md.set_broker_config(1, {RATE_KEYS[0]: str(RATE)}, md.broker_config(1).version)
        admin.alter_topic_config("big3", set={"leader.replication.throttled.replicas": "0:1"})
        done, times = move(trio, tmp_path / "plan3.json", {"big3-0": [1, 3]},
                           watch={"big3-0": (3, size)})
        assert done.returncode == 0, (done.stdout, done.stderr)
        assert 0.7 * expected <= took(times["big3-0"]) <= 1.5 * expected, (times, expected)
    finally:
        client.close()
