"""The shard-level planning function, the same for every engine.

A shard is a set of partitions (rows) with its own quotas (see quotas.py). Solving it:

1. keep: drop the replicas the hard constraints forbid (brokers leaving, duplicates, a second
   replica in a rack when the partition should span more racks, RF decreases); each dropped or
   missing replica is a *hole*;
2. shed: a broker above its shard quota gives up exactly its surplus; with sizes known it gives
   up its smallest replicas (the fewest bytes: rebalancer.scoring's count-balance bytes bound),
   or under the disk goal the replicas whose total brings its bytes closest to its byte target
   (a window in its sizes sorted), else a seeded pseudo-random choice. Nothing else moves: the
   moves are the surplus plus the holes, which is rebalancer.scoring's lower bound when quotas
   are met;
3. fill: holes, biggest first, go to the rack with the largest remaining deficit that the
   partition does not use yet, then to the broker of that rack furthest below its byte target
   per missing replica (or with the largest deficit). A hole no rack can take is placed by a
   two-step exchange (another partition hands a replica to a deficit broker it can take, the
   hole takes the freed broker), else above quota as a last resort (reported as a residual);
   when only some brokers may gain (``Cluster.receivers``), the exchange and the last resort
   place holes on those brokers only (the last resort where it can);
4. disk goal only: bytes evened by moves and swaps from the brokers furthest over their byte
   target to those furthest under, replica counts kept within the goal's slack of their quotas;
5. leaders: keep the current leader while its broker is under its leader quota, give the other
   partitions to the replica furthest under its quota (partitions touching needy brokers first),
   then augmenting paths (BFS over "broker x leads a partition that broker y also holds") until
   every broker meets its leader quota. Reordering moves no data.

Deterministic: iteration orders are sorted, ties broken by broker id, and the only randomness is
``random.Random`` seeded from (cluster seed, shard).
"""

from __future__ import annotations

import bisect
import random
from collections import deque
from collections.abc import Mapping, Sequence

from rebalancer.planner.model import (
    Cluster,
    PlanningError,
    Row,
    ShardQuota,
    ShardResult,
    ShardStats,
)

# Disk goal: stop when the broker furthest over its byte target is within this fraction of the
# mean target; look for steps towards this many of the brokers furthest under theirs, scanning
# at most EVEN_BYTES_SCAN replicas around the wanted size for a move.
EVEN_BYTES_TOLERANCE = 0.002
EVEN_BYTES_PEERS = 8
EVEN_BYTES_SCAN = 64


def _count_slack(quota: int, slack: float) -> int:
    """How far a broker's replica count may stray from its quota under the disk goal."""
    return int(quota * slack)


def _want(row: Row, cluster: Cluster) -> int:
    return cluster.target_rf.get(row[0], len(row[2]))


def _rack_cap(want: int, n_racks: int) -> int:
    return 1 if want <= n_racks else -(-want // n_racks)


def _active(cluster: Cluster) -> frozenset[int]:
    return frozenset(cluster.active)


def shard_stats(shard: int, rows: Sequence[Row], cluster: Cluster) -> ShardStats:
    active = _active(cluster)
    kept_n: dict[int, int] = {}
    leaders: dict[int, int] = {}
    holes = replicas = cap = 0
    nbytes = 0
    for row in rows:
        want = _want(row, cluster)
        kept = _keep(row, want, cluster, active)
        for b in kept:
            kept_n[b] = kept_n.get(b, 0) + 1
        if kept and kept[0] == row[2][0]:
            leaders[kept[0]] = leaders.get(kept[0], 0) + 1
        holes += want - len(kept)
        replicas += want
        cap += _rack_cap(want, cluster.n_racks)
        if row[3] > 0:
            nbytes += row[3] * want
    return ShardStats(shard=shard, partitions=len(rows), replicas=replicas, holes=holes,
                      rack_cap=cap, bytes=nbytes, kept=kept_n, leaders=leaders)


def _keep(row: Row, want: int, cluster: Cluster, active: frozenset[int]) -> list[int]:
    rack, k = cluster.rack, cluster.n_racks
    cap = _rack_cap(want, k)
    kept: list[int] = []
    per_rack: dict[int, int] = {}
    for b in row[2]:
        if b not in active or b in kept:
            continue
        j = rack[b]
        n = per_rack.get(j, 0)
        if n >= cap:
            continue
        per_rack[j] = n + 1
        kept.append(b)
    while len(kept) > want:  # RF decrease: drop from the end, the leader stays
        per_rack[rack[kept.pop()]] -= 1
    need = min(want, k)
    while sum(1 for n in per_rack.values() if n) + (want - len(kept)) < need:
        for i in range(len(kept) - 1, -1, -1):  # drop the last replica of a crowded rack
            if per_rack[rack[kept[i]]] > 1:
                per_rack[rack[kept.pop(i)]] -= 1
                break
    return kept


def _window(sizes: list[tuple[int, int]], n: int, goal: float) -> list[int]:
    """Pick n of (size, index) whose total is closest to goal: a window in size order."""
    sizes.sort()
    if n >= len(sizes):
        return [i for _, i in sizes]
    pre = [0]
    for s, _ in sizes:
        pre.append(pre[-1] + s)
    lo, hi = 0, len(sizes) - n  # window sums grow with the start; binary search the goal
    while lo < hi:
        mid = (lo + hi) // 2
        if pre[mid + n] - pre[mid] < goal:
            lo = mid + 1
        else:
            hi = mid
    best = lo
    if lo > 0 and abs(pre[lo - 1 + n] - pre[lo - 1] - goal) <= abs(pre[lo + n] - pre[lo] - goal):
        best = lo - 1
    return [i for _, i in sizes[best:best + n]]


class _Shard:
    """Mutable working state of one shard while it is solved (private to solve_shard)."""

    def __init__(self, rows: Sequence[Row], cluster: Cluster, quota: ShardQuota) -> None:
        self.rows, self.cluster, self.quota = rows, cluster, quota
        self.active = _active(cluster)
        self.rack, self.k = cluster.rack, cluster.n_racks
        rng = random.Random(cluster.seed * 1_000_003 + quota.shard)
        self.prio = [rng.random() for _ in rows]
        self.want = [_want(r, cluster) for r in rows]
        self.size = [max(r[3], 0) for r in rows]
        self.kept = [_keep(r, w, cluster, self.active) for r, w in zip(rows, self.want, strict=True)]
        self.members: dict[int, list[int]] = {b: [] for b in self.active}
        self.load = {b: 0 for b in self.active}
        for i, reps in enumerate(self.kept):
            for b in reps:
                self.members[b].append(i)
                self.load[b] += self.size[i]
        self.count = {b: len(m) for b, m in self.members.items()}
        self.placed: dict[int, list[int]] = {b: [] for b in self.active}
        self.deficit: dict[int, int] = {}
        self.rack_def: dict[int, int] = {}
        self.needy: dict[int, list[int]] = {}

    def shed(self) -> None:
        """Over-quota brokers give up their surplus. Candidates are the replicas whose hole could
        go to the racks with the most missing replicas (a hole nobody can take later costs an
        extra move); among them, bytes (or the seeded order) decide."""
        q, target, rack, kept = self.quota.replicas, self.quota.bytes, self.rack, self.kept
        need: dict[int, int] = {}
        for b in self.active:
            if q.get(b, 0) > self.count[b]:
                need[rack[b]] = need.get(rack[b], 0) + q.get(b, 0) - self.count[b]
        total_need = sum(need.values())
        for b in sorted(self.active):
            extra = self.count[b] - q.get(b, 0)
            if extra <= 0:
                continue
            mine = self.members[b]
            if self.cluster.receivers is not None:  # only holes the receivers can still take
                mine = [i for i in mine if self._receivable(i, b)]
                extra = min(extra, len(mine))
                if not extra:
                    continue
            reach = {}
            for i in mine:
                cap = _rack_cap(self.want[i], self.k)
                if cap == 1:  # the other replicas' racks are the blocked ones
                    blocked = {rack[x] for x in kept[i] if x != b}
                    reach[i] = total_need - sum(need.get(j, 0) for j in blocked)
                    continue
                used: dict[int, int] = {}
                for x in kept[i]:
                    if x != b:
                        used[rack[x]] = used.get(rack[x], 0) + 1
                reach[i] = sum(n for j, n in need.items() if used.get(j, 0) < cap)
            ranked = sorted(reach.values(), reverse=True)
            cut = min(ranked[extra - 1], ranked[0] / 2)
            mine = [i for i in mine if reach[i] >= cut]
            if target is not None:
                gone = _window([(self.size[i], i) for i in mine], extra, self.load[b] - target[b])
            elif self.cluster.has_sizes:  # the fewest bytes: the smallest replicas go
                gone = sorted(mine, key=lambda i: (self.size[i], self.prio[i]))[:extra]
            else:
                gone = sorted(mine, key=lambda i: self.prio[i])[:extra]
            for i in gone:
                self.kept[i].remove(b)
                self.load[b] -= self.size[i]
            gone_set = set(gone)
            self.members[b] = [i for i in self.members[b] if i not in gone_set]
            self.count[b] -= extra

    def _receivable(self, i: int, b: int) -> bool:
        """Whether partition i's replica on b may be shed when only the receivers may take it:
        enough receivers that the partition does not use and its racks allow are left for
        every hole it would then have (shedding two replicas of one partition onto one new
        broker cannot be placed)."""
        assert self.cluster.receivers is not None
        reps = [x for x in self.kept[i] if x != b]
        holes = self.want[i] - len(reps)
        free = 0
        for r in self.cluster.receivers:
            if r not in reps and self.allowed(reps, self.want[i], self.rack[r]):
                free += 1
                if free >= holes:
                    return True
        return False

    def allowed(self, reps: list[int], want: int, j: int) -> bool:
        rack = self.rack
        return sum(1 for b in reps if rack[b] == j) < _rack_cap(want, self.k)

    def take(self, i: int, b: int) -> None:
        self.kept[i].append(b)
        self.members[b].append(i)
        self.placed[b].append(i)
        self.count[b] += 1
        self.load[b] += self.size[i]
        self.deficit[b] -= 1
        if self.deficit[b] >= 0:
            self.rack_def[self.rack[b]] -= 1
        if self.deficit[b] == 0:
            self.needy[self.rack[b]].remove(b)

    def fill(self) -> None:
        q, target, rack, k = self.quota.replicas, self.quota.bytes, self.rack, self.k
        kept, want, size, prio = self.kept, self.want, self.size, self.prio
        self.deficit = {b: q.get(b, 0) - self.count[b] for b in self.active}
        for b in sorted(self.active):
            if self.deficit[b] > 0:
                self.rack_def[rack[b]] = self.rack_def.get(rack[b], 0) + self.deficit[b]
                self.needy.setdefault(rack[b], []).append(b)
        racks = sorted({rack[b] for b in self.active})
        holes = [i for i in range(len(kept)) for _ in range(want[i] - len(kept[i]))]
        holes.sort(key=lambda i: (-size[i], prio[i]))
        deficit, load, rack_def, needy = self.deficit, self.load, self.rack_def, self.needy
        stuck: list[int] = []
        for i in holes:
            reps = kept[i]
            cap = _rack_cap(want[i], k)
            used: dict[int, int] = {}
            for b in reps:
                used[rack[b]] = used.get(rack[b], 0) + 1
            best_b, best_key = -1, None
            for j in racks:
                rd = rack_def.get(j, 0)
                if rd <= 0 or used.get(j, 0) >= cap:
                    continue
                rkey = (used.get(j, 0) == 0, rd)
                if best_key is not None and rkey <= best_key:
                    continue
                pick, pkey = -1, None
                for b in needy[j]:
                    if b in reps:
                        continue
                    key = (target[b] - load[b]) / deficit[b] if target is not None else deficit[b]
                    if pkey is None or key > pkey:
                        pick, pkey = b, key
                if pick >= 0:
                    best_b, best_key = pick, rkey
            if best_b < 0:
                stuck.append(i)
            else:
                self.take(i, best_b)
        for i in stuck:
            if not self.exchange(i):
                self.force(i)

    def exchange(self, i: int, budget: int = 200_000) -> bool:
        """Place hole i on a broker c at quota after c hands one of its replicas (partition p)
        to a deficit broker d that p can take. Quotas stay met; when c's replica of p was
        itself just placed there (first choice) this costs no extra move, else one."""
        for fresh in (True, False):
            budget = self._exchange(i, fresh, budget)
            if budget < 0:
                return True
        return False

    def _exchange(self, i: int, fresh: bool, budget: int) -> int:
        kept, want, rack = self.kept, self.want, self.rack
        reps = kept[i]
        for d in sorted(b for b in self.active if self.deficit[b] > 0):
            for c in sorted(self.active):
                if c in reps or c == d or not self.allowed(reps, want[i], rack[c]):
                    continue
                if self.cluster.receivers is not None and c not in self.cluster.receivers:
                    continue  # hole i would move onto c, which may not gain
                for p in (self.placed[c] if fresh else self.members[c]):
                    budget -= 1
                    if budget <= 0:
                        return 0
                    other = kept[p]
                    if p == i or c not in other or d in other:
                        continue
                    if not self.allowed([b for b in other if b != c], want[p], rack[d]):
                        continue
                    other.remove(c)
                    self.members[c].remove(p)
                    self.load[c] -= self.size[p]
                    self.count[c] -= 1
                    self.deficit[c] += 1  # c is one short for a moment; take() settles it
                    if self.deficit[c] > 0:
                        self.rack_def[rack[c]] = self.rack_def.get(rack[c], 0) + 1
                        self.needy.setdefault(rack[c], []).append(c)
                    if p in self.placed[c]:
                        self.placed[c].remove(p)
                    self.take(p, d)
                    self.take(i, c)
                    return -1
        return budget

    def even_bytes(self, slack: float) -> None:
        """Disk goal: even bytes per broker after count balance. The broker furthest over its
        byte target gives a replica to, or swaps one with, one of the brokers furthest under
        theirs, the size (or size difference) closest to what both can take; counts stay within
        ``slack`` of their quota, racks and RF as before. Every step lowers the sum of squared
        distances to the targets, so it ends; a broker no step can lower is left as it is."""
        target = self.quota.bytes
        if target is None or not self.rows:
            return
        q = self.quota.replicas
        active = sorted(self.active)
        lo = {b: q.get(b, 0) - _count_slack(q.get(b, 0), slack) for b in active}
        hi = {b: q.get(b, 0) + _count_slack(q.get(b, 0), slack) for b in active}
        by_size = {b: sorted((self.size[i], i) for i in self.members[b]) for b in active}
        tol = EVEN_BYTES_TOLERANCE * sum(target.values()) / len(active)
        stuck: set[int] = set()
        for _ in range(2 * len(self.rows)):
            free = [b for b in active if b not in stuck]
            if not free:
                break
            h = max(free, key=lambda b: (self.load[b] - target[b], -b))
            over = self.load[h] - target[h]
            if over <= tol:
                break
            under = sorted(active, key=lambda b: (self.load[b] - target[b], b))[:EVEN_BYTES_PEERS]
            for low in under:
                gap = over - (self.load[low] - target[low])  # a step of s in (0, gap) helps
                if gap <= 0:
                    break
                want = min(over, target[low] - self.load[low])
                step = self._even_step(h, low, want, gap, lo, hi, by_size)
                if step is not None:
                    self._apply_step(h, low, step, by_size)
                    break
            else:
                stuck.add(h)

    def _even_step(self, h: int, low: int, want: float, gap: float, lo: dict[int, int],
                   hi: dict[int, int], by_size: dict[int, list[tuple[int, int]]]
                   ) -> tuple[int, int] | None:
        """The best step from h to low: (i, -1) moves partition i's replica, (i, j) swaps it with
        partition j's replica on low; None when none helps."""
        kept, want_rf, rack = self.kept, self.want, self.rack

        def can(i: int, src: int, dst: int) -> bool:
            reps = kept[i]
            return dst not in reps and self.allowed([b for b in reps if b != src], want_rf[i],
                                                    rack[dst])

        best: tuple[int, int] | None = None
        best_err = None
        mine = by_size[h]
        if self.count[h] > lo[h] and self.count[low] < hi[low]:
            k = bisect.bisect_left(mine, (want, -1))
            a, b, seen = k - 1, k, 0
            while (a >= 0 or b < len(mine)) and seen < EVEN_BYTES_SCAN:
                if b >= len(mine) or (a >= 0 and want - mine[a][0] <= mine[b][0] - want):
                    sz, i = mine[a]
                    a -= 1
                else:
                    sz, i = mine[b]
                    b += 1
                seen += 1
                if 0 < sz < gap and can(i, h, low):
                    best, best_err = (i, -1), abs(sz - want)
                    break
        for sj, j in by_size[low]:
            k = bisect.bisect_left(mine, (sj + want, -1))
            for t in range(max(0, k - 2), min(len(mine), k + 2)):
                si, i = mine[t]
                delta = si - sj
                if not 0 < delta < gap or i == j:
                    continue
                err = abs(delta - want)
                if best_err is not None and err >= best_err:
                    continue
                if can(i, h, low) and can(j, low, h):
                    best, best_err = (i, j), err
        return best

    def _apply_step(self, h: int, low: int, step: tuple[int, int],
                    by_size: dict[int, list[tuple[int, int]]]) -> None:
        i, j = step
        self._relocate(i, h, low, by_size)
        if j >= 0:
            self._relocate(j, low, h, by_size)

    def _relocate(self, i: int, src: int, dst: int,
                  by_size: dict[int, list[tuple[int, int]]]) -> None:
        reps = self.kept[i]
        reps[reps.index(src)] = dst
        self.members[src].remove(i)
        self.members[dst].append(i)
        entry = (self.size[i], i)
        del by_size[src][bisect.bisect_left(by_size[src], entry)]
        bisect.insort(by_size[dst], entry)
        self.load[src] -= self.size[i]
        self.load[dst] += self.size[i]
        self.count[src] -= 1
        self.count[dst] += 1

    def force(self, i: int) -> None:
        """Last resort: the least-loaded broker the partition can take, even over quota."""
        reps, want = self.kept[i], self.want[i]
        cands = [b for b in sorted(self.active) if b not in reps]
        pool = [b for b in cands if self.allowed(reps, want, self.rack[b])] or cands
        if self.cluster.receivers is not None:
            pool = [b for b in pool if b in self.cluster.receivers] or pool
        if not pool:
            r = self.rows[i]
            raise PlanningError([f"partition {r[0]}-{r[1]} needs {want} replicas but only "
                                 f"{len(self.active)} brokers can hold them"])
        b = max(pool, key=lambda b: (self.deficit[b], -b))
        if self.deficit[b] > 0:
            self.take(i, b)
            return
        reps.append(b)  # over quota: reported as a residual
        self.members[b].append(i)
        self.count[b] += 1
        self.load[b] += self.size[i]
        self.deficit[b] -= 1


def solve_shard(rows: Sequence[Row], cluster: Cluster, quota: ShardQuota) -> ShardResult:
    """Plan one shard to its quotas; rows must come sorted by (topic, partition)."""
    st = _Shard(rows, cluster, quota)
    st.shed()
    st.fill()
    if cluster.disk_slack is not None:
        st.even_bytes(cluster.disk_slack)
    order = _leaders(rows, st.kept, st.members, quota.leaders)
    q = quota.replicas
    count = {b: 0 for b in st.active}
    lead = {b: 0 for b in st.active}
    for reps in order:
        lead[reps[0]] += 1
        for b in reps:
            count[b] += 1
    slack = 0.0 if quota.bytes is None or cluster.disk_slack is None else cluster.disk_slack
    residual = {b: count[b] - q.get(b, 0) for b in sorted(st.active)
                if abs(count[b] - q.get(b, 0)) > _count_slack(q.get(b, 0), slack)}
    lres: dict[int, int] = {}
    if quota.leaders is not None:
        lq = quota.leaders
        lres = {b: lead[b] - lq.get(b, 0) for b in sorted(st.active) if lead[b] != lq.get(b, 0)}
    changed = tuple((r[0], r[1], tuple(o), r[3]) for r, o in zip(rows, order, strict=True)
                    if tuple(o) != r[2])
    return ShardResult(shard=quota.shard, changed=changed, replica_residual=residual,
                       leader_residual=lres)


def _leaders(rows: Sequence[Row], kept: list[list[int]], members: dict[int, list[int]],
             lq: Mapping[int, int] | None) -> list[list[int]]:
    """Final replica lists: the chosen leader first, the others in their current order."""
    n = len(rows)
    lead = [-1] * n
    if lq is None:
        for i, reps in enumerate(kept):
            old = rows[i][2][0]
            lead[i] = old if old in reps else reps[0]
    else:
        lc = {b: 0 for b in members}
        orig = {b: 0 for b in members}
        for i, reps in enumerate(kept):
            if rows[i][2][0] in reps:
                orig[rows[i][2][0]] += 1
        needy = {b for b in members if orig[b] < lq.get(b, 0)}
        later: list[int] = []
        touching: list[int] = []
        for i, reps in enumerate(kept):
            old = rows[i][2][0]
            if any(b in needy and b != old for b in reps):
                touching.append(i)
            elif old in reps and lc[old] < lq.get(old, 0):
                lead[i] = old
                lc[old] += 1
            else:
                later.append(i)
        for i in touching + later:
            old = rows[i][2][0]
            best = max(kept[i], key=lambda b: (lq.get(b, 0) - lc[b], b == old, -b))
            lead[i] = best
            lc[best] += 1
        _augment(kept, members, lead, lc, lq)
    out = []
    for i, reps in enumerate(kept):
        out.append([lead[i]] + [b for b in reps if b != lead[i]])
    return out


def _augment(kept, members, lead, lc, lq) -> None:
    """Move leadership along BFS paths from brokers over their quota to brokers under it."""
    # direct hand-overs first: cheap and they settle almost everything
    for x in sorted(members):
        if lc[x] <= lq.get(x, 0):
            continue
        for i in members[x]:
            if lc[x] <= lq.get(x, 0):
                break
            if lead[i] != x:
                continue
            for y in kept[i]:
                if y != x and lc[y] < lq.get(y, 0):
                    lead[i] = y
                    lc[x] -= 1
                    lc[y] += 1
                    break
    for u in sorted(members):
        while lc[u] < lq.get(u, 0):
            # BFS backwards: u can take partition i from its leader x; x may then take from others
            parent: dict[int, tuple[int, int]] = {u: (-1, -1)}
            frontier = deque([u])
            found = -1
            while frontier and found < 0:
                y = frontier.popleft()
                for i in members[y]:
                    x = lead[i]
                    if x == y or x in parent:
                        continue
                    parent[x] = (y, i)
                    if lc[x] > lq.get(x, 0):
                        found = x
                        break
                    frontier.append(x)
            if found < 0:
                break
            x = found
            lc[x] -= 1
            lc[u] += 1
            while x != u:
                y, i = parent[x]
                lead[i] = y
                x = y
