"""The deterministic merge of shard results, and the repair of shards that missed their quotas.

Shards are solved independently against quotas that add up to the global ones, so when every
shard meets its quotas the union of their results meets the global quotas and nothing else is
needed. A shard that could not (a hole no rack could take, a leader quota no partition could
serve) reports residuals; the shards with residuals (at least two, so there is room to trade)
are solved again as one, from their original rows, against the sum of their quotas.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rebalancer.planner.model import Cluster, Row, ShardQuota, ShardResult
from rebalancer.planner.quotas import merge_quotas
from rebalancer.planner.solve import solve_shard

REPAIR_SHARD = -1

FetchRows = Callable[[Sequence[int]], Sequence[Row]]


def shards_to_repair(results: Sequence[ShardResult]) -> list[int]:
    shards = sorted(r.shard for r in results)
    bad = [r.shard for r in sorted(results, key=lambda r: r.shard) if not r.exact]
    if len(bad) == 1 and len(shards) > 1:  # one shard alone would solve the same way again
        bad.append(shards[(shards.index(bad[0]) + 1) % len(shards)])
    return sorted(bad) if len(bad) > 1 else []


def merge_results(results: Sequence[ShardResult], quotas: Sequence[ShardQuota],
                  cluster: Cluster, fetch_rows: FetchRows) -> list[Row]:
    """Changed rows of the whole plan, sorted by (topic, partition)."""
    bad = shards_to_repair(results)
    keep = [r for r in results if r.shard not in bad]
    if bad:
        rows = sorted(fetch_rows(bad), key=lambda r: (r[0], r[1]))
        quota = merge_quotas([q for q in quotas if q.shard in bad], REPAIR_SHARD)
        keep.append(solve_shard(rows, cluster, quota))
    changed = [row for r in keep for row in r.changed]
    changed.sort(key=lambda r: (r[0], r[1]))
    return changed
