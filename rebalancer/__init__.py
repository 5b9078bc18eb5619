"""Auto leader rebalance, the reassignment planner (local and Spark), scheduled jobs, SQL store."""
