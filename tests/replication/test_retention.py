"""Retention by time and size: oldest segments first, never the active one."""

from pathlib import Path

from replication.log import Log, LogConfig

from ._util import batch

ONE = len(batch(1, value_size=100))


def open_log(tmp_path: Path, **config: int) -> Log:
    return Log.open(tmp_path / "t-0", config=LogConfig(segment_bytes=2 * ONE, **config))


def fill(log: Log, timestamps: list[int], epoch_every: int = 0) -> None:
    for i, ts in enumerate(timestamps):
        epoch = i // epoch_every if epoch_every else 0
        log.append_as_leader(batch(1, value_size=100, timestamp=ts), leader_epoch=epoch)


def test_time_retention_deletes_expired_segments_oldest_first(tmp_path: Path) -> None:
    log = open_log(tmp_path, retention_ms=1000)
    fill(log, [100, 200, 300, 400, 5000, 5100, 5200])  # segments 0-1, 2-3, 4-5, 6
    assert log.segment_base_offsets == (0, 2, 4, 6)
    assert log.delete_old_segments(now_ms=5300) == 2
    assert log.segment_base_offsets == (4, 6)
    assert log.log_start_offset == 4
    assert sorted(p.name for p in log.directory.glob("*.log")) == [
        f"{4:020d}.log",
        f"{6:020d}.log",
    ]
    assert log.read(4, 1).first_offset == 4


def test_time_retention_stops_at_the_first_unexpired_segment(tmp_path: Path) -> None:
    log = open_log(tmp_path, retention_ms=1000)
    fill(log, [100, 200, 9000, 9100, 300, 400, 9200])  # the middle segment is recent
    assert log.delete_old_segments(now_ms=9500) == 1
    assert log.segment_base_offsets == (2, 4, 6)


def test_time_retention_never_deletes_the_active_segment(tmp_path: Path) -> None:
    log = open_log(tmp_path, retention_ms=1000)
    fill(log, [100, 200, 300])
    assert log.delete_old_segments(now_ms=10**9) == 1
    assert log.segment_base_offsets == (2,)
    assert log.delete_old_segments(now_ms=10**9) == 0
    assert log.log_end_offset == 3


def test_size_retention_keeps_at_least_retention_bytes(tmp_path: Path) -> None:
    log = open_log(tmp_path, retention_bytes=3 * ONE, retention_ms=-1)
    fill(log, [1] * 9)  # five segments: 2+2+2+2+1 batches
    assert log.size_bytes == 9 * ONE
    assert log.delete_old_segments(now_ms=10**12) == 3
    assert log.segment_base_offsets == (6, 8)
    assert log.size_bytes == 3 * ONE


def test_retention_spares_segments_at_or_past_the_high_watermark(tmp_path: Path) -> None:
    log = open_log(tmp_path, retention_ms=0)
    fill(log, [1] * 7)
    assert log.delete_old_segments(now_ms=100, high_watermark=3) == 1
    assert log.segment_base_offsets == (2, 4, 6)
    assert log.delete_old_segments(now_ms=100, high_watermark=4) == 1
    assert log.segment_base_offsets == (4, 6)


def test_retention_moves_the_epoch_cache_start(tmp_path: Path) -> None:
    log = open_log(tmp_path, retention_ms=0)
    fill(log, [1] * 7, epoch_every=3)  # epochs 0@0, 1@3, 2@6
    log.delete_old_segments(now_ms=100)
    assert log.log_start_offset == 6
    assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] == [(2, 6)]
    log2 = open_log(tmp_path / "x", retention_ms=0)
    fill(log2, [1] * 7, epoch_every=3)
    log2.delete_old_segments(now_ms=100, high_watermark=5)
    assert log2.log_start_offset == 4
    assert [(e.epoch, e.start_offset) for e in log2.leader_epoch_cache.entries] == [
        (1, 4),
        (2, 6),
    ]


def test_retention_survives_reopen(tmp_path: Path) -> None:
    log = open_log(tmp_path, retention_ms=1000)
    fill(log, [100, 200, 300, 400, 5000])
    log.close()
    reopened = open_log(tmp_path, retention_ms=1000)
    # The closed segments' largest timestamps come back from their time indexes.
    assert reopened.delete_old_segments(now_ms=5100) == 2
    assert reopened.log_start_offset == 4
