"""Cluster snapshot: brokers, racks, partitions and their replicas, the planner's input.

The JSON format (the same as docs/architecture.md shows)::

    {"brokers": [{"id": 1, "rack": "r0"}, ...],
     "partitions": [{"topic": "t0", "partition": 0, "replicas": [1, 2, 3], "size_bytes": 123}],
     "decommission": [5], "meta": {"new_brokers": [7, 8], ...}}

The first replica of a list is the preferred leader. Big snapshots also load from and save to
Parquet (one row per partition, brokers in the file's key-value metadata); pyarrow (the
``spark`` extra) is imported lazily, only there.
"""

from __future__ import annotations

import errno
import json
import os
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coordinator.layout import validate_topic
from rebalancer import strict_json
from rebalancer.extras import import_extra


class SnapshotError(ValueError):
    """A snapshot that cannot be planned on; carries one line per problem."""

    def __init__(self, problems: Iterable[str]) -> None:
        self.problems: tuple[str, ...] = tuple(problems)
        super().__init__("invalid snapshot:\n" + "\n".join(self.problems))


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotBroker:
    """A broker as a snapshot lists it: its id and rack (None: no rack), all the planner needs
    to know of it."""

    id: int
    rack: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionReplicas:
    """One partition's assignment; ``replicas[0]`` is the preferred leader."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    size_bytes: int | None = None

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.partition)


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    brokers: tuple[SnapshotBroker, ...]
    partitions: tuple[PartitionReplicas, ...]
    decommission: frozenset[int] = frozenset()
    new_brokers: frozenset[int] = frozenset()
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def broker_ids(self) -> tuple[int, ...]:
        return tuple(sorted(b.id for b in self.brokers))

    @property
    def rack_of(self) -> dict[int, str | None]:
        return {b.id: b.rack for b in self.brokers}

    @property
    def has_sizes(self) -> bool:
        return any(p.size_bytes is not None for p in self.partitions)

    def validate(self) -> None:
        """Raise SnapshotError listing every problem, one line each."""
        problems = snapshot_problems(self)
        if problems:
            raise SnapshotError(problems)


def snapshot_problems(snap: Snapshot) -> list[str]:
    """Every structural problem of a snapshot, one line each (empty when it is sound)."""
    problems: list[str] = []
    ids = Counter(b.id for b in snap.brokers)
    for bid, n in sorted(ids.items()):
        if n > 1:
            problems.append(f"broker {bid} is listed {n} times")
    for bid in sorted(snap.decommission - ids.keys()):
        problems.append(f"decommission lists unknown broker {bid}")
    for bid in sorted(snap.new_brokers - ids.keys()):
        problems.append(f"new_brokers lists unknown broker {bid}")
    racks = {b.rack for b in snap.brokers}
    if None in racks and len(racks) > 1:
        problems.append("some brokers have a rack and some do not")
    seen: set[tuple[str, int]] = set()
    for p in snap.partitions:
        name = f"{p.topic}-{p.partition}"
        if p.key in seen:
            problems.append(f"partition {name} is listed twice")
        seen.add(p.key)
        if p.partition < 0:
            problems.append(f"partition {name} has a negative partition number")
        if not p.replicas:
            problems.append(f"partition {name} has no replicas")
        unknown = sorted({r for r in p.replicas if r not in ids})
        if unknown:
            problems.append(f"partition {name} has replicas on unknown brokers {unknown}")
        dups = sorted(r for r, n in Counter(p.replicas).items() if n > 1)
        if dups:
            problems.append(f"partition {name} lists broker(s) {dups} more than once")
        if p.size_bytes is not None and p.size_bytes < 0:
            problems.append(f"partition {name} has a negative size_bytes")
    return problems


def liveness_problems(racks: Mapping[int, str | None], offline: Iterable[int],
                      decommission: frozenset[int], new_brokers: frozenset[int]) -> list[str]:
    """What stops a live cluster from being planned on, one line each: a broker holding
    replicas that is not registered (``offline``) must be decommissioned (a plan can only drain
    it); decommissioned and new brokers must be known. ``racks``: the registered brokers."""
    offline = sorted(offline)
    problems = [f"broker {b} holds replicas but is not registered (offline?): bring it back, "
                f"or decommission it to drain it" for b in offline if b not in decommission]
    for b in sorted(decommission - racks.keys() - set(offline)):
        problems.append(f"cannot decommission broker {b}: it is not registered")
    for b in sorted(new_brokers - racks.keys()):
        problems.append(f"new broker {b} is not registered")
    for b in sorted(new_brokers & decommission):
        problems.append(f"broker {b} cannot be both new and decommissioned")
    if not racks:
        problems.append("no broker is registered")
    return problems


def live_brokers(racks: Mapping[int, str | None], offline: Iterable[int]
                 ) -> tuple[SnapshotBroker, ...]:
    """The registered brokers and the offline ones holding replicas: an offline broker's rack
    is unknown, so it gets a placeholder rack of the cluster (which only the score of the
    current state can notice)."""
    named = sorted({r for r in racks.values() if r is not None})
    placeholder = named[0] if named and None not in racks.values() else None
    return tuple(SnapshotBroker(id=b, rack=racks.get(b, placeholder))
                 for b in sorted({*racks, *offline}))


def _int(value: Any, what: str, problems: list[str]) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        problems.append(f"{what} must be an integer, got {value!r}")
        return None
    return value


def snapshot_from_dict(doc: Any, *, validate: bool = True) -> Snapshot:
    """Build a snapshot from the neutral JSON document; raise SnapshotError on bad input."""
    problems: list[str] = []
    if not isinstance(doc, dict):
        raise SnapshotError(["snapshot must be a JSON object"])
    for key in ("brokers", "partitions"):
        if not isinstance(doc.get(key), list):
            problems.append(f"snapshot needs a '{key}' list")
    if problems:
        raise SnapshotError(problems)
    brokers: list[SnapshotBroker] = []
    for i, b in enumerate(doc["brokers"]):
        if not isinstance(b, dict) or "id" not in b:
            problems.append(f"brokers[{i}] must be an object with an 'id'")
            continue
        bid = _int(b["id"], f"brokers[{i}].id", problems)
        rack = b.get("rack")
        if rack is not None and not isinstance(rack, str):
            problems.append(f"brokers[{i}].rack must be a string or null")
            rack = str(rack)
        if bid is not None:
            brokers.append(SnapshotBroker(id=bid, rack=rack))
    parts: list[PartitionReplicas] = []
    for i, p in enumerate(doc["partitions"]):
        if not isinstance(p, dict) or not {"topic", "partition", "replicas"} <= p.keys():
            problems.append(f"partitions[{i}] needs 'topic', 'partition' and 'replicas'")
            continue
        if not isinstance(p["topic"], str) or not p["topic"]:
            problems.append(f"partitions[{i}].topic must be a non-empty string")
            continue
        try:
            validate_topic(p["topic"])
        except ValueError as e:
            problems.append(f"partitions[{i}]: {e}")
            continue
        num = _int(p["partition"], f"partitions[{i}].partition", problems)
        reps = p["replicas"]
        if not isinstance(reps, list):
            problems.append(f"partitions[{i}].replicas must be a list")
            continue
        ints = [_int(r, f"partitions[{i}].replicas", problems) for r in reps]
        size = p.get("size_bytes")
        if size is not None:
            size = _int(size, f"partitions[{i}].size_bytes", problems)
        if num is None or any(r is None for r in ints):
            continue
        parts.append(PartitionReplicas(topic=p["topic"], partition=num,
                                       replicas=tuple(ints), size_bytes=size))  # type: ignore[arg-type]
    decom = doc.get("decommission") or []
    meta = doc.get("meta") or {}
    new = meta.get("new_brokers") or [] if isinstance(meta, dict) else []
    decom_ids = [_int(x, "decommission", problems) for x in decom] if isinstance(decom, list) else []
    new_ids = [_int(x, "meta.new_brokers", problems) for x in new] if isinstance(new, list) else []
    if problems:
        raise SnapshotError(problems)
    snap = Snapshot(
        brokers=tuple(brokers), partitions=tuple(parts),
        decommission=frozenset(x for x in decom_ids if x is not None),
        new_brokers=frozenset(x for x in new_ids if x is not None),
        meta=meta if isinstance(meta, dict) else {},
    )
    if validate:
        snap.validate()
    return snap


def snapshot_to_dict(snap: Snapshot) -> dict[str, Any]:
    meta = dict(snap.meta)
    meta["new_brokers"] = sorted(snap.new_brokers)
    parts = []
    for p in snap.partitions:
        rec: dict[str, Any] = {"topic": p.topic, "partition": p.partition,
                               "replicas": list(p.replicas)}
        if p.size_bytes is not None:
            rec["size_bytes"] = p.size_bytes
        parts.append(rec)
    return {
        "brokers": [{"id": b.id, "rack": b.rack} for b in snap.brokers],
        "partitions": parts,
        "decommission": sorted(snap.decommission),
        "meta": meta,
    }


def _strict(text: str | bytes, what: str) -> Any:
    try:
        return strict_json.loads(text, what=what)
    except strict_json.InvalidJSON as e:
        raise SnapshotError(e.problems) from None


def load_snapshot(path: str | Path) -> Snapshot:
    """Load a snapshot from ``.json`` or ``.parquet`` (by suffix). SnapshotError lists every
    problem of the content; OSError (missing, unreadable) is the caller's to report."""
    path = Path(path)
    if path.suffix == ".parquet":
        return read_snapshot_parquet(path)
    return snapshot_from_dict(_strict(path.read_bytes(), f"{path}: "))


def save_snapshot(snap: Snapshot, path: str | Path) -> None:
    path = Path(path)
    if path.suffix == ".parquet":
        write_snapshot_parquet(snap, path)
        return
    path.write_text(json.dumps(snapshot_to_dict(snap), separators=(",", ":")) + "\n")


_PARQUET_KEY = b"partctl.snapshot"


def write_snapshot_parquet(snap: Snapshot, path: str | Path) -> None:
    """One row per partition (topic, partition, replicas list<int32>, size_bytes int64 nullable);
    brokers, decommission and new brokers go in the schema metadata as JSON."""
    pa = import_extra("pyarrow", extra="spark", feature="Parquet snapshots")
    pq = import_extra("pyarrow.parquet", extra="spark", feature="Parquet snapshots")

    header = snapshot_to_dict(Snapshot(brokers=snap.brokers, partitions=(),
                                       decommission=snap.decommission,
                                       new_brokers=snap.new_brokers, meta=snap.meta))
    table = pa.table(
        {
            "topic": pa.array([p.topic for p in snap.partitions], pa.string()),
            "partition": pa.array([p.partition for p in snap.partitions], pa.int32()),
            "replicas": pa.array([list(p.replicas) for p in snap.partitions],
                                 pa.list_(pa.int32())),
            "size_bytes": pa.array([p.size_bytes for p in snap.partitions], pa.int64()),
        }
    ).replace_schema_metadata({_PARQUET_KEY: json.dumps(header).encode()})
    pq.write_table(table, str(path))


_PARQUET_COLUMNS = ("topic", "partition", "replicas")
"""Required; ``size_bytes`` is optional (sizes unknown without it)."""


def read_snapshot_parquet(path: str | Path) -> Snapshot:
    """SnapshotError for a file that is not Parquet, not a partctl snapshot, or lacks a column;
    OSError (missing, unreadable) is the caller's to report."""
    pq = import_extra("pyarrow.parquet", extra="spark", feature="Parquet snapshots")
    pa = import_extra("pyarrow", extra="spark", feature="Parquet snapshots")

    path = Path(path)
    if path.is_dir():  # pyarrow would read a directory as a dataset of its files
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    try:
        table = pq.read_table(str(path))
    except pa.ArrowException as e:  # ArrowInvalid and friends; FileNotFoundError passes
        raise SnapshotError([f"{path}: not a Parquet file: {e}"]) from None
    raw = (table.schema.metadata or {}).get(_PARQUET_KEY)
    if raw is None:
        raise SnapshotError([f"{path}: not a partctl snapshot (no {_PARQUET_KEY.decode()} metadata)"])
    header = _strict(raw, f"{path}: snapshot metadata: ")
    if not isinstance(header, dict):
        raise SnapshotError([f"{path}: snapshot metadata must be a JSON object"])
    missing = [c for c in _PARQUET_COLUMNS if c not in table.column_names]
    if missing:
        raise SnapshotError([f"{path}: no {c!r} column (a snapshot has one row per partition "
                             f"with columns topic, partition, replicas, size_bytes)"
                             for c in missing])
    cols = table.to_pydict()
    sizes = cols.get("size_bytes", [None] * table.num_rows)
    header["partitions"] = [
        {"topic": t, "partition": n, "replicas": r, "size_bytes": s}
        for t, n, r, s in zip(cols["topic"], cols["partition"], cols["replicas"], sizes,
                              strict=True)
    ]
    return snapshot_from_dict(header)
