"""The RemoteStorageManager plugin interface (Kafka's, KIP-405) and the choice of one by URL.

A RemoteStorageManager stores the bytes of copied segments: the ``.log`` file with its offset
index, time index, producer snapshot, aborted-transaction index and the leader-epoch checkpoint
sliced to the segment (:class:`LogSegmentData`), and serves them back from a byte position, or
one index at a time.
It knows nothing of offsets or states: what a copy means, and when it may be read, lives in
the metadata (:mod:`replication.tiered.metadata_manager`).

Backends are chosen by ``remote.log.storage.url`` (``file:///path``: the filesystem one;
``s3://bucket/prefix``: the S3 one, :mod:`replication.tiered.s3`) or, for a third-party one, by
``remote.log.storage.manager.class.name`` = ``"module:Class"``, constructed with the URL (or
None) and the broker's id. A backend imports its client lazily, in its own module, and
translates its client's errors into :class:`RemoteStorageError` once, at its boundary.
"""

from __future__ import annotations

import enum
import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol, runtime_checkable
from urllib.parse import urlparse

from replication.tiered.metadata import RemoteLogSegmentMetadata

__all__ = [
    "IndexType",
    "LocalSegmentFiles",
    "LogSegmentData",
    "RemoteResourceNotFoundError",
    "RemoteStorageError",
    "RemoteStorageManager",
    "load_remote_storage_manager",
]


class RemoteStorageError(Exception):
    """The remote store failed (Kafka's RemoteStorageException): retriable by the caller."""


class RemoteResourceNotFoundError(RemoteStorageError):
    """What was asked for is not in the remote store (never copied whole, or deleted)."""


class IndexType(enum.Enum):
    """The auxiliary files of a remote segment (Kafka's RemoteStorageManager.IndexType)."""

    OFFSET = "index"
    TIMESTAMP = "timeindex"
    PRODUCER_SNAPSHOT = "snapshot"
    TRANSACTION = "txnindex"
    LEADER_EPOCH = "leader_epoch_checkpoint"


@dataclass(frozen=True, slots=True, kw_only=True)
class LogSegmentData:
    """What a copy uploads: the segment's files on local disk, and the leader-epoch
    checkpoint (bytes, in the checkpoint file's text format) holding the epochs up to the
    segment's end. ``producer_snapshot`` is None when the log kept no snapshot at the
    segment's end, ``transaction_index`` when no transaction was aborted in the segment (it
    has no ``.txnindex``): nothing is uploaded for them then, and a fetch of that index finds
    nothing (:class:`RemoteResourceNotFoundError`), read as an empty index."""

    log_segment: Path
    offset_index: Path
    time_index: Path
    producer_snapshot: Path | None
    leader_epoch_index: bytes
    transaction_index: Path | None = None


@runtime_checkable
class RemoteStorageManager(Protocol):
    """Kafka's RemoteStorageManager. Every method may raise :class:`RemoteStorageError`."""

    def copy_log_segment_data(self, metadata: RemoteLogSegmentMetadata,
                              data: LogSegmentData) -> None:
        """Store the segment's files under ``metadata.segment_id``. Nothing of a copy that
        fails or is interrupted may be served by the fetch methods."""
        ...

    def fetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                          end_position: int | None = None) -> BinaryIO:
        """The segment's log bytes from ``start_position`` to ``end_position`` (inclusive;
        None: the end). The caller closes the stream."""
        ...

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType
                    ) -> BinaryIO:
        """One auxiliary file of the segment. The caller closes the stream."""
        ...

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        """Delete every file of the segment; deleting what is already gone succeeds."""
        ...

    def close(self) -> None:
        ...


@runtime_checkable
class LocalSegmentFiles(Protocol):
    """A capability some remote storage managers have besides Kafka's interface: their segments
    are files on this machine (the filesystem one, a local or shared mount), so a read can hand
    the file to ``sendfile`` rather than copy it through memory."""

    def open_log_segment(self, metadata: RemoteLogSegmentMetadata) -> int:
        """A new descriptor of the segment's ``.log`` file, open for reading; the caller closes
        it. :class:`RemoteResourceNotFoundError` when the segment is not there whole."""
        ...


def load_remote_storage_manager(url: str | None, class_name: str | None = None, *,
                                broker_id: int = -1, s3_endpoint: str | None = None
                                ) -> RemoteStorageManager:
    """The manager ``remote.log.storage.manager.class.name`` names (``"module:Class"``,
    called with ``url`` and ``broker_id``), else the one ``url``'s scheme names
    (``file:///path``; ``s3://bucket/prefix``, at ``s3_endpoint`` if given). Raises
    ValueError with one clear line for a URL or class that cannot be used."""
    if class_name:
        module_name, _, attr = class_name.partition(":")
        if not module_name or not attr:
            raise ValueError(f"remote.log.storage.manager.class.name: {class_name!r} is not "
                             "'module:Class'")
        try:
            factory = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise ValueError(f"remote.log.storage.manager.class.name: cannot load "
                             f"{class_name!r}: {exc}") from exc
        manager = factory(url, broker_id=broker_id)
        if not isinstance(manager, RemoteStorageManager):
            raise ValueError(f"remote.log.storage.manager.class.name: {class_name!r} is not a "
                             "RemoteStorageManager")
        return manager
    if not url:
        raise ValueError("remote.log.storage.url is not set (file:///path)")
    parsed = urlparse(url)
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost") or not parsed.path.startswith("/"):
            raise ValueError(f"remote.log.storage.url: {url!r}: give an absolute path, "
                             "file:///path")
        from replication.tiered.filesystem import FileSystemRemoteStorageManager
        return FileSystemRemoteStorageManager(Path(parsed.path))
    if parsed.scheme == "s3":
        from replication.tiered.s3 import S3RemoteStorageManager
        return S3RemoteStorageManager(url, endpoint_url=s3_endpoint)
    raise ValueError(f"remote.log.storage.url: {url!r}: unsupported scheme "
                     f"{parsed.scheme or '(none)'!r} (file:///path or s3://bucket/prefix)")
