"""The group coordinator (classic protocol) and its records in ``__consumer_offsets``."""

from broker.groups.coordinator import (
    OFFSETS_TOPIC,
    GroupConfig,
    GroupCoordinator,
    JoinResult,
    MemberInfo,
    SyncResult,
)
from broker.groups.group import CommittedOffset, Group, GroupState, Member, check_transition
from broker.groups.records import java_string_hash, partition_for

__all__ = [
    "OFFSETS_TOPIC",
    "CommittedOffset",
    "Group",
    "GroupConfig",
    "GroupCoordinator",
    "GroupState",
    "JoinResult",
    "Member",
    "MemberInfo",
    "SyncResult",
    "check_transition",
    "java_string_hash",
    "partition_for",
]
