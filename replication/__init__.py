"""The data plane: segment logs, leader epochs, high watermark and ISR, replica fetching.

The storage layer re-exported here is Kafka's, format for format: v2 record batches
(:mod:`replication.records`), segments with sparse offset and time indexes
(:mod:`replication.segment`, :mod:`replication.index`), the leader epoch cache
(:mod:`replication.epochs`), text checkpoints (:mod:`replication.checkpoints`), the pure
follower-truncation decision (:mod:`replication.truncation`) and the per-partition
:class:`Log` (:mod:`replication.log`).

On top of it, replication proper: a broker's :class:`ReplicaManager`
(:mod:`replication.replica_manager`) holds its :class:`Partition` replicas
(:mod:`replication.partition`), leads them (produce with acks 0/1/all, HW, ISR in
:mod:`replication.isr`) or follows them through its :class:`ReplicaFetcher`
(:mod:`replication.fetcher`), all on an injectable clock (:mod:`coordinator.clock`).
Idempotent producers: each log keeps its partition's producer state
(:mod:`replication.producer_state`), and a broker hands out producer ids from blocks it claims
in the coordinator (:class:`ProducerIdManager`, :mod:`replication.producer_ids`).

The data plane knows the controller only through the contract (:mod:`interbroker`): its
requests, the ``ControllerClient`` leaders write ISR changes with. A broker node with its
registration and controller candidacy, the embedded cluster and the in-process clients are
assembled above, in :mod:`node`.
"""

from interbroker.errors import ErrorCode
from replication.checkpoints import (
    CLEAN_SHUTDOWN_FILE,
    HIGH_WATERMARK_CHECKPOINT_FILE,
    LEADER_EPOCH_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    OffsetCheckpointFile,
    log_directory_name,
    parse_log_directory_name,
)
from replication.config import ReplicaConfig
from replication.crash import cut_unflushed
from replication.delayed_produce import ProduceFuture
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
    CorruptSnapshotError,
    InvalidEpochError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OffsetOutOfRangeError,
    OutOfOrderOffsetError,
    OutOfOrderSequenceError,
    ProducerStateError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    StorageError,
    TransactionCoordinatorFencedError,
    UnsupportedCompressionError,
)
from replication.fetcher import FetchPosition, ReplicaFetcher
from replication.isr import (
    IsrChangeBatcher,
    IsrStore,
    LocalIsrStore,
    can_join_isr,
    effective_min_isr,
    high_watermark,
    out_of_sync_replicas,
)
from replication.local_log import ReadResult
from replication.log import AppendInfo, DuplicateAppend, Log, LogConfig
from replication.partition import Partition, ReplicaStatus, Role
from replication.producer_ids import ProducerIdAndEpoch, ProducerIdManager, ProducerIdsUnavailable
from replication.producer_state import BatchMetadata, ProducerEntry
from replication.protocol import (
    ACKS_ALL,
    CONSUMER_REPLICA_ID,
    AppendOrigin,
    ConsumerRead,
    EpochAnswer,
    FetchEndpoint,
    FetchResult,
    ProduceResult,
)
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
from replication.replica_manager import ReplicaManager
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
    "ACKS_ALL",
    "AppendOrigin",
    "CLEAN_SHUTDOWN_FILE",
    "CONSUMER_REPLICA_ID",
    "HIGH_WATERMARK_CHECKPOINT_FILE",
    "LEADER_EPOCH_CHECKPOINT_FILE",
    "RECOVERY_POINT_CHECKPOINT_FILE",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "AppendInfo",
    "AskAgain",
    "BatchHeader",
    "BatchMetadata",
    "ConsumerRead",
    "CorruptCheckpointError",
    "CorruptIndexError",
    "CorruptRecordError",
    "CorruptSnapshotError",
    "DuplicateAppend",
    "EpochAnswer",
    "EpochEndOffset",
    "EpochEntry",
    "ErrorCode",
    "FetchEndpoint",
    "FetchPosition",
    "FetchResult",
    "FollowerEpochView",
    "Header",
    "InvalidEpochError",
    "InvalidProducerEpochError",
    "InvalidTxnStateError",
    "InvalidRecordError",
    "IsrChangeBatcher",
    "IsrStore",
    "LeaderEpochCache",
    "LocalIsrStore",
    "Log",
    "LogConfig",
    "OffsetCheckpointFile",
    "OffsetOutOfRangeError",
    "OutOfOrderOffsetError",
    "OutOfOrderSequenceError",
    "Partition",
    "ProduceFuture",
    "ProduceResult",
    "ProducerEntry",
    "ProducerIdAndEpoch",
    "ProducerIdManager",
    "ProducerIdsUnavailable",
    "ProducerStateError",
    "ReadResult",
    "Record",
    "RecordBatch",
    "RecordBatchTooLargeError",
    "RecordTooLargeError",
    "ReplicaConfig",
    "ReplicaFetcher",
    "ReplicaManager",
    "ReplicaStatus",
    "Role",
    "StorageError",
    "TransactionCoordinatorFencedError",
    "Truncate",
    "TruncationDecision",
    "UnsupportedCompressionError",
    "can_join_isr",
    "cut_unflushed",
    "decide_truncation",
    "decide_without_epochs",
    "decode_batch",
    "effective_min_isr",
    "encode_batch",
    "first_epoch_to_ask",
    "high_watermark",
    "log_directory_name",
    "out_of_sync_replicas",
    "parse_log_directory_name",
    "read_batch_header",
    "stamp_batch",
    "validate_batches",
]
