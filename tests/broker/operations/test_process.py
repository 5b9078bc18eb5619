"""The broker process: its registration, its exit statuses and its one-line errors.

0 after SIGTERM (controlled shutdown, then a clean stop); 128 + the signal when a second
SIGTERM or a SIGINT stops it at once; 1 with one ``partctl: error:`` line for a configuration
it cannot start with, a coordinator it cannot reach, a listener address taken; never a
traceback."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

import coordinator
from coordinator.codecs import TopicAssignment
from coordinator.metadata import MetadataClient
from kafkaclient.messages import build
from tests.broker.processes import (
    REPO,
    BrokerProcess,
    coordinator_settings,
    create_topic,
    start_broker,
    wait_for_leaders,
)
from tests.broker.wire_client import RawClient, request, request_module
from tests.servers import Server
from tests.waiting import wait_until

pytestmark = pytest.mark.servers


def run_broker(config: Path, timeout: float = 60.0) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "partctl", "broker", "start", "--config", str(config)],
        capture_output=True, text=True, cwd=REPO, timeout=timeout)


def one_error_line(result: subprocess.CompletedProcess) -> str:
    errors = [line for line in result.stderr.splitlines() if line.startswith("partctl: error:")]
    assert len(errors) == 1, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    return errors[0]


@pytest.mark.parametrize(("text", "message"), [
    ("broker.id=x\nzookeeper.connect=127.0.0.1:1\n", "invalid value 'x' for broker.id"),
    ("broker.id=1\n", "no coordinator"),
    ("broker.id=1\nzookeeper.connect=127.0.0.1:1\nlisteners=SSL://127.0.0.1:0\n"
     "security.inter.broker.protocol=SSL\n",
     "listener.name.ssl.ssl.keystore.location: listener SSL uses SSL: give its key store"),
])
def test_a_bad_configuration_is_one_line_and_exit_1(tmp_path: Path, text: str,
                                                    message: str) -> None:
    config = tmp_path / "server.properties"
    config.write_text(text)
    result = run_broker(config)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1  # nothing else: no log line, no traceback
    assert message in one_error_line(result)
    assert not (tmp_path / "logs").exists()


def test_a_missing_configuration_file(tmp_path: Path) -> None:
    result = run_broker(tmp_path / "nowhere.properties")
    assert result.returncode == 1
    assert "cannot read" in one_error_line(result)


@pytest.mark.parametrize("scheme", ["zookeeper", "etcd"])
def test_an_unreachable_coordinator_is_one_line_and_exit_1(tmp_path: Path, scheme: str) -> None:
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        port = silent.getsockname()[1]
        where = (f"zookeeper.connect=127.0.0.1:{port}/x\n" if scheme == "zookeeper"
                 else f"partctl.coordinator=etcd://127.0.0.1:{port}/x\n")
        config = tmp_path / "server.properties"
        config.write_text(f"broker.id=1\nlisteners=PLAINTEXT://127.0.0.1:0\n"
                          f"log.dirs={tmp_path / 'logs'}\n{where}"
                          "zookeeper.connection.timeout.ms=1500\n")
        result = run_broker(config)
    assert result.returncode == 1
    line = one_error_line(result)
    assert "coordinator" in line and f"127.0.0.1:{port}" in line


def test_a_listener_address_in_use_is_one_line_and_exit_1(tmp_path: Path,
                                                          zookeeper_server: Server) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        config = tmp_path / "server.properties"
        config.write_text(f"broker.id=1\nlisteners=PLAINTEXT://127.0.0.1:{port}\n"
                          f"log.dirs={tmp_path / 'logs'}\n"
                          f"zookeeper.connect={zookeeper_server.address}/in-use\n")
        result = run_broker(config)
    assert result.returncode == 1
    assert f"cannot listen on PLAINTEXT://127.0.0.1:{port}" in one_error_line(result)


@pytest.fixture(params=["zookeeper", "etcd"])
def server(request: pytest.FixtureRequest) -> Server:
    return request.getfixturevalue(f"{request.param}_server")


def test_registration_and_sigterm_stop_cleanly(tmp_path: Path, server: Server) -> None:
    broker = start_broker(tmp_path, server, broker_id=7,
                          extra="broker.rack=r1\nunknown.key=1\nauto.create.topics.enable=false\n")
    try:
        client = coordinator.connect(broker.coordinator_url, timeout=10)
        try:
            data, _stat = client.get("/brokers/ids/7")
        finally:
            client.close()
        node = json.loads(data)
        assert node["version"] == 5
        assert (node["host"], node["port"]) == ("127.0.0.1", broker.port)
        assert node["endpoints"] == [f"PLAINTEXT://127.0.0.1:{broker.port}"]
        assert node["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
        assert (node["rack"], node["features"], node["jmx_port"]) == ("r1", {}, -1)
        assert int(node["timestamp"]) > 0
        create_topic(broker, "after-restart", 1)
        assert metadata_error(broker, "never-created") == ErrorCode.unknown_topic_or_partition
    finally:
        status = broker.stop()
    log = broker.log()
    assert status == 0, log
    assert log.count("unknown key 'unknown.key'") == 1
    assert "controlled shutdown succeeded" in log
    assert "Traceback" not in log
    # the logs were closed cleanly: a restart on them recovers nothing
    again = start_broker(tmp_path, server, broker_id=7)
    try:
        assert "cut" not in again.log()
    finally:
        assert again.stop() == 0


@pytest.mark.parametrize("server", ["zookeeper", pytest.param("etcd", marks=pytest.mark.long)],
                         indirect=True)  # on etcd in the long tier (tests/conftest.py)
def test_a_broker_restarted_at_once_after_a_kill_waits_for_its_old_registration(
        tmp_path: Path, server: Server) -> None:
    """A broker killed and started again at once finds its previous run's registration still
    there (that session lives until it times out): it says so once, waits for it to go, then
    registers and serves, rather than exiting "already registered by another session"."""
    from confluent_kafka.admin import AdminClient

    # short, so the test is quick, yet longer than the restarted process takes to reach its
    # registration on a busy machine (seconds: Python's imports, opening the logs)
    session = "zookeeper.session.timeout.ms=12000\n"
    settings = coordinator_settings(server)
    first = start_broker(tmp_path, server, broker_id=4, extra=session, settings=settings)
    create_topic(first, "kept", 1)
    first.kill()
    again = start_broker(tmp_path, server, broker_id=4, extra=session, settings=settings,
                         timeout=60)
    try:
        brokers = AdminClient({"bootstrap.servers": again.bootstrap}).list_topics(
            timeout=30).brokers
        assert [(b.id, b.port) for b in brokers.values()] == [(4, again.port)]
        wait_for_leaders(again, "kept", 1)
        log = again.log()
        assert log.count("is still registered by session") == 1, log
        assert "waiting up to 18 s for that session to expire" in log
        assert "Traceback" not in log
    finally:
        assert again.stop() == 0


@pytest.mark.parametrize("server", ["zookeeper", pytest.param("etcd", marks=pytest.mark.long)],
                         indirect=True)  # on etcd in the long tier (tests/conftest.py)
def test_the_first_client_sees_the_broker_and_its_controller(tmp_path: Path,
                                                           server: Server) -> None:
    """A client that connects the moment the broker accepts connections is told a cluster with
    this broker and a controller in it, not an empty one (librdkafka's admin client waits tens
    of seconds for a controller it was once told there is none of)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    answers: list[object] = []

    def first_answer() -> None:  # connects as early as the listener allows
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                client = RawClient(("127.0.0.1", port))
            except OSError:
                time.sleep(0.001)
                continue
            with client:
                answers.append(client.call(request(
                    3, 12, topics=None, allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False)))
            return

    early = threading.Thread(target=first_answer)
    early.start()
    broker = start_broker(tmp_path, server, broker_id=3,
                          extra=f"listeners=PLAINTEXT://127.0.0.1:{port}\n")
    try:
        early.join(60)
        (answer,) = answers
        assert [b.node_id for b in answer.brokers] == [3]
        assert answer.controller_id == 3
    finally:
        assert broker.stop() == 0


@pytest.mark.parametrize(("signals", "status"), [
    ((signal.SIGINT,), 130),
    ((signal.SIGTERM, signal.SIGTERM), 143),
    pytest.param((signal.SIGTERM, signal.SIGINT), 130, marks=pytest.mark.long),
])
def test_a_second_signal_or_sigint_stops_at_once(tmp_path: Path, zookeeper_server: Server,
                                                 signals: tuple[int, ...], status: int) -> None:
    # a controlled shutdown that cannot finish: a partition it leads is meant to move to a
    # broker that does not exist, and the retries are far apart
    broker: BrokerProcess = start_broker(
        tmp_path, zookeeper_server,
        extra="controlled.shutdown.max.retries=100\ncontrolled.shutdown.retry.backoff.ms=60000\n")
    try:
        client = coordinator.connect(broker.coordinator_url, timeout=10)
        try:  # written as a tool would, naming broker 2 that never registers
            MetadataClient(client).create_topic(TopicAssignment(topic="pinned",
                                                                partitions={0: (1, 2)}))
        finally:
            client.close()
        wait_for_leaders(broker, "pinned", 1)
        for signum in signals:
            broker.signal(signum)
            if len(signals) > 1 and signum == signals[0]:
                wait_for_log(broker, "still led here")
        assert broker.wait(60) == status
    finally:
        if broker.process.poll() is None:
            broker.process.kill()
            broker.process.wait(10)
    log = broker.log()
    assert "stopped" in log and "Traceback" not in log


def metadata_error(broker: BrokerProcess, topic: str) -> ErrorCode:
    m = request_module(3, 12)
    with RawClient(broker.address) as client:
        (answer,) = client.call(request(
            3, 12, topics=(build(m.MetadataRequestTopic, name=topic, topic_id=None),),
            allow_auto_topic_creation=True, include_topic_authorized_operations=False)).topics
    return answer.error_code


def test_auto_creation_with_too_large_a_replication_factor(tmp_path: Path,
                                                           zookeeper_server: Server) -> None:
    broker = start_broker(tmp_path, zookeeper_server, extra="default.replication.factor=2\n")
    try:
        assert metadata_error(broker, "two-replicas") == ErrorCode.invalid_replication_factor
        assert metadata_error(broker, "bad/name") == ErrorCode.invalid_topic_exception
    finally:
        assert broker.stop() == 0


def wait_for_log(broker: BrokerProcess, text: str, timeout: float = 60.0) -> None:
    wait_until(lambda: text in broker.log(), timeout=timeout, message=repr(text))
