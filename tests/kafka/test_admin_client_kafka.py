"""kafkaclient.admin.AdminClient against real Apache Kafka, by bootstrap only: three Kafka 4.x
nodes in KRaft mode (controller-bound calls go to any broker, which forwards) and three Kafka
3.9.1 brokers in ZooKeeper mode (they go to the controller Metadata names). One cluster of each
kind for the module, one after the other; Kafka's own ``kafka-topics --describe`` confirms a
reassignment."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient as KafkaAdmin
from confluent_kafka.admin import NewTopic

from coordinator.codecs import TopicPartition
from kafkaclient.admin import AdminClient
from tests.waiting import wait_until

from .conftest import require_kafka
from .harness import KAFKA_3, KAFKA_4, KafkaCluster, start_kafka_kraft, start_kafka_zk
from .tool_shell import run_shared

pytestmark = pytest.mark.servers


@pytest.fixture(scope="module", params=["kraft", "zookeeper"])
def kafka(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[KafkaCluster]:
    directory = tmp_path_factory.mktemp(f"admin-client-{request.param}")
    if request.param == "kraft":
        require_kafka(KAFKA_4)
        cluster = start_kafka_kraft(directory, version=KAFKA_4, node_ids=(1, 2, 3))
    else:
        require_kafka(KAFKA_3)
        cluster = start_kafka_zk(directory, request.getfixturevalue("zookeeper_server"),
                                 version=KAFKA_3, broker_ids=(1, 2, 3))
    yield cluster
    cluster.stop()


def create(kafka: KafkaCluster, assignment: list[list[int]]) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    client = KafkaAdmin({"bootstrap.servers": kafka.bootstrap})  # alive until answered
    futures = client.create_topics(
        [NewTopic(name, num_partitions=len(assignment), replica_assignment=assignment)],
        operation_timeout=30)
    futures[name].result(60)
    return name


def full(admin: AdminClient, topic: str, count: int) -> bool:
    info = admin.topics([topic]).get(topic)
    return info is not None and len(info.partitions) == count and all(
        p.leader >= 0 and sorted(p.isr) == sorted(p.replicas) for p in info.partitions)


def test_cluster_topics_log_dirs_and_configs(kafka: KafkaCluster) -> None:
    with AdminClient(kafka.bootstrap, timeout=60) as admin:
        info = admin.describe_cluster()
        assert [b.id for b in info.brokers] == [1, 2, 3]
        assert info.controller_id in (1, 2, 3)
        if kafka.cluster_id is not None:
            assert info.cluster_id == kafka.cluster_id
        topic = create(kafka, [[1, 2, 3], [2, 3, 1]])
        wait_until(lambda: full(admin, topic, 2), timeout=60, interval=0.2,
                   message="leaders and full ISRs")
        every = admin.topics()
        assert [p.replicas for p in every[topic].partitions] == [(1, 2, 3), (2, 3, 1)]
        assert admin.topics([topic, "missing"], batch=1) == {topic: every[topic]}
        producer = ck.Producer({"bootstrap.servers": kafka.bootstrap, "acks": "all"})
        for _ in range(100):
            producer.produce(topic, value=b"v" * 1000, partition=0)
        assert producer.flush(60) == 0

        def sized() -> dict[int, int] | None:
            found = {b: r.size for b, dirs in admin.log_dirs().items() for d in dirs
                     for r in d.replicas if (r.topic, r.partition) == (topic, 0)}
            return found if len(found) == 3 and min(found.values()) >= 100_000 else None

        wait_until(sized, timeout=60, interval=0.2, message="the replicas' bytes")
        dirs = admin.log_dirs([1])[1]
        assert all(d.total_bytes and d.usable_bytes for d in dirs)  # DescribeLogDirs v4
        rate = "leader.replication.throttled.rate"
        changes = {("topic", topic): {"retention.ms": "7200000"},
                   ("broker", "3"): {rate: "54321"}}
        assert admin.incremental_alter_configs(changes) == {k: None for k in changes}
        wait_until(lambda: admin.describe_configs([("broker", "3")])[("broker", "3")].get(
            rate) == "54321", timeout=30, interval=0.2, message="the broker's throttle")
        assert admin.describe_configs([("topic", topic)])[("topic", topic)][
            "retention.ms"] == "7200000"
        assert admin.incremental_alter_configs({("broker", "3"): {rate: None}}) == {
            ("broker", "3"): None}
        wait_until(lambda: admin.describe_configs([("broker", "3")])[("broker", "3")].get(
            rate) != "54321", timeout=30, interval=0.2, message="the throttle removed")


def test_a_reassignment_and_a_preferred_election_as_kafkas_tools_see_them(
        kafka: KafkaCluster) -> None:
    with AdminClient(kafka.bootstrap, timeout=60) as admin:
        moved = create(kafka, [[1, 2]])
        reordered = create(kafka, [[1, 2, 3]])
        wait_until(lambda: full(admin, moved, 1) and full(admin, reordered, 1), timeout=60,
                   interval=0.2, message="leaders and full ISRs")
        a, b = TopicPartition(moved, 0), TopicPartition(reordered, 0)
        assert admin.alter_reassignments({a: [2, 3], b: [3, 1, 2]}) == {a: None, b: None}
        wait_until(lambda: not admin.list_reassignments([a, b]), timeout=90, interval=0.2,
                   message="the moves to finish")
        wait_until(lambda: admin.topics([moved])[moved].partitions[0].replicas == (2, 3),
                   timeout=30, interval=0.2, message="the moved replicas")
        described = run_shared(kafka.version, "topics", "--bootstrap-server", kafka.bootstrap,
                             "--describe", "--topic", moved)
        assert described.returncode == 0, described.stderr
        assert "Replicas: 2,3" in described.stdout, described.stdout
        # reordered: the preferred leader is now 3; ZooKeeper-mode Kafka keeps the leader a
        # reorder does not remove, so the election is needed there
        first = admin.elect_leaders([b])
        if kafka.mode == "zookeeper":
            assert first == {b: None}
        else:  # a KRaft controller may already have made it the leader
            assert first[b] in (None, "ELECTION_NOT_NEEDED")
        wait_until(lambda: admin.topics([reordered])[reordered].partitions[0].leader == 3,
                   timeout=30, interval=0.2, message="the preferred leader")
        assert admin.elect_leaders([b]) == {b: "ELECTION_NOT_NEEDED"}
        # a cancellation of a partition that is not moving is answered for that partition
        result = admin.alter_reassignments({a: None})
        assert result[a] is not None and result[a].startswith("NO_REASSIGNMENT_IN_PROGRESS")
