"""Fixtures for the planner tests: hand-made snapshots, the bench scripts, one Spark session."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rebalancer.snapshot import Broker, PartitionReplicas, Snapshot, load_snapshot

BENCH = Path(__file__).resolve().parents[2].parent / "shared" / "bench"


def make_snapshot(racks: dict[int, str | None], parts: list[tuple[str, int, list[int]]] | None = None,
                  *, sizes: dict[tuple[str, int], int] | None = None,
                  decommission: set[int] | frozenset[int] = frozenset(),
                  new: set[int] | frozenset[int] = frozenset()) -> Snapshot:
    sizes = sizes or {}
    return Snapshot(
        brokers=tuple(Broker(id=b, rack=r) for b, r in sorted(racks.items())),
        partitions=tuple(PartitionReplicas(topic=t, partition=n, replicas=tuple(r),
                                           size_bytes=sizes.get((t, n)))
                         for t, n, r in parts or []),
        decommission=frozenset(decommission), new_brokers=frozenset(new),
    )


@pytest.fixture(scope="session")
def bench() -> Path:
    if not (BENCH / "gen_cluster.py").exists() or not (BENCH / "score.py").exists():
        pytest.skip(f"SKIPPED LOUDLY: planner bench scripts not found at {BENCH}")
    return BENCH


@pytest.fixture(scope="session")
def generate(bench: Path, tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """generate(name, *gen_cluster args) -> path of the snapshot JSON (cached per session)."""
    out_dir = tmp_path_factory.mktemp("snapshots")

    def gen(name: str, *args: str) -> Path:
        path = out_dir / f"{name}.json"
        if not path.exists():
            subprocess.run([sys.executable, str(bench / "gen_cluster.py"), *args,
                            "--out", str(path)], check=True, capture_output=True)
        return path

    return gen


@pytest.fixture(scope="session")
def bench_score(bench: Path) -> Callable[[Path, Path | None], dict[str, Any]]:
    def run(snapshot: Path, plan: Path | None) -> dict[str, Any]:
        cmd = [sys.executable, str(bench / "score.py"), "--snapshot", str(snapshot), "--json"]
        if plan is not None:
            cmd += ["--assignment", str(plan)]
        return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)

    return run


GENERATED = {
    "small-even": ["--brokers", "9", "--new-brokers", "3", "--racks", "3", "--topics", "30",
                   "--partitions", "8", "--rf", "3", "--seed", "11"],
    "skewed": ["--brokers", "12", "--racks", "4", "--topics", "40", "--total-partitions", "1500",
               "--rf", "3", "--placement", "random", "--zipf-s", "0.8",
               "--rack-violation-frac", "0.05", "--seed", "12"],
    "decom": ["--brokers", "15", "--new-brokers", "2", "--racks", "5", "--topics", "25",
              "--total-partitions", "2000", "--rf", "3", "--decommission", "2", "--seed", "13"],
    "uneven-racks": ["--brokers", "10", "--racks", "3", "--topics", "20", "--partitions", "30",
                     "--rf", "2", "--placement", "random", "--no-sizes", "--seed", "14"],
}


@pytest.fixture(scope="session")
def generated(generate: Callable[..., Path]) -> dict[str, tuple[Path, Snapshot]]:
    out = {}
    for name, args in GENERATED.items():
        path = generate(name, *args)
        out[name] = (path, load_snapshot(path))
    return out


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local[2] session for the whole run (tests using it are marked ``spark``)."""
    pytest.importorskip("pyspark")
    from rebalancer.engines.spark import spark_session

    session = spark_session("local[2]", app_name="partctl-tests",
                            conf={"spark.sql.shuffle.partitions": "4",
                                  "spark.default.parallelism": "2"})
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
