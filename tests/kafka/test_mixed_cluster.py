"""One cluster of both kinds: Kafka 3.9.1 brokers 1 and 2 and partctl broker 3 on one ZooKeeper
chroot, in ZooKeeper mode (issue 29, point 5).

The cluster is shared by the module and started Kafka first, so that a Kafka broker wins
``/controller``. Each kind reads the other's registration; Kafka's controller drives partctl's
broker (LeaderAndIsr v7, UpdateMetadata v8, StopReplica v4, what 3.9 sends at its default
``inter.broker.protocol.version``); a topic whose partitions are led by each kind and followed
by the other takes an idempotent acks=all producer's records, every ISR whole, the replicas'
logs identical batch for batch below the high watermark whichever kind wrote them. Then the
controller moves to partctl's broker (both Kafka brokers paused while ``/controller`` is
deleted, so that partctl's candidate wins the election): partctl's controller answers what a
3.9 broker sends its controller (AlterPartition, AllocateProducerIds, ControlledShutdown), a
Kafka broker restarts under it and every ISR is whole again. The fault run (``long``): a
producer running while the Kafka broker that is controller and leader is SIGKILLed and
restarted, then partctl's controller. A partctl broker refuses an
``inter.broker.protocol.version`` it cannot follow, in one line."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

import coordinator
from broker.cluster import BrokerStartError, LaunchedBroker, launch_broker, start_broker
from broker.config import ConfigError, parse_config
from coordinator.codecs import PartitionStateNode
from coordinator.errors import NoNode
from coordinator.metadata import MetadataClient
from replication.records import iter_batches
from tests.broker.processes import TEST_SETTINGS
from tests.broker.wire_client import RawClient, request
from tests.servers import Server
from tests.waiting import wait_until

from .conftest import require_kafka
from .harness import KAFKA_3, KafkaCluster, start_kafka_zk
from .tool_shell import run_shared

pytestmark = pytest.mark.servers

TOPIC = "mixed"
ASSIGNMENT = "1:3:2,3:1:2,2:3:1"
"""Partition 0 led by Kafka broker 1, partition 1 by partctl broker 3, partition 2 by Kafka
broker 2; every partition has a replica of each kind."""
REPLICAS = {0: [1, 3, 2], 1: [3, 1, 2], 2: [2, 3, 1]}
PARTCTL_ID = 3
PARTCTL_SETTINGS = TEST_SETTINGS + "zookeeper.session.timeout.ms=6000\nreplica.lag.time.max.ms=3000\n"
"""partctl's leader drops a follower 3 s behind (Kafka's default: 30), within the Kafka
brokers' 12 s ZooKeeper sessions, so that a paused Kafka follower leaves the ISR without
leaving the cluster."""


@dataclass(eq=False)
class Mixed:
    """The module's cluster: Kafka brokers 1 and 2, partctl broker 3, one chroot."""

    kafka: KafkaCluster
    partctl: LaunchedBroker
    url: str
    directory: Path
    md: MetadataClient = field(init=False)
    created: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self.md = MetadataClient(coordinator.connect(self.url, timeout=10))

    @property
    def bootstrap(self) -> str:
        return f"{self.kafka.bootstrap},{self.partctl.bootstrap}"

    def controller(self) -> int | None:
        """The broker ``/controller`` names (None while there is none)."""
        try:
            data, _ = self.md.coordinator.get("/controller")
        except NoNode:
            return None
        return int(json.loads(data)["brokerid"])

    def states(self, topic: str = TOPIC) -> dict[int, PartitionStateNode]:
        out = {}
        for p in REPLICAS:
            data, _ = self.md.coordinator.get(f"/brokers/topics/{topic}/partitions/{p}/state")
            out[p] = PartitionStateNode.decode(f"{topic}/{p}", data)
        return out

    def isr_whole(self, topic: str = TOPIC) -> bool:
        try:
            return all(sorted(s.isr) == sorted(REPLICAS[p]) and s.leader >= 0
                       for p, s in self.states(topic).items())
        except Exception:
            return False

    def with_topic(self, timeout: float = 60) -> None:
        """The module's topic, every ISR whole: Kafka's TopicCommand creates it for the first
        test that runs (each test can run alone)."""
        if not self.created:
            _tool("topics", "--bootstrap-server", self.kafka.bootstrap, "--create", "--topic",
                  TOPIC, "--replica-assignment", ASSIGNMENT, "--config", "min.insync.replicas=2")
            self.created = True
        wait_until(self.isr_whole, timeout=timeout, message="every ISR whole")

    def restart_partctl(self, *, kill: bool) -> None:
        if kill:
            self.partctl.kill()
        else:
            self.partctl.stop()
        wait_until(lambda: self.md.coordinator.exists(f"/brokers/ids/{PARTCTL_ID}") is None,
                   timeout=60, message="partctl broker 3's registration to go")
        self.partctl = start_broker(self.directory / "partctl-3", PARTCTL_ID, self.url,
                                    port=self.partctl.port or 0, extra=PARTCTL_SETTINGS)

    def logs(self) -> str:
        return (self.kafka.log() + f"=== partctl broker 3 ({self.partctl.log_path}) ===\n"
                + self.partctl.log_path.read_text(errors="replace"))


@pytest.fixture(scope="module")
def mixed(zookeeper_server: Server, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[Mixed]:
    require_kafka(KAFKA_3)
    root = tmp_path_factory.mktemp("mixed")
    chroot = f"/mixed-{uuid.uuid4().hex[:10]}"
    kafka = start_kafka_zk(root / "kafka", zookeeper_server, broker_ids=(1, 2), chroot=chroot,
                           extra={"auto.leader.rebalance.enable": "false",
                                  "zookeeper.session.timeout.ms": "12000"})
    url = zookeeper_server.url(chroot)
    try:
        partctl = start_broker(root / "partctl-3", PARTCTL_ID, url, extra=PARTCTL_SETTINGS)
    except BrokerStartError as exc:
        kafka.stop()
        raise AssertionError(f"partctl broker 3 did not start: {exc.reason}:\n"
                             f"{exc.log_path.read_text(errors='replace')[-3000:]}") from None
    cluster = Mixed(kafka=kafka, partctl=partctl, url=url, directory=root)
    yield cluster
    for broker in kafka.brokers.values():  # paused by a failed test: let it stop
        if broker.pid is not None and broker.running():
            os.kill(broker.pid, signal.SIGCONT)
    partctl.stop() if cluster.partctl is partctl else cluster.partctl.stop()
    kafka.stop()
    cluster.md.coordinator.close()


# --- helpers ----------------------------------------------------------------------------------


def _tool(*args: str) -> str:
    result = run_shared(KAFKA_3, *args)
    assert result.returncode == 0, f"{args}: {result.returncode}\n{result.stdout}{result.stderr}"
    return result.stdout


class Recorder:
    """An idempotent acks=all producer that records every acknowledged (partition, offset,
    value), on a thread of its own until :meth:`stop`."""

    def __init__(self, bootstrap: str, topic: str = TOPIC) -> None:
        self.topic = topic
        self.prefix = uuid.uuid4().hex[:8]
        self.acked: list[tuple[int, int, str]] = []
        self.errors: list[str] = []
        self._producer = Producer({
            "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
            "linger.ms": 5, "message.timeout.ms": 120000, "request.timeout.ms": 30000,
            "retry.backoff.ms": 200, "topic.metadata.refresh.interval.ms": 2000})
        self._stop = threading.Event()
        self._sent = 0
        self._thread: threading.Thread | None = None

    def _delivered(self, err: object, msg: object) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            offset = msg.offset()  # type: ignore[attr-defined]
            # None: acknowledged without its offset (librdkafka's implicit acknowledgement of
            # an idempotent batch whose answer was lost, once a later one is answered)
            self.acked.append((msg.partition(), -1 if offset is None else offset,  # type: ignore[attr-defined]
                               msg.value().decode()))  # type: ignore[attr-defined]

    def send(self, count: int) -> None:
        for _ in range(count):
            self._one()
        assert self._producer.flush(120) == 0, "records left unacknowledged"

    def _one(self) -> None:
        i = self._sent
        self._sent += 1
        while True:
            try:
                self._producer.produce(self.topic, value=f"{self.prefix}-{i}", partition=i % len(REPLICAS),
                                       on_delivery=self._delivered)
                break
            except BufferError:
                self._producer.poll(0.1)
        self._producer.poll(0)

    def start(self, per_second: float = 100.0) -> None:
        def run() -> None:
            while not self._stop.is_set():
                self._one()
                time.sleep(1 / per_second)
        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        assert self._producer.flush(180) == 0, "records left unacknowledged"


def _read_all(bootstrap: str, topic: str = TOPIC) -> dict[tuple[int, int], str]:
    """Every record of ``topic`` (read committed: up to each partition's high watermark)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    out: dict[tuple[int, int], str] = {}
    try:
        for p in REPLICAS:
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=20)
            consumer.assign([TopicPartition(topic, p, 0)])
            deadline = time.monotonic() + 60
            while (not any(k[0] == p and k[1] == high - 1 for k in out) and high > 0
                   and time.monotonic() < deadline):
                for m in consumer.consume(500, 1.0):
                    if m.error() is None:
                        out[(m.partition(), m.offset())] = m.value().decode()
    finally:
        consumer.close()
    return out


def _check_acknowledged(recorder: Recorder, read: dict[tuple[int, int], str]) -> None:
    """Every acknowledged value read back exactly once, at its acknowledged offset (in its
    partition, when it was acknowledged without one)."""
    assert recorder.acked, "nothing was acknowledged"
    where = {v: k for k, v in read.items()}
    unplaced = [(p, v) for p, o, v in recorder.acked if o < 0]
    missing = [(p, v) for p, v in unplaced if where.get(v, (None,))[0] != p]
    assert not missing, f"acknowledged records (no offset reported) lost: {missing[:10]}"
    acked = {(p, o): v for p, o, v in recorder.acked if o >= 0}
    recorder_acked = [(p, o, v) for p, o, v in recorder.acked if o >= 0]
    if len(acked) != len(recorder_acked):
        twice = {(p, o) for p, o, v in recorder_acked if acked[(p, o)] != v}
        raise AssertionError("offsets acknowledged for two values (value: acknowledged at, "
                             "read at): " + "; ".join(
                                 f"{v}: {(p, o)}, {where.get(v)}"
                                 for p, o, v in recorder_acked if (p, o) in twice))
    moved = {k: (v, read.get(k)) for k, v in acked.items() if read.get(k) != v}
    assert not moved, f"acknowledged records lost or moved: {list(moved.items())[:10]}"
    values = [v for v in read.values() if v.startswith(f"{recorder.prefix}-")]
    duplicated = {v for v in values if values.count(v) > 1} if len(set(values)) != len(values) \
        else set()
    assert not duplicated, f"values read more than once: {sorted(duplicated)[:10]}"


def _partition_dir(mixed: Mixed, broker: int, partition: int, topic: str = TOPIC) -> Path:
    if broker == PARTCTL_ID:
        return mixed.directory / "partctl-3" / "logs" / f"{topic}-{partition}"
    return mixed.kafka.brokers[broker].directory / "data" / f"{topic}-{partition}"


def _batches(directory: Path, below: int) -> list[tuple[int, int, int, int]]:
    """(base offset, last offset, leader epoch, CRC) of each batch wholly below ``below``,
    read from the segment files (both kinds write Kafka's on-disk format)."""
    out = []
    for segment in sorted(directory.glob("*.log")):
        data = segment.read_bytes()
        try:
            for b in iter_batches(data):
                if b.last_offset < below:
                    out.append((b.base_offset, b.last_offset, b.partition_leader_epoch, b.crc))
        except Exception:  # a batch being written at the tail: above the HW anyway
            pass
    return out


def _high_watermarks(bootstrap: str, topic: str = TOPIC) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "hw"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=20)[1]
                for p in REPLICAS}
    finally:
        consumer.close()


def _check_logs_identical(mixed: Mixed, topic: str = TOPIC) -> None:
    """Each partition's replicas hold the same batches below the high watermark."""
    hws = _high_watermarks(mixed.bootstrap, topic)
    for p, replicas in REPLICAS.items():
        copies = {b: _batches(_partition_dir(mixed, b, p, topic), hws[p]) for b in replicas}
        first = copies[replicas[0]]
        assert first and first[-1][1] == hws[p] - 1, (p, hws[p], first[-3:])
        for b, batches in copies.items():
            assert batches == first, (f"{topic}-{p}: replica {b} differs from replica "
                                      f"{replicas[0]} below HW {hws[p]}")


# --- 1. together ------------------------------------------------------------------------------


def test_kafka_controller_drives_a_partctl_broker(mixed: Mixed) -> None:
    # each kind reads the other's registration: Kafka's brokers list partctl's, and partctl's
    # Metadata lists Kafka's, with Kafka's controller
    controller = mixed.controller()
    assert controller in (1, 2), controller
    wait_until(lambda: all({1, 2, 3} <= (b.metadata_brokers() or set())
                           for b in mixed.kafka.brokers.values()),
               timeout=30, message="Kafka's brokers to list partctl's")
    registration = json.loads(mixed.md.coordinator.get("/brokers/ids/3")[0])
    assert registration["endpoints"] == [f"PLAINTEXT://{mixed.partctl.bootstrap}"]
    assert registration["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
    # Kafka's TopicCommand creates the topic; Kafka's controller sends partctl's broker its
    # LeaderAndIsr (leader of partition 1, follower of 0 and 2)
    mixed.with_topic()
    assert {p: s.leader for p, s in mixed.states().items()} == {0: 1, 1: 3, 2: 2}
    seen: list[str] = []

    def described() -> bool:
        # partctl's broker learns the topic from Kafka's controller's UpdateMetadata, which
        # may come after the ISR is whole in ZooKeeper: the tool says "does not exist" until
        result = run_shared(KAFKA_3, "topics", "--bootstrap-server", mixed.partctl.bootstrap,
                            "--describe", "--topic", TOPIC)
        seen[:] = [result.stdout + result.stderr]
        return result.returncode == 0 and "Partition: 1\tLeader: 3\tReplicas: 3,1,2" in seen[0]

    wait_until(described, timeout=60, interval=0.5, message=f"{TOPIC} described by partctl's")
    log = mixed.partctl.log()
    assert "not served" not in log, log[-3000:]


# --- 2. replicas of each kind follow leaders of the other ------------------------------------


def test_followers_of_each_kind_fetch_from_leaders_of_the_other(mixed: Mixed) -> None:
    mixed.with_topic()
    recorder = Recorder(mixed.bootstrap)
    recorder.send(600)
    assert not recorder.errors, recorder.errors[:5]
    wait_until(mixed.isr_whole, timeout=60, message="every ISR whole after producing")
    _check_acknowledged(recorder, _read_all(mixed.bootstrap))
    wait_until(lambda: _logs_match(mixed), timeout=30, message="replicas' logs identical")
    _check_logs_identical(mixed)


def _isr_seen_by(address: tuple[str, int], partition: int, topic: str = TOPIC
                 ) -> list[int] | None:
    """The ISR of ``partition`` in one broker's Metadata answer (None while it does not
    answer)."""
    from kio.schema.metadata.v12.request import MetadataRequestTopic
    body = request(3, 12, topics=(MetadataRequestTopic(topic_id=None, name=topic),),
                   allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    try:
        with RawClient(address, timeout=2.0) as client:
            response = client.call(body)
    except (OSError, ConnectionError):
        return None
    for t in response.topics:
        for p in t.partitions:
            if p.partition_index == partition:
                return sorted(p.isr_nodes)
    return None


def test_partctl_leader_reports_isr_changes_to_kafka_controller(mixed: Mixed) -> None:
    """A Kafka follower of partctl's leader stalls (SIGSTOP, within its ZooKeeper session)
    under Kafka's controller while a producer runs: partctl's leader drops it from the ISR, and takes it back once it
    catches up, each time by writing the state node and an ISR change notification, which
    Kafka 3.9's controller still follows: it tells every broker, and Kafka's brokers' Metadata
    shows the ISR whole again."""
    mixed.with_topic()
    controller = mixed.controller()
    assert controller in (1, 2), controller
    follower = 3 - controller  # the Kafka broker that is not controller: a follower of p1
    before = mixed.states()[1]
    assert before.leader == PARTCTL_ID
    offset = len(mixed.partctl.log())
    pid = mixed.kafka.brokers[follower].pid
    assert pid is not None
    recorder = Recorder(mixed.bootstrap)  # a follower falls behind only while records come
    recorder.start()
    try:
        # the producer has its id and a leader for every partition before the follower
        # stops: its InitProducerId sent to the stopped broker would otherwise hang, no
        # records would come, and the follower would never fall behind
        wait_until(lambda: len(recorder.acked) >= 20, timeout=60, message="records acked")
        os.kill(pid, signal.SIGSTOP)
        try:
            wait_until(lambda: follower not in mixed.states()[1].isr, timeout=10,
                       message=f"partctl's leader to drop {follower} from the ISR")
        finally:
            os.kill(pid, signal.SIGCONT)
        wait_until(mixed.isr_whole, timeout=60, message=f"{follower} back in every ISR")
    finally:
        recorder.stop()
    assert not recorder.errors, recorder.errors[:5]
    _check_acknowledged(recorder, _read_all(mixed.bootstrap))
    after = mixed.states()[1]
    # the leader's own writes: same leader and leader epoch, the controller's epoch kept
    assert (after.leader, after.leader_epoch) == (PARTCTL_ID, before.leader_epoch)
    changes = re.findall(rf"{TOPIC}-1: ISR \(([\d, ]*)\) -> \(([\d, ]*)\)",
                         mixed.partctl.log()[offset:])
    members = [(old.split(", "), new.split(", ")) for old, new in changes]
    assert any(str(follower) in old and str(follower) not in new for old, new in members)
    assert any(str(follower) not in old and str(follower) in new for old, new in members)
    wait_until(lambda: all(_isr_seen_by(b.address, 1) == [1, 2, 3]
                           for b in mixed.kafka.brokers.values()),
               timeout=30, message="Kafka's brokers to see partition 1's ISR whole")
    assert mixed.controller() == controller


def _logs_match(mixed: Mixed) -> bool:
    try:
        _check_logs_identical(mixed)
        return True
    except AssertionError:
        return False


# --- 3. partctl's controller drives Kafka's brokers ------------------------------------------


def _controller_seen_by(address: tuple[str, int]) -> int | None:
    """The controller id a broker's Metadata answer names (None while it does not answer)."""
    body = request(3, 12, topics=(), allow_auto_topic_creation=False,
                   include_topic_authorized_operations=False)
    try:
        with RawClient(address, timeout=2.0) as client:
            return client.call(body).controller_id
    except (OSError, ConnectionError):
        return None


def _move_controller_to_partctl(mixed: Mixed) -> None:
    """Pause Kafka's brokers, delete ``/controller``, let partctl's candidate win the election,
    resume them (well within their 6 s ZooKeeper sessions): a Kafka broker that was controller
    sees ``/controller`` name another and resigns, as after any re-election."""
    pids = [b.pid for b in mixed.kafka.brokers.values() if b.pid is not None]
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        mixed.md.coordinator.delete("/controller")
        wait_until(lambda: mixed.controller() == PARTCTL_ID, timeout=4,
                   message="partctl's broker to win /controller")
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
    wait_until(lambda: all(_controller_seen_by(b.address) == PARTCTL_ID
                           for b in mixed.kafka.brokers.values()),
               timeout=60, message="Kafka's brokers to follow partctl's controller")


def test_partctl_controller_drives_kafka_brokers(mixed: Mixed) -> None:
    mixed.with_topic()
    _move_controller_to_partctl(mixed)
    # Kafka broker 2 stops (its ControlledShutdown goes to partctl's controller) and starts
    # again: it gets a producer id block from partctl's controller (AllocateProducerIds) and
    # the Kafka leader it follows takes it back into the ISR through AlterPartition
    offset = len(mixed.kafka.log(2))
    mixed.kafka.restart(2)
    wait_until(mixed.isr_whole, timeout=90, message="every ISR whole after broker 2 restarted")
    assert mixed.controller() == PARTCTL_ID
    stopped = mixed.kafka.log(2)[offset:]
    assert "Controlled shutdown request returned successfully" in stopped, stopped[-3000:]
    partctl_log = mixed.partctl.log()
    assert "AlterPartition from broker 1" in partctl_log, partctl_log[-3000:]
    recorder = Recorder(mixed.bootstrap)
    recorder.send(300)
    assert not recorder.errors, recorder.errors[:5]
    _check_acknowledged(recorder, _read_all(mixed.bootstrap))
    wait_until(lambda: _logs_match(mixed), timeout=30, message="replicas' logs identical")


# --- 4. the fault run -----------------------------------------------------------------------


def _move_controller_to_kafka(mixed: Mixed) -> int:
    """Pause partctl's broker, delete ``/controller``, let a Kafka broker win, resume it."""
    os.kill(mixed.partctl.pid, signal.SIGSTOP)
    try:
        mixed.md.coordinator.delete("/controller")
        wait_until(lambda: mixed.controller() in (1, 2), timeout=4,
                   message="a Kafka broker to win /controller")
    finally:
        os.kill(mixed.partctl.pid, signal.SIGCONT)
    controller = mixed.controller()
    assert controller in (1, 2)
    return controller


def _leaders(mixed: Mixed) -> dict[int, int]:
    return {p: s.leader for p, s in mixed.states().items()}


@pytest.mark.long
def test_nothing_acknowledged_is_lost_when_controllers_of_each_kind_are_killed(
        mixed: Mixed) -> None:
    mixed.with_topic(timeout=90)
    _tool("leader-election", "--bootstrap-server", mixed.bootstrap, "--election-type",
          "preferred", "--all-topic-partitions")
    wait_until(lambda: _leaders(mixed) == {0: 1, 1: 3, 2: 2}, timeout=60,
               message="the preferred leaders back")
    if mixed.controller() not in (1, 2):
        _move_controller_to_kafka(mixed)
    victim = mixed.controller()
    assert victim in (1, 2) and victim in _leaders(mixed).values()
    recorder = Recorder(mixed.bootstrap)
    recorder.start()
    try:
        wait_until(lambda: len(recorder.acked) >= 200, timeout=60, message="records acked")
        # SIGKILL the Kafka broker that is controller and leader, and start it again
        mixed.kafka.kill(victim)
        wait_until(lambda: mixed.controller() not in (None, victim)
                   and victim not in _leaders(mixed).values(),
                   timeout=60, message=f"a new controller and leaders without {victim}")
        acked = len(recorder.acked)
        wait_until(lambda: len(recorder.acked) > acked + 100, timeout=60,
                   message="records acked without the killed broker")
        mixed.kafka.restart(victim)
        wait_until(mixed.isr_whole, timeout=120, message=f"every ISR whole after {victim} came back")
        # SIGKILL partctl's controller (after moving the controller to it if a Kafka broker
        # won the election), and start it again
        if mixed.controller() != PARTCTL_ID:
            _move_controller_to_partctl(mixed)
        acked = len(recorder.acked)
        mixed.restart_partctl(kill=True)
        wait_until(lambda: len(recorder.acked) > acked + 100, timeout=60,
                   message="records acked after partctl's controller was killed")
        wait_until(mixed.isr_whole, timeout=120, message="every ISR whole after partctl came back")
    finally:
        recorder.stop()
    assert not recorder.errors, recorder.errors[:5]
    wait_until(mixed.isr_whole, timeout=60, message="every ISR whole at the end")
    _check_acknowledged(recorder, _read_all(mixed.bootstrap))
    wait_until(lambda: _logs_match(mixed), timeout=60, message="replicas' logs identical")
    _check_logs_identical(mixed)


# --- 5. an inter-broker protocol partctl cannot follow ----------------------------------------


@pytest.mark.parametrize(("value", "accepted"), [
    ("2.8", True), ("2.8-IV1", True), ("3.4.1", True), ("3.9", True), ("3.9-IV0", True),
    ("2.7-IV2", False), ("2.0", False), ("0.10.2", False), ("4.0", False), ("latest", False),
])
def test_which_inter_broker_protocol_versions_partctl_follows(value: str, accepted: bool) -> None:
    text = ("broker.id=1\nzookeeper.connect=127.0.0.1:2181\n"
            f"inter.broker.protocol.version={value}\n")
    if accepted:
        assert not parse_config(text).warnings
    else:
        with pytest.raises(ConfigError, match="inter.broker.protocol.version"):
            parse_config(text)


def test_a_broker_refuses_an_inter_broker_protocol_it_cannot_follow_in_one_line(
        zookeeper_server: Server, tmp_path: Path) -> None:
    broker = launch_broker(tmp_path / "old", 5, zookeeper_server.url(f"/ibp-{uuid.uuid4().hex}"),
                           extra="inter.broker.protocol.version=2.0\n")
    try:
        assert broker.wait(60) == 1
    finally:
        broker.kill()  # one that started after all is not left running
    lines = [line for line in broker.log().splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("partctl: error: ") and \
        "invalid value '2.0' for inter.broker.protocol.version: partctl follows 2.8 to 3.9" \
        in lines[0], lines
