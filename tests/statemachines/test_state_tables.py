"""Every (from, to) pair of both state machines against an independently written table."""

from __future__ import annotations

import itertools

import pytest

from statemachines.states import (
    PARTITION_VALID_PREVIOUS,
    REPLICA_VALID_PREVIOUS,
    InvalidTransition,
    PartitionState,
    ReplicaState,
    is_valid_transition,
    split_transitions,
)

# Written out by hand as (from, to) edges from Kafka's PartitionStateMachine, not derived from
# the module's table.
PARTITION_EDGES = {
    ("NonExistentPartition", "NewPartition"),
    ("NewPartition", "OnlinePartition"),
    ("OnlinePartition", "OnlinePartition"),
    ("OfflinePartition", "OnlinePartition"),
    ("NewPartition", "OfflinePartition"),
    ("OnlinePartition", "OfflinePartition"),
    ("OfflinePartition", "OfflinePartition"),
    ("OfflinePartition", "NonExistentPartition"),
}

# Likewise from Kafka's ReplicaStateMachine.
REPLICA_EDGES = {
    ("NonExistentReplica", "NewReplica"),
    ("NewReplica", "OnlineReplica"),
    ("OnlineReplica", "OnlineReplica"),
    ("OfflineReplica", "OnlineReplica"),
    ("ReplicaDeletionIneligible", "OnlineReplica"),
    ("NewReplica", "OfflineReplica"),
    ("OnlineReplica", "OfflineReplica"),
    ("OfflineReplica", "OfflineReplica"),
    ("ReplicaDeletionIneligible", "OfflineReplica"),
    ("OfflineReplica", "ReplicaDeletionStarted"),
    ("ReplicaDeletionStarted", "ReplicaDeletionSuccessful"),
    ("OfflineReplica", "ReplicaDeletionIneligible"),
    ("ReplicaDeletionStarted", "ReplicaDeletionIneligible"),
    ("ReplicaDeletionSuccessful", "NonExistentReplica"),
}


@pytest.mark.parametrize(
    ("current", "target"),
    list(itertools.product(PartitionState, repeat=2)),
    ids=lambda s: s.value,
)
def test_partition_transition_legality(current, target):
    expected = (current.value, target.value) in PARTITION_EDGES
    assert is_valid_transition(current, target) is expected


@pytest.mark.parametrize(
    ("current", "target"),
    list(itertools.product(ReplicaState, repeat=2)),
    ids=lambda s: s.value,
)
def test_replica_transition_legality(current, target):
    expected = (current.value, target.value) in REPLICA_EDGES
    assert is_valid_transition(current, target) is expected


def test_every_state_has_a_table_entry():
    assert set(PARTITION_VALID_PREVIOUS) == set(PartitionState)
    assert set(REPLICA_VALID_PREVIOUS) == set(ReplicaState)


def test_tables_are_read_only():
    with pytest.raises(TypeError):
        PARTITION_VALID_PREVIOUS[PartitionState.NEW] = frozenset()  # type: ignore[index]


def test_states_of_the_other_machine_are_never_legal():
    assert not is_valid_transition(ReplicaState.OFFLINE, PartitionState.ONLINE)
    assert not is_valid_transition(PartitionState.OFFLINE, ReplicaState.ONLINE)


def test_split_keeps_order_and_reports_refusals():
    batch = [
        (("t", 0), PartitionState.NEW),
        (("t", 1), PartitionState.NON_EXISTENT),
        (("t", 2), PartitionState.OFFLINE),
        (("t", 3), PartitionState.ONLINE),
    ]
    split = split_transitions(batch, PartitionState.ONLINE)
    assert split.valid == (("t", 0), ("t", 2), ("t", 3))
    assert split.invalid == (
        InvalidTransition(
            key=("t", 1), current=PartitionState.NON_EXISTENT, target=PartitionState.ONLINE
        ),
    )
    message = str(split.invalid[0])
    assert "NonExistentPartition" in message and "OnlinePartition" in message


def test_split_accepts_a_mapping_and_an_empty_batch():
    states = {("t", 0, 1): ReplicaState.OFFLINE, ("t", 0, 2): ReplicaState.ONLINE}
    split = split_transitions(states, ReplicaState.DELETION_STARTED)
    assert split.valid == (("t", 0, 1),)
    assert [i.key for i in split.invalid] == [("t", 0, 2)]
    empty = split_transitions([], ReplicaState.NEW)
    assert empty.valid == () and empty.invalid == ()
