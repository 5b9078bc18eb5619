"""benchmarks/idle_partitions.py, run small: both measurements print their figures and exit 0;
the latency run prints the brokers' garbage collector passes too, and ``--gc-thaw-ms`` reaches
them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.servers

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "idle_partitions.py"


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=180, stdin=subprocess.DEVNULL)


def test_latency_beside_idle_partitions_prints_the_latency_rows() -> None:
    done = _bench("latency", "--idle", "6", "--seconds", "1")
    assert done.returncode == 0, done.stderr[-2000:]
    for rate in ("1,000", "10,000"):
        for pct in ("p50", "p99", "p99.9"):
            assert re.search(rf"produce latency @{rate}/s {pct} \(rdkafka\)\s+ms\s+[\d.,]+",
                             done.stdout), done.stdout
        # librdkafka's own split of it, from its statistics
        for part in ("the brokers' round trip p50", "the brokers' round trip p99",
                     "in the client's queue p99"):
            assert re.search(rf"produce latency @{rate}/s: {part} \(rdkafka\)\s+ms\s+[\d.,]+",
                             done.stdout), done.stdout
    # the brokers' collector passes, from their metrics (broker.garbage): young passes
    # there are by then; each broker froze what it started with
    found = re.search(r"garbage collector, three brokers since serving: gen 0: (\d+) passes, "
                      r"mean [\d.]+ ms, longest [\d.]+ ms; gen 1: .*; gen 2: .*; "
                      r"freezes per broker (\d+), (\d+), (\d+)$", done.stdout, re.M)
    assert found is not None, done.stdout
    assert int(found.group(1)) > 0
    assert all(int(n) >= 1 for n in found.groups()[1:])


def test_latency_with_the_collector_as_python_runs_it_freezes_nothing() -> None:
    done = _bench("latency", "--idle", "0", "--seconds", "1", "--gc-thaw-ms", "-1")
    assert done.returncode == 0, done.stderr[-2000:]
    assert re.search(r"freezes per broker 0, 0, 0$", done.stdout, re.M), done.stdout


def test_idle_cpu_prints_each_broker_s_cores() -> None:
    done = _bench("cpu", "--replicas", "30", "--settle", "0", "--seconds", "1")
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.search(r"30 replicas each, over 1 s: broker 1 ([\d.]+), broker 2 ([\d.]+), "
                      r"broker 3 ([\d.]+); mean ([\d.]+)", done.stdout)
    assert found is not None, done.stdout
    assert all(0 <= float(v) < 2 for v in found.groups())
