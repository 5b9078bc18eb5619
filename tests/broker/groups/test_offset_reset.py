"""Where a reset puts a group's offsets (pure): every strategy, the clamp into the log, and the
pieces of ``groups describe`` (a member's assignment, the lag of each partition)."""

from __future__ import annotations

import io

import pytest
from kio.schema.consumer_protocol_assignment.v0 import data as v0
from kio.serial import entity_writer

from coordinator.codecs import TopicPartition
from kafkaclient.groups import (
    GroupDescription,
    Member,
    Node,
    decode_assignment,
    partition_lags,
)
from kafkaclient.offset_reset import (
    LogRange,
    ResetError,
    ShiftBy,
    ToEarliest,
    ToLatest,
    ToOffset,
    ToTimestamp,
    plan_reset,
)

A, B, C = (TopicPartition("t", p) for p in range(3))
RANGES = {A: LogRange(earliest=0, latest=10), B: LogRange(earliest=5, latest=20),
          C: LogRange(earliest=0, latest=0)}
COMMITTED = {A: 4, B: 6}


@pytest.mark.parametrize(("spec", "plan"), [
    (ToEarliest(), {A: 0, B: 5, C: 0}),
    (ToLatest(), {A: 10, B: 20, C: 0}),
    (ToOffset(offset=7), {A: 7, B: 7, C: 0}),
    (ToOffset(offset=3), {A: 3, B: 5, C: 0}),  # below B's log start: its start
    (ToOffset(offset=50), {A: 10, B: 20, C: 0}),  # past the end: the end
], ids=["earliest", "latest", "offset", "offset below the start", "offset past the end"])
def test_each_strategy_with_kafka_s_clamp(spec: object, plan: dict) -> None:
    assert plan_reset(spec, [A, B, C], ranges=RANGES, committed=COMMITTED) == plan


def test_shift_by_moves_the_committed_offsets_within_the_log() -> None:
    assert plan_reset(ShiftBy(delta=3), [A, B], ranges=RANGES, committed=COMMITTED) == {
        A: 7, B: 9}
    assert plan_reset(ShiftBy(delta=-5), [A, B], ranges=RANGES, committed=COMMITTED) == {
        A: 0, B: 5}
    assert plan_reset(ShiftBy(delta=100), [A], ranges=RANGES, committed=COMMITTED) == {A: 10}


def test_shifting_a_partition_never_committed_is_refused() -> None:
    with pytest.raises(ResetError, match="--shift-by moves committed offsets, and the group "
                                         "has none for t-2"):
        plan_reset(ShiftBy(delta=1), [A, C], ranges=RANGES, committed=COMMITTED)


def test_a_timestamp_without_a_record_goes_to_the_log_end() -> None:
    plan = plan_reset(ToTimestamp(timestamp_ms=1), [A, B, C], ranges=RANGES,
                      committed=COMMITTED, by_time={A: 2, B: None})
    assert plan == {A: 2, B: 20, C: 0}


def _assignment(version: int, parts: dict[str, list[int]]) -> bytes:
    buffer = io.BytesIO()
    buffer.write(version.to_bytes(2, "big"))
    entity_writer(v0.ConsumerProtocolAssignment)(buffer, v0.ConsumerProtocolAssignment(
        assigned_partitions=tuple(v0.TopicPartition(topic=t, partitions=tuple(ps))
                                  for t, ps in parts.items()), user_data=b"x"))
    return buffer.getvalue()


@pytest.mark.parametrize("version", [0, 1, 3, 7])
def test_a_member_assignment_of_any_version(version: int) -> None:
    """Version 0 to 3 share their fields; a newer one is read as the newest known."""
    data = _assignment(version, {"t": [0, 2], "u": [1]})
    assert decode_assignment(data) == (A, C, TopicPartition("u", 1))
    assert decode_assignment(b"") == ()


def test_lag_per_partition_and_members_without_partitions() -> None:
    a = Member(member_id="a", group_instance_id=None, client_id="ca", host="/h",
               assignment=(A, B))
    idle = Member(member_id="i", group_instance_id=None, client_id="ci", host="/h",
                  assignment=())
    group = GroupDescription(group_id="g", state="Stable", protocol_type="consumer",
                             protocol="range", members=(a, idle),
                             coordinator=Node(node_id=1, host="h", port=1))
    rows = partition_lags(group, {A: 4, C: 1}, {A: 10, B: 20, C: 0})
    assert [(r.partition, r.current, r.log_end, r.lag, r.member) for r in rows] == [
        (A, 4, 10, 6, a), (B, None, 20, None, a), (C, 1, 0, -1, None),
        (None, None, None, None, idle)]
