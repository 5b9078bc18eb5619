"""The spark engine on a real Spark standalone cluster (a master and two workers started from
the installed pyspark, tests.spark_cluster) gives the plan it gives on ``local[2]``: both through
``partctl reassign generate --engine spark --spark-master URL`` in processes of their own.

In the long tier (on demand: ``make test-long``, or ``PARTCTL_LONG_TESTS=1``): starting the
cluster and two applications on it take minutes on a two-core machine; every run of the suite
plans on ``local[*]`` (tests/rebalancer/test_planner_engines.py,
tests/rebalancer/test_execution_generate_spark.py) and passes ``--spark-master`` there."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rebalancer.scenarios import Scenario, generate
from rebalancer.snapshot import save_snapshot
from tests.spark_cluster import SparkCluster

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.spark
@pytest.mark.long
def test_a_standalone_cluster_gives_the_same_plan_as_local(spark_cluster: SparkCluster,
                                                           tmp_path: Path) -> None:
    snap = tmp_path / "snap.json"
    save_snapshot(generate(Scenario(brokers=9, new_brokers=3, racks=3, topics=30, partitions=8,
                                    rf=3, seed=11)), snap)
    plans = {}
    for name, master in (("local", "local[2]"), ("standalone", spark_cluster.master_url)):
        out = tmp_path / f"{name}.json"
        done = subprocess.run(
            [sys.executable, "-m", "partctl", "reassign", "generate", "--snapshot", str(snap),
             "--goal", "add-brokers", "--engine", "spark", "--spark-master", master,
             "-o", str(out)], capture_output=True, text=True, timeout=300, cwd=REPO)
        assert done.returncode == 0, (name, done.stdout, done.stderr[-3000:])
        plans[name] = out.read_text()
    assert plans["standalone"] == plans["local"]
    assert json.loads(plans["local"])["partitions"]
    # the standalone run's tasks ran on the workers: its application left executor logs there
    assert any(spark_cluster.logs.glob("work-*/app-*/*/stderr"))
