"""A broker process's start leaves Kafka's startup nodes: the persistent paths and the cluster id."""

from __future__ import annotations

import json
from pathlib import Path

from coordinator import layout
from node import EmbeddedCluster


def test_a_broker_node_start_creates_the_cluster_id_and_kafkas_persistent_paths(
        tmp_path: Path) -> None:
    with EmbeddedCluster(2, root=tmp_path) as cluster:
        client = cluster.metadata.coordinator
        data, stat = client.get(layout.CLUSTER_ID)
        cluster_id = json.loads(data)["id"]
        assert list(json.loads(data)) == ["version", "id"] and len(cluster_id) == 22
        assert stat.version == 0  # the second broker read it, did not write it
        assert all(client.exists(p) is not None for p in layout.PERSISTENT_PATHS)
