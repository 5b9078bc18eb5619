"""The embedded cluster end to end on the memory coordinator: the real controller drives real
replica managers; acks=all writes survive leader crashes, restarted brokers catch up and take
leadership back by preferred election, controlled shutdown moves leaders before the stop."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coordinator.codecs import TopicPartition
from interbroker.channel import BrokerResponse
from interbroker.errors import ErrorCode
from interbroker.requests import LeaderAndIsrPartition, LeaderAndIsrRequest
from node import (
    EmbeddedCluster,
    ProduceError,
    Producer,
    check_acknowledged,
    embedded_replica_config,
)
from replication import Role
from replication.checkpoints import CLEAN_SHUTDOWN_FILE, log_directory_name
from tests.replication.loopback import NETWORK, TRANSPORTS, LoopbackServers
from tests.replication.test_replica_manager_cluster import batch_signature
from tests.waiting import wait_until


class Background:
    """Produces batches of unique values to ``tps`` until stopped; records what was acked."""

    def __init__(self, producer: Producer, tps: list[TopicPartition], tag: str = "m") -> None:
        self.producer = producer
        self.tps = tps
        self.tag = tag
        self.acked: dict[TopicPartition, dict[int, bytes]] = {tp: {} for tp in tps}
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Background:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        assert self.producer.flush(30)

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            tp = self.tps[i % len(self.tps)]
            values = [f"{self.tag}{i}-{j}".encode() for j in range(4)]
            self.producer.send(tp, values).add_done_callback(
                lambda f, tp=tp, values=values: self._done(tp, values, f))
            i += 1

    def _done(self, tp: TopicPartition, values: list[bytes], future) -> None:  # noqa: ANN001
        try:
            d = future.result()
        except ProduceError as exc:
            self.errors.append(exc)
            return
        with self._lock:
            for k, v in enumerate(values):
                self.acked[tp][d.base_offset + k] = v

    def count(self) -> int:
        with self._lock:
            return sum(len(a) for a in self.acked.values())


@pytest.fixture(params=TRANSPORTS)
def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[EmbeddedCluster]:
    """Three brokers; followers fetch from the leaders' replica managers, or over Kafka's
    protocol from servers in front of them (long polls of 200 ms, fetcher threads per leader),
    the controller's requests in process either way."""
    servers = LoopbackServers() if request.param == NETWORK else None
    options: dict[str, Any] = {}
    if servers is not None:
        options = {
            "fetch_transport": lambda b: servers.transport(b, max_wait_ms=200),
            "on_node_start": lambda node: servers.serve(node.id, node.replica_manager),
        }
    try:
        with EmbeddedCluster(3, root=tmp_path,
                             replica_config=embedded_replica_config(min_insync_replicas=2),
                             **options) as c:
            yield c
    finally:
        if servers is not None:
            servers.close()


def wait_for_more(bg: Background, n: int, cluster: EmbeddedCluster) -> None:
    start = bg.count()
    cluster._wait(lambda: bg.count() >= start + n, 15, f"{n} more acknowledged records")


def assert_identical_logs(cluster: EmbeddedCluster, tp: TopicPartition) -> None:
    cluster.wait_for_caught_up(tp)
    signatures = set()
    for b in cluster.replicas(tp):
        rm = cluster.replica_manager(b)
        assert rm is not None
        partition = rm.partition(tp)
        assert partition is not None
        signatures.add(tuple(batch_signature(partition.log)))
    assert len(signatures) == 1


@pytest.mark.slow
def test_acks_all_writes_survive_leader_crashes_exactly_once(cluster: EmbeddedCluster) -> None:
    tps = cluster.create_topic("events", partitions=2, replication_factor=3)
    producer = cluster.producer(max_in_flight=32)
    with Background(producer, tps) as bg:
        for _ in range(3):
            wait_for_more(bg, 2_000, cluster)
            victim = cluster.leader(tps[0])
            epoch = cluster.state(tps[0]).leader_epoch
            # A power failure: the victim also loses what it wrote since its last fsync.
            cluster.crash(victim, lose_unflushed=True)
            state = cluster.wait_for_leader(tps[0], excluding=[victim], min_epoch=epoch + 1)
            assert victim not in state.isr
            wait_for_more(bg, 1_000, cluster)
            cluster.restart(victim)
            for tp in tps:
                cluster.wait_for_isr(tp)
    producer.close()
    assert not bg.errors
    consumer = cluster.consumer()
    for tp in tps:
        check = check_acknowledged(consumer.read_all(tp), bg.acked[tp])
        assert check.ok, check
        assert check.acknowledged > 1_000
        assert_identical_logs(cluster, tp)


def test_restarted_broker_catches_up_and_takes_leadership_back(cluster: EmbeddedCluster
                                                               ) -> None:
    tp = cluster.create_topic("orders", partitions=1, replication_factor=3)[0]
    preferred = cluster.replicas(tp)[0]
    producer = cluster.producer()
    acked = {}
    for i in range(20):
        d = producer.produce(tp, [f"a{i}".encode()])
        acked[d.base_offset] = f"a{i}".encode()
    cluster.crash(preferred)
    state = cluster.wait_for_leader(tp, excluding=[preferred])
    for i in range(30):  # written while the preferred replica is down: it must catch up
        d = producer.produce(tp, [f"b{i}".encode()])
        acked[d.base_offset] = f"b{i}".encode()
    node = cluster.restart(preferred)
    assert node.epoch is not None
    cluster.wait_for_isr(tp)
    cluster.elect_preferred([tp])
    final = cluster.wait_for_leader(tp, leader=preferred)
    assert final.leader_epoch > state.leader_epoch
    for i in range(10):  # the preferred leader takes writes again
        d = producer.produce(tp, [f"c{i}".encode()])
        acked[d.base_offset] = f"c{i}".encode()
    producer.close()
    check = check_acknowledged(cluster.consumer().read_all(tp), acked)
    assert check.ok and check.acknowledged == 60, check
    assert_identical_logs(cluster, tp)
    rm = cluster.replica_manager(preferred)
    assert rm is not None and rm.status(tp).role is Role.LEADER


def watch_stop(cluster: EmbeddedCluster, broker: int
               ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, Role]]:
    """Record, at the moment the broker's replica manager stops, each partition's stored
    leader and the broker's own role for it."""
    rm = cluster.node(broker).replica_manager
    assert rm is not None
    leaders: dict[TopicPartition, int] = {}
    roles: dict[TopicPartition, Role] = {}
    original = rm.shutdown

    def shutdown() -> None:
        for tp, p in rm.partitions().items():
            leaders[tp] = cluster.leader(tp)
            roles[tp] = p.role
        original()

    rm.shutdown = shutdown  # type: ignore[method-assign]
    return leaders, roles


def test_controlled_shutdown_moves_leaders_before_the_broker_stops(cluster: EmbeddedCluster
                                                                   ) -> None:
    tps = cluster.create_topic("logs", partitions=3, replication_factor=3)
    victim = cluster.leader(tps[0])
    led = [tp for tp in tps if cluster.leader(tp) == victim]
    epochs = {tp: cluster.state(tp).leader_epoch for tp in tps}
    leaders_at_stop, _ = watch_stop(cluster, victim)
    producer = cluster.producer()
    with Background(producer, tps) as bg:
        wait_for_more(bg, 500, cluster)
        cluster.controlled_shutdown(victim)
        wait_for_more(bg, 500, cluster)
    producer.close()
    assert set(leaders_at_stop) == set(tps) and victim not in leaders_at_stop.values()
    for tp in tps:
        state = cluster.state(tp)
        assert state.leader != victim and victim not in state.isr
        if tp in led:
            assert state.leader_epoch > epochs[tp]
        assert (cluster.log_dir(victim) / log_directory_name(tp) / CLEAN_SHUTDOWN_FILE).exists()
        check = check_acknowledged(cluster.consumer().read_all(tp), bg.acked[tp])
        assert check.ok, check
    assert not bg.errors


def test_the_shutting_down_leader_is_told_to_follow(cluster: EmbeddedCluster) -> None:
    tp = cluster.create_topic("logs", partitions=1, replication_factor=3)[0]
    victim = cluster.leader(tp)
    _, roles_at_stop = watch_stop(cluster, victim)
    cluster.controlled_shutdown(victim)
    assert roles_at_stop[tp] is Role.FOLLOWER


def test_a_request_for_an_earlier_registration_never_reaches_the_replica_manager(
        cluster: EmbeddedCluster) -> None:
    """A broker node is a Participant whose handler is its replica manager: the participant's
    fence refuses a request meant for an earlier registration of the broker (one sent just
    before it bounced), so the replicas never act on it."""
    tp = cluster.create_topic("fenced", partitions=1, replication_factor=3)[0]
    state = cluster.wait_for_leader(tp)
    follower = next(b for b in cluster.replicas(tp) if b != state.leader)
    node = cluster.node(follower)
    assert node.participant is not None and node.epoch is not None
    assert node.participant.handler is node.replica_manager  # no adapter between them
    rm = cluster.replica_manager(follower)
    assert rm is not None
    wait_until(lambda: (status := rm.status(tp)) is not None and status.role is Role.FOLLOWER
               and status.leader_epoch == state.leader_epoch, message="the follower to follow")
    take_over = LeaderAndIsrPartition(
        tp.topic, tp.partition, state.controller_epoch, follower, state.leader_epoch + 1,
        (follower,), rm.status(tp).partition_epoch + 1, tuple(cluster.replicas(tp)))
    request = LeaderAndIsrRequest(
        controller_id=-1, controller_epoch=cluster.admin.controller_status().epoch,
        broker_epoch=node.epoch - 1, partitions=(take_over,))
    answers: list[BrokerResponse] = []
    cluster.network.channel().send(follower, [request], lambda _b, _r, a: answers.append(a))
    assert answers == [BrokerResponse(error=ErrorCode.STALE_BROKER_EPOCH)]
    status = rm.status(tp)
    assert status.role is Role.FOLLOWER and status.leader_epoch == state.leader_epoch
