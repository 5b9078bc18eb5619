"""Three broker processes under Kafka's own client (librdkafka, through confluent-kafka); prints
numbers.

    .venv/bin/python benchmarks/network.py [--messages 200000] [--partitions 6]
                                           [--rate 1000 10000] [--seconds 10]
                                           [--data-only] [--bootstrap HOST:PORT,...
                                            --broker-pids PID,...]

``--bootstrap`` runs the data-path phases (produce, consume, latency) against a cluster that is
already running (Apache Kafka's, for one), with the same clients and steps; ``--broker-pids``
names its broker processes for the CPU figures. ``--data-only`` leaves out the memory, embedded
and raw loopback phases.

A ZooKeeper started for the run on this machine's loopback, three ``partctl broker start``
processes (launched by :mod:`broker.cluster`, as ``partctl cluster up`` launches them) with
their logs in a temporary directory (flushed by the OS: Kafka's default), joined only by
Kafka's protocol: the controller's requests and the followers' fetches go over loopback.
Topics have ``--partitions`` partitions at replication factor 3 with min.insync.replicas 2.

1. Produce: one confluent-kafka producer, acks=all and enable.idempotence, linger.ms 5, sends
   ``--messages`` values of 1 KiB (random bytes, no key, no compression) round-robin over the
   partitions; from the first ``produce()`` to the end of ``flush()``. Then the same for
   100-byte values, and for 1 KiB values with lz4 compression, each to a topic of its own.
2. Consume: one confluent-kafka consumer (assign() from the beginning, no group) reads that
   topic back, timed from ``assign()`` to the last message, and from the first message to the
   last (librdkafka takes about half a second to start: it queries the start offsets on a
   500 ms timer while it connects to the partitions' leaders). Then once more with the
   client's ``fetch.queue.backoff.ms`` at 10 instead of librdkafka's 1,000: by default
   librdkafka stops fetching a partition for a second once its local queue passes its
   threshold, which a Python loop slower than the fetches makes it do; the second run shows
   what the brokers serve when the client keeps asking.
3. Embedded: the same number of 1 KiB records with acks=all through the embedded cluster
   (three brokers in this process on the memory coordinator, RF 3, min ISR 2, its pipelined
   idempotent producer, batches of ``--embedded-batch`` records): what the network costs.
4. Raw loopback: the same bytes over one TCP connection on 127.0.0.1 in 1 MiB ``sendall()``
   calls, read by a thread: the ceiling of one connection from Python on this machine.
5. Latency: acks=all (idempotent), linger.ms 0, each ``--rate`` messages a second for
   ``--seconds`` to a one-partition topic, after one message delivered first (the producer's
   start-up: metadata, InitProducerId, connections); each message's time from ``produce()``
   to its delivery callback (the producer's poll loop adds up to 1 ms); p50, p99, p99.9, max.
6. Memory: a topic of 1,000 partitions (RF 3: every broker holds 1,000 replicas, a third of
   them as leader), then 100 idle client connections to each broker (each has sent
   ApiVersions); every broker's resident set size (VmRSS), after the cluster settles.

MB/s counts value bytes only (10^6 bytes per MB). "brokers CPU" is the three broker processes'
user + system time during the phase (from /proc); the two cores are shared with the client,
the ZooKeeper server and (for the embedded row) the whole embedded cluster. "machine CPU" is
the whole machine's busy time (/proc/stat) over the phase, per MB: it counts the client too.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import (  # noqa: E402
    add_server_options,
    cpu_seconds,
    create_topic,
    machine_cpu,
    make_batch,
    server_label,
    start_brokers,
    start_server,
)
from benchmarks.common import produce as common_produce  # noqa: E402

VALUE_SIZE = 1024
BROKERS = 3



class BrokersCpu:
    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self.start = self._now()

    def _now(self) -> float:
        return sum(cpu_seconds(pid) or 0.0 for pid in self.pids)

    def used(self) -> float:
        return self._now() - self.start


class MachineCpu:
    def __init__(self) -> None:
        self.start = (machine_cpu() or (0.0, 0.0))[0]

    def used(self) -> float:
        return (machine_cpu() or (0.0, 0.0))[0] - self.start


def produce(bootstrap: str, topic: str, count: int, partitions: int,
            value_size: int = VALUE_SIZE, **settings: str) -> float:
    """``settings``: the producer's (librdkafka's names with '_' for '.')."""
    return common_produce({"bootstrap.servers": bootstrap,
                           **{k.replace("_", "."): v for k, v in settings.items()}},
                          topic, count, partitions, value_size)


def consume(bootstrap: str, topic: str, count: int, partitions: int,
            **settings: object) -> tuple[float, float]:
    """(seconds from assign() to the last message, seconds from the first message to the
    last); ``settings`` are the consumer's (librdkafka's names with '_' for '.')."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench",
                         "enable.auto.commit": False, "fetch.max.bytes": 50 * 1024 * 1024,
                         **{k.replace("_", "."): v for k, v in settings.items()}})
    start = time.perf_counter()
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    got = 0
    first = None
    deadline = time.monotonic() + 300
    while got < count and time.monotonic() < deadline:
        # no more than is still to come: a batch it cannot fill waits its timeout
        for msg in consumer.consume(min(1_000, count - got), 0.1):
            if msg.error() is None:
                got += 1
        if got and first is None:
            first = time.perf_counter()
    end = time.perf_counter()
    consumer.close()
    if got < count or first is None:
        raise SystemExit(f"consumed {got} of {count}")
    return end - start, end - first


def embedded(count: int, partitions: int, batch: int) -> tuple[float, float]:
    """(seconds, CPU seconds of this process) for ``count`` 1 KiB records with acks=all on
    the embedded cluster, after a warm-up."""
    from node import EmbeddedCluster, embedded_replica_config
    from replication.protocol import ACKS_ALL

    template = make_batch(batch, VALUE_SIZE)
    batches = max(count // batch, 1)
    with EmbeddedCluster(3, replica_config=embedded_replica_config(min_insync_replicas=2)
                         ) as cluster:
        tps = cluster.create_topic("embedded", partitions, 3)
        producer = cluster.producer(acks=ACKS_ALL, max_in_flight=64)
        for f in [producer.send_encoded(tps[i % partitions], template) for i in range(64)]:
            f.result()
        cpu = cpu_seconds() or 0.0
        start = time.perf_counter()
        futures = [producer.send_encoded(tps[i % partitions], template) for i in range(batches)]
        for f in futures:
            f.result()
        elapsed = time.perf_counter() - start
        used = (cpu_seconds() or 0.0) - cpu
        producer.close()
    return elapsed * count / (batches * batch), used


def raw_loopback(total: int) -> float:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    received = [0]

    def receive() -> None:
        conn, _ = listener.accept()
        buf = bytearray(1 << 20)
        view = memoryview(buf)
        while True:
            n = conn.recv_into(view)
            if not n:
                break
            received[0] += n
        conn.close()

    reader = threading.Thread(target=receive)
    reader.start()
    chunk = os.urandom(1 << 20)
    with socket.create_connection(listener.getsockname()) as sender:
        start = time.perf_counter()
        sent = 0
        while sent < total:
            piece = chunk[:min(len(chunk), total - sent)]
            sender.sendall(piece)
            sent += len(piece)
    reader.join()
    elapsed = time.perf_counter() - start
    listener.close()
    assert received[0] == total
    return elapsed


def latency(bootstrap: str, topic: str, rate: int, seconds: float) -> list[float]:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 0})
    value = os.urandom(VALUE_SIZE)
    samples: list[float] = []

    def on_delivery(sent: float):  # noqa: ANN202
        def delivered(err: object, _msg: object) -> None:
            if err is None:
                samples.append(time.perf_counter() - sent)
        return delivered

    # The producer's start (metadata, InitProducerId, the connection to the leader) comes
    # first: a steady rate is measured, not the backlog of the first second.
    producer.produce(topic, value=value)
    if producer.flush(60):
        raise SystemExit("latency run: the warm-up message was not delivered")
    count = int(rate * seconds)
    start = time.perf_counter()
    for i in range(count):
        due = start + i / rate
        while (now := time.perf_counter()) < due:
            producer.poll(min(0.001, due - now))
        producer.produce(topic, value=value, on_delivery=on_delivery(time.perf_counter()))
        producer.poll(0)
    producer.flush(60)
    return sorted(samples)


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def idle_connections(ports: list[int], per_broker: int) -> list[socket.socket]:
    """``per_broker`` connections to each port, each having sent ApiVersions v0 and read the
    answer: clients that connected and then went quiet."""
    sockets = []
    for port in ports:
        for i in range(per_broker):
            s = socket.create_connection(("127.0.0.1", port))
            body = struct.pack(">hhih", 18, 0, i, 5) + b"bench"
            s.sendall(struct.pack(">i", len(body)) + body)
            sockets.append(s)
    for s in sockets:
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        s.recv(size, socket.MSG_WAITALL)
    return sockets


def percentile(samples: list[float], q: float) -> float:
    return samples[min(len(samples) - 1, int(len(samples) * q))] if samples else float("nan")


def data_path(bootstrap: str, pids: list[int], args: argparse.Namespace) -> dict:
    """The produce, consume and latency phases against the cluster at ``bootstrap`` whose
    broker processes are ``pids``: each row's seconds, brokers' and machine's CPU seconds."""
    conf = {"bootstrap.servers": bootstrap}
    rows: dict = {}

    def timed(name: str, run, mb: float) -> object:  # noqa: ANN001
        cpu, machine = BrokersCpu(pids), MachineCpu()
        result = run()
        rows[name] = (result, cpu.used(), machine.used(), mb)
        return result

    mb = args.messages * VALUE_SIZE / 1e6
    print(f"producing to {bootstrap}", flush=True)
    create_topic(conf, "bench-produce", args.partitions)
    timed("produce", lambda: produce(bootstrap, "bench-produce", args.messages,
                                      args.partitions), mb)
    create_topic(conf, "bench-small", args.partitions)
    timed("produce-100", lambda: produce(bootstrap, "bench-small", args.messages,
                                         args.partitions, 100), args.messages * 100 / 1e6)
    create_topic(conf, "bench-lz4", args.partitions)
    timed("produce-lz4", lambda: produce(bootstrap, "bench-lz4", args.messages, args.partitions,
                                         compression_type="lz4"), mb)
    print("consuming", flush=True)
    client = cpu_seconds() or 0.0
    timed("consume", lambda: consume(bootstrap, "bench-produce", args.messages,
                                     args.partitions), mb)
    rows["consumer-cpu"] = (cpu_seconds() or 0.0) - client
    timed("consume-tuned", lambda: consume(bootstrap, "bench-produce", args.messages,
                                           args.partitions, fetch_queue_backoff_ms=10), mb)
    create_topic(conf, "bench-latency", 1)
    for rate in args.rate:
        print(f"latency run: {rate}/s for {args.seconds:g}s", flush=True)
        timed(f"latency-{rate}", lambda rate=rate: latency(bootstrap, "bench-latency", rate,
                                                          args.seconds),
              rate * args.seconds * VALUE_SIZE / 1e6)
    return rows


def print_data_path(rows: dict, args: argparse.Namespace) -> None:
    print(f"{'phase':46} {'seconds':>8} {'MB/s':>8} {'msgs/s':>9} {'brk CPU':>8} "
          f"{'CPU s/MB':>9} {'machine s/MB':>12}")
    names = [("produce", "produce 1 KiB acks=all, idempotent"),
             ("produce-100", "produce 100 B acks=all, idempotent"),
             ("produce-lz4", "produce 1 KiB lz4 acks=all, idempotent"),
             ("consume", "consume 1 KiB (assign, from the beginning)"),
             ("consume-tuned", "consume, fetch.queue.backoff.ms=10")]
    for key, name in names:
        result, cpu, machine, mb = rows[key]
        took = result if isinstance(result, float) else result[0]
        print(f"{name:46} {took:8.2f} {mb / took:8.1f} {args.messages / took:9.0f} {cpu:8.2f} "
              f"{cpu / mb:9.4f} {machine / mb:12.4f}")
        if key.startswith("consume"):
            print(f"{'  the same, from its first message':46} {result[1]:8.2f} "
                  f"{mb / result[1]:8.1f} {args.messages / result[1]:9.0f}")
    for rate in args.rate:
        samples, cpu, machine, mb = rows[f"latency-{rate}"]
        if samples:
            print(f"produce latency, acks=all, linger.ms 0, {rate}/s for {args.seconds:g}s: "
                  f"p50 {percentile(samples, 0.5) * 1000:.2f} ms, p99 "
                  f"{percentile(samples, 0.99) * 1000:.2f} ms, p99.9 "
                  f"{percentile(samples, 0.999) * 1000:.2f} ms, max {samples[-1] * 1000:.1f} ms "
                  f"({len(samples)} delivered, brokers CPU {cpu:.2f} s, machine {machine:.2f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--embedded-batch", type=int, default=64,
                        help="records per batch of the embedded producer")
    parser.add_argument("--rate", type=int, nargs="+", default=[1_000, 10_000],
                        help="latency runs, messages/s")
    parser.add_argument("--seconds", type=float, default=10.0, help="latency run length")
    parser.add_argument("--memory-partitions", type=int, default=1_000)
    parser.add_argument("--idle-connections", type=int, default=100, help="per broker")
    parser.add_argument("--data-only", action="store_true",
                        help="produce, consume and latency only")
    parser.add_argument("--bootstrap", help="a running cluster's bootstrap servers: measure "
                        "the data path there (implies --data-only)")
    parser.add_argument("--broker-pids", default="",
                        help="with --bootstrap: its broker processes, comma-separated")
    add_server_options(parser)
    args = parser.parse_args()
    try:
        import confluent_kafka
    except ImportError:
        raise SystemExit("needs confluent-kafka: pip install -e '.[test]'") from None
    header = (f"confluent-kafka {confluent_kafka.version()[0]} (librdkafka "
              f"{confluent_kafka.libversion()[0]}), {args.messages} values, {args.partitions} "
              "partitions, RF 3, min ISR 2")
    if args.bootstrap:
        pids = [int(p) for p in args.broker_pids.split(",") if p]
        rows = data_path(args.bootstrap, pids, args)
        print(f"\nthe cluster at {args.bootstrap}, {header}")
        print_data_path(rows, args)
        return

    zk = start_server("zookeeper", args)
    directory = Path(tempfile.mkdtemp(prefix="partctl-network-"))
    brokers = []
    mb = args.messages * VALUE_SIZE / 1e6
    rss: list[float] = []
    try:
        brokers = start_brokers(directory, zk.url("/bench"))
        pids = [b.pid for b in brokers]
        bootstrap = ",".join(b.bootstrap for b in brokers)
        print(f"3 brokers up ({bootstrap}, pids {pids})", flush=True)
        rows = data_path(bootstrap, pids, args)
        if not args.data_only:
            print(f"memory: {args.memory_partitions} partitions, {args.idle_connections} idle "
                  "connections per broker", flush=True)
            create_topic({"bootstrap.servers": bootstrap}, "bench-memory",
                         args.memory_partitions)
            idle = idle_connections([b.port for b in brokers], args.idle_connections)
            time.sleep(5)
            rss = [rss_mib(pid) for pid in pids]
            for s in idle:
                s.close()
    finally:
        for broker in brokers:
            broker.signal(15)
        for broker in brokers:
            try:
                broker.wait(120)
            except Exception:  # noqa: BLE001 - whatever happened, nothing is left running
                broker.kill()
        zk.stop()
        shutil.rmtree(directory, ignore_errors=True)

    print(f"\n3 partctl broker processes, {header}")
    print(server_label(args))
    print_data_path(rows, args)
    if args.data_only:
        return
    print("embedded cluster and raw loopback", flush=True)
    embedded_s, embedded_cpu = embedded(args.messages, args.partitions, args.embedded_batch)
    raw = raw_loopback(args.messages * VALUE_SIZE)
    produced = rows["produce"][0]
    consumed, streaming = rows["consume"][0]
    tuned, tuned_streaming = rows["consume-tuned"][0]
    for name, took, used in [("produce acks=all (embedded, in process)", embedded_s,
                              embedded_cpu),
                             ("raw loopback socket, one connection", raw, None)]:
        cpu_text = f"{used:8.2f} process" if used is not None else f"{'-':>8}"
        print(f"{name:46} {took:8.2f} {mb / took:8.1f} {args.messages / took:9.0f} {cpu_text}")
    print(f"network produce / embedded produce: {embedded_s / produced:.2f} (target >= 0.5)")
    print(f"consume / network produce:          {produced / consumed:.2f} (target >= 1.0); "
          f"from the first message {produced / streaming:.2f}")
    print(f"consume / raw loopback:             {raw / consumed:.2f} (target >= 0.25); from the "
          f"first message {raw / streaming:.2f}; with fetch.queue.backoff.ms=10 "
          f"{raw / tuned:.2f}, from its first message {raw / tuned_streaming:.2f}; the "
          f"consumer (librdkafka and this Python loop) used {rows['consumer-cpu']:.2f} s of "
          f"CPU, the brokers {rows['consume'][1]:.2f} s")
    print(f"broker RSS with {args.memory_partitions} partitions (RF 3) and "
          f"{args.idle_connections} idle connections each: "
          + ", ".join(f"{r:.0f}" for r in rss) + " MiB (target <= 300)")


if __name__ == "__main__":
    main()
