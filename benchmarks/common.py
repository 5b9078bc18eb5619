"""What the benchmarks share: sizes on the command line, a template batch, CPU from /proc, and
the ZooKeeper and etcd servers they start."""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from coordinator import servers
from replication.records import Record, encode_batch

MIB = 1 << 20


def parse_size(text: str) -> int:
    """``512M``, ``1G``, ``64KiB`` or plain bytes."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def make_batch(records: int, record_size: int) -> bytes:
    """One v2 batch of ``records`` random values of ``record_size`` bytes."""
    value = os.urandom(record_size)
    now = int(time.time() * 1000)
    return encode_batch([Record(key=None, value=value, timestamp=now) for _ in range(records)])


def cpu_seconds(task: str | int = "self") -> float | None:
    """User + system CPU seconds of a process or thread from Linux's ``/proc/<task>/stat``
    (``task``: a pid, ``"self"`` or ``"self/task/<tid>"``); None when it cannot be read."""
    try:
        with open(f"/proc/{task}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_cpu() -> tuple[float, float] | None:
    """The whole machine's busy and stolen CPU seconds so far, summed over its cores (Linux
    ``/proc/stat``: busy is user, nice, system, irq and softirq time; stolen is the time a
    virtual machine's cores waited for the host); None when it cannot be read."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[1:9])
    tick = os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq) / tick, steal / tick


def add_server_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--server-fsync", action="store_true",
                        help="start ZooKeeper and etcd with fsync on, as deployed servers run "
                             "(default off: forceSync=no, --unsafe-no-fsync)")
    parser.add_argument("--etcd-max-txn-ops", type=int, default=None, metavar="N",
                        help="start etcd with --max-txn-ops N and give every client of the "
                             "run that limit (PARTCTL_ETCD_MAX_TXN_OPS); default: etcd's 128. "
                             "Against a server of one's own (--url), export the variable")


def start_server(kind: str, args: argparse.Namespace,
                 partitions: int = 0) -> servers.LocalServer:
    """A ZooKeeper or etcd server on loopback for the run (coordinator.servers), sized for a
    cluster of ``partitions`` partitions (servers.sized_for)."""
    options: dict[str, Any] = {**servers.sized_for(kind, partitions)}  # type: ignore[arg-type]
    raised = getattr(args, "etcd_max_txn_ops", None)
    if kind == "etcd" and raised is not None:
        options["flags"] = ["--max-txn-ops", str(raised)]
        os.environ["PARTCTL_ETCD_MAX_TXN_OPS"] = str(raised)  # spawned processes inherit it
    return servers.start_server(kind, fsync=args.server_fsync, **options)  # type: ignore[arg-type]


def server_label(args: argparse.Namespace) -> str:
    """What the figures include about the servers, for the table's header."""
    how = ("fsync on" if args.server_fsync
           else "fsync off (ZooKeeper forceSync=no, etcd --unsafe-no-fsync)")
    if getattr(args, "etcd_max_txn_ops", None) is not None:
        how += f", etcd --max-txn-ops {args.etcd_max_txn_ops} (and its clients told)"
    return f"ZooKeeper and etcd started on this machine's loopback for the run, {how}"


def start_brokers(directory: Path, url: str, extra: str = "", count: int = 3) -> list:
    """``count`` broker processes (``partctl broker start``) on the coordinator at ``url``,
    each with ``extra`` server.properties lines, waited for until they serve; one line and
    exit if one does not start."""
    from broker.cluster import BrokerStartError, launch_broker

    settings = "controlled.shutdown.retry.backoff.ms=200\n" + extra
    brokers = [launch_broker(directory / f"broker-{b}", b, url, extra=settings)
               for b in range(1, count + 1)]
    try:
        for broker in brokers:
            broker.wait_serving(90)
    except BrokerStartError as exc:
        for broker in brokers:
            broker.kill()
        raise SystemExit(f"broker {exc.broker_id} did not start: {exc.reason}") from None
    return brokers


def create_topic(conf: dict, name: str, partitions: int) -> None:
    """A topic of ``partitions`` partitions, RF 3, min ISR 2, through Kafka's admin API with
    client settings ``conf``; waits until every partition has a leader and a full ISR."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(conf)
    admin.create_topics([NewTopic(name, partitions, 3, config={"min.insync.replicas": "2"})],
                        operation_timeout=60)[name].result(90)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        md = admin.list_topics(name, timeout=10).topics.get(name)
        if md is not None and md.error is None and len(md.partitions) == partitions and all(
                p.leader >= 0 and len(p.isrs) == 3 for p in md.partitions.values()):
            return
        time.sleep(0.1)
    raise SystemExit(f"topic {name}: no leaders or ISRs not full after 120 s")


def produce_values(producer: Any, topic: str, value: bytes, count: int, *,
                   partition: Callable[[int], int] | None = None, backoff: float = 0.01,
                   flush_timeout: float = 300.0) -> tuple[float, int, list[Any]]:
    """Hand ``count`` copies of ``value`` to a confluent-kafka ``producer`` (the i-th to
    ``partition(i)``, or where librdkafka puts it), waiting ``backoff`` seconds whenever its
    queue is full, then flush: the seconds from the first ``produce()`` to the end of
    ``flush()``, the messages left undelivered, and the delivery errors."""
    failed: list[Any] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            failed.append(error)

    extra: dict[str, int] = {}
    start = time.perf_counter()
    for i in range(count):
        if partition is not None:
            extra["partition"] = partition(i)
        while True:
            try:
                producer.produce(topic, value=value, on_delivery=delivered, **extra)
                break
            except BufferError:
                producer.poll(backoff)
        if i % 1000 == 0:
            producer.poll(0)
    left = producer.flush(flush_timeout)
    return time.perf_counter() - start, left, failed


def produce(conf: dict, topic: str, count: int, partitions: int, value_size: int) -> float:
    """Seconds to produce ``count`` values of ``value_size`` random bytes round-robin to
    ``partitions`` partitions (idempotent, acks=all) with client settings ``conf``, every one
    delivered; one line and exit if some were not."""
    from confluent_kafka import Producer

    producer = Producer({**conf, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                         "queue.buffering.max.messages": 1_000_000})
    elapsed, left, failed = produce_values(producer, topic, os.urandom(value_size), count,
                                           partition=lambda i: i % partitions, backoff=0.01,
                                           flush_timeout=300)
    if left or failed:
        raise SystemExit(f"produce failed: {left} undelivered, errors {failed[:3]}")
    return elapsed
