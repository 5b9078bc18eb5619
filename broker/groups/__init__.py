"""The group coordinators (classic, and KIP-848 consumer groups), the group metadata manager
they share, and their records in ``__consumer_offsets``."""

from broker.groups.consumer_coordinator import ConsumerGroups
from broker.groups.consumer_group import ConsumerGroup, ConsumerMember, MemberState, reconcile
from broker.groups.coordinator import GroupCoordinator, JoinResult, MemberInfo, SyncResult
from broker.groups.group import CommittedOffset, Group, GroupState, Member, check_transition
from broker.groups.metadata_manager import OFFSETS_TOPIC, GroupConfig, GroupMetadataManager
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
    "GroupMetadataManager",
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
