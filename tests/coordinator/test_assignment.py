"""Replica assignment for new topics, against Kafka's documented examples and invariants."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from coordinator.assignment import (
    IncompleteRackInfo,
    InvalidPartitions,
    InvalidReplicationFactor,
    assign_replicas,
    rack_alternated_brokers,
    start_index_for_added_partitions,
)


def test_rack_unaware_matches_kafkas_documented_example():
    # AdminUtils' scaladoc: 5 brokers, 10 partitions, 3 replicas, start index 0. Read by
    # broker column: broker-0 holds p0 and p5 first, p4 and p8 second, p3 and p7 third.
    expected = {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }
    assert assign_replicas(range(5), 10, 3, start_index=0) == expected


def test_broker_order_does_not_matter():
    a = assign_replicas([4, 2, 0, 3, 1], 10, 3, start_index=2, replica_shift=1)
    b = assign_replicas(range(5), 10, 3, start_index=2, replica_shift=1)
    assert a == b


def test_non_contiguous_broker_ids_are_used_as_ids():
    result = assign_replicas([10, 20, 30], 3, 2, start_index=0)
    assert result == {0: [10, 20], 1: [20, 30], 2: [30, 10]}


def test_rack_alternated_list_matches_kafkas_examples():
    racks = {0: "rack1", 1: "rack1", 2: "rack1", 3: "rack2", 4: "rack2", 5: "rack2"}
    racks |= {6: "rack3", 7: "rack3", 8: "rack3"}
    assert rack_alternated_brokers(racks) == [0, 3, 6, 1, 4, 7, 2, 5, 8]
    uneven = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_brokers(uneven) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated_brokers({0: "a", 1: "a", 2: "a", 3: "b"}) == [0, 3, 1, 2]


def test_rack_aware_matches_kafkas_documented_example():
    # AdminUtils' scaladoc: 6 partitions follow the rack-alternated list round-robin; the 7th
    # shifts its followers instead of repeating partition 0.
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    expected = {
        0: [0, 3, 1],
        1: [3, 1, 5],
        2: [1, 5, 4],
        3: [5, 4, 2],
        4: [4, 2, 0],
        5: [2, 0, 3],
        6: [0, 4, 2],
    }
    assert assign_replicas(racks, 7, 3, start_index=0) == expected


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize(
    ("n_brokers", "n_racks", "partitions", "rf"),
    [(6, 3, 12, 3), (9, 3, 18, 3), (6, 2, 12, 2), (8, 4, 32, 3), (5, 5, 10, 5)],
)
def test_rack_aware_spreads_replicas_over_racks(seed, n_brokers, n_racks, partitions, rf):
    racks = {b: f"rack{b % n_racks}" for b in range(n_brokers)}
    result = assign_replicas(racks, partitions, rf, rng=random.Random(seed))
    assert sorted(result) == list(range(partitions))
    for replicas in result.values():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf
        used = [racks[b] for b in replicas]
        # Distinct racks while racks remain; once all are used, every rack has one.
        assert len(set(used)) == min(rf, n_racks)
    # Partitions a multiple of brokers: every broker leads the same number of them.
    leaders = Counter(r[0] for r in result.values())
    assert set(leaders.values()) == {partitions // n_brokers}


def test_rack_aware_with_more_replicas_than_racks_covers_every_rack():
    racks = {0: "a", 1: "a", 2: "a", 3: "b", 4: "b", 5: "b"}
    result = assign_replicas(racks, 6, 4, start_index=1, replica_shift=3)
    for replicas in result.values():
        assert len(set(replicas)) == 4
        assert {racks[b] for b in replicas} == {"a", "b"}


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize(("n_brokers", "partitions", "rf"), [(5, 10, 3), (3, 30, 3), (7, 21, 2)])
def test_rack_unaware_is_even_and_never_repeats_a_broker(seed, n_brokers, partitions, rf):
    result = assign_replicas(range(n_brokers), partitions, rf, rng=random.Random(seed))
    for replicas in result.values():
        assert len(set(replicas)) == rf
    leaders = Counter(r[0] for r in result.values())
    assert set(leaders.values()) == {partitions // n_brokers}
    replicas = Counter(b for r in result.values() for b in r)
    assert set(replicas.values()) == {partitions * rf // n_brokers}


def test_same_seed_same_assignment_and_draws_come_from_the_rng():
    a = assign_replicas(range(6), 12, 3, rng=random.Random(42))
    b = assign_replicas(range(6), 12, 3, rng=random.Random(42))
    assert a == b
    draws = random.Random(42)
    start, shift = draws.randrange(6), draws.randrange(6)
    assert a == assign_replicas(range(6), 12, 3, start_index=start, replica_shift=shift)


def test_replica_shift_defaults_to_a_given_start_index():
    assert assign_replicas(range(5), 10, 3, start_index=3) == assign_replicas(
        range(5), 10, 3, start_index=3, replica_shift=3
    )


def test_added_partitions_continue_the_topic():
    whole = assign_replicas(range(5), 10, 3, start_index=0)
    head = assign_replicas(range(5), 5, 3, start_index=0)
    tail = assign_replicas(range(5), 5, 3, start_index=0, start_partition_id=5)
    assert head | tail == whole
    assert sorted(tail) == [5, 6, 7, 8, 9]


def test_start_index_for_added_partitions():
    assert start_index_for_added_partitions([5, 1, 3, 7], 3) == 1
    assert start_index_for_added_partitions([5, 1, 3, 7], 4) == 2
    assert start_index_for_added_partitions([5, 1, 3, 7], 9) == 0


@pytest.mark.parametrize("partitions", [0, -1])
def test_partitions_must_be_positive(partitions):
    with pytest.raises(InvalidPartitions):
        assign_replicas(range(3), partitions, 1)


@pytest.mark.parametrize(("brokers", "rf"), [(range(3), 4), (range(3), 0), ([], 1)])
def test_replication_factor_must_fit_the_brokers(brokers, rf):
    with pytest.raises(InvalidReplicationFactor):
        assign_replicas(brokers, 3, rf)


def test_errors_are_value_errors():
    assert issubclass(InvalidPartitions, ValueError)
    assert issubclass(InvalidReplicationFactor, ValueError)
    assert issubclass(IncompleteRackInfo, ValueError)


def test_mixed_rack_information_is_refused_unless_racks_are_ignored():
    racks = {0: "a", 1: None, 2: "b"}
    with pytest.raises(IncompleteRackInfo, match=r"\[1\]"):
        assign_replicas(racks, 3, 2, start_index=0)
    assert assign_replicas(racks, 3, 2, start_index=0, ignore_racks=True) == assign_replicas(
        range(3), 3, 2, start_index=0
    )


def test_all_racks_missing_means_rack_unaware():
    racks = dict.fromkeys(range(5))
    assert assign_replicas(racks, 10, 3, start_index=0) == assign_replicas(
        range(5), 10, 3, start_index=0
    )


def test_single_broker_single_replica():
    assert assign_replicas([7], 3, 1) == {0: [7], 1: [7], 2: [7]}
    assert assign_replicas({7: "r"}, 2, 1) == {0: [7], 1: [7]}
