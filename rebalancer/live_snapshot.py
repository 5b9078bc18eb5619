"""Snapshots for planning: read from a live coordinator, and scoped the way Kafka's
``--broker-list`` and ``--topics-to-move-json-file`` scope ``kafka-reassign-partitions``.

Reading talks to the coordinator only (Kafka's layout through MetadataClient): brokers and racks
from ``/brokers/ids``, ordered replicas from ``/brokers/topics/<t>``. Scoping is pure.
"""

from __future__ import annotations

import datetime as _dt
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from coordinator.base import Coordinator
from coordinator.codecs import TopicAssignment
from coordinator.metadata import MetadataClient
from coordinator.skipped import SkippedTopics, readable_assignments
from rebalancer import strict_json
from rebalancer.snapshot import (
    PartitionReplicas,
    Snapshot,
    SnapshotError,
    live_brokers,
    liveness_problems,
)

log = logging.getLogger(__name__)

__all__ = [
    "cluster_state",
    "metadata_client",
    "parse_sizes",
    "parse_topics_to_move",
    "scope_snapshot",
    "snapshot_from_coordinator",
]


def metadata_client(coordinator: Coordinator | MetadataClient) -> MetadataClient:
    """Accept a coordinator session or a metadata client over one."""
    return coordinator if isinstance(coordinator, MetadataClient) else MetadataClient(coordinator)


def cluster_state(md: MetadataClient) -> tuple[dict[int, str | None], dict[str, TopicAssignment],
                                               frozenset[str]]:
    """Registered brokers with their racks, every topic's assignment, and the topics being
    deleted: three bulk reads."""
    brokers = {b: r.info.rack for b, r in md.brokers().items()}
    topics = {t: v.value for t, v in readable_assignments(
        md, skipped=SkippedTopics(log, "cluster snapshot")).items()}
    return brokers, topics, frozenset(md.topics_to_delete())


def target_replicas(a: TopicAssignment, partition: int) -> tuple[int, ...]:
    """Where a partition is heading: its replicas minus those being removed (all of them when
    no reassignment is in progress)."""
    removing = set(a.removing.get(partition, ()))
    return tuple(r for r in a.partitions[partition] if r not in removing)


def snapshot_from_coordinator(
    coordinator: Coordinator | MetadataClient, *,
    sizes: Mapping[tuple[str, int], int] | None = None,
    decommission: Iterable[int] = (),
    new_brokers: Iterable[int] = (),
) -> Snapshot:
    """The live cluster as a planner snapshot; SnapshotError lists every problem.

    Brokers are the registered ones (``/brokers/ids``) with their racks; partitions come from the
    topic nodes with their ordered replicas (a partition being reassigned is taken where it is
    heading; topics being deleted are left out). ``sizes`` maps ``(topic, partition)`` (or a
    TopicPartition) to bytes; without it sizes are absent.

    A broker that holds replicas but is not registered (offline) must be listed in
    ``decommission``: a plan can only drain it. Its rack is unknown; it is given a placeholder
    rack of the cluster (recorded in ``meta['offline_brokers']``), which only the score of the
    current state can notice.
    """
    md = metadata_client(coordinator)
    racks, topics, deleting = cluster_state(md)
    decommission, new_brokers = frozenset(decommission), frozenset(new_brokers)
    sizes = sizes or {}
    parts: list[PartitionReplicas] = []
    moving = 0
    for topic in sorted(topics):
        if topic in deleting:
            continue
        a = topics[topic]
        for p in sorted(a.partitions):
            moving += bool(a.adding.get(p) or a.removing.get(p))
            parts.append(PartitionReplicas(topic=topic, partition=p,
                                           replicas=target_replicas(a, p),
                                           size_bytes=sizes.get((topic, p))))
    hosting = {r for part in parts for r in part.replicas}
    offline = sorted(hosting - racks.keys())
    problems = liveness_problems(racks, offline, decommission, new_brokers)
    if problems:
        raise SnapshotError(problems)
    brokers = live_brokers(racks, offline)
    meta: dict[str, Any] = {
        "source": "coordinator",
        "taken_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "moving_partitions": moving,
    }
    if offline:
        meta["offline_brokers"] = offline
    if deleting:
        meta["topics_being_deleted"] = sorted(deleting)
    snap = Snapshot(brokers=tuple(brokers), partitions=tuple(parts),
                    decommission=decommission, new_brokers=new_brokers, meta=meta)
    snap.validate()
    return snap


def _strict(text: str | bytes, what: str) -> Any:
    """Repeated keys and runaway nesting are refused (see ``strict_json``)."""
    try:
        return strict_json.loads(text, what=what)
    except strict_json.InvalidJSON as e:
        raise SnapshotError(e.problems) from None


def parse_topics_to_move(text: str | bytes) -> tuple[str, ...]:
    """Kafka's ``--topics-to-move-json-file``: ``{"version":1,"topics":[{"topic":"t"}, ...]}``.

    SnapshotError lists every problem (it scopes the snapshot, so it is the snapshot's error).
    """
    doc = _strict(text, "topics to move: ")
    if not isinstance(doc, dict) or not isinstance(doc.get("topics"), list):
        raise SnapshotError(['topics to move: want {"version": 1, "topics": [{"topic": "t"}]}'])
    problems: list[str] = []
    if doc.get("version", 1) != 1:
        problems.append(f"topics to move: unsupported version {doc.get('version')!r}")
    out: list[str] = []
    for i, entry in enumerate(doc["topics"]):
        topic = entry.get("topic") if isinstance(entry, dict) else None
        if not isinstance(topic, str) or not topic:
            problems.append(f"topics to move: topics[{i}] needs a 'topic' string")
        elif topic not in out:
            out.append(topic)
    if not out and not problems:
        problems.append("topics to move: the list is empty")
    if problems:
        raise SnapshotError(problems)
    return tuple(out)


def parse_sizes(text: str | bytes) -> dict[tuple[str, int], int]:
    """Partition sizes for a live snapshot, in the snapshot's own partition format:
    ``{"partitions": [{"topic": "t", "partition": 0, "size_bytes": 123}, ...]}`` (a snapshot
    file with sizes serves). SnapshotError lists every problem."""
    doc = _strict(text, "sizes: ")
    entries = doc.get("partitions") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise SnapshotError(['sizes: want {"partitions": [{"topic": "t", "partition": 0, '
                             '"size_bytes": 123}]}'])
    problems: list[str] = []
    out: dict[tuple[str, int], int] = {}
    for i, e in enumerate(entries):
        ok = isinstance(e, dict) and isinstance(e.get("topic"), str)
        num, size = (e.get("partition"), e.get("size_bytes")) if ok else (None, None)
        if size is None and ok:
            continue  # unknown size
        if (not ok or isinstance(num, bool) or not isinstance(num, int)
                or isinstance(size, bool) or not isinstance(size, int) or size < 0):
            problems.append(f"sizes: partitions[{i}] needs a topic, a partition and a "
                            f"non-negative size_bytes")
            continue
        out[(e["topic"], num)] = size
    if problems:
        raise SnapshotError(problems)
    return out


def scope_snapshot(snap: Snapshot, *, brokers: Iterable[int] | None = None,
                   topics: Iterable[str] | None = None) -> Snapshot:
    """Restrict planning as Kafka's tool does: only ``topics`` move (the other partitions are
    left out of the snapshot), and their replicas go to ``brokers`` only (every other broker is
    drained of them). SnapshotError names unknown brokers and topics."""
    problems: list[str] = []
    parts = snap.partitions
    if topics is not None:
        wanted = set(topics)
        known = {p.topic for p in parts}
        problems += [f"topic {t} does not exist" for t in sorted(wanted - known)]
        parts = tuple(p for p in parts if p.topic in wanted)
    decommission = snap.decommission
    if brokers is not None:
        allowed = set(brokers)
        problems += [f"broker {b} (--brokers) is not in the cluster"
                     for b in sorted(allowed - set(snap.broker_ids))]
        if not allowed:
            problems.append("the broker list is empty")
        decommission = decommission | (frozenset(snap.broker_ids) - allowed)
    if problems:
        raise SnapshotError(problems)
    return Snapshot(brokers=snap.brokers, partitions=parts, decommission=decommission,
                    new_brokers=snap.new_brokers, meta=snap.meta)
