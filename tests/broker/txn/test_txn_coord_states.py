"""The transaction states and their legal transitions (Kafka's ``validPreviousStates``),
checked over every (from, to) pair, and the pure epoch rules of InitProducerId and fencing."""

from __future__ import annotations

import itertools

import pytest
from kio.schema.errors import ErrorCode

from broker.txns.metadata import (
    VALID_PREVIOUS,
    IllegalTransition,
    TxnMetadata,
    TxnState,
    legal,
)

S = TxnState
LEGAL = {
    (S.EMPTY, S.EMPTY), (S.COMPLETE_COMMIT, S.EMPTY), (S.COMPLETE_ABORT, S.EMPTY),
    (S.ONGOING, S.ONGOING), (S.EMPTY, S.ONGOING), (S.COMPLETE_COMMIT, S.ONGOING),
    (S.COMPLETE_ABORT, S.ONGOING),
    (S.ONGOING, S.PREPARE_COMMIT),
    (S.ONGOING, S.PREPARE_ABORT), (S.PREPARE_EPOCH_FENCE, S.PREPARE_ABORT),
    (S.PREPARE_COMMIT, S.COMPLETE_COMMIT),
    (S.PREPARE_ABORT, S.COMPLETE_ABORT),
    (S.EMPTY, S.DEAD), (S.COMPLETE_ABORT, S.DEAD), (S.COMPLETE_COMMIT, S.DEAD),
    (S.ONGOING, S.PREPARE_EPOCH_FENCE),
}


@pytest.mark.parametrize(("old", "new"), list(itertools.product(S, S)))
def test_every_pair_against_kafkas_table(old: TxnState, new: TxnState) -> None:
    assert legal(old, new) == ((old, new) in LEGAL)


def test_the_ids_and_names_are_kafkas() -> None:
    assert [(s.value, s.label) for s in S] == [
        (0, "Empty"), (1, "Ongoing"), (2, "PrepareCommit"), (3, "PrepareAbort"),
        (4, "CompleteCommit"), (5, "CompleteAbort"), (6, "Dead"), (7, "PrepareEpochFence")]
    assert set(VALID_PREVIOUS) == set(S)
    assert S.by_label("Ongoing") is S.ONGOING and S.by_label("ongoing") is None


def txn(state: TxnState = S.EMPTY, epoch: int = 0, last_epoch: int = -1) -> TxnMetadata:
    return TxnMetadata("t", producer_id=10, producer_epoch=epoch, last_producer_epoch=last_epoch,
                       timeout_ms=1000, state=state, last_update_ms=1,
                       partitions={("a", 0)} if state is not S.EMPTY else set())


def test_a_refused_transition_changes_nothing() -> None:
    t = txn(S.EMPTY)
    with pytest.raises(IllegalTransition):
        t.prepare_end(S.PREPARE_COMMIT, 5)
    assert t.pending is None and t.state is S.EMPTY


def test_a_second_transition_waits_for_the_first() -> None:
    t = txn(S.ONGOING)
    t.prepare_end(S.PREPARE_COMMIT, 5)
    with pytest.raises(IllegalTransition, match="pending"):
        t.prepare_add_partitions(frozenset({("b", 0)}), 6)


def test_a_transaction_runs_through_its_states() -> None:
    t = txn(S.EMPTY)
    t.complete(t.prepare_add_partitions(frozenset({("a", 0), ("a", 1)}), 100))
    assert t.state is S.ONGOING and t.start_ms == 100 and len(t.partitions) == 2
    t.complete(t.prepare_end(S.PREPARE_COMMIT, 200))
    t.remove_partition(("a", 0))
    complete = t.prepare_complete(300)
    t.complete(complete)
    assert t.state is S.COMPLETE_COMMIT and not t.partitions and t.last_update_ms == 300


def test_a_completion_that_is_not_the_pending_one_is_refused() -> None:
    t = txn(S.ONGOING)
    other = txn(S.ONGOING).prepare_end(S.PREPARE_ABORT, 5)
    t.prepare_end(S.PREPARE_COMMIT, 5)
    with pytest.raises(IllegalTransition):
        t.complete(other)
    assert t.state is S.ONGOING


def test_init_bumps_the_epoch_and_kip_360_retries_get_the_same_answer() -> None:
    t = txn(S.COMPLETE_COMMIT, epoch=4)
    bumped = t.prepare_increment_epoch(1000, None, 10)
    assert not isinstance(bumped, ErrorCode)
    assert (bumped.producer_epoch, bumped.last_producer_epoch) == (5, -1)
    t.abandon()
    recovering = t.prepare_increment_epoch(1000, 4, 10)  # the producer passes its epoch
    assert not isinstance(recovering, ErrorCode)
    t.complete(recovering)
    assert (t.producer_epoch, t.last_producer_epoch) == (5, 4)
    retry = t.prepare_increment_epoch(1000, 4, 11)  # its answer was lost: same epoch again
    assert not isinstance(retry, ErrorCode) and retry.producer_epoch == 5
    t.abandon()
    assert t.prepare_increment_epoch(1000, 2, 12) is ErrorCode.producer_fenced
    assert t.pending is None


def test_fencing_bumps_once_even_after_a_failed_write() -> None:
    t = txn(S.ONGOING, epoch=7)
    assert t.prepare_fence_epoch().producer_epoch == 8
    t.abandon()
    t.failed_epoch_fence = True
    assert t.prepare_fence_epoch().producer_epoch == 7


def test_rotation_gives_a_new_producer_id_at_epoch_0() -> None:
    t = txn(S.COMPLETE_ABORT, epoch=32766)
    transit = t.prepare_rotation(99, 1000, 5, record_last_epoch=True)
    t.complete(transit)
    assert (t.producer_id, t.producer_epoch, t.last_producer_epoch) == (99, 0, 32766)
