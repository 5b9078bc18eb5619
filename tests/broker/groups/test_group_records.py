"""The pure parts of the group coordinator: Kafka's record formats in ``__consumer_offsets``,
which partition holds a group (Java's String.hashCode), the state table, protocol selection,
reading a consumer's subscription, rebuilding groups from the log and offset expiry."""

from __future__ import annotations

import itertools
import struct
from pathlib import Path

import crc32c
import pytest

from broker.groups.group import (
    VALID_PREVIOUS,
    CommittedOffset,
    Group,
    GroupState,
    Member,
    check_transition,
    expired_offsets,
    select_protocol,
    subscribed_topics,
)
from broker.groups.loading import build_groups, read_records
from broker.groups.records import (
    COORDINATOR_HEADER,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberRecord,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordFormatError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    java_string_hash,
    partition_for,
)
from replication.log import Log
from replication.records import (
    ATTRIBUTES_OFFSET,
    RECORDS_OFFSET,
    Record,
    encode_batch,
    stamp_batch,
)


@pytest.mark.parametrize(("text", "expected"), [
    ("", 0), ("a", 97), ("hello", 99162322), ("polygenelubricants", -(1 << 31)),
    ("Aa", 2112), ("BB", 2112),  # Java's classic collision
    ("\U0001f600", 1772899),  # a surrogate pair: two UTF-16 code units, as Java counts them
])
def test_java_string_hash(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_partition_for_uses_kafka_abs() -> None:
    # Integer.MIN_VALUE has no positive counterpart: Kafka's Utils.abs makes it 0
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("a", 7) == 97 % 7


def test_offset_commit_records_are_kafkas_bytes() -> None:
    key = encode_key(OffsetCommitKey("g", "t", 3))
    assert key == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x03"
    value = encode_value(OffsetCommitValue(offset=42, leader_epoch=5, metadata="m",
                                           commit_timestamp=1000))
    assert value == (b"\x00\x03" + (42).to_bytes(8, "big") + (5).to_bytes(4, "big")
                     + b"\x00\x01m" + (1000).to_bytes(8, "big"))
    assert decode_value(decode_key(key), value) == OffsetCommitValue(
        offset=42, leader_epoch=5, metadata="m", commit_timestamp=1000)
    expiring = OffsetCommitValue(offset=1, metadata="", commit_timestamp=5, expire_timestamp=9)
    data = encode_value(expiring)
    assert data[:2] == b"\x00\x01"
    assert decode_value(OffsetCommitKey("g", "t", 0), data) == expiring
    assert decode_value(OffsetCommitKey("g", "t", 0), None) is None  # a tombstone


def test_group_metadata_records_round_trip() -> None:
    key = encode_key(GroupMetadataKey("grp"))
    assert key == b"\x00\x02\x00\x03grp"
    value = GroupMetadataValue(
        protocol_type="consumer", generation=4, protocol="range", leader="m1",
        current_state_timestamp=123, members=(MemberRecord(
            member_id="m1", group_instance_id="i1", client_id="c", client_host="/127.0.0.1",
            rebalance_timeout_ms=300_000, session_timeout_ms=45_000, subscription=b"\x00\x01",
            assignment=b"\x02"),))
    data = encode_value(value)
    assert data[:2] == b"\x00\x03"
    assert decode_value(decode_key(key), data) == value


def test_unknown_versions_and_short_records_are_refused() -> None:
    with pytest.raises(RecordFormatError):
        decode_key(b"\x00\x07\x00\x01g")
    with pytest.raises(RecordFormatError):
        decode_key(b"\x00\x01\x00\x05g")
    with pytest.raises(RecordFormatError):
        decode_value(GroupMetadataKey("g"), b"\x00\x04")


def test_the_state_table_over_every_pair() -> None:
    s = GroupState
    legal = {(s.PREPARING_REBALANCE, s.EMPTY), (s.EMPTY, s.PREPARING_REBALANCE),
             (s.STABLE, s.PREPARING_REBALANCE), (s.COMPLETING_REBALANCE, s.PREPARING_REBALANCE),
             (s.PREPARING_REBALANCE, s.COMPLETING_REBALANCE),
             (s.COMPLETING_REBALANCE, s.STABLE)} | {(x, s.DEAD) for x in s}
    for current, target in itertools.product(GroupState, repeat=2):
        assert check_transition(current, target) == ((current, target) in legal), (current,
                                                                                     target)
    assert set(VALID_PREVIOUS) == set(GroupState)


def _member(member_id: str, *names: str) -> Member:
    return Member(member_id=member_id, group_instance_id=None, client_id="c", client_host="h",
                  rebalance_timeout_ms=1, session_timeout_ms=1, protocol_type="consumer",
                  protocols=tuple((n, b"") for n in names))


def test_select_protocol_votes_among_the_common_ones() -> None:
    members = [_member("a", "cooperative-sticky", "range"), _member("b", "range"),
               _member("c", "cooperative-sticky", "range")]
    assert select_protocol(members) == "range"  # the only one all share
    members = [_member("a", "sticky", "range"), _member("b", "range", "sticky"),
               _member("c", "sticky", "range")]
    assert select_protocol(members) == "sticky"


def test_subscribed_topics_of_a_consumer_subscription() -> None:
    sub = (b"\x00\x01" + b"\x00\x00\x00\x02" + b"\x00\x01a" + b"\x00\x02bc"
           + b"\xff\xff\xff\xff" + b"\x00\x00\x00\x00")
    assert subscribed_topics(sub) == {"a", "bc"}
    assert subscribed_topics(b"sub") is None
    assert subscribed_topics(b"\x00\x00\x00\x00\x00\x05\x00\x01a") is None


def _offset(offset: int, committed: int = 0, expire: int = -1) -> OffsetCommitValue:
    return OffsetCommitValue(offset=offset, metadata="", commit_timestamp=committed,
                             expire_timestamp=expire)


def test_build_groups_replays_the_log_last_value_wins_tombstones_delete() -> None:
    member = MemberRecord(member_id="m1", group_instance_id="i1", client_id="c",
                          client_host="/h", rebalance_timeout_ms=1, session_timeout_ms=2,
                          subscription=b"s", assignment=b"a")
    stable = GroupMetadataValue(protocol_type="consumer", generation=3, protocol="range",
                                leader="m1", current_state_timestamp=5, members=(member,))
    records = [
        (OffsetCommitKey("a", "t", 0), _offset(1)),
        (OffsetCommitKey("a", "t", 0), _offset(2)),
        (OffsetCommitKey("a", "t", 1), _offset(7)),
        (OffsetCommitKey("a", "t", 1), None),
        (GroupMetadataKey("a"), stable),
        (OffsetCommitKey("gone", "t", 0), _offset(4)),
        (GroupMetadataKey("gone"), None),
        (OffsetCommitKey("simple", "t", 0), _offset(9)),
    ]
    groups = {g.group_id: g for g in build_groups(4, records)}
    assert set(groups) == {"a", "simple"}
    a = groups["a"]
    assert (a.partition, a.state, a.generation, a.protocol, a.leader_id) == (
        4, GroupState.STABLE, 3, "range", "m1")
    assert {tp: o.offset for tp, o in a.offsets.items()} == {("t", 0): 2}
    assert a.static_members == {"i1": "m1"}
    assert (a.members["m1"].assignment, a.members["m1"].metadata("range")) == (b"a", b"s")
    simple = groups["simple"]
    assert (simple.state, simple.protocol_type) == (GroupState.EMPTY, None)


def test_expired_offsets_follow_kafkas_rules() -> None:
    day = 86_400_000
    simple = Group(group_id="s", partition=0, offsets={
        ("t", 0): CommittedOffset(offset=1, commit_timestamp=0),
        ("t", 1): CommittedOffset(offset=1, commit_timestamp=day),
        ("t", 2): CommittedOffset(offset=1, commit_timestamp=day, expire_timestamp=day + 5)})
    assert expired_offsets(simple, day, day) == [("t", 0)]
    assert expired_offsets(simple, day + 5, day) == [("t", 0), ("t", 2)]
    # an Empty consumer group: from when it became empty, whatever the commit times
    empty = Group(group_id="e", partition=0, protocol_type="consumer", state_timestamp=day,
                  offsets={("t", 0): CommittedOffset(offset=1, commit_timestamp=0)})
    assert expired_offsets(empty, day + day - 1, day) == []
    assert expired_offsets(empty, 2 * day, day) == [("t", 0)]
    # a rebalancing group keeps everything
    empty.state = GroupState.PREPARING_REBALANCE
    assert expired_offsets(empty, 10 * day, day) == []


def _commit_batch(group: str, offset: int, *, marked: bool = True, producer_id: int = -1,
                  value_tail: bytes = b"") -> bytes:
    key = encode_key(OffsetCommitKey(group, "t", 0))
    value = encode_value(OffsetCommitValue(offset=offset, commit_timestamp=1_000)) + value_tail
    headers = (COORDINATOR_HEADER,) if marked else ()
    return encode_batch([Record(key=key, value=value, timestamp=1_000, headers=headers)],
                        producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                        base_sequence=0 if producer_id >= 0 else -1)


def test_the_loader_believes_only_what_a_coordinator_wrote_with_one_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Forged commits put in the log directly (past Produce): without the coordinator's
    header, from a producer, with a byte after the value, in a batch that does not decode.
    None is loaded; the load says so once."""
    log = Log.open(tmp_path / "__consumer_offsets-0")
    log.append_as_leader(_commit_batch("g", 5), 0)
    for forged in (_commit_batch("g", 999, marked=False),
                   _commit_batch("g", 998, producer_id=7),
                   _commit_batch("g", 997, value_tail=b"\x00")):
        log.append_as_leader(forged, 0)
    poisoned = bytearray(_commit_batch("g", 996))
    poisoned[RECORDS_OFFSET] += 80  # its record's length: past the batch
    struct.pack_into(">I", poisoned, 17, crc32c.crc32c(bytes(poisoned[ATTRIBUTES_OFFSET:])))
    stamp_batch(poisoned, 0, log.log_end_offset, 0)
    log.append_as_follower(bytes(poisoned))  # as a log from before validation holds it
    with caplog.at_level("WARNING", logger="broker.groups"):
        loaded = read_records(log, "__consumer_offsets-0")
    log.close()
    (group,) = build_groups(0, loaded)
    assert group.offsets[("t", 0)].offset == 5
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1, warnings
    assert "skipped 4" in warnings[0] and "not written by a group coordinator" in warnings[0]
