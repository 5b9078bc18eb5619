"""The filesystem RemoteStorageManager (``remote.log.storage.url=file:///path``).

Layout, one directory per partition (a shared mount serves every broker)::

    <root>/<topic>-<topicId>/<partition>/<startOffset>-<segmentUuid>.log
                                                                   .index
                                                                   .timeindex
                                                                   .snapshot
                                                                   .txnindex
                                                                   .leader_epoch_checkpoint

with the start offset in 20 digits (a listing sorts by offset) and the topic id in Kafka's
text form. A copy writes every file under a ``.tmp`` name and fsyncs it, then renames the
auxiliary files and the ``.log`` file last, and fsyncs the directory: the ``.log`` file is
the copy's commit point. Every fetch looks for it first, so a copy interrupted at any step
(a crash, a full disk) is never served, and a failed copy removes what it wrote.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from replication.checkpoints import fsync_directory
from replication.tiered.metadata import RemoteLogSegmentMetadata, kafka_uuid_text
from replication.tiered.storage import (
    IndexType,
    LogSegmentData,
    RemoteResourceNotFoundError,
    RemoteStorageError,
)

__all__ = ["FileSystemRemoteStorageManager"]

log = logging.getLogger(__name__)

LOG_EXTENSION = "log"
_TMP = ".tmp"


class _Window:
    """A read-only stream over ``[start, end)`` of a file (what fetch_log_segment returns)."""

    def __init__(self, f: BinaryIO, start: int, end: int) -> None:
        self._f = f
        self._pos = start
        self._end = end

    def read(self, size: int = -1) -> bytes:
        left = self._end - self._pos
        if left <= 0:
            return b""
        n = left if size is None or size < 0 else min(size, left)
        data = os.pread(self._f.fileno(), n, self._pos)
        self._pos += len(data)
        return data

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> _Window:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FileSystemRemoteStorageManager:
    """Remote segments as files under ``root``. ``stage(name)`` is called after each step of
    a copy (tests inject crashes there)."""

    def __init__(self, root: Path | str, *, stage: Callable[[str], None] | None = None) -> None:
        self.root = Path(root)
        self._stage = stage
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RemoteStorageError(f"cannot create remote storage root {self.root}: "
                                     f"{exc.strerror or exc}") from exc

    # -- layout --------------------------------------------------------------------------------

    def partition_directory(self, metadata: RemoteLogSegmentMetadata) -> Path:
        tp = metadata.partition
        return self.root / f"{tp.topic}-{kafka_uuid_text(tp.topic_id)}" / str(tp.partition)

    def _path(self, metadata: RemoteLogSegmentMetadata, extension: str) -> Path:
        name = f"{metadata.start_offset:020d}-{metadata.segment_id.id}.{extension}"
        return self.partition_directory(metadata) / name

    def _step(self, name: str) -> None:
        if self._stage is not None:
            self._stage(name)

    # -- the interface -------------------------------------------------------------------------

    def copy_log_segment_data(self, metadata: RemoteLogSegmentMetadata,
                              data: LogSegmentData) -> None:
        directory = self.partition_directory(metadata)
        sources: list[tuple[str, Path | bytes]] = [
            (IndexType.OFFSET.value, data.offset_index),
            (IndexType.TIMESTAMP.value, data.time_index),
            (IndexType.LEADER_EPOCH.value, data.leader_epoch_index),
        ]
        if data.producer_snapshot is not None:
            sources.append((IndexType.PRODUCER_SNAPSHOT.value, data.producer_snapshot))
        if data.transaction_index is not None:
            sources.append((IndexType.TRANSACTION.value, data.transaction_index))
        sources.append((LOG_EXTENSION, data.log_segment))  # the commit point: renamed last
        written: list[Path] = []
        try:
            directory.mkdir(parents=True, exist_ok=True)
            for extension, source in sources:
                final = self._path(metadata, extension)
                tmp = final.with_name(final.name + _TMP)
                written.append(tmp)
                if isinstance(source, bytes):
                    tmp.write_bytes(source)
                else:
                    shutil.copyfile(source, tmp)
                fd = os.open(tmp, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
                self._step(f"written-{extension}")
            for extension, _source in sources:
                final = self._path(metadata, extension)
                os.replace(final.with_name(final.name + _TMP), final)
                written.append(final)
                self._step(f"renamed-{extension}")
            fsync_directory(directory)
        except BaseException as exc:
            for path in written:
                path.unlink(missing_ok=True)
            if isinstance(exc, OSError):
                raise RemoteStorageError(f"copy of {metadata.segment_id} to {directory} failed: "
                                         f"{exc.strerror or exc}") from exc
            raise

    def _open(self, metadata: RemoteLogSegmentMetadata, extension: str) -> BinaryIO:
        if not self._path(metadata, LOG_EXTENSION).exists():
            raise RemoteResourceNotFoundError(f"no remote segment {metadata.segment_id}")
        try:
            return open(self._path(metadata, extension), "rb")
        except FileNotFoundError as exc:
            raise RemoteResourceNotFoundError(
                f"remote segment {metadata.segment_id} has no .{extension} file") from exc
        except OSError as exc:
            raise RemoteStorageError(f"cannot read remote segment {metadata.segment_id}: "
                                     f"{exc.strerror or exc}") from exc

    def fetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                          end_position: int | None = None) -> BinaryIO:
        if start_position < 0 or (end_position is not None and end_position < start_position):
            raise ValueError(f"bad positions {start_position}..{end_position}")
        f = self._open(metadata, LOG_EXTENSION)
        size = os.fstat(f.fileno()).st_size
        end = size if end_position is None else min(end_position + 1, size)
        return _Window(f, start_position, end)  # type: ignore[return-value]

    def open_log_segment(self, metadata: RemoteLogSegmentMetadata) -> int:
        """The segment's ``.log`` as a descriptor of its own (:class:`LocalSegmentFiles`)."""
        with self._open(metadata, LOG_EXTENSION) as f:
            return os.dup(f.fileno())

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType
                    ) -> BinaryIO:
        return self._open(metadata, index_type.value)

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        directory = self.partition_directory(metadata)
        prefix = f"{metadata.start_offset:020d}-{metadata.segment_id.id}."
        try:
            # The commit point first: from here on nothing of the segment is served.
            self._path(metadata, LOG_EXTENSION).unlink(missing_ok=True)
            if directory.is_dir():
                for path in directory.iterdir():
                    if path.name.startswith(prefix):
                        path.unlink(missing_ok=True)
                fsync_directory(directory)
        except OSError as exc:
            raise RemoteStorageError(f"cannot delete remote segment {metadata.segment_id}: "
                                     f"{exc.strerror or exc}") from exc

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"FileSystemRemoteStorageManager({self.root})"
