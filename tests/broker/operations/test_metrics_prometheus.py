"""A real Prometheus server (Debian's ``prometheus``) scraping three broker processes' metrics
every second, asked through its HTTP API: one active controller in the cluster, bytes in that
grow while a producer writes, and under-replicated partitions that appear when a broker is
killed and go back to none once it is back in every ISR; and the garbage collector's families
(broker.garbage)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import confluent_kafka as ck
import pytest

from broker.cluster import LaunchedBroker
from tests.broker.data.test_cluster_clients import Trio, create, serving
from tests.broker.processes import coordinator_url
from tests.servers import free_port, unavailable
from tests.waiting import wait_until

pytestmark = pytest.mark.servers

SCRAPE_INTERVAL = "1s"
HOST = "127.0.0.1"


@dataclass
class MetricsTrio(Trio):
    """Brokers whose metrics are served on a port of their own, the same one after a
    restart (Prometheus's targets are fixed)."""

    metrics_ports: dict[int, int] = field(default_factory=dict)

    def start(self, broker_id: int, more: str = "") -> LaunchedBroker:
        port = self.metrics_ports.get(broker_id, 0)
        broker = super().start(broker_id, more + "zookeeper.session.timeout.ms=4000\n"
                                              f"metrics.listener=http://{HOST}:{port}\n")
        url = broker.metrics_url
        assert url is not None, broker.log()[-2000:]
        self.metrics_ports[broker_id] = urllib.parse.urlsplit(url).port or 0
        return broker


class Prometheus:
    """A Prometheus server on a free loopback port with its config and data in ``directory``,
    scraping ``targets``; stopped (and waited for) by :meth:`stop`."""

    def __init__(self, directory: Path, targets: list[str]) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            unavailable("prometheus is not installed (Debian's prometheus package)")
        directory.mkdir(parents=True, exist_ok=True)
        config = directory / "prometheus.yml"
        config.write_text(
            "global:\n"
            f"  scrape_interval: {SCRAPE_INTERVAL}\n"
            f"  scrape_timeout: {SCRAPE_INTERVAL}\n"
            "scrape_configs:\n"
            "  - job_name: partctl\n"
            f"    static_configs:\n      - targets: {json.dumps(targets)}\n")
        self.port = free_port()
        self.log_path = directory / "prometheus.log"
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [binary, f"--config.file={config}", f"--storage.tsdb.path={directory / 'data'}",
                 f"--web.listen-address={HOST}:{self.port}",
                 "--storage.tsdb.retention.time=1h", "--log.level=warn"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                cwd=directory)
        try:
            wait_until(self._ready, timeout=30, message="prometheus ready")
        except BaseException:
            self.stop()
            raise

    def _ready(self) -> bool:
        assert self.process.poll() is None, self.log_path.read_text(errors="replace")[-2000:]
        try:
            with urllib.request.urlopen(f"http://{HOST}:{self.port}/-/ready", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def query(self, expression: str) -> float | None:
        """The single value of an instant query; None when it has no result."""
        url = (f"http://{HOST}:{self.port}/api/v1/query?"
               + urllib.parse.urlencode({"query": expression}))
        with urllib.request.urlopen(url, timeout=10) as answer:
            body = json.load(answer)
        assert body["status"] == "success", body
        result = body["data"]["result"]
        if not result:
            return None
        assert len(result) == 1, result
        return float(result[0]["value"][1])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


@pytest.fixture
def trio(zookeeper_server, tmp_path: Path) -> Iterator[MetricsTrio]:  # noqa: ANN001
    with serving(MetricsTrio(coordinator_url(zookeeper_server), tmp_path / "brokers", {})
                 ) as cluster:
        yield cluster


@pytest.fixture
def prometheus(trio: MetricsTrio, tmp_path: Path) -> Iterator[Prometheus]:
    server = Prometheus(tmp_path / "prometheus",
                        [f"{HOST}:{port}" for _, port in sorted(trio.metrics_ports.items())])
    try:
        yield server
    finally:
        server.stop()


def produce(trio: MetricsTrio, topic: str, count: int) -> None:
    producer = ck.Producer({"bootstrap.servers": trio.bootstrap, "acks": "all",
                            "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, value=b"m" * 200, partition=i % 3)
    assert producer.flush(60) == 0


BYTES_IN = 'sum(kafka_server_brokertopicmetrics_bytesinpersec_total{topic="watched"})'
UNDER_REPLICATED = "sum(kafka_server_replicamanager_underreplicatedpartitions)"


def test_prometheus_sees_the_controller_the_bytes_in_and_under_replicated_partitions(
        trio: MetricsTrio, prometheus: Prometheus) -> None:
    create(trio, "watched", 3, num_partitions=3, replication_factor=3)
    wait_until(lambda: prometheus.query('count(up{job="partctl"} == 1)') == 3, timeout=30,
               message="prometheus scraping the three brokers")
    wait_until(lambda: prometheus.query(
        "sum(kafka_controller_kafkacontroller_activecontrollercount)") == 1, timeout=30,
        message="one active controller")
    assert prometheus.query(UNDER_REPLICATED) == 0
    # broker.garbage: each broker froze what it started with, and times the collector's passes
    assert (prometheus.query("min(partctl_gc_freezes_total)") or 0) >= 1
    assert prometheus.query('count(partctl_gc_pause_seconds_count{generation="2"})') == 3

    produce(trio, "watched", 300)
    wait_until(lambda: (prometheus.query(BYTES_IN) or 0) >= 300 * 200, timeout=30,
               message="the bytes produced counted")
    before = prometheus.query(BYTES_IN)
    assert before is not None
    produce(trio, "watched", 300)
    wait_until(lambda: (prometheus.query(BYTES_IN) or 0) >= before + 300 * 200, timeout=30,
               message="bytes in growing with the producer")

    victim = trio.brokers[3]
    victim.signal(signal.SIGKILL)
    assert victim.wait(30) == -signal.SIGKILL
    wait_until(lambda: (prometheus.query(UNDER_REPLICATED) or 0) > 0, timeout=40,
               message="under-replicated partitions once broker 3 is gone")
    trio.start(3)
    wait_until(lambda: prometheus.query('count(up{job="partctl"} == 1)') == 3, timeout=30,
               message="broker 3 scraped again")
    wait_until(lambda: prometheus.query(UNDER_REPLICATED) == 0, timeout=60,
               message="no under-replicated partition with broker 3 back")
    assert prometheus.query("sum(kafka_controller_kafkacontroller_activecontrollercount)") == 1
