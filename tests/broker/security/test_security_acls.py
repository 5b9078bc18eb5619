"""ACLs on three real broker processes (``authorizer.class.name`` set, one SASL_PLAINTEXT
listener with SCRAM-SHA-512 for clients and brokers alike, the brokers' own user ``broker`` and
``admin`` super users), driven by confluent-kafka: a principal without Write gets
TOPIC_AUTHORIZATION_FAILED and nothing is appended; Metadata leaves out the topics it may not
Describe; a PREFIXED ACL grants what it covers and no more; a DENY beats an ALLOW; group APIs
check the group (OffsetCommit without Read on the group refuses every partition); an ACL
created through one broker is enforced by every broker within moments; the throttle rates of a broker need AlterConfigs on the cluster; a KIP-848 regex
subscription is assigned only the topics its principal may Describe."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kio.schema.describe_acls.v3.request import DescribeAclsRequest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.static.primitive import i8, i32, i32Timedelta

import coordinator
from broker.groups.records import (
    OffsetCommitKey,
    OffsetCommitValue,
    encode_key,
    encode_value,
    partition_for,
)
from coordinator.admin import Admin
from kafkaclient.connection import KafkaConnection
from kafkaclient.security.connector import Connector
from kafkaclient.security.password import Password
from kafkaclient.security.settings import ClientSecurity
from tests.broker.processes import REPO, BrokerProcess, coordinator_settings, start_broker
from tests.broker.security_fixtures import SCRAM_MODULE, listener_ports, partctl, secret

pytestmark = pytest.mark.servers
USERS = ("broker", "admin", "alice", "bob", "carol")
OFFSETS = "__consumer_offsets"


@dataclass
class AclCluster:
    brokers: list[BrokerProcess]
    secrets: dict[str, str]
    url: str

    def ports(self) -> list[int]:
        return [listener_ports(b)["SASL_PLAINTEXT"] for b in self.brokers]

    def conf(self, user: str, only: int | None = None) -> dict[str, object]:
        ports = self.ports() if only is None else [self.ports()[only]]
        return {"bootstrap.servers": ",".join(f"127.0.0.1:{p}" for p in ports),
                "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": user, "sasl.password": self.secrets[user]}

    def admin(self, user: str = "admin") -> AdminClient:
        return AdminClient(self.conf(user))

    def connection(self, user: str, index: int) -> KafkaConnection:
        security = ClientSecurity(protocol="SASL_PLAINTEXT", mechanism="SCRAM-SHA-512",
                                  username=user, password=Password(self.secrets[user]))
        return KafkaConnection("127.0.0.1", self.ports()[index], client_id="acl-test",
                               timeout=10, connector=Connector(security))


@pytest.fixture(scope="module")
def cluster(zookeeper_server, tmp_path_factory: pytest.TempPathFactory  # type: ignore[no-untyped-def]
            ) -> Iterator[AclCluster]:
    directory: Path = tmp_path_factory.mktemp("acl-cluster")
    settings = coordinator_settings(zookeeper_server)
    secrets = {user: secret(f"{user}-scram") for user in USERS}
    for user in USERS:
        path = directory / f"{user}.password"
        path.write_text(secrets[user])
        made = partctl("users", "create", user, "--mechanism", "SCRAM-SHA-512",
                       "--password-file", str(path), url=settings[1])
        assert made.returncode == 0, made.stderr
    jaas = f'{SCRAM_MODULE} required username="broker" password="{secrets["broker"]}";'
    extra = ("listeners=SASL_PLAINTEXT://127.0.0.1:0\n"
             "inter.broker.listener.name=SASL_PLAINTEXT\n"
             "sasl.enabled.mechanisms=SCRAM-SHA-512\n"
             "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512\n"
             f"listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config={jaas}\n"
             "authorizer.class.name=kafka.security.authorizer.AclAuthorizer\n"
             "super.users=User:broker;User:admin\n"
             "auto.create.topics.enable=false\n"
             "num.partitions=1\n"
             "group.consumer.heartbeat.interval.ms=500\n")
    brokers: list[BrokerProcess] = []
    try:
        for broker_id in (1, 2, 3):
            brokers.append(start_broker(directory / f"b{broker_id}", zookeeper_server,
                                        broker_id=broker_id, settings=settings, extra=extra))
        yield AclCluster(brokers=brokers, secrets=secrets, url=settings[1])
    finally:
        for broker in brokers:
            broker.stop()


def _topic(cluster: AclCluster, prefix: str = "acl") -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = cluster.admin()
    futures = admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=20)
    futures[name].result(timeout=30)
    for index in range(3):  # every broker's metadata has it
        _wait_visible(cluster, "admin", name, index, seconds=20)
    return name


def _allow(cluster: AclCluster, principal: str, name: str, op: int, *,
           rtype: int = ResourceType.TOPIC, pattern: int = ResourcePatternType.LITERAL,
           permission: int = AclPermissionType.ALLOW, settle: bool = True) -> AclBinding:
    binding = AclBinding(rtype, name, pattern, principal, "*", op, permission)
    admin = cluster.admin()
    for f in admin.create_acls([binding], request_timeout=20).values():
        f.result(timeout=30)
    if settle:
        _everywhere(cluster, binding)
    return binding


def _everywhere(cluster: AclCluster, binding: AclBinding) -> None:
    """Wait until every broker's DescribeAcls (what it enforces) shows ``binding``."""
    asked = DescribeAclsRequest(
        resource_type_filter=i8(binding.restype.value), resource_name_filter=binding.name,
        pattern_type_filter=i8(binding.resource_pattern_type.value),
        principal_filter=binding.principal, host_filter=None, operation=i8(binding.operation.value),
        permission_type=i8(binding.permission_type.value))
    for index in range(3):
        conn = cluster.connection("admin", index)
        try:
            deadline = time.monotonic() + 5
            while not conn.call(asked).resources:
                assert time.monotonic() < deadline, f"broker {index + 1} never saw {binding}"
                time.sleep(0.02)
        finally:
            conn.close()


def _produce(cluster: AclCluster, user: str, topic: str, value: bytes = b"v") -> ck.KafkaError | None:
    producer = ck.Producer({**cluster.conf(user), "enable.idempotence": False,
                            "message.send.max.retries": 0, "acks": "all"})
    result: list[ck.KafkaError | None] = []
    producer.produce(topic, value, on_delivery=lambda err, _m: result.append(err))
    producer.flush(30)
    assert result, "no delivery report"
    return result[0]


def _end_offset(cluster: AclCluster, topic: str) -> int:
    consumer = ck.Consumer({**cluster.conf("admin"), "group.id": f"admin-{uuid.uuid4().hex}"})
    try:
        return consumer.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=20)[1]
    finally:
        consumer.close()


def _wait_visible(cluster: AclCluster, user: str, topic: str, index: int,
                  visible: bool = True, seconds: float = 2.0) -> float:
    """Seconds until Metadata for every topic from broker ``index`` shows ``topic`` (or not)."""
    start = time.monotonic()
    conn = cluster.connection(user, index)
    try:
        while True:
            names = {t.name for t in conn.call(MetadataRequest(
                topics=None, allow_auto_topic_creation=False,
                include_topic_authorized_operations=False)).topics
                     if t.partitions and all(p.leader_id >= 0 for p in t.partitions)}
            if (topic in names) is visible:
                return time.monotonic() - start
            assert time.monotonic() - start < seconds, f"broker {index + 1}: {topic} not seen"
            time.sleep(0.02)
    finally:
        conn.close()


def test_without_write_produce_is_refused_and_nothing_is_appended(cluster: AclCluster) -> None:
    topic = _topic(cluster)
    _allow(cluster, "User:alice", topic, AclOperation.DESCRIBE)
    error = _produce(cluster, "alice", topic)
    assert error is not None and error.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _end_offset(cluster, topic) == 0
    _allow(cluster, "User:alice", topic, AclOperation.WRITE)
    assert _produce(cluster, "alice", topic) is None
    assert _end_offset(cluster, topic) == 1


def test_metadata_leaves_out_topics_without_describe(cluster: AclCluster) -> None:
    shown, hidden = _topic(cluster), _topic(cluster)
    _allow(cluster, "User:bob", shown, AclOperation.READ)  # Read implies Describe
    md = AdminClient(cluster.conf("bob")).list_topics(timeout=10)
    assert shown in md.topics and hidden not in md.topics
    md = AdminClient(cluster.conf("bob")).list_topics(hidden, timeout=10)
    assert md.topics[hidden].error.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert hidden in cluster.admin().list_topics(timeout=10).topics  # super user sees all


def test_a_prefixed_acl_grants_what_it_covers_and_no_more(cluster: AclCluster) -> None:
    prefix = f"pre{uuid.uuid4().hex[:6]}-"
    inside = _topic(cluster, prefix + "in")
    outside = _topic(cluster, prefix[:-1] + "out")  # shares the letters, not the prefix
    _allow(cluster, "User:alice", prefix, AclOperation.WRITE, pattern=ResourcePatternType.PREFIXED)
    assert _produce(cluster, "alice", inside) is None
    error = _produce(cluster, "alice", outside)
    assert error is not None and error.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    admin = cluster.admin()
    found = admin.describe_acls(AclBindingFilter(
        ResourceType.TOPIC, prefix, ResourcePatternType.PREFIXED, None, None,
        AclOperation.ANY, AclPermissionType.ANY), request_timeout=20).result(timeout=30)
    assert [(b.name, b.principal, b.operation) for b in found] == [
        (prefix, "User:alice", AclOperation.WRITE)]


def test_deny_beats_allow(cluster: AclCluster) -> None:
    topic = _topic(cluster)
    _allow(cluster, "User:*", topic, AclOperation.ALL)
    assert _produce(cluster, "bob", topic) is None
    _allow(cluster, "User:bob", topic, AclOperation.WRITE, permission=AclPermissionType.DENY)
    error = _produce(cluster, "bob", topic)
    assert error is not None and error.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _produce(cluster, "alice", topic) is None
    assert _end_offset(cluster, topic) == 2


def test_an_acl_change_reaches_every_broker_within_moments(cluster: AclCluster) -> None:
    topic = _topic(cluster)
    for index in range(3):
        _wait_visible(cluster, "bob", topic, index, visible=False)
    binding = _allow(cluster, "User:bob", topic, AclOperation.DESCRIBE, settle=False)
    for index in range(3):
        _wait_visible(cluster, "bob", topic, index, seconds=2.0)
    admin = cluster.admin()
    deleted = admin.delete_acls([AclBindingFilter(
        binding.restype, binding.name, binding.resource_pattern_type, binding.principal,
        binding.host, binding.operation, binding.permission_type)], request_timeout=20)
    assert len(list(deleted.values())[0].result(timeout=30)) == 1
    for index in range(3):
        _wait_visible(cluster, "bob", topic, index, visible=False, seconds=2.0)


def _consume_one(cluster: AclCluster, user: str, topic: str, group: str) -> ck.Message | None:
    consumer = ck.Consumer({**cluster.conf(user), "group.id": group,
                            "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                return msg
        return None
    finally:
        consumer.close()


def test_group_authorization(cluster: AclCluster) -> None:
    topic = _topic(cluster)
    assert _produce(cluster, "admin", topic, b"hello") is None
    group = f"g-{uuid.uuid4().hex[:8]}"
    _allow(cluster, "User:alice", topic, AclOperation.READ)
    msg = _consume_one(cluster, "alice", topic, group)
    assert msg is not None and msg.error() is not None
    assert msg.error().code() == ck.KafkaError.GROUP_AUTHORIZATION_FAILED
    _allow(cluster, "User:alice", group, AclOperation.READ, rtype=ResourceType.GROUP)
    msg = _consume_one(cluster, "alice", topic, group)
    assert msg is not None and msg.error() is None and msg.value() == b"hello"


def test_only_super_users_or_alter_on_the_cluster_manage_acls(cluster: AclCluster) -> None:
    binding = AclBinding(ResourceType.TOPIC, "x", ResourcePatternType.LITERAL, "User:bob", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    admin = AdminClient(cluster.conf("bob"))
    futures = admin.create_acls([binding], request_timeout=20)
    with pytest.raises(ck.KafkaException) as info:
        list(futures.values())[0].result(timeout=30)
    assert info.value.args[0].code() == ck.KafkaError.CLUSTER_AUTHORIZATION_FAILED


def test_throttle_rates_need_alter_configs_on_the_cluster(cluster: AclCluster) -> None:
    """Kafka's rule for a broker resource: AlterConfigs on the cluster; without it the rate is
    CLUSTER_AUTHORIZATION_FAILED and nothing is stored; a super user sets and removes it."""
    def alter(user: str, op: AlterConfigOpType, value: str | None) -> None:
        resource = ConfigResource(ConfigResource.Type.BROKER, "2", incremental_configs=[
            ConfigEntry("leader.replication.throttled.rate", value, incremental_operation=op)])
        admin = AdminClient(cluster.conf(user))  # kept until the answer is in
        admin.incremental_alter_configs([resource])[resource].result(30)

    store = coordinator.connect(cluster.url, timeout=10)
    try:
        with pytest.raises(ck.KafkaException) as info:
            alter("bob", AlterConfigOpType.SET, "1000")
        assert info.value.args[0].code() == ck.KafkaError.CLUSTER_AUTHORIZATION_FAILED
        assert Admin(store).broker_config(2) == {}
        alter("admin", AlterConfigOpType.SET, "1000")
        assert Admin(store).broker_config(2) == {"leader.replication.throttled.rate": "1000"}
        alter("admin", AlterConfigOpType.DELETE, None)
        assert Admin(store).broker_config(2) == {}
    finally:
        store.close()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "partctl", "acls", *args], capture_output=True,
                          text=True, cwd=REPO, timeout=60, input="")


def test_partctl_acls_on_the_coordinator_and_through_a_broker(cluster: AclCluster,
                                                              tmp_path: Path) -> None:
    topic = _topic(cluster)
    made = _cli("add", "--allow-principal", "User:bob", "--operation", "Write", "--topic", topic,
                "--coordinator", cluster.url)
    assert made.returncode == 0, made.stderr
    deadline = time.monotonic() + 5
    while _produce(cluster, "bob", topic) is not None:  # the nodes written directly: followed
        assert time.monotonic() < deadline
    config = tmp_path / "admin.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                      f'sasl.jaas.config={SCRAM_MODULE} required username="admin" '
                      f'password="{cluster.secrets["admin"]}";\n')
    server = f"127.0.0.1:{cluster.ports()[1]}"
    listed = _cli("list", "--topic", topic, "--bootstrap-server", server,
                  "--command-config", str(config))
    assert listed.returncode == 0, listed.stderr
    assert f"name={topic}," in listed.stdout and "principal=User:bob" in listed.stdout
    assert cluster.secrets["admin"] not in listed.stdout + listed.stderr
    removed = _cli("remove", "--topic", topic, "--bootstrap-server", server,
                   "--command-config", str(config))
    assert removed.returncode == 0 and "operation=WRITE" in removed.stdout, removed.stderr
    config.write_text(config.read_text().replace('username="admin"', 'username="bob"').replace(
        cluster.secrets["admin"], cluster.secrets["bob"]))
    refused = _cli("add", "--allow-principal", "User:bob", "--cluster", "--bootstrap-server",
                   server, "--command-config", str(config))
    assert refused.returncode == 1
    assert refused.stderr.strip() == ("partctl: error: the broker refused: "
                                      "CLUSTER_AUTHORIZATION_FAILED")


def test_an_idempotent_producer_needs_write_on_a_topic_or_idempotent_write(
        cluster: AclCluster) -> None:
    topic = _topic(cluster)
    _allow(cluster, "User:carol", topic, AclOperation.WRITE)  # someone else's grant
    _allow(cluster, "User:bob", topic, AclOperation.DESCRIBE)
    fatal: list[ck.KafkaError] = []
    producer = ck.Producer({**cluster.conf("bob"), "enable.idempotence": True, "acks": "all",
                            "error_cb": fatal.append})
    errors: list[ck.KafkaError | None] = []
    producer.produce(topic, b"x", on_delivery=lambda err, _m: errors.append(err))
    deadline = time.monotonic() + 20
    while not fatal and time.monotonic() < deadline:
        try:
            producer.poll(0.1)
        except ck.KafkaException as exc:  # the client raises its fatal error
            fatal.append(exc.args[0])
    # bob may Describe the topic but Write nowhere: InitProducerId is refused, a fatal error
    assert [e.code() for e in fatal if e.fatal()] == [ck.KafkaError.CLUSTER_AUTHORIZATION_FAILED]
    assert _end_offset(cluster, topic) == 0
    _allow(cluster, "User:bob", topic, AclOperation.WRITE)
    producer = ck.Producer({**cluster.conf("bob"), "enable.idempotence": True, "acks": "all"})
    errors.clear()
    producer.produce(topic, b"y", on_delivery=lambda err, _m: errors.append(err))
    producer.flush(20)
    assert errors == [None]
    assert _end_offset(cluster, topic) == 1


def test_describe_log_dirs_needs_describe_on_the_cluster(cluster: AclCluster) -> None:
    """Kafka's rule: DescribeLogDirs without Describe on the cluster is
    CLUSTER_AUTHORIZATION_FAILED with no directory; a super user sees them."""
    from kio.schema.describe_log_dirs.v4.request import DescribeLogDirsRequest

    for user, error, dirs in (("bob", ErrorCode.cluster_authorization_failed, False),
                              ("admin", ErrorCode.none, True)):
        conn = cluster.connection(user, 0)
        try:
            answer = conn.call(DescribeLogDirsRequest(topics=None))
        finally:
            conn.close()
        assert answer.error_code == error and bool(answer.results) is dirs


def _call_each(cluster: AclCluster, user: str, request: object) -> list[object]:
    """``request``'s answer from each of the three brokers, as ``user``."""
    answers = []
    for index in range(3):
        conn = cluster.connection(user, index)
        try:
            answers.append(conn.call(request))
        finally:
            conn.close()
    return answers


def _bits(*operations: AclOperation) -> int:
    return sum(1 << op.value for op in operations)


def test_authorized_operations_are_reported_when_asked(cluster: AclCluster) -> None:
    """Metadata's topic bit field and DescribeGroups' group bit field: what the principal may
    do, Kafka's codes; every supported operation for a super user; Kafka's 'not asked' value
    when the request does not ask."""
    from kio.schema.describe_groups.v5.request import DescribeGroupsRequest

    topic, group = _topic(cluster), f"g-{uuid.uuid4().hex[:8]}"
    _allow(cluster, "User:bob", topic, AclOperation.READ)
    _allow(cluster, "User:bob", group, AclOperation.DELETE, rtype=ResourceType.GROUP)
    every_topic_operation = _bits(AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                                  AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE,
                                  AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS)
    for user, topic_bits, group_bits in (
            ("bob", _bits(AclOperation.READ, AclOperation.DESCRIBE),
             _bits(AclOperation.DELETE, AclOperation.DESCRIBE)),
            ("admin", every_topic_operation,
             _bits(AclOperation.READ, AclOperation.DELETE, AclOperation.DESCRIBE))):
        conn = cluster.connection(user, 0)
        try:
            for asked, expected in ((True, topic_bits), (False, -(1 << 31))):
                found = conn.call(MetadataRequest(
                    topics=(MetadataRequestTopic(topic_id=None, name=topic),),
                    allow_auto_topic_creation=False,
                    include_topic_authorized_operations=asked)).topics
                assert [(t.name, t.topic_authorized_operations) for t in found] == [
                    (topic, expected)], user
        finally:
            conn.close()
        described = [g for answer in _call_each(cluster, user, DescribeGroupsRequest(
            groups=(group,), include_authorized_operations=True)) for g in answer.groups
            if g.error_code is not ErrorCode.not_coordinator]  # the group's coordinator only
        assert [(g.error_code, g.authorized_operations) for g in described] == [
            (ErrorCode.none, group_bits)], user


def test_offset_delete_needs_read_on_each_topic(cluster: AclCluster) -> None:
    """Kafka's rule: OffsetDelete needs Delete on the group, and each partition of a topic the
    principal may not Read is TOPIC_AUTHORIZATION_FAILED while the others go on."""
    from kio.schema.offset_delete.v0.request import (
        OffsetDeleteRequest,
        OffsetDeleteRequestPartition,
        OffsetDeleteRequestTopic,
    )

    readable, hidden = _topic(cluster), _topic(cluster)
    group = f"g-{uuid.uuid4().hex[:8]}"
    _allow(cluster, "User:bob", readable, AclOperation.READ)
    for t in (readable, hidden):
        assert _produce(cluster, "admin", t) is None
    committer = ck.Consumer({**cluster.conf("admin"), "group.id": group,
                             "enable.auto.commit": False})
    try:  # an empty group with a committed offset on each topic
        committer.commit(offsets=[ck.TopicPartition(t, 0, 1) for t in (readable, hidden)],
                         asynchronous=False)
    finally:
        committer.close()
    request = OffsetDeleteRequest(group_id=group, topics=tuple(
        OffsetDeleteRequestTopic(name=t, partitions=(
            OffsetDeleteRequestPartition(partition_index=i32(0)),)) for t in (readable, hidden)))
    refused = _call_each(cluster, "bob", request)
    assert {a.error_code for a in refused} == {ErrorCode.group_authorization_failed}
    _allow(cluster, "User:bob", group, AclOperation.DELETE, rtype=ResourceType.GROUP)
    answers = [a for a in _call_each(cluster, "bob", request)
               if a.error_code is not ErrorCode.not_coordinator]
    assert len(answers) == 1, answers  # the group's coordinator: no offsets, no group
    found = {t.name: [p.error_code for p in t.partitions] for t in answers[0].topics}
    assert found == {hidden: [ErrorCode.topic_authorization_failed],
                     readable: [ErrorCode.none]}
    checker = ck.Consumer({**cluster.conf("admin"), "group.id": group})
    try:  # the refused partition's offset is still there, the other one is gone
        left = checker.committed([ck.TopicPartition(t, 0) for t in (readable, hidden)],
                                 timeout=20)
    finally:
        checker.close()
    assert [(tp.topic, tp.offset) for tp in left] == [(readable, ck.OFFSET_INVALID),
                                                      (hidden, 1)]


def test_the_consumer_group_protocol_checks_the_group_and_its_topics(cluster: AclCluster
                                                                     ) -> None:
    """KIP-848's APIs, Kafka's checks: a heartbeat needs Read on the group and Describe on every
    subscribed topic; ConsumerGroupDescribe needs Describe on the group."""
    from kio.schema.consumer_group_describe.v0.request import ConsumerGroupDescribeRequest
    from kio.schema.consumer_group_heartbeat.v0.request import ConsumerGroupHeartbeatRequest

    topic, group = _topic(cluster), f"g-{uuid.uuid4().hex[:8]}"

    def join(topics: tuple[str, ...]) -> ConsumerGroupHeartbeatRequest:
        return ConsumerGroupHeartbeatRequest(
            group_id=group, member_id="", member_epoch=i32(0), instance_id=None, rack_id=None,
            rebalance_timeout=i32Timedelta.parse(timedelta(seconds=30)),
            subscribed_topic_names=topics, server_assignor=None, topic_partitions=())

    describe = ConsumerGroupDescribeRequest(group_ids=(group,),
                                            include_authorized_operations=False)
    for answer in _call_each(cluster, "bob", join((topic,))):
        assert answer.error_code == ErrorCode.group_authorization_failed
    for answer in _call_each(cluster, "bob", describe):
        assert [g.error_code for g in answer.groups] == [ErrorCode.group_authorization_failed]
    _allow(cluster, "User:bob", group, AclOperation.READ, rtype=ResourceType.GROUP)
    for answer in _call_each(cluster, "bob", join((topic,))):
        assert answer.error_code == ErrorCode.topic_authorization_failed
        assert topic in (answer.error_message or "")
    _allow(cluster, "User:bob", topic, AclOperation.DESCRIBE)
    errors = [a.error_code for a in _call_each(cluster, "bob", join((topic,)))]
    assert ErrorCode.none in errors and ErrorCode.topic_authorization_failed not in errors
    assert ErrorCode.group_authorization_failed not in {
        g.error_code for a in _call_each(cluster, "bob", describe) for g in a.groups}


def test_a_regex_subscription_is_assigned_only_topics_its_principal_may_describe(
        cluster: AclCluster) -> None:
    """confluent-kafka with ``group.protocol=consumer`` subscribes ``^<prefix>-.*``: carol may
    Read (and so Describe) ``<prefix>-1`` and the group, nothing of ``<prefix>-2``. The group
    assigns her ``<prefix>-1`` alone, she reads its records only, and ConsumerGroupDescribe
    shows no partition of ``<prefix>-2``; once granted Describe and Read on it, her next
    heartbeats bring it in."""
    from kio.schema.consumer_group_describe.v0.request import ConsumerGroupDescribeRequest

    prefix = f"rx{uuid.uuid4().hex[:6]}"
    mine, other = _topic(cluster, f"{prefix}-1"), _topic(cluster, f"{prefix}-2")
    for topic in (mine, other):
        assert _produce(cluster, "admin", topic, topic.encode()) is None
    group = f"g-{prefix}"
    _allow(cluster, "User:carol", mine, AclOperation.READ)
    _allow(cluster, "User:carol", group, AclOperation.READ, rtype=ResourceType.GROUP)
    consumer = ck.Consumer({**cluster.conf("carol"), "group.id": group,
                            "group.protocol": "consumer", "auto.offset.reset": "earliest",
                            "enable.auto.commit": False})

    def read_until(wanted: set[str], seconds: float) -> set[str]:
        seen: set[str] = set()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not wanted <= seen:
            msg = consumer.poll(0.2)
            if msg is not None:
                assert msg.error() is None, msg.error()
                seen.add(msg.topic())
        return seen

    def described() -> set[str]:
        request = ConsumerGroupDescribeRequest(group_ids=(group,),
                                               include_authorized_operations=False)
        found = [g for a in _call_each(cluster, "admin", request) for g in a.groups
                 if g.error_code == ErrorCode.none]
        assert len(found) == 1, found
        return {t.topic_name for m in found[0].members
                for a in (m.assignment, m.target_assignment) for t in a.topic_partitions}

    try:
        consumer.subscribe([f"^{prefix}-.*"])
        assert read_until({mine}, 20) == {mine}
        assert read_until({other}, 2) == set()  # a few more heartbeats: still nothing of it
        assert {tp.topic for tp in consumer.assignment()} == {mine}
        assert described() == {mine}
        _allow(cluster, "User:carol", other, AclOperation.DESCRIBE)
        _allow(cluster, "User:carol", other, AclOperation.READ)
        assert read_until({other}, 15) == {other}
        assert {tp.topic for tp in consumer.assignment()} == {mine, other}
        assert described() == {mine, other}
    finally:
        consumer.close()


def test_offset_commit_without_read_on_the_group_refuses_every_partition(cluster: AclCluster
                                                                         ) -> None:
    """Kafka's rule (handleOffsetCommitRequest): Read on the group is checked first, and
    without it every partition of the answer is GROUP_AUTHORIZATION_FAILED, a topic the
    principal may read, one it may not and one that does not exist alike; nothing is
    committed."""
    from kio.schema.offset_commit.v8.request import (
        OffsetCommitRequest,
        OffsetCommitRequestPartition,
        OffsetCommitRequestTopic,
    )
    from kio.static.primitive import i64

    readable, hidden = _topic(cluster), _topic(cluster)
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    group = f"g-{uuid.uuid4().hex[:8]}"
    _allow(cluster, "User:carol", readable, AclOperation.READ)

    def commit(*topics: str) -> OffsetCommitRequest:
        return OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=i32(-1), member_id="",
            group_instance_id=None, topics=tuple(OffsetCommitRequestTopic(name=t, partitions=(
                OffsetCommitRequestPartition(partition_index=i32(0), committed_offset=i64(1),
                                             committed_metadata=""),)) for t in topics))

    for answer in _call_each(cluster, "carol", commit(readable, hidden, missing)):
        found = {t.name: [p.error_code for p in t.partitions] for t in answer.topics}
        assert found == {t: [ErrorCode.group_authorization_failed]
                         for t in (readable, hidden, missing)}, found
    checker = ck.Consumer({**cluster.conf("admin"), "group.id": group})
    try:
        left = checker.committed([ck.TopicPartition(readable, 0)], timeout=20)
    finally:
        checker.close()
    assert left[0].offset == ck.OFFSET_INVALID
    _allow(cluster, "User:carol", group, AclOperation.READ, rtype=ResourceType.GROUP)
    answers = [a for a in _call_each(cluster, "carol", commit(readable, hidden))
               if a.topics[0].partitions[0].error_code is not ErrorCode.not_coordinator]
    assert len(answers) == 1, answers
    found = {t.name: [p.error_code for p in t.partitions] for t in answers[0].topics}
    assert found == {readable: [ErrorCode.none], hidden: [ErrorCode.topic_authorization_failed]}


def test_write_on_every_topic_does_not_reach_consumer_offsets(cluster: AclCluster) -> None:
    """carol may Write (and Describe) topic ``*``, and has no group ACL: her Produce of a forged
    offset commit to ``__consumer_offsets`` is INVALID_TOPIC_EXCEPTION, and the group's
    committed offset stays the one its coordinator wrote."""
    topic = _topic(cluster)
    group = f"forged-{uuid.uuid4().hex[:8]}"
    admin_consumer = ck.Consumer({**cluster.conf("admin"), "group.id": group,
                                  "enable.auto.commit": False})
    try:
        admin_consumer.commit(offsets=[ck.TopicPartition(topic, 0, 3)], asynchronous=False)
        partitions = len(cluster.admin().list_topics(OFFSETS, timeout=20).topics[OFFSETS]
                         .partitions)
        bindings = [_allow(cluster, "User:carol", "*", op)
                    for op in (AclOperation.WRITE, AclOperation.DESCRIBE)]
        try:
            producer = ck.Producer({**cluster.conf("carol"), "enable.idempotence": False,
                                    "message.send.max.retries": 0, "acks": "all"})
            result: list[ck.KafkaError | None] = []
            producer.produce(OFFSETS, encode_value(OffsetCommitValue(
                offset=999, commit_timestamp=int(time.time() * 1000))),
                encode_key(OffsetCommitKey(group, topic, 0)),
                partition=partition_for(group, partitions),
                on_delivery=lambda err, _m: result.append(err))
            producer.flush(30)
            assert result and result[0] is not None, "the forged commit was taken"
            assert result[0].code() == ck.KafkaError.TOPIC_EXCEPTION
        finally:
            cluster.admin().delete_acls([AclBindingFilter(
                b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
                b.permission_type) for b in bindings], request_timeout=20)
        (committed,) = admin_consumer.committed([ck.TopicPartition(topic, 0)], timeout=20)
        assert committed.offset == 3
    finally:
        admin_consumer.close()


def test_delete_records_needs_delete_on_the_topic(cluster: AclCluster) -> None:
    topic = _topic(cluster)
    assert _produce(cluster, "admin", topic) is None
    _allow(cluster, "User:carol", topic, AclOperation.DESCRIBE)
    wanted = [ck.TopicPartition(topic, 0, 1)]
    carol = AdminClient(cluster.conf("carol"))
    with pytest.raises(ck.KafkaException) as refused:
        carol.delete_records(wanted, request_timeout=20)[wanted[0]].result(timeout=30)
    assert refused.value.args[0].code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    _allow(cluster, "User:carol", topic, AclOperation.DELETE)
    deleted = carol.delete_records(wanted, request_timeout=20)[wanted[0]].result(timeout=30)
    assert deleted.low_watermark == 1
