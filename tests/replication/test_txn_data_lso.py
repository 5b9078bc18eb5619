"""The last stable offset of a partition's log (Kafka 3.9's firstUnstableOffset rule): the
first offset of an open transaction, or of a completed one whose marker the HW has not
passed, when below the HW; else the HW. On the leader, a follower and after recovery."""

from __future__ import annotations

import logging
import struct
from pathlib import Path

import pytest

from coordinator.clock import ManualClock
from replication.log import Log
from replication.txn_index import AbortedTxn

from .test_txn_data_markers import COORDINATOR, data, encode_batch_at, marker


def open_log(path: Path) -> Log:
    log = Log.open(path, clock=ManualClock(10_000))
    log.assign_leader_epoch(0)
    return log


def test_an_open_transaction_holds_the_lso_until_its_marker_is_below_the_hw(
        tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(data(0, n=2, transactional=False, pid=1), 0)  # 0-1, not a transaction
    assert log.last_stable_offset(2) == 2
    log.append_as_leader(data(0, n=3), 0)  # 2-4, producer PID's transaction
    assert log.ongoing_transactions() == {4000: 2}
    assert [log.last_stable_offset(hw) for hw in (1, 2, 5)] == [1, 2, 2]
    log.append_as_leader(marker(commit=True), 0, COORDINATOR)  # 5
    assert log.ongoing_transactions() == {}
    assert [log.last_stable_offset(hw) for hw in (5, 6)] == [2, 6]  # decided once the HW passes
    assert log.last_stable_offset(6) == 6


def test_the_earliest_open_transaction_of_any_producer_bounds_the_lso(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(data(0, pid=1), 0)  # 0: producer 1 opens
    log.append_as_leader(data(0, pid=2), 0)  # 1: producer 2 opens
    log.append_as_leader(marker(commit=False, pid=2), 0, COORDINATOR)  # 2: producer 2 aborts
    assert log.last_stable_offset(3) == 0
    log.append_as_leader(marker(commit=True, pid=1), 0, COORDINATOR)  # 3
    assert log.last_stable_offset(3) == 0  # producer 1's marker is not below the HW
    assert log.last_stable_offset(4) == 4


def test_followers_and_recovery_know_the_open_transactions(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "t-0")
    leader.append_as_leader(data(0, pid=1), 0)
    leader.append_as_leader(marker(commit=True, pid=1), 0, COORDINATOR)
    leader.append_as_leader(data(0, n=2, pid=2), 0)  # 2-3, open
    follower = Log.open(tmp_path / "f-0", clock=ManualClock(10_000))
    follower.append_as_follower(leader.read(0, 1 << 20).records)
    assert follower.ongoing_transactions() == {2: 2}
    assert follower.last_stable_offset(4) == 2
    leader.close()  # a snapshot at the log end holds the open transaction
    reopened = Log.open(tmp_path / "t-0", clock=ManualClock(10_000))
    assert reopened.ongoing_transactions() == {2: 2} and reopened.last_stable_offset(4) == 2
    reopened.close(clean=False)
    for snapshot in (tmp_path / "t-0").glob("*.snapshot"):
        snapshot.unlink()  # no snapshot: recovery replays the log
    replayed = Log.open(tmp_path / "t-0", clock=ManualClock(10_000))
    assert replayed.ongoing_transactions() == {2: 2}
    replayed.close()
    follower.append_as_follower(encode_batch_at(marker(commit=False, pid=2), 4))
    assert follower.ongoing_transactions() == {} and follower.last_stable_offset(4) == 2
    assert follower.last_stable_offset(5) == 5
    follower.truncate_to(4)  # the marker goes again: the transaction is open again
    assert follower.ongoing_transactions() == {2: 2}


# -- the aborted-transaction index ------------------------------------------------------------


def test_an_abort_is_indexed_in_kafkas_format_and_truncated_with_the_log(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(data(0, n=2, pid=1), 0)  # 0-1: producer 1
    log.append_as_leader(data(0, pid=2), 0)  # 2: producer 2
    log.append_as_leader(marker(commit=False, pid=1), 0, COORDINATOR)  # 3: 1 aborts
    log.append_as_leader(marker(commit=True, pid=2), 0, COORDINATOR)  # 4: 2 commits
    assert log.txn_index_entries() == {0: [AbortedTxn(1, 0, 3, 2)]}  # LSO: 2's transaction
    raw = (tmp_path / "t-0" / f"{0:020d}.txnindex").read_bytes()
    assert raw == struct.pack(">hqqqq", 0, 1, 0, 3, 2) and len(raw) == 34
    assert log.aborted_transactions(0, 5) == [AbortedTxn(1, 0, 3, 2)]
    assert log.aborted_transactions(4, 5) == []  # its marker is before the read
    assert log.aborted_transactions(0, 0) == []
    log.truncate_to(3)
    assert log.txn_index_entries() == {} and not (tmp_path / "t-0" / f"{0:020d}.txnindex"
                                                   ).exists()


def test_a_corrupt_index_is_rebuilt_from_the_log_with_one_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(data(0, pid=1), 0)
    log.append_as_leader(marker(commit=False, pid=1), 0, COORDINATOR)
    log.roll()
    log.append_as_leader(data(1, pid=1), 0)  # 2
    log.append_as_leader(marker(commit=False, pid=1), 0, COORDINATOR)  # 3
    expected = {0: [AbortedTxn(1, 0, 1, 2)], 2: [AbortedTxn(1, 2, 3, 4)]}
    assert log.txn_index_entries() == expected
    log.close()
    index = tmp_path / "t-0" / f"{2:020d}.txnindex"
    for damage in (index.read_bytes()[:-1], b"\x00\x07" + index.read_bytes()[2:]):
        index.write_bytes(damage)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="replication.txn_index"):
            reopened = Log.open(tmp_path / "t-0", clock=ManualClock(10_000))
        assert reopened.txn_index_entries() == expected
        assert [r.levelname for r in caplog.records] == ["WARNING"]
        assert "rebuilding" in caplog.text
        reopened.close()
