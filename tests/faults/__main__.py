"""Long fault runs: ``python -m tests.faults --seeds 1-200 --duration 60 --coordinator zookeeper``.

Each seed is one run of :func:`tests.faults.runner.run_seed` on a fresh cluster; a line per run
as it ends, a progress bar across the seeds, and a summary table per coordinator at the end
(also written as ``summary.json`` in the output directory). A failed run's directory keeps its
history, plan, verdict, timeline and the cluster's logs. Exit status: 0 when every run was
clean, 1 when any found a violation or could not be carried out, 2 for bad arguments or a
machine that cannot run the harness (it needs root for network namespaces, ZooKeeper and etcd).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from tests.faults.checker import KINDS as VIOLATIONS
from tests.faults.nemesis import KINDS
from tests.faults.net import unavailable_reason
from tests.faults.runner import SeedResult, run_seed


def parse_seeds(text: str) -> list[int]:
    """``1-200``, ``7`` or ``1,5,9-12`` as a list of seeds, in the order given."""
    seeds: list[int] = []
    for part in text.split(","):
        part = part.strip()
        try:
            if "-" in part:
                first, last = (int(x) for x in part.split("-", 1))
                if last < first:
                    raise ValueError
                seeds.extend(range(first, last + 1))
            else:
                seeds.append(int(part))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"bad seeds {text!r}: expected numbers and ranges like 1-200 or 1,5,9-12"
            ) from None
    return seeds


def parse_kinds(text: str) -> list[str]:
    kinds = [k.strip() for k in text.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        raise argparse.ArgumentTypeError(
            f"unknown fault kind(s) {', '.join(unknown) or '(none given)'}; known: "
            f"{', '.join(KINDS)}")
    return kinds


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tests.faults", description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=parse_seeds, default=parse_seeds("1-10"),
                   help="seeds to run, e.g. 1-200 or 1,5,9-12 (default 1-10)")
    p.add_argument("--duration", type=float, default=60.0,
                   help="seconds of workload under faults per run (default 60)")
    p.add_argument("--coordinator", choices=["zookeeper", "etcd", "both"], default="zookeeper")
    p.add_argument("--brokers", type=int, choices=[3, 4, 5], default=3)
    p.add_argument("--faults", type=parse_kinds, default=list(KINDS),
                   help="comma-separated fault kinds (default: every kind)")
    p.add_argument("--rate", type=float, default=200.0,
                   help="produce attempts per second across the producers (default 200)")
    # absolute: the brokers and servers of a run start in directories of their own and are
    # handed their paths (a relative one named nothing there: every run failed to start)
    p.add_argument("--out", type=lambda text: Path(text).resolve(), default="fault-runs",
                   help="where runs are kept (default ./fault-runs)")
    p.add_argument("--keep", action="store_true", help="keep clean runs' histories and cluster directories")
    p.add_argument("--no-timeline", dest="timeline", action="store_false",
                   help="do not draw each run's timeline.png")
    p.add_argument("--tiered", action="store_true",
                   help="tiered storage on: the workload's topics with remote.storage.enable, "
                        "small segments and local retention, a file:// remote store in the "
                        "run's directory")
    p.add_argument("--txn", action="store_true",
                   help="the transactional workload too (transactional writers, "
                        "consume-transform-produce steps, read_committed readers), judged for "
                        "aborted reads, torn transactions, lost commits, duplicates and cycles")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.duration < 10:
        print("error: --duration must be at least 10 seconds", file=sys.stderr)
        return 2
    reason = unavailable_reason()
    if reason is not None:
        print(f"error: the fault harness cannot run here: {reason}", file=sys.stderr)
        return 2
    console = Console()
    kinds = ["zookeeper", "etcd"] if args.coordinator == "both" else [args.coordinator]
    runs = [(kind, seed) for kind in kinds for seed in args.seeds]
    results: list[SeedResult] = []
    began = time.monotonic()
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console) as progress:
        task = progress.add_task("fault runs", total=len(runs))
        for kind, seed in runs:
            progress.update(task, description=f"{kind} seed {seed}")
            result = run_seed(seed, kind, args.duration, args.out, brokers=args.brokers,
                              kinds=args.faults, rate=args.rate, timeline=args.timeline,
                              keep=args.keep, tiered=args.tiered, txn=args.txn,
                              say=lambda text: progress.console.log(text))
            results.append(result)
            progress.console.print(result.line(), markup=False, highlight=False)
            if not result.ok and result.verdict is not None:
                progress.console.print(result.verdict.summary(), markup=False,
                                       highlight=False)
            if not result.ok and result.txn_verdict is not None:
                progress.console.print(result.txn_verdict.summary(), markup=False,
                                       highlight=False)
            progress.advance(task)
    summary = summarise(results)
    for kind, row in summary.items():
        console.print(_table(kind, row))
    console.print(f"{len(results)} runs in {time.monotonic() - began:.0f}s; "
                  f"kept in {args.out}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return 0 if all(r.ok for r in results) else 1


def summarise(results: Sequence[SeedResult]) -> dict[str, dict[str, object]]:
    """Per coordinator: runs, clean / failed / error runs with their seeds, time under fault,
    faults by kind, acknowledged writes, each violation's count, mean availability and the
    produce error rate by fault kind."""
    out: dict[str, dict[str, object]] = {}
    by_kind: dict[str, list[SeedResult]] = defaultdict(list)
    for r in results:
        by_kind[r.kind].append(r)
    for kind, rs in by_kind.items():
        judged = [r for r in rs if r.verdict is not None]
        injected: Counter[str] = Counter()
        violations: Counter[str] = Counter({v: 0 for v in VIOLATIONS})
        shares: dict[str, list[float]] = defaultdict(list)
        writes: dict[str, list[float]] = defaultdict(list)
        rates: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        transactions: Counter[str] = Counter()
        for r in rs:
            injected.update(r.injected)
        for r in judged:
            assert r.verdict is not None
            violations.update(r.verdict.counts())
            for fault, share in r.verdict.availability_by_fault.items():
                shares[fault].append(share)
            for fault, share in r.verdict.write_availability_by_fault.items():
                writes[fault].append(share)
            for fault, rate in r.verdict.error_rates.items():
                rates[fault][0] += rate.attempts
                rates[fault][1] += rate.errors
            if r.txn_verdict is not None:
                violations.update({f"txn_{k}": n for k, n in r.txn_verdict.counts().items()})
                for outcome, n in r.txn_verdict.transactions.items():
                    transactions[outcome] += n
        out[kind] = {
            "runs": len(rs),
            "clean": len([r for r in rs if r.ok]),
            "failed_seeds": [r.seed for r in rs if not r.ok and r.error is None],
            "error_seeds": [r.seed for r in rs if r.error is not None],
            "seconds_under_fault": round(sum(r.fault_seconds for r in rs), 1),
            "seconds": round(sum(r.seconds for r in rs), 1),
            "faults": dict(sorted(injected.items())),
            "acknowledged": sum(r.verdict.acknowledged for r in judged if r.verdict),
            "unknown_outcomes": sum(r.stats.unknown for r in rs if r.stats),
            "transactions": dict(sorted(transactions.items())),
            "violations": dict(violations),
            "resent_by_client": sum(r.verdict.resent.count for r in judged if r.verdict),
            "resent_seeds": [r.seed for r in judged if r.verdict and r.verdict.resent.count],
            "undone_operations": sum(len(r.nemesis_errors) for r in rs),
            "isr_not_restored_seeds": [r.seed for r in rs if r.short_isrs],
            "availability_by_fault": {f: round(sum(v) / len(v), 4)
                                      for f, v in sorted(shares.items())},
            "write_availability_by_fault": {f: round(sum(v) / len(v), 4)
                                            for f, v in sorted(writes.items())},
            "produce_errors_by_fault": {f: {"attempts": a, "errors": e}
                                        for f, (a, e) in sorted(rates.items())},
        }
    return out


def _table(kind: str, row: dict[str, object]) -> Table:
    table = Table(title=f"{kind}: {row['runs']} runs, {row['clean']} clean, "
                        f"{row['seconds_under_fault']}s under fault, "
                        f"{row['acknowledged']} acknowledged writes", title_justify="left")
    table.add_column("fault kind")
    table.add_column("injected", justify="right")
    table.add_column("led (auditor)", justify="right")
    table.add_column("writes acked", justify="right")
    table.add_column("produce errors", justify="right")
    faults = row["faults"]
    availability = row["availability_by_fault"]
    writes = row["write_availability_by_fault"]
    errors = row["produce_errors_by_fault"]
    assert isinstance(faults, dict) and isinstance(availability, dict)
    assert isinstance(errors, dict) and isinstance(writes, dict)
    for fault in sorted(set(faults) | set(availability) | set(errors)):
        rate = errors.get(fault)
        table.add_row(fault, str(faults.get(fault, "-")),
                      f"{availability[fault]:.1%}" if fault in availability else "-",
                      f"{writes[fault]:.1%}" if fault in writes else "-",
                      f"{rate['errors']}/{rate['attempts']}" if rate else "-")
    table.caption_justify = "left"
    violations = row["violations"]
    assert isinstance(violations, dict)
    table.caption = ("led: mean share of partition-time with a leader in the auditor's view; "
                     "writes acked: mean share of partition-seconds in which a write was "
                     "acknowledged\nviolations: " + ", ".join(f"{k} {n}" for k, n in violations.items())
                     + f"; re-sent by the client under a new producer epoch (not a "
                       f"violation) {row['resent_by_client']} in seeds "
                       f"{row['resent_seeds'] or '-'}"
                     + f"; undone operations {row['undone_operations']}"
                     + f"; ISR not restored after the heal in seeds "
                       f"{row['isr_not_restored_seeds'] or '-'}"
                     + f"; failed seeds {row['failed_seeds'] or '-'}"
                     + f"; error seeds {row['error_seeds'] or '-'}")
    return table


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
