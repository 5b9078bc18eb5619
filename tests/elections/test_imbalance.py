"""Kafka's auto leader rebalance check: per-broker imbalance ratios and election candidates."""

from __future__ import annotations

import pytest

from elections.imbalance import (
    DEFAULT_IMBALANCE_PERCENTAGE,
    BrokerImbalance,
    leader_imbalance,
)


def test_balanced_cluster_has_no_candidates():
    partitions = {
        ("t", 0): ([1, 2, 3], 1, [1, 2, 3]),
        ("t", 1): ([2, 3, 1], 2, [1, 2, 3]),
        ("t", 2): ([3, 1, 2], 3, [1, 2, 3]),
    }
    result = leader_imbalance(partitions, {1, 2, 3})
    assert result.ratios == {1: 0.0, 2: 0.0, 3: 0.0}
    assert result.candidates == ()
    assert result.imbalanced_brokers == ()


def test_broker_back_from_failure_gets_its_leadership_back():
    # Broker 1 prefers four partitions and leads none after a bounce; it is back in every ISR.
    partitions = {
        ("t", 0): ([1, 2], 2, [2, 1]),
        ("t", 1): ([1, 3], 3, [3, 1]),
        ("t", 2): ([1, 2], 2, [2, 1]),
        ("t", 3): ([1, 3], 3, [3, 1]),
        ("t", 4): ([2, 3], 2, [2, 3]),
    }
    result = leader_imbalance(partitions, {1, 2, 3})
    assert result.brokers[1] == BrokerImbalance(
        broker=1, preferred=4, not_led=4, ratio=1.0, imbalanced=True
    )
    assert result.brokers[2].ratio == 0.0
    assert 3 not in result.brokers  # prefers nothing
    assert result.candidates == (("t", 0), ("t", 1), ("t", 2), ("t", 3))


@pytest.mark.parametrize(
    ("percentage", "imbalanced"),
    [(0, True), (10, True), (19, True), (20, False), (25, False), (100, False)],
)
def test_threshold_is_exceeded_strictly(percentage, imbalanced):
    # Broker 1 prefers five partitions and another broker leads one of them: ratio 0.2.
    partitions = {p: ([1, 2], 1, [1, 2]) for p in range(5)}
    partitions[0] = ([1, 2], 2, [1, 2])
    result = leader_imbalance(partitions, {1, 2}, percentage=percentage)
    assert result.ratios[1] == pytest.approx(0.2)
    assert result.brokers[1].imbalanced is imbalanced
    assert result.candidates == ((0,) if imbalanced else ())


def test_default_percentage_is_kafkas():
    assert DEFAULT_IMBALANCE_PERCENTAGE == 10
    partitions = {p: ([1, 2], 1, [1, 2]) for p in range(10)}
    partitions[0] = ([1, 2], 2, [1, 2])  # exactly 10%: not over
    assert leader_imbalance(partitions, {1, 2}).candidates == ()
    partitions[1] = ([1, 2], 2, [1, 2])  # 20%
    assert leader_imbalance(partitions, {1, 2}).candidates == (0, 1)


def test_only_partitions_where_a_preferred_election_would_succeed():
    partitions = {
        "in-isr": ([1, 2], 2, [2, 1]),
        "not-in-isr": ([1, 2], 2, [2]),
        "already-led": ([1, 2], 1, [1, 2]),
        "no-leader": ([1, 2], -1, [1]),
    }
    result = leader_imbalance(partitions, {1, 2})
    assert result.brokers[1].not_led == 3
    assert result.candidates == ("in-isr", "no-leader")


def test_dead_preferred_broker_gets_no_candidates_but_keeps_its_ratio():
    partitions = {0: ([1, 2], 2, [2, 1]), 1: ([1, 2], 2, [2, 1])}
    result = leader_imbalance(partitions, [2])
    assert result.ratios == {1: 1.0}
    assert result.imbalanced_brokers == (1,)
    assert result.candidates == ()


def test_reassigning_partitions_count_but_are_not_candidates():
    partitions = {0: ([1, 2], 2, [1, 2]), 1: ([1, 2], 2, [1, 2])}
    result = leader_imbalance(partitions, {1, 2}, reassigning={0})
    assert result.ratios == {1: 1.0}
    assert result.candidates == (1,)


def test_deleting_partitions_are_left_out_entirely():
    partitions = {0: ([1, 2], 2, [1, 2]), 1: ([1, 2], 1, [1, 2]), 2: ([1, 2], 1, [1, 2])}
    result = leader_imbalance(partitions, {1, 2}, deleting=[0])
    assert result.brokers[1] == BrokerImbalance(
        broker=1, preferred=2, not_led=0, ratio=0.0, imbalanced=False
    )
    assert result.candidates == ()


def test_unknown_leadership_is_not_counted_as_misled():
    partitions = {0: ([1, 2], None, []), 1: ([1, 2], 2, [1, 2])}
    result = leader_imbalance(partitions, {1, 2})
    assert result.brokers[1].preferred == 2
    assert result.brokers[1].not_led == 1
    assert result.candidates == (1,)


def test_candidates_grouped_by_broker_in_id_order():
    partitions = {
        "a": ([2, 1], 1, [1, 2]),
        "b": ([1, 2], 2, [1, 2]),
        "c": ([2, 1], 1, [1, 2]),
    }
    result = leader_imbalance(partitions, {1, 2})
    assert result.candidates == ("b", "a", "c")


def test_empty_input_and_empty_assignment():
    assert leader_imbalance({}, {1}).candidates == ()
    result = leader_imbalance({0: ([], None, [])}, {1})
    assert dict(result.brokers) == {}


def test_result_is_read_only():
    result = leader_imbalance({0: ([1], 1, [1])}, {1})
    with pytest.raises(AttributeError):
        result.candidates = ()  # type: ignore[misc]
    with pytest.raises(TypeError):
        result.brokers[2] = result.brokers[1]  # type: ignore[index]


def test_negative_percentage_is_refused():
    with pytest.raises(ValueError):
        leader_imbalance({}, {1}, percentage=-1)
