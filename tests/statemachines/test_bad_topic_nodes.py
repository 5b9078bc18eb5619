"""Topic nodes that Kafka's layout forbids, written into the store by another tool (an illegal
name, an assignment or a partition state whose JSON is malformed), beside good topics: the
controllers skip each with one warning, however many metadata updates meet it again; the good
topics get their leaders, through a failover too; nothing is elected or sent for the bad ones."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from coordinator import connect, layout
from coordinator.admin import Admin
from coordinator.codecs import TopicAssignment, TopicPartition
from coordinator.metadata import MetadataClient
from interbroker.requests import LeaderAndIsrRequest, UpdateMetadataRequest
from statemachines import InProcessNetwork, Participant
from tests.contract.conftest import Harness, _harness
from tests.recording_broker import RecordingBroker
from tests.waiting import wait_until

GOOD_JSON = TopicAssignment(topic="x", partitions={0: (1, 2, 3), 1: (2, 3, 1)}).encode()

BAD_NAMES = ("a b", "x" * 300, "ü", "a+b")
"""Legal as node names in every backend, illegal as Kafka topic names."""

BAD_NODES = {
    "neg-ids": json.dumps({"version": 3, "partitions": {"0": [-1, 2]}}).encode(),
    "wrong-types": json.dumps({"version": 3, "partitions": {"0": "1,2"}}).encode(),
    "str-ids": json.dumps({"version": 3, "partitions": {"0": ["1", "2"]}}).encode(),
    "huge-list": json.dumps({"version": 3, "partitions": {"0": list(range(50_000))}}).encode(),
    "dup-ids": json.dumps({"version": 3, "partitions": {"0": [1, 1]}}).encode(),
    "neg-partition": json.dumps({"version": 3, "partitions": {"-1": [1]}}).encode(),
    "not-json": b"\xff{not json",
}
"""Legal names whose assignment another tool wrote malformed (Kafka's layout: version 3,
partitions as an object of decimal partition numbers to lists of broker ids)."""

ALL_BAD = (*BAD_NAMES, *BAD_NODES)


class Cluster:
    def __init__(self, url: str) -> None:
        self.url = url
        self.network = InProcessNetwork()
        self.participants: dict[int, Participant] = {}
        self.client = connect(url, timeout=10)
        self.admin = Admin(self.client)
        self.metadata = MetadataClient(self.client)

    def add(self, broker_id: int) -> Participant:
        p = Participant(self.url, broker_id, handler=RecordingBroker, network=self.network,
                        connect_options={"session_timeout": 4.0})
        self.participants[broker_id] = p.start()
        return p

    def active(self) -> Participant:
        def one() -> Participant | None:
            actives = [p for p in self.participants.values() if p.controller.active]
            return actives[0] if len(actives) == 1 else None

        return wait_until(one, timeout=30, message="one active controller")

    def leader(self, topic: str, partition: int) -> int | None:
        tp = TopicPartition(topic, partition)
        item = self.metadata.partition_states([tp])[tp]
        return None if item is None else item.value.leader

    def wait_leaders(self, topic: str, partitions: int, live: set[int]) -> None:
        for p in range(partitions):
            wait_until(lambda p=p: self.leader(topic, p) in live, timeout=30,
                       message=f"{topic}-{p} has a live leader")

    def close(self) -> None:
        for p in list(self.participants.values()):
            p.close()
        self.client.close()


@pytest.fixture(params=["memory", "zookeeper"])
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    harness: Harness = _harness(request)
    c = Cluster(harness.url())
    yield c
    c.close()
    harness.close()


def write_bad_nodes(c: Cluster) -> None:
    """What another tool might write: nodes straight into the store, no admin checks."""
    for name in BAD_NAMES:
        c.client.create(layout.topic(name), GOOD_JSON)
    for name, data in BAD_NODES.items():
        c.client.create(layout.topic(name), data)


def skip_warnings(caplog: pytest.LogCaptureFixture, who: str) -> dict[str, int]:
    """How many warnings ``who`` logged about skipping each bad topic."""
    counts = dict.fromkeys(ALL_BAD, 0)
    for record in caplog.records:
        text = record.getMessage()
        if record.levelno != logging.WARNING or not text.startswith(f"{who}: skipping topic "):
            continue
        for name in ALL_BAD:
            if text.startswith(f"{who}: skipping topic {name!r:.300}"):
                counts[name] += 1
    return counts


def told_of(c: Cluster, topics: set[str]) -> set[str]:
    """Which of ``topics`` any broker was sent a LeaderAndIsr or UpdateMetadata for."""
    seen: set[str] = set()
    for p in c.participants.values():
        handler = p.handler
        assert isinstance(handler, RecordingBroker)
        for request in handler.received():
            if isinstance(request, LeaderAndIsrRequest | UpdateMetadataRequest):
                seen.update(e.topic for e in request.partitions if e.topic in topics)
    return seen


def test_bad_topic_nodes_are_skipped_with_one_warning_each(
        cluster: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    c = cluster
    for b in (1, 2, 3, 4):
        c.add(b)
    first = c.active()
    wait_until(lambda: set(first.controller.ctx.brokers) == {1, 2, 3, 4}, timeout=30,
               message="the controller sees every broker")
    c.admin.create_topic("good", assignment={0: [1, 2, 3], 1: [2, 3, 4]})
    c.wait_leaders("good", 2, {1, 2, 3, 4})
    epoch = first.controller.epoch

    write_bad_nodes(c)
    # Several metadata updates after the bad nodes: topics created, a broker gone.
    for n in range(3):
        c.admin.create_topic(f"after-{n}", assignment={0: [1, 2, 3, 4]})
        c.wait_leaders(f"after-{n}", 1, {1, 2, 3, 4})
    gone = next(b for b in (1, 2, 3, 4) if b != first.id)
    c.participants.pop(gone).close()
    wait_until(lambda: gone not in first.controller.ctx.brokers, timeout=30,
               message="the controller saw the broker go")
    c.admin.create_topic("after-gone", assignment={0: [first.id]})
    c.wait_leaders("after-gone", 1, {first.id})

    assert first.controller.active and first.controller.epoch == epoch, "the controller resigned"
    assert not set(first.controller.ctx.topics) & set(ALL_BAD)
    who = f"controller {first.id}"
    assert skip_warnings(caplog, who) == dict.fromkeys(ALL_BAD, 1)

    # A failover: the new controller reads the store (its view, the topic list) and skips them.
    c.participants.pop(first.id).close()
    second = wait_until(lambda: next((p for p in c.participants.values()
                                      if p.controller.active), None),
                        timeout=30, message="a new controller")
    live = set(c.participants)
    c.admin.create_topic("after-failover", assignment={0: sorted(live)})
    c.wait_leaders("after-failover", 1, live)
    c.wait_leaders("good", 2, live)
    assert second.controller.active
    assert skip_warnings(caplog, f"controller {second.id}") == dict.fromkeys(ALL_BAD, 1)

    for name in ALL_BAD:
        assert c.client.exists(layout.partitions(name)) is None, name
        assert c.client.exists(layout.topic(name)) is not None, name  # left as they were
    assert told_of(c, set(ALL_BAD)) == set()
    assert not [r for r in caplog.records if r.exc_info is not None]


def test_a_malformed_partition_state_is_skipped_with_one_warning(
        cluster: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    """Another tool overwrites a partition's state node with garbage: the standbys skip it once
    (the view keeps what it had), and a new controller still leads the other partitions."""
    caplog.set_level(logging.WARNING)
    c = cluster
    for b in (1, 2, 3):
        c.add(b)
    first = c.active()
    wait_until(lambda: set(first.controller.ctx.brokers) == {1, 2, 3}, timeout=30,
               message="the controller sees every broker")
    c.admin.create_topic("good", assignment={0: [1, 2, 3], 1: [2, 3, 1]})
    c.wait_leaders("good", 2, {1, 2, 3})
    path = layout.partition_state("good", 1)
    for garbage in (b"{\"leader\": \"one\"}", b"\x00\xff", b"[]"):
        c.client.set(path, garbage)
    c.admin.create_topic("after", assignment={0: [1, 2, 3]})
    c.wait_leaders("after", 1, {1, 2, 3})

    c.participants.pop(first.id).close()
    second = c.active()
    live = set(c.participants)
    c.admin.create_topic("after-failover", assignment={0: sorted(live)})
    c.wait_leaders("after-failover", 1, live)
    c.wait_leaders("good", 1, live)
    assert second.controller.active
    for b in live:
        states = [r for r in caplog.records if r.getMessage().startswith(
            f"controller {b}: skipping the state of partition 'good'-1")]
        assert len(states) == 1, (b, [r.getMessage() for r in states])
    assert not [r for r in caplog.records if r.exc_info is not None]


def test_a_standby_with_a_cold_view_takes_over_past_bad_topic_nodes(
        cluster: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    """Without hot standby the new controller reads every topic node at failover: a malformed
    one made the read fail, and the controller resign and stand again, forever."""
    from statemachines.controller import ControllerConfig

    caplog.set_level(logging.WARNING)
    c = cluster
    for b in (1, 2):
        p = Participant(c.url, b, handler=RecordingBroker, network=c.network,
                        config=ControllerConfig(hot_standby=False),
                        connect_options={"session_timeout": 4.0})
        c.participants[b] = p.start()
    first = c.active()
    wait_until(lambda: set(first.controller.ctx.brokers) == {1, 2}, timeout=30,
               message="the controller sees every broker")
    c.admin.create_topic("good", assignment={0: [1, 2], 1: [2, 1]})
    c.wait_leaders("good", 2, {1, 2})
    write_bad_nodes(c)
    c.participants.pop(first.id).close()
    second = c.active()
    c.admin.create_topic("after-failover", assignment={0: [second.id]})
    c.wait_leaders("after-failover", 1, {second.id})
    c.wait_leaders("good", 2, {second.id})
    assert skip_warnings(caplog, f"controller {second.id}") == dict.fromkeys(ALL_BAD, 1)
    assert not set(second.controller.ctx.topics) & set(ALL_BAD)

