"""The data plane: segment logs, leader epochs, high watermark and ISR, replica fetching.

The storage layer re-exported here is Kafka's, format for format: v2 record batches
(:mod:`replication.records`), segments with sparse offset and time indexes
(:mod:`replication.segment`, :mod:`replication.index`), the leader epoch cache
(:mod:`replication.epochs`), text checkpoints (:mod:`replication.checkpoints`), the pure
follower-truncation decision (:mod:`replication.truncation`) and the per-partition
:class:`Log` (:mod:`replication.log`).
"""

from replication.checkpoints import (
    CLEAN_SHUTDOWN_FILE,
    HIGH_WATERMARK_CHECKPOINT_FILE,
    LEADER_EPOCH_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    OffsetCheckpointFile,
    log_directory_name,
    parse_log_directory_name,
)
from replication.epochs import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEndOffset,
    EpochEntry,
    LeaderEpochCache,
)
from replication.errors import (
    CorruptCheckpointError,
    CorruptIndexError,
    CorruptRecordError,
    InvalidEpochError,
    OffsetOutOfRangeError,
    OutOfOrderOffsetError,
    RecordTooLargeError,
    StorageError,
    UnsupportedCompressionError,
)
from replication.log import AppendInfo, Log, LogConfig, ReadResult
from replication.records import (
    BatchHeader,
    Header,
    Record,
    RecordBatch,
    decode_batch,
    encode_batch,
    read_batch_header,
    stamp_batch,
    validate_batches,
)
from replication.truncation import (
    AskAgain,
    FollowerEpochView,
    Truncate,
    TruncationDecision,
    decide_truncation,
    decide_without_epochs,
    first_epoch_to_ask,
)

__all__ = [
    "CLEAN_SHUTDOWN_FILE",
    "HIGH_WATERMARK_CHECKPOINT_FILE",
    "LEADER_EPOCH_CHECKPOINT_FILE",
    "RECOVERY_POINT_CHECKPOINT_FILE",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "AppendInfo",
    "AskAgain",
    "BatchHeader",
    "CorruptCheckpointError",
    "CorruptIndexError",
    "CorruptRecordError",
    "EpochEndOffset",
    "EpochEntry",
    "FollowerEpochView",
    "Header",
    "InvalidEpochError",
    "LeaderEpochCache",
    "Log",
    "LogConfig",
    "OffsetCheckpointFile",
    "OffsetOutOfRangeError",
    "OutOfOrderOffsetError",
    "ReadResult",
    "Record",
    "RecordBatch",
    "RecordTooLargeError",
    "StorageError",
    "Truncate",
    "TruncationDecision",
    "UnsupportedCompressionError",
    "decide_truncation",
    "decide_without_epochs",
    "encode_batch",
    "decode_batch",
    "first_epoch_to_ask",
    "log_directory_name",
    "parse_log_directory_name",
    "read_batch_header",
    "stamp_batch",
    "validate_batches",
]
