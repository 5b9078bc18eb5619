"""The pure rules of KIP-848 consumer groups: the server assignors (uniform: balanced within
one and sticky; range: co-partitioned per topic) and member reconciliation (revoke before
assign, unreleased partitions wait for their owner), and the records' formats."""

from __future__ import annotations

import uuid

import pytest

from broker.groups.assignors import range_assign, uniform_assign
from broker.groups.consumer_group import (
    ConsumerGroup,
    ConsumerMember,
    GroupState,
    MemberState,
    reconcile,
    subscribed,
)
from broker.groups.consumer_records import (
    ConsumerGroupKey,
    ConsumerMemberKey,
    CurrentAssignmentValue,
    GroupEpochValue,
    MemberMetadataValue,
    PartitionMetadataValue,
    TargetAssignmentEpochValue,
    TargetMemberValue,
)
from broker.groups.records import decode_key, decode_value, encode_key, encode_value

A, B = uuid.UUID(int=1), uuid.UUID(int=2)


def counts(assignment: dict) -> list[int]:
    return sorted(sum(len(ps) for ps in parts.values()) for parts in assignment.values())


def flat(assignment: dict) -> list[tuple]:
    return sorted((t, p) for parts in assignment.values() for t, ps in parts.items() for p in ps)


@pytest.mark.parametrize("members", [1, 2, 3, 5, 7])
@pytest.mark.parametrize("partitions", [1, 6, 10, 300])
def test_uniform_is_balanced_within_one_and_covers_every_partition_once(
        members: int, partitions: int) -> None:
    subs = {f"m{i}": {A, B} for i in range(members)}
    result = uniform_assign(subs, {A: partitions, B: 3}, {})
    sizes = counts(result)
    assert sizes[-1] - sizes[0] <= 1
    assert flat(result) == sorted([(A, p) for p in range(partitions)] + [(B, p) for p in range(3)])


def test_uniform_is_sticky_when_a_member_joins_and_when_one_leaves() -> None:
    subs = {"a": {A}, "b": {A}, "c": {A}}
    first = uniform_assign(subs, {A: 12}, {})
    second = uniform_assign({**subs, "d": {A}}, {A: 12}, first)
    assert counts(second) == [3, 3, 3, 3]
    for m in "abc":  # each old member only lost partitions, never swapped any
        assert second[m][A] <= first[m][A]
    third = uniform_assign({"a": {A}, "b": {A}, "d": {A}}, {A: 12}, second)
    assert counts(third) == [4, 4, 4]
    for m in "abd":
        assert second[m][A] <= third[m][A]


def test_uniform_with_different_subscriptions_gives_each_topic_to_its_subscribers() -> None:
    subs = {"a": {A}, "b": {A, B}, "c": {B}}
    result = uniform_assign(subs, {A: 4, B: 4}, {})
    assert B not in result["a"] and A not in result["c"]
    assert counts(result)[-1] - counts(result)[0] <= 1
    assert len(flat(result)) == 8


def test_range_co_partitions_topics_with_the_same_partition_count() -> None:
    subs = {"m1": {A, B}, "m2": {A, B}, "m3": {A, B}}
    result = range_assign(subs, {A: 7, B: 7}, {})
    assert result["m1"] == {A: {0, 1, 2}, B: {0, 1, 2}}
    assert result["m2"] == {A: {3, 4}, B: {3, 4}}
    assert result["m3"] == {A: {5, 6}, B: {5, 6}}


def test_range_assigns_each_topic_among_its_own_subscribers() -> None:
    result = range_assign({"m1": {A}, "m2": {A, B}}, {A: 4, B: 3}, {})
    assert result == {"m1": {A: {0, 1}}, "m2": {A: {2, 3}, B: {0, 1, 2}}}


def member(epoch: int = 1, assigned: dict | None = None) -> ConsumerMember:
    return ConsumerMember(member_id="m", member_epoch=epoch, previous_epoch=epoch - 1,
                          assigned=assigned or {})


def test_partitions_leaving_are_revoked_before_anything_is_assigned() -> None:
    m = member(1, {A: {0, 1}})
    step = reconcile(m, 2, {A: {1, 2}}, owned={A: {0, 1}}, is_free=lambda t, p: True)
    assert step.state is MemberState.UNREVOKED_PARTITIONS
    assert step.member_epoch == 1, "the epoch moves only once the revocation is done"
    assert step.assigned == {A: {1}} and step.pending_revocation == {A: {0}}


def test_a_revocation_completes_only_when_the_member_says_it_let_go() -> None:
    m = member(1, {A: {1}})
    m.state, m.pending_revocation = MemberState.UNREVOKED_PARTITIONS, {A: {0}}
    still = reconcile(m, 2, {A: {1, 2}}, owned={A: {0, 1}}, is_free=lambda t, p: True)
    assert still.state is MemberState.UNREVOKED_PARTITIONS
    silent = reconcile(m, 2, {A: {1, 2}}, owned=None, is_free=lambda t, p: True)
    assert silent.state is MemberState.UNREVOKED_PARTITIONS
    done = reconcile(m, 2, {A: {1, 2}}, owned={A: {1}}, is_free=lambda t, p: True)
    assert (done.state, done.member_epoch, done.previous_epoch) == (MemberState.STABLE, 2, 1)
    assert done.assigned == {A: {1, 2}} and done.pending_revocation == {}


def test_partitions_another_member_still_holds_wait_unreleased() -> None:
    m = member(1, {A: {1}})
    step = reconcile(m, 2, {A: {1, 2, 3}}, owned={A: {1}}, is_free=lambda t, p: p != 3)
    assert step.state is MemberState.UNRELEASED_PARTITIONS
    assert step.member_epoch == 2 and step.assigned == {A: {1, 2}}
    m.member_epoch, m.state, m.assigned = 2, step.state, step.assigned
    later = reconcile(m, 2, {A: {1, 2, 3}}, owned={A: {1, 2}}, is_free=lambda t, p: True)
    assert later.state is MemberState.STABLE and later.assigned == {A: {1, 2, 3}}


def test_a_stable_member_at_the_target_epoch_is_left_alone() -> None:
    m = member(3, {A: {0}})
    step = reconcile(m, 3, {A: {0, 1}}, owned={A: {0}}, is_free=lambda t, p: True)
    assert step.assigned == {A: {0}} and step.member_epoch == 3


def test_group_state_follows_its_members() -> None:
    g = ConsumerGroup(group_id="g", partition=0)
    assert g.state() is GroupState.EMPTY
    g.members["m"] = member(1)
    g.group_epoch, g.assignment_epoch = 2, 1
    assert g.state() is GroupState.ASSIGNING
    g.assignment_epoch = 2
    assert g.state() is GroupState.RECONCILING
    g.members["m"].member_epoch = 2
    assert g.state() is GroupState.STABLE


def test_a_regex_subscribes_to_what_it_matches_narrowed_to_its_regex_topics() -> None:
    topics = ["a-1", "a-2", "a-", "b-1", "__a-3"]
    member = ConsumerMember(member_id="m", subscribed_topic_names=("b-1",),
                            subscribed_topic_regex="a-.+")
    assert subscribed(member, topics) == {"a-1", "a-2", "b-1"}
    member.regex_topics = frozenset({"a-1", "a-9"})  # a-9 is gone: not subscribed
    assert subscribed(member, topics) == {"a-1", "b-1"}
    member.regex_topics = frozenset()
    assert subscribed(member, topics) == {"b-1"}  # named topics are not narrowed
    group = ConsumerGroup(group_id="g", partition=0, members={"m": member, "o": ConsumerMember(
        member_id="o", subscribed_topic_regex="a-2")})
    assert group.subscribed_names(topics) == {"a-2", "b-1"}


def test_ownership_counts_partitions_pending_revocation() -> None:
    g = ConsumerGroup(group_id="g", partition=0)
    other = ConsumerMember(member_id="o", pending_revocation={A: {4}})
    g.members["o"] = other
    assert g.owner(A, 4, besides="m") == "o"
    assert g.owner(A, 4, besides="o") is None


@pytest.mark.parametrize(("key", "value", "first_bytes"), [
    (ConsumerGroupKey(3, "g"), GroupEpochValue(7), b"\x00\x03"),
    (ConsumerGroupKey(4, "g"), PartitionMetadataValue(((A, "t", 3),)), b"\x00\x04"),
    (ConsumerMemberKey(5, "g", "m"), MemberMetadataValue(
        instance_id="i", rack_id=None, client_id="c", client_host="/h",
        subscribed_topic_names=("t",), subscribed_topic_regex=None, rebalance_timeout_ms=300,
        server_assignor="range"), b"\x00\x05"),
    (ConsumerGroupKey(6, "g"), TargetAssignmentEpochValue(7), b"\x00\x06"),
    (ConsumerMemberKey(7, "g", "m"), TargetMemberValue(((A, (0, 2)),)), b"\x00\x07"),
    (ConsumerMemberKey(8, "g", "m"), CurrentAssignmentValue(
        member_epoch=7, previous_member_epoch=6, state=1, assigned=((A, (0,)),),
        pending_revocation=((B, (1,)),)), b"\x00\x08"),
])
def test_consumer_group_records_round_trip_with_kafkas_key_types(
        key: object, value: object, first_bytes: bytes) -> None:
    raw = encode_key(key)
    assert raw[:2] == first_bytes
    assert decode_key(raw) == key
    data = encode_value(value)
    assert data[:2] == b"\x00\x00", "value version 0"
    assert decode_value(key, data) == value


def test_group_epoch_value_bytes_are_kafkas() -> None:
    # version 0, int32 epoch, empty tagged fields
    assert encode_value(GroupEpochValue(5)) == b"\x00\x00\x00\x00\x00\x05\x00"
    assert encode_key(ConsumerGroupKey(3, "g")) == b"\x00\x03\x00\x01g"
