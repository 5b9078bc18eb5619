"""A broker process beside topic nodes another tool wrote against Kafka's rules (illegal names,
a malformed assignment): it keeps serving, creates no log directory for them, logs one warning
for each and no traceback, however many metadata updates follow."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import coordinator
from coordinator import layout
from coordinator.codecs import TopicAssignment
from tests.broker.processes import create_topic, start_broker
from tests.servers import Server

BAD_NAMES = ("a b", "x" * 300, "ü")
BAD_NODES = {
    "neg-ids": json.dumps({"version": 3, "partitions": {"0": [-1]}}).encode(),
    "wrong-types": json.dumps({"version": 3, "partitions": {"0": {"1": 1}}}).encode(),
}


@pytest.mark.servers
def test_a_broker_skips_bad_topic_nodes_once_and_keeps_serving(
        tmp_path: Path, zookeeper_server: Server) -> None:
    broker = start_broker(tmp_path, zookeeper_server)
    try:
        create_topic(broker, "good")
        client = coordinator.connect(broker.coordinator_url, timeout=10)
        try:
            assignment = TopicAssignment(topic="x", partitions={0: (1,), 1: (1,)}).encode()
            for name in BAD_NAMES:
                client.create(layout.topic(name), assignment)
            for name, data in BAD_NODES.items():
                client.create(layout.topic(name), data)
            for n in range(3):  # metadata updates after the bad nodes
                create_topic(broker, f"after-{n}", partitions=2)
            for name in (*BAD_NAMES, *BAD_NODES):
                assert client.exists(layout.partitions(name)) is None, name
        finally:
            client.close()
        assert broker.running()
        log = broker.log()
    finally:
        broker.stop()
    on_disk = {p.name for p in (tmp_path / "logs").iterdir() if p.is_dir()}
    assert on_disk == {"good-0", "after-0-0", "after-0-1", "after-1-0", "after-1-1",
                       "after-2-0", "after-2-1"}, on_disk
    assert "Traceback" not in log, log[-3000:]
    for name in (*BAD_NAMES, *BAD_NODES):
        warnings = re.findall(
            r"WARNING [\w.]+: controller 1: skipping topic " + re.escape(f"{name!r:.300}"), log)
        assert len(warnings) == 1, (name, log[-3000:])
