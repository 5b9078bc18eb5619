"""Planner goals and constraints on small hand-made clusters (local engine)."""

from __future__ import annotations

from collections import Counter

import pytest

from rebalancer.engines import plan_reassignment
from rebalancer.planner import (
    AddBrokers,
    Balance,
    BalanceDisk,
    ChangeReplicationFactor,
    Decommission,
    PlanningError,
    RepairRacks,
)
from rebalancer.scoring import lower_bounds, score_plan
from tests.rebalancer.conftest import make_snapshot

SIX = {1: "a", 2: "b", 3: "c", 4: "a", 5: "b", 6: "c"}


def roundrobin(brokers, topics=4, parts=6, rf=3, start=0):
    out = []
    for t in range(topics):
        for p in range(parts):
            i = start + t + p
            out.append((f"t{t}", p, [brokers[(i + k) % len(brokers)] for k in range(rf)]))
    return out


def counts(snap, plan):
    new = plan.assignment(snap)
    rep, lead = Counter(), Counter()
    for reps in new.values():
        rep.update(reps)
        lead[reps[0]] += 1
    return new, rep, lead


def assert_hard_constraints(snap, plan, *, leaving=frozenset(), rf=None):
    racks = snap.rack_of
    n_racks = len({racks[b] for b in snap.broker_ids if b not in leaving | snap.decommission})
    new = plan.assignment(snap)
    for p in snap.partitions:
        reps = new[p.key]
        assert len(set(reps)) == len(reps), p.key
        assert not set(reps) & (leaving | snap.decommission), p.key
        want = (rf or {}).get(p.topic, len(p.replicas))
        assert len(reps) == want, p.key
        if all(r is not None for r in racks.values()):
            assert len({racks[b] for b in reps}) >= min(want, n_racks), p.key


def test_balance_on_balanced_cluster_moves_nothing():
    snap = make_snapshot(SIX, roundrobin([1, 2, 3, 4, 5, 6]))
    assert plan_reassignment(snap, engine="local").partitions == ()


def test_add_brokers_spreads_replicas_and_leaders_with_minimal_moves():
    racks = {**SIX, 7: "a", 8: "b", 9: "c"}
    snap = make_snapshot(racks, roundrobin([1, 2, 3, 4, 5, 6], topics=6), new={7, 8, 9})
    plan = plan_reassignment(snap, [AddBrokers()], engine="local")
    assert_hard_constraints(snap, plan)
    _, rep, lead = counts(snap, plan)
    assert set(rep.values()) == {12}  # 108 replicas over 9 brokers
    assert max(lead.values()) - min(lead.values()) <= 1 and len(lead) == 9
    assert score_plan(snap, plan).replicas_moved == 36  # exactly the new brokers' share


def test_decommission_drains_brokers_and_stays_rack_aware():
    snap = make_snapshot(SIX, roundrobin([1, 2, 3, 4, 5, 6], topics=5))
    plan = plan_reassignment(snap, [Decommission(brokers=frozenset({4}))], engine="local")
    assert_hard_constraints(snap, plan, leaving=frozenset({4}))
    _, rep, lead = counts(snap, plan)
    assert 4 not in rep
    # rack a keeps one broker, so it holds one replica of every partition: 30 on broker 1
    assert rep[1] == 30 and {rep[b] for b in (2, 3, 5, 6)} == {15}
    assert max(lead.values()) - min(lead.values()) <= 1
    assert score_plan(snap, plan).replicas_moved == 15


def test_snapshot_decommission_list_is_a_hard_constraint_even_for_repair_only():
    snap = make_snapshot(SIX, roundrobin([1, 2, 3, 4, 5, 6]), decommission={6})
    plan = plan_reassignment(snap, [RepairRacks()], engine="local")
    assert_hard_constraints(snap, plan)


def test_uneven_racks_reach_the_rack_aware_bound():
    racks = {1: "a", 2: "b", 3: "c", 4: "a", 5: "b", 6: "a"}  # a:3 b:2 c:1
    snap = make_snapshot(racks, roundrobin([1, 2, 3, 4, 5, 6], topics=4))
    plan = plan_reassignment(snap, engine="local")
    assert_hard_constraints(snap, plan)
    _, rep, _ = counts(snap, plan)
    # RF 3 over 3 racks: every rack holds one replica of each of the 24 partitions
    assert rep[3] == 24 and {rep[2], rep[5]} == {12} and {rep[1], rep[4], rep[6]} == {8}


def test_rack_repair_fixes_violations_with_one_move_each():
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    parts = [("t", 0, [1, 2, 3]), ("t", 1, [3, 4, 5]), ("t", 2, [5, 1, 3]), ("t", 3, [6, 5, 4])]
    snap = make_snapshot(racks, parts)
    assert score_plan(snap).rack_violations == 3
    plan = plan_reassignment(snap, [RepairRacks()], engine="local")
    s = score_plan(snap, plan)
    assert s.rack_violations == 0 and s.replicas_moved == 3
    assert_hard_constraints(snap, plan)
    new = plan.assignment(snap)
    assert new[("t", 2)] == (5, 1, 3)  # untouched
    assert new[("t", 0)][0] == 1  # leaders stay where they can


def test_rack_repair_inside_a_balance():
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    snap = make_snapshot(racks, [("t", i, [1 + i % 6, 1 + (i + 1) % 6, 1 + (i + 2) % 6])
                                 for i in range(12)])
    plan = plan_reassignment(snap, [Balance()], engine="local")
    assert score_plan(snap, plan).rack_violations == 0
    _, rep, lead = counts(snap, plan)
    assert set(rep.values()) == {6} and set(lead.values()) == {2}


def test_replication_factor_up_and_down():
    snap = make_snapshot(SIX, roundrobin([1, 2, 3, 4, 5, 6], topics=2, rf=2))
    up = plan_reassignment(snap, [ChangeReplicationFactor.of({"t0": 3})], engine="local")
    assert_hard_constraints(snap, up, rf={"t0": 3})
    new = up.assignment(snap)
    for p in snap.partitions:
        assert new[p.key][: len(p.replicas)] == p.replicas or p.topic == "t1"
    assert {len(new[("t1", i)]) for i in range(6)} == {2}
    _, rep, _ = counts(snap, up)
    assert max(rep.values()) - min(rep.values()) <= 1

    down = plan_reassignment(snap, [ChangeReplicationFactor.of({"t1": 1})], engine="local")
    assert_hard_constraints(snap, down, rf={"t1": 1})
    new = down.assignment(snap)
    assert all(new[("t1", i)][0] == snap.partitions[6 + i].replicas[0] for i in range(6))


def test_rf_change_with_balance_is_balanced():
    snap = make_snapshot(SIX, roundrobin([1, 2, 3, 4, 5, 6], topics=3, rf=2))
    plan = plan_reassignment(snap, [ChangeReplicationFactor.of({"t0": 3, "t2": 3}), Balance()],
                             engine="local")
    assert_hard_constraints(snap, plan, rf={"t0": 3, "t2": 3})
    _, rep, lead = counts(snap, plan)
    assert max(rep.values()) - min(rep.values()) <= 1
    assert max(lead.values()) - min(lead.values()) <= 1


def test_no_racks_means_no_rack_constraint():
    snap = make_snapshot({b: None for b in range(1, 6)}, roundrobin([1, 2, 3], topics=5),
                         new={4, 5})
    plan = plan_reassignment(snap, engine="local")
    assert_hard_constraints(snap, plan)
    _, rep, _ = counts(snap, plan)
    assert set(rep.values()) == {18}


def _two_size_cluster():
    racks = {**SIX, 7: "a", 8: "b", 9: "c"}
    parts = roundrobin([1, 2, 3, 4, 5, 6], topics=10, parts=12)
    sizes = {(t, n): (1000 if t in ("t0", "t1") else 10) for t, n, _ in parts}
    return make_snapshot(racks, parts, sizes=sizes, new={7, 8, 9})


def test_balance_with_sizes_moves_the_smallest_replicas():
    snap = _two_size_cluster()
    plan = plan_reassignment(snap, engine="local")
    s, lb = score_plan(snap, plan), lower_bounds(snap)
    assert s.replicas_per_broker.spread == 0 and s.leaders_per_broker.spread <= 1
    assert s.replicas_moved == lb.best_replicas_moved == 120
    # 120 small replicas (10 bytes each) are enough: no partition of t0 or t1 moves
    assert lb.bytes_moved_count_balance == 1200
    assert s.bytes_moved == 1200
    before = {p.key: set(p.replicas) for p in snap.partitions}
    gained = {r.topic for r in plan.partitions if set(r.replicas) - before[(r.topic, r.partition)]}
    assert gained and not gained & {"t0", "t1"}


def test_disk_goal_evens_bytes_per_broker():
    snap = _two_size_cluster()
    plan = plan_reassignment(snap, [BalanceDisk()], engine="local")
    assert_hard_constraints(snap, plan)
    s, lb = score_plan(snap, plan), lower_bounds(snap)
    assert lb.bytes_max_over_mean == 1.0
    assert s.bytes_per_broker is not None and s.bytes_per_broker.max_over_mean <= 1.05
    # counts stay within the 5% slack of their quota of 40 (int(40 * 0.05) = 2)
    assert s.replicas_per_broker.max <= 42 and s.replicas_per_broker.min >= 38
    assert s.leaders_per_broker.spread <= 1


def test_same_input_and_seed_same_plan_and_seed_matters_only_for_ties():
    racks = {**SIX, 7: "a", 8: "b", 9: "c"}
    snap = make_snapshot(racks, roundrobin([1, 2, 3, 4, 5, 6], topics=8), new={7, 8, 9})
    a = plan_reassignment(snap, engine="local", seed=5)
    assert plan_reassignment(snap, engine="local", seed=5) == a
    b = plan_reassignment(snap, engine="local", seed=6)
    assert score_plan(snap, b).replicas_moved == score_plan(snap, a).replicas_moved


def test_sharding_does_not_change_quality():
    racks = {**SIX, 7: "a", 8: "b", 9: "c"}
    snap = make_snapshot(racks, roundrobin([1, 2, 3, 4, 5, 6], topics=20, parts=10),
                         new={7, 8, 9})
    one = score_plan(snap, plan_reassignment(snap, engine="local"))
    many = score_plan(snap, plan_reassignment(snap, engine="local", shard_size=30))
    assert many.replicas_per_broker.spread == one.replicas_per_broker.spread == 1
    assert many.leaders_per_broker.spread <= 1
    assert many.replicas_moved == one.replicas_moved


@pytest.mark.parametrize(("goals", "problems"), [
    ([Decommission(brokers=frozenset({42}))], ["cannot decommission unknown broker 42"]),
    ([AddBrokers(brokers=frozenset({9}))], ["cannot add broker 9: not in the snapshot"]),
    ([ChangeReplicationFactor.of({"zz": 2, "t0": 0})],
     ["topic t0: replication factor must be >= 1, got 0", "topic zz does not exist"]),
    ([ChangeReplicationFactor.of({"t0": 7})],
     ["topic t0: replication factor 7 exceeds the 6 brokers left"]),
    ([Decommission(brokers=frozenset({1, 2, 3, 4}))],
     ["replication factor 3 exceeds the 2 brokers left"]),
])
def test_impossible_goals_are_refused_one_line_per_problem(goals, problems):
    snap = make_snapshot(SIX, roundrobin([1, 2, 3, 4, 5, 6], topics=1))
    with pytest.raises(PlanningError) as e:
        plan_reassignment(snap, goals, engine="local")
    assert list(e.value.problems) == problems


@pytest.mark.parametrize("name", ["small-even", "skewed", "decom", "uneven-racks"])
def test_generated_snapshots_reach_the_lower_bounds(name, generated):
    snap = generated[name]
    plan = plan_reassignment(snap, engine="local", shard_size=500)
    s, lb = score_plan(snap, plan), lower_bounds(snap)
    assert s.valid and s.rf_changes == 0 and s.rack_violations == 0
    assert s.replicas_per_broker.spread <= max(1, lb.best_replica_spread)
    assert s.leaders_per_broker.spread <= 1
    # uneven racks with RF 2 and all the deficit in one rack: holes that cannot reach that rack
    # cost one extra move each (68 moves for a bound of 64 on another draw of this cluster;
    # this one meets its bound); the others meet the 1.05 target
    assert s.replicas_moved <= (1.1 if name == "uneven-racks" else 1.05) * lb.best_replicas_moved
