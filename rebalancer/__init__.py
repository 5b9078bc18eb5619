"""Auto leader rebalance, the reassignment planner (local and Spark), scheduled jobs, SQL store."""

from rebalancer.imbalance import (
    DEFAULT_IMBALANCE_PERCENTAGE,
    BrokerImbalance,
    LeaderImbalance,
    leader_imbalance,
)

__all__ = [
    "DEFAULT_IMBALANCE_PERCENTAGE",
    "BrokerImbalance",
    "LeaderImbalance",
    "leader_imbalance",
]
