"""kio's message types for the versions this broker serves: per API, a union of its request
classes and one of its response classes (what the handlers in :mod:`broker.apis` are typed
against). Generated from the registry by ``python -m tests.broker.protocol.test_api_messages``; do not
edit. Only for the type checker: nothing is imported at run time, where the server loads each
version's classes when a request of it first comes (:func:`broker.wire.request_class`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.add_offsets_to_txn.v0
    import kio.schema.add_offsets_to_txn.v1
    import kio.schema.add_offsets_to_txn.v2
    import kio.schema.add_offsets_to_txn.v3
    import kio.schema.add_offsets_to_txn.v4
    import kio.schema.add_partitions_to_txn.v0
    import kio.schema.add_partitions_to_txn.v1
    import kio.schema.add_partitions_to_txn.v2
    import kio.schema.add_partitions_to_txn.v3
    import kio.schema.add_partitions_to_txn.v4
    import kio.schema.add_partitions_to_txn.v5
    import kio.schema.allocate_producer_ids.v0
    import kio.schema.alter_configs.v0
    import kio.schema.alter_configs.v1
    import kio.schema.alter_configs.v2
    import kio.schema.alter_partition.v0
    import kio.schema.alter_partition.v1
    import kio.schema.alter_partition.v2
    import kio.schema.alter_partition.v3
    import kio.schema.alter_partition_reassignments.v0
    import kio.schema.alter_user_scram_credentials.v0
    import kio.schema.api_versions.v0
    import kio.schema.api_versions.v1
    import kio.schema.api_versions.v2
    import kio.schema.api_versions.v3
    import kio.schema.api_versions.v4
    import kio.schema.consumer_group_describe.v0
    import kio.schema.consumer_group_heartbeat.v0
    import kio.schema.controlled_shutdown.v2
    import kio.schema.controlled_shutdown.v3
    import kio.schema.create_acls.v0
    import kio.schema.create_acls.v1
    import kio.schema.create_acls.v2
    import kio.schema.create_acls.v3
    import kio.schema.create_partitions.v0
    import kio.schema.create_partitions.v1
    import kio.schema.create_partitions.v2
    import kio.schema.create_partitions.v3
    import kio.schema.create_topics.v0
    import kio.schema.create_topics.v1
    import kio.schema.create_topics.v2
    import kio.schema.create_topics.v3
    import kio.schema.create_topics.v4
    import kio.schema.create_topics.v5
    import kio.schema.create_topics.v6
    import kio.schema.create_topics.v7
    import kio.schema.delete_acls.v0
    import kio.schema.delete_acls.v1
    import kio.schema.delete_acls.v2
    import kio.schema.delete_acls.v3
    import kio.schema.delete_groups.v0
    import kio.schema.delete_groups.v1
    import kio.schema.delete_groups.v2
    import kio.schema.delete_records.v0
    import kio.schema.delete_records.v1
    import kio.schema.delete_records.v2
    import kio.schema.delete_topics.v0
    import kio.schema.delete_topics.v1
    import kio.schema.delete_topics.v2
    import kio.schema.delete_topics.v3
    import kio.schema.delete_topics.v4
    import kio.schema.delete_topics.v5
    import kio.schema.delete_topics.v6
    import kio.schema.describe_acls.v0
    import kio.schema.describe_acls.v1
    import kio.schema.describe_acls.v2
    import kio.schema.describe_acls.v3
    import kio.schema.describe_client_quotas.v0
    import kio.schema.describe_client_quotas.v1
    import kio.schema.describe_cluster.v0
    import kio.schema.describe_cluster.v1
    import kio.schema.describe_configs.v0
    import kio.schema.describe_configs.v1
    import kio.schema.describe_configs.v2
    import kio.schema.describe_configs.v3
    import kio.schema.describe_configs.v4
    import kio.schema.describe_groups.v0
    import kio.schema.describe_groups.v1
    import kio.schema.describe_groups.v2
    import kio.schema.describe_groups.v3
    import kio.schema.describe_groups.v4
    import kio.schema.describe_groups.v5
    import kio.schema.describe_log_dirs.v0
    import kio.schema.describe_log_dirs.v1
    import kio.schema.describe_log_dirs.v2
    import kio.schema.describe_log_dirs.v3
    import kio.schema.describe_log_dirs.v4
    import kio.schema.describe_producers.v0
    import kio.schema.describe_transactions.v0
    import kio.schema.describe_user_scram_credentials.v0
    import kio.schema.elect_leaders.v0
    import kio.schema.elect_leaders.v1
    import kio.schema.elect_leaders.v2
    import kio.schema.end_txn.v0
    import kio.schema.end_txn.v1
    import kio.schema.end_txn.v2
    import kio.schema.end_txn.v3
    import kio.schema.end_txn.v4
    import kio.schema.fetch.v4
    import kio.schema.fetch.v5
    import kio.schema.fetch.v6
    import kio.schema.fetch.v7
    import kio.schema.fetch.v8
    import kio.schema.fetch.v9
    import kio.schema.fetch.v10
    import kio.schema.fetch.v11
    import kio.schema.fetch.v12
    import kio.schema.fetch.v13
    import kio.schema.fetch.v14
    import kio.schema.fetch.v15
    import kio.schema.fetch.v16
    import kio.schema.fetch.v17
    import kio.schema.find_coordinator.v0
    import kio.schema.find_coordinator.v1
    import kio.schema.find_coordinator.v2
    import kio.schema.find_coordinator.v3
    import kio.schema.find_coordinator.v4
    import kio.schema.find_coordinator.v5
    import kio.schema.heartbeat.v0
    import kio.schema.heartbeat.v1
    import kio.schema.heartbeat.v2
    import kio.schema.heartbeat.v3
    import kio.schema.heartbeat.v4
    import kio.schema.incremental_alter_configs.v0
    import kio.schema.incremental_alter_configs.v1
    import kio.schema.init_producer_id.v0
    import kio.schema.init_producer_id.v1
    import kio.schema.init_producer_id.v2
    import kio.schema.init_producer_id.v3
    import kio.schema.init_producer_id.v4
    import kio.schema.init_producer_id.v5
    import kio.schema.join_group.v0
    import kio.schema.join_group.v1
    import kio.schema.join_group.v2
    import kio.schema.join_group.v3
    import kio.schema.join_group.v4
    import kio.schema.join_group.v5
    import kio.schema.join_group.v6
    import kio.schema.join_group.v7
    import kio.schema.join_group.v8
    import kio.schema.join_group.v9
    import kio.schema.leader_and_isr.v5
    import kio.schema.leader_and_isr.v6
    import kio.schema.leader_and_isr.v7
    import kio.schema.leave_group.v0
    import kio.schema.leave_group.v1
    import kio.schema.leave_group.v2
    import kio.schema.leave_group.v3
    import kio.schema.leave_group.v4
    import kio.schema.leave_group.v5
    import kio.schema.list_groups.v0
    import kio.schema.list_groups.v1
    import kio.schema.list_groups.v2
    import kio.schema.list_groups.v3
    import kio.schema.list_groups.v4
    import kio.schema.list_groups.v5
    import kio.schema.list_offsets.v1
    import kio.schema.list_offsets.v2
    import kio.schema.list_offsets.v3
    import kio.schema.list_offsets.v4
    import kio.schema.list_offsets.v5
    import kio.schema.list_offsets.v6
    import kio.schema.list_offsets.v7
    import kio.schema.list_offsets.v8
    import kio.schema.list_offsets.v9
    import kio.schema.list_partition_reassignments.v0
    import kio.schema.list_transactions.v0
    import kio.schema.list_transactions.v1
    import kio.schema.metadata.v0
    import kio.schema.metadata.v1
    import kio.schema.metadata.v2
    import kio.schema.metadata.v3
    import kio.schema.metadata.v4
    import kio.schema.metadata.v5
    import kio.schema.metadata.v6
    import kio.schema.metadata.v7
    import kio.schema.metadata.v8
    import kio.schema.metadata.v9
    import kio.schema.metadata.v10
    import kio.schema.metadata.v11
    import kio.schema.metadata.v12
    import kio.schema.offset_commit.v0
    import kio.schema.offset_commit.v1
    import kio.schema.offset_commit.v2
    import kio.schema.offset_commit.v3
    import kio.schema.offset_commit.v4
    import kio.schema.offset_commit.v5
    import kio.schema.offset_commit.v6
    import kio.schema.offset_commit.v7
    import kio.schema.offset_commit.v8
    import kio.schema.offset_commit.v9
    import kio.schema.offset_delete.v0
    import kio.schema.offset_fetch.v0
    import kio.schema.offset_fetch.v1
    import kio.schema.offset_fetch.v2
    import kio.schema.offset_fetch.v3
    import kio.schema.offset_fetch.v4
    import kio.schema.offset_fetch.v5
    import kio.schema.offset_fetch.v6
    import kio.schema.offset_fetch.v7
    import kio.schema.offset_fetch.v8
    import kio.schema.offset_fetch.v9
    import kio.schema.offset_for_leader_epoch.v0
    import kio.schema.offset_for_leader_epoch.v1
    import kio.schema.offset_for_leader_epoch.v2
    import kio.schema.offset_for_leader_epoch.v3
    import kio.schema.offset_for_leader_epoch.v4
    import kio.schema.produce.v3
    import kio.schema.produce.v4
    import kio.schema.produce.v5
    import kio.schema.produce.v6
    import kio.schema.produce.v7
    import kio.schema.produce.v8
    import kio.schema.produce.v9
    import kio.schema.produce.v10
    import kio.schema.produce.v11
    import kio.schema.sasl_authenticate.v0
    import kio.schema.sasl_authenticate.v1
    import kio.schema.sasl_authenticate.v2
    import kio.schema.sasl_handshake.v0
    import kio.schema.sasl_handshake.v1
    import kio.schema.stop_replica.v3
    import kio.schema.stop_replica.v4
    import kio.schema.sync_group.v0
    import kio.schema.sync_group.v1
    import kio.schema.sync_group.v2
    import kio.schema.sync_group.v3
    import kio.schema.sync_group.v4
    import kio.schema.sync_group.v5
    import kio.schema.txn_offset_commit.v0
    import kio.schema.txn_offset_commit.v1
    import kio.schema.txn_offset_commit.v2
    import kio.schema.txn_offset_commit.v3
    import kio.schema.txn_offset_commit.v4
    import kio.schema.update_metadata.v7
    import kio.schema.update_metadata.v8
    import kio.schema.write_txn_markers.v0
    import kio.schema.write_txn_markers.v1

    from broker.wire_schemas import ConsumerGroupHeartbeatRequestV1

    ProduceRequest: TypeAlias = (
        kio.schema.produce.v3.ProduceRequest | kio.schema.produce.v4.ProduceRequest
        | kio.schema.produce.v5.ProduceRequest | kio.schema.produce.v6.ProduceRequest
        | kio.schema.produce.v7.ProduceRequest | kio.schema.produce.v8.ProduceRequest
        | kio.schema.produce.v9.ProduceRequest | kio.schema.produce.v10.ProduceRequest
        | kio.schema.produce.v11.ProduceRequest)
    ProduceResponse: TypeAlias = (
        kio.schema.produce.v3.ProduceResponse | kio.schema.produce.v4.ProduceResponse
        | kio.schema.produce.v5.ProduceResponse | kio.schema.produce.v6.ProduceResponse
        | kio.schema.produce.v7.ProduceResponse | kio.schema.produce.v8.ProduceResponse
        | kio.schema.produce.v9.ProduceResponse | kio.schema.produce.v10.ProduceResponse
        | kio.schema.produce.v11.ProduceResponse)
    FetchRequest: TypeAlias = (
        kio.schema.fetch.v4.FetchRequest | kio.schema.fetch.v5.FetchRequest
        | kio.schema.fetch.v6.FetchRequest | kio.schema.fetch.v7.FetchRequest
        | kio.schema.fetch.v8.FetchRequest | kio.schema.fetch.v9.FetchRequest
        | kio.schema.fetch.v10.FetchRequest | kio.schema.fetch.v11.FetchRequest
        | kio.schema.fetch.v12.FetchRequest | kio.schema.fetch.v13.FetchRequest
        | kio.schema.fetch.v14.FetchRequest | kio.schema.fetch.v15.FetchRequest
        | kio.schema.fetch.v16.FetchRequest | kio.schema.fetch.v17.FetchRequest)
    FetchResponse: TypeAlias = (
        kio.schema.fetch.v4.FetchResponse | kio.schema.fetch.v5.FetchResponse
        | kio.schema.fetch.v6.FetchResponse | kio.schema.fetch.v7.FetchResponse
        | kio.schema.fetch.v8.FetchResponse | kio.schema.fetch.v9.FetchResponse
        | kio.schema.fetch.v10.FetchResponse | kio.schema.fetch.v11.FetchResponse
        | kio.schema.fetch.v12.FetchResponse | kio.schema.fetch.v13.FetchResponse
        | kio.schema.fetch.v14.FetchResponse | kio.schema.fetch.v15.FetchResponse
        | kio.schema.fetch.v16.FetchResponse | kio.schema.fetch.v17.FetchResponse)
    ListOffsetsRequest: TypeAlias = (
        kio.schema.list_offsets.v1.ListOffsetsRequest
        | kio.schema.list_offsets.v2.ListOffsetsRequest
        | kio.schema.list_offsets.v3.ListOffsetsRequest
        | kio.schema.list_offsets.v4.ListOffsetsRequest
        | kio.schema.list_offsets.v5.ListOffsetsRequest
        | kio.schema.list_offsets.v6.ListOffsetsRequest
        | kio.schema.list_offsets.v7.ListOffsetsRequest
        | kio.schema.list_offsets.v8.ListOffsetsRequest
        | kio.schema.list_offsets.v9.ListOffsetsRequest)
    ListOffsetsResponse: TypeAlias = (
        kio.schema.list_offsets.v1.ListOffsetsResponse
        | kio.schema.list_offsets.v2.ListOffsetsResponse
        | kio.schema.list_offsets.v3.ListOffsetsResponse
        | kio.schema.list_offsets.v4.ListOffsetsResponse
        | kio.schema.list_offsets.v5.ListOffsetsResponse
        | kio.schema.list_offsets.v6.ListOffsetsResponse
        | kio.schema.list_offsets.v7.ListOffsetsResponse
        | kio.schema.list_offsets.v8.ListOffsetsResponse
        | kio.schema.list_offsets.v9.ListOffsetsResponse)
    MetadataRequest: TypeAlias = (
        kio.schema.metadata.v0.MetadataRequest | kio.schema.metadata.v1.MetadataRequest
        | kio.schema.metadata.v2.MetadataRequest | kio.schema.metadata.v3.MetadataRequest
        | kio.schema.metadata.v4.MetadataRequest | kio.schema.metadata.v5.MetadataRequest
        | kio.schema.metadata.v6.MetadataRequest | kio.schema.metadata.v7.MetadataRequest
        | kio.schema.metadata.v8.MetadataRequest | kio.schema.metadata.v9.MetadataRequest
        | kio.schema.metadata.v10.MetadataRequest | kio.schema.metadata.v11.MetadataRequest
        | kio.schema.metadata.v12.MetadataRequest)
    MetadataResponse: TypeAlias = (
        kio.schema.metadata.v0.MetadataResponse | kio.schema.metadata.v1.MetadataResponse
        | kio.schema.metadata.v2.MetadataResponse | kio.schema.metadata.v3.MetadataResponse
        | kio.schema.metadata.v4.MetadataResponse | kio.schema.metadata.v5.MetadataResponse
        | kio.schema.metadata.v6.MetadataResponse | kio.schema.metadata.v7.MetadataResponse
        | kio.schema.metadata.v8.MetadataResponse | kio.schema.metadata.v9.MetadataResponse
        | kio.schema.metadata.v10.MetadataResponse | kio.schema.metadata.v11.MetadataResponse
        | kio.schema.metadata.v12.MetadataResponse)
    LeaderAndIsrRequest: TypeAlias = (
        kio.schema.leader_and_isr.v5.LeaderAndIsrRequest
        | kio.schema.leader_and_isr.v6.LeaderAndIsrRequest
        | kio.schema.leader_and_isr.v7.LeaderAndIsrRequest)
    LeaderAndIsrResponse: TypeAlias = (
        kio.schema.leader_and_isr.v5.LeaderAndIsrResponse
        | kio.schema.leader_and_isr.v6.LeaderAndIsrResponse
        | kio.schema.leader_and_isr.v7.LeaderAndIsrResponse)
    StopReplicaRequest: TypeAlias = (
        kio.schema.stop_replica.v3.StopReplicaRequest
        | kio.schema.stop_replica.v4.StopReplicaRequest)
    StopReplicaResponse: TypeAlias = (
        kio.schema.stop_replica.v3.StopReplicaResponse
        | kio.schema.stop_replica.v4.StopReplicaResponse)
    UpdateMetadataRequest: TypeAlias = (
        kio.schema.update_metadata.v7.UpdateMetadataRequest
        | kio.schema.update_metadata.v8.UpdateMetadataRequest)
    UpdateMetadataResponse: TypeAlias = (
        kio.schema.update_metadata.v7.UpdateMetadataResponse
        | kio.schema.update_metadata.v8.UpdateMetadataResponse)
    ControlledShutdownRequest: TypeAlias = (
        kio.schema.controlled_shutdown.v2.ControlledShutdownRequest
        | kio.schema.controlled_shutdown.v3.ControlledShutdownRequest)
    ControlledShutdownResponse: TypeAlias = (
        kio.schema.controlled_shutdown.v2.ControlledShutdownResponse
        | kio.schema.controlled_shutdown.v3.ControlledShutdownResponse)
    OffsetCommitRequest: TypeAlias = (
        kio.schema.offset_commit.v0.OffsetCommitRequest
        | kio.schema.offset_commit.v1.OffsetCommitRequest
        | kio.schema.offset_commit.v2.OffsetCommitRequest
        | kio.schema.offset_commit.v3.OffsetCommitRequest
        | kio.schema.offset_commit.v4.OffsetCommitRequest
        | kio.schema.offset_commit.v5.OffsetCommitRequest
        | kio.schema.offset_commit.v6.OffsetCommitRequest
        | kio.schema.offset_commit.v7.OffsetCommitRequest
        | kio.schema.offset_commit.v8.OffsetCommitRequest
        | kio.schema.offset_commit.v9.OffsetCommitRequest)
    OffsetCommitResponse: TypeAlias = (
        kio.schema.offset_commit.v0.OffsetCommitResponse
        | kio.schema.offset_commit.v1.OffsetCommitResponse
        | kio.schema.offset_commit.v2.OffsetCommitResponse
        | kio.schema.offset_commit.v3.OffsetCommitResponse
        | kio.schema.offset_commit.v4.OffsetCommitResponse
        | kio.schema.offset_commit.v5.OffsetCommitResponse
        | kio.schema.offset_commit.v6.OffsetCommitResponse
        | kio.schema.offset_commit.v7.OffsetCommitResponse
        | kio.schema.offset_commit.v8.OffsetCommitResponse
        | kio.schema.offset_commit.v9.OffsetCommitResponse)
    OffsetFetchRequest: TypeAlias = (
        kio.schema.offset_fetch.v0.OffsetFetchRequest
        | kio.schema.offset_fetch.v1.OffsetFetchRequest
        | kio.schema.offset_fetch.v2.OffsetFetchRequest
        | kio.schema.offset_fetch.v3.OffsetFetchRequest
        | kio.schema.offset_fetch.v4.OffsetFetchRequest
        | kio.schema.offset_fetch.v5.OffsetFetchRequest
        | kio.schema.offset_fetch.v6.OffsetFetchRequest
        | kio.schema.offset_fetch.v7.OffsetFetchRequest
        | kio.schema.offset_fetch.v8.OffsetFetchRequest
        | kio.schema.offset_fetch.v9.OffsetFetchRequest)
    OffsetFetchResponse: TypeAlias = (
        kio.schema.offset_fetch.v0.OffsetFetchResponse
        | kio.schema.offset_fetch.v1.OffsetFetchResponse
        | kio.schema.offset_fetch.v2.OffsetFetchResponse
        | kio.schema.offset_fetch.v3.OffsetFetchResponse
        | kio.schema.offset_fetch.v4.OffsetFetchResponse
        | kio.schema.offset_fetch.v5.OffsetFetchResponse
        | kio.schema.offset_fetch.v6.OffsetFetchResponse
        | kio.schema.offset_fetch.v7.OffsetFetchResponse
        | kio.schema.offset_fetch.v8.OffsetFetchResponse
        | kio.schema.offset_fetch.v9.OffsetFetchResponse)
    FindCoordinatorRequest: TypeAlias = (
        kio.schema.find_coordinator.v0.FindCoordinatorRequest
        | kio.schema.find_coordinator.v1.FindCoordinatorRequest
        | kio.schema.find_coordinator.v2.FindCoordinatorRequest
        | kio.schema.find_coordinator.v3.FindCoordinatorRequest
        | kio.schema.find_coordinator.v4.FindCoordinatorRequest
        | kio.schema.find_coordinator.v5.FindCoordinatorRequest)
    FindCoordinatorResponse: TypeAlias = (
        kio.schema.find_coordinator.v0.FindCoordinatorResponse
        | kio.schema.find_coordinator.v1.FindCoordinatorResponse
        | kio.schema.find_coordinator.v2.FindCoordinatorResponse
        | kio.schema.find_coordinator.v3.FindCoordinatorResponse
        | kio.schema.find_coordinator.v4.FindCoordinatorResponse
        | kio.schema.find_coordinator.v5.FindCoordinatorResponse)
    JoinGroupRequest: TypeAlias = (
        kio.schema.join_group.v0.JoinGroupRequest | kio.schema.join_group.v1.JoinGroupRequest
        | kio.schema.join_group.v2.JoinGroupRequest | kio.schema.join_group.v3.JoinGroupRequest
        | kio.schema.join_group.v4.JoinGroupRequest | kio.schema.join_group.v5.JoinGroupRequest
        | kio.schema.join_group.v6.JoinGroupRequest | kio.schema.join_group.v7.JoinGroupRequest
        | kio.schema.join_group.v8.JoinGroupRequest | kio.schema.join_group.v9.JoinGroupRequest)
    JoinGroupResponse: TypeAlias = (
        kio.schema.join_group.v0.JoinGroupResponse | kio.schema.join_group.v1.JoinGroupResponse
        | kio.schema.join_group.v2.JoinGroupResponse | kio.schema.join_group.v3.JoinGroupResponse
        | kio.schema.join_group.v4.JoinGroupResponse | kio.schema.join_group.v5.JoinGroupResponse
        | kio.schema.join_group.v6.JoinGroupResponse | kio.schema.join_group.v7.JoinGroupResponse
        | kio.schema.join_group.v8.JoinGroupResponse | kio.schema.join_group.v9.JoinGroupResponse)
    HeartbeatRequest: TypeAlias = (
        kio.schema.heartbeat.v0.HeartbeatRequest | kio.schema.heartbeat.v1.HeartbeatRequest
        | kio.schema.heartbeat.v2.HeartbeatRequest | kio.schema.heartbeat.v3.HeartbeatRequest
        | kio.schema.heartbeat.v4.HeartbeatRequest)
    HeartbeatResponse: TypeAlias = (
        kio.schema.heartbeat.v0.HeartbeatResponse | kio.schema.heartbeat.v1.HeartbeatResponse
        | kio.schema.heartbeat.v2.HeartbeatResponse | kio.schema.heartbeat.v3.HeartbeatResponse
        | kio.schema.heartbeat.v4.HeartbeatResponse)
    LeaveGroupRequest: TypeAlias = (
        kio.schema.leave_group.v0.LeaveGroupRequest | kio.schema.leave_group.v1.LeaveGroupRequest
        | kio.schema.leave_group.v2.LeaveGroupRequest | kio.schema.leave_group.v3.LeaveGroupRequest
        | kio.schema.leave_group.v4.LeaveGroupRequest | kio.schema.leave_group.v5.LeaveGroupRequest)
    LeaveGroupResponse: TypeAlias = (
        kio.schema.leave_group.v0.LeaveGroupResponse | kio.schema.leave_group.v1.LeaveGroupResponse
        | kio.schema.leave_group.v2.LeaveGroupResponse
        | kio.schema.leave_group.v3.LeaveGroupResponse
        | kio.schema.leave_group.v4.LeaveGroupResponse
        | kio.schema.leave_group.v5.LeaveGroupResponse)
    SyncGroupRequest: TypeAlias = (
        kio.schema.sync_group.v0.SyncGroupRequest | kio.schema.sync_group.v1.SyncGroupRequest
        | kio.schema.sync_group.v2.SyncGroupRequest | kio.schema.sync_group.v3.SyncGroupRequest
        | kio.schema.sync_group.v4.SyncGroupRequest | kio.schema.sync_group.v5.SyncGroupRequest)
    SyncGroupResponse: TypeAlias = (
        kio.schema.sync_group.v0.SyncGroupResponse | kio.schema.sync_group.v1.SyncGroupResponse
        | kio.schema.sync_group.v2.SyncGroupResponse | kio.schema.sync_group.v3.SyncGroupResponse
        | kio.schema.sync_group.v4.SyncGroupResponse | kio.schema.sync_group.v5.SyncGroupResponse)
    DescribeGroupsRequest: TypeAlias = (
        kio.schema.describe_groups.v0.DescribeGroupsRequest
        | kio.schema.describe_groups.v1.DescribeGroupsRequest
        | kio.schema.describe_groups.v2.DescribeGroupsRequest
        | kio.schema.describe_groups.v3.DescribeGroupsRequest
        | kio.schema.describe_groups.v4.DescribeGroupsRequest
        | kio.schema.describe_groups.v5.DescribeGroupsRequest)
    DescribeGroupsResponse: TypeAlias = (
        kio.schema.describe_groups.v0.DescribeGroupsResponse
        | kio.schema.describe_groups.v1.DescribeGroupsResponse
        | kio.schema.describe_groups.v2.DescribeGroupsResponse
        | kio.schema.describe_groups.v3.DescribeGroupsResponse
        | kio.schema.describe_groups.v4.DescribeGroupsResponse
        | kio.schema.describe_groups.v5.DescribeGroupsResponse)
    ListGroupsRequest: TypeAlias = (
        kio.schema.list_groups.v0.ListGroupsRequest | kio.schema.list_groups.v1.ListGroupsRequest
        | kio.schema.list_groups.v2.ListGroupsRequest | kio.schema.list_groups.v3.ListGroupsRequest
        | kio.schema.list_groups.v4.ListGroupsRequest | kio.schema.list_groups.v5.ListGroupsRequest)
    ListGroupsResponse: TypeAlias = (
        kio.schema.list_groups.v0.ListGroupsResponse | kio.schema.list_groups.v1.ListGroupsResponse
        | kio.schema.list_groups.v2.ListGroupsResponse
        | kio.schema.list_groups.v3.ListGroupsResponse
        | kio.schema.list_groups.v4.ListGroupsResponse
        | kio.schema.list_groups.v5.ListGroupsResponse)
    SaslHandshakeRequest: TypeAlias = (
        kio.schema.sasl_handshake.v0.SaslHandshakeRequest
        | kio.schema.sasl_handshake.v1.SaslHandshakeRequest)
    SaslHandshakeResponse: TypeAlias = (
        kio.schema.sasl_handshake.v0.SaslHandshakeResponse
        | kio.schema.sasl_handshake.v1.SaslHandshakeResponse)
    ApiVersionsRequest: TypeAlias = (
        kio.schema.api_versions.v0.ApiVersionsRequest
        | kio.schema.api_versions.v1.ApiVersionsRequest
        | kio.schema.api_versions.v2.ApiVersionsRequest
        | kio.schema.api_versions.v3.ApiVersionsRequest
        | kio.schema.api_versions.v4.ApiVersionsRequest)
    ApiVersionsResponse: TypeAlias = (
        kio.schema.api_versions.v0.ApiVersionsResponse
        | kio.schema.api_versions.v1.ApiVersionsResponse
        | kio.schema.api_versions.v2.ApiVersionsResponse
        | kio.schema.api_versions.v3.ApiVersionsResponse
        | kio.schema.api_versions.v4.ApiVersionsResponse)
    CreateTopicsRequest: TypeAlias = (
        kio.schema.create_topics.v0.CreateTopicsRequest
        | kio.schema.create_topics.v1.CreateTopicsRequest
        | kio.schema.create_topics.v2.CreateTopicsRequest
        | kio.schema.create_topics.v3.CreateTopicsRequest
        | kio.schema.create_topics.v4.CreateTopicsRequest
        | kio.schema.create_topics.v5.CreateTopicsRequest
        | kio.schema.create_topics.v6.CreateTopicsRequest
        | kio.schema.create_topics.v7.CreateTopicsRequest)
    CreateTopicsResponse: TypeAlias = (
        kio.schema.create_topics.v0.CreateTopicsResponse
        | kio.schema.create_topics.v1.CreateTopicsResponse
        | kio.schema.create_topics.v2.CreateTopicsResponse
        | kio.schema.create_topics.v3.CreateTopicsResponse
        | kio.schema.create_topics.v4.CreateTopicsResponse
        | kio.schema.create_topics.v5.CreateTopicsResponse
        | kio.schema.create_topics.v6.CreateTopicsResponse
        | kio.schema.create_topics.v7.CreateTopicsResponse)
    DeleteTopicsRequest: TypeAlias = (
        kio.schema.delete_topics.v0.DeleteTopicsRequest
        | kio.schema.delete_topics.v1.DeleteTopicsRequest
        | kio.schema.delete_topics.v2.DeleteTopicsRequest
        | kio.schema.delete_topics.v3.DeleteTopicsRequest
        | kio.schema.delete_topics.v4.DeleteTopicsRequest
        | kio.schema.delete_topics.v5.DeleteTopicsRequest
        | kio.schema.delete_topics.v6.DeleteTopicsRequest)
    DeleteTopicsResponse: TypeAlias = (
        kio.schema.delete_topics.v0.DeleteTopicsResponse
        | kio.schema.delete_topics.v1.DeleteTopicsResponse
        | kio.schema.delete_topics.v2.DeleteTopicsResponse
        | kio.schema.delete_topics.v3.DeleteTopicsResponse
        | kio.schema.delete_topics.v4.DeleteTopicsResponse
        | kio.schema.delete_topics.v5.DeleteTopicsResponse
        | kio.schema.delete_topics.v6.DeleteTopicsResponse)
    DeleteRecordsRequest: TypeAlias = (
        kio.schema.delete_records.v0.DeleteRecordsRequest
        | kio.schema.delete_records.v1.DeleteRecordsRequest
        | kio.schema.delete_records.v2.DeleteRecordsRequest)
    DeleteRecordsResponse: TypeAlias = (
        kio.schema.delete_records.v0.DeleteRecordsResponse
        | kio.schema.delete_records.v1.DeleteRecordsResponse
        | kio.schema.delete_records.v2.DeleteRecordsResponse)
    InitProducerIdRequest: TypeAlias = (
        kio.schema.init_producer_id.v0.InitProducerIdRequest
        | kio.schema.init_producer_id.v1.InitProducerIdRequest
        | kio.schema.init_producer_id.v2.InitProducerIdRequest
        | kio.schema.init_producer_id.v3.InitProducerIdRequest
        | kio.schema.init_producer_id.v4.InitProducerIdRequest
        | kio.schema.init_producer_id.v5.InitProducerIdRequest)
    InitProducerIdResponse: TypeAlias = (
        kio.schema.init_producer_id.v0.InitProducerIdResponse
        | kio.schema.init_producer_id.v1.InitProducerIdResponse
        | kio.schema.init_producer_id.v2.InitProducerIdResponse
        | kio.schema.init_producer_id.v3.InitProducerIdResponse
        | kio.schema.init_producer_id.v4.InitProducerIdResponse
        | kio.schema.init_producer_id.v5.InitProducerIdResponse)
    OffsetForLeaderEpochRequest: TypeAlias = (
        kio.schema.offset_for_leader_epoch.v0.OffsetForLeaderEpochRequest
        | kio.schema.offset_for_leader_epoch.v1.OffsetForLeaderEpochRequest
        | kio.schema.offset_for_leader_epoch.v2.OffsetForLeaderEpochRequest
        | kio.schema.offset_for_leader_epoch.v3.OffsetForLeaderEpochRequest
        | kio.schema.offset_for_leader_epoch.v4.OffsetForLeaderEpochRequest)
    OffsetForLeaderEpochResponse: TypeAlias = (
        kio.schema.offset_for_leader_epoch.v0.OffsetForLeaderEpochResponse
        | kio.schema.offset_for_leader_epoch.v1.OffsetForLeaderEpochResponse
        | kio.schema.offset_for_leader_epoch.v2.OffsetForLeaderEpochResponse
        | kio.schema.offset_for_leader_epoch.v3.OffsetForLeaderEpochResponse
        | kio.schema.offset_for_leader_epoch.v4.OffsetForLeaderEpochResponse)
    AddPartitionsToTxnRequest: TypeAlias = (
        kio.schema.add_partitions_to_txn.v0.AddPartitionsToTxnRequest
        | kio.schema.add_partitions_to_txn.v1.AddPartitionsToTxnRequest
        | kio.schema.add_partitions_to_txn.v2.AddPartitionsToTxnRequest
        | kio.schema.add_partitions_to_txn.v3.AddPartitionsToTxnRequest
        | kio.schema.add_partitions_to_txn.v4.AddPartitionsToTxnRequest
        | kio.schema.add_partitions_to_txn.v5.AddPartitionsToTxnRequest)
    AddPartitionsToTxnResponse: TypeAlias = (
        kio.schema.add_partitions_to_txn.v0.AddPartitionsToTxnResponse
        | kio.schema.add_partitions_to_txn.v1.AddPartitionsToTxnResponse
        | kio.schema.add_partitions_to_txn.v2.AddPartitionsToTxnResponse
        | kio.schema.add_partitions_to_txn.v3.AddPartitionsToTxnResponse
        | kio.schema.add_partitions_to_txn.v4.AddPartitionsToTxnResponse
        | kio.schema.add_partitions_to_txn.v5.AddPartitionsToTxnResponse)
    AddOffsetsToTxnRequest: TypeAlias = (
        kio.schema.add_offsets_to_txn.v0.AddOffsetsToTxnRequest
        | kio.schema.add_offsets_to_txn.v1.AddOffsetsToTxnRequest
        | kio.schema.add_offsets_to_txn.v2.AddOffsetsToTxnRequest
        | kio.schema.add_offsets_to_txn.v3.AddOffsetsToTxnRequest
        | kio.schema.add_offsets_to_txn.v4.AddOffsetsToTxnRequest)
    AddOffsetsToTxnResponse: TypeAlias = (
        kio.schema.add_offsets_to_txn.v0.AddOffsetsToTxnResponse
        | kio.schema.add_offsets_to_txn.v1.AddOffsetsToTxnResponse
        | kio.schema.add_offsets_to_txn.v2.AddOffsetsToTxnResponse
        | kio.schema.add_offsets_to_txn.v3.AddOffsetsToTxnResponse
        | kio.schema.add_offsets_to_txn.v4.AddOffsetsToTxnResponse)
    EndTxnRequest: TypeAlias = (
        kio.schema.end_txn.v0.EndTxnRequest | kio.schema.end_txn.v1.EndTxnRequest
        | kio.schema.end_txn.v2.EndTxnRequest | kio.schema.end_txn.v3.EndTxnRequest
        | kio.schema.end_txn.v4.EndTxnRequest)
    EndTxnResponse: TypeAlias = (
        kio.schema.end_txn.v0.EndTxnResponse | kio.schema.end_txn.v1.EndTxnResponse
        | kio.schema.end_txn.v2.EndTxnResponse | kio.schema.end_txn.v3.EndTxnResponse
        | kio.schema.end_txn.v4.EndTxnResponse)
    WriteTxnMarkersRequest: TypeAlias = (
        kio.schema.write_txn_markers.v0.WriteTxnMarkersRequest
        | kio.schema.write_txn_markers.v1.WriteTxnMarkersRequest)
    WriteTxnMarkersResponse: TypeAlias = (
        kio.schema.write_txn_markers.v0.WriteTxnMarkersResponse
        | kio.schema.write_txn_markers.v1.WriteTxnMarkersResponse)
    TxnOffsetCommitRequest: TypeAlias = (
        kio.schema.txn_offset_commit.v0.TxnOffsetCommitRequest
        | kio.schema.txn_offset_commit.v1.TxnOffsetCommitRequest
        | kio.schema.txn_offset_commit.v2.TxnOffsetCommitRequest
        | kio.schema.txn_offset_commit.v3.TxnOffsetCommitRequest
        | kio.schema.txn_offset_commit.v4.TxnOffsetCommitRequest)
    TxnOffsetCommitResponse: TypeAlias = (
        kio.schema.txn_offset_commit.v0.TxnOffsetCommitResponse
        | kio.schema.txn_offset_commit.v1.TxnOffsetCommitResponse
        | kio.schema.txn_offset_commit.v2.TxnOffsetCommitResponse
        | kio.schema.txn_offset_commit.v3.TxnOffsetCommitResponse
        | kio.schema.txn_offset_commit.v4.TxnOffsetCommitResponse)
    DescribeAclsRequest: TypeAlias = (
        kio.schema.describe_acls.v0.DescribeAclsRequest
        | kio.schema.describe_acls.v1.DescribeAclsRequest
        | kio.schema.describe_acls.v2.DescribeAclsRequest
        | kio.schema.describe_acls.v3.DescribeAclsRequest)
    DescribeAclsResponse: TypeAlias = (
        kio.schema.describe_acls.v0.DescribeAclsResponse
        | kio.schema.describe_acls.v1.DescribeAclsResponse
        | kio.schema.describe_acls.v2.DescribeAclsResponse
        | kio.schema.describe_acls.v3.DescribeAclsResponse)
    CreateAclsRequest: TypeAlias = (
        kio.schema.create_acls.v0.CreateAclsRequest | kio.schema.create_acls.v1.CreateAclsRequest
        | kio.schema.create_acls.v2.CreateAclsRequest | kio.schema.create_acls.v3.CreateAclsRequest)
    CreateAclsResponse: TypeAlias = (
        kio.schema.create_acls.v0.CreateAclsResponse | kio.schema.create_acls.v1.CreateAclsResponse
        | kio.schema.create_acls.v2.CreateAclsResponse
        | kio.schema.create_acls.v3.CreateAclsResponse)
    DeleteAclsRequest: TypeAlias = (
        kio.schema.delete_acls.v0.DeleteAclsRequest | kio.schema.delete_acls.v1.DeleteAclsRequest
        | kio.schema.delete_acls.v2.DeleteAclsRequest | kio.schema.delete_acls.v3.DeleteAclsRequest)
    DeleteAclsResponse: TypeAlias = (
        kio.schema.delete_acls.v0.DeleteAclsResponse | kio.schema.delete_acls.v1.DeleteAclsResponse
        | kio.schema.delete_acls.v2.DeleteAclsResponse
        | kio.schema.delete_acls.v3.DeleteAclsResponse)
    DescribeConfigsRequest: TypeAlias = (
        kio.schema.describe_configs.v0.DescribeConfigsRequest
        | kio.schema.describe_configs.v1.DescribeConfigsRequest
        | kio.schema.describe_configs.v2.DescribeConfigsRequest
        | kio.schema.describe_configs.v3.DescribeConfigsRequest
        | kio.schema.describe_configs.v4.DescribeConfigsRequest)
    DescribeConfigsResponse: TypeAlias = (
        kio.schema.describe_configs.v0.DescribeConfigsResponse
        | kio.schema.describe_configs.v1.DescribeConfigsResponse
        | kio.schema.describe_configs.v2.DescribeConfigsResponse
        | kio.schema.describe_configs.v3.DescribeConfigsResponse
        | kio.schema.describe_configs.v4.DescribeConfigsResponse)
    AlterConfigsRequest: TypeAlias = (
        kio.schema.alter_configs.v0.AlterConfigsRequest
        | kio.schema.alter_configs.v1.AlterConfigsRequest
        | kio.schema.alter_configs.v2.AlterConfigsRequest)
    AlterConfigsResponse: TypeAlias = (
        kio.schema.alter_configs.v0.AlterConfigsResponse
        | kio.schema.alter_configs.v1.AlterConfigsResponse
        | kio.schema.alter_configs.v2.AlterConfigsResponse)
    DescribeLogDirsRequest: TypeAlias = (
        kio.schema.describe_log_dirs.v0.DescribeLogDirsRequest
        | kio.schema.describe_log_dirs.v1.DescribeLogDirsRequest
        | kio.schema.describe_log_dirs.v2.DescribeLogDirsRequest
        | kio.schema.describe_log_dirs.v3.DescribeLogDirsRequest
        | kio.schema.describe_log_dirs.v4.DescribeLogDirsRequest)
    DescribeLogDirsResponse: TypeAlias = (
        kio.schema.describe_log_dirs.v0.DescribeLogDirsResponse
        | kio.schema.describe_log_dirs.v1.DescribeLogDirsResponse
        | kio.schema.describe_log_dirs.v2.DescribeLogDirsResponse
        | kio.schema.describe_log_dirs.v3.DescribeLogDirsResponse
        | kio.schema.describe_log_dirs.v4.DescribeLogDirsResponse)
    SaslAuthenticateRequest: TypeAlias = (
        kio.schema.sasl_authenticate.v0.SaslAuthenticateRequest
        | kio.schema.sasl_authenticate.v1.SaslAuthenticateRequest
        | kio.schema.sasl_authenticate.v2.SaslAuthenticateRequest)
    SaslAuthenticateResponse: TypeAlias = (
        kio.schema.sasl_authenticate.v0.SaslAuthenticateResponse
        | kio.schema.sasl_authenticate.v1.SaslAuthenticateResponse
        | kio.schema.sasl_authenticate.v2.SaslAuthenticateResponse)
    CreatePartitionsRequest: TypeAlias = (
        kio.schema.create_partitions.v0.CreatePartitionsRequest
        | kio.schema.create_partitions.v1.CreatePartitionsRequest
        | kio.schema.create_partitions.v2.CreatePartitionsRequest
        | kio.schema.create_partitions.v3.CreatePartitionsRequest)
    CreatePartitionsResponse: TypeAlias = (
        kio.schema.create_partitions.v0.CreatePartitionsResponse
        | kio.schema.create_partitions.v1.CreatePartitionsResponse
        | kio.schema.create_partitions.v2.CreatePartitionsResponse
        | kio.schema.create_partitions.v3.CreatePartitionsResponse)
    DeleteGroupsRequest: TypeAlias = (
        kio.schema.delete_groups.v0.DeleteGroupsRequest
        | kio.schema.delete_groups.v1.DeleteGroupsRequest
        | kio.schema.delete_groups.v2.DeleteGroupsRequest)
    DeleteGroupsResponse: TypeAlias = (
        kio.schema.delete_groups.v0.DeleteGroupsResponse
        | kio.schema.delete_groups.v1.DeleteGroupsResponse
        | kio.schema.delete_groups.v2.DeleteGroupsResponse)
    ElectLeadersRequest: TypeAlias = (
        kio.schema.elect_leaders.v0.ElectLeadersRequest
        | kio.schema.elect_leaders.v1.ElectLeadersRequest
        | kio.schema.elect_leaders.v2.ElectLeadersRequest)
    ElectLeadersResponse: TypeAlias = (
        kio.schema.elect_leaders.v0.ElectLeadersResponse
        | kio.schema.elect_leaders.v1.ElectLeadersResponse
        | kio.schema.elect_leaders.v2.ElectLeadersResponse)
    IncrementalAlterConfigsRequest: TypeAlias = (
        kio.schema.incremental_alter_configs.v0.IncrementalAlterConfigsRequest
        | kio.schema.incremental_alter_configs.v1.IncrementalAlterConfigsRequest)
    IncrementalAlterConfigsResponse: TypeAlias = (
        kio.schema.incremental_alter_configs.v0.IncrementalAlterConfigsResponse
        | kio.schema.incremental_alter_configs.v1.IncrementalAlterConfigsResponse)
    AlterPartitionReassignmentsRequest: TypeAlias = (
        kio.schema.alter_partition_reassignments.v0.AlterPartitionReassignmentsRequest)
    AlterPartitionReassignmentsResponse: TypeAlias = (
        kio.schema.alter_partition_reassignments.v0.AlterPartitionReassignmentsResponse)
    ListPartitionReassignmentsRequest: TypeAlias = (
        kio.schema.list_partition_reassignments.v0.ListPartitionReassignmentsRequest)
    ListPartitionReassignmentsResponse: TypeAlias = (
        kio.schema.list_partition_reassignments.v0.ListPartitionReassignmentsResponse)
    OffsetDeleteRequest: TypeAlias = (
        kio.schema.offset_delete.v0.OffsetDeleteRequest)
    OffsetDeleteResponse: TypeAlias = (
        kio.schema.offset_delete.v0.OffsetDeleteResponse)
    DescribeClientQuotasRequest: TypeAlias = (
        kio.schema.describe_client_quotas.v0.DescribeClientQuotasRequest
        | kio.schema.describe_client_quotas.v1.DescribeClientQuotasRequest)
    DescribeClientQuotasResponse: TypeAlias = (
        kio.schema.describe_client_quotas.v0.DescribeClientQuotasResponse
        | kio.schema.describe_client_quotas.v1.DescribeClientQuotasResponse)
    DescribeUserScramCredentialsRequest: TypeAlias = (
        kio.schema.describe_user_scram_credentials.v0.DescribeUserScramCredentialsRequest)
    DescribeUserScramCredentialsResponse: TypeAlias = (
        kio.schema.describe_user_scram_credentials.v0.DescribeUserScramCredentialsResponse)
    AlterUserScramCredentialsRequest: TypeAlias = (
        kio.schema.alter_user_scram_credentials.v0.AlterUserScramCredentialsRequest)
    AlterUserScramCredentialsResponse: TypeAlias = (
        kio.schema.alter_user_scram_credentials.v0.AlterUserScramCredentialsResponse)
    AlterPartitionRequest: TypeAlias = (
        kio.schema.alter_partition.v0.AlterPartitionRequest
        | kio.schema.alter_partition.v1.AlterPartitionRequest
        | kio.schema.alter_partition.v2.AlterPartitionRequest
        | kio.schema.alter_partition.v3.AlterPartitionRequest)
    AlterPartitionResponse: TypeAlias = (
        kio.schema.alter_partition.v0.AlterPartitionResponse
        | kio.schema.alter_partition.v1.AlterPartitionResponse
        | kio.schema.alter_partition.v2.AlterPartitionResponse
        | kio.schema.alter_partition.v3.AlterPartitionResponse)
    DescribeClusterRequest: TypeAlias = (
        kio.schema.describe_cluster.v0.DescribeClusterRequest
        | kio.schema.describe_cluster.v1.DescribeClusterRequest)
    DescribeClusterResponse: TypeAlias = (
        kio.schema.describe_cluster.v0.DescribeClusterResponse
        | kio.schema.describe_cluster.v1.DescribeClusterResponse)
    DescribeProducersRequest: TypeAlias = (
        kio.schema.describe_producers.v0.DescribeProducersRequest)
    DescribeProducersResponse: TypeAlias = (
        kio.schema.describe_producers.v0.DescribeProducersResponse)
    DescribeTransactionsRequest: TypeAlias = (
        kio.schema.describe_transactions.v0.DescribeTransactionsRequest)
    DescribeTransactionsResponse: TypeAlias = (
        kio.schema.describe_transactions.v0.DescribeTransactionsResponse)
    ListTransactionsRequest: TypeAlias = (
        kio.schema.list_transactions.v0.ListTransactionsRequest
        | kio.schema.list_transactions.v1.ListTransactionsRequest)
    ListTransactionsResponse: TypeAlias = (
        kio.schema.list_transactions.v0.ListTransactionsResponse
        | kio.schema.list_transactions.v1.ListTransactionsResponse)
    AllocateProducerIdsRequest: TypeAlias = (
        kio.schema.allocate_producer_ids.v0.AllocateProducerIdsRequest)
    AllocateProducerIdsResponse: TypeAlias = (
        kio.schema.allocate_producer_ids.v0.AllocateProducerIdsResponse)
    ConsumerGroupHeartbeatRequest: TypeAlias = (
        kio.schema.consumer_group_heartbeat.v0.ConsumerGroupHeartbeatRequest
        | ConsumerGroupHeartbeatRequestV1)
    ConsumerGroupHeartbeatResponse: TypeAlias = (
        kio.schema.consumer_group_heartbeat.v0.ConsumerGroupHeartbeatResponse)
    ConsumerGroupDescribeRequest: TypeAlias = (
        kio.schema.consumer_group_describe.v0.ConsumerGroupDescribeRequest)
    ConsumerGroupDescribeResponse: TypeAlias = (
        kio.schema.consumer_group_describe.v0.ConsumerGroupDescribeResponse)
