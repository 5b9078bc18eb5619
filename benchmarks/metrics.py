"""What serving Kafka's metrics costs a broker; prints numbers.

    .venv/bin/python benchmarks/metrics.py [--messages 100000] [--partitions 6] [--rounds 2]
                                           [--scrape-partitions 10000] [--scrapes 10]

1. Produce with metrics on and off, in the same run: three ``partctl broker start`` processes
   over a ZooKeeper started for the run on loopback, one confluent-kafka producer (acks=all,
   idempotent, linger.ms 5) sending ``--messages`` 1 KiB values round-robin to a topic of
   ``--partitions`` partitions at RF 3 and min.insync.replicas 2. With metrics on, every
   broker has ``metrics.listener`` set (its produce and fetch paths count bytes, records and
   requests) and is scraped once a second over HTTP during the run by a process of its own, as
   Prometheus would; with metrics off, nothing is counted or served. The clusters alternate off, on, off, on
   (``--rounds`` of each, fresh logs each time); each figure is the best round's.
2. A scrape of a broker with ``--scrape-partitions`` partitions: one broker process (RF 1, its
   own controller), every partition led by it and holding a few records, scraped
   ``--scrapes`` times over HTTP; the time from the request to the last byte of the answer
   (the controller's gauges, the replica manager's under-replicated counts and three log
   gauges per partition, rendered in Prometheus's text format).
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import (  # noqa: E402
    add_server_options,
    create_topic,
    server_label,
    start_brokers,
    start_server,
)
from benchmarks.common import produce as common_produce  # noqa: E402

VALUE_SIZE = 1024
FILES_PER_PARTITION = 3
"""Files a partition's log keeps open: its active segment, offset index and time index."""
FILE_MARGIN = 1000
"""Open files left for everything else a broker holds (sockets, ZooKeeper, checkpoints)."""
METRICS = "metrics.listener=http://127.0.0.1:0\n"


_SCRAPER = """
import signal, sys, time, urllib.request
stopping = []
signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
count = 0
while not stopping:
    for url in sys.argv[1:]:
        with urllib.request.urlopen(url, timeout=10) as answer:
            answer.read()
        count += 1
    deadline = time.monotonic() + 1.0
    while not stopping and time.monotonic() < deadline:
        time.sleep(0.05)
print(count, flush=True)
"""


class Scraper:
    """Scrapes ``urls`` once a second until :meth:`stop`, from a process of its own, as
    Prometheus does (a thread in this process would compete with the producer's Python thread
    for the interpreter lock, which is a cost of the benchmark, not of the brokers)."""

    def __init__(self, urls: list[str]) -> None:
        self.scrapes = 0
        self._process = subprocess.Popen([sys.executable, "-c", _SCRAPER, *urls],
                                         stdout=subprocess.PIPE, text=True)

    def stop(self) -> None:
        self._process.terminate()
        out, _ = self._process.communicate(timeout=15)
        self.scrapes = int(out.strip() or 0)


def stop(brokers: list) -> None:
    for broker in brokers:
        broker.signal(15)
    for broker in brokers:
        try:
            broker.wait(120)
        except Exception:  # noqa: BLE001 - whatever happened, nothing is left running
            broker.kill()


def produce_round(directory: Path, url: str, args: argparse.Namespace, metrics: bool
                  ) -> tuple[float, int]:
    """(seconds to produce, scrapes made meanwhile) on a fresh three-broker cluster."""
    brokers = start_brokers(directory, url, extra=METRICS if metrics else "")
    try:
        bootstrap = ",".join(b.bootstrap for b in brokers)
        create_topic({"bootstrap.servers": bootstrap}, "bench-metrics", args.partitions)
        scraper = Scraper([b.metrics_url for b in brokers]) if metrics else None
        try:
            seconds = common_produce({"bootstrap.servers": bootstrap}, "bench-metrics",
                                     args.messages, args.partitions, VALUE_SIZE)
        finally:
            if scraper is not None:
                scraper.stop()
        return seconds, scraper.scrapes if scraper is not None else 0
    finally:
        stop(brokers)


def fill(bootstrap: str, partitions: int) -> None:
    """A record in each partition of ``bench-scrape`` (the producer gone when this returns)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    for p in range(partitions):
        producer.produce("bench-scrape", value=b"x" * 100, partition=p)
        if p % 1000 == 0:
            producer.poll(0)
    if producer.flush(120):
        raise SystemExit("records for the scrape benchmark not delivered")


def partitions_that_fit(wanted: int) -> int:
    """``wanted``, or fewer when this process's open-file limit (which the broker inherits;
    raised to its hard limit here) cannot hold a log of each: a partition's log keeps
    :data:`FILES_PER_PARTITION` files open."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    if soft == resource.RLIM_INFINITY:
        return wanted
    fits = (soft - FILE_MARGIN) // FILES_PER_PARTITION
    if fits < wanted:
        print(f"open-file limit {soft}: a broker can hold {fits} partitions' logs here, not "
              f"{wanted}; the scrape is measured at {fits // 1000 * 1000}", flush=True)
        return fits // 1000 * 1000
    return wanted


def scrape_times(directory: Path, url: str, args: argparse.Namespace
                 ) -> tuple[list[float], int, int]:
    """(seconds per scrape, bytes of the answer, its sample lines) of a broker leading
    ``--scrape-partitions`` partitions."""
    import coordinator
    from coordinator.admin import Admin

    (broker,) = start_brokers(directory, url, extra=METRICS, count=1)
    try:
        client = coordinator.connect(url, timeout=10)
        try:
            Admin(client).create_topic("bench-scrape", args.scrape_partitions, 1)
        finally:
            client.close()
        metrics_url = broker.metrics_url
        assert metrics_url is not None
        name = "kafka_server_replicamanager_leadercount "
        deadline = time.monotonic() + 600
        while True:
            with urllib.request.urlopen(metrics_url, timeout=30) as answer:
                text = answer.read().decode()
            line = next(x for x in text.splitlines() if x.startswith(name))
            if float(line[len(name):]) >= args.scrape_partitions:
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"not every partition led after 600 s: {line}")
            time.sleep(1)
        fill(broker.bootstrap, args.scrape_partitions)
        times = []
        for _ in range(args.scrapes):
            start = time.perf_counter()
            with urllib.request.urlopen(metrics_url, timeout=30) as answer:
                body = answer.read()
            times.append(time.perf_counter() - start)
        samples = sum(1 for x in body.decode().splitlines() if x and not x.startswith("#"))
        return times, len(body), samples
    finally:
        stop([broker])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=2, help="clusters of each kind")
    parser.add_argument("--scrape-partitions", type=int, default=10_000)
    parser.add_argument("--scrapes", type=int, default=10)
    add_server_options(parser)
    args = parser.parse_args()
    try:
        import confluent_kafka
    except ImportError:
        raise SystemExit("needs confluent-kafka: pip install -e '.[test]'") from None

    zk = start_server("zookeeper", args)
    directory = Path(tempfile.mkdtemp(prefix="partctl-metrics-"))
    runs: dict[bool, list[float]] = {False: [], True: []}
    scrapes = 0
    try:
        for round_ in range(args.rounds):
            for metrics in (False, True):
                print(f"round {round_ + 1}: produce with metrics {'on' if metrics else 'off'}",
                      flush=True)
                seconds, scraped = produce_round(
                    directory / f"produce-{round_}-{int(metrics)}",
                    zk.url(f"/produce-{round_}-{int(metrics)}"), args, metrics)
                runs[metrics].append(seconds)
                scrapes += scraped
        args.scrape_partitions = partitions_that_fit(args.scrape_partitions)
        print(f"scrape: one broker, {args.scrape_partitions} partitions", flush=True)
        times, size, samples = scrape_times(directory / "scrape", zk.url("/scrape"), args)
    finally:
        zk.stop()
        shutil.rmtree(directory, ignore_errors=True)

    rate = {m: args.messages / min(runs[m]) for m in runs}
    print(f"\n3 partctl broker processes, confluent-kafka {confluent_kafka.version()[0]}, "
          f"{args.messages} x 1 KiB values, acks=all idempotent, {args.partitions} partitions, "
          f"RF 3, min ISR 2; best of {args.rounds} round(s) each, alternating")
    print(server_label(args))
    print(f"{'produce':34} {'msgs/s':>9} {'rounds (s)':>24}")
    for metrics in (False, True):
        label = ("metrics on (counted, scraped 1/s)" if metrics else "metrics off")
        rounds = ", ".join(f"{s:.2f}" for s in runs[metrics])
        print(f"{label:34} {rate[metrics]:9.0f} {rounds:>24}")
    print(f"on / off: {rate[True] / rate[False]:.3f} (target >= 0.97); "
          f"{scrapes} scrapes during the 'on' runs")
    print(f"\nscrape of one broker leading {args.scrape_partitions} partitions (HTTP GET to the "
          f"last byte, {size / 1e6:.1f} MB, {samples} samples), {args.scrapes} scrapes:")
    print(f"  median {statistics.median(times) * 1000:.0f} ms, best {min(times) * 1000:.0f} ms, "
          f"worst {max(times) * 1000:.0f} ms (target <= 200 ms)")


if __name__ == "__main__":
    main()
