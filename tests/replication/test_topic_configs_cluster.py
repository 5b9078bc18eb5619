"""Per-topic configs on an embedded cluster, on memory, ZooKeeper and etcd: a change made
through the admin API reaches every broker through the change notification (min.insync.replicas
of 3 refuses acks=all with an ISR of 2 on that topic only, and lowering it takes effect without
a restart), a topic created with overrides starts with them, and a broker that was down while a
config changed starts with the change."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from coordinator import layout
from coordinator.codecs import TopicPartition
from interbroker.errors import ErrorCode
from node import EmbeddedCluster, embedded_replica_config
from replication.protocol import ACKS_ALL
from tests.replication.test_replica_manager_cluster import make_batch
from tests.waiting import wait_until


@pytest.fixture(params=["memory", "zookeeper", "etcd"])
def url(request: pytest.FixtureRequest) -> str | None:
    if request.param == "memory":
        return None
    server = request.getfixturevalue(f"{request.param}_server")
    return f"{request.param}://{server.address}/t{uuid.uuid4().hex[:12]}"


def cluster_on(url: str | None, root: Path) -> EmbeddedCluster:
    return EmbeddedCluster(3, url=url, root=root, replica_config=embedded_replica_config(),
                           connect_options={"session_timeout": 4.0} if url else None)


def acks_all(cluster: EmbeddedCluster, tp: TopicPartition) -> ErrorCode:
    rm = cluster.replica_manager(cluster.leader(tp))
    assert rm is not None
    return rm.produce(tp, make_batch()[0], acks=ACKS_ALL, timeout_ms=10_000).result(15).error


def test_min_insync_replicas_per_topic_follows_changes_without_restart(
        url: str | None, tmp_path: Path) -> None:
    with cluster_on(url, tmp_path) as cluster:
        (strict,) = cluster.create_topic("strict", assignment={0: [1, 2, 3]}, timeout=30)
        (loose,) = cluster.create_topic("loose", assignment={0: [1, 2, 3]}, timeout=30)
        cluster.admin.alter_topic_config("strict", {"min.insync.replicas": "3"})
        for b in cluster.broker_ids:
            wait_until(lambda b=b: cluster.replica_manager(b).config_for("strict")
                       .min_insync_replicas == 3, 20, message=f"broker {b} takes the change")
            assert cluster.replica_manager(b).config_for("loose").min_insync_replicas == 1
        assert acks_all(cluster, strict) is ErrorCode.NONE  # ISR of 3 still
        cluster.crash(3)
        cluster.wait_for_isr(strict, [1, 2], timeout=30)
        cluster.wait_for_isr(loose, [1, 2], timeout=30)
        wait_until(lambda: cluster.replica_manager(1).status(strict).isr == (1, 2), 20)
        assert acks_all(cluster, strict) is ErrorCode.NOT_ENOUGH_REPLICAS
        assert acks_all(cluster, loose) is ErrorCode.NONE
        cluster.admin.alter_topic_config("strict", delete=["min.insync.replicas"])
        wait_until(lambda: cluster.replica_manager(1).config_for("strict")
                   .min_insync_replicas == 1, 20, message="the leader takes the deletion")
        assert acks_all(cluster, strict) is ErrorCode.NONE


def test_created_with_overrides_and_a_broker_down_during_a_change(
        url: str | None, tmp_path: Path) -> None:
    with cluster_on(url, tmp_path) as cluster:
        (tp,) = cluster.create_topic("t", assignment={0: [1, 2, 3]}, timeout=30,
                                     config={"segment.bytes": "100000"})
        for b in cluster.broker_ids:  # read at partition creation: no notification needed
            partition = wait_until(lambda b=b: cluster.replica_manager(b).partition(tp), 20)
            assert partition.log.config.segment_bytes == 100000
        cluster.crash(2)
        cluster.admin.alter_topic_config("t", {"segment.bytes": "200000",
                                               "retention.ms": "60000"})
        wait_until(lambda: cluster.replica_manager(1).partition(tp).log.config.segment_bytes
                   == 200000, 20, message="a running broker takes the change")
        # The notification is gone by the time broker 2 comes back (as after 15 minutes).
        for name in cluster.metadata.config_change_notifications():
            cluster.metadata.coordinator.delete(f"{layout.CONFIG_CHANGES}/{name}")
        node = cluster.restart(2)
        assert node.replica_manager is not None
        log_config = node.replica_manager.partition(tp).log.config
        assert (log_config.segment_bytes, log_config.retention_ms) == (200000, 60000)
