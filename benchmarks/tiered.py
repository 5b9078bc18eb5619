"""Tiered storage (KIP-405): copy throughput, remote vs local reads, and what a new replica
moves; prints numbers, asserts nothing.

    .venv/bin/python benchmarks/tiered.py [--copy-size 128M] [--size-mib 64]
                                          [--total-size 64M] [--local-size 8M]
                                          [--only copy|read|replica] [--dir DIR]

1. **Copy**: a tiered log of ``--copy-size`` bytes in ``--segment-size`` segments (batches of
   ``--batch-kib`` of 1 KiB records) built in this process; one pass of the remote log
   manager's copying (``RemoteLogManager.copy_log_segments`` as leader, HW at the log end) to
   the filesystem remote storage manager, with the file remote log metadata manager (each copy
   writes and fsyncs its COPY_SEGMENT_STARTED and COPY_SEGMENT_FINISHED events; the storage
   manager copies the .log, .index and .timeindex files and the leader-epoch checkpoint to
   temporary names, fsyncs each, renames them and fsyncs the directory). Against it, a raw copy
   of the same files of the same rolled segments with ``shutil.copyfile`` on the same disk,
   with an fsync of each file (as durable as the manager's copies) and without. The page cache
   is warm for both (the log was just written). ``--repeat`` runs of each, alternating; the
   best of each is shown. Ratio: raw (fsync) seconds / manager seconds.
2. **Read**: ZooKeeper and one ``partctl broker start`` process on loopback, with
   ``remote.log.storage.system.enable`` and a ``file://`` remote store in the run directory.
   Two one-partition topics get the same ``--size-mib`` MiB of ``--value-kib`` KiB values from
   one confluent-kafka producer: ``tiered`` (remote.storage.enable, local.retention.bytes 0:
   once copied, every rolled segment goes from local disk) and ``local`` (not tiered). A
   confluent-kafka consumer (assign() from offset 0, no group) reads each topic to its end;
   timed from the first message to the last, which leaves out librdkafka's start-up. The
   share of the tiered topic read from remote storage is printed (all but its active
   segment). The filesystem store's reads are slices of the remote files sent with sendfile,
   as local reads are. Ratio: local seconds / remote seconds (higher is better, 1.0 = as
   fast).
3. **Replica**: a second broker process joins; a one-replica tiered topic on broker 1 with
   ``--total-size`` bytes produced and ``local.retention.bytes`` = ``--local-size`` (segments
   of ``--local-size``/4) is reassigned to brokers 1 and 2 once broker 1's copies and local
   retention have settled. Printed: the total log size X (the remote segments below the
   leader's local log start + broker 1's local bytes), broker 1's local bytes Y, the bytes broker 2's replica holds once it is in the ISR
   (what it fetched and wrote: everything below the leader's local log start it took from
   remote storage as metadata, a leader-epoch checkpoint and a producer snapshot), and the
   seconds from the reassignment's submission to broker 2 in the ISR.

Progress goes to stderr every few seconds for long phases. The brokers write to a temporary
directory (or ``--dir``), flushed by the OS (Kafka's default); the two cores of this machine
are shared by the client, the broker(s) and ZooKeeper.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import MIB, add_server_options, make_batch, parse_size  # noqa: E402


def progress(text: str) -> None:
    print(f"  .. {text}", file=sys.stderr, flush=True)


def wait(what: str, ready: Callable[[], bool], timeout: float = 600,
         status: Callable[[], str] | None = None) -> None:
    deadline = time.monotonic() + timeout
    next_note = time.monotonic() + 5
    while not ready():
        if time.monotonic() > deadline:
            raise SystemExit(f"{what}: not done after {timeout:g} s")
        if time.monotonic() > next_note:
            progress(f"waiting for {what}" + (f" ({status()})" if status else ""))
            next_note = time.monotonic() + 5
        time.sleep(0.2)


# --- 1. copy --------------------------------------------------------------------------------------


def bench_copy(root: Path, size: int, segment: int, batch_kib: int, repeat: int) -> None:
    from coordinator.clock import SYSTEM_CLOCK
    from replication.log import Log, LogConfig
    from replication.tiered import (
        FileRemoteLogMetadataManager,
        FileSystemRemoteStorageManager,
        RemoteLogManager,
        TieredPartition,
        TopicIdPartition,
    )

    tp = TopicIdPartition(topic_id=uuid.uuid4(), topic="bench", partition=0)
    log = Log.open(root / "logs" / "bench-0",
                   config=LogConfig(segment_bytes=segment, remote_storage_enable=True,
                                    retention_ms=-1))
    template = make_batch(batch_kib, 1024 - 70)
    while log.size_bytes < size + segment // 2:
        log.append_as_leader(bytes(bytearray(template)), leader_epoch=0)
    log.flush()
    rolled = list(log.copy_candidates(0, log.log_end_offset))
    copied_bytes = sum(s.size for s in rolled)
    files = [p for s in rolled for p in (s.log_path, s.offset_index_path, s.time_index_path)]
    file_bytes = sum(p.stat().st_size for p in files)

    partition = TieredPartition(id=tp, log=log, is_leader=True, leader_epoch=0,
                                high_watermark=log.log_end_offset, still_leads=lambda e: True)

    def manager_copy(run: int) -> tuple[float, float, int]:
        remote = root / f"remote-{run}"
        rlm = RemoteLogManager(1, FileSystemRemoteStorageManager(remote),
                               FileRemoteLogMetadataManager(remote / "__remote_log_metadata"),
                               SYSTEM_CLOCK)
        begin = time.perf_counter()
        cpu = time.process_time()
        count = rlm.copy_log_segments(partition)
        seconds, cpu = time.perf_counter() - begin, time.process_time() - cpu
        rlm.close()
        shutil.rmtree(remote)
        return seconds, cpu, count

    def raw(run: int, sync: bool) -> float:
        target = root / f"raw-{run}-{'sync' if sync else 'nosync'}"
        target.mkdir()
        begin = time.perf_counter()
        for p in files:
            shutil.copyfile(p, target / p.name)
            if sync:
                fd = os.open(target / p.name, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        seconds = time.perf_counter() - begin
        shutil.rmtree(target)
        return seconds

    runs = []
    for run in range(repeat):  # alternating, so the disk's writeback hits each alike
        runs.append((manager_copy(run), raw(run, True), raw(run, False)))
        progress(f"copy run {run + 1} of {repeat}")
    manager_s, manager_cpu, count = min(r[0] for r in runs)
    raw_sync = min(r[1] for r in runs)
    raw_nosync = min(r[2] for r in runs)
    log.close()
    mb = file_bytes / 1e6
    print(f"\n1. copy of {count} rolled segments (best of {repeat} runs) ({copied_bytes / MIB:.1f} MiB of .log, "
          f"{file_bytes / MIB:.1f} MiB with indexes; segments of {segment / MIB:g} MiB)")
    print(f"   remote log manager -> filesystem RSM : {manager_s:7.3f} s  "
          f"{mb / manager_s:8.1f} MB/s  (CPU {manager_cpu:.3f} s; metadata events included)")
    print(f"   raw copyfile + fsync per file         : {raw_sync:7.3f} s  "
          f"{mb / raw_sync:8.1f} MB/s")
    print(f"   raw copyfile, no fsync                : {raw_nosync:7.3f} s  "
          f"{mb / raw_nosync:8.1f} MB/s")
    print(f"   ratio manager / raw (fsync) = {raw_sync / manager_s:.2f} (target >= 0.5); "
          f"manager / raw (no fsync) = {raw_nosync / manager_s:.2f}")


# --- 2 and 3: broker processes --------------------------------------------------------------------


def broker_settings(remote: Path) -> str:
    return ("remote.log.storage.system.enable=true\n"
            f"remote.log.storage.url=file://{remote}\n"
            "remote.log.manager.task.interval.ms=200\n"
            "log.retention.check.interval.ms=200\n"
            "replica.fetch.wait.max.ms=100\n"
            "controlled.shutdown.retry.backoff.ms=200\n")


def create(bootstrap: str, name: str, config: dict[str, str], replicas: list[int]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=1, replica_assignment=[replicas],
                                  config=config)], operation_timeout=60)[name].result(90)
    wait(f"a leader for {name}", lambda: leader_of(bootstrap, name) >= 0, 60)


def leader_of(bootstrap: str, name: str) -> int:
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(name, timeout=10)
    topic = md.topics.get(name)
    if topic is None or topic.error is not None or 0 not in topic.partitions:
        return -1
    return topic.partitions[0].leader


def produce(bootstrap: str, topics: list[str], size: int, value_size: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "batch.size": 1 << 20, "message.max.bytes": 4 << 20,
                         "queue.buffering.max.kbytes": 256 * 1024})
    value = os.urandom(value_size)
    failed: list[object] = []
    count = max(size // value_size, 1)
    next_note = time.monotonic() + 5
    for i in range(count):
        for topic in topics:
            while True:
                try:
                    producer.produce(topic, value=value, partition=0,
                                     on_delivery=lambda e, _m: failed.append(e) if e else None)
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.poll(0)
        if time.monotonic() > next_note:
            progress(f"produced {i * value_size / MIB:.0f} of {size / MIB:.0f} MiB to "
                     f"{', '.join(topics)}")
            next_note = time.monotonic() + 5
    if producer.flush(600) or failed:
        raise SystemExit(f"produce failed: {failed[:3]}")


def consume(bootstrap: str, topic: str, end: int) -> tuple[float, int]:
    """(seconds from the first message to the last, value bytes) reading ``topic`` from 0."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench",
                         "enable.auto.commit": False, "fetch.max.bytes": 50 * MIB,
                         "max.partition.fetch.bytes": 8 * MIB,
                         "fetch.queue.backoff.ms": 10})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = 0
    value_bytes = 0
    first = None
    deadline = time.monotonic() + 900
    next_note = time.monotonic() + 5
    last = -1
    while last < end - 1 and time.monotonic() < deadline:
        for msg in consumer.consume(1_000, 0.2):
            if msg.error() is None:
                if first is None:
                    first = time.perf_counter()
                got += 1
                value_bytes += len(msg.value() or b"")
                last = msg.offset()
        if time.monotonic() > next_note:
            progress(f"{topic}: read {value_bytes / MIB:.0f} MiB")
            next_note = time.monotonic() + 5
    finish = time.perf_counter()
    consumer.close()
    if last < end - 1 or first is None:
        raise SystemExit(f"{topic}: consumed up to {last} of {end}")
    return finish - first, value_bytes


def offsets(address: tuple[str, int], topic: str, specs: list[int]) -> list[int]:
    from coordinator.codecs import TopicPartition
    from kafkaclient.groups import GroupAdmin

    with GroupAdmin([address], timeout=10) as admin:
        tp = TopicPartition(topic, 0)
        return [admin.offsets([tp], spec).get(tp) or 0 for spec in specs]


def dir_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.glob("*.log")) if directory.exists() else 0


def remote_bytes(remote: Path, topic: str, below: int | None = None) -> int:
    """The bytes of ``topic``'s remote .log files (named ``<start offset>-<id>.log``), those
    starting below offset ``below`` only if given."""
    return sum(p.stat().st_size for p in remote.glob(f"{topic}-*/**/*.log")
               if below is None or int(p.name.split("-", 1)[0]) < below)


def bench_read(root: Path, brokers: dict, size: int, value_size: int, segment: int) -> None:
    b1 = brokers[1]
    create(b1.bootstrap, "tiered", {"remote.storage.enable": "true",
                                    "segment.bytes": str(segment),
                                    "local.retention.bytes": "0"}, [1])
    create(b1.bootstrap, "local", {"segment.bytes": str(segment)}, [1])
    start = time.perf_counter()
    produce(b1.bootstrap, ["tiered", "local"], size, value_size)
    progress(f"produced 2 x {size / MIB:.0f} MiB in {time.perf_counter() - start:.1f} s")
    tiered_dir = b1.directory / "logs" / "tiered-0"
    wait("the tiered topic's rolled segments copied and gone from local disk",
         lambda: len(list(tiered_dir.glob("*.log"))) == 1, 900,
         lambda: f"{len(list(tiered_dir.glob('*.log')))} local segments")
    earliest, local_start, end = offsets(b1.address, "tiered", [-2, -4, -1])
    local_end, = offsets(b1.address, "local", [-1])
    remote_seconds, remote_value = consume(b1.bootstrap, "tiered", end)
    local_seconds, local_value = consume(b1.bootstrap, "local", local_end)
    share = (local_start - earliest) / max(end - earliest, 1)
    print(f"\n2. a consumer reading {size / MIB:.0f} MiB of {value_size // 1024} KiB values "
          f"from offset 0 (one broker process, one partition, first message to last)")
    print(f"   tiered topic ({share:.0%} of offsets from remote storage, "
          f"{remote_bytes(root / 'remote', 'tiered') / MIB:.1f} MiB remote): "
          f"{remote_seconds:7.2f} s {remote_value / 1e6 / remote_seconds:8.1f} MB/s")
    print(f"   local topic                                      : "
          f"{local_seconds:7.2f} s {local_value / 1e6 / local_seconds:8.1f} MB/s")
    print(f"   ratio remote / local = {local_seconds / remote_seconds:.2f} (target >= 0.5)")


def bench_replica(root: Path, brokers: dict, url: str, total: int, local: int,
                  value_size: int) -> None:
    import coordinator
    from broker.cluster import start_broker
    from coordinator.admin import Admin
    from coordinator.codecs import TopicPartition
    from coordinator.metadata import MetadataClient

    b1 = brokers[1]
    segment = max(local // 4, 64 * 1024)
    create(b1.bootstrap, "moved", {"remote.storage.enable": "true",
                                   "segment.bytes": str(segment),
                                   "local.retention.bytes": str(local)}, [1])
    produce(b1.bootstrap, ["moved"], total, value_size)
    moved_dir = b1.directory / "logs" / "moved-0"
    wait("broker 1's copies and local retention to settle",
         lambda: dir_bytes(moved_dir) <= local + segment
         and offsets(b1.address, "moved", [-5])[0] >= offsets(b1.address, "moved", [-4])[0] - 1,
         900, lambda: f"{dir_bytes(moved_dir) / MIB:.1f} MiB local")
    local_bytes = dir_bytes(moved_dir)
    local_start, = offsets(b1.address, "moved", [-4])
    only_remote = remote_bytes(root / "remote", "moved", below=local_start)
    in_remote = remote_bytes(root / "remote", "moved")
    brokers[2] = start_broker(root / "broker-2", 2, url, extra=broker_settings(root / "remote"))
    tp = TopicPartition("moved", 0)
    client = coordinator.connect(url, timeout=10)
    try:
        start = time.perf_counter()
        Admin(client).reassign({tp: [1, 2]})

        def joined() -> bool:
            state = MetadataClient(client).partition_states([tp]).get(tp)
            return state is not None and 2 in state.value.isr
        wait("broker 2 in the ISR", joined, 600,
             lambda: f"{dir_bytes(root / 'broker-2' / 'logs' / 'moved-0') / MIB:.1f} MiB "
                     "on broker 2")
        seconds = time.perf_counter() - start
    finally:
        client.close()
    moved = dir_bytes(root / "broker-2" / "logs" / "moved-0")
    x = only_remote + local_bytes
    print(f"\n3. a new replica of a tiered partition (segments of {segment / MIB:g} MiB, "
          f"local.retention.bytes {local / MIB:g} MiB)")
    print(f"   total log X = {x / MIB:8.1f} MiB ({only_remote / MIB:.1f} MiB only in remote "
          f"storage + Y = {local_bytes / MIB:.1f} MiB local on the leader; "
          f"{in_remote / MIB:.1f} MiB remote in all)")
    print(f"   moved to the new replica = {moved / MIB:8.1f} MiB ({moved / max(x, 1):.1%} of X); "
          f"in the ISR {seconds:.1f} s after the reassignment was submitted")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copy-size", type=parse_size, default=128 * MIB)
    parser.add_argument("--segment-size", type=parse_size, default=16 * MIB)
    parser.add_argument("--batch-kib", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3, help="copy runs (the best is shown)")
    parser.add_argument("--size-mib", type=int, default=64,
                        help="MiB a consumer reads from each tier (the issue's figure: 1024)")
    parser.add_argument("--value-kib", type=int, default=16)
    parser.add_argument("--total-size", type=parse_size, default=64 * MIB)
    parser.add_argument("--local-size", type=parse_size, default=8 * MIB)
    parser.add_argument("--only", choices=("copy", "read", "replica"))
    parser.add_argument("--dir", type=Path, help="work directory (default: a temporary one)")
    add_server_options(parser)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="partctl-tiered-", dir=args.dir))
    try:
        if args.only in (None, "copy"):
            bench_copy(root / "copy", args.copy_size, args.segment_size, args.batch_kib,
                       args.repeat)
        if args.only in (None, "read", "replica"):
            run_brokers(root / "cluster", args)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run_brokers(root: Path, args: argparse.Namespace) -> None:
    from benchmarks.common import start_server
    from broker.cluster import start_broker, stop_brokers

    root.mkdir(parents=True)
    server = start_server("zookeeper", args)
    brokers: dict = {}
    try:
        url = server.url("/tiered-bench")
        brokers[1] = start_broker(root / "broker-1", 1, url,
                                  extra=broker_settings(root / "remote"))
        if args.only in (None, "read"):
            bench_read(root, brokers, args.size_mib * MIB, args.value_kib * 1024,
                       args.segment_size)
        if args.only in (None, "replica"):
            bench_replica(root, brokers, url, args.total_size, args.local_size,
                          args.value_kib * 1024)
    finally:
        stop_brokers(list(brokers.values()), timeout=60)
        server.stop()


if __name__ == "__main__":
    main()
