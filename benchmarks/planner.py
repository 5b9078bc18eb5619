"""Planner benchmark: the standard scenarios, planned, and scored against their lower bounds.

    .venv/bin/python benchmarks/planner.py                   # S, M, L with the auto engine
    .venv/bin/python benchmarks/planner.py --engine spark --master 'local[2]' --xl
    .venv/bin/python benchmarks/planner.py --scenarios L --engine local
    .venv/bin/python benchmarks/planner.py --scenarios S      # a quick check that it runs
    .venv/bin/python benchmarks/planner.py --scenarios M,L --engine local --goals balance,disk
    .venv/bin/python benchmarks/planner.py --scenarios XXL --scale 0.1 --engine spark \
        --master 'local[2]' --goals balance          # 500k partitions, 300 brokers
    .venv/bin/python benchmarks/planner.py --scenarios XXL --engine spark --master 'local[2]' \
        --driver-memory 6g --goals balance           # the full 5M partitions, 3,000 brokers

The scenarios are rebalancer.scenarios.SCENARIOS (S, M, L; XL with --xl; XXL, five million
partitions on 3,000 brokers, by name), each multiplied by --scale (rebalancer.scenarios.scaled),
the scores and lower bounds rebalancer.scoring's. Each scenario is planned in its own process
so peak memory is its own: ru_maxrss of the planner process (the Spark driver), the summed peak
RSS of its children (the Spark JVM and its Python workers), and their sum. Snapshots of a
million partitions or more are written and read as Parquet. "plan s" is planning only: the snapshot is already loaded; with Spark
it includes starting the session unless --warm. Snapshots and plans are written to --workdir
(a snapshot is generated afresh each run: it takes a second even for L).

Each scenario is planned for every goal of --goals: ``balance`` (counts and leaders even, the
fewest bytes moved; the targets: spreads at their lower bounds, replicas moved <= 1.05 x their
bound, GiB moved <= 1.2 x the count-balance bytes bound) and ``disk`` (bytes per broker even,
replica counts within 5% of their share; the target: bytes max/mean <= 1.05, or its bound
when the sizes forbid that; its GiB moved are shown against the disk-balance bytes bound,
what the brokers below the mean must gain).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rebalancer.scenarios import SCENARIOS, generate, scaled  # noqa: E402
from rebalancer.snapshot import load_snapshot, save_snapshot  # noqa: E402


def _descendants_peak_mib() -> int:
    """Sum of the peak RSS (VmHWM) of every live descendant: the Spark JVM and its Python
    workers. An upper bound on their joint peak; 0 where /proc is not available."""
    import os

    try:
        parent: dict[int, int] = {}
        for d in os.listdir("/proc"):
            if d.isdigit():
                with open(f"/proc/{d}/stat") as f:
                    parent[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
    except OSError:
        return 0
    mine, frontier = set(), {os.getpid()}
    while frontier:
        frontier = {p for p, pp in parent.items() if pp in frontier} - mine
        mine |= frontier
    total = 0
    for p in mine:
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total // 1024


def run_one(a: argparse.Namespace) -> None:
    from rebalancer.engines import choose_engine, plan_reassignment
    from rebalancer.plan import render_plan

    workdir = Path(a.workdir)
    snap = load_snapshot(a.snapshot)
    engine = choose_engine(len(snap.partitions)) if a.engine == "auto" else a.engine
    spark = None
    conf = {"spark.driver.memory": a.driver_memory} if a.driver_memory else None
    if engine == "spark" and a.warm:
        from rebalancer.engines.spark import spark_session
        spark = spark_session(a.master, conf=conf)
    t0 = time.perf_counter()
    if engine == "spark" and spark is None:
        from rebalancer.engines.spark import spark_session
        spark = spark_session(a.master, conf=conf)
    from rebalancer.planner.goals import Balance, BalanceDisk

    goal = BalanceDisk() if a.goal == "disk" else Balance()
    plan = plan_reassignment(snap, [goal], engine=engine, spark=spark, seed=a.seed)
    secs = time.perf_counter() - t0
    children_hwm = _descendants_peak_mib()
    if spark is not None:
        spark.stop()
    out = workdir / f"{a.one}.{engine}.{a.goal}.plan.json"
    out.write_text(render_plan(plan))
    print(json.dumps({
        "engine": engine, "seconds": round(secs, 2), "plan": str(out),
        "partitions": len(snap.partitions),
        "rss_self_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
        "rss_children_mib": max(children_hwm,
                                resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024),
    }))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", default="S,M,L")
    ap.add_argument("--xl", action="store_true", help="also run XL (1M partitions)")
    ap.add_argument("--engine", choices=["auto", "local", "spark"], default="auto")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--driver-memory",
                    help="spark.driver.memory (default: Spark's, as partctl reassign uses it; "
                         "shown beside the engine when set)")
    ap.add_argument("--warm", action="store_true", help="start Spark before the clock starts")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--goals", default="balance,disk",
                    help="goals to plan each scenario for: balance, disk (default both)")
    ap.add_argument("--goal", default="balance", help=argparse.SUPPRESS)
    ap.add_argument("--scale", type=float, default=1.0, metavar="F",
                    help="multiply each scenario's brokers, topics and partitions by F "
                         "(default 1; XXL at 0.1 is 500k partitions on 300 brokers)")
    ap.add_argument("--workdir", default="/tmp/partctl-planner-bench")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--snapshot", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.one:
        run_one(a)
        return
    from rebalancer.plan import parse_plan
    from rebalancer.scoring import lower_bounds, score_plan

    workdir = Path(a.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    names = [s for s in a.scenarios.split(",") if s] + (["XL"] if a.xl else [])
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        ap.error(f"unknown scenario(s) {', '.join(unknown)} (known: {', '.join(SCENARIOS)})")
    goals = [g for g in a.goals.split(",") if g]
    if not goals or any(g not in ("balance", "disk") for g in goals):
        ap.error(f"bad --goals {a.goals!r}: balance, disk or both")
    try:
        scenarios = {n: scaled(SCENARIOS[n], a.scale) if a.scale != 1.0 else SCENARIOS[n]
                     for n in names}
    except ValueError as exc:
        ap.error(f"--scale: {exc}")
    print("| scenario | goal | engine | plan s | peak RSS MiB (driver / children = all) "
          "| replica spread (lb) | leader spread (lb) | rack viol. | replicas moved / lb "
          "| GiB moved / lb (balance: count balance, disk: disk balance) | bytes max/mean (lb) "
          "| valid |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, goal in [(n, g) for n in names for g in goals]:
        scenario = scenarios[name]
        label = name if a.scale == 1.0 else f"{name} x{a.scale:g}"
        tag = name if a.scale == 1.0 else f"{name}-x{a.scale:g}"
        big = (scenario.total_partitions or 0) >= 1_000_000 or (
            (scenario.partitions or 0) * scenario.topics >= 1_000_000)
        path = workdir / f"{tag}.scenario.{'parquet' if big else 'json'}"
        if goal == goals[0]:
            save_snapshot(generate(scenario), path)
        cmd = [sys.executable, __file__, "--one", tag, "--snapshot", str(path), "--engine",
               a.engine, "--master", a.master, "--seed", str(a.seed), "--workdir", str(workdir),
               "--goal", goal]
        cmd += (["--warm"] if a.warm else []) + (
            ["--driver-memory", a.driver_memory] if a.driver_memory else [])
        proc = subprocess.run(cmd, check=True, capture_output=True, text=True)
        run = json.loads(proc.stdout.strip().splitlines()[-1])
        snap = load_snapshot(path)
        plan = parse_plan(Path(run["plan"]).read_text(), snap)
        s, lb = score_plan(snap, plan), lower_bounds(snap)
        lb_moves = lb.best_replicas_moved
        ratio = s.replicas_moved / lb_moves if lb_moves else float("nan")
        byte_balance = "-"
        if s.bytes_per_broker is not None:
            byte_balance = f"{s.bytes_per_broker.max_over_mean} ({lb.bytes_max_over_mean})"
        gib = "-"
        bound = (lb.bytes_moved_disk_balance if goal == "disk"
                 else lb.bytes_moved_count_balance)
        if s.bytes_moved is not None and bound:
            gib = (f"{s.bytes_moved / 2**30:,.0f} / {bound / 2**30:,.0f} = "
                   f"{s.bytes_moved / bound:.3f}")
        engine = run["engine"]
        if engine == "spark":
            engine += f" {a.master}" + (f", driver {a.driver_memory}" if a.driver_memory else "")
            engine += ", warm" if a.warm else ""
        print(f"| {label} ({run['partitions']:,} partitions, {len(snap.brokers):,} brokers) | "
              f"{goal} | {engine} | {run['seconds']:.1f} | "
              f"{run['rss_self_mib']} / {run['rss_children_mib']} = "
              f"{run['rss_self_mib'] + run['rss_children_mib']} | "
              f"{s.replicas_per_broker.spread} ({lb.best_replica_spread}) | "
              f"{s.leaders_per_broker.spread} ({lb.leader_spread}) | "
              f"{s.rack_violations} | {s.replicas_moved} / {lb_moves} = {ratio:.3f} | "
              f"{gib} | {byte_balance} | {'yes' if s.valid and s.rf_changes == 0 else 'NO'} |",
              flush=True)


if __name__ == "__main__":
    main()
