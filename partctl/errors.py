"""What a user is told when a command fails: one user-error type, and one table of the library's
errors that are the user's to fix (bad input, a server that cannot be reached), not bugs.

``main()`` (partctl/cli.py) reports a user error as one ``partctl: error: ...`` line (one per
problem of a plan or snapshot) and exit status 1; anything else is a bug and reaches its safety
net. A library error becomes a user error by a row here, never by a command catching
``ValueError`` broadly: a ValueError from anywhere else is a bug, and must look like one.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

__all__ = ["LIBRARY_USER_ERRORS", "MAX_PROBLEM_LINES", "UserError", "user_error"]

MAX_PROBLEM_LINES = 50
"""A plan or snapshot with more problems shows this many, then how many more there are."""


class UserError(Exception):
    """A mistake the user can fix, said without a traceback; commands raise it for what they
    check themselves (options that go together, files they read)."""


def _said(exc: BaseException) -> str:
    return str(exc)


def _unquoted(exc: BaseException) -> str:
    # the jobs and db commands have always shown the store's errors so
    return str(exc).strip("'\"")


def _problem_lines(exc: BaseException) -> str:
    """One ``partctl: error:`` line per problem (the first MAX_PROBLEM_LINES and a count of the
    rest): the message main() prints after the first line's prefix."""
    from partctl.render import render_problems

    problems = getattr(exc, "problems", None) or (str(exc),)
    return "\npartctl: error: ".join(render_problems(problems, MAX_PROBLEM_LINES))


LIBRARY_USER_ERRORS: tuple[tuple[str, str, Callable[[BaseException], str]], ...] = (
    ("coordinator.errors", "CoordinatorError", _said),
    ("coordinator.admin", "InvalidRequest", _said),
    ("coordinator.topic_config", "InvalidConfig", _said),
    ("kafkaclient.groups", "GroupAdminError", _said),
    ("kafkaclient.admin_types", "AdminError", _said),
    ("kafkaclient.offset_reset", "ResetError", _said),
    ("rebalancer.access", "AccessError", _said),
    ("rebalancer.operations", "OperationError", _said),
    ("rebalancer.plan", "PlanError", _problem_lines),
    ("rebalancer.snapshot", "SnapshotError", _problem_lines),
    ("rebalancer.planner.model", "PlanningError", _problem_lines),
    ("rebalancer.goals", "GoalError", _said),
    ("rebalancer.extras", "ExtraNotInstalled", _said),
    ("rebalancer.store.urls", "StoreURLError", _said),
    ("rebalancer.store.records", "StoreError", _unquoted),
    ("rebalancer.jobs.errors", "JobSpecError", _said),
    ("rebalancer.jobs.triggers", "TriggerError", _said),
    ("rebalancer.jobs.scheduler", "JobNotFound", _unquoted),
    ("rebalancer.jobs.scheduler", "JobBroken", _said),
)
"""The library's errors that mean "the input is wrong" (module, class, its message), the only
ones reported as user errors. Looked up in ``sys.modules``: a module that was never imported
cannot have raised its error, so none is imported to check (a failing ``topics list`` does not
import SQLAlchemy). tests/cli/test_cli_errors.py checks that every row names a class."""


def user_error(exc: BaseException) -> UserError | None:
    """``exc`` as the user error it is, or None when it is none (a bug)."""
    if isinstance(exc, UserError):
        return exc
    for module, name, message in LIBRARY_USER_ERRORS:
        cls = getattr(sys.modules.get(module), name, None)
        if cls is not None and isinstance(exc, cls):
            return UserError(message(exc))
    return None
