"""The local server launcher (coordinator.servers): real ZooKeeper and etcd processes on
loopback, in a directory they own, stopped by PID."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

import coordinator
from coordinator import servers
from coordinator.servers import LocalServer, ServerNotInstalled, ServerStartError
from tests.servers import unavailable

KINDS = ["zookeeper", "etcd"]


def start(kind: str, **options: object) -> LocalServer:
    try:
        return servers.start_server(kind, **options)  # type: ignore[arg-type]
    except ServerNotInstalled as exc:
        unavailable(str(exc))


def _cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")


@pytest.mark.servers
@pytest.mark.parametrize("kind", KINDS)
def test_a_named_directory_is_kept_and_a_restart_finds_the_data(kind: str, tmp_path: Path) -> None:
    home = tmp_path / kind
    server = start(kind, directory=home)
    try:
        assert server.host == "127.0.0.1" and server.url("/x").startswith(f"{kind}://127.0.0.1:")
        c = coordinator.connect(server.url(), timeout=10)
        c.create("/kept", b"1", make_parents=True)
        c.close()
    finally:
        server.stop()
    assert not server.running() and home.is_dir()
    again = start(kind, directory=home)
    try:
        c = coordinator.connect(again.url(), timeout=10)
        assert c.get("/kept")[0] == b"1"
        c.close()
    finally:
        again.stop()


@pytest.mark.servers
@pytest.mark.parametrize("kind", KINDS)
def test_a_temporary_directory_goes_with_the_server(kind: str) -> None:
    server = start(kind, fsync=False)
    assert server.directory.is_dir()
    server.stop()
    server.stop()  # twice is harmless
    assert not server.directory.exists()


@pytest.mark.servers
def test_fsync_is_on_unless_turned_off(tmp_path: Path) -> None:
    zk = start("zookeeper", directory=tmp_path / "zk")
    try:
        assert "forceSync=yes" in (zk.directory / "zoo.cfg").read_text().splitlines()
        assert "Mode: standalone" in zk.four_letter("srvr")
    finally:
        zk.stop()
    durable = start("etcd", directory=tmp_path / "durable")
    fast = start("etcd", directory=tmp_path / "fast", fsync=False)
    try:
        assert "--unsafe-no-fsync" not in _cmdline(durable.pid)
        assert "--unsafe-no-fsync" in _cmdline(fast.pid)
    finally:
        durable.stop()
        fast.stop()


@pytest.mark.servers
@pytest.mark.parametrize("kind", KINDS)
def test_a_taken_port_is_a_start_error_with_the_log(kind: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ServerStartError) as e:
            start(kind, port=port, fsync=False, timeout=20)
    assert f"on port {port}" in str(e.value) and "\n" in str(e.value)


def test_a_missing_program_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ServerNotInstalled, match="/nonexistent/zookeeper.jar"):
        servers.start_zookeeper(classpath=["/nonexistent/zookeeper.jar"])
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ServerNotInstalled, match="apt-get install etcd-server"):
        servers.start_etcd()
    with pytest.raises(ServerNotInstalled, match="java"):
        servers.start_zookeeper()
