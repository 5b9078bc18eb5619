"""Controller benchmark: failover and mass elections on 10 brokers x 100,000 partitions (RF 3).

    .venv/bin/python benchmarks/controller.py                       # memory, zookeeper, etcd
    .venv/bin/python benchmarks/controller.py --backend memory --partitions 20000
    .venv/bin/python benchmarks/controller.py --backend etcd --partitions 5000   # a quick check
    .venv/bin/python benchmarks/controller.py --repeat 3           # medians and ranges
    .venv/bin/python benchmarks/controller.py --backend zookeeper --url zookeeper://h:2181/bench

Per coordinator: (a) hot-standby failover (the standby sees /controller go -> active with
UpdateMetadata sent), (b) cold failover, (c) uncontrolled loss of a broker leading N/10
partitions, (d) controlled shutdown of such a broker, (e) preferred election of N/10
partitions, (f) a full restart (every broker lost, then back at once), (g) a rolling
return (every broker lost, then back one at a time) and (h) a hot-standby failover in the
middle of a full restart (the controller's session goes once the standby's view shows 40% of
the partitions led again: the standby is behind the elections' writes and its prepared
metadata is out of date); and the raw fenced batched write rate (write_many of SetData with a
guard) in the same run. The cluster is written with bulk writes.

The product runs as it is configured by default (ControllerConfig() but for the auto leader
rebalance, which would move leaders between steps) and nothing in it is patched: the benchmark
sets no garbage-collector mode of its own (the controller's pause_gc_during_events, on by
default, is what users get) and no priorities. Steps (c)-(e) end when every replica's broker
has been delivered the LeaderAndIsr that names the partition's new leader: the brokers are
the benchmark's own minimal request handlers on the in-process network (they fence and
acknowledge as a broker does, and note the time of each LeaderAndIsr), and the benchmark reads
what they were delivered. (a), (b) and (h) end when the new controller has sent UpdateMetadata
(its own FailoverTimings); (h)'s note has the rest of that failover, which elects every
partition still offline.

On ZooKeeper and etcd the standby (a) and the cold candidate (b) run in processes of their own,
as candidates do in a deployment, at normal priority; on the memory coordinator, which lives in
one process, they run beside the active controller and share its GIL. Here they also share the
machine's cores with the server and the active controller, which a deployment would not.

Figures per step: its time; the elections it made; and the whole machine's CPU seconds per
election from the step's start to its end (every process: controllers, standby, server,
benchmark), beside the machine's CPU per raw write. /proc/stat counts in 10 ms ticks, so the
CPU figures mean something from a few thousand elections up. The per-step CPU notes show what
each thread group and process used. ZooKeeper and etcd are started here on loopback
(coordinator.servers) without fsync unless --server-fsync, as the table's header says. With
--repeat each coordinator runs several times on fresh servers and a summary gives each step's
median and range.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import coordinator  # noqa: E402
from benchmarks.common import (  # noqa: E402
    add_server_options,
    cpu_seconds,
    machine_cpu,
    server_label,
    start_server,
)
from benchmarks.controller_brokers import LocalSessions, RemoteSessions  # noqa: E402
from broker.process import SWITCH_INTERVAL  # noqa: E402
from coordinator import layout  # noqa: E402
from coordinator.codecs import (  # noqa: E402
    PartitionStateNode,
    TopicAssignment,
    TopicPartition,
)
from coordinator.metadata import MetadataClient  # noqa: E402
from coordinator.model import Check, Create, Delete, SetData  # noqa: E402
from interbroker.channel import BrokerResponse
from interbroker.errors import ErrorCode
from interbroker.requests import LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest
from statemachines.controller import (  # noqa: E402
    Controller,
    ControllerConfig,
    FailoverTimings,
)
from statemachines.in_process import InProcessNetwork

MARK = "/bench-mark"  # written after each step: see mark() in run()
PER_TOPIC = 1000
SETUP_SESSION_TIMEOUT = 60.0  # seconds; see build_cluster
TARGETS = {"a": 1.0, "b": {"memory": 3.0, "zookeeper": 10.0, "etcd": 3.0}, "c": 1.0, "d": 1.0,
           "e": 1.0, "f": 30.0, "g": 30.0, "h": 1.0}
"""Each step's target up to a million partitions (the default 100,000's)."""
H_AT = 0.4
"""(h): the share of partitions led again, in the standby's view, when the controller's
session goes."""
MILLION = 1_000_000
MILLION_TARGETS = {"a": 1.0, "b": 10.0, "c": 1.0, "d": 1.0, "e": 1.0, "f": 30.0, "g": 30.0,
                   "h": 1.0}
"""From a million partitions on: the controller-at-a-million targets (every coordinator)."""


@dataclass
class Result:
    backend: str
    partitions: int = 0
    write_rate: float = 0.0
    write_cpu: float = 0.0  # the machine's CPU seconds per raw write (its best round)
    step_cpu: dict[str, float] = field(default_factory=dict)  # per election, same measure
    times: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    rss: dict[str, tuple[float, float]] = field(default_factory=dict)  # MiB: now, peak


class ProcessCPU:
    """Another process's CPU seconds since the last call: a candidate's or the server's."""

    def __init__(self, pid: int, label: str) -> None:
        self.pid, self.label = pid, label
        self._mark = 0.0

    def __call__(self) -> str:
        total = cpu_seconds(self.pid)
        if total is None:
            return ""
        used, self._mark = total - self._mark, total
        return f"{self.label} {used:.2f}s"


class MachineCPU:
    """The whole machine's CPU between a mark and a reading: every process on every core
    (controllers, server, benchmark), so a step's CPU per election can be set beside the raw
    write's."""

    def __init__(self) -> None:
        self._mark: tuple[float, float, float] | None = None

    @staticmethod
    def read() -> tuple[float, float, float] | None:
        """The reading now: busy and stolen CPU seconds, and the wall clock."""
        now = machine_cpu()
        return None if now is None else (*now, time.perf_counter())

    def mark(self) -> None:
        self._mark = self.read()

    def since(self, end: tuple[float, float, float] | None = None
              ) -> tuple[float, float, float] | None:
        """(busy seconds, stolen seconds, wall seconds) from the mark to ``end`` (a reading
        taken when the step ended; default now), or None."""
        end = end or self.read()
        if end is None or self._mark is None:
            return None
        return end[0] - self._mark[0], end[1] - self._mark[1], end[2] - self._mark[2]


CORES = os.cpu_count() or 1
RSS_TARGET_MIB = 2048


def rss(pid: int) -> tuple[float, float]:
    """A process's resident set now and at its peak (VmRSS, VmHWM), in MiB; zeros when
    /proc cannot be read."""
    found = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    found[key] = int(value.split()[0]) / 1024
    except OSError:
        pass
    return found.get("VmRSS", 0.0), found.get("VmHWM", 0.0)


class ThreadCPU:
    """CPU seconds per thread group between marks (Linux /proc; empty elsewhere), to show who
    else held the GIL while a step ran: the standby, the coordinators' dispatchers, the benchmark;
    and the other processes that shared the cores (a candidate's, the server's)."""

    def __init__(self, groups: dict[str, str], also: list[Callable[[], str]]) -> None:
        self.groups = groups  # thread-name prefix -> label
        self.also = also  # other processes' CPU since their last call, or ""
        self._last: dict[int, float] = {}
        self._wall = time.perf_counter()

    def _sample(self) -> dict[int, tuple[str, float]]:
        out = {}
        for t in threading.enumerate():
            tid = t.native_id
            cpu = cpu_seconds(f"self/task/{tid}")
            if cpu is None:
                continue
            label = next((v for k, v in self.groups.items() if t.name.startswith(k)), "other")
            out[tid] = (label, cpu)
        return out

    def mark(self) -> None:
        self.since()  # counting starts here

    def since(self) -> str:
        """What each used since the last mark or call; the next call counts from here."""
        sample = self._sample()
        wall, self._wall = time.perf_counter() - self._wall, time.perf_counter()
        totals: dict[str, float] = {}
        for tid, (label, cpu) in sample.items():
            totals[label] = totals.get(label, 0.0) + cpu - self._last.get(tid, 0.0)
        self._last = {tid: cpu for tid, (_, cpu) in sample.items()}
        parts = [f"{k} {v:.2f}s" for k, v in sorted(totals.items()) if v >= 0.005]
        parts.extend(other() for other in self.also)
        return f"in {wall:.2f}s: " + ", ".join(p for p in parts if p)


SERVER_ALIVE: list[Callable[[], None]] = []
"""Checks that raise when the run's server has died: the waits call them, so that a run whose
server died stops at once with that reason rather than at a step's timeout."""


def check_server() -> None:
    for check in SERVER_ALIVE:
        check()


def wait(predicate, timeout: float = 120.0, step: float = 0.001) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("benchmark step did not finish")
        check_server()
        time.sleep(step)


Reading = tuple[float, float, float]  # MachineCPU.read()


class Delivered:
    """One broker's side on the in-process network (a ``statemachines.RequestHandler``): it
    refuses a request of an older controller epoch or for another registration of the broker
    and acknowledges the rest, as partctl's brokers do, and notes the time and the machine's
    CPU reading after each LeaderAndIsr it acknowledged. It keeps nothing else (no replicas),
    so a delivery costs the controller's thread a clock read and an append more than a
    broker's answer.

    The benchmark's own rather than a product one: no product handler acknowledges without
    keeping replicas, and benchmarks never import the tests' recording broker."""

    def __init__(self, broker_id: int, epoch: int, arrived: threading.Event,
                 keep: bool = True) -> None:
        self.id = broker_id
        self.keep = keep  # the deliveries (a candidate's process keeps none: its RSS is read)
        self.epoch = epoch
        self.controller_epoch = -1
        self._lock = threading.Lock()  # two controllers may deliver at once during a failover
        self.leader_and_isr: list[tuple[float, Reading | None, LeaderAndIsrRequest]] = []
        self.arrived = arrived  # shared by the brokers: set after each delivery

    def _check(self, controller_epoch: int, broker_epoch: int) -> BrokerResponse:
        with self._lock:
            if controller_epoch < self.controller_epoch:
                return BrokerResponse(error=ErrorCode.STALE_CONTROLLER_EPOCH)
            if broker_epoch < self.epoch:
                return BrokerResponse(error=ErrorCode.STALE_BROKER_EPOCH)
            # The stand-in is every registration of its broker: a newer one (the broker came
            # back, registered from another process) is its own, and an older one stale.
            self.epoch = broker_epoch
            self.controller_epoch = controller_epoch
            return BrokerResponse()

    def handle_leader_and_isr(self, request: LeaderAndIsrRequest) -> BrokerResponse:
        response = self._check(request.controller_epoch, request.broker_epoch)
        if not response.error:
            if self.keep:
                self.leader_and_isr.append((time.perf_counter(), MachineCPU.read(), request))
            self.arrived.set()
        return response

    def handle_update_metadata(self, request: UpdateMetadataRequest) -> BrokerResponse:
        return self._check(request.controller_epoch, request.broker_epoch)

    def handle_stop_replica(self, request: StopReplicaRequest) -> BrokerResponse:
        return self._check(request.controller_epoch, request.broker_epoch)


class LeaderAndIsrSent:
    """Made before a step starts; :meth:`wait` returns once each partition of ``tps`` has been
    delivered, to every replica's broker in ``registered``, a LeaderAndIsr naming a leader
    from ``leaders``: the time and machine CPU reading of the delivery that completed it.

    The benchmark's thread looks at the deliveries only once every broker still owed one has
    had a new one (a step usually sends each broker one request), so it does not take the GIL
    from the controller while the controller is still sending."""

    def __init__(self, delivered: dict[int, Delivered],
                 replicas: dict[TopicPartition, tuple[int, ...]],
                 tps: Collection[TopicPartition], leaders: Collection[int],
                 registered: Collection[int], arrived: threading.Event) -> None:
        self.delivered = delivered
        self.arrived = arrived
        self.accept = frozenset(leaders)
        live = frozenset(registered)
        self.owed: dict[int, set[tuple[str, int]]] = {}
        for tp in tps:
            for b in replicas[tp]:
                if b in live:
                    self.owed.setdefault(b, set()).add((tp.topic, tp.partition))
        self.seen = {b: len(d.leader_and_isr) for b, d in delivered.items()}

    def wait(self, timeout: float = 120.0) -> tuple[float, Reading | None]:
        deadline = time.monotonic() + timeout
        last: tuple[float, Reading | None] = (0.0, None)
        while True:
            self.arrived.clear()
            owed = [b for b, want in self.owed.items() if want]
            if not owed:
                return last
            if all(len(self.delivered[b].leader_and_isr) > self.seen[b] for b in owed):
                for b in owed:
                    log, want = self.delivered[b].leader_and_isr, self.owed[b]
                    new, self.seen[b] = log[self.seen[b]:], len(log)
                    for at, reading, request in new:
                        before = len(want)
                        want.difference_update((p.topic, p.partition) for p in request.partitions
                                               if p.leader in self.accept)
                        if len(want) < before and at > last[0]:
                            last = (at, reading)
                continue
            left = deadline - time.monotonic()
            check_server()
            if left <= 0:
                raise TimeoutError(
                    "benchmark step did not finish: "
                    f"{sum(len(v) for v in self.owed.values())} partition-replicas still "
                    "without their new leader's LeaderAndIsr")
            self.arrived.wait(min(left, 1.0))


class LocalCandidate:
    """A controller candidate in this process (the memory coordinator lives in one process)."""

    def __init__(self, url: str, network: InProcessNetwork, cid: int, hot: bool) -> None:
        self.ctl = _candidate(coordinator.connect(url), network, cid, hot)

    def wait_ready(self, partitions: int) -> None:
        if self.ctl.config.hot_standby:
            _wait_loaded(self.ctl, partitions)

    def wait_idle(self, revision: int, timeout: float = 120) -> None:
        self.ctl.caught_up(revision, timeout)

    def failover(self, timeout: float) -> FailoverTimings:
        ctl = self.ctl
        wait(lambda: ctl.active and ctl.last_failover is not None, timeout=timeout)
        assert ctl.last_failover is not None
        return ctl.last_failover

    def close_session(self) -> None:
        self.ctl.coordinator.close()

    def wait_led(self, count: int, fewer: bool, timeout: float) -> int:
        return _wait_led(self.ctl, count, fewer, timeout)

    pid = None  # shares this process: its RSS is not its own

    @staticmethod
    def cpu() -> str:
        return ""  # counted with this process's threads

    def stop(self) -> None:
        self.ctl.close()
        self.ctl.coordinator.close()


class RemoteCandidate:
    """A controller candidate in a process of its own, as in a deployment (every candidate is
    a broker process): the watch traffic that keeps its view warm (on ZooKeeper, a read per
    changed partition state) does not then share the measured controller's GIL. Its brokers
    are recorders attached in that process, so what it sends costs what it costs here."""

    def __init__(self, url: str, cid: int, hot: bool, partitions: int) -> None:
        mp = multiprocessing.get_context("spawn")
        self.conn, child = mp.Pipe()
        self.proc = mp.Process(target=_candidate_process,
                               args=(url, cid, hot, partitions, child),
                               name=f"candidate-{cid}", daemon=True)
        self.proc.start()
        assert self.proc.pid is not None
        self.pid: int | None = self.proc.pid
        self.cpu = ProcessCPU(self.proc.pid, "standby process")

    def _expect(self, kind: str, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        while not self.conn.poll(min(1.0, max(0.0, deadline - time.monotonic()))):
            check_server()
            if not self.proc.is_alive():
                raise RuntimeError(f"candidate process exited ({self.proc.exitcode}) "
                                   f"before {kind!r}")
            if time.monotonic() >= deadline:
                raise TimeoutError(f"candidate process: no {kind!r} within {timeout:.0f}s")
        got, value = self.conn.recv()
        if got == "error":
            raise RuntimeError(f"candidate process failed: {value}")
        if got != kind:
            raise RuntimeError(f"candidate process said {got!r}, expected {kind!r}")
        return value

    def wait_ready(self, partitions: int) -> None:
        self._expect("ready", 900)

    def wait_idle(self, revision: int, timeout: float = 120) -> None:
        self.conn.send(("idle", revision, timeout))
        self._expect("idle", timeout + 10)

    def failover(self, timeout: float) -> FailoverTimings:
        return FailoverTimings(**self._expect("failover", timeout))

    def close_session(self) -> None:
        self.conn.send("close")

    def wait_led(self, count: int, fewer: bool, timeout: float) -> int:
        """Wait until this candidate's view shows at most (``fewer``) or at least ``count``
        partitions with a leader; returns how many it showed."""
        self.conn.send(("led", count, fewer, timeout))
        return int(self._expect("led", timeout + 10))

    def stop(self) -> None:
        try:
            self.conn.send("stop")
        except OSError:
            pass
        self.proc.join(30)
        if self.proc.is_alive():
            self.proc.kill()


def _candidate(session: coordinator.Coordinator, network: InProcessNetwork, cid: int,
               hot: bool) -> Controller:
    ctl = Controller(session, cid, network.channel(), config=ControllerConfig(
        hot_standby=hot, auto_leader_rebalance_enable=False))
    network.register_controller(cid, ctl)
    ctl.start()
    return ctl


def _wait_led(ctl: Controller, count: int, fewer: bool, timeout: float) -> int:
    """Wait until ``ctl``'s view has at most (``fewer``) or at least ``count`` partitions led
    by a broker; returns how many it had. Counted as a sum over the brokers' led sets, not a
    pass over a million partitions."""
    seen = [-1]

    def enough() -> bool:
        ctx = ctl.ctx
        try:
            seen[0] = sum(len(ctx.led_by(b)) for b in list(ctx.hosting_brokers()))
        except RuntimeError:  # (its event thread changed the brokers meanwhile: ask again)
            return False
        return seen[0] <= count if fewer else seen[0] >= count

    wait(enough, timeout=timeout, step=0.05)
    return seen[0]


def _wait_loaded(ctl: Controller, partitions: int) -> None:
    wait(lambda: len(ctl.ctx.leaders) >= partitions and ctl.events.pending() == 0, timeout=600)
    ctl.events.wait_idle(120)


def _candidate_process(url: str, cid: int, hot: bool, partitions: int, conn: Any) -> None:
    """A candidate's process: stands, reports when its view is loaded, answers "idle" and
    "close" (its session), and reports its failover timings when it becomes active. It runs
    with the switch interval of the product's broker and controller processes."""
    sys.setswitchinterval(SWITCH_INTERVAL)
    logging.basicConfig(level=logging.WARNING)
    try:
        session = coordinator.connect(url)
        network = InProcessNetwork()
        for b, registered in MetadataClient(session).brokers().items():
            network.attach(b, Delivered(b, registered.epoch, threading.Event(), keep=False))
        ctl = _candidate(session, network, cid, hot)
        if hot:
            _wait_loaded(ctl, partitions)
        conn.send(("ready", None))
        reported = None
        while True:
            if conn.poll(0.005):
                command = conn.recv()
                if command == "stop":
                    break
                if command == "close":
                    session.close()
                elif command[0] == "idle":
                    ctl.caught_up(command[1], command[2])
                    conn.send(("idle", None))
                elif command[0] == "led":
                    _, count, fewer, timeout = command
                    conn.send(("led", _wait_led(ctl, count, fewer, timeout)))
            f = ctl.last_failover
            if f is not None and f is not reported and ctl.active:
                conn.send(("failover", asdict(f)))
                reported = f
        ctl.close()
        session.close()
    except (EOFError, BrokenPipeError):  # the benchmark stopped (a failed run exits at once)
        pass
    except Exception as exc:  # the parent reports it as the step's failure
        conn.send(("error", f"{type(exc).__name__}: {exc}"))


def build_cluster(url: str, brokers: int, partitions: int, rf: int) -> dict[int, list[TopicPartition]]:
    """Topic nodes and partition states via bulk writes. Broker b leads partitions/brokers;
    the last broker's partitions are led by their second replica (for the preferred run).

    Its session asks for SETUP_SESSION_TIMEOUT: at 1,000,000 partitions on a busy machine
    ZooKeeper answered the pings of the default 10 s session too late behind the bulk writes
    queued before them, and the connection dropped mid-load (with the collector off as well)."""
    c = coordinator.connect(url, session_timeout=SETUP_SESSION_TIMEOUT)
    md = MetadataClient(c)
    md.ensure_layout()
    c.ensure_path(layout.CONTROLLER_EPOCH) if c.exists(layout.CONTROLLER_EPOCH) else c.create(
        layout.CONTROLLER_EPOCH, b"0")
    topics = max(1, partitions // PER_TOPIC)
    preferred: dict[int, list[TopicPartition]] = {b: [] for b in range(1, brokers + 1)}
    creates_mid, creates_leaf = [], []
    for t in range(topics):
        name = f"bench-{t}"
        count = min(PER_TOPIC, partitions - t * PER_TOPIC)
        assignment = {}
        for p in range(count):
            i = t * PER_TOPIC + p
            first = i % brokers
            replicas = tuple((first + k) % brokers + 1 for k in range(rf))
            assignment[p] = replicas
            preferred[replicas[0]].append(TopicPartition(topic=name, partition=p))
            leader = replicas[1] if replicas[0] == brokers else replicas[0]
            state = PartitionStateNode(leader=leader, leader_epoch=0, isr=replicas,
                                       controller_epoch=0)
            creates_mid.append(Create(path=layout.partition(name, p)))
            creates_leaf.append(Create(path=layout.partition_state(name, p), data=state.encode()))
        md.create_topic(TopicAssignment(topic=name, partitions=assignment))
        creates_mid.insert(len(creates_mid) - count, Create(path=layout.partitions(name)))
    partitions_nodes = [op for op in creates_mid if op.path.endswith("/partitions")]
    for ops in (partitions_nodes, [op for op in creates_mid if op not in partitions_nodes]
                if len(creates_mid) < 5000 else
                [op for op in creates_mid if not op.path.endswith("/partitions")], creates_leaf):
        for r in c.write_many(ops):
            if isinstance(r, Exception):
                raise r
    c.close()
    return preferred


def _guarded_rewrites(url: str, root: str, n: int,
                      rounds: int) -> tuple[list[tuple[float, float]], int | None]:
    """Create ``n`` scratch nodes under ``root``, rewrite them all ``rounds`` times with one
    guarded ``write_many`` each, delete them; the writes/s of each round, and the machine's CPU
    seconds per write in it (0 where they cannot be read); and the most ops the client puts in
    one multi (etcd: its --max-txn-ops / 3; None where only bytes bound a multi)."""
    c = coordinator.connect(url)
    c.ensure_path(root)
    c.write_many([Create(path=f"{root}/n{i}", data=b"x" * 64) for i in range(n)])
    guard_stat = c.exists(layout.CONTROLLER_EPOCH)
    assert guard_stat is not None
    guard = Check(path=layout.CONTROLLER_EPOCH, version=guard_stat.version)
    rates = []
    for _ in range(rounds):
        ops = [SetData(path=f"{root}/n{i}", data=b"y" * 120) for i in range(n)]
        machine = MachineCPU()
        machine.mark()
        t0 = time.perf_counter()
        c.write_many(ops, guard=guard)
        rate = n / (time.perf_counter() - t0)
        load = machine.since()
        rates.append((rate, load[0] / n if load else 0.0))
    c.write_many([Delete(path=f"{root}/n{i}") for i in range(n)])  # one multi per chunk
    c.delete(root)
    ops = c.capabilities.max_multi_ops
    c.close()
    return rates, ops


def raw_write_rate(url: str, n: int = 20000,
                   rounds: int = 3) -> tuple[float, float, int | None]:
    """The coordinator's fenced batched write rate: ``write_many`` of ``n`` guarded SetData,
    the best of ``rounds`` (one round on a busy two-core machine can come out at half), and
    the machine's CPU seconds per write in that round.

    Measured on a warm server, as the steps are: as many rounds again go first and do not
    count. On a fresh ZooKeeper the JVM is still compiling the write path then; its first
    three rounds after the cluster's creation came out at 87k, 107k and 157k writes/s, the
    next six at 135k-163k, so the best of the first three was sometimes a cold round. Also the
    most ops one multi of the client's holds."""
    rates, ops = _guarded_rewrites(url, "/bench-raw", n, 2 * rounds)
    return (*max(rates[rounds:]), ops)


def warm_up(url: str) -> None:
    """Writes while the standby follows the store, before anything is measured. A server runs
    code the first time here that the raw rate did not (ZooKeeper's JVM compiles its watch
    notification path: the first measured step took about twice the server CPU a write of the
    next ones); a server in a deployment has long done so. Nothing the controller reads."""
    _guarded_rewrites(url, "/bench-warm-up", 20000, 2)


def _steps(f: FailoverTimings) -> str:
    return (f"elected {f.elected - f.started:.2f}s, view ready {f.view_ready - f.elected:.2f}s, "
            f"metadata sent {f.metadata_sent - f.view_ready:.2f}s")


def run(backend: str, url: str, brokers: int, partitions: int, rf: int, res: Result,
        server_pid: int | None = None, skip: str = "") -> Result:
    t0 = time.perf_counter()
    preferred = build_cluster(url, brokers, partitions, rf)
    res.notes.append(f"setup {time.perf_counter() - t0:.1f}s")
    res.write_rate, res.write_cpu, multi_ops = raw_write_rate(url)
    if res.write_cpu:
        res.notes.append(f"raw: {1e6 * res.write_cpu:.0f} us of the machine's CPU per write "
                         "(client and server, the best round"
                         + (f"; the client's multis hold any {multi_ops} ops)"
                            if multi_ops is not None else ")"))

    network = InProcessNetwork()
    arrived = threading.Event()
    delivered: dict[int, Delivered] = {}
    # The stand-in brokers' sessions: in a process of their own on ZooKeeper and etcd
    # (benchmarks/controller_brokers.py), so that the controller's work in this one cannot
    # starve their pings; what the controller sends them is delivered here.
    sessions: LocalSessions | RemoteSessions = (
        LocalSessions(url) if backend == "memory" else RemoteSessions(url, check_server))
    everyone = range(1, brokers + 1)
    for b, epoch in sessions.register(everyone).items():
        delivered[b] = Delivered(b, epoch, arrived)
        network.attach(b, delivered[b])

    def candidate(cid: int, hot: bool) -> LocalCandidate | RemoteCandidate:
        if backend == "memory":
            return LocalCandidate(url, network, cid, hot)
        return RemoteCandidate(url, cid, hot, partitions)

    # A write after a step's own: a standby has caught up when its view has shown it.
    probe = coordinator.connect(url)
    probe.create(MARK, b"", make_parents=True)

    def mark() -> int:
        return probe.set(MARK, b"").modify_id

    # The first controller's session asks for SETUP_SESSION_TIMEOUT: its own initial load of a
    # million partitions keeps this interpreter from answering ZooKeeper's pings for longer
    # than 10 s. It ends by being closed (a), so no figure waits on it.
    a = _candidate(coordinator.connect(url, session_timeout=SETUP_SESSION_TIMEOUT), network, 101,
                   hot=True)
    wait(lambda: a.active and a.last_failover is not None, timeout=900)  # the initial load
    a.events.wait_idle(120)
    b = candidate(102, hot=True)
    b.wait_ready(partitions)
    warm_up(url)
    b.wait_idle(mark())
    res.notes.append(f"initial load {a.last_failover.done - a.last_failover.started:.2f}s"
                     if a.last_failover else "")
    cpu = ThreadCPU({"partctl-controller-101": "active", "partctl-controller-102": "standby",
                     "partctl-controller-103": "cold", "partctl-coordinator": "dispatchers",
                     "MainThread": "benchmark"},
                    also=[b.cpu] + ([ProcessCPU(server_pid, "server")] if server_pid else []))
    machine = MachineCPU()
    replicas = dict(a.ctx.replicas)  # the assignment, which no step changes

    registered = set(everyone)  # brokers whose sessions are open

    def sent(tps: Collection[TopicPartition], leaders: Collection[int]) -> LeaderAndIsrSent:
        return LeaderAndIsrSent(delivered, replicas, tps, leaders, registered, arrived)

    def machine_note(key: str, end: Reading | None) -> None:
        load = machine.since(end)
        count = res.counts[key]
        if load is None or not count:
            return
        busy, steal, wall = load
        res.step_cpu[key] = busy / count
        note = (f"({key}) machine {100 * busy / (CORES * wall):.0f}% busy ({CORES} cores), "
                f"{1e6 * busy / count:.0f} us of CPU per election (every process, from the "
                "step's start to its end)")
        if steal >= 0.01:
            note += f", {100 * steal / (CORES * wall):.0f}% stolen by the host"
        res.notes.append(note)

    # (e) preferred election of the last broker's partitions
    md = MetadataClient(probe)
    target = preferred[brokers]
    step = sent(target, [brokers])
    cpu.mark()
    machine.mark()
    t = time.perf_counter()
    md.request_preferred_election(target)
    end, reading = step.wait()
    res.times["e"] = end - t
    during = cpu.since()
    res.counts["e"] = len(target)
    machine_note("e", reading)
    a.events.wait_idle(120)
    b.wait_idle(mark())
    res.notes.append(f"(e) CPU during the step: {during}; then until both idle: {cpu.since()}")

    # (c) uncontrolled loss of broker 1
    lost = sorted(a.ctx.led_by(1))
    registered.discard(1)  # its session goes: nothing is sent to it
    step = sent(lost, range(2, brokers + 1))  # any other broker leads
    cpu.mark()
    machine.mark()
    t = time.perf_counter()
    sessions.close([1])
    end, reading = step.wait()
    res.times["c"] = end - t
    during = cpu.since()
    assert not a.ctx.led_by(1) and 1 not in a.ctx.brokers
    res.counts["c"] = len(lost)
    machine_note("c", reading)
    a.events.wait_idle(120)
    res.notes.append(f"(c) incl. follower ISR shrinks {time.perf_counter() - t:.2f}s")
    b.wait_idle(mark())
    res.notes.append(f"(c) CPU during the step: {during}; then until both idle: {cpu.since()}")

    # (d) controlled shutdown of broker 2
    # The step: a broker leading N/brokers partitions (after (c), broker 2 leads twice
    # that: it took over broker 1's).
    share = partitions // brokers
    victim = min((x for x in range(2, brokers + 1)), key=lambda x: abs(len(a.ctx.led_by(x)) - share))
    leading = sorted(a.ctx.led_by(victim))
    # Kafka's liveOrShuttingDownReplicas: the broker shutting down hears it too.
    step = sent(leading, [x for x in range(2, brokers + 1) if x != victim])
    cpu.mark()
    machine.mark()
    t = time.perf_counter()
    reply = a.request_controlled_shutdown(victim, delivered[victim].epoch or 0)
    end, reading = step.wait()
    res.times["d"] = end - t
    remaining = reply.result(120)
    during = cpu.since()
    res.counts["d"] = len(leading) - len(remaining)
    machine_note("d", reading)
    a.events.wait_idle(120)
    res.notes.append(f"(d) broker {victim} leading {len(leading)}; answered "
                     f"{len(remaining)} still led; incl. follower ISR shrinks "
                     f"{time.perf_counter() - t:.2f}s")
    b.wait_idle(mark())
    res.notes.append(f"(d) CPU during the step: {during}; then until both idle: {cpu.since()}")

    # (f) full restart: every broker's session goes (an uncontrolled stop of the whole
    # cluster: the controller takes each partition offline), then every broker registers
    # again; the step ends when each partition's replicas have all been delivered a
    # LeaderAndIsr naming a live leader (every partition online). Timed from the first
    # registration; the loss before it is a note.
    # (g) the same stop, then the brokers return one at a time, each registering once the
    # controller has handled the one before (a hundred returns, where (f) is one or two):
    # how a cluster comes back when its brokers' log recovery ends at different times.
    def full_restart(key: str, rolling: bool) -> None:
        t = time.perf_counter()
        held = rss(os.getpid())[0]
        sessions.close(sorted(registered))
        registered.clear()
        wait(lambda: not a.ctx.brokers, timeout=900)
        a.events.wait_idle(900)
        offline = sum(1 for lai in a.ctx.leaders.values() if lai.leader < 0)
        res.notes.append(f"({key}) all {brokers} brokers lost -> controller idle with {offline} "
                         f"partitions offline: {time.perf_counter() - t:.2f}s; replica states "
                         f"stored {len(a.ctx.replica_states.explicit()):,}; this process "
                         f"(the active controller, the stand-in brokers) {held:.0f} -> "
                         f"{rss(os.getpid())[0]:.0f} MiB")
        b.wait_idle(mark(), 900)
        registered.update(everyone)
        step = sent(replicas, everyone)
        cpu.mark()
        machine.mark()
        t = time.perf_counter()
        if rolling:
            for broker in everyone:
                sessions.register([broker])
                wait(lambda: broker in a.ctx.brokers, timeout=900)  # noqa: B023 (this broker)
                a.events.wait_idle(900)
        else:
            sessions.register(everyone)
        end, reading = step.wait(timeout=900)
        res.times[key] = end - t
        during = cpu.since()
        res.counts[key] = sum(1 for lai in a.ctx.leaders.values() if lai.leader >= 0)
        machine_note(key, reading)
        a.events.wait_idle(900)
        res.notes.append(f"({key}) {res.counts[key]} of {len(a.ctx.leaders)} partitions online; "
                         f"incl. until idle {time.perf_counter() - t:.2f}s")
        b.wait_idle(mark(), 900)
        res.notes.append(f"({key}) CPU during the step: {during}; then until both idle: "
                         f"{cpu.since()}")

    for key in "fg":
        if key not in skip:
            full_restart(key, rolling=key == "g")
    if b.pid is not None:
        res.rss["hot standby, loaded"] = rss(b.pid)

    # (a) hot failover: the active controller's session goes.
    cpu.mark()
    a.coordinator.close()
    f = b.failover(timeout=120)
    res.times["a"] = f.metadata_sent - f.started
    res.notes.append(f"(a) until done {f.done - f.started:.2f}s, warm={f.warm}, exact={f.exact}; "
                     f"{_steps(f)}")
    b.wait_idle(mark())
    res.notes.append(f"(a) CPU until idle: {cpu.since()}")
    if b.pid is not None:
        res.rss["hot, after its failover"] = rss(b.pid)

    # (b) cold failover
    cold = candidate(103, hot=False)
    cold.wait_ready(partitions)
    time.sleep(0.2)
    b.close_session()
    f = cold.failover(timeout=300)
    res.times["b"] = f.metadata_sent - f.started
    res.notes.append(f"(b) until done {f.done - f.started:.2f}s, warm={f.warm}; "
                     f"{_steps(f)}")
    if b.pid is not None and cold.pid is not None:
        res.rss["cold, after its failover"] = rss(cold.pid)
    b.stop()

    # (h) a hot failover in the middle of a full restart: a new hot standby follows the
    # controller (b's) through the loss of every broker and their return at once; when its
    # view shows H_AT of the partitions led again, the controller's session goes. The standby
    # is then behind the elections' writes (its tree watch reads each changed state) and its
    # prepared metadata is out of date for every partition elected since the loss. Timed as
    # (a) is; the note has the rest of its failover, which elects what is still offline.
    standbys: list[LocalCandidate | RemoteCandidate] = []
    if "f" in res.times and "h" not in skip:
        standby = candidate(104, hot=True)
        standbys.append(standby)
        standby.wait_ready(partitions)
        standby.wait_idle(mark(), 900)
        sessions.close(sorted(registered))
        registered.clear()
        standby.wait_led(0, fewer=True, timeout=900)  # the controller took every one offline
        standby.wait_idle(mark(), 900)
        sessions.register(everyone)
        registered.update(everyone)
        t = time.perf_counter()
        led = standby.wait_led(int(H_AT * partitions), fewer=False, timeout=900)
        into = time.perf_counter() - t
        cold.close_session()
        f = standby.failover(timeout=900)
        res.times["h"] = f.metadata_sent - f.started
        res.notes.append(f"(h) the controller's session closed {into:.2f}s into the return, "
                         f"its standby's view showing {led} of {partitions} partitions led; "
                         f"until done (every partition led) {f.done - f.started:.2f}s, "
                         f"exact={f.exact}; {_steps(f)}")
    a.close()
    for c in (cold, *standbys):
        c.stop()
    sessions.stop()
    probe.close()
    return res


NAMES = {"a": "(a) hot failover -> UpdateMetadata sent",
         "b": "(b) cold failover -> UpdateMetadata sent",
         "c": "(c) broker loss -> LeaderAndIsr sent",
         "d": "(d) controlled shutdown -> LeaderAndIsr sent",
         "e": "(e) preferred election -> LeaderAndIsr sent",
         "f": "(f) full restart -> every partition online",
         "g": "(g) rolling return, 1 broker at a time -> online",
         "h": "(h) hot failover mid-restart -> UM sent"}


def print_table(results: list[Result], header: str) -> None:
    print()
    print(header)
    print(f"{'coordinator':<11} {'step':<44} {'time':>8} {'target':>7} {'elections':>9} "
          f"{'CPU us/election':>15}")
    for r in results:
        cpu = f"{1e6 * r.write_cpu:>15.0f}" if r.write_cpu else ""
        print(f"{r.backend:<11} {'raw fenced write_many, writes/s (best of 3)':<44} "
              f"{r.write_rate:>8.0f} {'':>7} {'':>9} {cpu} (per raw write)")
        for key in "abcdefgh":
            if key not in r.times:
                continue
            count = f"{r.counts[key]:>9}" if key in r.counts else ""
            per = f"{1e6 * r.step_cpu[key]:>15.0f}" if r.step_cpu.get(key) else ""
            print(f"{'':<11} {NAMES[key]:<44} {r.times[key]:>7.3f}s "
                  f"{_target(key, r.backend, r.partitions):>6.1f}s {count:>9} {per}")
        for what, (now, peak) in r.rss.items():
            print(f"{'':<11} {'controller RSS, ' + what:<44} {now:>6.0f}MB {RSS_TARGET_MIB:>5}MB"
                  f" {'':>9} peak {peak:.0f} MiB")
        for note in r.notes:
            print(f"{'':<11}   {note}")


def _target(key: str, backend: str, partitions: int) -> float:
    if partitions >= MILLION:
        return MILLION_TARGETS[key]
    target = TARGETS[key]
    return target[backend] if isinstance(target, dict) else target


def print_summary(results: list[Result]) -> None:
    """Per coordinator and step over the repeated runs: median and range of the time, in how
    many runs its target held (this machine moves +-25% from run to run, more than most single
    changes), and the median machine CPU per election (per write for the raw rate)."""
    print()
    print(f"{'coordinator':<11} {'step':<6} {'runs':>4} {'median':>8} {'range':>15} "
          f"{'met':>5}   {'CPU us/op':>9}")
    for backend in dict.fromkeys(r.backend for r in results):
        runs = [r for r in results if r.backend == backend]
        rates = [r.write_rate for r in runs if r.write_rate]
        if rates:
            cpus = [r.write_cpu for r in runs if r.write_cpu]
            cpu = f"{1e6 * statistics.median(cpus):>9.0f}" if cpus else ""
            print(f"{backend:<11} {'raw/s':<6} {len(rates):>4} {statistics.median(rates):>8.0f} "
                  f"{min(rates):>7.0f}-{max(rates):<7.0f} {'':>5}   {cpu}")
        for key in "abcdefgh":
            times = [r.times[key] for r in runs if key in r.times]
            if not times:
                continue
            target = _target(key, backend, runs[0].partitions)
            line = (f"{'':<11} {f'({key})':<6} {len(times):>4} {statistics.median(times):>7.3f}s "
                    f"{min(times):>6.3f}-{max(times):<6.3f}s "
                    f"{sum(t <= target for t in times):>2}/{len(times):<2}")
            cpus = [r.step_cpu[key] for r in runs if r.step_cpu.get(key)]
            if cpus:
                line += f"   {1e6 * statistics.median(cpus):>9.0f}"
            print(line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", action="append", choices=["memory", "zookeeper", "etcd"],
                    help="a coordinator to run on (repeat for several; default: all three)")
    ap.add_argument("--url", help="coordinator URL (with --backend of one kind)")
    ap.add_argument("--brokers", type=int, default=10)
    ap.add_argument("--partitions", type=int, default=100_000,
                    help="partitions in the cluster (default 100,000; e.g. 5000 for a quick run)")
    ap.add_argument("--rf", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=1,
                    help="runs per coordinator, each on a fresh server and cluster; with more "
                         "than one, a summary gives each step's median and range")
    ap.add_argument("--skip", default="", metavar="fgh",
                    help="any of f, g and h: leave out the full restart, the rolling return, "
                         "the failover during a full restart (minutes each at 1,000,000 "
                         "partitions; h runs only after f); the other steps cannot be left "
                         "out")
    add_server_options(ap)
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error("--repeat takes a number of runs, at least 1")
    if args.url and args.repeat > 1:
        ap.error("--repeat needs a fresh cluster per run: leave out --url")
    if args.url and len(args.backend or []) != 1:
        ap.error("--url goes with exactly one --backend, the URL's kind")
    if set(args.skip) - {"f", "g", "h"}:
        ap.error(f"--skip {args.skip}: only f (the full restart), g (the rolling return) and "
                 "h (the failover during a full restart) can be left out")
    logging.basicConfig(level=logging.WARNING)
    backends = args.backend or ["memory", "zookeeper", "etcd"]
    where = (f"coordinator at {args.url}" if args.url
             else server_label(args) if set(backends) - {"memory"}
             else "the memory coordinator, in this process")
    header = f"{args.brokers} brokers, {args.partitions} partitions, RF {args.rf}; {where}"
    results: list[Result] = []
    failed = [one_backend(backend, args, results, header)
              for backend in [b for b in backends for _ in range(args.repeat)]]
    print_table(results, header)
    if args.repeat > 1:
        print_summary(results)
    failures = [f for f in failed if f]
    for line in failures:
        print(line, file=sys.stderr)
    if failures:
        # A failed run may leave its controllers' threads and sessions behind (a step stopped
        # half-way): they would keep the process alive, retrying a server already stopped.
        sys.stdout.flush()
        sys.stderr.flush()
        logging.shutdown()
        os._exit(1)


def one_backend(backend: str, args: argparse.Namespace, results: list[Result],
                header: str) -> str:
    """One run on ``backend`` (a fresh server unless --url): its table, and one line saying
    why it failed ("" when it did not). What was measured before a failing step is kept."""
    res = Result(backend=backend, partitions=args.partitions)
    results.append(res)
    server = None
    try:
        if args.url:
            url = args.url
        elif backend == "memory":
            url = f"memory://bench-{uuid.uuid4().hex[:8]}"
        else:
            server = start_server(backend, args, args.partitions)
            if backend == "zookeeper":
                root = coordinator.connect(server.url())
                root.ensure_path("/bench")
                root.close()
            url = server.url("/bench")
            SERVER_ALIVE[:] = [lambda: _alive(server, backend)]
        run(backend, url, args.brokers, args.partitions, args.rf, res,
            server_pid=server.pid if server is not None else None, skip=args.skip)
        if server is not None:
            _alive(server, backend)
        return ""
    except Exception as exc:
        logging.debug("benchmark on %s stopped", backend, exc_info=True)
        why = _one_line(exc)
        if server is not None and not server.running() and "server exited" not in why:
            why += (f" (the {backend} server had exited ({server.process.returncode})"
                    f"{_last_error(server)})")
        res.notes.append(f"stopped: {why}")
        return f"controller benchmark on {backend} failed: {why}"
    finally:
        SERVER_ALIVE.clear()
        print_table([res], header)
        if server is not None:
            server.stop()


def _alive(server: Any, backend: str) -> None:
    if not server.running():
        raise RuntimeError(f"the {backend} server exited ({server.process.returncode})"
                           f"{_last_error(server)}")


def _last_error(server: Any) -> str:
    """The last line of a dead server's log that names an error, as ": line", or ""."""
    lines = [line.strip() for line in server.log_tail(200).splitlines()
             if "Error" in line or "error" in line or "Exception" in line]
    return f": {lines[-1][:300]}" if lines else ""


def _one_line(exc: BaseException) -> str:
    """``Type: message``, on one line (a server's start error carries its log's tail)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


if __name__ == "__main__":
    main()
