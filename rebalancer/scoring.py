"""How good a plan is, and how good any plan could be: scores and lower bounds on a snapshot.

The definitions, which the planner's tests, its benchmark, the CLI and the jobs all use:

- The brokers counted are every broker of the snapshot except those being decommissioned
  (``active``); a broker that holds nothing counts as 0.
- **Replica balance** and **leader balance**: max, min, mean, population standard deviation and
  spread (max - min) of the replicas, and of the preferred leaders (first replicas), per active
  broker. Means and deviations are rounded to 3 decimals.
- **Byte balance**, when partitions carry sizes (a partition without one weighs 0): the largest
  and smallest bytes per active broker over the mean, their coefficient of variation (4
  decimals), and the largest and mean in GiB (1 decimal).
- **Rack violations**: partitions whose replicas span fewer racks than min(RF, racks), racks
  being those of all brokers; none when there are fewer than two racks.
- **Movement** against the snapshot: partitions whose replica *set* gained a broker (moved),
  the brokers gained summed over partitions (replicas moved, each a copy of the partition), the
  bytes those copies carry, partitions whose first replica changed (leader changes), partitions
  only reordered, and partitions whose replica count changed (RF changes).
- **Validity**: no partition the snapshot lacks, none listed twice, none empty, no unknown or
  repeated broker in a list, nothing left on a broker being decommissioned.

The lower bounds (:func:`lower_bounds`) are what no plan can beat from this snapshot; a
planner's result is judged against them:

- replica spread 0 when the replicas divide evenly over the active brokers, else 1; leader
  spread likewise for the partitions;
- the rack-aware replica spread: the least max - min reachable when every partition keeps at
  most one replica per rack (or an even share of them when its RF exceeds the racks), with the
  racks as uneven as they are;
- replicas to move for count balance: let the brokers holding most now keep the larger share
  (brokers being decommissioned keep none) and count what is above each share; every move
  lowers one broker by one. Replicas to move for racks: per partition, the racks it misses (a
  move adds at most one). The bound is the larger of the two; a second one does the same for
  the rack-aware spread;
- bytes to move for count balance: each over-full broker sheds at least its smallest excess
  replicas (the largest shares going to the brokers holding most, as above);
- bytes to move for disk balance: what the brokers below the mean bytes per active broker lack
  (every byte they gain is copied): the least a plan bringing every broker to the mean moves.
  Where racks or sizes forbid that (``bytes_max_over_mean`` above 1) a plan may move less;
- bytes max/mean per broker (what the disk goal can reach): 1, or more when the sizes forbid it:
  no broker holds less than a whole replica of the largest partition, and with K racks every
  rack holds at least ``RF - (K - 1) * cap`` replicas of each partition (``cap`` replicas per
  rack, one when RF <= K), spread at best evenly over its brokers.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rebalancer.snapshot import Snapshot

if TYPE_CHECKING:
    from rebalancer.plan import Plan

__all__ = ["ByteBalance", "LowerBounds", "Scores", "Spread", "lower_bounds", "score_plan"]

GIB = 2**30
Key = tuple[str, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class Spread:
    max: int
    min: int
    mean: float
    stddev: float
    spread: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ByteBalance:
    max_over_mean: float
    min_over_mean: float
    cv: float
    max_gib: float
    mean_gib: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Scores:
    replicas_per_broker: Spread
    leaders_per_broker: Spread
    bytes_per_broker: ByteBalance | None
    rack_violations: int
    rf_changes: int
    partitions_moved: int
    replicas_moved: int
    bytes_moved: int | None
    leader_changes: int
    order_only_changes: int
    valid: bool

    @property
    def bytes_moved_gib(self) -> float | None:
        return None if self.bytes_moved is None else round(self.bytes_moved / GIB, 1)


@dataclass(frozen=True, slots=True, kw_only=True)
class LowerBounds:
    """What no plan can beat on a snapshot (see the module's docstring)."""

    total_replicas: int
    partitions: int
    active_brokers: int
    racks: int
    target_replicas_per_broker: float
    replica_spread: int
    replica_spread_rackaware: int | None
    """None without racks on every active broker, or with one rack only."""
    leader_spread: int
    replicas_moved_count: int
    replicas_moved_rack: int
    replicas_moved: int
    replicas_moved_rackaware_spread: int | None
    bytes_moved_count_balance: int | None
    """None when the partitions carry no sizes."""
    bytes_moved_disk_balance: int | None = None
    """None when the partitions carry no sizes."""
    bytes_max_over_mean: float | None = None
    """The least bytes max/mean per active broker any plan can reach; None without sizes."""

    @property
    def best_replica_spread(self) -> int:
        """The rack-aware spread where it applies, else the count bound."""
        if self.replica_spread_rackaware is None:
            return self.replica_spread
        return self.replica_spread_rackaware

    @property
    def best_replicas_moved(self) -> int:
        """The moves needed to reach :attr:`best_replica_spread` (rack-aware where it applies,
        and not below the count and rack bounds)."""
        if self.replicas_moved_rackaware_spread is None:
            return self.replicas_moved
        return self.replicas_moved_rackaware_spread

    @property
    def bytes_moved_count_balance_gib(self) -> float | None:
        if self.bytes_moved_count_balance is None:
            return None
        return round(self.bytes_moved_count_balance / GIB, 1)


def _spread(values: Sequence[int]) -> Spread:
    if not values:
        return Spread(max=0, min=0, mean=0.0, stddev=0.0, spread=0)
    n = len(values)
    mean = sum(values) / n
    deviation = math.sqrt(sum((v - mean) ** 2 for v in values) / n)
    hi, lo = max(values), min(values)
    return Spread(max=hi, min=lo, mean=round(mean, 3), stddev=round(deviation, 3), spread=hi - lo)


def _byte_balance(values: Sequence[int]) -> ByteBalance:
    mean = sum(values) / len(values) if values else 0.0
    if not mean:
        return ByteBalance(max_over_mean=0.0, min_over_mean=0.0, cv=0.0,
                           max_gib=round(max(values, default=0) / GIB, 1), mean_gib=0.0)
    deviation = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    return ByteBalance(max_over_mean=round(max(values) / mean, 4),
                       min_over_mean=round(min(values) / mean, 4), cv=round(deviation / mean, 4),
                       max_gib=round(max(values) / GIB, 1), mean_gib=round(mean / GIB, 1))


def _rack_violations(assignment: Iterable[Sequence[int]], rack: Mapping[int, str | None],
                     racks: int) -> int:
    if racks < 2:
        return 0
    return sum(1 for reps in assignment
               if len({rack.get(b) for b in reps}) < min(len(reps), racks))


def _active(snap: Snapshot) -> list[int]:
    return [b for b in snap.broker_ids if b not in snap.decommission]


def _racks(snap: Snapshot) -> int:
    return len({b.rack for b in snap.brokers if b.rack is not None})


def score_plan(snap: Snapshot, plan: Plan | None = None) -> Scores:
    """Score the assignment ``plan`` leads to (the snapshot as it is when None).

    A plan lists only the partitions that change; the others keep their replicas. A plan entry
    for a partition the snapshot lacks makes the plan invalid and is not counted.
    """
    current = {p.key: p.replicas for p in snap.partitions}
    size = {p.key: p.size_bytes or 0 for p in snap.partitions}
    has_sizes = snap.has_sizes
    rack = snap.rack_of
    after = dict(current)
    valid = True
    listed: set[Key] = set()
    for r in plan.partitions if plan is not None else ():
        key = (r.topic, r.partition)
        if key in listed or key not in current:
            valid = False
        listed.add(key)
        if key in current:
            after[key] = tuple(r.replicas)

    replicas: Counter[int] = Counter()
    leaders: Counter[int] = Counter()
    load: Counter[int] = Counter()
    for key, reps in after.items():
        replicas.update(reps)
        if reps:
            leaders[reps[0]] += 1
        else:
            valid = False
        if has_sizes:
            for b in reps:
                load[b] += size[key]
        if (len(set(reps)) != len(reps) or any(b not in rack or b in snap.decommission
                                               for b in reps)):
            valid = False

    moved = copies = copied_bytes = leader_changes = reordered = rf_changes = 0
    for key, old in current.items():
        new = after[key]
        rf_changes += len(new) != len(old)
        gained = len(set(new) - set(old))
        if gained:
            moved += 1
            copies += gained
            copied_bytes += gained * size[key]
        elif new != old:
            reordered += 1
        leader_changes += bool(new and old and new[0] != old[0])

    active = _active(snap)
    return Scores(
        replicas_per_broker=_spread([replicas[b] for b in active]),
        leaders_per_broker=_spread([leaders[b] for b in active]),
        bytes_per_broker=_byte_balance([load[b] for b in active]) if has_sizes else None,
        rack_violations=_rack_violations(after.values(), rack, _racks(snap)),
        rf_changes=rf_changes, partitions_moved=moved, replicas_moved=copies,
        bytes_moved=copied_bytes if has_sizes else None, leader_changes=leader_changes,
        order_only_changes=reordered, valid=valid,
    )


# ------------------------------------------------------------------------------ lower bounds


def _rackaware(snap: Snapshot, active: Sequence[int], held: Mapping[int, int]
               ) -> tuple[int | None, int | None]:
    """The least spread reachable with at most one replica per rack per partition, and the
    moves it takes at least from ``held``; (None, None) where it does not apply.

    With K racks, a rack can hold at most one replica of a partition whose RF is at most K
    (ceil(RF/K) of a larger one): ``cap`` replicas in all, and so at least ``floor`` = R - (K-1)
    * cap. Inside a rack replicas spread evenly over its brokers. Spread d is reachable when
    some level m (every broker between m and m + d) lets each rack j with b_j brokers take a
    total n_j in [max(floor, m b_j), min(cap, (m + d) b_j)] and the n_j can add up to R.
    """
    rack = snap.rack_of
    members = Counter(rack[b] for b in active)
    if None in members or len(members) < 2:
        return None, None
    k = len(members)
    total = cap = 0
    for p in snap.partitions:
        rf = len(p.replicas)
        total += rf
        cap += 1 if rf <= k else -(-rf // k)
    if k * cap < total:
        return None, None
    floor = max(0, total - (k - 1) * cap)
    sizes = list(members.values())
    brokers = sum(sizes)

    def levels(d: int) -> list[int]:
        found = []
        for m in range(max(0, -(-total // brokers) - d), total // brokers + 1):
            lows = [max(floor, m * b) for b in sizes]
            highs = [min(cap, (m + d) * b) for b in sizes]
            if all(lo <= hi for lo, hi in zip(lows, highs, strict=True)) \
                    and sum(lows) <= total <= sum(highs):
                found.append(m)
        return found

    lo, hi = 0, total  # the least d with a level: reachable spreads only grow with d
    while lo < hi:
        mid = (lo + hi) // 2
        if levels(mid):
            hi = mid
        else:
            lo = mid + 1
    moves = None
    for m in levels(lo):
        shed = sum(max(0, held[b] - (m + lo)) for b in active) + sum(
            held[b] for b in snap.decommission)
        fill = sum(max(0, m - held[b]) for b in active)
        moves = max(shed, fill) if moves is None else min(moves, max(shed, fill))
    return lo, moves


def _disk_moves(snap: Snapshot, active: Sequence[int]) -> int | None:
    """The bytes the brokers below the mean must gain (see the module's docstring)."""
    if not snap.has_sizes or not active:
        return None
    load: Counter[int] = Counter()
    for p in snap.partitions:
        for b in p.replicas:
            load[b] += p.size_bytes or 0
    mean = sum(load.values()) / len(active)
    return int(sum(max(0.0, mean - load[b]) for b in active))


def _disk_bound(snap: Snapshot, active: Sequence[int]) -> float | None:
    """The least bytes max/mean per active broker (see the module's docstring)."""
    if not snap.has_sizes or not active:
        return None
    total = sum((p.size_bytes or 0) * len(p.replicas) for p in snap.partitions)
    if not total:
        return None
    mean = total / len(active)
    worst = float(max((p.size_bytes or 0) for p in snap.partitions))
    rack = snap.rack_of
    members = Counter(rack[b] for b in active)
    k = len(members)
    if None not in members and k > 1:
        forced = 0
        for p in snap.partitions:
            rf = len(p.replicas)
            cap = 1 if rf <= k else -(-rf // k)
            forced += max(0, rf - (k - 1) * cap) * (p.size_bytes or 0)
        worst = max(worst, forced / min(members.values()))
    return round(max(1.0, worst / mean), 4)


def lower_bounds(snap: Snapshot) -> LowerBounds:
    """What no plan can beat on ``snap`` (see the module's docstring)."""
    active = _active(snap)
    n = len(active)
    held: Counter[int] = Counter()
    sizes_held: dict[int, list[int]] = defaultdict(list)
    for p in snap.partitions:
        held.update(p.replicas)
        for b in p.replicas:
            sizes_held[b].append(p.size_bytes or 0)
    total = sum(held.values())
    parts = len(snap.partitions)
    each, larger = divmod(total, n) if n else (0, 0)
    # The larger shares go to the brokers holding most now: that leaves the least above them.
    share = {b: each + (i < larger) for i, b in enumerate(sorted(active, key=lambda b:
                                                                 (-held[b], b)))}
    excess = {b: max(0, held[b] - share.get(b, 0)) for b in snap.broker_ids}
    by_count = sum(excess.values())
    racks = _racks(snap)
    rack = snap.rack_of
    by_rack = 0
    if racks > 1:
        by_rack = sum(max(0, min(len(p.replicas), racks) - len({rack[b] for b in p.replicas}))
                      for p in snap.partitions)
    spread_ra, moves_ra = _rackaware(snap, active, held)
    return LowerBounds(
        total_replicas=total, partitions=parts, active_brokers=n, racks=racks,
        target_replicas_per_broker=round(total / n, 3) if n else 0.0,
        replica_spread=int(bool(n) and total % n != 0),
        replica_spread_rackaware=spread_ra,
        leader_spread=int(bool(n) and parts % n != 0),
        replicas_moved_count=by_count, replicas_moved_rack=by_rack,
        replicas_moved=max(by_count, by_rack),
        replicas_moved_rackaware_spread=None if moves_ra is None else max(moves_ra, by_rack),
        bytes_moved_count_balance=sum(sum(sorted(sizes_held[b])[:x])
                                      for b, x in excess.items() if x)
        if snap.has_sizes else None,
        bytes_moved_disk_balance=_disk_moves(snap, active),
        bytes_max_over_mean=_disk_bound(snap, active),
    )
