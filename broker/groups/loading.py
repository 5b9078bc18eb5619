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

- its batch is a plain one, as the coordinator writes them: not a control batch, not
  transactional, no producer id (-1: partctl's coordinator has no transactional offset commits);
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
"""

from __future__ import annotations

import logging

from broker.groups.group import CommittedOffset, Group, GroupState, Member
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
from replication.errors import CorruptRecordError
from replication.log import Log
from replication.records import NO_PRODUCER_ID, BatchHeader, decode_batch, read_batch_header

__all__ = ["build_groups", "read_records"]

log = logging.getLogger(__name__)

READ_BYTES = 1 << 20

Loaded = list[tuple[Key, Value | None]]
_MARKED = (COORDINATOR_HEADER,)
_FOREIGN = "not written by a group coordinator"


def read_records(plog: Log, where: str) -> Loaded:
    """Every (key, value) a group coordinator wrote to ``plog``, from its start to its end, in
    log order (blocking); what it did not write is skipped with one warning."""
    offset, end = plog.log_start_offset, plog.log_end_offset
    found: Loaded = []
    skipped = _Skipped()
    while offset < end:
        read = plog.read(offset, READ_BYTES)
        data = read.records
        if not data:
            break
        pos = 0
        while pos < len(data):
            header = read_batch_header(data, pos)
            if not header.is_control:
                _read_batch(data, pos, header, found, skipped)
            pos += header.size
        offset = read.next_offset
    if skipped.count:
        log.warning("%s: loaded %d records, skipped %d: %s", where, len(found), skipped.count,
                    "; ".join(f"{n} {why} (first at offset {first})"
                              for why, (n, first) in skipped.kinds.items()))
    return found


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


def _read_batch(data: bytes, pos: int, header: BatchHeader, found: Loaded,
                skipped: _Skipped) -> None:
    records = header.last_offset_delta + 1
    if header.is_transactional or header.producer_id != NO_PRODUCER_ID:
        skipped.add(_FOREIGN, header.base_offset, records)
        return
    try:
        batch = decode_batch(data, pos)
    except CorruptRecordError:
        skipped.add("in batches that do not decode", header.base_offset, records)
        return
    for record in batch.records:
        if record.headers != _MARKED or record.key is None:
            skipped.add(_FOREIGN, record.offset)
            continue
        try:
            key = decode_key(record.key)
            found.append((key, decode_value(key, record.value)))
        except RecordFormatError:
            skipped.add("not in a group schema", record.offset)


def build_groups(partition: int, records: Loaded) -> list[Group]:
    """The groups ``records`` (one partition's, in log order) leave standing."""
    offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = {}
    metadata: dict[str, GroupMetadataValue | None] = {}
    for key, value in records:
        if isinstance(key, OffsetCommitKey):
            held = offsets.setdefault(key.group, {})
            if value is None:
                held.pop((key.topic, key.partition), None)
            elif isinstance(value, OffsetCommitValue):
                held[(key.topic, key.partition)] = CommittedOffset(
                    offset=value.offset, leader_epoch=value.leader_epoch,
                    metadata=value.metadata, commit_timestamp=value.commit_timestamp,
                    expire_timestamp=value.expire_timestamp)
        elif isinstance(key, GroupMetadataKey):
            metadata[key.group] = value if isinstance(value, GroupMetadataValue) else None
            if value is None:  # the group was deleted: its offsets went with it
                offsets.pop(key.group, None)
    groups = []
    for group_id in sorted(set(offsets) | {g for g, v in metadata.items() if v is not None}):
        group_offsets = offsets.get(group_id, {})
        value = metadata.get(group_id)
        if value is None and not group_offsets:
            continue
        group = Group(group_id=group_id, partition=partition, offsets=dict(group_offsets))
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
