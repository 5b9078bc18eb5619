"""Log compaction of transactional data, as Kafka 3.9's cleaner does it: an aborted
transaction's records never supersede a committed value and are removed, markers stay, and
nothing from the first unstable offset (an undecided transaction) on is cleaned."""

from __future__ import annotations

from pathlib import Path

from coordinator.clock import ManualClock
from replication.cleaner import OffsetMap, clean_log
from replication.log import Log
from replication.records import Record, encode_batch
from replication.txn_index import AbortedTxn

from .test_cleaner import open_log, read_all
from .test_txn_data_markers import COORDINATOR, marker


def keyed(key: bytes, value: bytes, *, pid: int, seq: int, clock: ManualClock) -> bytes:
    return encode_batch([Record(key=key, value=value, timestamp=clock.now_ms())],
                        producer_id=pid, producer_epoch=0, base_sequence=seq, transactional=True)


def clean(log: Log, clock: ManualClock) -> object:
    return clean_log(log, first_dirty=0, high_watermark=log.log_end_offset,
                     offset_map=OffsetMap(10_000), now_ms=clock.now_ms())


def values(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(offset, key, value) for offset, key, value, _base in read_all(log)]


def test_aborted_records_are_dropped_and_never_supersede_committed_ones(tmp_path: Path) -> None:
    clock = ManualClock(10_000)
    log = open_log(tmp_path, clock)
    log.assign_leader_epoch(0)
    log.append_as_leader(keyed(b"k", b"committed", pid=1, seq=0, clock=clock), 0)  # 0
    log.append_as_leader(marker(commit=True, pid=1), 0, COORDINATOR)  # 1
    log.append_as_leader(keyed(b"k", b"aborted", pid=2, seq=0, clock=clock), 0)  # 2
    log.append_as_leader(keyed(b"j", b"aborted", pid=2, seq=1, clock=clock), 0)  # 3
    log.append_as_leader(marker(commit=False, pid=2), 0, COORDINATOR)  # 4
    log.roll()
    assert clean(log, clock) is not None
    kept = values(log)
    assert (0, b"k", b"committed") in kept  # the aborted k at 2 did not win
    assert all(value != b"aborted" for _o, _k, value in kept)
    assert [o for o, _k, _v in kept if o in (1, 4)] == [1, 4]  # the markers stay
    reopened_state = log.producer_entries()
    assert set(reopened_state) == {1, 2}


def test_nothing_from_an_open_transaction_on_is_cleaned(tmp_path: Path) -> None:
    clock = ManualClock(10_000)
    log = open_log(tmp_path, clock)
    log.assign_leader_epoch(0)
    plain = [Record(key=b"k", value=b"v%d" % i, timestamp=clock.now_ms()) for i in range(2)]
    log.append_as_leader(encode_batch(plain[:1]), 0)  # 0
    log.append_as_leader(keyed(b"x", b"open", pid=3, seq=0, clock=clock), 0)  # 1: undecided
    log.append_as_leader(encode_batch(plain[1:]), 0)  # 2: supersedes 0, past the unstable offset
    log.roll()
    clean(log, clock)
    assert [o for o, _k, _v in values(log)] == [0, 1, 2]  # 0 stays: 2 is not cleanable yet
    log.append_as_leader(marker(commit=True, pid=3), 0, COORDINATOR)  # 3
    log.roll()
    clean(log, clock)
    assert [o for o, _k, _v in values(log)] == [1, 2, 3]


def test_a_marker_goes_after_the_delete_horizon_once_its_transaction_is_empty(
        tmp_path: Path) -> None:
    clock = ManualClock(10_000)
    log = open_log(tmp_path, clock)  # delete.retention.ms 10 s
    log.assign_leader_epoch(0)
    log.append_as_leader(keyed(b"k", b"v1", pid=1, seq=0, clock=clock), 0)  # 0
    log.append_as_leader(marker(commit=True, pid=1), 0, COORDINATOR)  # 1
    log.append_as_leader(keyed(b"j", b"aborted", pid=2, seq=0, clock=clock), 0)  # 2
    log.append_as_leader(marker(commit=False, pid=2), 0, COORDINATOR)  # 3
    log.append_as_leader(keyed(b"k", b"v2", pid=1, seq=1, clock=clock), 0)  # 4
    log.append_as_leader(marker(commit=True, pid=1), 0, COORDINATOR)  # 5
    log.append_as_leader(encode_batch([Record(key=b"z", value=b"plain",
                                              timestamp=clock.now_ms())]), 0)  # 6
    log.roll()
    clean(log, clock)  # 0 is superseded by 4, 2 aborted: both go; their markers are read
    assert [o for o, _k, _v in values(log)] == [1, 3, 4, 5, 6]
    clean(log, clock)  # markers 1 and 3 now end empty transactions: stamped, kept
    assert [o for o, _k, _v in values(log)] == [1, 3, 4, 5, 6]
    assert log.delete_horizon_due(clock.now_ms() + 10_000)
    clock.advance(10_001)
    clean(log, clock)
    # 1 goes; 5 still ends 4's transaction; 3 stays while producer 2's aborted batch is kept
    # as an empty header (its producer's last batch), as Kafka keeps it
    assert [o for o, _k, _v in values(log)] == [3, 4, 5, 6]
    reopened_entries = log.producer_entries()
    assert reopened_entries[1].current_txn_first_offset == -1


def test_the_cleaned_index_forgets_a_transaction_the_cleaner_emptied(tmp_path: Path) -> None:
    """Kafka's cleaned ``.txnindex`` holds an aborted transaction while its marker stays
    because a batch of it was read; the pass after the one that dropped its records finds
    none and writes the cleaned segment without its entry (the marker, stamped with its
    delete horizon, stays until then). A transaction not reached by the clean keeps its."""
    clock = ManualClock(10_000)
    log = open_log(tmp_path, clock)
    log.assign_leader_epoch(0)
    log.append_as_leader(keyed(b"j", b"aborted", pid=2, seq=0, clock=clock), 0)  # 0
    log.append_as_leader(marker(commit=False, pid=2), 0, COORDINATOR)  # 1
    log.append_as_leader(keyed(b"k", b"v", pid=2, seq=1, clock=clock), 0)  # 2: pid 2's last
    log.append_as_leader(marker(commit=True, pid=2), 0, COORDINATOR)  # 3
    log.roll()
    log.append_as_leader(keyed(b"x", b"late", pid=5, seq=0, clock=clock), 0)  # 4
    log.append_as_leader(marker(commit=False, pid=5), 0, COORDINATOR)  # 5: the active segment
    emptied, untouched = AbortedTxn(2, 0, 1, 2), AbortedTxn(5, 4, 5, 6)
    assert sorted(t for ts in log.txn_index_entries().values() for t in ts) == [
        emptied, untouched]
    clean(log, clock)  # 0 dropped, read: marker 1 and its entry stay
    assert [o for o, _k, _v in values(log)] == [1, 2, 3, 4, 5]
    assert log.txn_index_entries()[0] == [emptied]
    clean(log, clock)  # nothing of the transaction left: stamped marker, no entry
    assert [o for o, _k, _v in values(log)] == [1, 2, 3, 4, 5]
    assert 0 not in log.txn_index_entries()
    assert log.aborted_transactions(0, 6) == [untouched]
    directory = log.directory
    log.close()
    reopened = Log.open(directory)
    try:
        assert reopened.txn_index_entries() == {4: [untouched]}
    finally:
        reopened.close()
