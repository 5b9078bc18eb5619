"""``partctl ui``'s application over a cluster in this process (three participants and their
controller on a memory coordinator): actions only when allowed, from the page's own origin and
by a user of the cluster (its SCRAM credentials); what comes from the cluster escaped; the
plan's picture; and the command itself, which serves until SIGTERM and exits 0."""

from __future__ import annotations

import base64
import io
import signal
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import coordinator
from broker.security.credentials import upsert
from coordinator.admin import Admin
from coordinator.codecs import BrokerInfo, TopicPartition
from kafkaclient.security.scram import make_credential
from partctl.cli import main
from partctl.cluster_view import read_cluster
from partctl.webui import ClusterPage
from partctl.webui.access import LoginThrottle
from tests.cli.memory_cluster import Cluster
from tests.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1:8080"
SAME_ORIGIN = {"host": HOST, "origin": f"http://{HOST}"}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    c = Cluster()
    upsert(c.md, "operator", "SCRAM-SHA-256", make_credential("SCRAM-SHA-256", "s3cret",
                                                              iterations=4096))
    yield c
    c.close()


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_actions_need_the_option_the_page_s_origin_and_a_user_of_the_cluster(
        cluster: Cluster) -> None:
    read_only = ClusterPage(cluster.client)
    login = {**SAME_ORIGIN, "authorization": basic("operator", "s3cret")}
    assert read_only.handle("POST", "/actions/elect-preferred", login).status == 405
    assert b"<form" not in read_only.handle("GET", "/", {}).body

    app = ClusterPage(cluster.client, allow_actions=True, cache_seconds=0,
                      allow_if_no_acls=True, throttle=LoginThrottle(base=0.0))
    post = "/actions/elect-preferred"
    for headers in ({"host": HOST, "authorization": login["authorization"]},  # no Origin
                    {**login, "origin": "http://evil.example"},
                    {**login, "origin": f"https://{HOST}"},
                    {"host": HOST, "referer": "http://evil.example/", **{
                        "authorization": login["authorization"]}}):
        assert app.handle("POST", post, headers).status == 403, headers
    for authorization in (None, basic("operator", "wrong"), basic("nobody", "s3cret"),
                          "Basic !!!", "Bearer x"):
        headers = dict(SAME_ORIGIN, **({"authorization": authorization}
                                       if authorization else {}))
        refused = app.handle("POST", post, headers)
        assert refused.status == 401, authorization
        assert refused.headers["WWW-Authenticate"].startswith("Basic realm=")

    done = app.handle("POST", post, {"host": HOST, "referer": f"http://{HOST}/",
                                     "authorization": login["authorization"]})
    assert done.status == 200
    assert b"Preferred elections requested for 3 partitions." in done.body
    wait_until(lambda: cluster.md.preferred_election() is None, timeout=15,
               message="the controller to run the elections")
    for topic, said in ((b"no-such", b"does not exist"), (b"a%2Fb", b"illegal characters")):
        refused = app.handle("POST", post, login, b"topic=" + topic)
        assert refused.status == 409 and said in refused.body, refused.body

    Admin(cluster.client).reassign({TopicPartition("t", 1): (1, 2)})
    wait_until(lambda: read_cluster(cluster.md).reassignments, timeout=15)
    assert b'action="/actions/cancel-reassignment"' in app.handle("GET", "/", {}).body
    cancelled = app.handle("POST", "/actions/cancel-reassignment", login)
    assert cancelled.status == 200 and b"Cancelled 1 pending move(s)" in cancelled.body
    wait_until(lambda: not read_cluster(cluster.md).reassignments, timeout=15,
               message="the reassignment reverted")
    assert read_cluster(cluster.md).partitions[1].replicas == (2, 3)


def test_a_slow_cluster_is_read_again_in_the_background(
        cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past SLOW_READ (0 here: every read is slow), a page is served from the last view while a
    thread reads the cluster again; the next page has the new one."""
    from partctl.webui import server

    monkeypatch.setattr(server, "SLOW_READ", 0.0)
    now = [0.0]
    app = ClusterPage(cluster.client, cache_seconds=1, refresh_in_background=True,
                      clock=lambda: now[0])
    first = app.view()
    now[0] = 0.5
    assert app.view() is first  # fresh enough
    now[0] = 2.0
    assert app.view() is first  # old: served, and read again meanwhile
    wait_until(lambda: app.view() is not first, timeout=15, message="the view read again")
    assert app.view().taken_at > first.taken_at
    app.close()


def test_what_comes_from_the_cluster_is_escaped(cluster: Cluster, tmp_path: Path) -> None:
    client = coordinator.connect(cluster.url)
    try:
        from coordinator.metadata import MetadataClient

        MetadataClient(client).register_broker(BrokerInfo(
            id=9, host="<i>h</i>", port=1, rack='"><script>alert(1)</script>'))
        log = tmp_path / "state-change.log"
        log.write_text("".join(f"line {i}\n" for i in range(99)) + "<b>moved</b> & gone\n"
                       + '{"time": "2026-11-24T11:15:13.235Z", "level": "INFO", "logger": '
                         '"state.change.logger", "message": "[Controller id=1 epoch=1] <i>"}\n')
        app = ClusterPage(cluster.client, state_change_log=str(log), cache_seconds=0)
        body = app.handle("GET", "/", {}).body.decode()
        assert "<script>" not in body and "<i>h" not in body and "<b>moved" not in body
        assert "&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in body
        assert "&lt;b&gt;moved&lt;/b&gt; &amp; gone" in body
        assert "2026-11-24T11:15:13.235Z [Controller id=1 epoch=1] &lt;i&gt;" in body  # json
        assert "line 51\n" in body and "line 50\n" not in body  # the last 50 lines
        missing = app.handle("GET", "/topic?name=%3Cscript%3E", {})
        assert missing.status == 404 and b"<script>" not in missing.body
    finally:
        client.close()
    wait_until(lambda: 9 not in read_cluster(cluster.md).live_brokers, timeout=15)


def test_the_plan_before_and_after(cluster: Cluster) -> None:
    plan = ('{"version": 1, "partitions": [{"topic": "t", "partition": 0, '
            '"replicas": [3, 2]}]}')
    app = ClusterPage(cluster.client, plan=plan)
    page = app.handle("GET", "/plan", {})
    assert page.status == 200 and b'<img src="/plot/plan.png"' in page.body
    picture = app.handle("GET", "/plot/plan.png", {})
    assert picture.content_type == "image/png" and picture.body.startswith(b"\x89PNG")
    wrong = ClusterPage(cluster.client, plan=plan.replace("[3, 2]", "[7, 2]"))
    assert b"7" in wrong.handle("GET", "/plan", {}).body
    assert b"<img" not in wrong.handle("GET", "/plan", {}).body


def test_allow_actions_on_a_cluster_without_users_is_refused() -> None:
    out, err = io.StringIO(), io.StringIO()
    url = f"memory://ui-{uuid.uuid4().hex[:8]}"
    code = main(["ui", "--coordinator", url, "--allow-actions", "--listen", "127.0.0.1:0"],
                out=out, err=err)
    assert (code, out.getvalue()) == (1, "")
    assert err.getvalue() == ("partctl: error: --allow-actions: the cluster has no user to log "
                              "in as; create one with partctl users create\n")


@pytest.mark.processes
def test_the_command_serves_until_sigterm() -> None:
    url = f"memory://ui-{uuid.uuid4().hex[:8]}"  # empty: the process has its own memory
    proc = subprocess.Popen([sys.executable, "-m", "partctl", "ui", "--coordinator", url,
                             "--listen", "127.0.0.1:0", "--refresh", "0"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("partctl ui: serving http://127.0.0.1:"), line
        address = line.split()[3]
        with urllib.request.urlopen(address, timeout=10) as response:
            page = response.read().decode()
            assert response.headers["X-Frame-Options"] == "DENY"
        assert "Brokers: 0 live of 0" in page and "http-equiv" not in page
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert (proc.returncode, out, err) == (0, "partctl ui: stopped\n", "")


@pytest.mark.servers
def test_the_groups_page_shows_each_group_s_lag(zookeeper_server, tmp_path: Path
                                                ) -> None:  # noqa: ANN001
    """A broker process: 5 records in two partitions, a group that committed 2 and 0 of them."""
    import kafka

    from kafkaclient.groups import GroupAdmin
    from tests.broker.processes import create_topic, start_broker

    broker = start_broker(tmp_path, zookeeper_server)
    client = None
    try:
        create_topic(broker, "orders", 2)
        host, port = broker.address
        producer = kafka.KafkaProducer(bootstrap_servers=f"{host}:{port}", acks="all")
        for i in range(5):
            producer.send("orders", b"%d" % i, partition=i % 2)
        producer.flush()
        producer.close()
        with GroupAdmin([broker.address], timeout=10) as admin:
            admin.commit("billing", {TopicPartition("orders", 0): 2,
                                     TopicPartition("orders", 1): 0})
        client = coordinator.connect(broker.coordinator_url, timeout=10)
        page = ClusterPage(client, timeout=10).handle("GET", "/groups", {}).body.decode()
        # orders-0 holds 3 records (2 committed), orders-1 2 (0 committed): 1 + 2 behind
        assert "<tr><td>billing</td><td>Empty</td><td class=n>2</td><td class=n>3</td></tr>" \
            in page, page
    finally:
        if client is not None:
            client.close()
        assert broker.stop() == 0, broker.log()[-3000:]
