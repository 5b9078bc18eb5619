"""The admin APIs' answers, every error path, on the real server over a real broker node (its
controller, replica manager and metadata cache) on memory, ZooKeeper and etcd: InitProducerId,
CreateTopics, DeleteTopics, CreatePartitions, the configs (and the throttle rates through
librdkafka's AdminClient), DescribeCluster, ElectLeaders, the partition reassignment APIs."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)
from kio.schema.errors import ErrorCode

import coordinator
from broker.apis.topic_ids import uuid_of
from coordinator.codecs import BrokerInfo, TopicPartition
from coordinator.metadata import MetadataClient
from coordinator.topic_config import TOPIC_CONFIG_KEYS
from kafkaclient.messages import build
from rebalancer.verification import cancel_reassignment
from replication.producer_ids import ProducerIdManager
from tests.broker.admin_fixtures import BACKENDS, start_cluster, topic_name
from tests.broker.cluster_harness import ClusterBroker
from tests.broker.harness import InProcessBroker
from tests.broker.wire_client import RawClient, request, request_module
from tests.waiting import wait_until

pytestmark = pytest.mark.servers


@pytest.fixture(scope="module", params=BACKENDS)
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[ClusterBroker]:
    yield from start_cluster(request, tmp_path_factory.mktemp(f"admin-{request.param}"),
                             extra="log.segment.bytes=1073741824\nnum.io.threads=8\n")


# --- InitProducerId ---------------------------------------------------------------------------


def init_producer_id(version: int, transactional_id: str | None = None, *,
                     producer_id: int = -1, epoch: int = -1) -> object:
    return request(22, version, transactional_id=transactional_id,
                   transaction_timeout=timedelta(seconds=60), producer_id=producer_id,
                   producer_epoch=epoch)


def test_init_producer_id_hands_out_new_ids_at_epoch_0(cluster: ClusterBroker) -> None:
    with RawClient(cluster.address) as client:
        answers = [client.call(init_producer_id(v)) for v in range(6)]
        # a producer id and epoch passed along (KIP-360) get a new id all the same
        bumped = client.call(init_producer_id(4, producer_id=answers[-1].producer_id, epoch=0))
    answers.append(bumped)
    assert [(a.error_code, a.producer_epoch) for a in answers] == [(ErrorCode.none, 0)] * 7
    ids = [a.producer_id for a in answers]
    assert len(set(ids)) == 7 and min(ids) >= 0
    block = MetadataClient(cluster.node.coordinator).producer_id_block()
    assert block is not None and block.value is not None
    assert block.value.broker == cluster.config.broker_id
    assert all(block.value.block_start <= i <= block.value.block_end for i in ids)


def test_init_producer_id_refusals(cluster: ClusterBroker) -> None:
    with RawClient(cluster.address) as client:
        def error(body: object) -> tuple[ErrorCode, int, int]:
            a = client.call(body)
            return a.error_code, a.producer_id, a.producer_epoch

        # no transaction coordinator here: the one Kafka answer that says so truthfully
        assert error(init_producer_id(4, "txn-1")) == (ErrorCode.coordinator_not_available, -1,
                                                       -1)
        assert error(init_producer_id(0, "txn-1")) == (ErrorCode.coordinator_not_available, -1,
                                                       -1)
        assert error(init_producer_id(4, "")) == (ErrorCode.invalid_request, -1, -1)
        assert error(init_producer_id(3, producer_id=7)) == (ErrorCode.invalid_request, -1, -1)
        assert error(init_producer_id(5, epoch=2)) == (ErrorCode.invalid_request, -1, -1)


def test_init_producer_id_without_a_block_answers_load_in_progress(tmp_path: Path) -> None:
    """The claim of a block fails (the coordinator is unreachable): COORDINATOR_LOAD_IN_PROGRESS,
    which clients retry; once it can be claimed, ids come."""
    from coordinator.retry import NO_RETRY

    store = coordinator.connect(f"memory://pids-{tmp_path.name}")
    broker = InProcessBroker(tmp_path / "logs")
    try:
        manager = ProducerIdManager(MetadataClient(store), 1, retry=NO_RETRY)
        broker.server.services = dataclasses.replace(broker.server.services,
                                                     producer_ids=manager)
        store.suspend()  # type: ignore[attr-defined]
        with RawClient(broker.address) as client:
            answer = client.call(init_producer_id(4))
            assert (answer.error_code, answer.producer_id) == (
                ErrorCode.coordinator_load_in_progress, -1)
            store.resume()  # type: ignore[attr-defined]
            answer = wait_until(lambda: (a := client.call(init_producer_id(4))).error_code
                                == ErrorCode.none and a, message="an id")
            assert answer.producer_id == 0 and answer.producer_epoch == 0
        manager.close()
    finally:
        broker.close()
        store.close()


# --- CreateTopics -----------------------------------------------------------------------------


def creatable(version: int, name: str, partitions: int = -1, rf: int = -1, *,
              assignment: dict[int, list[int]] | None = None,
              configs: dict[str, str | None] | None = None) -> object:
    m = request_module(19, version)
    return build(m.CreatableTopic, name=name, num_partitions=partitions, replication_factor=rf,
                 assignments=tuple(build(m.CreatableReplicaAssignment, partition_index=p,
                                         broker_ids=tuple(b))
                                   for p, b in (assignment or {}).items()),
                 configs=tuple(build(m.CreatableTopicConfig, name=k, value=v)
                               for k, v in (configs or {}).items()))


def create_topics(version: int, *topics: object, timeout_ms: int = 30_000,
                  validate_only: bool = False) -> object:
    return request(19, version, topics=topics, timeout=timedelta(milliseconds=timeout_ms),
                   validate_only=validate_only)


def leaders(cluster: ClusterBroker, topic: str) -> dict[int, int]:
    return {p: s.leader for p, s in cluster.metadata.snapshot.topics.get(topic, {}).items()}


def test_create_topics_answers_once_the_leaders_are_elected(cluster: ClusterBroker) -> None:
    counted, defaulted, assigned = topic_name("counted"), topic_name("default"), topic_name("as")
    with RawClient(cluster.address) as client:
        answer = client.call(create_topics(7, creatable(7, counted, 3, 1),
                                           creatable(7, defaulted),
                                           creatable(7, assigned, assignment={0: [1], 1: [1]})))
        seen = {t: leaders(cluster, t) for t in (counted, defaulted, assigned)}
    assert seen == {counted: {0: 1, 1: 1, 2: 1}, defaulted: {0: 1}, assigned: {0: 1, 1: 1}}
    got = {t.name: (t.error_code, t.num_partitions, t.replication_factor) for t in answer.topics}
    assert got == {counted: (ErrorCode.none, 3, 1), defaulted: (ErrorCode.none, 1, 1),
                   assigned: (ErrorCode.none, 2, 1)}
    stored = cluster.admin.metadata.assignments([counted])[counted].value
    assert answer.topics[0].topic_id == uuid_of(stored.topic_id) is not None


def test_create_topics_errors(cluster: ClusterBroker) -> None:
    existing, dotted = topic_name("exists"), f"dotted.{uuid.uuid4().hex[:6]}"
    cluster.admin.create_topic(existing, 1, 1)
    cluster.admin.create_topic(dotted, 1, 1)
    twice, fresh = topic_name("twice"), topic_name("fresh")
    cases = [
        (creatable(7, existing, 1, 1), ErrorCode.topic_already_exists),
        (creatable(7, "__cluster_metadata", 1, 1), ErrorCode.invalid_request),
        (creatable(7, fresh + "a", 1, 1, configs={"retention.ms": None}),
         ErrorCode.invalid_config),
        (creatable(7, fresh + "b", 1, -1, assignment={0: [1]}), ErrorCode.invalid_request),
        (creatable(7, fresh + "c", 0, 1), ErrorCode.invalid_partitions),
        (creatable(7, fresh + "d", 1, 0), ErrorCode.invalid_replication_factor),
        (creatable(7, fresh + "e", 1, 2), ErrorCode.invalid_replication_factor),
        (creatable(7, "bad/name", 1, 1), ErrorCode.invalid_topic_exception),
        (creatable(7, dotted.replace(".", "_"), 1, 1), ErrorCode.invalid_topic_exception),
        (creatable(7, fresh + "f", assignment={0: [1], 1: []}),
         ErrorCode.invalid_replica_assignment),
        (creatable(7, fresh + "g", assignment={0: [1, 1]}), ErrorCode.invalid_replica_assignment),
        (creatable(7, fresh + "h", assignment={0: [1], 2: [1]}),
         ErrorCode.invalid_replica_assignment),
        (creatable(7, fresh + "i", assignment={0: [7]}), ErrorCode.invalid_replica_assignment),
        (creatable(7, fresh + "j", 100_001, 1), ErrorCode.policy_violation),
        (creatable(7, fresh + "k", 1, 1, configs={"retention.ms": "soon"}),
         ErrorCode.invalid_config),
        (creatable(7, fresh + "l", 1, 1, configs={"no.such.key": "1"}),
         ErrorCode.invalid_config),
        (creatable(7, fresh + "m", 1, 1, configs={"min.compaction.lag.ms": "9",
                                                  "max.compaction.lag.ms": "8"}),
         ErrorCode.invalid_config),
    ]
    with RawClient(cluster.address) as client:
        answer = client.call(create_topics(7, *(c for c, _e in cases),
                                           creatable(7, twice, 1, 1), creatable(7, twice, 1, 1)))
    got = [(t.error_code, t.num_partitions, t.replication_factor) for t in answer.topics]
    expected = [(e, -1, -1) for _c, e in cases] + [(ErrorCode.invalid_request, -1, -1)] * 2
    assert got == expected, [t.error_message for t in answer.topics]
    assert all(t.error_message for t in answer.topics)
    assert [t for t in cluster.admin.list_topics() if t.startswith((fresh, twice))] == []


def test_create_topics_with_configs(cluster: ClusterBroker) -> None:
    name, checked = topic_name("configured"), topic_name("checked")
    configs = {"retention.ms": "3600000", "cleanup.policy": "compact"}
    with RawClient(cluster.address) as client:
        answer = client.call(create_topics(7, creatable(7, name, 1, 1, configs=configs)))
        dry = client.call(create_topics(7, creatable(7, checked, 1, 1, configs=configs),
                                        validate_only=True))
        old = client.call(create_topics(4, creatable(4, topic_name("v4"), 1, 1,
                                                     configs=configs)))
    for result in (answer.topics[0], dry.topics[0]):
        assert result.error_code == ErrorCode.none
        listed = {c.name: (c.value, c.config_source) for c in result.configs}
        assert listed["retention.ms"] == ("3600000", 1)  # TOPIC_CONFIG
        assert listed["cleanup.policy"] == ("compact", 1)
        assert listed["segment.bytes"] == (str(1 << 30), 4)  # log.segment.bytes: static
        assert listed["compression.type"] == ("producer", 5)  # DEFAULT_CONFIG
    assert old.topics[0].error_code == ErrorCode.none
    assert cluster.admin.topic_config(name) == configs
    assert checked not in cluster.admin.list_topics()


def test_create_topics_validate_only_and_timeouts(cluster: ClusterBroker) -> None:
    checked, hurried, old = topic_name("checked"), topic_name("hurried"), topic_name("v0")
    with RawClient(cluster.address) as client:
        valid = client.call(create_topics(7, creatable(7, checked, 4, 1), validate_only=True))
        bad = client.call(create_topics(7, creatable(7, checked, 4, 5), validate_only=True))
        # a timeout of 0: written, not waited for, answered REQUEST_TIMED_OUT (Kafka's way)
        quick = client.call(create_topics(5, creatable(5, hurried, 2, 1), timeout_ms=0))
        v0 = client.call(create_topics(0, creatable(0, old, 1, 1)))
    assert (valid.topics[0].error_code, valid.topics[0].num_partitions,
            valid.topics[0].topic_id) == (ErrorCode.none, 4, None)
    assert bad.topics[0].error_code == ErrorCode.invalid_replication_factor
    assert quick.topics[0].error_code == ErrorCode.request_timed_out
    assert v0.topics[0].error_code == ErrorCode.none
    topics = cluster.admin.list_topics()
    assert checked not in topics and hurried in topics and old in topics
    wait_until(lambda: leaders(cluster, hurried) == {0: 1, 1: 1}, timeout=30)


# --- DeleteTopics -----------------------------------------------------------------------------


def delete_topics(version: int, names: list[str] = (), ids: list[uuid.UUID] = (),
                  both: list[tuple[str, uuid.UUID]] = (), timeout_ms: int = 30_000) -> object:
    if version < 6:
        return request(20, version, topic_names=tuple(names),
                       timeout=timedelta(milliseconds=timeout_ms))
    m = request_module(20, version)
    states = ([build(m.DeleteTopicState, name=n, topic_id=None) for n in names]
              + [build(m.DeleteTopicState, name=None, topic_id=i) for i in ids]
              + [build(m.DeleteTopicState, name=n, topic_id=i) for n, i in both])
    return request(20, version, topics=tuple(states), timeout=timedelta(milliseconds=timeout_ms))


def made(cluster: ClusterBroker, prefix: str, partitions: int = 1) -> tuple[str, uuid.UUID]:
    """A topic created through the admin path, once its leaders are in the cache."""
    name = topic_name(prefix)
    created = cluster.admin.create_topic(name, assignment={p: [1] for p in range(partitions)})
    wait_until(lambda: len(leaders(cluster, name)) == partitions
               and all(v == 1 for v in leaders(cluster, name).values()), timeout=30)
    return name, uuid_of(created.topic_id)


def test_delete_topics_by_name_and_by_id_answer_once_deletion_started(
        cluster: ClusterBroker) -> None:
    named, _ = made(cluster, "named")
    by_id, its_id = made(cluster, "by-id", 2)
    with RawClient(cluster.address) as client:
        first = client.call(delete_topics(5, [named]))
        assert named not in cluster.metadata.snapshot.topics  # the controller began
        second = client.call(delete_topics(6, ids=[its_id]))
        assert by_id not in cluster.metadata.snapshot.topics
    assert [(r.name, r.error_code) for r in first.responses] == [(named, ErrorCode.none)]
    assert [(r.name, r.topic_id, r.error_code) for r in second.responses] == [
        (by_id, its_id, ErrorCode.none)]
    wait_until(lambda: not {named, by_id} & set(cluster.admin.list_topics()), timeout=30,
               message="the topics removed")


def test_delete_topics_errors(cluster: ClusterBroker) -> None:
    kept, kept_id = made(cluster, "kept")
    hurried, _ = made(cluster, "hurried")
    nowhere = topic_name("nowhere")
    stranger = uuid.uuid4()
    with RawClient(cluster.address) as client:
        unknown = client.call(delete_topics(6, [nowhere], ids=[stranger],
                                            both=[(kept, kept_id)]))
        old = client.call(delete_topics(0, [nowhere]))
        quick = client.call(delete_topics(4, [hurried], timeout_ms=0))
    assert [(r.name, r.topic_id, r.error_code) for r in unknown.responses] == [
        (nowhere, None, ErrorCode.unknown_topic_or_partition),
        (None, stranger, ErrorCode.unknown_topic_id),
        (kept, kept_id, ErrorCode.invalid_request)]
    assert [r.error_code for r in old.responses] == [ErrorCode.unknown_topic_or_partition]
    assert [r.error_code for r in quick.responses] == [ErrorCode.request_timed_out]
    assert kept in cluster.admin.list_topics()
    wait_until(lambda: hurried not in cluster.admin.list_topics(), timeout=30)


@pytest.fixture(scope="module", params=BACKENDS)
def undeletable(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[ClusterBroker]:
    yield from start_cluster(request, tmp_path_factory.mktemp(f"nodel-{request.param}"),
                             extra="delete.topic.enable=false\n")


def test_delete_topics_when_deletion_is_disabled(undeletable: ClusterBroker) -> None:
    name, _ = made(undeletable, "stays")
    with RawClient(undeletable.address) as client:
        answers = [client.call(delete_topics(v, [name])).responses[0].error_code
                   for v in (2, 3, 6)]
    assert answers == [ErrorCode.invalid_request, ErrorCode.topic_deletion_disabled,
                       ErrorCode.topic_deletion_disabled]
    assert name in undeletable.admin.list_topics()
    assert undeletable.admin.metadata.topics_to_delete() == []


# --- CreatePartitions -------------------------------------------------------------------------


def create_partitions(*topics: tuple[str, int, list[list[int]] | None], version: int = 3,
                      timeout_ms: int = 30_000, validate_only: bool = False) -> object:
    m = request_module(37, version)
    return request(37, version, topics=tuple(
        build(m.CreatePartitionsTopic, name=n, count=c,
              assignments=None if a is None else tuple(
                  build(m.CreatePartitionsAssignment, broker_ids=tuple(b)) for b in a))
        for n, c, a in topics), timeout=timedelta(milliseconds=timeout_ms),
        validate_only=validate_only)


def test_create_partitions_answers_once_the_new_leaders_are_elected(
        cluster: ClusterBroker) -> None:
    placed, assigned = made(cluster, "grow")[0], made(cluster, "grow-as")[0]
    with RawClient(cluster.address) as client:
        answer = client.call(create_partitions((placed, 3, None), (assigned, 2, [[1]])))
        seen = (leaders(cluster, placed), leaders(cluster, assigned))
        checked = client.call(create_partitions((placed, 5, None), validate_only=True))
    assert [(r.name, r.error_code) for r in answer.results] == [
        (placed, ErrorCode.none), (assigned, ErrorCode.none)]
    assert seen == ({0: 1, 1: 1, 2: 1}, {0: 1, 1: 1})
    assert checked.results[0].error_code == ErrorCode.none
    assert cluster.admin.metadata.partitions_of(placed) == [0, 1, 2]  # validating: no change


def ghost_broker(cluster: ClusterBroker, broker_id: int = 9) -> coordinator.Coordinator:
    """Broker ``broker_id`` registered on a session of its own (no process behind it): close
    the session and it is gone, and what it holds can neither move nor be deleted."""
    session = coordinator.connect(cluster.config.coordinator_url, timeout=10)
    MetadataClient(session).register_broker(BrokerInfo(id=broker_id, host="127.0.0.1",
                                                       port=1))
    wait_until(lambda: broker_id in cluster.metadata.snapshot.brokers, timeout=30)
    return session


def test_create_partitions_errors(cluster: ClusterBroker) -> None:
    name = made(cluster, "errs")[0]
    moving, doomed = made(cluster, "moving")[0], topic_name("doomed")
    ghost = ghost_broker(cluster)
    cluster.admin.create_topic(doomed, assignment={0: [9]})
    wait_until(lambda: doomed in cluster.metadata.snapshot.topics, timeout=30)
    ghost.close()
    # a replica on a broker that is gone: its deletion waits for the broker (for ever here)
    cluster.admin.delete_topic(doomed)
    # a move to that broker stays in progress
    cluster.admin.reassign({TopicPartition(moving, 0): (1, 9)})
    wait_until(lambda: cluster.admin.metadata.assignments([moving])[moving].value.adding,
               timeout=30, message="the move started")
    cases = [
        ((topic_name("nowhere"), 2, None), ErrorCode.unknown_topic_or_partition),
        ((name, 1, None), ErrorCode.invalid_partitions),  # the count it has
        ((moving, 2, None), ErrorCode.reassignment_in_progress),
        ((doomed, 2, None), ErrorCode.invalid_topic_exception),
        ((name, 3, [[1], [7]]), ErrorCode.invalid_replica_assignment),  # unknown broker
        ((name, 3, [[1]]), ErrorCode.invalid_replica_assignment),  # one of two
        ((name, 2, [[]]), ErrorCode.invalid_replica_assignment),
        ((name, 2, [[1, 1]]), ErrorCode.invalid_replica_assignment),
        ((name, 100_001, None), ErrorCode.policy_violation),
    ]
    try:
        with RawClient(cluster.address) as client:
            for topic, error in cases:
                (result,) = client.call(create_partitions(topic)).results
                assert (result.error_code, bool(result.error_message)) == (error, True), topic
            twice = client.call(create_partitions((name, 2, None), (name, 3, None)))
            assert [(r.name, r.error_code) for r in twice.results] == [
                (name, ErrorCode.invalid_request)]
            grown = made(cluster, "lower")[0]
            client.call(create_partitions((grown, 3, None)))
            (lower,) = client.call(create_partitions((grown, 2, None))).results
            assert lower.error_code == ErrorCode.invalid_partitions
            quick = client.call(create_partitions((grown, 4, None), timeout_ms=0))
            assert quick.results[0].error_code == ErrorCode.request_timed_out
            v0 = client.call(create_partitions((grown, 5, None), version=0))
            assert v0.results[0].error_code == ErrorCode.none
        assert cluster.admin.metadata.partitions_of(name) == [0]
    finally:
        cancel_reassignment(cluster.node.coordinator, wait=30)


# --- DescribeConfigs, AlterConfigs, IncrementalAlterConfigs -----------------------------------

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8


def describe_configs(version: int, *resources: tuple[int, str, list[str] | None],
                     synonyms: bool = True, docs: bool = True) -> object:
    m = request_module(32, version)
    return request(32, version, resources=tuple(
        build(m.DescribeConfigsResource, resource_type=t, resource_name=n,
              configuration_keys=None if k is None else tuple(k)) for t, n, k in resources),
        include_synonyms=synonyms, include_documentation=docs)


def alter_configs(version: int, *resources: tuple[int, str, dict[str, str | None]],
                  validate_only: bool = False) -> object:
    m = request_module(33, version)
    return request(33, version, resources=tuple(
        build(m.AlterConfigsResource, resource_type=t, resource_name=n, configs=tuple(
            build(m.AlterableConfig, name=k, value=v) for k, v in c.items()))
        for t, n, c in resources), validate_only=validate_only)


def incremental(version: int, *resources: tuple[int, str, list[tuple[str, int, str | None]]],
                validate_only: bool = False) -> object:
    m = request_module(44, version)
    return request(44, version, resources=tuple(
        build(m.AlterConfigsResource, resource_type=t, resource_name=n, configs=tuple(
            build(m.AlterableConfig, name=k, config_operation=op, value=v) for k, op, v in c))
        for t, n, c in resources), validate_only=validate_only)


def test_describe_configs_of_a_topic_and_of_this_broker(cluster: ClusterBroker) -> None:
    name, _ = made(cluster, "described")
    cluster.admin.alter_topic_config(name, {"retention.ms": "1000"})
    with RawClient(cluster.address) as client:
        full = client.call(describe_configs(4, (TOPIC, name, None), (BROKER, "1", None),
                                            (BROKER, "", None)))
        some = client.call(describe_configs(1, (TOPIC, name, ["retention.ms", "no.such"]),
                                            synonyms=False))
        v0 = client.call(describe_configs(0, (TOPIC, name, ["retention.ms", "segment.ms"])))
    topic, broker, defaults = full.results
    assert [(r.error_code, r.resource_type, r.resource_name) for r in full.results] == [
        (ErrorCode.none, TOPIC, name), (ErrorCode.none, BROKER, "1"), (ErrorCode.none, BROKER, "")]
    entries = {c.name: c for c in topic.configs}
    assert set(entries) == set(TOPIC_CONFIG_KEYS)  # every Kafka topic key
    retention = entries["retention.ms"]
    assert (retention.value, retention.config_source, retention.read_only,
            retention.config_type) == ("1000", 1, False, 5)  # TOPIC_CONFIG, LONG
    # Kafka lists none of log.retention.hours before log.retention.ms, which is unset
    assert [(s.name, s.source) for s in retention.synonyms] == [("retention.ms", 1)]
    segment = entries["segment.bytes"]
    assert (segment.value, segment.config_source) == ("1073741824", 4)  # server.properties
    assert [(s.name, s.value, s.source) for s in segment.synonyms] == [
        ("log.segment.bytes", "1073741824", 4), ("log.segment.bytes", "1073741824", 5)]
    statics = {c.name: (c.value, c.config_source, c.read_only, c.config_type)
               for c in broker.configs}
    assert statics["log.segment.bytes"] == ("1073741824", 4, True, 3)  # INT
    assert statics["num.io.threads"] == ("8", 4, True, 3)
    assert statics["broker.id"] == ("1", 4, True, 3)
    assert defaults.configs == ()  # no dynamic defaults
    assert [(c.name, c.value, c.synonyms) for c in some.results[0].configs] == [
        ("retention.ms", "1000", ())]
    assert [(c.name, c.is_default) for c in v0.results[0].configs] == [
        ("retention.ms", False), ("segment.ms", True)]


def test_describe_configs_errors(cluster: ClusterBroker) -> None:
    with RawClient(cluster.address) as client:
        answer = client.call(describe_configs(4, (TOPIC, topic_name("nowhere"), None),
                                              (TOPIC, "bad/name", None), (BROKER, "2", None),
                                              (BROKER, "one", None), (BROKER_LOGGER, "1", None),
                                              (99, "x", None)))
    assert [(r.error_code, r.configs) for r in answer.results] == [
        (ErrorCode.unknown_topic_or_partition, ()), (ErrorCode.invalid_topic_exception, ()),
        (ErrorCode.invalid_request, ()), (ErrorCode.invalid_request, ()),
        (ErrorCode.invalid_request, ()), (ErrorCode.invalid_request, ())]
    assert all(r.error_message for r in answer.results[1:])


def test_alter_configs_replaces_a_topics_overrides(cluster: ClusterBroker) -> None:
    name, _ = made(cluster, "altered")
    cluster.admin.alter_topic_config(name, {"retention.ms": "1000"})
    nowhere = topic_name("nowhere")
    with RawClient(cluster.address) as client:
        dry = client.call(alter_configs(2, (TOPIC, name, {"cleanup.policy": "compact"}),
                                        validate_only=True))
        assert cluster.admin.topic_config(name) == {"retention.ms": "1000"}
        done = client.call(alter_configs(0, (TOPIC, name, {"cleanup.policy": "compact"})))
        assert cluster.admin.topic_config(name) == {"cleanup.policy": "compact"}
        errors = client.call(alter_configs(
            1, (TOPIC, name, {"retention.ms": "soon"}), (TOPIC, nowhere, {}), (TOPIC, "", {}),
            (BROKER, "1", {"log.retention.hours": "1"}), (BROKER, "2", {}), (99, "x", {})))
        twice = client.call(alter_configs(1, (TOPIC, name, {}), (TOPIC, name, {})))
        unset = client.call(alter_configs(1, (TOPIC, name, {"retention.ms": None})))
        unknown = client.call(alter_configs(1, (TOPIC, name, {"no.such.key": "1"})))
    assert [r.error_code for r in dry.responses + done.responses] == [ErrorCode.none] * 2
    assert [(r.resource_name, r.error_code) for r in errors.responses] == [
        (name, ErrorCode.invalid_config), (nowhere, ErrorCode.unknown_topic_or_partition),
        ("", ErrorCode.invalid_request), ("1", ErrorCode.invalid_request),
        ("2", ErrorCode.invalid_request), ("x", ErrorCode.invalid_request)]
    assert "dynamically" in errors.responses[3].error_message
    assert [r.error_code for r in twice.responses] == [ErrorCode.invalid_request] * 2
    assert unset.responses[0].error_code == ErrorCode.invalid_request
    assert unknown.responses[0].error_code == ErrorCode.invalid_config
    assert cluster.admin.topic_config(name) == {"cleanup.policy": "compact"}


def test_incremental_alter_configs(cluster: ClusterBroker) -> None:
    name, _ = made(cluster, "incremental")
    cluster.admin.alter_topic_config(name, {"retention.ms": "1000"})
    set_, delete, append, subtract = 0, 1, 2, 3
    with RawClient(cluster.address) as client:
        done = client.call(incremental(1, (TOPIC, name, [
            ("retention.ms", delete, None), ("segment.ms", set_, "60000"),
            ("cleanup.policy", append, "compact")])))
        assert cluster.admin.topic_config(name) == {"segment.ms": "60000",
                                                    "cleanup.policy": "delete,compact"}
        dry = client.call(incremental(0, (TOPIC, name, [("cleanup.policy", subtract, "delete")]),
                                      validate_only=True))
        less = client.call(incremental(0, (TOPIC, name, [("cleanup.policy", subtract, "delete")])))
        assert cluster.admin.topic_config(name) == {"segment.ms": "60000",
                                                    "cleanup.policy": "compact"}
        errors = client.call(incremental(
            1, (TOPIC, name, [("segment.ms", append, "1")]),
            (TOPIC, topic_name("nowhere"), [("segment.ms", set_, "1")]),
            (BROKER, "1", [("log.retention.hours", set_, "1")]),
            (BROKER_LOGGER, "1", [("root", set_, "DEBUG")])))
        null = client.call(incremental(1, (TOPIC, name, [("segment.ms", set_, None)])))
        twice = client.call(incremental(1, (TOPIC, name, [("segment.ms", set_, "1"),
                                                          ("segment.ms", delete, None)])))
        odd = client.call(incremental(1, (TOPIC, name, [("segment.ms", 7, "1")])))
    assert [r.error_code for r in done.responses + dry.responses + less.responses] == [
        ErrorCode.none] * 3
    assert [r.error_code for r in errors.responses] == [
        ErrorCode.invalid_config, ErrorCode.unknown_topic_or_partition,
        ErrorCode.invalid_request, ErrorCode.invalid_request]
    assert [r.responses[0].error_code for r in (null, twice, odd)] == [
        ErrorCode.invalid_request] * 3
    assert cluster.admin.topic_config(name) == {"segment.ms": "60000", "cleanup.policy": "compact"}


def test_librdkafka_sets_the_replication_throttle_rates(cluster: ClusterBroker) -> None:
    """Kafka's dynamic broker configs for throttles: set through the admin API on this broker
    (librdkafka) and on the cluster's defaults (an empty name, which librdkafka does not send:
    the raw requests), stored where Kafka stores them, shown by DescribeConfigs with their
    sources, and followed by the data plane without a restart."""
    leader, follower = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
    rm = cluster.node.replica_manager
    assert rm is not None
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    own = ConfigResource(ConfigResource.Type.BROKER, "1")
    set_, delete = AlterConfigOpType.SET, AlterConfigOpType.DELETE

    def incrementally(*entries: tuple[str, AlterConfigOpType, str | None],
                      validate_only: bool = False) -> None:
        resource = ConfigResource(ConfigResource.Type.BROKER, "1", incremental_configs=[
            ConfigEntry(k, v, incremental_operation=op) for k, op, v in entries])
        admin.incremental_alter_configs([resource], validate_only=validate_only
                                        )[resource].result(30)

    def refused(*entries: tuple[str, AlterConfigOpType, str | None]) -> int:
        with pytest.raises(ck.KafkaException) as info:
            incrementally(*entries)
        return info.value.args[0].code()

    def on_defaults(*entries: tuple[str, int, str | None]) -> ErrorCode:
        with RawClient(cluster.address) as client:
            return client.call(incremental(1, (BROKER, "", list(entries)))).responses[0]\
                .error_code

    def described_defaults() -> dict[str, tuple[str, int]]:
        with RawClient(cluster.address) as client:
            result = client.call(describe_configs(4, (BROKER, "", None))).results[0]
        assert result.error_code == ErrorCode.none
        return {c.name: (c.value, c.config_source) for c in result.configs}

    try:
        incrementally((leader, set_, "1000000"))
        assert on_defaults((follower, 0, "2000000"), (leader, 0, "3000000")) == ErrorCode.none
        assert cluster.admin.broker_config(1) == {leader: "1000000"}
        assert cluster.admin.broker_config(None) == {follower: "2000000", leader: "3000000"}
        # its own value wins over the default's; the default fills in for the other
        wait_until(lambda: (rm.leader_quota.rate, rm.follower_quota.rate) == (1e6, 2e6),
                   message="the rates applied")
        described = admin.describe_configs([own])[own].result(30)
        assert (described[leader].value, described[leader].source) == (
            "1000000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
        with RawClient(cluster.address) as client:  # librdkafka keeps one synonym per name
            raw = client.call(describe_configs(4, (BROKER, "1", [leader]))).results[0].configs
        assert [(s.value, s.source) for s in raw[0].synonyms] == [("1000000", 2), ("3000000", 3)]
        assert (described[follower].value, described[follower].source) == (
            "2000000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
        assert not described[leader].is_read_only
        assert described["broker.id"].is_read_only  # the static config is still there
        assert described_defaults() == {follower: ("2000000", 3), leader: ("3000000", 3)}
        # bad input: refused whole, nothing changed
        assert refused(("log.retention.hours", set_, "1")) == ck.KafkaError.INVALID_REQUEST
        assert refused((leader, set_, "fast")) == ck.KafkaError.INVALID_REQUEST
        assert refused((leader, AlterConfigOpType.APPEND, "1")) == ck.KafkaError.INVALID_CONFIG
        assert on_defaults((leader, 0, "-1")) == ErrorCode.invalid_request
        incrementally((leader, set_, "5"), validate_only=True)
        assert cluster.admin.broker_config(1) == {leader: "1000000"}
        assert cluster.admin.broker_config(None) == {follower: "2000000", leader: "3000000"}
        # AlterConfigs replaces the broker's whole dynamic config: its leader rate goes (the
        # default's applies again), its follower rate comes
        whole = ConfigResource(ConfigResource.Type.BROKER, "1", set_config={follower: "500"})
        with pytest.warns(DeprecationWarning):
            assert admin.alter_configs([whole])[whole].result(30) is None
        assert cluster.admin.broker_config(1) == {follower: "500"}
        wait_until(lambda: (rm.leader_quota.rate, rm.follower_quota.rate) == (3e6, 500),
                   message="the replaced rates applied")
        assert on_defaults((leader, 1, None), (follower, 1, None)) == ErrorCode.none
        incrementally((follower, delete, None))
        wait_until(lambda: (rm.leader_quota.rate, rm.follower_quota.rate) == (None, None),
                   message="the rates removed")
        assert described_defaults() == {}
    finally:
        for broker in (1, None):
            cluster.admin.replace_broker_config(broker, {})


# --- DescribeCluster --------------------------------------------------------------------------


def test_describe_cluster(cluster: ClusterBroker) -> None:
    with RawClient(cluster.address) as client:
        plain = client.call(request(60, 1, include_cluster_authorized_operations=False,
                                    endpoint_type=1))
        asked = client.call(request(60, 0, include_cluster_authorized_operations=True))
        controller = client.call(request(60, 1, include_cluster_authorized_operations=False,
                                         endpoint_type=2))
        unknown = client.call(request(60, 1, include_cluster_authorized_operations=False,
                                      endpoint_type=7))
        v0_unknown = client.call(request(60, 0, include_cluster_authorized_operations=False))
    assert (plain.error_code, plain.cluster_id, plain.controller_id,
            plain.cluster_authorized_operations) == (
        ErrorCode.none, cluster.node.participant.cluster_id, 1, -2147483648)
    assert [(b.broker_id, b.host, b.port, b.rack) for b in plain.brokers] == [
        (1, "127.0.0.1", cluster.port, None)]
    # no authorizer: every operation Kafka defines on a cluster
    assert asked.cluster_authorized_operations == sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))
    assert (controller.error_code, unknown.error_code) == (ErrorCode.mismatched_endpoint_type,
                                                           ErrorCode.unsupported_endpoint_type)
    assert v0_unknown.error_code == ErrorCode.none


# --- ElectLeaders -----------------------------------------------------------------------------


def elect_leaders(version: int, partitions: dict[str, list[int]] | None, *, election: int = 0,
                  timeout_ms: int = 30_000) -> object:
    m = request_module(43, version)
    named = None if partitions is None else tuple(
        build(m.TopicPartitions, topic=t, partitions=tuple(ps)) for t, ps in partitions.items())
    return request(43, version, election_type=election, topic_partitions=named,
                   timeout=timedelta(milliseconds=timeout_ms))


def election_errors(response: object) -> dict[tuple[str, int], ErrorCode]:
    return {(r.topic, p.partition_id): p.error_code for r in response.replica_election_results
            for p in r.partition_result}


def shrink_isr_to(cluster: ClusterBroker, session: coordinator.Coordinator, tp: TopicPartition,
                  isr: tuple[int, ...]) -> None:
    """What a leader does when followers fall behind: its conditional write of the partition
    state and an ISR change notification (here the ghost broker, as leader)."""
    md = MetadataClient(session)
    current = md.partition_states([tp])[tp]
    state = dataclasses.replace(current.value, isr=isr)
    session.set(f"/brokers/topics/{tp.topic}/partitions/{tp.partition}/state", state.encode(),
                current.version)
    md.notify_isr_change([tp])
    wait_until(lambda: (p := cluster.metadata.snapshot.partition(tp)) is not None
               and p.isr == isr, timeout=30, message="the shrunk ISR")


def test_elect_leaders(cluster: ClusterBroker) -> None:
    led = made(cluster, "led")[0]  # its preferred replica (1) leads
    behind, alone, lost = topic_name("behind"), topic_name("alone"), topic_name("lost")
    ghost = ghost_broker(cluster)
    # behind-0: 9 preferred and leading; 1 in sync, takes over when 9 is gone
    # alone-0: 9 leading, 1 dropped out of the ISR: leaderless when 9 is gone, 1 out of sync
    # lost-0: only 9
    cluster.admin.create_topic(behind, assignment={0: [9, 1]})
    cluster.admin.create_topic(alone, assignment={0: [9, 1]})
    cluster.admin.create_topic(lost, assignment={0: [9]})
    wait_until(lambda: all(leaders(cluster, t) == {0: 9} for t in (behind, alone, lost)),
               timeout=30, message="broker 9 leading")
    shrink_isr_to(cluster, ghost, TopicPartition(alone, 0), (9,))
    ghost.close()
    wait_until(lambda: leaders(cluster, behind) == {0: 1} and leaders(cluster, alone) == {0: -1}
               and leaders(cluster, lost) == {0: -1}, timeout=30, message="9 gone")
    nowhere = topic_name("nowhere")
    with RawClient(cluster.address) as client:
        preferred = client.call(elect_leaders(2, {led: [0], behind: [0], alone: [0],
                                                  nowhere: [0], led + "x": [3]}))
        v0 = client.call(elect_leaders(0, {led: [0]}))
        odd = client.call(elect_leaders(1, {led: [0]}, election=5))
        everything = client.call(elect_leaders(2, None))
        unclean = client.call(elect_leaders(1, {led: [0], alone: [0], lost: [0], nowhere: [0]},
                                            election=1))
    assert election_errors(preferred) == {
        (led, 0): ErrorCode.election_not_needed,
        (behind, 0): ErrorCode.preferred_leader_not_available,  # 9 is gone
        (alone, 0): ErrorCode.preferred_leader_not_available,
        (nowhere, 0): ErrorCode.unknown_topic_or_partition,
        (led + "x", 3): ErrorCode.unknown_topic_or_partition}
    assert preferred.error_code == ErrorCode.none
    assert election_errors(v0) == {(led, 0): ErrorCode.election_not_needed}
    assert odd.error_code == ErrorCode.invalid_request
    # every partition: those needing no election are left out
    assert (led, 0) not in election_errors(everything)
    assert election_errors(everything)[(behind, 0)] == ErrorCode.preferred_leader_not_available
    assert election_errors(unclean) == {
        (led, 0): ErrorCode.election_not_needed,
        (alone, 0): ErrorCode.none,  # 1, out of sync, leads now: answered once it shows
        (lost, 0): ErrorCode.eligible_leaders_not_available,
        (nowhere, 0): ErrorCode.unknown_topic_or_partition}
    assert leaders(cluster, alone) == {0: 1}
    assert cluster.metadata.snapshot.partition(TopicPartition(alone, 0)).isr == (1,)


def test_elect_leaders_elsewhere_than_the_controller(tmp_path: Path) -> None:
    """Not the controller: NOT_CONTROLLER for every partition (clients ask the controller)."""
    broker = InProcessBroker(tmp_path / "logs")
    try:
        broker.set_partition("t", 0)
        with RawClient(broker.address) as client:
            answer = client.call(elect_leaders(2, {"t": [0, 1]}))
        assert election_errors(answer) == {("t", 0): ErrorCode.not_controller,
                                           ("t", 1): ErrorCode.not_controller}
    finally:
        broker.close()


# --- AlterPartitionReassignments, ListPartitionReassignments ----------------------------------


@pytest.fixture(scope="module", params=BACKENDS)
def pair(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[ClusterBroker]:
    """Broker 1 (serving, the controller) and broker 2 (a broker node of this process that
    follows it), on one coordinator."""
    from node.broker_node import BrokerNode
    from replication.config import ReplicaConfig
    from statemachines.in_process import InProcessNetwork
    from tests.broker.admin_fixtures import backend_url, wait_serving
    from tests.broker.cluster_harness import LiveEndpoints

    tmp = tmp_path_factory.mktemp(f"pair-{request.param}")
    url = backend_url(request, request.param)
    network, endpoints = InProcessNetwork(), LiveEndpoints()
    quick = ReplicaConfig(isr_change_check_interval_ms=50, isr_change_blackout_ms=50)
    one = ClusterBroker(url, tmp / "one", network=network, transport=endpoints,
                        replica_config=quick)
    endpoints.nodes[1] = one.node
    two = BrokerNode(url, 2, tmp / "two", network=network, transport=endpoints,
                     replica_config=quick,
                     connect_options={"timeout": 10.0, "session_timeout": 6.0})
    endpoints.nodes[2] = two
    try:
        wait_serving(one)
        two.start()
        wait_until(lambda: 2 in one.metadata.snapshot.brokers, timeout=30, message="broker 2")
        yield one
    finally:
        two.shutdown()
        one.close()


def alter_reassignments(moves: dict[tuple[str, int], list[int] | None]) -> object:
    m = request_module(45, 0)
    topics: dict[str, list[object]] = {}
    for (t, p), replicas in moves.items():
        topics.setdefault(t, []).append(build(
            m.ReassignablePartition, partition_index=p,
            replicas=None if replicas is None else tuple(replicas)))
    return request(45, 0, timeout=timedelta(seconds=30), topics=tuple(
        build(m.ReassignableTopic, name=t, partitions=tuple(ps)) for t, ps in topics.items()))


def list_reassignments(topics: dict[str, list[int]] | None) -> object:
    m = request_module(46, 0)
    return request(46, 0, timeout=timedelta(seconds=30), topics=None if topics is None else tuple(
        build(m.ListPartitionReassignmentsTopics, name=t, partition_indexes=tuple(ps))
        for t, ps in topics.items()))


def alter_errors(response: object) -> dict[tuple[str, int], ErrorCode]:
    return {(t.name, p.partition_index): p.error_code for t in response.responses
            for p in t.partitions}


def listed(response: object) -> dict[tuple[str, int], tuple[tuple[int, ...], ...]]:
    return {(t.name, p.partition_index): (p.replicas, p.adding_replicas, p.removing_replicas)
            for t in response.topics for p in t.partitions}


def replicas_of(broker: ClusterBroker, topic: str) -> dict[int, tuple[int, ...]]:
    a = broker.admin.metadata.assignments([topic])[topic].value
    return {p: (tuple(r), tuple(a.adding.get(p, ())), tuple(a.removing.get(p, ())))
            for p, r in a.partitions.items()}


def test_a_reassignment_through_the_api_is_carried_out(pair: ClusterBroker) -> None:
    name, _ = made(pair, "moved")
    with RawClient(pair.address) as client:
        answer = client.call(alter_reassignments({(name, 0): [2]}))
        assert alter_errors(answer) == {(name, 0): ErrorCode.none}
        wait_until(lambda: replicas_of(pair, name) == {0: ((2,), (), ())}, timeout=60,
                   message="the move done")
        assert listed(client.call(list_reassignments({name: [0]}))) == {}
    assert leaders(pair, name) == {0: 2}


def test_a_move_in_progress_is_listed_replaced_and_cancelled(pair: ClusterBroker) -> None:
    name, _ = made(pair, "slow")
    ghost = ghost_broker(pair)  # 9: registered, never catches up, so the move stays in progress
    try:
        with RawClient(pair.address) as client:
            assert alter_errors(client.call(alter_reassignments({(name, 0): [1, 9]}))) == {
                (name, 0): ErrorCode.none}
            wait_until(lambda: replicas_of(pair, name) == {0: ((1, 9), (9,), ())}, timeout=30,
                       message="the move started")
            assert listed(client.call(list_reassignments({name: [0, 1]}))) == {
                (name, 0): ((1, 9), (9,), ())}
            assert (name, 0) in listed(client.call(list_reassignments(None)))
            # a new target replaces the old one (9 is dropped again)
            client.call(alter_reassignments({(name, 0): [9, 2]}))
            wait_until(lambda: replicas_of(pair, name)[0][1] == (9, 2), timeout=30,
                       message="the new target")
            assert listed(client.call(list_reassignments({name: [0]})))[(name, 0)] == (
                (9, 2, 1), (9, 2), (1,))
            cancel = client.call(alter_reassignments({(name, 0): None}))
            assert alter_errors(cancel) == {(name, 0): ErrorCode.none}
            wait_until(lambda: replicas_of(pair, name) == {0: ((1,), (), ())}, timeout=30,
                       message="back to where it was")
            assert listed(client.call(list_reassignments({name: [0]}))) == {}
            again = client.call(alter_reassignments({(name, 0): None}))
            assert alter_errors(again) == {(name, 0): ErrorCode.no_reassignment_in_progress}
    finally:
        ghost.close()


def test_alter_reassignments_errors(pair: ClusterBroker) -> None:
    name, _ = made(pair, "bad-moves")
    nowhere = topic_name("nowhere")
    with RawClient(pair.address) as client:
        answer = client.call(alter_reassignments({
            (nowhere, 0): [1], (name, 5): [1], (name, 0): [], }))
        dup = client.call(alter_reassignments({(name, 0): [1, 1]}))
        negative = client.call(alter_reassignments({(name, 0): [1, -3]}))
        dead = client.call(alter_reassignments({(name, 0): [1, 7]}))
    assert alter_errors(answer) == {(nowhere, 0): ErrorCode.unknown_topic_or_partition,
                                    (name, 5): ErrorCode.unknown_topic_or_partition,
                                    (name, 0): ErrorCode.invalid_replica_assignment}
    for response in (dup, negative, dead):
        assert alter_errors(response) == {(name, 0): ErrorCode.invalid_replica_assignment}
        assert response.responses[0].partitions[0].error_message
    assert pair.admin.metadata.reassignment() is None


def test_the_api_respects_partctl_executes_claim(pair: ClusterBroker) -> None:
    """While a partctl reassign execute run owns the node, the API refuses to write into it:
    REASSIGNMENT_IN_PROGRESS, naming the run; once the run is gone, it writes."""
    from coordinator.codecs import ReassignmentOwner

    name, _ = made(pair, "claimed")
    other = made(pair, "theirs")[0]
    run = coordinator.connect(pair.config.coordinator_url, timeout=10)
    try:
        owner = ReassignmentOwner(run="r1", digest="ab" * 32, partitions=1, plan="plan.json",
                                  host="h", pid=42)
        assert MetadataClient(run).claim_reassignment(owner, {TopicPartition(other, 0): (1, 9)})
        with RawClient(pair.address) as client:
            refused = client.call(alter_reassignments({(name, 0): [2]}))
            assert alter_errors(refused) == {(name, 0): ErrorCode.reassignment_in_progress}
            assert "plan plan.json" in refused.responses[0].partitions[0].error_message
            # listing is fine: the run's move shows as the controller started it
            assert listed(client.call(list_reassignments({other: [0]}))) == {
                (other, 0): ((1, 9), (9,), ())}
            run.close()  # the run's session ends: its claim with it
            assert alter_errors(client.call(alter_reassignments({(other, 0): None}))) == {
                (other, 0): ErrorCode.none}
            wait_until(lambda: replicas_of(pair, other) == {0: ((1,), (), ())}, timeout=30)
    finally:
        run.close()


# --- topic ids (KIP-516) ----------------------------------------------------------------------


def metadata_request(version: int, names: list[str] | None = None,
                     ids: list[uuid.UUID] = ()) -> object:
    m = request_module(3, version)
    topics = None if names is None and not ids else tuple(
        [build(m.MetadataRequestTopic, name=n, topic_id=None) for n in names or ()]
        + [build(m.MetadataRequestTopic, name=None, topic_id=i) for i in ids])
    return request(3, version, topics=topics, allow_auto_topic_creation=False,
                   include_topic_authorized_operations=False,
                   include_cluster_authorized_operations=False)


def test_metadata_carries_topic_ids_and_answers_by_id(cluster: ClusterBroker) -> None:
    name, its_id = made(cluster, "ids")
    stranger = uuid.uuid4()
    with RawClient(cluster.address) as client:
        by_name = client.call(metadata_request(10, [name]))
        every = client.call(metadata_request(12))
        by_id = client.call(metadata_request(12, ids=[its_id, stranger]))
        old = client.call(metadata_request(9, [name]))
        m = request_module(3, 11)
        refused = client.call(request(
            3, 11, topics=(build(m.MetadataRequestTopic, name=name, topic_id=its_id),),
            allow_auto_topic_creation=False, include_topic_authorized_operations=False))
        client.send(metadata_request(11, ids=[its_id]))  # no name: nothing to answer under
        assert client.closed_by_peer()
    assert [(t.name, t.topic_id, t.error_code) for t in by_name.topics] == [
        (name, its_id, ErrorCode.none)]
    assert {t.name: t.topic_id for t in every.topics}[name] == its_id
    assert all(t.topic_id is not None for t in every.topics)
    assert [(t.name, t.topic_id, t.error_code, len(t.partitions)) for t in by_id.topics] == [
        (name, its_id, ErrorCode.none, 1), (None, stranger, ErrorCode.unknown_topic_id, 0)]
    assert old.topics[0].error_code == ErrorCode.none
    assert [t.error_code for t in refused.topics] == [ErrorCode.invalid_request]


def test_a_topic_created_again_under_its_name_has_a_new_id(cluster: ClusterBroker) -> None:
    name, first = made(cluster, "again")
    with RawClient(cluster.address) as client:
        assert client.call(metadata_request(12, [name])).topics[0].topic_id == first
        assert election_errors(client.call(elect_leaders(2, {name: [0]}))) == {
            (name, 0): ErrorCode.election_not_needed}
        client.call(delete_topics(6, [name]))
        wait_until(lambda: name not in cluster.admin.list_topics(), timeout=30)
        second = uuid_of(cluster.admin.create_topic(name, assignment={0: [1]}).topic_id)
        wait_until(lambda: leaders(cluster, name) == {0: 1}, timeout=30)
        assert client.call(metadata_request(12, [name])).topics[0].topic_id == second != first
        gone = client.call(metadata_request(12, ids=[first]))
        assert [(t.name, t.error_code) for t in gone.topics] == [
            (None, ErrorCode.unknown_topic_id)]


def test_a_topic_node_without_an_id_is_answered_with_the_zero_id(cluster: ClusterBroker) -> None:
    """Written by a tool older than KIP-516 (config, then assignment, as Kafka's tools wrote
    them, without an id): the zero id, recorded so as not to look again. (The controller
    learns the topic without an id too, so its UpdateMetadata carries none.)"""
    from broker.metadata_cache import NO_TOPIC_ID
    from coordinator import layout
    from coordinator.codecs import TopicAssignment

    name = topic_name("no-id")
    coord = cluster.admin.coordinator
    coord.create(layout.topic_config(name), b'{"version":1,"config":{}}', make_parents=True)
    coord.create(layout.topic(name), TopicAssignment(topic=name, partitions={0: (1,)}).encode())
    wait_until(lambda: leaders(cluster, name) == {0: 1}, timeout=30)
    with RawClient(cluster.address) as client:
        (topic,) = client.call(metadata_request(12, [name])).topics
    assert (topic.error_code, topic.topic_id) == (ErrorCode.none, None)  # the zero id
    assert cluster.metadata.snapshot.topic_ids[name] == NO_TOPIC_ID
    assert NO_TOPIC_ID not in cluster.metadata.snapshot.topic_names
