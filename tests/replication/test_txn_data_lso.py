"""The last stable offset of a partition's log (Kafka 3.9's firstUnstableOffset rule): the
first offset of an open transaction, or of a completed one whose marker the HW has not
passed, when below the HW; else the HW. On the leader, a follower and after recovery."""

from __future__ import annotations

import logging
import struct
from pathlib import Path

import pytest

from coordinator.clock import ManualClock
from replication.log import Log, LogConfig, LogSlice
from replication.txn_index import AbortedTxn, TxnIndexes

from .test_tiered_manager import finished, leader, manager, tiered_log
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


def started_batches(data: bytes) -> list[tuple[int, int]]:
    """(base offset, last offset) of each batch that starts in ``data`` (the last may be cut)."""
    out, pos = [], 0
    while pos + 61 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        (last_delta,) = struct.unpack_from(">i", data, pos + 23)
        out.append((base, base + last_delta))
        pos += 12 + length
    return out


def sliced(log: Log, offset: int, max_bytes: int) -> bytes:
    found = log.read_slice(offset, max_bytes, log.log_end_offset, copy_below=0)
    assert isinstance(found, LogSlice)
    try:
        return found.read()
    finally:
        found.close()


@pytest.mark.parametrize("interval", [0, 4096])
def test_a_read_lists_the_aborted_transactions_of_its_records_not_all_up_to_the_lso(
        tmp_path: Path, interval: int) -> None:
    """Kafka's bound on the aborted transactions a read_committed answer lists: those that
    overlap the records read, up to the first batch past them (among the last appended, or
    the first indexed one: the index is sparse, so a few more), in two segments. Listing every
    one up to the LSO made each answer of a read from the start of a long log list them all."""
    log = Log.open(tmp_path / "t-0", config=LogConfig(index_interval_bytes=interval),
                   clock=ManualClock(10_000))
    log.assign_leader_epoch(0)
    for i in range(300):  # transaction i: data at 3i and 3i+1, its abort marker at 3i+2
        pid = 7_000 + i
        log.append_as_leader(data(0, n=2, pid=pid), 0)
        log.append_as_leader(marker(commit=False, pid=pid), 0, COORDINATOR)
        if i == 149:
            log.roll()
    end = log.log_end_offset
    everything = log.aborted_transactions(0, end)
    assert len(everything) == 300
    for offset, max_bytes in ((0, 700), (300, 700), (449, 2_000), (850, 700), (0, 1 << 20)):
        found = sliced(log, offset, max_bytes)
        read, size = started_batches(found), len(found)
        listed = log.aborted_in_read(offset, size, end)
        needed = [t for t in everything
                  if t.last_offset >= offset and t.first_offset <= read[-1][1]]
        assert listed[:len(needed)] == needed, (offset, max_bytes)
        # a sparse index bounds it by the first indexed batch past the read: 4 KiB of them
        extra = 0 if interval == 0 or max_bytes == 1 << 20 else 30
        assert len(listed) <= len(needed) + 1 + extra, (offset, max_bytes, len(listed))
        if max_bytes < 1 << 20:
            assert len(listed) < 50


def test_a_long_open_transaction_is_listed_for_a_read_of_its_start(tmp_path: Path) -> None:
    """The walk over the index stops at the first entry whose LSO is past the read, and not
    before: a transaction open while a hundred others were aborted, then aborted itself, is
    the index's last entry and the first batch's."""
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(data(0, pid=1), 0)  # 0: producer 1 opens
    for i in range(100):  # 1 + 2i, 2 + 2i
        log.append_as_leader(data(0, pid=100 + i), 0)
        log.append_as_leader(marker(commit=False, pid=100 + i), 0, COORDINATOR)
    log.append_as_leader(marker(commit=False, pid=1), 0, COORDINATOR)  # 201
    end = log.log_end_offset
    first = len(sliced(log, 0, 1))  # the first batch only
    listed = log.aborted_in_read(0, first, end)
    assert listed[0].producer_id == 100 and len(listed) < 50  # 100's batch follows, at 1
    assert listed[-1] == AbortedTxn(1, 0, 201, 202)


def test_an_entry_replayed_after_its_file_was_loaded_is_kept_once(tmp_path: Path) -> None:
    """Recovery replays markers the loaded files may hold already: each is indexed once, in
    marker order, and a later marker is appended as it comes."""
    index = TxnIndexes(tmp_path)
    first, second, third = (AbortedTxn(1, 0, 2, 3), AbortedTxn(2, 3, 5, 6),
                            AbortedTxn(3, 6, 8, 9))
    index.append(0, first)
    index.append(0, second)
    reloaded = TxnIndexes(tmp_path)
    reloaded.load([0], lambda: iter(()))
    for txn in (first, second, third, second):
        reloaded.append(0, txn)
    assert reloaded.entries() == {0: [first, second, third]}
    assert (tmp_path / f"{0:020d}.txnindex").read_bytes() == b"".join(
        struct.pack(">hqqqq", 0, *t) for t in (first, second, third))
    # one the file missed, replayed after a later one: put in its place, file and all (a
    # read's walk stops at the first entry past the read)
    index = TxnIndexes(tmp_path / "other")
    (tmp_path / "other").mkdir()
    index.append(0, first)
    index.append(0, third)
    index.append(0, second)
    assert index.entries() == {0: [first, second, third]}
    again = TxnIndexes(tmp_path / "other")
    again.load([0], lambda: iter(()))
    assert again.entries() == {0: [first, second, third]}


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
    raw = index.read_bytes()
    for damage in (raw[:-1], b"\x00\x07" + raw[2:], raw + raw,  # torn, a version, no order
                   struct.pack(">hqqqq", 0, 1, 5, 3, 4)):  # begun after its marker
        index.write_bytes(damage)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="replication.txn_index"):
            reopened = Log.open(tmp_path / "t-0", clock=ManualClock(10_000))
        assert reopened.txn_index_entries() == expected
        assert [r.levelname for r in caplog.records] == ["WARNING"]
        assert "rebuilding" in caplog.text
        reopened.close()



def test_tiered_copies_stop_below_the_lso(tmp_path: Path) -> None:
    """The remote log manager copies a rolled segment only once all of it lies below the LSO:
    a segment holding an undecided transaction stays local until its marker is committed."""
    clock = ManualClock(10_000)
    log = tiered_log(tmp_path, clock)
    log.assign_leader_epoch(0)
    log.append_as_leader(data(0, pid=1, transactional=False), 0)  # 0
    log.roll()
    log.append_as_leader(data(0, pid=2), 0)  # 1: open
    log.roll()
    log.append_as_leader(data(1, pid=1, transactional=False), 0)  # 2
    log.roll()
    rlm = manager(tmp_path, clock)
    assert rlm.copy_log_segments(leader(log)) == 1  # the HW is 3, the LSO 1
    assert finished(rlm) == [(0, 0)]
    log.append_as_leader(marker(commit=True, pid=2), 0, COORDINATOR)  # 3
    log.roll()
    assert rlm.copy_log_segments(leader(log)) == 3
    assert finished(rlm) == [(0, 0), (1, 1), (2, 2), (3, 3)]
