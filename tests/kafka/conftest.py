"""Fixtures of the reference Kafka tests, one cluster per test module: a Kafka 3.9.1 broker in
ZooKeeper mode on the session's ZooKeeper, a Kafka 4.x node in KRaft combined mode, and three
partctl broker processes on the session's ZooKeeper. A version whose jars are not resolved
skips loudly (fails under ``PARTCTL_REQUIRE_SERVERS=1``), as a missing server does."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.cluster import BrokerStartError, LocalCluster, start_cluster
from tests.broker.processes import TEST_SETTINGS
from tests.servers import Server, unavailable

from .harness import (
    KAFKA_3,
    KAFKA_4,
    KafkaCluster,
    kafka_available,
    kafka_classpath,
    start_kafka_kraft,
    start_kafka_zk,
)

__all__ = ["partctl_cluster", "require_kafka"]


def require_kafka(version: str) -> str:
    """``version``'s classpath; skips the test loudly when its jars are not resolved (fails it
    under ``PARTCTL_REQUIRE_SERVERS=1``)."""
    if not kafka_available(version):
        unavailable(f"Apache Kafka {version} is not resolved: run `bash tests/kafka/resolve.sh`")
    return kafka_classpath(version)


@pytest.fixture(scope="module")
def kafka3_zk(zookeeper_server: Server, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[KafkaCluster]:
    """One Kafka 3.9.1 broker (id 1) in ZooKeeper mode, on the session's ZooKeeper."""
    require_kafka(KAFKA_3)
    cluster = start_kafka_zk(tmp_path_factory.mktemp("kafka3-zk"), zookeeper_server,
                             version=KAFKA_3)
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def kafka4_kraft(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """One Kafka 4.x node (id 1) in KRaft combined mode."""
    require_kafka(KAFKA_4)
    cluster = start_kafka_kraft(tmp_path_factory.mktemp("kafka4-kraft"), version=KAFKA_4)
    yield cluster
    cluster.stop()


def _settings(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


@pytest.fixture(scope="module")
def partctl_three(zookeeper_server: Server, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[LocalCluster]:
    """partctl brokers 1-3, three processes in a fresh chroot of the session's ZooKeeper
    (``.bootstrap_servers``, ``.brokers``, ``.coordinator_url``)."""
    url = zookeeper_server.url(f"/kref-{uuid.uuid4().hex[:10]}")
    yield from partctl_cluster(url, tmp_path_factory.mktemp("partctl-three"),
                               _settings(TEST_SETTINGS))


def partctl_cluster(url: str, directory: Path, extra: dict[str, str]
                    ) -> Iterator[LocalCluster]:
    """Three partctl broker processes on ``url``, for a fixture to yield from: a broker that
    does not start fails with its log's tail, and each must stop cleanly at the end."""
    try:
        cluster = start_cluster(3, coordinator_url=url, directory=directory, extra=extra)
    except BrokerStartError as exc:
        log = exc.log_path.read_text(errors="replace")[-3000:]
        raise AssertionError(f"partctl broker {exc.broker_id} did not start: {exc.reason}:\n"
                             f"{log}") from None
    yield cluster
    statuses = cluster.stop()
    assert all(status == 0 for status in statuses.values()), statuses
