"""Kafka's own admin tools, unchanged, against three partctl broker processes.

Two clusters per module, one on ZooKeeper and one on etcd, each of three ``partctl broker
start`` processes with a PLAINTEXT listener (the tools', and the brokers' own) and a
SASL_PLAINTEXT one (SCRAM-SHA-256 and -512), the authorizer on and ``User:ANONYMOUS`` (the
PLAINTEXT principal) a super user, so that ``kafka-acls`` has something to act on and the
SCRAM user a tool creates can log in. Kafka 3.9.1's and 4.4.0's tools each run against the
ZooKeeper cluster, 4.4.0's against the etcd one (3.9.1's on etcd in the long tier):
``kafka-topics``, ``kafka-configs`` (topics, brokers, SCRAM users), ``kafka-acls``,
``kafka-broker-api-versions``, ``kafka-log-dirs``, ``kafka-get-offsets`` and
``kafka-delete-records``; the KRaft-only tools (``kafka-metadata-quorum``, ``kafka-features``)
in the long tier. A tool costs a JVM start (1.5 to 3.5 s, 10 s on a loaded machine), so the
tools of one version run one after another in one JVM for the worker
(:func:`.tool_shell.run_shared`: each is its main class with the script's arguments, its output
and exit status its own), or each in a process of its own with
``PARTCTL_KAFKA_TOOL_PROCESSES=1``; whatever a tool needs first (a
topic, records) is made with librdkafka.
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

import coordinator
from broker.cluster import BrokerStartError, LaunchedBroker, coordinator_property, launch_broker
from tests.broker.processes import TEST_SETTINGS
from tests.broker.security_fixtures import listener_ports
from tests.servers import Server
from tests.waiting import wait_until

from .conftest import require_kafka
from .harness import KAFKA_3, KAFKA_4, run_tool
from .tool_shell import run_shared

pytestmark = pytest.mark.servers

SECURE = ("listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0\n"
          "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT\n"
          "inter.broker.listener.name=PLAINTEXT\n"
          "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512\n"
          "authorizer.class.name=kafka.security.authorizer.AclAuthorizer\n"
          "super.users=User:ANONYMOUS\n"
          "auto.create.topics.enable=false\n")
PARTITION = re.compile(r"Partition: (\d+)\s+Leader: (\S+)\s+Replicas: (\S+)\s+Isr: (\S*)")


class Three:
    """Three partctl brokers of one cluster (not a value: it has a lifetime)."""

    def __init__(self, brokers: list[LaunchedBroker], url: str) -> None:
        self.brokers = brokers
        self.url = url
        self.bootstrap = ",".join(b.bootstrap for b in brokers)
        self.sasl = ",".join(f"127.0.0.1:{listener_ports(b)['SASL_PLAINTEXT']}"  # type: ignore[arg-type]
                             for b in brokers)

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap})

    def topic(self, partitions: int = 3, replicas: int = 3) -> str:
        """A new topic (through librdkafka) whose partitions all have leaders."""
        name = f"adm-{uuid.uuid4().hex[:8]}"
        admin = self.admin()  # alive until its answer is in
        admin.create_topics([NewTopic(name, partitions, replicas)])[name].result(30)

        def led() -> bool:
            meta = self.admin().list_topics(name, timeout=10).topics.get(name)
            return (meta is not None and meta.error is None and len(meta.partitions) ==
                    partitions and all(p.leader >= 0 for p in meta.partitions.values()))

        wait_until(led, timeout=30, interval=0.1, message=f"{name}'s leaders")
        return name


def _start_three(server: Server, directory: Path) -> Three:
    url = server.url(f"/adm-{uuid.uuid4().hex[:10]}")
    coordinator_property(url)
    brokers = [launch_broker(directory / f"broker-{i}", i, url, extra=TEST_SETTINGS + SECURE)
               for i in (1, 2, 3)]
    try:
        for broker in brokers:
            broker.wait_serving(timeout=120)
    except BrokerStartError as exc:
        for broker in brokers:
            broker.stop(timeout=10)
        raise AssertionError(f"{exc}:\n{exc.log_path.read_text(errors='replace')[-3000:]}"
                             ) from None
    return Three(brokers, url)


def _three(server: Server, directory: Path) -> Iterator[Three]:
    three = _start_three(server, directory)
    yield three
    statuses = [b.stop(timeout=60) for b in three.brokers]
    assert statuses == [0, 0, 0], statuses


@pytest.fixture(scope="module")
def on_zookeeper(zookeeper_server: Server, tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[Three]:
    yield from _three(zookeeper_server, tmp_path_factory.mktemp("admin-zk"))


@pytest.fixture(scope="module")
def on_etcd(etcd_server: Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Three]:
    yield from _three(etcd_server, tmp_path_factory.mktemp("admin-etcd"))


COMBOS = [
    pytest.param(("on_zookeeper", KAFKA_3), id=f"zookeeper-{KAFKA_3}"),
    pytest.param(("on_zookeeper", KAFKA_4), id=f"zookeeper-{KAFKA_4}"),
    pytest.param(("on_etcd", KAFKA_4), id=f"etcd-{KAFKA_4}"),
    pytest.param(("on_etcd", KAFKA_3), id=f"etcd-{KAFKA_3}", marks=pytest.mark.long),
]


Tool = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(params=COMBOS)
def setup(request: pytest.FixtureRequest) -> tuple[Three, Tool]:
    """A cluster, and Kafka's tools of one version: ``run(tool, *args)``."""
    store, version = request.param
    require_kafka(version)
    three = request.getfixturevalue(store)
    return three, functools.partial(run_shared, version)


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, (f"exit {result.returncode}\nargs: {result.args[-8:]}\n"
                                    f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}")
    return result.stdout


def _failed(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0, (result.stdout, result.stderr)
    return result.stdout + result.stderr


def _partitions(out: str, topic: str) -> dict[int, tuple[str, list[int], list[int]]]:
    lines = [line for line in out.splitlines() if f"Topic: {topic}\t" in line + "\t"
             or f"Topic: {topic}\tPartition" in line]
    return {int(p): (leader, [int(r) for r in replicas.split(",")],
                     [int(i) for i in isr.split(",") if i])
            for p, leader, replicas, isr in PARTITION.findall("\n".join(lines))}


def _settled(parts: dict[int, tuple[str, list[int], list[int]]]) -> bool:
    return all(leader != "none" and int(leader) in replicas and sorted(isr) == sorted(replicas)
               for leader, replicas, isr in parts.values())


def test_kafka_topics(setup: tuple[Three, Tool]) -> None:
    three, run = setup
    tool = ("topics", "--bootstrap-server", three.bootstrap)
    made, placed = f"adm-{uuid.uuid4().hex[:8]}", f"adm-{uuid.uuid4().hex[:8]}"
    out = _ok(run(*tool, "--create", "--topic", made, "--partitions", "3",
                       "--replication-factor", "3", "--config", "retention.ms=3600000",
                       "--config", "min.insync.replicas=2"))
    assert f"Created topic {made}." in out
    out = _ok(run(*tool, "--create", "--topic", placed,
                       "--replica-assignment", "1:2,2:3,3:1"))
    assert f"Created topic {placed}." in out
    out = _ok(run(*tool, "--alter", "--topic", made, "--partitions", "5"))

    seen: list[str] = []

    def described() -> bool:
        result = run(*tool, "--describe", "--topic", f"{made},{placed}")
        if result.returncode != 0 and "does not exist" in result.stdout + result.stderr:
            return False  # the broker the tool asked does not know the new topic yet
        seen[:] = [_ok(result)]
        a, b = _partitions(seen[0], made), _partitions(seen[0], placed)
        return len(a) == 5 and len(b) == 3 and _settled(a) and _settled(b)

    wait_until(described, timeout=60, interval=0.5, message=f"{made} and {placed} described")
    out = seen[0]
    assert re.search(rf"Topic: {made}\s+TopicId: \S+\s+PartitionCount: 5\s+ReplicationFactor: 3"
                     r"\s+Configs: .*min\.insync\.replicas=2", out), out
    assert "retention.ms=3600000" in out, out
    assert all(sorted(r) == [1, 2, 3] for _, r, _ in _partitions(out, made).values()), out
    assert {p: r for p, (_, r, _) in _partitions(out, placed).items()} == {
        0: [1, 2], 1: [2, 3], 2: [3, 1]}, out
    assert {p: int(leader) for p, (leader, _, _) in _partitions(out, placed).items()} == {
        0: 1, 1: 2, 2: 3}, out  # the preferred (first) replica leads a new partition

    _ok(run(*tool, "--delete", "--topic", placed))
    wait_until(lambda: placed not in three.admin().list_topics(timeout=10).topics, timeout=30,
               interval=0.2, message=f"{placed} deleted")
    unknown = _failed(run(*tool, "--describe", "--topic", placed))
    # Kafka's answer, from its tool (3.9.1 prints the name as Java's Optional[...])
    assert re.search(rf"Topic '(Optional\[)?{placed}\]?' does not exist as expected", unknown), \
        unknown


def test_kafka_configs_of_topics_and_brokers(setup: tuple[Three, Tool]) -> None:
    three, run = setup
    tool = ("configs", "--bootstrap-server", three.bootstrap)
    topic = three.topic(1, 3)
    entity = ("--entity-type", "topics", "--entity-name", topic)
    _ok(run(*tool, *entity, "--alter", "--add-config",
                 "retention.ms=200000,cleanup.policy=compact"))
    _ok(run(*tool, *entity, "--alter", "--add-config", "retention.ms=300000",
                 "--delete-config", "cleanup.policy"))
    out = _ok(run(*tool, *entity, "--describe"))
    assert f"Dynamic configs for topic {topic} are:" in out, out
    # Kafka lists a topic key's broker synonyms from its primary one (log.retention.ms) on:
    # with that unset, none (what a Kafka 3.9.1 cluster prints: test_partctl_on_kafka.py)
    assert re.search(r"retention\.ms=300000 sensitive=false synonyms=\{DYNAMIC_TOPIC_CONFIG:"
                     r"retention\.ms=300000\}", out), out
    assert "cleanup.policy" not in out, out

    broker = ("--entity-type", "brokers", "--entity-name", "1")
    _ok(run(*tool, *broker, "--alter", "--add-config",
                 "leader.replication.throttled.rate=1048576"))
    out = _ok(run(*tool, *broker, "--describe", "--all"))
    assert "All configs for broker 1 are:" in out, out
    assert "broker.id=1 sensitive=false synonyms={STATIC_BROKER_CONFIG:broker.id=1}" in out, out
    assert ("leader.replication.throttled.rate=1048576 sensitive=false synonyms="
            "{DYNAMIC_BROKER_CONFIG:leader.replication.throttled.rate=1048576}") in out, out
    refused = _failed(run(*tool, *broker, "--alter", "--add-config",
                               "log.cleaner.threads=2"))
    # Kafka's ZooKeeper-mode answer for a key that is not dynamic (INVALID_REQUEST)
    assert ("InvalidRequestException: Cannot update these configs dynamically: "
            "log.cleaner.threads") in refused, refused
    _ok(run(*tool, *broker, "--alter", "--delete-config",
                 "leader.replication.throttled.rate"))


def _sasl_conf(three: Three, user: str, password: str, mechanism: str) -> dict[str, object]:
    return {"bootstrap.servers": three.sasl, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}


def _logs_in(three: Three, user: str, password: str, mechanism: str) -> bool:
    try:
        AdminClient(_sasl_conf(three, user, password, mechanism)).list_topics(timeout=5)
    except ck.KafkaException:
        return False
    return True


def test_kafka_configs_of_scram_users(setup: tuple[Three, Tool]) -> None:
    three, run = setup
    tool = ("configs", "--bootstrap-server", three.bootstrap)
    user, password = f"u{uuid.uuid4().hex[:8]}", f"pw-{uuid.uuid4().hex}"
    entity = ("--entity-type", "users", "--entity-name", user)
    out = _ok(run(*tool, *entity, "--alter", "--add-config",
                       f"SCRAM-SHA-256=[iterations=8192,password={password}],"
                       f"SCRAM-SHA-512=[password={password}]"))
    assert f"Completed updating config for user {user}." in out, out
    # a quota written where Kafka's ZooKeeper-era tools put it, beside the credentials
    client = coordinator.connect(three.url, timeout=10)
    try:
        path = f"/config/clients/{user}-app"
        client.create(path, json.dumps({"version": 1, "config": {
            "producer_byte_rate": "1024"}}).encode())
    finally:
        client.close()
    out = _ok(run(*tool, *entity, "--describe"))
    assert (f"SCRAM credential configs for user-principal '{user}' are "
            "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096") in out, out
    assert password not in out
    wait_until(lambda: _logs_in(three, user, password, "SCRAM-SHA-256"), timeout=30,
               interval=0.5, message=f"{user} logs in with SCRAM-SHA-256")
    assert not _logs_in(three, user, "wrong-" + password, "SCRAM-SHA-256")
    # the tool itself logs in as the user, who may not describe the cluster's configs
    login = three.brokers[0].directory / f"{user}.properties"
    login.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule "
                     f'required username="{user}" password="{password}";\n')
    refused = _failed(run("configs", "--bootstrap-server", three.sasl, "--command-config",
                          str(login), "--entity-type", "users", "--describe"))
    assert "ClusterAuthorizationException" in refused, refused
    assert password not in refused

    out = _ok(run(*tool, "--entity-type", "clients", "--entity-name",
                       f"{user}-app", "--describe"))
    assert f"Quota configs for client-id '{user}-app' are producer_byte_rate=1024.0" in out, out

    _ok(run(*tool, *entity, "--alter", "--delete-config", "SCRAM-SHA-512"))
    out = _ok(run(*tool, *entity, "--describe"))
    assert (f"SCRAM credential configs for user-principal '{user}' are "
            "SCRAM-SHA-256=iterations=8192") in out, out
    assert "SCRAM-SHA-512" not in out, out
    wait_until(lambda: not _logs_in(three, user, password, "SCRAM-SHA-512"), timeout=30,
               interval=0.5, message=f"{user}'s SCRAM-SHA-512 credential gone")


def _visible(three: Three, user: str, password: str, topic: str) -> bool:
    admin = AdminClient(_sasl_conf(three, user, password, "SCRAM-SHA-512"))
    return topic in admin.list_topics(timeout=10).topics


def test_kafka_acls(setup: tuple[Three, Tool]) -> None:
    three, run = setup
    user, password = f"a{uuid.uuid4().hex[:8]}", f"pw-{uuid.uuid4().hex}"
    admin = three.admin()
    admin.alter_user_scram_credentials([ck.admin.UserScramCredentialUpsertion(
        user, ck.admin.ScramCredentialInfo(ck.admin.ScramMechanism.SCRAM_SHA_512, 4096),
        password.encode())])[user].result(30)
    topic = three.topic(1, 3)
    wait_until(lambda: _logs_in(three, user, password, "SCRAM-SHA-512"), timeout=30,
               interval=0.5, message=f"{user} logs in")
    assert not _visible(three, user, password, topic)  # the authorizer is on
    tool = ("acls", "--bootstrap-server", three.bootstrap)
    grant = ("--allow-principal", f"User:{user}", "--operation", "Read", "--topic", topic)
    out = _ok(run(*tool, "--add", *grant))
    assert (f"Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name={topic}, "
            "patternType=LITERAL)`") in out, out
    listed = f"(principal=User:{user}, host=*, operation=READ, permissionType=ALLOW)"
    # an ACL reaches the other brokers through the coordinator's change notifications, as
    # in Kafka's ZooKeeper mode: the broker the tool asks may not list it at once
    wait_until(lambda: listed in _ok(run(*tool, "--list", "--topic", topic)), timeout=30,
               interval=0.2, message=f"kafka-acls --list shows {listed}")
    wait_until(lambda: _visible(three, user, password, topic), timeout=30, interval=0.2,
               message=f"{user} sees {topic} (Read implies Describe)")
    _ok(run(*tool, "--remove", "--force", *grant))
    wait_until(lambda: listed not in _ok(run(*tool, "--list", "--topic", topic)), timeout=30,
               interval=0.2, message=f"kafka-acls --list without {listed}")
    wait_until(lambda: not _visible(three, user, password, topic), timeout=30, interval=0.2,
               message=f"{topic} hidden from {user} again")


def test_api_versions_log_dirs_offsets_and_delete_records(setup: tuple[Three, Tool]) -> None:
    three, run = setup
    out = _ok(run("broker-api-versions", "--bootstrap-server", three.bootstrap))
    for broker_id in (1, 2, 3):
        assert re.search(rf"^127\.0\.0\.1:\d+ \(id: {broker_id} rack: null", out, re.M), out
    for api in ("Produce(0)", "Fetch(1)", "Metadata(3)", "DeleteRecords(21)",
                "DescribeLogDirs(35)", "DescribeClientQuotas(48)",
                "DescribeUserScramCredentials(50)", "AlterUserScramCredentials(51)"):
        assert re.search(rf"{re.escape(api)}: \d+( to \d+)? \[usable: \d+\]", out), (api, out)
    assert "UNKNOWN" not in out, out

    topic = three.topic(3, 2)
    producer = ck.Producer({"bootstrap.servers": three.bootstrap, "acks": "all"})
    for i in range(30):
        producer.produce(topic, b"v%d" % i, partition=i % 3)
    assert producer.flush(30) == 0

    out = _ok(run("log-dirs", "--describe", "--bootstrap-server", three.bootstrap,
                       "--topic-list", topic))
    answer = json.loads(out.strip().splitlines()[-1])
    replicas = {(b["broker"], p["partition"]): p["size"] for b in answer["brokers"]
                for d in b["logDirs"] for p in d["partitions"]}
    assert len(replicas) == 6 and {p for _, p in replicas} == {f"{topic}-{i}" for i in range(3)}
    assert all(size > 0 for size in replicas.values()), answer

    offsets = ("get-offsets", "--bootstrap-server", three.bootstrap, "--topic", topic)
    assert _ok(run(*offsets, "--time", "-1")).split() == [
        f"{topic}:{p}:10" for p in range(3)]
    plan = three.brokers[0].directory / f"delete-{topic}.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "offset": 4}]}))
    out = _ok(run("delete-records", "--bootstrap-server", three.bootstrap,
                       "--offset-json-file", str(plan)))
    assert re.search(rf"partition: {topic}-0\s+low_watermark: 4", out), out
    assert _ok(run(*offsets, "--time", "-2")).split() == [
        f"{topic}:0:4", f"{topic}:1:0", f"{topic}:2:0"]


@pytest.mark.long
@pytest.mark.parametrize("version", [KAFKA_3, KAFKA_4])
def test_kraft_only_tools_get_kafkas_unsupported_answer(version: str,
                                                        on_zookeeper: Three) -> None:
    """A partctl cluster is a ZooKeeper-mode cluster: no metadata quorum (DescribeQuorum, key
    55), no finalized features (ApiVersions v3+ carries none; UpdateFeatures, key 57, is not
    served), as a Kafka 3.9 broker in ZooKeeper mode has none."""
    require_kafka(version)
    quorum = _failed(run_tool(version, "metadata-quorum", "--bootstrap-server",
                              on_zookeeper.bootstrap, "describe", "--status"))
    assert ("UnsupportedVersionException: The node does not support DESCRIBE_QUORUM"
            in quorum), quorum
    features = run_tool(version, "features", "--bootstrap-server", on_zookeeper.bootstrap,
                        "describe")
    assert features.returncode == 0 and features.stdout.strip() == "", (
        features.stdout, features.stderr)
    upgrade = _failed(run_tool(version, "features", "--bootstrap-server",
                               on_zookeeper.bootstrap, "upgrade", "--feature",
                               "transaction.version=1"))
    assert "UPDATE_FEATURES" in upgrade or "UnsupportedVersion" in upgrade, upgrade
