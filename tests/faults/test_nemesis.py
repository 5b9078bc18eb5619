"""The nemesis: its plans (pure: deterministic from the seed, every kind, one fault at a time,
all healed in time), and a handful of its kinds injected into a real cluster, each seen to take
effect (a new controller epoch, a paused leader's registration gone, no coordinator writes
without a majority, a broker cut from the coordinator unregistered, operations completed across
a controller failover, new broker epochs) and healed by heal_all (every broker registered, full
ISRs).

The runs on a real cluster are in the long tier (on demand: ``make test-long``, or
``PARTCTL_LONG_TESTS=1``); tests/faults/test_smoke.py is what every run of the suite does
with the harness."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from coordinator.admin import Admin
from coordinator.metadata import MetadataClient
from tests.faults.cluster import FaultCluster
from tests.faults.history import FaultEnd, FaultStart, History, read_history
from tests.faults.nemesis import (
    KINDS,
    SCRATCH,
    Held,
    Nemesis,
    NemesisError,
    PlannedFault,
    heal_allowance,
    plan,
)
from tests.faults.test_cluster import (
    PARTITIONS,
    TOPIC,
    create_topic,
    full_isrs,
    start,
    wait_for,
)

ALL = {1, 2, 3}

# --- plan(): pure ------------------------------------------------------------------------------


def test_a_plan_is_a_function_of_its_arguments() -> None:
    assert plan(7, 120) == plan(7, 120)
    assert plan(7, 120) != plan(8, 120)
    assert plan(7, 120, ["kill-leader", "split"]) == plan(7, 120, ["kill-leader", "split"])
    assert all(f.kind in ("kill-leader", "split") for f in plan(7, 120, ["kill-leader", "split"]))


@pytest.mark.parametrize("duration", [30.0, 60.0, 200.0])
def test_faults_come_one_at_a_time_with_quiet_gaps_and_are_healed_in_time(duration: float
                                                                         ) -> None:
    for seed in range(100):
        faults = plan(seed, duration)
        assert faults, f"seed {seed}: nothing fits in {duration}s"
        previous_end = 0.0
        for fault in faults:
            assert fault.kind in KINDS and fault.duration > 0 and fault.pick >= 0
            assert fault.at >= previous_end + 3.0, (seed, faults)
            previous_end = fault.at + fault.duration + heal_allowance(fault.kind)
            assert previous_end <= duration, (seed, fault)
        if duration >= 200:     # a deck: no kind twice before every kind once
            kinds = [f.kind for f in faults][:len(KINDS)]
            assert len(kinds) == len(set(kinds))


def test_every_kind_appears_across_seeds_and_pauses_outlast_the_session() -> None:
    faults = [f for seed in range(40) for f in plan(seed, 60)]
    assert {f.kind for f in faults} == set(KINDS)
    pauses = [f.duration for f in faults if f.kind.startswith("pause-")]
    assert pauses and all(6.0 <= d <= 10.0 for d in pauses)


def test_a_fault_that_cannot_fit_is_left_out_and_unknown_kinds_are_refused() -> None:
    assert plan(1, 5) == []     # the first quiet gap and any fault exceed 5 s
    only_slow = plan(3, 14, ["failover-during-controlled-shutdown"])
    assert only_slow == []      # 3+ s gap, 6+ s held, 15 s to heal: not in 14 s
    with pytest.raises(ValueError, match="unknown fault kind"):
        plan(1, 60, ["kill-everything"])


# --- real clusters -----------------------------------------------------------------------------


def _ready(cluster: FaultCluster) -> FaultCluster:
    wait_for(lambda: cluster.registered() == [1, 2, 3], 30, "3 brokers registered")
    create_topic(cluster)
    wait_for(lambda: full_isrs(cluster, ALL), 60, "leaders and full ISRs")
    return cluster


@pytest.fixture(scope="module")
def zk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultCluster]:
    with start("zookeeper", tmp_path_factory.mktemp("zk")) as cluster:
        yield _ready(cluster)


def inject(cluster: FaultCluster, path: Path, kind: str, duration: float, pick: int = 0,
           during: Callable[[Held], Any] | None = None) -> tuple[Nemesis, Held, Any]:
    """One fault of ``kind`` through Nemesis.run; ``during(held)`` runs while it is in place.
    Then heal_all, and the cluster is whole again: every broker registered, full ISRs."""
    history = History(path / f"{kind}.jsonl")
    nemesis = Nemesis(cluster, history, [TOPIC], say=print)
    stop = threading.Event()
    thread = threading.Thread(target=nemesis.run, daemon=True, args=(
        [PlannedFault(at=0.0, kind=kind, duration=duration, pick=pick)], stop,
        time.monotonic()))
    thread.start()
    try:
        held: Held = wait_for(lambda: nemesis.current, 30, f"{kind} injected")
        seen = during(held) if during is not None else None
        thread.join(duration + 120)
        assert not thread.is_alive()
    finally:
        stop.set()
        thread.join(60)
        nemesis.heal_all()
        history.close()
    assert nemesis.errors == []
    assert nemesis.injected == {kind: 1} and nemesis.current is None
    assert duration <= nemesis.fault_seconds < duration + 60
    events = read_history(path / f"{kind}.jsonl")
    starts = [e for e in events if isinstance(e, FaultStart)]
    assert [(e.kind, e.target) for e in starts] == [(kind, held.target)]
    assert [e.fault for e in events if isinstance(e, FaultEnd)] == [starts[0].fault]
    assert cluster.registered() == [1, 2, 3]
    wait_for(lambda: full_isrs(cluster, ALL), 60, "full ISRs after heal_all")
    return nemesis, held, seen


def epoch(cluster: FaultCluster) -> int:
    def read(meta: MetadataClient) -> int:
        found = meta.controller_epoch()
        assert found is not None
        return found.epoch
    return cluster.on_coordinator(read)


def new_controller(cluster: FaultCluster, held: Held, before: int) -> int:
    """Wait (during the fault) for a controller other than the killed one, at a later epoch."""
    killed = held.brokers[0]
    return wait_for(lambda: (c := cluster.controller()) not in (None, killed)
                    and epoch(cluster) > before and c, 30,
                    f"a controller other than b{killed} at an epoch after {before}")


@pytest.mark.servers
@pytest.mark.long
def test_kill_controller_elects_another_and_the_heal_restarts_it(zk: FaultCluster,
                                                                  tmp_path: Path) -> None:
    before = epoch(zk)
    old = zk.controller()

    def during(held: Held) -> int:
        assert held.target == f"b{old} (controller)" and held.brokers == (old,)
        assert not zk.broker(old).running()
        return new_controller(zk, held, before)
    _, _, new = inject(zk, tmp_path, "kill-controller", 6.0, during=during)
    assert new != old and zk.broker(old).running()


@pytest.mark.servers
@pytest.mark.long
def test_a_paused_leader_loses_its_registration_and_comes_back(zk: FaultCluster,
                                                                tmp_path: Path) -> None:
    def during(held: Held) -> None:
        paused = held.brokers[0]
        assert held.target.startswith(f"b{paused} (leader of {TOPIC}-")
        assert paused in zk.paused
        wait_for(lambda: paused not in zk.registered(), 8, f"paused b{paused} expired")
        assert zk.broker(paused).running()
    _, held, _ = inject(zk, tmp_path, "pause-leader", 8.0, pick=1, during=during)
    assert not zk.paused


@pytest.mark.servers
@pytest.mark.long
def test_without_a_majority_the_coordinator_takes_no_writes(zk: FaultCluster,
                                                             tmp_path: Path) -> None:
    def write(meta: MetadataClient) -> None:
        meta.coordinator.create(f"/nemesis-probe-{time.monotonic_ns()}", b"x")

    def during(held: Held) -> None:
        assert len(held.members) == 2 and held.target.endswith("a majority")
        assert zk.ensemble is not None
        assert sum(m.running() for m in zk.ensemble.members) == 1
        with pytest.raises(Exception):  # noqa: B017 - whichever error the backend gives
            zk.on_coordinator(write, timeout=3.0)
    inject(zk, tmp_path, "kill-majority", 5.0, pick=2, during=during)
    zk.on_coordinator(write)


@pytest.mark.servers
@pytest.mark.long
def test_a_broker_cut_from_the_coordinator_is_unregistered_but_runs(zk: FaultCluster,
                                                                     tmp_path: Path) -> None:
    def during(held: Held) -> None:
        cut = held.brokers[0]
        assert f"b{cut} (" in held.target and "cut from coord1-3" in held.target
        wait_for(lambda: cut not in zk.registered(), 10, f"b{cut}'s registration expired")
        assert zk.broker(cut).running()
    inject(zk, tmp_path, "isolate-from-coordinator", 8.0, pick=2, during=during)


@pytest.mark.servers
@pytest.mark.long
def test_a_reassignment_completes_across_a_controller_failover(zk: FaultCluster,
                                                                tmp_path: Path) -> None:
    def replicas(meta: MetadataClient) -> dict[int, tuple[int, ...]]:
        return dict(meta.assignments([TOPIC])[TOPIC].value.partitions)
    before = zk.on_coordinator(replicas)
    first = epoch(zk)
    pick = 4        # partition 4 % 3 = 1 of the only topic
    _, held, _ = inject(zk, tmp_path, "failover-during-reassignment", 6.0, pick=pick,
                        during=lambda held: new_controller(zk, held, first))
    after = zk.on_coordinator(replicas)
    moved = pick % PARTITIONS
    assert after[moved] != before[moved] and set(after[moved]) == set(before[moved])
    assert f"{list(before[moved])} -> {list(after[moved])}" in held.target
    assert zk.on_coordinator(lambda m: Admin(m.coordinator).reassignments_in_progress()) == {}


@pytest.mark.servers
@pytest.mark.long
def test_a_scratch_topic_deletion_completes_across_a_controller_failover(
        zk: FaultCluster, tmp_path: Path) -> None:
    first = epoch(zk)
    _, held, _ = inject(zk, tmp_path, "failover-during-deletion", 6.0, pick=5,
                        during=lambda held: new_controller(zk, held, first))
    assert f"during deletion of {SCRATCH}-5-1" in held.target
    topics, deleting = zk.on_coordinator(lambda m: (m.topics(), m.topics_to_delete()))
    assert [t for t in topics if t.startswith(SCRATCH)] == [] and deleting == []


@pytest.mark.servers
@pytest.mark.long
def test_a_bounced_broker_comes_back_twice_with_new_epochs(zk: FaultCluster,
                                                           tmp_path: Path) -> None:
    def epochs(meta: MetadataClient) -> dict[int, int]:
        return {b: r.epoch for b, r in meta.brokers().items()}
    before = zk.on_coordinator(epochs)
    first_pids = {b: zk.broker(b).pid for b in ALL}
    _, held, _ = inject(zk, tmp_path, "bounce", 3.0, pick=1)
    bounced = held.brokers[0]
    after = zk.on_coordinator(epochs)
    assert after[bounced] > before[bounced]
    assert {b: after[b] for b in ALL - {bounced}} == {b: before[b] for b in ALL - {bounced}}
    assert zk.broker(bounced).pid != first_pids[bounced]


@pytest.mark.servers
@pytest.mark.long
def test_heal_all_says_in_one_line_what_did_not_come_back(zk: FaultCluster,
                                                          tmp_path: Path) -> None:
    """A broker that cannot start (killed at once on purpose) is named."""
    history = History(tmp_path / "h.jsonl")
    nemesis = Nemesis(zk, history, [TOPIC], say=print)
    victim = 3
    zk.kill_broker(victim)
    try:
        real_launch = zk._launch

        def broken(i: int) -> Any:
            launched = real_launch(i)
            if i == victim:
                launched.kill()
            return launched
        zk._launch = broken  # type: ignore[method-assign]
        with pytest.raises(NemesisError, match=rf"^heal_all: broker {victim} did not start") \
                as raised:
            nemesis.heal_all(timeout=20)
        assert "\n" not in str(raised.value)
    finally:
        del zk._launch  # type: ignore[attr-defined]
        nemesis.heal_all()
        history.close()
    wait_for(lambda: full_isrs(zk, ALL), 60, "full ISRs")


@pytest.mark.servers
@pytest.mark.long
def test_etcd_a_controlled_shutdown_completes_across_a_controller_failover(
        tmp_path: Path) -> None:
    with start("etcd", tmp_path / "etcd") as cluster:
        _ready(cluster)
        first = epoch(cluster)
        _, held, _ = inject(cluster, tmp_path, "failover-during-controlled-shutdown", 6.0,
                            pick=0, during=lambda held: new_controller(cluster, held, first))
        ctrl, stopped = held.brokers
        assert held.target == (f"b{ctrl} (controller) killed during controlled shutdown of "
                               f"b{stopped}")
