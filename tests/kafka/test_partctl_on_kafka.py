"""partctl's own tools against a real Apache Kafka 3.9.1 cluster in ZooKeeper mode.

One module-scoped cluster of three Kafka brokers on the session's ZooKeeper (the AclAuthorizer
on, so that Kafka itself writes ACLs into ``/kafka-acl``). Kafka's own tools make the tree:
TopicCommand creates topics (one with configs, one with ``--replica-assignment``), AclCommand
writes literal and prefixed ACLs, confluent-kafka produces and runs a consumer group. Then
partctl's CLI, pointed at the cluster's chroot (``zookeeper://127.0.0.1:<port>/<chroot>``),
reads what Kafka wrote and shows it as Kafka's tools show it:

- ``topics list | describe | describe-config`` against ``kafka-topics --describe`` and
  ``kafka-configs --describe --all`` (leader, replicas, ISR; the leader epoch against the
  state nodes Kafka wrote; every config line, synonyms included);
- ``controller status`` and ``cluster status`` against ``/controller`` (JSON version 2 from
  3.9), ``/controller_epoch``, the brokers' registrations and Kafka's Metadata answer;
- ``acls list`` against ``kafka-acls --list``, block by block, byte for byte;
- ``groups describe`` against ``kafka-consumer-groups --describe`` (offsets, log ends, lag, the
  member of each partition);
- ``reassign generate | execute | verify`` through ZooKeeper: partctl writes
  ``/admin/reassign_partitions`` in Kafka's format, Kafka's controller carries the moves out
  and deletes the node, ``verify`` reports them complete, ``kafka-topics`` shows the result;
- ``elect preferred``: ``/admin/preferred_replica_election`` as Kafka writes it, carried out by
  Kafka's controller.
"""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import coordinator
from coordinator.base import Coordinator
from coordinator.metadata import MetadataClient
from partctl.cli import main
from partctl.cluster_view import read_cluster
from tests.broker.wire_client import RawClient, request
from tests.servers import Server
from tests.waiting import wait_until

from .conftest import require_kafka
from .harness import KAFKA_3, KafkaCluster, start_kafka_zk
from .tool_shell import run_shared

pytestmark = pytest.mark.servers

TOPIC = "orders"
"""3 partitions, replication factor 2, two config overrides."""
ASSIGNED = "placed"
"""Created with --replica-assignment 1:2,2:3,3:1."""
GROUP = "billing"
RACK = "rack-a"
"""Every broker's broker.rack (the harness gives all brokers the same settings)."""
PER_PARTITION = 20
EXTRA_ON_0 = 5
"""Records produced to partition 0 of TOPIC after the group committed: its lag."""
KAFKA_PARTITION = re.compile(
    r"Topic: (\S+)\tPartition: (\d+)\tLeader: (\S+)\tReplicas: (\S+)\tIsr: (\S*)")
PARTCTL_PARTITION = re.compile(
    r"Topic: (\S+)\tPartition: (\d+)\tLeader: (\S+)\tLeaderEpoch: (\S+)\tReplicas: (\S+)\t"
    r"Isr: (\S*)")


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, (
        f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}")
    return result.stdout


def partctl(*argv: str) -> str:
    """partctl's CLI, in this process; its stdout (a failure shows its stderr)."""
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    assert code == 0, f"partctl {' '.join(argv)}: exit {code}\n{out.getvalue()}{err.getvalue()}"
    return out.getvalue()


@dataclass(frozen=True, slots=True)
class Seeded:
    kafka: KafkaCluster
    url: str
    """zookeeper://127.0.0.1:<port>/<chroot>: the cluster's tree."""


@pytest.fixture(scope="module")
def seeded(zookeeper_server: Server, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[Seeded]:
    """Three Kafka 3.9.1 brokers in ZooKeeper mode, with topics, configs and ACLs that Kafka's
    own tools wrote."""
    require_kafka(KAFKA_3)
    kafka = start_kafka_zk(tmp_path_factory.mktemp("partctl-on-kafka"), zookeeper_server,
                           broker_ids=(1, 2, 3), extra={
                               "authorizer.class.name":
                                   "kafka.security.authorizer.AclAuthorizer",
                               "super.users": "User:ANONYMOUS",
                               "broker.rack": RACK})
    try:
        assert kafka.zookeeper_connect is not None
        chroot = "/" + kafka.zookeeper_connect.partition("/")[2]
        boot = kafka.bootstrap
        _ok(run_shared(KAFKA_3, "topics", "--bootstrap-server", boot, "--create", "--topic",
                     TOPIC, "--partitions", "3", "--replication-factor", "2", "--config",
                     "min.insync.replicas=1", "--config", "retention.ms=3600000"))
        _ok(run_shared(KAFKA_3, "topics", "--bootstrap-server", boot, "--create", "--topic",
                     ASSIGNED, "--replica-assignment", "1:2,2:3,3:1"))
        _ok(run_shared(KAFKA_3, "acls", "--bootstrap-server", boot, "--add", "--allow-principal",
                     "User:alice", "--operation", "Read", "--operation", "Describe",
                     "--topic", TOPIC, "--group", GROUP))
        _ok(run_shared(KAFKA_3, "acls", "--bootstrap-server", boot, "--add", "--deny-principal",
                     "User:eve", "--deny-host", "127.0.0.2", "--operation", "Write",
                     "--topic", "pay-", "--resource-pattern-type", "prefixed"))
        yield Seeded(kafka=kafka, url=zookeeper_server.url(chroot))
    finally:
        kafka.stop()


@pytest.fixture
def tree(seeded: Seeded) -> Iterator[Coordinator]:
    """A raw session on Kafka's tree (what Kafka wrote, read without partctl's codecs)."""
    client = coordinator.connect(seeded.url, timeout=10)
    yield client
    client.close()


def _json(client: Coordinator, path: str) -> dict:
    return json.loads(client.get(path)[0])


def _kafka_partitions(out: str) -> dict[tuple[str, int], tuple[str, str, str]]:
    return {(t, int(p)): (leader, replicas, isr)
            for t, p, leader, replicas, isr in KAFKA_PARTITION.findall(out)}


def _partctl_partitions(out: str) -> dict[tuple[str, int], tuple[str, str, str, str]]:
    return {(t, int(p)): (leader, epoch, replicas, isr)
            for t, p, leader, epoch, replicas, isr in PARTCTL_PARTITION.findall(out)}


def _kafka_describe(seeded: Seeded) -> dict[tuple[str, int], tuple[str, str, str]]:
    return _kafka_partitions(_ok(run_shared(KAFKA_3, "topics", "--bootstrap-server",
                                          seeded.kafka.bootstrap, "--describe")))


def test_topics_list_and_describe_as_kafka_topics_shows_them(seeded: Seeded,
                                                             tree: Coordinator) -> None:
    # TopicCommand answers once every leader is elected; the ISR can still be settling
    def settled() -> dict[tuple[str, int], tuple[str, str, str]] | None:
        parts = _kafka_describe(seeded)
        ours = {tp: v for tp, v in parts.items() if tp[0] in (TOPIC, ASSIGNED)}
        return parts if len(ours) == 6 and all(
            sorted(r.split(",")) == sorted(i.split(",")) for _, r, i in ours.values()) else None

    kafkas = wait_until(settled, timeout=60, interval=0.5, message="Kafka's topics settled")
    described = _partctl_partitions(partctl("topics", "describe", "--coordinator", seeded.url))
    assert set(described) == set(kafkas)  # __consumer_offsets too, once it exists
    for tp, (leader, epoch, replicas, isr) in described.items():
        assert (leader, replicas, isr) == kafkas[tp], tp
        state = _json(tree, f"/brokers/topics/{tp[0]}/partitions/{tp[1]}/state")
        assert int(epoch) == state["leader_epoch"], tp  # Kafka's tool does not show it
    assert {tp: v[2] for tp, v in described.items() if tp[0] == ASSIGNED} == {
        (ASSIGNED, 0): "1,2", (ASSIGNED, 1): "2,3", (ASSIGNED, 2): "3,1"}

    one = partctl("topics", "describe", "--coordinator", seeded.url, "--topic", TOPIC)
    topic_id = _json(tree, f"/brokers/topics/{TOPIC}")["topic_id"]
    assert one.startswith(f"Topic: {TOPIC}\tTopicId: {topic_id}\tPartitionCount: 3\t"
                          f"ReplicationFactor: 2\n"), one
    assert set(_partctl_partitions(one)) == {(TOPIC, p) for p in range(3)}
    listed = partctl("topics", "list", "--coordinator", seeded.url).split()
    assert listed == sorted({t for t, _ in kafkas}) and {TOPIC, ASSIGNED} <= set(listed)


def test_describe_config_as_kafka_configs_shows_it(seeded: Seeded) -> None:
    kafkas = _ok(run_shared(KAFKA_3, "configs", "--bootstrap-server", seeded.kafka.bootstrap,
                          "--describe", "--all", "--entity-type", "topics", "--entity-name",
                          TOPIC)).splitlines()
    # partctl adds a note where it only stores a key: "(partctl: ...)"
    ours = [re.sub(r" \(partctl: .*\)$", "", line) for line in partctl(
        "topics", "describe-config", "--coordinator", seeded.url, "--topic", TOPIC,
        "--all").splitlines()]
    assert kafkas[0] == ours[0] == f"All configs for topic {TOPIC} are:"
    assert ours == kafkas  # every key, value, sensitivity and synonym list
    dynamic = partctl("topics", "describe-config", "--coordinator", seeded.url, "--topic", TOPIC)
    assert dynamic.splitlines() == [f"Dynamic configs for topic {TOPIC} are:"] + [
        line for line in kafkas if line.startswith(("  min.insync.replicas=",
                                                    "  retention.ms="))]


def test_controller_status_is_the_controller_kafka_elected(seeded: Seeded,
                                                          tree: Coordinator) -> None:
    node = _json(tree, "/controller")
    assert node["version"] == 2 and node["kraftControllerEpoch"] == -1  # as Kafka 3.9 writes
    epoch = int(tree.get("/controller_epoch")[0])
    assert partctl("controller", "status", "--coordinator", seeded.url) == (
        f"Controller: broker {node['brokerid']}\tEpoch: {epoch}\n")
    body = request(3, 12, topics=(), allow_auto_topic_creation=False,
                   include_topic_authorized_operations=False)
    with RawClient(seeded.kafka.broker(1).address) as client:
        assert client.call(body).controller_id == node["brokerid"]


def test_cluster_status_reads_kafkas_broker_registrations(seeded: Seeded,
                                                          tree: Coordinator) -> None:
    registered = {b: _json(tree, f"/brokers/ids/{b}") for b in (1, 2, 3)}
    for b, node in registered.items():  # Kafka 3.9's registration, version 5
        assert node["version"] == 5 and node["rack"] == RACK and node["endpoints"] == [
            f"PLAINTEXT://{seeded.kafka.broker(b).bootstrap}"], node
    # partctl's reader keeps what it does not model, so nothing Kafka wrote is lost
    brokers = MetadataClient(tree).brokers()
    for b, reg in brokers.items():
        node = registered[b]
        assert (reg.info.host, reg.info.port, reg.info.endpoints, reg.info.rack) == (
            node["host"], node["port"], tuple(node["endpoints"]), RACK)
        assert json.loads(reg.info.encode()) == node
    view = read_cluster(tree)
    assert {b.id: (b.host, b.port, b.rack, b.live) for b in view.brokers} == {
        b: ("127.0.0.1", seeded.kafka.broker(b).port, RACK, True) for b in (1, 2, 3)}

    kafkas = _kafka_describe(seeded)
    leaders = {b: sum(1 for leader, _, _ in kafkas.values() if leader == str(b))
               for b in (1, 2, 3)}
    replicas = {b: sum(1 for _, r, _ in kafkas.values() if str(b) in r.split(","))
                for b in (1, 2, 3)}
    screen = partctl("cluster", "status", "--coordinator", seeded.url)
    controller = _json(tree, "/controller")["brokerid"]
    epoch = int(tree.get("/controller_epoch")[0])
    topics = len({t for t, _ in kafkas})
    assert (f"Controller broker {controller} (epoch {epoch}); brokers 3 live of 3; "
            f"{topics} topics, {len(kafkas)} partitions") in screen, screen
    assert re.search(r"Offline partitions 0\s+Under-replicated 0", screen), screen
    rows = {int(m[0]): (int(m[1]), int(m[2])) for m in re.findall(
        rf"│\s+(\d)\s+│ {RACK}\s+│[^│]*│\s+(\d+)\s+│\s+(\d+)\s+│", screen)}
    assert rows == {b: (leaders[b], replicas[b]) for b in (1, 2, 3)}, screen


def _acl_blocks(out: str) -> dict[str, str]:
    """kafka-acls --list: resource pattern -> its block, as printed (the order of the blocks
    is a hash map's in Kafka, so the blocks are compared one by one)."""
    blocks = [b for b in out.split("\n\n") if b.strip()]
    found = {}
    for block in blocks:
        heading = re.match(r"Current ACLs for resource `(.*)`: \n", block)
        assert heading, repr(block)
        found[heading[1]] = block
    return found


def _acl_lines(block: str) -> set[str]:
    return {line.strip() for line in block.splitlines()[1:]}


def test_acls_list_as_kafka_acls_lists_them(seeded: Seeded, tree: Coordinator) -> None:
    # what Kafka's AclAuthorizer wrote, literal and prefixed
    assert {a["principal"] for a in _json(tree, f"/kafka-acl/Topic/{TOPIC}")["acls"]} == {
        "User:alice"}
    assert _json(tree, "/kafka-acl-extended/prefixed/Topic/pay-")["acls"] == [
        {"principal": "User:eve", "permissionType": "Deny", "host": "127.0.0.2",
         "operation": "Write"}]
    kafkas = _acl_blocks(_ok(run_shared(KAFKA_3, "acls", "--bootstrap-server",
                                      seeded.kafka.bootstrap, "--list")))
    ours = _acl_blocks(partctl("acls", "list", "--coordinator", seeded.url))
    assert set(ours) == set(kafkas) == {
        f"ResourcePattern(resourceType=TOPIC, name={TOPIC}, patternType=LITERAL)",
        f"ResourcePattern(resourceType=GROUP, name={GROUP}, patternType=LITERAL)",
        "ResourcePattern(resourceType=TOPIC, name=pay-, patternType=PREFIXED)"}
    for pattern, block in kafkas.items():
        assert _acl_lines(ours[pattern]) == _acl_lines(block), pattern
        # Kafka's layout: " \t" before the first ACL, "\t" before the others, " " after the last
        lines = sorted(_acl_lines(block))
        assert re.fullmatch(r"Current ACLs for resource `.*`: \n \t\(.*\)(\n\t\(.*\))* \n?",
                            ours[pattern]), repr(ours[pattern])
        assert len(ours[pattern].splitlines()) == len(lines) + 1


def _group_rows(out: str) -> dict[tuple[str, int], tuple[str, ...]]:
    """A consumer-groups --describe table: (topic, partition) -> current offset, log end, lag,
    consumer id, host, client id (columns split on blanks, the layouts differ)."""
    rows = {}
    for line in out.splitlines():
        cells = line.split()
        if len(cells) == 9 and cells[0] == GROUP:
            rows[(cells[1], int(cells[2]))] = tuple(cells[3:])
    return rows


def test_groups_describe_as_kafka_consumer_groups_shows_it(seeded: Seeded) -> None:
    from confluent_kafka import Consumer, Producer

    boot = seeded.kafka.bootstrap
    producer = Producer({"bootstrap.servers": boot, "acks": "all"})
    for p in range(3):
        for i in range(PER_PARTITION):
            producer.produce(TOPIC, value=f"v{i}".encode(), partition=p)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": boot, "group.id": GROUP,
                         "client.id": "billing-1", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([TOPIC])
        seen = 0
        for _ in range(600):  # a minute at most
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                seen += 1
            if seen >= 3 * PER_PARTITION:
                break
        assert seen == 3 * PER_PARTITION
        consumer.commit(asynchronous=False)
        for _ in range(EXTRA_ON_0):
            producer.produce(TOPIC, value=b"late", partition=0)
        assert producer.flush(30) == 0

        kafkas = _group_rows(_ok(run_shared(KAFKA_3, "consumer-groups", "--bootstrap-server",
                                          boot, "--describe", "--group", GROUP)))
        ours = _group_rows(partctl("groups", "describe", "--coordinator", seeded.url,
                                   "--group", GROUP))
        assert ours == kafkas and len(ours) == 3, (ours, kafkas)
        end = {p: PER_PARTITION + (EXTRA_ON_0 if p == 0 else 0) for p in range(3)}
        assert {p: (int(c), int(e), int(lag)) for (_, p), (c, e, lag, *_) in ours.items()} == {
            p: (PER_PARTITION, end[p], end[p] - PER_PARTITION) for p in range(3)}
        assert {row[5] for row in ours.values()} == {"billing-1"}

        members = partctl("groups", "describe", "--bootstrap-server", boot, "--group", GROUP,
                          "--members")
        member = next(iter(ours.values()))[3]
        assert re.search(rf"{GROUP}\s+{re.escape(member)}\s+\S+\s+billing-1\s+3", members), \
            members
        state = partctl("groups", "describe", "--coordinator", seeded.url, "--group", GROUP,
                        "--state")
        assert re.search(rf"{GROUP}\s+127\.0\.0\.1:\d+ \(\d\)\s+range\s+Stable\s+1", state), \
            state
    finally:
        consumer.close()


def test_reassign_through_zookeeper_carried_out_by_kafkas_controller(
        seeded: Seeded, tree: Coordinator, tmp_path: Path) -> None:
    """generate moves ASSIGNED off broker 3; execute writes Kafka's reassignment node, which
    Kafka's controller carries out and deletes; verify says every move is complete."""
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": ASSIGNED}]}))
    plan = tmp_path / "plan.json"
    partctl("reassign", "generate", "--coordinator", seeded.url, "--topics-to-move-json-file",
            str(topics), "--brokers", "1,2", "-o", str(plan))
    moves = json.loads(plan.read_text())
    assert moves["version"] == 1 and moves["partitions"]
    target = {(m["topic"], m["partition"]): m["replicas"] for m in moves["partitions"]}
    assert {t for t, _ in target} == {ASSIGNED}
    assert all(set(r) <= {1, 2} and len(r) == 2 for r in target.values()), target

    written: list[bytes] = []
    watch = tree.watch_data("/admin/reassign_partitions",
                            lambda event: written.append(event.data) if event.data else None)
    try:
        out = partctl("reassign", "execute", "--coordinator", seeded.url,
                      "--reassignment-json-file", str(plan), "--timeout", "90")
    finally:
        watch.cancel()
    assert f"Reassignment finished: {len(target)} done, 0 failed" in out, out
    # Kafka's controller deleted the node once every move was done
    assert tree.exists("/admin/reassign_partitions") is None
    assert tree.exists("/admin/reassign_partitions_owner") is None  # partctl's, released
    # the node as Kafka writes it: {"version":1,"partitions":[{"topic","partition","replicas"}]}
    assert written, "the reassignment node was never seen"
    assert written[0] == json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r} for (t, p), r in sorted(target.items())]},
        separators=(",", ":")).encode()
    log = seeded.kafka.log()
    assert all(f"for partition being reassigned {t}-{p}" in log for t, p in target), \
        "Kafka's controller did not carry the moves out"

    verified = partctl("reassign", "verify", "--coordinator", seeded.url,
                       "--reassignment-json-file", str(plan))
    assert all(f"Reassignment of partition {t}-{p} is completed." in verified
               for t, p in target), verified
    assert f"{len(target)} done, 0 in progress, 0 failed." in verified

    def moved() -> dict[tuple[str, int], tuple[str, str, str]] | None:
        parts = _kafka_describe(seeded)
        done = all(parts[tp][1] == ",".join(map(str, r)) and sorted(parts[tp][2].split(","))
                   == sorted(map(str, r)) for tp, r in target.items())
        return parts if done else None

    kafkas = wait_until(moved, timeout=60, interval=0.5, message="Kafka shows the new replicas")
    assert all("3" not in kafkas[(ASSIGNED, p)][1].split(",") for p in range(3))
    assert {(t, p): _json(tree, f"/brokers/topics/{t}")["partitions"][str(p)]
            for t, p in target} == target


def test_elect_preferred_through_zookeeper_carried_out_by_kafkas_controller(
        seeded: Seeded, tree: Coordinator, tmp_path: Path) -> None:
    """A partition whose leader is not its preferred replica (a reorder of its replicas that
    keeps the leader: Kafka's controller does not move it); ``elect preferred`` writes
    ``/admin/preferred_replica_election`` as Kafka writes it, and Kafka's controller moves the
    leadership to the preferred replica and deletes the node."""
    tp = (ASSIGNED, 0)
    leader, replicas, _ = _kafka_describe(seeded)[tp]
    reordered = [int(r) for r in replicas.split(",") if r != leader] + [int(leader)]
    plan = tmp_path / "reorder.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": ASSIGNED, "partition": 0, "replicas": reordered}]}))
    partctl("reassign", "execute", "--coordinator", seeded.url, "--reassignment-json-file",
            str(plan), "--timeout", "60")
    # execute returns once Kafka's controller has finished (and written the topic node)
    assert _json(tree, f"/brokers/topics/{ASSIGNED}")["partitions"]["0"] == reordered
    state = f"/brokers/topics/{ASSIGNED}/partitions/0/state"
    assert _json(tree, state)["leader"] == int(leader) != reordered[0]  # not the preferred one

    # Kafka's controller takes the node as soon as it appears: paused for the moment of the
    # write (well inside its ZooKeeper session), it lets the test read what partctl wrote
    pid = seeded.kafka.broker(_json(tree, "/controller")["brokerid"]).pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        out = partctl("elect", "preferred", "--coordinator", seeded.url, "--topic", ASSIGNED,
                      "--partition", "0")
        written, _stat = tree.get("/admin/preferred_replica_election")
    finally:
        os.kill(pid, signal.SIGCONT)
    assert out == "Requested a preferred replica election for 1 partition(s).\n"
    assert written == (
        b'{"version":1,"partitions":[{"topic":"%s","partition":0}]}' % ASSIGNED.encode())
    wait_until(lambda: tree.exists("/admin/preferred_replica_election") is None,
               timeout=60, message="Kafka's controller took the election request")
    wait_until(lambda: _json(tree, state)["leader"] == reordered[0], timeout=60,
               message="Kafka's controller elected the preferred replica")
    # the brokers learn it from the UpdateMetadata that follows the state node's write, so
    # Kafka's own tool can answer from the old metadata for a moment
    wanted = (str(reordered[0]), ",".join(map(str, reordered)))
    wait_until(lambda: _kafka_describe(seeded)[tp][:2] == wanted, timeout=60, interval=0.5,
               message="Kafka's brokers show the preferred replica leading")
    described = _partctl_partitions(partctl("topics", "describe", "--coordinator", seeded.url,
                                            "--topic", ASSIGNED))
    assert described[tp][0] == str(reordered[0])
