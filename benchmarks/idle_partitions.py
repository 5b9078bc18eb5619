"""What idle partitions cost partctl's brokers: produce latency beside them, and CPU when nothing
is produced. Prints numbers.

    .venv/bin/python benchmarks/idle_partitions.py latency [--idle 150] [--seconds 10]
    .venv/bin/python benchmarks/idle_partitions.py cpu [--replicas 5000] [--seconds 20]
    .venv/bin/python benchmarks/idle_partitions.py fetch [--partitions 1666] [--rounds 200]

One ZooKeeper (``coordinator.servers``, on loopback) and three partctl brokers, launched as the
side-by-side benchmark launches them (:func:`benchmarks.versus.systems.partctl_system`).

- ``latency``: a topic of ``--idle`` partitions (RF 3) that nothing writes to, then the
  side-by-side benchmark's librdkafka latency rows on a topic beside it: acks=all, idempotent,
  linger 0, 1 KiB values at 1,000 and then 10,000 a second for ``--seconds`` each; each
  figure is a value's time from ``produce()`` to its delivery report. ``--idle 0`` gives the
  same rows on a fresh cluster.
- ``cpu``: a topic of ``--replicas`` partitions (RF 3: each broker holds every one), grown
  from 1,000 as the side-by-side benchmark grows it; once every partition is led and its ISR
  full and ``--settle`` seconds have passed, each broker's CPU time (user and system, from
  ``/proc``) over ``--seconds``, as cores. Nothing is produced or consumed: what it measures
  is the replication round trips of followers with nothing to fetch, the ISR checks and the
  other periodic duties.
- ``fetch``: one leader's share of that, in this process: a broker's server and replica
  manager (the test harness's in-process broker, no coordinator) leading ``--partitions``
  partitions (RF 3, all in sync) and a follower's network fetch endpoint (what a follower
  broker's fetcher sends through) with an incremental fetch session on all of them; the CPU
  time of this process per idle fetch (nothing produced): answered at once (max wait 0),
  and parked until its deadline (``--wait`` ms). Each figure holds the leader's handling of
  the fetch and the endpoint's building and reading of it; the fetcher's own loop is not in
  it.

The machine has two cores shared with the client and ZooKeeper: run it twice when a figure
matters.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
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
                       e2e_seconds=seconds, replicas=(1000, 5000), log_bytes=1 << 20)
    results = Results()
    step = rows.Step(rows=("latency",), clients=("rdkafka",), sizes=sizes, results=results,
                     work=work, tools="3.9.1", started=time.monotonic())
    rows.latency_rows(step, system)
    if results.failures:
        raise SystemExit("; ".join(results.failures))
    return render_text(results, (system.key,))


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


def _fetch(partitions: int, rounds: int, wait_ms: int) -> str:
    from broker.fetch_client import NetworkFetchEndpoint
    from coordinator.codecs import TopicPartition
    from replication.protocol import PartitionFetch
    from tests.broker.harness import InProcessBroker

    with tempfile.TemporaryDirectory(prefix="idle-fetch-") as directory:
        leader = InProcessBroker(Path(directory) / "logs")
        endpoint = None
        try:
            for p in range(partitions):
                leader.set_partition("idle", p, replicas=(1, 2, 3))
            endpoint = NetworkFetchEndpoint(1, *leader.address, replica_id=2, max_wait_ms=0)
            wanted = [PartitionFetch(tp=TopicPartition("idle", p), fetch_offset=0,
                                     leader_epoch=0, last_fetched_epoch=-1, max_bytes=1 << 20)
                      for p in range(partitions)]
            figures = []
            for wait, n in ((0, rounds), (wait_ms, max(1, rounds // 10))):
                for _ in range(3):  # the full fetch that opens the session, then idle ones
                    endpoint.fetch_partitions(2, wanted, max_wait_ms=0)
                started = time.process_time()
                for _ in range(n):
                    if endpoint.fetch_partitions(2, wanted, max_wait_ms=wait):
                        raise SystemExit("an idle fetch answered a partition")
                figures.append((time.process_time() - started) / n * 1000)
        finally:
            if endpoint is not None:
                endpoint.close()
            leader.close()
    return (f"CPU per idle incremental follower fetch of {partitions:,} partitions: "
            f"{figures[0]:.2f} ms answered at once, {figures[1]:.2f} ms parked "
            f"{wait_ms} ms until its deadline")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("latency", "cpu", "fetch"))
    parser.add_argument("--idle", type=int, default=150,
                        help="latency: idle partitions beside the latency topic")
    parser.add_argument("--replicas", type=int, default=5000,
                        help="cpu: partitions of the idle topic (each broker holds all)")
    parser.add_argument("--settle", type=float, default=15.0,
                        help="cpu: seconds to wait once every partition is led")
    parser.add_argument("--seconds", type=float, default=None,
                        help="how long each measurement lasts (latency 10, cpu 20)")
    parser.add_argument("--partitions", type=int, default=1666,
                        help="fetch: partitions in the follower's session")
    parser.add_argument("--rounds", type=int, default=200,
                        help="fetch: fetches answered at once (a tenth as many parked)")
    parser.add_argument("--wait", type=int, default=20,
                        help="fetch: the parked fetches' max wait, ms")
    add_server_options(parser)
    args = parser.parse_args(argv)
    if args.what == "fetch":
        print(_fetch(args.partitions, args.rounds, args.wait), flush=True)
        return 0
    work = Path(tempfile.mkdtemp(prefix="idle-partitions-"))
    server = start_server("zookeeper", args)
    system = partctl_system(work / "partctl", server.address)
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
