"""KIP-890 part 1 in one partition's log (:mod:`replication.txn_verification`): a transactional
batch that opens its transaction on the partition needs the guard its verification started, a
marker spends the guard so a stale verification cannot let a late batch into the next
transaction, the lowest sequence seen while verifying holds later ones back, and unverified
guards expire with ``producer.id.expiration.ms``. A log appended without a guard (None: the
broker does not verify) checks nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from coordinator.clock import ManualClock
from replication.errors import InvalidTxnStateError, OutOfOrderSequenceError
from replication.log import Log
from replication.protocol import AppendOrigin
from replication.txn_verification import NO_GUARD

from .test_txn_data_markers import PID, data, marker

COORDINATOR = AppendOrigin.COORDINATOR


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(10_000)


@pytest.fixture
def log(tmp_path: Path, clock: ManualClock) -> Log:
    opened = Log.open(tmp_path / "t-0", clock=clock, producer_id_expiration_ms=60_000)
    opened.assign_leader_epoch(0)
    return opened


def test_a_first_batch_needs_its_guard_and_later_ones_do_not(log: Log) -> None:
    with pytest.raises(InvalidTxnStateError, match="not part of an ongoing transaction"):
        log.append_as_leader(data(0), 0, guard=NO_GUARD)
    assert log.log_end_offset == 0 and log.producer_entry(PID) is None
    guard = log.start_txn_verification(PID, 0, 0)
    assert guard > 0
    assert log.start_txn_verification(PID, 0, 0) == guard  # one verification at a time
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(data(0), 0, guard=guard + 1)  # somebody else's guard
    log.append_as_leader(data(0), 0, guard=guard)
    # the transaction is open here now: nothing to ask, and the guard is spent
    assert log.start_txn_verification(PID, 1, 0) == NO_GUARD
    log.append_as_leader(data(1), 0, guard=NO_GUARD)
    entry = log.producer_entry(PID)
    assert entry is not None and entry.current_txn_first_offset == 0
    assert log.log_end_offset == 2


def test_a_marker_spends_a_guard_so_a_late_batch_stays_out(log: Log) -> None:
    """The hanging transaction KIP-890 closes: a produce verified, then the transaction
    aborted before the batch was appended, then the batch arriving."""
    guard = log.start_txn_verification(PID, 0, 0)
    log.append_as_leader(marker(commit=False), 0, COORDINATOR)
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(data(0), 0, guard=guard)
    assert log.log_end_offset == 1  # the marker only
    assert log.ongoing_transactions() == {}
    # the same producer's next transaction verifies afresh
    again = log.start_txn_verification(PID, 0, 0)
    assert again not in (NO_GUARD, guard)
    log.append_as_leader(data(0), 0, guard=again)
    assert log.ongoing_transactions() == {PID: 1}


def test_after_an_ended_transaction_the_next_batch_needs_verifying_again(log: Log) -> None:
    guard = log.start_txn_verification(PID, 0, 0)
    log.append_as_leader(data(0), 0, guard=guard)
    log.append_as_leader(marker(commit=True), 0, COORDINATOR)
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(data(1), 0, guard=NO_GUARD)
    assert log.log_end_offset == 2


def test_the_lowest_sequence_seen_while_verifying_holds_later_ones_back(log: Log) -> None:
    guard = log.start_txn_verification(PID, 3, 0)
    assert log.start_txn_verification(PID, 0, 0) == guard
    with pytest.raises(OutOfOrderSequenceError, match="earliest seen while verifying"):
        log.append_as_leader(data(3), 0, guard=guard)
    log.append_as_leader(data(0, n=3), 0, guard=guard)
    log.append_as_leader(data(3), 0, guard=NO_GUARD)
    assert log.log_end_offset == 4
    # a new epoch starts the lowest sequence again
    fresh = log.start_txn_verification(PID + 1, 7, 0)
    log.start_txn_verification(PID + 1, 0, 1)
    entry = log._producers.verifications.entry(PID + 1)
    assert entry is not None and (entry.guard, entry.epoch, entry.lowest_sequence) == (fresh, 1, 0)


def test_an_unused_guard_expires(log: Log, clock: ManualClock) -> None:
    guard = log.start_txn_verification(PID, 0, 0)
    clock.advance(59_999)
    log.remove_expired_producers()
    assert log._producers.verifications.verified(PID, guard)
    clock.advance(1)
    log.remove_expired_producers()
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(data(0), 0, guard=guard)


def test_a_transactional_offset_commit_is_checked_as_well(log: Log) -> None:
    """The group coordinator's append (COORDINATOR origin) of a transactional batch."""
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(data(0), 0, COORDINATOR, guard=NO_GUARD)
    guard = log.start_txn_verification(PID, -1, 0)
    log.append_as_leader(data(0), 0, COORDINATOR, guard=guard)
    assert log.ongoing_transactions() == {PID: 0}


def test_without_a_guard_nothing_is_checked(log: Log) -> None:
    """A broker with ``transaction.partition.verification.enable=false``."""
    log.append_as_leader(data(0), 0)
    log.append_as_leader(marker(commit=False), 0, COORDINATOR)
    log.append_as_leader(data(1), 0)
    assert log.ongoing_transactions() == {PID: 2}
