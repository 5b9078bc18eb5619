"""The scenario generator (rebalancer.scenarios): deterministic snapshots with the knobs asked."""

from __future__ import annotations

import statistics
import subprocess
import sys
from collections import Counter
from dataclasses import replace

import pytest

from rebalancer.scenarios import SCENARIOS, Scenario, generate, scaled
from rebalancer.scoring import score_plan
from rebalancer.snapshot import load_snapshot


def replicas_on(snap, brokers):
    held = Counter(b for p in snap.partitions for b in p.replicas)
    return [held[b] for b in brokers]


def test_same_scenario_same_snapshot_other_seed_other_snapshot():
    s = Scenario(brokers=9, racks=3, topics=20, total_partitions=300, placement="random",
                 zipf_s=0.7, rack_violation_frac=0.1, decommission=2, seed=5)
    assert generate(s) == generate(s)
    assert generate(replace(s, seed=6)) != generate(s)


@pytest.mark.parametrize(("name", "brokers", "new", "racks", "topics", "partitions"), [
    ("S", 8, 2, 3, 50, 600),
    ("M", 60, 0, 6, 400, 20_000),
    pytest.param("L", 330, 30, 10, 2_000, 200_000, marks=pytest.mark.slow),
])
def test_standard_scenarios(name, brokers, new, racks, topics, partitions):
    snap = generate(SCENARIOS[name])
    snap.validate()
    assert len(snap.brokers) == brokers and len(snap.new_brokers) == new
    assert {b.rack for b in snap.brokers} == {f"r{i}" for i in range(racks)}
    assert len({p.topic for p in snap.partitions}) == topics
    assert len(snap.partitions) == partitions
    assert {len(p.replicas) for p in snap.partitions} == {3}
    assert set(replicas_on(snap, sorted(snap.new_brokers))) <= {0}
    assert snap.has_sizes and not snap.decommission


def test_the_five_million_partition_scenario_and_its_scaled_copies():
    xxl = SCENARIOS["XXL"]  # the 5,000,000 partitions on 3,000 brokers
    assert (xxl.brokers + xxl.new_brokers, xxl.total_partitions, xxl.rf) == (3_000, 5_000_000, 3)
    tenth = scaled(xxl, 0.1)  # what the benchmark runs on a shared machine
    assert (tenth.brokers, tenth.new_brokers, tenth.topics, tenth.total_partitions,
            tenth.racks, tenth.seed) == (270, 30, 5_000, 500_000, 30, xxl.seed)
    small = scaled(xxl, 0.005)  # the same shape, small enough to generate here
    snap = generate(small)
    snap.validate()
    assert len(snap.partitions) == 25_000 and len(snap.brokers) == 14 + 2
    assert len(snap.new_brokers) == 2 and len({p.topic for p in snap.partitions}) == 250
    assert {len(p.replicas) for p in snap.partitions} == {3} and snap.has_sizes
    assert score_plan(snap).rack_violations == 0
    assert scaled(Scenario(brokers=4, topics=3, partitions=2, decommission=2), 0.1) == Scenario(
        brokers=3, topics=1, partitions=2, decommission=0)  # never below what it needs
    for factor in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="the scale must be a number above 0"):
            scaled(xxl, factor)


def test_roundrobin_is_balanced_and_rack_aware():
    snap = generate(Scenario(brokers=12, racks=4, topics=30, partitions=24, seed=3))
    s = score_plan(snap)
    assert s.rack_violations == 0
    assert s.replicas_per_broker.spread <= 0.1 * s.replicas_per_broker.mean


def test_rack_violation_fraction():
    for placement in ("roundrobin", "random"):
        base = Scenario(brokers=9, racks=3, topics=10, partitions=100, placement=placement)
        assert score_plan(generate(base)).rack_violations == 0
        broken = score_plan(generate(replace(base, rack_violation_frac=1.0))).rack_violations
        # drawn ignoring racks, 3 of 9 brokers land in 3 racks with probability 27/84
        assert 500 < broken < 850, placement


def test_zipf_skew_makes_hot_brokers():
    even = Scenario(brokers=20, racks=1, topics=10, partitions=200, placement="random", seed=9)
    hot = replace(even, zipf_s=1.5)
    spread = [score_plan(generate(s)).replicas_per_broker for s in (even, hot)]
    assert spread[1].max > 3 * spread[0].max and spread[1].min < spread[0].min


def test_partition_counts_per_topic():
    zipf = generate(Scenario(brokers=3, topics=10, total_partitions=1000, seed=2))
    counts = sorted(Counter(p.topic for p in zipf.partitions).values())
    assert sum(counts) == 1000 and counts[0] >= 1 and counts[-1] > 3 * counts[0]
    uniform = generate(Scenario(brokers=3, topics=7, total_partitions=100,
                                partition_dist="uniform"))
    assert sorted(Counter(p.topic for p in uniform.partitions).values()) == [14] * 5 + [15] * 2


def test_sizes_decommission_and_new_brokers():
    s = Scenario(brokers=10, new_brokers=3, racks=2, topics=200, partitions=5, decommission=3,
                 size_median_gib=1.0, seed=4)
    snap = generate(s)
    assert len(snap.decommission) == 3 and snap.decommission <= set(range(1, 11))
    assert snap.new_brokers == {11, 12, 13}
    assert [b.rack for b in snap.brokers][9:] == ["r1", "r0", "r1", "r0"]
    median = statistics.median(p.size_bytes for p in snap.partitions) / (1 << 30)
    assert 0.5 < median < 2.0
    assert not generate(replace(s, sizes=False)).has_sizes


@pytest.mark.parametrize(("scenario", "problem"), [
    (Scenario(brokers=2, topics=1, partitions=1, rf=3), "rf 3 exceeds the 2 existing brokers"),
    (Scenario(brokers=3, topics=1), "give partitions (per topic) or total_partitions"),
    (Scenario(brokers=3, topics=5, total_partitions=4), "total_partitions must be at least"),
])
def test_impossible_scenarios_are_refused(scenario, problem):
    with pytest.raises(ValueError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        generate(scenario)


@pytest.mark.processes
def test_command_line_writes_a_snapshot(tmp_path):
    out = tmp_path / "s.json"
    subprocess.run([sys.executable, "-m", "rebalancer.scenarios", "S", "--seed", "7",
                    "--partitions", "4", "-o", str(out)], check=True, capture_output=True)
    assert load_snapshot(out) == generate(replace(SCENARIOS["S"], seed=7, partitions=4))
    subprocess.run([sys.executable, "-m", "rebalancer.scenarios", "XXL", "--scale", "0.001",
                    "-o", str(out)], check=True, capture_output=True)
    assert load_snapshot(out) == generate(scaled(SCENARIOS["XXL"], 0.001))
    bad = subprocess.run([sys.executable, "-m", "rebalancer.scenarios", "--topics", "3",
                          "-o", str(out)], capture_output=True, text=True)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
