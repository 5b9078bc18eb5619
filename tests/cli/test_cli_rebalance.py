"""``partctl rebalance`` end to end on real partctl broker processes, through their ZooKeeper:
demote a broker, drain one, add a fourth, then fix the replicas of a broker stopped for good.
One cluster for the module, its steps in order; each result is checked on the live view (what
``kafka-topics --describe`` shows: replicas, leaders, ISRs)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import coordinator
from coordinator.admin import Admin
from partctl.cli import main
from rebalancer.access import ClusterView, CoordinatorAccess
from tests.broker.processes import BrokerProcess, coordinator_settings, start_broker
from tests.servers import Server
from tests.waiting import wait_until

RACK = {1: "r0", 2: "r1", 3: "r0", 4: "r1"}
EXTRA = "zookeeper.session.timeout.ms=6000\n"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@dataclass
class Live:
    root: Path
    server: Server
    settings: tuple[str, str]
    brokers: dict[int, BrokerProcess] = field(default_factory=dict)
    access: CoordinatorAccess | None = None

    @property
    def url(self) -> str:
        return self.settings[1]

    def start(self, broker_id: int) -> None:
        self.brokers[broker_id] = start_broker(
            self.root / f"b{broker_id}", self.server, broker_id=broker_id,
            extra=EXTRA + f"broker.rack={RACK[broker_id]}\n", settings=self.settings)

    def view(self) -> ClusterView:
        if self.access is None:
            self.access = CoordinatorAccess(coordinator.connect(self.url, timeout=10),
                                            owns_session=True)
        return self.access.view()

    def replicas(self) -> dict[tuple[str, int], tuple[int, ...]]:
        return {(p.topic, p.partition): p.replicas for p in self.view().partitions}

    def settled(self) -> bool:
        """Every partition has a leader and its whole replica list in sync, nothing moving."""
        return all(p.leader in p.replicas and set(p.isr) == set(p.replicas) and not p.moving
                   for p in self.view().partitions)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, zookeeper_server: Server) -> Iterator[Live]:
    cluster = Live(root=tmp_path_factory.mktemp("rebalance"), server=zookeeper_server,
                   settings=coordinator_settings(zookeeper_server))
    try:
        for b in (1, 2, 3):
            cluster.start(b)
        wait_until(lambda: len(cluster.view().brokers) == 3, timeout=30, interval=0.1)
        assert cluster.access is not None
        Admin(cluster.access.coordinator).create_topic("orders", assignment={
            0: [1, 2], 1: [2, 3], 2: [3, 2], 3: [2, 1], 4: [1, 2], 5: [2, 3]})
        wait_until(cluster.settled, timeout=60, interval=0.1, message="orders online")
        yield cluster
    finally:
        if cluster.access is not None:
            cluster.access.close()
        for broker in cluster.brokers.values():
            broker.kill()


def test_a_dry_run_moves_nothing_and_bad_input_is_one_line(live: Live, tmp_path: Path) -> None:
    before = live.replicas()
    plan = tmp_path / "plan.json"
    code, out, err = run("rebalance", "remove-brokers", "3", "--coordinator", live.url,
                         "-o", str(plan))
    assert code == 0, err
    assert "remove-brokers 3 on " in out and "Dry run: nothing was moved" in out
    assert "Replica spread" in out and "replicas moved: 3" in out
    assert {e["topic"] for e in json.loads(plan.read_text())["partitions"]} == {"orders"}
    for argv, line in [
        (("remove-brokers", "7"), "cannot remove unknown broker(s) 7: the live brokers are "
                                  "1,2,3"),
        (("remove-brokers", "1,3"), "cannot remove broker(s) 1,3: topic orders has replication "
                                    "factor 2 but only 1 live broker(s) would hold it"),
        (("demote-brokers", "1,2,3"), "cannot demote every live broker: leadership would "
                                      "have nowhere to go"),
        (("fix-offline-replicas",), "no replica is on a dead broker: nothing to fix"),
    ]:
        code, out, err = run("rebalance", *argv, "--coordinator", live.url, "--execute")
        assert code == 1 and err == f"partctl: error: {line}\n", (argv, err)
    assert live.replicas() == before


def test_demote_moves_leadership_off_a_broker(live: Live) -> None:
    code, out, err = run("rebalance", "demote-brokers", "1", "--coordinator", live.url,
                         "--execute", "--timeout", "120")
    assert code == 0, out + err
    assert "Reassignment finished" in out and "Preferred leader election" in out

    def demoted() -> bool:
        view = live.view()
        return all(p.leader != 1 and (1 not in p.replicas or p.replicas[-1] == 1)
                   for p in view.partitions) and live.settled()

    wait_until(demoted, timeout=60, interval=0.1, message="leadership off broker 1")
    assert live.replicas()[("orders", 0)] == (2, 1)  # no data moved: the same replicas


def test_remove_brokers_drains_a_broker(live: Live) -> None:
    code, out, err = run("rebalance", "remove-brokers", "3", "--coordinator", live.url,
                         "--execute", "--throttle", "10MB/s", "--max-concurrent-moves", "2",
                         "--timeout", "120")
    assert code == 0, out + err
    assert "Reassignment finished: 3 done, 0 failed" in out and "Throttles removed" in out
    wait_until(live.settled, timeout=60, interval=0.1)
    replicas = live.replicas()
    assert not any(3 in r for r in replicas.values())
    assert all(len(r) == 2 and {RACK[b] for b in r} == {"r0", "r1"} for r in replicas.values())


def test_add_brokers_moves_onto_the_new_broker_only(live: Live) -> None:
    live.start(4)
    wait_until(lambda: 4 in live.view().brokers, timeout=30, interval=0.1)
    before = live.replicas()
    code, out, err = run("rebalance", "add-brokers", "4", "--coordinator", live.url,
                         "--execute", "--timeout", "120")
    assert code == 0, out + err
    wait_until(live.settled, timeout=60, interval=0.1)
    after = live.replicas()
    gained = {b for k, r in after.items() for b in r if b not in before[k]}
    assert gained == {4}  # the old brokers gained nothing
    held = sum(1 for r in after.values() if 4 in r)
    assert held == 3  # broker 2's replicas shared with its new rack mate: 6 over 2
    assert all({RACK[b] for b in r} == {"r0", "r1"} for r in after.values())


def test_fix_offline_replicas_after_a_broker_is_gone_for_good(live: Live) -> None:
    live.brokers[2].kill()
    wait_until(lambda: 2 not in live.view().brokers, timeout=60, interval=0.1,
               message="broker 2 gone")
    before = live.replicas()
    assert any(2 in r for r in before.values())
    code, out, err = run("rebalance", "fix-offline-replicas", "--coordinator", live.url,
                         "--execute", "--timeout", "120")
    assert code == 0, out + err
    assert "fix-offline-replicas 2 on " in out
    wait_until(live.settled, timeout=60, interval=0.1, message="every replica back in sync")
    after = live.replicas()
    for key, reps in after.items():
        if 2 in before[key]:
            assert reps == tuple(4 if b == 2 else b for b in before[key]) or \
                set(reps) == {1, 4}
        else:
            assert reps == before[key]  # nothing else moved
    assert not any(2 in r for r in after.values())
