"""benchmarks/controller.py's plumbing on a tiny cluster (not its timings): a run that succeeds
prints its table and exits 0; one whose coordinator fails says why on one line and exits 1."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from coordinator import servers

pytestmark = pytest.mark.processes

ROOT = Path(__file__).resolve().parents[2]


def _bench(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "controller.py"), *args],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def test_a_run_that_succeeds_prints_its_table_and_exits_0() -> None:
    done = _bench("--backend", "memory", "--brokers", "4", "--partitions", "200")
    assert done.returncode == 0, done.stderr
    assert "(a) hot failover -> UpdateMetadata sent" in done.stdout
    assert "(e) preferred election -> LeaderAndIsr sent" in done.stdout
    assert "(f) full restart -> every partition online" in done.stdout
    assert "(f) 200 of 200 partitions online" in done.stdout
    assert "(g) rolling return, 1 broker at a time -> online" in done.stdout
    assert "(g) 200 of 200 partitions online" in done.stdout
    assert "(h) hot failover mid-restart -> UM sent" in done.stdout
    assert "(h) the controller's session closed" in done.stdout
    assert "partitions led; until done (every partition led)" in done.stdout
    assert "failed" not in done.stderr


def test_on_zookeeper_the_brokers_sessions_live_in_a_process_of_their_own() -> None:
    """The stand-in brokers register from their own process (their sessions survive the
    controller's work in the benchmark's), are lost and come back for the full restart; the
    candidates' RSS is in the table. --skip leaves a step out."""
    done = _bench("--backend", "zookeeper", "--brokers", "4", "--partitions", "200",
                  timeout=300)
    assert done.returncode == 0, done.stderr
    assert "(f) all 4 brokers lost -> controller idle with 200 partitions offline" in done.stdout
    assert "(f) 200 of 200 partitions online" in done.stdout
    assert "(g) all 4 brokers lost" in done.stdout and "(g) 200 of 200 partitions" in done.stdout
    assert "controller RSS, hot, after its failover" in done.stdout
    assert "controller RSS, cold, after its failover" in done.stdout
    # (h): a standby in a process of its own waits for the loss and the return in its view
    notes = [line for line in done.stdout.splitlines() if "(h) the controller's" in line]
    assert notes and all("of 200 partitions led; until done" in note and "metadata sent" in note
                         for note in notes)
    assert "best round)" in done.stdout and "None" not in done.stdout  # no count limit
    skipped = _bench("--backend", "memory", "--brokers", "4", "--partitions", "200",
                     "--skip", "f")
    assert skipped.returncode == 0, skipped.stderr
    assert "(f)" not in skipped.stdout and "(a) hot failover" in skipped.stdout
    assert "(h)" not in skipped.stdout  # (it happens in a full restart)
    assert "(g) 200 of 200 partitions online" in skipped.stdout
    both = _bench("--backend", "memory", "--brokers", "4", "--partitions", "200", "--skip", "gf")
    assert both.returncode == 0, both.stderr
    assert "(f)" not in both.stdout and "(g)" not in both.stdout
    no_h = _bench("--backend", "memory", "--brokers", "4", "--partitions", "200", "--skip", "h")
    assert no_h.returncode == 0, no_h.stderr
    assert "(f) 200 of 200 partitions online" in no_h.stdout and "(h)" not in no_h.stdout
    refused = _bench("--backend", "memory", "--skip", "a")
    assert refused.returncode == 2 and "only f (the full restart), g" in refused.stderr


def test_an_etcd_run_with_a_raised_txn_limit_tells_the_server_and_every_client() -> None:
    """--etcd-max-txn-ops starts etcd with the flag and every client of the run (the spawned
    standby and stand-in brokers too) with the limit. Its transactions then hold more than
    etcd's default 128 ops: told to clients alone, a server at the default refuses the first
    (RequestTooLarge) and the run fails."""
    done = _bench("--backend", "etcd", "--brokers", "4", "--partitions", "200",
                  "--etcd-max-txn-ops", "1024", timeout=300)
    assert done.returncode == 0, done.stderr
    assert "etcd --max-txn-ops 1024 (and its clients told)" in done.stdout
    assert "the client's multis hold any 341 ops" in done.stdout
    assert "(f) 200 of 200 partitions online" in done.stdout


def test_a_coordinator_that_never_answers_fails_the_run_with_one_line() -> None:
    with socket.socket() as listener:  # accepts connections, never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        done = _bench("--backend", "zookeeper", "--url", f"zookeeper://127.0.0.1:{port}/b",
                      "--brokers", "3", "--partitions", "30")
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert lines == [f"controller benchmark on zookeeper failed: ConnectionFailed: could not "
                     f"connect to ZooKeeper at 127.0.0.1:{port} within 10s"], done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def test_the_server_sized_for_a_million_partitions() -> None:
    zk = servers.sized_for("zookeeper", 1_000_000)
    assert zk["heap_mb"] >= 256 + 1_000_000 * 1900 // (1 << 20)  # the live heap measured
    assert zk["jute_maxbuffer"] > 1 << 20
    assert servers.sized_for("zookeeper", 1000)["heap_mb"] == 512
    assert 4 << 30 <= servers.sized_for("etcd", 1_000_000)["quota_bytes"] <= 8 << 30


def test_a_million_partitions_are_measured_against_the_million_partition_targets() -> None:
    from benchmarks.controller import _target
    assert _target("b", "etcd", 100_000) == 3.0  # the default scale's cold failover
    assert _target("b", "etcd", 1_000_000) == _target("b", "zookeeper", 1_000_000) == 10.0
    assert _target("a", "etcd", 1_000_000) == 1.0 and _target("f", "memory", 2_000_000) == 30.0
