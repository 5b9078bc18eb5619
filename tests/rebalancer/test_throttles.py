"""Replication throttles for a reassignment (as Kafka's tool sets and removes them), and the
per-broker limit on concurrent moves, on a live memory cluster (tests.rebalancer.test_execution)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from coordinator import layout
from rebalancer import execute_plan, verify_plan
from rebalancer.throttles import parse_rate, remove_throttles, set_throttles, throttle_targets
from tests.rebalancer.test_execution import Live, plan_of, tp


@pytest.fixture
def live() -> Iterator[Live]:
    cluster = Live()
    yield cluster
    cluster.close()


LR, FR = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
LRep, FRep = "leader.replication.throttled.replicas", "follower.replication.throttled.replicas"


@pytest.mark.parametrize(("text", "rate"), [("50MB/s", 50_000_000), ("1MiB/s", 1 << 20),
                                            ("1000000", 1_000_000), ("1.5kb", 1500),
                                            ("20 MB/s", 20_000_000)])
def test_rates_parse_with_units(text: str, rate: int) -> None:
    assert parse_rate(text) == rate


@pytest.mark.parametrize("text", ["-5", "x", "0", "5 parsecs", "", "MB/s"])
def test_bad_rates_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_rate(text)


def test_leaders_are_the_current_replicas_and_followers_the_adding_ones() -> None:
    current = {tp("t", 0): (1, 2), tp("t", 1): (2, 3), tp("u", 0): (1, 3)}
    plan = plan_of({tp("t", 0): [1, 4], tp("t", 1): [2, 3], tp("u", 0): [3, 2]})
    brokers, topics = throttle_targets(current, plan)
    assert brokers == {1, 2, 3, 4}  # t-1 does not move: it involves no broker
    assert topics == {"t": {LRep: "0:1,0:2", FRep: "0:4"},
                      "u": {LRep: "0:1,0:3", FRep: "0:2"}}


def test_set_then_remove_throttles(live: Live) -> None:
    live.create("t", {0: [1, 2], 1: [2, 3]})
    live.create("other", {0: [1, 2]})
    live.admin.alter_topic_config("other", set={"retention.ms": "1000"})
    plan = plan_of({tp("t", 0): [3, 4], tp("t", 1): [2, 3]})
    change = set_throttles(live.client, plan, 1_000_000)
    assert change.brokers == (1, 2, 3, 4)
    for b in (1, 2, 3, 4):
        assert live.md.broker_config(b).value == {LR: "1000000", FR: "1000000"}
    assert live.admin.topic_config("t") == {LRep: "0:1,0:2", FRep: "0:3,0:4"}
    entities = {e for _, e in live.md.read_config_changes(live.md.config_change_notifications())}
    assert {("brokers", str(b)) for b in (1, 2, 3, 4)} | {("topics", "t")} <= entities
    removed = remove_throttles(live.client, ["t", "other", "gone"])
    assert removed.brokers == (1, 2, 3, 4) and set(removed.topics) == {"t"}
    for b in (1, 2, 3, 4):
        assert live.md.broker_config(b).value == {}
    assert live.admin.topic_config("t") == {}
    assert live.admin.topic_config("other") == {"retention.ms": "1000"}  # untouched
    assert remove_throttles(live.client, ["t"]).brokers == ()  # nothing left: no writes


def test_execute_with_a_throttle_sets_it_before_the_moves(live: Live) -> None:
    live.create("t", {0: [1, 2]})
    plan = plan_of({tp("t", 0): [1, 3]})
    result = execute_plan(live.client, plan, poll_interval=0.05, timeout=30, throttle=2000)
    assert result.ok
    assert live.md.broker_config(3).value == {LR: "2000", FR: "2000"}
    assert live.admin.topic_config("t") == {LRep: "0:1,0:2", FRep: "0:3"}
    assert verify_plan(live.client, plan).all_done


def test_at_most_n_moves_change_one_broker_at_once() -> None:
    cluster = Live(delay=0.1)  # moves take a little while, so they would overlap
    try:
        cluster.create("t", {p: [1 + p % 3] for p in range(6)})
        # every move adds a replica on broker 4; brokers 1-3 each lose two
        plan = plan_of({tp("t", p): [4] for p in range(6)})
        peaks: list[int] = []
        watch = cluster.client.watch_data(
            layout.REASSIGN_PARTITIONS,
            lambda e: peaks.append(0 if e.data is None else e.data.count(b'"topic"')))
        result = execute_plan(cluster.client, plan, max_concurrent_moves=5,
                              max_moves_per_broker=2, poll_interval=0.02, timeout=60)
        watch.cancel()
        assert result.ok and len(result.done) == 6
        assert max(peaks) == 2  # broker 4 is in every move: two at a time, not five
    finally:
        cluster.close()
    with pytest.raises(ValueError):
        execute_plan(cluster.client, plan, max_moves_per_broker=0)
