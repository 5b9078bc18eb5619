"""A broker's footprint: memory per partition replica, start and recovery time, and the Metadata
response at many partitions; partctl's brokers, and with ``--kafka`` Apache Kafka 3.9.1's beside
them on the same ZooKeeper. Prints numbers.

    .venv/bin/python benchmarks/footprint.py [--kafka] [--log-size 1G] [--replicas 1000,5000]
                                             [--metadata-partitions 5000,20000]

One ZooKeeper (``coordinator.servers``, on loopback, fsync off unless ``--server-fsync``) for
the run; the systems run one after the other, each on a chroot of its own. Per system:

1. three brokers (partctl: ``partctl broker start`` processes, launched by
   :mod:`broker.cluster`; Kafka: ``kafka.Kafka`` in ZooKeeper mode, launched as the side-by-side
   benchmark launches it (:func:`benchmarks.versus.systems.kafka_zk_system`: the cached jars,
   the heap and collector ``kafka-server-start.sh`` gives it by default, ``-Xmx1G -Xms1G`` and
   G1, Kafka's default settings otherwise), started together.
2. RSS: every broker's resident set (``VmRSS`` from ``/proc``: the whole process, the JVM's heap
   as far as it has been touched, code, mmaps of index files) idle, then with each count of
   ``--replicas`` partition replicas per broker (topics of RF 3 created through the Admin API,
   confluent-kafka's AdminClient, so each broker holds every partition), once every partition
   has a leader and a full ISR and after ``--settle`` seconds.
3. ``--log-size`` bytes of 8 KiB values (acks=all, idempotent, confluent-kafka) produced round
   robin over every partition: each broker holds that much log (RF 3).
4. Metadata: the time of one Metadata request for all topics (confluent-kafka's
   ``list_topics()``, a connection already open: the request, the broker's answer and
   librdkafka's parse in C), median of ``--metadata-calls``, at each count of
   ``--metadata-partitions`` (the last counts add topics after the restarts below).
5. Start to serving, clean: SIGTERM to the three brokers (each a controlled shutdown), wait for
   their exit, launch the three again; the time from the launch until a Metadata request from
   outside (a fresh AdminClient) sees every partition of the run's topics with a leader.
6. Start to serving after SIGKILL: the same, the three brokers killed instead (their logs are
   recovered); the wait for ZooKeeper to drop the killed brokers' sessions comes before the
   launch and is not counted.

The machine has two cores shared with the client, ZooKeeper and other work: run it twice when a
figure matters.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import add_server_options, parse_size, start_server  # noqa: E402
from benchmarks.versus.systems import KAFKA_HEAP, kafka_zk_system  # noqa: E402

VALUE_SIZE = 8 * 1024
KAFKA_3 = "3.9.1"


def rss_mib(pid: int | None) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


@dataclass
class Figures:
    system: str
    rss: dict[str, list[float]] = field(default_factory=dict)
    metadata: dict[int, float] = field(default_factory=dict)
    start_clean: float = float("nan")
    start_killed: float = float("nan")
    notes: list[str] = field(default_factory=list)


class System:
    """Three brokers of one kind: start, stop, kill and their PIDs."""

    name = ""

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def kill(self) -> None: ...
    def after_kill(self) -> None: ...
    def pids(self) -> list[int]: ...
    def bootstrap(self) -> str: ...


class Partctl(System):
    name = "partctl"

    def __init__(self, directory: Path, url: str) -> None:
        self.directory = directory
        self.url = url
        self.brokers: list[Any] = []
        self.ports: list[int] = [0, 0, 0]

    def start(self) -> None:
        from broker.cluster import launch_broker
        self.brokers = [launch_broker(self.directory / f"broker-{b}", b, self.url, port=port)
                        for b, port in zip((1, 2, 3), self.ports, strict=True)]

    def wait_started(self) -> None:
        """Until each broker says it serves; the ports it took are kept for a restart."""
        for broker in self.brokers:
            broker.wait_serving(300)
        self.ports = [b.port for b in self.brokers]

    def stop(self) -> None:
        from broker.cluster import stop_brokers
        stop_brokers(self.brokers, timeout=300)

    def kill(self) -> None:
        for broker in self.brokers:
            broker.kill()

    def after_kill(self) -> None:
        _wait_unregistered(self.url, [1, 2, 3])

    def pids(self) -> list[int]:
        return [b.pid for b in self.brokers]

    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)


class Kafka(System):
    name = "Kafka 3.9.1"

    def __init__(self, directory: Path, zk_address: str) -> None:
        # the side-by-side benchmark's launcher: Kafka's cached jars, kafka-server-start.sh's
        # heap and JVM flags, a chroot of the same ZooKeeper
        self.system = kafka_zk_system(directory, zk_address, KAFKA_3)
        self.url = self.system.zk_url or ""
        self.system.start(timeout=300)

    def start(self) -> None:
        for node in self.system.nodes.values():
            node.start()

    def stop(self) -> None:
        self.system.stop(timeout=300)

    def kill(self) -> None:
        self.system.kill_all()

    def after_kill(self) -> None:
        _wait_unregistered(self.url, [1, 2, 3])

    def pids(self) -> list[int]:
        return list(self.system.pids().values())

    def bootstrap(self) -> str:
        return self.system.bootstrap


def _wait_unregistered(url: str, ids: list[int], timeout: float = 120) -> None:
    import coordinator
    client = coordinator.connect(url, timeout=10)
    try:
        deadline = time.monotonic() + timeout
        while any(client.exists(f"/brokers/ids/{i}") is not None for i in ids):
            if time.monotonic() > deadline:
                raise SystemExit(f"killed brokers still registered after {timeout:.0f}s")
            time.sleep(0.1)
    finally:
        client.close()


def _admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 300_000,
                        "log_level": 0})


def all_led(admin: Any, topics: dict[str, int], timeout: float = 5.0) -> bool:
    """Whether one Metadata request sees every partition of ``topics`` with a leader."""
    from confluent_kafka import KafkaException
    try:
        md = admin.list_topics(timeout=timeout)
    except KafkaException:
        return False
    for name, count in topics.items():
        topic = md.topics.get(name)
        if topic is None or topic.error is not None or len(topic.partitions) != count:
            return False
        if any(p.leader < 0 for p in topic.partitions.values()):
            return False
    return True


def create_topic(admin: Any, name: str, partitions: int, topics: dict[str, int],
                 deadline_s: float = 900) -> float:
    """A topic of RF 3 through the Admin API; seconds until every partition has a leader and a
    full ISR."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewTopic
    start = time.perf_counter()
    try:
        admin.create_topics([NewTopic(name, partitions, 3, config={"min.insync.replicas": "2"})],
                            operation_timeout=600)[name].result(900)
    except KafkaException as exc:  # a slow creation times out the answer, not the topic
        if "Timed out" not in str(exc):
            raise
    topics[name] = partitions
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        try:
            md = admin.list_topics(name, timeout=30).topics.get(name)
        except KafkaException:  # a broker too busy to answer in time: ask again
            continue
        if md is not None and md.error is None and len(md.partitions) == partitions and all(
                p.leader >= 0 and len(p.isrs) == 3 for p in md.partitions.values()):
            return time.perf_counter() - start
        time.sleep(0.5)
    raise SystemExit(f"topic {name}: no leaders or ISRs not full after {deadline_s:.0f} s")


def fill(bootstrap: str, topics: dict[str, int], total: int) -> float:
    """Produce ``total`` bytes of 8 KiB values round robin over every partition of ``topics``."""
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "log_level": 0,
                         "enable.idempotence": True, "linger.ms": 20,
                         "queue.buffering.max.messages": 1_000_000,
                         "queue.buffering.max.kbytes": 1 << 20})
    value = os.urandom(VALUE_SIZE)
    targets = [(t, p) for t, n in sorted(topics.items()) for p in range(n)]
    failed: list = []
    start = time.perf_counter()
    for i in range(max(total // VALUE_SIZE, 1)):
        topic, partition = targets[i % len(targets)]
        while True:
            try:
                producer.produce(topic, value=value, partition=partition,
                                 on_delivery=lambda e, _m: e is not None and failed.append(e))
                break
            except BufferError:
                producer.poll(0.05)
        if i % 1000 == 0:
            producer.poll(0)
    left = producer.flush(900)
    if left or failed:
        raise SystemExit(f"fill: {left} undelivered, errors {failed[:3]}")
    return time.perf_counter() - start


def metadata_time(bootstrap: str, calls: int) -> float:
    """Median seconds of one all-topics Metadata round trip (after a first, not counted)."""
    admin = _admin(bootstrap)
    admin.list_topics(timeout=120)
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        admin.list_topics(timeout=120)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def restart_time(system: System, topics: dict[str, int], how: str, bootstrap: str) -> float:
    """Stop (``clean``) or kill the brokers, launch them again: seconds from the launch until a
    Metadata request from outside sees every partition led."""
    if how == "clean":
        system.stop()
    else:
        system.kill()
        system.after_kill()
    start = time.perf_counter()
    system.start()
    admin = None
    deadline = time.monotonic() + 1800
    while time.monotonic() < deadline:
        if admin is None:
            admin = _admin(bootstrap)
        if all_led(admin, topics, timeout=2.0):
            return time.perf_counter() - start
        time.sleep(0.05)
    raise SystemExit(f"{system.name}: not every partition led 1800 s after the {how} restart")


def run(system: System, args: argparse.Namespace, progress: Callable[[str], None]) -> Figures:
    figures = Figures(system.name)
    bootstrap = system.bootstrap()
    admin = _admin(bootstrap)
    topics: dict[str, int] = {}
    time.sleep(args.settle)
    figures.rss["idle"] = [rss_mib(p) for p in system.pids()]
    progress(f"{system.name}: idle RSS {_mib(figures.rss['idle'])}")
    held = 0
    for count in args.replicas:
        made = create_topic(admin, f"fp-{count}", count - held, topics)
        held = count
        time.sleep(args.settle)
        figures.rss[f"{count} replicas"] = [rss_mib(p) for p in system.pids()]
        progress(f"{system.name}: {count} replicas (created in {made:.1f} s) RSS "
                 f"{_mib(figures.rss[f'{count} replicas'])}")
    if args.log_size:
        took = fill(bootstrap, topics, args.log_size)
        progress(f"{system.name}: {args.log_size / (1 << 20):.0f} MiB produced in {took:.1f} s")
        figures.rss["after the fill"] = [rss_mib(p) for p in system.pids()]
    for count in args.metadata_partitions:
        if count <= held:
            figures.metadata[count] = metadata_time(bootstrap, args.metadata_calls)
            progress(f"{system.name}: Metadata at {held} partitions "
                     f"{figures.metadata[count] * 1000:.1f} ms")
    if not args.no_restart:
        for how in ("clean", "killed"):
            took = restart_time(system, topics, how, bootstrap)
            if how == "clean":
                figures.start_clean = took
            else:
                figures.start_killed = took
            progress(f"{system.name}: start to serving after a {how} stop: {took:.1f} s")
        if isinstance(system, Partctl):
            system.wait_started()
        time.sleep(args.settle)
        figures.rss["after the restarts"] = [rss_mib(p) for p in system.pids()]
    for count in args.metadata_partitions:
        if count > held:
            admin = _admin(bootstrap)
            create_topic(admin, f"fp-md-{count}", count - held, topics)
            held = count
            figures.metadata[count] = metadata_time(bootstrap, args.metadata_calls)
            progress(f"{system.name}: Metadata at {held} partitions "
                     f"{figures.metadata[count] * 1000:.1f} ms")
    return figures


def _mib(values: list[float]) -> str:
    return "/".join(f"{v:.0f}" for v in values) + " MiB"


def _ints(text: str) -> list[int]:
    return sorted(int(x) for x in text.split(",") if x.strip())


def report(results: list[Figures], args: argparse.Namespace) -> None:
    print(f"\nfootprint: 3 brokers each, RF 3, {args.log_size / (1 << 20):.0f} MiB of log "
          f"({VALUE_SIZE // 1024} KiB values) over the partitions; RSS per broker "
          "(median of three, MiB); times in seconds; ratio = partctl / Kafka")
    kafka = next((f for f in results if f.system != "partctl"), None)
    ours = next((f for f in results if f.system == "partctl"), None)

    def row(label: str, mine: float | None, theirs: float | None, fmt: str,
            target: str) -> None:
        ratio = f"{mine / theirs:6.2f}x" if mine is not None and theirs else "      -"
        print(f"{label:44} {format(mine, fmt) if mine is not None else '-':>10} "
              f"{format(theirs, fmt) if theirs is not None else '-':>10} {ratio} {target}")

    def rss(figures: Figures | None, key: str) -> float | None:
        values = figures.rss.get(key) if figures is not None else None
        return statistics.median(values) if values else None

    print(f"{'':44} {'partctl':>10} {'Kafka':>10} {'ratio':>7} target")
    keys = list(dict.fromkeys([*(ours.rss if ours else {}), *(kafka.rss if kafka else {})]))
    for key in keys:
        row(f"RSS {key}", rss(ours, key), rss(kafka, key), ".0f", "<= 0.25x")
    if not args.no_restart:
        row("start to serving, clean stop", ours and ours.start_clean,
            kafka and kafka.start_clean, ".1f", "<= 1.0x")
        row("start to serving, after SIGKILL", ours and ours.start_killed,
            kafka and kafka.start_killed, ".1f", "<= 1.0x")
    counts = sorted({*(ours.metadata if ours else {}), *(kafka.metadata if kafka else {})})
    for count in counts:
        mine = ours.metadata.get(count) if ours else None
        theirs = kafka.metadata.get(count) if kafka else None
        row(f"Metadata, all topics, {count} partitions (ms)",
            mine * 1000 if mine is not None else None,
            theirs * 1000 if theirs is not None else None, ".1f", "")
    if kafka:
        print("Kafka: ZooKeeper mode, JVM " + " ".join(KAFKA_HEAP) + " (kafka-server-start.sh's "
              "default heap) and G1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kafka", action="store_true", help="Kafka 3.9.1's brokers beside")
    parser.add_argument("--no-partctl", action="store_true", help="Kafka's brokers only")
    parser.add_argument("--log-size", type=parse_size, default=parse_size("1G"))
    parser.add_argument("--replicas", type=_ints, default=[1000, 5000])
    parser.add_argument("--metadata-partitions", type=_ints, default=[5000, 20000])
    parser.add_argument("--metadata-calls", type=int, default=5)
    parser.add_argument("--settle", type=float, default=5.0, help="seconds before RSS")
    parser.add_argument("--no-restart", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the directory")
    add_server_options(parser)
    args = parser.parse_args()
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        raise SystemExit("needs confluent-kafka: pip install -e '.[test]'") from None

    def progress(line: str) -> None:
        print(line, flush=True)

    zk = start_server("zookeeper", args)
    directory = Path(tempfile.mkdtemp(prefix="partctl-footprint-"))
    results: list[Figures] = []
    try:
        if not args.no_partctl:
            system = Partctl(directory / "partctl", zk.url("/footprint"))
            system.start()
            system.wait_started()
            try:
                results.append(run(system, args, progress))
            finally:
                system.stop()
        if args.kafka:
            kafka = Kafka(directory / "kafka", zk.address)
            try:
                results.append(run(kafka, args, progress))
            finally:
                kafka.stop()
    finally:
        zk.stop()
        if args.keep:
            print(f"kept {directory}")
        else:
            shutil.rmtree(directory, ignore_errors=True)
    if results:
        report(results, args)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    main()
