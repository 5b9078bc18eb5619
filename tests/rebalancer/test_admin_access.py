"""The rebalancer's way in by Kafka's Admin API (rebalancer.admin_access), and the CLI's
``--bootstrap-server``: the pure rules first (the overlap refusal, the run's batching and
settling), then three partctl broker processes over ZooKeeper reached by bootstrap alone:
generate with sizes read from DescribeLogDirs, a throttled execute whose throttles are set while
it runs and gone after, verify, list, a preferred election, a cancel that lands mid-way (a
throttle slows the copy), the refusal of a plan that overlaps the move in progress, and a plan
whose topic was deleted meanwhile."""

from __future__ import annotations

import io
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient as KafkaAdmin

from coordinator.codecs import TopicPartition
from kafkaclient.admin import AdminClient
from partctl.cli import main
from rebalancer.access import AccessError, ClusterAccess, open_access
from rebalancer.admin_access import AdminAccess
from rebalancer.admin_execution import AdminRun, overlap_decision
from rebalancer.execution import ClaimRefused, ExecutionResult
from rebalancer.plan import PartitionMove, Plan
from rebalancer.throttles import BROKER_RATE_KEYS, TOPIC_REPLICA_KEYS
from tests.broker.data.test_cluster_clients import Trio, serving
from tests.broker.processes import coordinator_url
from tests.servers import Server
from tests.waiting import wait_until

TP = TopicPartition
VALUE = 32 * 1024


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


# --- pure ----------------------------------------------------------------------------------------


def test_a_plan_overlapping_moves_in_progress_is_refused_naming_them() -> None:
    own = {TP("t", 0): (1, 2), TP("t", 1): (2, 3)}
    assert overlap_decision(own, {}) == "create"
    assert overlap_decision(own, {TP("t", 0): (1, 2)}) == "adopt"  # this plan's, resumed
    clash = overlap_decision(own, {TP("t", 0): (3, 1)}, additional=True)
    assert isinstance(clash, ClaimRefused)
    assert "already being moved elsewhere (t-0 -> [3, 1])" in clash.reason
    other = overlap_decision(own, {TP("u", 0): (1,)})
    assert isinstance(other, ClaimRefused) and "u-0 -> [1]" in other.reason
    assert "--additional" in other.reason
    assert overlap_decision(own, {TP("u", 0): (1,)}, additional=True) == "join"


def test_a_run_batches_within_the_limits_and_settles_what_left_the_list() -> None:
    targets = {TP("t", p): (2, 3) for p in range(4)} | {TP("t", 4): (1,)}
    current = {TP("t", p): (1, 2) for p in range(4)} | {TP("t", 4): (1,)}
    run = AdminRun(targets, current, {}, window=3, per_broker=2)
    assert run.done == [TP("t", 4)]  # already there
    batch = run.next_batch()
    # each move changes brokers 1 and 3: two of them at most, though the window holds three
    assert list(batch) == [TP("t", 0), TP("t", 1)]
    run.submitted({TP("t", 0): None, TP("t", 1): "INVALID_REPLICA_ASSIGNMENT: no"})
    assert run.failed == {TP("t", 1): "refused: INVALID_REPLICA_ASSIGNMENT: no"}
    assert list(run.next_batch()) == [TP("t", 2)]
    run.submitted({TP("t", 2): None})
    assert run.seen({TP("t", 2): (2, 3)}, now=0.0) == {TP("t", 0)}
    run.settle({TP("t", 0): ((1, 2, 3), (1, 2))}, now=1.0, settle=5.0)  # metadata behind
    assert TP("t", 0) in run.in_flight
    run.settle({TP("t", 0): ((2, 3), (2,))}, now=2.0, settle=5.0)  # 3 not in sync: behind?
    assert TP("t", 0) in run.in_flight
    run.settle({TP("t", 0): ((2, 3), (3, 2))}, now=3.0, settle=5.0)
    assert run.done == [TP("t", 4), TP("t", 0)]
    # a move that left the list and never reached its target: a cancel; nothing more is sent
    run.seen({}, now=3.0)
    run.settle({TP("t", 2): ((1, 2), (1, 2))}, now=9.0, settle=5.0)
    assert "dropped before reaching [2, 3]" in run.failed[TP("t", 2)]
    assert run.stopped is not None and not run.pending and not run.busy
    assert "not started" in run.failed[TP("t", 3)]
    result = run.result(elapsed=1.0, timed_out=False, gave_up=None)
    assert isinstance(result, ExecutionResult) and result.not_sent == (TP("t", 3),)


def test_both_ways_in_or_neither_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                            tmp_path: Path) -> None:
    monkeypatch.delenv("PARTCTL_COORDINATOR", raising=False)
    plan = tmp_path / "plan.json"
    plan.write_text('{"version":1,"partitions":[]}')
    for argv in (["reassign", "list"], ["reassign", "cancel"], ["elect", "preferred"],
                 ["reassign", "verify", "--reassignment-json-file", str(plan)],
                 ["cluster", "snapshot", "-o", str(tmp_path / "s.json")]):
        code, out, err = run(*argv)
        assert (code, out) == (1, ""), argv
        assert err == ("partctl: error: no cluster: pass --bootstrap-server HOST:PORT or "
                       "--coordinator URL, or set PARTCTL_COORDINATOR\n"), argv
        code, out, err = run(*argv, "--bootstrap-server", "127.0.0.1:1",
                             "--coordinator", "memory://x")
        assert (code, err) == (1, "partctl: error: give --bootstrap-server or --coordinator, "
                                  "not both\n"), argv
    code, _, err = run("reassign", "list", "--coordinator", "memory://x", "--command-config",
                       str(plan))
    assert (code, err) == (1, "partctl: error: --command-config goes with --bootstrap-server\n")
    with pytest.raises(ValueError, match="not both"):
        open_access(coordinator_url="memory://x", bootstrap="127.0.0.1:1")
    code, _, err = run("reassign", "list", "--bootstrap-server", "127.0.0.1:1")
    assert code == 1 and len(err.splitlines()) == 1 and "127.0.0.1:1" in err, err
    missing = tmp_path / "nope.properties"
    code, _, err = run("reassign", "list", "--bootstrap-server", "127.0.0.1:1",
                       "--command-config", str(missing))
    assert code == 1 and len(err.splitlines()) == 1 and str(missing) in err, err


# --- three partctl brokers, by bootstrap -----------------------------------------------------


@pytest.fixture(scope="module")
def trio(zookeeper_server: Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Trio]:
    with serving(Trio(coordinator_url(zookeeper_server), tmp_path_factory.mktemp("trio"),
                      {})) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def access(trio: Trio) -> Iterator[AdminAccess]:
    with AdminAccess(AdminClient(trio.bootstrap), description="test") as a:
        yield a


def create(trio: Trio, access: AdminAccess, topic: str, assignment: dict[int, list[int]],
           *, fill: dict[int, int] | None = None) -> None:
    """``topic`` with ``assignment``, each partition of ``fill`` given that many values."""
    admin = KafkaAdmin({"bootstrap.servers": trio.bootstrap})
    new = ck.admin.NewTopic(topic, num_partitions=len(assignment),
                            replica_assignment=[assignment[p] for p in sorted(assignment)])
    admin.create_topics([new])[topic].result(30)
    wait_until(lambda: (t := access.admin.topics([topic]).get(topic)) is not None
               and len(t.partitions) == len(assignment)
               and all(p.leader >= 0 for p in t.partitions), timeout=30,
               message=f"{topic} has leaders")
    if fill:
        producer = ck.Producer({"bootstrap.servers": trio.bootstrap, "acks": "1",
                                "linger.ms": 5, "compression.type": "none"})
        for partition, count in fill.items():
            for _ in range(count):
                producer.produce(topic, value=os.urandom(VALUE), partition=partition)
                producer.poll(0)
        assert producer.flush(60) == 0


def write_plan(path: Path, moves: dict[TopicPartition, list[int]]) -> str:
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": tp.topic, "partition": tp.partition, "replicas": r}
        for tp, r in moves.items()]}))
    return str(path)


def throttles(access: AdminAccess, topics: list[str]) -> dict[tuple[str, str], dict[str, str]]:
    """The throttle configs set (not Kafka's defaults), per resource that has any."""
    resources = [("broker", str(b)) for b in (1, 2, 3)] + [("topic", t) for t in topics]
    out = {}
    for key, config in access.admin.describe_configs(resources).items():
        found = {k: v for k in (*BROKER_RATE_KEYS, *TOPIC_REPLICA_KEYS)
                 if (v := config.get(k)) not in (None, "", str(2**63 - 1))}
        if found:
            out[key] = found
    return out


def replicas(access: AdminAccess, topic: str) -> dict[int, tuple[int, ...]]:
    return {p.partition: p.replicas for p in access.admin.topics([topic])[topic].partitions}


def test_generate_and_snapshot_read_sizes_by_bootstrap(trio: Trio, access: AdminAccess,
                                                      tmp_path: Path) -> None:
    create(trio, access, "sized", {0: [1], 1: [1], 2: [2]}, fill={0: 40, 1: 2})
    assert isinstance(access, ClusterAccess)
    view = access.view()
    assert dict(view.brokers) == {1: None, 2: None, 3: None}
    assert view.sizes_known and view.controller in (1, 2, 3)
    sized = {p.partition: p for p in view.partitions if p.topic == "sized"}
    assert sized[0].size_bytes is not None and sized[0].size_bytes >= 40 * VALUE
    assert 0 < (sized[1].size_bytes or 0) < sized[0].size_bytes
    assert sized[0].leader == 1 and sized[0].isr == (1,)
    assert {d.broker for d in view.log_dirs} == {1, 2, 3}
    assert sum(d.replica_bytes for d in view.log_dirs if d.broker == 1) >= 42 * VALUE

    boot = ("--bootstrap-server", trio.bootstrap)
    code, out, err = run("cluster", "snapshot", *boot, "-o", str(tmp_path / "snap.json"))
    assert code == 0, err
    snap = json.loads((tmp_path / "snap.json").read_text())
    sizes = {(p["topic"], p["partition"]): p.get("size_bytes") for p in snap["partitions"]}
    assert sizes[("sized", 0)] == sized[0].size_bytes
    plan = tmp_path / "plan.json"
    code, out, err = run("reassign", "generate", *boot, "--goal", "disk", "--engine", "local",
                         "-o", str(plan))
    assert code == 0, err
    assert "Disk goal" in out and json.loads(plan.read_text())["partitions"], out


def test_a_throttled_execute_sets_the_throttles_while_it_runs_and_takes_them_off(
        trio: Trio, access: AdminAccess, tmp_path: Path) -> None:
    create(trio, access, "moved", {0: [1], 1: [1]}, fill={0: 32, 1: 32})
    plan = write_plan(tmp_path / "plan.json", {TP("moved", 0): [2, 1], TP("moved", 1): [3, 1]})
    boot = ("--bootstrap-server", trio.bootstrap)
    seen: list[dict[tuple[str, str], dict[str, str]]] = []
    halt = threading.Event()

    def watch() -> None:
        while not halt.is_set() and not seen:
            if access.in_progress():
                seen.append(throttles(access, ["moved"]))
            halt.wait(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        code, out, err = run("reassign", "execute", *boot, "--reassignment-json-file", plan,
                             "--throttle", "1MB/s", "--max-concurrent-moves", "1",
                             "--poll-interval", "0.05", "--timeout", "120")
    finally:
        halt.set()
        watcher.join(10)
    assert code == 0, (out, err)
    assert "Reassignment finished: 2 done, 0 failed" in out
    rate = {k: "1000000" for k in BROKER_RATE_KEYS}
    assert seen and seen[0][("broker", "1")] == rate, seen
    assert seen[0][("topic", "moved")] == {TOPIC_REPLICA_KEYS[0]: "0:1,1:1",
                                           TOPIC_REPLICA_KEYS[1]: "0:2,1:3"}, seen
    assert throttles(access, ["moved"]) == {}  # execute took them off: every move finished
    assert replicas(access, "moved") == {0: (2, 1), 1: (3, 1)}

    code, out, err = run("reassign", "verify", *boot, "--reassignment-json-file", plan)
    assert code == 0 and "2 done, 0 in progress, 0 failed." in out, (out, err)
    assert run("reassign", "list", *boot)[1] == "No partition reassignments found.\n"
    code, out, err = run("elect", "preferred", *boot, "--topic", "moved")
    assert code == 0 and "0 failed" in out, (out, err)
    wait_until(lambda: access.admin.topics(["moved"])["moved"].partitions[0].leader == 2,
               timeout=30, message="the preferred leader 2 leads moved-0")


def test_a_cancel_lands_mid_way_and_overlapping_plans_are_refused(
        trio: Trio, access: AdminAccess, tmp_path: Path) -> None:
    create(trio, access, "slow", {0: [1]}, fill={0: 64})  # 2 MiB at 50 kB/s: 40 s
    create(trio, access, "beside", {0: [1]})
    boot = ("--bootstrap-server", trio.bootstrap)
    results: list[ExecutionResult] = []
    plan = Plan(partitions=(PartitionMove(topic="slow", partition=0, replicas=(1, 2)),))

    def move() -> None:
        with access_for(trio) as mine:
            results.append(mine.execute(plan, throttle=50_000, poll_interval=0.05,
                                        timeout=120))

    mover = threading.Thread(target=move)
    mover.start()
    try:
        wait_until(lambda: TP("slow", 0) in access.in_progress(), timeout=30,
                   message="slow-0 moving")
        code, out, _ = run("reassign", "list", *boot)
        assert out == ("Current partition reassignments:\n"
                       "slow-0: replicas: 1,2. adding: 2.\n"), out
        clash = write_plan(tmp_path / "clash.json", {TP("slow", 0): [1, 3]})
        code, out, err = run("reassign", "execute", *boot, "--reassignment-json-file", clash)
        assert code == 1 and len(err.splitlines()) == 1, err
        assert "already being moved elsewhere (slow-0 -> [1, 2])" in err
        other = write_plan(tmp_path / "other.json", {TP("beside", 0): [2]})
        code, out, err = run("reassign", "execute", *boot, "--reassignment-json-file", other)
        assert code == 1 and "slow-0 -> [1, 2]" in err and "--additional" in err, err
        assert replicas(access, "beside") == {0: (1,)}  # nothing moved after a refusal

        code, out, err = run("reassign", "cancel", *boot)
        assert code == 0 and "slow-0: reverted to [1] (was moving to [1, 2])" in out, (out, err)
    finally:
        mover.join(120)
    (result,) = results
    assert not result.ok and "dropped before reaching [1, 2]" in result.failed[TP("slow", 0)]
    wait_until(lambda: replicas(access, "slow") == {0: (1,)}, timeout=30, message="reverted")
    assert access.in_progress() == {}
    # the move did not finish, so its throttles stay until removed (verify would, once done)
    assert throttles(access, ["slow"])[("topic", "slow")] == {
        TOPIC_REPLICA_KEYS[0]: "0:1", TOPIC_REPLICA_KEYS[1]: "0:2"}
    removed = access.remove_throttles(["slow"])
    assert removed.brokers == (1, 2) and set(removed.topics) == {"slow"}
    assert throttles(access, ["slow"]) == {}


def access_for(trio: Trio) -> AdminAccess:
    """An access of its own (a connection per thread, as two tools would have)."""
    return AdminAccess(AdminClient(trio.bootstrap), description="mover")


def test_a_plan_naming_a_topic_deleted_meanwhile_is_one_line_and_moves_nothing(
        trio: Trio, access: AdminAccess, tmp_path: Path) -> None:
    create(trio, access, "doomed", {0: [1], 1: [2]})
    create(trio, access, "kept", {0: [1]})
    plan = write_plan(tmp_path / "plan.json", {TP("doomed", 0): [3], TP("doomed", 1): [3],
                                               TP("kept", 0): [3]})
    kafka = KafkaAdmin({"bootstrap.servers": trio.bootstrap})
    kafka.delete_topics(["doomed"])["doomed"].result(30)
    wait_until(lambda: "doomed" not in access.admin.topics(["doomed"]), timeout=30,
               message="doomed gone")
    code, out, err = run("reassign", "execute", "--bootstrap-server", trio.bootstrap,
                         "--reassignment-json-file", plan)
    assert (code, out) == (1, ""), err
    assert err == ("partctl: error: topic doomed does not exist (deleted since the plan was "
                   "made?): the plan moves 2 partition(s) of it; nothing was moved\n")
    assert access.in_progress() == {} and replicas(access, "kept") == {0: (1,)}
    with pytest.raises(AccessError, match="cannot reach any bootstrap server"):
        AdminAccess(AdminClient("127.0.0.1:1", timeout=2), description="x").view()
