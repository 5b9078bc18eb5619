"""Global quotas per broker, and their deterministic split into per-shard quotas.

Balance mode: the replicas to hold (R) are spread as evenly as the racks allow. With
rack-awareness one rack holds at most ``rack_cap`` replicas (one per partition when RF <= #racks)
and so at least ``R - (#racks - 1) * rack_cap``; racks whose even share falls outside those bounds
are clamped (water-filling) and the rest share what is left evenly. The ``+1`` slots go to the
brokers holding most replicas now, which is what minimises movement (rebalancer.scoring's lower
bound does the same). Leaders: ``#partitions`` spread evenly, ``+1`` to the brokers leading most now.

Minimal mode: nobody sheds; the replicas still to place raise the least-loaded brokers first.

Only some brokers receiving (``Cluster.receivers``, Cruise Control's add_broker): the others'
quotas are cut to what they keep, and the replicas that frees go back to the others still
shedding before any goes to a receiver above its even share.

Shard split: a broker over its quota sheds its surplus from the shards in proportion to what it
holds there; the replicas each shard must place (its holes plus what it shed) are dealt to the
brokers under quota in proportion, rounded so both margins are exact. Leader quotas are split in
proportion to each shard's replica quotas (a few rounds of iterative proportional fitting).
Everything is integer or deterministic float arithmetic on small matrices (shards x brokers).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence

import numpy as np

from rebalancer.planner.model import Cluster, PlanningError, ShardQuota, ShardStats


def _even_split(total: int, brokers: list[int], load: dict[int, int]) -> dict[int, int]:
    """``total`` over ``brokers`` as floor/ceil, the ceil slots to the most loaded ones."""
    if not brokers:
        return {}
    base, extra = divmod(total, len(brokers))
    order = sorted(brokers, key=lambda b: (-load.get(b, 0), b))
    return {b: base + (1 if i < extra else 0) for i, b in enumerate(order)}


def replica_quotas(cluster: Cluster, kept: dict[int, int], total: int,
                   rack_cap: int) -> dict[int, int]:
    """Replicas each active broker should end with (balance mode)."""
    by_rack: dict[int, list[int]] = {}
    for b in cluster.active:
        by_rack.setdefault(cluster.rack[b], []).append(b)
    if cluster.n_racks <= 1:
        return _even_split(total, list(cluster.active), kept)
    k = len(by_rack)
    lo = max(0, total - (k - 1) * rack_cap)
    if k * rack_cap < total:
        raise PlanningError([f"{total} replicas do not fit in {k} racks rack-aware"])
    fixed: dict[int, int] = {}
    while True:
        free = [j for j in by_rack if j not in fixed]
        if not free:
            break
        rest = total - sum(fixed.values())
        nb = sum(len(by_rack[j]) for j in free)
        level = rest / nb
        over = [j for j in free if level * len(by_rack[j]) > rack_cap]
        under = [j for j in free if level * len(by_rack[j]) < lo]
        if over:
            fixed.update({j: rack_cap for j in over})
        elif under:
            fixed.update({j: lo for j in under})
        else:
            break
    quota: dict[int, int] = {}
    for j, n in fixed.items():
        quota.update(_even_split(n, by_rack[j], kept))
    free = sorted(j for j in by_rack if j not in fixed)
    brokers = [b for j in free for b in by_rack[j]]
    if brokers:
        rest = total - sum(fixed.values())
        base, extra = divmod(rest, len(brokers))
        rack_total = {j: base * len(by_rack[j]) for j in free}
        for b in sorted(brokers, key=lambda b: (-kept.get(b, 0), b)):
            j = cluster.rack[b]
            if extra > 0 and rack_total[j] < rack_cap:
                quota[b] = base + 1
                rack_total[j] += 1
                extra -= 1
            else:
                quota[b] = base
        for b in sorted(brokers):  # racks at cap refused some +1 slots: hand them on
            if extra <= 0:
                break
            if quota[b] == base:
                quota[b] += 1
                extra -= 1
    return quota


def fill_quotas(cluster: Cluster, kept: dict[int, int], holes: int) -> dict[int, int]:
    """Minimal mode: every broker keeps what it has; holes raise the lowest brokers first."""
    active = sorted(cluster.active, key=lambda b: (kept.get(b, 0), b))
    quota = {b: kept.get(b, 0) for b in active}
    counts = [quota[b] for b in active]
    left, i = holes, 0
    # water-fill: raise the i+1 lowest brokers to the next level while holes remain
    while left > 0:
        while i + 1 < len(active) and counts[i + 1] == counts[0]:
            i += 1
        width = i + 1
        nxt = counts[i + 1] if i + 1 < len(active) else None
        step = left // width if nxt is None else min(nxt - counts[0], left // width)
        if step == 0:
            for t in range(left):
                counts[t] += 1
            left = 0
            break
        for t in range(width):
            counts[t] += step
        left -= step * width
    return {b: counts[t] for t, b in enumerate(active)}


def receiving_quotas(quota: dict[int, int], kept: dict[int, int], receivers: frozenset[int],
                     total: int, rack: Mapping[int, int]) -> dict[int, int]:
    """``quota`` where only ``receivers`` may gain (Cruise Control's add_broker): any other
    broker ends with at most what it keeps. What that cuts goes back, one at a time, to the
    lowest of the others that still shed (they shed less), and only then to the lowest
    receivers; in the same rack first, as the rack caps fixed each rack's total."""
    out = {b: n if b in receivers else min(n, kept.get(b, 0)) for b, n in quota.items()}
    cut: dict[int, int] = {}
    for b, n in quota.items():
        cut[rack[b]] = cut.get(rack[b], 0) + n - out[b]
    left = total - sum(quota.values())
    for j in sorted(cut):
        left += _give_back(out, kept, receivers, cut[j], [b for b in out if rack[b] == j])
    _give_back(out, kept, receivers, left, list(out))
    return out


def _give_back(out: dict[int, int], kept: dict[int, int], receivers: frozenset[int], n: int,
               brokers: list[int]) -> int:
    """Raise ``brokers`` by ``n`` in all (see receiving_quotas); what could not be placed."""
    for pool in ([b for b in brokers if b not in receivers and out[b] < kept.get(b, 0)],
                 [b for b in brokers if b in receivers]):
        heap = [(out[b], b) for b in pool]
        heapq.heapify(heap)
        while n > 0 and heap:
            level, b = heapq.heappop(heap)
            out[b] = level + 1
            n -= 1
            if b in receivers or out[b] < kept.get(b, 0):
                heapq.heappush(heap, (level + 1, b))
    return n


def leader_quotas(cluster: Cluster, leaders: dict[int, int], partitions: int,
                  replicas: dict[int, int]) -> dict[int, int]:
    quota = _even_split(partitions, list(cluster.active), leaders)
    for b, q in quota.items():
        if q > replicas.get(b, 0):
            quota[b] = replicas.get(b, 0)
    short = partitions - sum(quota.values())
    for b in sorted(quota, key=lambda b: (quota[b] - replicas.get(b, 0), b)):
        if short <= 0:
            break
        if quota[b] < replicas.get(b, 0):
            quota[b] += 1
            short -= 1
    return quota


def round_matrix(frac: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Integer matrix near ``frac`` (>= 0) with exact row and column sums (which must agree)."""
    out = np.floor(frac + 1e-9).astype(np.int64)
    rem = frac - out
    col_def = cols - out.sum(axis=0)
    for b in np.nonzero(col_def < 0)[0]:  # float drift: take back from the smallest remainders
        for s in np.argsort(rem[:, b], kind="stable"):
            if col_def[b] >= 0:
                break
            if out[s, b] > 0:
                out[s, b] -= 1
                col_def[b] += 1
    row_def = rows - out.sum(axis=1)
    for s in np.nonzero(row_def < 0)[0]:
        for b in np.argsort(rem[s], kind="stable"):
            if row_def[s] >= 0:
                break
            if out[s, b] > 0:
                out[s, b] -= 1
                row_def[s] += 1
                col_def[b] += 1
    # Gale-Ryser style greedy: biggest column deficits first, each unit to the row with the
    # largest remaining deficit, preferring rows where the fraction was largest.
    for b in sorted(np.nonzero(col_def > 0)[0], key=lambda b: (-col_def[b], b)):
        for _ in range(int(col_def[b])):
            s = int(np.lexsort((-rem[:, b], -row_def))[0])
            out[s, b] += 1
            row_def[s] -= 1
            rem[s, b] -= 1.0
    return out


def shard_quotas(stats: Sequence[ShardStats], cluster: Cluster) -> list[ShardQuota]:
    """Per-shard quotas whose sums over shards are the global quotas."""
    stats = sorted(stats, key=lambda s: s.shard)
    brokers = sorted(cluster.active)
    col = {b: i for i, b in enumerate(brokers)}
    ns, nb = len(stats), len(brokers)
    if nb == 0:
        raise PlanningError(["no broker is left to hold replicas"])
    kept = np.zeros((ns, nb), dtype=np.int64)
    lead = np.zeros((ns, nb), dtype=np.int64)
    for s, st in enumerate(stats):
        for b, n in st.kept.items():
            kept[s, col[b]] = n
        for b, n in st.leaders.items():
            lead[s, col[b]] = n
    holes = np.array([st.holes for st in stats], dtype=np.int64)
    parts = np.array([st.partitions for st in stats], dtype=np.int64)
    total = int(sum(st.replicas for st in stats))
    kept_b = {b: int(kept[:, col[b]].sum()) for b in brokers}
    if cluster.rebalance:
        q = replica_quotas(cluster, kept_b, total, int(sum(st.rack_cap for st in stats)))
    else:
        q = fill_quotas(cluster, kept_b, int(holes.sum()))
    if cluster.receivers is not None:
        q = receiving_quotas(q, kept_b, cluster.receivers, total, cluster.rack)
    qv = np.array([q[b] for b in brokers], dtype=np.int64)
    kv = kept.sum(axis=0)
    # surplus shed in proportion to what each shard holds
    surplus = np.maximum(kv - qv, 0)
    shed = np.zeros_like(kept)
    for i in np.nonzero(surplus)[0]:
        exact = surplus[i] * kept[:, i] / kv[i]
        shed[:, i] = np.floor(exact + 1e-9)
        left = int(surplus[i] - shed[:, i].sum())
        order = sorted(range(ns), key=lambda s: (-(exact[s] - shed[s, i]), s))
        for s in order[:left]:
            shed[s, i] += 1
    supply = holes + shed.sum(axis=1)
    gain_b = np.maximum(qv - kv, 0)
    if int(supply.sum()) != int(gain_b.sum()):
        raise PlanningError([f"internal: {int(supply.sum())} replicas to place but "
                             f"{int(gain_b.sum())} free slots"])
    if supply.sum() > 0:
        frac = np.outer(supply, gain_b) / supply.sum()
        gain = round_matrix(frac, supply, gain_b)
    else:
        gain = np.zeros_like(kept)
    rq = kept - shed + gain
    if cluster.rebalance:
        lq = leader_quotas(cluster, {b: int(lead[:, col[b]].sum()) for b in brokers},
                           int(parts.sum()), q)
        lv = np.array([lq[b] for b in brokers], dtype=np.float64)
        frac = rq.astype(np.float64)
        for _ in range(50):  # iterative proportional fitting: columns, then rows
            cs = frac.sum(axis=0)
            frac = frac * np.divide(lv, cs, out=np.zeros_like(lv), where=cs > 0)
            rs = frac.sum(axis=1)
            frac = frac * np.divide(parts, rs, out=np.zeros(ns), where=rs > 0)[:, None]
        lmat = round_matrix(frac, parts, lv.astype(np.int64))
    sizes = None
    out = []
    for s, st in enumerate(stats):
        if cluster.has_sizes and cluster.disk and st.replicas:
            avg = st.bytes / st.replicas
            sizes = {b: float(rq[s, col[b]] * avg) for b in brokers}
        out.append(ShardQuota(
            shard=st.shard,
            replicas={b: int(rq[s, col[b]]) for b in brokers},
            leaders={b: int(lmat[s, col[b]]) for b in brokers} if cluster.rebalance else None,
            bytes=sizes if cluster.has_sizes and cluster.disk else None,
        ))
    return out


def merge_quotas(quotas: Sequence[ShardQuota], shard: int) -> ShardQuota:
    """One quota for the union of some shards (used by the merge/repair step)."""
    rep: dict[int, int] = {}
    led: dict[int, int] | None = {} if all(q.leaders is not None for q in quotas) else None
    byt: dict[int, float] | None = {} if all(q.bytes is not None for q in quotas) else None
    for q in quotas:
        for b, n in q.replicas.items():
            rep[b] = rep.get(b, 0) + n
        if led is not None and q.leaders is not None:
            for b, n in q.leaders.items():
                led[b] = led.get(b, 0) + n
        if byt is not None and q.bytes is not None:
            for b, x in q.bytes.items():
                byt[b] = byt.get(b, 0.0) + x
    return ShardQuota(shard=shard, replicas=rep, leaders=led, bytes=byt)
