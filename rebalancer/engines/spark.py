"""The Spark engine: the kernel's shards solved as Spark tasks.

Three distributed steps over a DataFrame of partitions (topic, partition, replicas, size_bytes):
1. a shard column, ``crc32(topic NUL partition) mod n_shards`` in Spark SQL (the kernel's
   ``shard_of``), and per shard the kernel's ``shard_stats`` (``groupBy(shard).applyInPandas``):
   one small row per shard comes back to the driver;
2. the driver splits global quotas into shard quotas (shards x brokers integers) and ships them
   with the task closure; each shard runs ``solve_shard`` on an executor and returns only its
   changed partitions and its residuals;
3. the kernel's merge: if some shards missed their quotas, those shards' rows are fetched and
   solved again as one (rare; never the whole cluster unless every shard failed).

pyspark is imported here only, and lazily.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from rebalancer.extras import import_extra
from rebalancer.planner.merge import merge_results
from rebalancer.planner.model import Cluster, Row, ShardQuota, ShardResult, ShardStats
from rebalancer.planner.quotas import shard_quotas
from rebalancer.planner.solve import shard_stats, solve_shard

_STATS_SCHEMA = "shard int, stats string"
_SOLVE_SCHEMA = "shard int, topic string, partition int, replicas array<int>, size long, info string"


def spark_session(master: str = "local[*]", *, app_name: str = "partctl-planner",
                  conf: dict[str, str] | None = None) -> Any:
    """A SparkSession set up for the planner (loopback, no UI, the running Python on workers)."""
    sql = import_extra("pyspark.sql", extra="spark", feature="the Spark engine")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (sql.SparkSession.builder.master(master).appName(app_name)
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true"))
    for k, v in (conf or {}).items():
        builder = builder.config(k, v)
    return builder.getOrCreate()


def _rows(pdf: Any) -> list[Row]:
    pdf = pdf.sort_values(["topic", "partition"], kind="stable")
    return [(t, int(n), tuple(int(x) for x in r), int(s))
            for t, n, r, s in zip(pdf["topic"], pdf["partition"], pdf["replicas"],
                                  pdf["size"], strict=True)]


def _stats_to_json(st: ShardStats) -> str:
    return json.dumps({"shard": st.shard, "partitions": st.partitions, "replicas": st.replicas,
                       "holes": st.holes, "rack_cap": st.rack_cap, "bytes": st.bytes,
                       "kept": sorted(st.kept.items()), "leaders": sorted(st.leaders.items())})


def _stats_from_json(text: str) -> ShardStats:
    d = json.loads(text)
    return ShardStats(shard=d["shard"], partitions=d["partitions"], replicas=d["replicas"],
                      holes=d["holes"], rack_cap=d["rack_cap"], bytes=d["bytes"],
                      kept={b: n for b, n in d["kept"]}, leaders={b: n for b, n in d["leaders"]})


def partitions_frame(spark: Any, rows: Sequence[Row], n_shards: int) -> Any:
    """The partitions as a DataFrame with its shard column (computed by Spark)."""
    import pandas as pd

    pdf = pd.DataFrame({
        "topic": [r[0] for r in rows],
        "partition": pd.array([r[1] for r in rows], dtype="int32"),
        "replicas": [list(r[2]) for r in rows],
        "size": pd.array([r[3] for r in rows], dtype="int64"),
    })
    df = spark.createDataFrame(pdf, "topic string, partition int, replicas array<int>, size long")
    return with_shard(df, n_shards)


def with_shard(df: Any, n_shards: int) -> Any:
    from pyspark.sql import functions as F

    key = F.concat_ws("\u0000", F.col("topic"), F.col("partition").cast("string")).cast("binary")
    shard = F.pmod(F.crc32(key), F.lit(n_shards)) if n_shards > 1 else F.lit(0)
    return df.withColumn("shard", shard.cast("int"))


def plan_rows_spark(spark: Any, rows_or_df: Sequence[Row] | Any, cluster: Cluster) -> list[Row]:
    """Changed rows, sorted by (topic, partition): the same as the local engine's.

    ``rows_or_df`` is either kernel rows (turned into a DataFrame here) or a DataFrame with
    columns topic, partition, replicas, size (-1 when unknown), e.g. read from Parquet.
    """
    import pandas as pd

    if isinstance(rows_or_df, list | tuple):
        df = partitions_frame(spark, rows_or_df, cluster.n_shards)
    else:
        df = with_shard(rows_or_df, cluster.n_shards)
    df = df.repartition(max(1, cluster.n_shards), "shard").persist()
    try:
        def stats_fn(pdf: Any) -> Any:
            shard = int(pdf["shard"].iloc[0])
            st = shard_stats(shard, _rows(pdf), cluster)
            return pd.DataFrame({"shard": [shard], "stats": [_stats_to_json(st)]})

        stats = [_stats_from_json(r["stats"]) for r in
                 df.groupBy("shard").applyInPandas(stats_fn, _STATS_SCHEMA).collect()]
        quotas = shard_quotas(stats, cluster)
        by_shard = {q.shard: q for q in quotas}

        def solve_fn(pdf: Any) -> Any:
            shard = int(pdf["shard"].iloc[0])
            res = solve_shard(_rows(pdf), cluster, by_shard[shard])
            info = json.dumps({"r": sorted(res.replica_residual.items()),
                               "l": sorted(res.leader_residual.items())})
            ch = res.changed
            return pd.DataFrame({
                "shard": [shard] * (len(ch) + 1),
                "topic": [r[0] for r in ch] + [None],
                "partition": [r[1] for r in ch] + [None],
                "replicas": [list(r[2]) for r in ch] + [None],
                "size": [r[3] for r in ch] + [None],
                "info": [None] * len(ch) + [info],
            })

        out = df.groupBy("shard").applyInPandas(solve_fn, _SOLVE_SCHEMA).toPandas()
        results = _results(out, quotas)

        def fetch(shards: Sequence[int]) -> list[Row]:
            pdf = df.filter(df["shard"].isin(list(shards))).toPandas()
            return _rows(pdf)

        return merge_results(results, quotas, cluster, fetch)
    finally:
        df.unpersist()


def _results(out: Any, quotas: Sequence[ShardQuota]) -> list[ShardResult]:
    changed: dict[int, list[Row]] = {q.shard: [] for q in quotas}
    info: dict[int, dict[str, Any]] = {}
    for shard, t, n, r, s, i in zip(out["shard"], out["topic"], out["partition"],
                                     out["replicas"], out["size"], out["info"], strict=True):
        if isinstance(i, str):
            info[int(shard)] = json.loads(i)
        else:
            changed[int(shard)].append((t, int(n), tuple(int(x) for x in r), int(s)))
    return [ShardResult(shard=s, changed=tuple(changed[s]),
                        replica_residual={b: n for b, n in info[s]["r"]},
                        leader_residual={b: n for b, n in info[s]["l"]})
            for s in sorted(info)]
