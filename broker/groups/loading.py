"""Rebuilding a partition's groups from ``__consumer_offsets``: what a new coordinator does
before it answers for them (Kafka's ``GroupMetadataManager.doLoadGroupsAndOffsets``).

:func:`read_records` reads a partition's log from its start to its end (off the event loop:
it is file I/O) and decodes every record; :func:`build_groups` replays them in log order, a
pure function: the last value of each key wins, a tombstone deletes (an offset, or a group with
its offsets), and each group comes back Stable when its last stored generation has members
(they keep their ids, assignments and timeouts; their sessions start again) and Empty
otherwise. Records of formats this broker cannot read are logged and skipped.
"""

from __future__ import annotations

import logging

from broker.groups.group import CommittedOffset, Group, GroupState, Member
from broker.groups.records import (
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
from replication.log import Log
from replication.records import decode_batch, read_batch_header

__all__ = ["build_groups", "read_records"]

log = logging.getLogger("partctl.groups")

READ_BYTES = 1 << 20

Loaded = list[tuple[Key, Value | None]]


def read_records(plog: Log, where: str) -> Loaded:
    """Every (key, value) of ``plog`` from its start to its end, in log order (blocking)."""
    offset, end = plog.log_start_offset, plog.log_end_offset
    found: Loaded = []
    while offset < end:
        read = plog.read(offset, READ_BYTES)
        data = read.records
        if not data:
            break
        pos = 0
        while pos < len(data):
            header = read_batch_header(data, pos)
            if not header.is_control:
                for record in decode_batch(data, pos).records:
                    if record.key is None:
                        continue
                    try:
                        key = decode_key(record.key)
                        found.append((key, decode_value(key, record.value)))
                    except RecordFormatError as exc:
                        log.warning("%s offset %d: skipped: %s", where, record.offset, exc)
            pos += header.size
        offset = read.next_offset
    return found


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
