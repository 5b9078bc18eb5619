"""One fault run from a seed, and many: the harness's runner.

:func:`run_seed` brings up a :class:`~tests.faults.cluster.FaultCluster` (a three-member
ensemble and broker processes, each host in a network namespace of its own), creates the
workload's topics (RF 3, min ISR 2), starts the state auditor, the client workload and the
nemesis on the seed's fault plan, and after ``duration`` seconds heals everything, stops the
workload, waits for quiescence (every partition led, every ISR full), reads every partition to
its high watermark, stops the brokers and judges the history against the replicas' logs with
:func:`tests.faults.checker.check`. The run's directory keeps ``plan.txt``,
``history.jsonl``, ``run.log`` (the harness's and the clients' log lines), ``verdict.txt`` and,
when asked, ``timeline.png``; the history and the cluster's directories (logs,
ensemble data) are kept only when the run failed or ``keep`` is set.

A run that could not be carried out (the cluster did not form, the heal did not bring it back)
is an *error*, not a verdict: it says why in one line and keeps everything.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.faults.checker import Verdict, check
from tests.faults.cluster import FaultCluster, Kind
from tests.faults.history import History, Read, StateAuditor, read_history
from tests.faults.nemesis import KINDS, Nemesis, plan
from tests.faults.txn_checker import TxnVerdict, check_transactions
from tests.faults.txn_workload import RING, TXN_TOPICS, TxnStats, TxnWorkload
from tests.faults.workload import Workload, WorkloadStats, create_topics, finals

TOPICS = ("alpha", "beta", "gamma")
PARTITIONS = 3
TIERED_BROKER_SETTINGS = {
    "remote.log.storage.system.enable": "true",
    "remote.log.manager.task.interval.ms": "1000",
    "log.retention.check.interval.ms": "1000",
}
"""A tiered run's broker settings, besides ``remote.log.storage.url``: ``file://`` to the
cluster directory's ``remote``, which every broker process shares (the hosts are network
namespaces on one machine)."""
TIERED_TOPIC_CONFIG = {"remote.storage.enable": "true", "segment.bytes": "4096",
                       "local.retention.bytes": "4096"}
"""A tiered run's workload topics: small segments, copied and deleted locally within seconds,
so reads, follower catch-up, reassignment and the final logs cross the local/remote
boundary."""


@dataclass
class SeedResult:
    """What one run found. ``error``: the run could not be carried out (not a verdict)."""

    seed: int
    kind: str
    duration: float
    directory: Path
    verdict: Verdict | None = None
    txn_verdict: TxnVerdict | None = None
    """The transactional workload's verdict (a run with ``txn``); None without it."""
    stats: WorkloadStats | None = None
    txn_stats: TxnStats | None = None
    injected: Counter[str] = field(default_factory=Counter)
    fault_seconds: float = 0.0
    nemesis_errors: list[str] = field(default_factory=list)
    workload_errors: list[str] = field(default_factory=list)
    short_isrs: list[str] = field(default_factory=list)
    """Partitions whose ISR was still short 120 s after the heal (liveness, not safety: the
    run is judged on the ISR as it stood, and its directory is kept)."""
    """A client thread that died or did not stop: the run's workload was not what it should be."""
    error: str | None = None
    seconds: float = 0.0
    """Wall time of the whole run, cluster start to verdict."""

    @property
    def ok(self) -> bool:
        """No violation, no operation left undone after the heal, and the run was carried out."""
        return (self.error is None and self.verdict is not None and self.verdict.ok
                and (self.txn_verdict is None or self.txn_verdict.ok)
                and not self.nemesis_errors and not self.workload_errors)

    def line(self) -> str:
        """One line for a progress log."""
        head = f"{self.kind} seed {self.seed}: "
        if self.error is not None:
            return head + f"ERROR {self.error} ({self.seconds:.0f}s, kept in {self.directory})"
        assert self.verdict is not None
        counts = {k: n for k, n in self.verdict.counts().items() if n}
        if self.txn_verdict is not None:
            counts.update({f"txn {k}": n for k, n in self.txn_verdict.counts().items() if n})
        faults = ", ".join(f"{k}×{n}" if n > 1 else k for k, n in sorted(self.injected.items()))
        status = "ok" if self.ok else "FAILED " + " ".join(
            [f"{k} {n}" for k, n in counts.items()]
            + ([f"undone {len(self.nemesis_errors)}"] if self.nemesis_errors else [])
            + ([f"workload {'; '.join(self.workload_errors)}"] if self.workload_errors else []))
        acked = self.verdict.acknowledged
        if self.txn_stats is not None:
            acked_txn = (f", transactions committed {self.txn_stats.committed} aborted "
                         f"{self.txn_stats.aborted} unknown {self.txn_stats.unknown}")
            if self.txn_stats.abandoned:  # client calls stuck past their timeouts
                acked_txn += f", sessions given up {self.txn_stats.abandoned}"
        else:
            acked_txn = ""
        short = f"; ISR not restored: {', '.join(self.short_isrs)}" if self.short_isrs else ""
        return (f"{head}{status}; acked {acked}{acked_txn}, faults [{faults or '-'}] "
                f"{self.fault_seconds:.0f}s under fault, {self.seconds:.0f}s{short}")


def run_seed(seed: int, kind: Kind, duration: float, out: Path, *, brokers: int = 3,
             kinds: Sequence[str] = KINDS, rate: float = 200.0, timeline: bool = False,
             keep: bool = False, tiered: bool = False, txn: bool = False,
             say: Callable[[str], None] = print) -> SeedResult:
    """Run seed ``seed`` on a fresh cluster and judge it; never raises for what happens in the
    cluster (that is the result's ``error``). ``tiered``: the workload's topics keep their old
    segments in a filesystem remote store (:data:`TIERED_TOPIC_CONFIG`), and the final logs
    are read across both tiers. ``txn``: the transactional workload
    (:mod:`tests.faults.txn_workload`) runs beside the plain one, judged by
    :mod:`tests.faults.txn_checker`."""
    directory = out / f"{kind}-{'tiered-' if tiered else ''}seed{seed}"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    result = SeedResult(seed=seed, kind=kind, duration=duration, directory=directory)
    faults = plan(seed, duration, kinds)
    (directory / "plan.txt").write_text("".join(
        f"{f.at:7.1f}s  {f.kind:<38} for {f.duration:4.1f}s  (pick {f.pick})\n" for f in faults))
    history_path = directory / "history.jsonl"
    handler = logging.FileHandler(directory / "run.log")  # the harness's and clients' logs
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    # the harness's own loggers and its coordinator client's (the auditor's kazoo session)
    loggers = [logging.getLogger(name) for name in ("tests.faults", "kazoo", "coordinator")]
    for logger in loggers:
        logger.addHandler(handler)
    loggers[0].setLevel(logging.INFO)
    began = time.monotonic()
    remote = directory / "cluster" / "remote" if tiered else None
    cluster = FaultCluster(kind, brokers, directory=directory / "cluster", extra={
        **TIERED_BROKER_SETTINGS, "remote.log.storage.url": f"file://{remote}"}
        if remote is not None else None)
    finished = False
    try:
        with History(history_path) as history:
            cluster.start()
            say(f"{kind} seed {seed}: cluster up in {time.monotonic() - began:.0f}s; "
                f"{len(faults)} faults planned over {duration:.0f}s")
            create_topics(cluster, TOPICS, PARTITIONS,
                          config=TIERED_TOPIC_CONFIG if tiered else None)
            txn_workload = TxnWorkload(cluster, history, seed=seed, say=say) if txn else None
            if txn_workload is not None:
                txn_workload.create_topics()
            auditor = StateAuditor(history, url=cluster.url(), timeout=10.0)
            cluster.client.call(auditor.start)
            try:
                finals_ = _run(cluster, history, faults, duration, rate, result, say,
                               remote, txn_workload)
            finally:
                with contextlib.suppress(Exception):
                    auditor.stop()
        events = read_history(history_path)
        # the plain checker judges the plain workload's topics; the transactional topics are
        # the transactional checker's (their final view is a read_committed read)
        result.verdict = check([e for e in events if not (
            isinstance(e, Read) and e.topic in TXN_TOPICS)], finals_)
        if txn_workload is not None:
            result.txn_verdict = check_transactions(events, input_topics=[RING],
                                                    processed=True)
        (directory / "verdict.txt").write_text(
            result.verdict.summary()
            + ("" if result.txn_verdict is None else "\n" + result.txn_verdict.summary())
            + "".join(f"\nundone: {e}" for e in result.nemesis_errors)
            + "".join(f"\nworkload: {e}" for e in result.workload_errors) + "\n")
        finished = True
    except Exception as exc:  # noqa: BLE001 - a run that could not be carried out
        result.error = f"{type(exc).__name__}: {exc}".splitlines()[0]
        (directory / "error.txt").write_text(traceback.format_exc())
    finally:
        cluster.close()
        result.seconds = time.monotonic() - began
        for logger in loggers:
            logger.removeHandler(handler)
        handler.close()
    if timeline and history_path.exists():
        _draw(history_path, directory / "timeline.png", f"{kind} seed {seed}", say)
    if finished and result.ok and not result.short_isrs and not keep:  # a clean run keeps its plan, verdict and picture
        shutil.rmtree(directory / "cluster", ignore_errors=True)
        history_path.unlink(missing_ok=True)
    return result


def _run(cluster: FaultCluster, history: History, faults: Sequence[object], duration: float,
         rate: float, result: SeedResult, say: Callable[[str], None],
         remote: Path | None = None, txn: TxnWorkload | None = None) -> list:
    workload = Workload(cluster, history, TOPICS, rate=rate, say=say)
    nemesis = Nemesis(cluster, history, TOPICS, say=say)
    stop = threading.Event()
    workload.start()
    if txn is not None:
        txn.start()
    try:
        start = time.monotonic()
        thread = threading.Thread(target=nemesis.run, args=(faults, stop, start),
                                  name="nemesis", daemon=True)
        thread.start()
        thread.join(max(0.0, start + duration - time.monotonic()))
        stop.wait(max(0.0, start + duration - time.monotonic()))  # the plan ended early
        stop.set()
        thread.join(120.0)
        if thread.is_alive():
            raise RuntimeError("the nemesis did not return within 120 s of the run's end")
        nemesis.heal_all()
    finally:
        result.stats = workload.stop()
        result.workload_errors = list(workload.errors)
        if txn is not None:
            txn.finish()
            result.txn_stats = txn.stats
            result.workload_errors += txn.errors
    result.injected = Counter(nemesis.injected)
    result.fault_seconds = nemesis.fault_seconds
    result.nemesis_errors = list(nemesis.errors)
    workload.final_reads()
    return finals(cluster, TOPICS, short=result.short_isrs, remote=remote)


def _draw(history: Path, png: Path, title: str, say: Callable[[str], None]) -> None:
    from tests.faults.timeline import draw

    try:
        draw(read_history(history), png, title=title)
    except Exception as exc:  # noqa: BLE001 - a picture never fails a run
        say(f"{title}: no timeline ({type(exc).__name__}: {exc})")
