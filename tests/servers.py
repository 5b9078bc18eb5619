"""Real ZooKeeper and etcd servers for the tests: started on free loopback ports in temporary
directories, once per test session, stopped by PID.

Where a binary is missing the tests that need it skip with a loud reason, unless
``PARTCTL_REQUIRE_SERVERS=1`` (CI), where a missing server fails the run.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ZK_CLASSPATH = ["/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-simple.jar"]


def require_servers() -> bool:
    return os.environ.get("PARTCTL_REQUIRE_SERVERS") == "1"


def unavailable(reason: str) -> None:
    """Skip loudly, or fail when the servers are required."""
    if require_servers():
        pytest.fail(f"PARTCTL_REQUIRE_SERVERS=1 but {reason}", pytrace=False)
    pytest.skip(f"SERVER MISSING, TEST SKIPPED: {reason}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    name: str
    host: str
    port: int
    process: subprocess.Popen[bytes]
    workdir: Path
    log_path: Path

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"


def _four_letter(port: int, word: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
        s.sendall(word)
        chunks = []
        while True:
            data = s.recv(4096)
            if not data:
                break
            chunks.append(data)
        return b"".join(chunks)


def zookeeper_watches(server: Server) -> dict[int, set[str]]:
    """The watches the ZooKeeper server holds, by session id (four-letter word ``wchc``):
    one-shot and persistent alike, at the absolute paths they were set on."""
    out: dict[int, set[str]] = {}
    session: set[str] = set()
    for line in _four_letter(server.port, b"wchc").decode().splitlines():
        if line.startswith("0x"):
            session = out.setdefault(int(line, 16), set())
        elif line.startswith("\t"):
            session.add(line.strip())
    return out


def start_zookeeper(timeout: float = 30.0) -> Server:
    java = shutil.which("java")
    missing = [p for p in ZK_CLASSPATH if not os.path.exists(p)]
    if java is None or missing:
        unavailable(f"ZooKeeper needs java and {', '.join(missing) or 'its jars'} "
                    "(apt-get install zookeeper)")
    workdir = Path(tempfile.mkdtemp(prefix="partctl-zk-"))
    port = free_port()
    (workdir / "data").mkdir()
    cfg = workdir / "zoo.cfg"
    cfg.write_text(
        "tickTime=100\n"
        f"dataDir={workdir / 'data'}\n"
        f"clientPort={port}\n"
        "clientPortAddress=127.0.0.1\n"
        "admin.enableServer=false\n"
        "minSessionTimeout=200\n"
        "maxSessionTimeout=60000\n"
        "maxClientCnxns=0\n"
        "4lw.commands.whitelist=srvr,stat,mntr,ruok,wchc\n"
        "forceSync=no\n"
    )
    log_path = workdir / "zookeeper.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [java, "-Xmx512m", "-cp", ":".join(ZK_CLASSPATH),
             "org.apache.zookeeper.server.ZooKeeperServerMain", str(cfg)],
            stdout=log, stderr=subprocess.STDOUT, cwd=workdir, start_new_session=True,
        )
    server = Server("zookeeper", "127.0.0.1", port, proc, workdir, log_path)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            if b"Mode:" in _four_letter(port, b"srvr"):
                return server
        except OSError:
            pass
        time.sleep(0.1)
    tail = server.log_tail()
    server.stop()
    pytest.fail(f"ZooKeeper did not start on port {port}:\n{tail}", pytrace=False)


def start_etcd(timeout: float = 30.0) -> Server:
    etcd = shutil.which("etcd")
    if etcd is None:
        unavailable("etcd is not installed (apt-get install etcd-server)")
    workdir = Path(tempfile.mkdtemp(prefix="partctl-etcd-"))
    port, peer = free_port(), free_port()
    log_path = workdir / "etcd.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [etcd, "--name", "partctl-test", "--data-dir", str(workdir / "data"),
             "--listen-client-urls", f"http://127.0.0.1:{port}",
             "--advertise-client-urls", f"http://127.0.0.1:{port}",
             "--listen-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-cluster", f"partctl-test=http://127.0.0.1:{peer}",
             "--auto-compaction-mode", "revision", "--auto-compaction-retention", "1000",
             "--unsafe-no-fsync", "--quota-backend-bytes", str(4 << 30)],
            stdout=log, stderr=subprocess.STDOUT, cwd=workdir, start_new_session=True,
            env={**os.environ, "ETCD_UNSUPPORTED_ARCH": os.environ.get("ETCD_UNSUPPORTED_ARCH", "")},
        )
    server = Server("etcd", "127.0.0.1", port, proc, workdir, log_path)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                pass
            if "ready to serve client requests" in log_path.read_text(errors="replace"):
                return server
        except OSError:
            pass
        time.sleep(0.1)
    tail = server.log_tail()
    server.stop()
    pytest.fail(f"etcd did not start on port {port}:\n{tail}", pytrace=False)
