"""Bytes-aware planning: the count-balance bytes bound, the fewest bytes moved under Balance,
and the disk goal (bytes per broker even within a count slack), on generated sized clusters."""

from __future__ import annotations

import pytest

from rebalancer.engines import plan_reassignment
from rebalancer.planner import Balance, BalanceDisk, PlanningError
from rebalancer.scenarios import Scenario, generate
from rebalancer.scoring import lower_bounds, score_plan
from tests.rebalancer.conftest import make_snapshot

# M-like (skewed random placement, a few rack violations) and L-like (new brokers), small
# enough for CI
SIZED = {
    "m-like": Scenario(brokers=30, racks=6, topics=120, total_partitions=4000, rf=3,
                       placement="random", zipf_s=0.5, rack_violation_frac=0.01, seed=21),
    "l-like": Scenario(brokers=40, new_brokers=5, racks=5, topics=200, total_partitions=5000,
                       rf=3, placement="roundrobin", seed=22),
    "decom": Scenario(brokers=20, racks=4, topics=60, total_partitions=3000, rf=3,
                      placement="random", zipf_s=0.3, decommission=2, seed=23),
}


@pytest.fixture(scope="module")
def sized():
    return {name: generate(s) for name, s in SIZED.items()}


def test_count_balance_bytes_bound_is_the_smallest_excess_replicas():
    # broker 1 holds 4 replicas, 2 and 3 one each, broker 4 none: 6 replicas, shares 2 each
    # (the larger shares to the fullest); broker 1 sheds its 2 smallest (5 + 7)
    parts = [("t", 0, [1, 2]), ("t", 1, [1, 3]), ("t", 2, [1]), ("t", 3, [1])]
    sizes = {("t", 0): 100, ("t", 1): 7, ("t", 2): 5, ("t", 3): 50}
    snap = make_snapshot({1: None, 2: None, 3: None, 4: None}, parts, sizes=sizes)
    lb = lower_bounds(snap)
    assert lb.replicas_moved_count == 2
    assert lb.bytes_moved_count_balance == 12
    plan = plan_reassignment(snap, engine="local")
    assert score_plan(snap, plan).bytes_moved == 12


def test_disk_bound_names_what_sizes_and_racks_force():
    # racks a:3 b:2 c:1 and RF 3: rack c's one broker holds a replica of every partition
    racks = {1: "a", 2: "b", 3: "c", 4: "a", 5: "b", 6: "a"}
    parts = [("t", i, [1 + i % 2 * 3, 2, 3]) for i in range(6)]
    snap = make_snapshot(racks, parts, sizes={("t", i): 10 for i in range(6)})
    assert lower_bounds(snap).bytes_max_over_mean == 2.0  # 60 bytes vs a mean of 30
    # one partition larger than the mean share: max/mean is at least its size over the mean
    parts = [("t", i, [1 + i % 6, 1 + (i + 1) % 6]) for i in range(6)]
    sizes = {("t", i): 10 for i in range(6)} | {("t", 0): 100}
    snap = make_snapshot({b: None for b in range(1, 7)}, parts, sizes=sizes)
    lb = lower_bounds(snap).bytes_max_over_mean
    assert lb == round(100 / (2 * 150 / 6), 4)
    s = score_plan(snap, plan_reassignment(snap, [BalanceDisk()], engine="local"))
    # two replicas per broker and no slack at that count: the best is 100 + 10 on a broker
    assert lb <= s.bytes_per_broker.max_over_mean == 2.2


@pytest.mark.parametrize("shard_size", [100_000, 1_200])
@pytest.mark.parametrize("name", sorted(SIZED))
def test_balance_moves_few_bytes_and_reaches_the_count_bounds(sized, name, shard_size):
    snap = sized[name]
    plan = plan_reassignment(snap, engine="local", shard_size=shard_size)
    s, lb = score_plan(snap, plan), lower_bounds(snap)
    assert s.valid and s.rf_changes == 0 and s.rack_violations == 0
    assert s.replicas_per_broker.spread <= max(1, lb.best_replica_spread)
    assert s.leaders_per_broker.spread <= max(1, lb.leader_spread)
    assert s.replicas_moved <= 1.05 * lb.best_replicas_moved
    assert lb.bytes_moved_count_balance and s.bytes_moved is not None
    assert s.bytes_moved <= 1.2 * lb.bytes_moved_count_balance, (
        s.bytes_moved / lb.bytes_moved_count_balance)


@pytest.mark.parametrize("name", sorted(SIZED))
def test_disk_goal_reaches_max_over_mean_within_count_slack(sized, name):
    snap = sized[name]
    before = score_plan(snap)
    plan = plan_reassignment(snap, [BalanceDisk()], engine="local", shard_size=2_000)
    s, lb = score_plan(snap, plan), lower_bounds(snap)
    assert s.valid and s.rf_changes == 0 and s.rack_violations == 0
    assert lb.bytes_max_over_mean is not None and lb.bytes_max_over_mean <= 1.05
    assert s.bytes_per_broker.max_over_mean <= 1.05 < before.bytes_per_broker.max_over_mean
    # counts: within 5% of the count-balanced share (even share rounded up, plus the slack)
    share = lb.total_replicas / lb.active_brokers
    assert s.replicas_per_broker.max <= int(share) + 1 + int(0.05 * (int(share) + 1))
    assert s.replicas_per_broker.min >= int(share) - int(0.05 * (int(share) + 1))
    assert s.leaders_per_broker.spread <= 1


def test_disk_goal_with_no_slack_keeps_counts_exact(sized):
    snap = sized["l-like"]
    plan = plan_reassignment(snap, [BalanceDisk(count_slack=0.0)], engine="local")
    s = score_plan(snap, plan)
    assert s.replicas_per_broker.spread <= 1
    assert s.bytes_per_broker.max_over_mean <= 1.05


def test_disk_goal_without_sizes_is_balance(sized):
    snap = generate(Scenario(brokers=9, new_brokers=3, racks=3, topics=20, partitions=6,
                             sizes=False, seed=5))
    assert plan_reassignment(snap, [BalanceDisk()], engine="local") == \
        plan_reassignment(snap, [Balance()], engine="local")


def test_disk_goal_refuses_a_bad_slack(sized):
    with pytest.raises(PlanningError) as e:
        plan_reassignment(sized["decom"], [BalanceDisk(count_slack=1.5)], engine="local")
    assert list(e.value.problems) == ["disk goal: count slack must be in [0, 1), got 1.5"]
