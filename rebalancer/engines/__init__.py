"""Planning engines: ``local`` (in-process), ``spark`` (PySpark) and ``auto``.

Both engines run the same kernel shard by shard (rebalancer.planner) and return the same plan.

``auto`` picks Spark at or above AUTO_SPARK_PARTITIONS partitions. Measured with
benchmarks/planner.py on 2 cores: local plans L (200k partitions) in ~6 s and XL (1M partitions,
1,000 brokers) in ~33 s with a ~0.75 GiB peak; Spark ``local[2]`` needs ~25-70 s for L and
~190 s for XL, most of it fixed cost (JVM and Python workers, pandas->Arrow->DataFrame, two
shuffles) that only more executors than one machine's cores pay back. So in-process wins at
every size we can measure on one machine, and ``auto`` keeps it up to 2M partitions, where the
local process would need ~1.5 GiB and one core would take over a minute; beyond that the shards
go to Spark, where a real master URL spreads them over executors. The 5M-partition XXL
scenario at a tenth (500k partitions, 300 brokers) plans on Spark ``local[2]`` in ~76 s
(balance) and ~55 s (disk) with ~2.0-2.2 GiB peak over the driver (~0.5), the JVM and its
Python workers (~1.5-1.7).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from rebalancer.engines.common import DEFAULT_SHARD_SIZE, build_cluster, plan_of, snapshot_rows
from rebalancer.plan import Plan
from rebalancer.planner.goals import Goal
from rebalancer.snapshot import Snapshot

AUTO_SPARK_PARTITIONS = 2_000_000

EngineName = Literal["auto", "local", "spark"]


def choose_engine(partitions: int) -> Literal["local", "spark"]:
    return "spark" if partitions >= AUTO_SPARK_PARTITIONS else "local"


def plan_reassignment(snapshot: Snapshot, goals: Iterable[Goal] = (), *,
                      engine: EngineName = "auto", seed: int = 0,
                      shard_size: int = DEFAULT_SHARD_SIZE, spark: Any = None,
                      master: str = "local[*]") -> Plan:
    """Plan a reassignment; goals default to Balance(). Same inputs, same plan, any engine.

    Raises SnapshotError or PlanningError (one line per problem) on bad input.
    """
    cluster = build_cluster(snapshot, goals, seed=seed, shard_size=shard_size)
    rows = snapshot_rows(snapshot)
    name = choose_engine(len(rows)) if engine == "auto" else engine
    if name == "local":
        from rebalancer.engines.local import plan_rows_local

        return plan_of(plan_rows_local(rows, cluster))
    if name == "spark":
        from rebalancer.engines.spark import plan_rows_spark, spark_session

        session = spark if spark is not None else spark_session(master)
        return plan_of(plan_rows_spark(session, rows, cluster))
    raise ValueError(f"unknown engine {engine!r} (expected auto, local or spark)")
