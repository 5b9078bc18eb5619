"""Which errors are the user's: partctl.errors' table, and nothing broader.

A command's user error is one ``partctl: error:`` line and exit 1 only when its type is in the
table (or is UserError); a ValueError from anywhere else is a bug and reaches the safety net (one
``partctl: internal error:`` line, exit 2), in the jobs, db and scheduler commands as in all
others.
"""

from __future__ import annotations

import contextlib
import importlib
import io
from pathlib import Path

import pytest

from partctl.cli import main
from partctl.errors import LIBRARY_USER_ERRORS, UserError, user_error


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(("module", "name"), [row[:2] for row in LIBRARY_USER_ERRORS],
                         ids=[".".join(row[:2]) for row in LIBRARY_USER_ERRORS])
def test_every_row_of_the_table_names_an_exception_class(module: str, name: str) -> None:
    """A class that moves (or is renamed) must take its row with it: a row naming nothing would
    silently turn that error into an internal error."""
    cls = getattr(importlib.import_module(module), name, None)
    assert isinstance(cls, type) and issubclass(cls, Exception), (module, name)
    assert user_error(cls("x")) is not None


def test_a_plain_value_error_is_no_user_error() -> None:
    assert user_error(ValueError("x")) is None and user_error(KeyError("x")) is None
    mine = UserError("give --topic")
    assert user_error(mine) is mine


@pytest.mark.parametrize(("argv", "target"), [
    (["jobs", "list"], "rebalancer.jobs.list_jobs"),
    (["jobs", "history"], "rebalancer.store.Store.runs"),
    (["db", "current"], "rebalancer.store.Store.revision"),
], ids=["jobs list", "jobs history", "db current"])
def test_a_value_error_in_a_store_command_is_a_bug(
        argv: list[str], target: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The jobs, db and scheduler commands took any ValueError for the user's mistake (exit 1,
    no hint that partctl was wrong)."""
    db = f"sqlite:///{tmp_path / 'errors.db'}"
    monkeypatch.delenv("PARTCTL_DEBUG", raising=False)
    assert run("db", "upgrade", "--db", db)[0] == 0

    def broken(*args: object, **kwargs: object) -> None:
        raise ValueError("a bug, not bad input")

    owner, _, attr = target.rpartition(".")
    try:
        holder = importlib.import_module(owner)
    except ModuleNotFoundError:
        module, _, cls = owner.rpartition(".")
        holder = getattr(importlib.import_module(module), cls)
    monkeypatch.setattr(holder, attr, broken)
    code, out, err = run(*argv, "--db", db)
    assert (code, out) == (2, "")
    assert err == ("partctl: internal error: ValueError: a bug, not bad input; rerun with "
                   "PARTCTL_DEBUG=1 for the traceback\n")
