"""Broker processes on one coordinator, driven by a controller in another process: only Kafka's
protocol joins them (broker/controller_channel.py). What is checked is what the controller
sets (leaders, ISRs, the brokers' metadata), not data replication (followers fetching across
processes is not wired here), so the ISR is kept from shrinking by a long
``replica.lag.time.max.ms``."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import coordinator
from coordinator.admin import Admin
from coordinator.codecs import TopicPartition
from coordinator.metadata import MetadataClient
from tests.broker.processes import REPO, BrokerProcess, coordinator_settings, start_broker
from tests.broker.wire_client import RawClient, request
from tests.servers import Server
from tests.waiting import wait_until

pytestmark = pytest.mark.servers

KEEP_ISR = "replica.lag.time.max.ms=600000\n"


@pytest.fixture(params=["zookeeper", pytest.param("etcd", marks=pytest.mark.long)])
def server(request: pytest.FixtureRequest) -> Server:
    """On etcd in the long tier (tests/conftest.py): every run has broker processes following
    one controller on etcd in tests/broker/data/test_cluster_clients.py and the fault smoke."""
    return request.getfixturevalue(f"{request.param}_server")


def metadata_view(broker: BrokerProcess, topic: str
                  ) -> tuple[list[int], int, dict[int, tuple[int, tuple[int, ...]]]]:
    """(the brokers, the controller, each partition's leader and ISR) as ``broker``'s
    Metadata answers."""
    with RawClient(broker.address) as client:
        answer = client.call(request(3, 12, topics=None, allow_auto_topic_creation=False,
                                     include_topic_authorized_operations=False))
    partitions = {p.partition_index: (p.leader_id, tuple(sorted(p.isr_nodes)))
                  for t in answer.topics if t.name == topic for p in t.partitions}
    return sorted(b.node_id for b in answer.brokers), answer.controller_id, partitions


def stop_all(brokers: list[BrokerProcess]) -> None:
    for b in brokers:
        if b.process.poll() is None:
            b.stop()


def test_three_broker_processes_follow_one_controller(tmp_path: Path, server: Server) -> None:
    settings = coordinator_settings(server)
    brokers = {i: start_broker(tmp_path / f"b{i}", server, broker_id=i, extra=KEEP_ISR,
                               settings=settings) for i in (1, 2, 3)}
    client = coordinator.connect(settings[1], timeout=10)
    try:
        admin = Admin(client)
        ctl = admin.controller_status().broker_id
        assert ctl in brokers
        a, b = (i for i in brokers if i != ctl)
        # The first replica is the preferred leader: the non-controllers lead everything.
        admin.create_topic("spread", assignment={0: [a, b, ctl], 1: [b, ctl, a], 2: [a, ctl, b]})
        every = (1, 2, 3)
        expected = {0: (a, every), 1: (b, every), 2: (a, every)}
        for broker in brokers.values():  # UpdateMetadata crossed to every process
            wait_until(lambda broker=broker: metadata_view(broker, "spread") == (
                [1, 2, 3], ctl, expected), timeout=30, message=f"metadata of {broker.port}")
        # SIGTERM broker a: its controlled shutdown goes to the controller over the network.
        victim = brokers[a]
        victim.signal(signal.SIGTERM)
        assert victim.wait(60) == 0, victim.log()[-3000:]
        assert "controlled shutdown succeeded" in victim.log()
        tps = [TopicPartition("spread", p) for p in range(3)]
        states = MetadataClient(client).partition_states(tps)
        moved = {tp.partition: (states[tp].value.leader, tuple(sorted(states[tp].value.isr)))
                 for tp in tps}
        survivors = tuple(sorted((b, ctl)))
        assert moved == {0: (b, survivors), 1: (b, survivors), 2: (ctl, survivors)}
        for i in (b, ctl):
            wait_until(lambda i=i: metadata_view(brokers[i], "spread") == (
                list(survivors), ctl, moved), timeout=30, message=f"metadata of broker {i}")
        # The controller's own broker leaves: it shuts down through itself, then broker b
        # takes over as controller and tells the last broker (itself) everything.
        brokers[ctl].signal(signal.SIGTERM)
        assert brokers[ctl].wait(60) == 0, brokers[ctl].log()[-3000:]
        assert "controlled shutdown succeeded" in brokers[ctl].log()
        wait_until(lambda: metadata_view(brokers[b], "spread") == (
            [b], b, {0: (b, (b,)), 1: (b, (b,)), 2: (b, (b,))}), timeout=30,
            message="the last broker's metadata from its own controller")
    finally:
        client.close()
        stop_all(list(brokers.values()))
    for broker in brokers.values():
        assert "Traceback" not in broker.log(), broker.log()[-3000:]



CONTROLLER_SERVING = re.compile(r"partctl controller (\d+): serving PLAINTEXT://127\.0\.0\.1:(\d+)")


def start_controller(directory: Path, lines: str, node_id: int = 100, extra: str = ""
                     ) -> tuple[subprocess.Popen, Path]:
    """``partctl controller start`` on ``lines``' coordinator; waits for its serving line."""
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "controller.properties"
    config.write_text(f"node.id={node_id}\nlisteners=PLAINTEXT://127.0.0.1:0\n" + lines
                      + "zookeeper.connection.timeout.ms=20000\n" + extra)
    log_path = directory / "controller.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "partctl", "controller", "start", "--config", str(config)],
            stdout=subprocess.DEVNULL, stderr=log, cwd=REPO, start_new_session=True)
    deadline = time.monotonic() + 60
    while not CONTROLLER_SERVING.search(log_path.read_text(errors="replace")):
        if process.poll() is not None or time.monotonic() > deadline:
            if process.poll() is None:
                process.kill()
            process.wait(10)
            raise AssertionError(f"controller did not start ({process.returncode}):\n"
                                 + log_path.read_text(errors="replace")[-3000:])
        time.sleep(0.05)
    return process, log_path


def test_a_dedicated_controller_drives_the_brokers(tmp_path: Path, server: Server) -> None:
    settings = coordinator_settings(server)
    process, log_path = start_controller(tmp_path / "ctl", settings[0],
                                         extra="log.dirs=/nowhere\n")
    brokers: list[BrokerProcess] = []
    client = coordinator.connect(settings[1], timeout=10)
    try:
        admin = Admin(client)
        wait_until(lambda: admin.controller_status().broker_id == 100, timeout=30)
        assert client.exists("/brokers/ids/100") is None  # a controller is no broker
        brokers = [start_broker(tmp_path / f"b{i}", server, broker_id=i, settings=settings,
                                extra=KEEP_ISR + "partctl.controller.candidate=false\n")
                   for i in (1, 2)]
        admin.create_topic("led", assignment={0: [1, 2], 1: [2, 1]})
        expected = {0: (1, (1, 2)), 1: (2, (1, 2))}
        for broker, me in zip(brokers, (1, 2), strict=True):
            # Clients are told this broker as the controller: 100 is no broker they can reach.
            wait_until(lambda broker=broker, me=me: metadata_view(broker, "led") == (
                [1, 2], me, expected), timeout=30, message=f"metadata of broker {me}")
        assert admin.controller_status().broker_id == 100
        # Broker 1 leaves: its controlled shutdown reaches the dedicated controller.
        brokers[0].signal(signal.SIGTERM)
        assert brokers[0].wait(60) == 0, brokers[0].log()[-3000:]
        assert "controlled shutdown succeeded" in brokers[0].log()
        wait_until(lambda: metadata_view(brokers[1], "led")[2] == {0: (2, (2,)), 1: (2, (2,))},
                   timeout=30, message="leadership on broker 2")
    finally:
        client.close()
        stop_all(brokers)
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        status = process.wait(60)
    log = log_path.read_text(errors="replace")
    assert status == 0, log[-3000:]
    assert "log.dirs is ignored" in log and "Traceback" not in log


def run_controller(config: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "partctl", "controller", "start", "--config", str(config)],
        capture_output=True, text=True, cwd=REPO, timeout=60)


def test_a_controller_with_a_bad_configuration_is_one_line_and_exit_1(tmp_path: Path) -> None:
    config = tmp_path / "controller.properties"
    config.write_text("zookeeper.connect=127.0.0.1:1\n")
    result = run_controller(config)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"partctl: error: {config}: node.id is not set (the controller's candidacy id)"]


def test_a_controller_id_taken_by_a_broker_is_one_line_and_exit_1(
        tmp_path: Path, zookeeper_server: Server) -> None:
    lines, url = coordinator_settings(zookeeper_server)
    client = coordinator.connect(url, timeout=10)
    try:
        client.create("/brokers/ids/5", b"{}", make_parents=True)
        config = tmp_path / "controller.properties"
        config.write_text("node.id=5\nlisteners=PLAINTEXT://127.0.0.1:0\n" + lines)
        result = run_controller(config)
    finally:
        client.close()
    assert result.returncode == 1, result.stderr
    errors = [x for x in result.stderr.splitlines() if x.startswith("partctl: error:")]
    assert errors == ["partctl: error: controller 5: node.id 5 is registered as a broker "
                      "(/brokers/ids/5); a controller's id must differ from every broker's"]
    assert "Traceback" not in result.stderr


def test_a_controller_stopped_by_sigint_exits_130(tmp_path: Path,
                                                  zookeeper_server: Server) -> None:
    lines, url = coordinator_settings(zookeeper_server)
    process, log_path = start_controller(tmp_path, lines, node_id=9)
    client = coordinator.connect(url, timeout=10)
    try:
        wait_until(lambda: Admin(client).controller_status().broker_id == 9, timeout=30)
        assert client.exists("/partctl/controllers/9") is not None
        process.send_signal(signal.SIGINT)
        assert process.wait(60) == 130
        wait_until(lambda: Admin(client).controller_status().broker_id is None, timeout=30)
        assert client.exists("/partctl/controllers/9") is None
    finally:
        client.close()
        if process.poll() is None:
            process.kill()
            process.wait(10)
