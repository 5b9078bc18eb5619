"""A broker's remote storage settings (Kafka's ``remote.log.*`` broker configs)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

__all__ = ["MetadataCompaction", "RemoteLogConfig", "RetryBackoff"]

METADATA_DIRECTORY = "__remote_log_metadata"
MIN_STALE_RECORDS = 16
"""How many records of deleted segments a compaction of the remote log metadata waits for."""
FORGET_DELETED_AFTER_MS = 24 * 3600 * 1000
"""How long a compaction summary keeps naming a deleted segment whose events are all gone."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryBackoff:
    """How long a partition's copies pause after failing in a row (Kafka's
    ``remote.log.manager.task.retry.backoff.ms``, ``.backoff.max.ms`` and ``.jitter``): after
    ``n`` failures, ``initial_ms * 2**(n-1)`` capped at ``max_ms``, stretched or shrunk by up to
    ``jitter`` of itself (``unit`` in [0, 1) says where in that band). Pure."""

    initial_ms: int = 500
    max_ms: int = 30_000
    jitter: float = 0.2

    def __post_init__(self) -> None:
        if self.initial_ms < 0 or self.max_ms < self.initial_ms or not 0 <= self.jitter <= 1:
            raise ValueError("remote.log.manager.task.retry.backoff.ms must be at least 0 and "
                             "at most remote.log.manager.task.retry.backoff.max.ms, the jitter "
                             "between 0 and 1")

    def delay_ms(self, failures: int, unit: float) -> int:
        if failures < 1:
            return 0
        base = min(self.initial_ms * 2 ** min(failures - 1, 62), self.max_ms)
        return max(0, round(base * (1 + self.jitter * (2 * unit - 1))))


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataCompaction:
    """When the leader's pass compacts a partition's remote log metadata (see
    :meth:`~replication.tiered.metadata_manager.EventRemoteLogMetadataManager.compact`):
    ``min_stale_records`` (``partctl.remote.log.metadata.compaction.min.stale.records``), once that
    many records of deleted segments are there; ``delete_retention_ms``
    (``partctl.remote.log.metadata.compaction.delete.retention.ms``), how long after a segment went a
    summary still names it (as Kafka's ``delete.retention.ms`` keeps a tombstone): every
    broker must have refreshed the partition's metadata by then. Pure."""

    min_stale_records: int = MIN_STALE_RECORDS
    delete_retention_ms: int = FORGET_DELETED_AFTER_MS

    def __post_init__(self) -> None:
        if self.min_stale_records < 1:
            raise ValueError("partctl.remote.log.metadata.compaction.min.stale.records must be at "
                             "least 1")
        if self.delete_retention_ms < 0:
            raise ValueError("partctl.remote.log.metadata.compaction.delete.retention.ms must be at "
                             "least 0")


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoteLogConfig:
    """``system_enable``: ``remote.log.storage.system.enable`` (default false: no topic may be
    tiered on this broker); ``storage_url``: ``remote.log.storage.url``; ``manager_class_name``:
    ``remote.log.storage.manager.class.name`` (``module:Class``); ``metadata_dir``:
    ``partctl.remote.log.metadata.dir``, where the remote log metadata is kept (default: a
    ``__remote_log_metadata`` directory under a ``file://`` storage root);
    ``task_interval_ms``: ``remote.log.manager.task.interval.ms``; ``reader_threads``:
    ``remote.log.reader.threads``; ``s3_endpoint``: ``remote.log.storage.s3.endpoint``, the
    URL of an S3-compatible endpoint (None: AWS); ``retry_backoff``: the pause of a
    partition's copies after failures (:class:`RetryBackoff`); ``metadata_compaction``: when
    the metadata of deleted segments is summed up (:class:`MetadataCompaction`). With an ``s3://`` storage URL and no
    metadata directory the metadata lives in the same bucket (:meth:`metadata_in_s3`)."""

    system_enable: bool = False
    storage_url: str | None = None
    manager_class_name: str | None = None
    metadata_dir: Path | None = None
    task_interval_ms: int = 30_000
    reader_threads: int = 10
    s3_endpoint: str | None = None
    retry_backoff: RetryBackoff = RetryBackoff()
    metadata_compaction: MetadataCompaction = MetadataCompaction()

    def __post_init__(self) -> None:
        if self.task_interval_ms < 1 or self.reader_threads < 1:
            raise ValueError("remote.log.manager.task.interval.ms and remote.log.reader.threads "
                             "must be positive")
        if (self.system_enable and self.resolved_metadata_dir() is None
                and not self.metadata_in_s3()):
            raise ValueError("remote.log.storage.system.enable: set remote.log.storage.url "
                             "(file:///path or s3://bucket/prefix) or "
                             "partctl.remote.log.metadata.dir")

    def metadata_in_s3(self) -> bool:
        """Whether the remote log metadata is kept in the storage URL's S3 bucket."""
        return (self.metadata_dir is None and bool(self.storage_url)
                and urlparse(self.storage_url or "").scheme == "s3")

    def resolved_metadata_dir(self) -> Path | None:
        if self.metadata_dir is not None:
            return self.metadata_dir
        if self.storage_url:
            parsed = urlparse(self.storage_url)
            if parsed.scheme == "file" and parsed.path.startswith("/"):
                return Path(parsed.path) / METADATA_DIRECTORY
        return None
