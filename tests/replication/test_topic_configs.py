"""Per-topic configs in the data plane, without a coordinator: a replica manager runs each
topic's partitions on the broker's defaults with that topic's overrides, given by
update_topic_config (or read from the store through ``topic_configs`` when a LeaderAndIsr
creates a topic's partition), at once and without a restart."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.clock import ManualClock
from coordinator.codecs import TopicPartition
from interbroker.errors import ErrorCode
from interbroker.requests import LeaderAndIsrPartition, LeaderAndIsrRequest
from replication.config import ReplicaConfig
from replication.log import LogConfig
from replication.protocol import ACKS_ALL
from replication.replica_manager import ReplicaManager
from replication.topic_settings import topic_replica_config

from ._util import batch

A = TopicPartition(topic="a", partition=0)
B = TopicPartition(topic="b", partition=0)
ONE = len(batch(1, value_size=100))
DAY = 24 * 3600 * 1000


def lead(rm: ReplicaManager, *tps: TopicPartition, replicas=(1,), isr=(1,), epoch: int = 0  # noqa: ANN001
         ) -> None:
    entries = tuple(LeaderAndIsrPartition(
        topic=t.topic, partition=t.partition, controller_epoch=1, leader=1, leader_epoch=epoch,
        isr=tuple(isr), partition_epoch=0, replicas=tuple(replicas)) for t in tps)
    assert rm.handle_leader_and_isr(LeaderAndIsrRequest(
        controller_id=0, controller_epoch=1, broker_epoch=-1, partitions=entries)).ok


def produce(rm: ReplicaManager, tp: TopicPartition, *, timestamp: int = 1_000, acks: int = 1,
            value_size: int = 100) -> ErrorCode:
    future = rm.produce(tp, batch(1, value_size=value_size, timestamp=timestamp), acks=acks)
    return future.result(5).error if acks != ACKS_ALL or future.done() else ErrorCode.NONE


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def rm(tmp_path: Path, clock: ManualClock) -> Iterator[ReplicaManager]:
    manager = ReplicaManager(1, tmp_path / "b1", None, clock, ReplicaConfig(
        log=LogConfig(segment_bytes=3 * ONE)))
    yield manager
    manager.shutdown()


def test_segment_bytes_per_topic_changes_the_roll_size_at_once(rm: ReplicaManager) -> None:
    lead(rm, A, B)
    rm.update_topic_config("a", {"segment.bytes": str(ONE)})
    for _ in range(4):
        assert produce(rm, A) is ErrorCode.NONE and produce(rm, B) is ErrorCode.NONE
    assert rm.partition(A).log.segment_base_offsets == (0, 1, 2, 3)
    assert rm.partition(B).log.segment_base_offsets == (0, 3)
    rm.update_topic_config("a", {})  # back to the broker's 3 batches
    for _ in range(3):
        produce(rm, A)
    assert rm.partition(A).log.segment_base_offsets == (0, 1, 2, 3, 6)


def test_retention_ms_per_topic_deletes_one_topics_segments(rm: ReplicaManager,
                                                            clock: ManualClock) -> None:
    lead(rm, A, B)
    rm.update_topic_config("a", {"retention.ms": "1000"})
    for _ in range(7):
        produce(rm, A, timestamp=1_000)
        produce(rm, B, timestamp=1_000)
    clock.advance(10_000)  # old for a's 1 s, young for b's 7 days
    assert rm.logs.cleanup_logs() == 2
    assert rm.partition(A).log.segment_base_offsets == (6,)
    assert rm.partition(B).log.segment_base_offsets == (0, 3, 6)
    rm.update_topic_config("b", {"retention.ms": "1000"})  # no restart
    rm.tick()  # the retention check is not due yet
    assert rm.partition(B).log.segment_base_offsets == (0, 3, 6)
    clock.advance(rm.config.log_retention_check_interval_ms)
    rm.tick()  # log.retention.check.interval.ms passed: the ticker applies it
    assert rm.partition(B).log.segment_base_offsets == (6,)


def test_retention_bytes_per_topic_and_compact_only_topics_keep_their_segments(
        rm: ReplicaManager, clock: ManualClock) -> None:
    lead(rm, A, B)
    rm.update_topic_config("a", {"retention.bytes": str(3 * ONE), "retention.ms": "-1"})
    rm.update_topic_config("b", {"retention.bytes": str(3 * ONE), "retention.ms": "1",
                                 "cleanup.policy": "compact"})
    for _ in range(9):
        produce(rm, A)
        produce(rm, B)
    clock.advance(DAY)
    rm.logs.cleanup_logs()
    assert rm.partition(A).log.segment_base_offsets == (6,)
    assert rm.partition(B).log.segment_base_offsets == (0, 3, 6)  # compact only: no deletion
    rm.update_topic_config("b", {"retention.ms": "1", "cleanup.policy": "compact,delete"})
    rm.logs.cleanup_logs()
    assert rm.partition(B).log.segment_base_offsets == (6,)


def test_retention_never_passes_the_high_watermark(rm: ReplicaManager, clock: ManualClock
                                                  ) -> None:
    lead(rm, A, replicas=(1, 2), isr=(1, 2))  # the follower never fetches: HW stays at 0
    rm.update_topic_config("a", {"retention.ms": "1"})
    for _ in range(7):
        produce(rm, A)
    clock.advance(DAY)
    assert rm.logs.cleanup_logs() == 0
    assert rm.partition(A).log.segment_base_offsets == (0, 3, 6)


def test_min_insync_replicas_per_topic_and_lowering_it_without_restart(rm: ReplicaManager
                                                                       ) -> None:
    lead(rm, A, B, replicas=(1, 2, 3), isr=(1,))
    rm.update_topic_config("a", {"min.insync.replicas": "2"})
    assert produce(rm, A, acks=ACKS_ALL) is ErrorCode.NOT_ENOUGH_REPLICAS
    assert produce(rm, B, acks=ACKS_ALL) is ErrorCode.NONE
    held = rm.produce(A, batch(1), acks=1).result(5)  # acks=1 is taken, not committed
    assert held.error is ErrorCode.NONE and rm.partition(A).high_watermark == 0
    rm.update_topic_config("a", {"min.insync.replicas": "1"})
    assert rm.partition(A).high_watermark == 1  # the lower minimum commits it at once
    assert produce(rm, A, acks=ACKS_ALL) is ErrorCode.NONE


def test_max_message_bytes_per_topic(rm: ReplicaManager) -> None:
    lead(rm, A, B)
    rm.update_topic_config("a", {"max.message.bytes": str(ONE - 1)})
    assert produce(rm, A) is ErrorCode.MESSAGE_TOO_LARGE
    assert produce(rm, B) is ErrorCode.NONE
    assert rm.partition(A).log.log_end_offset == 0


def test_new_partitions_read_their_topics_config(tmp_path: Path) -> None:
    asked: list[list[str]] = []

    def stored(topics):  # noqa: ANN001, ANN202
        asked.append(list(topics))
        return {"a": {"segment.bytes": "1000", "nope": "x", "segment.ms": "soon"}}

    rm = ReplicaManager(1, tmp_path / "b1", None, ManualClock(), topic_configs=stored)
    try:
        lead(rm, A, B)
        assert asked == [["a", "b"]]
        assert rm.partition(A).log.config.segment_bytes == 1000  # bad keys left out
        assert rm.partition(A).log.config.segment_ms == LogConfig().segment_ms
        assert rm.partition(B).log.config == rm.config.log
        lead(rm, A, B, epoch=1)  # existing partitions: nothing read
        assert asked == [["a", "b"]]
    finally:
        rm.shutdown()


def test_logs_opened_at_start_take_overrides_given_later(tmp_path: Path) -> None:
    first = ReplicaManager(1, tmp_path / "b1", None, ManualClock())
    lead(first, A)
    first.shutdown()
    rm = ReplicaManager(1, tmp_path / "b1", None, ManualClock())
    try:
        assert rm.partition(A).log.config.segment_bytes == 1 << 30
        rm.update_topic_config("a", {"segment.bytes": "4096", "min.insync.replicas": "2"})
        assert rm.partition(A).log.config.segment_bytes == 4096
        assert rm.config_for("a").min_insync_replicas == 2
        assert rm.logs.topic_overrides("a") == {"segment.bytes": "4096", "min.insync.replicas": "2"}
    finally:
        rm.shutdown()


def test_topic_settings_map_kafkas_keys() -> None:
    base = ReplicaConfig()
    assert topic_replica_config(base, {}) is base
    assert topic_replica_config(base, {"preallocate": "true"}) is base  # stored only
    cfg = topic_replica_config(base, {
        "segment.bytes": "100", "segment.ms": "5", "retention.ms": "-1",
        "retention.bytes": "-7", "index.interval.bytes": "0", "max.message.bytes": "9",
        "cleanup.policy": "compact", "min.insync.replicas": "2",
        "min.cleanable.dirty.ratio": "0.25", "min.compaction.lag.ms": "3",
        "max.compaction.lag.ms": "4", "delete.retention.ms": "6"})
    assert cfg.log == LogConfig(segment_bytes=100, segment_ms=5, retention_ms=-1,
                                retention_bytes=-1, index_interval_bytes=0,
                                max_message_bytes=9, cleanup_delete=False, compact=True,
                                min_cleanable_dirty_ratio=0.25, min_compaction_lag_ms=3,
                                max_compaction_lag_ms=4, delete_retention_ms=6)
    assert cfg.min_insync_replicas == 2
    assert cfg.replica_lag_time_max_ms == base.replica_lag_time_max_ms
