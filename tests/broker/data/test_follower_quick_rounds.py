"""A follower's rounds after a full one (replication.fetcher's quick rounds): a real follower
replica manager fetching 40 partitions over the network from a real leader. A round looks again
only at the partitions the last answer touched and names only those whose fetch moved; a
partition added or removed brings a full round; what moves without an answer (a log start moved
by the follower's own retention) reaches the leader within a sweep."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import replication.fetcher as fetcher_module
from broker.fetch_client import NetworkTransport
from coordinator.codecs import TopicPartition
from tests.broker.harness import InProcessBroker
from tests.broker.protocol.test_apis import produce, records
from tests.broker.wire_client import RawClient
from tests.waiting import wait_until

TPS = [TopicPartition("t", p) for p in range(40)]


class Pair:
    def __init__(self, leader: InProcessBroker, follower: InProcessBroker,
                 transport: NetworkTransport) -> None:
        self.leader = leader
        self.follower = follower
        self.transport = transport
        self.fetcher = follower.replica_manager.fetcher
        self.sent: list[Any] = []

    def add(self, tp: TopicPartition) -> None:
        self.leader.set_partition(tp.topic, tp.partition, replicas=(1, 2))
        self.follower.set_partition(tp.topic, tp.partition, leader=1, replicas=(1, 2))

    def record_requests(self) -> None:
        endpoint = self.transport[1]
        assert endpoint is not None
        call = endpoint.connection.call

        def recording(request: Any, timeout: float | None = None) -> Any:
            self.sent.append(request)
            return call(request, timeout)

        endpoint.connection.call = recording  # type: ignore[method-assign]

    def count_lookups(self) -> list[TopicPartition]:
        """The partitions the fetcher looks up from now on, in order."""
        looked: list[TopicPartition] = []
        find: Callable[[TopicPartition], Any] = self.fetcher._partitions

        def counting(tp: TopicPartition) -> Any:
            looked.append(tp)
            return find(tp)

        self.fetcher._partitions = counting  # type: ignore[method-assign]
        return looked

    def settled(self) -> bool:
        """Every partition fetched from its log end and a full round kept for the quick ones."""
        positions = self.fetcher.positions()
        return (len(positions) == len(TPS) and not any(p.truncating for p in positions.values())
                and 1 in self.fetcher._rounds)

    def produce(self, tp: TopicPartition, n: int) -> None:
        with RawClient(self.leader.address) as client:
            client.sock.settimeout(10)
            response = client.call(produce(acks=-1, timeout_ms=10_000,
                                           data={(tp.topic, tp.partition): records(n)}))
            assert response.responses[0].partition_responses[0].error_code == 0


def named(request: Any) -> dict[tuple[str, int], tuple[int, int]]:
    """What a Fetch names: (topic, partition) -> (fetch offset, log start offset)."""
    return {(t.topic, p.partition): (p.fetch_offset, p.log_start_offset)
            for t in request.topics for p in t.partitions}


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    leader = InProcessBroker(tmp_path / "leader")
    transport = NetworkTransport(2, lambda b: leader.address if b == 1 else None,
                                 max_wait_ms=100)
    follower = InProcessBroker(tmp_path / "follower", broker_id=2, transport=transport)
    p = Pair(leader, follower, transport)
    try:
        for tp in TPS:
            p.add(tp)
        wait_until(lambda: p.transport[1] is not None)
        p.record_requests()
        yield p
    finally:
        follower.close()
        transport.close()
        leader.close()


def test_a_round_looks_again_only_at_what_the_last_answer_touched(
        pair: Pair, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fetcher_module, "SWEEP_SECONDS", 3600.0)
    wait_until(pair.settled, message="a full round over the 40 partitions")
    looked = pair.count_lookups()
    first = len(pair.sent)
    pair.produce(TPS[17], 3)  # acks=all: done once the follower fetched the records
    wait_until(lambda: pair.follower.replica_manager.status(TPS[17]).high_watermark == 3,
               message="the follower learned the HW")
    rounds = len(pair.sent) - first
    assert rounds >= 2 and 1 in pair.fetcher._rounds  # still the quick rounds
    assert set(looked) == {TPS[17]}, "only the partition an answer carried is looked at"
    asked = [named(r) for r in pair.sent[first:]]
    assert all(set(a) <= {("t", 17)} for a in asked), asked
    assert {("t", 17): (3, 0)} in asked  # its new position, once
    assert pair.follower.replica_manager.status(TPS[18]).log_end_offset == 0


def test_a_partition_added_or_removed_brings_a_full_round(
        pair: Pair, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fetcher_module, "SWEEP_SECONDS", 3600.0)
    wait_until(pair.settled)
    new = TopicPartition("t", 40)
    pair.add(new)
    pair.produce(new, 2)
    wait_until(lambda: pair.follower.replica_manager.status(new).high_watermark == 2,
               message="the partition added mid-rounds replicates")
    pair.fetcher.remove_partition(TPS[3])
    wait_until(lambda: any(t.partitions == (3,) for r in pair.sent
                           for t in r.forgotten_topics_data),
               message="the next fetch forgets the partition removed")
    wait_until(lambda: 1 in pair.fetcher._rounds, message="quick rounds again")


def test_a_log_start_moved_without_an_answer_reaches_the_leader_within_a_sweep(
        pair: Pair, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fetcher_module, "SWEEP_SECONDS", 0.3)
    wait_until(pair.settled)
    tp = TopicPartition("t", 0)
    for _ in range(5):
        pair.produce(tp, 1)
    wait_until(lambda: pair.follower.replica_manager.status(tp).high_watermark == 5)
    follower_log = pair.follower.replica_manager.partition(tp)
    assert follower_log is not None
    first = len(pair.sent)
    # as this broker's retention would: nothing the leader answers says so
    follower_log.log.maybe_increment_log_start_offset(2, high_watermark=5)
    wait_until(lambda: any(named(r).get(("t", 0), (0, 0))[1] == 2 for r in pair.sent[first:]),
               message="the follower's new log start named in a fetch")
