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
    "InvalidEpochError",
    "OffsetOutOfRangeError",
    "OutOfOrderOffsetError",
    "RecordTooLargeError",
    "StorageError",
    "UnsupportedCompressionError",
]


class StorageError(Exception):
    """Base of every error raised by the replication storage layer."""


class CorruptRecordError(StorageError):
    """A record batch failed validation: size, magic, CRC or record layout."""


class UnsupportedCompressionError(StorageError):
    """A batch whose attributes name a compression codec; only uncompressed batches are handled."""


class RecordTooLargeError(StorageError):
    """A batch larger than a segment may hold."""


class OutOfOrderOffsetError(StorageError):
    """A follower append whose offsets do not strictly increase past the log end offset."""


class InvalidEpochError(StorageError):
    """A leader epoch that would move the epoch history backwards."""


class OffsetOutOfRangeError(StorageError):
    """A read below the log start offset or past the log end offset."""


class CorruptIndexError(StorageError):
    """An offset or time index that does not match its segment; rebuilt from the log."""


class CorruptCheckpointError(StorageError):
    """A checkpoint file that does not parse in Kafka's text format."""
