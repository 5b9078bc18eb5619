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
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import pytest
from kio.schema.errors import ErrorCode

import coordinator as coordinator_client
from broker.groups.records import partition_for
from broker.txns import TRANSACTION_STATE_TOPIC
from coordinator.admin import Admin
from coordinator.codecs import TopicPartition as CodecTopicPartition
from coordinator.metadata import MetadataClient
from tests.broker.data.test_cluster_clients import SETTINGS, Trio, create, serving
from tests.broker.processes import coordinator_url, wait_for_leaders
from tests.broker.txn.txn_coord_wire import Described, describe_at
from tests.broker.wire_client import RawClient, request, request_module
from tests.kafka.harness import KAFKA_3, kafka_available, run_tool
from tests.servers import Server
from tests.waiting import wait_until

from .test_txn_data_markers import produce_transactional, transactional_request

pytestmark = pytest.mark.servers

TXN_PARTITIONS = 3
HOLD_MS = 3000
"""How long an add waits for the previous transaction's end here: the markers' time on a busy
machine, many times over, and well within the trio's replica.lag.time.max.ms (10 s)."""
TXN_SETTINGS = SETTINGS + (
    f"transaction.state.log.num.partitions={TXN_PARTITIONS}\n"
    "transaction.max.timeout.ms=60000\n"
    "transaction.abort.timed.out.transaction.cleanup.interval.ms=300\n"
    f"partctl.transaction.add.hold.ms={HOLD_MS}\n")
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


def initialized(trio: Trio, prefix: str) -> tuple[str, int, int, int]:
    """A fresh transactional id of ``prefix``, initialized: (id, producer id, epoch, the
    coordinator's broker id)."""
    tid = f"{prefix}-{uuid.uuid4().hex[:6]}"
    first = init(trio, tid)
    assert first.error_code == ErrorCode.none
    return tid, first.producer_id, first.producer_epoch, coordinator_of(trio, tid)


def add_partitions(trio: Trio, tid: str, pid: int, epoch: int,
                   partitions: tuple[int, ...], topic: str = TOPIC) -> dict[int, ErrorCode]:
    """AddPartitionsToTxn version 3 for partitions of ``topic``: the error of each."""
    errors: dict[int, ErrorCode] = {}

    def ask() -> bool:
        answer = call(trio, add_request(tid, pid, epoch, partitions, topic),
                      coordinator_of(trio, tid))
        errors.clear()
        errors.update(added(answer))
        return not set(errors.values()) & set(_NOT_YET)

    wait_until(ask, timeout=60, interval=0.2, message="the coordinator answering")
    return errors


def add_request(tid: str, pid: int, epoch: int, partitions: tuple[int, ...],
                topic: str = TOPIC) -> Any:
    """AddPartitionsToTxn version 3 for partitions of ``topic``."""
    module = request_module(24, 3)
    return request(24, 3, v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                   v3_and_below_producer_epoch=epoch, v3_and_below_topics=(
                       module.AddPartitionsToTxnTopic(name=topic, partitions=partitions),))


def added(answer: Any) -> dict[int, ErrorCode]:
    """An AddPartitionsToTxn version 3 answer's error per partition."""
    return {r.partition_index: r.partition_error_code
            for t in answer.results_by_topic_v3_and_below for r in t.results_by_partition}


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


def test_leaders_append_only_what_the_coordinator_verified(trio: Trio) -> None:
    """KIP-890 part 1 on every partition of TOPIC, whose leaders are spread over the three
    brokers: those not the id's coordinator ask it over the network, the one that is asks
    itself. A batch of a partition never added to the transaction is refused with Kafka's
    codes (INVALID_TXN_STATE up to Produce v10, TRANSACTION_ABORTABLE from v11) and so is a
    batch arriving after the transaction was aborted: the hanging transaction Kafka closed.
    Nothing refused reaches a log."""
    tid, pid, epoch, node = initialized(trio, "verify")
    leaders = {p: trio.partition_state(TOPIC)[p][0] for p in range(3)}
    assert set(leaders.values()) - {node}, leaders  # the network path is taken
    before = log_ends(trio, TOPIC, 3)

    def produce(p: int, seq: int, version: int = 9) -> Any:
        with RawClient(trio.brokers[leaders[p]].address, timeout=30) as client:
            return produce_transactional(client, p, pid, seq, epoch, topic=TOPIC,
                                         transactional_id=tid, version=version)

    follower = next(b for b in trio.brokers if b != leaders[0])
    with RawClient(trio.brokers[follower].address, timeout=30) as client:
        astray = produce_transactional(client, 0, pid, 0, epoch, topic=TOPIC,
                                       transactional_id=tid)
    assert astray.error_code == ErrorCode.not_leader_or_follower  # only a leader verifies
    for p in range(3):
        refused = produce(p, 0)
        assert (refused.error_code, refused.error_message) == (
            ErrorCode.invalid_txn_state, "Partition was not added to the transaction")
        assert produce(p, 0, version=11).error_code == ErrorCode.transaction_abortable
    assert log_ends(trio, TOPIC, 3) == before
    assert add_partitions(trio, tid, pid, epoch, (0, 1, 2)) == dict.fromkeys(
        range(3), ErrorCode.none)
    for p in range(3):
        assert produce(p, 0).error_code == ErrorCode.none
        assert produce(p, 1).error_code == ErrorCode.none  # open here: no question asked
    aborted = call(trio, request(26, 3, transactional_id=tid, producer_id=pid,
                                 producer_epoch=epoch, committed=False), node)
    assert aborted.error_code == ErrorCode.none
    reaches(trio, tid, "CompleteAbort")
    after_abort = log_ends(trio, TOPIC, 3)
    assert after_abort == [b + 3 for b in before]  # two batches and the marker
    for p in range(3):
        assert produce(p, 2).error_code == ErrorCode.invalid_txn_state  # the late batch
    fenced = init(trio, tid)
    assert fenced.error_code == ErrorCode.none and fenced.producer_epoch == epoch + 1
    assert produce(0, 0).error_code == ErrorCode.invalid_producer_epoch  # PRODUCER_FENCED
    assert log_ends(trio, TOPIC, 3) == after_abort


def test_pipelined_first_batches_of_a_transaction_stay_in_order(trio: Trio) -> None:
    """A client pipelines a transaction's first batches to a partition, as Kafka's Java
    producer does with five in flight: the first waits for the coordinator's verification,
    the four behind it wait their turn, and a sixth sent once the first is answered waits
    behind them too. It used to be appended ahead of those not yet appended (the transaction
    was open on the partition, so it needed no question of its own) and was refused
    OUT_OF_ORDER_SEQUENCE_NUMBER, which the Java producer takes as fatal: Kafka's
    ProducerPerformance with transactions died on it."""
    tid, pid, epoch, node = initialized(trio, "pipelined")
    leaders = {p: trio.partition_state(TOPIC)[p][0] for p in range(3)}
    p = next(q for q in range(3) if leaders[q] != node)  # asked over the network: slower
    assert add_partitions(trio, tid, pid, epoch, (p,)) == {p: ErrorCode.none}
    start = log_ends(trio, TOPIC, 3)[p]
    answers: dict[int, Any] = {}
    with RawClient(trio.brokers[leaders[p]].address, timeout=30) as client:
        sent = [client.send(transactional_request(p, pid, seq, epoch, topic=TOPIC,
                                                  transactional_id=tid)) for seq in range(5)]
        got, answer = client.receive(0, 9)
        answers[got] = answer
        sent.append(client.send(transactional_request(p, pid, 5, epoch, topic=TOPIC,
                                                      transactional_id=tid)))
        while len(answers) < len(sent):
            got, answer = client.receive(0, 9)
            answers[got] = answer
    results = [answers[c].responses[0].partition_responses[0] for c in sent]
    assert [(r.error_code, r.base_offset) for r in results] == [
        (ErrorCode.none, start + seq) for seq in range(6)]
    ended = call(trio, request(26, 3, transactional_id=tid, producer_id=pid,
                               producer_epoch=epoch, committed=True), node)
    assert ended.error_code == ErrorCode.none


def test_first_batches_to_several_partitions_are_asked_about_together(trio: Trio) -> None:
    """Pipelined first batches of one transaction to four partitions of one leader: their
    questions to the coordinator wait side by side while the first is out and go together.
    Kafka keeps one waiting question per transactional id and answers a replaced one
    NETWORK_EXCEPTION; with this broker's pipelining that refused batches the client had
    every right to send (NOT_ENOUGH_REPLICAS)."""
    tid, pid, epoch, node = initialized(trio, "together")
    holder = next(b for b in sorted(trio.brokers) if b != node)
    topic = f"together-{uuid.uuid4().hex[:6]}"
    client = coordinator_client.connect(trio.url, timeout=10)
    try:
        Admin(client).create_topic(topic, assignment={p: [holder] for p in range(4)})
    finally:
        client.close()
    for broker in (holder, node):  # the leader serves it, the coordinator knows it
        wait_for_leaders(trio.brokers[broker], topic, 4)
    assert add_partitions(trio, tid, pid, epoch, (0, 1, 2, 3), topic) == dict.fromkeys(
        range(4), ErrorCode.none)
    with RawClient(trio.brokers[holder].address, timeout=30) as raw:
        sent = [raw.send(transactional_request(p, pid, 0, epoch, topic=topic,
                                               transactional_id=tid)) for p in range(4)]
        answers = dict(raw.receive(0, 9) for _ in sent)
    assert [answers[c].responses[0].partition_responses[0].error_code for c in sent] == [
        ErrorCode.none] * 4
    ended = call(trio, request(26, 3, transactional_id=tid, producer_id=pid,
                               producer_epoch=epoch, committed=True), node)
    assert ended.error_code == ErrorCode.none


def test_a_transactional_offset_commit_is_verified_too(trio: Trio) -> None:
    """TxnOffsetCommit for a group whose partition the transaction never added (no
    AddOffsetsToTxn) is refused as Kafka refuses it, and nothing is pending for the group."""
    tid, group = f"verify-offsets-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    first = init(trio, tid)
    pid, epoch = first.producer_id, first.producer_epoch
    wait_until(lambda: call(trio, request(10, 3, key=group, key_type=0)).error_code
               == ErrorCode.none, timeout=60, interval=0.2, message="a group coordinator")
    group_node = int(call(trio, request(10, 3, key=group, key_type=0)).node_id)

    def commit(version: int) -> ErrorCode:
        m = request_module(28, version)
        answer = call(trio, request(
            28, version, transactional_id=tid, group_id=group, producer_id=pid,
            producer_epoch=epoch, generation_id=-1, member_id="", group_instance_id=None,
            topics=(m.TxnOffsetCommitRequestTopic(name=TOPIC, partitions=(
                m.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=7,
                                                  committed_leader_epoch=-1,
                                                  committed_metadata=""),)),)), group_node)
        (code,) = {p.error_code for t in answer.topics for p in t.partitions}
        return ErrorCode(code)

    assert commit(3) == ErrorCode.invalid_txn_state
    assert commit(4) == ErrorCode.transaction_abortable
    added = settled(lambda: call(trio, request(
        25, 3, transactional_id=tid, producer_id=pid, producer_epoch=epoch, group_id=group),
        coordinator_of(trio, tid)))
    assert added.error_code == ErrorCode.none
    assert commit(3) == ErrorCode.none
    ended = call(trio, request(26, 3, transactional_id=tid, producer_id=pid,
                               producer_epoch=epoch, committed=True), coordinator_of(trio, tid))
    assert ended.error_code == ErrorCode.none
    reaches(trio, tid, "CompleteCommit")


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
             timeout: float = 60.0, isolation: str = "read_uncommitted") -> list[bytes]:
    """The values of ``topic`` read until ``enough`` of them."""
    consumer = ck.Consumer({"bootstrap.servers": trio.bootstrap, "group.id": uuid.uuid4().hex,
                            "auto.offset.reset": "earliest", "enable.auto.commit": False,
                            "isolation.level": isolation})
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
    """Each transaction ends with one marker on each of its partitions: a commit of 10 values,
    an abort of 5 and a commit of one value per partition over three partitions leave 18
    values and 9 control records; read_committed sees the committed 13 only."""
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
    p.begin_transaction()
    ends = [b"end-%d" % i for i in range(3)]
    for i, value in enumerate(ends):
        p.produce(topic, value=value, partition=i)
    p.commit_transaction(60)
    committed = [b"commit-%d" % i for i in range(10)] + ends
    values = read_all(trio, topic, lambda v: len(v) >= 18)
    assert sorted(values) == sorted(committed + [b"abort-%d" % i for i in range(5)])
    assert log_ends(trio, topic, 3) == [4 + 2 + 1 + 3, 3 + 2 + 1 + 3, 3 + 1 + 1 + 3]
    # every partition's last transaction is committed: once its value is read, every
    # aborted one before it would have been
    seen = read_all(trio, topic, lambda v: set(ends) <= set(v), isolation="read_committed")
    assert sorted(seen) == sorted(committed)


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


def test_an_endtxn_whose_client_left_still_sends_its_markers(trio: Trio) -> None:
    """A client that gives up on a slow EndTxn closes its connection. The commit's write to
    ``__transaction_state`` is held back (a follower of the id's partition stopped, still in
    the ISR) until after the connection closed; once it lands the markers must still go out
    and the transaction complete, or it would stay PrepareCommit with its partitions' last
    stable offsets stuck (found by the fault harness: a commit lost to read_committed)."""
    tid = f"left-{uuid.uuid4().hex[:6]}"
    first = init(trio, tid)
    pid, epoch = first.producer_id, first.producer_epoch
    assert add_partitions(trio, tid, pid, epoch, (0,)) == {0: ErrorCode.none}
    with commit_held_back(trio, tid, pid, epoch, coordinator_of(trio, tid)):
        pass  # the connection is closed with the write still waiting
    reaches(trio, tid, "CompleteCommit")


def test_the_next_transactions_first_add_waits_for_the_last_ones_end(trio: Trio) -> None:
    """A producer's next AddPartitionsToTxn, sent the moment its commit is answered, finds the
    markers still under way: Kafka answers CONCURRENT_TRANSACTIONS and the client retries after
    a backoff; partctl holds it until CompleteCommit is written and then adds the partition."""
    tid, pid, epoch, node = initialized(trio, "held")
    assert add_partitions(trio, tid, pid, epoch, (0, 1, 2)) == dict.fromkeys(
        (0, 1, 2), ErrorCode.none)
    with RawClient(trio.brokers[node].address, timeout=30) as client:
        ended = client.call(request(26, 3, transactional_id=tid, producer_id=pid,
                                    producer_epoch=epoch, committed=True))
        assert ended.error_code == ErrorCode.none
        next_add = client.call(add_request(tid, pid, epoch, (1,)))
    assert added(next_add) == {1: ErrorCode.none}
    now = describe(trio, tid)
    assert now.transaction_state == "Ongoing" and now.topics == ((TOPIC, (1,)),)


def test_an_add_waits_for_the_end_no_longer_than_the_hold(trio: Trio) -> None:
    """The commit's own write held back (a follower of the id's partition stopped, still in
    the ISR): an add waits ``partctl.transaction.add.hold.ms`` for the end, then is answered
    CONCURRENT_TRANSACTIONS with the write still waiting, and the client may ask again."""
    tid, pid, epoch, node = initialized(trio, "bounded")
    assert add_partitions(trio, tid, pid, epoch, (0,)) == {0: ErrorCode.none}
    with commit_held_back(trio, tid, pid, epoch, node):
        with RawClient(trio.brokers[node].address, timeout=3 * HOLD_MS / 1000) as client:
            asked = time.monotonic()
            next_add = client.call(add_request(tid, pid, epoch, (1,)))
            held = time.monotonic() - asked
        assert added(next_add) == {1: ErrorCode.concurrent_transactions}
        assert held >= HOLD_MS / 1000 * 0.95
        assert _commit_under_way(trio, node, tid, pid, epoch)
    reaches(trio, tid, "CompleteCommit")
    assert add_partitions(trio, tid, pid, epoch, (1,)) == {1: ErrorCode.none}


@contextmanager
def commit_held_back(trio: Trio, tid: str, pid: int, epoch: int, node: int) -> Iterator[None]:
    """A commit of ``tid`` sent to its coordinator ``node`` whose write to
    ``__transaction_state`` is held back: a follower of the id's partition stopped while in the
    ISR. The body runs with the write waiting and the EndTxn's connection open; then the
    connection closes, and the follower resumes."""
    state_partition = partition_for(tid, TXN_PARTITIONS)
    # every follower caught up just now (one stopped by an earlier test may be lagging still),
    # so that the one stopped here stays in the ISR, holding the write, for all of the body
    wait_until(lambda: len(trio.partition_state(TRANSACTION_STATE_TOPIC)[state_partition][1])
               == 3, timeout=60, message="the id's partition with its three replicas in sync")
    stopped = next(b for b in (1, 2, 3) if b != node)
    trio.brokers[stopped].signal(signal.SIGSTOP)
    try:
        with RawClient(trio.brokers[node].address, timeout=30) as ending:
            ending.send(request(26, 3, transactional_id=tid, producer_id=pid,
                                producer_epoch=epoch, committed=True))
            wait_until(lambda: _commit_under_way(trio, node, tid, pid, epoch), timeout=10,
                       interval=0.1, message="the commit's write waiting on the stopped follower")
            yield
    finally:
        trio.brokers[stopped].signal(signal.SIGCONT)


def _commit_under_way(trio: Trio, node: int, tid: str, pid: int, epoch: int) -> bool:
    """Whether coordinator ``node`` holds ``tid`` Ongoing with a change under way (another
    EndTxn is answered CONCURRENT_TRANSACTIONS): the commit not written yet."""
    if describe_at(trio.brokers[node].address, tid).transaction_state != "Ongoing":
        return False
    answer = call(trio, request(26, 3, transactional_id=tid, producer_id=pid,
                                producer_epoch=epoch, committed=True), node)
    return bool(answer.error_code == ErrorCode.concurrent_transactions)


def single_replica_topic(trio: Trio, topic: str, holder: int) -> None:
    """Create ``topic``, one partition whose only replica is on broker ``holder``."""
    client = coordinator_client.connect(trio.url, timeout=10)
    try:
        Admin(client).create_topic(topic, assignment={0: [holder]})
    finally:
        client.close()
    wait_until(lambda: trio.partition_state(topic).get(0, (-1,))[0] == holder, timeout=30,
               message=f"{topic} led by {holder}")


def registered(trio: Trio) -> set[int]:
    client = coordinator_client.connect(trio.url, timeout=10)
    try:
        return set(MetadataClient(client).brokers())
    finally:
        client.close()


def epoch_applied(trio: Trio, broker_id: int, partition: int) -> bool:
    """Whether broker ``broker_id`` has the leader epoch the controller wrote for partition
    ``partition`` of ``__transaction_state`` (the controller's LeaderAndIsr reaches a broker a
    moment after the state is written)."""
    client = coordinator_client.connect(trio.url, timeout=10)
    try:
        tp = CodecTopicPartition(topic=TRANSACTION_STATE_TOPIC, partition=partition)
        state = MetadataClient(client).partition_states([tp])[tp]
    finally:
        client.close()
    assert state is not None
    module = request_module(3, 12)
    answer = call(trio, request(3, 12, topics=(module.MetadataRequestTopic(
        topic_id=None, name=TRANSACTION_STATE_TOPIC),), allow_auto_topic_creation=False,
        include_topic_authorized_operations=False), broker_id)
    (topic,) = answer.topics
    return any(p.partition_index == partition and p.leader_epoch == state.value.leader_epoch
               for p in topic.partitions)


def test_a_new_coordinator_sends_the_markers_its_predecessor_could_not(trio: Trio) -> None:
    """The commit is decided (PrepareCommit written, EndTxn answered) while the only replica
    of a partition in the transaction is down, so its marker cannot be written; then the
    coordinator dies. The next one loads PrepareCommit from the log and sends the markers
    again; once the partition is back the transaction completes and read_committed sees it."""
    tid = f"pending-{uuid.uuid4().hex[:6]}"
    coordinator = coordinator_of(trio, tid)
    holder = next(b for b in sorted(trio.brokers) if b != coordinator)
    topic = f"single-{holder}"
    single_replica_topic(trio, topic, holder)
    p = producer(trio, tid)
    p.init_transactions(60)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=b"pending-%d" % i, partition=0)
    p.produce(TOPIC, value=b"pending-other", partition=0)
    assert p.flush(30) == 0
    killed: list[int] = []
    try:
        trio.brokers[holder].signal(signal.SIGKILL)
        assert trio.brokers[holder].wait(30) == -signal.SIGKILL
        killed.append(holder)
        # the controller takes the holder out of the ISR of the id's partition (its leader
        # epoch moves: the coordinator loads it again) before the commit is decided; a commit
        # whose answer is lost to that is retried, and waits (CONCURRENT_TRANSACTIONS) for
        # markers that cannot be written, as in Kafka
        p_txn = partition_for(tid, TXN_PARTITIONS)
        wait_until(lambda: holder not in registered(trio), timeout=60,
                   message=f"{holder}'s registration gone")
        wait_until(lambda: holder not in trio.partition_state(TRANSACTION_STATE_TOPIC)[p_txn][1],
                   timeout=60, message=f"{holder} out of the ISR")
        wait_until(lambda: epoch_applied(trio, coordinator, p_txn), timeout=60,
                   message="the new leader epoch applied on the coordinator")
        assert state_of(trio, tid) == "Ongoing"
        p.commit_transaction(120)  # decided: PrepareCommit written, answered
        assert state_of(trio, tid) == "PrepareCommit"  # the holder's marker cannot be written
        trio.brokers[coordinator].signal(signal.SIGKILL)
        assert trio.brokers[coordinator].wait(30) == -signal.SIGKILL
        killed.append(coordinator)
        wait_until(lambda: coordinator_of(trio, tid) not in killed, timeout=60,
                   message="a new coordinator")
        assert state_of(trio, tid) == "PrepareCommit"  # loaded; the marker still waits
        trio.start(holder)
        killed.remove(holder)
        reaches(trio, tid, "CompleteCommit")
        expected = {b"pending-%d" % i for i in range(3)}
        seen = read_all(trio, topic, lambda v: expected <= set(v), isolation="read_committed")
        assert set(seen) == expected
    finally:
        for victim in killed:
            trio.start(victim)
        wait_until(lambda: all(len(isr) == 3 for _, isr in trio.partition_state(TOPIC).values()),
                   timeout=60, message="full ISRs again")


@pytest.mark.skipif(not kafka_available(KAFKA_3), reason="Kafka's jars are not cached")
def test_kafkas_transactions_tool_lists_and_describes(trio: Trio) -> None:
    tid = f"tool-{uuid.uuid4().hex[:6]}"
    p = producer(trio, tid, **{"transaction.timeout.ms": 60_000})  # a JVM tool starts slowly
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
