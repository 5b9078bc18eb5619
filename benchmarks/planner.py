"""Planner benchmark: the bench's standard scenarios, planned and scored by the bench's score.py.

    .venv/bin/python benchmarks/planner.py                   # S, M, L with the auto engine
    .venv/bin/python benchmarks/planner.py --engine spark --master 'local[2]' --xl
    .venv/bin/python benchmarks/planner.py --scenarios L --engine local

Each scenario runs in its own process so peak memory is its own: ru_maxrss of the planner
process, and the summed peak RSS of its children (the Spark JVM and its Python workers). Time is planning only
(snapshot already loaded; for Spark it includes starting the session unless --warm).
Snapshots are generated once into --workdir by gen_cluster.py and reused.
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
BENCH = REPO.parent / "shared" / "bench"
SCENARIOS = {
    "S": "--brokers 6 --new-brokers 2 --racks 3 --topics 50 --partitions 12 --rf 3 --seed 1",
    "M": "--brokers 60 --racks 6 --topics 400 --total-partitions 20000 --rf 3 --placement random "
         "--zipf-s 0.5 --rack-violation-frac 0.01 --seed 2",
    "L": "--brokers 300 --new-brokers 30 --racks 10 --topics 2000 --total-partitions 200000 "
         "--rf 3 --placement roundrobin --seed 3",
    "XL": "--brokers 900 --new-brokers 100 --racks 20 --topics 10000 --total-partitions 1000000 "
          "--rf 3 --placement roundrobin --seed 4",
}


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
    sys.path.insert(0, str(REPO))
    from rebalancer.engines import choose_engine, plan_reassignment
    from rebalancer.plan import render_plan
    from rebalancer.snapshot import load_snapshot

    workdir = Path(a.workdir)
    snap = load_snapshot(workdir / f"{a.one}.json")
    engine = choose_engine(len(snap.partitions)) if a.engine == "auto" else a.engine
    spark = None
    if engine == "spark" and a.warm:
        from rebalancer.engines.spark import spark_session
        spark = spark_session(a.master, conf={"spark.driver.memory": a.driver_memory})
    t0 = time.perf_counter()
    if engine == "spark" and spark is None:
        from rebalancer.engines.spark import spark_session
        spark = spark_session(a.master, conf={"spark.driver.memory": a.driver_memory})
    plan = plan_reassignment(snap, engine=engine, spark=spark, seed=a.seed)
    secs = time.perf_counter() - t0
    children_hwm = _descendants_peak_mib()
    if spark is not None:
        spark.stop()
    out = workdir / f"{a.one}.{engine}.plan.json"
    out.write_text(render_plan(plan))
    print(json.dumps({
        "engine": engine, "seconds": round(secs, 2), "plan": str(out),
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
    ap.add_argument("--driver-memory", default="3g")
    ap.add_argument("--warm", action="store_true", help="start Spark before the clock starts")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", default="/tmp/partctl-planner-bench")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.one:
        run_one(a)
        return
    if not BENCH.exists():
        raise SystemExit(f"bench scripts not found at {BENCH}")
    workdir = Path(a.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    names = [s for s in a.scenarios.split(",") if s] + (["XL"] if a.xl else [])
    print("| scenario | engine | plan s | peak RSS MiB (self / children) | replica spread (lb) "
          "| leader spread (lb) | rack viol. | replicas moved / lb | bytes max/mean | valid |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in names:
        snap = workdir / f"{name}.json"
        if not snap.exists():
            subprocess.run([sys.executable, str(BENCH / "gen_cluster.py"),
                            *SCENARIOS[name].split(), "--out", str(snap)], check=True)
        cmd = [sys.executable, __file__, "--one", name, "--engine", a.engine, "--master",
               a.master, "--driver-memory", a.driver_memory, "--seed", str(a.seed),
               "--workdir", str(workdir)] + (["--warm"] if a.warm else [])
        proc = subprocess.run(cmd, check=True, capture_output=True, text=True)
        run = json.loads(proc.stdout.strip().splitlines()[-1])
        res = json.loads(subprocess.run(
            [sys.executable, str(BENCH / "score.py"), "--snapshot", str(snap),
             "--assignment", run["plan"], "--json"],
            check=True, capture_output=True, text=True).stdout)
        s, lb = res["score"], res["lower_bounds"]
        lb_rep = lb["lb_replica_spread_rackaware"]
        lb_rep = lb["lb_replica_spread"] if lb_rep is None else lb_rep
        lb_moves = lb["lb_replicas_moved_rackaware_spread"] or lb["lb_replicas_moved"]
        ratio = s["replicas_moved"] / lb_moves if lb_moves else float("nan")
        print(f"| {name} | {run['engine']} | {run['seconds']:.1f} | "
              f"{run['rss_self_mib']} / {run['rss_children_mib']} | "
              f"{s['replicas_per_broker']['spread']} ({lb_rep}) | "
              f"{s['leaders_per_broker']['spread']} ({lb['lb_leader_spread']}) | "
              f"{s['rack_violations']} | {s['replicas_moved']} / {lb_moves} = {ratio:.3f} | "
              f"{s.get('bytes_per_broker', {}).get('max_over_mean', '-')} | "
              f"{'yes' if s['validity']['valid'] and s['rf_changes'] == 0 else 'NO'} |",
              flush=True)


if __name__ == "__main__":
    main()
