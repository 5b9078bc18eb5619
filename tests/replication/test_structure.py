"""The data plane keeps Kafka's split (issue 30): a log manager owns the log directory, its
checkpoints and the logs' upkeep, a log loader recovers, the replica manager keeps replica and
partition state; the log and the cleaner do not import each other; and no product module grows
past 700 lines."""

from __future__ import annotations

from pathlib import Path

from tests.imports import find_cycle, import_graph

REPO = Path(__file__).resolve().parents[2]
PRODUCT = ("coordinator", "elections", "statemachines", "replication", "broker", "rebalancer",
           "partctl", "interbroker", "node")
MAX_LINES = 700
GENERATED = {"broker/apis/messages.py"}
"""Modules written by a generator (the kio message unions, one import line per served version:
``tests/broker/protocol/test_api_messages.py``), not split by hand: the limit is for modules
people write and split by concern."""


def _replication_graph() -> dict[str, set[str]]:
    return import_graph(REPO / "replication")


def test_no_product_module_is_over_700_lines() -> None:
    over = sorted(
        f"{path.relative_to(REPO)}: {lines} lines"
        for package in PRODUCT if (REPO / package).is_dir()
        for path in (REPO / package).rglob("*.py")
        if str(path.relative_to(REPO)) not in GENERATED
        and (lines := len(path.read_text().splitlines())) > MAX_LINES
    )
    assert not over, "modules over 700 lines:\n" + "\n".join(over)


def test_the_replica_manager_leaves_the_logs_to_the_log_manager() -> None:
    graph = _replication_graph()
    replica_manager = graph["replication.replica_manager"]
    # No checkpoint files, no cleaner, no recovery, no remote storage set-up of its own.
    for module in ("replication.checkpoints", "replication.cleaner", "replication.log_cleaner",
                   "replication.log_loader", "replication.crash",
                   "replication.tiered.metadata_manager"):
        assert module not in replica_manager, module
    assert "replication.log_manager" in replica_manager
    assert {"replication.checkpoints", "replication.log_cleaner"} <= graph[
        "replication.log_manager"]


def test_recovery_lives_in_the_log_loader() -> None:
    graph = _replication_graph()
    assert "replication.log_loader" in graph["replication.log"]
    source = (REPO / "replication" / "log.py").read_text()
    assert "open_flushed" not in source and "recover_existing" not in source
    assert "open_flushed" in (REPO / "replication" / "log_loader.py").read_text()


def test_the_log_and_the_cleaner_do_not_import_each_other() -> None:
    graph = _replication_graph()
    # The record parser both use is records.py's; the log never reaches the cleaner.
    assert "replication.records" in graph["replication.cleaner"]
    log_side = {m for m in graph if m.startswith(("replication.log", "replication.local_log"))
                and m not in ("replication.log_cleaner", "replication.log_manager")}
    reached: set[str] = set()
    todo = list(log_side)
    while todo:
        for n in graph.get(todo.pop(), ()):
            if n not in reached:
                reached.add(n)
                todo.append(n)
    assert not reached & {"replication.cleaner", "replication.log_cleaner"}


def test_no_import_cycle_among_the_data_planes_own_modules() -> None:
    graph = _replication_graph()
    own = {m: {n for n in deps if n.count(".") == 1} for m, deps in graph.items()
           if m.count(".") == 1}
    assert find_cycle(own) is None
