"""The S3 RemoteStorageManager against moto's standalone S3 server on a loopback port: the
layout, reads from a position, indexes, deletion, a copy interrupted before its ``.log``
object never served, store failures as RemoteStorageError, the choice by URL, and the remote
log manager copying and reading back (by offset and by time) over S3 with its metadata in the
same bucket."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from coordinator.clock import ManualClock
from replication.log import Log, LogConfig
from replication.tiered import (
    IndexType,
    LogSegmentData,
    RemoteLogManager,
    RemoteResourceNotFoundError,
    RemoteStorageError,
    RemoteStorageManager,
    S3RemoteLogMetadataManager,
    S3RemoteStorageManager,
    TieredPartition,
    kafka_uuid_text,
    load_remote_storage_manager,
)
from replication.tiered.s3 import S3ObjectStore, parse_s3_url

from ._util import batch
from .s3_server import s3_endpoint, s3_url  # noqa: F401 (fixtures)
from .test_tiered_filesystem import TP, metadata, segment_files  # noqa: F401 (a fixture)


def objects(url: str, endpoint: str) -> list[str]:
    bucket, prefix = parse_s3_url(url)
    return sorted(S3ObjectStore(bucket, prefix, endpoint_url=endpoint).list(""))


def test_layout_and_reads(s3_url: str, s3_endpoint: str,  # noqa: F811
                          segment_files: LogSegmentData) -> None:  # noqa: F811
    rsm = S3RemoteStorageManager(s3_url, endpoint_url=s3_endpoint)
    assert isinstance(rsm, RemoteStorageManager)
    m = metadata()
    rsm.copy_log_segment_data(m, segment_files)
    stem = f"orders-{kafka_uuid_text(TP.topic_id)}/3/{100:020d}-{m.segment_id.id}"
    assert objects(s3_url, s3_endpoint) == sorted(
        f"{stem}.{ext}" for ext in ("log", "index", "timeindex", "snapshot",
                                    "leader_epoch_checkpoint"))
    data = segment_files.log_segment.read_bytes()
    with rsm.fetch_log_segment(m, 0) as f:
        assert f.read() == data
    with rsm.fetch_log_segment(m, 10, 19) as f:
        assert f.read() == data[10:20]
    with rsm.fetch_log_segment(m, 1000) as f:  # streamed in parts, as the reader asks
        assert f.read(10) == data[1000:1010] and f.read(100) == data[1010:] and f.read(1) == b""
    with rsm.fetch_index(m, IndexType.OFFSET) as f:
        assert f.read() == segment_files.offset_index.read_bytes()
    with rsm.fetch_index(m, IndexType.LEADER_EPOCH) as f:
        assert f.read() == b"0\n1\n0 100\n"
    with pytest.raises(RemoteResourceNotFoundError):
        rsm.fetch_index(m, IndexType.TRANSACTION)
    rsm.delete_log_segment_data(m)
    assert objects(s3_url, s3_endpoint) == []
    with pytest.raises(RemoteResourceNotFoundError):
        rsm.fetch_log_segment(m, 0)
    rsm.delete_log_segment_data(m)  # deleting what is gone succeeds


class _FailingLogPut:
    """A boto3 client whose upload of a ``.log`` object fails (the store dies mid-copy)."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def upload_fileobj(self, f: Any, bucket: str, key: str) -> None:
        if key.endswith(".log"):
            raise ConnectionError("the store went away")
        self._client.upload_fileobj(f, bucket, key)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_a_copy_that_fails_before_its_log_object_is_never_served(
        s3_url: str, s3_endpoint: str, segment_files: LogSegmentData) -> None:  # noqa: F811
    import boto3

    client = _FailingLogPut(boto3.client("s3", endpoint_url=s3_endpoint))
    rsm = S3RemoteStorageManager(s3_url, client=client)
    m = metadata()
    with pytest.raises(RemoteStorageError):
        rsm.copy_log_segment_data(m, segment_files)
    assert objects(s3_url, s3_endpoint) == []  # what it put was removed
    with pytest.raises(RemoteResourceNotFoundError):
        rsm.fetch_index(m, IndexType.OFFSET)


def test_an_unreachable_store_is_a_remote_storage_error(segment_files: LogSegmentData) -> None:  # noqa: F811
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    rsm = S3RemoteStorageManager("s3://nowhere/p", endpoint_url=f"http://127.0.0.1:{port}")
    with pytest.raises(RemoteStorageError):
        rsm.copy_log_segment_data(metadata(), segment_files)
    with pytest.raises(RemoteStorageError):
        rsm.fetch_log_segment(metadata(), 0)


def test_load_by_url(s3_url: str, s3_endpoint: str) -> None:  # noqa: F811
    rsm = load_remote_storage_manager(s3_url, s3_endpoint=s3_endpoint)
    assert isinstance(rsm, S3RemoteStorageManager)
    with pytest.raises(ValueError, match="s3://bucket/prefix"):
        load_remote_storage_manager("s3:///no-bucket")


def test_the_remote_log_manager_copies_and_reads_back_over_s3(
        tmp_path: Path, s3_url: str, s3_endpoint: str) -> None:  # noqa: F811
    one = len(batch(1, value_size=100))
    log = Log.open(tmp_path / "t-0", config=LogConfig(
        segment_bytes=2 * one, remote_storage_enable=True, retention_ms=-1,
        local_retention_bytes=2 * one), clock=ManualClock(10_000))
    for i in range(9):
        log.append_as_leader(batch(1, value_size=100, timestamp=1_000 + 10 * i), leader_epoch=0)
    original = log.read(0, 1 << 20).records + b"".join(
        log.read(o, 1 << 20).records for o in range(2, 9, 2))
    rlm = RemoteLogManager(1, S3RemoteStorageManager(s3_url, endpoint_url=s3_endpoint),
                           S3RemoteLogMetadataManager(s3_url, endpoint_url=s3_endpoint),
                           ManualClock(10_000))
    p = TieredPartition(id=TP, log=log, is_leader=True, leader_epoch=0,
                        high_watermark=log.log_end_offset, still_leads=lambda e: True)
    assert rlm.copy_log_segments(p) == 4
    log.delete_old_segments()
    assert log.local_log_start_offset == 6 and log.log_start_offset == 0
    out, offset = b"", 0
    while offset < 6:
        chunk = rlm.read(TP, log, offset, 1 << 20, log.log_end_offset)
        out += chunk
        offset += 2
    assert out + log.read(6, 1 << 20).records + log.read(8, 1 << 20).records == original
    # By time: the remote time and offset indexes find each remote record; a time past
    # the remote part is left to the local one.
    assert [rlm.find_offset_by_timestamp(TP, log, 995 + 10 * i) for i in range(7)] == [
        (1_000 + 10 * i, i, 0) for i in range(6)] + [None]
    # Another broker sees the same segments through the bucket alone.
    other = S3RemoteLogMetadataManager(s3_url, endpoint_url=s3_endpoint)
    assert [m.start_offset for m in other.list_remote_log_segments(TP)] == [0, 2, 4, 6]
    rlm.close()
