"""The one validation of a reassignment plan: the CLI's execute, the jobs and the executor all
check a plan here, so the same bad plan gets the same lines wherever it comes from.

``read_plan`` checks a plan file on its own (format, types, duplicates), for verify, which must
report on partitions that may no longer exist; ``validate_plan`` checks it against the live
cluster (unknown topics and partitions, unregistered brokers, duplicate or no replicas, topics
being deleted, replication factors changed for part of a topic). Both raise PlanError listing
every problem, one line each (rebalancer.plan parses the JSON strictly).
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet

from coordinator.base import Coordinator
from coordinator.codecs import TopicAssignment
from coordinator.metadata import MetadataClient
from rebalancer.live_snapshot import cluster_state, metadata_client, target_replicas
from rebalancer.plan import Plan, PlanError, load_plan_json, parse_plan, render_plan
from rebalancer.snapshot import PartitionReplicas, Snapshot, SnapshotBroker

__all__ = ["check_plan", "read_plan", "validate_plan"]


def _live_snapshot(brokers: Mapping[int, str | None], topics: Mapping[str, TopicAssignment]
                   ) -> Snapshot:
    """The live cluster as parse_plan needs it (not validated: offline brokers and mixed racks
    do not matter to a plan's validity)."""
    return Snapshot(
        brokers=tuple(SnapshotBroker(id=b, rack=r) for b, r in sorted(brokers.items())),
        partitions=tuple(PartitionReplicas(topic=t, partition=p, replicas=target_replicas(a, p))
                         for t, a in sorted(topics.items()) for p in sorted(a.partitions)))


def _rf_problems(text: str | bytes, snap: Snapshot) -> list[str]:
    """A plan may change a topic's replication factor only for all its partitions at once, to
    one count (a topic with mixed RF is a mistake). One line per offending partition."""
    try:
        doc = load_plan_json(text)
        entries = [e for e in doc["partitions"] if isinstance(e, dict)]
    except (PlanError, TypeError, KeyError):
        return []  # malformed: parse_plan reports it
    current = {p.key: len(p.replicas) for p in snap.partitions}
    per_topic: dict[str, list[int]] = {}
    for p in snap.partitions:
        per_topic.setdefault(p.topic, []).append(p.partition)
    new: dict[tuple[str, int], int] = {}
    for e in entries:
        key = (e.get("topic"), e.get("partition"))
        if key in current and isinstance(e.get("replicas"), list):
            new.setdefault(key, len(e["replicas"]))
    problems = []
    for key, rf in sorted(new.items()):
        topic, num = key
        if rf == current[key]:
            continue
        others = {new.get((topic, p), current[(topic, p)]) for p in per_topic[topic]}
        if len(others) > 1:
            problems.append(f"partition {topic}-{num} changes replication factor "
                            f"{current[key]} -> {rf}, but not every partition of topic "
                            f"{topic} goes to {rf} replicas")
    return problems


def read_plan(text: str | bytes) -> Plan:
    """A plan file on its own (format, types, duplicates; no cluster): for verify, which must
    report on partitions that may no longer exist. PlanError lists every problem."""
    doc = load_plan_json(text)
    entries = doc.get("partitions") if isinstance(doc, dict) else None
    parts: dict[tuple[str, int], PartitionReplicas] = {}
    for e in entries if isinstance(entries, list) else ():
        if (isinstance(e, dict) and isinstance(e.get("topic"), str)
                and isinstance(e.get("partition"), int) and isinstance(e.get("replicas"), list)
                and all(isinstance(r, int) for r in e["replicas"])):
            key = (e["topic"], e["partition"])
            parts.setdefault(key, PartitionReplicas(topic=key[0], partition=key[1],
                                                    replicas=tuple(e["replicas"])))
    ids = {r for p in parts.values() for r in p.replicas}
    as_is = Snapshot(brokers=tuple(SnapshotBroker(id=b) for b in sorted(ids)),
                     partitions=tuple(parts.values()))
    return parse_plan(text, as_is, allow_rf_change=True)


def validate_plan(coordinator: Coordinator | MetadataClient, plan_text_or_plan: str | bytes | Plan
                  ) -> Plan:
    """Check a plan against the live cluster; PlanError lists every problem, one line each.

    Refused: malformed JSON, unknown partitions, partitions listed twice, brokers that are not
    registered, duplicate or no replicas, a partition of a topic being deleted, and a changed
    replication factor unless it changes for every partition of the topic alike.
    """
    text = (render_plan(plan_text_or_plan) if isinstance(plan_text_or_plan, Plan)
            else plan_text_or_plan)
    md = metadata_client(coordinator)
    brokers, topics, deleting = cluster_state(md)
    return check_plan(text, _live_snapshot(brokers, topics), deleting=deleting)


def check_plan(text: str | bytes, snap: Snapshot, *, deleting: AbstractSet[str] = frozenset()
               ) -> Plan:
    """The checks of :func:`validate_plan` against the live cluster as ``snap`` has it (its
    brokers the registered ones, its partitions' replicas where each is heading), ``deleting``
    the topics being deleted. Pure: both ways of reaching a cluster validate by it."""
    problems: list[str] = []
    plan: Plan | None = None
    try:
        plan = parse_plan(text, snap, allow_rf_change=True)
    except PlanError as e:
        problems += e.problems
    problems += _rf_problems(text, snap)
    if plan is not None:
        problems += [f"partition {r.topic}-{r.partition}: topic {r.topic} is being deleted"
                     for r in plan.partitions if r.topic in deleting]
    if problems:
        raise PlanError(problems)
    assert plan is not None
    return plan
