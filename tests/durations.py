"""The suite's recorded time per test module (``tests/durations.json``), and what reads and
writes it.

Under pytest-xdist with ``--dist loadfile`` each worker takes a whole module at a time; a long
module handed out last keeps one worker busy while the other idles. So the workers' collection
is ordered longest module first (the conftest's ``pytest_collection_modifyitems``): the
scheduler hands modules out in that order, and the short ones fill the end. A module not in the
table counts as :data:`UNKNOWN` seconds. Refresh the table after a run that wrote a JUnit XML
report (``pytest ... --junitxml=run.xml``)::

    python -m tests.durations run.xml
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

__all__ = ["TABLE", "UNKNOWN", "load", "module_of", "from_junit", "order_key"]

TABLE = Path(__file__).with_name("durations.json")
UNKNOWN = 20.0
"""Seconds counted for a module the table does not know (a new one): among the middle ones."""


def load(path: Path = TABLE) -> dict[str, float]:
    """Module path (``tests/x/test_y.py``) -> seconds; empty when the table is missing."""
    try:
        return {str(k): float(v) for k, v in json.loads(path.read_text()).items()}
    except (OSError, ValueError):
        return {}


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def order_key(table: dict[str, float], groups: Mapping[str, Sequence[str]] | None = None
              ) -> Callable[[str], float]:
    """A sort key over node ids: the longer its module took, the earlier. A module is found
    by its path, or by its file name alone where that is unique (a module moved to another
    folder keeps its place until the table is refreshed). The modules of one of ``groups``
    (name -> modules, handed to one worker together as one unit) each count as their sum."""
    names: dict[str, list[float]] = defaultdict(list)
    for module, seconds in table.items():
        names[module.rsplit("/", 1)[-1]].append(seconds)
    by_name = {name: found[0] for name, found in names.items() if len(found) == 1}

    def seconds_of(module: str) -> float:
        seconds = table.get(module)
        if seconds is None:
            seconds = by_name.get(module.rsplit("/", 1)[-1], UNKNOWN)
        return seconds

    unit = {module: sum(map(seconds_of, modules))
            for modules in (groups or {}).values() for module in modules}

    def key(nodeid: str) -> float:
        module = module_of(nodeid)
        return -unit.get(module, seconds_of(module))

    return key


def from_junit(report: Path) -> dict[str, float]:
    """Seconds per module from a JUnit XML report (each test case's setup, call and
    teardown; module fixtures are in their first test's setup)."""
    seconds: dict[str, float] = defaultdict(float)
    for case in ET.parse(report).iter("testcase"):
        classname = case.get("classname", "")
        # "tests.kafka.test_x" or "tests.kafka.test_x.TestClass": the module is the longest
        # prefix naming a file
        parts = classname.split(".")
        for end in range(len(parts), 0, -1):
            candidate = "/".join(parts[:end]) + ".py"
            if Path(candidate).exists():
                seconds[candidate] += float(case.get("time", 0) or 0)
                break
    return dict(seconds)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    table = load()
    for report in argv:
        table.update(from_junit(Path(report)))
    TABLE.write_text(json.dumps({k: round(v, 1) for k, v in
                                 sorted(table.items(), key=lambda kv: -kv[1])}, indent=0) + "\n")
    print(f"{len(table)} modules in {TABLE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
