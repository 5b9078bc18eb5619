"""One clock for every package: ``coordinator.clock`` is the only module that defines a clock
(a class named ``*Clock*`` that reads the time: ``now_ms``, ``monotonic``, or called), tests included, save the
tests' own subclasses of its :class:`ManualClock`; the layers below the broker take a ``clock``
as a :class:`Clock`, never as a bare callable; and the manual clock behaves as its tests rely
on (moves only forward, sleeps by moving, one time read two ways)."""

from __future__ import annotations

import ast
import time
from pathlib import Path

import pytest

from coordinator.clock import SYSTEM_CLOCK, Clock, ManualClock, SystemClock

REPO = Path(__file__).resolve().parents[1]
SCANNED = ("coordinator", "elections", "interbroker", "statemachines", "replication", "node", "kafkaclient",
           "broker", "rebalancer", "partctl", "migrations", "benchmarks", "tests")
HOME = "coordinator/clock.py"
READINGS = {"now_ms", "monotonic", "now", "time", "__call__"}
"""What a clock of its own would read the time with (the tests' old ones were callables)."""
TYPED = ("coordinator", "elections", "interbroker", "statemachines", "replication", "node")
"""The packages whose every ``clock`` parameter or field is a :class:`Clock`."""
NOT_YET = {
    # the fault history's picture clock (seconds and wall time, not a Clock): left as it is
    # while another change owns that test
    "tests/faults/test_timeline.py",
}


def _modules(*packages: str) -> list[Path]:
    return sorted(p for package in packages for p in (REPO / package).rglob("*.py")
                  if ".venv" not in p.parts)


def _clock_classes(path: Path, root: Path = REPO) -> list[str]:
    """The classes in ``path`` named like a clock that read the time, unless they subclass
    ManualClock."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.ClassDef) or "clock" not in node.name.lower():
            continue
        bases = {b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute)
                 else "" for b in node.bases}
        methods = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
        if methods & READINGS and "ManualClock" not in bases:
            found.append(f"{path.relative_to(root)}: class {node.name}")
    return found


def test_no_module_but_coordinator_clock_defines_a_clock() -> None:
    assert (REPO / HOME).is_file()
    defined = [c for path in _modules(*SCANNED)
               if path.relative_to(REPO).as_posix() not in {HOME, *NOT_YET}
               for c in _clock_classes(path)]
    assert defined == []


def test_the_scan_sees_a_clock_of_its_own_and_lets_a_manual_clocks_subclass_pass(
        tmp_path: Path) -> None:
    own = tmp_path / "own.py"
    own.write_text("class Clock:\n    def now_ms(self): return 0\n"
                   "class FakeClock(ManualClock):\n    def now_ms(self): return 0\n"
                   "class ClockSkew:\n    def apply(self): pass\n")
    assert _clock_classes(own, tmp_path) == ["own.py: class Clock"]


def _annotation(node: ast.expr | None) -> str:
    return "" if node is None else ast.unparse(node)


def test_the_lower_layers_take_a_clock_never_a_callable() -> None:
    """Every parameter and dataclass field named ``clock`` below the broker is annotated
    ``Clock`` (with SYSTEM_CLOCK as its default where it has one)."""
    wrong = []
    for path in _modules(*TYPED):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            named: list[tuple[str, ast.expr | None, ast.expr | None]] = []
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                args = node.args
                positional = [*args.posonlyargs, *args.args]
                defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
                named += [(a.arg, a.annotation, d) for a, d in
                          zip(positional, [*defaults, *args.defaults], strict=True)]
                named += [(a.arg, a.annotation, d) for a, d in
                          zip(args.kwonlyargs, args.kw_defaults, strict=True)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                named.append((node.target.id, node.annotation, node.value))
            for name, annotation, default in named:
                if name != "clock":
                    continue
                if (_annotation(annotation) != "Clock"
                        or default is not None and _annotation(default) != "SYSTEM_CLOCK"):
                    wrong.append(f"{path.relative_to(REPO)}:{getattr(annotation, 'lineno', 0)}"
                                 f" clock: {_annotation(annotation)}"
                                 f" = {_annotation(default) or '(none)'}")
    assert wrong == []


def test_the_clocks_are_clocks() -> None:
    assert isinstance(SYSTEM_CLOCK, SystemClock)
    assert isinstance(SYSTEM_CLOCK, Clock) and isinstance(ManualClock(), Clock)
    assert abs(SYSTEM_CLOCK.now_ms() / 1000 - time.time()) < 5


def test_a_manual_clock_moves_forward_only_when_told() -> None:
    clock = ManualClock(5_000)
    assert clock.now_ms() == 5_000 and clock.monotonic() == 5.0
    assert clock.now_ms() == 5_000  # reading does not move it
    assert clock.advance(250) == 5_250
    assert clock.now_ms() == 5_250 and clock.monotonic() == pytest.approx(5.25)
    assert clock.advance(0) == 5_250
    with pytest.raises(ValueError, match="backwards"):
        clock.advance(-1)
    clock.set(9_000)
    assert clock.now_ms() == 9_000 and clock.monotonic() == 9.0
    clock.set(9_000)  # standing still is allowed
    with pytest.raises(ValueError, match="backwards"):
        clock.set(8_999)
    assert clock.now_ms() == 9_000


def test_a_manual_clocks_sleep_returns_at_once_having_moved_it() -> None:
    clock = ManualClock(0)
    clock.sleep(1.5)
    assert clock.now_ms() == 1_500 and clock.monotonic() == 1.5
    clock.sleep(0.0004)  # rounds to the millisecond
    assert clock.now_ms() == 1_500
    clock.sleep(0.0006)
    assert clock.now_ms() == 1_501
    assert ManualClock().now_ms() == 1_000_000  # the default start
