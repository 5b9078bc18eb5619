"""Reassignment plans in Kafka's JSON, and their scores against a snapshot.

A plan is ``{"version": 1, "partitions": [{"topic", "partition", "replicas"}]}`` listing only the
partitions that change; a partition it does not list keeps its replicas. Parsing is strict and
all or nothing: every problem found is reported, one line each, in a PlanError.

A plan's scores (balance, rack violations, movement, validity) are rebalancer.scoring's; the
names are re-exported here, where callers have always found them.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from coordinator.layout import validate_topic
from rebalancer import strict_json
from rebalancer.scoring import ByteBalance, Scores, Spread, score_plan
from rebalancer.snapshot import Snapshot

__all__ = ["ByteBalance", "PartitionMove", "Plan", "PlanError", "Scores", "Spread",
           "parse_plan", "render_plan", "score_plan"]


class PlanError(ValueError):
    """A plan rejected as a whole; ``problems`` has one line per problem."""

    def __init__(self, problems: Iterable[str]) -> None:
        self.problems: tuple[str, ...] = tuple(problems)
        super().__init__("invalid reassignment plan:\n" + "\n".join(self.problems))


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionMove:
    """One entry of a plan: the replicas ``topic``-``partition`` is to have, the first the
    preferred leader."""

    topic: str
    partition: int
    replicas: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """Partitions whose replica list changes, sorted by (topic, partition)."""

    partitions: tuple[PartitionMove, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "version": 1,
            "partitions": [
                {"topic": r.topic, "partition": r.partition, "replicas": list(r.replicas)}
                for r in self.partitions
            ],
        }

    def assignment(self, snap: Snapshot) -> dict[tuple[str, int], tuple[int, ...]]:
        """The full assignment after the plan: every partition of the snapshot."""
        new = {p.key: p.replicas for p in snap.partitions}
        for r in self.partitions:
            new[(r.topic, r.partition)] = r.replicas
        return new


def render_plan(plan: Plan, *, indent: int | None = None) -> str:
    return json.dumps(plan.as_dict(), indent=indent, separators=None if indent else (",", ":"))


def _entry_name(path: list[str | int], obj: dict[str, Any]) -> str | None:
    """A plan entry's topic-partition, to name the entry a repeated key is in."""
    if len(path) == 2 and path[0] == "partitions" and {"topic", "partition"} <= obj.keys():
        return f"{obj['topic']}-{obj['partition']}"
    return None


def load_plan_json(text: str | bytes) -> Any:
    """The plan's JSON document, read strictly (repeated keys, depth); PlanError if it is not."""
    try:
        return strict_json.loads(text, describe=_entry_name)
    except strict_json.InvalidJSON as e:
        raise PlanError(e.problems) from None


def parse_plan(text: str | bytes, snap: Snapshot, *, allow_rf_change: bool = False) -> Plan:
    """Parse Kafka's reassignment JSON against a snapshot; PlanError lists every problem.

    Rejected: malformed JSON or shape, a key given twice in an object, a topic name Kafka
    would not accept, unknown partitions, partitions listed twice, unknown brokers, duplicate
    replicas, empty replica lists, replicas on brokers being decommissioned, and a replication
    factor that differs from the snapshot's (unless ``allow_rf_change``).
    """
    doc = load_plan_json(text)
    problems: list[str] = []
    if not isinstance(doc, dict):
        raise PlanError(["plan must be a JSON object"])
    if doc.get("version") != 1:
        problems.append(f"unsupported version {doc.get('version')!r} (expected 1)")
    entries = doc.get("partitions")
    if not isinstance(entries, list):
        raise PlanError([*problems, "plan needs a 'partitions' list"])
    current = {p.key: p.replicas for p in snap.partitions}
    brokers = set(snap.broker_ids)
    seen: set[tuple[str, int]] = set()
    out: list[PartitionMove] = []
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or not {"topic", "partition", "replicas"} <= e.keys():
            problems.append(f"partitions[{i}] needs 'topic', 'partition' and 'replicas'")
            continue
        topic, num, reps = e["topic"], e["partition"], e["replicas"]
        if (not isinstance(topic, str) or isinstance(num, bool) or not isinstance(num, int)
                or not isinstance(reps, list)
                or any(isinstance(r, bool) or not isinstance(r, int) for r in reps)):
            problems.append(f"partitions[{i}]: topic must be a string, partition an integer "
                            "and replicas a list of integers")
            continue
        try:
            validate_topic(topic)
        except ValueError as e:
            problems.append(f"partitions[{i}]: {e}")
            continue
        name = f"{topic}-{num}"
        key = (topic, num)
        if key in seen:
            problems.append(f"partition {name} is listed twice")
            continue
        seen.add(key)
        if key not in current:
            problems.append(f"partition {name} does not exist")
            continue
        if not reps:
            problems.append(f"partition {name} has an empty replica list")
            continue
        unknown = sorted({r for r in reps if r not in brokers})
        if unknown:
            problems.append(f"partition {name} names unknown brokers {unknown}")
        dups = sorted(r for r, n in Counter(reps).items() if n > 1)
        if dups:
            problems.append(f"partition {name} lists broker(s) {dups} more than once")
        gone = sorted({r for r in reps if r in snap.decommission})
        if gone:
            problems.append(f"partition {name} keeps replicas on decommissioned brokers {gone}")
        if not allow_rf_change and len(reps) != len(current[key]):
            problems.append(f"partition {name} changes replication factor "
                            f"{len(current[key])} -> {len(reps)}")
        out.append(PartitionMove(topic=topic, partition=num, replicas=tuple(reps)))
    if problems:
        raise PlanError(problems)
    out.sort(key=lambda r: (r.topic, r.partition))
    return Plan(partitions=tuple(out))
