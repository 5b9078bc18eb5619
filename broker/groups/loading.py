"""Rebuilding a partition's groups from ``__consumer_offsets``: what a new coordinator does
before it answers for them (Kafka's ``GroupMetadataManager.doLoadGroupsAndOffsets``).

:func:`read_records` reads a partition's log from its start to its end (off the event loop:
it is file I/O) and decodes every record; :func:`build_groups` replays them in log order, a
pure function: the last value of each key wins, a tombstone deletes (an offset, or a group with
its offsets), and each group comes back Stable when its last stored generation has members
(they keep their ids, assignments and timeouts; their sessions start again) and Empty
otherwise.

Only what a group coordinator wrote is believed. Clients cannot write here (a Produce to an
internal topic is INVALID_TOPIC_EXCEPTION), but a log may hold records from before that rule
or put there by other means, and a forged offset commit would otherwise steer a group's
consumers. A record counts as the coordinator's when all of this holds:

- its batch is one the coordinator writes: a plain one (no producer id), or a transactional
  one of offset commits (a TxnOffsetCommit's, with the transaction's producer id and epoch);
- the record carries exactly the one header :data:`~broker.groups.records.COORDINATOR_HEADER`,
  which every record the coordinator appends carries (Kafka's tools, reading by key and value,
  pass over it) and which no client could have known to add before clients were refused;
- its key and value parse as one of Kafka's group schemas and versions this broker reads, field
  for field, with no byte left over (:class:`~broker.groups.records.RecordFormatError`).

Everything else is skipped: records of another origin, records that do not parse, batches that
do not decode (a poisoned batch from before leaders validated records). A load that skips any
says so in one warning (how many, of which kind, and the first offset of each), never one line
per record. This is provenance against clients, not against whoever can write the log files:
anyone who can do that can write the header too. A consequence: records written by a partctl
coordinator older than this rule carry no header and are skipped (the groups commit again).

Transactions (KIP-98): a transactional batch's offset commits are pending for its producer
id until that producer's end-transaction marker (a control batch, written by the transaction
coordinator's WriteTxnMarkers and read with :func:`replication.control.marker_of`): a commit
moves them into the committed offsets unless a later record of the log already committed the
same partition (Kafka's rule, by position in the log), an abort drops them. An offset tombstone
drops the pending offsets of its partition too, as Kafka 3.9's coordinator replays it. A
transaction still open at the log's end stays pending in the groups built
(:attr:`~broker.groups.group.Group.pending_txn`), so a coordinator that loads the partition
after a failover holds what its predecessor held. A control batch that does not decode is
skipped with the rest, in the one warning.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

from broker.groups.group import CommittedOffset, Group, GroupState, Member, PendingOffset
from broker.groups.records import (
    COORDINATOR_HEADER,
    GroupMetadataKey,
    GroupMetadataValue,
    Key,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordFormatError,
    Value,
    decode_key,
    decode_value,
)
from replication.control import Marker, marker_of
from replication.errors import StorageError
from replication.log import Log
from replication.records import NO_PRODUCER_ID, BatchHeader, decode_batch, read_batch_header

__all__ = ["Entry", "LoadedPartition", "build_groups", "read_records"]

log = logging.getLogger(__name__)

READ_BYTES = 1 << 20

Loaded = list[tuple[Key, Value | None]]
"""A partition's plain records (key, value), in log order: what the coordinators replay."""
_MARKED = (COORDINATOR_HEADER,)
_FOREIGN = "not written by a group coordinator"
_TP = tuple[str, int]


class Entry(NamedTuple):
    """One record a group coordinator wrote, where it sits in the log, and the producer id of
    its batch (-1: a plain record; else an offset commit of that producer's transaction)."""

    key: Key
    value: Value | None
    position: int
    producer_id: int = NO_PRODUCER_ID


class LoadedPartition(NamedTuple):
    """What a load read: the coordinators' records and the end-transaction markers, in log
    order."""

    entries: list[Entry | Marker]

    @property
    def records(self) -> Loaded:
        """The plain records (the transactional offset commits and the markers left out)."""
        return [(e.key, e.value) for e in self.entries
                if isinstance(e, Entry) and e.producer_id == NO_PRODUCER_ID]


def read_records(plog: Log, where: str) -> LoadedPartition:
    """Every record a group coordinator wrote to ``plog`` and every end-transaction marker,
    from its start to its end, in log order (blocking); what it did not write is skipped with
    one warning."""
    offset, end = plog.log_start_offset, plog.log_end_offset
    found: list[Entry | Marker] = []
    skipped = _Skipped()
    while offset < end:
        read = plog.read(offset, READ_BYTES)
        data = read.records
        if not data:
            break
        pos = 0
        while pos < len(data):
            header = read_batch_header(data, pos)
            if header.is_control:
                _read_control(data, pos, header, found, skipped)
            else:
                _read_batch(data, pos, header, found, skipped)
            pos += header.size
        offset = read.next_offset
    if skipped.count:
        log.warning("%s: loaded %d records, skipped %d: %s", where, len(found), skipped.count,
                    "; ".join(f"{n} {why} (first at offset {first})"
                              for why, (n, first) in skipped.kinds.items()))
    return LoadedPartition(found)


class _Skipped:
    """What a load left out, by kind: (how many, the first offset)."""

    __slots__ = ("count", "kinds")

    def __init__(self) -> None:
        self.count = 0
        self.kinds: dict[str, tuple[int, int]] = {}

    def add(self, why: str, offset: int, n: int = 1) -> None:
        self.count += n
        seen, first = self.kinds.get(why, (0, offset))
        self.kinds[why] = (seen + n, first)


def _read_control(data: bytes, pos: int, header: BatchHeader, found: list[Entry | Marker],
                  skipped: _Skipped) -> None:
    try:
        marker = marker_of(decode_batch(data, pos))
    except StorageError:
        skipped.add("in control batches that do not decode", header.base_offset)
        return
    if marker is not None:  # a control record of another type: passed over, as Kafka does
        found.append(marker)


def _read_batch(data: bytes, pos: int, header: BatchHeader, found: list[Entry | Marker],
                skipped: _Skipped) -> None:
    records = header.last_offset_delta + 1
    transactional = header.is_transactional
    if transactional != (header.producer_id != NO_PRODUCER_ID) or header.producer_id < -1:
        # a plain batch with a producer id, or a transactional one without: not the
        # coordinator's
        skipped.add(_FOREIGN, header.base_offset, records)
        return
    try:
        batch = decode_batch(data, pos)
    except StorageError:
        skipped.add("in batches that do not decode", header.base_offset, records)
        return
    for record in batch.records:
        if record.headers != _MARKED or record.key is None:
            skipped.add(_FOREIGN, record.offset)
            continue
        try:
            key = decode_key(record.key)
            value = decode_value(key, record.value)
        except RecordFormatError:
            skipped.add("not in a group schema", record.offset)
            continue
        if transactional and not isinstance(key, OffsetCommitKey):
            skipped.add("in a transaction but not an offset commit", record.offset)
            continue
        found.append(Entry(key, value, record.offset, header.producer_id))


def _offset(value: OffsetCommitValue) -> CommittedOffset:
    return CommittedOffset(offset=value.offset, leader_epoch=value.leader_epoch,
                           metadata=value.metadata, commit_timestamp=value.commit_timestamp,
                           expire_timestamp=value.expire_timestamp)


class _Replay:
    """The offsets a partition's log leaves, replayed in log order: committed ones with their
    positions, per group, and the pending ones of each open transaction."""

    def __init__(self) -> None:
        self.offsets: dict[str, dict[_TP, tuple[CommittedOffset, int]]] = {}
        self.pending: dict[int, dict[tuple[str, _TP], PendingOffset]] = {}

    def commit(self, key: OffsetCommitKey, value: Value | None, position: int,
               producer_id: int) -> None:
        tp = (key.topic, key.partition)
        if producer_id != NO_PRODUCER_ID:
            held = self.pending.setdefault(producer_id, {})
            if isinstance(value, OffsetCommitValue):
                held[(key.group, tp)] = PendingOffset(offset=_offset(value), position=position)
            else:
                held.pop((key.group, tp), None)
            return
        if isinstance(value, OffsetCommitValue):
            self.offsets.setdefault(key.group, {})[tp] = (_offset(value), position)
            return
        self.offsets.get(key.group, {}).pop(tp, None)
        for held in self.pending.values():  # a tombstone drops what transactions hold too
            held.pop((key.group, tp), None)

    def drop_group(self, group: str) -> None:
        self.offsets.pop(group, None)
        for held in self.pending.values():
            for gtp in [gtp for gtp in held if gtp[0] == group]:
                del held[gtp]

    def end(self, marker: Marker) -> None:
        held = self.pending.pop(marker.producer_id, {})
        if not marker.commit:
            return
        for (group, tp), pending in held.items():
            offsets = self.offsets.setdefault(group, {})
            current = offsets.get(tp)
            assert pending.position is not None
            if current is None or current[1] < pending.position:
                offsets[tp] = (pending.offset, pending.position)

    def pending_of(self) -> dict[str, dict[int, dict[_TP, PendingOffset]]]:
        by_group: dict[str, dict[int, dict[_TP, PendingOffset]]] = {}
        for producer_id, held in self.pending.items():
            for (group, tp), pending in held.items():
                by_group.setdefault(group, {}).setdefault(producer_id, {})[tp] = pending
        return by_group


def build_groups(partition: int, loaded: LoadedPartition | Loaded) -> list[Group]:
    """The groups a partition's log (``loaded``, or its plain records alone, in log order)
    leaves standing, with their committed offsets and the pending ones of open
    transactions."""
    entries = loaded.entries if isinstance(loaded, LoadedPartition) else [
        Entry(k, v, i) for i, (k, v) in enumerate(loaded)]
    replay = _Replay()
    metadata: dict[str, GroupMetadataValue | None] = {}
    for entry in entries:
        if isinstance(entry, Marker):
            replay.end(entry)
            continue
        key, value = entry.key, entry.value
        if isinstance(key, OffsetCommitKey):
            replay.commit(key, value, entry.position, entry.producer_id)
        elif isinstance(key, GroupMetadataKey):
            metadata[key.group] = value if isinstance(value, GroupMetadataValue) else None
            if value is None:  # the group was deleted: its offsets went with it
                replay.drop_group(key.group)
    pending = replay.pending_of()
    groups = []
    named = set(replay.offsets) | set(pending) | {g for g, v in metadata.items() if v is not None}
    for group_id in sorted(named):
        group_offsets = replay.offsets.get(group_id, {})
        value = metadata.get(group_id)
        if value is None and not group_offsets and group_id not in pending:
            continue
        group = Group(group_id=group_id, partition=partition,
                      offsets={tp: o for tp, (o, _) in group_offsets.items()},
                      positions={tp: at for tp, (_, at) in group_offsets.items()},
                      pending_txn=pending.get(group_id, {}))
        if value is not None:
            group.protocol_type = value.protocol_type or None
            group.generation = value.generation
            group.protocol = value.protocol
            group.leader_id = value.leader
            group.state_timestamp = value.current_state_timestamp
            for m in value.members:
                group.members[m.member_id] = Member(
                    member_id=m.member_id, group_instance_id=m.group_instance_id,
                    client_id=m.client_id, client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    session_timeout_ms=m.session_timeout_ms,
                    protocol_type=value.protocol_type,
                    protocols=((value.protocol or "", m.subscription),),
                    assignment=m.assignment)
                if m.group_instance_id:
                    group.static_members[m.group_instance_id] = m.member_id
            group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        groups.append(group)
    return groups
