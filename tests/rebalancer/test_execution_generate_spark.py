"""``partctl reassign generate --engine spark`` writes the same plan as ``--engine local``.

It lives here, not in tests/cli, to share this directory's one Spark session: the CLI's
``spark_session`` gets that running session back (getOrCreate), so a test run starts one JVM,
and leaves it running (it is not the command's). One test starts its own, in a process of its
own, to see the command stop the session it started.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from partctl.cli import main
from rebalancer.snapshot import save_snapshot
from tests.class_archive import archive_for
from tests.rebalancer.conftest import make_snapshot, spark_classpath


@pytest.mark.spark
def test_generate_on_spark_gives_the_local_plan(spark: Any, tmp_path: Path) -> None:
    racks = {b: f"r{b % 3}" for b in range(1, 10)}
    parts = [(f"t{t}", p, [1 + (t + p) % 3, 4 + (t + p) % 3, 7 + (t + p) % 3][: 2 + t % 2])
             for t in range(4) for p in range(6)]
    snap = make_snapshot(racks, parts, new={7, 8, 9}, sizes={("t0", 0): 10 * 2**30})
    path = tmp_path / "snap.json"
    save_snapshot(snap, path)
    plans = {}
    for engine in ("local", "spark"):
        out, err = io.StringIO(), io.StringIO()
        plan = tmp_path / f"{engine}.json"
        code = main(["reassign", "generate", "--snapshot", str(path), "--goal", "balance",
                     "--engine", engine, "--spark-master", "local[2]", "--seed", "3",
                     "-o", str(plan)], out=out, err=err)
        assert code == 0, err.getvalue()
        assert "GiB" in out.getvalue() and "Replica spread" in out.getvalue()
        plans[engine] = json.loads(plan.read_text())
    assert plans["spark"] == plans["local"] and plans["local"]["partitions"]
    assert spark.range(3).count() == 3  # the suite's session is still running


STOPPED = """
import sys
from partctl.cli import main
code = main(sys.argv[1:])
from pyspark.sql import SparkSession
try:
    SparkSession.active()
    print(code, "running")
except RuntimeError:
    print(code, "stopped")
"""


@pytest.mark.spark
def test_generate_stops_the_spark_session_it_started(tmp_path: Path) -> None:
    racks = {b: f"r{b % 2}" for b in range(1, 5)}
    save_snapshot(make_snapshot(racks, [("t", p, [1, 2]) for p in range(4)]),
                  tmp_path / "snap.json")
    # the session's JVM maps the class archive of the suite's session, when there is one (its
    # JVM outlives the command's process: it cannot write one itself)
    archive = archive_for(spark_classpath(), "org.apache.spark.deploy.SparkSubmit", (),
                          dump=False)
    done = subprocess.run(
        [sys.executable, "-c", STOPPED, "reassign", "generate", "--snapshot",
         str(tmp_path / "snap.json"), "--engine", "spark", "--spark-master", "local[1]", "-o",
         str(tmp_path / "plan.json")], capture_output=True, text=True, timeout=300,
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "SPARK_SUBMIT_OPTS": " ".join(archive.options)})
    assert done.stdout.splitlines()[-1] == "0 stopped", (done.stdout, done.stderr[-2000:])
    assert json.loads((tmp_path / "plan.json").read_text())["version"] == 1
