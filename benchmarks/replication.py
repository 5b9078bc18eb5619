"""Replicated produce throughput and broker crash recovery in an embedded cluster; prints numbers.

    .venv/bin/python benchmarks/replication.py [--size 512M] [--recovery-size 1G] [--dir DIR]

1. An embedded 3-broker cluster (memory coordinator, one process), a topic with ``--partitions``
   partitions at replication factor 3 and min.insync.replicas 2. A pipelined producer (up to
   ``--in-flight`` batches outstanding) sends ``--size`` bytes of 1 KiB records in batches of
   ``--batch-records`` to the partition leaders, round-robin, with acks=1 and then acks=all
   (a fresh topic each). Followers fetch in the background; each broker fsyncs its logs every
   ``--flush-ms`` (log.flush.interval.ms). Batches are encoded once and re-stamped with the
   producer id and sequence per send, as a producer's accumulator would hand them over: the
   leaders check every one against their producer state (idempotence), as Kafka's do.
2. In the same run, the same batch bytes appended to one file with ``write()`` and an
   ``fsync()`` every ``--flush-ms``, on the same disk: the raw rate the replicated one is
   measured against (the cluster writes every byte three times, once per replica).
3. Recovery: a single-replica topic gets ``--recovery-size`` bytes; its broker is killed (no
   checkpoints, no clean-shutdown marker) and restarted; the time to open its logs (every batch
   after the last recovery point re-read and CRC-checked, indexes rebuilt) is reported, with the
   clean restart of the same log for comparison. The page cache is warm: this is CPU cost.

Targets (issue 4): acks=all >= 0.5 x acks=1; acks=1 >= 0.3 x raw.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import MIB, make_batch, parse_size  # noqa: E402
from node import EmbeddedCluster, embedded_replica_config  # noqa: E402
from replication.log import LogConfig  # noqa: E402
from replication.protocol import ACKS_ALL  # noqa: E402


def bench_raw(directory: Path, template: bytes, count: int, flush_ms: int) -> float:
    path = directory / "raw.log"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    interval = flush_ms / 1000
    start = time.perf_counter()
    next_sync = start + interval
    for _ in range(count):
        os.write(fd, template)
        if time.perf_counter() >= next_sync:
            os.fsync(fd)
            next_sync = time.perf_counter() + interval
    os.fsync(fd)
    elapsed = time.perf_counter() - start
    os.close(fd)
    path.unlink()
    return elapsed


def bench_produce(cluster: EmbeddedCluster, topic: str, partitions: int, acks: int,
                  template: bytes, count: int, in_flight: int) -> tuple[float, int]:
    """Seconds to get ``count`` batches acknowledged; and the producer's retries."""
    tps = cluster.create_topic(topic, partitions, 3)
    producer = cluster.producer(acks=acks, max_in_flight=in_flight)
    warm = [producer.send_encoded(tps[i % partitions], template) for i in range(in_flight)]
    for f in warm:
        f.result()
    futures = []
    start = time.perf_counter()
    for i in range(count):
        futures.append(producer.send_encoded(tps[i % partitions], template))
    for f in futures:
        f.result()
    elapsed = time.perf_counter() - start
    producer.close()
    for tp in tps:
        cluster.wait_for_caught_up(tp, timeout=120)
    return elapsed, producer.retries


def bench_recovery(cluster: EmbeddedCluster, template: bytes, size: int, in_flight: int
                   ) -> None:
    broker = cluster.running()[0]
    tp = cluster.create_topic("recovery", assignment={0: [broker]})[0]
    producer = cluster.producer(acks=1, max_in_flight=in_flight)
    futures = [producer.send_encoded(tp, template) for _ in range(max(size // len(template), 1))]
    for f in futures:
        f.result()
    producer.close()
    on_disk = sum(p.stat().st_size for p in (
        cluster.log_dir(broker) / f"{tp.topic}-{tp.partition}").glob("*.log"))
    cluster.crash(broker)
    node = cluster.restart(broker)
    unclean = node.recovery_seconds or 0.0
    cluster.wait_for_leader(tp, timeout=120)
    end = node.recovered_offsets.get(tp, 0)
    cluster.stop(broker)
    node = cluster.restart(broker)
    clean = node.recovery_seconds or 0.0
    segment_mib = cluster.replica_config.log.segment_bytes / MIB
    print(f"recovery: a {on_disk / MIB:,.0f} MiB single-replica log (segment.bytes "
          f"{segment_mib:,.0f} MiB), broker killed and restarted")
    print(f"  unclean restart (re-read + CRC every batch since the last recovery point, rebuild"
          f" indexes) {unclean:7.2f} s  {on_disk / MIB / max(unclean, 1e-9):8.1f} MB/s"
          f"  (log end offset {end:,})")
    print(f"  clean restart (indexes trusted)"
          f"{'':53}{clean:7.3f} s")


def report(name: str, seconds: float, nbytes: int, records: int, note: str = "") -> float:
    rate = nbytes / MIB / seconds
    print(f"  {name:<30} {rate:9.1f} MB/s {records / seconds:12,.0f} records/s"
          f"   ({seconds:.2f} s){note}")
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=parse_size, default=parse_size("512M"),
                        help="bytes to produce per run (default 512M)")
    parser.add_argument("--recovery-size", type=parse_size, default=parse_size("1G"),
                        help="size of the log to recover after a crash (default 1G; 0 skips)")
    parser.add_argument("--record-size", type=int, default=1024)
    parser.add_argument("--batch-records", type=int, default=256,
                        help="records per batch (default 256: 256 KiB batches of 1 KiB records)")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--in-flight", type=int, default=64)
    parser.add_argument("--flush-ms", type=int, default=1_000)
    parser.add_argument("--segment-bytes", type=parse_size, default=parse_size("1G"))
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of each measurement, alternating; the best is reported")
    parser.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)

    template = make_batch(args.batch_records, args.record_size)
    count = max(args.size // len(template), 1)
    nbytes, nrecords = count * len(template), count * args.batch_records
    root = Path(tempfile.mkdtemp(prefix="replication-bench-", dir=args.dir))
    config = embedded_replica_config(
        min_insync_replicas=2, flush_interval_ms=args.flush_ms,
        log=LogConfig(segment_bytes=args.segment_bytes))
    try:
        print(f"produce: {nbytes / MIB:,.0f} MiB per run, {args.batch_records} x "
              f"{args.record_size} B records per batch ({len(template):,} B), {args.partitions} "
              f"partitions, RF 3, min ISR 2, {args.in_flight} batches in flight, fsync every "
              f"{args.flush_ms} ms, best of {args.repeat}, in {root}")
        raws, ones, alls, retries = [], [], [], 0
        with EmbeddedCluster(3, root=root / "cluster", replica_config=config) as cluster:
            for run in range(args.repeat):  # alternate, so all see the same disk and cache
                raws.append(bench_raw(root, template, count, args.flush_ms))
                seconds, r1 = bench_produce(cluster, f"acks1-{run}", args.partitions, 1,
                                            template, count, args.in_flight)
                ones.append(seconds)
                seconds, r2 = bench_produce(cluster, f"acksall-{run}", args.partitions,
                                            ACKS_ALL, template, count, args.in_flight)
                alls.append(seconds)
                retries += r1 + r2
                for topic in (f"acks1-{run}", f"acksall-{run}"):
                    cluster.admin.delete_topic(topic)
            raw = report("raw write() + fsync()", min(raws), nbytes, nrecords)
            one = report("produce acks=1 (RF 3)", min(ones), nbytes, nrecords)
            every = report("produce acks=all (RF 3)", min(alls), nbytes, nrecords)
            spread = ", ".join(f"{nbytes / MIB / s:.0f}" for s in ones)
            spread_all = ", ".join(f"{nbytes / MIB / s:.0f}" for s in alls)
            spread_raw = ", ".join(f"{nbytes / MIB / s:.0f}" for s in raws)
            print(f"  runs (MB/s): raw {spread_raw}; acks=1 {spread}; acks=all {spread_all};"
                  f" producer retries {retries}")
            print(f"  acks=all / acks=1: {every / one:.2f}  (target >= 0.5)")
            print(f"  acks=1 / raw:      {one / raw:.2f}  (target >= 0.3; the cluster writes "
                  "every byte 3 times, on this one disk and one interpreter)")
            if args.recovery_size:
                bench_recovery(cluster, template, args.recovery_size, args.in_flight)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
