"""Broker processes on this machine: launch one, wait until it serves, stop it; and a whole
development cluster (a coordinator server and N brokers) in a directory it owns.

``partctl cluster up``, the test suite and the benchmarks all start brokers as processes, so
starting them is product code rather than a test helper. A broker is
``python -m partctl broker start --config <dir>/server.properties``, with its stdout and stderr
in ``<dir>/broker.log``; it is ready when it writes its serving line there
(``partctl broker N: serving PLAINTEXT://127.0.0.1:PORT on URL``, see :mod:`broker.process`),
which also gives the port when the listener asked for port 0. A broker that exits before
serving is a :class:`BrokerStartError` carrying its own error line (``cannot listen on ...:
Address already in use``), not its whole log. Every process runs in a session of its own (a
Ctrl-C at the terminal reaches only the process that launched it, which decides how to stop
the rest) and is stopped by its PID: SIGTERM is the broker's controlled shutdown, SIGINT its
stop at once (both close the logs cleanly).

:func:`start_cluster` puts the pieces together in one directory::

    DIR/zookeeper/ or DIR/etcd/     the coordinator server's data, config and log (when started)
    DIR/broker-N/server.properties  broker N's settings (broker ids 1..N)
    DIR/broker-N/broker.log         its log
    DIR/broker-N/logs/              its partitions' logs

A directory the caller names is kept, and a cluster started again on it finds its topics and
their data (the coordinator server is started on its old data; the brokers recover their
logs). Without one, a fresh temporary directory is made and :meth:`LocalCluster.stop`
removes it.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import coordinator
from broker.config import ConfigError, parse_config
from coordinator.errors import InvalidURL
from coordinator.servers import (
    LocalServer,
    ServerError,
    ServerNotInstalled,
    start_etcd,
    start_zookeeper,
)
from coordinator.url import parse as parse_url
from coordinator.url import redact

__all__ = [
    "CLUSTER_KEYS",
    "SERVING",
    "STORES",
    "BrokerStartError",
    "ClusterError",
    "LaunchedBroker",
    "LocalCluster",
    "METRICS",
    "broker_properties",
    "coordinator_property",
    "launch_broker",
    "start_broker",
    "start_cluster",
]

HOST = "127.0.0.1"
SERVING = re.compile(r"^partctl broker (\d+): serving \w+://([^\s,]*):(\d+)\b.* on (\S+)$", re.M)
"""A broker's ready line: its id, its first listener's host and port, its coordinator."""
METRICS = re.compile(r"^partctl broker (\d+): metrics on (http://\S+)$", re.M)
"""A broker's metrics line (with ``metrics.listener``), written before its ready line."""
ERROR_PREFIX = "partctl: error: "
STORES = ("zookeeper", "etcd")
"""The coordinator servers :func:`start_cluster` can start, in the order it tries them."""
CLUSTER_KEYS = frozenset({"broker.id", "listeners", "log.dirs", "log.dir", "zookeeper.connect",
                          "partctl.coordinator"})
"""server.properties keys :func:`start_cluster` sets itself: the broker's id, address, logs and
coordinator follow from the cluster's shape, so they are not the caller's to override."""
_ROOT = Path(__file__).resolve().parent.parent


class ClusterError(Exception):
    """A broker or a local cluster could not be started; the message is one line."""


class BrokerStartError(ClusterError):
    """A broker process exited, or did not serve in time, before it was ready."""

    def __init__(self, broker_id: int, reason: str, log_path: Path) -> None:
        super().__init__(f"broker {broker_id} did not start: {reason}")
        self.broker_id = broker_id
        self.reason = reason
        self.log_path = log_path


# --- one broker ---------------------------------------------------------------------------------


def coordinator_property(url: str) -> str:
    """The server.properties line naming ``url``: Kafka's ``zookeeper.connect`` for ZooKeeper,
    ``partctl.coordinator`` for any other store a separate process can reach. A memory store
    lives inside one process, so brokers in processes of their own cannot share it."""
    try:
        parsed = parse_url(url)
    except InvalidURL as exc:
        raise ClusterError(str(exc)) from None
    if not parsed.hosts:
        raise ClusterError(f"{redact(url)}: a {parsed.scheme} store lives in one process; "
                           "broker processes need a ZooKeeper or etcd URL")
    if parsed.scheme in ("zookeeper", "zk"):
        hosts = ",".join(f"{host}:{port}" for host, port in parsed.hosts)
        return f"zookeeper.connect={hosts}{parsed.root}\n"
    return f"partctl.coordinator={url}\n"


def broker_properties(broker_id: int, coordinator_url: str, directory: Path, *, port: int = 0,
                      extra: Mapping[str, str] | str = "") -> str:
    """A broker's server.properties: its id, one PLAINTEXT listener on 127.0.0.1 (port 0: a
    free one), its logs under ``directory``, the coordinator, then ``extra`` (``key=value``
    lines or a mapping; a key given twice takes its last value, as in Java)."""
    if not isinstance(extra, str):
        extra = "".join(f"{key}={value}\n" for key, value in extra.items())
    return (f"broker.id={broker_id}\n"
            f"listeners=PLAINTEXT://{HOST}:{port}\n"
            f"log.dirs={directory / 'logs'}\n"
            + coordinator_property(coordinator_url) + extra)


@dataclass(eq=False)
class LaunchedBroker:
    """A broker process this process started (not a value: it has a lifetime). ``port`` is
    known once the broker has said it serves."""

    broker_id: int
    process: subprocess.Popen[bytes]
    directory: Path
    config_path: Path
    log_path: Path
    coordinator_url: str
    log_offset: int = 0
    """Where this run's part of the log starts (a broker started again appends to it)."""
    port: int | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def address(self) -> tuple[str, int]:
        assert self.port is not None, "the broker has not said it serves yet"
        return HOST, self.port

    def log(self) -> str:
        """What this run of the broker has written to its log."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self.log_offset)
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def running(self) -> bool:
        return self.process.poll() is None

    def serving(self) -> bool:
        """Whether the broker has said it serves (and so has a port); does not wait."""
        if self.port is None:
            match = SERVING.search(self.log())
            if match is not None and int(match.group(1)) == self.broker_id:
                self.port = int(match.group(3))
        return self.port is not None

    @property
    def metrics_url(self) -> str | None:
        """Where the broker serves its metrics (``http://host:port/metrics``), once it has
        said so; None without ``metrics.listener`` or before."""
        for match in METRICS.finditer(self.log()):
            if int(match.group(1)) == self.broker_id:
                return match.group(2)
        return None

    def started_line(self) -> str:
        """The broker in one line, once it serves: its id, address, PID and log, and where it
        serves its metrics when it does (what ``partctl cluster up`` prints)."""
        metrics = self.metrics_url
        return (f"broker {self.broker_id} at {self.bootstrap} (pid {self.pid}, log "
                f"{self.log_path})" + (f", metrics on {metrics}" if metrics else ""))

    def error_line(self) -> str:
        """The broker's own account of a failure: its last ``partctl: error:`` line (without
        the prefix and the ``broker N:`` it starts with), else its last log line, else ''."""
        lines = [line.strip() for line in self.log().splitlines() if line.strip()]
        errors = [line[len(ERROR_PREFIX):] for line in lines if line.startswith(ERROR_PREFIX)]
        if errors:
            return re.sub(rf"^broker {self.broker_id}:\s*", "", errors[-1])
        return lines[-1] if lines else ""

    def exit_reason(self) -> str:
        """How the process ended, in one line: ``killed by SIGKILL``, ``exit status 0``, or a
        failing status with :meth:`error_line`."""
        status = self.process.poll()
        if status is None:
            return "still running"
        if status < 0:
            return f"killed by {signal.Signals(-status).name}"
        said = self.error_line() if status != 0 else ""
        return f"exit status {status}" + (f": {said}" if said else "")

    def wait_serving(self, timeout: float = 90.0,
                     stopping: Callable[[], bool] = lambda: False) -> None:
        """Return once the broker serves. :class:`BrokerStartError` when it exits first or
        does not serve within ``timeout`` (then it is killed); returns early, not serving,
        when ``stopping()`` becomes true."""
        deadline = time.monotonic() + timeout
        while not self.serving():
            if stopping():
                return
            if not self.running():
                raise BrokerStartError(self.broker_id, self.error_line() or self.exit_reason(),
                                       self.log_path)
            if time.monotonic() > deadline:
                self.kill()
                raise BrokerStartError(self.broker_id, f"not serving after {timeout:.0f}s",
                                       self.log_path)
            time.sleep(0.05)

    def signal(self, signum: int) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signum)

    def wait(self, timeout: float | None = 60.0) -> int:
        return self.process.wait(timeout)

    def kill(self) -> int:
        if self.process.poll() is None:
            self.process.kill()
        return self.process.wait(10)

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM (a controlled shutdown) and the exit status; killed after ``timeout``, and
        then the status says so (-9)."""
        self.signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return self.kill()


def launch_broker(directory: Path, broker_id: int, coordinator_url: str, *, port: int = 0,
                  extra: Mapping[str, str] | str = "",
                  python: str = sys.executable) -> LaunchedBroker:
    """Write ``directory/server.properties`` and start the broker; does not wait for it (see
    :meth:`LaunchedBroker.wait_serving`)."""
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "server.properties"
    config.write_text(broker_properties(broker_id, coordinator_url, directory, port=port,
                                        extra=extra))
    log_path = directory / "broker.log"
    offset = log_path.stat().st_size if log_path.exists() else 0
    path = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": f"{_ROOT}{os.pathsep}{path}" if path else str(_ROOT)}
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [python, "-m", "partctl", "broker", "start", "--config", str(config)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=directory,
            env=env, start_new_session=True)
    return LaunchedBroker(broker_id=broker_id, process=process, directory=directory,
                          config_path=config, log_path=log_path,
                          coordinator_url=coordinator_url, log_offset=offset)


def start_broker(directory: Path, broker_id: int, coordinator_url: str, *, port: int = 0,
                 extra: Mapping[str, str] | str = "", timeout: float = 90.0) -> LaunchedBroker:
    """:func:`launch_broker` and wait until it serves (:class:`BrokerStartError` if not)."""
    broker = launch_broker(directory, broker_id, coordinator_url, port=port, extra=extra)
    broker.wait_serving(timeout)
    return broker


def stop_brokers(brokers: Sequence[LaunchedBroker], *, timeout: float = 120.0,
                 at_once: Callable[[], bool] = lambda: False) -> dict[int, int]:
    """Stop every broker at the same time (SIGTERM to all, then wait for all): broker id ->
    exit status. When ``at_once()`` becomes true while waiting, the brokers still running
    get SIGINT (they stop at once); after ``timeout`` they are killed."""
    for broker in brokers:
        broker.signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    hurried = False
    while any(b.running() for b in brokers):
        if not hurried and at_once():
            hurried = True
            for broker in brokers:
                broker.signal(signal.SIGINT)
        if time.monotonic() > deadline:
            for broker in brokers:
                broker.kill()
            break
        time.sleep(0.05)
    return {b.broker_id: b.kill() for b in brokers}


# --- a local cluster ----------------------------------------------------------------------------


@dataclass(eq=False)
class LocalCluster:
    """A coordinator server (None when the caller gave a URL) and brokers 1..N, in
    ``directory``; not a value: it has a lifetime."""

    directory: Path
    remove_directory: bool
    """Whether :meth:`stop` removes ``directory`` (true when the cluster made it)."""
    coordinator_url: str
    server: LocalServer | None
    brokers: list[LaunchedBroker] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)
    """Exit statuses of the brokers that have exited (see :meth:`newly_exited`, :meth:`stop`)."""

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def newly_exited(self) -> list[LaunchedBroker]:
        """Brokers that have exited since the last call (their status in :attr:`statuses`)."""
        gone = []
        for broker in self.brokers:
            status = broker.process.poll()
            if status is not None and broker.broker_id not in self.statuses:
                self.statuses[broker.broker_id] = status
                gone.append(broker)
        return gone

    def stop(self, *, timeout: float = 120.0,
             at_once: Callable[[], bool] = lambda: False) -> dict[int, int]:
        """Stop the brokers together (:func:`stop_brokers`), then the coordinator server, then
        remove the directory if the cluster made it; broker id -> exit status. Stopping twice
        does nothing more."""
        self.statuses.update(stop_brokers(self.brokers, timeout=timeout, at_once=at_once))
        if self.server is not None:
            self.server.stop()
        if self.remove_directory:
            shutil.rmtree(self.directory, ignore_errors=True)
        return dict(self.statuses)

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _start_server(store: str | None, directory: Path, fsync: bool) -> LocalServer:
    """The coordinator server in ``directory/<store>``. Without a store: the one whose data is
    already in ``directory`` (a cluster started again), else ZooKeeper if it is installed,
    else etcd."""
    if store is None:
        used = [s for s in STORES if (directory / s).is_dir()]
        candidates: Sequence[str] = used[:1] or STORES
    else:
        candidates = (store,)
    missing = []
    for kind in candidates:
        start = start_zookeeper if kind == "zookeeper" else start_etcd
        try:
            return start(directory=directory / kind, fsync=fsync)
        except ServerNotInstalled as exc:
            missing.append(str(exc))
        except ServerError as exc:
            lines = str(exc).splitlines()  # what happened, then the server's log
            raise ClusterError(f"{lines[0]} {lines[-1].strip()}" if len(lines) > 1
                               else lines[0]) from None
    raise ClusterError("; ".join(missing))


def check_properties(extra: Mapping[str, str]) -> None:
    """Refuse what would break the cluster before anything starts: a key the cluster sets
    itself, or a value the broker would not start with."""
    for key in extra:
        if key in CLUSTER_KEYS:
            raise ClusterError(f"{key} is set for each broker by the cluster")
    sample = broker_properties(1, f"zookeeper://{HOST}:2181", Path("/"), extra=extra)
    try:
        parse_config(sample, source="broker properties")
    except ConfigError as exc:
        raise ClusterError(str(exc)) from None


def start_cluster(brokers: int = 3, *, coordinator_url: str | None = None,
                  store: str | None = None, directory: str | Path | None = None,
                  base_port: int | None = None, extra: Mapping[str, str] | None = None,
                  connect_timeout: float = 5.0, timeout: float = 120.0, fsync: bool = True,
                  stopping: Callable[[], bool] = lambda: False,
                  started: Callable[[str], None] = lambda line: None) -> LocalCluster:
    """Start a coordinator server (unless ``coordinator_url`` names one, which must answer
    within ``connect_timeout``) and brokers 1..``brokers`` on 127.0.0.1 (ports ``base_port``
    upwards, else free ones), all at once, and return once every broker serves.

    ``started`` is told, one line each, what has started and where its log is. When a
    broker fails to start, everything started so far is stopped and :class:`BrokerStartError`
    raised; when ``stopping()`` becomes true, the cluster is returned at once, its brokers
    not all serving, for the caller to stop (check ``stopping()`` again). Raises
    :class:`ClusterError` for what is wrong before anything runs (a memory URL, a bad
    ``extra`` value, an unusable directory, no server installed) and
    :class:`~coordinator.errors.CoordinatorError` when the URL does not answer.
    """
    extra = dict(extra or {})
    check_properties(extra)
    if coordinator_url is not None:
        coordinator_property(coordinator_url)  # refuses a memory store before connecting
        coordinator.connect(coordinator_url, timeout=connect_timeout).close()
    if directory is None:
        root, owned = Path(tempfile.mkdtemp(prefix="partctl-cluster-")), True
    else:
        root, owned = Path(directory).resolve(), False
        try:
            root.mkdir(parents=True, exist_ok=True)
            if not os.access(root, os.W_OK | os.X_OK):
                raise PermissionError(errno.EACCES, "not writable")
        except OSError as exc:
            raise ClusterError(f"cannot use {root} for the cluster: {exc.strerror or exc}"
                               ) from None
    cluster = LocalCluster(directory=root, remove_directory=owned, server=None,
                           coordinator_url=coordinator_url or "")
    try:
        if coordinator_url is None:
            cluster.server = _start_server(store, root, fsync)
            cluster.coordinator_url = cluster.server.url("/partctl")
            started(f"{cluster.server.kind} at {cluster.server.address} (pid "
                    f"{cluster.server.pid}, log {cluster.server.log_path})")
        for broker_id in range(1, brokers + 1):
            if stopping():
                break
            port = base_port + broker_id - 1 if base_port is not None else 0
            cluster.brokers.append(launch_broker(root / f"broker-{broker_id}", broker_id,
                                                 cluster.coordinator_url, port=port,
                                                 extra=extra))
        _wait_all_serving(cluster.brokers, timeout, stopping)
    except BrokerStartError as exc:
        cluster.stop(timeout=30)
        if owned:  # its log went with the directory
            raise
        raise BrokerStartError(exc.broker_id, f"{exc.reason} (log: {exc.log_path})",
                               exc.log_path) from None
    except BaseException:
        cluster.stop(timeout=30)
        raise
    if stopping():
        return cluster
    for broker in cluster.brokers:
        started(broker.started_line())
    return cluster


def _wait_all_serving(brokers: Sequence[LaunchedBroker], timeout: float,
                      stopping: Callable[[], bool]) -> None:
    """Wait for every broker in parallel: the first to fail is the error (the brokers start
    together, so one that cannot bind is known at once, not after the others)."""
    deadline = time.monotonic() + timeout
    waiting = list(brokers)
    while waiting and not stopping():
        for broker in list(waiting):
            if broker.serving():
                waiting.remove(broker)
            elif not broker.running():
                raise BrokerStartError(broker.broker_id,
                                       broker.error_line() or broker.exit_reason(),
                                       broker.log_path)
        if waiting and time.monotonic() > deadline:
            raise BrokerStartError(waiting[0].broker_id, f"not serving after {timeout:.0f}s",
                                   waiting[0].log_path)
        time.sleep(0.05)

