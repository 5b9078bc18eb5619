"""The local and Spark engines run the same kernel and must give the same plan."""

from __future__ import annotations

import zlib

import pytest

from rebalancer.engines import AUTO_SPARK_PARTITIONS, choose_engine, plan_reassignment
from rebalancer.engines.common import build_cluster, snapshot_rows
from rebalancer.engines.local import plan_rows_local
from rebalancer.planner import (
    BalanceDisk,
    ChangeReplicationFactor,
    Decommission,
    RepairRacks,
    ShardResult,
    shard_of,
)
from rebalancer.planner.merge import merge_results, shards_to_repair
from rebalancer.planner.quotas import shard_quotas
from rebalancer.planner.solve import shard_stats, solve_shard


def test_shard_of_is_crc32_of_topic_nul_partition():
    assert shard_of("t0001", 7, 13) == zlib.crc32(b"t0001\x007") % 13
    assert shard_of("anything", 3, 1) == 0


def test_auto_engine_threshold():
    assert choose_engine(AUTO_SPARK_PARTITIONS - 1) == "local"
    assert choose_engine(AUTO_SPARK_PARTITIONS) == "spark"


def test_shard_quotas_add_up_to_global_quotas(generated):
    snap = generated["skewed"]
    cluster = build_cluster(snap, shard_size=200)
    rows = snapshot_rows(snap)
    groups: dict[int, list] = {}
    for r in rows:
        groups.setdefault(shard_of(r[0], r[1], cluster.n_shards), []).append(r)
    stats = [shard_stats(s, sorted(g), cluster) for s, g in sorted(groups.items())]
    quotas = shard_quotas(stats, cluster)
    assert len(quotas) == cluster.n_shards > 1
    for st, q in zip(stats, quotas, strict=True):
        assert sum(q.replicas.values()) == st.replicas
        assert sum(q.leaders.values()) == st.partitions
    totals = {b: sum(q.replicas[b] for q in quotas) for b in cluster.active}
    assert max(totals.values()) - min(totals.values()) <= 1
    results = [solve_shard(sorted(groups[q.shard]), cluster, q) for q in quotas]
    assert all(r.exact for r in results)


def test_merge_resolves_shards_with_residuals_together(generated):
    snap = generated["decom"]
    cluster = build_cluster(snap, shard_size=400)
    rows = snapshot_rows(snap)
    groups: dict[int, list] = {}
    for r in rows:
        groups.setdefault(shard_of(r[0], r[1], cluster.n_shards), []).append(r)
    stats = [shard_stats(s, sorted(g), cluster) for s, g in sorted(groups.items())]
    quotas = shard_quotas(stats, cluster)
    results = [solve_shard(sorted(groups[q.shard]), cluster, q) for q in quotas]
    # pretend shard 0 missed its quota: it is re-solved together with its neighbour
    fake = [ShardResult(shard=r.shard, changed=r.changed, replica_residual={1: 1} if
                        r.shard == 0 else {}, leader_residual={}) for r in results]
    assert shards_to_repair(fake) == [0, 1]
    fetched = []

    def fetch(shards):
        fetched.append(list(shards))
        return [r for s in shards for r in groups[s]]

    merged = merge_results(fake, quotas, cluster, fetch)
    assert fetched == [[0, 1]]
    untouched = sorted(row for r in results if r.shard > 1 for row in r.changed)
    assert sorted(r for r in merged if shard_of(r[0], r[1], cluster.n_shards) > 1) == untouched
    after = {(r[0], r[1]): r[2] for r in rows} | {(r[0], r[1]): r[2] for r in merged}
    counts = dict.fromkeys(cluster.active, 0)
    for reps in after.values():
        for b in reps:
            counts[b] += 1
    assert max(counts.values()) - min(counts.values()) <= 1


CASES = [
    ("small-even", (), 40),
    ("skewed", (), 300),
    ("decom", (Decommission(brokers=frozenset({3})),), 500),
    ("uneven-racks", (), 150),
    ("skewed", (RepairRacks(),), 400),
    ("small-even", (ChangeReplicationFactor.of({"t0001": 2, "t0002": 1}),), 60),
    ("skewed", (BalanceDisk(),), 300),
    ("decom", (BalanceDisk(count_slack=0.1),), 500),
]


@pytest.mark.spark
@pytest.mark.parametrize(("name", "goals", "shard_size"), CASES)
def test_spark_and_local_give_the_same_plan(spark, generated, name, goals, shard_size):
    snap = generated[name]
    local = plan_reassignment(snap, goals, engine="local", seed=7, shard_size=shard_size)
    remote = plan_reassignment(snap, goals, engine="spark", spark=spark, seed=7,
                               shard_size=shard_size)
    assert build_cluster(snap, shard_size=shard_size).n_shards > 1
    assert remote == local
    assert local.partitions


@pytest.mark.spark
def test_spark_computes_the_same_shards_as_the_kernel(spark):
    from rebalancer.engines.spark import partitions_frame

    rows = [(f"topic-{i % 7}", i, (1, 2), -1) for i in range(200)]
    df = partitions_frame(spark, rows, 9)
    got = {(r["topic"], r["partition"]): r["shard"] for r in df.collect()}
    assert got == {(t, n): shard_of(t, n, 9) for t, n, _, _ in rows}


@pytest.mark.spark
def test_spark_engine_runs_one_task_per_shard_group(spark, generated):
    """The solve is a groupBy(shard).applyInPandas: executors see only their shard's rows."""
    from rebalancer.engines.spark import plan_rows_spark

    snap = generated["skewed"]
    cluster = build_cluster(snap, shard_size=300)
    assert plan_rows_spark(spark, snapshot_rows(snap), cluster) == plan_rows_local(
        snapshot_rows(snap), cluster)
