"""The controller's modules import each other in one direction.

Every import counts, wherever it is written (tests/imports.py walks them: at the top, inside a
function, or under ``if TYPE_CHECKING:``). The handlers are given the controller's services and
never import the controller; the statemachines modules form no cycle.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import statemachines
from tests.imports import find_cycle, import_graph

PACKAGE = "statemachines"
CONTROLLER = f"{PACKAGE}.controller"
HANDLERS = f"{PACKAGE}.handlers."
ROOT = Path(statemachines.__file__).parent


def test_no_handler_imports_the_controller() -> None:
    graph = import_graph(ROOT)
    handlers = [m for m in graph if m.startswith(HANDLERS)]
    assert len(handlers) >= 9
    assert {m: CONTROLLER for m in handlers if CONTROLLER in graph[m]} == {}


def test_the_statemachines_modules_form_no_import_cycle() -> None:
    graph = import_graph(ROOT)
    assert CONTROLLER in graph and f"{HANDLERS}brokers" in graph[f"{HANDLERS}failover"]
    assert find_cycle(graph) is None


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / PACKAGE
    for name, text in {"__init__.py": "", "handlers/__init__.py": "", **files}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@pytest.mark.parametrize("handler", [
    "from statemachines.controller import Controller\n",
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
    "    from statemachines.controller import Controller\n",
    "def f():\n    from statemachines import controller\n",
    "def f():\n    import statemachines.controller.Controller\n",
    "from ..controller import Controller\n",
])
def test_the_walk_sees_every_import_of_the_controller(tmp_path: Path, handler: str) -> None:
    root = _package(tmp_path, {"controller.py": "", "handlers/topics.py": handler})
    assert CONTROLLER in import_graph(root)[f"{HANDLERS}topics"]


def test_the_walk_finds_a_cycle_hidden_in_a_function(tmp_path: Path) -> None:
    root = _package(tmp_path, {
        "controller.py": "from statemachines.handlers import brokers\n",
        "handlers/brokers.py": "from statemachines.partition_sm import x\n",
        "partition_sm.py": "def refresh():\n    from statemachines.controller import read\n",
        "context.py": "from statemachines import partition_sm\n",
    })
    cycle = find_cycle(import_graph(root))
    assert cycle is not None and cycle[0] == cycle[-1]
    assert set(cycle) == {CONTROLLER, f"{HANDLERS}brokers", f"{PACKAGE}.partition_sm"}
    # a package's __init__ importing its modules is no cycle by itself
    assert find_cycle(import_graph(_package(tmp_path / "ok", {
        "__init__.py": "from statemachines.controller import Controller\n",
        "controller.py": "from statemachines import context\n", "context.py": ""}))) is None
