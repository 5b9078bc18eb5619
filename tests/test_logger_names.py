"""Every product logger is named by its module (``logging.getLogger(__name__)``, or a child of
it such as ``__name__ + ".state"``), so that one logging configuration by package covers a
package, and a line's logger says where it came from. The exceptions are names that are
interfaces: Kafka's ``state.change.logger`` (a constant, LOGGER_NAME) and the third-party loggers partctl
wraps (kazoo). Setting the level of a package's or a library's logger by name is configuration,
not a logger of the module's own, and is left alone."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PRODUCT = ("coordinator", "elections", "interbroker", "statemachines", "replication", "node", "kafkaclient",
           "broker", "rebalancer", "partctl")
THIRD_PARTY = {"kazoo", "kazoo.client", "apscheduler"}


def _uses_module_name(arg: ast.expr) -> bool:
    if isinstance(arg, ast.Name):
        return arg.id in {"__name__", "LOGGER_NAME"}
    if isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Add):
        return _uses_module_name(arg.left)
    if isinstance(arg, ast.JoinedStr):
        first = arg.values[0] if arg.values else None
        return isinstance(first, ast.FormattedValue) and _uses_module_name(first.value)
    return False


def _offenders(root: Path) -> list[str]:
    found = []
    for package in PRODUCT:
        for path in sorted((root / package).rglob("*.py")) if (root / package).is_dir() else ():
            tree = ast.parse(path.read_text(), str(path))
            for stmt in tree.body:  # the module's loggers; configuring others by name is fine
                node = stmt.value if isinstance(stmt, ast.Assign) else None
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and node.func.attr == "getLogger" and node.args):
                    continue
                arg = node.args[0]
                if _uses_module_name(arg):
                    continue
                if isinstance(arg, ast.Constant) and arg.value in THIRD_PARTY:
                    continue
                found.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(arg)}")
    return found


def test_every_product_logger_is_named_by_its_module() -> None:
    assert _offenders(REPO) == []


def test_a_logger_named_by_hand_is_found(tmp_path: Path) -> None:
    (tmp_path / "broker").mkdir()
    (tmp_path / "broker" / "x.py").write_text(
        'import logging\na = logging.getLogger(__name__)\nb = logging.getLogger(__name__ + ".s")\n'
        'c = logging.getLogger("partctl.broker")\nd = logging.getLogger("kazoo")\n'
        'def f():\n    logging.getLogger("apscheduler").setLevel(40)\n')
    assert _offenders(tmp_path) == ['broker/x.py:4: \'partctl.broker\'']
