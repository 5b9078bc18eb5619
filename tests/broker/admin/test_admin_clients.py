"""Kafka's own admin clients against a broker process, on ZooKeeper and on etcd: librdkafka's
AdminClient (create, grow and delete topics, describe and alter configs, incrementally too,
describe the cluster, elect leaders) and kafka-python's KafkaAdminClient (the same, and the
partition reassignment APIs), each seeing Kafka's answers and errors."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import confluent_kafka as ck
import kafka
import kafka.errors as kerrors
import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

import coordinator
from coordinator.admin import Admin
from coordinator.codecs import BrokerInfo
from coordinator.metadata import MetadataClient
from tests.broker.processes import BrokerProcess, wait_for_leaders

pytestmark = pytest.mark.servers


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[AdminClient]:
    yield AdminClient({"bootstrap.servers": broker.bootstrap})


@pytest.fixture
def kadmin(broker: BrokerProcess) -> Iterator[kafka.KafkaAdminClient]:
    client = kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30_000)
    yield client
    client.close()


@pytest.fixture
def store(broker: BrokerProcess) -> Iterator[Admin]:
    client = coordinator.connect(broker.coordinator_url, timeout=10)
    yield Admin(client)
    client.close()


def error_code(exc: BaseException) -> int:
    """The Kafka error code a librdkafka future failed with."""
    assert isinstance(exc, ck.KafkaException), exc
    return exc.args[0].code()


# --- librdkafka ---------------------------------------------------------------------------------


def test_librdkafka_creates_grows_and_deletes_topics(broker: BrokerProcess, admin: AdminClient,
                                                     store: Admin) -> None:
    made, checked, bad = topic_name("ck-made"), topic_name("ck-checked"), topic_name("ck-bad")
    futures = admin.create_topics([
        NewTopic(made, 2, 1, config={"retention.ms": "3600000"}),
        NewTopic(bad, 1, 3)], operation_timeout=30)
    assert futures[made].result(30) is None
    with pytest.raises(ck.KafkaException) as refused:
        futures[bad].result(30)
    assert error_code(refused.value) == ck.KafkaError.INVALID_REPLICATION_FACTOR
    wait_for_leaders(broker, made, 2)  # created with its leaders elected
    assert store.topic_config(made) == {"retention.ms": "3600000"}
    dry = admin.create_topics([NewTopic(checked, 1, 1)], validate_only=True)
    assert dry[checked].result(30) is None and checked not in store.list_topics()
    again = admin.create_topics([NewTopic(made, 1, 1)])
    with pytest.raises(ck.KafkaException) as exists:
        again[made].result(30)
    assert error_code(exists.value) == ck.KafkaError.TOPIC_ALREADY_EXISTS
    assert admin.create_partitions([NewPartitions(made, 4)],
                                   operation_timeout=30)[made].result(30) is None
    wait_for_leaders(broker, made, 4)
    fewer = admin.create_partitions([NewPartitions(made, 3)])
    with pytest.raises(ck.KafkaException) as invalid:
        fewer[made].result(30)
    assert error_code(invalid.value) == ck.KafkaError.INVALID_PARTITIONS
    assert admin.delete_topics([made], operation_timeout=30)[made].result(30) is None
    assert made not in admin.list_topics(timeout=10).topics
    gone = admin.delete_topics([made])
    with pytest.raises(ck.KafkaException) as unknown:
        gone[made].result(30)
    assert error_code(unknown.value) == ck.KafkaError.UNKNOWN_TOPIC_OR_PART


def test_librdkafka_describes_and_alters_configs(broker: BrokerProcess,
                                                 admin: AdminClient) -> None:
    name = topic_name("ck-configs")
    admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=30)[name].result(30)
    incremental = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[
        ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)])
    assert admin.incremental_alter_configs([incremental])[incremental].result(30) is None
    topic = ConfigResource(ConfigResource.Type.TOPIC, name)
    described = admin.describe_configs([topic])[topic].result(30)
    assert (described["retention.ms"].value, described["retention.ms"].source) == (
        "1000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert described["cleanup.policy"].value == "delete,compact"
    assert described["compression.type"].source == ConfigSource.DEFAULT_CONFIG.value
    whole = ConfigResource(ConfigResource.Type.TOPIC, name, set_config={"segment.ms": "60000"})
    with pytest.warns(DeprecationWarning):  # AlterConfigs, deprecated by the client
        done = admin.alter_configs([whole])
    assert done[whole].result(30) is None  # replaces every override
    described = admin.describe_configs([topic])[topic].result(30)
    assert described["segment.ms"].value == "60000"
    assert described["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    bad = ConfigResource(ConfigResource.Type.TOPIC, name, set_config={"retention.ms": "soon"})
    with pytest.warns(DeprecationWarning), pytest.raises(ck.KafkaException) as invalid:
        admin.alter_configs([bad])[bad].result(30)
    assert error_code(invalid.value) == ck.KafkaError.INVALID_CONFIG
    own = ConfigResource(ConfigResource.Type.BROKER, "1")
    statics = admin.describe_configs([own])[own].result(30)
    assert statics["num.partitions"].value == "2"
    assert statics["num.partitions"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert statics["num.partitions"].is_read_only
    change = ConfigResource(ConfigResource.Type.BROKER, "1",
                            set_config={"num.partitions": "3"})
    with pytest.warns(DeprecationWarning), pytest.raises(ck.KafkaException) as refused:
        admin.alter_configs([change])[change].result(30)
    assert error_code(refused.value) == ck.KafkaError.INVALID_REQUEST


def test_librdkafka_describes_the_cluster_and_elects_leaders(broker: BrokerProcess,
                                                            admin: AdminClient,
                                                            store: Admin) -> None:
    cluster = admin.describe_cluster(include_authorized_operations=False).result(30)
    assert cluster.cluster_id == store.metadata.cluster_id()
    assert cluster.controller.id == 1
    assert [(n.id, n.host, n.port) for n in cluster.nodes] == [(1, "127.0.0.1", broker.port)]
    name = topic_name("ck-elect")
    admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=30)[name].result(30)
    results = admin.elect_leaders(ck.ElectionType.PREFERRED,
                                  [ck.TopicPartition(name, 0)]).result(30)
    ((tp, error),) = results.items()
    assert (tp.topic, tp.partition) == (name, 0)
    assert error is not None and error.code() == ck.KafkaError.ELECTION_NOT_NEEDED


# --- kafka-python -------------------------------------------------------------------------------


def test_kafka_python_topics_configs_and_cluster(broker: BrokerProcess,
                                                 kadmin: kafka.KafkaAdminClient,
                                                 store: Admin) -> None:
    from kafka.admin import ConfigResource as KConfigResource
    from kafka.admin import ConfigResourceType
    from kafka.admin import NewPartitions as KNewPartitions
    from kafka.admin import NewTopic as KNewTopic

    name = topic_name("kp-topics")
    kadmin.create_topics([KNewTopic(name, 1, 1, topic_configs={"retention.ms": "5000"})],
                         timeout_ms=30_000)
    wait_for_leaders(broker, name, 1)
    with pytest.raises(kerrors.TopicAlreadyExistsError):
        kadmin.create_topics([KNewTopic(name, 1, 1)])
    kadmin.create_partitions({name: KNewPartitions(3)}, timeout_ms=30_000)
    wait_for_leaders(broker, name, 3)
    described = kadmin.describe_configs([KConfigResource(ConfigResourceType.TOPIC, name)])
    assert store.topic_config(name) == {"retention.ms": "5000"}
    (modified,) = described["topic"].values()  # only what differs from the defaults
    assert {k: (v["value"], v["config_source"]) for k, v in modified.items()} == {
        "retention.ms": ("5000", "DYNAMIC_TOPIC_CONFIG")}
    kadmin.alter_configs([KConfigResource(ConfigResourceType.TOPIC, name,
                                          configs={"segment.ms": "60000"})])  # incremental
    assert store.topic_config(name) == {"retention.ms": "5000", "segment.ms": "60000"}
    kadmin.alter_configs([KConfigResource(ConfigResourceType.TOPIC, name,
                                          configs={"segment.ms": "70000"})], incremental=False)
    # AlterConfigs replaces the whole set: the client sends the other overrides along
    assert store.topic_config(name) == {"retention.ms": "5000", "segment.ms": "70000"}
    cluster = kadmin.describe_cluster()
    assert cluster["controller_id"] == 1 and cluster["cluster_id"] == store.metadata.cluster_id()
    kadmin.delete_topics([name], timeout_ms=30_000)
    deadline = time.monotonic() + 30
    while name in store.list_topics() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert name not in store.list_topics()


def test_kafka_python_reassigns_lists_and_cancels(broker: BrokerProcess,
                                                  kadmin: kafka.KafkaAdminClient,
                                                  store: Admin) -> None:
    """A move to broker 9 (registered, with no process behind it) stays in progress: listed,
    then cancelled through the API."""
    name = topic_name("kp-moves")
    store.create_topic(name, assignment={0: [1]})
    wait_for_leaders(broker, name, 1)
    ghost = coordinator.connect(broker.coordinator_url, timeout=10)
    try:
        MetadataClient(ghost).register_broker(BrokerInfo(id=9, host="127.0.0.1", port=1))
        tp = kafka.TopicPartition(name, 0)
        assert kadmin.alter_partition_reassignments({tp: [1, 9]}) == {tp: None}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            listed = kadmin.list_partition_reassignments([tp])
            if listed:
                break
            time.sleep(0.05)
        assert {t: (r["replicas"], r["adding_replicas"], r["removing_replicas"])
                for t, r in listed.items()} == {tp: ([1, 9], [9], [])}
        assert kadmin.alter_partition_reassignments({tp: None}) == {tp: None}
        deadline = time.monotonic() + 30
        while kadmin.list_partition_reassignments([tp]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert kadmin.list_partition_reassignments([tp]) == {}
        assert store.metadata.assignments([name])[name].value.partitions == {0: (1,)}
        assert kadmin.alter_partition_reassignments({tp: None}) == {
            tp: kerrors.NoReassignmentInProgressError}
    finally:
        ghost.close()
