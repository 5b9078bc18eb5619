"""A locked-down etcd (issue 21, part 4): TLS with client certificates and user/password auth
enabled, the cluster's user holding a role limited to its key prefix. The product works with
that user; a user without the role, a wrong password or a client without a certificate get
nowhere, and no password is ever shown."""

from __future__ import annotations

import io
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from etcd3 import etcdrpc
from etcd3.etcdrpc import auth_pb2

import coordinator
from broker.cluster import launch_broker
from coordinator import ConnectionFailed, Credentials, NotAuthorized
from coordinator.codecs import TopicPartition
from coordinator.credentials import ENV_PASSWORD_FILE, ENV_USER
from coordinator.etcd_conn import Security, _Endpoint
from node.cluster import EmbeddedCluster
from partctl.cli import main
from tests.broker.processes import TEST_SETTINGS
from tests.broker.tls_material import Material, make_material
from tests.servers import Server, start_etcd

pytestmark = pytest.mark.servers

PREFIX = f"/secure-{uuid.uuid4().hex[:8]}"
PASSWORD = "etcd-s3cret-partctl"
ROOT_PASSWORD = "etcd-s3cret-root"
OTHER_PASSWORD = "etcd-s3cret-other"
SECRETS = (PASSWORD, ROOT_PASSWORD, OTHER_PASSWORD)


@dataclass(frozen=True)
class SecureEtcd:
    server: Server
    tls: Material

    def options(self, user: str = "partctl", password: str = PASSWORD, *,
                cert: bool = True) -> dict[str, object]:
        out: dict[str, object] = {"credentials": Credentials(user, password),
                                  "ca_file": str(self.tls.ca), "timeout": 5}
        if cert:
            out.update(cert_file=str(self.tls.client_cert), key_file=str(self.tls.client_key))
        return out

    def url(self, prefix: str = PREFIX) -> str:
        return self.server.url(prefix)


def _prefix_end(prefix: bytes) -> bytes:
    return prefix[:-1] + bytes([prefix[-1] + 1])


def _lock_down(server: Server, tls: Material) -> None:
    """What docs/security-coordinators.md tells an operator to do with etcdctl, over gRPC: a
    root user, a role for the prefix, its user, a user without it, then auth on."""
    security = Security(ca_file=str(tls.ca), cert_file=str(tls.client_cert),
                        key_file=str(tls.client_key))
    endpoint = _Endpoint(server.host, server.port, security, 10)
    auth = etcdrpc.AuthStub(endpoint.channel)
    try:
        prefix = PREFIX.encode()
        auth.RoleAdd(etcdrpc.AuthRoleAddRequest(name="root"), 10)
        auth.UserAdd(etcdrpc.AuthUserAddRequest(name="root", password=ROOT_PASSWORD), 10)
        auth.UserGrantRole(etcdrpc.AuthUserGrantRoleRequest(user="root", role="root"), 10)
        auth.RoleAdd(etcdrpc.AuthRoleAddRequest(name="partctl"), 10)
        auth.RoleGrantPermission(etcdrpc.AuthRoleGrantPermissionRequest(
            name="partctl", perm=auth_pb2.Permission(
                permType=auth_pb2.Permission.READWRITE, key=prefix, range_end=_prefix_end(prefix))),
            10)
        auth.UserAdd(etcdrpc.AuthUserAddRequest(name="partctl", password=PASSWORD), 10)
        auth.UserGrantRole(etcdrpc.AuthUserGrantRoleRequest(user="partctl", role="partctl"), 10)
        auth.UserAdd(etcdrpc.AuthUserAddRequest(name="other", password=OTHER_PASSWORD), 10)
        auth.AuthEnable(etcdrpc.AuthEnableRequest(), 10)
    finally:
        endpoint.close()


@pytest.fixture(scope="module")
def secure_etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureEtcd]:
    tls = make_material(tmp_path_factory.mktemp("etcd-tls"))
    server = start_etcd(tls=(tls.broker_cert, tls.broker_key, tls.ca))
    try:
        _lock_down(server, tls)
        yield SecureEtcd(server, tls)
    finally:
        server.stop()


def test_the_product_works_with_the_clusters_user(secure_etcd: SecureEtcd,
                                                  tmp_path: Path) -> None:
    cluster = EmbeddedCluster(1, url=secure_etcd.url(), root=tmp_path / "logs",
                              connect_options=secure_etcd.options())
    with cluster.start(timeout=30):
        cluster.admin.create_topic("t", 1, 1)
        state = cluster.wait_for_leader(TopicPartition("t", 0), timeout=30)
        assert state.leader == 1
        assert not any(s in repr(cluster._client) for s in SECRETS)


def test_a_bulk_read_scans_over_tls_with_the_users_token(secure_etcd: SecureEtcd) -> None:
    """Enough states for the range scan (its responses taken as bytes) through TLS and the
    token the interceptor adds."""
    from coordinator import Create
    from coordinator.etcd import SCAN_MIN

    client = coordinator.connect(secure_etcd.url(), **secure_etcd.options())
    try:
        n = SCAN_MIN + 100
        client.ensure_path("/bulk")
        client.write_many([Create(path=f"/bulk/{i:05d}", data=b"%d" % i) for i in range(n)])
        got = client.get_many([f"/bulk/{i:05d}" for i in range(n)])
        assert [g[0] for g in got if g is not None] == [b"%d" % i for i in range(n)]
    finally:
        client.close()


def test_a_user_without_the_role_cannot_touch_the_prefix(secure_etcd: SecureEtcd) -> None:
    with pytest.raises(NotAuthorized, match="permission denied") as info:
        coordinator.connect(secure_etcd.url(), **secure_etcd.options("other", OTHER_PASSWORD))
    assert not any(s in str(info.value) for s in SECRETS)
    # nor can the cluster's user write outside its prefix
    client = coordinator.connect(secure_etcd.url(), **secure_etcd.options())
    try:
        client.create("/mine", b"ok")
        assert client.get("/mine")[0] == b"ok"
    finally:
        client.close()
    with pytest.raises(NotAuthorized):
        coordinator.connect(secure_etcd.url("/elsewhere"), **secure_etcd.options())
    # and a raw client with the role-less user is refused a write in the prefix
    security = Security(ca_file=str(secure_etcd.tls.ca),
                        cert_file=str(secure_etcd.tls.client_cert),
                        key_file=str(secure_etcd.tls.client_key),
                        credentials=Credentials("other", OTHER_PASSWORD))
    endpoint = _Endpoint(secure_etcd.server.host, secure_etcd.server.port, security, 5)
    try:
        with pytest.raises(grpc.RpcError) as denied:
            endpoint.kvstub.Put(etcdrpc.PutRequest(key=f"{PREFIX}/brokers/ids/9".encode(),
                                                   value=b"evil"), 5)
        assert denied.value.code() == grpc.StatusCode.PERMISSION_DENIED
    finally:
        endpoint.close()


def test_a_wrong_password_is_one_clear_error(secure_etcd: SecureEtcd) -> None:
    with pytest.raises(NotAuthorized, match="authentication failed") as info:
        coordinator.connect(secure_etcd.url(), **secure_etcd.options(password="wrong-one"))
    assert "wrong-one" not in str(info.value)


def test_no_client_certificate_or_no_tls_gets_no_connection(secure_etcd: SecureEtcd) -> None:
    with pytest.raises(ConnectionFailed):
        coordinator.connect(secure_etcd.url(), **{**secure_etcd.options(cert=False),
                                                  "timeout": 1})
    with pytest.raises(ConnectionFailed):
        coordinator.connect(secure_etcd.url(), credentials=Credentials("partctl", PASSWORD),
                            timeout=1)


def test_the_tools_take_the_user_and_tls_files_from_the_environment(
        secure_etcd: SecureEtcd, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    password_file = tmp_path / "etcd-password"
    password_file.write_text(PASSWORD + "\n")
    url = secure_etcd.url(f"{PREFIX}/tools")
    for name, path in (("CAFILE", secure_etcd.tls.ca), ("CERTFILE", secure_etcd.tls.client_cert),
                       ("KEYFILE", secure_etcd.tls.client_key)):
        monkeypatch.setenv(f"PARTCTL_ETCD_SSL_{name}", str(path))
    monkeypatch.setenv(ENV_USER, "partctl")
    monkeypatch.setenv(ENV_PASSWORD_FILE, str(password_file))
    alice = tmp_path / "alice-password"
    alice.write_text("alice-pw\n")
    texts = []
    for argv in (["users", "create", "alice", "--mechanism", "SCRAM-SHA-512",
                  "--password-file", str(alice)],
                 ["users", "describe"]):
        out, err = io.StringIO(), io.StringIO()
        code = main([*argv, "--coordinator", url, "--timeout", "5"], out=out, err=err)
        assert code == 0, err.getvalue()
        texts.append(out.getvalue() + err.getvalue())
    assert "alice" in texts[-1] and "alice-pw" not in texts[-1]
    monkeypatch.setenv(ENV_USER, "other")
    monkeypatch.setenv(ENV_PASSWORD_FILE, str(tmp_path / "missing"))
    out, err = io.StringIO(), io.StringIO()
    assert main(["topics", "list", "--coordinator", url], out=out, err=err) == 1
    assert err.getvalue().count("\n") == 1 and "cannot read" in err.getvalue()
    assert not any(s in "".join(texts) + err.getvalue() for s in SECRETS)


def test_a_token_is_renewed_before_etcd_lets_it_expire() -> None:
    """etcd drops a token unused for --auth-token-ttl seconds (300 by default, 1 here): a
    session idle for longer must not fail its next call."""
    server = start_etcd(flags=["--auth-token-ttl", "1"])
    try:
        endpoint = _Endpoint(server.host, server.port, Security(), 10)
        auth = etcdrpc.AuthStub(endpoint.channel)
        try:
            auth.UserAdd(etcdrpc.AuthUserAddRequest(name="root", password=ROOT_PASSWORD), 10)
            auth.UserGrantRole(etcdrpc.AuthUserGrantRoleRequest(user="root", role="root"), 10)
            auth.AuthEnable(etcdrpc.AuthEnableRequest(), 10)
        finally:
            endpoint.close()
        client = coordinator.connect(server.url("/p"), credentials=Credentials(
            "root", ROOT_PASSWORD), token_max_age=0.5, session_timeout=30, timeout=10)
        try:
            client.create("/a", b"1")
            time.sleep(2.5)  # idle past the TTL: only time passing lets a token expire
            assert client.get("/a")[0] == b"1"
        finally:
            client.close()
    finally:
        server.stop()


def test_an_unreadable_tls_file_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConnectionFailed, match="cannot read the etcd TLS file .*missing.pem"):
        coordinator.connect("etcd://127.0.0.1:1/p", ca_file=str(tmp_path / "missing.pem"),
                            timeout=1)


def test_broker_processes_take_the_etcd_keys_from_server_properties(
        secure_etcd: SecureEtcd, tmp_path: Path) -> None:
    """etcd.user, etcd.password.file and etcd.ssl.* reach a real broker process: with the
    right password it serves; with a wrong one it exits with one clear line."""
    tls = secure_etcd.tls

    def keys(password: str, name: str) -> str:
        path = tmp_path / f"{name}.password"
        path.write_text(password + "\n")
        return (f"{TEST_SETTINGS}etcd.user=partctl\netcd.password.file={path}\n"
                f"etcd.ssl.cafile={tls.ca}\netcd.ssl.certfile={tls.client_cert}\n"
                f"etcd.ssl.keyfile={tls.client_key}\n")

    url = secure_etcd.url(f"{PREFIX}/processes")
    good = launch_broker(tmp_path / "b1", 1, url, extra=keys(PASSWORD, "good"))
    try:
        good.wait_serving(90)
        bad = launch_broker(tmp_path / "b2", 2, url, extra=keys("wrong-password", "bad"))
        try:
            status = bad.wait(60)
        finally:
            bad.kill()
        log = bad.log()
        errors = [line for line in log.splitlines() if line.startswith("partctl: error:")]
        assert status == 1 and len(errors) == 1, log
        assert "authentication failed" in errors[0] and "Traceback" not in log
        assert "wrong-password" not in log
    finally:
        good.stop()
    assert not any(s in good.log() for s in SECRETS)
