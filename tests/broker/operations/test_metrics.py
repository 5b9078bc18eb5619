"""The metrics a broker serves on ``metrics.listener``, scraped over HTTP from a real server in
this process and read back with prometheus_client's own parser: Kafka's names, the counters
produce and fetch move, the gauges a scrape computes from the replica manager and the group
coordinator, and ``metrics.listener``'s checks."""

from __future__ import annotations

import dataclasses
import re
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode
from prometheus_client.parser import text_string_to_metric_families

from broker.cluster import LaunchedBroker
from broker.config import ConfigError, parse_config, parse_controller_config
from broker.groups import OFFSETS_TOPIC, GroupConfig
from broker.metrics import RequestTimes, TopicTraffic, record_count
from broker.metrics.collector import KafkaCollector
from broker.metrics.server import MetricsServer
from replication.records import Record, encode_batch
from replication.tiered import RemoteLogConfig, kafka_uuid_text
from tests.broker.controller.test_controller_network import start_controller
from tests.broker.data.test_follower_fetch import follower_fetch
from tests.broker.groups.test_group_apis import commit
from tests.broker.harness import InProcessBroker
from tests.broker.processes import REPO, coordinator_settings
from tests.broker.protocol.test_apis import fetch, only_partition, produce
from tests.broker.wire_client import RawClient
from tests.servers import Server
from tests.statemachines.conftest import tp
from tests.statemachines.test_topic_unclean import Brokers
from tests.waiting import wait_until

GROUPS = GroupConfig(offsets_topic_num_partitions=1, group_initial_rebalance_delay_ms=0)
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(url: str) -> Samples:
    """Every sample at ``url``: (name, sorted labels) -> value."""
    with urllib.request.urlopen(url, timeout=10) as answer:
        assert answer.headers["Content-Type"].startswith("text/plain")
        text = answer.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def answered(samples: Samples) -> dict[str, float]:
    """The requests counted as answered in ``samples``, by request metric name."""
    return {dict(labels)["request"]: value for (name, labels), value in samples.items()
            if name == "kafka_network_requestmetrics_requestspersec_total"}


def scrape_once_answered(url: str, **counts: int) -> Samples:
    """Scrape ``url`` once the broker has counted ``counts`` requests (by metric name) as
    answered. A request is counted after its response is written, as in Kafka (its total time
    includes the send), so a client can hold the answer a moment before the broker counts it."""
    return wait_until(lambda: (s := scrape(url)) and all(
        answered(s).get(name, 0) >= n for name, n in counts.items()) and s,
        timeout=10, message=f"the broker to count {counts} as answered")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[InProcessBroker, MetricsServer]]:
    """A broker in this process counting its traffic, its metrics served on a free port."""
    broker = InProcessBroker(tmp_path / "logs", min_insync_replicas=2)
    traffic, requests = TopicTraffic(), RequestTimes()
    broker.server.services = dataclasses.replace(broker.server.services, traffic=traffic)
    broker.server.request_times = requests
    collector = KafkaCollector(replica_manager=lambda: broker.replica_manager,
                               groups=lambda: broker.groups, loop=broker.loop,
                               traffic=traffic, requests=requests,
                               fetch_sessions=lambda: broker.fetch_sessions)
    metrics = MetricsServer(collector, "127.0.0.1", 0)
    try:
        yield broker, metrics
    finally:
        metrics.close()
        broker.close()


def batch(n: int) -> bytes:
    return encode_batch([Record(key=b"k%d" % i, value=b"v" * 50, timestamp=1_000 + i)
                         for i in range(n)])


def test_a_scrape_shows_kafkas_metrics_from_the_brokers_state(
        served: tuple[InProcessBroker, MetricsServer]) -> None:
    broker, metrics = served
    broker.set_partition("t", 0)  # led here, ISR full
    broker.set_partition("t", 1, replicas=(1, 2), isr=(1,))  # led here, under-replicated
    broker.set_partition("u", 0, leader=2, replicas=(2, 1))  # followed here
    sent = batch(7)
    with RawClient(broker.address) as client:
        client.call(produce(acks=1, data={("t", 0): sent}))
        client.call(produce(acks=1, data={("t", 1): batch(2)}))
        answer = client.call(fetch(partitions=[(0, 0)]))
    fetched = len(answer.responses[0].partitions[0].records)
    assert fetched == len(sent)

    samples = scrape_once_answered(metrics.url, Produce=2, FetchConsumer=1)
    assert metrics.url == f"http://127.0.0.1:{metrics.port}/metrics"
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"http://127.0.0.1:{metrics.port}/other", timeout=10)
    assert missing.value.code == 404
    at = {name: value for (name, labels), value in samples.items() if not labels}
    assert at["kafka_controller_kafkacontroller_activecontrollercount"] == 0
    assert at["kafka_server_replicamanager_partitioncount"] == 3
    assert at["kafka_server_replicamanager_leadercount"] == 2
    assert at["kafka_server_replicamanager_underreplicatedpartitions"] == 1
    # min.insync.replicas=2: t-1 (ISR 1) is under it, t-0 (ISR 1 of 1) too
    assert at["kafka_server_replicamanager_underminisrpartitioncount"] == 2
    topic_t = (("topic", "t"),)
    assert samples["kafka_server_brokertopicmetrics_bytesinpersec_total", topic_t] == \
        len(sent) + len(batch(2))
    assert samples["kafka_server_brokertopicmetrics_messagesinpersec_total", topic_t] == 9
    assert samples["kafka_server_brokertopicmetrics_bytesoutpersec_total", topic_t] == fetched
    t0 = (("partition", "0"), ("topic", "t"))
    assert samples["kafka_log_log_logendoffset", t0] == 7
    assert samples["kafka_log_log_logstartoffset", t0] == 0
    assert samples["kafka_log_log_size", t0] == len(sent)
    assert samples["kafka_log_log_logendoffset", (("partition", "0"), ("topic", "u"))] == 0
    produce_ = (("request", "Produce"),)
    assert samples["kafka_network_requestmetrics_requestspersec_total", produce_] == 2
    assert samples["kafka_network_requestmetrics_totaltimems_count", produce_] == 2
    assert samples["kafka_network_requestmetrics_totaltimems_bucket",
                   (("le", "+Inf"), ("request", "Produce"))] == 2
    assert samples["kafka_network_requestmetrics_totaltimems_sum", produce_] > 0
    assert samples["kafka_network_requestmetrics_requestspersec_total",
                   (("request", "FetchConsumer"),)] == 1

    # replica 2 fetches t-1 (at the HW, so it joins the ISR): Kafka counts followers' Fetch
    # requests apart from consumers', and none as "Fetch"
    with RawClient(broker.address) as client:
        replicated = only_partition(client.call(follower_fetch(replica_id=2, partition=1)))
    assert replicated.error_code == ErrorCode.none
    assert len(replicated.records) == len(batch(2))
    samples = scrape_once_answered(metrics.url, FetchFollower=1)
    requests = answered(samples)
    assert (requests["FetchConsumer"], requests["FetchFollower"]) == (1, 1)
    assert "Fetch" not in requests
    for request in ("FetchConsumer", "FetchFollower"):
        assert samples["kafka_network_requestmetrics_totaltimems_count",
                       (("request", request),)] == 1
    assert samples["kafka_server_brokertopicmetrics_replicationbytesoutpersec_total",
                   topic_t] == len(replicated.records)
    assert samples["kafka_server_brokertopicmetrics_bytesoutpersec_total", topic_t] == fetched
    assert samples["kafka_server_replicamanager_isrexpandspersec_total", ()] == 1
    assert samples["kafka_server_replicamanager_underreplicatedpartitions", ()] == 0


def test_the_fetch_session_cache_is_counted(served: tuple[InProcessBroker, MetricsServer]
                                            ) -> None:
    broker, metrics = served
    broker.set_partition("t", 0)
    broker.set_partition("t", 1)
    with RawClient(broker.address) as client:
        opened = client.call(fetch(partitions=[(0, 0), (1, 0)], session_epoch=0))
        assert opened.session_id != 0
        client.call(fetch(partitions=[(0, 0)], session_epoch=0))  # another consumer's
    samples = scrape_once_answered(metrics.url, FetchConsumer=2)
    at = {name: value for (name, labels), value in samples.items() if not labels}
    assert at["kafka_server_fetchsessioncache_numincrementalfetchsessions"] == 2
    assert at["kafka_server_fetchsessioncache_numincrementalfetchpartitionscached"] == 3
    assert at["kafka_server_fetchsessioncache_incrementalfetchsessionevictionspersec_total"] == 0


def test_consumer_lag_is_the_high_watermark_minus_the_committed_offset(
        tmp_path: Path) -> None:
    broker = InProcessBroker(tmp_path / "logs", groups=GROUPS)
    metrics = MetricsServer(KafkaCollector(replica_manager=lambda: broker.replica_manager,
                                           groups=lambda: broker.groups, loop=broker.loop),
                            "127.0.0.1", 0)
    try:
        for p in range(GROUPS.offsets_topic_num_partitions):
            broker.set_partition(OFFSETS_TOPIC, p)
        broker.set_partition("t", 0)
        with RawClient(broker.address) as client:
            client.call(produce(acks=1, data={("t", 0): batch(10)}))
            wait_until(lambda: commit(client, "g", {("t", 0): 4}) == {("t", 0): ErrorCode.none},
                       timeout=30, message="the offset committed")
        samples = scrape(metrics.url)
    finally:
        metrics.close()
        broker.close()
    row = (("consumergroup", "g"), ("partition", "0"), ("topic", "t"))
    assert samples["kafka_consumergroup_current_offset", row] == 4
    assert samples["kafka_consumergroup_lag", row] == 6


def test_an_answer_the_client_holds_is_counted_though_it_hangs_up_at_once(
        served: tuple[InProcessBroker, MetricsServer]) -> None:
    # a Fetch's records leave by sendfile: the client can read the whole answer and close
    # before the broker's writer resumes, and the hang-up must not cut the count off
    broker, metrics = served
    broker.set_partition("t", 0, replicas=(1,), isr=(1,))
    with RawClient(broker.address) as client:
        client.call(produce(acks=1, data={("t", 0): batch(7)}))
    fetches = 25
    for _ in range(fetches):
        with RawClient(broker.address) as client:
            answer = client.call(fetch(partitions=[(0, 0)]))
        assert len(answer.responses[0].partitions[0].records) == len(batch(7))
    samples = scrape_once_answered(metrics.url, FetchConsumer=fetches)
    assert answered(samples)["FetchConsumer"] == fetches


def test_record_count_reads_every_batch_header() -> None:
    assert record_count(batch(3) + batch(5)) == 8
    assert record_count(b"") == 0
    assert record_count(batch(2)[:30]) == 0  # shorter than a header: nothing counted


@pytest.mark.parametrize(("value", "expected"), [
    ("http://127.0.0.1:9404", ("127.0.0.1", 9404)),
    ("http://127.0.0.1:0/metrics", ("127.0.0.1", 0)),
    ("http://:9404", ("", 9404)),
    ("http://[::1]:9404", ("::1", 9404)),
    ("", None),
])
def test_metrics_listener_values(value: str, expected: tuple[str, int] | None) -> None:
    text = f"broker.id=1\nzookeeper.connect=127.0.0.1:2181\nmetrics.listener={value}\n"
    assert parse_config(text).config.metrics_listener == expected
    controller = f"node.id=100\nzookeeper.connect=127.0.0.1:2181\nmetrics.listener={value}\n"
    loaded = parse_controller_config(controller)
    assert loaded.config.metrics_listener == expected
    assert loaded.warnings == ()


@pytest.mark.parametrize("value", ["127.0.0.1:9404", "https://127.0.0.1:9404",
                                   "http://127.0.0.1", "http://127.0.0.1:99999",
                                   "http://127.0.0.1:9404/other", "http://u:p@127.0.0.1:9404"])
def test_a_bad_metrics_listener_is_one_error_naming_the_key(value: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_config(f"broker.id=1\nzookeeper.connect=127.0.0.1:2181\nmetrics.listener={value}\n")
    message = str(error.value)
    assert message.startswith("metrics.listener: ") and "\n" not in message
    assert "u:p" not in message  # a password is never echoed


def remote_bytes(root: Path, topic_id: str, partition: int) -> int:
    """The bytes of the segments the filesystem store holds for ``t``'s ``partition``."""
    return sum(f.stat().st_size for f in (root / f"t-{topic_id}" / str(partition)).glob("*.log"))


def test_the_remote_log_size_is_what_the_tiered_partitions_led_here_hold_remotely(
        tmp_path: Path) -> None:
    remote = RemoteLogConfig(system_enable=True, storage_url=f"file://{tmp_path}/remote",
                             task_interval_ms=3_600_000)  # passes run by the test only
    broker = InProcessBroker(tmp_path / "logs", remote_log=remote)
    metrics = MetricsServer(KafkaCollector(replica_manager=lambda: broker.replica_manager),
                            "127.0.0.1", 0)
    remote_size = "kafka_server_brokertopicmetrics_remotelogsizebytes"
    topic_t = (("topic", "t"),)
    try:
        rm = broker.replica_manager
        assert rm.remote is not None
        rm.update_topic_config("t", {"remote.storage.enable": "true", "segment.bytes": "300",
                                     "local.retention.bytes": "0", "retention.ms": "-1"})
        topic_id = kafka_uuid_text(uuid.uuid4())
        for p in (0, 1):
            broker.set_partition("t", p, topic_id=topic_id)
        broker.set_partition("plain", 0)  # not tiered: no remote size
        produced = {0: 0, 1: 0}
        for p, batches in ((0, 6), (1, 3)):
            for _ in range(batches):
                sent = batch(2)
                rm.produce(tp("t", p), sent, 1).result(5)
                produced[p] += len(sent)
        rm.produce(tp("plain", 0), batch(2), 1).result(5)
        before = scrape(metrics.url)
        assert before[remote_size, topic_t] == 0  # nothing copied yet
        assert not any(labels == (("topic", "plain"),) for name, labels in before
                       if name == remote_size)

        rm.remote.run_once()  # copies every rolled segment
        assert rm.logs.cleanup_logs() > 0  # and the local copies of them go (local.retention 0)
        in_remote = {p: remote_bytes(tmp_path / "remote", topic_id, p) for p in (0, 1)}
        assert all(in_remote.values())
        samples = scrape(metrics.url)
        assert samples[remote_size, topic_t] == in_remote[0] + in_remote[1]
        assert samples["kafka_server_brokertopicmetrics_remotecopybytespersec_total", ()] == \
            in_remote[0] + in_remote[1]
        for p in (0, 1):  # each byte in one tier: the local log is what was not copied
            row = (("partition", str(p)), ("topic", "t"))
            assert samples["kafka_log_log_size", row] == produced[p] - in_remote[p]
            assert samples["kafka_log_log_logstartoffset", row] == 0

        # t-1 led by broker 2 now: its remote bytes are the new leader's to report
        broker.set_partition("t", 1, leader=2, leader_epoch=1, replicas=(2, 1),
                             topic_id=topic_id)
        assert scrape(metrics.url)[remote_size, topic_t] == in_remote[0]
    finally:
        metrics.close()
        broker.close()


def values(collector: KafkaCollector) -> dict[str, float]:
    """The unlabelled samples a collect gives: name -> value."""
    return {s.name: s.value for family in collector.collect() for s in family.samples
            if not s.labels}


@pytest.mark.processes
def test_the_controllers_gauges_follow_its_context() -> None:
    cluster = Brokers(f"memory://metrics-{uuid.uuid4().hex[:10]}")
    try:
        cluster.start()
        cluster.admin.create_topic("a", assignment={0: [2, 3], 1: [3, 2]})
        for p in (0, 1):
            wait_until(lambda p=p: (s := cluster.metadata.partition_states(
                [tp("a", p)])[tp("a", p)]) is not None and s.value.leader >= 0, 20)
        active = KafkaCollector(controller=lambda: cluster.participants[1].controller)
        standby = KafkaCollector(controller=lambda: cluster.participants[2].controller)
        at = values(active)
        assert at["kafka_controller_kafkacontroller_activecontrollercount"] == 1
        assert values(standby)["kafka_controller_kafkacontroller_activecontrollercount"] == 0
        assert at["kafka_controller_kafkacontroller_globalpartitioncount"] == 2
        assert at["kafka_controller_kafkacontroller_globaltopiccount"] == 1
        assert at["kafka_controller_kafkacontroller_activebrokercount"] == 3
        assert at["kafka_controller_kafkacontroller_offlinepartitionscount"] == 0
        assert at["kafka_controller_kafkacontroller_preferredreplicaimbalancecount"] == 0
        assert at["kafka_controller_controllerstats_leaderelectionrateandtimems_count"] >= 1
        assert at["kafka_controller_controllereventmanager_eventqueuetimems_count"] >= 1
        assert at["kafka_controller_controllerstats_uncleanleaderelectionspersec_total"] == 0
        cluster.kill(2)  # a-0 moves to 3, its second choice
        wait_until(lambda: values(active)[
            "kafka_controller_kafkacontroller_preferredreplicaimbalancecount"] == 1, 20,
            message="a-0 led by a replica other than its preferred one")
        cluster.kill(3)  # no replica left: both offline
        wait_until(lambda: values(active)[
            "kafka_controller_kafkacontroller_offlinepartitionscount"] == 2, 20,
            message="both partitions offline")
        assert values(active)["kafka_controller_kafkacontroller_activebrokercount"] == 1
    finally:
        cluster.close()


CONTROLLER_METRICS = re.compile(r"^partctl controller 100: metrics on (http://\S+)$", re.M)


def test_a_dedicated_controller_serves_the_controllers_metrics(
        tmp_path: Path, zookeeper_server: Server) -> None:
    lines, _url = coordinator_settings(zookeeper_server)
    process, log_path = start_controller(tmp_path / "ctl", lines,
                                         extra="metrics.listener=http://127.0.0.1:0\n")
    try:
        match = CONTROLLER_METRICS.search(log_path.read_text(errors="replace"))
        assert match is not None, log_path.read_text(errors="replace")[-2000:]
        active = ("kafka_controller_kafkacontroller_activecontrollercount", ())
        samples = wait_until(lambda: (s := scrape(match.group(1)))[active] == 1 and s,
                             timeout=30, message="the dedicated controller active")
        assert samples["kafka_controller_kafkacontroller_globalpartitioncount", ()] == 0
        assert not any(name.startswith("kafka_server_") for name, _ in samples)  # no broker
    finally:
        process.send_signal(signal.SIGTERM)
        status = process.wait(60)
    assert status == 0, log_path.read_text(errors="replace")[-3000:]


@pytest.mark.processes
def test_cluster_up_names_each_brokers_metrics_url(tmp_path: Path) -> None:
    """``partctl cluster up``'s started line for a broker, from its log as a broker process
    writes it (broker/process.py: the metrics line, then the serving line); a short-lived
    process stands in for the broker's."""
    lines = {2: ("partctl broker 2: metrics on http://127.0.0.1:40404/metrics\n"
                 "partctl broker 2: serving PLAINTEXT://127.0.0.1:39092 on etcd://e/partctl\n"),
             3: "partctl broker 3: serving PLAINTEXT://127.0.0.1:39093 on etcd://e/partctl\n"}
    for broker_id, text in lines.items():
        log_path = tmp_path / f"broker-{broker_id}.log"
        log_path.write_text("starting\n" + text)
        with subprocess.Popen([sys.executable, "-c", ""]) as process:
            broker = LaunchedBroker(broker_id, process, tmp_path, tmp_path / "server.properties",
                                    log_path, "etcd://e/partctl")
            assert broker.serving()
            line = broker.started_line()
        assert line.startswith(f"broker {broker_id} at 127.0.0.1:{39090 + broker_id} "
                               f"(pid {process.pid}, log {log_path})"), line
        metrics = ", metrics on http://127.0.0.1:40404/metrics"
        assert line.endswith(metrics) == (broker_id == 2), line  # 3: no metrics.listener


@pytest.mark.processes
@pytest.mark.parametrize("role", ["broker", "controller"])
def test_a_taken_metrics_port_is_one_line_and_exit_1(tmp_path: Path, role: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = tmp_path / "server.properties"
        config.write_text(f"{'broker' if role == 'broker' else 'node'}.id=7\n"
                          f"listeners=PLAINTEXT://127.0.0.1:0\nlog.dirs={tmp_path / 'logs'}\n"
                          "zookeeper.connect=127.0.0.1:1\nzookeeper.connection.timeout.ms=1000\n"
                          f"metrics.listener=http://127.0.0.1:{port}\n")
        result = subprocess.run(
            [sys.executable, "-m", "partctl", role, "start", "--config", str(config)],
            capture_output=True, text=True, cwd=REPO, timeout=60)
    assert result.returncode == 1, result.stderr
    assert [x for x in result.stderr.splitlines() if x.startswith("partctl: error:")] == [
        f"partctl: error: {role} 7: cannot listen on metrics.listener "
        f"http://127.0.0.1:{port}: Address already in use"]
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "logs").exists()  # nothing opened
