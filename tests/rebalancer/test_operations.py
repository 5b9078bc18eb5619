"""The day-2 operations (rebalancer.operations) on hand-built cluster views: racks, sizes,
offline brokers. What each may move, what it must keep (replication factors, the rack rule, the
other replicas), and the one line it refuses with."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import pytest

from coordinator.codecs import TopicPartition
from rebalancer.access import ClusterView, LivePartition
from rebalancer.engines import plan_reassignment
from rebalancer.operations import (
    NothingToDo,
    OperationError,
    OperationPlan,
    add_brokers,
    demote_brokers,
    fix_offline_replicas,
    remove_brokers,
)
from rebalancer.planner.goals import AddBrokers

MIB = 2**20


def view_of(brokers: Mapping[int, str | None],
            parts: Iterable[tuple[str, int, Sequence[int]]], *,
            sizes: Mapping[tuple[str, int], int] | None = None,
            isr: Mapping[tuple[str, int], Sequence[int]] | None = None,
            leader: Mapping[tuple[str, int], int] | None = None,
            moving: Iterable[tuple[str, int]] = ()) -> ClusterView:
    """Leaders are the first replica and every replica is in sync, unless told otherwise."""
    sizes, isr, leader, moving = sizes or {}, isr or {}, leader or {}, set(moving)
    return ClusterView(brokers=dict(brokers), partitions=tuple(
        LivePartition(topic=t, partition=n, replicas=tuple(r),
                      leader=leader.get((t, n), r[0]), isr=tuple(isr.get((t, n), r)),
                      size_bytes=sizes.get((t, n)), moving=(t, n) in moving)
        for t, n, r in parts), sizes_known=bool(sizes), source="test")


def racked(n: int, racks: int = 3) -> dict[int, str]:
    return {b: f"r{(b - 1) % racks}" for b in range(1, n + 1)}


def spread_parts(brokers: Sequence[int], rack: Mapping[int, str], topics: int = 4,
                 partitions: int = 12, rf: int = 3) -> list[tuple[str, int, list[int]]]:
    """Rack-aware lists: one replica per rack, round robin within each rack."""
    by_rack: dict[str, list[int]] = {}
    for b in brokers:
        by_rack.setdefault(rack[b], []).append(b)
    names = sorted(by_rack)
    out = []
    i = 0
    for t in range(topics):
        for p in range(partitions):
            reps = []
            for k in range(rf):
                members = by_rack[names[(i + k) % len(names)]]
                reps.append(members[(i // len(names) + k) % len(members)])
            out.append((f"t{t}", p, reps))
            i += 1
    return out


def after(op: OperationPlan) -> dict[tuple[str, int], tuple[int, ...]]:
    return op.plan.assignment(op.snapshot)


def counts(assignment: Mapping[tuple[str, int], Sequence[int]]) -> Counter[int]:
    return Counter(b for reps in assignment.values() for b in reps)


def rack_ok(reps: Sequence[int], rack: Mapping[int, str | None], racks: int) -> bool:
    return len({rack[b] for b in reps}) == min(len(reps), racks)


# --- add-brokers ---------------------------------------------------------------------------------


def skewed_six() -> tuple[dict[int, str], list[tuple[str, int, list[int]]], dict]:
    """Six brokers on three racks, broker 1 and 2 holding far more than 5 and 6; two new
    brokers (7 in r0, 8 in r1) hold nothing."""
    rack = racked(8)
    parts = spread_parts([1, 2, 3, 4, 5, 6], rack)
    # crowd brokers 1 and 2: 5 -> 1 and 6 -> 2 in half the partitions (racks kept)
    parts = [(t, p, [{5: 2, 6: 3}.get(b, b) if p % 2 else b for b in r]) for t, p, r in parts]
    sizes = {(t, p): (1 + (p * 7 + int(t[1:])) % 13) * MIB for t, p, _ in parts}
    return rack, parts, sizes


def test_add_brokers_moves_replicas_onto_the_new_brokers_only() -> None:
    rack, parts, sizes = skewed_six()
    view = view_of(rack, parts, sizes=sizes)
    op = add_brokers(view, [7, 8])
    before = {(t, p): tuple(r) for t, p, r in parts}
    new = after(op)
    assert op.plan.partitions and not op.skipped
    for key, reps in new.items():
        old = before[key]
        assert len(reps) == len(old) == len(set(reps))  # replication factors kept
        assert set(reps) - set(old) <= {7, 8}  # nothing lands on an old broker
        if reps[0] != old[0]:  # leadership moves onto a new broker, or with its replica
            assert reps[0] in (7, 8)
        assert rack_ok(reps, rack, 3)
    held = counts(new)
    assert held[7] == held[8] == 48 // 3  # the even share of their racks (three brokers each)
    assert op.after.rack_violations == 0
    assert op.replicas_moved == held[7] + held[8]
    assert op.bytes_moved == sum(sizes[k] * len(set(r) - set(before[k])) for k, r in new.items())
    assert op.leaders_moved == sum(1 for k, r in new.items() if r[0] != before[k][0])
    assert op.after.replicas_per_broker.stddev < op.before.replicas_per_broker.stddev


def test_a_plain_rebalance_would_move_replicas_between_the_old_brokers_too() -> None:
    """What add-brokers does differently: the kernel's rebalance (AddBrokers without
    only_onto_them) also evens out the old brokers, moving replicas onto 5 and 6."""
    rack, parts, sizes = skewed_six()
    snap = view_of(rack, parts, sizes=sizes).snapshot(new_brokers=[7, 8])
    plan = plan_reassignment(snap, [AddBrokers(brokers=frozenset({7, 8}))])
    before = {p.key: p.replicas for p in snap.partitions}
    gained = {b for m in plan.partitions for b in m.replicas
              if b not in before[(m.topic, m.partition)]}
    assert gained - {7, 8}


def test_add_brokers_moves_the_smallest_replicas() -> None:
    """Bytes-aware: with sizes known, the old brokers shed their smallest replicas."""
    rack = {1: None, 2: None, 3: None}
    parts = [("t", p, [1 + p % 2, 1 + (p + 1) % 2]) for p in range(20)]
    sizes = {("t", p): (p + 1) * MIB for p in range(20)}
    op = add_brokers(view_of(rack, parts, sizes=sizes), [3])
    moved = sorted(m.partition for m in op.plan.partitions if 3 in m.replicas)
    assert len(moved) == 13  # 40 replicas over 3 brokers
    assert op.bytes_moved is not None
    largest_moved = max(sizes[("t", p)] for p in moved)
    assert largest_moved <= 14 * MIB  # the small ones, not a random pick


@pytest.mark.parametrize(("ids", "message"), [
    ([9], "cannot add unknown broker(s) 9: the live brokers are 1,2,3"),
    ([], "add-brokers needs the ids of the brokers"),
    ([1, 2, 3], "cannot add every live broker"),
])
def test_add_brokers_refuses(ids: list[int], message: str) -> None:
    view = view_of({1: None, 2: None, 3: None}, [("t", 0, [1, 2])])
    with pytest.raises(OperationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        add_brokers(view, ids)


def test_add_brokers_refuses_while_a_broker_is_dead() -> None:
    view = view_of({1: None, 2: None, 4: None}, [("t", 0, [1, 3])])
    with pytest.raises(OperationError, match=r"broker\(s\) 3 hold replicas but are not live"):
        add_brokers(view, [4])


# --- remove-brokers ------------------------------------------------------------------------------


def test_remove_brokers_drains_them_keeping_factors_and_racks() -> None:
    rack = racked(6)
    parts = spread_parts(list(rack), rack)
    sizes = {(t, p): (p + 1) * MIB for t, p, _ in parts}
    op = remove_brokers(view_of(rack, parts, sizes=sizes), [2])
    before = {(t, p): tuple(r) for t, p, r in parts}
    new = after(op)
    assert counts(new)[2] == 0
    assert all(len(r) == len(before[k]) == len(set(r)) for k, r in new.items())
    assert all(rack_ok(r, rack, 3) for r in new.values())
    held = counts(before)[2]
    assert op.replicas_moved == held  # the drain, nothing more: the others were balanced
    assert op.after.valid and op.after.rack_violations == 0


@pytest.mark.parametrize(("ids", "message"), [
    ([7], r"cannot remove unknown broker\(s\) 7: the live brokers are 1,2,3"),
    ([3], r"cannot remove broker\(s\) 3: topic t has replication factor 3 but only 2 live "
          r"broker\(s\) would hold it"),
    ([1, 2, 3], r"no live broker would be left"),
])
def test_remove_brokers_refuses(ids: list[int], message: str) -> None:
    view = view_of({1: "a", 2: "b", 3: "c"}, [("t", 0, [1, 2, 3]), ("u", 0, [1])])
    with pytest.raises(OperationError, match=message):
        remove_brokers(view, ids)


def test_remove_brokers_refuses_while_another_broker_is_dead_and_when_nothing_is_on_them(
        ) -> None:
    view = view_of({1: None, 2: None, 3: None}, [("t", 0, [1, 4]), ("t", 1, [1, 2])])
    with pytest.raises(OperationError, match=r"broker\(s\) 4 hold replicas but are not live"):
        remove_brokers(view, [2])
    op = remove_brokers(view, [2, 4])  # a dead broker can be removed: its replicas re-placed
    assert counts(after(op))[2] == counts(after(op))[4] == 0
    with pytest.raises(NothingToDo, match=r"broker\(s\) 3 hold no replica"):
        remove_brokers(view_of({1: None, 2: None, 3: None}, [("t", 0, [1, 2])]), [3])


def test_nothing_is_planned_while_a_reassignment_runs() -> None:
    view = view_of({1: None, 2: None, 3: None}, [("t", 0, [1, 2]), ("t", 1, [2, 3])],
                   moving=[("t", 1)])
    for plan in (lambda: remove_brokers(view, [1]), lambda: add_brokers(view, [3]),
                 lambda: demote_brokers(view, [1])):
        with pytest.raises(OperationError, match=r"1 partition\(s\) are being reassigned "
                                                 r"\(t-1\)"):
            plan()


# --- demote-brokers ------------------------------------------------------------------------------


def test_demote_puts_the_brokers_last_and_moves_no_data() -> None:
    rack = racked(6)
    parts = spread_parts(list(rack), rack)
    op = demote_brokers(view_of(rack, parts), [1, 4])
    before = {(t, p): tuple(r) for t, p, r in parts}
    new = after(op)
    for key, reps in new.items():
        assert set(reps) == set(before[key])  # no data moves
        n = len([b for b in reps if b in (1, 4)])
        assert set(reps[len(reps) - n:]) == {b for b in reps if b in (1, 4)}  # demoted last
    assert op.replicas_moved == 0 and op.after.replicas_per_broker == op.before.replicas_per_broker
    assert op.after.leaders_per_broker.max > 0
    leaders = Counter(r[0] for r in new.values())
    assert leaders[1] == leaders[4] == 0
    led_before = {k for k, r in before.items() if r[0] in (1, 4)}
    assert {(tp.topic, tp.partition) for tp in op.elect} == led_before
    assert op.leaders_moved == len(led_before)


def test_demote_skips_partitions_only_the_demoted_brokers_keep_in_sync() -> None:
    view = view_of({1: None, 2: None, 3: None},
                   [("t", 0, [1, 2]), ("t", 1, [1, 3]), ("t", 2, [2, 1]), ("u", 0, [1])],
                   isr={("t", 1): [1]})
    op = demote_brokers(view, [1])
    assert [m.replicas for m in op.plan.partitions] == [(2, 1)]
    assert [str(s) for s in op.skipped] == [
        "t-1: no replica outside the demoted brokers is in sync (ISR [1])",
        "u-0: every replica is on a demoted broker"]
    assert op.elect == (TopicPartition("t", 0),)


def test_demote_elects_where_a_demoted_broker_leads_out_of_order() -> None:
    """Already last in the list but leading (after a failover): only the election is needed."""
    view = view_of({1: None, 2: None}, [("t", 0, [2, 1])], leader={("t", 0): 1})
    op = demote_brokers(view, [1])
    assert not op.plan.partitions and op.elect == (TopicPartition("t", 0),)


def test_demote_refuses() -> None:
    view = view_of({1: None, 2: None}, [("t", 0, [1, 2])])
    with pytest.raises(OperationError, match="cannot demote every live broker"):
        demote_brokers(view, [1, 2])
    with pytest.raises(OperationError, match=r"cannot demote unknown broker\(s\) 5"):
        demote_brokers(view, [5])
    with pytest.raises(NothingToDo, match="nothing to demote"):
        demote_brokers(view, [2])


# --- fix-offline-replicas ------------------------------------------------------------------------


def test_fix_offline_replaces_the_dead_replicas_and_nothing_else() -> None:
    rack = racked(6)
    parts = spread_parts(list(rack), rack)
    sizes = {(t, p): (p + 1) * MIB for t, p, _ in parts}
    live = {b: r for b, r in rack.items() if b != 3}  # broker 3 (rack r2) is gone for good
    op = fix_offline_replicas(view_of(live, parts, sizes=sizes))
    before = {(t, p): tuple(r) for t, p, r in parts}
    new = after(op)
    assert op.brokers == (3,)
    for key, reps in new.items():
        old = before[key]
        if 3 not in old:
            assert reps == old  # untouched
            continue
        assert len(reps) == len(old) and 3 not in reps
        for i, b in enumerate(old):  # the live replicas keep their places...
            if b != 3 and i:
                assert b in reps
        replacement = [b for b in reps if b not in old]
        assert len(replacement) == 1 and rack[replacement[0]] == "r2"  # ...racks kept
        assert reps[0] != replacement[0]  # a fresh copy does not lead
        assert reps[0] in old
    moved_to = Counter(b for k, r in new.items() for b in r if b not in before[k])
    assert set(moved_to) == {6}  # the only other broker of rack r2
    assert op.replicas_moved == counts(before)[3]


def test_fix_offline_spreads_over_the_least_loaded_live_brokers() -> None:
    rack: dict[int, str | None] = {1: None, 2: None, 3: None, 4: None}
    parts = [("t", p, [1 + p % 3, 5]) for p in range(12)] + [("u", p, [4, 1]) for p in range(4)]
    op = fix_offline_replicas(view_of(rack, parts))
    held = counts(after(op))
    assert held[5] == 0
    assert max(held[b] for b in rack) - min(held[b] for b in rack) <= 1
    assert all(len(set(r)) == 2 for r in after(op).values())


def test_fix_offline_skips_what_cannot_be_fixed_and_says_when_nothing_can() -> None:
    with pytest.raises(NothingToDo, match="no replica is on a dead broker"):
        fix_offline_replicas(view_of({1: None, 2: None}, [("t", 0, [1, 2])]))
    view = view_of({1: None, 2: None}, [("t", 0, [1, 2, 3]), ("u", 0, [1, 3])])
    op = fix_offline_replicas(view)
    assert [str(s) for s in op.skipped] == ["t-0: replication factor 3 but only 2 live broker(s)"]
    assert [(m.topic, m.replicas) for m in op.plan.partitions] == [("u", (1, 2))]
    with pytest.raises(OperationError, match=r"cannot re-place the replicas of dead broker\(s\) "
                                             r"3: 1 partition\(s\) have a replication factor"):
        fix_offline_replicas(view_of({1: None, 2: None}, [("t", 0, [1, 2, 3])]))


def test_only_the_added_brokers_gain_in_every_shard() -> None:
    """The kernel's receivers hold across shards and their merge (small shards, many of them)."""
    rack, parts, sizes = skewed_six()
    snap = view_of(rack, parts, sizes=sizes).snapshot(new_brokers=[7, 8])
    plan = plan_reassignment(snap, [AddBrokers(brokers=frozenset({7, 8}), only_onto_them=True)],
                             engine="local", shard_size=7)
    before = {p.key: p.replicas for p in snap.partitions}
    gained = Counter(b for m in plan.partitions for b in m.replicas
                     if b not in before[(m.topic, m.partition)])
    assert set(gained) == {7, 8} and gained[7] == gained[8] == 16


def test_add_brokers_skips_a_partition_only_an_old_broker_could_take() -> None:
    """t-2 breaks the rack rule (3 and 1 share rack r1): repairing it needs broker 2, which is
    not being added, so add-brokers leaves it and says why."""
    view = view_of({1: "r1", 2: "r0", 3: "r1"},
                   [("t", 0, [1, 2]), ("t", 1, [2, 3]), ("t", 2, [3, 1])])
    op = add_brokers(view, [1])
    assert [str(s) for s in op.skipped] == [
        "t-2: the kernel would place it on broker(s) 2 (the rack rule), which are not being added"]
    assert not op.plan.partitions
