"""Controller benchmark: failover and mass elections on 10 brokers x 100,000 partitions (RF 3).

    .venv/bin/python benchmarks/controller.py                       # memory, zookeeper, etcd
    .venv/bin/python benchmarks/controller.py --backend memory --partitions 20000
    .venv/bin/python benchmarks/controller.py --backend zookeeper --url zookeeper://h:2181/bench

Per coordinator: (a) hot-standby failover (the standby sees /controller go -> active with
UpdateMetadata sent), (b) cold failover, (c) uncontrolled loss of a broker leading N/10
partitions -> all re-elected and written, (d) controlled shutdown of such a broker, (e) preferred
election of N/10 partitions; plus the raw fenced batched write rate (write_many of SetData with
a guard) measured in the same run, and the elections/s of (c)-(e) as a ratio of it. Servers are
started from tests/servers.py unless URLs are given. The cluster is written with bulk writes.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import coordinator  # noqa: E402
from coordinator import layout  # noqa: E402
from coordinator.codecs import PartitionState, TopicAssignment, TopicPartition  # noqa: E402
from coordinator.metadata import MetadataClient  # noqa: E402
from coordinator.model import Check, Create, SetData  # noqa: E402
from statemachines.broker import Broker  # noqa: E402
from statemachines.channel import InProcessNetwork  # noqa: E402
from statemachines.controller import (  # noqa: E402
    Controller,
    ControllerConfig,
    FailoverTimings,
)

PER_TOPIC = 1000
TARGETS = {"a": 1.0, "b": {"memory": 3.0, "zookeeper": 10.0, "etcd": 3.0}, "c": 1.0, "d": 1.0,
           "e": 1.0}


@dataclass
class Result:
    backend: str
    write_rate: float = 0.0
    times: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


class ThreadCPU:
    """CPU seconds per thread group between marks (Linux /proc; empty elsewhere), to show who
    else held the GIL while a step ran: the standby, the coordinators' dispatchers, the poller."""

    def __init__(self, groups: dict[str, str]) -> None:
        self.groups = groups  # thread-name prefix -> label
        self._last: dict[int, float] = {}

    def _sample(self) -> dict[int, tuple[str, float]]:
        tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        out = {}
        for t in threading.enumerate():
            tid = t.native_id
            try:
                with open(f"/proc/self/task/{tid}/stat") as f:
                    fields = f.read().rpartition(")")[2].split()
            except OSError:
                continue
            label = next((v for k, v in self.groups.items() if t.name.startswith(k)), "other")
            out[tid] = (label, (int(fields[11]) + int(fields[12])) / tick)
        return out

    def mark(self) -> None:
        self._last = {tid: cpu for tid, (_, cpu) in self._sample().items()}

    def since(self) -> str:
        totals: dict[str, float] = {}
        for tid, (label, cpu) in self._sample().items():
            totals[label] = totals.get(label, 0.0) + cpu - self._last.get(tid, 0.0)
        return ", ".join(f"{k} {v:.2f}s" for k, v in sorted(totals.items()) if v >= 0.005)


def wait(predicate, timeout: float = 120.0, step: float = 0.001) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("benchmark step did not finish")
        time.sleep(step)


def _led_by(ctl: Controller, tp: TopicPartition, broker: int) -> bool:
    """A cheap first test for the polling loops (the full check walks 10,000 partitions, and
    the poller must not take the GIL from the controller it measures)."""
    value = ctl.ctx.leaders.get(tp)
    return value is not None and value.leader == broker


def build_cluster(url: str, brokers: int, partitions: int, rf: int) -> dict[int, list[TopicPartition]]:
    """Topic nodes and partition states via bulk writes. Broker b leads partitions/brokers;
    the last broker's partitions are led by their second replica (for the preferred run)."""
    c = coordinator.connect(url)
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
            state = PartitionState(leader=leader, leader_epoch=0, isr=replicas, controller_epoch=0)
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


def raw_write_rate(url: str, n: int = 20000) -> float:
    c = coordinator.connect(url)
    c.ensure_path("/bench-raw")
    c.write_many([Create(path=f"/bench-raw/n{i}", data=b"x" * 64) for i in range(n)])
    guard_stat = c.exists(layout.CONTROLLER_EPOCH)
    assert guard_stat is not None
    guard = Check(path=layout.CONTROLLER_EPOCH, version=guard_stat.version)
    ops = [SetData(path=f"/bench-raw/n{i}", data=b"y" * 120) for i in range(n)]
    t0 = time.perf_counter()
    c.write_many(ops, guard=guard)
    rate = n / (time.perf_counter() - t0)
    c.delete("/bench-raw", recursive=True)
    c.close()
    return rate


def _steps(f: FailoverTimings) -> str:
    return (f"elected {f.elected - f.started:.2f}s, view ready {f.view_ready - f.elected:.2f}s, "
            f"metadata sent {f.metadata_sent - f.view_ready:.2f}s")


def run(backend: str, url: str, brokers: int, partitions: int, rf: int, res: Result) -> Result:
    t0 = time.perf_counter()
    preferred = build_cluster(url, brokers, partitions, rf)
    res.notes.append(f"setup {time.perf_counter() - t0:.1f}s")
    res.write_rate = raw_write_rate(url)

    network = InProcessNetwork()
    sessions = {}
    for b in range(1, brokers + 1):
        s = coordinator.connect(url)
        broker = Broker(b, rack=None)
        broker.epoch = MetadataClient(s).register_broker(broker.info)
        network.attach(b, broker)
        sessions[b] = (s, broker)

    def controller(cid: int, hot: bool) -> Controller:
        s = coordinator.connect(url)
        ctl = Controller(s, cid, network.channel(), config=ControllerConfig(
            hot_standby=hot, auto_leader_rebalance_enable=False))
        network.register_controller(cid, ctl)
        ctl.start()
        return ctl

    a = controller(101, hot=True)
    wait(lambda: a.active and a.last_failover is not None)
    a.events.wait_idle(120)
    b = controller(102, hot=True)
    wait(lambda: len(b.ctx.leaders) >= partitions and b.events.pending() == 0, timeout=600)
    b.events.wait_idle(120)
    res.notes.append(f"initial load {a.last_failover.done - a.last_failover.started:.2f}s"
                     if a.last_failover else "")
    # A long-lived controller holds millions of objects that never die; without freezing them
    # every full collection walks them all, in the middle of a mass election.
    gc.collect()
    gc.freeze()
    cpu = ThreadCPU({"partctl-controller-101": "active", "partctl-controller-102": "standby",
                     "partctl-controller-103": "cold", "partctl-coordinator": "dispatchers",
                     "MainThread": "poller"})

    # (e) preferred election of the last broker's partitions
    md = MetadataClient(sessions[1][0])
    target = preferred[brokers]
    cpu.mark()
    t = time.perf_counter()
    md.request_preferred_election(target)
    wait(lambda: _led_by(a, target[-1], brokers) and all(
        a.ctx.leaders[tp].leader == brokers for tp in target))
    res.times["e"] = time.perf_counter() - t
    res.counts["e"] = len(target)
    a.events.wait_idle(120)
    b.events.wait_idle(120)
    res.notes.append(f"(e) CPU until both idle: {cpu.since()}")

    # (c) uncontrolled loss of broker 1
    lost = sorted(a.ctx.led_by(1))
    cpu.mark()
    t = time.perf_counter()
    sessions[1][0].close()
    wait(lambda: not a.ctx.led_by(1) and 1 not in a.ctx.brokers)
    res.times["c"] = time.perf_counter() - t
    res.counts["c"] = len(lost)
    a.events.wait_idle(120)
    res.notes.append(f"(c) incl. follower ISR shrinks {time.perf_counter() - t:.2f}s")
    b.events.wait_idle(120)
    res.notes.append(f"(c) CPU until both idle: {cpu.since()}")

    # (d) controlled shutdown of broker 2
    # The step: a broker leading N/brokers partitions (after (c), broker 2 leads twice
    # that: it took over broker 1's).
    share = partitions // brokers
    victim = min((x for x in range(2, brokers + 1)), key=lambda x: abs(len(a.ctx.led_by(x)) - share))
    moving = len(a.ctx.led_by(victim))
    cpu.mark()
    t = time.perf_counter()
    remaining = a.request_controlled_shutdown(victim, sessions[victim][1].epoch or 0).result(120)
    res.times["d"] = time.perf_counter() - t
    res.counts["d"] = moving - len(remaining)
    a.events.wait_idle(120)
    res.notes.append(f"(d) broker {victim} leading {moving}; answered when its leadership had "
                     f"moved; incl. follower ISR shrinks {time.perf_counter() - t:.2f}s")
    b.events.wait_idle(120)
    res.notes.append(f"(d) CPU until both idle: {cpu.since()}")

    # (a) hot failover: the active controller's session goes
    cpu.mark()
    a.coordinator.close()
    wait(lambda: b.active and b.last_failover is not None, timeout=120)
    f = b.last_failover
    assert f is not None
    res.times["a"] = f.metadata_sent - f.started
    res.notes.append(f"(a) until done {f.done - f.started:.2f}s, warm={f.warm}, exact={f.exact}; "
                     f"{_steps(f)}")
    b.events.wait_idle(120)
    res.notes.append(f"(a) CPU until idle: {cpu.since()}")

    # (b) cold failover
    cold = controller(103, hot=False)
    time.sleep(0.2)
    b.coordinator.close()
    wait(lambda: cold.active and cold.last_failover is not None, timeout=300)
    f = cold.last_failover
    assert f is not None
    res.times["b"] = f.metadata_sent - f.started
    res.notes.append(f"(b) until done {f.done - f.started:.2f}s, warm={f.warm}; "
                     f"{_steps(f)}")
    for ctl in (a, b, cold):
        ctl.close()
    cold.coordinator.close()
    for s, _ in sessions.values():
        s.close()
    return res


def print_table(results: list[Result]) -> None:
    print()
    print(f"{'coordinator':<11} {'step':<40} {'time':>8} {'target':>7} {'elect/s':>9} "
          f"{'ratio':>6}")
    names = {"a": "(a) hot failover -> UpdateMetadata sent", "b": "(b) cold failover",
             "c": "(c) broker loss, leaders written", "d": "(d) controlled shutdown",
             "e": "(e) preferred election"}
    for r in results:
        print(f"{r.backend:<11} {'raw fenced write_many (SetData) ops/s':<40} "
              f"{r.write_rate:>8.0f}")
        for key in "abcde":
            if key not in r.times:
                continue
            target = TARGETS[key]
            target_s = target[r.backend] if isinstance(target, dict) else target
            rate = r.counts.get(key, 0) / r.times[key] if key in r.counts else None
            ratio = f"{rate / r.write_rate:>6.2f}" if rate else ""
            rate_s = f"{rate:>9.0f}" if rate else ""
            print(f"{'':<11} {names[key]:<40} {r.times[key]:>7.3f}s {target_s:>6.1f}s "
                  f"{rate_s:>9} {ratio}")
        for note in r.notes:
            print(f"{'':<11}   {note}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", action="append", choices=["memory", "zookeeper", "etcd"])
    ap.add_argument("--url", help="coordinator URL (with --backend of one kind)")
    ap.add_argument("--brokers", type=int, default=10)
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--rf", type=int, default=3)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    backends = args.backend or ["memory", "zookeeper", "etcd"]
    results = []
    for backend in backends:
        server = None
        if args.url:
            url = args.url
        elif backend == "memory":
            url = f"memory://bench-{uuid.uuid4().hex[:8]}"
        elif backend == "zookeeper":
            from kazoo.client import KazooClient

            from tests.servers import start_zookeeper

            server = start_zookeeper()
            root = KazooClient(hosts=server.address)
            root.start(timeout=10)
            root.ensure_path("/bench")
            root.stop()
            root.close()
            url = f"zookeeper://{server.address}/bench"
        else:
            from tests.servers import start_etcd

            server = start_etcd()
            url = f"etcd://{server.address}/bench"
        res = Result(backend=backend)
        results.append(res)
        try:
            run(backend, url, args.brokers, args.partitions, args.rf, res)
        except Exception as exc:  # keep what was measured before the failing step
            res.notes.append(f"stopped: {type(exc).__name__}: {exc}")
            logging.exception("benchmark on %s stopped", backend)
        finally:
            print_table(results[-1:])
            if server is not None:
                server.stop()
    print_table(results)


if __name__ == "__main__":
    main()
