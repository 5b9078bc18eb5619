"""The embedded cluster on a real ZooKeeper server: each broker its own ZooKeeper session; a
leader crash (its session closed, its ephemeral registration gone), a restart with a new broker
epoch, catch-up and a preferred election, with every acknowledged write kept exactly once."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from node import EmbeddedCluster, check_acknowledged, embedded_replica_config
from tests.servers import Server

pytestmark = pytest.mark.servers


def test_leader_crash_restart_and_preferred_election_on_zookeeper(
    zookeeper_server: Server, tmp_path: Path
) -> None:
    url = f"zookeeper://{zookeeper_server.address}/t{uuid.uuid4().hex[:12]}"
    config = embedded_replica_config(min_insync_replicas=2)
    with EmbeddedCluster(3, url=url, root=tmp_path, replica_config=config,
                         connect_options={"session_timeout": 4.0}) as cluster:
        tps = cluster.create_topic("events", partitions=2, replication_factor=3, timeout=30)
        tp = tps[0]
        preferred = cluster.replicas(tp)[0]
        epochs = {b: cluster.node(b).epoch for b in cluster.broker_ids}
        acked: dict[int, bytes] = {}
        with cluster.producer(max_in_flight=8) as producer:
            futures = [(v, producer.send(tp, [v])) for v in (f"a{i}".encode() for i in range(50))]
            cluster.crash(preferred, lose_unflushed=True)
            state = cluster.wait_for_leader(tp, excluding=[preferred], timeout=30)
            futures += [(v, producer.send(tp, [v])) for v in (f"b{i}".encode() for i in range(50))]
            for value, future in futures:
                acked[future.result(30).base_offset] = value
            node = cluster.restart(preferred)
            assert node.epoch is not None and node.epoch > epochs[preferred]
            cluster.wait_for_isr(tp, timeout=30)
            cluster.elect_preferred([tp], timeout=30)
            final = cluster.wait_for_leader(tp, leader=preferred, timeout=30)
            assert final.leader_epoch > state.leader_epoch
            for v in (f"c{i}".encode() for i in range(20)):
                acked[producer.produce(tp, [v]).base_offset] = v
        check = check_acknowledged(cluster.consumer().read_all(tp), acked)
        assert check.ok and check.acknowledged == 120, check
        assert cluster.wait_for_caught_up(tp, timeout=30) == 120  # no duplicates either
