"""The timeline picture: a recorded history becomes a 1600x1000 PNG whose panels show the
produce outcomes, the fault window on every panel, each leader change and the controller
epochs; the command line draws a good history and refuses a corrupt one in one line."""

from __future__ import annotations

import struct
import subprocess
import sys
import types
from pathlib import Path

import pytest

import coordinator
from coordinator.codecs import PartitionStateNode, TopicPartition
from tests.faults import history as history_module
from tests.faults import timeline
from tests.faults.history import History, read_history

REPO = Path(__file__).resolve().parents[2]
TP0 = TopicPartition(topic="orders", partition=0)
TP1 = TopicPartition(topic="orders", partition=1)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class Clock:
    """A clock the history records with, moved by hand: the picture needs seconds, not the
    microseconds a test takes."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return 1.7e9 + self.now


def _state(h: History, tp: TopicPartition, leader: int, leader_epoch: int, version: int,
           *, isr: tuple[int, ...] = (1, 2, 3), create_id: int = 10) -> None:
    h.state(tp, PartitionStateNode(leader=leader, leader_epoch=leader_epoch, isr=isr,
                                   controller_epoch=1),
            coordinator.model.Stat(version=version, create_id=create_id, modify_id=100 + version))


def _record(path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Ten seconds of a run: steady acked produces on two partitions, a kill-leader fault
    from 3 s to 6 s during which attempts fail or end unknown, orders-0 going offline and
    then to broker 2 and back to broker 1 (three changes; an ISR-only write in between is
    not one), orders-1 keeping broker 3, and the controller epoch going 1 -> 2."""
    clock = Clock()
    monkeypatch.setattr(history_module, "time", types.SimpleNamespace(
        monotonic=clock.monotonic, time=clock.time))
    with History(path) as h:
        h.controller_epoch(1, 0, 1)
        _state(h, TP0, 1, 0, 0)
        _state(h, TP1, 3, 0, 0)
        fault = None
        for tick in range(100):  # every 0.1 s
            clock.now = 1000.0 + tick / 10
            if tick == 30:
                fault = h.fault_start("kill-leader", "b1 (leader of orders-0)")
                _state(h, TP0, -1, 1, 1, isr=(1,))
            if tick == 40:
                h.controller_epoch(2, 1, 120)
                _state(h, TP0, 2, 2, 2, isr=(2, 3))
            if tick == 50:
                _state(h, TP0, 2, 2, 3, isr=(2, 3, 1))  # ISR grows, same leader
            if tick == 60:
                assert fault is not None
                h.fault_end(fault)
            if tick == 80:
                _state(h, TP0, 1, 3, 4)
            for tp in (TP0, TP1):
                op = h.produce_attempt("p1", tp, [f"v{tick}-{tp.partition}"])
                clock.now += 0.004
                if 30 <= tick < 45 and tp == TP0:
                    clock.now += 0.5
                    if tick % 2:
                        h.failed(op, "NOT_LEADER_OR_FOLLOWER")
                    else:
                        h.unknown(op, "_MSG_TIMED_OUT")
                else:
                    h.acked(op, tick)
                clock.now = 1000.0 + tick / 10
    return path


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == PNG_SIGNATURE, "not a PNG"
    assert head[12:16] == b"IHDR"
    return struct.unpack(">II", head[16:24])


@pytest.fixture
def events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list:
    return read_history(_record(tmp_path / "history.jsonl", monkeypatch))


def test_the_png_is_written_at_1600_by_1000(events: list, tmp_path: Path) -> None:
    out = timeline.draw(events, tmp_path / "timeline.png", title="seed 7")
    assert out == tmp_path / "timeline.png"
    assert _png_size(out) == (1600, 1000)


def test_the_fault_window_is_shaded_on_every_panel(events: list) -> None:
    fig = timeline.figure(events)
    assert len(fig.axes) == 4
    for ax in fig.axes:
        spans = [p for p in ax.patches if p.get_gid() == "fault:kill-leader"]
        assert len(spans) == 1, ax.get_ylabel()
        (x0, _), (x1, _) = spans[0].get_bbox().get_points()
        assert (x0, x1) == pytest.approx((3.0, 6.0), abs=1e-6)
    labels = [t.get_text().strip() for t in fig.axes[0].texts]
    assert "kill-leader" in labels


def test_each_leader_change_has_one_marker(events: list) -> None:
    fig = timeline.figure(events)
    lead = fig.axes[2]
    markers = {line.get_gid(): line for line in lead.lines}
    live = markers["leader-change"]
    offline = markers["leader-offline"]
    # orders-0 (row 0): 1 -> -1 at 3 s, -1 -> 2 at 4 s, 2 -> 1 at 8 s; orders-1: none
    assert list(live.get_xdata()) == pytest.approx([4.0, 8.0])
    assert list(live.get_ydata()) == [0, 0]
    assert list(offline.get_xdata()) == pytest.approx([3.0])
    assert list(offline.get_ydata()) == [0]
    assert [t.get_text() for t in lead.get_yticklabels()] == ["orders-0", "orders-1"]


def test_the_leader_rows_and_the_epoch_step(events: list) -> None:
    origin, horizon = events[0].t, events[-1].t
    rows = timeline.leader_rows(events, origin, horizon)
    assert [r.label for r in rows] == ["orders-0", "orders-1"]
    assert [(round(s, 6), round(e, 6), leader) for s, e, leader in rows[0].segments] == [
        (0.0, 3.0, 1), (3.0, 4.0, -1), (4.0, 8.0, 2), (8.0, round(horizon - origin, 6), 1)]
    assert rows[1].changes == ()
    fig = timeline.figure(events)
    (epoch,) = [line for line in fig.axes[3].lines if line.get_gid() == "controller-epoch"]
    assert list(epoch.get_ydata()) == [1, 2, 2]


def test_the_outcomes_are_counted_per_second_and_timed(events: list) -> None:
    origin = events[0].t
    counts = timeline.throughput(events, origin, 10)
    assert sum(counts["acked"]) == 200 - 15
    assert counts["acked"][0] == 20 and counts["acked"][3] == 10
    assert sum(counts["failed"]) == 7 and sum(counts["unknown"]) == 8
    points = timeline.latencies(events, origin)
    assert len(points["unknown"][1]) == 8
    assert min(points["unknown"][1]) == pytest.approx(504, abs=0.01)
    assert min(points["unknown"][0]) == pytest.approx(3.0)  # at the attempt, not the outcome
    assert max(points["acked"][1]) == pytest.approx(4, abs=0.01)


def test_an_empty_history_is_refused() -> None:
    with pytest.raises(ValueError, match="no events"):
        timeline.figure([])


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tests.faults.timeline", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.processes
def test_the_command_line_draws_a_history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    history = _record(tmp_path / "history.jsonl", monkeypatch)
    out = tmp_path / "out.png"
    done = _cli(str(history), str(out), "--title", "a run")
    assert done.returncode == 0, done.stderr
    assert _png_size(out) == (1600, 1000)


@pytest.mark.processes
def test_the_command_line_refuses_a_corrupt_history_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    history = _record(tmp_path / "history.jsonl", monkeypatch)
    lines = history.read_text().splitlines()
    lines[4] = lines[4][:20]
    history.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.png"
    done = _cli(str(history), str(out))
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"error: {history}, line 5: not JSON: ")
    assert not out.exists()
    missing = _cli(str(tmp_path / "absent.jsonl"), str(out))
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'absent.jsonl'}: cannot read: No such file or directory"]


@pytest.mark.processes
def test_importing_the_module_does_not_import_matplotlib() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import sys, tests.faults.timeline; "
         "print(sorted(m for m in sys.modules if m.split('.')[0] == 'matplotlib'))"],
        cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.processes
def test_the_command_line_refuses_an_empty_history_and_an_unwritable_output(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    done = _cli(str(empty), str(tmp_path / "out.png"))
    assert (done.returncode, done.stderr.strip().splitlines()) == (
        2, [f"error: {empty}: no events"])
    history = _record(tmp_path / "history.jsonl", monkeypatch)
    nowhere = tmp_path / "absent" / "out.png"
    done = _cli(str(history), str(nowhere))
    assert (done.returncode, done.stderr.strip().splitlines()) == (
        2, [f"error: cannot write {nowhere}: No such file or directory"])
