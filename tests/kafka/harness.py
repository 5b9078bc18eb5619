"""Apache Kafka itself, beside partctl, for the tests: real Kafka brokers on loopback and
Kafka's own tools, from the jars that ``tests/kafka/resolve.sh`` (run by ``.ci/setup``) copies
from Maven Central into a cache outside the work tree (``$PARTCTL_KAFKA_CACHE``, default
``~/.cache/partctl/kafka/<version>/``). Kafka is a test and benchmark dependency only: nothing
in partctl's packages refers to it.

Two versions (``versions.env``): :data:`KAFKA_3` (3.9.1, the last line with ZooKeeper mode),
started by :func:`start_kafka_zk` on a ZooKeeper the tests started, in a chroot of its own; and
:data:`KAFKA_4` (the newest 4.x, KRaft only), started by :func:`start_kafka_kraft` in combined
mode (every node a broker and a controller), its storage formatted first by Kafka's storage
tool. :func:`add_kafka_broker` adds a broker to a running cluster of either kind (in KRaft a
broker-only node of the same quorum). The jars have no ``bin/``: :func:`run_tool` runs a tool by its main class, or by the name
of the script Kafka ships (``topics`` for ``kafka-topics.sh``: :func:`main_class`).

Each broker is ``java -cp <jars> kafka.Kafka server.properties`` in a directory of its own
(``server.properties``, ``server.log``, ``console.log``, ``data/``), on free ports of 127.0.0.1
(:func:`coordinator.servers.free_port`, which honours ``PARTCTL_PORT_RANGE``), with a small heap
and the serial collector, so that a few fit on a small machine. A start returns once every
broker answers a real Metadata request listing every broker of the cluster (a deadline, no
sleeps); a broker that exits or does not answer in time fails the start with its log's tail.
"""

from __future__ import annotations

import base64
import hashlib
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import coordinator
from coordinator.servers import LocalServer, free_port
from tests.broker.wire_client import RawClient, request
from tests.class_archive import NONE, Archive, archive_for

__all__ = [
    "HOST", "JVM_OPTIONS", "KAFKA_3", "KAFKA_4", "TOOL_JVM_OPTIONS", "KafkaBroker",
    "KafkaCluster", "KafkaError", "KafkaNotResolved", "KafkaStartError", "add_kafka_broker",
    "kafka_available",
    "kafka_cache", "kafka_classpath", "kafka_jars", "kafka_tools", "main_class", "new_cluster_id",
    "run_tool", "start_kafka_kraft", "start_kafka_zk",
]

HERE = Path(__file__).resolve().parent
HOST = "127.0.0.1"


def _versions() -> dict[str, str]:
    pairs = (line.split("=", 1) for line in (HERE / "versions.env").read_text().splitlines()
             if "=" in line and not line.lstrip().startswith("#"))
    return {key.strip(): value.strip() for key, value in pairs}


KAFKA_3 = _versions()["KAFKA_3"]
"""Kafka 3.9.1: ZooKeeper mode (and KRaft), the last line with ZooKeeper."""
KAFKA_4 = _versions()["KAFKA_4"]
"""The newest Kafka 4.x that resolves: KRaft only."""

JVM_OPTIONS: tuple[str, ...] = ("-Xmx384m", "-Xms64m", "-XX:+UseSerialGC", "-XX:-UsePerfData",
                                "-Djava.awt.headless=true")
"""A broker's JVM: a small heap and one GC thread, for a few brokers on two cores."""
TOOL_JVM_OPTIONS: tuple[str, ...] = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                                     "-XX:-UsePerfData", "-Djava.awt.headless=true")
"""A tool's JVM: short-lived, so the quick compiler only (a second less to start)."""

# Kafka's scripts by name (kafka-<name>.sh) -> their main class, where 3.9 and 4.x agree ...
_TOOLS = {
    "server": "kafka.Kafka",
    "storage": "kafka.tools.StorageTool",
    "topics": "org.apache.kafka.tools.TopicCommand",
    "console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "transactions": "org.apache.kafka.tools.TransactionsCommand",
    "features": "org.apache.kafka.tools.FeatureCommand",
    "metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "delegation-tokens": "org.apache.kafka.tools.DelegationTokenCommand",
    "client-metrics": "org.apache.kafka.tools.ClientMetricsCommand",
    "verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "e2e-latency": "org.apache.kafka.tools.EndToEndLatency",
    "replica-verification": "org.apache.kafka.tools.ReplicaVerificationTool",
    "streams-application-reset": "org.apache.kafka.tools.StreamsResetter",
}
# ... and where they differ: the Scala tools of 3.9 moved to Java in org.apache.kafka.tools
_TOOLS_BY_MAJOR = {
    3: {
        "configs": "kafka.admin.ConfigCommand",
        "console-producer": "kafka.tools.ConsoleProducer",
        "acls": "kafka.admin.AclCommand",
        "broker-api-versions": "kafka.admin.BrokerApiVersionsCommand",
        "dump-log": "kafka.tools.DumpLogSegments",
        "zookeeper-security-migration": "kafka.admin.ZkSecurityMigrator",
    },
    4: {
        "configs": "org.apache.kafka.tools.ConfigCommand",
        "console-producer": "org.apache.kafka.tools.ConsoleProducer",
        "acls": "org.apache.kafka.tools.AclCommand",
        "broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
        "dump-log": "org.apache.kafka.tools.DumpLogSegments",
        "groups": "org.apache.kafka.tools.GroupsCommand",
        "share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
        "streams-groups": "org.apache.kafka.tools.streams.StreamsGroupCommand",
    },
}


class KafkaError(Exception):
    """The reference Kafka could not be used."""


class KafkaNotResolved(KafkaError):
    """A version's jars are not in the cache (the message says how to get them)."""


class KafkaStartError(KafkaError):
    """A broker exited or did not serve in time (the message ends with its log's tail)."""


# --- the jars -----------------------------------------------------------------------------------


def kafka_cache() -> Path:
    """Where resolve.sh puts the jars: ``$PARTCTL_KAFKA_CACHE`` or ~/.cache/partctl/kafka."""
    configured = os.environ.get("PARTCTL_KAFKA_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "partctl" / "kafka"


def kafka_jars(version: str) -> Path:
    """The directory of ``version``'s jars (complete or not)."""
    return kafka_cache() / version


def _marker(version: str) -> str:
    """What resolve.sh writes into ``.resolved`` once ``version`` is complete for this pom."""
    pom = hashlib.sha256((HERE / "pom.xml").read_bytes()).hexdigest()[:16]
    return f"kafka {version} pom {pom}"


def kafka_available(version: str) -> bool:
    """Whether ``version``'s jars are complete in the cache, for the pom of this checkout."""
    try:
        return (kafka_jars(version) / ".resolved").read_text().strip() == _marker(version)
    except OSError:
        return False


def kafka_classpath(version: str) -> str:
    """Java's classpath of ``version`` (every jar of its directory); :class:`KafkaNotResolved`
    when they are not complete."""
    if not kafka_available(version):
        raise KafkaNotResolved(
            f"Apache Kafka {version} is not resolved in {kafka_jars(version)}: run "
            f"`bash tests/kafka/resolve.sh` (.ci/setup does) with Maven and Maven Central")
    return str(kafka_jars(version) / "*")


def main_class(version: str, tool: str) -> str:
    """The main class of Kafka's ``kafka-<tool>.sh`` in ``version`` (``topics``, ``configs``,
    ``console-consumer``, ...); a name with a dot is taken as a main class already."""
    if "." in tool:
        return tool
    found = kafka_tools(version).get(tool)
    if found is None:
        raise KafkaError(f"no main class known for kafka-{tool}.sh of Kafka {version}")
    return found


def kafka_tools(version: str) -> dict[str, str]:
    """Every script name :func:`main_class` knows for ``version``, with its main class."""
    major = int(version.split(".", 1)[0])
    return {**_TOOLS, **_TOOLS_BY_MAJOR.get(major, {})}


def _logging_options(log4j: Path) -> list[str]:
    # SLF4J goes to reload4j (slf4j-reload4j is on the classpath); Kafka 4.x also carries
    # Log4j 2, which gets a config of its own so that it does not complain of having none
    return [f"-Dlog4j.configuration=file:{log4j}",
            f"-Dlog4j2.configurationFile={HERE / 'log4j2.properties'}"]


def _java(version: str, jvm_options: Sequence[str], log4j: Path, main: str,
          *args: str, properties: Sequence[str] = ()) -> tuple[list[str], Archive]:
    """The command line of one JVM, with its class archive (:mod:`tests.class_archive`), to be
    finished once the JVM has ended."""
    classpath = kafka_classpath(version)
    archive = archive_for(classpath, main, jvm_options)
    return ["java", *jvm_options, *archive.options, *properties, *_logging_options(log4j),
            "-cp", classpath, main, *args], archive


def run_tool(version: str, tool: str, *args: str, input: str | None = None,
             timeout: float = 120.0, jvm_options: Sequence[str] = TOOL_JVM_OPTIONS,
             env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run one of Kafka's tools (a main class, or a script's name: :func:`main_class`) with
    ``version``'s jars and wait for it: its exit status, stdout and stderr (Kafka's own log
    lines, warnings and up, go to stderr). Raises :class:`subprocess.TimeoutExpired` after
    ``timeout`` (the tool is killed)."""
    command, archive = _java(version, jvm_options, HERE / "log4j-tools.properties",
                             main_class(version, tool), *args)
    returncode = None
    try:
        done = subprocess.run(command, input=input, capture_output=True, text=True,
                              timeout=timeout, env={**os.environ, **(env or {})},
                              stdin=None if input is not None else subprocess.DEVNULL)
        returncode = done.returncode
    finally:
        archive.finish(returncode)
    return done


def new_cluster_id() -> str:
    """A cluster id as Kafka makes one (a random UUID in URL-safe base64, unpadded, never
    starting with a dash), for formatting KRaft storage."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


# --- brokers ------------------------------------------------------------------------------------


@dataclass(eq=False)
class KafkaBroker:
    """One Kafka broker (or combined broker and controller) process and its directory; not a
    value: it has a lifetime. :meth:`start` starts it again on the same directory and ports."""

    node_id: int
    version: str
    directory: Path
    port: int
    jvm_options: tuple[str, ...]
    controller_port: int | None = None
    process: subprocess.Popen[bytes] | None = None
    _archive: Archive = field(default=NONE, repr=False)

    @property
    def config_path(self) -> Path:
        return self.directory / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.directory / "server.log"

    @property
    def console_path(self) -> Path:
        return self.directory / "console.log"

    @property
    def address(self) -> tuple[str, int]:
        return HOST, self.port

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        """Start the process (it must not be running); does not wait for it to serve."""
        if self.running():
            raise KafkaError(f"Kafka broker {self.node_id} is running already")
        command, self._archive = _java(self.version, self.jvm_options,
                                       HERE / "log4j-broker.properties", "kafka.Kafka",
                                       str(self.config_path),
                                       properties=[f"-Dkafka.logs.dir={self.directory}"])
        with open(self.console_path, "ab") as console:
            self.process = subprocess.Popen(command, cwd=self.directory, stdout=console,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True)

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (Kafka's controlled shutdown), SIGKILL after ``timeout``: the exit status
        (143 for a JVM that stopped on SIGTERM, -9 if killed; None if it never ran). Stopping
        a stopped broker does nothing more."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self._ended(self.process.wait(timeout))
            except subprocess.TimeoutExpired:
                pass
        return self.kill()

    def kill(self) -> int | None:
        """SIGKILL: the exit status (None if it never ran)."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.kill()
        return self._ended(self.process.wait(30))

    def _ended(self, status: int) -> int:
        """The process has ended with ``status``: keep the class archive it dumped, if any."""
        archive, self._archive = self._archive, NONE
        archive.finish(status)
        return status

    def log(self) -> str:
        """The broker's log (every run of it): Kafka's ``server.log``."""
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of ``server.log`` and of the JVM's own output (``console.log``)."""
        try:
            console = self.console_path.read_text(errors="replace")
        except OSError:
            console = ""
        tail = "\n".join(self.log().splitlines()[-lines:])
        return f"{tail}\n--- console.log ---\n" + "\n".join(console.splitlines()[-lines:])

    def metadata_brokers(self, timeout: float = 2.0) -> set[int] | None:
        """The brokers this broker's Metadata answer lists, once it has a controller; None while
        it does not answer (one Metadata v12 round trip, no topics)."""
        body = request(3, 12, topics=(), allow_auto_topic_creation=False,
                       include_topic_authorized_operations=False)
        try:
            with RawClient(self.address, timeout=timeout) as client:
                response = client.call(body)
        except (OSError, ConnectionError):
            return None
        if response.controller_id < 0:
            return None
        return {b.node_id for b in response.brokers}


@dataclass(eq=False)
class KafkaCluster:
    """Kafka brokers 1..N of one cluster, in ``directory``; not a value: it has a lifetime."""

    version: str
    mode: Literal["zookeeper", "kraft"]
    directory: Path
    brokers: dict[int, KafkaBroker]
    zookeeper_connect: str | None = None
    """``host:port/chroot`` in ZooKeeper mode."""
    cluster_id: str | None = None
    """The id its storage was formatted with, in KRaft mode."""
    statuses: dict[int, int | None] = field(default_factory=dict)

    @property
    def bootstrap(self) -> str:
        """Every broker's ``host:port``, comma-separated (for ``--bootstrap-server``)."""
        return ",".join(b.bootstrap for b in self.brokers.values())

    def broker(self, node_id: int) -> KafkaBroker:
        return self.brokers[node_id]

    def wait_serving(self, node_ids: Sequence[int] | None = None, timeout: float = 120.0) -> None:
        """Until each broker of ``node_ids`` (default: all) answers Metadata listing every
        broker of the cluster that runs (one stopped for good is not waited for);
        :class:`KafkaStartError` with the log of one that exits or does not, in time."""
        waiting = [self.brokers[n] for n in (node_ids or sorted(self.brokers))]
        everyone = {n for n, b in self.brokers.items() if b.running()} | {
            b.node_id for b in waiting}
        deadline = time.monotonic() + timeout
        while waiting:
            for broker in list(waiting):
                if not broker.running():
                    status = broker.process.poll() if broker.process is not None else None
                    raise KafkaStartError(
                        f"Kafka {self.version} broker {broker.node_id} exited (status "
                        f"{status}) before serving; {broker.directory}:\n{broker.log_tail()}")
                listed = broker.metadata_brokers()
                if listed is not None and everyone <= listed:
                    waiting.remove(broker)
            if waiting and time.monotonic() > deadline:
                broker = waiting[0]
                raise KafkaStartError(
                    f"Kafka {self.version} broker {broker.node_id} not serving after "
                    f"{timeout:.0f}s; {broker.directory}:\n{broker.log_tail()}")
            if waiting:
                time.sleep(0.2)

    def stop(self, timeout: float = 30.0) -> dict[int, int | None]:
        """SIGTERM to every broker, then wait for each (SIGKILL after ``timeout``): node id ->
        exit status. The directory is kept (the caller's, e.g. a pytest tmp_path)."""
        for broker in self.brokers.values():
            if broker.running():
                assert broker.process is not None
                broker.process.send_signal(signal.SIGTERM)
        for node_id, broker in self.brokers.items():
            self.statuses[node_id] = broker.stop(timeout)
        return dict(self.statuses)

    def kill(self, node_id: int) -> int | None:
        """SIGKILL one broker: its exit status."""
        return self.brokers[node_id].kill()

    def restart(self, node_id: int, *, timeout: float = 120.0, stop_timeout: float = 30.0
                ) -> None:
        """Stop one broker (if running: SIGTERM, SIGKILL after ``stop_timeout``) and start it
        again on its directory and ports; return once the cluster's brokers all serve again.
        In ZooKeeper mode it starts once its last registration has gone: a killed broker's
        lives until its session expires, and Kafka refuses to start beside it."""
        broker = self.brokers[node_id]
        broker.stop(stop_timeout)
        if self.mode == "zookeeper":
            self._wait_unregistered(node_id, timeout)
        broker.start()
        self.wait_serving(timeout=timeout)

    def _wait_unregistered(self, node_id: int, timeout: float) -> None:
        assert self.zookeeper_connect is not None
        client = coordinator.connect(f"zookeeper://{self.zookeeper_connect}", timeout=10)
        path = f"/brokers/ids/{node_id}"
        try:
            deadline = time.monotonic() + timeout
            while client.exists(path) is not None:
                if time.monotonic() > deadline:
                    raise KafkaStartError(f"{path} still registered after {timeout:.0f}s")
                time.sleep(0.1)
        finally:
            client.close()

    def log(self, node_id: int | None = None) -> str:
        """One broker's server.log, or every broker's, each under a header line."""
        if node_id is not None:
            return self.brokers[node_id].log()
        return "".join(f"=== Kafka broker {n} ({b.log_path}) ===\n{b.log()}"
                       for n, b in self.brokers.items())

    def __enter__(self) -> KafkaCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _small_cluster(n: int) -> dict[str, str]:
    """Settings for a few brokers on a small machine (Kafka's defaults expect three or more
    brokers, 50 offsets partitions and a core per thread)."""
    return {
        "num.partitions": "1",
        "offsets.topic.replication.factor": str(min(3, n)),
        "offsets.topic.num.partitions": "10",
        "transaction.state.log.replication.factor": str(min(3, n)),
        "transaction.state.log.min.isr": str(min(2, n)),
        "transaction.state.log.num.partitions": "10",
        "group.initial.rebalance.delay.ms": "0",
        "num.network.threads": "2",
        "num.io.threads": "2",
        "num.recovery.threads.per.data.dir": "1",
        "num.replica.fetchers": "1",
        "background.threads": "2",
        "log.cleaner.dedupe.buffer.size": str(16 * 1024 * 1024),
    }


def _write_properties(path: Path, settings: Mapping[str, object]) -> None:
    path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))


def _start_all(cluster: KafkaCluster, timeout: float) -> KafkaCluster:
    try:
        for broker in cluster.brokers.values():
            broker.start()
        cluster.wait_serving(timeout=timeout)
    except BaseException:
        cluster.stop(timeout=10)
        raise
    return cluster


def _zookeeper_address(zookeeper: LocalServer | str) -> str:
    return zookeeper if isinstance(zookeeper, str) else zookeeper.address


def start_kafka_zk(directory: str | Path, zookeeper_server: LocalServer | str, *,
                   broker_ids: Sequence[int] = (1,), version: str = KAFKA_3,
                   extra: Mapping[str, object] | None = None, chroot: str | None = None,
                   jvm_options: Sequence[str] = JVM_OPTIONS, timeout: float = 120.0
                   ) -> KafkaCluster:
    """Kafka brokers in ZooKeeper mode (3.x) on ``zookeeper_server`` (a running server or its
    ``host:port``), under ``chroot`` (default: a fresh ``/kafka-<random>``, which Kafka
    creates), each in ``directory/broker-<id>``; returns once each serves. ``extra``:
    server.properties settings over the harness's own (keys as Kafka's)."""
    root = Path(directory)
    chroot = chroot or f"/kafka-{uuid.uuid4().hex[:10]}"
    connect = f"{_zookeeper_address(zookeeper_server)}{chroot}"
    cluster = KafkaCluster(version=version, mode="zookeeper", directory=root, brokers={},
                           zookeeper_connect=connect)
    kafka_classpath(version)  # not resolved: raise before writing anything
    for node_id in broker_ids:
        cluster.brokers[node_id] = _zk_broker(cluster, node_id, tuple(jvm_options),
                                              {**_small_cluster(len(broker_ids)),
                                               **(extra or {})})
    return _start_all(cluster, timeout)


def _zk_broker(cluster: KafkaCluster, node_id: int, jvm_options: tuple[str, ...],
               settings: Mapping[str, object]) -> KafkaBroker:
    """A ZooKeeper-mode broker of ``cluster``, its directory and server.properties written."""
    port = free_port()
    broker = KafkaBroker(node_id=node_id, version=cluster.version,
                         directory=cluster.directory / f"broker-{node_id}", port=port,
                         jvm_options=jvm_options)
    broker.directory.mkdir(parents=True, exist_ok=True)
    _write_properties(broker.config_path, {
        "broker.id": node_id,
        "listeners": f"PLAINTEXT://{HOST}:{port}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{port}",
        "log.dirs": broker.directory / "data",
        "zookeeper.connect": cluster.zookeeper_connect,
        "zookeeper.connection.timeout.ms": 30000,
        # a killed broker's registration goes in 6 s (Kafka's default: 18)
        "zookeeper.session.timeout.ms": 6000,
        **settings,
    })
    return broker


def start_kafka_kraft(directory: str | Path, *, version: str = KAFKA_4,
                      node_ids: Sequence[int] = (1,), extra: Mapping[str, object] | None = None,
                      cluster_id: str | None = None, jvm_options: Sequence[str] = JVM_OPTIONS,
                      timeout: float = 120.0) -> KafkaCluster:
    """Kafka nodes in KRaft combined mode (``process.roles=broker,controller``; the nodes are
    the static controller quorum ``controller.quorum.voters``), each in
    ``directory/broker-<id>``, its storage formatted first with Kafka's storage tool and
    ``cluster_id`` (default: a new one); returns once each serves. ``extra``: server.properties
    settings over the harness's own."""
    root = Path(directory)
    cluster_id = cluster_id or new_cluster_id()
    cluster = KafkaCluster(version=version, mode="kraft", directory=root, brokers={},
                           cluster_id=cluster_id)
    kafka_classpath(version)
    for node_id in node_ids:
        cluster.brokers[node_id] = KafkaBroker(
            node_id=node_id, version=version, directory=root / f"broker-{node_id}",
            port=free_port(), controller_port=free_port(), jvm_options=tuple(jvm_options))
    voters = _voters(cluster)
    for broker in cluster.brokers.values():
        _kraft_node(cluster, broker, voters, {**_small_cluster(len(node_ids)), **(extra or {})})
    return _start_all(cluster, timeout)


def _voters(cluster: KafkaCluster) -> str:
    """``controller.quorum.voters`` of a KRaft cluster: its nodes with a controller port."""
    return ",".join(f"{b.node_id}@{HOST}:{b.controller_port}"
                    for b in cluster.brokers.values() if b.controller_port is not None)


def _kraft_node(cluster: KafkaCluster, broker: KafkaBroker, voters: str,
                settings: Mapping[str, object]) -> None:
    """Write a KRaft node's server.properties (combined when it has a controller port, a
    broker only when not) and format its storage with the cluster's id."""
    assert cluster.cluster_id is not None
    broker.directory.mkdir(parents=True, exist_ok=True)
    combined = broker.controller_port is not None
    listeners = f"PLAINTEXT://{HOST}:{broker.port}"
    if combined:
        listeners += f",CONTROLLER://{HOST}:{broker.controller_port}"
    _write_properties(broker.config_path, {
        "process.roles": "broker,controller" if combined else "broker",
        "node.id": broker.node_id,
        "controller.quorum.voters": voters,
        "listeners": listeners,
        "advertised.listeners": f"PLAINTEXT://{HOST}:{broker.port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": broker.directory / "data",
        **settings,
    })
    formatted = run_tool(cluster.version, "storage", "format", "--ignore-formatted",
                         "--cluster-id", cluster.cluster_id, "--config",
                         str(broker.config_path))
    if formatted.returncode != 0:
        raise KafkaStartError(f"Kafka {cluster.version} storage format of node "
                              f"{broker.node_id} failed ({formatted.returncode}):\n"
                              f"{formatted.stdout}{formatted.stderr}")


def add_kafka_broker(cluster: KafkaCluster, node_id: int, *,
                     extra: Mapping[str, object] | None = None, timeout: float = 120.0
                     ) -> KafkaBroker:
    """Start one more broker in a running ``cluster``, in ``directory/broker-<id>``: in
    ZooKeeper mode on the cluster's chroot; in KRaft mode a broker-only node
    (``process.roles=broker``) of the cluster's controller quorum, its storage formatted with
    the cluster's id. Returns once every running broker lists it in Metadata (the stopped
    ones are not waited for). ``extra``: server.properties settings over the harness's own."""
    if node_id in cluster.brokers:
        raise KafkaError(f"Kafka broker {node_id} is in the cluster already")
    first = next(iter(cluster.brokers.values()))
    # the cluster's own small-cluster settings (its replication factors of the internal
    # topics), not a fourth broker's
    settings = {**_small_cluster(len(cluster.brokers)), **(extra or {})}
    if cluster.mode == "zookeeper":
        broker = _zk_broker(cluster, node_id, first.jvm_options, settings)
    else:
        broker = KafkaBroker(node_id=node_id, version=cluster.version,
                             directory=cluster.directory / f"broker-{node_id}",
                             port=free_port(), jvm_options=first.jvm_options)
        _kraft_node(cluster, broker, _voters(cluster), settings)
    cluster.brokers[node_id] = broker
    broker.start()
    cluster.wait_serving([n for n, b in cluster.brokers.items() if b.running()],
                         timeout=timeout)
    return broker
