"""The jobs' own input error, in a module of its own: every jobs module may raise it (``spec``
imports ``tasks``, so ``tasks`` cannot import it from ``spec``)."""

from __future__ import annotations


class JobSpecError(ValueError):
    """A job that cannot be stored or run as it is (its kind, id, goal, arguments, schedule or
    row): one line saying why. Callers that report bad input (the CLI) catch this type, not
    ValueError, so a ValueError from a bug is not mistaken for the user's mistake."""
