"""Topic nodes that another tool wrote and that Kafka's layout forbids, skipped with one warning.

The store is shared: any node under ``/brokers/topics`` may have been written by a tool that does
not check what partctl's admin operations check (a topic named ``a b``, ``ü`` or 300 characters
long; an assignment or a partition state whose JSON is malformed). Whoever reads topics from the
store (the controller, a broker, the rebalancer, the CLI) skips such a topic and says so once:
the names already warned of are kept in a bounded set, so that a metadata update that meets the
same topic again logs nothing, and a flood of bad names costs bounded memory.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Hashable, Iterable

from coordinator.codecs import CorruptMetadata, TopicAssignment, TopicPartition
from coordinator.layout import topic_name_problem
from coordinator.metadata import MetadataClient, Versioned

__all__ = ["SkippedTopics", "WarnOnce", "readable_assignments", "topic_problems"]

WARNED_LIMIT = 10_000
"""How many distinct bad topics (or partitions) are named in a warning each; beyond it, one
more warning says that further ones are skipped silently."""


class WarnOnce:
    """The keys already warned of, at most ``limit`` of them."""

    __slots__ = ("_full", "_limit", "_lock", "_seen")

    def __init__(self, limit: int = WARNED_LIMIT) -> None:
        self._seen: set[Hashable] = set()
        self._limit = limit
        self._full = False
        self._lock = threading.Lock()

    def first(self, key: Hashable) -> bool | None:
        """True the first time ``key`` is seen, False after; None when the set is full and
        ``key`` is not in it (the caller warns that it stops naming them, once)."""
        with self._lock:
            if key in self._seen:
                return False
            if len(self._seen) >= self._limit:
                if self._full:
                    return False
                self._full = True
                return None
            self._seen.add(key)
            return True

    def forget(self, key: Hashable) -> None:
        """``key`` is fine again: warn anew should it go bad again."""
        with self._lock:
            self._seen.discard(key)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._seen


class SkippedTopics:
    """One reader's record of the bad topics it skipped: each logged once, at WARNING, on
    ``logger`` and prefixed with ``who`` (e.g. ``"controller 1"``). Names are quoted with
    ``repr``: a name from the store may hold control characters."""

    __slots__ = ("_log", "_warned", "who")

    def __init__(self, logger: logging.Logger, who: str, *, limit: int = WARNED_LIMIT) -> None:
        self._log = logger
        self.who = who
        self._warned = WarnOnce(limit)

    def legal(self, topic: str) -> bool:
        """Whether ``topic`` is a legal name; the first time it is not, a warning."""
        problem = topic_name_problem(topic)
        if problem is None:
            return True
        self._warn(("name", topic), "%s: skipping topic %.300r: invalid name: %s",
                   self.who, topic, problem)
        return False

    def corrupt(self, topic: str, reason: object) -> None:
        """``topic``'s node could not be decoded (``reason``): skipped, warned of once."""
        self._warn(("node", topic), "%s: skipping topic %.300r: %s", self.who, topic, reason)

    def corrupt_state(self, tp: TopicPartition, reason: object) -> None:
        """A partition's state node could not be decoded: skipped, warned of once."""
        self._warn(("state", tp), "%s: skipping the state of partition %.300r-%d: %s",
                   self.who, tp.topic, tp.partition, reason)

    def fixed(self, topic: str) -> None:
        """``topic``'s node decodes again: a later corruption is warned of anew."""
        self._warned.forget(("node", topic))

    def _warn(self, key: Hashable, message: str, *args: object) -> None:
        first = self._warned.first(key)
        if first:
            self._log.warning(message, *args)
        elif first is None:
            self._log.warning("%s: more than %d bad topics or partitions in the store: skipping "
                              "further ones without naming each", self.who, WARNED_LIMIT)


def readable_assignments(
    md: MetadataClient, names: Iterable[str] | None = None, skipped: SkippedTopics | None = None
) -> dict[str, Versioned[TopicAssignment]]:
    """The assignments of every topic in the store (or of ``names``) whose name is legal and
    whose node decodes, in one bulk read; the others are left out, and reported to ``skipped``
    when given (a tool run once warns; a request handler, whose controller has warned, not)."""
    if skipped is None:
        skipped = _QUIET
    wanted = md.topics() if names is None else names
    return md.assignments([t for t in wanted if skipped.legal(t)], on_corrupt=skipped.corrupt)


class _Quiet(SkippedTopics):
    __slots__ = ()

    def _warn(self, key: Hashable, message: str, *args: object) -> None:
        self._log.debug(message, *args)


_QUIET = _Quiet(logging.getLogger(__name__), "reader", limit=0)


def topic_problems(md: MetadataClient) -> dict[str, str]:
    """Every topic in the store that readers skip, with why: an illegal name, or a topic node
    that does not decode (one bulk read). What ``partctl topics list`` marks invalid."""
    problems: dict[str, str] = {}
    legal: list[str] = []
    for name in md.topics():
        problem = topic_name_problem(name)
        if problem is None:
            legal.append(name)
        else:
            problems[name] = f"invalid name: {problem}"

    def corrupt(name: str, exc: CorruptMetadata) -> None:
        problems[name] = f"invalid node: {exc}"

    md.assignments(legal, on_corrupt=corrupt)
    return problems
