"""Scores and lower bounds (rebalancer.scoring) on clusters small enough to count by hand."""

from __future__ import annotations

import pytest

from rebalancer.plan import PartitionMove, Plan
from rebalancer.scoring import LowerBounds, lower_bounds, score_plan
from tests.rebalancer.conftest import make_snapshot

RACKS = {1: "a", 2: "b", 3: "a", 4: "b"}
PARTS = [("t0", 0, [1, 3]), ("t1", 0, [1, 2]), ("t2", 0, [1, 4])]
SIZES = {("t0", 0): 8, ("t1", 0): 4, ("t2", 0): 2}


def test_lower_bounds_count_share_and_racks():
    # 6 replicas on 4 brokers: shares 2,2,1,1 with the 2s where most are now (1, then 2);
    # broker 1 holds 3, one above; t0 sits in rack a alone, one move short of two racks.
    lb = lower_bounds(make_snapshot(RACKS, PARTS, sizes=SIZES))
    assert lb == LowerBounds(
        total_replicas=6, partitions=3, active_brokers=4, racks=2,
        target_replicas_per_broker=1.5, replica_spread=1, replica_spread_rackaware=1,
        leader_spread=1, replicas_moved_count=1, replicas_moved_rack=1, replicas_moved=1,
        replicas_moved_rackaware_spread=1, bytes_moved_count_balance=2,
        bytes_moved_disk_balance=3 + 5,  # mean 7: brokers 2 and 4 hold 4 and 2
        bytes_max_over_mean=round(8 / 7, 4))  # t0's 8 bytes on one broker, 28 / 4 the mean
    assert lb.best_replica_spread == 1 and lb.best_replicas_moved == 1


def test_lower_bounds_with_a_broker_leaving_and_uneven_racks():
    # Broker 4 leaves: rack b is broker 2 alone, which can hold one replica of each of the 3
    # partitions; rack a's two brokers share the other 3 as 2 and 1: spread 2 at best, which
    # broker 4's one replica moving reaches. Count balance (2 each) would need 2 moves.
    lb = lower_bounds(make_snapshot(RACKS, PARTS, sizes=SIZES, decommission={4}))
    assert (lb.active_brokers, lb.replica_spread, lb.replica_spread_rackaware) == (3, 0, 2)
    assert (lb.replicas_moved_count, lb.replicas_moved_rack, lb.replicas_moved) == (2, 1, 2)
    assert lb.replicas_moved_rackaware_spread == 1
    assert lb.bytes_moved_count_balance == 2 + 2  # broker 1's smallest, broker 4's only


def test_rack_aware_spread_with_one_broker_in_a_rack():
    # 24 partitions at RF 3 over racks a:3 b:2 c:1: each rack holds one replica of each, so
    # broker 3 holds 24, rack b's 12 each and rack a's 8 each.
    racks = {1: "a", 2: "b", 3: "c", 4: "a", 5: "b", 6: "a"}
    parts = [(f"t{t}", p, [1 + (t + p) % 6, 1 + (t + p + 1) % 6, 1 + (t + p + 2) % 6])
             for t in range(4) for p in range(6)]
    lb = lower_bounds(make_snapshot(racks, parts))
    assert (lb.replica_spread, lb.replica_spread_rackaware, lb.best_replica_spread) == (0, 16, 16)
    assert lb.bytes_moved_count_balance is None


def test_no_racks_no_rack_bounds():
    # 4 replicas on 3 brokers held 2, 2, 0: shares 2, 1, 1, so broker 2 gives one up
    lb = lower_bounds(make_snapshot({1: None, 2: None, 3: None},
                                    [("t", 0, [1, 2]), ("t", 1, [2, 1])]))
    assert lb.racks == 0 and lb.replica_spread_rackaware is None
    assert lb.replicas_moved_rackaware_spread is None and lb.best_replicas_moved == 1


@pytest.mark.parametrize(("entries", "counted"), [
    ((PartitionMove(topic="nope", partition=0, replicas=(2, 4)),), False),
    ((PartitionMove(topic="t0", partition=0, replicas=(2, 3)),
      PartitionMove(topic="t0", partition=0, replicas=(4, 3))), True),
    ((PartitionMove(topic="t0", partition=0, replicas=(3, 3)),), True),
    ((PartitionMove(topic="t0", partition=0, replicas=(9, 3)),), True),
    ((PartitionMove(topic="t0", partition=0, replicas=()),), True),
])
def test_invalid_plans_are_scored_invalid(entries, counted):
    snap = make_snapshot(RACKS, PARTS)
    s = score_plan(snap, Plan(partitions=entries))
    assert not s.valid
    if not counted:  # a partition the snapshot lacks adds nothing to any broker
        assert s.replicas_per_broker == score_plan(snap).replicas_per_broker


def test_leaving_brokers_are_not_counted_and_may_not_keep_replicas():
    snap = make_snapshot(RACKS, PARTS, decommission={4})
    before = score_plan(snap)
    assert not before.valid  # t2 is still on broker 4
    assert (before.replicas_per_broker.max, before.replicas_per_broker.min) == (3, 1)
    after = score_plan(snap, Plan(partitions=(PartitionMove(topic="t2", partition=0,
                                                            replicas=(2, 3)),)))
    assert after.valid and after.leader_changes == 1 and after.replicas_moved == 2
