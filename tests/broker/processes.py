"""Broker processes for tests, through the product's launcher (:mod:`broker.cluster`): each on a
free loopback port (the broker binds port 0 and says which port it serves on), over a real
ZooKeeper or etcd, in a fresh chroot or key prefix; stopped by PID."""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

import coordinator
from broker.cluster import BrokerStartError, LaunchedBroker, coordinator_property
from broker.cluster import start_broker as launch_and_wait
from coordinator.admin import Admin
from kafkaclient.messages import build
from tests.servers import Server

from .wire_client import RawClient, request

REPO = Path(__file__).resolve().parents[2]

BrokerProcess = LaunchedBroker

__all__ = ["BrokerProcess", "coordinator_settings", "coordinator_url", "bytes_on_disk",
           "create_topic", "start_broker"]

TEST_SETTINGS = ("zookeeper.connection.timeout.ms=20000\n"
                 "controlled.shutdown.retry.backoff.ms=200\n"
                 "group.initial.rebalance.delay.ms=0\n")
"""What the tests' brokers set before ``extra`` (a later line wins): a patient first connection
on a busy machine, quick controlled-shutdown retries, and no initial rebalance delay (3 s for
every new consumer group by default; Kafka's own test harness sets 0 too; the delay itself is
tested where a test sets it explicitly)."""


def coordinator_url(server: Server) -> str:
    """A fresh chroot or key prefix on ``server``."""
    return server.url(f"/broker-{uuid.uuid4().hex[:10]}")


def coordinator_settings(server: Server) -> tuple[str, str]:
    """(the server.properties line naming a fresh chroot or prefix on ``server``, its URL): for
    processes that join one cluster (brokers, a dedicated controller)."""
    url = coordinator_url(server)
    return coordinator_property(url), url


def start_broker(directory: Path, server: Server, *, broker_id: int = 1, extra: str = "",
                 timeout: float = 90.0, settings: tuple[str, str] | None = None
                 ) -> BrokerProcess:
    """Start a broker and wait for its serving line (failing with its log if it exits).
    ``settings`` (from :func:`coordinator_settings`) puts it in an existing cluster; default:
    a fresh chroot or prefix of its own."""
    url = settings[1] if settings is not None else coordinator_url(server)
    try:
        return launch_and_wait(directory, broker_id, url, extra=TEST_SETTINGS + extra,
                               timeout=timeout)
    except BrokerStartError as exc:
        log = exc.log_path.read_text(errors="replace")[-3000:]
        raise AssertionError(f"broker did not start: {exc.reason}:\n{log}") from None


def create_topic(broker: BrokerProcess, name: str, partitions: int = 1,
                 timeout: float = 30.0) -> None:
    """Create ``name`` through the admin API and wait until the broker's Metadata gives every
    partition a leader."""
    client = coordinator.connect(broker.coordinator_url, timeout=10)
    try:
        Admin(client).create_topic(name, partitions, 1)
    finally:
        client.close()
    wait_for_leaders(broker, name, partitions, timeout)


def wait_for_leaders(broker: BrokerProcess, name: str, partitions: int,
                     timeout: float = 30.0) -> None:
    m = sys.modules[type(request(3, 12, topics=(), allow_auto_topic_creation=False,
                                 include_topic_authorized_operations=False)).__module__]
    body = request(3, 12, topics=(build(m.MetadataRequestTopic, topic_id=None, name=name),),
                   allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    deadline = time.monotonic() + timeout
    with RawClient(broker.address) as client:
        while True:
            (topic,) = client.call(body).topics
            if len(topic.partitions) == partitions and all(
                    p.leader_id >= 0 and p.error_code == 0 for p in topic.partitions):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"no leaders for {name} after {timeout}s: {topic}")
            time.sleep(0.05)


def bytes_on_disk(paths: Iterable[Path]) -> int:
    """The bytes of ``paths`` that still exist: a running broker deletes segments (retention, a
    replica moved away) between a listing and its ``stat``, and a deleted file holds nothing."""
    total = 0
    for path in paths:
        try:
            total += path.stat().st_size
        except FileNotFoundError:
            continue
    return total
