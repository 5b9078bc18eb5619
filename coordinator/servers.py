"""Local ZooKeeper and etcd servers on loopback: start one, get its URL, stop it.

The test suite, the benchmarks and a local development cluster all need a real coordinator
server on this machine, so starting one is product code rather than a test helper. A server
listens on 127.0.0.1 only, on a free port unless one is given, and keeps its data, its
configuration and its log in a directory of its own: a fresh temporary directory that
:meth:`LocalServer.stop` removes, or one the caller names, which is kept (a server started
again on it finds its data). The process runs in a session of its own and is stopped by its
PID, never by name.

ZooKeeper comes from Debian's ``zookeeper`` package (its jars under /usr/share/java, run with
``java``), etcd from ``etcd-server`` (the ``etcd`` binary on PATH). A missing one raises
:class:`ServerNotInstalled`; a server that does not answer within the timeout raises
:class:`ServerStartError` with the tail of its log.

``fsync`` decides durability. On (the default) the servers write as deployed ones do; off
(ZooKeeper's ``forceSync=no``, etcd's ``--unsafe-no-fsync``) an acknowledged write may be lost
in a power cut, which a throw-away server for tests does not mind and which saves a disk flush
per write. Whoever turns it off says so where figures are printed.

:func:`start_zookeeper_ensemble` and :func:`start_etcd_cluster` start n servers (three by
default) that replicate to one another, as a :class:`LocalEnsemble` whose URL names every
member: the fault tests kill, stop, pause and restart members (one, the leader, a majority) and
watch partctl keep its sessions or lose them. Each member has a directory of its own in the
ensemble's and survives its process, so that a member started again rejoins from its data, as a
crashed server does. Timeouts are short (ZooKeeper's tick 100 ms, etcd's heartbeat 100 ms and
election 1 s), so that an ensemble starts in a few seconds and elects a new leader in about one.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coordinator.server_sizing import Kind, sized_for

__all__ = [
    "ZOOKEEPER_CLASSPATH",
    "EnsembleMember",
    "LocalEnsemble",
    "LocalServer",
    "ServerError",
    "ServerNotInstalled",
    "ServerStartError",
    "free_port",
    "start_ensemble",
    "start_etcd",
    "start_etcd_cluster",
    "start_server",
    "start_zookeeper",
    "start_zookeeper_ensemble",
    "sized_for",
]

HOST = "127.0.0.1"
ZOOKEEPER_CLASSPATH = ("/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-simple.jar")
"""Debian's ZooKeeper server and the logger binding it needs."""


class ServerError(Exception):
    """A local server could not be started."""


class ServerNotInstalled(ServerError):
    """The server's program is not on this machine; the message says what to install."""


class ServerStartError(ServerError):
    """The server was started but did not answer in time (the message ends with its log)."""


PORT_RANGE = "PARTCTL_PORT_RANGE"
"""``LOW-HIGH``: where :func:`free_port` looks, when set. Several test runs (or pytest
workers) on one machine each get their own range, below the kernel's ephemeral ports, so that
a port one picked and released is never picked by another, nor handed by the kernel to a
socket bound to port 0, before its server binds it."""


_next_port: dict[str, int] = {}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now: one the kernel picks, or,
    with ``PARTCTL_PORT_RANGE`` set, a random one of that range."""
    span = os.environ.get(PORT_RANGE)
    if span:
        low, _, high = span.partition("-")
        first, count = int(low), int(high) - int(low) + 1
        # in turn from a random start: a process never picks one port twice in a row
        at = _next_port.get(span, random.randrange(count))
        for step in range(min(count, 200)):
            port = first + (at + step) % count
            with socket.socket() as s:
                try:
                    s.bind((HOST, port))
                except OSError:
                    continue
            _next_port[span] = (at + step + 1) % count
            return port
        raise ServerError(f"no free port in {PORT_RANGE}={span}")
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


@dataclass(eq=False)
class LocalServer:
    """A running server process and the directory it owns (not a value: it has a lifetime)."""

    kind: Kind
    host: str
    port: int
    process: subprocess.Popen[bytes]
    directory: Path
    log_path: Path
    remove_directory: bool
    """Whether :meth:`stop` removes ``directory`` (true when the server made it)."""

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    def url(self, path: str = "") -> str:
        """The coordinator URL of this server, with an optional chroot or key prefix."""
        return f"{self.kind}://{self.address}{path}"

    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout``; remove the directory if the server made it.
        Stopping twice does nothing more."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=timeout)
        if self.remove_directory:
            shutil.rmtree(self.directory, ignore_errors=True)

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def four_letter(self, word: str) -> str:
        """A ZooKeeper four-letter command's answer (``srvr``, ``mntr``, ``wchc``, ...)."""
        if self.kind != "zookeeper":
            raise ValueError(f"four-letter words are ZooKeeper's, not {self.kind}'s")
        return _four_letter(self.port, word.encode(), self.host).decode(errors="replace")

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _four_letter(port: int, word: bytes, host: str = HOST) -> bytes:
    with socket.create_connection((host, port), timeout=1) as s:
        s.sendall(word)
        chunks = []
        while data := s.recv(4096):
            chunks.append(data)
        return b"".join(chunks)


def _directory(directory: str | Path | None, prefix: str) -> tuple[Path, bool]:
    if directory is None:
        return Path(tempfile.mkdtemp(prefix=prefix)), True
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    return path, False


def _wait_ready(server: LocalServer, ready: Callable[[], bool], timeout: float) -> LocalServer:
    """Poll ``ready()`` until it is true; stop the server and raise if it never is."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and server.running():
        try:
            if ready():
                return server
        except OSError:
            pass
        time.sleep(0.1)
    tail = server.log_tail()
    server.stop()
    state = "exited" if server.process.returncode is not None else "did not answer"
    raise ServerStartError(f"{server.kind} on port {server.port} {state} within "
                           f"{timeout:.0f}s:\n{tail}")


def _zoo_cfg(tick_ms: int, data: Path, port: int, host: str, fsync: bool) -> str:
    """A ZooKeeper server's zoo.cfg lines: client port on ``host``, sessions from two ticks to
    60 s, the four-letter words the helpers use, no admin server, no connection limit."""
    return (f"tickTime={tick_ms}\n"
            f"dataDir={data}\n"
            f"clientPort={port}\n"
            f"clientPortAddress={host}\n"
            "admin.enableServer=false\n"
            f"minSessionTimeout={2 * tick_ms}\n"
            "maxSessionTimeout=60000\n"
            "maxClientCnxns=0\n"
            "4lw.commands.whitelist=srvr,stat,mntr,ruok,wchc\n"
            f"forceSync={'yes' if fsync else 'no'}\n")


def start_zookeeper(*, directory: str | Path | None = None, port: int | None = None,
                    fsync: bool = True, tick_ms: int = 100, heap_mb: int = 512,
                    jute_maxbuffer: int | None = None,
                    classpath: Sequence[str] = ZOOKEEPER_CLASSPATH,
                    timeout: float = 30.0, host: str = HOST) -> LocalServer:
    """Start a standalone ZooKeeper on 127.0.0.1 and return once it answers ``srvr``.

    ``host`` is the one address it listens on, 127.0.0.1 unless another is given (a test host
    in a network namespace gives its own; the readiness check connects there too).

    ``tick_ms`` is ZooKeeper's tickTime; sessions may ask for 2 ticks to 60 s, so a short tick
    lets a client choose a short session timeout. Four-letter words ``srvr``, ``stat``,
    ``mntr``, ``ruok`` and ``wchc`` are enabled, the admin HTTP server is off and connections
    per client are unlimited. ``heap_mb`` is the JVM's -Xmx and ``jute_maxbuffer`` ZooKeeper's
    jute.maxbuffer (None: its default, 1 MiB); :func:`sized_for` gives both for a cluster's
    partition count.
    """
    java = shutil.which("java")
    missing = [p for p in classpath if not os.path.exists(p)]
    if java is None or missing:
        needs = ", ".join((["java"] if java is None else []) + missing)
        raise ServerNotInstalled(f"ZooKeeper needs {needs} (apt-get install zookeeper "
                                 "default-jre-headless)")
    workdir, owned = _directory(directory, "partctl-zk-")
    port = port or free_port()
    data = workdir / "data"
    data.mkdir(exist_ok=True)
    config = workdir / "zoo.cfg"
    config.write_text(_zoo_cfg(tick_ms, data, port, host, fsync))
    log_path = workdir / "zookeeper.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [java, f"-Xmx{heap_mb}m",
             *([f"-Djute.maxbuffer={jute_maxbuffer}"] if jute_maxbuffer else []),
             "-cp", ":".join(classpath),
             "org.apache.zookeeper.server.ZooKeeperServerMain", str(config)],
            stdout=log, stderr=subprocess.STDOUT, cwd=workdir, start_new_session=True,
        )
    server = LocalServer(kind="zookeeper", host=host, port=port, process=proc,
                         directory=workdir, log_path=log_path, remove_directory=owned)
    return _wait_ready(server, lambda: b"Mode:" in _four_letter(port, b"srvr", host), timeout)


def start_etcd(*, directory: str | Path | None = None, port: int | None = None,
               peer_port: int | None = None, fsync: bool = True,
               quota_bytes: int = 4 << 30, timeout: float = 30.0,
               tls: tuple[str | Path, str | Path, str | Path] | None = None,
               flags: Sequence[str] = ()) -> LocalServer:
    """Start a one-member etcd on 127.0.0.1 and return once it serves clients.

    History is compacted to the last 1,000 revisions (a long-running local server would
    otherwise grow without bound); ``quota_bytes`` is the backend's size limit. ``tls``:
    (certificate, key, CA) PEM files; clients then talk TLS and must show a certificate the
    CA signed. ``flags``: more command-line flags, as etcd takes them.
    """
    etcd = shutil.which("etcd")
    if etcd is None:
        raise ServerNotInstalled("etcd is not installed (apt-get install etcd-server)")
    workdir, owned = _directory(directory, "partctl-etcd-")
    port = port or free_port()
    peer_port = peer_port or free_port()
    log_path = workdir / "etcd.log"
    start = log_path.stat().st_size if log_path.exists() else 0
    scheme = "https" if tls is not None else "http"
    args = [etcd, "--name", "partctl", "--data-dir", str(workdir / "data"),
            "--listen-client-urls", f"{scheme}://{HOST}:{port}",
            "--advertise-client-urls", f"{scheme}://{HOST}:{port}",
            "--listen-peer-urls", f"http://{HOST}:{peer_port}",
            "--initial-advertise-peer-urls", f"http://{HOST}:{peer_port}",
            "--initial-cluster", f"partctl=http://{HOST}:{peer_port}",
            "--auto-compaction-mode", "revision", "--auto-compaction-retention", "1000",
            "--quota-backend-bytes", str(quota_bytes)]
    if not fsync:
        args.append("--unsafe-no-fsync")
    if tls is not None:
        cert, key, ca = tls
        args += ["--cert-file", str(cert), "--key-file", str(key), "--trusted-ca-file", str(ca),
                 "--client-cert-auth"]
    args += list(flags)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            args, stdout=log, stderr=subprocess.STDOUT, cwd=workdir, start_new_session=True,
            env={**os.environ,
                 "ETCD_UNSUPPORTED_ARCH": os.environ.get("ETCD_UNSUPPORTED_ARCH", "")},
        )
    server = LocalServer(kind="etcd", host=HOST, port=port, process=proc, directory=workdir,
                         log_path=log_path, remove_directory=owned)

    def ready() -> bool:
        with socket.create_connection((HOST, port), timeout=1):
            pass
        with open(log_path, "rb") as f:
            f.seek(start)
            return b"ready to serve client requests" in f.read()

    return _wait_ready(server, ready, timeout)


def start_server(kind: Kind, **options: object) -> LocalServer:
    """``start_zookeeper`` or ``start_etcd`` by name, with their keyword options."""
    if kind == "zookeeper":
        return start_zookeeper(**options)  # type: ignore[arg-type]
    if kind == "etcd":
        return start_etcd(**options)  # type: ignore[arg-type]
    raise ValueError(f"unknown server kind {kind!r} (expected zookeeper or etcd)")


# ---------------------------------------------------------------------------------------------
# Ensembles: three (or n) servers that replicate, so that one can be killed and come back.


@dataclass(eq=False)
class EnsembleMember:
    """One server of a :class:`LocalEnsemble`: a command, a directory it keeps, and the process
    running it now, if any. Unlike a :class:`LocalServer` it outlives its process: :meth:`kill`
    or :meth:`stop` end the process and keep the directory, :meth:`start` runs the same command
    again on the same data (the directory goes with :meth:`LocalEnsemble.stop`, if the ensemble
    made it)."""

    kind: Kind
    number: int
    """1-based: ZooKeeper's myid, etcd's member name ``m<number>``."""
    host: str
    port: int
    """The client port."""
    peer_ports: tuple[int, ...]
    """ZooKeeper's quorum and election ports, etcd's peer port."""
    directory: Path
    command: list[str]
    environment: dict[str, str] | None = None
    process: subprocess.Popen[bytes] | None = None
    paused: bool = False

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.directory / f"{self.kind}.log"

    @property
    def pid(self) -> int | None:
        """The PID of the process running now (None when stopped)."""
        return self.process.pid if self.process is not None and self.running() else None

    def running(self) -> bool:
        """Whether the process lives (a paused one does)."""
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        """Run the server on its directory, in a session of its own; nothing if it runs. Returns
        at once: :meth:`LocalEnsemble.wait_serving` waits for it to join."""
        if self.running():
            return
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.command, stdout=log, stderr=subprocess.STDOUT, cwd=self.directory,
                start_new_session=True, env=self.environment)
        self.paused = False

    def kill(self) -> None:
        """SIGKILL, as a crash: no goodbye to the peers, nothing flushed."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.paused = False

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM (resuming a paused process so that it can act on it), SIGKILL after
        ``timeout``."""
        process = self.process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            if self.paused:
                process.send_signal(signal.SIGCONT)
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=timeout)
        self.paused = False

    def pause(self) -> None:
        """SIGSTOP: the process holds its sockets and answers nothing (a long GC, a VM stall)."""
        if self.running() and not self.paused:
            assert self.process is not None
            self.process.send_signal(signal.SIGSTOP)
            self.paused = True

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`."""
        if self.running() and self.paused:
            assert self.process is not None
            self.process.send_signal(signal.SIGCONT)
        self.paused = False

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def role(self) -> str | None:
        """``leader``, ``follower`` (etcd: any member that is not the leader), or None when the
        member does not serve (down, paused, or without a quorum)."""
        if not self.running() or self.paused:
            return None
        try:
            if self.kind == "zookeeper":
                for line in _four_letter(self.port, b"srvr", self.host).decode().splitlines():
                    if line.startswith("Mode:"):
                        mode = line.split(":", 1)[1].strip()
                        return mode if mode in ("leader", "follower") else None
                return None  # "This ZooKeeper instance is not currently serving requests"
            status = _etcd_status(self.host, self.port)
        except (OSError, ValueError):
            return None
        leader = status.get("leader")
        if not leader or leader == "0":
            return None
        return "leader" if status.get("header", {}).get("member_id") == leader else "follower"

    def four_letter(self, word: str) -> str:
        """A ZooKeeper four-letter command's answer (``srvr``, ``mntr``, ...)."""
        if self.kind != "zookeeper":
            raise ValueError(f"four-letter words are ZooKeeper's, not {self.kind}'s")
        return _four_letter(self.port, word.encode(), self.host).decode(errors="replace")


def _etcd_status(host: str, port: int) -> dict[str, Any]:
    """etcd's Maintenance.Status through its JSON gateway (ids are decimal strings there)."""
    request = urllib.request.Request(f"http://{host}:{port}/v3/maintenance/status", data=b"{}",
                                     method="POST")
    with urllib.request.urlopen(request, timeout=1) as answer:
        return json.loads(answer.read())


@dataclass(eq=False)
class LocalEnsemble:
    """n ZooKeeper servers or n etcd members replicating to one another (not a value: it has
    a lifetime). A context manager: leaving it stops every member."""

    kind: Kind
    members: list[EnsembleMember]
    directory: Path
    remove_directory: bool

    def url(self, path: str = "") -> str:
        """The coordinator URL naming every member, in member order (a client fails over along
        it), with an optional chroot or key prefix."""
        return f"{self.kind}://{','.join(m.address for m in self.members)}{path}"

    @property
    def quorum(self) -> int:
        return len(self.members) // 2 + 1

    def leader(self) -> EnsembleMember | None:
        """The member that leads now (asked of every member; None while there is none).

        A ZooKeeper server that loses its quorum stops serving at once; an etcd leader cut off
        from the others still says it leads until raft's check-quorum makes it step down, one
        election timeout later."""
        for member in self.members:
            if member.role() == "leader":
                return member
        return None

    def followers(self) -> list[EnsembleMember]:
        return [m for m in self.members if m.role() == "follower"]

    def wait_serving(self, timeout: float = 30.0,
                     members: Sequence[EnsembleMember] | None = None) -> EnsembleMember:
        """Wait until there is a leader and every one of ``members`` (default: every running,
        unpaused member) serves as leader or follower; return the leader. :class:`ServerStartError`
        with the members' log tails if not within ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            wanted = list(members) if members is not None else [
                m for m in self.members if m.running() and not m.paused]
            roles = {m.number: m.role() for m in self.members}
            leaders = [m for m in self.members if roles[m.number] == "leader"]
            if leaders and all(roles[m.number] is not None for m in wanted):
                return leaders[0]
            if time.monotonic() >= deadline:
                break
            time.sleep(0.1)
        tails = "\n".join(f"--- member {m.number} ({m.address}, "
                          f"{'running' if m.running() else 'down'}, role {roles[m.number]}):\n"
                          f"{m.log_tail(15)}" for m in self.members)
        raise ServerStartError(f"{self.kind} ensemble at {self.url()} did not serve with a "
                               f"leader within {timeout:g}s:\n{tails}")

    def stop(self) -> None:
        """Stop every member; remove the directory if the ensemble made it. Twice is harmless."""
        for member in self.members:
            member.stop()
        if self.remove_directory:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> LocalEnsemble:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _member_hosts(n: int, hosts: Sequence[str] | None) -> list[str]:
    if n < 1:
        raise ValueError(f"an ensemble needs at least one member, not {n}")
    if hosts is None:
        return [HOST] * n
    if len(hosts) != n:
        raise ValueError(f"{len(hosts)} hosts given for {n} members")
    return list(hosts)


def _prefixes(n: int, prefixes: Sequence[Sequence[str]] | None) -> list[list[str]]:
    if prefixes is None:
        return [[] for _ in range(n)]
    if len(prefixes) != n or any(isinstance(p, str) for p in prefixes):
        raise ValueError(f"prefixes must be {n} argument lists, one a member")
    return [list(p) for p in prefixes]


def _port_on(host: str, taken: set[tuple[str, int]]) -> int:
    """A port free on ``host`` (on 127.0.0.1 when ``host`` is not this namespace's, e.g. an
    address inside a network namespace), distinct from those already handed out."""
    while True:
        try:
            with socket.socket() as s:
                s.bind((host, 0))
                port = s.getsockname()[1]
        except OSError:
            port = free_port()
        if (host, port) not in taken:
            taken.add((host, port))
            return port


def _start_ensemble(ensemble: LocalEnsemble, timeout: float) -> LocalEnsemble:
    try:
        for member in ensemble.members:
            member.start()
        ensemble.wait_serving(timeout)
    except BaseException:
        ensemble.stop()
        raise
    return ensemble


def start_zookeeper_ensemble(n: int = 3, *, directory: str | Path | None = None,
                             fsync: bool = True, tick_ms: int = 100, heap_mb: int = 256,
                             hosts: Sequence[str] | None = None,
                             prefixes: Sequence[Sequence[str]] | None = None,
                             classpath: Sequence[str] = ZOOKEEPER_CLASSPATH,
                             timeout: float = 60.0) -> LocalEnsemble:
    """Start ``n`` ZooKeeper servers as one ensemble and return once every one serves as leader
    or follower.

    Member i (1-based, its ``myid``) binds its client, quorum and election ports to ``hosts[i-1]``
    (default 127.0.0.1 for all) and keeps its data in ``<directory>/zk<i>``. Followers get
    ``initLimit`` 20 ticks to sync and ``syncLimit`` 5 ticks of silence before the leader drops
    them; a connect to a peer gives up after ``cnxTimeout`` 500 ms, so that an election does not
    wait ZooKeeper's default 5 s on a member that is down. The four-letter words and the admin
    server are set as :func:`start_zookeeper` sets them. ``prefixes`` are as
    :func:`start_ensemble` says.
    """
    java = shutil.which("java")
    missing = [p for p in classpath if not os.path.exists(p)]
    if java is None or missing:
        needs = ", ".join((["java"] if java is None else []) + missing)
        raise ServerNotInstalled(f"ZooKeeper needs {needs} (apt-get install zookeeper "
                                 "default-jre-headless)")
    addresses = _member_hosts(n, hosts)
    wrappers = _prefixes(n, prefixes)
    workdir, owned = _directory(directory, "partctl-zk-ensemble-")
    taken: set[tuple[str, int]] = set()
    ports = [(_port_on(h, taken), _port_on(h, taken), _port_on(h, taken)) for h in addresses]
    servers_lines = "".join(f"server.{i}={h}:{quorum}:{election}\n" for i, (h, (_, quorum, election))
                            in enumerate(zip(addresses, ports, strict=True), 1))
    members = []
    for i, (host, (client, quorum, election)) in enumerate(zip(addresses, ports, strict=True), 1):
        home = workdir / f"zk{i}"
        data = home / "data"
        data.mkdir(parents=True, exist_ok=True)
        (data / "myid").write_text(f"{i}\n")
        config = home / "zoo.cfg"
        config.write_text(_zoo_cfg(tick_ms, data, client, host, fsync)
                          + "initLimit=20\nsyncLimit=5\ncnxTimeout=500\n" + servers_lines)
        command = [*wrappers[i - 1], java, f"-Xmx{heap_mb}m", "-cp", ":".join(classpath),
                   "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(config)]
        members.append(EnsembleMember(kind="zookeeper", number=i, host=host, port=client,
                                      peer_ports=(quorum, election), directory=home,
                                      command=command))
    ensemble = LocalEnsemble(kind="zookeeper", members=members, directory=workdir,
                             remove_directory=owned)
    return _start_ensemble(ensemble, timeout)


def start_etcd_cluster(n: int = 3, *, directory: str | Path | None = None, fsync: bool = True,
                       heartbeat_ms: int = 100, election_ms: int = 1000,
                       hosts: Sequence[str] | None = None,
                       prefixes: Sequence[Sequence[str]] | None = None,
                       quota_bytes: int = 4 << 30, timeout: float = 60.0) -> LocalEnsemble:
    """Start ``n`` etcd members as one cluster and return once it has a leader and every member
    serves.

    Member i is named ``m<i>``, binds its client and peer ports to ``hosts[i-1]`` (default
    127.0.0.1 for all) and keeps its data in ``<directory>/etcd<i>``; started again there it
    rejoins from its data (etcd then ignores the initial-cluster flags). ``heartbeat_ms`` and
    ``election_ms`` are raft's heartbeat interval and election timeout (etcd's defaults are 100
    and 1000). Compaction and quota are as :func:`start_etcd` sets them. ``prefixes`` are as
    :func:`start_ensemble` says.
    """
    etcd = shutil.which("etcd")
    if etcd is None:
        raise ServerNotInstalled("etcd is not installed (apt-get install etcd-server)")
    addresses = _member_hosts(n, hosts)
    wrappers = _prefixes(n, prefixes)
    workdir, owned = _directory(directory, "partctl-etcd-cluster-")
    taken: set[tuple[str, int]] = set()
    ports = [(_port_on(h, taken), _port_on(h, taken)) for h in addresses]
    initial = ",".join(f"m{i}=http://{h}:{peer}"
                       for i, (h, (_, peer)) in enumerate(zip(addresses, ports, strict=True), 1))
    token = f"partctl-{os.getpid()}-{ports[0][1]}"
    environment = {**os.environ,
                   "ETCD_UNSUPPORTED_ARCH": os.environ.get("ETCD_UNSUPPORTED_ARCH", "")}
    members = []
    for i, (host, (client, peer)) in enumerate(zip(addresses, ports, strict=True), 1):
        home = workdir / f"etcd{i}"
        home.mkdir(parents=True, exist_ok=True)
        command = [*wrappers[i - 1], etcd, "--name", f"m{i}", "--data-dir", str(home / "data"),
                   "--listen-client-urls", f"http://{host}:{client}",
                   "--advertise-client-urls", f"http://{host}:{client}",
                   "--listen-peer-urls", f"http://{host}:{peer}",
                   "--initial-advertise-peer-urls", f"http://{host}:{peer}",
                   "--initial-cluster", initial,
                   "--initial-cluster-state", "new",
                   "--initial-cluster-token", token,
                   "--heartbeat-interval", str(heartbeat_ms),
                   "--election-timeout", str(election_ms),
                   "--auto-compaction-mode", "revision", "--auto-compaction-retention", "1000",
                   "--quota-backend-bytes", str(quota_bytes)]
        if not fsync:
            command.append("--unsafe-no-fsync")
        members.append(EnsembleMember(kind="etcd", number=i, host=host, port=client,
                                      peer_ports=(peer,), directory=home, command=command,
                                      environment=environment))
    ensemble = LocalEnsemble(kind="etcd", members=members, directory=workdir,
                             remove_directory=owned)
    return _start_ensemble(ensemble, timeout)


def start_ensemble(kind: Kind, n: int = 3, **options: object) -> LocalEnsemble:
    """``start_zookeeper_ensemble`` or ``start_etcd_cluster`` by name.

    Options both take: ``directory`` (default a temporary one, removed by
    :meth:`LocalEnsemble.stop`), ``fsync``, ``timeout``, ``hosts`` (member i binds to
    ``hosts[i-1]``; a port is chosen free on that address when it is one of this network
    namespace's, else on 127.0.0.1) and ``prefixes`` (member i's command runs as
    ``prefixes[i-1] + command``, e.g. ``["ip", "netns", "exec", "ns1"]`` to start it in a network
    namespace the caller made; the prefix must exec the command, so that the PID stopped and
    signalled is the server's). Readiness is asked of every member's client address from here,
    so those addresses must be reachable from this namespace.
    """
    if kind == "zookeeper":
        return start_zookeeper_ensemble(n, **options)  # type: ignore[arg-type]
    if kind == "etcd":
        return start_etcd_cluster(n, **options)  # type: ignore[arg-type]
    raise ValueError(f"unknown server kind {kind!r} (expected zookeeper or etcd)")
