"""Log append throughput and crash-recovery time; prints numbers, asserts nothing.

    .venv/bin/python benchmarks/log_append.py [--append-size 256M] [--size 256M] [--dir DIR]

1. Appends ``--append-size`` bytes of 1 KiB records in batches (``--batch-records`` per batch)
   through ``Log.append_as_leader`` (validate, stamp offset and epoch, write, index) with a
   ``flush()`` every ``--flush-every`` bytes, and the same bytes through raw ``os.write`` with an
   ``os.fsync`` at the same interval, on the same disk. The ratio is the storage layer's cost.
   The log is timed twice: with batches without a producer id (the plain path), and with the
   batches of one idempotent producer (producer id, epoch and sequences following on), whose
   every append is checked against the producer state first; both sets are encoded beforehand,
   each batch in memory of its own, as requests hand them over. The CPU time a batch of each
   (fsync waits excluded) is printed, and the CPU time of the producer state's check and update
   alone, which is what an idempotent batch adds. Each is run ``--repeat`` times, alternating,
   and the best run is reported.
2. Builds a log of ``--size`` bytes in a child process that dies without closing it (no
   clean-shutdown marker, last batch torn), then times ``Log.open``, which re-checks every batch's
   CRC and rebuilds the indexes. A clean open of the same log is timed for comparison. The page
   cache is warm: this measures CPU cost, not the disk.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import MIB, make_batch, parse_size  # noqa: E402
from coordinator.clock import ManualClock  # noqa: E402
from node.clients import restamp_producer
from replication.log import Log, LogConfig  # noqa: E402
from replication.producer_state import ProducerStateManager  # noqa: E402
from replication.records import validate_batches  # noqa: E402


def plain_batches(template: bytes, count: int) -> list[bytes]:
    """``count`` copies of ``template`` (no producer id), each in memory of its own as requests
    arrive: both variants read the same amount of memory that is not in the cache."""
    return [bytes(bytearray(template)) for _ in range(count)]


def producer_batches(template: bytes, count: int, records: int) -> list[bytes]:
    """``count`` copies of ``template`` from idempotent producer 1 at epoch 0, each batch's
    sequence following the last record of the one before."""
    return [bytes(restamp_producer(template, 1, 0, i * records)) for i in range(count)]


def bench_log(directory: Path, batches: Iterable[bytes], flush_every: int
              ) -> tuple[float, float]:
    """Wall seconds and CPU seconds (this process's) of the appends and flushes."""
    log = Log.open(directory / "bench-0", config=LogConfig())
    since_flush = 0
    cpu = time.process_time()
    start = time.perf_counter()
    for batch in batches:
        log.append_as_leader(batch, leader_epoch=0)
        since_flush += len(batch)
        if since_flush >= flush_every:
            log.flush()
            since_flush = 0
    log.flush()
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    log.close()
    return elapsed, cpu


def bench_check(directory: Path, batches: list[bytes], repeat: int) -> float:
    """CPU seconds a batch of the producer state's check and update alone (best of
    ``repeat``): what the leader's append adds for an idempotent producer's batch."""
    facts = [validate_batches(b, from_client=True) for b in batches]
    best = float("inf")
    for _ in range(repeat):
        state = ProducerStateManager(directory, clock=ManualClock(0))
        start = time.process_time()
        for i, (batch, fact) in enumerate(zip(batches, facts, strict=True)):
            entry = state.check_client_append(batch, fact, i)
            assert entry is not None
            state.apply(entry)  # type: ignore[arg-type]
        best = min(best, time.process_time() - start)
    return best / len(batches)


def bench_raw(directory: Path, template: bytes, count: int, flush_every: int) -> float:
    fd = os.open(directory / "raw.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    since_flush = 0
    start = time.perf_counter()
    for _ in range(count):
        os.write(fd, template)
        since_flush += len(template)
        if since_flush >= flush_every:
            os.fsync(fd)
            since_flush = 0
    os.fsync(fd)
    elapsed = time.perf_counter() - start
    os.close(fd)
    return elapsed


def write_and_crash(directory: Path, size: int, segment_bytes: int, template: bytes) -> None:
    """Child process: fill a log, tear its last batch, die without closing it."""
    log = Log.open(directory, config=LogConfig(segment_bytes=segment_bytes))
    written = 0
    while written < size:
        log.append_as_leader(template, leader_epoch=written * 8 // size)
        written += len(template)
    last = directory / f"{log.segment_base_offsets[-1]:020d}.log"
    os.truncate(last, last.stat().st_size - 100)
    os._exit(0)


def report(name: str, seconds: float, nbytes: int, records: int) -> None:
    print(
        f"  {name:<34} {nbytes / MIB / seconds:9.1f} MB/s {records / seconds:12,.0f} records/s"
        f"   ({seconds:.2f} s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--append-size", type=parse_size, default=parse_size("256M"))
    parser.add_argument(
        "--size",
        type=parse_size,
        default=parse_size("256M"),
        help="size of the log to recover (e.g. 1G)",
    )
    parser.add_argument("--record-size", type=int, default=1024)
    parser.add_argument("--batch-records", type=int, default=16)
    parser.add_argument("--flush-every", type=parse_size, default=parse_size("16M"))
    parser.add_argument("--segment-bytes", type=parse_size, default=parse_size("1G"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    parser.add_argument("--crash-child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()

    template = make_batch(args.batch_records, args.record_size)
    if args.crash_child:
        write_and_crash(Path(args.crash_child), args.size, args.segment_bytes, template)

    root = Path(tempfile.mkdtemp(prefix="log-bench-", dir=args.dir))
    try:
        count = max(args.append_size // len(template), 1)
        nbytes, nrecords = count * len(template), count * args.batch_records
        print(
            f"append: {nbytes / MIB:.0f} MiB, {args.batch_records} x {args.record_size} B records"
            f" per batch ({len(template)} B), flush every {args.flush_every / MIB:.0f} MiB,"
            f" in {root}"
        )
        plain = plain_batches(template, count)
        idempotent = producer_batches(template, count, args.batch_records)
        raws, logs, idempotents = [], [], []
        for _ in range(args.repeat):  # alternate, so all see the same disk and page cache
            raws.append(bench_raw(root, template, count, args.flush_every))
            (root / "raw.log").unlink()
            logs.append(bench_log(root, plain, args.flush_every))
            shutil.rmtree(root / "bench-0")
            idempotents.append(bench_log(root, idempotent, args.flush_every))
            shutil.rmtree(root / "bench-0")
        raw = min(raws)
        (logged, plain_cpu), (checked, checked_cpu) = min(logs), min(idempotents)
        report("raw write() + fsync()", raw, nbytes, nrecords)
        report("Log.append_as_leader + flush()", logged, nbytes, nrecords)
        report("  ... idempotent producer", checked, nbytes, nrecords)
        plain_cpu = min(c for _, c in logs) / count * 1e6
        checked_cpu = min(c for _, c in idempotents) / count * 1e6
        print(f"  log / raw throughput: {raw / logged:.2f}; idempotent / plain: "
              f"{logged / checked:.2f}  (best of {args.repeat})")
        check = bench_check(root, idempotent, args.repeat * 3) * 1e6
        print(f"  CPU a batch (append + flush, fsync waits excluded): plain {plain_cpu:.1f} us,"
              f" idempotent {checked_cpu:.1f} us; the producer state's check and update alone"
              f" {check:.2f} us")

        directory = root / "recover-0"
        subprocess.run(
            [
                sys.executable,
                __file__,
                "--crash-child",
                str(directory),
                "--size",
                str(args.size),
                "--segment-bytes",
                str(args.segment_bytes),
                "--record-size",
                str(args.record_size),
                "--batch-records",
                str(args.batch_records),
            ],
            check=True,
        )
        on_disk = sum(p.stat().st_size for p in directory.glob("*.log"))
        print(
            f"recovery: {on_disk / MIB:.0f} MiB log, segment.bytes {args.segment_bytes / MIB:.0f}"
            " MiB, killed without close, last batch torn"
        )
        start = time.perf_counter()
        log = Log.open(directory, config=LogConfig(segment_bytes=args.segment_bytes))
        unclean = time.perf_counter() - start
        end_offset = log.log_end_offset
        log.close()
        print(
            f"  unclean open (CRC every batch, rebuild indexes) {unclean:8.2f} s"
            f"   {on_disk / MIB / unclean:8.1f} MB/s  (log end offset {end_offset:,})"
        )
        start = time.perf_counter()
        log = Log.open(directory, config=LogConfig(segment_bytes=args.segment_bytes))
        clean = time.perf_counter() - start
        log.close()
        print(f"  clean open (indexes trusted)                    {clean:8.3f} s")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
