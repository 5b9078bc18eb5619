"""The filesystem RemoteStorageManager: layout, reads from a position, indexes, deletion, and
a copy interrupted at every step leaving nothing that is served."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from replication.tiered import (
    FileSystemRemoteStorageManager,
    IndexType,
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteResourceNotFoundError,
    RemoteStorageError,
    RemoteStorageManager,
    TopicIdPartition,
    kafka_uuid_text,
    load_remote_storage_manager,
)

TP = TopicIdPartition(topic_id=uuid.UUID(int=42), topic="orders", partition=3)


def metadata(start: int = 100) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(
        segment_id=RemoteLogSegmentId.generate(TP), start_offset=start, end_offset=start + 9,
        max_timestamp_ms=5, broker_id=1, event_timestamp_ms=1,
        segment_leader_epochs=((0, start),), segment_size_in_bytes=1000)


@pytest.fixture
def segment_files(tmp_path: Path) -> LogSegmentData:
    src = tmp_path / "local"
    src.mkdir()
    (src / "a.log").write_bytes(bytes(range(256)) * 4)
    (src / "a.index").write_bytes(b"\x00\x00\x00\x01\x00\x00\x00\x10")
    (src / "a.timeindex").write_bytes(b"t" * 12)
    (src / "a.snapshot").write_bytes(b"snap")
    return LogSegmentData(log_segment=src / "a.log", offset_index=src / "a.index",
                          time_index=src / "a.timeindex", producer_snapshot=src / "a.snapshot",
                          leader_epoch_index=b"0\n1\n0 100\n")


def test_layout_and_reads(tmp_path: Path, segment_files: LogSegmentData) -> None:
    rsm = FileSystemRemoteStorageManager(tmp_path / "remote")
    assert isinstance(rsm, RemoteStorageManager)
    m = metadata()
    rsm.copy_log_segment_data(m, segment_files)
    directory = tmp_path / "remote" / f"orders-{kafka_uuid_text(TP.topic_id)}" / "3"
    stem = f"{100:020d}-{m.segment_id.id}"
    assert sorted(p.name for p in directory.iterdir()) == sorted(
        f"{stem}.{ext}" for ext in ("log", "index", "timeindex", "snapshot",
                                    "leader_epoch_checkpoint"))
    data = segment_files.log_segment.read_bytes()
    with rsm.fetch_log_segment(m, 0) as f:
        assert f.read() == data
    with rsm.fetch_log_segment(m, 10, 19) as f:
        assert f.read() == data[10:20]
    with rsm.fetch_index(m, IndexType.OFFSET) as f:
        assert f.read() == segment_files.offset_index.read_bytes()
    with rsm.fetch_index(m, IndexType.LEADER_EPOCH) as f:
        assert f.read() == b"0\n1\n0 100\n"
    with pytest.raises(RemoteResourceNotFoundError):
        rsm.fetch_index(m, IndexType.TRANSACTION)
    rsm.delete_log_segment_data(m)
    assert list(directory.iterdir()) == []
    with pytest.raises(RemoteResourceNotFoundError):
        rsm.fetch_log_segment(m, 0)
    rsm.delete_log_segment_data(m)  # deleting what is gone succeeds


STEPS = [f"written-{e}" for e in ("index", "timeindex", "leader_epoch_checkpoint", "snapshot",
                                  "log")] + \
        [f"renamed-{e}" for e in ("index", "timeindex", "leader_epoch_checkpoint", "snapshot")]


class Crash(Exception):
    pass


@pytest.mark.parametrize("step", STEPS)
def test_a_copy_interrupted_at_any_step_is_never_served(
        tmp_path: Path, segment_files: LogSegmentData, step: str) -> None:
    def stage(name: str) -> None:
        if name == step:
            raise Crash(name)

    root = tmp_path / "remote"
    rsm = FileSystemRemoteStorageManager(root, stage=stage)
    m = metadata()
    with pytest.raises(Crash):
        rsm.copy_log_segment_data(m, segment_files)
    # The failed copy cleans up after itself; what a killed process would leave is never
    # served either: no .log file, the commit point, exists.
    assert not any(p.name.endswith(".log") for p in root.rglob("*"))
    reader = FileSystemRemoteStorageManager(root)
    with pytest.raises(RemoteResourceNotFoundError):
        reader.fetch_log_segment(m, 0)
    with pytest.raises(RemoteResourceNotFoundError):
        reader.fetch_index(m, IndexType.OFFSET)


def test_a_killed_copy_leaves_temporary_files_only(tmp_path: Path,
                                                   segment_files: LogSegmentData) -> None:
    """A kill is not an exception: the cleanup does not run. Simulated by a stage that
    records the files present at the last step before the commit point."""
    root = tmp_path / "remote"
    seen: list[list[str]] = []

    def stage(name: str) -> None:
        if name == "renamed-snapshot":
            seen.append(sorted(p.name for p in root.rglob("*") if p.is_file()))

    FileSystemRemoteStorageManager(root, stage=stage).copy_log_segment_data(
        metadata(), segment_files)
    (before_commit,) = seen
    assert [n for n in before_commit if n.endswith(".log") or n.endswith(".log.tmp")] == [
        next(n for n in before_commit if n.endswith(".log.tmp"))]


def test_copy_failure_is_a_remote_storage_error(tmp_path: Path,
                                                segment_files: LogSegmentData) -> None:
    rsm = FileSystemRemoteStorageManager(tmp_path / "remote")
    missing = LogSegmentData(log_segment=tmp_path / "nope.log",
                             offset_index=segment_files.offset_index,
                             time_index=segment_files.time_index, producer_snapshot=None,
                             leader_epoch_index=b"")
    with pytest.raises(RemoteStorageError):
        rsm.copy_log_segment_data(metadata(), missing)
    assert not [p for p in (tmp_path / "remote").rglob("*") if p.is_file()]


def test_load_by_url_and_class_name(tmp_path: Path) -> None:
    rsm = load_remote_storage_manager(f"file://{tmp_path}/r")
    assert isinstance(rsm, FileSystemRemoteStorageManager)
    assert rsm.root == tmp_path / "r"
    for bad in ("s4://x/y", "file://host/x", "file:relative", ""):
        with pytest.raises(ValueError):
            load_remote_storage_manager(bad)
    with pytest.raises(ValueError, match="module:Class"):
        load_remote_storage_manager(None, "nocolon")
    with pytest.raises(ValueError, match="cannot load"):
        load_remote_storage_manager(None, "no.such.module:X")
    custom = load_remote_storage_manager(f"file://{tmp_path}/c", f"{__name__}:custom")
    assert isinstance(custom, FileSystemRemoteStorageManager)


def custom(url: str, *, broker_id: int) -> FileSystemRemoteStorageManager:
    return FileSystemRemoteStorageManager(Path(url[len("file://"):]))
