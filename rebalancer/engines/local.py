"""The in-process engine: the kernel's shards solved one after the other."""

from __future__ import annotations

from collections.abc import Sequence

from rebalancer.planner.merge import merge_results
from rebalancer.planner.model import Cluster, Row, shard_of
from rebalancer.planner.quotas import shard_quotas
from rebalancer.planner.solve import shard_stats, solve_shard


def plan_rows_local(rows: Sequence[Row], cluster: Cluster) -> list[Row]:
    """Changed rows, sorted by (topic, partition)."""
    groups: dict[int, list[Row]] = {}
    for row in rows:
        groups.setdefault(shard_of(row[0], row[1], cluster.n_shards), []).append(row)
    for g in groups.values():
        g.sort(key=lambda r: (r[0], r[1]))
    stats = [shard_stats(s, groups[s], cluster) for s in sorted(groups)]
    quotas = shard_quotas(stats, cluster)
    results = [solve_shard(groups[q.shard], cluster, q) for q in quotas]
    return merge_results(results, quotas, cluster,
                         lambda shards: [r for s in shards for r in groups[s]])
