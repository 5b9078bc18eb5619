"""``partctl cluster snapshot`` and ``partctl reassign generate|execute|verify|cancel`` end to end:
against a live memory cluster in-process, and against real ZooKeeper with the installed command
in subprocesses while participants in this process run the controller.

Recording brokers do not replicate, so a ``Followers`` thread plays the data plane: once the
controller adds replicas to a partition, its leader puts them in the ISR (``change_isr``).
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import coordinator
from coordinator.admin import Admin
from coordinator.codecs import TopicPartition
from coordinator.metadata import MetadataClient
from partctl.cli import main
from partctl.render import ProgressDisplay
from rebalancer.execution import ExecutionProgress
from rebalancer.snapshot import load_snapshot
from statemachines.in_process import InProcessNetwork
from statemachines.participant import Participant
from tests.proxy import TcpProxy
from tests.recording_broker import RecordingBroker, change_isr
from tests.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


class Followers(threading.Thread):
    """Added replicas join the ISR through the partition leader, unless paused."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.md = MetadataClient(coordinator.connect(url))
        self.running = threading.Event()
        self.running.set()
        self._halt = threading.Event()

    def run(self) -> None:
        md = self.md
        while not self._halt.wait(0.01):
            if not self.running.is_set():
                continue
            try:
                for topic, a in md.assignments(md.topics()).items():
                    for p, adding in a.value.adding.items():
                        key = TopicPartition(topic, p)
                        state = md.partition_states([key])[key]
                        if state is not None and set(adding) - set(state.value.isr):
                            change_isr(md, key, [*state.value.isr,
                                                 *(b for b in adding if b not in state.value.isr)])
            except Exception:  # the cluster is going away
                pass

    def close(self) -> None:
        self._halt.set()
        self.join(5)
        self.md.coordinator.close()


class Live:
    """Participants (broker + controller candidate) on one coordinator, with followers."""

    def __init__(self, url: str, brokers: tuple[int, ...] = (1, 2, 3, 4)) -> None:
        self.url = url
        self.network = InProcessNetwork()
        self.participants = [Participant(url, b, handler=RecordingBroker, rack=f"r{b % 2}",
                                         network=self.network).start()
                             for b in brokers]
        self.client = coordinator.connect(url)
        self.md = MetadataClient(self.client)
        wait_until(lambda: self.md.controller() is not None, timeout=15)
        self.followers = Followers(url)
        self.followers.start()

    def create(self, topic: str, assignment: dict[int, list[int]]) -> None:
        Admin(self.client).create_topic(topic, assignment=assignment)
        keys = [TopicPartition(topic, p) for p in assignment]
        wait_until(lambda: all(s is not None for s in self.md.partition_states(keys).values()),
                   timeout=15, message=f"{topic} online")

    def replicas(self, topic: str) -> dict[int, tuple[int, ...]]:
        return dict(self.md.assignments([topic])[topic].value.partitions)

    def close(self) -> None:
        self.followers.close()
        for p in self.participants:
            p.close()
        self.client.close()


@pytest.fixture
def live() -> Iterator[Live]:
    cluster = Live(f"memory://reassign-{uuid.uuid4().hex[:10]}")
    yield cluster
    cluster.close()


def skewed(live: Live) -> None:
    """Two topics crowded onto brokers 1 and 2; brokers 3 and 4 are empty."""
    live.create("orders", {p: [1 + p % 2, 2 - p % 2] for p in range(8)})
    live.create("audit", {p: [1, 2] for p in range(4)})


def test_snapshot_generate_execute_verify_on_a_live_cluster(live: Live, tmp_path: Path) -> None:
    skewed(live)
    snap_path, plan_path = tmp_path / "snap.json", tmp_path / "plan.json"
    code, out, err = run("cluster", "snapshot", "--coordinator", live.url, "-o", str(snap_path))
    assert code == 0, err
    assert out == (f"Wrote a snapshot of 4 brokers (2 racks) and 12 partitions (2 topics) to "
                   f"{snap_path}.\n")
    snap = load_snapshot(snap_path)
    assert snap.partitions[0].replicas == (1, 2) and not snap.has_sizes

    code, out, err = run("reassign", "generate", "--snapshot", str(snap_path), "--goal",
                         "balance", "--engine", "local", "-o", str(plan_path))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "Current -> proposed assignment, per broker:"
    assert lines[1].split() == ["Broker", "Rack", "Replicas", "Leaders"]
    assert lines[2].split() == ["1", "r1", "12", "->", "6", "8", "->", "3"]
    assert lines[4].split()[:5] == ["3", "r1", "0", "->", "6"]
    assert "Replica spread (max-min per broker): 12 -> 0" in out
    assert "Rack violations:" in out and "Partitions moved: " in out
    plan = json.loads(plan_path.read_text())
    assert plan["version"] == 1 and plan["partitions"]
    assert f"Proposed reassignment of {len(plan['partitions'])} partition(s) written" in out

    code, out, err = run("reassign", "execute", "--coordinator", live.url,
                         "--reassignment-json-file", str(plan_path),
                         "--max-concurrent-moves", "3", "--timeout", "30",
                         "--poll-interval", "0.05", "--status-every", "0")
    assert code == 0, (out, err)
    lines = out.splitlines()
    n = len(plan["partitions"])
    assert lines[0] == f"Executing a reassignment of {n} partition(s), at most 3 at a time."
    assert lines[1].startswith(f"0/{n} done, 3 moving, 0 failed, {n - 3} waiting")
    assert any(line.startswith(f"{n}/{n} done, 0 moving, 0 failed, 0 waiting")
               for line in lines)
    assert lines[-1].startswith(f"Reassignment finished: {n} done, 0 failed in ")
    for entry in plan["partitions"]:
        assert live.replicas(entry["topic"])[entry["partition"]] == tuple(entry["replicas"])

    code, out, err = run("reassign", "verify", "--coordinator", live.url,
                         "--reassignment-json-file", str(plan_path))
    assert code == 0, err
    assert out.count("is completed.") == n and out.endswith(f"{n} done, 0 in progress, 0 failed.\n")

    # balanced now: a plan from the live cluster moves nothing
    again = tmp_path / "again.json"
    code, out, _ = run("reassign", "generate", "--coordinator", live.url, "--engine", "local",
                       "-o", str(again))
    assert code == 0 and "Nothing to move" in out
    assert json.loads(again.read_text()) == {"version": 1, "partitions": []}


def test_snapshot_plot_draws_the_current_load(live: Live, tmp_path: Path) -> None:
    skewed(live)
    snap_path, png = tmp_path / "snap.json", tmp_path / "cluster.png"
    code, out, err = run("cluster", "snapshot", "--coordinator", live.url, "-o", str(snap_path),
                         "--plot", str(png))
    assert code == 0, err
    assert out.splitlines()[-1] == f"Picture of the load per broker written to {png}."
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    # no sizes: two panels (replicas, leaders), 2.6 inches each plus 0.8 at 100 dpi
    assert int.from_bytes(data[20:24], "big") == 600
    code, out, err = run("cluster", "snapshot", "--coordinator", live.url, "-o",
                         str(tmp_path / "again.json"), "--plot", str(tmp_path / "no" / "c.png"))
    assert (code, out) == (1, "") and err.count("\n") == 1
    assert err.startswith(f"partctl: error: cannot write --plot {tmp_path / 'no' / 'c.png'}: ")
    assert not (tmp_path / "again.json").exists()


def test_generate_goals_and_kafkas_scoping_options(live: Live, tmp_path: Path) -> None:
    skewed(live)
    plan_path = tmp_path / "plan.json"
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": "audit"}]}))
    code, out, err = run("reassign", "generate", "--coordinator", live.url, "--engine", "local",
                         "--topics-to-move-json-file", str(topics), "--brokers", "3,4",
                         "-o", str(plan_path))
    assert code == 0, err
    plan = json.loads(plan_path.read_text())["partitions"]
    assert {e["topic"] for e in plan} == {"audit"} and len(plan) == 4
    assert all(sorted(e["replicas"]) == [3, 4] for e in plan)

    code, out, err = run("reassign", "generate", "--coordinator", live.url, "--engine", "local",
                         "--goal", "decommission", "--decommission", "1", "-o", str(plan_path))
    assert code == 0, err
    assert "1 (leaving)" in out
    assert all(1 not in e["replicas"] for e in json.loads(plan_path.read_text())["partitions"])

    code, out, err = run("reassign", "generate", "--coordinator", live.url, "--engine", "local",
                         "--goal", "replication-factor", "--replication-factor", "audit=3",
                         "-o", str(plan_path))
    assert code == 0, err
    plan = json.loads(plan_path.read_text())["partitions"]
    assert {e["topic"] for e in plan} == {"audit"} and all(len(e["replicas"]) == 3 for e in plan)
    assert "replication factor changes: 4" in out
    # an RF change for the whole topic is executable
    code, out, err = run("reassign", "execute", "--coordinator", live.url,
                         "--reassignment-json-file", str(plan_path), "--timeout", "30",
                         "--poll-interval", "0.05")
    assert code == 0, (out, err)
    assert all(len(r) == 3 for r in live.replicas("audit").values())

    code, _, err = run("reassign", "generate", "--coordinator", live.url, "--goal",
                       "add-brokers", "--new-brokers", "3", "--engine", "local",
                       "-o", str(plan_path))
    assert code == 0, err


def test_generate_errors_are_one_line_each(live: Live, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PARTCTL_COORDINATOR", raising=False)
    skewed(live)
    out_path = str(tmp_path / "p.json")
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": "nope"}]}))
    cases = [
        (["--brokers", "3,9"], ["broker 9 (--brokers) is not in the cluster"]),
        (["--topics-to-move-json-file", str(topics)], ["topic nope does not exist"]),
        (["--goal", "decommission"], ["--goal decommission needs --decommission"]),
        (["--goal", "replication-factor", "--replication-factor", "audit=x"],
         ["bad --replication-factor"]),
        (["--goal", "replication-factor", "--replication-factor", "audit=9,nope=2"],
         ["topic nope does not exist", "topic audit: replication factor 9 exceeds the 4"]),
        (["--decommission", "7", "--new-brokers", "8"],
         ["cannot decommission broker 7: it is not registered",
          "new broker 8 is not registered"]),
    ]
    for argv, messages in cases:
        code, out, err = run("reassign", "generate", "--coordinator", live.url, "--engine",
                             "local", "-o", out_path, *argv)
        assert code == 1, argv
        lines = err.splitlines()
        assert len(lines) == len(messages), (argv, err)
        for line, message in zip(lines, messages, strict=True):
            assert line.startswith("partctl: error: ") and message in line, (argv, err)
    code, _, err = run("reassign", "generate", "-o", out_path)
    assert code == 1 and ("give --snapshot FILE, or a cluster: --bootstrap-server HOST:PORT or "
                          "--coordinator URL (or set") in err
    code, _, err = run("reassign", "generate", "-o", out_path, "--snapshot", "s.json",
                       "--coordinator", live.url)
    assert code == 1 and err == ("partctl: error: give --snapshot FILE or a cluster "
                                 "(--bootstrap-server or --coordinator), not both\n")
    monkeypatch.setenv("PARTCTL_COORDINATOR", live.url)  # the environment names the cluster
    assert run("reassign", "generate", "--engine", "local", "-o", out_path)[0] == 0
    Path(out_path).unlink()
    code, _, err = run("reassign", "generate", "--snapshot", str(tmp_path / "missing.json"),
                       "-o", out_path)
    assert code == 1 and err.count("\n") == 1 and "missing.json" in err
    assert not Path(out_path).exists()


def test_execute_rejects_a_bad_plan_whole_and_writes_nothing(live: Live, tmp_path: Path) -> None:
    live.create("t", {0: [1, 2], 1: [2, 3], 2: [3, 4]})
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 7]},
        {"topic": "t", "partition": 1, "replicas": [4, 4]},
        {"topic": "t", "partition": 2, "replicas": [1, 2, 3]},
        {"topic": "x", "partition": 0, "replicas": [1, 2]},
        {"topic": "t", "partition": 0, "replicas": [2, 1]},
    ]}))
    code, out, err = run("reassign", "execute", "--coordinator", live.url,
                         "--reassignment-json-file", str(bad))
    assert code == 1 and out == ""
    assert err.splitlines() == [
        "partctl: error: partition t-0 names unknown brokers [7]",
        "partctl: error: partition t-1 lists broker(s) [4] more than once",
        "partctl: error: partition x-0 does not exist",
        "partctl: error: partition t-0 is listed twice",
        "partctl: error: partition t-2 changes replication factor 2 -> 3, but not every "
        "partition of topic t goes to 3 replicas",
    ]
    bad.write_text('{"version": 1, "partitions": [')
    code, _, err = run("reassign", "execute", "--coordinator", live.url,
                       "--reassignment-json-file", str(bad))
    assert code == 1 and err.count("\n") == 1 and "not valid JSON" in err
    code, _, err = run("reassign", "execute", "--coordinator", live.url,
                       "--reassignment-json-file", str(tmp_path / "none.json"))
    assert code == 1 and err.startswith("partctl: error: cannot read --reassignment-json-file")
    assert live.md.reassignment() is None
    assert live.replicas("t") == {0: (1, 2), 1: (2, 3), 2: (3, 4)}


def test_bad_throttle_options_are_one_error_line_each_and_change_nothing(
        live: Live, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    live.create("t", {0: [1, 2]})
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 3]}]}))
    cases = [
        (["--throttle", "-5"], "argument --throttle: the rate must be at least 1 byte"),
        (["--throttle", "x"], "argument --throttle: not a rate: 'x' (bytes per second"),
        (["--throttle", "0"], "argument --throttle: the rate must be at least 1 byte"),
        (["--max-moves-per-broker", "0"], "argument --max-moves-per-broker: must be at least"),
    ]
    for argv, message in cases:
        with pytest.raises(SystemExit) as usage:  # argparse: its usage, then one error line
            run("reassign", "execute", "--coordinator", live.url,
                "--reassignment-json-file", str(plan), *argv)
        assert usage.value.code == 2
        err = capsys.readouterr().err
        errors = [line for line in err.splitlines() if "error:" in line]
        assert len(errors) == 1 and message in errors[0], (argv, err)
        assert "Traceback" not in err
    assert live.md.reassignment() is None and live.md.broker_config(1) is None
    assert not live.md.topic_config("t")


def test_execute_refuses_while_in_progress_then_cancel_reverts(live: Live, tmp_path: Path
                                                                ) -> None:
    live.create("t", {0: [1, 2], 1: [2, 3], 2: [3, 4]})
    live.followers.running.clear()  # moves stall until cancelled
    live.md.request_reassignment({TopicPartition("t", 0): [3, 4],
                                  TopicPartition("t", 1): [2, 1]})
    wait_until(lambda: 0 in live.md.assignments(["t"])["t"].value.adding, timeout=10)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [3, 4]},
        {"topic": "t", "partition": 2, "replicas": [4, 1]}]}))
    code, out, err = run("reassign", "execute", "--coordinator", live.url,
                         "--reassignment-json-file", str(plan))
    assert code == 1 and out == ""
    assert err == ("partctl: error: a partition reassignment of 2 partition(s) is already in "
                   "progress, with moves that are not this plan's (t-1 -> [2, 1]) and no partctl "
                   "execute running it: verify or cancel it first, or add this plan to it with "
                   "--additional\n")

    code, out, err = run("reassign", "verify", "--coordinator", live.url,
                         "--reassignment-json-file", str(plan))
    assert code == 1, err
    assert out.splitlines() == [
        "Reassignment of partition t-0 is still in progress.",
        "Reassignment of partition t-2 failed: replicas are [3, 4], not [4, 1], and no move is "
        "pending.",
        "0 done, 1 in progress, 1 failed.",
    ]

    code, out, err = run("reassign", "cancel", "--coordinator", live.url)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "t-0: reverted to [1, 2] (was moving to [3, 4])"
    assert lines[1] in ("t-1: dropped before it started, stays at [2, 3] (was to move to "
                        "[2, 1])", "t-1: reverted to [2, 3] (was moving to [2, 1])")
    assert lines[2].startswith("Cancelled 2 pending move(s): ")
    assert live.md.reassignment() is None
    assert live.replicas("t") == {0: (1, 2), 1: (2, 3), 2: (3, 4)}
    code, out, _ = run("reassign", "cancel", "--coordinator", live.url)
    assert code == 0 and out == "No reassignment is in progress: nothing to cancel.\n"


def test_execute_additional_adds_a_plan_to_the_reassignment_in_progress(
        live: Live, tmp_path: Path) -> None:
    """Kafka's ``--additional``: the plan's moves join the ones in progress (left by another
    tool), which carry on beside them; a partition of the plan already moving elsewhere is
    still refused, with one line and nothing written."""
    live.create("t", {0: [1, 2], 1: [2, 3], 2: [3, 4], 3: [4, 1]})
    live.followers.running.clear()  # the moves in progress stall until the plan has joined
    live.md.request_reassignment({TopicPartition("t", 0): [3, 4],
                                  TopicPartition("t", 1): [2, 1]})
    wait_until(lambda: 0 in live.md.assignments(["t"])["t"].value.adding, timeout=10)
    clash = tmp_path / "clash.json"
    clash.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 1, "replicas": [3, 2]},
        {"topic": "t", "partition": 2, "replicas": [4, 1]}]}))
    code, out, err = run("reassign", "execute", "--coordinator", live.url, "--additional",
                         "--reassignment-json-file", str(clash))
    assert (code, out) == (1, "")
    assert err == ("partctl: error: partitions of this plan are already moving elsewhere "
                   "(t-1 -> [2, 1]): cancel those moves first, or leave them out of the plan\n")
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [3, 4]},  # the same move: followed
        {"topic": "t", "partition": 2, "replicas": [4, 1]},
        {"topic": "t", "partition": 3, "replicas": [1, 2]}]}))
    done: list[tuple[int, str, str]] = []
    executing = threading.Thread(target=lambda: done.append(run(
        "reassign", "execute", "--coordinator", live.url, "--additional",
        "--max-concurrent-moves", "2", "--poll-interval", "0.05", "--timeout", "60",
        "--reassignment-json-file", str(plan))))
    executing.start()
    try:  # within its window of 2 (the other tool's move not counted), beside the other's
        wait_until(lambda: set(moves(live)) == {TopicPartition("t", p) for p in (0, 1, 2)},
                   timeout=10, message="the plan's first moves beside the other's")
    finally:
        live.followers.running.set()
        executing.join(60)
    code, out, err = done[0]
    assert code == 0, out + err
    assert "in addition to the moves in progress" in out
    wait_until(lambda: live.md.reassignment() is None, timeout=10)
    assert live.replicas("t") == {0: (3, 4), 1: (2, 1), 2: (4, 1), 3: (1, 2)}


def moves(live: Live) -> dict[TopicPartition, tuple[int, ...]]:
    node = live.md.reassignment()
    return {} if node is None else dict(node.value)


def test_plain_progress_lines_are_periodic() -> None:
    out = io.StringIO()
    with ProgressDisplay(out, every=3600) as show:
        show(ExecutionProgress(total=4, done=0, in_flight=2, failed=0))
        show(ExecutionProgress(total=4, done=1, in_flight=2, failed=0))  # within the period
        show(ExecutionProgress(total=4, done=4, in_flight=0, failed=0))
    lines = out.getvalue().splitlines()
    assert [line.split(" (")[0] for line in lines] == [
        "0/4 done, 2 moving, 0 failed, 2 waiting", "4/4 done, 0 moving, 0 failed, 0 waiting"]


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_a_progress_bar() -> None:
    out = FakeTTY()
    with ProgressDisplay(out) as show:
        show(ExecutionProgress(total=4, done=2, in_flight=2, failed=0))
        show(ExecutionProgress(total=4, done=4, in_flight=0, failed=0))
    text = out.getvalue()
    assert "4/4" in text and "moving 0, failed 0" in text and " done," not in text


def test_the_installed_command_against_real_zookeeper(zookeeper_server, tmp_path: Path
                                                      ) -> None:  # noqa: ANN001
    url = f"zookeeper://{zookeeper_server.address}/t{uuid.uuid4().hex[:10]}"
    cluster = Live(url)
    try:
        skewed(cluster)
        env = {**os.environ, "PARTCTL_COORDINATOR": url}
        exe = [sys.executable, "-m", "partctl"]

        def cli(*argv: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([*exe, *argv], env=env, capture_output=True, text=True,
                                  timeout=120, cwd=REPO)

        snap, plan = tmp_path / "snap.parquet", tmp_path / "plan.json"
        done = cli("cluster", "snapshot", "-o", str(snap), "--new-brokers", "3,4")
        assert done.returncode == 0, done.stderr
        assert "4 brokers (2 racks) and 12 partitions" in done.stdout
        assert load_snapshot(snap).new_brokers == {3, 4}
        done = cli("reassign", "generate", "--snapshot", str(snap), "--goal", "add-brokers",
                   "--engine", "local", "-o", str(plan))
        assert done.returncode == 0, done.stderr
        moves = json.loads(plan.read_text())["partitions"]
        assert moves and all(len(e["replicas"]) == 2 for e in moves)
        done = cli("reassign", "execute", "--reassignment-json-file", str(plan),
                   "--max-concurrent-moves", "4", "--timeout", "60", "--status-every", "1")
        assert done.returncode == 0, (done.stdout, done.stderr)
        assert done.stdout.splitlines()[-1].startswith(
            f"Reassignment finished: {len(moves)} done, 0 failed")
        assert "Traceback" not in done.stderr
        for e in moves:
            assert cluster.replicas(e["topic"])[e["partition"]] == tuple(e["replicas"])
        assert cluster.md.reassignment() is None
        done = cli("reassign", "verify", "--reassignment-json-file", str(plan))
        assert done.returncode == 0 and done.stdout.count("is completed.") == len(moves)
        # a stalled move, cancelled from another process
        cluster.followers.running.clear()
        back = tmp_path / "back.json"
        back.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "audit", "partition": 0,
             "replicas": [b for b in (1, 2, 3, 4)
                          if b not in cluster.replicas("audit")[0]]}]}))
        before = cluster.replicas("audit")[0]
        done = cli("reassign", "execute", "--reassignment-json-file", str(back),
                   "--timeout", "1")
        assert done.returncode == 1 and "timed out" in done.stdout
        done = cli("reassign", "cancel")
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"audit-0: reverted to {list(before)}")
        assert cluster.replicas("audit")[0] == before and cluster.md.reassignment() is None
    finally:
        cluster.close()


@pytest.mark.parametrize("backend", ["zookeeper", "etcd"])
def test_execute_gives_up_on_a_long_outage_with_a_summary_and_execute_again_resumes(
        backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """The executor's connection (through a proxy) is cut with its first move submitted and not
    restored: past twice its session timeout it stops, says what was submitted, what was done
    and what was never sent, and how to resume; run again, it finishes the plan."""
    server = request.getfixturevalue(f"{backend}_server")
    root = f"/t{uuid.uuid4().hex[:10]}"
    cluster = Live(f"{backend}://{server.address}{root}")
    proxy = TcpProxy(server.host, server.port)
    try:
        cluster.create("t", {0: [1, 2], 1: [2, 1], 2: [1, 2]})
        cluster.followers.running.clear()
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "t", "partition": p, "replicas": [3, 4]} for p in range(3)]}))
        via = f"{backend}://{proxy.address}{root}"
        argv = ["reassign", "execute", "--coordinator", via, "--reassignment-json-file",
                str(plan), "--max-concurrent-moves", "1", "--session-timeout", "1",
                "--poll-interval", "0.05", "--status-every", "60"]

        def cut_once_submitted() -> None:
            wait_until(lambda: cluster.md.reassignment() is not None, timeout=30,
                       message="the first move submitted")
            proxy.hold()
            cluster.followers.running.set()  # the cluster carries on without the executor

        cutter = threading.Thread(target=cut_once_submitted)
        cutter.start()
        code, out, err = run(*argv)
        cutter.join(30)
        assert code == 1 and err == "", (out, err)
        lines = out.splitlines()
        assert lines[0] == "Executing a reassignment of 3 partition(s), at most 1 at a time."
        assert lines[2].startswith("Reassignment stopped: 0 done, 3 failed in ")
        assert re.fullmatch(r"Stopped: the coordinator could not be reached for \d+s \(.+\)\.",
                            lines[3])
        assert re.fullmatch(r"  t-0: still moving to \[3, 4\] when the coordinator could not be "
                            r"reached for \d+s \(the controller carries on: verify follows it, "
                            r"cancel reverts it\)", lines[4])
        assert re.fullmatch(r"  t-1: not started: the coordinator could not be reached for \d+s",
                            lines[5])
        assert lines[-3:] == [
            "Submitted, still moving (the controller carries on): 1 partition(s): t-0.",
            "Not yet sent: 2 partition(s): t-1, t-2.",
            "To resume, run `partctl reassign execute` again with the same plan file (it takes "
            "over the moves still pending); `partctl reassign cancel` reverts them instead; "
            "`partctl reassign verify` follows them."]
        assert "Traceback" not in out
        proxy.release()
        wait_until(lambda: cluster.client.exists("/admin/reassign_partitions_owner") is None,
                   timeout=30, message="the stopped run's session gone")
        code, out, err = run(*argv)
        assert code == 0, (out, err)
        assert out.splitlines()[-1].startswith("Reassignment finished: 3 done, 0 failed")
        assert all(cluster.replicas("t")[p] == (3, 4) for p in range(3))
    finally:
        proxy.close()
        cluster.close()
