"""Kafka's Java clients on three partctl broker processes: the producer (idempotent,
acks=all), the consumer (the classic group protocol, and KIP-848's ``group.protocol=consumer``
with Kafka 4.x's client) and a Kafka Streams application, a word count with a repartition topic
and a compacted changelog, through which one broker is SIGKILLed and started again; the same
word count exactly once (``exactly_once_v2``: transactions, read_committed), through a SIGKILL
of the application and of a broker; Kafka's own TransactionalMessageCopier (a transactional
producer that aborts a third of its transactions, read_committed input, offsets in the
transaction) through a SIGKILL and a fenced zombie, read back by Kafka's ConsoleConsumer.

The clients are the small Java programs of ``tests/kafka/java/``, compiled with the JDK (javac
against that version's ``kafka-clients`` and ``kafka-streams`` jars) into a jar of the class
archives' cache, once per content of the sources and jars (tests/class_archive.py), run with
``java -cp`` and a small heap. Each prints one line per
thing that happened (a record acknowledged, an assignment, a record read, a state change);
the test reads those lines as they come, waiting with deadlines, and checks the data it reads
back with confluent-kafka. Kafka 4.4.0's clients run every time (Streams and KIP-848 need
them; one compile serves all); 3.9.1's producer and classic consumer are the long tier."""

from __future__ import annotations

import collections
import contextlib
import json
import random
import signal
import struct
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from broker.cluster import LaunchedBroker, LocalCluster, launch_broker
from tests.broker.processes import TEST_SETTINGS
from tests.class_archive import NONE, Archive, archive_for, compiled_jar
from tests.waiting import wait_until

from .conftest import require_kafka
from .harness import HERE, KAFKA_3, KAFKA_4, TOOL_JVM_OPTIONS, kafka_jars, main_class

pytestmark = pytest.mark.servers

SOURCES = HERE / "java"
LOGGING = (f"-Dlog4j.configuration=file:{HERE / 'log4j-tools.properties'}",
           f"-Dlog4j2.configurationFile={HERE / 'log4j2.properties'}")
RECORDS = 2000
GROUP_RECORDS = 600
LINES = 2000
VOCABULARY = ("kafka", "partctl", "broker", "leader", "follower", "replica", "epoch", "offset",
              "segment", "index", "topic", "partition", "group", "member", "commit", "fetch",
              "produce", "acks", "isr", "watermark", "controller", "zookeeper", "stream",
              "table", "changelog", "repartition", "count", "word", "java", "python")


def _topic(kind: str) -> str:
    return f"java-{kind}-{uuid.uuid4().hex[:8]}"


# --- compiling and running the Java clients ---------------------------------------------------


@pytest.fixture(scope="module")
def java_classes() -> Callable[[str], str]:
    """version -> the classpath to run the Java clients with (their classes, compiled into a
    jar once per content of the sources and jars: :func:`tests.class_archive.compiled_jar`, then
    every jar of that version)."""
    compiled: dict[str, str] = {}

    def classpath(version: str) -> str:
        jars = require_kafka(version)
        if version not in compiled:
            # only the two jars the sources use: javac reads every jar it is given
            used = [j for j in sorted(kafka_jars(version).glob("kafka-*.jar"))
                    if j.name.startswith((f"kafka-clients-{version}.",
                                          f"kafka-streams-{version}."))]
            assert len(used) == 2, used
            try:
                jar = compiled_jar(f"clients-{version}", sorted(SOURCES.glob("*.java")), used)
            except subprocess.CalledProcessError as exc:
                raise AssertionError(f"javac failed:\n{exc.stdout}{exc.stderr}") from None
            compiled[version] = f"{jar}:{jars}"
        return compiled[version]

    return classpath


@dataclass(eq=False)
class JavaClient:
    """One of the Java clients as a process; its stdout lines are read from a file as they
    come (no pipe to fill), its stderr (Kafka's warnings and errors) goes to another."""

    name: str
    process: subprocess.Popen[bytes]
    stdout: Path
    stderr: Path
    archive: Archive = NONE
    _lines: list[str] = field(default_factory=list)
    _offset: int = 0

    def lines(self) -> list[str]:
        """Every complete line written so far."""
        with open(self.stdout, "rb") as f:
            f.seek(self._offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        self._offset += end
        self._lines.extend(data[:end].decode(errors="replace").splitlines())
        return self._lines

    def words(self, first: str) -> list[list[str]]:
        """The lines that start with ``first``, split into words (``first`` left out)."""
        return [line.split(" ")[1:] for line in self.lines() if line.split(" ", 1)[0] == first]

    def running(self) -> bool:
        return self.process.poll() is None

    def wait(self, timeout: float) -> int:
        try:
            return self._ended(self.process.wait(timeout))
        except subprocess.TimeoutExpired:
            self.process.kill()
            self._ended(self.process.wait(10))
            raise AssertionError(f"{self.name} still running after {timeout:.0f}s"
                                 f"{self.tail()}") from None

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self._ended(self.process.wait(10))
        if self.process.stdin is not None:
            self.process.stdin.close()

    def _ended(self, status: int) -> int:
        """The JVM has ended: keep the class archive it dumped, if any (once)."""
        archive, self.archive = self.archive, NONE
        archive.finish(status)
        return status

    def tail(self, lines: int = 30) -> str:
        out = "\n".join(self.lines()[-lines:])
        err = "\n".join(self.stderr.read_text(errors="replace").splitlines()[-lines:])
        return f"\n--- {self.name} stdout ---\n{out}\n--- {self.name} stderr ---\n{err}"


def run_java(classpath: str, directory: Path, name: str, main: str, *args: str,
             stdin: int | None = subprocess.DEVNULL) -> JavaClient:
    directory.mkdir(parents=True, exist_ok=True)
    stdout, stderr = directory / f"{name}.out", directory / f"{name}.err"
    archive = archive_for(classpath, main, TOOL_JVM_OPTIONS)
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        process = subprocess.Popen(["java", *TOOL_JVM_OPTIONS, *archive.options, *LOGGING,
                                    "-cp", classpath, main, *args],
                                   stdin=stdin, stdout=out, stderr=err)
    return JavaClient(name, process, stdout, stderr, archive)



@contextlib.contextmanager
def clients() -> Iterator[list[JavaClient]]:
    """The Java clients a test starts; any still running at the end is killed."""
    started: list[JavaClient] = []
    try:
        yield started
    finally:
        for client in started:
            client.kill()


# --- the partctl side -------------------------------------------------------------------------


def create_topic(bootstrap: str, name: str, partitions: int, config: dict[str, str] | None = None
                 ) -> None:
    """Create ``name`` (replication factor 3, ``min.insync.replicas=2`` unless ``config`` says
    otherwise) and wait until every partition has a leader and all three replicas in sync."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(name, partitions, 3, config={"min.insync.replicas": "2", **(config or {})})
    admin.create_topics([topic])[name].result(30)

    def settled() -> bool:
        meta = admin.list_topics(name, timeout=10).topics.get(name)
        return (meta is not None and meta.error is None and len(meta.partitions) == partitions
                and all(p.leader >= 1 and len(p.isrs) == 3 for p in meta.partitions.values()))

    wait_until(settled, timeout=60, interval=0.2, message=f"{name}'s leaders and ISR")


def read_all(bootstrap: str, topic: str, timeout: float = 60.0, *,
             isolation: str = "read_uncommitted"
             ) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """Every record of ``topic`` up to its ends now (the high watermarks; the last stable
    offsets with ``isolation="read_committed"``), as (partition, offset, key, value), read
    without a group. The position, not the last record, says how far a partition is read: a
    read_committed consumer skips the transaction markers and aborted records."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "isolation.level": isolation})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in partitions}
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        records: list[tuple[int, int, bytes | None, bytes | None]] = []
        positions = dict.fromkeys(partitions, 0)
        deadline = time.monotonic() + timeout
        while any(positions[p] < ends[p] for p in partitions):
            assert time.monotonic() < deadline, f"{topic}: read {positions} of {ends}"
            for message in consumer.consume(1000, 0.5):
                assert message.error() is None, message.error()
                records.append((message.partition(), message.offset(), message.key(),
                                message.value()))
                positions[message.partition()] = message.offset() + 1
            for tp in consumer.position([TopicPartition(topic, p) for p in partitions]):
                if tp.offset >= 0:
                    positions[tp.partition] = max(positions[tp.partition], tp.offset)
        return records
    finally:
        consumer.close()


def produce_lines(bootstrap: str, topic: str, lines: list[tuple[int, str]]) -> None:
    """Write (number, line) pairs, keyed by the number, acks=all; every one acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5})
    errors: list[object] = []
    for number, line in lines:
        producer.produce(topic, key=str(number), value=line,
                         on_delivery=lambda err, _msg: errors.append(err) if err else None)
        producer.poll(0)
    assert producer.flush(120) == 0 and errors == [], errors


def restart_broker(cluster: LocalCluster, broker_id: int) -> None:
    """Start broker ``broker_id`` again (it must have exited) on its directory and port, in
    the cluster's list in place of its old process, and wait until it serves."""
    index = next(i for i, b in enumerate(cluster.brokers) if b.broker_id == broker_id)
    old: LaunchedBroker = cluster.brokers[index]
    assert not old.running()
    extra = dict(line.split("=", 1) for line in TEST_SETTINGS.splitlines() if "=" in line)
    new = launch_broker(old.directory, broker_id, cluster.coordinator_url, port=old.port or 0,
                        extra=extra)
    cluster.brokers[index] = new
    new.wait_serving(90)


# --- the producer -----------------------------------------------------------------------------


@pytest.mark.parametrize("version", [KAFKA_4, pytest.param(KAFKA_3, marks=pytest.mark.long)])
def test_java_idempotent_producer_each_acknowledged_record_once_at_its_offset(
        version: str, partctl_three: LocalCluster, java_classes: Callable[[str], str],
        tmp_path: Path) -> None:
    bootstrap = partctl_three.bootstrap_servers
    topic = _topic("produce")
    create_topic(bootstrap, topic, 3)
    prefix = f"v{version}"
    with clients() as started:
        producer = run_java(java_classes(version), tmp_path, "produce", "Produce", bootstrap,
                            topic, str(RECORDS), prefix)
        started.append(producer)
        status = producer.wait(180)
    assert status == 0, producer.tail()
    assert producer.words("done") == [[str(RECORDS), "0"]], producer.tail()
    acked = {value: (int(p), int(o)) for p, o, value in producer.words("acked")}
    assert sorted(acked) == sorted(f"{prefix}-{i}" for i in range(RECORDS))

    records = read_all(bootstrap, topic)
    found = collections.defaultdict(list)
    for partition, offset, key, value in records:
        assert value is not None and key is not None
        found[value.decode()].append((partition, offset))
        assert value.decode() == f"{prefix}-{key.decode()}"
    assert len(records) == RECORDS, f"{len(records)} records for {RECORDS} acknowledged"
    assert {v: where for v, [where] in found.items()} == acked


# --- the consumer -----------------------------------------------------------------------------


def _alive(member: JavaClient) -> bool:
    """False while ``member`` runs; fails with its output once it has exited."""
    assert member.running(), f"{member.name} exited ({member.process.poll()}){member.tail()}"
    return False


def _assignment(member: JavaClient) -> set[int] | None:
    """A member's latest assignment (None before its first)."""
    assigned = member.words("assigned")
    if not assigned:
        return None
    return {int(p) for p in assigned[-1][0].split(",") if p} if assigned[-1] else set()


@pytest.mark.parametrize(("protocol", "version"), [
    ("classic", KAFKA_4), ("consumer", KAFKA_4),
    pytest.param("classic", KAFKA_3, marks=pytest.mark.long)])
def test_java_consumers_share_a_groups_partitions_and_commit(
        protocol: str, version: str, partctl_three: LocalCluster,
        java_classes: Callable[[str], str], tmp_path: Path) -> None:
    """Two members of one group (``group.protocol`` classic, or consumer: KIP-848, the
    brokers assign) split a topic's partitions, read every record once between them and
    commit the end of every partition; then they leave."""
    bootstrap = partctl_three.bootstrap_servers
    partitions = 4
    topic, group = _topic("consume"), f"java-{protocol}-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions)
    stop = tmp_path / "stop"
    classpath = java_classes(version)
    with clients() as members:
        for name in ("a", "b"):
            members.append(run_java(classpath, tmp_path, name, "Consume", bootstrap, topic,
                                    group, protocol, str(stop)))
            wait_until(lambda m=members[-1]: _assignment(m) or _alive(m), timeout=90,
                       interval=0.2, message=f"member {name}'s first partitions")

        def shared() -> bool:
            a, b = (_assignment(m) or set() for m in members)
            return bool(a) and bool(b) and not a & b and a | b == set(range(partitions))

        try:
            wait_until(shared, timeout=90, interval=0.2, message="the partitions shared")
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {[_assignment(m) for m in members]}"
                                 + "".join(m.tail() for m in members)) from None
        values = [f"{protocol}-{i}" for i in range(GROUP_RECORDS)]
        produce_lines(bootstrap, topic, list(enumerate(values)))

        def read() -> list[str]:
            return [w[2] for m in members for w in m.words("record")]

        try:
            wait_until(lambda: set(read()) == set(values), timeout=90, interval=0.2,
                       message="every record read")
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {len(set(read()))} of {GROUP_RECORDS}"
                                 + "".join(m.tail() for m in members)) from None
        assert sorted(read()) == sorted(values), "a record read twice"
        for member in members:  # each read only from its own partitions
            owned = _assignment(member)
            assert {int(w[0]) for w in member.words("record")} <= (owned or set())

        admin = AdminClient({"bootstrap.servers": bootstrap})
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
        try:
            ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                    for p in range(partitions)}

            def committed() -> dict[int, int]:
                future = admin.list_consumer_group_offsets(
                    [ConsumerGroupTopicPartitions(group)])[group]
                return {tp.partition: tp.offset for tp in future.result(10).topic_partitions
                        if tp.topic == topic}

            wait_until(lambda: committed() == ends, timeout=30, interval=0.2,
                       message=f"commits at the ends {ends}")
            description = admin.describe_consumer_groups([group])[group].result(10)
            assert len(description.members) == 2
            assert description.type.name == ("CONSUMER" if protocol == "consumer"
                                             else "CLASSIC"), description
        finally:
            consumer.close()
        stop.touch()
        for member in members:
            assert member.wait(60) == 0, member.tail()
            assert member.lines()[-1] == "closed"


# --- Kafka Streams ------------------------------------------------------------------------------


def _lines(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(1, 8)))
            for _ in range(count)]


def _latest_counts(bootstrap: str, topic: str, isolation: str = "read_uncommitted"
                   ) -> dict[str, int]:
    """The output topic read as a table: each word's latest count."""
    latest: dict[str, int] = {}
    for _partition, _offset, key, value in sorted(read_all(bootstrap, topic,
                                                           isolation=isolation)):
        assert key is not None and value is not None and len(value) == 8
        latest[key.decode()] = struct.unpack(">q", value)[0]
    return latest


def _group_coordinator(bootstrap: str, group: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group])[group].result(10).coordinator.id


@pytest.mark.parametrize("version", [KAFKA_4, pytest.param(KAFKA_3, marks=pytest.mark.long)])
def test_kafka_streams_word_count_exact_through_a_broker_sigkill(
        version: str, partctl_three: LocalCluster, java_classes: Callable[[str], str],
        tmp_path: Path) -> None:
    """The word count reads half its input, the broker coordinating its group is SIGKILLed,
    the other half is written, the broker starts again; each word's latest count is exact.
    Streams created its repartition topic and its changelog, compacted, through CreateTopics."""
    bootstrap = partctl_three.bootstrap_servers
    app = f"wordcount-{uuid.uuid4().hex[:8]}"
    source, sink = _topic("lines"), _topic("counts")
    create_topic(bootstrap, source, 3)
    create_topic(bootstrap, sink, 3)
    lines = _lines(LINES, seed=29)
    expected = collections.Counter(word for line in lines for word in line.split())
    half = LINES // 2
    produce_lines(bootstrap, source, list(enumerate(lines[:half])))

    with clients() as started:
        streams = run_java(java_classes(version), tmp_path, "wordcount", "WordCount", bootstrap,
                           app, source, sink, str(tmp_path / "state"), "3",
                           stdin=subprocess.PIPE)
        started.append(streams)

        def counted() -> int:
            assert streams.running(), streams.tail()
            return sum(_ends(bootstrap, sink).values())

        wait_until(counted, timeout=120, interval=0.5, message="the word count's first output")
        victim = _group_coordinator(bootstrap, app)
        broker = next(b for b in partctl_three.brokers if b.broker_id == victim)
        assert broker.kill() == -9
        produce_lines(bootstrap, source, [(half + i, line)
                                          for i, line in enumerate(lines[half:])])
        restart_broker(partctl_three, victim)

        latest: dict[str, int] = {}

        def exact() -> bool:
            assert streams.running(), streams.tail()
            latest.clear()
            latest.update(_latest_counts(bootstrap, sink))
            return latest == dict(expected)

        try:
            wait_until(exact, timeout=180, interval=1.0, message="every word's exact count")
        except AssertionError as exc:
            wrong = {w: (latest.get(w), n) for w, n in expected.items() if latest.get(w) != n}
            raise AssertionError(f"{exc}: (latest, expected) {wrong}{streams.tail()}") from None
        assert streams.process.stdin is not None
        streams.process.stdin.close()
        assert streams.wait(90) == 0, streams.tail()
    assert streams.words("closed") == [["true", "NOT_RUNNING"]], streams.tail()
    assert ["ERROR"] not in streams.words("state") and not streams.words("uncaught"), \
        streams.tail()

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = admin.list_topics(timeout=10).topics
    changelog, repartition = f"{app}-counts-changelog", f"{app}-words-repartition"
    assert changelog in topics and repartition in topics, sorted(topics)
    configs = admin.describe_configs([ConfigResource("topic", changelog),
                                      ConfigResource("topic", repartition)])
    policies = {resource.name: future.result(10)["cleanup.policy"].value
                for resource, future in configs.items()}
    assert policies == {changelog: "compact", repartition: "delete"}
    # the changelog holds the counts too: its latest value per word is the same
    assert _latest_counts(bootstrap, changelog) == dict(expected)


@pytest.mark.parametrize("version", [KAFKA_4, pytest.param(KAFKA_3, marks=pytest.mark.long)])
def test_kafka_streams_exactly_once_v2_exact_through_sigkills(
        version: str, partctl_three: LocalCluster, java_classes: Callable[[str], str],
        tmp_path: Path) -> None:
    """The word count with ``processing.guarantee=exactly_once_v2`` (a transactional producer,
    read_committed consumers, offsets committed in the transaction): SIGKILLed itself with a
    transaction open and started again, then the broker coordinating its group SIGKILLed and
    started again while input keeps coming. Each word's count, read committed, is exact: at
    least once, the records read again after the kill would be counted twice."""
    bootstrap = partctl_three.bootstrap_servers
    app = f"wordcount-eos-{uuid.uuid4().hex[:8]}"
    source, sink = _topic("lines"), _topic("counts")
    create_topic(bootstrap, source, 3)
    create_topic(bootstrap, sink, 3)
    lines = _lines(LINES, seed=31)
    expected = collections.Counter(word for line in lines for word in line.split())
    third = LINES // 3
    produce_lines(bootstrap, source, list(enumerate(lines[:third])))
    committed = "read_committed"

    with clients() as started:
        def start(name: str) -> JavaClient:
            streams = run_java(java_classes(version), tmp_path, name, "WordCount", bootstrap,
                               app, source, sink, str(tmp_path / "state"), "3",
                               "processing.guarantee=exactly_once_v2",
                               stdin=subprocess.PIPE)
            started.append(streams)
            return streams

        streams = start("eos-1")

        def counted() -> int:
            assert streams.running(), streams.tail()
            return sum(_ends(bootstrap, sink, committed).values())

        wait_until(counted, timeout=120, interval=0.5, message="the word count's first output")
        produce_lines(bootstrap, source, [(third + i, line)
                                          for i, line in enumerate(lines[third:2 * third])])
        streams.kill()  # SIGKILL, mid-way through the second third
        streams = start("eos-2")
        wait_until(counted, timeout=120, interval=0.5, message="the restarted word count")
        victim = _group_coordinator(bootstrap, app)
        broker = next(b for b in partctl_three.brokers if b.broker_id == victim)
        assert broker.kill() == -9
        produce_lines(bootstrap, source, [(2 * third + i, line)
                                          for i, line in enumerate(lines[2 * third:])])
        restart_broker(partctl_three, victim)

        latest: dict[str, int] = {}

        def exact() -> bool:
            assert streams.running(), streams.tail()
            latest.clear()
            latest.update(_latest_counts(bootstrap, sink, committed))
            return latest == dict(expected)

        try:
            wait_until(exact, timeout=240, interval=1.0, message="every word's exact count")
        except AssertionError as exc:
            wrong = {w: (latest.get(w), n) for w, n in expected.items() if latest.get(w) != n}
            raise AssertionError(f"{exc}: (latest, expected) {wrong}{streams.tail()}") from None
        assert streams.process.stdin is not None
        streams.process.stdin.close()
        assert streams.wait(90) == 0, streams.tail()
    assert streams.words("closed") == [["true", "NOT_RUNNING"]], streams.tail()
    assert ["ERROR"] not in streams.words("state") and not streams.words("uncaught"), \
        streams.tail()
    assert _latest_counts(bootstrap, f"{app}-counts-changelog", committed) == dict(expected)


def _ends(bootstrap: str, topic: str, isolation: str = "read_uncommitted") -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ends",
                         "isolation.level": isolation})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in partitions}
    finally:
        consumer.close()


def test_kafka_streams_kip1071_protocol_gets_kafkas_unsupported_version_answer(
        partctl_three: LocalCluster, java_classes: Callable[[str], str],
        tmp_path: Path) -> None:
    """partctl has no streams group protocol (KIP-1071, StreamsGroupHeartbeat, api 88): an
    application that asks for it (``group.protocol=streams``) is told so as a Kafka broker
    without it tells it, through ApiVersions, and stops in ERROR; it does not hang."""
    bootstrap = partctl_three.bootstrap_servers
    source, sink = _topic("lines"), _topic("counts")
    create_topic(bootstrap, source, 1)
    with clients() as started:
        streams = run_java(java_classes(KAFKA_4), tmp_path, "wordcount", "WordCount",
                           bootstrap, f"kip1071-{uuid.uuid4().hex[:8]}", source, sink,
                           str(tmp_path / "state"), "3", "group.protocol=streams",
                           stdin=subprocess.PIPE)
        started.append(streams)
        assert streams.wait(120) == 1, streams.tail()
    assert ["ERROR"] in streams.words("state") and streams.words("closed"), streams.tail()
    assert any("UnsupportedVersionException: The cluster does not support the STREAMS group "
               "protocol" in " ".join(words) for words in streams.words("uncaught")), \
        streams.tail()
    assert "The node does not support STREAMS_GROUP_HEARTBEAT" in streams.stderr.read_text()


# --- Kafka's TransactionalMessageCopier ---------------------------------------------------------

COPIED = 4000
"""Enough for each copier to take seconds: with 1,000 a copier could finish its share (100 a
transaction, a few ms each) before the test, polling its output, could stop it mid-way."""


def _copier(partctl: LocalCluster, directory: Path, name: str, source: str, sink: str,
            tid: str) -> JavaClient:
    """Kafka 3.9.1's TransactionalMessageCopier (kafka-tools, by main class): partition 0 of
    ``source`` to ``sink``, 100 records a transaction, a third of them aborted at random.

    Its transactions time out after 10 s, not its default 60 s: a copier finds its input
    position (read_committed, so stable offsets only) before its InitProducerId fences the
    one before, and a copier killed or stopped between its offsets and its commit leaves
    them pending until its transaction is aborted. With 60 s that abort came as the next
    copier's own 60 s wait for its position ran out, and it exited (Kafka does the same)."""
    return run_java(require_kafka(KAFKA_3), directory, name,
                    "org.apache.kafka.tools.TransactionalMessageCopier",
                    "--broker-list", partctl.bootstrap_servers, "--input-topic", source,
                    "--input-partition", "0", "--output-topic", sink,
                    "--consumer-group", f"{tid}-group", "--transactional-id", tid,
                    "--transaction-size", "100", "--enable-random-aborts",
                    "--transaction-timeout", "10000")


def _copied(copier: JavaClient) -> int | None:
    """How many records ``copier`` has committed (None before its first status line, which
    it prints once its InitProducerId is answered); fails if it exited."""
    assert copier.running(), f"{copier.name} exited{copier.tail()}"
    status = [json.loads(line) for line in copier.lines() if line.startswith("{")]
    return max((s.get("totalProcessed", 0) for s in status), default=None)


def _console(directory: Path, name: str, bootstrap: str, topic: str, isolation: str,
             count: int) -> JavaClient:
    """Kafka 3.9.1's ConsoleConsumer reading the first ``count`` records of partition 0 of
    ``topic`` with ``isolation``, offsets printed."""
    return run_java(require_kafka(KAFKA_3), directory, name,
                    main_class(KAFKA_3, "console-consumer"), "--bootstrap-server", bootstrap,
                    "--topic", topic, "--partition", "0", "--offset", "earliest",
                    "--isolation-level", isolation, "--max-messages", str(count),
                    "--timeout-ms", "60000", "--property", "print.offset=true")


def _read(console: JavaClient, count: int) -> dict[int, str]:
    """What ``console`` read, offset -> value, once it is done."""
    assert console.wait(180) == 0, console.tail()
    records = {int(offset): value for offset, value in (
        line.removeprefix("Offset:").split("\t", 1)
        for line in console.lines() if line.startswith("Offset:"))}
    assert len(records) == count, (len(records), console.tail())
    return records


def test_kafkas_transactional_copier_exactly_once_through_a_sigkill_and_a_zombie(
        partctl_three: LocalCluster, tmp_path: Path) -> None:
    """Kafka's TransactionalMessageCopier (consume read_committed, produce, offsets in the
    transaction, random aborts) copies a partition: SIGKILLed mid-way and started again with
    its transactional id; that second one paused (SIGSTOP) mid-way while a third takes the id
    over, then resumed beside it: it is fenced. Kafka's ConsoleConsumer reads every input
    value exactly once read_committed; read_uncommitted it also reads the copies the aborted
    transactions wrote."""
    bootstrap = partctl_three.bootstrap_servers
    source, sink, tid = _topic("copy-in"), _topic("copy-out"), f"copier-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, source, 1)
    create_topic(bootstrap, sink, 1)
    values = [f"copy-{i}" for i in range(COPIED)]
    produce_lines(bootstrap, source, list(enumerate(values)))
    with clients() as started:
        first = _copier(partctl_three, tmp_path, "copier-1", source, sink, tid)
        started.append(first)
        wait_until(lambda: (_copied(first) or 0) >= COPIED // 4, timeout=180, interval=0.2,
                   message="a quarter copied")
        first.kill()  # SIGKILL: a transaction of it is left open
        second = _copier(partctl_three, tmp_path, "copier-2", source, sink, tid)
        started.append(second)
        wait_until(lambda: (_copied(second) or 0) >= COPIED // 4, timeout=180,
                   interval=0.2, message="the second copier a quarter on")
        second.process.send_signal(signal.SIGSTOP)  # a zombie to be
        third = _copier(partctl_three, tmp_path, "copier-3", source, sink, tid)
        started.append(third)
        wait_until(lambda: _copied(third) is not None, timeout=180, interval=0.2,
                   message="the third copier's producer id")  # the second one is fenced
        second.process.send_signal(signal.SIGCONT)
        wait_until(lambda: "ProducerFencedException" in second.stderr.read_text(),
                   timeout=120, interval=0.2, message="the zombie fenced")
        second.kill()  # else its client waits out max.block.ms (60 s) before it exits
        assert third.wait(180) == 0, third.tail()

    committed = read_all(bootstrap, sink, isolation="read_committed")
    assert len(committed) == COPIED, f"{len(committed)} committed records for {COPIED}"
    everything = read_all(bootstrap, sink)
    with clients() as started:  # the two Java readers at once
        started.extend(_console(tmp_path, f"console-{isolation}", bootstrap, sink, isolation,
                                count)
                       for isolation, count in (("read_committed", COPIED),
                                                ("read_uncommitted", len(everything))))
        java_committed, java_all = _read(started[0], COPIED), _read(started[1],
                                                                    len(everything))
    assert sorted(java_committed.values()) == sorted(values)  # each exactly once
    aborted = {o: v for o, v in java_all.items() if o not in java_committed}
    assert aborted and set(aborted.values()) <= set(values), len(everything)
    assert {o: java_all[o] for o in java_committed} == java_committed
