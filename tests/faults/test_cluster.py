"""The fault harness's cluster under test, on ZooKeeper and on etcd: a three-member ensemble
and three broker processes, each in a network namespace of its own, and clients in a host of
their own. It forms (every broker registered, an RF 3 topic with full ISRs, idempotent acks=all
writes read back); with the controller's host isolated, another broker takes over and writes go
on to the new leaders; healed, the isolated broker registers again and returns to the ISRs.

The runs on a real cluster are in the long tier (on demand: ``make test-long``, or
``PARTCTL_LONG_TESTS=1``); tests/faults/test_smoke.py is what every run of the suite does
with the harness."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from coordinator.servers import ServerNotInstalled
from tests.faults.cluster import FaultCluster
from tests.faults.net import namespaces, unavailable_reason
from tests.servers import unavailable

T = TypeVar("T")
TOPIC = "faults"
PARTITIONS = 3


def wait_for(condition: Callable[[], T], timeout: float, what: str) -> T:
    """Poll ``condition`` until it returns something true; return it. Errors while polling
    (a coordinator or broker briefly unreachable) count as not yet."""
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            value = condition()
            if value:
                return value
            last = value
        except Exception as exc:  # noqa: BLE001 - retried until the deadline
            last = exc
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout:.0f}s: {what} (last: {last!r})")
        time.sleep(0.25)


def start(kind: str, tmp_path: Path) -> FaultCluster:
    reason = unavailable_reason()
    if reason is not None:
        unavailable(reason)
    try:
        return FaultCluster(kind, 3, directory=tmp_path).start()  # type: ignore[arg-type]
    except ServerNotInstalled as exc:
        unavailable(str(exc))
        raise


def create_topic(cluster: FaultCluster) -> None:
    def create() -> None:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        futures = admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS,
                                                replication_factor=3,
                                                config={"min.insync.replicas": "2"})],
                                      operation_timeout=30)
        futures[TOPIC].result(60)
    cluster.client.call(create)


def full_isrs(cluster: FaultCluster, brokers: set[int]) -> dict[int, tuple[int, list[int]]]:
    states = cluster.partition_states(TOPIC)
    ok = (len(states) == PARTITIONS
          and all(leader in brokers and set(isr) == brokers for leader, isr in states.values()))
    if not ok:  # the states go into wait_for's failure
        raise AssertionError(f"partition states {states}")
    return states


def produce(cluster: FaultCluster, values: list[str], timeout: float = 60.0) -> dict[str, int]:
    """Produce ``values`` idempotently with acks=all from the client host; every one must be
    acknowledged. Returns value -> partition."""
    def run() -> dict[str, int]:
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True,
                             "acks": "all", "message.timeout.ms": int(timeout * 1000),
                             "socket.timeout.ms": 5000})
        acked: dict[str, int] = {}
        errors: list[str] = []

        def report(err: object, msg: object) -> None:
            if err is not None:
                errors.append(str(err))
            else:
                acked[msg.value().decode()] = msg.partition()  # type: ignore[attr-defined]
        for i, value in enumerate(values):
            producer.produce(TOPIC, value=value.encode(), partition=i % PARTITIONS,
                             on_delivery=report)
        producer.flush(timeout + 10)
        assert not errors, errors
        assert set(acked) == set(values), f"unacknowledged: {set(values) - set(acked)}"
        return acked
    return cluster.client.call(run)


def read_all(cluster: FaultCluster) -> set[str]:
    """Every value in the topic, read from the start of each partition to its end."""
    def run() -> set[str]:
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "faults",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        try:
            ends = {}
            for p in range(PARTITIONS):
                ends[p] = consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1]
            consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
            seen: set[str] = set()
            positions = dict.fromkeys(range(PARTITIONS), 0)
            deadline = time.monotonic() + 30
            while any(positions[p] < ends[p] for p in positions):
                if time.monotonic() > deadline:
                    raise AssertionError(f"read stopped at {positions}, ends {ends}")
                msg = consumer.poll(1.0)
                if msg is None:
                    continue
                if msg.error():
                    raise KafkaException(msg.error())
                seen.add(msg.value().decode())
                positions[msg.partition()] = msg.offset() + 1
            return seen
        finally:
            consumer.close()
    return cluster.client.call(run)


@pytest.mark.servers
@pytest.mark.long
@pytest.mark.parametrize("kind", ["zookeeper", "etcd"])
def test_the_cluster_forms_and_serves_idempotent_acks_all_writes(kind: str, tmp_path: Path
                                                                   ) -> None:
    with start(kind, tmp_path) as cluster:
        assert wait_for(lambda: cluster.registered() == [1, 2, 3], 30, "3 brokers registered")
        assert wait_for(cluster.controller, 30, "a controller") in (1, 2, 3)
        create_topic(cluster)
        wait_for(lambda: full_isrs(cluster, {1, 2, 3}), 30, "leaders and full ISRs")
        values = [f"v{i}" for i in range(30)]
        produce(cluster, values)
        assert read_all(cluster) == set(values)


@pytest.mark.servers
@pytest.mark.long
@pytest.mark.parametrize("kind", ["zookeeper", "etcd"])
def test_an_isolated_controller_is_replaced_and_rejoins_after_heal(kind: str, tmp_path: Path
                                                                    ) -> None:
    with start(kind, tmp_path) as cluster:
        assert cluster.network is not None
        wait_for(lambda: cluster.registered() == [1, 2, 3], 30, "3 brokers registered")
        create_topic(cluster)
        wait_for(lambda: full_isrs(cluster, {1, 2, 3}), 30, "leaders and full ISRs")
        before = [f"before{i}" for i in range(9)]
        produce(cluster, before)
        old = wait_for(cluster.controller, 30, "a controller")
        rest = {1, 2, 3} - {old}
        with cluster.network.isolate(f"b{old}"):
            new = wait_for(lambda: (c := cluster.controller()) in rest and c, 30,
                           f"a controller other than the isolated broker {old}")
            wait_for(lambda: set(cluster.registered()) == rest, 30,
                     f"broker {old}'s registration expired")
            # Acks=all writes wait until the leaders drop the silent follower, once it has
            # lagged behind them for replica.lag.time.max.ms (8 s).
            during = [f"during{i}" for i in range(9)]
            produce(cluster, during)
            wait_for(lambda: full_isrs(cluster, rest), 30,
                     f"leaders and ISRs among {sorted(rest)}")
            assert cluster.broker(old).running()
        assert cluster.controller() == new
        wait_for(lambda: cluster.registered() == [1, 2, 3], 40,
                 f"broker {old} registered again")
        wait_for(lambda: full_isrs(cluster, {1, 2, 3}), 60,
                 f"broker {old} back in every ISR")
        after = [f"after{i}" for i in range(9)]
        produce(cluster, after)
        assert read_all(cluster) == set(before + during + after)


@pytest.mark.servers
@pytest.mark.long
def test_broker_and_member_faults_and_cleanup_after_a_failure(tmp_path: Path) -> None:
    cluster = start("zookeeper", tmp_path)
    network = cluster.network
    assert network is not None
    with pytest.raises(RuntimeError, match="on purpose"), cluster:
        wait_for(lambda: cluster.registered() == [1, 2, 3], 30, "3 brokers registered")
        controller = wait_for(cluster.controller, 30, "a controller")
        other = min({1, 2, 3} - {controller})
        # Paused past its session, a broker loses its registration; resumed, it registers again.
        cluster.pause_broker(other)
        wait_for(lambda: other not in cluster.registered(), 30, f"broker {other} expired")
        cluster.resume_broker(other)
        wait_for(lambda: cluster.registered() == [1, 2, 3], 30, f"broker {other} back")
        # Killed, it goes when its session expires; restarted, it has the same id and log.
        first = cluster.broker(other)
        cluster.kill_broker(other)
        assert not first.running()
        wait_for(lambda: other not in cluster.registered(), 30, f"killed broker {other} gone")
        again = cluster.restart_broker(other)
        assert again is not first and again.running()
        assert (again.broker_id, again.log_path) == (first.broker_id, first.log_path)
        wait_for(lambda: cluster.registered() == [1, 2, 3], 30, f"broker {other} restarted")
        # A coordinator member's fault: its leader killed, another leads, the sessions live
        # on; started again, it serves (the probes run in the client host).
        ensemble = cluster.ensemble
        assert ensemble is not None
        leader = cluster.ensemble_call(ensemble.wait_serving, 30)
        leader.kill()
        assert cluster.ensemble_call(ensemble.wait_serving, 30) is not leader
        leader.start()
        cluster.ensemble_call(ensemble.wait_serving, 30, ensemble.members)
        assert cluster.registered() == [1, 2, 3]
        pids = [b.pid for b in cluster.brokers.values()]
        members = ensemble.members
        raise RuntimeError("on purpose")
    # Whatever failed inside, leaving the cluster stops every process and removes the network.
    assert all(not b.running() for b in cluster.brokers.values())
    assert all(not m.running() for m in members)
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert network.closed and not set(network.namespaces()) & set(namespaces())
