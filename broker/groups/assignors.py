"""The server-side assignors of consumer groups (KIP-848): pure functions, no I/O.

Both take the members' subscriptions (member id -> topic ids), the subscribed topics' partition
counts and the current target assignment, and give the next target assignment (member id ->
topic id -> partitions).

- ``uniform`` (the default): balanced (every member subscribed to the same topics ends within
  one partition of the others) and sticky (a partition stays with its owner unless balance
  needs it elsewhere). With different subscriptions, each partition goes to one of its
  subscribers, the least loaded, and partitions then move from the most to the least loaded
  subscriber until no move improves the spread.
- ``range``: per topic, the subscribers sorted by member id take contiguous ranges, the first
  ``partitions % members`` one more; so topics with the same partition count are co-partitioned
  (a member holds the same partition numbers of each).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Set
from typing import TypeVar

__all__ = ["ASSIGNORS", "Assignment", "range_assign", "uniform_assign"]

T = TypeVar("T", bound=Hashable)
Assignment = dict[str, dict[T, set[int]]]


def _key(topic: object) -> str:
    return str(topic)


def range_assign(subscriptions: Mapping[str, Set[T]], topics: Mapping[T, int],
                 current: Mapping[str, Mapping[T, Set[int]]]) -> dict[str, dict[T, set[int]]]:
    """Kafka's range assignment, topic by topic (``current`` is not used)."""
    del current
    result: dict[str, dict[T, set[int]]] = {m: {} for m in subscriptions}
    for topic in sorted(topics, key=_key):
        count = topics[topic]
        members = sorted(m for m, subs in subscriptions.items() if topic in subs)
        if not members or count <= 0:
            continue
        share, extra = divmod(count, len(members))
        start = 0
        for i, member in enumerate(members):
            size = share + (1 if i < extra else 0)
            if size:
                result[member][topic] = set(range(start, start + size))
            start += size
    return result


def uniform_assign(subscriptions: Mapping[str, Set[T]], topics: Mapping[T, int],
                   current: Mapping[str, Mapping[T, Set[int]]]
                   ) -> dict[str, dict[T, set[int]]]:
    """A balanced, sticky assignment (see the module's docstring)."""
    members = sorted(subscriptions)
    owned: dict[str, set[tuple[T, int]]] = {m: set() for m in members}
    taken: set[tuple[T, int]] = set()
    for m in members:  # keep what is still valid, each partition once
        for topic, partitions in current.get(m, {}).items():
            if topic not in subscriptions[m] or topic not in topics:
                continue
            for p in partitions:
                tp = (topic, p)
                if p < topics[topic] and tp not in taken:
                    owned[m].add(tp)
                    taken.add(tp)
    every = [(t, p) for t in sorted(topics, key=_key) for p in range(topics[t])
             if any(t in subscriptions[m] for m in members)]
    subscribers = {tp: [m for m in members if tp[0] in subscriptions[m]] for tp in every}
    homogeneous = len({frozenset(subscriptions[m]) for m in members}) <= 1
    if homogeneous and members:
        quota, extra = divmod(len(every), len(members))
        # the members holding the most keep the extra partitions (fewest moves)
        ranked = sorted(members, key=lambda m: (-len(owned[m]), m))
        limit = {m: quota + (1 if i < extra else 0) for i, m in enumerate(ranked)}
        for m in members:
            while len(owned[m]) > limit[m]:
                tp = max(owned[m], key=lambda x: (_key(x[0]), x[1]))
                owned[m].discard(tp)
                taken.discard(tp)
    free = [tp for tp in every if tp not in taken]
    free.sort(key=lambda tp: (len(subscribers[tp]), _key(tp[0]), tp[1]))
    for tp in free:
        target = min(subscribers[tp], key=lambda m: (len(owned[m]), m))
        owned[target].add(tp)
    if not homogeneous:
        _balance(owned, subscribers)
    result: dict[str, dict[T, set[int]]] = {m: {} for m in members}
    for m, tps in owned.items():
        for topic, p in tps:
            result[m].setdefault(topic, set()).add(p)
    return result


def _balance(owned: dict[str, set[tuple[T, int]]],
             subscribers: Mapping[tuple[T, int], list[str]]) -> None:
    """Move partitions from a member to a less loaded subscriber while that narrows the gap."""
    for _ in range(sum(len(v) for v in owned.values()) * 2):
        moved = False
        for m in sorted(owned, key=lambda x: (-len(owned[x]), x)):
            for tp in sorted(owned[m], key=lambda x: (_key(x[0]), x[1])):
                best = min(subscribers[tp], key=lambda x: (len(owned[x]), x))
                if len(owned[m]) - len(owned[best]) > 1:
                    owned[m].discard(tp)
                    owned[best].add(tp)
                    moved = True
                    break
            if moved:
                break
        if not moved:
            return


ASSIGNORS: Mapping[str, Callable[..., dict]] = {"uniform": uniform_assign, "range": range_assign}
"""The assignors by the name clients give (``group.remote.assignor``)."""
