"""The arrows of docs/architecture.md hold: every import of a package (at the top, inside a
function or under ``if TYPE_CHECKING:``) points down to one it may use, nothing outside tests/
imports tests/ (the recording broker and the old truncation rule are test doubles, not product
code), and no import cycle joins modules of different packages or subpackages."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.imports import cycles_across, import_graph

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("coordinator", "elections", "interbroker", "statemachines", "replication", "node",
            "kafkaclient", "broker", "rebalancer", "partctl", "migrations", "benchmarks", "tests")
PRODUCT = ("coordinator", "elections", "interbroker", "statemachines", "replication", "node",
           "kafkaclient", "broker", "rebalancer", "partctl")

MAY_IMPORT: dict[str, set[str]] = {
    "coordinator": set(),
    "elections": {"coordinator"},
    # the controller-broker contract: requests, channel protocols, error codes, the fence
    "interbroker": {"coordinator", "elections"},
    # the controller and the data plane meet in the contract, never in each other
    "statemachines": {"coordinator", "elections", "interbroker"},
    "replication": {"coordinator", "elections", "interbroker"},
    # one broker node assembled: a participant whose handler is a replica manager
    "node": {"coordinator", "elections", "interbroker", "statemachines", "replication"},
    # Kafka's protocol as a client (connections, TLS/SASL, the Admin API): below the broker,
    # the rebalancer and the CLI, above nothing but the contract
    "kafkaclient": {"coordinator", "elections", "interbroker"},
    # a broker process: Kafka's protocol over a broker node
    "broker": {"coordinator", "elections", "interbroker", "statemachines", "replication", "node",
               "kafkaclient"},
    # plans reach a cluster through the admin nodes or Kafka's Admin API; the leader-imbalance
    # rule is elections'
    "rebalancer": {"coordinator", "elections", "kafkaclient"},
    "partctl": set(PRODUCT),
    "migrations": {"rebalancer"},
    "benchmarks": set(PRODUCT),
    "docs": set(PRODUCT),  # docs/examples: the public interface only
}


def test_every_import_between_packages_points_down() -> None:
    graph = import_graph(*(REPO / p for p in (*PACKAGES, "docs")))
    upward = []
    for importer, modules in sorted(graph.items()):
        package = importer.partition(".")[0]
        rules = MAY_IMPORT.get(package)
        if rules is None:
            continue
        for module in sorted(modules):
            top = module.partition(".")[0]
            if top != package and top not in rules:
                upward.append(f"{importer} imports {module}")
    assert upward == []


def test_the_controller_and_the_data_plane_meet_only_in_the_contract() -> None:
    """statemachines/ and replication/ import nothing of each other (they share interbroker/'s
    types), and the node assembly left replication/ for node/: its old modules are gone and
    nothing imports them."""
    graph = import_graph(*(REPO / p for p in (*PACKAGES, "docs")))
    across = sorted(f"{importer} imports {module}" for importer, modules in graph.items()
                    for module in modules
                    if {importer.partition(".")[0], module.partition(".")[0]}
                    == {"statemachines", "replication"})
    assert across == []
    moved = ("replication.broker_node", "replication.cluster", "replication.clients",
             "statemachines.broker_side", "statemachines.channel", "statemachines.requests",
             "statemachines.errors")
    assert [m for m in moved if (REPO / (m.replace(".", "/") + ".py")).exists()] == []
    assert sorted(f"{importer} imports {module}" for importer, modules in graph.items()
                  for module in modules if module.startswith(moved)) == []
    assert {"interbroker.fencing", "node.broker_node"} <= graph.keys()


def test_no_import_cycle_joins_modules_of_different_concerns() -> None:
    graph = import_graph(*(REPO / p for p in PRODUCT))
    assert {"statemachines.handlers.rebalance", "rebalancer.jobs.tasks"} <= graph.keys()
    assert cycles_across(graph) == []


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_two_packages_that_import_each_other_are_a_cycle(tmp_path: Path) -> None:
    """No chain of modules closes (b.admin and a.rule import nothing), yet a and b depend on
    each other: rebalancer and statemachines before the admin API and the imbalance rule moved
    down."""
    root = _tree(tmp_path, {"a/__init__.py": "", "a/rule.py": "", "a/jobs/__init__.py": "",
                            "a/jobs/t.py": "def run():\n    from b.admin import Admin\n",
                            "b/__init__.py": "", "b/admin.py": "",
                            "b/timer.py": "from a.rule import f\n",
                            "c/__init__.py": "import a.jobs.t\nimport b.timer\n"})
    graph = import_graph(root / "a", root / "b", root / "c")
    assert cycles_across(graph) == [
        "a -> b -> a: a.jobs.t imports b.admin, b.timer imports a.rule"]


@pytest.mark.parametrize("back", [
    "from a.x import f\n",
    "def g():\n    from a import x\n",
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import a.x\n",
    "from ..x import f\n",
])
def test_a_module_and_a_subpackage_that_import_each_other_are_a_cycle(
        tmp_path: Path, back: str) -> None:
    root = _tree(tmp_path, {"a/__init__.py": "", "a/x.py": "from a.sub.y import h\n",
                            "a/sub/__init__.py": "", "a/sub/y.py": back,
                            "b/__init__.py": "", "b/z.py": "import a.x\n"})
    assert cycles_across(import_graph(root / "a", root / "b")) == [
        "a.sub -> a.x -> a.sub: a.sub.y imports a.x, a.x imports a.sub.y"]


def test_a_cycle_among_a_packages_own_modules_is_its_own_business(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "a/__init__.py": "from a.x import f\n", "a/x.py": "from a.y import g\n",
        "a/y.py": "from a import x\nfrom a.sub.w import h\n",  # x -> y -> x, inside a
        "a/sub/__init__.py": "", "a/sub/z.py": "from a.sub import w\nfrom a import base\n",
        "a/sub/w.py": "import a.sub.z\nimport a.base\n",  # z -> w -> z, inside a.sub
        "a/base.py": "", "b/__init__.py": "", "b/q.py": "import a.y\n"})
    # a.x and a.y use a.sub, which uses a.base: one direction between a's units
    assert cycles_across(import_graph(root / "a", root / "b")) == []
