"""Throttled reassignments on three broker processes; prints how long each copy took against
size/rate, and produce latency on another topic meanwhile.

    .venv/bin/python benchmarks/throttle.py [--moves 16MiB@4MB/s,64MiB@16MB/s]
                                            [--latency-rate 200]

A ZooKeeper started for the run on loopback and three ``partctl broker start`` processes (as
``partctl cluster up`` launches them), logs in a temporary directory. For each ``SIZE@RATE``:
a topic with one partition on broker 1 gets SIZE of incompressible 64 KiB values, then
:func:`rebalancer.execution.execute_plan` with ``throttle=RATE`` (what ``partctl reassign
execute --throttle RATE`` runs) adds a replica on broker 2. "copy" is from the moment the new
replica's log directory appears on broker 2 to the moment its segments hold the leader's
bytes (polled every 10 ms); "execute" is the whole run (validation, throttle configs, the
controller's moves, the new replica joining the ISR). Expected = SIZE / RATE (10^6 bytes per
MB; MiB = 2^20). Verify's throttle removal follows each move.

Meanwhile one confluent-kafka producer sends ``--latency-rate`` 1 KiB messages a second
(acks=all, idempotent, linger.ms 0) to a one-partition RF-3 topic on brokers 1-3; its p50/p99
are printed for each move next to the same producer on the idle cluster before the moves.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import add_server_options, start_server  # noqa: E402
from benchmarks.common import start_brokers as common_start_brokers  # noqa: E402

VALUE = 64 * 1024


def parse_moves(text: str) -> list[tuple[int, int]]:
    from benchmarks.common import parse_size
    from rebalancer.throttles import parse_rate

    out = []
    for item in text.split(","):
        size, sep, rate = item.partition("@")
        if not sep:
            raise SystemExit(f"--moves: want SIZE@RATE (16MiB@4MB/s), got {item!r}")
        try:
            out.append((parse_size(size), parse_rate(rate)))
        except ValueError as exc:
            raise SystemExit(f"--moves: {exc}") from None
    return out


def start_brokers(directory: Path, url: str) -> list:
    return common_start_brokers(directory, url, extra="replica.fetch.wait.max.ms=100\n")


def fill(bootstrap: str, topic: str, size: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5,
                         "batch.size": 4 * VALUE, "compression.type": "none"})
    for i in range(-(-size // VALUE)):
        while True:
            try:
                producer.produce(topic, value=os.urandom(VALUE), partition=0)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 16 == 0:
            producer.poll(0)
    if producer.flush(300):
        raise SystemExit(f"{topic}: not every value was delivered")


def log_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.glob("*.log"))


class Latency(threading.Thread):
    """acks=all produce at ``rate``/s until stopped; delivery times in ms."""

    def __init__(self, bootstrap: str, topic: str, rate: int) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                  "enable.idempotence": True, "linger.ms": 0})
        self.topic, self.rate = topic, rate
        self.samples: list[float] = []
        self.stopping = threading.Event()
        self.producer.produce(topic, value=b"warm-up")
        if self.producer.flush(60):
            raise SystemExit("latency: the warm-up message was not delivered")

    def run(self) -> None:
        value = os.urandom(1024)
        start, i = time.perf_counter(), 0
        while not self.stopping.is_set():
            due = start + i / self.rate
            while (now := time.perf_counter()) < due:
                self.producer.poll(min(0.001, due - now))
            sent = time.perf_counter()
            self.producer.produce(self.topic, value=value, on_delivery=lambda e, m, s=sent: (
                self.samples.append((time.perf_counter() - s) * 1000) if e is None else None))
            self.producer.poll(0)
            i += 1
        self.producer.flush(60)

    def finish(self) -> tuple[float, float, int]:
        self.stopping.set()
        self.join(90)
        del self.producer  # closed now, not when the brokers have gone
        s = sorted(self.samples)
        if not s:
            return float("nan"), float("nan"), 0
        return s[len(s) // 2], s[min(len(s) - 1, int(len(s) * 0.99))], len(s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--moves", default="16MiB@4MB/s,32MiB@8MB/s,64MiB@16MB/s")
    parser.add_argument("--latency-rate", type=int, default=200)
    parser.add_argument("--idle-seconds", type=float, default=5.0)
    add_server_options(parser)
    args = parser.parse_args()
    moves = parse_moves(args.moves)
    import coordinator
    from coordinator.admin import Admin
    from rebalancer import PartitionMove, Plan
    from rebalancer.execution import execute_plan
    from rebalancer.throttles import remove_throttles
    from rebalancer.verification import verify_plan

    zk = start_server("zookeeper", args)
    directory = Path(tempfile.mkdtemp(prefix="partctl-throttle-"))
    brokers: list = []
    client = None
    try:
        url = zk.url("/bench")
        brokers = start_brokers(directory, url)
        bootstrap = ",".join(b.bootstrap for b in brokers)
        client = coordinator.connect(url, timeout=10)
        admin = Admin(client)
        admin.create_topic("latency", assignment={0: [3, 1, 2]})
        time.sleep(2)
        idle = Latency(bootstrap, "latency", args.latency_rate)
        idle.start()
        time.sleep(args.idle_seconds)
        base = idle.finish()
        print(f"idle cluster: produce p50 {base[0]:.1f} ms, p99 {base[1]:.1f} ms "
              f"({base[2]} messages)", flush=True)
        rows = []
        for i, (size, rate) in enumerate(moves):
            topic = f"move{i}"
            admin.create_topic(topic, assignment={0: [1]})
            time.sleep(1)
            fill(bootstrap, topic, size)
            size_on_disk = log_bytes(directory / "broker-1" / "logs" / f"{topic}-0")
            target = directory / "broker-2" / "logs" / f"{topic}-0"
            copy: dict[str, float] = {}

            def watch(target: Path = target, want: int = size_on_disk,
                      copy: dict[str, float] = copy) -> None:
                deadline = time.monotonic() + 3600
                while time.monotonic() < deadline:
                    now = time.monotonic()
                    if target.is_dir():
                        copy.setdefault("began", now)
                        if log_bytes(target) >= want:
                            copy["ended"] = now
                            return
                    time.sleep(0.01)

            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()
            during = Latency(bootstrap, "latency", args.latency_rate)
            during.start()
            plan = Plan(partitions=(PartitionMove(topic=topic, partition=0, replicas=(1, 2)),))
            result = execute_plan(client, plan, throttle=rate, poll_interval=0.05,
                                  timeout=3600)
            watcher.join(60)
            lat = during.finish()
            if not result.ok or "ended" not in copy:
                raise SystemExit(f"{topic}: the move did not finish: {result}")
            assert verify_plan(client, plan).all_done
            remove_throttles(client, [topic])
            expected = size_on_disk / rate
            took = copy["ended"] - copy["began"]
            rows.append((size_on_disk / 2**20, rate / 1e6, expected, took, result.elapsed,
                         lat))
            print(f"{topic}: {size_on_disk / 2**20:.1f} MiB at {rate / 1e6:g} MB/s: copy "
                  f"{took:.2f} s (expected {expected:.2f} s)", flush=True)
        print()
        print(f"| MiB | MB/s | expected s | copy s | copy/expected | execute s | "
              f"produce p50/p99 ms (idle {base[0]:.1f}/{base[1]:.1f}) |")
        print("|---|---|---|---|---|---|---|")
        for mib, mbs, expected, took, elapsed, lat in rows:
            print(f"| {mib:.1f} | {mbs:g} | {expected:.2f} | {took:.2f} | "
                  f"{took / expected:.2f} | {elapsed:.2f} | {lat[0]:.1f}/{lat[1]:.1f} |")
    finally:
        if client is not None:
            client.close()
        for broker in brokers:
            broker.stop()
        zk.stop()
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
