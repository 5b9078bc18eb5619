"""A broker process SIGKILLed in the middle of copying a segment to remote storage (KIP-405),
on the filesystem store and on S3 (moto's server): the half-copied segment is never visible
(no reader is served from it, no record is missing or doubled), and once the broker is back
it copies the segment again and deletes the half copy, its metadata and its objects, so no
orphan is left in the store."""

from __future__ import annotations

import re
import time
from pathlib import Path

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from broker.cluster import BrokerStartError, LaunchedBroker
from broker.cluster import start_broker as launch_and_wait
from tests.broker.processes import TEST_SETTINGS, coordinator_url
from tests.broker.stalling_storage import S3_ENDPOINT, STALL_DIR
from tests.replication.s3_server import s3_endpoint, s3_url  # noqa: F401 (fixtures)
from tests.servers import Server
from tests.waiting import wait_until

from .test_tiered_processes import TOPIC, list_offsets_at

pytestmark = pytest.mark.servers

SEGMENT = 3000
# The data objects of a remote segment: <start offset>-<segment id>.<extension>
OBJECT = re.compile(r"(\d{20})-([0-9a-f-]{36})\.([a-z_]+)$")


class Store:
    """The remote store's data objects (not its metadata), by segment."""

    def __init__(self, url: str, endpoint: str | None) -> None:
        self.url = url
        self.endpoint = endpoint

    def names(self) -> list[str]:
        if self.url.startswith("file://"):
            root = Path(self.url[len("file://"):])
            return [str(p) for p in root.rglob("*")
                    if p.is_file() and "__remote_log_metadata" not in p.parts]
        import boto3

        bucket, _, prefix = self.url[len("s3://"):].partition("/")
        client = boto3.client("s3", endpoint_url=self.endpoint)
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return [o["Key"] for page in pages for o in page.get("Contents", ())
                if "__remote_log_metadata" not in o["Key"]]

    def segments(self) -> dict[str, set[str]]:
        """segment id -> the extensions stored for it (temporary files as ``<ext>.tmp``)."""
        out: dict[str, set[str]] = {}
        for name in self.names():
            tmp = name.endswith(".tmp")
            found = OBJECT.search(name.removesuffix(".tmp"))
            if found:
                out.setdefault(found.group(2), set()).add(found.group(3) + (".tmp" if tmp else ""))
        return out


@pytest.fixture(params=["file", pytest.param("s3", marks=pytest.mark.long)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    """On S3 in the long tier (tests/conftest.py); every run has the S3 store's own tests
    (tests/replication/test_tiered_s3.py) and this kill on the filesystem store."""
    if request.param == "file":
        return Store(f"file://{tmp_path}/remote", None)
    endpoint = request.getfixturevalue("s3_endpoint")
    return Store(request.getfixturevalue("s3_url"), endpoint)


@pytest.fixture
def stall_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store: Store) -> Path:
    directory = tmp_path / "stall"
    directory.mkdir()
    monkeypatch.setenv(STALL_DIR, str(directory))  # the broker processes inherit these
    if store.endpoint:
        monkeypatch.setenv(S3_ENDPOINT, store.endpoint)
    return directory


def start(tmp_path: Path, url: str, store: Store) -> LaunchedBroker:
    settings = (TEST_SETTINGS + "remote.log.storage.system.enable=true\n"
                f"remote.log.storage.url={store.url}\n"
                "remote.log.storage.manager.class.name="
                "tests.broker.stalling_storage:StallingStorage\n"
                "remote.log.manager.task.interval.ms=200\n"
                "log.retention.check.interval.ms=200\n"
                "zookeeper.session.timeout.ms=4000\n")
    if store.endpoint:
        settings += f"remote.log.storage.s3.endpoint={store.endpoint}\n"
    deadline = time.monotonic() + 60
    while True:
        try:
            return launch_and_wait(tmp_path / "broker-1", 1, url, extra=settings)
        except BrokerStartError as exc:
            # The killed incarnation's session lives on until it times out.
            if "already registered" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@pytest.fixture
def broker_url(zookeeper_server: Server) -> str:
    return coordinator_url(zookeeper_server)


def produce(bootstrap: str, values: list[bytes]) -> None:
    producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                            "batch.num.messages": 4})
    failed: list[object] = []
    for value in values:
        producer.produce(TOPIC, value=value,
                         on_delivery=lambda e, _m: failed.append(e) if e else None)
        producer.poll(0)
    assert producer.flush(30) == 0 and failed == []


def consume_all(bootstrap: str, expect: int) -> list[tuple[int, bytes | None]]:
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                            "enable.auto.commit": False})
    consumer.assign([ck.TopicPartition(TOPIC, 0, ck.OFFSET_BEGINNING)])
    got: list[tuple[int, bytes | None]] = []
    # a deadline, not a wait: the loop ends when every record is in. Remote reads go through
    # the S3 server in this process, slow when the machine is busy (a full run: 60 s were
    # once not enough to read 200 records)
    deadline = time.monotonic() + 180
    try:
        while len(got) < expect and time.monotonic() < deadline:
            for msg in consumer.consume(100, 0.5):
                assert msg.error() is None, msg.error()
                got.append((msg.offset(), msg.value()))
        for msg in consumer.consume(100, 1.0):  # nothing more: no record twice
            got.append((msg.offset(), msg.value()))
    finally:
        consumer.close()
    return got


def test_a_broker_killed_mid_copy_leaves_no_visible_orphan(
        tmp_path: Path, broker_url: str, store: Store, stall_dir: Path) -> None:
    broker = start(tmp_path, broker_url, store)
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        config = {"remote.storage.enable": "true", "segment.bytes": str(SEGMENT),
                  "local.retention.bytes": "0"}
        assert admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=1,
                                             config=config)])[TOPIC].result(30) is None
        first = [b"first %04d " % i + bytes([i % 251]) * 90 for i in range(100)]
        produce(broker.bootstrap, first)
        wait_until(lambda: list_offsets_at(broker, 9, [-4])[0][0] > 50, timeout=60,
                   message="the first segments copied and gone from local disk")
        copied_before = {s for s, exts in store.segments().items() if "log" in exts}

        # The next copy stalls before its commit point; the broker is killed there.
        (stall_dir / "stall").touch()
        more = [b"more %04d " % i + bytes([i % 13]) * 90 for i in range(100)]
        produce(broker.bootstrap, more)
        wait_until(lambda: (stall_dir / "stalled").exists(), timeout=60,
                   message="a copy stalled midway")
        broker.kill()
        half = {s: exts for s, exts in store.segments().items() if "log" not in exts}
        assert len(half) == 1, store.segments()
        (orphan, parts), = half.items()
        assert "index" in parts  # part of it is in the store under its final name

        (stall_dir / "stall").unlink()
        broker = start(tmp_path, broker_url, store)
        # Nothing of the half copy is served: every record once, in order, from offset 0.
        got = consume_all(broker.bootstrap, len(first) + len(more))
        assert [o for o, _v in got] == list(range(len(first) + len(more)))
        assert [v for _o, v in got] == first + more
        # The broker copies the segment again and deletes the half copy: no orphan is left.
        wait_until(lambda: orphan not in store.segments(), timeout=60,
                   message="the half copy deleted")
        assert all("log" in exts and not any(e.endswith(".tmp") for e in exts)
                   for exts in store.segments().values()), store.segments()
        assert copied_before <= set(store.segments())
        log = broker.log()
        assert f"(an unfinished copy): {orphan}" in log, log[-3000:]
    finally:
        broker.stop()
