"""Everything the data plane creates is owner-only: directories 0700, files not readable by
other accounts, whatever the process umask would allow (issue 16); the file store of the
remote log metadata too (issue 20)."""

from __future__ import annotations

import os
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.clock import ManualClock
from replication.config import ReplicaConfig
from replication.log import LogConfig
from replication.replica_manager import ReplicaManager
from replication.tiered import (
    FileRemoteLogMetadataManager,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    TopicIdPartition,
)

from .test_replica_manager import TP, TP1, entry, lai
from .test_replica_manager_cluster import make_batch

S = RemoteLogSegmentState


@pytest.fixture
def open_umask() -> Iterator[None]:
    """Umask 0 for the test: any mode seen then comes from the code, not the environment."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def modes(root: Path) -> dict[str, int]:
    out = {}
    for path in [root, *root.rglob("*")]:
        out[str(path.relative_to(root.parent))] = stat.S_IMODE(path.stat().st_mode)
    return out


@pytest.mark.usefixtures("open_umask")
def test_log_directories_and_files_are_owner_only(tmp_path: Path) -> None:
    log_dir = tmp_path / "data" / "broker-1"  # its parent is missing too
    config = ReplicaConfig(log=LogConfig(segment_bytes=600))
    clock = ManualClock()
    manager = ReplicaManager(1, log_dir, None, clock, config)
    manager.handle_leader_and_isr(lai(entry(replicas=(1,)), entry(TP1, replicas=(1,))))
    for _ in range(8):
        manager.produce(TP, make_batch(2, size=100)[0], acks=1)
    manager.logs.flush_logs()
    manager.logs.checkpoint_high_watermarks()
    manager.shutdown()  # and the clean-shutdown markers
    (log_dir / "t-0" / "leader-epoch-checkpoint").write_bytes(b"junk")
    again = ReplicaManager(1, log_dir, None, clock, config)  # moved aside, rebuilt
    again.shutdown()
    found = modes(tmp_path / "data")
    names = {Path(p).name for p in found}
    assert {"00000000000000000000.log", "00000000000000000000.index", ".kafka_cleanshutdown",
            "replication-offset-checkpoint", "recovery-point-offset-checkpoint",
            "leader-epoch-checkpoint"} <= names
    assert any(".corrupt-" in n for n in names) and len(found) > 15
    for name, mode in found.items():
        if (tmp_path / name).is_dir():
            assert mode == 0o700, name
        else:
            assert mode & 0o077 == 0, (name, oct(mode))


@pytest.mark.usefixtures("open_umask")
def test_the_file_metadata_store_is_owner_only(tmp_path: Path) -> None:
    """The remote log metadata as files (its root's parent missing too): every directory
    0700, every event and compaction summary 0600."""
    root = tmp_path / "remote" / "__remote_log_metadata"
    rlmm = FileRemoteLogMetadataManager(root)
    tid = TopicIdPartition(topic_id=uuid.UUID(int=3), topic="t", partition=0)
    for start in range(0, 20, 5):
        m = RemoteLogSegmentMetadata(
            segment_id=RemoteLogSegmentId.generate(tid), start_offset=start,
            end_offset=start + 4, max_timestamp_ms=0, broker_id=1, event_timestamp_ms=1,
            segment_leader_epochs=((0, start),), segment_size_in_bytes=10)
        rlmm.add_remote_log_segment_metadata(m)
        for state in (S.COPY_SEGMENT_FINISHED, S.DELETE_SEGMENT_STARTED,
                      S.DELETE_SEGMENT_FINISHED):
            rlmm.update_remote_log_segment_metadata(RemoteLogSegmentMetadataUpdate(
                segment_id=m.segment_id, event_timestamp_ms=2, state=state, broker_id=1))
    events = modes(tmp_path / "remote")
    assert rlmm.compact(tid, 10, min_stale=1) == 16
    summary = modes(tmp_path / "remote")
    assert len(events) == 3 + 16 and len(summary) == 3 + 1
    assert any(Path(name).name.startswith("compacted-") for name in summary)
    for name, mode in {**events, **summary}.items():
        assert mode == (0o700 if (tmp_path / name).is_dir() else 0o600), name
