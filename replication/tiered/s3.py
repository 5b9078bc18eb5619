"""The S3 RemoteStorageManager (``remote.log.storage.url=s3://bucket/prefix``) and the object
store the S3 remote log metadata lives in.

Segments are objects under the prefix, in the filesystem manager's layout::

    <prefix>/<topic>-<topicId>/<partition>/<startOffset>-<segmentUuid>.log
                                                                     .index
                                                                     .timeindex
                                                                     .snapshot
                                                                     .txnindex
                                                                     .leader_epoch_checkpoint

A put of one object is atomic in S3, so a copy uploads the auxiliary objects first and the
``.log`` object last: it is the copy's commit point, and every fetch looks for it first, so a
copy interrupted at any step is never served; a copy that fails deletes what it put.

Any S3-compatible endpoint is reached with ``remote.log.storage.s3.endpoint`` (an URL; unset:
AWS itself). Credentials and the region come from boto3's usual chain (environment, shared
files, instance roles) and are never logged. boto3 is imported here only, when the manager is
made; without it the broker says to install ``partctl[s3]``. Errors of the client are
translated once, here, into :class:`RemoteStorageError` (a missing object:
:class:`RemoteResourceNotFoundError`).
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, BinaryIO
from urllib.parse import urlparse

from replication.tiered.metadata import RemoteLogSegmentMetadata, kafka_uuid_text
from replication.tiered.storage import (
    IndexType,
    LogSegmentData,
    RemoteResourceNotFoundError,
    RemoteStorageError,
)

__all__ = ["S3Location", "S3ObjectStore", "S3RemoteStorageManager", "parse_s3_url"]

log = logging.getLogger(__name__)

LOG_EXTENSION = "log"
_PART = 8 << 20


def parse_s3_url(url: str) -> tuple[str, str]:
    """``s3://bucket/prefix`` -> (bucket, prefix without slashes at either end); ValueError
    with one clear line for anything else."""
    parsed = urlparse(url)
    if parsed.scheme != "s3" or not parsed.netloc:
        raise ValueError(f"remote.log.storage.url: {url!r}: give s3://bucket/prefix")
    return parsed.netloc, parsed.path.strip("/")


S3Location = tuple[str, str]


def _missing(exc: Exception) -> bool:
    response = getattr(exc, "response", None) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    return code in ("NoSuchKey", "404", "NotFound")


class S3ObjectStore:
    """Objects under ``s3://bucket/prefix`` through one boto3 client: put, get (a byte range),
    exists, list by prefix, delete. Every method raises :class:`RemoteStorageError` (a missing
    object: :class:`RemoteResourceNotFoundError`)."""

    def __init__(self, bucket: str, prefix: str = "", *, endpoint_url: str | None = None,
                 client: Any = None) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.endpoint_url = endpoint_url
        if client is None:
            try:
                import boto3
                from botocore.config import Config
            except ImportError as exc:
                raise RemoteStorageError(
                    "remote.log.storage.url s3://...: boto3 is not installed "
                    "(pip install 'partctl[s3]')") from exc
            client = boto3.client(
                "s3", endpoint_url=endpoint_url,
                config=Config(retries={"max_attempts": 3, "mode": "standard"},
                              connect_timeout=10, read_timeout=60))
        self.client = client

    def key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except RemoteStorageError:
            raise
        except Exception as exc:  # botocore's errors have no common base beyond Exception
            if _missing(exc):
                raise RemoteResourceNotFoundError(f"s3://{self.bucket}: {what}: not found") \
                    from exc
            # The message names the operation and the error code, never credentials.
            raise RemoteStorageError(f"s3://{self.bucket}: {what}: "
                                     f"{type(exc).__name__}: {exc}") from exc

    def put(self, name: str, data: bytes) -> None:
        with self._errors(f"put {name}"):
            self.client.put_object(Bucket=self.bucket, Key=self.key(name), Body=data)

    def put_file(self, name: str, path: str) -> None:
        with self._errors(f"put {name}"), open(path, "rb") as f:
            self.client.upload_fileobj(f, self.bucket, self.key(name))

    def get(self, name: str, start: int = 0, end: int | None = None) -> bytes:
        """The object's bytes ``start`` to ``end`` (inclusive; None: to its end)."""
        with self._errors(f"get {name}"):
            kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": self.key(name)}
            if start or end is not None:
                kwargs["Range"] = f"bytes={start}-{'' if end is None else end}"
            try:
                response = self.client.get_object(**kwargs)
            except Exception as exc:
                code = str((getattr(exc, "response", None) or {}).get("Error", {})
                           .get("Code", ""))
                if code == "InvalidRange":  # past the end: nothing there
                    return b""
                raise
            body = response["Body"]
            try:
                return body.read()
            finally:
                body.close()

    def exists(self, name: str) -> bool:
        try:
            with self._errors(f"head {name}"):
                self.client.head_object(Bucket=self.bucket, Key=self.key(name))
        except RemoteResourceNotFoundError:
            return False
        return True

    def list(self, under: str) -> list[str]:
        """Names (relative to the prefix) of the objects whose name starts with ``under``."""
        out: list[str] = []
        full = self.key(under)
        strip = len(self.prefix) + 1 if self.prefix else 0
        with self._errors(f"list {under}"):
            paginator = self.client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=self.bucket, Prefix=full):
                for item in page.get("Contents", ()):
                    out.append(item["Key"][strip:])
        return out

    def delete(self, names: builtins.list[str]) -> None:
        for i in range(0, len(names), 1000):
            chunk = names[i:i + 1000]
            with self._errors(f"delete {len(chunk)} objects"):
                answer = self.client.delete_objects(Bucket=self.bucket, Delete={
                    "Objects": [{"Key": self.key(n)} for n in chunk], "Quiet": True})
            errors = answer.get("Errors") or []
            if errors:
                raise RemoteStorageError(f"s3://{self.bucket}: {len(errors)} objects not "
                                         f"deleted, first {errors[0].get('Key')}: "
                                         f"{errors[0].get('Code')}")

    def __repr__(self) -> str:
        return f"S3ObjectStore(s3://{self.bucket}/{self.prefix})"


class _Stream:
    """The requested range of a remote ``.log`` object, read in parts as asked for."""

    def __init__(self, store: S3ObjectStore, name: str, start: int, end: int | None) -> None:
        self._store = store
        self._name = name
        self._pos = start
        self._end = end  # inclusive; None: the object's end
        self._eof = False

    def read(self, size: int = -1) -> bytes:
        if self._eof:
            return b""
        want = _PART if size is None or size < 0 else max(size, 1)
        last = self._pos + want - 1
        if self._end is not None:
            last = min(last, self._end)
            if last < self._pos:
                self._eof = True
                return b""
        data = self._store.get(self._name, self._pos, last)
        if len(data) < last - self._pos + 1:
            self._eof = True
        self._pos += len(data)
        if size is None or size < 0:
            parts = [data]
            while not self._eof:
                more = self.read(_PART)
                parts.append(more)
            return b"".join(parts)
        return data

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self._eof = True

    def __enter__(self) -> _Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Bytes(_Stream):
    def __init__(self, data: bytes) -> None:
        self._data = data
        self._off = 0

    def read(self, size: int = -1) -> bytes:
        end = len(self._data) if size is None or size < 0 else self._off + size
        out = self._data[self._off:end]
        self._off += len(out)
        return out

    def close(self) -> None:
        pass


class S3RemoteStorageManager:
    """Remote segments as objects (see the module docstring)."""

    def __init__(self, url: str, *, endpoint_url: str | None = None,
                 client: Any = None) -> None:
        bucket, prefix = parse_s3_url(url)
        self.url = url
        self.store = S3ObjectStore(bucket, prefix, endpoint_url=endpoint_url, client=client)

    def _dir(self, metadata: RemoteLogSegmentMetadata) -> str:
        tp = metadata.partition
        return f"{tp.topic}-{kafka_uuid_text(tp.topic_id)}/{tp.partition}"

    def _name(self, metadata: RemoteLogSegmentMetadata, extension: str) -> str:
        return (f"{self._dir(metadata)}/{metadata.start_offset:020d}-"
                f"{metadata.segment_id.id}.{extension}")

    def copy_log_segment_data(self, metadata: RemoteLogSegmentMetadata,
                              data: LogSegmentData) -> None:
        uploads: list[tuple[str, Any]] = [
            (IndexType.OFFSET.value, data.offset_index),
            (IndexType.TIMESTAMP.value, data.time_index),
            (IndexType.LEADER_EPOCH.value, data.leader_epoch_index),
        ]
        if data.producer_snapshot is not None:
            uploads.append((IndexType.PRODUCER_SNAPSHOT.value, data.producer_snapshot))
        if data.transaction_index is not None:
            uploads.append((IndexType.TRANSACTION.value, data.transaction_index))
        uploads.append((LOG_EXTENSION, data.log_segment))  # the commit point: put last
        put: list[str] = []
        try:
            for extension, source in uploads:
                name = self._name(metadata, extension)
                put.append(name)
                if isinstance(source, bytes):
                    self.store.put(name, source)
                else:
                    self.store.put_file(name, str(source))
        except BaseException as exc:
            try:
                self.store.delete(put)
            except RemoteStorageError:
                log.warning("copy of %s failed; its partial objects stay until it is deleted",
                            metadata.segment_id)
            if isinstance(exc, OSError):
                raise RemoteStorageError(f"copy of {metadata.segment_id}: {exc}") from exc
            raise

    def _check_committed(self, metadata: RemoteLogSegmentMetadata) -> None:
        if not self.store.exists(self._name(metadata, LOG_EXTENSION)):
            raise RemoteResourceNotFoundError(f"no remote segment {metadata.segment_id}")

    def fetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                          end_position: int | None = None) -> BinaryIO:
        if start_position < 0 or (end_position is not None and end_position < start_position):
            raise ValueError(f"bad positions {start_position}..{end_position}")
        name = self._name(metadata, LOG_EXTENSION)
        self._check_committed(metadata)
        return _Stream(self.store, name, start_position, end_position)  # type: ignore[return-value]

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType
                    ) -> BinaryIO:
        self._check_committed(metadata)
        data = self.store.get(self._name(metadata, index_type.value))
        return _Bytes(data)  # type: ignore[return-value]

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        # The commit point first: from here on nothing of the segment is served.
        self.store.delete([self._name(metadata, LOG_EXTENSION)])
        prefix = f"{self._dir(metadata)}/{metadata.start_offset:020d}-{metadata.segment_id.id}."
        rest = self.store.list(prefix)
        if rest:
            self.store.delete(rest)

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"S3RemoteStorageManager({self.url})"
