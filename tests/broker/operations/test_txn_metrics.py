"""Kafka's transaction metrics, scraped from three real broker processes while librdkafka's
transactional producer (and raw requests, for what no well-behaved client does) run real
transactions: each metric moves when what it counts happens, and goes back when it is over."""

from __future__ import annotations

import math
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import NewTopic
from kio.schema.errors import ErrorCode

from broker.groups.records import partition_for
from broker.txns import TRANSACTION_STATE_TOPIC
from tests.broker.data.test_cluster_clients import serving
from tests.broker.operations.test_metrics import scrape
from tests.broker.operations.test_metrics_prometheus import MetricsTrio
from tests.broker.processes import coordinator_url
from tests.broker.txn.test_txn_coord_cluster import (
    TXN_PARTITIONS,
    TXN_SETTINGS,
    coordinator_of,
    init,
    producer,
    reaches,
    registered,
    single_replica_topic,
)
from tests.broker.txn.test_txn_data_markers import produce_transactional
from tests.broker.wire_client import RawClient
from tests.servers import Server
from tests.waiting import wait_until

pytestmark = pytest.mark.servers

TOPIC = "txn-watched"
LSO_LAG = "kafka_cluster_partition_laststableoffsetlag"
PRODUCER_IDS = "kafka_server_replicamanager_produceridcount"
LATE = "kafka_server_replicamanager_partitionswithlatetransactionscount"
VERIFY_TIME = "kafka_server_addpartitionstotxnmanager_verificationtimems_count"
VERIFY_FAILURES = "kafka_server_addpartitionstotxnmanager_verificationfailurerate_total"
LOAD_MAX = "kafka_server_transaction_coordinator_metrics_partition_load_time_max"
LOAD_AVG = "kafka_server_transaction_coordinator_metrics_partition_load_time_avg"
UNKNOWN_DESTINATION = \
    "kafka_coordinator_transaction_transactionmarkerchannelmanager_unknowndestinationqueuesize"
APPEND_RETRY = \
    "kafka_coordinator_transaction_transactionmarkerchannelmanager_logappendretryqueuesize"


class TxnMetricsTrio(MetricsTrio):
    """Brokers with their metrics served and a ``__transaction_state`` of two replicas per
    partition (both must have a write: min.isr 2)."""

    def settings(self) -> str:
        return TXN_SETTINGS + ("transaction.state.log.replication.factor=2\n"
                               "transaction.state.log.min.isr=2\n")


@pytest.fixture(scope="module")
def trio(zookeeper_server: Server, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[TxnMetricsTrio]:
    root: Path = tmp_path_factory.mktemp("txn-metrics")
    with serving(TxnMetricsTrio(coordinator_url(zookeeper_server), root, {}),
                 only_running=True) as cluster:
        admin = cluster.admin()  # kept while it works: a dropped client cancels its requests
        assert admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=3, config={
            "min.insync.replicas": "2"})])[TOPIC].result(60) is None
        wait_until(lambda: (state := cluster.partition_state(TOPIC)) and state[0][0] >= 0
                   and len(state[0][1]) == 3, timeout=120, message=f"{TOPIC}: a full ISR")
        yield cluster


def value(trio: TxnMetricsTrio, broker_id: int, name: str, **labels: str) -> float:
    url = trio.brokers[broker_id].metrics_url
    assert url is not None
    return scrape(url)[(name, tuple(sorted(labels.items())))]


def lso_lag(trio: TxnMetricsTrio, broker_id: int) -> float:
    return value(trio, broker_id, LSO_LAG, topic=TOPIC, partition="0")


def leader_of(trio: TxnMetricsTrio, topic: str) -> int:
    return trio.partition_state(topic)[0][0]


def test_the_coordinator_reports_loading_its_partitions(trio: TxnMetricsTrio) -> None:
    """No __transaction_state partition loaded yet: NaN (Kafka's Max and Avg of no sample);
    once the first FindCoordinator created the topic, each broker that loaded a partition
    reports how long the loads took."""
    for b in trio.brokers:
        assert math.isnan(value(trio, b, LOAD_MAX)) and math.isnan(value(trio, b, LOAD_AVG))
    node = coordinator_of(trio, "loads")
    wait_until(lambda: not math.isnan(value(trio, node, LOAD_MAX)), timeout=30,
               message="the coordinator's load time")
    assert 0 <= value(trio, node, LOAD_AVG) <= value(trio, node, LOAD_MAX)
    leaders = {state[0] for state in trio.partition_state(TRANSACTION_STATE_TOPIC).values()}
    for b in set(trio.brokers) - leaders:
        assert math.isnan(value(trio, b, LOAD_MAX))


def test_the_lso_lags_while_a_transaction_is_open(trio: TxnMetricsTrio) -> None:
    """Five records of an open transaction, acknowledged by every replica: the leader's high
    watermark is five past its last stable offset (the followers', once their high watermark
    has moved, too); the commit's marker brings the lag to 0. The leader asked the
    coordinator once, before the transaction's first batch; every replica holds the
    producer's id."""
    leader = leader_of(trio, TOPIC)
    verified = value(trio, leader, VERIFY_TIME)
    ids = {b: value(trio, b, PRODUCER_IDS) for b in trio.brokers}
    assert all(lso_lag(trio, b) == 0 for b in trio.brokers)
    tid = f"lag-{uuid.uuid4().hex[:6]}"
    p = producer(trio, tid)
    p.init_transactions(60)
    p.begin_transaction()
    for i in range(5):
        p.produce(TOPIC, value=b"open-%d" % i, partition=0)
    assert p.flush(30) == 0
    assert lso_lag(trio, leader) == 5
    wait_until(lambda: all(lso_lag(trio, b) == 5 for b in trio.brokers), timeout=30,
               message="the followers' LSO lag")
    assert value(trio, leader, VERIFY_TIME) == verified + 1
    for b in trio.brokers:
        assert value(trio, b, PRODUCER_IDS) == ids[b] + 1
    p.commit_transaction(60)
    reaches(trio, tid, "CompleteCommit")
    assert lso_lag(trio, leader) == 0
    wait_until(lambda: all(lso_lag(trio, b) == 0 for b in trio.brokers), timeout=30,
               message="no LSO lag on the followers")


def test_a_partition_the_coordinator_does_not_verify_is_a_failure(
        trio: TxnMetricsTrio) -> None:
    """A transactional batch for a partition never added to the transaction: the leader asks,
    the coordinator says no, the failure is counted (per partition, as Kafka marks it)."""
    tid = f"unverified-{uuid.uuid4().hex[:6]}"
    first = init(trio, tid)
    assert first.error_code == ErrorCode.none
    leader = leader_of(trio, TOPIC)
    failures, times = value(trio, leader, VERIFY_FAILURES), value(trio, leader, VERIFY_TIME)
    with RawClient(trio.brokers[leader].address, timeout=30) as client:
        for seq in range(2):
            refused = produce_transactional(client, 0, first.producer_id, 0,
                                            first.producer_epoch, topic=TOPIC,
                                            transactional_id=tid)
            assert refused.error_code == ErrorCode.invalid_txn_state, seq
    assert value(trio, leader, VERIFY_FAILURES) == failures + 2
    assert value(trio, leader, VERIFY_TIME) == times + 2


def test_an_open_transaction_silent_past_the_maximum_is_late(trio: TxnMetricsTrio) -> None:
    """Kafka counts a partition as having a late transaction when the producer of its oldest
    open transaction last wrote (by its batch's timestamp) more than transaction.max.timeout.ms
    (60 s here) plus five minutes ago: a record stamped 30 minutes back makes it so at once;
    the abort's marker closes it."""
    leader = leader_of(trio, TOPIC)
    assert value(trio, leader, LATE) == 0
    tid = f"late-{uuid.uuid4().hex[:6]}"
    p = producer(trio, tid)
    p.init_transactions(60)
    p.begin_transaction()
    p.produce(TOPIC, value=b"stale", partition=0,
              timestamp=int(time.time() * 1000) - 30 * 60 * 1000)
    assert p.flush(30) == 0
    assert value(trio, leader, LATE) == 1
    assert all(value(trio, b, LATE) == 0 for b in trio.brokers if b != leader)  # leaders only
    p.abort_transaction(60)
    reaches(trio, tid, "CompleteAbort")
    assert value(trio, leader, LATE) == 0


def test_markers_wait_for_an_unknown_leader_and_a_completion_for_the_log(
        trio: TxnMetricsTrio) -> None:
    """The only replica of a partition in the transaction dies, then the transaction is
    committed: its marker waits for a leader (UnknownDestinationQueueSize 1 on the
    coordinator). The other replica of the id's ``__transaction_state`` partition dies too,
    so once the marker is written (the partition back) the CompleteCommit write fails
    (below min.isr) and waits to be retried (LogAppendRetryQueueSize 1), until that replica
    is back in the ISR."""
    tid = f"queues-{uuid.uuid4().hex[:6]}"
    coordinator = coordinator_of(trio, tid)
    p_txn = partition_for(tid, TXN_PARTITIONS)
    _, isr = trio.partition_state(TRANSACTION_STATE_TOPIC)[p_txn]
    (follower,) = set(isr) - {coordinator}
    (holder,) = set(trio.brokers) - {coordinator, follower}
    topic = f"only-on-{holder}"
    single_replica_topic(trio, topic, holder)
    p = producer(trio, tid)
    p.init_transactions(60)
    p.begin_transaction()
    p.produce(topic, value=b"held", partition=0)
    assert p.flush(30) == 0
    assert value(trio, coordinator, UNKNOWN_DESTINATION) == 0
    killed: list[int] = []

    def kill(broker_id: int) -> None:
        trio.brokers[broker_id].signal(signal.SIGKILL)
        assert trio.brokers[broker_id].wait(30) == -signal.SIGKILL
        killed.append(broker_id)
        wait_until(lambda: broker_id not in registered(trio), timeout=60,
                   message=f"{broker_id}'s registration gone")

    try:
        kill(holder)
        p.commit_transaction(120)
        wait_until(lambda: value(trio, coordinator, UNKNOWN_DESTINATION) == 1, timeout=30,
                   message="the marker waiting for a leader")
        kill(follower)
        wait_until(lambda: trio.partition_state(TRANSACTION_STATE_TOPIC)[p_txn][1]
                   == (coordinator,), timeout=60, message=f"{follower} out of the ISR")
        assert value(trio, coordinator, APPEND_RETRY) == 0
        trio.start(holder)
        killed.remove(holder)
        wait_until(lambda: value(trio, coordinator, APPEND_RETRY) == 1, timeout=60,
                   message="the completion waiting to be written")
        assert value(trio, coordinator, UNKNOWN_DESTINATION) == 0
        trio.start(follower)
        killed.remove(follower)
        reaches(trio, tid, "CompleteCommit")
        assert value(trio, coordinator, APPEND_RETRY) == 0
    finally:
        for victim in killed:
            trio.start(victim)
        wait_until(lambda: all(len(isr) == 3 for _, isr in trio.partition_state(TOPIC).values()),
                   timeout=60, message="full ISRs again")
