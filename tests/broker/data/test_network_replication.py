"""Three brokers composed as broker processes compose them (server, metadata cache, broker
node), whose followers fetch from their leaders over Kafka's protocol through the transport a
broker process builds: the leaders' addresses come from the controller's requests. The
controller's requests still travel in process (one network shared by the three), so this runs
in one process; Kafka's own clients produce and consume."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.codecs import TopicPartition
from statemachines.in_process import InProcessNetwork
from tests.broker.admin_fixtures import wait_serving
from tests.broker.cluster_harness import ClusterBroker
from tests.replication.test_replica_manager_cluster import batch_signature
from tests.waiting import wait_until

from .test_clients import confluent_consume, confluent_produce

EXTRA = "min.insync.replicas=2\nreplica.fetch.wait.max.ms=100\n"


@pytest.fixture
def trio(tmp_path: Path) -> Iterator[dict[int, ClusterBroker]]:
    url = f"memory://network-replication-{uuid.uuid4().hex[:12]}"
    network = InProcessNetwork()
    brokers: dict[int, ClusterBroker] = {}
    try:
        for b in (1, 2, 3):
            brokers[b] = ClusterBroker(url, tmp_path / f"broker-{b}", broker_id=b,
                                       network=network, extra=EXTRA, fetch_over_network=True)
            if b == 1:
                wait_serving(brokers[1])
        wait_until(lambda: all(len(x.metadata.snapshot.brokers) == 3 for x in brokers.values()),
                   timeout=30, message="every broker sees three")
        yield brokers
    finally:
        for broker in brokers.values():
            if broker.loop.is_running():
                broker.close()


def converged(brokers: dict[int, ClusterBroker], tp: TopicPartition, live: list[int]) -> bool:
    signatures, hws = set(), set()
    for b in live:
        partition = brokers[b].node.replica_manager.partition(tp)
        if partition is None:
            return False
        signatures.add(tuple(batch_signature(partition.log)))
        hws.add((partition.high_watermark, partition.log.log_end_offset))
    return len(signatures) == 1 and len(hws) == 1


def test_followers_replicate_over_the_network_through_a_leader_change(
        trio: dict[int, ClusterBroker]) -> None:
    admin = trio[1].admin
    admin.create_topic("net", 2, 3)
    tps = [TopicPartition("net", p) for p in (0, 1)]
    first = confluent_produce(trio[1], "net", 40, acks="all", partitions=2)
    for tp in tps:
        wait_until(lambda tp=tp: converged(trio, tp, [1, 2, 3]), timeout=30,
                   message=f"{tp} identical on every replica")
        state = admin.metadata.partition_states([tp])[tp].value
        assert sorted(state.isr) == [1, 2, 3], state
    # a leader other than broker 1 (the controller) stops: only leadership moves
    leaders = {admin.metadata.partition_states([tp])[tp].value.leader for tp in tps}
    gone = min(leaders - {1})
    trio[gone].close()
    live = [b for b in (1, 2, 3) if b != gone]
    wait_until(lambda: all(admin.metadata.partition_states([tp])[tp].value.leader in live
                           for tp in tps), timeout=30, message="leaders moved")
    second = confluent_produce(trio[1], "net", 20, acks="all", partitions=2)
    for tp in tps:
        wait_until(lambda tp=tp: converged(trio, tp, live), timeout=30,
                   message=f"{tp} identical on the live replicas")
    got = confluent_consume(trio[live[-1]], "net", 2, len(first) + len(second))
    assert sorted(got) == sorted(first + second)
