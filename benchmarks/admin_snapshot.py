"""How long the rebalancer takes to read a big cluster by Kafka's Admin API; prints numbers.

    .venv/bin/python benchmarks/admin_snapshot.py                      # 200,000 partitions
    .venv/bin/python benchmarks/admin_snapshot.py --partitions 20000 --topics 200   # quicker

The cluster: a ZooKeeper started for the run on this machine's loopback and ``--brokers``
``partctl broker start`` processes; ``--topics`` topics holding ``--partitions`` partitions
in all at ``--replication-factor`` (the defaults are the L scenario's topic and partition
counts, rebalancer/scenarios.py, on 3 brokers at replication factor 1: the L scenario's 300
brokers do not fit on one machine). Topics are created through the coordinator's admin nodes
in bulk, and the run waits (printing progress) until every partition has a leader in the
brokers' Metadata. Nothing is produced: the sizes DescribeLogDirs reports are real but zero.

Measured, as ``partctl cluster snapshot --bootstrap-server`` and the jobs read a cluster
(``rebalancer.access.open_access`` and ``ClusterAccess.view``), each from a fresh client:

- *view*: everything the planner reads: DescribeCluster (brokers, racks, controller), one
  Metadata for every topic, ListPartitionReassignments, and DescribeLogDirs of every broker
  (sizes and log-directory usage), decoded, checked and joined into a ClusterView;
- *snapshot*: the planner's Snapshot derived from the view (validation included);
- the same view without sizes (no DescribeLogDirs);
- the benchmark process's peak RSS after the reads (ru_maxrss: the client's share of memory,
  the brokers' excluded).
Times are wall-clock seconds on this machine, brokers and benchmark sharing its cores.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import coordinator  # noqa: E402
from benchmarks.common import start_brokers  # noqa: E402
from coordinator import servers  # noqa: E402
from coordinator.admin import Admin  # noqa: E402
from kafkaclient.admin import AdminClient  # noqa: E402
from rebalancer.access import AccessError, open_access  # noqa: E402


def _create(url: str, topics: int, partitions: int, rf: int, brokers: int) -> None:
    per_topic, extra = divmod(partitions, topics)
    client = coordinator.connect(url, timeout=30)
    try:
        admin = Admin(client)
        slot = 0
        for t in range(topics):
            count = per_topic + (1 if t < extra else 0)
            assignment = {}
            for p in range(count):
                assignment[p] = [1 + (slot + r) % brokers for r in range(rf)]
                slot += 1
            admin.create_topic(f"bench-{t:05d}", assignment=assignment)
            if (t + 1) % max(1, topics // 10) == 0:
                print(f"  created {t + 1}/{topics} topics", flush=True)
    finally:
        client.close()


def _wait_led(bootstrap: str, partitions: int, timeout: float) -> float:
    started = time.monotonic()
    last = -1
    with AdminClient(bootstrap, timeout=120) as admin:
        while True:
            led = sum(1 for t in admin.topics().values() if t.name.startswith("bench-")
                      for p in t.partitions if p.leader >= 0)
            if led != last:
                print(f"  {led}/{partitions} partitions led "
                      f"({time.monotonic() - started:.0f} s)", flush=True)
                last = led
            if led >= partitions:
                return time.monotonic() - started
            if time.monotonic() - started > timeout:
                raise SystemExit(f"only {led}/{partitions} partitions have a leader after "
                                 f"{timeout:.0f} s")
            time.sleep(2)


def _raise_open_files(wanted: int) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, max(hard, wanted)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    print(f"open-file limit for the brokers: {limit}", flush=True)
    return limit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=200_000)
    parser.add_argument("--topics", type=int, default=2_000)
    parser.add_argument("--brokers", type=int, default=None,
                        help="default: enough that each broker's replicas (three descriptors "
                             "each) take at most 3/4 of the open-file limit, at least 3")
    parser.add_argument("--replication-factor", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--wait", type=float, default=3600, help="seconds to wait for leaders")
    parser.add_argument("--open-files", type=int, default=1 << 20,
                        help="the brokers' open-file limit (each replica holds three "
                             "descriptors: raised as far as this process may, for the brokers "
                             "it starts)")
    args = parser.parse_args()
    limit = _raise_open_files(args.open_files)
    if args.brokers is None:
        replicas = args.partitions * args.replication_factor
        args.brokers = max(3, -(-replicas * 3 // (limit * 3 // 4)))

    with tempfile.TemporaryDirectory(prefix="partctl-admin-snapshot-") as tmp:
        zk = servers.start_server("zookeeper")
        brokers = []
        try:
            url = zk.url("/bench")
            print(f"ZooKeeper at {zk.address}; starting {args.brokers} brokers", flush=True)
            brokers = start_brokers(Path(tmp), url, count=args.brokers,
                                    extra="offsets.topic.num.partitions=1\n")
            bootstrap = ",".join(b.bootstrap for b in brokers)
            t0 = time.monotonic()
            _create(url, args.topics, args.partitions, args.replication_factor, args.brokers)
            print(f"  topics written in {time.monotonic() - t0:.1f} s", flush=True)
            led = _wait_led(bootstrap, args.partitions, args.wait)
            rows = []
            for _ in range(args.repeat):
                print("  reading the cluster by the Admin API", flush=True)
                with open_access(bootstrap=bootstrap, timeout=300) as access:
                    s0 = time.perf_counter()
                    view = access.view(sizes=True)
                    s1 = time.perf_counter()
                    snap = view.snapshot()
                    s2 = time.perf_counter()
                with open_access(bootstrap=bootstrap, timeout=300) as access:
                    n0 = time.perf_counter()
                    access.view(sizes=False)
                    n1 = time.perf_counter()
                rows.append((s1 - s0, s2 - s1, n1 - n0))
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        except AccessError as exc:
            raise SystemExit(f"admin_snapshot: {exc}") from None
        finally:
            for b in brokers:
                b.kill()
            zk.stop()
    print()
    print(f"Admin API snapshot: {args.brokers} partctl brokers, {args.topics} topics, "
          f"{len(snap.partitions)} partitions, RF {args.replication_factor} "
          f"({sum(len(p.replicas) for p in snap.partitions)} replicas); leaders in place "
          f"{led:.0f} s after the topics were written")
    print(f"{'run':>4} {'view (with sizes) s':>20} {'snapshot s':>11} {'view (no sizes) s':>18}")
    for i, (v, s, n) in enumerate(rows, 1):
        print(f"{i:>4} {v:>20.2f} {s:>11.2f} {n:>18.2f}")
    print(f"benchmark process peak RSS: {rss:.0f} MiB")


if __name__ == "__main__":
    main()
