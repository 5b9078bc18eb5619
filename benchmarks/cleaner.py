"""Log cleaner throughput against a raw sequential read of the same log.

Builds a compacted log of ``--size-mib`` MiB (default 1024; ``--quick`` makes it 64) in which
every key is written ``--rewrites`` times (default 10, so 10% of the records are live), records
of ``--value-bytes`` bytes in batches of ``--batch-records``, then measures:

- raw read: every segment file read sequentially in 8 MiB chunks, nothing parsed, from a cold
  cache (the log's pages evicted with POSIX_FADV_DONTNEED, no other file touched) and from a
  warm one (read once before timing);
- clean: one full :func:`replication.cleaner.clean_log` pass with an offset map large enough for
  every key: the map-building read (CRC of each batch checked, each key mapped), the copy of
  every segment (kept and dropped batches told apart by their offsets in the map, records
  walked only in batches that lose some), the fsync of the cleaned files and the swaps (rename,
  unlink, the index rebuild of each new segment). The keys are scanned as the product scans
  them: in C where the install built ``replication._cleaner_native``, else in Python (the
  output says which);
- release: closing the pass's descriptors of the replaced files, which frees their pages (the
  part of deleting a file that Kafka defers to an asynchronous delete, file.delete.delay.ms).

Throughput is the log's size before cleaning over each time; the ratio is clean over raw
with the same cache state (the issue's target is >= 0.25), printed without and with the
release. The clean runs once, warm unless ``--cold``. With ``--compression CODEC`` every batch
is compressed with that codec as Kafka's Java producer frames it: the map then inflates each
dirty batch, and the copy inflates every batch that may lose records and recompresses those
that do (sizes and throughput are of the compressed log). Run:
``python -m benchmarks.cleaner [--quick] [--compression lz4]``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from coordinator.clock import ManualClock
from replication.cleaner import NATIVE_SCAN, OffsetMap, clean_log
from replication.log import Log, LogConfig
from replication.records import COMPRESSION_NAMES, Record, encode_batch


def build(directory: Path, size: int, value_bytes: int, batch_records: int, rewrites: int,
          compression: int = 0) -> tuple[Log, int]:
    """The log and its record count (``size`` counts the records uncompressed)."""
    log = Log.open(directory, config=LogConfig(compact=True, cleanup_delete=False,
                                               segment_bytes=64 << 20), clock=ManualClock(1_000))
    per_record = value_bytes + 20
    total = max(size // per_record, batch_records)
    keys = max(total // rewrites, 1)
    value = os.urandom(value_bytes)
    written = 0
    while written < total:
        records = [Record(key=b"key-%012d" % ((written + i) % keys), value=value,
                          timestamp=1_000) for i in range(batch_records)]
        log.append_as_leader(encode_batch(records, compression=compression), 0)
        written += batch_records
    log.roll()
    return log, written


def evict(directory: Path) -> None:
    """Drop this log's files from the page cache (fsync, then POSIX_FADV_DONTNEED on each):
    the next read comes from the disk, and no other file on the machine is touched."""
    for path in directory.iterdir():
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def raw_read(directory: Path) -> tuple[float, int]:
    files = sorted(p for p in directory.iterdir() if p.suffix == ".log")
    start, n = time.perf_counter(), 0
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            while chunk := os.read(fd, 8 << 20):
                n += len(chunk)
        finally:
            os.close(fd)
    return time.perf_counter() - start, n


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--quick", action="store_true", help="a 64 MiB log")
    parser.add_argument("--value-bytes", type=int, default=1000)
    parser.add_argument("--batch-records", type=int, default=16)
    parser.add_argument("--rewrites", type=int, default=10)
    parser.add_argument("--dir", type=Path, default=None, help="where to build the log")
    parser.add_argument("--cold", action="store_true",
                        help="run the clean from a cold cache too (the log's pages evicted)")
    parser.add_argument("--compression", choices=COMPRESSION_NAMES, default="none",
                        help="compress every batch with this codec")
    args = parser.parse_args(argv)
    codec = COMPRESSION_NAMES.index(args.compression)
    size = (64 if args.quick else args.size_mib) << 20
    if args.dir is not None:
        try:
            Path(args.dir).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            parser.error(f"--dir {args.dir}: {exc.strerror or exc}")
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        directory = Path(tmp) / "bench-0"
        t0 = time.perf_counter()
        log, records = build(directory, size, args.value_bytes, args.batch_records,
                             args.rewrites, codec)
        built = time.perf_counter() - t0
        before = log.size_bytes
        mib = 1 << 20
        print(f"log: {before / mib:.0f} MiB, {records} records of {args.value_bytes} B value "
              f"in batches of {args.batch_records} ({args.compression}), "
              f"{100 / args.rewrites:.0f}% live keys "
              f"(built in {built:.1f} s)")
        print("key scan of the map pass: " + ("C (replication._cleaner_native)" if NATIVE_SCAN
                                              else "Python (the C extension is not built)"))
        print(f"{'measure':<44}{'seconds':>10}{'MiB/s':>10}")
        raws = {}
        for cache in ("cold", "warm"):
            if cache == "cold":
                evict(directory)
            else:
                raw_read(directory)  # a first read warms the cache
            raws[cache], raw_bytes = raw_read(directory)
            print(f"{'raw sequential read (' + cache + ' cache)':<44}{raws[cache]:>10.2f}"
                  f"{raw_bytes / mib / raws[cache]:>10.0f}")
        # The clean runs once (it changes the log): from a cold cache when --cold, else warm.
        cache = "cold" if args.cold else "warm"
        if args.cold:
            evict(directory)
        release: list[int] = []
        t0 = time.perf_counter()
        result = clean_log(log, first_dirty=0, high_watermark=log.log_end_offset,
                           offset_map=OffsetMap(records), now_ms=1_000, release=release)
        clean_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        for fd in release:
            os.close(fd)
        release_s = time.perf_counter() - t0
        after = log.size_bytes
        log.close()
    assert result is not None
    print(f"{'clean, ' + cache + ' cache: map + copy + fsync + swap':<44}{clean_s:>10.2f}"
          f"{before / mib / clean_s:>10.0f}")
    print(f"{'release of the replaced files':<44}{release_s:>10.2f}{'':>10}")
    print(f"cleaned to {after / mib:.0f} MiB ({result.records_kept} records kept, "
          f"{result.records_dropped} dropped, {result.segments_replaced} segments replaced)")
    raw = raws[cache]
    print(f"ratio clean/raw ({cache} cache both): {raw / clean_s:.3f} (target >= 0.25); "
          f"counting the release too: {raw / (clean_s + release_s):.3f}")


if __name__ == "__main__":
    main()
