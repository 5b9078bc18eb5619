"""The transaction coordinator against three real ``partctl broker`` processes: raw kio
requests for its answers (FindCoordinator for a transactional id, InitProducerId,
AddPartitionsToTxn, EndTxn, DescribeTransactions, ListTransactions, the errors Kafka gives),
librdkafka's transactional producer (commit, abort, fencing), a transaction aborted at its
timeout, the coordinator killed between a transaction's begin and its commit, and Kafka's own
``kafka-transactions`` tool listing and describing."""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import pytest
from kio.schema.errors import ErrorCode

from broker.groups.records import partition_for
from broker.txns import TRANSACTION_STATE_TOPIC
from tests.broker.data.test_cluster_clients import SETTINGS, Trio, create, serving
from tests.broker.processes import coordinator_url
from tests.broker.txn.txn_coord_wire import Described, describe_at
from tests.broker.wire_client import RawClient, request, request_module
from tests.kafka.harness import KAFKA_3, kafka_available, run_tool
from tests.servers import Server
from tests.waiting import wait_until

pytestmark = pytest.mark.servers

TXN_PARTITIONS = 3
TXN_SETTINGS = SETTINGS + (
    f"transaction.state.log.num.partitions={TXN_PARTITIONS}\n"
    "transaction.max.timeout.ms=60000\n"
    "transaction.abort.timed.out.transaction.cleanup.interval.ms=300\n")
TOPIC = "txn-data"


class TxnTrio(Trio):
    def settings(self) -> str:
        return TXN_SETTINGS


@pytest.fixture(scope="module")
def trio(zookeeper_server: Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Trio]:
    root: Path = tmp_path_factory.mktemp("txn-trio")
    with serving(TxnTrio(coordinator_url(zookeeper_server), root, {}),
                 only_running=True) as cluster:
        create(cluster, TOPIC, 3, num_partitions=3, replication_factor=3)
        yield cluster


def call(trio: Trio, body: Any, broker_id: int | None = None) -> Any:
    running = [b for b in trio.brokers.values() if b.running()]
    broker = trio.brokers[broker_id] if broker_id is not None else running[0]
    with RawClient(broker.address, timeout=30) as client:
        return client.call(body)


def coordinator_of(trio: Trio, transactional_id: str) -> int:
    """FindCoordinator (key type 1) until it names a broker (the first creates the topic)."""
    found: dict[str, int] = {}

    def ask() -> bool:
        answer = call(trio, request(10, 3, key=transactional_id, key_type=1))
        if answer.error_code == ErrorCode.none:
            found["node"] = int(answer.node_id)
            return True
        assert answer.error_code == ErrorCode.coordinator_not_available, answer
        return False

    wait_until(ask, timeout=60, interval=0.2, message=f"a coordinator for {transactional_id}")
    return found["node"]


_NOT_YET = (ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator,
            ErrorCode.coordinator_not_available)


def settled(ask: Callable[[], Any]) -> Any:
    """``ask()``'s answer once the coordinator answers for the id (as a client retries a
    coordinator loading, moved or not there yet)."""
    answers: list[Any] = []

    def asked() -> bool:
        answers.append(ask())
        return answers[-1].error_code not in _NOT_YET

    wait_until(asked, timeout=60, interval=0.2, message="the coordinator answering")
    return answers[-1]


def init(trio: Trio, tid: str, timeout_ms: int = 30_000, version: int = 4,
         producer: tuple[int, int] = (-1, -1)) -> Any:
    return settled(lambda: call(trio, request(
        22, version, transactional_id=tid, transaction_timeout=timedelta(
            milliseconds=timeout_ms), producer_id=producer[0], producer_epoch=producer[1]),
        coordinator_of(trio, tid)))


def add_partitions(trio: Trio, tid: str, pid: int, epoch: int,
                   partitions: tuple[int, ...]) -> dict[int, ErrorCode]:
    """AddPartitionsToTxn version 3 for partitions of TOPIC: the error of each."""
    module = request_module(24, 3)
    errors: dict[int, ErrorCode] = {}

    def ask() -> bool:
        answer = call(trio, request(
            24, 3, v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch, v3_and_below_topics=(
                module.AddPartitionsToTxnTopic(name=TOPIC, partitions=partitions),)),
            coordinator_of(trio, tid))
        errors.clear()
        errors.update({r.partition_index: r.partition_error_code
                       for t in answer.results_by_topic_v3_and_below
                       for r in t.results_by_partition})
        return not set(errors.values()) & set(_NOT_YET)

    wait_until(ask, timeout=60, interval=0.2, message="the coordinator answering")
    return errors


def describe(trio: Trio, tid: str) -> Described:
    return settled(lambda: _describe(trio, tid))


def _describe(trio: Trio, tid: str) -> Described:
    return describe_at(trio.brokers[coordinator_of(trio, tid)].address, tid)


def state_of(trio: Trio, tid: str) -> str:
    return str(describe(trio, tid).transaction_state)


def test_find_coordinator_names_the_leader_of_the_ids_partition(trio: Trio) -> None:
    node = coordinator_of(trio, "find-me")
    states = trio.partition_state(TRANSACTION_STATE_TOPIC)
    assert len(states) == TXN_PARTITIONS
    assert node == states[partition_for("find-me", TXN_PARTITIONS)][0]
    empty = call(trio, request(10, 3, key="", key_type=1))
    assert empty.error_code == ErrorCode.invalid_request


def test_a_transaction_through_the_raw_protocol(trio: Trio) -> None:
    tid = f"raw-{uuid.uuid4().hex[:6]}"
    first = init(trio, tid)
    assert first.error_code == ErrorCode.none and first.producer_epoch == 0
    pid = first.producer_id
    node = coordinator_of(trio, tid)
    assert add_partitions(trio, tid, pid, 0, (0, 1)) == {0: ErrorCode.none, 1: ErrorCode.none}
    ongoing = describe(trio, tid)
    assert ongoing.transaction_state == "Ongoing" and ongoing.producer_id == pid
    assert ongoing.topics == ((TOPIC, (0, 1)),)
    listed = call(trio, request(66, 1, state_filters=("Ongoing", "Bogus")), node)
    assert listed.error_code == ErrorCode.none
    assert tuple(listed.unknown_state_filters) == ("Bogus",)
    assert tid in {s.transactional_id for s in listed.transaction_states}
    by_pid = call(trio, request(66, 0, producer_id_filters=(pid + 12345,)), node)
    assert tid not in {s.transactional_id for s in by_pid.transaction_states}
    # a second producer fences the first: the ongoing transaction is aborted first
    fenced = init(trio, tid)
    assert fenced.error_code == ErrorCode.concurrent_transactions
    wait_until(lambda: init(trio, tid).error_code == ErrorCode.none, timeout=60,
               interval=0.3, message="the fenced transaction aborted")
    assert state_of(trio, tid) == "Empty"
    assert describe(trio, tid).producer_epoch == 2  # 1: the fence, 2: the new producer
    stale = call(trio, request(26, 3, transactional_id=tid, producer_id=pid, producer_epoch=0,
                               committed=True), node)
    assert stale.error_code == ErrorCode.producer_fenced
    old_client = call(trio, request(26, 1, transactional_id=tid, producer_id=pid,
                                    producer_epoch=0, committed=True), node)
    assert old_client.error_code == ErrorCode.invalid_producer_epoch
    empty = call(trio, request(26, 3, transactional_id=tid, producer_id=pid, producer_epoch=2,
                               committed=True), node)
    assert empty.error_code == ErrorCode.invalid_txn_state


def test_a_timeout_above_the_maximum_is_refused(trio: Trio) -> None:
    answer = init(trio, "too-long", timeout_ms=60_001)
    assert answer.error_code == ErrorCode.invalid_transaction_timeout
    unknown = describe(trio, "never-seen")
    assert unknown.error_code == ErrorCode.transactional_id_not_found


def test_the_next_coordinator_loads_the_state_from_the_log(trio: Trio) -> None:
    tid = f"reload-{uuid.uuid4().hex[:6]}"
    first = init(trio, tid)
    assert first.error_code == ErrorCode.none
    assert add_partitions(trio, tid, first.producer_id, first.producer_epoch, (2,)) == {
        2: ErrorCode.none}
    before = describe(trio, tid)
    victim = coordinator_of(trio, tid)
    trio.brokers[victim].signal(signal.SIGKILL)
    assert trio.brokers[victim].wait(30) == -signal.SIGKILL
    try:
        wait_until(lambda: coordinator_of(trio, tid) != victim, timeout=60,
                   message="a new coordinator")
        after = describe(trio, tid)
        assert (after.transaction_state, after.producer_id, after.producer_epoch,
                after.topics, after.start_ms) == ("Ongoing", before.producer_id,
                                                  before.producer_epoch, ((TOPIC, (2,)),),
                                                  before.start_ms)
    finally:
        trio.start(victim)
        wait_until(lambda: all(len(isr) == 3 for _, isr in trio.partition_state(TOPIC).values()),
                   timeout=60, message="full ISRs again")


def reaches(trio: Trio, tid: str, state: str) -> None:
    """EndTxn is answered once PrepareCommit/PrepareAbort is written; the Complete state
    follows once every marker is."""
    wait_until(lambda: state_of(trio, tid) == state, timeout=30, interval=0.1,
               message=f"{tid} {state}")


def producer(trio: Trio, tid: str, **more: Any) -> ck.Producer:
    return ck.Producer({"bootstrap.servers": trio.bootstrap, "transactional.id": tid,
                        "acks": "all", "linger.ms": 5, "transaction.timeout.ms": 30_000,
                        **more})


def read_all(trio: Trio, topic: str, enough: Callable[[list[bytes]], bool],
             timeout: float = 60.0) -> list[bytes]:
    """The values of ``topic`` (read_uncommitted) read until ``enough`` of them."""
    consumer = ck.Consumer({"bootstrap.servers": trio.bootstrap, "group.id": uuid.uuid4().hex,
                            "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and not enough(values):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
    finally:
        consumer.close()
    return values


def log_ends(trio: Trio, topic: str, partitions: int) -> list[int]:
    consumer = ck.Consumer({"bootstrap.servers": trio.bootstrap, "group.id": uuid.uuid4().hex})
    try:
        return [consumer.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=30)[1]
                for p in range(partitions)]
    finally:
        consumer.close()


def test_librdkafka_commits_and_aborts(trio: Trio) -> None:
    """Each transaction ends with one marker on each of its partitions: a commit of 10 values
    and an abort of 5 over three partitions leave 15 values and 6 control records."""
    topic = "txn-rdk"
    create(trio, topic, 3, num_partitions=3, replication_factor=3)
    tid = f"rdk-{uuid.uuid4().hex[:6]}"
    p = producer(trio, tid)
    p.init_transactions(60)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, value=b"commit-%d" % i, partition=i % 3)
    p.commit_transaction(60)
    reaches(trio, tid, "CompleteCommit")
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, value=b"abort-%d" % i, partition=i % 3)
    p.flush(30)
    p.abort_transaction(60)
    reaches(trio, tid, "CompleteAbort")
    values = read_all(trio, topic, lambda v: len(v) >= 15)
    assert sorted(values) == sorted([b"commit-%d" % i for i in range(10)]
                                    + [b"abort-%d" % i for i in range(5)])
    assert log_ends(trio, topic, 3) == [4 + 2 + 2, 3 + 2 + 2, 3 + 1 + 2]


def test_a_second_producer_fences_the_first(trio: Trio) -> None:
    tid = f"fence-{uuid.uuid4().hex[:6]}"
    first = producer(trio, tid)
    first.init_transactions(60)
    first.begin_transaction()
    first.produce(TOPIC, value=b"zombie", partition=0)
    first.flush(30)
    second = producer(trio, tid)
    second.init_transactions(60)  # aborts the first's transaction, bumps the epoch
    with pytest.raises(ck.KafkaException) as caught:
        first.commit_transaction(30)
    error = caught.value.args[0]
    assert error.fatal() or error.code() in (ck.KafkaError._FENCED,
                                             ck.KafkaError.PRODUCER_FENCED), error
    second.begin_transaction()
    second.produce(TOPIC, value=b"successor", partition=0)
    second.commit_transaction(60)
    reaches(trio, tid, "CompleteCommit")


def test_a_transaction_past_its_timeout_is_aborted(trio: Trio) -> None:
    tid = f"slow-{uuid.uuid4().hex[:6]}"
    p = producer(trio, tid, **{"transaction.timeout.ms": 2000})
    p.init_transactions(60)
    p.begin_transaction()
    p.produce(TOPIC, value=b"too-slow", partition=1)
    p.flush(30)
    epoch = describe(trio, tid).producer_epoch
    wait_until(lambda: state_of(trio, tid) == "CompleteAbort", timeout=30, interval=0.2,
               message="the timed-out transaction aborted")
    assert describe(trio, tid).producer_epoch == epoch + 1  # the producer is fenced
    with pytest.raises(ck.KafkaException):
        p.commit_transaction(30)


def test_a_commit_completes_through_the_coordinators_death(trio: Trio) -> None:
    tid = f"failover-{uuid.uuid4().hex[:6]}"
    p = producer(trio, tid)
    p.init_transactions(60)
    p.begin_transaction()
    for i in range(6):
        p.produce(TOPIC, value=b"survivor-%d" % i, partition=i % 3)
    p.flush(30)
    victim = coordinator_of(trio, tid)
    trio.brokers[victim].signal(signal.SIGKILL)
    assert trio.brokers[victim].wait(30) == -signal.SIGKILL
    try:
        p.commit_transaction(120)
        wait_until(lambda: coordinator_of(trio, tid) != victim, timeout=60,
                   message="a new coordinator")
        reaches(trio, tid, "CompleteCommit")  # reloaded from the log
        survivors = {b"survivor-%d" % i for i in range(6)}
        assert survivors <= set(read_all(trio, TOPIC, lambda v: survivors <= set(v)))
    finally:
        trio.start(victim)
        wait_until(lambda: all(len(isr) == 3 for _, isr in trio.partition_state(TOPIC).values()),
                   timeout=60, message="full ISRs again")


@pytest.mark.skipif(not kafka_available(KAFKA_3), reason="Kafka's jars are not cached")
def test_kafkas_transactions_tool_lists_and_describes(trio: Trio) -> None:
    tid = f"tool-{uuid.uuid4().hex[:6]}"
    p = producer(trio, tid)
    p.init_transactions(60)
    p.begin_transaction()
    p.produce(TOPIC, value=b"tool", partition=2)
    p.flush(30)
    listed = run_tool(KAFKA_3, "transactions", "--bootstrap-server", trio.bootstrap, "list")
    assert listed.returncode == 0, listed.stderr
    assert tid in listed.stdout and "Ongoing" in listed.stdout
    described = run_tool(KAFKA_3, "transactions", "--bootstrap-server", trio.bootstrap,
                         "describe", "--transactional-id", tid)
    assert described.returncode == 0, described.stderr
    assert "Ongoing" in described.stdout and f"{TOPIC}-2" in described.stdout
    p.commit_transaction(60)
