"""The Admin API run (rebalancer.admin_execution.AdminRun) and a broker whose metadata trails the
controller's: a move that left the list of moves in progress while the metadata still shows it
on its way is not called failed after ``settle`` seconds, only after ``trail``. Seen on Kafka
4.x KRaft: a partctl rebalance remove-brokers of 1,000 partitions submitted 50 moves at once,
some of them reorders only, which the controller completes at once; the brokers, applying the
50 changes on two busy cores, showed the old order for over 15 seconds, and the run stopped
with every move after them "not started"."""

from __future__ import annotations

from coordinator.codecs import TopicPartition
from rebalancer.admin_execution import AdminRun

TP = TopicPartition


def started(targets: dict[TopicPartition, tuple[int, ...]],
            current: dict[TopicPartition, tuple[int, ...]]) -> AdminRun:
    run = AdminRun(targets, current, {}, window=10, per_broker=None)
    run.submitted(dict.fromkeys(run.next_batch()))
    assert run.seen({}, now=0.0) == set(targets)  # the controller is done with every one
    return run


def test_a_reorder_shown_in_the_old_order_waits_for_the_metadata() -> None:
    run = started({TP("t", 0): (2, 1)}, {TP("t", 0): (1, 2)})
    run.settle({TP("t", 0): ((1, 2), (1, 2))}, now=20.0, settle=15.0, trail=120.0)
    assert run.failed == {} and TP("t", 0) in run.in_flight and run.stopped is None
    run.settle({TP("t", 0): ((2, 1), (1, 2))}, now=21.0, settle=15.0, trail=120.0)
    assert run.done == [TP("t", 0)] and not run.busy


def test_a_move_shown_beside_the_replicas_it_removes_waits_for_the_metadata() -> None:
    run = started({TP("t", 0): (3, 1)}, {TP("t", 0): (4, 1)})
    run.settle({TP("t", 0): ((3, 1, 4), (1, 4))}, now=20.0, settle=15.0, trail=120.0)
    assert run.failed == {} and TP("t", 0) in run.in_flight
    run.settle({TP("t", 0): ((3, 1), (1, 3))}, now=30.0, settle=15.0, trail=120.0)
    assert run.done == [TP("t", 0)]


def test_the_metadata_is_waited_for_a_bounded_time_only() -> None:
    run = started({TP("t", 0): (2, 1)}, {TP("t", 0): (1, 2)})
    run.settle({TP("t", 0): ((1, 2), (1, 2))}, now=121.0, settle=15.0, trail=120.0)
    assert "dropped before reaching [2, 1]" in run.failed[TP("t", 0)] and run.stopped


def test_a_move_back_where_it_started_is_still_a_cancel_after_settle() -> None:
    # replicas added, then a cancel put them back: not on the way, so settle's bound holds
    run = started({TP("t", 0): (2, 3)}, {TP("t", 0): (1, 2)})
    run.settle({TP("t", 0): ((1, 2), (1, 2))}, now=16.0, settle=15.0, trail=120.0)
    assert "dropped before reaching [2, 3]; it is at [1, 2]" in run.failed[TP("t", 0)].replace(
        " (cancelled, or refused by the controller)", "")
    # elsewhere altogether (another tool moved it): not on the way either
    run = started({TP("t", 0): (2, 3)}, {TP("t", 0): (1, 2)})
    run.settle({TP("t", 0): ((4, 5), (4, 5))}, now=16.0, settle=15.0, trail=120.0)
    assert TP("t", 0) in run.failed
