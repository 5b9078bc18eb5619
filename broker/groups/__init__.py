"""The group coordinators (classic, and KIP-848 consumer groups) and their records in
``__consumer_offsets``."""

from broker.groups.consumer_coordinator import ConsumerGroups
from broker.groups.consumer_group import ConsumerGroup, ConsumerMember, MemberState, reconcile
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
    "ConsumerGroup",
    "ConsumerGroups",
    "ConsumerMember",
    "Group",
    "GroupConfig",
    "GroupCoordinator",
    "GroupState",
    "JoinResult",
    "Member",
    "MemberInfo",
    "MemberState",
    "SyncResult",
    "check_transition",
    "java_string_hash",
    "partition_for",
    "reconcile",
]
