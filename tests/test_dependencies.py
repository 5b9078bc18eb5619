"""The base install has what product code imports: every third-party package a product module
imports at its top belongs to a distribution in pyproject's ``dependencies`` (packages of an
extra are imported inside the function that needs them, through rebalancer.extras)."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PRODUCT = ("coordinator", "elections", "interbroker", "statemachines", "replication", "node", "kafkaclient",
           "broker", "rebalancer", "partctl", "migrations")


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def base_distributions() -> set[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return {_normal(re.match(r"[A-Za-z0-9_.-]+", d).group()) for d in project["dependencies"]}


def top_level_imports(path: Path) -> set[str]:
    """Top-level package names imported by the module's own statements (not inside functions;
    ``if TYPE_CHECKING:`` blocks do not count, they never run)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for sub in ast.walk(node) if isinstance(node, ast.If | ast.Try) else [node]:
            if isinstance(sub, ast.Import):
                names.update(a.name.partition(".")[0] for a in sub.names)
            elif isinstance(sub, ast.ImportFrom) and sub.level == 0 and sub.module:
                names.add(sub.module.partition(".")[0])
    return names


def test_every_top_level_import_of_product_code_is_a_base_dependency():
    owners = packages_distributions()
    base = base_distributions()
    missing = []
    for package in PRODUCT:
        for path in sorted((REPO / package).rglob("*.py")):
            for name in sorted(top_level_imports(path)):
                if name in sys.stdlib_module_names or name in PRODUCT or name == "__future__":
                    continue
                dists = {_normal(d) for d in owners.get(name, [name])}
                if not dists & base:
                    missing.append(f"{path.relative_to(REPO)} imports {name} "
                                   f"({', '.join(sorted(dists))})")
    assert missing == []
