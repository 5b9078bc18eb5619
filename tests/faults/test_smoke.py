"""The fault harness's smoke set: a few seeds, short, on ZooKeeper and on etcd, with the real
ensemble, broker processes and clients. Every run must be carried out and clean: no acknowledged
write lost, nothing duplicated, reordered or divergent, no zombie write, every operation the
nemesis started completed after the heal, and every ISR whole again after it.

The long runs are ``python -m tests.faults --seeds 1-200 --duration 60 --coordinator ...``
(on demand; the closing notes give their figures). A seed that once found a defect joins
``SMOKE`` here with the duration that found it (or the shortest whose plan still holds the
fault that found it: ``plan(seed, duration)`` is the same up to where the shorter run ends).

The fault tests on a real cluster of tests/faults/ (test_cluster, test_nemesis, test_workload)
are in the long tier, on demand (``make test-long``): these seeds are the suite's every-run check
of the whole harness: cluster, nemesis, workload, checker and timeline together.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.nemesis import plan
from tests.faults.net import unavailable_reason
from tests.faults.runner import run_seed
from tests.servers import unavailable


def _seed(kind: str, seed: int, seconds: float, *marks: pytest.MarkDecorator,
          txn: bool = False) -> object:
    return pytest.param(kind, seed, seconds, txn, marks=marks,
                        id=f"{kind}-seed{seed}{'-txn' if txn else ''}")


SMOKE = [
    # (coordinator, seed, seconds): the plans are in each run's plan.txt
    _seed("zookeeper", 2, 30.0, txn=True),  # the controller killed during a reassignment (the
    #     defect the nemesis found: a request left in /admin/reassign_partitions), with the
    #     transactional workload beside the plain one (writers, consume-transform-produce,
    #     read_committed readers: tests/faults/txn_workload.py)
    _seed("etcd", 3, 30.0, pytest.mark.long),  # a broker cut from the coordinator, then the
    #                  controller paused (long tier: the nemesis tests run each fault alone)
    _seed("etcd", 17, 40.0),  # a leader cut from its followers after a reorder bumped its
    #                           epoch: the old leader then looped on that empty epoch as a
    #                           follower and never rejoined the ISR
    #                           (tests/replication/test_kip101.py has it deterministic); found
    #                           in 60 s, whose plan's first two faults (that one, then
    #                           kill-majority) are the whole plan of 40 s
]


@pytest.mark.servers
@pytest.mark.parametrize(("kind", "seed", "duration", "txn"), SMOKE)
def test_a_seed_runs_clean(kind: str, seed: int, duration: float, txn: bool,
                           tmp_path: Path) -> None:
    reason = unavailable_reason()
    if reason is not None:
        unavailable(reason)
    lines: list[str] = []
    result = run_seed(seed, kind, duration, tmp_path, timeline=True,  # type: ignore[arg-type]
                      txn=txn, say=lines.append)
    if result.error is not None and "ServerNotInstalled" in result.error:
        unavailable(result.error)
    assert result.error is None, result.line() + "\n" + "\n".join(lines)
    assert result.verdict is not None
    txn_summary = "" if result.txn_verdict is None else result.txn_verdict.summary() + "\n"
    assert result.ok, (result.line() + "\n" + result.verdict.summary() + "\n" + txn_summary
                       + "\n".join(result.nemesis_errors + result.workload_errors))
    assert not result.short_isrs, result.line()  # every ISR whole again after the heal
    # the run did what a run is for: faults injected, writes acknowledged and read back
    assert sum(result.injected.values()) >= 1
    assert result.verdict.acknowledged > 100 and result.verdict.reads > 0
    assert (result.directory / "timeline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if txn:  # transactions ended each way, and the checker had a graph to judge
        assert result.txn_verdict is not None and result.txn_stats is not None
        assert result.txn_stats.committed > 5 and result.txn_stats.aborted > 0
        assert result.txn_verdict.graph[1] > 0, result.txn_verdict.summary()



def test_a_shortened_seed_keeps_the_faults_of_its_longer_run() -> None:
    # seed 17 found its defect in 60 s, with the leader isolated from its followers first
    found = plan(17, 60.0)
    assert found[0].kind == "isolate-leader-from-followers"
    assert plan(17, 40.0) == found[:2]
