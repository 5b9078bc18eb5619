"""The group coordinators' modules, as Kafka splits them: a group metadata manager (the
``__consumer_offsets`` partitions led here, loading, appends, offsets) below the two protocols,
the classic one and KIP-848's, which use it and not each other.

Every import counts, wherever it is written (tests/imports.py walks them: at the top, inside a
function, or under ``if TYPE_CHECKING:``).
"""

from __future__ import annotations

from pathlib import Path

import broker
from tests.imports import find_cycle, import_graph

PACKAGE = "broker.groups"
MANAGER = f"{PACKAGE}.metadata_manager"
CLASSIC = f"{PACKAGE}.coordinator"
CONSUMER = f"{PACKAGE}.consumer_coordinator"
ROOT = Path(broker.__file__).parent
MAX_LINES = 700


def _graph() -> dict[str, set[str]]:
    """The imports among the modules of broker/groups/ (its ``__init__``, which re-exports
    them all, left out)."""
    graph = import_graph(ROOT)
    return {m: {n for n in imports if n.startswith(f"{PACKAGE}.")}
            for m, imports in graph.items() if m.startswith(f"{PACKAGE}.")}


def test_the_group_modules_form_no_import_cycle() -> None:
    graph = _graph()
    assert {CLASSIC, CONSUMER} <= set(graph)
    assert find_cycle(graph) is None


def test_the_kip848_coordinator_uses_the_metadata_manager_not_the_classic_coordinator() -> None:
    graph = _graph()
    assert MANAGER in graph[CONSUMER]
    assert CLASSIC not in graph[CONSUMER]


def test_the_metadata_manager_imports_neither_protocol() -> None:
    graph = _graph()
    assert not {CLASSIC, CONSUMER} & graph[MANAGER]
    assert MANAGER in graph[CLASSIC]


def test_no_group_module_is_over_700_lines() -> None:
    sizes = {p.name: len(p.read_text().splitlines()) for p in (ROOT / "groups").glob("*.py")}
    assert {name: n for name, n in sizes.items() if n >= MAX_LINES} == {}
