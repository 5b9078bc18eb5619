"""One error hierarchy for the storage layer.

Every failure the log can diagnose from its input (a torn batch, a bad CRC, an offset that goes
backwards, a malformed checkpoint) is raised as a subclass of :class:`StorageError`, before any
byte on disk changes, so callers can catch one type and know the log is as it was.
"""

from __future__ import annotations

__all__ = [
    "CorruptCheckpointError",
    "CorruptIndexError",
    "CorruptRecordError",
    "CorruptSnapshotError",
    "InvalidEpochError",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "InvalidTxnStateError",
    "OffsetOutOfRangeError",
    "OutOfOrderOffsetError",
    "OutOfOrderSequenceError",
    "ProducerStateError",
    "RecordBatchTooLargeError",
    "RecordTooLargeError",
    "SegmentChangedError",
    "StorageError",
    "TransactionCoordinatorFencedError",
    "UnknownProducerIdError",
    "UnsupportedCompressionError",
]


class StorageError(Exception):
    """Base of every error raised by the replication storage layer."""


class CorruptRecordError(StorageError):
    """A record batch failed validation: size, magic, CRC or record layout."""


class UnsupportedCompressionError(CorruptRecordError):
    """A batch naming a codec Kafka does not have (5 to 7), which no client could have sent."""


class RecordTooLargeError(StorageError):
    """A batch larger than ``max.message.bytes`` (Kafka's MESSAGE_TOO_LARGE)."""


class RecordBatchTooLargeError(RecordTooLargeError):
    """An append larger than a segment may hold, ``segment.bytes`` (Kafka's
    RECORD_LIST_TOO_LARGE): checked after ``max.message.bytes``, as Kafka checks it."""


class OutOfOrderOffsetError(StorageError):
    """A follower append whose offsets do not strictly increase past the log end offset."""


class InvalidEpochError(StorageError):
    """A leader epoch that would move the epoch history backwards."""


class OffsetOutOfRangeError(StorageError):
    """A read below the log start offset or past the log end offset."""


class SegmentChangedError(StorageError):
    """A segment being cleaned was truncated under the pass (a follower's truncation): the
    pass stops there, as when :meth:`~replication.log.Log.replace_segments` refuses a swap."""


class CorruptIndexError(StorageError):
    """An offset or time index that does not match its segment; rebuilt from the log."""


class CorruptCheckpointError(StorageError):
    """A checkpoint file that does not parse in Kafka's text format."""


class CorruptSnapshotError(StorageError):
    """A producer state snapshot that does not parse or fails its CRC; rebuilt from the log."""


class InvalidRecordError(StorageError):
    """A produce the broker refuses as a whole (Kafka's INVALID_RECORD): here, an idempotent
    producer's batch sent together with other batches (a v2 produce holds one batch)."""


class ProducerStateError(StorageError):
    """An idempotent producer's batch that does not continue what the partition holds of that
    producer: refused before anything is written."""


class OutOfOrderSequenceError(ProducerStateError):
    """A batch whose first sequence does not follow the producer's last one (a gap, or a new
    epoch not starting at 0): Kafka's OUT_OF_ORDER_SEQUENCE_NUMBER."""


class UnknownProducerIdError(ProducerStateError):
    """A batch of a producer the partition holds nothing of that does not start at sequence 0
    (Kafka's UNKNOWN_PRODUCER_ID, as Kafka 0.11 to 2.4 answered it): the batches before it may
    never have been written."""


class InvalidProducerEpochError(ProducerStateError):
    """A batch from an older epoch of the producer than the partition has seen (a fenced
    zombie): Kafka's INVALID_PRODUCER_EPOCH."""


class InvalidTxnStateError(ProducerStateError):
    """A batch that does not fit the producer's transaction: a non-transactional batch while
    its transaction is open (Kafka's INVALID_TXN_STATE)."""


class TransactionCoordinatorFencedError(ProducerStateError):
    """A transaction marker from a coordinator epoch older than the one the partition saw for
    the producer (a zombie coordinator): Kafka's TRANSACTION_COORDINATOR_FENCED."""
