"""Tiered storage (KIP-405): old segments in remote storage, read back when asked for.

The two plugin interfaces are Kafka's: :class:`RemoteStorageManager` stores the bytes of
segments (:mod:`.storage`, with the filesystem one in :mod:`.filesystem`) and
:class:`RemoteLogMetadataManager` their metadata and states (:mod:`.metadata_manager`). The
:class:`RemoteLogManager` (:mod:`.manager`) copies rolled segments from leaders, applies
retention to the remote tier and serves reads below the local log start.
"""

from replication.tiered.config import MetadataCompaction, RemoteLogConfig, RetryBackoff
from replication.tiered.filesystem import FileSystemRemoteStorageManager
from replication.tiered.manager import RemoteLogManager, TieredPartition, highest_remote_offset
from replication.tiered.metadata import (
    VALID_PREVIOUS_STATES,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    TopicIdPartition,
    is_valid_transition,
    kafka_uuid_text,
    split_transitions,
)
from replication.tiered.metadata_manager import (
    CompactableMetadata,
    EventRemoteLogMetadataManager,
    FileRemoteLogMetadataManager,
    InvalidTransitionError,
    RemoteLogMetadataCache,
    RemoteLogMetadataManager,
    S3RemoteLogMetadataManager,
    UnknownSegmentError,
)
from replication.tiered.s3 import S3RemoteStorageManager
from replication.tiered.storage import (
    IndexType,
    LogSegmentData,
    RemoteResourceNotFoundError,
    RemoteStorageError,
    RemoteStorageManager,
    load_remote_storage_manager,
)

__all__ = [
    "VALID_PREVIOUS_STATES",
    "CompactableMetadata",
    "EventRemoteLogMetadataManager",
    "S3RemoteLogMetadataManager",
    "S3RemoteStorageManager",
    "FileRemoteLogMetadataManager",
    "FileSystemRemoteStorageManager",
    "IndexType",
    "InvalidTransitionError",
    "LogSegmentData",
    "MetadataCompaction",
    "RemoteLogConfig",
    "RemoteLogManager",
    "RemoteLogMetadataCache",
    "RemoteLogMetadataManager",
    "RemoteLogSegmentId",
    "RemoteLogSegmentMetadata",
    "RemoteLogSegmentMetadataUpdate",
    "RemoteLogSegmentState",
    "RemoteResourceNotFoundError",
    "RemoteStorageError",
    "RemoteStorageManager",
    "RetryBackoff",
    "TieredPartition",
    "TopicIdPartition",
    "UnknownSegmentError",
    "highest_remote_offset",
    "is_valid_transition",
    "kafka_uuid_text",
    "load_remote_storage_manager",
    "split_transitions",
]
