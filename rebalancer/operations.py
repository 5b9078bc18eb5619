"""The day-2 operations, as Cruise Control's endpoints do them, planned on a live cluster.

- :func:`add_brokers` (Cruise Control's ``add_broker``): replicas, and leadership with them,
  move onto the added brokers only; the other brokers shed, none gains. The planning kernel
  balances the result (``AddBrokers(only_onto_them=True)``: rack-aware, and with sizes known the
  smallest replicas move, so that the fewest bytes are copied).
- :func:`remove_brokers` (``remove_broker``): every replica leaves the brokers (the kernel's
  ``Decommission`` goal, which balances what remains as Cruise Control's goals do), every
  replication factor and the rack rule kept; refused when the brokers left could not hold a
  replication factor.
- :func:`demote_brokers` (``demote_broker``): no data moves; each replica list puts the demoted
  brokers last and an in-sync replica of another broker first, and a preferred election then
  moves leadership there. A partition with no such replica is skipped and said why.
- :func:`fix_offline_replicas` (``fix_offline_replicas``): the replicas on brokers that are not
  live are placed on live ones by the kernel (rack-aware, the least-loaded first); every other
  replica stays where it is.

Each returns an :class:`OperationPlan`: the plan (Kafka's reassignment JSON), the scores before
and after (rebalancer.scoring), the partitions skipped and why, and for demote the partitions to
elect. Pure: a :class:`~rebalancer.access.ClusterView` in, nothing read or written; whoever
carries the plan out does it through a :class:`~rebalancer.access.ClusterAccess`. Bad input
(an unknown broker, too few brokers left, nothing to do) is an :class:`OperationError`, one line.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from coordinator.codecs import TopicPartition
from rebalancer.access import ClusterView, LivePartition
from rebalancer.plan import PartitionMove, Plan
from rebalancer.scoring import Scores, score_plan
from rebalancer.snapshot import Snapshot

__all__ = ["OPERATIONS", "NothingToDo", "Operation", "OperationError", "OperationPlan",
           "Skipped", "add_brokers", "demote_brokers", "fix_offline_replicas", "remove_brokers"]

Operation = Literal["add-brokers", "remove-brokers", "demote-brokers", "fix-offline-replicas"]
OPERATIONS: tuple[Operation, ...] = ("add-brokers", "remove-brokers", "demote-brokers",
                                     "fix-offline-replicas")

Sizes = Mapping[tuple[str, int], int]


class OperationError(ValueError):
    """The operation cannot be planned as asked: one line saying why; nothing was moved."""


class NothingToDo(OperationError):
    """The cluster already is as the operation would leave it (no dead broker to fix, brokers
    that hold nothing to drain or lead nothing to demote)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Skipped:
    """A partition the operation leaves as it is, and why."""

    topic: str
    partition: int
    reason: str

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}: {self.reason}"


@dataclass(frozen=True, slots=True, kw_only=True)
class OperationPlan:
    """What an operation would do: ``plan`` against ``snapshot`` (the cluster as planned on),
    its scores, what it skips, and the partitions whose leadership a preferred election should
    move once the plan is carried out (demote)."""

    operation: Operation
    brokers: tuple[int, ...]
    snapshot: Snapshot
    plan: Plan
    before: Scores
    after: Scores
    skipped: tuple[Skipped, ...] = ()
    elect: tuple[TopicPartition, ...] = ()

    @property
    def replicas_moved(self) -> int:
        return self.after.replicas_moved

    @property
    def bytes_moved(self) -> int | None:
        return self.after.bytes_moved

    @property
    def leaders_moved(self) -> int:
        """Partitions whose preferred leader changes."""
        return self.after.leader_changes

    @property
    def empty(self) -> bool:
        return not self.plan.partitions and not self.elect


# --- checks shared by the operations -------------------------------------------------------------


def _names(ids: Iterable[int]) -> str:
    return ",".join(str(b) for b in sorted(ids))


def _ids(ids: Iterable[int], operation: Operation) -> tuple[int, ...]:
    chosen = tuple(sorted(set(ids)))
    if not chosen:
        raise OperationError(f"{operation} needs the ids of the brokers, like 4 or 4,5")
    return chosen


def _tps(parts: Sequence[LivePartition], limit: int = 5) -> str:
    shown = ", ".join(f"{p.topic}-{p.partition}" for p in parts[:limit])
    return shown + (f" and {len(parts) - limit} more" if len(parts) > limit else "")


def _not_moving(view: ClusterView) -> None:
    """Cruise Control refuses to start while a reassignment runs; so do these operations: the
    replica lists they would plan from are still changing."""
    moving = view.moving
    if moving:
        raise OperationError(f"{len(moving)} partition(s) are being reassigned ({_tps(moving)}):"
                             f" let that finish (partctl reassign verify) or cancel it first")


def _known(view: ClusterView, ids: Sequence[int], verb: str) -> None:
    unknown = [b for b in ids if b not in view.brokers and b not in view.offline_brokers]
    if unknown:
        raise OperationError(f"cannot {verb} unknown broker(s) {_names(unknown)}: the live "
                             f"brokers are {_names(view.brokers) or 'none'}")


def _too_wide(parts: Iterable[LivePartition], brokers: int) -> list[tuple[str, int]]:
    """(topic, RF) of the topics whose replication factor exceeds ``brokers``, widest first."""
    rf: dict[str, int] = {}
    for p in parts:
        if len(p.replicas) > brokers:
            rf[p.topic] = max(rf.get(p.topic, 0), len(p.replicas))
    return sorted(rf.items(), key=lambda x: (-x[1], x[0]))


def _wide_line(wide: Sequence[tuple[str, int]], brokers: int) -> str:
    topic, rf = wide[0]
    more = f" (and {len(wide) - 1} more topic(s))" if len(wide) > 1 else ""
    return (f"topic {topic} has replication factor {rf} but only {brokers} live broker(s) "
            f"would hold it{more}")


def _result(operation: Operation, brokers: Sequence[int], snap: Snapshot,
            moves: Iterable[PartitionMove], skipped: Iterable[Skipped] = (),
            elect: Iterable[TopicPartition] = ()) -> OperationPlan:
    plan = Plan(partitions=tuple(sorted(moves, key=lambda m: (m.topic, m.partition))))
    return OperationPlan(operation=operation, brokers=tuple(brokers), snapshot=snap, plan=plan,
                         before=score_plan(snap), after=score_plan(snap, plan),
                         skipped=tuple(sorted(skipped, key=lambda s: (s.topic, s.partition))),
                         elect=tuple(sorted(elect)))


def _merge(old: Sequence[int], new: Sequence[int], replaceable: Iterable[int]) -> list[int]:
    """``old`` with each replica that ``new`` drops and ``replaceable`` holds replaced, in its
    place, by the brokers ``new`` brings (in ``new``'s order): a replica moves from one broker
    to another and keeps its place in the list (a leader's place included)."""
    keep = set(new)
    free = set(replaceable)
    incoming = iter([b for b in new if b not in old])
    out: list[int] = []
    for b in old:
        if b in keep or b not in free:
            out.append(b)
            continue
        nxt = next(incoming, None)
        if nxt is not None:
            out.append(nxt)
    return out


def _first(replicas: list[int], leader: int) -> list[int]:
    return [leader] + [b for b in replicas if b != leader]


# --- add, remove ---------------------------------------------------------------------------------


def add_brokers(view: ClusterView, ids: Iterable[int], *, sizes: Sizes | None = None,
                seed: int = 0) -> OperationPlan:
    """Move replicas (and leadership) onto the brokers ``ids`` only, the kernel balancing them
    (Cruise Control's add_broker)."""
    from rebalancer.engines import plan_reassignment
    from rebalancer.planner.goals import AddBrokers

    added = _ids(ids, "add-brokers")
    _not_moving(view)
    _known(view, added, "add")
    down = [b for b in added if b not in view.brokers]
    if down:
        raise OperationError(f"cannot add broker(s) {_names(down)}: not live (start them, then "
                             f"add them)")
    offline = view.offline_brokers
    if offline:
        raise OperationError(f"broker(s) {_names(offline)} hold replicas but are not live: run "
                             f"fix-offline-replicas (or remove-brokers {_names(offline)}) first")
    if not set(view.brokers) - set(added):
        raise OperationError("cannot add every live broker: no other broker has replicas to "
                             "give them")
    snap = view.snapshot(new_brokers=added, sizes=sizes)
    raw = plan_reassignment(snap, [AddBrokers(brokers=frozenset(added), only_onto_them=True)],
                            seed=seed)
    current = {p.key: p.replicas for p in snap.partitions}
    moves: list[PartitionMove] = []
    skipped: list[Skipped] = []
    for m in raw.partitions:
        old = current[(m.topic, m.partition)]
        strays = sorted({b for b in m.replicas if b not in old and b not in added})
        if strays:  # the kernel's last resort; never a move onto a broker not added
            skipped.append(Skipped(topic=m.topic, partition=m.partition,
                                   reason=f"the kernel would place it on broker(s) "
                                          f"{_names(strays)} (the rack rule), which are not "
                                          f"being added"))
            continue
        reps = _merge(old, m.replicas, old)
        if m.replicas[0] in added:  # leadership moves onto an added broker, never elsewhere
            reps = _first(reps, m.replicas[0])
        if tuple(reps) != old:
            moves.append(PartitionMove(topic=m.topic, partition=m.partition,
                                       replicas=tuple(reps)))
    return _result("add-brokers", added, snap, moves, skipped)


def remove_brokers(view: ClusterView, ids: Iterable[int], *, sizes: Sizes | None = None,
                   seed: int = 0) -> OperationPlan:
    """Drain every replica off the brokers ``ids`` (Cruise Control's remove_broker)."""
    from rebalancer.engines import plan_reassignment
    from rebalancer.planner.goals import Decommission

    gone = _ids(ids, "remove-brokers")
    _not_moving(view)
    _known(view, gone, "remove")
    others = [b for b in view.offline_brokers if b not in gone]
    if others:
        raise OperationError(f"broker(s) {_names(others)} hold replicas but are not live: "
                             f"remove them too, or run fix-offline-replicas first")
    left = len(set(view.brokers) - set(gone))
    if not left:
        raise OperationError(f"cannot remove broker(s) {_names(gone)}: no live broker would be "
                             f"left")
    wide = _too_wide(view.partitions, left)
    if wide:
        raise OperationError(f"cannot remove broker(s) {_names(gone)}: {_wide_line(wide, left)}")
    if not any(b in gone for p in view.partitions for b in p.replicas):
        raise NothingToDo(f"broker(s) {_names(gone)} hold no replica: nothing to drain")
    snap = view.snapshot(decommission=gone, sizes=sizes)
    plan = plan_reassignment(snap, [Decommission(brokers=frozenset(gone))], seed=seed)
    return _result("remove-brokers", gone, snap, plan.partitions)


# --- demote --------------------------------------------------------------------------------------


def demote_brokers(view: ClusterView, ids: Iterable[int]) -> OperationPlan:
    """Move leadership off the brokers ``ids``: each replica list that holds them puts them last
    (no data moves) and an in-sync replica of another live broker first, for a preferred
    election to make it the leader (Cruise Control's demote_broker)."""
    demoted = _ids(ids, "demote-brokers")
    _not_moving(view)
    _known(view, demoted, "demote")
    gone = set(demoted)
    if not set(view.brokers) - gone:
        raise OperationError("cannot demote every live broker: leadership would have nowhere "
                             "to go")
    live = view.brokers
    moves: list[PartitionMove] = []
    skipped: list[Skipped] = []
    elect: list[TopicPartition] = []
    for p in sorted(view.partitions, key=lambda p: (p.topic, p.partition)):
        if not gone & set(p.replicas):
            continue
        others = [b for b in p.replicas if b not in gone]
        electable = [b for b in others if b in p.isr and b in live]
        leads = p.replicas[0] in gone or p.leader in gone
        if not electable and leads:
            reason = ("every replica is on a demoted broker" if not others else
                      f"no replica outside the demoted brokers is in sync (ISR "
                      f"{list(p.isr)})")
            skipped.append(Skipped(topic=p.topic, partition=p.partition, reason=reason))
            continue
        reps = others + [b for b in p.replicas if b in gone]
        if electable and reps[0] not in electable:
            reps = _first(reps, electable[0])
        if tuple(reps) != p.replicas:
            moves.append(PartitionMove(topic=p.topic, partition=p.partition,
                                       replicas=tuple(reps)))
        if p.leader in gone and reps[0] not in gone:
            elect.append(p.tp)
    if not moves and not elect:
        raise NothingToDo(f"broker(s) {_names(demoted)} lead nothing and are last in every "
                          f"replica list: nothing to demote"
                          + (f" ({len(skipped)} partition(s) cannot be)" if skipped else ""))
    snap = view.snapshot(decommission=view.offline_brokers)
    return _result("demote-brokers", demoted, snap, moves, skipped, elect)


# --- fix offline replicas ------------------------------------------------------------------------


def fix_offline_replicas(view: ClusterView, *, sizes: Sizes | None = None,
                         seed: int = 0) -> OperationPlan:
    """Place the replicas that sit on brokers that are not live on live ones (the kernel:
    rack-aware, the least-loaded brokers first), every other replica staying where it is."""
    from rebalancer.engines import plan_reassignment
    from rebalancer.planner.goals import RepairRacks

    _not_moving(view)
    dead = set(view.offline_brokers)
    if not dead:
        raise NothingToDo("no replica is on a dead broker: nothing to fix")
    if not view.brokers:
        raise OperationError("no broker is live to take the replicas of the dead ones")
    live = len(view.brokers)
    hit = {(p.topic, p.partition) for p in view.partitions if dead & set(p.replicas)}
    skipped = [Skipped(topic=p.topic, partition=p.partition,
                       reason=f"replication factor {len(p.replicas)} but only {live} live "
                              f"broker(s)")
               for p in view.partitions
               if (p.topic, p.partition) in hit and len(p.replicas) > live]
    if len(skipped) == len(hit):
        raise OperationError(f"cannot re-place the replicas of dead broker(s) {_names(dead)}: "
                             f"{len(hit)} partition(s) have a replication factor above the "
                             f"{live} live broker(s), e.g. {skipped[0]}")
    snap = view.snapshot(decommission=dead, sizes=sizes)
    unfixable = {(s.topic, s.partition) for s in skipped}
    planned = replace(snap, partitions=tuple(p for p in snap.partitions
                                             if p.key not in unfixable))
    # minimal mode (RepairRacks alone): what must change changes, onto the least-loaded brokers
    raw = plan_reassignment(planned, [RepairRacks()], seed=seed)
    current = {p.key: p.replicas for p in snap.partitions}
    moves: list[PartitionMove] = []
    for m in raw.partitions:
        key = (m.topic, m.partition)
        if key not in hit:
            continue  # a rack repair nobody asked for: left as it is
        old = current[key]
        reps = _merge(old, m.replicas, dead)
        if m.replicas[0] in reps:  # the first surviving replica leads, not a fresh copy
            reps = _first(reps, m.replicas[0])
        moves.append(PartitionMove(topic=m.topic, partition=m.partition, replicas=tuple(reps)))
    return _result("fix-offline-replicas", tuple(sorted(dead)), snap, moves, skipped)
