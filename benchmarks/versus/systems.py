"""The three systems side by side, each three broker processes on 127.0.0.1: partctl (``partctl
broker`` processes, broker.cluster), Apache Kafka 3.9.1 in ZooKeeper mode on the same ZooKeeper
server (a chroot each), and Kafka 4.x in KRaft combined mode.

Kafka runs from the jars the reference harness resolves (``~/.cache/partctl/kafka/<version>``,
or ``$PARTCTL_KAFKA_CACHE``) with the JVM flags Kafka's own scripts give a broker:
kafka-server-start.sh's heap ``-Xmx1G -Xms1G`` and kafka-run-class.sh's G1 settings. The
benchmarks never import the tests, so the few facts the harness knows (the command line, the
log4j settings, KRaft's storage format) are used here again.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import coordinator
from benchmarks.versus.metadata import ask
from broker.cluster import LaunchedBroker, launch_broker
from coordinator.errors import CoordinatorError
from coordinator.servers import free_port

HOST = "127.0.0.1"
SESSION_MS = 6000
"""zookeeper.session.timeout.ms of both ZooKeeper-mode systems: a killed broker's registration
goes in 6 s (Kafka's default is 18 s)."""

KAFKA_HEAP = ("-Xmx1G", "-Xms1G")
"""kafka-server-start.sh's KAFKA_HEAP_OPTS."""
KAFKA_JVM = ("-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
             "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
             "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true")
"""kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS."""
TOOL_JVM = ("-Xmx512M", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-Djava.awt.headless=true")
"""A client tool's JVM (kafka-producer-perf-test.sh's heap)."""

_LOG4J = """log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=${kafka.logs.dir}/server.log
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
"""
_LOG4J2 = """status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
"""
_TOOL_LOG4J = "log4j.rootLogger=WARN, err\nlog4j.appender.err=org.apache.log4j.ConsoleAppender\n" \
    "log4j.appender.err.Target=System.err\nlog4j.appender.err.layout=org.apache.log4j.PatternLayout\n"
_TOOL_LOG4J2 = "status = warn\nappender.err.type = Console\nappender.err.name = ERR\n" \
    "appender.err.target = SYSTEM_ERR\nappender.err.layout.type = PatternLayout\n" \
    "rootLogger.level = WARN\nrootLogger.appenderRef.err.ref = ERR\n"

SYSTEMS = ("partctl", "kafka3", "kafka4")


class SystemError_(Exception):
    """A system could not be started or used; the message is one line (and a log's tail)."""


# --- Kafka's jars and tools ---------------------------------------------------------------------


def kafka_cache() -> Path:
    configured = os.environ.get("PARTCTL_KAFKA_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "partctl" / "kafka"


def newest_kafka(major: int) -> str | None:
    """The newest resolved Kafka ``major``.x in the cache."""
    found = []
    for entry in kafka_cache().glob(f"{major}.*"):
        if (entry / ".resolved").exists():
            try:
                found.append((tuple(int(x) for x in entry.name.split(".")), entry.name))
            except ValueError:
                continue
    return max(found)[1] if found else None


def classpath(version: str) -> str:
    jars = kafka_cache() / version
    if not (jars / ".resolved").exists():
        raise SystemError_(f"Apache Kafka {version} is not resolved in {jars}: run "
                           "`bash tests/kafka/resolve.sh` (make setup does)")
    return str(jars / "*")


def _logging(directory: Path, version: str, tool: bool) -> list[str]:
    directory.mkdir(parents=True, exist_ok=True)
    v1, v2 = directory / "log4j.properties", directory / "log4j2.properties"
    v1.write_text(_TOOL_LOG4J if tool else _LOG4J)
    v2.write_text(_TOOL_LOG4J2 if tool else _LOG4J2)
    return [f"-Dlog4j.configuration=file:{v1}", f"-Dlog4j2.configurationFile={v2}",
            f"-Dkafka.logs.dir={directory}"]


def java_tool(version: str, work: Path, main: str, *args: str,
              timeout: float = 900.0) -> subprocess.CompletedProcess[str]:
    """Run one of Kafka's tools by its main class and wait: stdout and stderr captured."""
    command = ["java", *TOOL_JVM, *_logging(work / f"tool-{version}", version, tool=True),
               "-cp", classpath(version), main, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


# --- one broker process, of any system ----------------------------------------------------------


@dataclass(eq=False)
class Node:
    """One broker process and how to start it again on the same directory and port."""

    node_id: int
    port: int
    launch: Callable[[], subprocess.Popen[bytes]]
    process: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None

    @property
    def address(self) -> tuple[str, int]:
        return HOST, self.port

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.running() and self.process is not None else None

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        if self.running():
            raise SystemError_(f"broker {self.node_id} is running already")
        self.process = self.launch()

    def signal(self, signum: int) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signum)

    def wait(self, timeout: float) -> int | None:
        if self.process is None:
            return None
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return self.kill()

    def kill(self) -> int | None:
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.kill()
        return self.process.wait(30)

    def stop(self, timeout: float = 120.0) -> int | None:
        self.signal(signal.SIGTERM)
        return self.wait(timeout)

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace") if self.log_path else ""
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


# --- a system: three nodes ----------------------------------------------------------------------


@dataclass(eq=False)
class System:
    """Three brokers of one kind in ``directory``; ``zk_url`` is its coordinator chroot (None
    for KRaft). Not a value: it has a lifetime."""

    key: str
    label: str
    directory: Path
    nodes: dict[int, Node] = field(default_factory=dict)
    zk_url: str | None = None
    version: str | None = None
    """Kafka's version (None: partctl)."""
    _client: coordinator.Coordinator | None = None

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{HOST}:{n.port}" for n in self.nodes.values())

    @property
    def java(self) -> bool:
        return self.version is not None

    def pids(self) -> dict[int, int]:
        return {i: n.pid for i, n in self.nodes.items() if n.pid is not None}

    def start(self, timeout: float = 180.0) -> None:
        for node in self.nodes.values():
            if not node.running():
                node.start()
        self.wait_serving(timeout)

    def wait_serving(self, timeout: float = 180.0, ids: set[int] | None = None) -> None:
        """Until each running broker (of ``ids``) answers Metadata listing every running
        broker, with a controller."""
        wanted = ids or {i for i, n in self.nodes.items() if n.running()}
        live = {i for i, n in self.nodes.items() if n.running()}
        deadline = time.monotonic() + timeout
        while wanted:
            for i in sorted(wanted):
                node = self.nodes[i]
                if not node.running():
                    raise SystemError_(f"{self.label} broker {i} exited "
                                       f"({node.process.poll() if node.process else None}) "
                                       f"before serving; log {node.log_path}:\n"
                                       f"{node.log_tail()}")
                view = ask(node.address, (), timeout=2)
                if view is not None and view.controller >= 0 and live <= view.brokers:
                    wanted.discard(i)
            if wanted and time.monotonic() > deadline:
                i = min(wanted)
                raise SystemError_(f"{self.label} broker {i} not serving after {timeout:.0f}s; "
                                   f"log {self.nodes[i].log_path}:\n{self.nodes[i].log_tail()}")
            if wanted:
                time.sleep(0.1)

    def stop(self, timeout: float = 120.0) -> None:
        """SIGTERM every broker at once, then wait (SIGKILL after ``timeout``)."""
        for node in self.nodes.values():
            node.signal(signal.SIGTERM)
        for node in self.nodes.values():
            node.wait(timeout)

    def kill_all(self) -> None:
        for node in self.nodes.values():
            node.signal(signal.SIGKILL)
        for node in self.nodes.values():
            node.kill()

    # -- the ZooKeeper side (partctl and Kafka 3.9) --------------------------------------------

    def _read(self, what: Callable[[coordinator.Coordinator], object]) -> object:
        assert self.zk_url is not None
        if self._client is not None:
            return what(self._client)
        client = coordinator.connect(self.zk_url, timeout=10)
        try:
            return what(client)
        finally:
            client.close()

    def watching(self) -> _Watching:
        """``with system.watching():`` keeps one ZooKeeper session open for the reads inside
        (a failover is polled every 10 ms)."""
        return _Watching(self)

    def controller(self) -> int | None:
        """The active controller's broker id, from /controller; None when there is none."""
        def read(client: coordinator.Coordinator) -> int | None:
            try:
                data, _ = client.get("/controller")
            except CoordinatorError:
                return None
            return int(json.loads(data)["brokerid"])
        return self._read(read)  # type: ignore[return-value]

    def registered(self) -> set[int]:
        """The broker ids registered in /brokers/ids."""
        def read(client: coordinator.Coordinator) -> set[int]:
            try:
                return {int(c) for c in client.children("/brokers/ids")}
            except CoordinatorError:
                return set()
        return self._read(read)  # type: ignore[return-value]

    def wait_unregistered(self, ids: set[int], timeout: float = 60.0) -> None:
        """Until none of ``ids`` is registered (a killed broker's session has to expire before
        it may register again)."""
        if self.zk_url is None:
            return
        deadline = time.monotonic() + timeout
        while self.registered() & ids:
            if time.monotonic() > deadline:
                raise SystemError_(f"{self.label}: brokers {sorted(ids)} still registered "
                                   f"after {timeout:.0f}s")
            time.sleep(0.1)


class _Watching:
    def __init__(self, system: System) -> None:
        self.system = system

    def __enter__(self) -> System:
        assert self.system.zk_url is not None
        self.system._client = coordinator.connect(self.system.zk_url, timeout=10)
        return self.system

    def __exit__(self, *exc: object) -> None:
        client, self.system._client = self.system._client, None
        if client is not None:
            client.close()


def distinct_ports(n: int) -> list[int]:
    """``n`` free ports, no two the same (the kernel may hand out a port it just handed out,
    once the probe closed it: two brokers of one run once got the same one)."""
    ports: list[int] = []
    while len(ports) < n:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


def partctl_system(directory: Path, zk_address: str,
                   settings: Mapping[str, str] | None = None) -> System:
    """partctl's three brokers on a fresh chroot of the ZooKeeper at ``zk_address``, with
    ``settings`` added to their server.properties."""
    url = f"zookeeper://{zk_address}/partctl-{uuid.uuid4().hex[:8]}"
    system = System(key="partctl", label="partctl", directory=directory, zk_url=url)
    extra = (f"zookeeper.session.timeout.ms={SESSION_MS}\n"
             "group.initial.rebalance.delay.ms=0\n"
             + "".join(f"{k}={v}\n" for k, v in (settings or {}).items()))
    ports = distinct_ports(3)
    for node_id in (1, 2, 3):
        port = ports[node_id - 1]
        where = directory / f"broker-{node_id}"
        holder: dict[str, LaunchedBroker] = {}

        def launch(node_id: int = node_id, port: int = port, where: Path = where,
                   holder: dict[str, LaunchedBroker] = holder) -> subprocess.Popen[bytes]:
            holder["b"] = launch_broker(where, node_id, url, port=port, extra=extra)
            return holder["b"].process

        system.nodes[node_id] = Node(node_id=node_id, port=port, launch=launch,
                                    log_path=where / "broker.log")
    return system


def _kafka_node(directory: Path, version: str, node_id: int, port: int,
                settings: Mapping[str, object], heap: tuple[str, ...]) -> Node:
    where = directory / f"broker-{node_id}"
    where.mkdir(parents=True, exist_ok=True)
    config = where / "server.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))

    def launch() -> subprocess.Popen[bytes]:
        command = ["java", *heap, *KAFKA_JVM, *_logging(where, version, tool=False),
                   "-cp", classpath(version), "kafka.Kafka", str(config)]
        with open(where / "console.log", "ab") as console:
            return subprocess.Popen(command, cwd=where, stdout=console,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)

    return Node(node_id=node_id, port=port, launch=launch, log_path=where / "server.log")


def kafka_zk_system(directory: Path, zk_address: str, version: str,
                    heap: tuple[str, ...] = KAFKA_HEAP,
                    settings: Mapping[str, str] | None = None) -> System:
    """Kafka ``version`` (3.x) in ZooKeeper mode on a fresh chroot of ``zk_address``."""
    classpath(version)
    chroot = f"/kafka-{uuid.uuid4().hex[:8]}"
    system = System(key="kafka3", label=f"Kafka {version}", directory=directory,
                    zk_url=f"zookeeper://{zk_address}{chroot}", version=version)
    ports = distinct_ports(3)
    for node_id in (1, 2, 3):
        port = ports[node_id - 1]
        system.nodes[node_id] = _kafka_node(directory, version, node_id, port, {
            "broker.id": node_id,
            "listeners": f"PLAINTEXT://{HOST}:{port}",
            "log.dirs": directory / f"broker-{node_id}" / "data",
            "zookeeper.connect": f"{zk_address}{chroot}",
            "zookeeper.session.timeout.ms": SESSION_MS,
            "group.initial.rebalance.delay.ms": 0,
            **(settings or {}),
        }, heap)
    return system


def _cluster_id() -> str:
    """A KRaft cluster id as Kafka's storage tool makes one: a random UUID in URL-safe
    base64, unpadded, not starting with a dash."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


def kafka_kraft_system(directory: Path, version: str, work: Path,
                       heap: tuple[str, ...] = KAFKA_HEAP,
                       settings: Mapping[str, str] | None = None) -> System:
    """Kafka ``version`` (4.x) in KRaft combined mode, its storage formatted first."""
    classpath(version)
    system = System(key="kafka4", label=f"Kafka {version} KRaft", directory=directory,
                    version=version)
    picked = distinct_ports(6)
    ports = {n: (picked[2 * n - 2], picked[2 * n - 1]) for n in (1, 2, 3)}
    voters = ",".join(f"{n}@{HOST}:{c}" for n, (_p, c) in ports.items())
    cluster_id = None
    for node_id, (port, controller_port) in ports.items():
        node = _kafka_node(directory, version, node_id, port, {
            "process.roles": "broker,controller",
            "node.id": node_id,
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{controller_port}",
            "advertised.listeners": f"PLAINTEXT://{HOST}:{port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": directory / f"broker-{node_id}" / "data",
            "group.initial.rebalance.delay.ms": 0,
            **(settings or {}),
        }, heap)
        if cluster_id is None:
            cluster_id = _cluster_id()
        formatted = java_tool(version, work, "kafka.tools.StorageTool", "format",
                              "--ignore-formatted", "--cluster-id", cluster_id, "--config",
                              str(directory / f"broker-{node_id}" / "server.properties"))
        if formatted.returncode != 0:
            raise SystemError_(f"Kafka {version} storage format of node {node_id} failed: "
                               f"{(formatted.stdout + formatted.stderr).strip()[-300:]}")
        system.nodes[node_id] = node
    return system


def rss_kib(pid: int) -> int | None:
    """VmRSS of a process in KiB (/proc/PID/status); None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None
