"""Planning engines: ``local`` (in-process), ``spark`` (PySpark) and ``auto``.

Both engines run the same kernel shard by shard (rebalancer.planner) and return the same plan.

``auto`` picks Spark at or above AUTO_SPARK_PARTITIONS partitions. Measured on this repo's bench
(2 cores): the local engine plans L (200k partitions) in ~4 s, while a Spark run pays ~10-20 s
of fixed cost (JVM, Python workers, shuffles) before any work, so in-process wins well past 1M
partitions on a single machine; Spark is worth it when the snapshot no longer fits comfortably in
one Python process or when a real cluster (many executors) is available. See benchmarks/planner.py.
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
