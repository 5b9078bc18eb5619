"""The replica manager's control plane, checkpoints, crashes and background threads."""

from __future__ import annotations

import logging
import os
import random
import shutil
import threading
import time
from pathlib import Path

import pytest

from coordinator.clock import ManualClock, SystemClock
from coordinator.codecs import TopicPartition
from interbroker.errors import ErrorCode
from interbroker.fencing import FIELD, LOGGER_NAME
from interbroker.requests import (
    EPOCH_DURING_DELETE,
    LeaderAndIsrPartition,
    LeaderAndIsrRequest,
    LiveBroker,
    StopReplicaPartition,
    StopReplicaRequest,
    UpdateMetadataPartition,
    UpdateMetadataRequest,
)
from replication.checkpoints import (
    HIGH_WATERMARK_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    OffsetCheckpointFile,
)
from replication.config import ReplicaConfig
from replication.epochs import BATCH_WRITERS
from replication.log import LogConfig
from replication.partition import Role
from replication.protocol import ACKS_ALL, EpochAnswer
from replication.replica_manager import ReplicaManager
from tests.waiting import wait_until

from .test_replica_manager_cluster import (
    TP,
    MiniCluster,
    batch_signature,
    make_batch,
    values_by_offset,
)

TP1 = TopicPartition(topic="t", partition=1)


def entry(tp: TopicPartition = TP, *, leader: int = 1, epoch: int = 0, isr=(1,),
          partition_epoch: int = 0, replicas=(1, 2)) -> LeaderAndIsrPartition:
    return LeaderAndIsrPartition(
        topic=tp.topic, partition=tp.partition, controller_epoch=1, leader=leader,
        leader_epoch=epoch, isr=tuple(isr), partition_epoch=partition_epoch,
        replicas=tuple(replicas),
    )


def lai(*entries: LeaderAndIsrPartition, controller_epoch: int = 1) -> LeaderAndIsrRequest:
    return LeaderAndIsrRequest(controller_id=0, controller_epoch=controller_epoch,
                               broker_epoch=-1, partitions=entries)


@pytest.fixture
def rm(tmp_path: Path):
    manager = ReplicaManager(1, tmp_path / "b1", None, ManualClock(), ReplicaConfig())
    yield manager
    manager.shutdown()


def test_stale_controller_epoch_rejects_the_whole_request(rm: ReplicaManager) -> None:
    assert rm.handle_leader_and_isr(lai(entry(), controller_epoch=5)).ok
    response = rm.handle_leader_and_isr(lai(entry(epoch=1), entry(TP1), controller_epoch=4))
    assert response.error == ErrorCode.STALE_CONTROLLER_EPOCH and not response.partition_errors
    assert rm.status(TP).leader_epoch == 0 and rm.partition(TP1) is None
    stop = StopReplicaRequest(controller_id=0, controller_epoch=4, broker_epoch=-1,
                              partitions=(StopReplicaPartition(topic="t", partition=0),))
    assert rm.handle_stop_replica(stop).error == ErrorCode.STALE_CONTROLLER_EPOCH
    assert rm.status(TP).role is Role.LEADER


def test_stale_broker_epoch_is_rejected(tmp_path: Path) -> None:
    manager = ReplicaManager(1, tmp_path, None, ManualClock(), broker_epoch=10)
    try:
        old = LeaderAndIsrRequest(controller_id=0, controller_epoch=1, broker_epoch=9,
                                  partitions=(entry(),))
        assert manager.handle_leader_and_isr(old).error == ErrorCode.STALE_BROKER_EPOCH
    finally:
        manager.shutdown()


def test_older_leader_epochs_are_ignored_per_partition(rm: ReplicaManager) -> None:
    assert rm.handle_leader_and_isr(lai(entry(epoch=3), entry(TP1, epoch=0))).ok
    response = rm.handle_leader_and_isr(lai(entry(epoch=2, leader=2), entry(TP1, epoch=1)))
    assert response.partition_errors == {TP: ErrorCode.STALE_CONTROLLER_EPOCH, TP1: ErrorCode.NONE}
    assert rm.status(TP).role is Role.LEADER and rm.status(TP).leader_epoch == 3
    # The same epoch again is stale too, unless the partition epoch moved (ISR changed).
    same = rm.handle_leader_and_isr(lai(entry(epoch=3)))
    assert same.partition_errors[TP] == ErrorCode.STALE_CONTROLLER_EPOCH
    wider = rm.handle_leader_and_isr(lai(entry(epoch=3, isr=(1, 2), partition_epoch=1)))
    assert wider.ok and rm.status(TP).isr == (1, 2)


def test_refused_controller_requests_are_on_the_state_change_log(
        rm: ReplicaManager, caplog: pytest.LogCaptureFixture) -> None:
    """Each epoch refusal is one state-change line with what the request carried."""
    caplog.set_level(logging.INFO, logger=LOGGER_NAME)
    assert rm.handle_leader_and_isr(lai(entry(epoch=3), controller_epoch=5)).ok
    rm.handle_leader_and_isr(lai(entry(epoch=4), controller_epoch=4))
    rm.handle_leader_and_isr(lai(entry(epoch=2, leader=2), controller_epoch=5))
    fenced = [getattr(r, FIELD) for r in caplog.records
              if r.name == LOGGER_NAME and getattr(r, FIELD)["event"] == "fenced"]
    assert [(f["node_id"], f["request"], f["reason"], f["given_epoch"], f["current_epoch"],
             f.get("partition")) for f in fenced] == [
        (1, "LeaderAndIsr", "stale controller epoch", 4, 5, None),
        (1, "LeaderAndIsr", "stale leader epoch", 2, 3, 0)]


def test_a_partition_not_assigned_here_is_refused(rm: ReplicaManager) -> None:
    response = rm.handle_leader_and_isr(lai(entry(replicas=(2, 3), leader=2, isr=(2, 3))))
    assert response.partition_errors[TP] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert rm.partition(TP) is None


def test_becoming_leader_then_follower(rm: ReplicaManager) -> None:
    rm.handle_leader_and_isr(lai(entry(epoch=0)))
    assert rm.produce(TP, make_batch(2)[0], acks=1).result().error == ErrorCode.NONE
    rm.handle_leader_and_isr(lai(entry(epoch=4)))  # re-elected: epoch recorded at the end
    entries = rm.partition(TP).log.leader_epoch_cache.entries
    assert [(e.epoch, e.start_offset) for e in entries] == [(0, 0), (4, 2)]
    rm.handle_leader_and_isr(lai(entry(epoch=5, leader=2, isr=(2, 1))))
    status = rm.status(TP)
    assert (status.role, status.leader, status.leader_epoch) == (Role.FOLLOWER, 2, 5)
    position = rm.fetcher.positions()[TP]
    assert (position.leader, position.leader_epoch, position.truncating) == (2, 5, True)
    assert rm.produce(TP, make_batch()[0], acks=1).result().error == (
        ErrorCode.NOT_LEADER_OR_FOLLOWER)
    # No leader: stop fetching.
    rm.handle_leader_and_isr(lai(entry(epoch=6, leader=-1, isr=(2,))))
    assert TP not in rm.fetcher.positions()


def test_stop_replica_stops_and_deletes(rm: ReplicaManager) -> None:
    rm.handle_leader_and_isr(lai(entry(epoch=2), entry(TP1)))
    directory = rm.partition(TP).log.directory
    fenced = StopReplicaRequest(controller_id=0, controller_epoch=1, broker_epoch=-1,
                                partitions=(StopReplicaPartition(topic="t", partition=0,
                                                                 leader_epoch=1),))
    assert rm.handle_stop_replica(fenced).partition_errors[TP] == ErrorCode.FENCED_LEADER_EPOCH
    stop = StopReplicaRequest(controller_id=0, controller_epoch=1, broker_epoch=-1, partitions=(
        StopReplicaPartition(topic="t", partition=0, delete=True,
                             leader_epoch=EPOCH_DURING_DELETE),
        StopReplicaPartition(topic="t", partition=1),
    ))
    assert rm.handle_stop_replica(stop).ok
    assert rm.partition(TP) is None and not directory.exists()
    assert rm.status(TP1).role is Role.NONE
    assert rm.produce(TP1, make_batch()[0], acks=1).result().error == (
        ErrorCode.NOT_LEADER_OR_FOLLOWER)


def test_update_metadata_is_remembered(rm: ReplicaManager) -> None:
    part = UpdateMetadataPartition(topic="t", partition=0, controller_epoch=1, leader=2,
                                   leader_epoch=3, isr=(2, 1), partition_epoch=4,
                                   replicas=(2, 1))
    request = UpdateMetadataRequest(controller_id=0, controller_epoch=1, broker_epoch=-1,
                                    partitions=(part,),
                                    live_brokers=(LiveBroker(id=1), LiveBroker(id=2)))
    assert rm.handle_update_metadata(request).ok
    assert rm.metadata_for(TP) == part and set(rm.live_brokers) == {1, 2}


def _metadata(tp: TopicPartition, leader: int) -> UpdateMetadataRequest:
    part = UpdateMetadataPartition(topic=tp.topic, partition=tp.partition, controller_epoch=1,
                                   leader=leader, leader_epoch=0, isr=(2, 3),
                                   partition_epoch=0, replicas=(2, 3))
    return UpdateMetadataRequest(controller_id=0, controller_epoch=1, broker_epoch=-1,
                                 partitions=(part,), live_brokers=(LiveBroker(id=1),))


def test_offsets_for_leader_epoch_of_a_partition_hosted_elsewhere(rm: ReplicaManager) -> None:
    # Kafka: NOT_LEADER_OR_FOLLOWER when the broker's metadata has the partition (the asker
    # should look for the leader), UNKNOWN_TOPIC_OR_PARTITION only when it does not.
    assert rm.offsets_for_leader_epoch(TP, 0, 0).error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert rm.handle_update_metadata(_metadata(TP, leader=2)).ok
    assert rm.offsets_for_leader_epoch(TP, 0, 0).error == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert rm.handle_update_metadata(_metadata(TP, leader=-2)).ok  # the topic is being deleted
    assert rm.offsets_for_leader_epoch(TP, 0, 0).error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # Named in a LeaderAndIsr for other brokers: known to exist, not hosted.
    refused = rm.handle_leader_and_isr(lai(entry(TP1, leader=2, isr=(2, 3), replicas=(2, 3))))
    assert refused.partition_errors[TP1] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert rm.offsets_for_leader_epoch(TP1, 0, 0).error == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_offsets_for_leader_epoch_after_the_replica_moved_away(rm: ReplicaManager) -> None:
    rm.handle_leader_and_isr(lai(entry(epoch=2), entry(TP1)))
    moved = StopReplicaRequest(controller_id=0, controller_epoch=1, broker_epoch=-1, partitions=(
        StopReplicaPartition(topic="t", partition=0, delete=True, leader_epoch=3),
        StopReplicaPartition(topic="t", partition=1, delete=True,
                             leader_epoch=EPOCH_DURING_DELETE),
    ))
    assert rm.handle_stop_replica(moved).ok
    assert rm.partition(TP) is None and rm.partition(TP1) is None
    # TP was reassigned away (it still exists); TP1's topic was deleted.
    assert rm.offsets_for_leader_epoch(TP, 2, 2).error == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert rm.offsets_for_leader_epoch(TP1, 0, 0).error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_high_watermarks_are_checkpointed_and_restored(tmp_path: Path) -> None:
    clock = ManualClock()
    manager = ReplicaManager(1, tmp_path, None, clock, ReplicaConfig())
    manager.handle_leader_and_isr(lai(entry(replicas=(1,))))
    manager.produce(TP, make_batch(3)[0], acks=1)
    checkpoint = OffsetCheckpointFile(tmp_path / HIGH_WATERMARK_CHECKPOINT_FILE)
    assert checkpoint.read() == {}
    clock.advance(5_000)
    manager.tick()  # periodic checkpoint
    assert checkpoint.read() == {TP: 3}
    manager.produce(TP, make_batch(2)[0], acks=1)
    manager.shutdown()  # and on shutdown
    assert checkpoint.read() == {TP: 5}
    again = ReplicaManager(1, tmp_path, None, clock, ReplicaConfig())
    try:
        assert again.status(TP).high_watermark == 5 and again.status(TP).role is Role.NONE
    finally:
        again.shutdown()


def test_a_corrupt_epoch_checkpoint_keeps_no_partition_down(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock()
    manager = ReplicaManager(1, tmp_path, None, clock, ReplicaConfig())
    manager.handle_leader_and_isr(lai(entry(replicas=(1,)), entry(TP1, replicas=(1,))))
    manager.produce(TP, make_batch(3)[0], acks=1)
    manager.handle_leader_and_isr(lai(entry(replicas=(1,), epoch=2)))
    manager.produce(TP, make_batch(2)[0], acks=1)
    manager.produce(TP1, make_batch(1)[0], acks=1)
    expected = manager.partition(TP).log.leader_epoch_cache.entries
    assert [(e.epoch, e.start_offset) for e in expected] == [(0, 0), (2, 3)]
    manager.shutdown()
    checkpoint = tmp_path / "t-0" / "leader-epoch-checkpoint"
    checkpoint.write_bytes(b"0\n2\n0 0\n")  # the count does not match
    with caplog.at_level("WARNING"):
        again = ReplicaManager(1, tmp_path, None, clock, ReplicaConfig())
    try:
        assert again.status(TP).log_end_offset == 5 and again.status(TP1).log_end_offset == 1
        assert again.partition(TP).log.leader_epoch_cache.entries == expected
        assert [p.read_bytes() for p in checkpoint.parent.glob("leader-epoch-checkpoint.*")] == [
            b"0\n2\n0 0\n"]
        warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        assert len(warnings) == 1 and str(checkpoint) in warnings[0]
        assert again.handle_leader_and_isr(lai(entry(replicas=(1,), epoch=3))).ok
        assert again.produce(TP, make_batch(1)[0], acks=1).result().error == ErrorCode.NONE
    finally:
        again.shutdown()


def test_corrupt_high_watermark_and_recovery_point_checkpoints_are_ignored(
    tmp_path: Path,
) -> None:
    """Those two already fail soft: ignored with a warning (every HW starts at the log start,
    every log is recovered from its start) and replaced by the next checkpoint."""
    clock = ManualClock()
    manager = ReplicaManager(1, tmp_path, None, clock, ReplicaConfig())
    manager.handle_leader_and_isr(lai(entry(replicas=(1,))))
    manager.produce(TP, make_batch(3)[0], acks=1)
    manager.shutdown()
    for name in (HIGH_WATERMARK_CHECKPOINT_FILE, RECOVERY_POINT_CHECKPOINT_FILE):
        (tmp_path / name).write_bytes(b"0\n1\nt zero 3\n")
    again = ReplicaManager(1, tmp_path, None, clock, ReplicaConfig())
    try:
        assert again.status(TP).log_end_offset == 3 and again.status(TP).high_watermark == 0
        again.logs.checkpoint_high_watermarks()
        assert OffsetCheckpointFile(tmp_path / HIGH_WATERMARK_CHECKPOINT_FILE).read() == {TP: 0}
    finally:
        again.shutdown()


def test_a_crash_keeps_written_bytes_a_power_failure_loses_unflushed_ones(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    manager = ReplicaManager(1, tmp_path, None, clock, ReplicaConfig())
    manager.handle_leader_and_isr(lai(entry(replicas=(1,))))
    manager.produce(TP, make_batch(3)[0], acks=1)
    manager.logs.flush_logs()
    manager.produce(TP, make_batch(2)[0], acks=1)
    manager.crash()
    again = ReplicaManager(1, tmp_path, None, clock, ReplicaConfig())
    assert again.status(TP).log_end_offset == 5
    assert again.status(TP).high_watermark == 0  # no checkpoint was written
    again.handle_leader_and_isr(lai(entry(replicas=(1,), epoch=1)))
    again.produce(TP, make_batch(1)[0], acks=1)
    again.logs.flush_logs()
    again.produce(TP, make_batch(4)[0], acks=1)
    again.crash(lose_unflushed=True, torn_bytes=30)
    third = ReplicaManager(1, tmp_path, None, clock, ReplicaConfig())
    try:
        assert third.status(TP).log_end_offset == 6
        entries = third.partition(TP).log.leader_epoch_cache.entries
        assert [(e.epoch, e.start_offset) for e in entries] == [(0, 0), (1, 5)]
    finally:
        third.shutdown()


def test_requests_to_a_stopped_manager_fail(rm: ReplicaManager) -> None:
    rm.handle_leader_and_isr(lai(entry()))
    rm.shutdown()
    assert rm.produce(TP, make_batch()[0]).result().error == ErrorCode.BROKER_NOT_AVAILABLE
    assert rm.fetch(TP, 0, 10, 2, 0).error == ErrorCode.BROKER_NOT_AVAILABLE
    assert rm.read(TP, 0, 10).error == ErrorCode.BROKER_NOT_AVAILABLE
    assert rm.offsets_for_leader_epoch(TP, 0, 0).error == ErrorCode.BROKER_NOT_AVAILABLE
    assert rm.handle_leader_and_isr(lai(entry(epoch=1))).error == ErrorCode.BROKER_NOT_AVAILABLE


def test_background_threads_replicate_and_answer_acks_all(tmp_path: Path) -> None:
    cluster = MiniCluster(tmp_path, clock=SystemClock())
    try:
        cluster.create()
        for rm in cluster.brokers.values():
            rm.start()
        futures, expected = [], []
        for _ in range(50):
            future, values = cluster.produce(n=4, acks=ACKS_ALL)
            futures.append(future)
            expected += values
        results = [f.result(timeout=10) for f in futures]
        assert all(r.error == ErrorCode.NONE for r in results)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if all(rm.status(TP).high_watermark == 200 for rm in cluster.brokers.values()):
                break
            time.sleep(0.01)
        for b in (1, 2, 3):
            assert list(values_by_offset(cluster.log(b)).values()) == expected
    finally:
        cluster.shutdown()


def test_a_power_failure_across_segments_recovers_the_flushed_prefix(tmp_path: Path) -> None:
    config = ReplicaConfig(log=LogConfig(segment_bytes=600, index_interval_bytes=100))
    clock = ManualClock()
    manager = ReplicaManager(1, tmp_path, None, clock, config)
    manager.handle_leader_and_isr(lai(entry(replicas=(1,))))
    values = []
    for i in range(12):
        data, batch_values = make_batch(2, size=100)
        values += batch_values
        assert manager.produce(TP, data, acks=1).result().error == ErrorCode.NONE
        if i == 4:
            manager.logs.flush_logs()
    log = manager.partition(TP).log
    assert len(log.segment_base_offsets) > 3
    manager.crash(lose_unflushed=True, torn_bytes=20)
    again = ReplicaManager(1, tmp_path, None, clock, config)
    try:
        recovered = again.partition(TP).log
        assert recovered.log_end_offset == 10
        assert list(values_by_offset(recovered).values()) == values[:10]
    finally:
        again.shutdown()


def test_a_follower_behind_the_leaders_log_start_restarts_its_log_there(tmp_path: Path) -> None:
    config = ReplicaConfig(log=LogConfig(segment_bytes=600, retention_bytes=300))
    cluster = MiniCluster(tmp_path, (1, 2), config=config)
    try:
        cluster.crash(2)
        cluster.create(replicas=(1, 2))  # 2 is down: ISR (1)
        for _ in range(12):
            cluster.produce(n=2, acks=1)
        leader_log = cluster.log(1)
        assert leader_log.delete_old_segments(high_watermark=24) > 0
        start = leader_log.log_start_offset
        assert start > 0
        cluster.start(2)
        cluster.settle()
        follower_log = cluster.log(2)
        assert follower_log.log_start_offset == start
        assert follower_log.log_end_offset == leader_log.log_end_offset == 24
        assert cluster.state()[0].isr == (1, 2)
    finally:
        cluster.shutdown()


def test_a_stopped_partition_still_refuses_older_leader_epochs(rm: ReplicaManager) -> None:
    rm.handle_leader_and_isr(lai(entry(epoch=5)))
    stop = StopReplicaRequest(controller_id=0, controller_epoch=1, broker_epoch=-1,
                              partitions=(StopReplicaPartition(topic="t", partition=0),))
    rm.handle_stop_replica(stop)
    assert rm.handle_leader_and_isr(lai(entry(epoch=4))).partition_errors[TP] == (
        ErrorCode.STALE_CONTROLLER_EPOCH)
    assert rm.handle_leader_and_isr(lai(entry(epoch=5))).ok  # the same state again is fine
    assert rm.status(TP).role is Role.LEADER


def test_background_threads_survive_leader_failover_under_load(tmp_path: Path) -> None:
    config = ReplicaConfig(min_insync_replicas=2)
    cluster = MiniCluster(tmp_path, clock=SystemClock(), config=config)
    try:
        cluster.create()
        for rm in cluster.brokers.values():
            rm.start()
        acked: dict[int, bytes] = {}

        def produce_some(count: int) -> None:
            futures = [cluster.produce(n=3, acks=ACKS_ALL) for _ in range(count)]
            for future, values in futures:
                result = future.result(timeout=10)
                if result.error == ErrorCode.NONE:
                    acked.update(zip(range(result.base_offset, result.last_offset + 1), values,
                                     strict=True))

        produce_some(30)
        cluster.crash(1)  # leader: 2 takes over within the ISR
        produce_some(30)
        cluster.start(1).start()
        produce_some(30)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and cluster.state()[0].isr != (2, 3, 1):
            time.sleep(0.01)
        assert cluster.state()[0].isr == (2, 3, 1)
        leader_values = values_by_offset(cluster.log(2))
        assert len(acked) >= 180
        assert all(leader_values[o] == v for o, v in acked.items())
    finally:
        cluster.shutdown()


def test_the_transport_can_be_wired_after_construction(tmp_path: Path) -> None:
    clock = ManualClock()
    leader = ReplicaManager(1, tmp_path / "b1", None, clock)
    follower = ReplicaManager(2, tmp_path / "b2", None, clock)
    try:
        follower.transport = {1: leader}
        leader.handle_leader_and_isr(lai(entry(isr=(1, 2))))
        follower.handle_leader_and_isr(lai(entry(isr=(1, 2))))
        future = leader.produce(TP, make_batch(2)[0], acks=ACKS_ALL)
        while follower.fetcher.run_once():
            pass
        follower.fetcher.run_once()
        assert future.result(timeout=0).error == ErrorCode.NONE
        assert follower.status(TP).high_watermark == 2
    finally:
        leader.shutdown()
        follower.shutdown()


@pytest.mark.parametrize("damage", ["torn", "garbage"])
def test_a_follower_whose_log_tail_was_damaged_after_a_clean_shutdown_catches_up(
    tmp_path: Path, damage: str
) -> None:
    cluster = MiniCluster(tmp_path)
    try:
        cluster.create()
        for _ in range(5):
            cluster.produce(n=2, acks=1)
        cluster.settle()
        cluster.brokers.pop(3).shutdown()  # clean: the marker is written
        segment = sorted((tmp_path / "broker-3" / "t-0").glob("*.log"))[-1]
        if damage == "torn":
            os.truncate(segment, segment.stat().st_size - 37)
        else:
            with open(segment, "ab") as f:
                f.write(random.Random(14).randbytes(300))
        cluster.start(3)
        assert cluster.log(3).log_end_offset == (8 if damage == "torn" else 10)
        cluster.produce(n=2, acks=1)
        cluster.settle()
        assert batch_signature(cluster.log(3)) == batch_signature(cluster.log(1))
        assert cluster.brokers[3].status(TP).high_watermark == 12
    finally:
        cluster.shutdown()


def test_a_follower_whose_epochs_the_leader_deleted_restarts_at_the_leaders_log_start(
    tmp_path: Path,
) -> None:
    """The follower's whole log is from epoch 0; by the time it returns, retention removed
    epoch 0 from the leader. The leader answers OffsetsForLeaderEpoch(0) as Kafka does, with
    epoch 0 ending at its own first epoch's start (its log start); the follower keeps its log,
    fetches below the leader's start, is told it is out of range and restarts there."""
    config = ReplicaConfig(log=LogConfig(segment_bytes=600, retention_bytes=300))
    cluster = MiniCluster(tmp_path, (1, 2), config=config)
    try:
        cluster.create(replicas=(1, 2))
        for _ in range(3):
            cluster.produce(n=2, acks=1)
        cluster.settle()
        cluster.crash(2)  # out of the ISR: epoch 1
        for _ in range(12):
            cluster.produce(n=2, acks=1)
        leader_log = cluster.log(1)
        assert leader_log.delete_old_segments(high_watermark=30) > 0
        start = leader_log.log_start_offset
        assert [e.epoch for e in leader_log.leader_epoch_cache.entries] == [1]
        assert cluster.brokers[1].offsets_for_leader_epoch(TP, 0, 1) == EpochAnswer(
            error=ErrorCode.NONE, epoch=0, end_offset=start)
        cluster.start(2)
        cluster.settle()
        follower_log = cluster.log(2)
        assert follower_log.log_start_offset == start
        assert batch_signature(follower_log) == batch_signature(leader_log)
        assert follower_log.leader_epoch_cache.entries == leader_log.leader_epoch_cache.entries
        assert cluster.state()[0].isr == (1, 2)
    finally:
        cluster.shutdown()


def test_a_topic_name_kafka_forbids_gets_no_log_directory_and_one_warning(
        rm: ReplicaManager, caplog: pytest.LogCaptureFixture) -> None:
    """Another controller (or a tool writing the store) names topics Kafka refuses: no
    ``ü-0`` or over-long directory, no traceback, one warning per topic however often."""
    caplog.set_level(logging.WARNING)
    bad = [TopicPartition("ü", 0), TopicPartition("a b", 0), TopicPartition("x" * 300, 0),
           TopicPartition("..", 0)]
    for n in range(3):
        response = rm.handle_leader_and_isr(lai(entry(epoch=n), *(entry(tp) for tp in bad)))
        assert response.partition_errors[TP] == ErrorCode.NONE
        assert {response.partition_errors[tp] for tp in bad} == {ErrorCode.INVALID_TOPIC_EXCEPTION}
    assert sorted(p.name for p in rm.log_dir.iterdir() if p.is_dir()) == [f"{TP.topic}-0"]
    warnings = [r for r in caplog.records if "skipping topic" in r.getMessage()]
    assert len(warnings) == len(bad) and not [r for r in caplog.records if r.exc_info]


def test_a_leader_and_isr_answers_before_the_new_epochs_reach_disk_and_they_follow(
        rm: ReplicaManager) -> None:
    """The epoch files of all the partitions a request makes this broker lead are handed to
    the broker's epoch writers (replication.epochs.batched_epoch_writes): the answer does not
    wait for their fsyncs, as Kafka's does; they are all on disk soon after."""
    tps = [TopicPartition(topic="many", partition=i) for i in range(64)]
    assert rm.handle_leader_and_isr(lai(*(entry(tp, epoch=0) for tp in tps))).ok
    assert rm.handle_leader_and_isr(lai(*(entry(tp, epoch=3) for tp in tps))).ok
    caches = [rm.partition(tp).log.leader_epoch_cache for tp in tps]
    wait_until(lambda: not any(c.unwritten for c in caches), message="epoch files written")
    for tp, cache in zip(tps, caches, strict=True):
        # epoch 3 from the log end, 0: it takes the place of epoch 0, which wrote nothing
        assert cache.path.read_text() == "0\n1\n3 0\n", tp


def test_a_crash_before_the_epoch_files_are_written_loses_no_entry_a_batch_needs(
        tmp_path: Path) -> None:
    """The writers are held, so the new epochs' files are not written; records are appended
    in the new epoch, one partition's flushed, and the broker dies: its files as it leaves
    them (a copy taken while it runs). The flush wrote its epoch first; recovery rebuilds the
    other's from the batches past the recovery point."""
    clock = ManualClock()
    manager = ReplicaManager(1, tmp_path / "live", None, clock, ReplicaConfig())
    held = threading.Event()
    try:
        tp2 = TopicPartition(topic="t", partition=2)
        manager.handle_leader_and_isr(lai(entry(replicas=(1,)), entry(tp2, replicas=(1,))))
        for tp in (TP, tp2):
            manager.produce(tp, make_batch(3)[0], acks=1)
        manager.logs.flush_logs()
        for _ in range(BATCH_WRITERS):  # every epoch writer busy until the end
            manager._epoch_writer.submit(held.wait, 30)
        manager.handle_leader_and_isr(lai(entry(replicas=(1,), epoch=4),
                                          entry(tp2, replicas=(1,), epoch=4)))
        caches = {tp: manager.partition(tp).log.leader_epoch_cache for tp in (TP, tp2)}
        assert all(c.unwritten for c in caches.values())
        assert caches[TP].path.read_text() == "0\n1\n0 0\n"  # only epoch 0 on disk
        manager.produce(TP, make_batch(2)[0], acks=1)
        manager.produce(tp2, make_batch(2)[0], acks=1)
        manager.partition(tp2).log.flush()  # writes tp2's epoch before its point moves
        assert caches[tp2].path.read_text() == "0\n2\n0 0\n4 3\n"
        shutil.copytree(tmp_path / "live", tmp_path / "killed")
    finally:
        held.set()
        manager.shutdown()
    again = ReplicaManager(1, tmp_path / "killed", None, clock, ReplicaConfig())
    try:
        log_ = again.partition(TP).log
        assert log_.leader_epoch_cache.path.read_text() != "0\n1\n0 0\n"  # rebuilt
        for tp in (TP, tp2):
            entries = again.partition(tp).log.leader_epoch_cache.entries
            assert [(e.epoch, e.start_offset) for e in entries] == [(0, 0), (4, 3)], tp
            assert again.status(tp).log_end_offset == 5
    finally:
        again.shutdown()
