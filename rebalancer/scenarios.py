"""Synthetic cluster snapshots for the planner's tests and benchmark, deterministic per seed.

A :class:`Scenario` describes a cluster by a handful of knobs (brokers and new empty brokers,
racks, topics and their partition counts, replication factor, how the current replicas are
placed, rack violations, brokers to decommission, partition sizes) and :func:`generate` turns
it into a :class:`~rebalancer.snapshot.Snapshot`. Everything random is drawn from one
``random.Random(seed)``: the same scenario gives the same snapshot, on any machine.

Brokers are numbered from 1; broker ``b`` sits in rack ``r{(b - 1) % racks}``, so new brokers
are spread over the racks too. Topics are named ``t0000``, ``t0001``, ... Only the existing
brokers hold replicas; the new ones start empty.

Placement of the current replicas:

- ``roundrobin``: a balanced, rack-aware start, in the manner of Kafka's rack-aware assignment.
  The existing brokers are listed alternating between racks; each topic's partition leaders walk
  that list from a random start, and each partition's followers are the next brokers at a
  distance that grows by one every full round, skipping brokers of a rack the partition already
  uses while it has racks left to use.
- ``random``: every replica drawn at random, with broker weights ``1 / rank ** zipf_s`` over a
  random ranking of the brokers (``zipf_s`` 0: uniform; larger: a few hot brokers), avoiding
  racks the partition already uses while it has racks left to use.

``rack_violation_frac`` of the partitions are drawn at random ignoring racks instead, which
leaves rack violations for a planner to repair. Sizes, when wanted, are log-normal: a median per
topic drawn around ``size_median_gib``, and each partition around its topic's.

The standard scenarios of the planner benchmark are :data:`SCENARIOS` (S, M, L, XL with a
million partitions, and XXL with five million on 3,000 brokers, for the Spark engine).
:func:`scaled` shrinks (or grows) one by a factor, racks and shape kept: ``XXL`` at 0.1 is
500,000 partitions on 300 brokers. ``python -m rebalancer.scenarios`` writes one, or any other,
as a snapshot file (``.json``, or ``.parquet`` for the big ones) that ``partctl reassign
generate --snapshot`` reads.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Literal

from rebalancer.snapshot import PartitionReplicas, Snapshot, SnapshotBroker, save_snapshot

__all__ = ["SCENARIOS", "Scenario", "generate", "main", "rack_of", "scaled"]

GIB = 1 << 30


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """The knobs of a synthetic cluster. Give ``partitions`` (per topic) or
    ``total_partitions`` (spread over the topics by ``partition_dist``), not both."""

    brokers: int
    """Existing brokers, which hold the current replicas."""
    topics: int
    partitions: int | None = None
    total_partitions: int | None = None
    partition_dist: Literal["zipf", "uniform"] = "zipf"
    """With ``total_partitions``: topic sizes proportional to ``1 / rank ** topic_zipf_s``,
    or as even as they divide."""
    topic_zipf_s: float = 1.0
    new_brokers: int = 0
    """Empty brokers added after the existing ones."""
    racks: int = 1
    rf: int = 3
    placement: Literal["roundrobin", "random"] = "roundrobin"
    zipf_s: float = 0.0
    """Hot-broker skew of ``random`` placement."""
    rack_violation_frac: float = 0.0
    decommission: int = 0
    """How many existing brokers, drawn at random, the snapshot lists to decommission."""
    sizes: bool = True
    size_median_gib: float = 2.0
    size_sigma: float = 1.2
    """Log-normal sigma of the topics' median partition sizes."""
    size_partition_sigma: float = 0.3
    """Log-normal sigma of a partition's size around its topic's median."""
    seed: int = 1

    def problems(self) -> list[str]:
        """Why this scenario cannot be generated, one line each (empty when it can)."""
        out = []
        if self.brokers < 1 or self.topics < 1 or self.racks < 1 or self.rf < 1:
            out.append("brokers, topics, racks and rf must be at least 1")
        if self.new_brokers < 0 or not 0 <= self.decommission <= self.brokers:
            out.append("new_brokers must be >= 0 and decommission between 0 and brokers")
        if self.rf > self.brokers:
            out.append(f"rf {self.rf} exceeds the {self.brokers} existing brokers")
        if (self.partitions is None) == (self.total_partitions is None):
            out.append("give partitions (per topic) or total_partitions, not both")
        elif self.partitions is not None and self.partitions < 1:
            out.append("partitions must be at least 1")
        elif self.total_partitions is not None and self.total_partitions < self.topics:
            out.append("total_partitions must be at least topics")
        if not 0.0 <= self.rack_violation_frac <= 1.0:
            out.append("rack_violation_frac must be between 0 and 1")
        return out


SCENARIOS: dict[str, Scenario] = {
    "S": Scenario(brokers=6, new_brokers=2, racks=3, topics=50, partitions=12, rf=3, seed=1),
    "M": Scenario(brokers=60, racks=6, topics=400, total_partitions=20_000, rf=3,
                  placement="random", zipf_s=0.5, rack_violation_frac=0.01, seed=2),
    "L": Scenario(brokers=300, new_brokers=30, racks=10, topics=2_000, total_partitions=200_000,
                  rf=3, placement="roundrobin", seed=3),
    "XL": Scenario(brokers=900, new_brokers=100, racks=20, topics=10_000,
                   total_partitions=1_000_000, rf=3, placement="roundrobin", seed=4),
    "XXL": Scenario(brokers=2_700, new_brokers=300, racks=30, topics=50_000,
                    total_partitions=5_000_000, rf=3, placement="roundrobin", seed=5),
}
"""The planner benchmark's standard scenarios."""


def scaled(scenario: Scenario, factor: float) -> Scenario:
    """``scenario`` with its brokers (existing, new, to decommission), topics and partitions
    multiplied by ``factor`` (rounded, each kept at least what the scenario needs: one topic,
    ``rf`` brokers, a partition per topic); racks, replication factor, placement and sizes as
    they were. ValueError for a factor that is not above 0."""
    if not factor > 0 or math.isinf(factor):
        raise ValueError(f"the scale must be a number above 0, got {factor}")

    def times(n: int, least: int = 0) -> int:
        return max(least, round(n * factor))

    s = scenario
    topics = times(s.topics, 1)
    brokers = times(s.brokers, max(1, s.rf))
    return replace(
        s, brokers=brokers, new_brokers=times(s.new_brokers),
        decommission=min(times(s.decommission), brokers), topics=topics,
        total_partitions=None if s.total_partitions is None
        else times(s.total_partitions, topics))


def rack_of(broker: int, racks: int) -> str:
    return f"r{(broker - 1) % max(1, racks)}"


def _partition_counts(s: Scenario, rng: random.Random) -> list[int]:
    """Partitions per topic, in a random order of topics."""
    if s.partitions is not None:
        return [s.partitions] * s.topics
    total = s.total_partitions or 0
    if s.partition_dist == "uniform":
        each, rest = divmod(total, s.topics)
        counts = [each + (i < rest) for i in range(s.topics)]
    else:
        weights = [(rank + 1) ** -s.topic_zipf_s for rank in range(s.topics)]
        scale = total / sum(weights)
        counts = [max(1, math.floor(w * scale)) for w in weights]
        # Rounding leaves a few over or under: settle them on the largest topics first,
        # never taking a topic below one partition.
        i, missing = 0, total - sum(counts)
        while missing:
            k = i % s.topics
            if missing > 0:
                counts[k] += 1
                missing -= 1
            elif counts[k] > 1:
                counts[k] -= 1
                missing += 1
            i += 1
    rng.shuffle(counts)
    return counts


def _rack_alternated(brokers: Sequence[int], rack: dict[int, str]) -> list[int]:
    """The brokers as r0's first, r1's first, ..., r0's second, ...: neighbours differ in rack
    while every rack still has brokers left."""
    by_rack: dict[str, list[int]] = {}
    for b in sorted(brokers):
        by_rack.setdefault(rack[b], []).append(b)
    columns = [by_rack[r] for r in sorted(by_rack)]
    depth = max(len(c) for c in columns)
    return [c[i] for i in range(depth) for c in columns if i < len(c)]


def _roundrobin(count: int, rf: int, ring: list[int], rack: dict[int, str], n_racks: int,
                rng: random.Random) -> list[list[int]]:
    n = len(ring)
    start = rng.randrange(n)
    shift = rng.randrange(1, n) if n > 1 else 0
    out = []
    for p in range(count):
        first = (start + p) % n
        replicas = [ring[first]]
        used = {rack[ring[first]]}
        gap = 1 + (shift + p // n) % max(1, n - 1)
        for k in range(4 * n):
            if len(replicas) == rf:
                break
            b = ring[(first + gap + k) % n]
            if b in replicas or (rack[b] in used and len(used) < n_racks):
                continue
            replicas.append(b)
            used.add(rack[b])
        out.append(replicas)
    return out


def _drawn(rf: int, brokers: Sequence[int], cumulative: Sequence[float], rack: dict[int, str],
           n_racks: int, rng: random.Random, *, racks_matter: bool) -> list[int]:
    """``rf`` distinct brokers drawn by weight (``cumulative``: the running sums of the brokers'
    weights), in distinct racks while racks are left when ``racks_matter``."""
    replicas: list[int] = []
    used: set[str] = set()

    def fits(b: int) -> bool:
        return b not in replicas and not (racks_matter and rack[b] in used
                                          and len(used) < n_racks)

    while len(replicas) < rf:
        # Draw until a broker fits: cheap while rf is small against the brokers; after many
        # misses, draw among the fitting brokers only, by the same weights.
        for _ in range(64):
            b = rng.choices(brokers, cum_weights=cumulative)[0]
            if fits(b):
                break
        else:
            pool = [i for i, x in enumerate(brokers) if fits(x)]
            weights = [cumulative[i] - (cumulative[i - 1] if i else 0.0) for i in pool]
            b = brokers[rng.choices(pool, weights=weights)[0]]
        replicas.append(b)
        used.add(rack[b])
    return replicas


def _running_sums(weights: Sequence[float]) -> list[float]:
    out, acc = [], 0.0
    for w in weights:
        acc += w
        out.append(acc)
    return out


def generate(scenario: Scenario) -> Snapshot:
    """The snapshot of ``scenario``; ValueError (one line per problem) if it is impossible."""
    problems = scenario.problems()
    if problems:
        raise ValueError("impossible scenario: " + "; ".join(problems))
    s = scenario
    rng = random.Random(s.seed)
    everyone = range(1, s.brokers + s.new_brokers + 1)
    rack = {b: rack_of(b, s.racks) for b in everyone}
    existing = list(range(1, s.brokers + 1))
    n_racks = len({rack[b] for b in existing})
    counts = _partition_counts(s, rng)
    ring = _rack_alternated(existing, rack)
    ranking = existing[:]
    rng.shuffle(ranking)
    weight = {b: (rank + 1) ** -s.zipf_s for rank, b in enumerate(ranking)}
    skewed = _running_sums([weight[b] for b in existing])
    even = _running_sums([1.0] * len(existing))
    width = max(4, len(str(s.topics - 1)))
    parts: list[PartitionReplicas] = []
    for t, count in enumerate(counts):
        topic = f"t{t:0{width}d}"
        median = s.size_median_gib * GIB * math.exp(rng.gauss(0.0, s.size_sigma)) \
            if s.sizes else None
        if s.placement == "roundrobin":
            broken = [rng.random() < s.rack_violation_frac for _ in range(count)]
            placed = _roundrobin(count, s.rf, ring, rack, n_racks, rng)
            placed = [_drawn(s.rf, existing, even, rack, n_racks, rng, racks_matter=False)
                      if broken[p] else reps for p, reps in enumerate(placed)]
        else:
            placed = [_drawn(s.rf, existing, skewed, rack, n_racks, rng,
                             racks_matter=rng.random() >= s.rack_violation_frac)
                      for _ in range(count)]
        for p, replicas in enumerate(placed):
            size = None if median is None else \
                int(median * math.exp(rng.gauss(0.0, s.size_partition_sigma)))
            parts.append(PartitionReplicas(topic=topic, partition=p, replicas=tuple(replicas),
                                           size_bytes=size))
    leaving = frozenset(rng.sample(existing, s.decommission)) if s.decommission else frozenset()
    return Snapshot(
        brokers=tuple(SnapshotBroker(id=b, rack=rack[b]) for b in everyone),
        partitions=tuple(parts),
        decommission=leaving,
        new_brokers=frozenset(range(s.brokers + 1, s.brokers + s.new_brokers + 1)),
        meta={"generator": "rebalancer.scenarios",
              "scenario": {f.name: getattr(s, f.name) for f in fields(s)}},
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Write a scenario's snapshot (``.json`` or ``.parquet``): a named one, changed by any
    knob given, or one made of knobs alone."""
    ap = argparse.ArgumentParser(prog="python -m rebalancer.scenarios",
                                 description=main.__doc__)
    ap.add_argument("name", nargs="?", choices=sorted(SCENARIOS),
                    help="a standard scenario to start from")
    ap.add_argument("-o", "--output", required=True,
                    help="snapshot file to write (.json, or .parquet: smaller and faster)")
    ap.add_argument("--scale", type=float, default=None, metavar="F",
                    help="multiply brokers, topics and partitions by F (XXL --scale 0.1: "
                         "500,000 partitions on 300 brokers), after the knobs")
    for f in fields(Scenario):
        flag = "--" + f.name.replace("_", "-")
        if f.name == "sizes":
            ap.add_argument("--no-sizes", dest="sizes", action="store_const", const=False)
        elif f.name in ("placement", "partition_dist"):
            ap.add_argument(flag, choices=["roundrobin", "random"] if f.name == "placement"
                            else ["zipf", "uniform"])
        else:
            ap.add_argument(flag, type=float if str(f.type).startswith("float") else int)
    args = ap.parse_args(argv)
    knobs = {f.name: getattr(args, f.name) for f in fields(Scenario)
             if getattr(args, f.name) is not None}
    if args.name:
        if "partitions" in knobs or "total_partitions" in knobs:  # one replaces the other
            knobs = {"partitions": None, "total_partitions": None, **knobs}
        scenario = replace(SCENARIOS[args.name], **knobs)
    else:
        if "brokers" not in knobs or "topics" not in knobs:
            ap.error("give a scenario name or at least --brokers and --topics")
        scenario = Scenario(**knobs)
    try:
        if args.scale is not None:
            scenario = scaled(scenario, args.scale)
        snap = generate(scenario)
    except ValueError as exc:
        ap.error(str(exc))
    save_snapshot(snap, args.output)
    print(f"Wrote {args.output}: {len(snap.brokers)} brokers ({len(snap.new_brokers)} new), "
          f"{len(snap.partitions)} partitions, decommission {sorted(snap.decommission)}.",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
