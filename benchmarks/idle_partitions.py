"""What idle partitions cost partctl's brokers: produce latency beside them, and CPU when nothing
is produced. Prints numbers.

    .venv/bin/python benchmarks/idle_partitions.py latency [--idle 150] [--seconds 10]
    .venv/bin/python benchmarks/idle_partitions.py cpu [--replicas 5000] [--seconds 20]

One ZooKeeper (``coordinator.servers``, on loopback) and three partctl brokers, launched as the
side-by-side benchmark launches them (:func:`benchmarks.versus.systems.partctl_system`).

- ``latency``: a topic of ``--idle`` partitions (RF 3) that nothing writes to, then the
  side-by-side benchmark's librdkafka latency rows on a topic beside it: acks=all, idempotent,
  linger 0, 1 KiB values at 1,000 and then 10,000 a second for ``--seconds`` each; each
  figure is a value's time from ``produce()`` to its delivery report. ``--idle 0`` gives the
  same rows on a fresh cluster.
  After the rows, each broker's garbage collector passes since it started serving (its
  metrics, ``broker.garbage``): per generation, the passes, their mean and the longest.
  ``--gc-thaw-ms`` sets ``partctl.gc.thaw.interval.ms`` (-1: nothing frozen, the collector
  as Python runs it).
- ``cpu``: a topic of ``--replicas`` partitions (RF 3: each broker holds every one), grown
  from 1,000 as the side-by-side benchmark grows it; once every partition is led and its ISR
  full and ``--settle`` seconds have passed, each broker's CPU time (user and system, from
  ``/proc``) over ``--seconds``, as cores. Nothing is produced or consumed: what it measures
  is the replication round trips of followers with nothing to fetch, the ISR checks and the
  other periodic duties.

The machine has two cores shared with the client and ZooKeeper: run it twice when a figure
matters.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import add_server_options, cpu_seconds, start_server  # noqa: E402
from benchmarks.versus import rows  # noqa: E402
from benchmarks.versus.systems import System, partctl_system  # noqa: E402
from benchmarks.versus.table import Results, render_text  # noqa: E402


def _latency(system: System, work: Path, idle: int, seconds: float) -> str:
    if idle:
        rows.create_topic(system, "idle", idle)
    sizes = rows.Sizes(produce_bytes=1 << 20, consume_bytes=1 << 20, latency_seconds=seconds,
                       e2e_seconds=seconds, replicas=(1000, 5000), log_bytes=1 << 20,
                       warmup_seconds=0.0)  # librdkafka's rows only: no warm-up left out
    results = Results()
    step = rows.Step(rows=("latency",), clients=("rdkafka",), sizes=sizes, results=results,
                     work=work, tools="3.9.1", started=time.monotonic())
    rows.latency_rows(step, system)
    if results.failures:
        raise SystemExit("; ".join(results.failures))
    return render_text(results, (system.key,)) + "\n" + _gc_figures(system)


_METRICS_LINE = re.compile(r"metrics on (http://\S+)")


def _gc_figures(system: System) -> str:
    """Each broker's collector passes from its metrics: per generation, summed over the
    brokers, the passes and their mean; the longest of any broker."""
    from prometheus_client.parser import text_string_to_metric_families

    count, total, longest = [0.0] * 3, [0.0] * 3, [0.0] * 3
    freezes = []
    for node in system.nodes.values():
        found = (_METRICS_LINE.search(node.log_path.read_text(errors="replace"))
                 if node.log_path is not None else None)
        if found is None:
            raise SystemExit(f"broker {node.node_id} named no metrics URL in {node.log_path}")
        with urllib.request.urlopen(found.group(1), timeout=30) as answer:
            text = answer.read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                generation = int(sample.labels.get("generation", -1))
                if sample.name == "partctl_gc_pause_seconds_count":
                    count[generation] += sample.value
                elif sample.name == "partctl_gc_pause_seconds_sum":
                    total[generation] += sample.value
                elif sample.name == "partctl_gc_longest_pause_seconds":
                    longest[generation] = max(longest[generation], sample.value)
                elif sample.name == "partctl_gc_freezes_total":
                    freezes.append(int(sample.value))
    parts = [f"gen {g}: {count[g]:.0f} passes, mean {total[g] / count[g] * 1000:.2f} ms, "
             f"longest {longest[g] * 1000:.1f} ms" if count[g] else f"gen {g}: no pass"
             for g in range(3)]
    return ("garbage collector, three brokers since serving: " + "; ".join(parts)
            + f"; freezes per broker {', '.join(map(str, freezes))}")


def _cpu(system: System, replicas: int, settle: float, seconds: float) -> str:
    rows.create_topic(system, "big", min(replicas, 1000))
    if replicas > 1000:
        rows.grow_topic(system, "big", replicas)
    time.sleep(settle)
    pids = system.pids()
    before = {broker: cpu_seconds(pid) for broker, pid in pids.items()}
    started = time.perf_counter()
    time.sleep(seconds)
    elapsed = time.perf_counter() - started
    cores = {}
    for broker, pid in pids.items():
        now, then = cpu_seconds(pid), before[broker]
        if now is None or then is None:
            raise SystemExit(f"broker {broker} (pid {pid}) exited during the measurement")
        cores[broker] = (now - then) / elapsed
    each = ", ".join(f"broker {b} {c:.3f}" for b, c in sorted(cores.items()))
    return (f"cores per broker, idle, {replicas:,} replicas each, over {seconds:g} s: {each}; "
            f"mean {sum(cores.values()) / len(cores):.3f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("latency", "cpu"))
    parser.add_argument("--idle", type=int, default=150,
                        help="latency: idle partitions beside the latency topic")
    parser.add_argument("--replicas", type=int, default=5000,
                        help="cpu: partitions of the idle topic (each broker holds all)")
    parser.add_argument("--settle", type=float, default=15.0,
                        help="cpu: seconds to wait once every partition is led")
    parser.add_argument("--seconds", type=float, default=None,
                        help="how long each measurement lasts (latency 10, cpu 20)")
    parser.add_argument("--gc-thaw-ms", type=int, default=None,
                        help="latency: the brokers' partctl.gc.thaw.interval.ms (-1: nothing "
                             "frozen; default: the broker's)")
    add_server_options(parser)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="idle-partitions-"))
    server = start_server("zookeeper", args)
    settings = {"metrics.listener": "http://127.0.0.1:0"} if args.what == "latency" else {}
    if args.gc_thaw_ms is not None:
        settings["partctl.gc.thaw.interval.ms"] = str(args.gc_thaw_ms)
    system = partctl_system(work / "partctl", server.address, settings=settings)
    try:
        system.start()
        if args.what == "latency":
            print(_latency(system, work, args.idle, args.seconds or 10.0), flush=True)
        else:
            print(_cpu(system, args.replicas, args.settle, args.seconds or 20.0), flush=True)
    finally:
        system.kill_all()
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
