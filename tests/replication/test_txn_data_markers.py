"""Transaction markers and transactional batches in one partition's log, as Kafka 3.9's
ProducerAppendInfo takes them: a coordinator's append (no sequence check, the epoch checked),
markers checked against the producer's epoch and coordinator epoch, a non-transactional batch
refused while the producer's transaction is open, and the same state on a follower and after
recovery."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.clock import ManualClock
from coordinator.codecs import TopicPartition
from interbroker.errors import ErrorCode
from replication.config import ReplicaConfig
from replication.control import encode_marker_batch, read_marker
from replication.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from replication.log import Log
from replication.protocol import ACKS_ALL, AppendOrigin
from replication.records import Record, encode_batch
from replication.replica_manager import ReplicaManager

from .test_replica_manager import TP, TP1, entry, lai

PID = 4000
COORDINATOR = AppendOrigin.COORDINATOR


def data(seq: int, *, n: int = 1, epoch: int = 0, transactional: bool = True,
         pid: int = PID) -> bytes:
    return encode_batch([Record(key=b"k", value=b"v%d" % i, timestamp=1_000 + i)
                         for i in range(n)], producer_id=pid, producer_epoch=epoch,
                        base_sequence=seq, transactional=transactional)


def marker(*, commit: bool, epoch: int = 0, coordinator_epoch: int = 0, pid: int = PID
           ) -> bytes:
    return encode_marker_batch(producer_id=pid, producer_epoch=epoch, commit=commit,
                               coordinator_epoch=coordinator_epoch, timestamp=2_000)


@pytest.fixture
def log(tmp_path: Path) -> Log:
    opened = Log.open(tmp_path / "t-0", clock=ManualClock(10_000))
    opened.assign_leader_epoch(0)
    return opened


def test_a_transactional_batch_opens_a_transaction_that_a_marker_ends(log: Log) -> None:
    log.append_as_leader(data(0, n=2), 0)
    log.append_as_leader(data(2), 0)
    entry = log.producer_entry(PID)
    assert entry is not None and entry.current_txn_first_offset == 0
    info = log.append_as_leader(marker(commit=True, coordinator_epoch=3), 0, COORDINATOR)
    assert (info.first_offset, info.last_offset) == (3, 3)
    ended = log.producer_entry(PID)
    assert ended is not None and ended.current_txn_first_offset == -1
    assert (ended.epoch, ended.coordinator_epoch, ended.last_seq) == (0, 3, 2)
    found = read_marker(log.read(3, 1 << 20).records)
    assert found is not None and found.commit and found.coordinator_epoch == 3


def test_clients_may_not_write_markers(log: Log) -> None:
    with pytest.raises(InvalidRecordError, match="control records"):
        log.append_as_leader(marker(commit=True), 0)
    assert log.log_end_offset == 0


def test_a_marker_of_an_older_producer_epoch_is_refused(log: Log) -> None:
    log.append_as_leader(data(0, epoch=5), 0)
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(marker(commit=False, epoch=4), 0, COORDINATOR)
    assert log.log_end_offset == 1
    entry = log.producer_entry(PID)
    assert entry is not None and entry.current_txn_first_offset == 0


def test_a_marker_of_an_older_coordinator_epoch_is_fenced(log: Log) -> None:
    log.append_as_leader(data(0), 0)
    log.append_as_leader(marker(commit=True, coordinator_epoch=7), 0, COORDINATOR)
    log.append_as_leader(data(1), 0)
    with pytest.raises(TransactionCoordinatorFencedError):
        log.append_as_leader(marker(commit=True, coordinator_epoch=6), 0, COORDINATOR)
    assert log.log_end_offset == 3
    log.append_as_leader(marker(commit=False, coordinator_epoch=7), 0, COORDINATOR)
    assert log.log_end_offset == 4


def test_a_marker_of_a_new_producer_epoch_drops_the_old_epochs_batches(log: Log) -> None:
    log.append_as_leader(data(0), 0)
    log.append_as_leader(marker(commit=False, epoch=1), 0, COORDINATOR)  # an epoch bump
    entry = log.producer_entry(PID)
    assert entry is not None and (entry.epoch, entry.batches) == (1, ())
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(data(1, epoch=1), 0)
    log.append_as_leader(data(0, epoch=1), 0)


def test_a_plain_batch_while_the_transaction_is_open_is_refused(log: Log) -> None:
    log.append_as_leader(data(0), 0)
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(data(1, transactional=False), 0)
    assert log.log_end_offset == 1
    log.append_as_leader(marker(commit=True), 0, COORDINATOR)
    log.append_as_leader(data(1, transactional=False), 0)  # after the marker: fine


def test_a_coordinator_writes_at_sequence_zero_as_often_as_it_likes(log: Log) -> None:
    for _ in range(3):
        info = log.append_as_leader(data(0, n=2, epoch=3), 0, COORDINATOR)
        assert not info.duplicate
    assert log.log_end_offset == 6
    entry = log.producer_entry(PID)
    assert entry is not None and entry.current_txn_first_offset == 0
    with pytest.raises(InvalidProducerEpochError):  # the epoch is still checked
        log.append_as_leader(data(0, epoch=2), 0, COORDINATOR)
    assert log.log_end_offset == 6
    log.append_as_leader(marker(commit=True, epoch=3), 0, COORDINATOR)
    entry = log.producer_entry(PID)
    assert entry is not None and entry.current_txn_first_offset == -1


def test_a_follower_and_recovery_track_transactions_and_markers(
        tmp_path: Path, log: Log, caplog: pytest.LogCaptureFixture) -> None:
    log.append_as_leader(data(0), 0)
    log.append_as_leader(marker(commit=True, coordinator_epoch=2), 0, COORDINATOR)
    log.append_as_leader(data(1, n=3), 0)  # a second transaction, open
    follower = Log.open(tmp_path / "f-0", clock=ManualClock(10_000))
    follower.append_as_follower(log.read(0, 1 << 20).records)
    for copy in (follower, log):
        entry = copy.producer_entry(PID)
        assert entry is not None
        assert (entry.current_txn_first_offset, entry.coordinator_epoch, entry.last_seq) == (
            2, 2, 3)
    log.close(clean=False)  # no snapshot at the end: recovery replays the batches
    reopened = Log.open(tmp_path / "t-0", clock=ManualClock(10_000))
    entry = reopened.producer_entry(PID)
    assert entry is not None and (entry.current_txn_first_offset, entry.coordinator_epoch) == (
        2, 2)
    # a marker of an older coordinator epoch the leader wrote all the same: taken, logged
    with caplog.at_level(logging.INFO, logger="replication.producer_entry"):
        follower.append_as_follower(encode_batch_at(marker(commit=False, coordinator_epoch=1),
                                                    5))
    assert "zombie" in caplog.text
    entry = follower.producer_entry(PID)
    assert entry is not None and (entry.current_txn_first_offset, entry.coordinator_epoch) == (
        -1, 1)


def encode_batch_at(batch: bytes, offset: int) -> bytes:
    """``batch`` with its base offset and leader epoch as a leader stamps them."""
    out = bytearray(batch)
    out[0:8] = offset.to_bytes(8, "big")
    out[12:16] = (0).to_bytes(4, "big")
    return bytes(out)


# -- the replica manager: write_txn_marker and its listeners ------------------------------------


@pytest.fixture
def rm(tmp_path: Path) -> Iterator[ReplicaManager]:
    manager = ReplicaManager(1, tmp_path / "b1", None, ManualClock(10_000), ReplicaConfig())
    manager.handle_leader_and_isr(lai(entry(TP, leader=1, isr=(1,), replicas=(1,)),
                                      entry(TP1, leader=2, isr=(2, 1), replicas=(2, 1))))
    yield manager
    manager.shutdown()


def test_write_txn_marker_appends_on_the_leader_and_tells_the_listeners(
        rm: ReplicaManager) -> None:
    heard: list[tuple[TopicPartition, int, int, bool]] = []
    rm.add_marker_listener(lambda *args: heard.append(args))
    assert rm.produce(TP, data(0), ACKS_ALL).result(5).error == ErrorCode.NONE
    result = rm.write_txn_marker(TP, producer_id=PID, producer_epoch=0, commit=False,
                                 coordinator_epoch=1).result(5)
    assert (result.error, result.base_offset) == (ErrorCode.NONE, 1)
    assert heard == [(TP, PID, 0, False)]
    refused = rm.write_txn_marker(TP, producer_id=PID, producer_epoch=0, commit=True,
                                  coordinator_epoch=0).result(5)
    assert refused.error == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert heard == [(TP, PID, 0, False)]  # a refused marker is heard of by nobody


def test_write_txn_marker_off_the_leader_changes_nothing(rm: ReplicaManager) -> None:
    heard: list[object] = []
    rm.add_marker_listener(lambda *args: heard.append(args))
    answers = [rm.write_txn_marker(tp, producer_id=PID, producer_epoch=0, commit=True,
                                   coordinator_epoch=0).result(5).error
               for tp in (TP1, TopicPartition("unknown", 0))]
    assert answers == [ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    partition = rm.partition(TP1)
    assert partition is not None and partition.log.log_end_offset == 0 and heard == []


def test_marker_listeners_added_on_a_loop_are_called_on_it(rm: ReplicaManager) -> None:
    async def main() -> tuple[bool, object]:
        loop = asyncio.get_running_loop()
        heard: asyncio.Future = loop.create_future()

        def listener(*args: object) -> None:
            heard.set_result((asyncio.get_running_loop() is loop, args))

        rm.add_marker_listener(listener)
        done = await loop.run_in_executor(None, lambda: rm.write_txn_marker(
            TP, producer_id=PID, producer_epoch=0, commit=True, coordinator_epoch=0).result(5))
        assert done.error == ErrorCode.NONE
        return await asyncio.wait_for(heard, 5)

    on_loop, args = asyncio.run(main())
    assert on_loop and args == (TP, PID, 0, True)
