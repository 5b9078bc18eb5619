"""The transactional workload on a real cluster of broker processes (clients in the client
host), judged by the transactional checker: a quiet run, and one with a broker killed and
started again in the middle. Every count at 0, and the run did something of each kind.

In the long tier, as the plain workload's runs are: tests/faults/test_smoke.py runs the
transactional workload under the nemesis in every run of the suite."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.history import History, read_history
from tests.faults.test_cluster import start
from tests.faults.txn_checker import check_transactions
from tests.faults.txn_workload import RING, TxnWorkload
from tests.waiting import wait_until

pytestmark = pytest.mark.servers


@pytest.mark.long
@pytest.mark.parametrize("kill", [False, True], ids=["quiet", "broker-killed"])
def test_the_transactional_workload_runs_clean(tmp_path: Path, kill: bool) -> None:
    cluster = start("zookeeper", tmp_path / "cluster")
    try:
        path = tmp_path / "history.jsonl"
        with History(path) as history:
            workload = TxnWorkload(cluster, history, seed=7)
            workload.create_topics()
            workload.start()

            def committed(n: int) -> None:
                wait_until(lambda: workload.stats.committed >= n or workload.errors,
                           timeout=120, interval=0.2, message=f"{n} committed transactions")

            committed(10)
            if kill:
                cluster.kill_broker(2)
                committed(workload.stats.committed + 5)
                cluster.restart_broker(2)
            committed(workload.stats.committed + 10)
            workload.finish()
        assert workload.errors == []
        verdict = check_transactions(read_history(path), input_topics=[RING], processed=True)
        print(verdict.summary())
        assert verdict.ok, verdict.summary()
        stats = workload.stats
        assert stats.committed > 5 and stats.aborted > 0 and stats.reads > 0, stats
        assert verdict.graph[1] > 0
    finally:
        cluster.close()
