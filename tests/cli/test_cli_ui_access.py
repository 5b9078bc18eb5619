"""``partctl ui``'s actions under the cluster's ACLs, its Host allow-list and its slowing of
failed logins, over real HTTP on loopback against the page served for a cluster in this process
(three participants and their controller on a memory coordinator): an action needs Alter on
the Cluster as the Kafka API doing the same does (super users and
``allow.everyone.if.no.acl.found`` as the brokers have them); a request naming another host
is refused (DNS rebinding); each failed login from an address answers later than the one before,
while another address logs in at once."""

from __future__ import annotations

import base64
import http.client
import threading
import time
from collections.abc import Iterator

import pytest

from broker.security.acl_store import add_acls, delete_acls
from broker.security.acls import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclEntry,
    Operation,
    Permission,
    ResourcePattern,
    ResourceType,
)
from broker.security.credentials import upsert
from coordinator.admin import Admin
from coordinator.codecs import TopicPartition
from kafkaclient.security.scram import make_credential
from partctl.cluster_view import read_cluster
from partctl.webui import ClusterPage, serve
from partctl.webui.access import LoginThrottle
from tests.cli.memory_cluster import Cluster
from tests.waiting import wait_until

USERS = {"alice": "alice-pw", "ops": "ops-pw", "root": "root-pw"}
CLUSTER = ResourcePattern(resource_type=ResourceType.CLUSTER, name=CLUSTER_NAME)
ELECT = "/actions/elect-preferred"
CANCEL = "/actions/cancel-reassignment"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    c = Cluster()
    for user, password in USERS.items():
        upsert(c.md, user, "SCRAM-SHA-512", make_credential("SCRAM-SHA-512", password))
    yield c
    c.close()


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def call(port: int, method: str, path: str, *, host: str | None = None,
         user: str | None = None, password: str | None = None,
         source: str = "127.0.0.1") -> tuple[int, str]:
    """One request to the page on 127.0.0.1:``port`` from ``source``, as a form on the page
    sends it (its Origin) unless another ``host`` is named: (status, body)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30,
                                      source_address=(source, 0))
    try:
        named = host if host is not None else f"127.0.0.1:{port}"
        headers = {"Host": named, "Origin": f"http://{named}",
                   "Content-Type": "application/x-www-form-urlencoded"}
        if user is not None:
            headers["Authorization"] = basic(user, password or USERS[user])
        conn.request(method, path, body=b"" if method == "POST" else None, headers=headers)
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()


@pytest.fixture
def served(cluster: Cluster) -> Iterator[tuple[ClusterPage, int]]:
    app = ClusterPage(cluster.client, allow_actions=True, cache_seconds=0,
                      super_users=frozenset({"User:root"}),
                      throttle=LoginThrottle(base=0.0))
    server = serve(app, "127.0.0.1", 0, allowed_hosts=[])
    try:
        yield app, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        app.close()


def binding(principal: str, operation: Operation, permission: Permission = Permission.ALLOW,
            host: str = "*") -> AclBinding:
    return AclBinding(pattern=CLUSTER, entry=AclEntry(principal=principal, host=host,
                                                      operation=operation,
                                                      permission=permission))


def test_an_action_needs_alter_on_the_cluster(cluster: Cluster,
                                              served: tuple[ClusterPage, int]) -> None:
    app, port = served
    add_acls(cluster.client, [binding("User:ops", Operation.ALTER)])
    try:
        status, body = call(port, "POST", ELECT, user="alice")
        assert status == 403, body
        assert "User:alice may not do this" in body and "ElectLeaders" in body
        assert "Alter on the Cluster" in body
        status, body = call(port, "POST", CANCEL, user="alice")
        assert status == 403 and "AlterPartitionReassignments" in body, body
        assert cluster.md.preferred_election() is None  # nothing was requested

        status, body = call(port, "POST", ELECT, user="ops")
        assert status == 200 and "Preferred elections requested for 3 partitions." in body
        wait_until(lambda: cluster.md.preferred_election() is None, timeout=15,
                   message="the controller to run the elections")
        status, body = call(port, "POST", ELECT, user="root")  # a super user, no ACL
        assert status == 200, body
        wait_until(lambda: cluster.md.preferred_election() is None, timeout=15)

        Admin(cluster.client).reassign({TopicPartition("t", 1): (1, 2)})
        wait_until(lambda: read_cluster(cluster.md).reassignments, timeout=15)
        assert call(port, "POST", CANCEL, user="alice")[0] == 403
        status, body = call(port, "POST", CANCEL, user="ops")
        assert status == 200 and "Cancelled 1 pending move(s)" in body, body
        wait_until(lambda: not read_cluster(cluster.md).reassignments, timeout=15)

        add_acls(cluster.client, [binding("User:ops", Operation.ALTER, Permission.DENY,
                                          host="127.0.0.1")])
        assert call(port, "POST", ELECT, user="ops")[0] == 403  # a DENY from its host
    finally:
        delete_acls(cluster.client, AclBindingFilter())


def test_without_acls_allow_everyone_if_no_acl_found_decides(
        cluster: Cluster, served: tuple[ClusterPage, int]) -> None:
    app, port = served
    assert call(port, "POST", ELECT, user="alice")[0] == 403  # Kafka's default: false
    app.allow_if_no_acls = True
    status, body = call(port, "POST", ELECT, user="alice")
    assert status == 200, body
    wait_until(lambda: cluster.md.preferred_election() is None, timeout=15)


def test_a_request_for_another_host_is_refused(cluster: Cluster,
                                               served: tuple[ClusterPage, int]) -> None:
    app, port = served
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}"):
        assert call(port, "GET", "/", host=host)[0] == 200, host
    for host in (f"rebound.example:{port}", "127.0.0.1", f"127.0.0.1:{port + 1}",
                 f"127.0.0.1:{port}@x", ""):
        status, body = call(port, "GET", "/", host=host)
        assert status == 421 and "does not answer for that host" in body, host
    assert call(port, "POST", ELECT, host=f"rebound.example:{port}", user="root")[0] == 421

    server = serve(app, "127.0.0.1", 0, allowed_hosts=["ui.example", "other.example:8443"])
    try:
        other = server.server_address[1]
        assert call(other, "GET", "/", host=f"ui.example:{other}")[0] == 200
        assert call(other, "GET", "/", host="other.example:8443")[0] == 200
        assert call(other, "GET", "/", host=f"127.0.0.1:{other}")[0] == 421
    finally:
        server.shutdown()
        server.server_close()


def test_failed_logins_from_one_address_are_slowed(cluster: Cluster) -> None:
    base = 0.4
    app = ClusterPage(cluster.client, allow_actions=True, cache_seconds=0,
                      super_users=frozenset({"User:root"}),
                      throttle=LoginThrottle(base=base, most=4 * base))
    server = serve(app, "127.0.0.1", 0, allowed_hosts=[])
    port = server.server_address[1]
    try:
        took = []
        for _ in range(2):
            start = time.monotonic()
            status, _ = call(port, "POST", ELECT, user="root", password="wrong")
            took.append(time.monotonic() - start)
            assert status == 401
        assert took[0] >= base and took[1] >= 2 * base, took

        # a third failure from 127.0.0.1 is slower still; 127.0.0.2 logs in meanwhile
        slow: list[float] = []
        thread = threading.Thread(target=lambda: slow.append(_timed(
            lambda: call(port, "POST", ELECT, user="root", password="wrong"))))
        thread.start()
        wait_until(lambda: _held(app, "127.0.0.1"), timeout=10,
                   message="the third failure being slowed")
        start = time.monotonic()
        status, body = call(port, "POST", ELECT, user="root", source="127.0.0.2")
        other = time.monotonic() - start
        thread.join(30)
        assert status == 200, body
        assert slow and slow[0] >= 4 * base, slow
        assert other < 2 * base, other  # not held up by the other address
        wait_until(lambda: cluster.md.preferred_election() is None, timeout=15)
        # no credentials at all is no failed login: answered at once with the challenge
        start = time.monotonic()
        assert call(port, "POST", ELECT)[0] == 401
        assert time.monotonic() - start < base
    finally:
        server.shutdown()
        server.server_close()
        app.close()


def _held(app: ClusterPage, address: str) -> bool:
    client = app.throttle._clients.get(address)
    return client is not None and client.lock.locked()


def _timed(action) -> float:  # type: ignore[no-untyped-def]
    start = time.monotonic()
    action()
    return time.monotonic() - start


@pytest.mark.processes
def test_the_command_answers_only_for_its_own_hosts() -> None:
    """``partctl ui`` itself: by default its listening address, localhost and 127.0.0.1 at its
    port; ``--allowed-host`` names others (and only those)."""
    import subprocess
    import sys
    import uuid
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    for extra, good, bad in (([], "localhost", "rebound.example"),
                             (["--allowed-host", "ui.example"], "ui.example", "127.0.0.1")):
        url = f"memory://ui-{uuid.uuid4().hex[:8]}"
        proc = subprocess.Popen([sys.executable, "-m", "partctl", "ui", "--coordinator", url,
                                 "--listen", "127.0.0.1:0", "--refresh", "0", *extra],
                                cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.startswith("partctl ui: serving http://127.0.0.1:"), line
            port = int(line.split()[3].rstrip("/").rpartition(":")[2])
            assert call(port, "GET", "/", host=f"{good}:{port}")[0] == 200
            assert call(port, "GET", "/", host=f"{bad}:{port}")[0] == 421
        finally:
            proc.terminate()
            proc.communicate(timeout=30)
