"""partctl's CLI by ``--bootstrap-server`` and ``--command-config`` alone, against three partctl
broker processes whose only listener is SASL_SSL (SCRAM-SHA-512), with Kafka's ACL authorizer:
``admin`` is a super user, ``alice`` may only DESCRIBE topics. The client properties file is in
Kafka's form (``security.protocol``, ``sasl.mechanism``, ``sasl.jaas.config``,
``ssl.truststore.*``).

As ``admin``: ``cluster snapshot`` (sizes from DescribeLogDirs), ``reassign generate --goal
disk`` (no ``--sizes``), ``reassign execute --throttle``, ``verify``, ``list``, ``rebalance
demote-brokers`` (dry run, then ``--execute``), ``elect preferred``. Bad input, each one
``partctl: error:`` line, exit status 1, nothing moved: a wrong password, alice executing a plan,
an unreachable bootstrap server (one that never answers, one that refuses), an unknown broker
in ``remove-brokers``, a drain that cannot keep a replication factor, a plan naming a topic
deleted meanwhile. No password is in any output, log record or broker log of the run."""

from __future__ import annotations

import io
import json
import logging
import socket
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import confluent_kafka as ck
import pytest

import coordinator
from coordinator.admin import Admin
from kafkaclient.admin import AdminClient
from partctl.cli import main
from tests.broker.processes import BrokerProcess, coordinator_settings, start_broker
from tests.broker.security_fixtures import (
    client_properties,
    listener_ports,
    partctl,
    sasl_ssl_acl_settings,
    scram_users,
)
from tests.broker.tls_material import Material, make_material
from tests.servers import Server, free_port
from tests.waiting import wait_until

pytestmark = pytest.mark.servers

RACK = {1: "r0", 2: "r1", 3: "r2"}
THROTTLE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
                 "leader.replication.throttled.replicas",
                 "follower.replication.throttled.replicas")


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@dataclass
class Secure:
    brokers: list[BrokerProcess]
    material: Material
    secrets: dict[str, str]
    url: str
    directory: Path
    outputs: list[str] = field(default_factory=list)
    """Everything the CLI printed in the run, and every log record it made."""

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{listener_ports(b)['SASL_SSL']}" for b in self.brokers)

    def properties(self, user: str, password: str | None = None) -> str:
        return client_properties(self.directory, self.material, user,
                                 password or self.secrets[user])

    def run(self, *argv: str, user: str = "admin", password: str | None = None,
            bootstrap: str | None = None) -> tuple[int, str, str]:
        """``partctl ARGV --bootstrap-server ... --command-config FILE`` in this process, its
        output and log records kept for the secrets check."""
        config = self.properties(user, password)
        out, err = io.StringIO(), io.StringIO()
        records = _Records()
        root = logging.getLogger()
        level = root.level
        root.addHandler(records)
        root.setLevel(logging.DEBUG)
        try:
            code = main([*argv, "--bootstrap-server", bootstrap or self.bootstrap,
                         "--command-config", config], out=out, err=err)
        finally:
            root.removeHandler(records)
            root.setLevel(level)
        self.outputs += [out.getvalue(), err.getvalue(), *records.lines]
        return code, out.getvalue(), err.getvalue()

    def admin(self) -> AdminClient:
        return AdminClient.from_command_config(self.bootstrap, self.properties("admin"),
                                               timeout=30)

    def assignment(self) -> dict[tuple[str, int], tuple[int, ...]]:
        with self.admin() as admin:
            return {(t.name, p.partition): tuple(p.replicas)
                    for t in admin.topics().values() if not t.internal for p in t.partitions}

    def settled(self) -> bool:
        """Every partition led, its whole replica list in sync, nothing moving."""
        with self.admin() as admin:
            if admin.list_reassignments():
                return False
            return all(p.leader in p.replicas and set(p.isr) == set(p.replicas)
                       for t in admin.topics().values() for p in t.partitions)

    def create_topic(self, name: str, assignment: dict[int, list[int]]) -> None:
        client = coordinator.connect(self.url, timeout=10)
        try:
            Admin(client).create_topic(name, assignment=assignment)
        finally:
            client.close()
        wait_until(self.settled, timeout=60, interval=0.2, message=f"{name} online")


@pytest.fixture(scope="module")
def secure(zookeeper_server: Server, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[Secure]:
    directory: Path = tmp_path_factory.mktemp("cli-secure")
    material = make_material(directory / "tls")
    settings = coordinator_settings(zookeeper_server)
    secrets, outputs = scram_users(settings[1], directory, ("admin", "alice"))
    granted = partctl("acls", "add", "--topic", "*", "--operation", "Describe",
                      "--allow-principal", "User:alice", url=settings[1])
    outputs += [granted.stdout, granted.stderr]
    assert granted.returncode == 0, granted.stderr
    extra = (sasl_ssl_acl_settings(material, secrets["admin"])
             + "zookeeper.session.timeout.ms=6000\n")
    brokers: list[BrokerProcess] = []
    cluster = Secure(brokers, material, secrets, settings[1], directory, outputs)
    try:
        for broker_id in (1, 2, 3):
            brokers.append(start_broker(directory / f"b{broker_id}", zookeeper_server,
                                        broker_id=broker_id, settings=settings,
                                        extra=extra + f"broker.rack={RACK[broker_id]}\n"))
        cluster.create_topic("orders", {0: [1, 2], 1: [2, 1], 2: [1, 2], 3: [2, 1], 4: [1, 3],
                                        5: [3, 1]})
        cluster.create_topic("wide", {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]})
        producer = ck.Producer({"bootstrap.servers": cluster.bootstrap,
                                "security.protocol": "SASL_SSL",
                                "ssl.ca.location": str(material.ca),
                                "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "admin",
                                "sasl.password": secrets["admin"], "acks": "all"})
        for partition, count in ((0, 400), (1, 300), (2, 200), (3, 100), (4, 20), (5, 10)):
            for _ in range(count):
                producer.produce("orders", value=b"x" * 1000, partition=partition)
        assert producer.flush(60) == 0
        del producer
        yield cluster
    finally:
        for broker in brokers:
            broker.stop()
    for password in secrets.values():
        for broker in brokers:
            assert password not in broker.log()
        for line in outputs:
            assert password not in line


def one_line(code: int, out: str, err: str) -> str:
    """The error line of a failed command: exit status 1, nothing on stdout, one line."""
    assert (code, out) == (1, ""), (code, out, err)
    assert err.count("\n") == 1 and err.startswith("partctl: error: "), err
    assert "Traceback" not in err
    return err.removeprefix("partctl: error: ").rstrip("\n")


def throttles(secure: Secure, topics: list[str]) -> dict[tuple[str, str], dict[str, str]]:
    with secure.admin() as admin:
        configs = admin.describe_configs([("broker", str(b)) for b in (1, 2, 3)]
                                         + [("topic", t) for t in topics])
    return {r: {k: v for k, v in c.items() if k in THROTTLE_KEYS and v}
            for r, c in configs.items() if any(c.get(k) for k in THROTTLE_KEYS)}


# --- as admin --------------------------------------------------------------------------------


def test_a_snapshot_by_bootstrap_has_racks_and_sizes(secure: Secure, tmp_path: Path) -> None:
    path = tmp_path / "snap.json"
    code, out, err = secure.run("cluster", "snapshot", "-o", str(path))
    assert code == 0, err
    assert out.startswith("Wrote a snapshot of 3 brokers (3 racks) and 9 partitions (2 topics)")
    snap = json.loads(path.read_text())
    assert {b["id"]: b["rack"] for b in snap["brokers"]} == RACK
    sizes = {(p["topic"], p["partition"]): p.get("size_bytes") for p in snap["partitions"]}
    assert sizes[("orders", 0)] > sizes[("orders", 3)] > sizes[("orders", 5)] > 0, sizes


def test_generate_disk_execute_throttled_verify_and_list(secure: Secure, tmp_path: Path
                                                         ) -> None:
    plan = tmp_path / "plan.json"
    code, out, err = secure.run("reassign", "generate", "--goal", "disk", "-o", str(plan))
    assert code == 0, err
    assert "Disk goal" in out
    moves = {(e["topic"], e["partition"]): tuple(e["replicas"])
             for e in json.loads(plan.read_text())["partitions"]}
    assert moves, out  # broker 3 holds 30 KB beside 1.2 MB on each of 1 and 2

    code, out, err = secure.run("reassign", "execute", "--reassignment-json-file", str(plan),
                                "--throttle", "50MB/s", "--timeout", "120")
    assert code == 0, out + err
    assert "replication throttled to 50000000 B/s" in out
    current = secure.assignment()
    assert all(current[tp] == replicas for tp, replicas in moves.items()), current
    wait_until(secure.settled, timeout=60, interval=0.2, message="the moves in sync")

    code, out, err = secure.run("reassign", "verify", "--reassignment-json-file", str(plan))
    assert code == 0, out + err
    assert throttles(secure, ["orders", "wide"]) == {}  # none left behind
    code, out, err = secure.run("reassign", "list")
    assert code == 0, err
    assert out == "No partition reassignments found.\n", out


def test_demote_a_broker_dry_run_then_execute(secure: Secure) -> None:
    before = secure.assignment()
    code, out, err = secure.run("rebalance", "demote-brokers", "2")
    assert code == 0, err
    assert "demote-brokers 2 on bootstrap " in out and "Dry run: nothing was moved" in out
    assert secure.assignment() == before

    code, out, err = secure.run("rebalance", "demote-brokers", "2", "--execute",
                                "--timeout", "120")
    assert code == 0, out + err
    assert "Preferred leader election" in out

    def demoted() -> bool:
        with secure.admin() as admin:
            parts = [p for t in admin.topics().values() for p in t.partitions]
        return secure.settled() and all(p.leader != 2 and (2 not in p.replicas
                                                           or p.replicas[-1] == 2)
                                        for p in parts)

    wait_until(demoted, timeout=60, interval=0.2, message="leadership off broker 2")


def test_elect_preferred_by_bootstrap(secure: Secure) -> None:
    code, out, err = secure.run("elect", "preferred", "--topic", "wide")
    assert code == 0, out + err
    with secure.admin() as admin:
        wait_until(lambda: all(p.leader == p.replicas[0]
                               for p in admin.topics(["wide"])["wide"].partitions),
                   timeout=30, interval=0.2, message="preferred leaders of wide")


# --- bad input: one line, nothing moved ------------------------------------------------------


def test_a_wrong_password_is_one_line_without_it(secure: Secure, tmp_path: Path) -> None:
    before = secure.assignment()
    wrong = f"wrong-{uuid.uuid4().hex}"
    secure.secrets["wrong"] = wrong  # checked against every output at the end too
    for argv in (("cluster", "snapshot", "-o", str(tmp_path / "s.json")),
                 ("rebalance", "demote-brokers", "1", "--execute")):
        line = one_line(*secure.run(*argv, password=wrong))
        assert line.startswith("cannot describe the cluster: SCRAM-SHA-512 authentication "
                               "as 'admin' failed"), line
        assert wrong not in line
    assert secure.assignment() == before


def test_alice_without_acls_cannot_execute_a_plan(secure: Secure, tmp_path: Path) -> None:
    before = secure.assignment()
    plan = tmp_path / "plan.json"
    target = [3, 1] if before[("orders", 0)] != (3, 1) else [3, 2]
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "orders", "partition": 0, "replicas": target}]}))
    line = one_line(*secure.run("reassign", "execute", "--reassignment-json-file", str(plan),
                                user="alice"))
    assert line == ("cannot list the reassignments in progress: not authorized: "
                    "CLUSTER_AUTHORIZATION_FAILED on ListPartitionReassignments (the principal "
                    "needs DESCRIBE on the cluster)"), line
    assert secure.assignment() == before

    # with DESCRIBE on the cluster, the plan is read and checked; the first change is refused
    granted = partctl("acls", "add", "--cluster", "--operation", "Describe",
                      "--allow-principal", "User:alice", url=secure.url)
    assert granted.returncode == 0, granted.stderr

    def refused_later() -> str | None:
        line = one_line(*secure.run("reassign", "execute", "--reassignment-json-file",
                                    str(plan), "--throttle", "1MB/s", user="alice"))
        return None if "ListPartitionReassignments" in line else line

    line = wait_until(refused_later, timeout=30, interval=0.2, message="the ACL seen")
    assert line == ("cannot set the replication throttles: broker 1: "
                    "CLUSTER_AUTHORIZATION_FAILED; broker 2: CLUSTER_AUTHORIZATION_FAILED; "
                    "broker 3: CLUSTER_AUTHORIZATION_FAILED; topic orders: "
                    "TOPIC_AUTHORIZATION_FAILED (the principal needs ALTER_CONFIGS on the "
                    "cluster and on topic orders)"), line
    # with ALTER_CONFIGS (and DESCRIBE_CONFIGS) on the topic but not on the cluster, the
    # topic's throttled replicas are set and the brokers' rates refused: the topic's are taken
    # back, so that the refusal leaves no throttle behind
    for operation in ("AlterConfigs", "DescribeConfigs"):
        granted = partctl("acls", "add", "--topic", "orders", "--operation", operation,
                          "--allow-principal", "User:alice", url=secure.url)
        assert granted.returncode == 0, granted.stderr

    def partly_refused() -> str | None:
        line = one_line(*secure.run("reassign", "execute", "--reassignment-json-file",
                                    str(plan), "--throttle", "1MB/s", user="alice"))
        return None if "topic orders: TOPIC_AUTHORIZATION_FAILED" in line else line

    line = wait_until(partly_refused, timeout=30, interval=0.2, message="the topic ACLs seen")
    assert line == ("cannot set the replication throttles: broker 1: "
                    "CLUSTER_AUTHORIZATION_FAILED; broker 2: CLUSTER_AUTHORIZATION_FAILED; "
                    "broker 3: CLUSTER_AUTHORIZATION_FAILED (the principal needs ALTER_CONFIGS "
                    "on the cluster); what was set on topic orders was taken back"), line
    assert throttles(secure, ["orders"]) == {}
    line = one_line(*secure.run("reassign", "execute", "--reassignment-json-file", str(plan),
                                user="alice"))
    assert line == ("cannot submit the moves: not authorized: CLUSTER_AUTHORIZATION_FAILED on "
                    "AlterPartitionReassignments (the principal needs ALTER on the cluster)"), \
        line
    assert secure.assignment() == before
    assert throttles(secure, ["orders"]) == {}


@pytest.mark.parametrize("kind", ["silent", "refused"])
def test_an_unreachable_bootstrap_server_is_one_line_within_the_timeout(
        secure: Secure, tmp_path: Path, kind: str) -> None:
    listener = socket.create_server(("127.0.0.1", 0))  # accepts (its backlog), never answers
    try:
        port = listener.getsockname()[1] if kind == "silent" else free_port()
        started = time.monotonic()
        line = one_line(*secure.run("cluster", "snapshot", "-o", str(tmp_path / "s.json"),
                                    "--timeout", "2", bootstrap=f"127.0.0.1:{port}"))
        took = time.monotonic() - started
    finally:
        listener.close()
    reason = "no answer within 2s" if kind == "silent" else "connection refused"
    assert line == (f"cannot describe the cluster: cannot reach any bootstrap server "
                    f"(127.0.0.1:{port}: {reason})"), line
    assert took < 10, f"{took:.1f}s for --timeout 2"


def test_remove_brokers_that_cannot_be_removed(secure: Secure) -> None:
    before = secure.assignment()
    line = one_line(*secure.run("rebalance", "remove-brokers", "99", "--execute"))
    assert line == "cannot remove unknown broker(s) 99: the live brokers are 1,2,3"
    line = one_line(*secure.run("rebalance", "remove-brokers", "1,2", "--execute"))
    assert line.startswith("cannot remove broker(s) 1,2: topic "), line
    assert "but only 1 live broker(s) would hold it" in line, line
    assert secure.assignment() == before


def test_a_plan_naming_a_deleted_topic(secure: Secure, tmp_path: Path) -> None:
    secure.create_topic("doomed", {0: [1, 2], 1: [2, 3]})
    plan = tmp_path / "plan.json"
    code, out, err = secure.run("reassign", "generate", "--goal", "disk", "--brokers", "1,3",
                                "--topics-to-move-json-file", str(_topics(tmp_path, "doomed")),
                                "-o", str(plan))
    assert code == 0, err
    assert json.loads(plan.read_text())["partitions"], out
    client = coordinator.connect(secure.url, timeout=10)
    try:
        Admin(client).delete_topic("doomed")
    finally:
        client.close()
    wait_until(lambda: not any(t == "doomed" for t, _ in secure.assignment()), timeout=60,
               interval=0.2, message="doomed deleted")
    before = secure.assignment()
    line = one_line(*secure.run("reassign", "execute", "--reassignment-json-file", str(plan)))
    assert line.startswith("topic doomed does not exist (deleted since the plan was made?)"), \
        line
    assert line.endswith("nothing was moved"), line
    assert secure.assignment() == before


def _topics(tmp_path: Path, *names: str) -> Path:
    path = tmp_path / "topics.json"
    path.write_text(json.dumps({"version": 1, "topics": [{"topic": t} for t in names]}))
    return path


def test_no_secret_in_any_output(secure: Secure) -> None:
    assert secure.outputs
    for password in secure.secrets.values():
        for line in secure.outputs:
            assert password not in line
