"""JSON from users (plans, snapshots, topics-to-move and sizes files), read strictly.

``json.loads`` lets the last of two equal keys win without a word (``{"replicas": [1, 2],
"replicas": [3, 4]}`` would move a partition where its author did not look), raises
RecursionError on input nested a few thousand levels deep, and ValueError on an integer of more
than 4,300 digits. Here each is a problem line naming where it is, in :class:`InvalidJSON`; the
callers turn the lines into their own error (PlanError, SnapshotError).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

__all__ = ["InvalidJSON", "loads"]

Describe = Callable[[list[str | int], dict[str, Any]], str | None]
"""A human name for the object at a path (e.g. a plan entry's topic-partition), or None."""


class InvalidJSON(ValueError):
    """Text that is not acceptable JSON; ``problems`` has one line per problem."""

    def __init__(self, problems: list[str]) -> None:
        self.problems: tuple[str, ...] = tuple(problems)
        super().__init__("\n".join(self.problems))


class _Repeated(dict[str, Any]):
    """An object in which some key was given more than once (the last value kept, as json)."""

    __slots__ = ("repeated",)
    repeated: list[str]


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    seen: set[str] = set()
    repeated: list[str] = []
    for key, _ in pairs:
        if key in seen and key not in repeated:
            repeated.append(key)
        seen.add(key)
    out = _Repeated(obj)
    out.repeated = repeated
    return out


def _where(path: list[str | int], obj: dict[str, Any], describe: Describe | None) -> str:
    if not path:
        return "the top-level object"
    text = "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else p)
                   for i, p in enumerate(path))
    extra = describe(path, obj) if describe is not None else None
    return f"{text} ({extra})" if extra else text


def _repeated_keys(doc: Any, describe: Describe | None) -> list[str]:
    """One line per object with a repeated key, in document order (iterative: no depth limit)."""
    problems: list[str] = []
    stack: list[tuple[Any, list[str | int]]] = [(doc, [])]
    while stack:
        node, path = stack.pop()
        if isinstance(node, dict):
            if isinstance(node, _Repeated):
                where = _where(path, node, describe)
                problems += [f"{where}: key {k!r} is given more than once" for k in node.repeated]
            stack += [(v, [*path, k]) for k, v in reversed(node.items())]
        elif isinstance(node, list):
            stack += [(v, [*path, i]) for i, v in reversed(list(enumerate(node)))]
    return problems


def loads(text: str | bytes, *, what: str = "", describe: Describe | None = None) -> Any:
    """Parse ``text``; :class:`InvalidJSON` names every repeated key (which entry, which key), or
    says why the text is not JSON. ``what`` prefixes each line (e.g. ``"sizes: "``).

    ``describe(path, obj)`` may add a human name for an object with a repeated key (e.g. the
    topic-partition of a plan entry).
    """
    flagged = False

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal flagged
        obj = _pairs(pairs)
        flagged = flagged or isinstance(obj, _Repeated)
        return obj

    try:
        doc = json.loads(text, object_pairs_hook=hook)
    except RecursionError:
        raise InvalidJSON([f"{what}not valid JSON: nested too deeply"]) from None
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError, an integer too long to convert
        raise InvalidJSON([f"{what}not valid JSON: {e}"]) from None
    if flagged:
        raise InvalidJSON([f"{what}{line}" for line in _repeated_keys(doc, describe)])
    return doc
