"""The CLI over a live cluster: topics, controller status, preferred elections, errors."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import coordinator
from coordinator.codecs import TopicPartition
from coordinator.metadata import MetadataClient
from partctl.cli import main
from statemachines.in_process import InProcessNetwork
from statemachines.participant import Participant
from tests.recording_broker import RecordingBroker, change_isr
from tests.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


class LiveCluster:
    """Three participants (broker + controller candidate) on one memory coordinator."""

    def __init__(self) -> None:
        self.url = f"memory://cli-{uuid.uuid4().hex[:10]}"
        self.network = InProcessNetwork()  # one process: brokers share the in-process transport
        self.participants = {b: self.start(b) for b in (1, 2, 3)}

    def start(self, broker_id: int) -> Participant:
        return Participant(self.url, broker_id, handler=RecordingBroker,
                           rack=f"r{broker_id % 2}", network=self.network).start()

    def close(self) -> None:
        for p in self.participants.values():
            p.close()


@pytest.fixture
def live() -> Iterator[LiveCluster]:
    cluster = LiveCluster()
    md = MetadataClient(coordinator.connect(cluster.url))
    wait_until(lambda: md.controller() is not None, timeout=10)
    yield cluster
    cluster.close()
    md.coordinator.close()


@pytest.fixture
def cluster(live: LiveCluster) -> str:
    return live.url


def leaders(url: str, topic: str) -> dict[int, int]:
    md = MetadataClient(coordinator.connect(url))
    try:
        parts = md.partitions_of(topic)
        states = md.partition_states([TopicPartition(topic, p) for p in parts])
        return {tp.partition: s.value.leader for tp, s in states.items() if s is not None}
    finally:
        md.coordinator.close()


def test_topics_create_list_describe_delete(cluster: str) -> None:
    code, out, err = run("topics", "create", "--coordinator", cluster, "--topic", "orders",
                         "--partitions", "6", "--replication-factor", "3")
    assert code == 0 and "Created topic orders (6 partitions" in out and not err
    wait_until(lambda: len(leaders(cluster, "orders")) == 6, timeout=10)
    assert run("topics", "list", "--coordinator", cluster)[1].split() == ["orders"]

    code, out, _ = run("topics", "describe", "--coordinator", cluster, "--topic", "orders")
    assert code == 0
    lines = out.strip().splitlines()
    assert lines[0].startswith("Topic: orders\tTopicId: ")
    assert "PartitionCount: 6\tReplicationFactor: 3" in lines[0]
    assert len(lines) == 7
    for line in lines[1:]:
        fields = dict(f.split(": ", 1) for f in line.strip().split("\t"))
        replicas = fields["Replicas"].split(",")
        assert fields["Leader"] == replicas[0]  # a new topic is led by its preferred replicas
        assert sorted(fields["Isr"].split(",")) == sorted(replicas)

    code, out, _ = run("topics", "delete", "--coordinator", cluster, "--topic", "orders")
    assert code == 0 and "marked for deletion" in out
    wait_until(lambda: run("topics", "list", "--coordinator", cluster)[1].strip() == "",
               timeout=10, message="topic deleted by the controller")


def test_explicit_assignment_and_bad_input(cluster: str) -> None:
    code, _, _ = run("topics", "create", "--coordinator", cluster, "--topic", "a",
                     "--replica-assignment", "1:2,2:3,3:1")
    assert code == 0
    cases = [
        (["topics", "create", "--topic", "a", "--partitions", "1", "--replication-factor", "1"],
         "already exists"),
        (["topics", "create", "--topic", "b", "--replica-assignment", "1:9"], "unknown broker"),
        (["topics", "create", "--topic", "b", "--replica-assignment", "1:1"], "twice"),
        (["topics", "create", "--topic", "b", "--replica-assignment", "x:y"], "bad --replica"),
        (["topics", "create", "--topic", "b", "--partitions", "2", "--replication-factor", "4"],
         "replication factor"),
        (["topics", "create", "--topic", "bad/name", "--partitions", "1",
          "--replication-factor", "1"], "illegal characters"),
        (["topics", "describe", "--topic", "nope"], "does not exist"),
        (["topics", "delete", "--topic", "nope"], "does not exist"),
        (["elect", "preferred", "--topic", "nope"], "does not exist"),
        (["elect", "preferred", "--topic", "a", "--partition", "7"], "does not exist"),
    ]
    for argv, message in cases:
        code, out, err = run(*argv, "--coordinator", cluster)
        assert code == 1, argv
        assert err.count("\n") == 1 and err.startswith("partctl: error: "), (argv, err)
        assert message in err.lower() or message in err, (argv, err)
    assert run("topics", "list", "--coordinator", cluster)[1].split() == ["a"]


def test_controller_status_and_preferred_election(live: LiveCluster) -> None:
    cluster = live.url
    code, out, _ = run("controller", "status", "--coordinator", cluster)
    assert code == 0 and out.startswith("Controller: broker ") and "Epoch: 1" in out
    first_controller = int(out.split()[2])
    run("topics", "create", "--coordinator", cluster, "--topic", "t",
        "--replica-assignment", "1:2:3,2:3:1,3:1:2")
    wait_until(lambda: leaders(cluster, "t") == {0: 1, 1: 2, 2: 3}, timeout=10)
    # broker 1 dies: broker 2 takes partition 0; then 1 returns and catches up, and its leader
    # adds it back to the ISR, as a leader does
    live.participants.pop(1).close()
    wait_until(lambda: leaders(cluster, "t")[0] == 2, timeout=10, message="failover to 2")
    live.participants[1] = live.start(1)
    md = MetadataClient(live.participants[2].coordinator)
    assert change_isr(md, TopicPartition("t", 0), [2, 3, 1])
    wait_until(lambda: md.isr_change_notifications() == [], timeout=10)
    assert leaders(cluster, "t")[0] == 2
    code, out, err = run("elect", "preferred", "--coordinator", cluster, "--topic", "t",
                         "--partition", "0")
    assert code == 0, err
    assert "1 partition(s)" in out
    wait_until(lambda: leaders(cluster, "t")[0] == 1, timeout=10,
               message="preferred leader restored")
    wait_until(lambda: md.preferred_election() is None, timeout=10)
    code, out, _ = run("controller", "status", "--coordinator", cluster)
    expected_epoch = 2 if first_controller == 1 else 1  # losing broker 1 may move control
    assert code == 0 and f"Epoch: {expected_epoch}" in out


def test_no_coordinator_and_unreachable_coordinator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PARTCTL_COORDINATOR", raising=False)
    code, _, err = run("topics", "list")
    assert code == 1 and "no coordinator" in err
    code, _, err = run("controller", "status", "--coordinator",
                       f"memory://empty-{uuid.uuid4().hex[:6]}")
    assert code == 1 and "no controller" in err
    code, _, err = run("topics", "list", "--coordinator", "nosuch://x")
    assert code == 1 and "unknown coordinator scheme" in err and err.count("\n") == 1


def test_the_installed_command_against_real_zookeeper(zookeeper_server) -> None:  # noqa: ANN001
    chroot = f"/cli{uuid.uuid4().hex[:8]}"
    url = f"zookeeper://{zookeeper_server.address}{chroot}"
    network = InProcessNetwork()
    participants = [Participant(url, b, handler=RecordingBroker, network=network).start()
                    for b in (1, 2, 3)]
    try:
        md = MetadataClient(participants[0].coordinator)
        wait_until(lambda: md.controller() is not None, timeout=15)
        env = {**os.environ, "PARTCTL_COORDINATOR": url}
        exe = [sys.executable, "-m", "partctl"]
        created = subprocess.run([*exe, "topics", "create", "--topic", "zk", "--partitions", "3",
                                  "--replication-factor", "2"], env=env, capture_output=True,
                                 text=True, timeout=60, cwd=REPO)
        assert created.returncode == 0, created.stderr
        wait_until(lambda: len(md.partitions_of("zk")) == 3, timeout=15)
        described = subprocess.run([*exe, "topics", "describe"], env=env, capture_output=True,
                                   text=True, timeout=60, cwd=REPO)
        assert described.returncode == 0 and "PartitionCount: 3" in described.stdout
        status = subprocess.run([*exe, "controller", "status"], env=env, capture_output=True,
                                text=True, timeout=60, cwd=REPO)
        assert status.returncode == 0 and "Controller: broker" in status.stdout
        dead = subprocess.run([*exe, "topics", "list", "--coordinator",
                               "zookeeper://127.0.0.1:1", "--timeout", "1"],
                              capture_output=True, text=True, timeout=60, cwd=REPO)
        assert dead.returncode == 1
        assert dead.stderr.strip().count("\n") == 0 and "could not connect" in dead.stderr
        assert "Traceback" not in dead.stderr
    finally:
        for p in participants:
            p.close()
