"""``partctl cluster up`` as a user runs it: a process that starts its own ZooKeeper or etcd and
broker processes, prints the bootstrap servers, serves Kafka's clients (confluent-kafka) and
stops everything on SIGINT or SIGTERM, leaving no process behind; a broker that cannot start
and a coordinator that does not answer are one error line and exit 1, with nothing left
running.

The data goes through the controller's broker, found by asking the bootstrap servers; its
answer must list every broker. (Replication across broker processes under real clients and
faults is tests/broker/data/test_cluster_clients.py's.)
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import coordinator
from coordinator.codecs import TopicAssignment
from coordinator.metadata import MetadataClient
from coordinator.servers import ZOOKEEPER_CLASSPATH
from partctl.cli import main
from tests.servers import unavailable
from tests.waiting import wait_until

pytestmark = pytest.mark.servers

REPO = Path(__file__).resolve().parents[2]
FAST_STOP = ["--set", "controlled.shutdown.retry.backoff.ms=200"]


def require(store: str) -> None:
    if store == "zookeeper" and (shutil.which("java") is None
                                 or not all(os.path.exists(p) for p in ZOOKEEPER_CLASSPATH)):
        unavailable("ZooKeeper is not installed")
    if store == "etcd" and shutil.which("etcd") is None:
        unavailable("etcd is not installed")


@dataclass
class Up:
    """A ``partctl cluster up`` process and what it printed so far."""

    process: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    """stderr's lines so far."""
    _queue: queue.Queue[str | None] = field(default_factory=queue.Queue)

    def __post_init__(self) -> None:
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_errors, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def _read_errors(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.errors.append(line.rstrip("\n"))

    def wait_for_error(self, text: str, timeout: float = 60.0) -> str:
        wait_until(lambda: any(text in line for line in self.errors), timeout=timeout,
                   message=f"{text!r} on stderr")
        return next(line for line in self.errors if text in line)

    def wait_for(self, prefix: str, timeout: float = 120.0) -> str:
        deadline = time.monotonic() + timeout
        for line in self.lines:
            if line.startswith(prefix):
                return line
        while True:
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {prefix!r} line within {timeout}s: {self.lines}"
                                     ) from None
            if line is None:
                raise AssertionError(f"exited ({self.process.wait()}) before {prefix!r}: "
                                     f"{self.lines}\n{self.stderr()}")
            self.lines.append(line)
            if line.startswith(prefix):
                return line

    def stop(self, signum: int = signal.SIGINT, timeout: float = 120.0) -> int:
        self.process.send_signal(signum)
        status = self.process.wait(timeout)
        self.wait_for("partctl cluster: stopped", 10)
        return status

    def stderr(self) -> str:
        """stderr's text, once the process has exited."""
        self.process.wait(60)
        time.sleep(0.2)  # the reader's last lines
        return "\n".join(self.errors)

    @property
    def bootstrap(self) -> list[str]:
        line = self.wait_for("bootstrap.servers=")
        return line.split("=", 1)[1].split(",")

    @property
    def pids(self) -> list[int]:
        return [int(m.group(1)) for line in self.lines
                if (m := re.search(r"\(pid (\d+),", line))]


def cluster_up(*argv: str) -> Up:
    return Up(subprocess.Popen(
        [sys.executable, "-m", "partctl", "cluster", "up", *argv], cwd=REPO, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ,
                                                             "PYTHONUNBUFFERED": "1"}))


@pytest.fixture
def started() -> Iterator[list[Up]]:
    """Whatever a test started is killed if the test failed before stopping it."""
    ups: list[Up] = []
    yield ups
    for up in ups:
        if up.process.poll() is None:
            up.process.send_signal(signal.SIGINT)
            up.process.send_signal(signal.SIGINT)
            up.process.wait(60)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def running_under(directory: Path) -> list[str]:
    """Command lines of the processes that name ``directory`` (brokers, servers)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if str(directory) in cmdline and alive(int(entry)):
                found.append(cmdline)
    return found


def controller_address(bootstrap: list[str], brokers: int, timeout: float = 60.0) -> str:
    """host:port of the broker the cluster's controller runs in, from the first bootstrap
    server whose Metadata lists all ``brokers`` brokers."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for address in bootstrap:
            try:  # a broker that knows no brokers: librdkafka calls it a partial response
                md = AdminClient({"bootstrap.servers": address}).list_topics(timeout=10)
            except KafkaException:
                continue
            if sorted(md.brokers) == list(range(1, brokers + 1)) and md.controller_id > 0:
                b = md.brokers[md.controller_id]
                return f"{b.host}:{b.port}"
        time.sleep(0.2)
    raise AssertionError(f"no bootstrap server of {bootstrap} lists {brokers} brokers")


def produce(address: str, topic: str, values: list[bytes]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": address, "acks": "all"})
    failed: list[object] = []
    for value in values:
        producer.produce(topic, value, partition=0,
                         on_delivery=lambda err, _m: failed.append(err) if err else None)
    assert producer.flush(30) == 0 and not failed, failed


def consume(address: str, topic: str, count: int) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": address, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        return got
    finally:
        consumer.close()


def create_topic(address: str, topic: str, replicas: list[int]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": address})
    # librdkafka wants the count given with an assignment (its -1 default is refused)
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=1, replica_assignment=[replicas])], operation_timeout=30)
    futures[topic].result(60)
    deadline = time.monotonic() + 30
    while True:  # the leader is elected after the topic is written
        md = admin.list_topics(topic, timeout=10).topics[topic]
        if md.error is None and md.partitions and md.partitions[0].leader >= 0:
            return
        assert time.monotonic() < deadline, md
        time.sleep(0.1)


def test_three_brokers_on_their_own_zookeeper_serve_lose_one_and_stop_on_sigint(
        tmp_path: Path, started: list[Up]) -> None:
    require("zookeeper")
    up = cluster_up("--store", "zookeeper", *FAST_STOP)
    started.append(up)
    bootstrap = up.bootstrap
    assert len(bootstrap) == 3 and all(a.startswith("127.0.0.1:") for a in bootstrap)
    assert up.lines[0].startswith("partctl cluster: zookeeper at 127.0.0.1:")
    directory = Path(re.search(r"in (\S+); Ctrl-C", up.wait_for("partctl cluster: 3 broker"))
                     .group(1))
    pids = up.pids
    assert len(pids) == 4 and all(alive(p) for p in pids)  # the server and three brokers

    leader = controller_address(bootstrap, 3)
    controller = bootstrap.index(leader) + 1
    create_topic(leader, "up", [controller])
    values = [f"m{i}".encode() for i in range(5)]
    produce(leader, "up", values)
    assert consume(leader, "up", 5) == values

    # a broker stopped by someone else is reported; the others keep serving
    other = next(b for b in (1, 2, 3) if b != controller)
    os.kill(pids[other], signal.SIGTERM)
    line = up.wait_for_error(f"partctl cluster: broker {other} (pid {pids[other]}) has stopped")
    assert line.endswith(" has stopped: exit status 0; the others keep running"), line
    produce(leader, "up", [b"after"])
    assert consume(leader, "up", 6) == [*values, b"after"]
    assert up.process.poll() is None

    assert up.stop(signal.SIGINT) == 0
    summary = up.lines[-1]
    assert summary.startswith("partctl cluster: stopped brokers 1, 2, 3 (exit statuses 0, 0, "
                              "0) and zookeeper; removed "), summary
    assert not any(alive(p) for p in pids)
    assert not directory.exists() and not running_under(directory)
    assert "Traceback" not in up.stderr()


def test_etcd_in_a_kept_directory_finds_its_topic_when_started_again(
        tmp_path: Path, started: list[Up]) -> None:
    require("etcd")
    first = cluster_up("--store", "etcd", "--brokers", "1", "--dir", str(tmp_path), *FAST_STOP)
    started.append(first)
    (address,) = first.bootstrap
    line = first.wait_for("partctl cluster: broker 1 at ")
    assert line.endswith("broker.log)"), line  # no metrics.listener: no metrics URL
    create_topic(address, "kept", [1])
    values = [b"a", b"b", b"c"]
    produce(address, "kept", values)
    assert first.stop(signal.SIGTERM) == 0
    assert first.lines[-1].endswith(f"and etcd; kept {tmp_path}"), first.lines[-1]
    assert not running_under(tmp_path)
    assert (tmp_path / "etcd").is_dir() and (tmp_path / "broker-1" / "server.properties").exists()

    again = cluster_up("--brokers", "1", "--dir", str(tmp_path), *FAST_STOP,  # etcd: its data
                       "--set", "metrics.listener=http://127.0.0.1:0")
    started.append(again)
    (address,) = again.bootstrap
    assert again.lines[0].startswith("partctl cluster: etcd at ")
    assert consume(address, "kept", 3) == values
    line = again.wait_for("partctl cluster: broker 1 at ")
    url = re.search(r", metrics on (http://127\.0\.0\.1:\d+/metrics)$", line)
    assert url is not None, line
    with urllib.request.urlopen(url.group(1), timeout=10) as answer:
        assert b'kafka_log_log_logendoffset{topic="kept",partition="0"} 3' in answer.read()
    assert again.stop(signal.SIGINT) == 0
    assert not running_under(tmp_path)


def test_a_broker_that_cannot_listen_stops_everything(tmp_path: Path) -> None:
    require("zookeeper")
    with socket.socket() as taken:
        while True:  # a held port whose neighbour below is free: broker 2 cannot listen
            taken.bind(("127.0.0.1", 0))
            port = taken.getsockname()[1]
            with socket.socket() as probe:
                try:
                    probe.bind(("127.0.0.1", port - 1))
                    break
                except OSError:
                    taken.close()
                    taken = socket.socket()  # noqa: PLW2901
        taken.listen(1)
        done = subprocess.run(
            [sys.executable, "-m", "partctl", "cluster", "up", "--brokers", "2", "--base-port",
             str(port - 1), "--dir", str(tmp_path), "--store", "zookeeper"],
            capture_output=True, text=True, cwd=REPO, timeout=180)
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"partctl: error: broker 2 did not start: cannot listen on "
                                  f"PLAINTEXT://127.0.0.1:{port}: "), done.stderr
    assert "address already in use" in done.stderr.lower()
    assert f"(log: {tmp_path / 'broker-2' / 'broker.log'})" in done.stderr
    assert not running_under(tmp_path)


def test_an_unreachable_coordinator_is_one_line(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts, never answers
        port = silent.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "partctl", "cluster", "up", "--coordinator",
             f"zookeeper://127.0.0.1:{port}/x", "--timeout", "0.5", "--dir", str(tmp_path)],
            capture_output=True, text=True, cwd=REPO, timeout=60)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (f"partctl: error: could not connect to ZooKeeper at "
                           f"127.0.0.1:{port} within 0.5s\n")
    assert not running_under(tmp_path) and not list(tmp_path.iterdir())


@pytest.mark.parametrize(("argv", "message"), [
    (["--coordinator", "memory://x"], "a memory store lives in one process"),
    (["--set", "broker.id=4"], "broker.id is set for each broker by the cluster"),
    (["--set", "num.partitions=many"], "invalid value 'many' for num.partitions"),
    (["--set", "novalue"], "bad --set 'novalue': want key=value"),
    (["--base-port", "65535", "--brokers", "2"], "past 65535"),
    (["--coordinator", "zookeeper://127.0.0.1:1", "--store", "etcd"], "not both"),
    (["--dir", "/proc/version"], "cannot use /proc/version for the cluster"),
])
def test_bad_input_is_one_line_before_anything_starts(
        argv: list[str], message: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cluster", "up", "--dir", str(tmp_path / "d"), *argv]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("partctl: error: ")
    assert message in err, err
    assert not (tmp_path / "d").exists()


def test_a_broker_that_dies_is_reported_and_the_last_one_stops_the_cluster(
        tmp_path: Path, started: list[Up]) -> None:
    require("zookeeper")
    up = cluster_up("--brokers", "1", "--store", "zookeeper", "--dir", str(tmp_path))
    started.append(up)
    up.wait_for("bootstrap.servers=")
    server, broker = up.pids
    os.kill(broker, signal.SIGKILL)
    assert up.process.wait(60) == 1
    assert up.stderr().splitlines() == [
        f"partctl cluster: broker 1 (pid {broker}) has stopped: killed by SIGKILL",
        "partctl cluster: every broker has exited: stopping"]
    up.wait_for("partctl cluster: stopped brokers 1 (exit statuses -9) and zookeeper; kept ")
    assert not alive(server) and not running_under(tmp_path)


def test_a_second_sigint_stops_the_brokers_at_once(tmp_path: Path, started: list[Up]) -> None:
    """A controlled shutdown that cannot finish (a partition led here is to move to a broker
    that never registers, retries a minute apart) is cut short by the second SIGINT."""
    require("zookeeper")
    up = cluster_up("--brokers", "1", "--store", "zookeeper", "--dir", str(tmp_path), "--set",
                    "controlled.shutdown.max.retries=100", "--set",
                    "controlled.shutdown.retry.backoff.ms=60000")
    started.append(up)
    (address,) = up.bootstrap
    url = re.search(r"on (\S+), in ", up.wait_for("partctl cluster: 1 broker")).group(1)
    client = coordinator.connect(url, timeout=10)
    try:
        MetadataClient(client).create_topic(TopicAssignment(topic="pinned",
                                                            partitions={0: (1, 2)}))
    finally:
        client.close()
    log = tmp_path / "broker-1" / "broker.log"
    wait_until(lambda: "leads pinned-0" in log.read_text(), timeout=30)
    up.process.send_signal(signal.SIGINT)
    wait_until(lambda: "still led here" in log.read_text(), timeout=30)
    assert up.stop(signal.SIGINT) == 130
    assert up.lines[-1].startswith("partctl cluster: stopped brokers 1 (exit statuses 130) and "
                                   "zookeeper; kept "), up.lines[-1]
    assert not running_under(tmp_path)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name)
def test_a_signal_while_starting_stops_what_started(tmp_path: Path, started: list[Up],
                                                    signum: signal.Signals) -> None:
    require("zookeeper")
    up = cluster_up("--brokers", "2", "--store", "zookeeper", "--dir", str(tmp_path))
    started.append(up)
    up.wait_for("partctl cluster: zookeeper at ")
    # Both brokers launched (their logs opened), neither yet past its imports: a fixed half
    # second after the server's line let a fast machine's brokers serve before the signal.
    wait_until(lambda: (tmp_path / "broker-2" / "broker.log").exists(), timeout=30)
    assert up.stop(signum) == 0
    assert "bootstrap.servers=" not in "\n".join(up.lines)
    assert up.lines[-1].startswith("partctl cluster: stopped brokers 1, 2 "), up.lines
    assert not running_under(tmp_path)
    assert "Traceback" not in up.stderr()
