"""A locked-down ZooKeeper (issue 21, part 4): brokers, the controller and partctl's tools
authenticate with a digest identity and create nodes with Kafka's ``zookeeper.set.acl`` rule, so
a client without that identity may read the metadata but change none of it, and may not even
read SCRAM credentials or ACLs."""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo import exceptions as kx
from kazoo.client import KazooClient
from kazoo.security import OPEN_ACL_UNSAFE

import coordinator
from coordinator import Credentials, NotAuthorized
from coordinator.codecs import TopicPartition
from coordinator.credentials import ENV_PASSWORD_FILE, ENV_USER
from node.cluster import EmbeddedCluster
from partctl.cli import main
from tests.servers import Server

pytestmark = pytest.mark.servers

SECRET = "zk-s3cret-for-the-test"


@pytest.fixture
def secure_cluster(zookeeper_server: Server, tmp_path: Path) -> Iterator[EmbeddedCluster]:
    """One in-process broker (and controller) on a fresh chroot, every session authenticated
    and creating nodes with secure ACLs; a topic ``t`` with a leader."""
    url = zookeeper_server.url(f"/secure-{uuid.uuid4().hex[:10]}")
    options = {"credentials": Credentials("partctl", SECRET), "set_acl": True, "timeout": 10}
    cluster = EmbeddedCluster(1, url=url, root=tmp_path / "logs", connect_options=options)
    with cluster.start(timeout=30):
        cluster.admin.create_topic("t", 1, 1)
        cluster.wait_for_leader(TopicPartition("t", 0), timeout=30)
        yield cluster


@pytest.fixture
def outsider(zookeeper_server: Server, secure_cluster: EmbeddedCluster) -> Iterator[KazooClient]:
    """A plain kazoo client on the cluster's chroot, without credentials."""
    hosts = secure_cluster.url.removeprefix("zookeeper://")
    client = KazooClient(hosts=hosts, timeout=10)
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()


def _cli(argv: list[str], url: str, monkeypatch: pytest.MonkeyPatch, password_file: Path
         ) -> tuple[int, str, str]:
    monkeypatch.setenv(ENV_USER, "partctl")
    monkeypatch.setenv(ENV_PASSWORD_FILE, str(password_file))
    out, err = io.StringIO(), io.StringIO()
    code = main([*argv, "--coordinator", url], out=out, err=err)
    monkeypatch.delenv(ENV_USER)
    monkeypatch.delenv(ENV_PASSWORD_FILE)
    return code, out.getvalue(), err.getvalue()


def test_an_unauthenticated_client_reads_but_cannot_change_the_cluster(
        secure_cluster: EmbeddedCluster, outsider: KazooClient) -> None:
    assert outsider.get("/brokers/topics/t")[0]  # world may read the metadata
    for path in ("/brokers/ids/1", "/brokers/topics/t", "/controller_epoch", "/controller",
                 "/brokers/topics/t/partitions/0/state"):
        with pytest.raises(kx.NoAuthError):
            outsider.set(path, b"evil")
    for path in ("/brokers/ids/9", "/brokers/topics/evil", "/admin/reassign_partitions",
                 "/admin/delete_topics/t", "/admin/preferred_replica_election", "/controller2"):
        with pytest.raises(kx.NoAuthError):
            outsider.create(path, b"{}")
    for path in ("/controller", "/admin/delete_topics", "/brokers/ids/1"):
        with pytest.raises(kx.NoAuthError):
            outsider.delete(path)
    with pytest.raises(kx.NoAuthError):
        outsider.set_acls("/brokers", OPEN_ACL_UNSAFE)  # nor open the node to everyone
    # the cluster itself still works: the controller led the topic, a change still applies
    assert secure_cluster.controller()[0] == 1


def test_scram_credentials_and_acls_are_hidden_and_the_tools_still_work(
        secure_cluster: EmbeddedCluster, outsider: KazooClient, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    password_file = tmp_path / "zk-password"
    password_file.write_text(SECRET + "\n")
    user_password = tmp_path / "alice-password"
    user_password.write_text("alice-pw\n")
    url = secure_cluster.url
    outputs = []
    for argv in (["users", "create", "alice", "--mechanism", "SCRAM-SHA-512",
                  "--password-file", str(user_password)],
                 ["acls", "add", "--allow-principal", "User:alice", "--operation", "Read",
                  "--topic", "t"],
                 ["topics", "create", "--topic", "u", "--partitions", "1",
                  "--replication-factor", "1"],
                 ["topics", "list"]):
        code, out, err = _cli(argv, url, monkeypatch, password_file)
        assert code == 0, f"{argv}: {err}"
        outputs.append(out + err)
    assert "u" in outputs[-1].split() and "t" in outputs[-1].split()
    assert not any(SECRET in text for text in outputs)

    for path in ("/config/users", "/config/users/alice", "/kafka-acl", "/kafka-acl/Topic/t",
                 "/kafka-acl-changes"):
        with pytest.raises(kx.NoAuthError):
            outsider.get(path)
    with pytest.raises(kx.NoAuthError):
        outsider.get_children("/config/users")
    assert outsider.get("/config/topics/u")[0]  # an ordinary config stays readable

    # the same tool without the credentials is refused with one clear line, nothing written
    out, err = io.StringIO(), io.StringIO()
    code = main(["topics", "create", "--topic", "v", "--partitions", "1",
                 "--replication-factor", "1", "--coordinator", url], out=out, err=err)
    assert code == 1 and "not authorized" in err.getvalue()
    assert len(err.getvalue().splitlines()) == 1
    assert outsider.exists("/brokers/topics/v") is None


def test_set_acl_without_credentials_is_refused(zookeeper_server: Server) -> None:
    with pytest.raises(NotAuthorized, match="needs coordinator credentials"):
        coordinator.connect(zookeeper_server.url("/no-creds"), set_acl=True, timeout=10)


def test_no_log_line_shows_the_password(zookeeper_server: Server,
                                        caplog: pytest.LogCaptureFixture) -> None:
    """kazoo logs every request it sends at DEBUG, the digest login among them."""
    url = zookeeper_server.url("/logged").replace("zookeeper://", f"zookeeper://u:{SECRET}@")
    with caplog.at_level(1), caplog.at_level(1, logger="kazoo"):
        client = coordinator.connect(url, timeout=10)
        try:
            client.ensure_path("/x")
        finally:
            client.close()
    assert "Auth(scheme='digest', auth='***')" in caplog.text
    assert SECRET not in caplog.text and SECRET not in repr(client)
