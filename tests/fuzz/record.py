"""``python -m tests.fuzz.record``: make the recorded corpus again. A broker (on a ZooKeeper
this command starts) advertises a recording proxy as its address, so that every connection
the clients open passes through it; confluent-kafka (librdkafka) and kafka-python then
produce, consume in a group (join, sync, heartbeat, commit, fetch offsets, leave) and make
admin calls (create, describe and delete topics, describe and alter configs, add partitions,
list and describe groups, ACLs, SCRAM credentials, the cluster). What each client sent is
written as one raw byte stream per client under ``tests/fuzz/corpus/`` (size-prefixed
frames, as on the wire), keeping a few requests per (api key, version) so that the corpus
stays small (tens of KB).

The corpus is kept in the repository rather than recorded at every fuzzing run: recording
takes a minute of client time, and a fixed corpus keeps a seed's run reproducible.
"""

from __future__ import annotations

import collections
import contextlib
import socket
import struct
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from coordinator.servers import free_port, start_zookeeper

from .seeds import CORPUS, read_stream
from .target import TOPIC, start_target

PER_VERSION = 3
"""Requests kept per (api key, version) and client."""
MAX_FRAME = 16 << 10


class RecordingProxy:
    """127.0.0.1:``port`` forwarded to ``target``; what clients send is kept per
    connection, under the label in force when the connection opened."""

    def __init__(self, port: int, target: tuple[str, int]) -> None:
        self.target = target
        self.label = "none"
        self.streams: list[tuple[str, bytearray]] = []
        self._listener = socket.create_server(("127.0.0.1", port))
        self._listener.settimeout(0.2)
        self._running = True
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while self._running:
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            upstream = socket.create_connection(self.target, timeout=5)
            upstream.settimeout(None)
            client.settimeout(None)
            stream = bytearray()
            self.streams.append((self.label, stream))
            threading.Thread(target=self._pipe, args=(client, upstream, stream),
                             daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, None),
                             daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket, keep: bytearray | None) -> None:
        try:
            while data := src.recv(65536):
                if keep is not None:
                    keep += data
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._running = False
        self._listener.close()


def _confluent(bootstrap: str) -> None:
    import confluent_kafka as ck
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    def wait(futures: dict) -> None:
        for future in futures.values():
            with contextlib.suppress(Exception):
                future.result(timeout=20)

    admin = AdminClient({"bootstrap.servers": bootstrap})
    name = f"fuzz-admin-{uuid.uuid4().hex[:6]}"
    wait(admin.create_topics([NewTopic(name, 1, 1, config={"retention.ms": "60000"})]))
    admin.list_topics(timeout=10)
    wait(admin.describe_configs([ConfigResource("topic", name), ConfigResource("broker", "1")]))
    wait(admin.incremental_alter_configs([ConfigResource(
        "topic", name, incremental_configs=[ConfigEntry(
            "retention.ms", "120000", incremental_operation=AlterConfigOpType.SET)])]))
    wait(admin.alter_configs([ConfigResource("topic", name,
                                             set_config={"retention.ms": "90000"})]))
    wait(admin.create_partitions([NewPartitions(name, 2)]))
    with contextlib.suppress(Exception):
        admin.describe_cluster().result(timeout=10)
    binding = AclBinding(ResourceType.TOPIC, name, ResourcePatternType.LITERAL, "User:fuzz",
                         "*", AclOperation.READ, AclPermissionType.ALLOW)
    wait(admin.create_acls([binding]))
    with contextlib.suppress(Exception):
        admin.describe_acls(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY,
                                             None, None, AclOperation.ANY,
                                             AclPermissionType.ANY)).result(timeout=10)
    producer = ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                            "linger.ms": 5})
    for i in range(20):
        producer.produce(TOPIC, key=f"k{i}".encode(), value=f"value {i}".encode())
    producer.flush(20)
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "fuzz-confluent",
                            "auto.offset.reset": "earliest", "enable.auto.commit": False,
                            "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    consumer.subscribe([TOPIC])
    got = 0
    deadline = time.monotonic() + 30
    while got < 20 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got += 1
            if got % 5 == 0:
                consumer.commit(msg, asynchronous=False)
    consumer.committed([ck.TopicPartition(TOPIC, 0)], timeout=10)
    time.sleep(1.5)  # heartbeats
    consumer.close()
    with contextlib.suppress(Exception):
        admin.list_consumer_groups().result(timeout=10)
    wait(admin.describe_consumer_groups(["fuzz-confluent"]))
    wait(admin.delete_consumer_groups(["fuzz-confluent"]))
    wait(admin.delete_topics([name]))


def _kafka_python(bootstrap: str) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20000)
    name = f"fuzz-kp-{uuid.uuid4().hex[:6]}"
    for call in (
        lambda: admin.create_topics([NewTopic(name, 1, 1)]),
        lambda: admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name),
                                        ConfigResource(ConfigResourceType.BROKER, "1")]),
        lambda: admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name,
                                                    configs={"retention.ms": "90000"})]),
        lambda: admin.create_partitions({name: NewPartitions(2)}),
        lambda: admin.describe_cluster(),
        lambda: admin.list_topics(),
        lambda: admin.describe_topics([name]),
    ):
        with contextlib.suppress(Exception):
            call()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    for i in range(20):
        producer.send(TOPIC, key=f"k{i}".encode(), value=f"kp value {i}".encode())
    producer.flush(20)
    producer.close()
    consumer = KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id="fuzz-kafka-python",
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             session_timeout_ms=6000, heartbeat_interval_ms=500)
    got = 0
    deadline = time.monotonic() + 30
    while got < 20 and time.monotonic() < deadline:
        for records in consumer.poll(500).values():
            got += len(records)
        if got:
            consumer.commit()
    consumer.committed(TopicPartition(TOPIC, 0))
    time.sleep(1.5)
    consumer.close()
    for call in (
        lambda: admin.list_consumer_groups(),
        lambda: admin.describe_consumer_groups(["fuzz-kafka-python"]),
        lambda: admin.list_consumer_group_offsets("fuzz-kafka-python"),
        lambda: admin.delete_consumer_groups(["fuzz-kafka-python"]),
        lambda: admin.delete_topics([name]),
    ):
        with contextlib.suppress(Exception):
            call()
    admin.close()


CLIENTS: dict[str, Callable[[str], None]] = {"confluent-kafka": _confluent,
                                             "kafka-python": _kafka_python}


def shrink(streams: list[bytes]) -> bytes:
    """The requests of ``streams``, at most :data:`PER_VERSION` per (api key, version) and
    none over :data:`MAX_FRAME`, as one size-prefixed stream."""
    kept: collections.Counter[tuple[int, int]] = collections.Counter()
    out = bytearray()
    for stream in streams:
        for body in read_stream(stream):
            if len(body) < 4 or len(body) > MAX_FRAME:
                continue
            key = struct.unpack_from(">hh", body)
            if kept[key] >= PER_VERSION:
                continue
            kept[key] += 1
            out += struct.pack(">i", len(body)) + body
    return bytes(out)


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="partctl-fuzz-record-"))
    server = start_zookeeper(directory=work / "zookeeper", fsync=False)
    port, broker_port = free_port(), free_port()
    proxy = RecordingProxy(port, ("127.0.0.1", broker_port))
    target = start_target(work / "broker", server.url("/"), port=broker_port,
                          extra=f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n")
    try:
        for label, client in CLIENTS.items():
            proxy.label = label
            client(f"127.0.0.1:{port}")
            time.sleep(0.5)
    finally:
        proxy.close()
        target.stop()
        server.stop()
    CORPUS.mkdir(exist_ok=True)
    for label in CLIENTS:
        data = shrink([bytes(s) for name, s in proxy.streams if name == label])
        (CORPUS / f"{label}.bin").write_bytes(data)
        print(f"{label}: {len(data)} bytes, {len(list(read_stream(data)))} requests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
