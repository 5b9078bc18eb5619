"""Three broker processes on one real coordinator, joined only by Kafka's protocol (the
controller's requests, followers' fetches, controlled shutdown), under Kafka's own clients:
librdkafka (confluent-kafka) and kafka-python, each writing what the other reads back.

The fault run kills the broker that is the controller and leads every partition in the middle
of an idempotent acks=all produce, starts it again, then stops another one with a controlled
shutdown and starts it again: every acknowledged message is read back exactly once, at the
offset it was acknowledged at, and at the end the logs of the in-sync replicas are the same
batch for batch up to the high watermark."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

import coordinator
from broker.cluster import BrokerStartError, LaunchedBroker
from broker.cluster import start_broker as launch_and_wait
from coordinator.admin import Admin
from coordinator.codecs import TopicPartition
from coordinator.metadata import MetadataClient
from replication.checkpoints import OffsetCheckpointFile
from replication.log import Log
from tests.broker.processes import TEST_SETTINGS, coordinator_url
from tests.replication.test_replica_manager_cluster import batch_signature
from tests.servers import Server
from tests.waiting import wait_until

from .test_clients import (
    confluent_consume,
    confluent_produce,
    kafka_python_consume,
    kafka_python_produce,
)

pytestmark = pytest.mark.servers

SETTINGS = TEST_SETTINGS + ("replica.fetch.wait.max.ms=100\nreplica.lag.time.max.ms=10000\n"
                            "zookeeper.session.timeout.ms=6000\n")
"""The trios' brokers: quick follower fetches, and a SIGKILLed broker's session over in 6 s
(not 18: every kill in these tests waits for it before the controller moves leaders)."""


@dataclass
class Trio:
    """Brokers 1-3 of one cluster, and how to start one again on its own directory."""

    url: str
    root: Path
    brokers: dict[int, LaunchedBroker]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values() if b.running())

    def settings(self) -> str:
        """What this trio's brokers start with (a subclass adds its own)."""
        return SETTINGS

    def start(self, broker_id: int, more: str = "") -> LaunchedBroker:
        """Start broker ``broker_id`` on its own directory, with :meth:`settings` and ``more``.
        Started again, it listens on the port it had, as a broker with a configured listener
        does: what a client knows of its address stays true. (Started on a new port, a
        librdkafka admin client that knew the broker as the controller keeps trying the old
        address until its next metadata refresh, which a 30 s wait can miss.) Only if that port
        was taken meanwhile does it get a new one."""
        directory = self.root / f"broker-{broker_id}"
        before = self.brokers.get(broker_id)
        port = before.port if before is not None and before.port is not None else 0
        try:
            broker = launch_and_wait(directory, broker_id, self.url, port=port,
                                     extra=self.settings() + more)
        except BrokerStartError as exc:
            if port == 0 or "in use" not in str(exc).lower():
                raise
            broker = launch_and_wait(directory, broker_id, self.url,
                                     extra=self.settings() + more)
        self.brokers[broker_id] = broker
        return broker

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap})

    def partition_state(self, topic: str) -> dict[int, tuple[int, tuple[int, ...]]]:
        """Each partition's (leader, ISR) as the coordinator holds them."""
        client = coordinator.connect(self.url, timeout=10)
        try:
            metadata = MetadataClient(client)
            assignment = metadata.assignments([topic]).get(topic)
            if assignment is None:
                return {}
            states = metadata.partition_states(
                TopicPartition(topic=topic, partition=p) for p in assignment.value.partitions)
        finally:
            client.close()
        return {tp.partition: (s.value.leader, tuple(sorted(s.value.isr)))
                for tp, s in states.items() if s is not None}


TrioT = TypeVar("TrioT", bound="Trio")


@contextlib.contextmanager
def serving(cluster: TrioT, *, only_running: bool = False) -> Iterator[TrioT]:
    """Brokers 1-3 of ``cluster`` started; at the end each is stopped and must exit 0 (their
    logs' tails go into the failure). ``only_running``: a broker a test stopped for good is
    left out."""
    try:
        for b in (1, 2, 3):
            cluster.start(b)
        yield cluster
    finally:
        statuses = {b: broker.stop() for b, broker in cluster.brokers.items()
                    if broker.running() or not only_running}
        logs = {b: broker.log()[-3000:] for b, broker in cluster.brokers.items()}
        assert set(statuses.values()) <= {0}, (statuses, logs)


@pytest.fixture(params=["zookeeper", "etcd"])
def trio(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Trio]:
    server: Server = request.getfixturevalue(f"{request.param}_server")
    with serving(Trio(coordinator_url(server), tmp_path, {})) as cluster:
        yield cluster


def create(trio: Trio, topic: str, partitions: int, **kwargs: object) -> None:
    admin = trio.admin()  # kept while it works: a dropped client cancels its requests
    future = admin.create_topics([NewTopic(
        topic, config={"min.insync.replicas": "2"}, **kwargs)])[topic]
    assert future.result(30) is None
    wait_until(lambda: len(trio.partition_state(topic)) == partitions and all(
        leader >= 0 and len(isr) == 3 for leader, isr in trio.partition_state(topic).values()),
        timeout=30, message=f"{topic}: leaders and full ISRs")


def same_replicas(trio: Trio, topic: str, partitions: int) -> None:
    """With every broker stopped cleanly: each partition's logs on the three brokers hold the
    same batches (offsets, leader epochs, CRCs) up to the high watermark."""
    for p in range(partitions):
        tp = TopicPartition(topic=topic, partition=p)
        signatures = {}
        for b in trio.brokers:
            logs = trio.root / f"broker-{b}" / "logs"
            hw = OffsetCheckpointFile(logs / "replication-offset-checkpoint").read()[tp]
            log = Log.open(logs / f"{topic}-{p}")
            try:
                signatures[b] = [s for s in batch_signature(log) if s[1] < hw]
            finally:
                log.close()
        assert len({tuple(s) for s in signatures.values()}) == 1, signatures
        assert signatures[1], f"{tp}: nothing below the high watermark"


def test_each_client_reads_what_the_other_wrote(trio: Trio) -> None:
    create(trio, "both", 3, num_partitions=3, replication_factor=3)
    written = confluent_produce(trio, "both", 600, acks="all")
    read = kafka_python_consume(trio, "both", 3, 600)
    written += kafka_python_produce(trio, "both", 300, acks="all")
    read_back = confluent_consume(trio, "both", 3, 900)
    assert sorted(read) == sorted(written[:600])
    assert sorted(read_back) == sorted(written)
    wait_until(lambda: all(len(isr) == 3 for _, isr in trio.partition_state("both").values()),
               timeout=30, message="full ISRs")
    for broker in trio.brokers.values():
        assert broker.stop() == 0
    same_replicas(trio, "both", 3)


class Producing:
    """An idempotent acks=all producer on its own thread, sending numbered values to every
    partition until stopped; what was acknowledged, in the order it was, per partition.
    ``rate``: at most that many values a second (None: as fast as they are taken)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int,
                 rate: float | None = None) -> None:
        self.producer = ck.Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
            "linger.ms": 5, "message.timeout.ms": 120_000, "retry.backoff.ms": 100})
        self.topic, self.partitions, self.rate = topic, partitions, rate
        self.acked: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
        self.errors: list[ck.KafkaError] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def count(self) -> int:
        return sum(len(a) for a in self.acked.values())

    def _delivered(self, err: ck.KafkaError | None, msg: ck.Message) -> None:
        if err is not None:
            self.errors.append(err)
        else:
            self.acked[msg.partition()].append((msg.offset(), msg.value()))

    def _run(self) -> None:
        i = 0
        start = time.monotonic()
        while not self._stop.is_set():
            if self.rate is not None and (ahead := start + i / self.rate
                                          - time.monotonic()) > 0:
                self.producer.poll(min(ahead, 0.1))
                continue
            try:
                self.producer.produce(self.topic, value=b"m-%08d" % i,
                                      partition=i % self.partitions,
                                      on_delivery=self._delivered)
                i += 1
            except BufferError:
                pass
            self.producer.poll(0.002)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert self.producer.flush(120) == 0


def progressing(producing: Producing, by: int, timeout: float = 60.0) -> None:
    target = producing.count() + by
    wait_until(lambda: producing.count() >= target, timeout=timeout,
               message=f"{by} more acknowledgements")


@pytest.mark.parametrize("trio", ["zookeeper", pytest.param("etcd", marks=pytest.mark.long)],
                         indirect=True)  # on etcd in the long tier (tests/conftest.py)
def test_acknowledged_writes_survive_a_killed_controller_and_a_controlled_shutdown(
        trio: Trio) -> None:
    client = coordinator.connect(trio.url, timeout=10)
    try:
        controller = Admin(client).controller_status().broker_id
    finally:
        client.close()
    assert controller in trio.brokers
    others = [b for b in trio.brokers if b != controller]
    # the controller is the first replica of every partition: it leads them all
    create(trio, "faults", 2, num_partitions=2,
           replica_assignment=[[controller, *others],
                               [controller, *reversed(others)]])
    producing = Producing(trio.bootstrap, "faults", 2)
    try:
        progressing(producing, 200)
        trio.brokers[controller].signal(signal.SIGKILL)
        assert trio.brokers[controller].wait(30) == -signal.SIGKILL
        progressing(producing, 200)  # new leaders, elected by a new controller
        trio.start(controller)
        wait_until(lambda: all(len(isr) == 3
                               for _, isr in trio.partition_state("faults").values()),
                   timeout=60, message="the restarted broker back in every ISR")
        progressing(producing, 100)
        leader = trio.partition_state("faults")[0][0]
        trio.brokers[leader].signal(signal.SIGTERM)
        assert trio.brokers[leader].wait(60) == 0
        assert "controlled shutdown succeeded" in trio.brokers[leader].log()
        progressing(producing, 200)
        trio.start(leader)
        wait_until(lambda: all(len(isr) == 3
                               for _, isr in trio.partition_state("faults").values()),
                   timeout=60, message="the stopped broker back in every ISR")
        progressing(producing, 100)
    finally:
        producing.stop()
    assert producing.errors == []
    acked = producing.acked
    total = producing.count()
    read = kafka_python_consume(trio, "faults", 2, total)
    by_partition: dict[int, dict[int, bytes]] = {0: {}, 1: {}}
    for partition, offset, _key, value in read:
        assert offset not in by_partition[partition], f"offset {offset} read twice"
        by_partition[partition][offset] = value
    for p, acks in acked.items():
        offsets = [offset for offset, _ in acks]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
        for offset, value in acks:  # each acknowledged value where it was acknowledged
            assert by_partition[p].get(offset) == value, (p, offset)
        values = [v for v in by_partition[p].values()]
        assert len(values) == len(set(values)), f"partition {p}: a value stored twice"
    for broker in trio.brokers.values():
        assert broker.stop() == 0
    same_replicas(trio, "faults", 2)
