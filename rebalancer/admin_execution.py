"""Carrying out a plan through Kafka's Admin API: AlterPartitionReassignments in batches within
the limits, progress from ListPartitionReassignments, Kafka's throttles around the moves.

There is no ``/admin/reassign_partitions`` to claim: the cluster's controller keeps the moves in
progress and lists them. So the claim that keeps two runs apart becomes a rule over that list
(:func:`overlap_decision`): a plan whose partitions are already moving elsewhere is refused,
naming them; a plan is refused while anyone else's moves are in progress unless ``additional``
(Kafka's ``--additional``); a list holding nothing but this plan's own moves, to the same
targets, is taken over (a run resumed). The batching is the coordinator way's
(:func:`rebalancer.execution.next_moves`), and so are the progress and result values, which
``partctl/render.py`` renders for both ways alike.

A move leaves the list when the controller finishes it (or drops it: a cancel, a refusal); the
run then reads the partition's replicas: at the target it is done, else it failed and the run
submits nothing more. A broker's metadata can trail the controller's, so a move that left the
list is given ``SETTLE`` seconds to show its target before it is called failed, and ``TRAIL``
seconds while the metadata shows a position the move passes through on its way (its target's
replicas in another order, or its target beside the replicas it removes): a broker applying a
large batch of changes on a busy machine trails by many seconds (Kafka 4.x KRaft, 50 moves at
once on two cores: over 15 s), and a move that only reorders replicas leaves the list at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from coordinator.clock import SYSTEM_CLOCK, Clock
from coordinator.codecs import TopicPartition
from rebalancer.access import AccessError, MovingPartition
from rebalancer.execution import (
    ClaimRefused,
    ExecutionProgress,
    ExecutionResult,
    RunLedger,
    changed_brokers,
    next_moves,
)

if TYPE_CHECKING:
    from kafkaclient.admin import AdminClient

log = logging.getLogger(__name__)

__all__ = ["SETTLE", "TRAIL", "AdminRun", "Position", "asking", "current_replicas", "listed",
           "moves_in_progress", "overlap_decision", "positions", "run_plan"]

SETTLE = 15.0
"""Seconds a move that left the list of moves in progress may take to show its target in the
metadata before it is called failed."""

TRAIL = 120.0
"""Seconds a move that left the list may show a position it passes through on its way (the
metadata trailing the controller's) before it is called failed."""

Position = tuple[tuple[int, ...], tuple[int, ...]]
"""A partition's replicas and ISR, as the metadata has them."""

OUTAGE = 30.0
"""Seconds the run rides out a cluster it cannot ask (each failed poll tried again) before it
stops waiting; the moves submitted carry on."""


@contextmanager
def asking(what: str) -> Iterator[None]:
    """The Admin API client's errors as :class:`AccessError` lines, saying what was asked."""
    from kafkaclient.admin import AdminError

    try:
        yield
    except AdminError as exc:
        raise AccessError(f"{what}: {exc}") from exc


def listed(moves: Mapping[TopicPartition, Iterable[int]], limit: int = 5) -> str:
    shown = [f"{tp} -> {list(t)}" for tp, t in sorted(moves.items())[:limit]]
    return ", ".join(shown) + (f", ... ({len(moves)} in all)" if len(moves) > limit else "")


def overlap_decision(own: Mapping[TopicPartition, tuple[int, ...]],
                     moving: Mapping[TopicPartition, tuple[int, ...]], *,
                     additional: bool = False) -> str | ClaimRefused:
    """Whether a plan whose moves are ``own`` may start while the moves ``moving`` (partition ->
    target) are in progress: "create" (none are), "adopt" (nothing but moves of ``own``, to
    the same targets: what an earlier run of this plan left), "join" (with ``additional``: other
    moves too, none of a partition of ``own``), or refused, naming what is in the way. A
    partition of ``own`` moving to another target is refused even with ``additional``. The
    coordinator way's :func:`rebalancer.execution.claim_decision`, with no claim node. Pure."""
    if not moving:
        return "create"
    clashing = {tp: t for tp, t in moving.items() if tp in own and own[tp] != t}
    if clashing:
        return ClaimRefused(reason=f"{len(clashing)} partition(s) of this plan are already "
                                   f"being moved elsewhere ({listed(clashing)}): wait for "
                                   f"those moves, cancel them, or leave them out of the plan")
    foreign = {tp: t for tp, t in moving.items() if tp not in own}
    if not foreign:
        return "adopt"
    if not additional:
        return ClaimRefused(reason=f"a partition reassignment of {len(foreign)} other "
                                   f"partition(s) is in progress ({listed(foreign)}): wait for "
                                   f"it, verify or cancel it, or add this plan beside it with "
                                   f"--additional")
    return "join"


@dataclass(frozen=True, slots=True, kw_only=True)
class _Left:
    """A move submitted by the run that is no longer listed: since when, at what target."""

    since: float
    target: tuple[int, ...]


class AdminRun(RunLedger):
    """One execution's bookkeeping: what waits, what is submitted, what is done or failed.
    Pure: the loop (:func:`run_plan`) feeds it what the cluster says."""

    def __init__(self, targets: Mapping[TopicPartition, tuple[int, ...]],
                 current: Mapping[TopicPartition, tuple[int, ...]],
                 moving: Mapping[TopicPartition, tuple[int, ...]], *, window: int,
                 per_broker: int | None) -> None:
        super().__init__(dict(targets))
        self.window = window
        self.per_broker = per_broker
        self.changing = {tp: changed_brokers(current.get(tp, ()), t) for tp, t in targets.items()}
        self.before = {tp: tuple(current.get(tp, ())) for tp in targets}
        self.others = {tp for tp in moving if tp not in targets}
        """Moves of others in progress when the run started (``additional``): left alone."""
        self.left: dict[TopicPartition, _Left] = {}
        for tp in sorted(targets):
            if moving.get(tp) == targets[tp]:
                self.in_flight[tp] = targets[tp]  # taken over
            elif tuple(current.get(tp, ())) == targets[tp]:
                self.done.append(tp)
            else:
                self.pending.append(tp)

    def seen(self, moving: Mapping[TopicPartition, tuple[int, ...]], now: float
             ) -> set[TopicPartition]:
        """Account for the moves in progress now (partition -> target); the run's moves that
        are not listed, whose replicas must be read, are returned."""
        for tp, target in list(self.in_flight.items()):
            heading = moving.get(tp)
            if heading is None:
                self.left.setdefault(tp, _Left(since=now, target=target))
            elif heading != target:
                del self.in_flight[tp]
                self.left.pop(tp, None)
                self.failed[tp] = f"cancelled: another tool changed its target to {list(heading)}"
                self.stop("a pending move was cancelled or changed, so execution stopped")
            else:
                self.left.pop(tp, None)
        self.others &= set(moving)
        foreign = {tp: t for tp, t in moving.items()
                   if tp not in self.in_flight and tp not in self.others}
        if foreign:
            self.stop(f"other moves started meanwhile ({listed(foreign)}); the moves submitted "
                      f"carry on")
        return set(self.left)

    def on_the_way(self, tp: TopicPartition, replicas: tuple[int, ...],
                   target: tuple[int, ...]) -> bool:
        """Whether ``replicas`` is a position the move of ``tp`` passes through to ``target``,
        but not where it started: the target's replicas in another order (a reorder completes
        at once, and cannot be cancelled), or the target beside replicas it removes."""
        now, goal = set(replicas), set(target)
        if replicas == target or (now != goal and replicas == self.before.get(tp)):
            return False
        return now == goal or goal < now <= goal | set(self.before.get(tp, ()))

    def settle(self, where: Mapping[TopicPartition, Position | None], now: float,
               settle: float = SETTLE, trail: float = TRAIL) -> None:
        """The replicas and ISR (None: gone) of the moves that left the list: done at the
        target with every target replica in sync (a move completes so; a metadata cache that
        trails a cancelled move that only added replicas still shows them, out of sync), or
        at the target ``settle`` seconds after leaving the list; failed when not there by
        then, or by ``trail`` seconds while the metadata shows it on its way (:meth:`on_the_way`:
        the metadata trails)."""
        for tp, gone in list(self.left.items()):
            position = where.get(tp, ((), ()))
            waited = now - gone.since >= settle
            replicas, isr = position if position is not None else (None, ())
            if replicas is not None and self.on_the_way(tp, replicas, gone.target):
                waited = now - gone.since >= trail
            if replicas == gone.target and (waited or set(gone.target) <= set(isr)):
                self.done.append(tp)
            elif replicas is not None and not waited:
                continue
            else:
                it = "gone" if replicas is None else f"at {list(replicas)}"
                self.failed[tp] = (f"dropped before reaching {list(gone.target)} (cancelled, or "
                                   f"refused by the controller); it is {it}")
                self.stop("a pending move was cancelled or refused, so execution stopped")
            del self.left[tp]
            del self.in_flight[tp]

    def next_batch(self) -> dict[TopicPartition, tuple[int, ...]]:
        if self.stopped is not None:
            return {}
        return next_moves(self.pending, self.targets, free=self.window - len(self.in_flight),
                          per_broker=self.per_broker, changing=self.changing,
                          in_flight=self.in_flight)

    def submitted(self, answers: Mapping[TopicPartition, str | None]) -> None:
        """AlterPartitionReassignments' answer per partition: submitted, or refused (failed,
        the others go on)."""
        for tp, error in answers.items():
            if tp not in self.targets or tp not in self.pending:
                continue
            self.pending.remove(tp)
            if error is None:
                self.in_flight[tp] = self.targets[tp]
            else:
                self.failed[tp] = f"refused: {error}"

    def result(self, *, elapsed: float, timed_out: bool, gave_up: str | None) -> ExecutionResult:
        failed = dict(self.failed)
        failed.update(self.unfinished(timed_out=timed_out, gave_up=gave_up))
        return ExecutionResult(
            done=tuple(sorted(self.done)),
            failed=MappingProxyType(dict(sorted(failed.items()))), elapsed=elapsed,
            timed_out=timed_out, in_flight=tuple(sorted(self.in_flight)),
            not_sent=tuple(sorted((*self.pending, *self.unsent))),
            stopped=gave_up or ("the timeout passed" if timed_out else self.stopped))


def moves_in_progress(admin: AdminClient) -> dict[TopicPartition, MovingPartition]:
    with asking("cannot list the reassignments in progress"):
        listing = admin.list_reassignments()
    return {tp: MovingPartition(topic=tp.topic, partition=tp.partition,
                                replicas=tuple(r.replicas), adding=tuple(r.adding),
                                removing=tuple(r.removing))
            for tp, r in listing.items()}


def positions(admin: AdminClient, tps: Iterable[TopicPartition]
              ) -> dict[TopicPartition, Position | None]:
    """Per partition, its replicas and ISR in the metadata (None: the topic or partition is
    gone)."""
    tps = list(tps)
    with asking("cannot read the topics' metadata"):
        topics = admin.topics(sorted({tp.topic for tp in tps}))
    where = {TopicPartition(t, p.partition): (tuple(p.replicas), tuple(p.isr))
             for t, info in topics.items() for p in info.partitions}
    return {tp: where.get(tp) for tp in tps}


def current_replicas(admin: AdminClient, tps: Iterable[TopicPartition]
                     ) -> dict[TopicPartition, tuple[int, ...] | None]:
    """Per partition, its replicas in the metadata (None: the topic or partition is gone)."""
    return {tp: None if p is None else p[0] for tp, p in positions(admin, tps).items()}


def run_plan(admin: AdminClient, targets: Mapping[TopicPartition, tuple[int, ...]],
             current: Mapping[TopicPartition, tuple[int, ...]],
             moving: Mapping[TopicPartition, tuple[int, ...]], *, max_concurrent_moves: int,
             max_moves_per_broker: int | None, timeout: float | None, poll_interval: float,
             progress: Callable[[ExecutionProgress], None] | None, clock: Clock = SYSTEM_CLOCK,
             started: float | None = None) -> ExecutionResult:
    """Submit ``targets`` in batches and follow them until each is done or failed (or the
    ``timeout`` passes, or the cluster cannot be asked for :data:`OUTAGE` seconds). ``current``:
    the partitions' replicas now; ``moving``: the moves in progress (partition -> target)."""
    started = clock.monotonic() if started is None else started
    run = AdminRun(targets, current, moving, window=max_concurrent_moves,
                   per_broker=max_moves_per_broker)
    timed_out, gave_up = False, None
    outage: float | None = None

    def report() -> None:
        if progress is not None:
            progress(run.progress())

    first = True
    while run.busy:
        now = clock.monotonic()
        expired = timeout is not None and now - started >= timeout
        try:
            if not first:  # the first round submits on the lists read at the start
                listing = {tp: m.target for tp, m in moves_in_progress(admin).items()}
                gone = run.seen(listing, now)
                if gone:
                    run.settle(positions(admin, gone), clock.monotonic())
            first = False
            batch = {} if expired else run.next_batch()
            if batch:
                with asking("cannot submit the moves"):
                    run.submitted(admin.alter_reassignments(batch))
            outage = None
        except AccessError as exc:
            code = getattr(exc.__cause__, "code", None) or ""
            if code.endswith("AUTHORIZATION_FAILED"):
                if not run.in_flight and not run.failed:
                    raise  # refused before anything moved: one line
                gave_up = str(exc)
                break
            outage = now if outage is None else outage
            if clock.monotonic() - outage >= OUTAGE:
                gave_up = f"the cluster could not be asked for {OUTAGE:.0f}s ({exc})"
                break
            log.warning("%s; trying again", exc)
        if expired:
            timed_out = run.busy
            break
        report()
        if run.busy:
            wait = poll_interval
            if timeout is not None:
                wait = max(0.0, min(wait, timeout - (clock.monotonic() - started)))
            clock.sleep(wait)
    report()
    return run.result(elapsed=clock.monotonic() - started, timed_out=timed_out,
                      gave_up=gave_up)
