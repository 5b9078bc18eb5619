"""The pure planning kernel: goals, quotas, the shard-level solver and the merge.

No I/O and no engine here; rebalancer.engines runs this kernel in-process or on Spark.
"""

from rebalancer.planner.goals import (
    AddBrokers,
    Balance,
    BalanceDisk,
    ChangeReplicationFactor,
    Decommission,
    Goal,
    RepairRacks,
)
from rebalancer.planner.merge import merge_results
from rebalancer.planner.model import (
    Cluster,
    PlanningError,
    Row,
    ShardQuota,
    ShardResult,
    ShardStats,
    shard_of,
)
from rebalancer.planner.quotas import shard_quotas
from rebalancer.planner.solve import shard_stats, solve_shard

__all__ = [
    "AddBrokers", "Balance", "BalanceDisk", "ChangeReplicationFactor", "Cluster", "Decommission", "Goal",
    "PlanningError", "RepairRacks", "Row", "ShardQuota", "ShardResult", "ShardStats",
    "merge_results", "shard_of", "shard_quotas", "shard_stats", "solve_shard",
]
