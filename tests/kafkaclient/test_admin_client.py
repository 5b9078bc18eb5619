"""kafkaclient.admin.AdminClient against three partctl broker processes on the session's
ZooKeeper (one cluster for the module): the cluster, topics, log directories with sizes,
reassignments run to the end and cancelled, configs of a topic and of a broker, preferred
leader elections; each as Kafka's AdminClient would see them."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka as ck
import pytest

import coordinator
from broker.cluster import BrokerStartError, LocalCluster, start_cluster
from coordinator.admin import Admin
from coordinator.codecs import TopicPartition
from kafkaclient.admin import AdminClient
from tests.broker.processes import TEST_SETTINGS
from tests.servers import Server
from tests.waiting import wait_until

pytestmark = pytest.mark.servers


@pytest.fixture(scope="module")
def cluster(zookeeper_server: Server, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[LocalCluster]:
    url = zookeeper_server.url(f"/admin-client-{uuid.uuid4().hex[:10]}")
    extra = dict(line.split("=", 1) for line in TEST_SETTINGS.splitlines() if "=" in line)
    try:
        started = start_cluster(3, coordinator_url=url, extra=extra,
                                directory=tmp_path_factory.mktemp("admin-client"))
    except BrokerStartError as exc:
        raise AssertionError(f"broker {exc.broker_id} did not start: {exc.reason}:\n"
                             + exc.log_path.read_text(errors="replace")[-3000:]) from None
    yield started
    statuses = started.stop()
    assert all(status == 0 for status in statuses.values()), statuses
    for broker in started.brokers:
        assert "Traceback" not in broker.log(), broker.log()[-3000:]


@pytest.fixture
def admin(cluster: LocalCluster) -> Iterator[AdminClient]:
    with AdminClient(cluster.bootstrap_servers, timeout=30) as client:
        yield client


def create_topic(cluster: LocalCluster, assignment: dict[int, list[int]],
                 config: dict[str, str] | None = None) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    client = coordinator.connect(cluster.coordinator_url, timeout=10)
    try:
        Admin(client).create_topic(name, assignment=assignment, config=config)
    finally:
        client.close()
    return name


def wait_leaders(admin: AdminClient, topic: str, count: int) -> None:
    def led() -> bool:
        info = admin.topics([topic]).get(topic)
        return info is not None and len(info.partitions) == count and all(
            p.leader >= 0 and len(p.isr) == len(p.replicas) for p in info.partitions)

    wait_until(led, timeout=60, interval=0.1, message=f"{topic}'s leaders and full ISRs")


def test_describe_cluster_names_the_three_brokers_and_the_controller(
        cluster: LocalCluster, admin: AdminClient) -> None:
    info = admin.describe_cluster()
    assert [b.id for b in info.brokers] == [1, 2, 3]
    assert {(b.host, b.port) for b in info.brokers} == {b.address for b in cluster.brokers}
    assert info.controller_id in (1, 2, 3)
    assert info.cluster_id
    assert "PLAINTEXT" in repr(admin)


def test_topics_give_replicas_leaders_and_isrs_all_at_once_or_in_batches(
        cluster: LocalCluster, admin: AdminClient) -> None:
    a = create_topic(cluster, {0: [1, 2], 1: [2, 3], 2: [3, 1]})
    b = create_topic(cluster, {0: [2, 3, 1]})
    wait_leaders(admin, a, 3)
    wait_leaders(admin, b, 1)
    every = admin.topics()
    assert {a, b} <= set(every)
    assert [p.replicas for p in every[a].partitions] == [(1, 2), (2, 3), (3, 1)]
    assert [p.leader for p in every[a].partitions] == [1, 2, 3]
    assert every[b].partitions[0].replicas == (2, 3, 1)
    assert sorted(every[b].partitions[0].isr) == [1, 2, 3]
    assert not every[a].internal and every[a].error is None
    # one name a request: the same answer, and a topic that does not exist is left out
    batched = admin.topics([a, "no-such-topic", b, a], batch=1)
    assert batched == {a: every[a], b: every[b]}
    assert admin.topics([]) == {}


def produce(cluster: LocalCluster, topic: str, count: int, partition: int = 0) -> None:
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(count):
        producer.produce(topic, value=b"x" * 1000 + str(i).encode(), partition=partition)
    assert producer.flush(60) == 0


def test_log_dirs_give_every_replicas_size_and_the_volume(
        cluster: LocalCluster, admin: AdminClient) -> None:
    topic = create_topic(cluster, {0: [1, 2, 3]})
    wait_leaders(admin, topic, 1)
    produce(cluster, topic, 200)

    def sizes() -> dict[int, int] | None:
        found = {}
        for broker_id, dirs in admin.log_dirs().items():
            for d in dirs:
                for r in d.replicas:
                    if r.topic == topic:
                        found[broker_id] = r.size
        return found if len(found) == 3 and min(found.values()) >= 200_000 else None

    found = wait_until(sizes, timeout=60, interval=0.2, message="every replica's bytes")
    assert set(found) == {1, 2, 3}
    dirs = admin.log_dirs([2])
    assert list(dirs) == [2]
    (only,) = dirs[2]
    assert only.error is None and only.path.startswith("/")
    assert only.total_bytes is not None and only.usable_bytes is not None
    assert 0 < only.usable_bytes <= only.total_bytes
    assert not any(r.future for r in only.replicas)


def test_a_reassignment_runs_to_the_end_and_a_cancel_answers_per_partition(
        cluster: LocalCluster, admin: AdminClient) -> None:
    topic = create_topic(cluster, {0: [1, 2], 1: [2, 3]})
    wait_leaders(admin, topic, 2)
    produce(cluster, topic, 50)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    result = admin.alter_reassignments({tp0: [3, 2], tp1: [2, 3]})
    assert result == {tp0: None, tp1: None}
    wait_until(lambda: tp0 not in admin.list_reassignments(), timeout=60, interval=0.1,
               message="the move to finish")
    assert admin.list_reassignments([tp0, tp1]) == {}
    wait_until(lambda: admin.topics([topic])[topic].partitions[0].replicas == (3, 2),
               timeout=30, interval=0.1, message="the new replicas in the metadata")
    # a cancellation of a partition that is not moving, and a partition that does not exist
    missing = TopicPartition(topic, 7)
    cancelled = admin.alter_reassignments({tp1: None, missing: [1, 2]})
    assert cancelled[tp1] is not None and cancelled[tp1].startswith(
        "NO_REASSIGNMENT_IN_PROGRESS")
    assert cancelled[missing] is not None and cancelled[missing].startswith(
        "UNKNOWN_TOPIC_OR_PARTITION")
    assert admin.alter_reassignments({}) == {}


def test_configs_of_a_topic_and_of_a_broker_are_set_read_and_deleted(
        cluster: LocalCluster, admin: AdminClient) -> None:
    topic = create_topic(cluster, {0: [1, 2]})
    wait_leaders(admin, topic, 1)
    rate = "leader.replication.throttled.rate"
    changes = {("topic", topic): {"retention.ms": "3600000"}, ("broker", "2"): {rate: "12345"}}
    assert admin.incremental_alter_configs(changes) == {k: None for k in changes}
    described = admin.describe_configs([("topic", topic), ("broker", "2"), ("broker", "3")])
    assert described[("topic", topic)]["retention.ms"] == "3600000"
    assert described[("broker", "2")][rate] == "12345"
    assert described[("broker", "3")].get(rate) != "12345"
    assert admin.incremental_alter_configs({("topic", topic): {"retention.ms": None},
                                            ("broker", "2"): {rate: None}}) == {
        ("topic", topic): None, ("broker", "2"): None}
    after = admin.describe_configs([("topic", topic), ("broker", "2")])
    assert after[("topic", topic)]["retention.ms"] != "3600000"
    assert after[("broker", "2")].get(rate) != "12345"
    bad = admin.incremental_alter_configs({("topic", topic): {"retention.ms": "soon"}})
    assert bad[("topic", topic)] is not None and bad[("topic", topic)].startswith(
        "INVALID_CONFIG")


def test_a_preferred_election_moves_leadership_back_and_then_is_not_needed(
        cluster: LocalCluster, admin: AdminClient) -> None:
    topic = create_topic(cluster, {0: [1, 2, 3]})
    wait_leaders(admin, topic, 1)
    tp = TopicPartition(topic, 0)
    # reorder the replicas: the leader (1) stays, the preferred one is now 3
    assert admin.alter_reassignments({tp: [3, 1, 2]}) == {tp: None}
    wait_until(lambda: admin.topics([topic])[topic].partitions[0].replicas == (3, 1, 2)
               and not admin.list_reassignments([tp]), timeout=60, interval=0.1,
               message="the reorder to finish")
    assert admin.topics([topic])[topic].partitions[0].leader == 1
    assert admin.elect_leaders([tp]) == {tp: None}
    wait_until(lambda: admin.topics([topic])[topic].partitions[0].leader == 3, timeout=30,
               interval=0.1, message="the preferred leader in the metadata")
    assert admin.elect_leaders([tp]) == {tp: "ELECTION_NOT_NEEDED"}
    missing = TopicPartition(topic, 9)
    assert admin.elect_leaders([missing])[missing].startswith("UNKNOWN_TOPIC_OR_PARTITION")
    assert tp not in admin.elect_leaders()  # all partitions: only those that needed one


def test_a_broker_that_is_not_live_is_one_line(admin: AdminClient, tmp_path: Path) -> None:
    from kafkaclient.admin import AdminError

    with pytest.raises(AdminError, match=r"^broker 42 is not a live broker of the cluster "
                                         r"\(live: 1, 2, 3\)$"):
        admin.log_dirs([42])
    with pytest.raises(AdminError, match="not a broker id"):
        admin.describe_configs([("broker", "two")])
