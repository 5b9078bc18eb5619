"""Kafka's own data and operations tools, unchanged, against three partctl broker processes.

Kafka 3.9.1's and 4.x's console producer and consumer (keys parsed from stdin, a consumer in a
group), ``kafka-consumer-groups`` (list, describe with lag, reset offsets, delete, an unknown
group), ``kafka-reassign-partitions`` (generate, execute with a throttle, verify, list,
cancel), ``kafka-leader-election`` (preferred after leadership moved away; unclean on a
partition whose ISR holds only a stopped broker) and the producer and consumer performance
tests, each checked against what the cluster then holds (Metadata, DescribeConfigs, committed
offsets: read with librdkafka, not with the tool under test).

The clusters are module-scoped: three brokers on the session's ZooKeeper (CI), and on the
session's etcd (the ``long`` tier). A tool's JVM takes seconds to start on a busy machine, so
each invocation checks as much as it can (several groups in one describe, several partitions
in one election), and topics are made and filled with librdkafka.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from broker.cluster import LocalCluster, start_broker
from tests.broker.processes import TEST_SETTINGS
from tests.servers import Server
from tests.waiting import wait_until

from .conftest import partctl_cluster, require_kafka
from .harness import KAFKA_3, KAFKA_4, run_tool
from .tool_shell import ToolShell

pytestmark = pytest.mark.servers

VERSIONS = [KAFKA_3, KAFKA_4]
PERF_RECORDS = 20000
RECORD_SIZE = 100
EXTRA = {
    **dict(line.split("=", 1) for line in TEST_SETTINGS.splitlines() if "=" in line),
    # a new group's first rebalance at once (Kafka's harness does the same for its brokers)
    "group.initial.rebalance.delay.ms": "0",
    # leadership moves only when a test moves it
    "auto.leader.rebalance.enable": "false",
}
SHELL_TOOLS = frozenset({"consumer-groups", "reassign-partitions", "leader-election"})
"""The admin tools, run in one tool JVM per version (tests/kafka/tool_shell.py, as the admin
tools' tests do): a JVM start each would cost seconds. The console and performance tools run in
processes of their own (the console producer reads its stdin); so do all with
``PARTCTL_KAFKA_TOOL_PROCESSES=1``."""
_SHELLS: dict[str, ToolShell] = {}
THROTTLE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
REPLICA_KEYS = ("leader.replication.throttled.replicas",
                "follower.replication.throttled.replicas")


# --- the cluster --------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=["zookeeper", pytest.param("etcd", marks=pytest.mark.long)])
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[LocalCluster]:
    """partctl brokers 1-3, three processes on the session's ZooKeeper (or etcd), in a fresh
    chroot (key prefix)."""
    server: Server = request.getfixturevalue(f"{request.param}_server")
    url = server.url(f"/tools-{uuid.uuid4().hex[:10]}")
    yield from partctl_cluster(url, tmp_path_factory.mktemp(f"data-tools-{request.param}"),
                               EXTRA)


@pytest.fixture(scope="module", autouse=True)
def _tool_shells() -> Iterator[None]:
    """The module's tool JVMs (started when first wanted), closed with it."""
    yield
    for shell in _SHELLS.values():
        shell.close()
    _SHELLS.clear()


def _tool(version: str, tool: str, *args: str, input: str | None = None
          ) -> subprocess.CompletedProcess[str]:
    """One of Kafka's tools of ``version``, answered as :func:`harness.run_tool` answers."""
    if (tool not in SHELL_TOOLS or input is not None
            or os.environ.get("PARTCTL_KAFKA_TOOL_PROCESSES") == "1"):
        return run_tool(version, tool, *args, input=input)
    if version not in _SHELLS:
        _SHELLS[version] = ToolShell(version)
    return _SHELLS[version].run(tool, *args)


def _stop(cluster: LocalCluster, broker_id: int) -> None:
    """SIGTERM (a controlled shutdown) to one broker, waiting for it to exit."""
    broker = cluster.brokers[broker_id - 1]
    assert broker.stop() == 0, broker.log()[-3000:]


def _start(cluster: LocalCluster, broker_id: int) -> None:
    """Start a stopped broker again, on its directory and port."""
    old = cluster.brokers[broker_id - 1]
    assert not old.running()
    cluster.brokers[broker_id - 1] = start_broker(old.directory, broker_id,
                                                  cluster.coordinator_url, port=old.port or 0,
                                                  extra=EXTRA)


# --- helpers ------------------------------------------------------------------------------------


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, (
        f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}")
    return result.stdout


def _admin(cluster: LocalCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": _live_bootstrap(cluster)})


def _live_bootstrap(cluster: LocalCluster) -> str:
    return ",".join(b.bootstrap for b in cluster.brokers if b.running())


def _create(cluster: LocalCluster, topic: str, *, partitions: int = 1,
            assignment: list[list[int]] | None = None) -> None:
    """Create ``topic`` (three replicas a partition, or ``assignment``) and wait until each
    partition has a leader and a full ISR."""
    new = (NewTopic(topic, num_partitions=len(assignment), replica_assignment=assignment)
           if assignment is not None
           else NewTopic(topic, num_partitions=partitions, replication_factor=3))
    admin = _admin(cluster)  # alive until the future is done
    admin.create_topics([new], operation_timeout=30)[topic].result(60)
    count = len(assignment) if assignment is not None else partitions

    def ready() -> bool:
        parts = _partitions(cluster, topic)
        return len(parts) == count and all(
            leader >= 0 and sorted(isr) == sorted(replicas)
            for leader, replicas, isr in parts.values())

    wait_until(ready, timeout=60, interval=0.2, message=f"{topic}'s leaders")


def _partitions(cluster: LocalCluster, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """partition -> (leader, replicas, isr), from a live broker's Metadata."""
    meta = _admin(cluster).list_topics(topic=topic, timeout=30).topics[topic]
    return {p: (m.leader, list(m.replicas), list(m.isrs)) for p, m in meta.partitions.items()}


def _back_in_every_isr(cluster: LocalCluster, broker_id: int) -> bool:
    """Whether ``broker_id`` is in the ISR of every partition that prefers it, of every topic
    (``__consumer_offsets`` and the other tests' topics too: ``--all-topic-partitions`` asks
    for them all, and refuses a preferred replica outside the ISR)."""
    topics = _admin(cluster).list_topics(timeout=30).topics.values()
    return all(broker_id in m.isrs for meta in topics for m in meta.partitions.values()
               if list(m.replicas)[:1] == [broker_id])


def _produce(cluster: LocalCluster, topic: str, count: int, *, partition: int = -1,
             size: int = 10) -> None:
    producer = Producer({"bootstrap.servers": _live_bootstrap(cluster), "acks": "all",
                         "linger.ms": 20})
    for i in range(count):
        producer.produce(topic, value=b"x" * size, key=f"extra-{i}".encode(),
                         partition=partition)
        if i % 5000 == 4999:
            producer.flush(60)
    assert producer.flush(60) == 0


def _configs(cluster: LocalCluster, kind: int, name: str) -> dict[str, Any]:
    """The DescribeConfigs answer for one broker or topic: name -> ConfigEntry."""
    resource = ConfigResource(kind, name)
    admin = _admin(cluster)  # alive until the future is done
    return admin.describe_configs([resource])[resource].result(30)


def _broker_throttles(cluster: LocalCluster) -> dict[int, dict[str, str | None]]:
    """Each broker's throttle rates (None: not set, listed or not)."""
    rates = {}
    for b in (1, 2, 3):
        configs = _configs(cluster, ConfigResource.Type.BROKER, str(b))
        rates[b] = {key: configs[key].value if key in configs else None
                    for key in THROTTLE_KEYS}
    return rates


def _topic_throttles(cluster: LocalCluster, topic: str) -> dict[str, set[str]]:
    configs = _configs(cluster, ConfigResource.Type.TOPIC, topic)
    return {key: {v for v in (configs[key].value or "").split(",") if v}
            for key in REPLICA_KEYS}


def _write(path: Path, document: object) -> str:
    path.write_text(json.dumps(document))
    return str(path)


# --- console producer and consumer, kafka-consumer-groups ---------------------------------------


ROW = re.compile(r"^(\S+)\s+(\S+)\s+(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$")


def _describe_rows(out: str, group: str) -> dict[int, tuple[int, int, int]]:
    """``--describe``'s offsets rows of ``group``: partition -> (current, log end, lag)."""
    rows = {}
    for line in out.splitlines():
        match = ROW.match(line)
        if match and match.group(1) == group:
            rows[int(match.group(3))] = tuple(int(match.group(i)) for i in (4, 5, 6))
    return rows


@pytest.mark.parametrize("version", VERSIONS)
def test_console_tools_and_consumer_groups(version: str, cluster: LocalCluster,
                                           tmp_path: Path) -> None:
    require_kafka(version)
    bootstrap = cluster.bootstrap_servers
    topic, group, missing = _name("console"), _name("group"), _name("missing")
    _create(cluster, topic, partitions=3)
    produced = {f"key-{i}\tvalue-{i}" for i in range(12)}
    # 4.x renamed --property (still taken, with a warning on stdout) for each side
    reader, formatter = (("--property",) * 2 if version == KAFKA_3
                         else ("--reader-property", "--formatter-property"))
    out = _tool(version, "console-producer", "--bootstrap-server", bootstrap, "--topic",
                   topic, reader, "parse.key=true", input="\n".join(sorted(produced))
                   + "\n")
    _ok(out)

    consumed = _tool(version, "console-consumer", "--bootstrap-server", bootstrap,
                        "--topic", topic, "--group", group, "--from-beginning",
                        "--max-messages", str(len(produced)), formatter, "print.key=true",
                        "--timeout-ms", "60000")
    assert set(_ok(consumed).splitlines()) == produced, consumed.stdout
    assert len(consumed.stdout.splitlines()) == len(produced)
    assert f"Processed a total of {len(produced)} messages" in consumed.stderr

    # what the group committed, from librdkafka; then two more records on partition 0: lag 2
    admin = _admin(cluster)
    committed = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)])[group].result(30)
    positions = {tp.partition: tp.offset for tp in committed.topic_partitions
                 if tp.topic == topic}
    assert sorted(positions) == [0, 1, 2] and sum(positions.values()) == len(produced)
    _produce(cluster, topic, 2, partition=0)

    listed = _ok(_tool(version, "consumer-groups", "--bootstrap-server", bootstrap, "--list",
                          "--timeout", "30000"))
    assert group in listed.split(), listed

    described = _tool(version, "consumer-groups", "--bootstrap-server", bootstrap,
                         "--describe", "--group", group, "--group", missing,
                         "--timeout", "30000")
    rows = _describe_rows(_ok(described), group)
    assert rows == {p: (positions[p], positions[p] + (2 if p == 0 else 0), 2 if p == 0 else 0)
                    for p in (0, 1, 2)}, described.stdout
    both = described.stdout + described.stderr
    assert f"Consumer group '{group}' has no active members." in both
    assert f"Error: Consumer group '{missing}' does not exist." in both

    reset = _ok(_tool(version, "consumer-groups", "--bootstrap-server", bootstrap,
                         "--reset-offsets", "--to-earliest", "--execute", "--topic", topic,
                         "--group", group, "--timeout", "30000"))
    # (3.9.1 prints its rows without line breaks between them)
    new_offsets = dict(re.findall(rf"{group}\s+{topic}\s+(\d+)\s+(\d+)", reset))
    assert new_offsets == {"0": "0", "1": "0", "2": "0"}, reset
    committed = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(3)])]
    )[group].result(30)
    assert {tp.partition: tp.offset for tp in committed.topic_partitions} == {0: 0, 1: 0, 2: 0}

    deleted = _tool(version, "consumer-groups", "--bootstrap-server", bootstrap, "--delete",
                       "--group", group, "--group", missing, "--timeout", "30000")
    both = _ok(deleted) + deleted.stderr
    # Kafka's answer per group: one deleted, the other "does not exist"
    assert re.search(rf"Group '{missing}' could not be deleted due to: .*"
                     r"GroupIdNotFoundException: The group id does not exist", both), both
    assert f"'{group}'" in both.split("deleted successfully:")[-1], both
    listed = admin.list_consumer_groups().result(30)
    assert group not in {g.group_id for g in listed.valid}


# --- the performance tools and kafka-reassign-partitions ----------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_perf_test_in_transactions(version: str, cluster: LocalCluster) -> None:
    """ProducerPerformance in transactions (``--transaction-duration-ms``: each transaction
    holds what the tool sends in 100 ms), acks=all, on six partitions of three replicas led by
    the three brokers. The Java producer keeps five batches in flight per partition, and each
    leader checks a transaction's first batch on its partition with the coordinator (KIP-890).
    The tool died with OutOfOrderSequenceException in its first transaction while a batch
    sent after the first one's answer could overtake those still waiting for the check."""
    require_kafka(version)
    topic = _name("txn-perf")
    _create(cluster, topic, partitions=6)
    records = 6000
    sent = _ok(_tool(version, "producer-perf-test", "--topic", topic,
                     "--num-records", str(records), "--record-size", "1024",
                     "--throughput", "-1", "--transaction-duration-ms", "100",
                     "--transactional-id", _name("perf"), "--producer-props", "acks=all",
                     "enable.idempotence=true", f"bootstrap.servers={cluster.bootstrap_servers}"))
    totals = re.findall(r"^(\d+) records sent, [\d.]+ records/sec .* avg latency", sent, re.M)
    assert totals and int(totals[-1]) == records, sent


@pytest.mark.parametrize("version", VERSIONS)
def test_perf_tests_then_reassignment_with_a_throttle(version: str, cluster: LocalCluster,
                                                      tmp_path: Path) -> None:
    """ProducerPerformance fills two single-replica partitions (idempotent, acks=all),
    ConsumerPerformance reads them all back; then the reassignment tool moves them under a
    throttle, which it sets on brokers and topic and takes off once --verify finds it done."""
    require_kafka(version)
    bootstrap = cluster.bootstrap_servers
    topic = _name("moved")
    _create(cluster, topic, assignment=[[1], [2]])

    sent = _ok(_tool(version, "producer-perf-test", "--topic", topic,
                        "--num-records", str(PERF_RECORDS), "--record-size", str(RECORD_SIZE),
                        "--throughput", "-1", "--producer-props", "acks=all",
                        "enable.idempotence=true", f"bootstrap.servers={bootstrap}"))
    totals = re.findall(r"^(\d+) records sent, [\d.]+ records/sec .* avg latency", sent, re.M)
    assert totals and int(totals[-1]) == PERF_RECORDS, sent

    count_flag = "--messages" if version == KAFKA_3 else "--num-records"
    read = _ok(_tool(version, "consumer-perf-test", "--bootstrap-server", bootstrap,
                        "--topic", topic, count_flag, str(PERF_RECORDS), "--timeout", "60000"))
    header, _, line = read.strip().partition("\n")
    fields = dict(zip([h.strip() for h in header.split(",")],
                      [f.strip() for f in line.splitlines()[-1].split(",")], strict=True))
    assert int(fields["data.consumed.in.nMsg"]) == PERF_RECORDS, read
    assert abs(float(fields["data.consumed.in.MB"]) - PERF_RECORDS * RECORD_SIZE / 2**20) < 0.01

    # --generate proposes a plan over brokers 1-3 and prints the current one
    generated = _ok(_tool(version, "reassign-partitions", "--bootstrap-server", bootstrap,
                             "--generate", "--broker-list", "1,2,3", "--topics-to-move-json-file",
                             _write(tmp_path / "move.json",
                                    {"version": 1, "topics": [{"topic": topic}]})))
    current, proposed = (json.loads(line) for line in generated.splitlines()
                         if line.startswith("{"))
    assert {(p["partition"], tuple(p["replicas"])) for p in current["partitions"]} == {
        (0, (1,)), (1, (2,))}
    assert sorted(p["partition"] for p in proposed["partitions"]) == [0, 1]

    target = {0: [3, 2], 1: [1, 3]}
    plan = _write(tmp_path / "plan.json", {"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": r} for p, r in target.items()]})
    executed = _ok(_tool(version, "reassign-partitions", "--bootstrap-server", bootstrap,
                            "--execute", "--reassignment-json-file", plan,
                            "--throttle", "1000000"))
    assert "The inter-broker throttle limit was set to 1000000 B/s" in executed, executed
    assert "Successfully started partition reassignment" in executed, executed
    # the throttle, as the tool sets it: a rate on every broker, the replicas on the topic
    assert _broker_throttles(cluster) == {b: dict.fromkeys(THROTTLE_KEYS, "1000000")
                                          for b in (1, 2, 3)}
    assert _topic_throttles(cluster, topic) == {
        "leader.replication.throttled.replicas": {"0:1", "1:2"},
        "follower.replication.throttled.replicas": {"0:3", "0:2", "1:1", "1:3"}}

    def moved() -> bool:
        parts = _partitions(cluster, topic)
        return all(parts[p][1] == r and sorted(parts[p][2]) == sorted(r)
                   for p, r in target.items())

    wait_until(moved, timeout=120, interval=0.5, message=f"{topic} moved")
    verified = _ok(_tool(version, "reassign-partitions", "--bootstrap-server", bootstrap,
                            "--verify", "--reassignment-json-file", plan))
    for p in target:
        assert f"Reassignment of partition {topic}-{p} is completed" in verified, verified
    assert "Clearing broker-level throttles on brokers 1,2,3" in verified, verified
    assert f"Clearing topic-level throttles on topic {topic}" in verified, verified
    assert _broker_throttles(cluster) == {b: dict.fromkeys(THROTTLE_KEYS) for b in (1, 2, 3)}
    assert _topic_throttles(cluster, topic) == dict.fromkeys(REPLICA_KEYS, set())
    assert {p: leader for p, (leader, _, _) in _partitions(cluster, topic).items()} == {0: 3,
                                                                                         1: 1}


@pytest.mark.parametrize("version", VERSIONS)
def test_reassignment_listed_then_cancelled(version: str, cluster: LocalCluster,
                                            tmp_path: Path) -> None:
    """A move held back by a 10 kB/s throttle is listed in progress, then cancelled: the
    partition keeps its replicas and the throttles go."""
    require_kafka(version)
    bootstrap = cluster.bootstrap_servers
    topic = _name("cancelled")
    _create(cluster, topic, assignment=[[1]])
    _produce(cluster, topic, 20000, size=RECORD_SIZE)
    plan = _write(tmp_path / "plan.json", {"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [2, 3]}]})
    _ok(_tool(version, "reassign-partitions", "--bootstrap-server", bootstrap, "--execute",
                 "--reassignment-json-file", plan, "--throttle", "10000"))
    listed = _ok(_tool(version, "reassign-partitions", "--bootstrap-server", bootstrap,
                          "--list"))
    assert f"{topic}-0: replicas: 2,3,1. adding: 2,3. removing: 1." in listed, listed

    cancelled = _ok(_tool(version, "reassign-partitions", "--bootstrap-server", bootstrap,
                             "--cancel", "--reassignment-json-file", plan))
    assert f"Successfully cancelled partition reassignment for: {topic}-0" in cancelled
    wait_until(lambda: _partitions(cluster, topic)[0] == (1, [1], [1]), timeout=60,
               interval=0.2, message=f"{topic} back on broker 1")
    assert _broker_throttles(cluster) == {b: dict.fromkeys(THROTTLE_KEYS) for b in (1, 2, 3)}
    assert _topic_throttles(cluster, topic) == dict.fromkeys(REPLICA_KEYS, set())


# --- kafka-leader-election ----------------------------------------------------------------------


def _elect(version: str, cluster: LocalCluster, kind: str, *args: str
           ) -> subprocess.CompletedProcess[str]:
    return _tool(version, "leader-election", "--bootstrap-server", _live_bootstrap(cluster),
                    "--election-type", kind, *args)


def _partitions_file(path: Path, *partitions: tuple[str, int]) -> str:
    return _write(path, {"partitions": [{"topic": t, "partition": p} for t, p in partitions]})


def test_leader_elections_preferred_and_unclean(cluster: LocalCluster, tmp_path: Path) -> None:
    """Both versions' LeaderElectionCommand, with Kafka's rules: unclean election refused
    while no replica of the partition is alive (ELIGIBLE_LEADERS_NOT_AVAILABLE), preferred
    refused while the preferred replica is down (PREFERRED_LEADER_NOT_AVAILABLE), unclean
    election of a live replica outside the ISR once one is back, ELECTION_NOT_NEEDED where a
    leader exists, and the preferred leaders back with --all-topic-partitions."""
    for version in VERSIONS:
        require_kafka(version)
    lost = {KAFKA_3: _name("unclean3"), KAFKA_4: _name("unclean4")}
    spread = _name("spread")
    for topic in lost.values():
        _create(cluster, topic, assignment=[[1, 2]])
    _create(cluster, spread, partitions=3)
    assert [leader for leader, _, _ in _partitions(cluster, spread).values()] != [-1] * 3

    # broker 2 leaves the ISRs, then broker 1, the last in them, stops: the partitions are
    # leaderless with the ISR [1] (Kafka keeps the last member)
    _stop(cluster, 2)
    wait_until(lambda: all(_partitions(cluster, t)[0][2] == [1] for t in lost.values()),
               timeout=60, interval=0.2, message="broker 2 out of the ISRs")
    _stop(cluster, 1)
    wait_until(lambda: all(_partitions(cluster, t)[0][:1] == (-1,) for t in lost.values()),
               timeout=60, interval=0.2, message="the partitions leaderless")
    assert all(_partitions(cluster, t)[0][2] == [1] for t in lost.values())

    refused = _elect(KAFKA_3, cluster, "preferred", "--topic", lost[KAFKA_3], "--partition", "0")
    assert refused.returncode == 1, refused
    assert (f"Error completing leader election (PREFERRED) for partition: {lost[KAFKA_3]}-0: "
            "org.apache.kafka.common.errors.PreferredLeaderNotAvailableException"
            ) in refused.stdout, refused.stdout
    refused = _elect(KAFKA_4, cluster, "unclean", "--topic", lost[KAFKA_4], "--partition", "0")
    assert refused.returncode == 1, refused
    assert (f"Error completing leader election (UNCLEAN) for partition: {lost[KAFKA_4]}-0: "
            "org.apache.kafka.common.errors.EligibleLeadersNotAvailableException"
            ) in refused.stdout, refused.stdout

    # broker 2 back, out of the ISR: an unclean election makes it leader; the partition of a
    # topic that has a leader needs none
    _start(cluster, 2)
    for version, topic in lost.items():
        elected = _elect(version, cluster, "unclean", "--path-to-json-file", _partitions_file(
            tmp_path / f"elect-{version}.json", (topic, 0), (spread, 0)))
        out = _ok(elected)
        assert f"Successfully completed leader election (UNCLEAN) for partitions {topic}-0" \
            in out, out
        assert f"Valid replica already elected for partitions {spread}-0" in out, out
        # the controller answered once the election was stored; the brokers learn it by
        # UpdateMetadata, as in Kafka: Metadata shows it a moment later
        wait_until(lambda t=topic: _partitions(cluster, t)[0] == (2, [1, 2], [2]),
                   timeout=30, interval=0.2, message=f"{topic}-0 led by broker 2 in Metadata")

    # broker 1 back and in the ISRs; leaders it prefers are elsewhere until elected
    _start(cluster, 1)
    preferred_1 = [(t, p) for t in [*lost.values(), spread]
                   for p, (_, replicas, _) in _partitions(cluster, t).items() if replicas[0] == 1]
    wait_until(lambda: all(1 in _partitions(cluster, t)[p][2] for t, p in preferred_1)
               and _back_in_every_isr(cluster, 1),
               timeout=90, interval=0.3, message="broker 1 back in the ISRs")
    assert all(_partitions(cluster, t)[p][0] != 1 for t, p in preferred_1)
    out = _ok(_elect(KAFKA_4, cluster, "preferred", "--all-topic-partitions"))
    for topic, partition in preferred_1:
        assert re.search(rf"Successfully completed leader election \(PREFERRED\) for "
                         rf"partitions .*\b{topic}-{partition}\b", out), out
    # the brokers learn the leaders by UpdateMetadata, after the controller answered
    wait_until(lambda: all(_partitions(cluster, t)[p][0] == 1 for t, p in preferred_1),
               timeout=30, interval=0.2, message="the preferred leaders in Metadata")

    # 3.9.1's turn: broker 2 bounced moves its leaderships away, --all-topic-partitions
    # brings them back
    _stop(cluster, 2)
    _start(cluster, 2)
    preferred_2 = [(t, p) for t in [*lost.values(), spread]
                   for p, (_, replicas, _) in _partitions(cluster, t).items() if replicas[0] == 2]
    assert preferred_2
    wait_until(lambda: all(2 in _partitions(cluster, t)[p][2] for t, p in preferred_2)
               and _back_in_every_isr(cluster, 2),
               timeout=90, interval=0.3, message="broker 2 back in the ISRs")
    out = _ok(_elect(KAFKA_3, cluster, "preferred", "--all-topic-partitions"))
    for topic, partition in preferred_2:
        assert re.search(rf"Successfully completed leader election \(PREFERRED\) for "
                         rf"partitions .*\b{topic}-{partition}\b", out), out
    # the brokers learn the leaders by UpdateMetadata, after the controller answered
    wait_until(lambda: all(_partitions(cluster, t)[p][0] == 2 for t, p in preferred_2),
               timeout=30, interval=0.2, message="the preferred leaders in Metadata")
