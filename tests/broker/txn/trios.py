"""The three-broker clusters of the transaction tests that are shared between modules."""

from __future__ import annotations

from confluent_kafka.admin import NewTopic

from tests.waiting import wait_until

from ..data.test_cluster_clients import Trio

__all__ = ["UnverifiedTrio", "two_partitions"]


class UnverifiedTrio(Trio):
    """Brokers that append transactional batches without asking a coordinator (KIP-890's
    verification off, as Kafka allows), so the data plane is tested on batches written raw."""

    def settings(self) -> str:
        return super().settings() + "transaction.partition.verification.enable=false\n"


def two_partitions(cluster: Trio, topic: str) -> None:
    """Create ``topic``: two partitions of three replicas, ``min.insync.replicas`` 2; return
    once both have a leader and a full ISR."""
    admin = cluster.admin()  # kept until answered: a dropped client cancels its requests
    future = admin.create_topics([NewTopic(topic, 2, 3, config={
        "min.insync.replicas": "2"})])[topic]
    assert future.result(30) is None
    wait_until(lambda: len(cluster.partition_state(topic)) == 2 and all(
        leader >= 0 and len(isr) == 3
        for leader, isr in cluster.partition_state(topic).values()),
        timeout=60, message="leaders and full ISRs")
