"""Every (from, to) pair of both state machines against an independently written table;
then the broker request batch (see the note above its tests)."""

from __future__ import annotations

import itertools

import pytest

from elections import LeaderAndIsr
from interbroker.requests import (
    EPOCH_DURING_DELETE,
    NO_EPOCH,
    Endpoint,
    LeaderAndIsrRequest,
    LiveBroker,
    RequestBatch,
    StopReplicaRequest,
    TopicPartition,
    UpdateMetadataPartition,
    UpdateMetadataRequest,
)
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


# --- Broker request batch -------------------------------------------------------------------
# These pin statemachines/requests.py. They live here only because this file is the one this
# package's tests were allotted so far; they belong in a test_requests.py of their own.

T0 = TopicPartition(topic="t", partition=0)
T1 = TopicPartition(topic="t", partition=1)
LIVE = [
    LiveBroker(id=b, endpoints=(Endpoint(listener="PLAINTEXT", host=f"h{b}", port=9092),), rack="r")
    for b in (1, 2, 3)
]
EPOCHS = {1: 101, 2: 102, 3: 103}


def _state(leader: int, leader_epoch: int = 0, isr=(1, 2, 3)) -> LeaderAndIsr:
    return LeaderAndIsr(
        leader=leader,
        leader_epoch=leader_epoch,
        isr=tuple(isr),
        controller_epoch=7,
        partition_epoch=3,
    )


def test_batch_merges_into_one_request_of_each_kind_per_broker():
    batch = RequestBatch(live_brokers=LIVE)
    batch.add_leader_and_isr([1, 2, 3], T0, _state(1), [1, 2, 3], is_new=True)
    batch.add_leader_and_isr([1, 2, 3], T1, _state(2), [2, 3, 1])
    batch.add_update_metadata([1, 2], [UpdateMetadataPartition.of(T0, _state(1), [1, 2, 3])])
    batch.add_update_metadata([2, 3], [UpdateMetadataPartition.of(T1, _state(2), [2, 3, 1])])
    batch.add_stop_replica([3], T0, delete=False)
    batch.add_stop_replica([3], T1, delete=True)
    built = batch.build(controller_id=9, controller_epoch=8, broker_epochs=EPOCHS)

    assert sorted(built) == [1, 2, 3]
    assert [type(r) for r in built[1]] == [LeaderAndIsrRequest, UpdateMetadataRequest]
    kinds3 = [LeaderAndIsrRequest, UpdateMetadataRequest, StopReplicaRequest]
    assert [type(r) for r in built[3]] == kinds3
    lai = built[1][0]
    assert [(p.topic, p.partition, p.leader, p.is_new) for p in lai.partitions] == [
        ("t", 0, 1, True),
        ("t", 1, 2, False),
    ]
    assert [b.id for b in lai.live_leaders] == [1, 2]
    # One set of metadata for the whole batch, to every broker named.
    for broker in (1, 2, 3):
        um = built[broker][1]
        assert [(p.partition, p.leader) for p in um.partitions] == [(0, 1), (1, 2)]
        assert um.live_brokers == tuple(LIVE)
    stop = built[3][2]
    assert [(p.partition, p.delete, p.leader_epoch) for p in stop.partitions] == [
        (0, False, NO_EPOCH),
        (1, True, EPOCH_DURING_DELETE),
    ]


def test_every_request_carries_controller_and_target_broker_epochs():
    batch = RequestBatch(live_brokers=LIVE)
    batch.add_leader_and_isr([1, 2], T0, _state(1), [1, 2])
    batch.add_update_metadata(None)
    batch.add_stop_replica([3], T0, delete=True)
    built = batch.build(controller_id=9, controller_epoch=8, broker_epochs=EPOCHS)
    for broker, requests in built.items():
        assert requests
        for request in requests:
            assert (request.controller_id, request.controller_epoch) == (9, 8)
            assert request.broker_epoch == EPOCHS[broker]


def test_later_leader_and_isr_wins_but_new_sticks():
    batch = RequestBatch()
    batch.add_leader_and_isr([1], T0, _state(1, leader_epoch=0), [1, 2], is_new=True)
    batch.add_leader_and_isr([1], T0, _state(2, leader_epoch=1, isr=(2,)), [1, 2])
    (request,) = batch.build(1, 1, EPOCHS)[1]
    (partition,) = request.partitions
    assert (partition.leader, partition.leader_epoch, partition.isr) == (2, 1, (2,))
    assert partition.is_new
    assert (partition.controller_epoch, partition.partition_epoch) == (7, 3)


def test_delete_outranks_a_later_plain_stop():
    batch = RequestBatch()
    batch.add_stop_replica([1], T0, delete=True)
    batch.add_stop_replica([1], T0, delete=False, leader_epoch=5)
    batch.add_stop_replica([1], T1, delete=False, leader_epoch=5)
    batch.add_stop_replica([1], T1, delete=True)
    (request,) = batch.build(1, 1, EPOCHS)[1]
    assert [(p.partition, p.delete, p.leader_epoch) for p in request.partitions] == [
        (0, True, EPOCH_DURING_DELETE),
        (1, True, EPOCH_DURING_DELETE),
    ]


def test_update_metadata_to_all_live_brokers_without_partitions():
    batch = RequestBatch(live_brokers=LIVE)
    batch.add_update_metadata(None)
    built = batch.build(1, 1, EPOCHS)
    assert sorted(built) == [1, 2, 3]
    for (request,) in built.values():
        assert isinstance(request, UpdateMetadataRequest)
        assert request.partitions == ()
        assert [b.id for b in request.live_brokers] == [1, 2, 3]


def test_brokers_shutting_down_get_every_update_but_are_not_listed_live():
    """Kafka's liveOrShuttingDownBrokerIds are the recipients; the live list leaves out the
    brokers in controlled shutdown; a leader shutting down is still reachable."""
    batch = RequestBatch(live_brokers=LIVE, shutting_down=[3])
    batch.add_leader_and_isr([1, 2], T0, _state(3), [3, 1, 2])
    batch.add_update_metadata(None)
    built = batch.build(1, 1, EPOCHS)
    assert sorted(built) == [1, 2, 3]
    for broker, requests in built.items():
        (update,) = [r for r in requests if isinstance(r, UpdateMetadataRequest)]
        assert [b.id for b in update.live_brokers] == [1, 2], broker
    assert [b.id for b in built[1][0].live_leaders] == [3]


def test_unregistered_and_negative_brokers_get_nothing():
    batch = RequestBatch(live_brokers=LIVE)
    batch.add_leader_and_isr([-1, 1, 4], T0, _state(1), [1, 4])
    batch.add_stop_replica([4], T0, delete=False)
    built = batch.build(1, 1, EPOCHS)
    assert sorted(built) == [1]


def test_empty_batch_builds_nothing():
    batch = RequestBatch(live_brokers=LIVE)
    assert batch.is_empty
    assert batch.build(1, 1, EPOCHS) == {}
    batch.add_update_metadata(None)
    assert not batch.is_empty


def test_request_values_are_frozen_and_keyword_only():
    # TopicPartition is a named tuple (C-speed hashing for the controller's hot paths)
    assert TopicPartition("t", 0) == T0 and hash(TopicPartition("t", 0)) == hash(T0)
    with pytest.raises(AttributeError):
        T0.partition = 1  # type: ignore[misc]
    assert str(T0) == "t-0"


def _metadata(tp: TopicPartition, leader: int) -> UpdateMetadataPartition:
    return UpdateMetadataPartition(tp.topic, tp.partition, 1, leader, 0, (1, 2), 0, (1, 2))


def test_full_metadata_goes_out_as_given_and_later_entries_merge_into_it():
    """A failover's metadata of every partition, already in order, is shared as it is; an
    entry added to the same batch afterwards replaces its partition's and the whole is sorted
    again, as entries added one by one are."""
    a0, a1, b0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
    full = (_metadata(a0, 1), _metadata(a1, 1), _metadata(b0, 1))
    batch = RequestBatch(live_brokers=LIVE)
    batch.add_full_metadata(None, full)
    built = batch.build(1, 1, EPOCHS)
    assert all(reqs[0].partitions is full for reqs in built.values())

    batch = RequestBatch(live_brokers=LIVE)
    batch.add_full_metadata([1], full)
    batch.add_update_metadata([2], [_metadata(a0, 2), _metadata(TopicPartition("a", 2), 2)])
    built = batch.build(1, 1, EPOCHS)
    assert sorted(built) == [1, 2]
    (request,) = built[2]
    assert [(p.topic, p.partition, p.leader) for p in request.partitions] == [
        ("a", 0, 2), ("a", 1, 1), ("a", 2, 2), ("b", 0, 1)]


def test_full_metadata_with_its_topics_takes_their_ids_without_a_pass_over_it():
    """Given the topics of the entries (a superset does no harm: a broker keeps the ids of
    topics it has partitions of), their ids are looked up by name; merged with other entries,
    the batch works them out from the partitions again."""
    a0, b0 = TopicPartition("a", 0), TopicPartition("b", 0)
    full = (_metadata(a0, 1), _metadata(b0, 1))
    ids = {"a": "id-a", "b": "id-b", "c": "id-c"}
    asked: list[str] = []

    def topic_id(topic: str) -> str | None:
        asked.append(topic)
        return ids.get(topic)

    batch = RequestBatch(live_brokers=LIVE)
    batch.add_full_metadata(None, full, topics=frozenset({"a", "b", "c"}))
    (request,) = batch.build(1, 1, EPOCHS, topic_id)[1]
    assert dict(request.topic_ids) == ids and sorted(asked) == ["a", "b", "c"]

    batch = RequestBatch(live_brokers=LIVE)
    batch.add_full_metadata(None, full, topics=frozenset({"a", "b", "c"}))
    batch.add_update_metadata(None, [_metadata(TopicPartition("d", 0), 2)])
    (request,) = batch.build(1, 1, EPOCHS, topic_id)[1]
    assert dict(request.topic_ids) == {"a": "id-a", "b": "id-b"}
