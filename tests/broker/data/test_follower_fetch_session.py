"""A follower's fetch session with its leader (KIP-227) over the network: the network fetch
endpoint against a real leader broker, the requests it sends read as they go out."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.fetch_client import NetworkFetchEndpoint
from coordinator.codecs import TopicPartition
from interbroker.errors import ErrorCode
from replication.protocol import PartitionFetch
from tests.broker.harness import InProcessBroker
from tests.broker.protocol.test_apis import records

TPS = [TopicPartition("t", p) for p in range(3)]


@pytest.fixture
def leader(tmp_path: Path) -> Iterator[InProcessBroker]:
    b = InProcessBroker(tmp_path / "leader")
    for tp in TPS:
        b.set_partition(tp.topic, tp.partition, replicas=(1, 2))
    yield b
    b.close()


@pytest.fixture
def endpoint(leader: InProcessBroker) -> Iterator[tuple[NetworkFetchEndpoint, list[Any]]]:
    """The endpoint of follower 2, and the Fetch requests it sent."""
    e = NetworkFetchEndpoint(1, *leader.address, replica_id=2, max_wait_ms=0)
    sent: list[Any] = []
    call = e.connection.call

    def recording(request: Any, timeout: float) -> Any:
        sent.append(request)
        return call(request, timeout)

    e.connection.call = recording  # type: ignore[method-assign,assignment]
    yield e, sent
    e.close()


def want(tp: TopicPartition, offset: int = 0) -> PartitionFetch:
    return PartitionFetch(tp=tp, fetch_offset=offset, leader_epoch=0, last_fetched_epoch=-1,
                          max_bytes=1 << 20)


def named(request: Any) -> dict[tuple[str, int], int]:
    return {(t.topic, p.partition): p.fetch_offset for t in request.topics for p in t.partitions}


def produce(leader: InProcessBroker, tp: TopicPartition, n: int) -> None:
    leader.replica_manager.produce(tp, records(n), 1).result(5)


def test_a_follower_names_only_what_changed_and_hears_only_what_changed(
        leader: InProcessBroker, endpoint: tuple[NetworkFetchEndpoint, list[Any]]) -> None:
    e, sent = endpoint
    wants = [want(tp) for tp in TPS]
    first = e.fetch_partitions(2, wants)
    assert sorted(first) == TPS and all(r.error == ErrorCode.NONE for r in first.values())
    assert (sent[-1].session_id, sent[-1].session_epoch, len(named(sent[-1]))) == (0, 0, 3)
    sid = e.session.id
    assert sid != 0 and sid in leader.fetch_sessions

    produce(leader, TPS[1], 4)
    second = e.fetch_partitions(2, wants)
    assert (sent[-1].session_id, sent[-1].session_epoch, named(sent[-1])) == (sid, 1, {})
    assert list(second) == [TPS[1]] and len(second[TPS[1]].records) == len(records(4))

    wants[1] = want(TPS[1], 4)  # appended: only its new position is named
    third = e.fetch_partitions(2, wants)
    assert named(sent[-1]) == {("t", 1): 4}
    # the follower caught up: the leader's HW moved, which it hears (no records)
    assert list(third) == [TPS[1]]
    assert (third[TPS[1]].high_watermark, third[TPS[1]].records) == (4, b"")

    assert e.fetch_partitions(2, wants[:2]) == {}  # drops partition 2
    assert sent[-1].forgotten_topics_data[0].partitions == (2,)
    session = leader.fetch_sessions.get(sid)
    assert session is not None and sorted(session.partitions) == [("t", 0), ("t", 1)]
    assert e.session_errors == 0


def opened(endpoint: tuple[NetworkFetchEndpoint, list[Any]]
           ) -> tuple[NetworkFetchEndpoint, list[Any], list[PartitionFetch], int]:
    """The endpoint after a first, full fetch of every partition: it, the requests sent, the
    partitions it fetches, and the session that fetch opened."""
    e, sent = endpoint
    wants = [want(tp) for tp in TPS]
    e.fetch_partitions(2, wants)
    return e, sent, wants, e.session.id


def test_a_leader_that_lost_the_session_is_asked_in_full_at_once(
        leader: InProcessBroker, endpoint: tuple[NetworkFetchEndpoint, list[Any]]) -> None:
    e, sent, wants, old = opened(endpoint)
    leader.fetch_sessions.remove(old)  # as a restarted leader, or one that evicted it
    produce(leader, TPS[0], 2)
    results = e.fetch_partitions(2, wants)
    assert [r.session_epoch for r in sent] == [0, 1, 0]  # refused, then full in the same call
    assert sorted(results) == TPS and len(results[TPS[0]].records) == len(records(2))
    assert e.session_errors == 1 and e.session.id not in (0, old)
    assert e.fetch_partitions(2, wants)[TPS[0]].records  # incremental again: still at 0
    assert sent[-1].session_epoch == 1


def test_a_full_fetch_naming_the_session_replaces_it(
        leader: InProcessBroker, endpoint: tuple[NetworkFetchEndpoint, list[Any]]) -> None:
    e, sent, wants, old = opened(endpoint)
    e.session.reset()  # what a failed call does (the leader may or may not have seen it)
    e.fetch_partitions(2, wants)
    assert (sent[-1].session_id, sent[-1].session_epoch) == (old, 0)  # closes the old one
    assert old not in leader.fetch_sessions and e.session.id in leader.fetch_sessions
    assert len(leader.fetch_sessions) == 1
