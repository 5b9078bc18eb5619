"""Transactional offset commits as a new coordinator reads them back (KIP-98): a real
``__consumer_offsets`` log with transactional commits, plain commits, tombstones and
end-transaction markers interleaved, rebuilt into the committed and pending offsets Kafka's
rules leave; hostile bytes among them skipped with one warning. And the pure bookkeeping a
live coordinator runs on the same rules (:mod:`broker.groups.txn_offsets`)."""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c
import pytest
from kio.schema.errors import ErrorCode

from broker.groups.group import CommittedOffset, Group, GroupState, Member
from broker.groups.loading import build_groups, read_records
from broker.groups.records import (
    COORDINATOR_HEADER,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_key,
    encode_value,
)
from broker.groups.txn_offsets import (
    appended,
    check_committer,
    complete,
    failed,
    prepare,
)
from replication.control import encode_marker_batch
from replication.log import Log
from replication.records import (
    ATTRIBUTES_OFFSET,
    RECORDS_OFFSET,
    Record,
    encode_batch,
    stamp_batch,
)

GROUP = "g"


def _commits(offsets: dict[tuple[str, str, int], int | None], *, producer_id: int = -1,
             marked: bool = True) -> bytes:
    """One batch of offset commits (a None offset: a tombstone), transactional when
    ``producer_id`` is given, as a coordinator writes them."""
    records = []
    for (group, topic, partition), offset in offsets.items():
        value = None if offset is None else encode_value(
            OffsetCommitValue(offset=offset, commit_timestamp=1_000))
        records.append(Record(key=encode_key(OffsetCommitKey(group, topic, partition)),
                              value=value, timestamp=1_000,
                              headers=(COORDINATOR_HEADER,) if marked else ()))
    txn = producer_id >= 0
    return encode_batch(records, producer_id=producer_id, producer_epoch=0 if txn else -1,
                        base_sequence=0 if txn else -1, transactional=txn)


def _marker(producer_id: int, commit: bool) -> bytes:
    return encode_marker_batch(producer_id=producer_id, producer_epoch=0, commit=commit,
                               coordinator_epoch=0, timestamp=1_000)


def _load(tmp_path: Path, batches: list[bytes]) -> list[Group]:
    log = Log.open(tmp_path / "__consumer_offsets-0")
    try:
        for batch in batches:  # as a follower, which takes a marker as its leader wrote it
            stamped = bytearray(batch)
            stamp_batch(stamped, 0, log.log_end_offset, 0)
            log.append_as_follower(bytes(stamped))
        loaded = read_records(log, "__consumer_offsets-0")
    finally:
        log.close()
    return build_groups(0, loaded)


def test_a_load_applies_markers_in_log_order_and_keeps_open_transactions_pending(
        tmp_path: Path) -> None:
    batches = [
        # t0: a transaction's offset, then a plain commit after it in the log: the plain one
        # is the later record and stays when the transaction commits (Kafka's rule)
        _commits({(GROUP, "t", 0): 10}, producer_id=1),
        _commits({(GROUP, "t", 0): 5}),
        # t1: a plain commit, then a transaction's: the transaction's wins on commit
        _commits({(GROUP, "t", 1): 3}),
        _commits({(GROUP, "t", 1): 20}, producer_id=2),
        # t2: an aborted transaction leaves the plain commit as it was
        _commits({(GROUP, "t", 2): 7}),
        _commits({(GROUP, "t", 2): 30}, producer_id=3),
        # t3: a tombstone drops what a transaction holds for it; its commit brings nothing
        _commits({(GROUP, "t", 3): 40}, producer_id=5),
        _commits({(GROUP, "t", 3): None}),
        _marker(1, commit=True),
        _marker(2, commit=True),
        _marker(3, commit=False),
        _marker(5, commit=True),
        # a marker of a producer with nothing pending changes nothing
        _marker(9, commit=True),
        # still open at the log's end: pending, in this group and in a group of its own
        _commits({(GROUP, "t", 4): 50, ("only-pending", "t", 0): 60}, producer_id=4),
        # producer 1's next transaction, open
        _commits({(GROUP, "t", 1): 21}, producer_id=1),
    ]
    groups = {g.group_id: g for g in _load(tmp_path, batches)}
    assert set(groups) == {GROUP, "only-pending"}
    g = groups[GROUP]
    assert {tp: o.offset for tp, o in g.offsets.items()} == {
        ("t", 0): 5, ("t", 1): 20, ("t", 2): 7}
    assert g.positions == {("t", 0): 1, ("t", 1): 3, ("t", 2): 4}
    assert {pid: {tp: (p.offset.offset, p.position) for tp, p in held.items()}
            for pid, held in g.pending_txn.items()} == {
        4: {("t", 4): (50, 13)}, 1: {("t", 1): (21, 15)}}
    assert g.has_pending(("t", 1)) and not g.has_pending(("t", 0))
    only = groups["only-pending"]
    assert (only.state, only.offsets) == (GroupState.EMPTY, {})
    assert only.pending_txn[4][("t", 0)].offset.offset == 60


def test_the_same_log_committed_later_gives_what_a_live_coordinator_gives(
        tmp_path: Path) -> None:
    """A failover between the transactional commit and its marker: the marker at the end of
    the log the new coordinator reads takes the pending offsets in, as the live one would."""
    before = [_commits({(GROUP, "t", 0): 1}), _commits({(GROUP, "t", 0): 8}, producer_id=6)]
    (pending,) = _load(tmp_path / "a", before)
    assert pending.offsets[("t", 0)].offset == 1 and pending.has_pending(("t", 0))
    (done,) = _load(tmp_path / "b", [*before, _marker(6, commit=True)])
    assert done.offsets[("t", 0)].offset == 8 and not done.pending_txn
    # the live coordinator's bookkeeping on the same events agrees
    complete(pending, 6, commit=True)
    assert pending.offsets == done.offsets and pending.positions == done.positions


def test_a_deleted_group_takes_its_pending_offsets_with_it(tmp_path: Path) -> None:
    value = GroupMetadataValue(protocol_type="consumer", generation=1, protocol=None,
                               leader=None, current_state_timestamp=0, members=())
    stored = encode_batch([Record(key=encode_key(GroupMetadataKey(GROUP)),
                                  value=encode_value(value), timestamp=1,
                                  headers=(COORDINATOR_HEADER,))])
    deleted = encode_batch([Record(key=encode_key(GroupMetadataKey(GROUP)), value=None,
                                   timestamp=1, headers=(COORDINATOR_HEADER,))])
    groups = _load(tmp_path, [stored, _commits({(GROUP, "t", 0): 4}, producer_id=1), deleted,
                              _marker(1, commit=True)])
    assert groups == []


def test_hostile_transactional_bytes_are_skipped_with_one_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A transactional batch without the coordinator's header, one holding a group's metadata
    rather than offsets, a transactional batch with no producer id, and a control batch whose
    record does not decode: none counts, the load says so once."""
    group_record = encode_batch(
        [Record(key=encode_key(GroupMetadataKey(GROUP)), value=None, timestamp=1,
                headers=(COORDINATOR_HEADER,))],
        producer_id=2, producer_epoch=0, base_sequence=0, transactional=True)
    no_producer = bytearray(_commits({(GROUP, "t", 0): 96}))
    no_producer[ATTRIBUTES_OFFSET + 1] |= 0x10  # the transactional bit, without a producer id
    struct.pack_into(">I", no_producer, 17, crc32c.crc32c(bytes(no_producer[ATTRIBUTES_OFFSET:])))
    bad_marker = bytearray(_marker(3, commit=True))
    bad_marker[RECORDS_OFFSET] = 0x04  # the control record's length: 2 bytes, a key cut short
    struct.pack_into(">I", bad_marker, 17, crc32c.crc32c(bytes(bad_marker[ATTRIBUTES_OFFSET:])))
    with caplog.at_level("WARNING", logger="broker.groups"):
        groups = _load(tmp_path, [
            _commits({(GROUP, "t", 0): 5}),
            _commits({(GROUP, "t", 0): 99}, producer_id=3, marked=False),
            group_record, bytes(no_producer),
            _commits({(GROUP, "t", 1): 98}, producer_id=3), bytes(bad_marker)])
    (g,) = groups
    assert g.offsets[("t", 0)].offset == 5
    assert g.pending_txn[3][("t", 1)].offset.offset == 98  # its marker did not decode
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1, warnings
    assert "skipped 4" in warnings[0], warnings


# --- the live bookkeeping ------------------------------------------------------------------------


def _offset(n: int) -> CommittedOffset:
    return CommittedOffset(offset=n, commit_timestamp=0)


def test_pending_offsets_are_placed_failed_committed_and_aborted_as_kafka_does() -> None:
    g = Group(group_id=GROUP, partition=0, offsets={("t", 0): _offset(1)},
              positions={("t", 0): 10})
    prepare(g, 7, {("t", 0): _offset(2), ("t", 1): _offset(3)})
    assert g.has_pending(("t", 0)) and g.has_pending(("t", 1))
    appended(g, 7, {("t", 0): _offset(2), ("t", 1): _offset(3)}, 20)
    # a plain commit of t1 written after the transaction's record: it stays on commit
    g.offsets[("t", 1)], g.positions[("t", 1)] = _offset(9), 30
    assert complete(g, 7, commit=True) == [("t", 0)]
    assert {tp: o.offset for tp, o in g.offsets.items()} == {("t", 0): 2, ("t", 1): 9}
    assert g.pending_txn == {}
    # an aborted transaction changes nothing; a failed write is not pending any more
    prepare(g, 8, {("t", 0): _offset(5)})
    appended(g, 8, {("t", 0): _offset(5)}, 40)
    assert complete(g, 8, commit=False) == [] and g.offsets[("t", 0)].offset == 2
    prepare(g, 9, {("t", 2): _offset(6)})
    failed(g, 9, {("t", 2): _offset(6)})
    assert g.pending_txn == {}
    prepare(g, 10, {("t", 2): _offset(6), ("t", 3): _offset(6)})
    g.drop_pending([("t", 2)])
    assert set(g.pending_txn[10]) == {("t", 3)}


def _member(member_id: str, instance: str | None = None) -> Member:
    return Member(member_id=member_id, group_instance_id=instance, client_id="c",
                  client_host="/h", rebalance_timeout_ms=1, session_timeout_ms=1,
                  protocol_type="consumer", protocols=(("range", b""),))


def test_the_committer_is_checked_against_the_group_as_kafka_checks_it() -> None:
    g = Group(group_id=GROUP, partition=0, state=GroupState.STABLE, generation=4,
              members={"m": _member("m"), "s": _member("s", "i")}, static_members={"i": "s"})
    assert check_committer(g, 4, "m", None) is ErrorCode.none
    assert check_committer(g, 3, "m", None) is ErrorCode.illegal_generation
    assert check_committer(g, 4, "x", None) is ErrorCode.unknown_member_id
    assert check_committer(g, 4, "s", "i") is ErrorCode.none
    assert check_committer(g, 4, "m", "i") is ErrorCode.fenced_instance_id
    assert check_committer(g, 4, "m", "unknown") is ErrorCode.unknown_member_id
    # no member named (versions 0-2, or a producer outside the group): not checked, whatever
    # the group's state; -1 with a member id is a stale generation
    assert check_committer(g, -1, "", None) is ErrorCode.none
    assert check_committer(g, -1, "m", None) is ErrorCode.illegal_generation
    g.state = GroupState.DEAD
    assert check_committer(g, 4, "m", None) is ErrorCode.coordinator_not_available
