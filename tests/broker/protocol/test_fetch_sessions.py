"""Incremental fetch sessions (KIP-227) on the wire: a broker's answers to full, incremental,
closing and erroneous fetches, from consumers and from followers."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.apis import fetch_follower
from broker.fetch_sessions import FetchSessionCache
from coordinator.codecs import TopicPartition
from kafkaclient.messages import build
from tests.broker.harness import InProcessBroker
from tests.broker.protocol.test_apis import produce as produce_request
from tests.broker.protocol.test_apis import records
from tests.broker.wire_client import RawClient, request, request_module

Offsets = Sequence[tuple[int, int]]


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[InProcessBroker]:
    b = InProcessBroker(tmp_path / "logs")
    for p in range(3):
        b.set_partition("t", p)
    yield b
    b.close()


def fetch(session_id: int, epoch: int, parts: Offsets = (), *, forget: Sequence[int] = (),
          version: int = 12, replica_id: int = -1, max_wait_ms: int = 0,
          topic: str | uuid.UUID = "t") -> object:
    m = request_module(1, version)
    named = {"topic_id": topic} if version >= 13 else {"topic": topic}
    partitions = tuple(build(m.FetchPartition, partition=p, current_leader_epoch=-1,
                             fetch_offset=o, log_start_offset=-1, partition_max_bytes=1 << 20)
                       for p, o in parts)
    topics = (build(m.FetchTopic, partitions=partitions, **named),) if parts else ()
    forgotten = (build(m.ForgottenTopic, partitions=tuple(forget), **named),) if forget else ()
    return request(1, version, replica_id=replica_id, max_wait=timedelta(milliseconds=max_wait_ms),
                   min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=session_id,
                   session_epoch=epoch, topics=topics, forgotten_topics_data=forgotten,
                   rack_id="")


def answered(response: Any) -> dict[int, tuple[ErrorCode, int, int]]:
    """partition -> (error, high watermark, bytes of records)."""
    return {p.partition_index: (p.error_code, p.high_watermark, len(p.records or b""))
            for t in response.responses for p in t.partitions}


def produce(broker: InProcessBroker, partition: int, n: int = 1) -> None:
    broker.replica_manager.produce(TopicPartition("t", partition), records(n), 1).result(5)


ALL = ((0, 0), (1, 0), (2, 0))


def test_a_full_fetch_at_epoch_0_opens_a_session_that_answers_only_what_changed(
        broker: InProcessBroker) -> None:
    produce(broker, 0, 2)
    with RawClient(broker.address) as client:
        full = client.call(fetch(0, 0, ALL))
        sid = full.session_id
        assert sid != 0 and full.error_code == ErrorCode.none
        assert answered(full) == {0: (ErrorCode.none, 2, len(records(2))),
                                  1: (ErrorCode.none, 0, 0), 2: (ErrorCode.none, 0, 0)}
        # the consumer moved partition 0 on; nothing new anywhere: an empty answer
        quiet = client.call(fetch(sid, 1, [(0, 2)]))
        assert (quiet.error_code, quiet.session_id, answered(quiet)) == (ErrorCode.none, sid, {})
        produce(broker, 1, 3)
        moved = client.call(fetch(sid, 2))  # names nothing: the session's partitions are read
        assert answered(moved) == {1: (ErrorCode.none, 3, len(records(3)))}
        # partition 1's records were answered, but its position was not moved on: the same
        # records again (they are records), and the unchanged HW alone would not be
        again = client.call(fetch(sid, 3))
        assert answered(again) == {1: (ErrorCode.none, 3, len(records(3)))}
        done = client.call(fetch(sid, 4, [(1, 3)]))
        assert answered(done) == {}
    session = broker.fetch_sessions.get(sid)
    assert session is not None and session.epoch == 5
    assert [p for _t, p in session.partitions] == [0, 2, 1]  # records moved 1 behind


def test_session_errors_answer_nothing_and_change_nothing(broker: InProcessBroker) -> None:
    with RawClient(broker.address) as client:
        sid = client.call(fetch(0, 0, ALL)).session_id
        unknown = client.call(fetch(sid + 1 if sid < 0x7FFFFFFF else 1, 1, [(0, 5)]))
        assert (unknown.error_code, unknown.responses) == (
            ErrorCode.fetch_session_id_not_found, ())
        ahead = client.call(fetch(sid, 2, [(0, 5)]))
        assert (ahead.error_code, ahead.responses) == (ErrorCode.invalid_fetch_session_epoch, ())
        by_id = client.call(fetch(sid, 1, version=13, topic=uuid.uuid4()))
        assert by_id.error_code == ErrorCode.fetch_session_topic_id_error
        session = broker.fetch_sessions.get(sid)
        assert session is not None and session.epoch == 1
        assert session.partitions[("t", 0)].fetch_offset == 0  # the refused (0, 5) not taken
        produce(broker, 2)
        assert answered(client.call(fetch(sid, 1))) == {2: (ErrorCode.none, 1, len(records(1)))}


def test_forgetting_every_partition_or_the_final_epoch_closes_the_session(
        broker: InProcessBroker) -> None:
    cache = broker.fetch_sessions
    with RawClient(broker.address) as client:
        sid = client.call(fetch(0, 0, ALL)).session_id
        partial = client.call(fetch(sid, 1, forget=[0, 1]))
        assert (partial.session_id, answered(partial)) == (sid, {})
        produce(broker, 0)  # forgotten: not read any more
        assert answered(client.call(fetch(sid, 2))) == {}
        last = client.call(fetch(sid, 3, forget=[2]))
        assert (last.error_code, last.session_id, last.responses) == (ErrorCode.none, 0, ())
        assert sid not in cache
        assert client.call(fetch(sid, 4)).error_code == ErrorCode.fetch_session_id_not_found

        other = client.call(fetch(0, 0, ALL)).session_id
        final = client.call(fetch(other, -1, [(0, 0)]))  # closes it, answered without one
        assert (final.session_id, answered(final)) == (0, {0: (ErrorCode.none, 1, len(
            records(1)))})
        assert other not in cache and len(cache) == 0
        # epoch 0 naming a session replaces it
        first = client.call(fetch(0, 0, ALL)).session_id
        second = client.call(fetch(first, 0, ALL)).session_id
        assert first not in cache and second in cache and len(cache) == 1


def parked(client: RawClient, body: object) -> int:
    """Send ``body`` and see it parked (no answer within 0.3 s); its correlation id. The
    client then waits up to 30 s for an answer."""
    client.sock.settimeout(30)
    correlation = client.send(body)
    client.sock.settimeout(0.3)
    with pytest.raises(TimeoutError):
        client.sock.recv(1)
    client.sock.settimeout(30)
    return correlation


def test_a_parked_incremental_fetch_answers_the_partition_appended_to(
        broker: InProcessBroker) -> None:
    with RawClient(broker.address) as poller:
        sid = poller.call(fetch(0, 0, ALL)).session_id
        correlation = parked(poller, fetch(sid, 1, max_wait_ms=30_000))  # nothing new
        with RawClient(broker.address) as producer:  # the Produce API wakes parked fetches
            producer.call(produce_request(acks=1, data={("t", 2): records(2)}))
        got, response = poller.receive(1, 12)
    assert got == correlation
    assert answered(response) == {2: (ErrorCode.none, 2, len(records(2)))}


def test_an_error_is_always_answered_and_the_partition_again_once_it_clears(
        broker: InProcessBroker) -> None:
    with RawClient(broker.address) as client:
        sid = client.call(fetch(0, 0, ALL)).session_id
        broker.set_partition("t", 1, leader=2, leader_epoch=1, replicas=(2, 1))
        for epoch in (1, 2):  # each time, not only when it changes
            assert answered(client.call(fetch(sid, epoch))) == {
                1: (ErrorCode.not_leader_or_follower, -1, 0)}
        broker.set_partition("t", 1, leader_epoch=2, replicas=(1, 2))
        back = client.call(fetch(sid, 3))
        assert answered(back) == {1: (ErrorCode.none, 0, 0)}  # its HW, said again


def test_sessions_by_topic_id_from_version_13(broker: InProcessBroker) -> None:
    t_id = uuid.uuid4()
    broker.metadata.set_topic_ids({"t": t_id})
    with RawClient(broker.address) as client:
        full = client.call(fetch(0, 0, ALL, version=13, topic=t_id))
        sid = full.session_id
        assert sid != 0 and full.responses[0].topic_id == t_id
        produce(broker, 0)
        moved = client.call(fetch(sid, 1, version=13, topic=t_id))
        assert [t.topic_id for t in moved.responses] == [t_id]
        assert answered(moved) == {0: (ErrorCode.none, 1, len(records(1)))}
        forgot = client.call(fetch(sid, 2, [(0, 1)], forget=[1, 2], version=13, topic=t_id))
        assert answered(forgot) == {}
        by_name = client.call(fetch(sid, 3, [(0, 1)], version=12))
        assert by_name.error_code == ErrorCode.fetch_session_topic_id_error
    session = broker.fetch_sessions.get(sid)
    assert session is not None and list(session.partitions) == [(t_id, 0)]


def test_a_full_cache_leaves_a_consumer_on_full_fetches_and_a_follower_takes_its_place(
        tmp_path: Path) -> None:
    broker = InProcessBroker(tmp_path / "logs", max_incremental_fetch_session_cache_slots=1)
    try:
        broker.set_partition("t", 0, replicas=(1, 2))
        cache = broker.fetch_sessions
        with RawClient(broker.address) as client:
            consumer = client.call(fetch(0, 0, [(0, 0)])).session_id
            assert consumer != 0
            refused = client.call(fetch(0, 0, [(0, 0)]))  # another consumer: no room
            assert (refused.error_code, refused.session_id, len(answered(refused))) == (
                ErrorCode.none, 0, 1)
            follower = client.call(fetch(0, 0, [(0, 0)], replica_id=2)).session_id
            assert follower != 0 and follower in cache and consumer not in cache
            assert cache.evictions == 1
            again = client.call(fetch(0, 0, [(0, 0)]))  # a consumer cannot take a follower's
            assert again.session_id == 0 and follower in cache
    finally:
        broker.close()


def test_no_sessions_when_the_cache_has_no_slots(tmp_path: Path) -> None:
    broker = InProcessBroker(tmp_path / "logs", max_incremental_fetch_session_cache_slots=0)
    try:
        broker.set_partition("t", 0)
        with RawClient(broker.address) as client:
            full = client.call(fetch(0, 0, [(0, 0)]))
            assert (full.session_id, len(answered(full))) == (0, 1)
    finally:
        broker.close()


def test_a_broker_opens_sessions_for_followers_only_by_default(broker: InProcessBroker) -> None:
    broker.fetch_sessions.serves_consumers = FetchSessionCache().serves_consumers
    broker.set_partition("f", 0, replicas=(1, 2))
    with RawClient(broker.address) as client:
        consumer = client.call(fetch(0, 0, ALL))
        assert (consumer.error_code, consumer.session_id, len(answered(consumer))) == (
            ErrorCode.none, 0, 3)
        follower = client.call(fetch(0, 0, [(0, 0)], replica_id=2, topic="f"))
        assert follower.session_id != 0
    assert len(broker.fetch_sessions) == 1


# --- a follower's parked fetch: what a wake and the deadline read again ---------------------


@pytest.fixture
def leader_of_many(tmp_path: Path) -> Iterator[tuple[InProcessBroker, Counter[TopicPartition]]]:
    """A leader of 40 partitions of "t" (replicas 1, 2, 3, all in sync), and how often the
    fetch path has looked each one up since the test last cleared the count."""
    b = InProcessBroker(tmp_path / "logs")
    for p in range(40):
        b.set_partition("t", p, replicas=(1, 2, 3))
    looked: Counter[TopicPartition] = Counter()
    rm = b.replica_manager
    find = rm.partition

    def counting(tp: TopicPartition) -> Any:
        looked[tp] += 1
        return find(tp)

    rm.partition = counting  # type: ignore[method-assign]
    yield b, looked
    b.close()


def follower_session(client: RawClient, replica_id: int, offsets: dict[int, int]) -> int:
    """Open follower ``replica_id``'s session on every partition of ``offsets`` and make one
    incremental fetch, so that each partition's last read found it caught up."""
    sid = client.call(fetch(0, 0, sorted(offsets.items()), replica_id=replica_id)).session_id
    assert sid != 0
    client.call(fetch(sid, 1, replica_id=replica_id))
    return sid


def test_a_wake_of_one_partition_looks_at_it_alone_and_the_answer_reads_only_it_again(
        leader_of_many: tuple[InProcessBroker, Counter[TopicPartition]]) -> None:
    broker, looked = leader_of_many
    with RawClient(broker.address) as poller:
        sid = follower_session(poller, 2, dict.fromkeys(range(40), 0))
        looked.clear()
        correlation = parked(poller, fetch(sid, 2, replica_id=2, max_wait_ms=10_000))
        assert not looked  # nothing moved since the last answer: the arrival looked at none
        looked.clear()
        with RawClient(broker.address) as producer:
            producer.call(produce_request(acks=1, data={("t", 17): records(2)}))
        got, response = poller.receive(1, 12)
    assert got == correlation
    assert answered(response) == {17: (ErrorCode.none, 0, len(records(2)))}
    # the produce's own lookups aside, the wake and the answer looked at partition 17 only
    assert set(looked) == {TopicPartition("t", 17)}


def test_a_parked_fetch_at_its_deadline_answers_what_it_read_on_arrival_and_what_moved(
        leader_of_many: tuple[InProcessBroker, Counter[TopicPartition]]) -> None:
    """Partition 5's HW moves while follower 2's fetch is parked (follower 3 catches up):
    a wake that completes nothing, but the answer at the deadline reads that partition again
    and carries its HW. No other partition is read again."""
    broker, looked = leader_of_many
    with RawClient(broker.address) as client:
        client.call(produce_request(acks=1, data={("t", 5): records(3)}))
    with RawClient(broker.address) as poller, RawClient(broker.address) as other:
        offsets = dict.fromkeys(range(40), 0) | {5: 3}
        sid = follower_session(poller, 2, offsets)
        other.call(fetch(0, -1, [(5, 0)], replica_id=3))  # follower 3 reads, HW stays 0
        looked.clear()
        correlation = parked(poller, fetch(sid, 2, replica_id=2, max_wait_ms=1_500))
        arrival = dict(looked)
        looked.clear()
        moved = answered(other.call(fetch(0, -1, [(5, 3)], replica_id=3)))
        assert moved == {5: (ErrorCode.none, 3, 0)}  # follower 3 caught up: HW 3
        got, response = poller.receive(1, 12)
    assert got == correlation
    assert answered(response) == {5: (ErrorCode.none, 3, 0)}
    assert not arrival  # nothing moved since the last answer
    # follower 3's fetch, the wake it caused and the read at the deadline: partition 5 only
    assert set(looked) == {TopicPartition("t", 5)}


def test_a_parked_fetch_not_woken_answers_its_arrival_reads_and_the_next_tells_the_rest(
        leader_of_many: tuple[InProcessBroker, Counter[TopicPartition]]) -> None:
    """DeleteRecords moves partition 9's log start without waking anything: the parked fetch
    answers at its deadline as it read on arrival, without reading any partition again, and
    the next fetch tells the new log start."""
    broker, looked = leader_of_many
    tp = TopicPartition("t", 9)
    partition = broker.replica_manager.partition(tp)
    assert partition is not None
    broker.replica_manager.produce(tp, records(4), 1).result(5)
    with RawClient(broker.address) as poller, RawClient(broker.address) as other:
        sid = follower_session(poller, 2, dict.fromkeys(range(40), 0) | {9: 4})
        other.call(fetch(0, -1, [(9, 4)], replica_id=3))  # both caught up: HW 4
        assert answered(poller.call(fetch(sid, 2, replica_id=2))) == {
            9: (ErrorCode.none, 4, 0)}
        correlation = parked(poller, fetch(sid, 3, replica_id=2, max_wait_ms=1_000))
        looked.clear()
        assert partition.delete_records(2).error == 0
        got, response = poller.receive(1, 12)
        assert got == correlation and answered(response) == {}
        assert not looked  # nothing read again at the deadline
        starts = {p.partition_index: p.log_start_offset
                  for t in poller.call(fetch(sid, 4, replica_id=2)).responses
                  for p in t.partitions}
    assert starts == {9: 2}


def test_a_follower_session_reads_in_its_order_after_a_partition_moves_to_the_end(
        leader_of_many: tuple[InProcessBroker, Counter[TopicPartition]]) -> None:
    """A partition that returned records goes behind the others: the next fetches read (and
    answer) in the new order, and a partition the follower adds is read from then on."""
    broker, _looked = leader_of_many
    with RawClient(broker.address) as client, RawClient(broker.address) as producer:
        sid = follower_session(client, 2, {0: 0, 1: 0, 2: 0})
        producer.call(produce_request(acks=1, data={("t", 0): records(1)}))
        assert list(answered(client.call(fetch(sid, 2, replica_id=2)))) == [0]
        client.call(fetch(sid, 3, [(0, 1)], replica_id=2))  # caught up on 0
        producer.call(produce_request(acks=1, data={("t", p): records(1) for p in (0, 1)}))
        assert list(answered(client.call(fetch(sid, 4, replica_id=2)))) == [1, 0]
        producer.call(produce_request(acks=1, data={("t", 30): records(1)}))
        added = answered(client.call(fetch(sid, 5, [(0, 2), (1, 1), (30, 0)], replica_id=2)))
    assert added[30][2] == len(records(1))


def test_a_follower_fetch_looks_at_what_moved_since_its_last_answer_and_the_sweep_at_all(
        leader_of_many: tuple[InProcessBroker, Counter[TopicPartition]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An append to partition 12 and one to 30 between two fetches: the second looks at
    those two alone. A sweep due looks at every partition."""
    broker, looked = leader_of_many
    with RawClient(broker.address) as poller, RawClient(broker.address) as producer:
        sid = follower_session(poller, 2, dict.fromkeys(range(40), 0))
        looked.clear()
        assert answered(poller.call(fetch(sid, 2, replica_id=2))) == {}
        assert not looked
        producer.call(produce_request(acks=1, data={("t", 12): records(1),
                                                    ("t", 30): records(2)}))
        looked.clear()
        got = answered(poller.call(fetch(sid, 3, replica_id=2)))
        assert set(got) == {12, 30} and set(looked) == {TopicPartition("t", p) for p in (12, 30)}
        looked.clear()
        assert answered(poller.call(fetch(sid, 4, [(12, 1), (30, 2)], replica_id=2))) == {}
        assert set(looked) == {TopicPartition("t", p) for p in (12, 30)}  # named again
        looked.clear()
        assert answered(poller.call(fetch(sid, 5, replica_id=2))) == {}
        assert not looked
        monkeypatch.setattr(fetch_follower, "SWEEP_MS", 0)
        assert answered(poller.call(fetch(sid, 6, replica_id=2))) == {}
        assert len(looked) == 40


def test_a_follower_fetching_quiet_partitions_stays_in_sync_by_the_sweeps(
        tmp_path: Path) -> None:
    """Follower 2 fetches its session of 40 quiet partitions for longer than
    ``replica.lag.time.max.ms`` (600 ms): the fetches that look at none of them leave it
    caught up by the sweeps. An append to each then puts it behind until its next fetch,
    and the ISR check made before that fetch keeps it everywhere (Kafka's rule: behind,
    but caught up within the lag allowed)."""
    broker = InProcessBroker(tmp_path / "logs", replica_lag_time_max_ms=600,
                             replica_fetch_wait_max_ms=100)
    try:
        for p in range(40):
            broker.set_partition("t", p, replicas=(1, 2))
        partitions = [broker.replica_manager.partition(TopicPartition("t", p))
                      for p in range(40)]
        with RawClient(broker.address) as poller:
            sid = follower_session(poller, 2, dict.fromkeys(range(40), 0))
            start = time.monotonic()
            epoch = 2
            while time.monotonic() - start < 1.5:  # 2.5 times the lag allowed
                assert answered(poller.call(fetch(sid, epoch, replica_id=2,
                                                  max_wait_ms=50))) == {}
                epoch += 1
        for p in range(40):
            produce(broker, p)
        assert not any(p.maybe_shrink_isr() for p in partitions if p is not None)
        assert all(p is not None and p.isr == (1, 2) for p in partitions)
    finally:
        broker.close()


def test_a_leadership_change_answers_a_parked_follower_fetch_and_the_next_looks_at_all(
        leader_of_many: tuple[InProcessBroker, Counter[TopicPartition]]) -> None:
    """Partition 7 gets another leader while follower 2's fetch is parked on its session:
    the wake of every parked fetch answers it at once with partition 7's error, and the
    next fetch, with a wake of everything since its last answer, looks at every partition."""
    broker, looked = leader_of_many
    with RawClient(broker.address) as poller:
        sid = follower_session(poller, 2, dict.fromkeys(range(40), 0))
        looked.clear()
        correlation = parked(poller, fetch(sid, 2, replica_id=2, max_wait_ms=20_000))
        assert not looked
        broker.set_partition("t", 7, leader=3, leader_epoch=1, replicas=(1, 2, 3))
        got, response = poller.receive(1, 12)
        assert got == correlation
        assert answered(response) == {7: (ErrorCode.not_leader_or_follower, -1, 0)}
        looked.clear()
        poller.call(fetch(sid, 3, replica_id=2))
        assert len(looked) == 40
