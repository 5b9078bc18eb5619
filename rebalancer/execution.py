"""Carrying out a plan through the controller: claim the admin node, execute in batches.

Plans reach the controller the way Kafka's tools reached it: through
``/admin/reassign_partitions`` (target replicas per partition). The controller watches that node's
data, starts every entry it has not seen, and takes an entry out when its move completes (the node
is deleted when empty). The executor keeps at most N entries in the node: it creates the node with
the first N moves and, as the controller takes finished ones out, adds more with a conditional
write (re-read and retried when the controller wrote in between), until the plan is done.

A plan is validated first (rebalancer.validation, the one validation); verify and cancel are
rebalancer.verification's.

Talks to the coordinator only (MetadataClient, Kafka's layout): no controller code here.
"""

from __future__ import annotations

import hashlib
import os
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from itertools import islice
from types import MappingProxyType

from coordinator import layout
from coordinator.base import Coordinator
from coordinator.codecs import (
    ReassignmentOwner,
    TopicPartition,
)
from coordinator.errors import (
    ConnectionLoss,
    CoordinatorError,
    SessionExpired,
)
from coordinator.metadata import (
    MetadataClient,
    ReassignmentClaimLost,
    RequestInProgress,
    Versioned,
)
from coordinator.retry import NO_RETRY, Retry, RetryFailed
from rebalancer.plan import Plan, render_plan
from rebalancer.throttles import set_throttles
from rebalancer.validation import validate_plan
from rebalancer.verification import plan_moves, positions, require_controller

__all__ = [
    "ClaimRefused",
    "ExecutionProgress",
    "ExecutionResult",
    "ReassignmentInProgress",
    "changed_brokers",
    "claim_decision",
    "execute_plan",
    "execution_client",
    "next_moves",
    "outage_retry",
    "plan_digest",
]


class ReassignmentInProgress(RequestInProgress):
    """Another reassignment holds ``/admin/reassign_partitions``: finish, verify or cancel it
    first. ``owner`` is the run executing it (None when none is: the moves were left by a run
    that ended, or written by another tool); ``pending`` the moves in the node."""

    def __init__(self, message: str, *, owner: ReassignmentOwner | None = None,
                 pending: Mapping[TopicPartition, tuple[int, ...]] | None = None) -> None:
        super().__init__(message)
        self.owner = owner
        self.pending = MappingProxyType(dict(pending or {}))


# --- values ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionProgress:
    """Counts of the plan's partitions: finished, in the admin node now, failed (the rest wait)."""

    total: int
    done: int
    in_flight: int
    failed: int

    @property
    def waiting(self) -> int:
        return self.total - self.done - self.in_flight - self.failed


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionResult:
    """``done``: partitions at their target (including those already there). ``failed``: the rest,
    each with why (refused or cancelled; or, after the timeout or an outage, still moving or
    never started). Of those, ``in_flight`` were submitted and left to the controller (verify
    follows them) and ``not_sent`` were never submitted; ``stopped`` says why the run ended
    before the plan did (None when it ran to the end)."""

    done: tuple[TopicPartition, ...]
    failed: Mapping[TopicPartition, str]
    elapsed: float
    timed_out: bool = False
    in_flight: tuple[TopicPartition, ...] = ()
    not_sent: tuple[TopicPartition, ...] = ()
    stopped: str | None = None

    @property
    def ok(self) -> bool:
        return not self.failed


# --- execution ---------------------------------------------------------------------------------


def plan_digest(plan: Plan) -> str:
    """The sha256 of a plan's canonical JSON: the same plan gives the same digest."""
    return hashlib.sha256(render_plan(plan).encode()).hexdigest()


def _listed(moves: Mapping[TopicPartition, tuple[int, ...]], limit: int = 5) -> str:
    shown = [f"{tp} -> {list(t)}" for tp, t in sorted(moves.items())[:limit]]
    return ", ".join(shown) + (", ..." if len(moves) > limit else "")


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimRefused:
    """Why a run may not claim the reassignment node; ``owner`` is the run in its way, if any."""

    reason: str
    owner: ReassignmentOwner | None = None


def claim_decision(own: Mapping[TopicPartition, tuple[int, ...]],
                   node: Mapping[TopicPartition, tuple[int, ...]] | None,
                   holder: ReassignmentOwner | None, *,
                   additional: bool = False) -> str | ClaimRefused:
    """Whether a run whose moves are ``own`` may claim ``/admin/reassign_partitions``: "create"
    (no node, no run), "adopt" (a node holding nothing but moves of ``own``, to the same
    targets, and no run executing it: what an earlier run of the same plan left), "join" (with
    ``additional``, Kafka's ``--additional``: a node holding other moves too, none of them of a
    partition of ``own`` to another target, and no run executing it; they stay beside this
    run's), or refused, naming what is in the way: the run executing it (its plan, digest,
    process) or, with no run, the moves that are not this plan's."""
    if holder is not None:
        return ClaimRefused(reason=f"a partition reassignment is already in progress: "
                                   f"{holder.describe()}; wait for it to finish, or verify or "
                                   f"cancel it", owner=holder)
    if node is None:
        return "create"
    foreign = {tp: t for tp, t in node.items() if own.get(tp) != t}
    if not foreign:
        return "adopt"
    if not additional:
        return ClaimRefused(reason=f"a partition reassignment of {len(node)} partition(s) is "
                                   f"already in progress, with moves that are not this plan's "
                                   f"({_listed(foreign)}) and no partctl execute running it: "
                                   f"verify or cancel it first, or add this plan to it with "
                                   f"--additional")
    clashing = {tp: t for tp, t in foreign.items() if tp in own}
    if clashing:
        return ClaimRefused(reason=f"partitions of this plan are already moving elsewhere "
                                   f"({_listed(clashing)}): cancel those moves first, or leave "
                                   f"them out of the plan")
    return "join"


def changed_brokers(current: Iterable[int], target: Iterable[int]) -> frozenset[int]:
    """The brokers a move changes: those gaining or losing the replica (what
    ``max_moves_per_broker`` counts). Pure."""
    return frozenset(set(current) ^ set(target))


def next_moves(pending: Iterable[TopicPartition],
               targets: Mapping[TopicPartition, tuple[int, ...]], *, free: int,
               per_broker: int | None, changing: Mapping[TopicPartition, frozenset[int]],
               in_flight: Iterable[TopicPartition]) -> dict[TopicPartition, tuple[int, ...]]:
    """The next moves to submit, in ``pending`` order: up to ``free`` of them and, with a
    ``per_broker`` limit, only those that keep every broker they change (``changing``) within
    it, counting the moves ``in_flight``. Pure: both ways of executing a plan batch by it."""
    if free <= 0:
        return {}
    if per_broker is None:
        return {tp: targets[tp] for tp in islice(pending, free)}
    load: dict[int, int] = {}
    for tp in in_flight:
        for b in changing.get(tp, ()):
            load[b] = load.get(b, 0) + 1
    batch: dict[TopicPartition, tuple[int, ...]] = {}
    for tp in pending:
        if len(batch) >= free:
            break
        brokers = changing.get(tp, frozenset())
        if all(load.get(b, 0) < per_broker for b in brokers):
            batch[tp] = targets[tp]
            for b in brokers:
                load[b] = load.get(b, 0) + 1
    return batch


def execution_client(coordinator: Coordinator | MetadataClient, *, retry: Retry | None = None
                     ) -> MetadataClient:
    """The one metadata client of an execution, which validation, throttles, execution, verify
    and the job's snapshots all share: a metadata client given is used as it is (unless
    ``retry`` asks for another policy); a coordinator session gets one whose reads ride out an
    outage (``retry``, default :func:`outage_retry`)."""
    if isinstance(coordinator, MetadataClient):
        if retry is None:
            return coordinator
        coordinator = coordinator.coordinator
    return MetadataClient(coordinator, retry=retry or outage_retry(coordinator))


def outage_retry(coordinator: Coordinator) -> Retry:
    """The retry policy of an executing run's reads: until twice the session timeout, so an
    outage shorter than the session (which keeps the run's claim) is ridden out with room for
    the reconnect, and a longer one too when the run can claim its node again after it."""
    session = float(getattr(coordinator, "session_timeout", 10.0))
    return Retry(max_tries=None, delay=0.1, backoff=2.0, max_delay=1.0,
                 deadline=max(2 * session, 1.0))


class RunLedger:
    """The bookkeeping every execution keeps, whichever way in: the moves waiting (in plan
    order), submitted, done and failed, and why submitting stopped."""

    def __init__(self, targets: Mapping[TopicPartition, tuple[int, ...]]) -> None:
        self.targets = targets
        self.pending: deque[TopicPartition] = deque()
        self.in_flight: dict[TopicPartition, tuple[int, ...]] = {}
        self.done: list[TopicPartition] = []
        self.failed: dict[TopicPartition, str] = {}
        self.unsent: list[TopicPartition] = []
        """Never submitted: execution stopped first."""
        self.stopped: str | None = None
        """Why no more moves are submitted (a cancel, another writer, a lost claim)."""

    @property
    def busy(self) -> bool:
        return bool(self.pending or self.in_flight)

    def progress(self) -> ExecutionProgress:
        return ExecutionProgress(total=len(self.targets), done=len(self.done),
                                 in_flight=len(self.in_flight), failed=len(self.failed))

    def stop(self, reason: str) -> None:
        if self.stopped is None:
            self.stopped = reason
        while self.pending:
            tp = self.pending.popleft()
            self.unsent.append(tp)
            self.failed[tp] = f"not started: {reason}"

    def unfinished(self, *, timed_out: bool, gave_up: str | None) -> dict[TopicPartition, str]:
        """Why each move still in flight or waiting failed, when the run stopped waiting (the
        timeout, or ``gave_up``); nothing when it did not."""
        if not (timed_out or gave_up):
            return {}
        why = "the timeout passed" if timed_out else gave_up
        out = {tp: (f"still moving to {list(target)} when {why} (the controller carries on: "
                    f"verify follows it, cancel reverts it)")
               for tp, target in self.in_flight.items()}
        for tp in self.pending:
            out[tp] = f"not started: {why} first" if timed_out else f"not started: {why}"
        return out


class _Run(RunLedger):
    """One execution of a plan: the claim, the window of moves in the node, what left it."""

    def __init__(self, md: MetadataClient, targets: Mapping[TopicPartition, tuple[int, ...]],
                 owner: ReassignmentOwner, max_concurrent_moves: int,
                 max_moves_per_broker: int | None = None, *, additional: bool = False) -> None:
        super().__init__(targets)
        self.md = md
        self.owner = owner
        self.window = max_concurrent_moves
        self.per_broker = max_moves_per_broker
        self.additional = additional
        self.others: set[TopicPartition] = set()
        """Moves of others that were in the node when this run joined it (``additional``):
        left to the controller, neither counted in the window nor taken for another writer."""
        self.moving: dict[TopicPartition, frozenset[int]] = {}
        """Per move, the brokers it changes (gaining or losing the replica), which
        ``per_broker`` counts."""
        self.unsure: set[TopicPartition] = set()
        """Sent by a write whose answer was lost: in the node, or back to pending."""
        self.claimed = False
        """The owner node is this run's, of this session (as last read)."""
        self.involved = False
        """Moves of this run have been in the node (written by it, or taken over)."""

    def start(self, node: Versioned[dict[TopicPartition, tuple[int, ...]]] | None) -> None:
        now = positions(self.md, self.targets)
        entries = node.value if node is not None else {}
        adopted = {tp: t for tp, t in entries.items() if self.targets.get(tp) == t}
        self.others = set(entries) - set(adopted)
        self.involved = bool(adopted)
        for tp in sorted(self.targets):
            position = now[tp]
            current = position[0] if position is not None else ()
            self.moving[tp] = changed_brokers(current, self.targets[tp])
            if tp in adopted:
                self.in_flight[tp] = self.targets[tp]
            elif now[tp] == (self.targets[tp], False):
                self.done.append(tp)
            else:
                self.pending.append(tp)

    def next_batch(self, free: int) -> dict[TopicPartition, tuple[int, ...]]:
        """The next pending moves, in plan order, up to ``free`` of them and, with a
        per-broker limit, only those that keep every broker they change within it (counting
        the moves in flight). Pure over the run's state."""
        return next_moves(self.pending, self.targets, free=free, per_broker=self.per_broker,
                          changing=self.moving, in_flight=self.in_flight)

    def step(self, *, submit: bool = True) -> bool:
        """Read the node, account for what left it, and (``submit``) top it up; False when a
        write met a conflict and the node must be read again at once."""
        md = self.md
        node, holder = md.reassignment_and_owner()
        entries = node.value if node is not None else {}
        self.claimed = (holder is not None and holder[0].run == self.owner.run
                        and holder[1].ephemeral_owner == md.coordinator.session_id)
        self.involved |= self.claimed or any(tp in entries for tp in self.unsure)
        left = [tp for tp in self.in_flight if tp not in entries]
        if left:
            for tp, pos in positions(md, left).items():
                target = self.in_flight.pop(tp)
                if pos == (target, False):
                    self.done.append(tp)
                elif tp in self.unsure:  # the write never landed
                    self.pending.appendleft(tp)
                else:
                    where = "gone" if pos is None else f"at {list(pos[0])}"
                    self.failed[tp] = (f"dropped before reaching {list(target)} (cancelled, or "
                                       f"refused by the controller); it is {where}")
                    self.stop("a pending move was cancelled or refused, so execution stopped")
        self.unsure.clear()
        if not self.involved:
            # Nothing of this run's has been in the node: if it is in another's hands now, the
            # run lost the race for the claim (between its first look and its first write).
            decision = claim_decision(self.targets, entries if node is not None else None,
                                      holder[0] if holder is not None else None,
                                      additional=self.additional)
            if isinstance(decision, ClaimRefused):
                raise ReassignmentInProgress(decision.reason, owner=decision.owner,
                                             pending=entries)
            self.others |= {tp for tp, t in entries.items() if self.targets.get(tp) != t}
        for tp in [tp for tp, t in self.in_flight.items() if entries.get(tp, t) != t]:
            self.failed[tp] = f"cancelled: another tool changed its target to {list(entries[tp])}"
            del self.in_flight[tp]
            self.stop("a pending move was cancelled or refused, so execution stopped")
        self.others &= set(entries)  # those that finished are gone for good
        foreign = {tp: t for tp, t in entries.items()
                   if tp not in self.in_flight and tp not in self.others}
        if foreign:  # never ours to top up: stop writing, follow what we sent
            who = f" by {holder[0].describe()}" if holder is not None and not self.claimed else ""
            self.stop(f"another reassignment took {layout.REASSIGN_PARTITIONS}{who} "
                      f"({_listed(foreign)})")
        free = self.window - (len(entries) - len(self.others))
        if not submit or not self.pending or free <= 0 or self.stopped is not None:
            return True
        batch = self.next_batch(free)
        if not batch:
            return True  # every pending move waits on a broker at its limit
        if not self.claimed:
            decision = claim_decision(self.in_flight, entries if node is not None else None,
                                      holder[0] if holder is not None else None,
                                      additional=self.additional)
            if isinstance(decision, ClaimRefused):
                self.stop(f"the claim on {layout.REASSIGN_PARTITIONS} lapsed and could not be "
                          f"renewed: {decision.reason}")
                return True
            if decision in ("adopt", "join"):
                assert node is not None
                return not md.claim_reassignment(self.owner, node_version=node.version)
            write = lambda: md.claim_reassignment(self.owner, batch)  # noqa: E731
        else:
            merged = {**entries, **batch}
            write = lambda: md.submit_reassignment(  # noqa: E731
                merged, node.version if node is not None else None)
        try:
            written = write()
            self.involved |= written
        except ReassignmentClaimLost:
            return False  # read again: the claim is renewed, or the run stops
        except (ConnectionLoss, SessionExpired):
            written, self.unsure = True, set(batch)  # the next read tells
        if not written:
            return False
        for tp in batch:
            self.pending.remove(tp)
            self.in_flight[tp] = batch[tp]
        return True

    def result(self, *, elapsed: float, timed_out: bool, gave_up: str | None,
               detail: str = "") -> ExecutionResult:
        """``gave_up``: why the run stopped waiting (an outage), ``detail`` the last error."""
        in_flight = tuple(sorted(self.in_flight))
        not_sent = tuple(sorted(self.pending))
        failed = dict(self.failed)
        failed.update(self.unfinished(timed_out=timed_out, gave_up=gave_up))
        stopped = (f"{gave_up} ({detail})" if gave_up and detail else gave_up
                   or ("the timeout passed" if timed_out else self.stopped))
        return ExecutionResult(done=tuple(sorted(self.done)),
                               failed=MappingProxyType(dict(sorted(failed.items()))),
                               elapsed=elapsed, timed_out=timed_out, in_flight=in_flight,
                               not_sent=tuple(sorted((*not_sent, *self.unsent))),
                               stopped=stopped)


def execute_plan(coordinator: Coordinator | MetadataClient, plan: Plan, *,
                 max_concurrent_moves: int = 50, max_moves_per_broker: int | None = None,
                 poll_interval: float = 0.5,
                 timeout: float | None = None,
                 progress: Callable[[ExecutionProgress], None] | None = None,
                 label: str = "", retry: Retry | None = None,
                 throttle: int | None = None, additional: bool = False) -> ExecutionResult:
    """Have the controller carry out ``plan``, at most ``max_concurrent_moves`` partitions at once
    and, with ``max_moves_per_broker``, at most that many moves changing any one broker (gaining
    or losing a replica) at once.

    The plan is validated against the live cluster first (PlanError, nothing written). The run
    then claims ``/admin/reassign_partitions`` atomically: it creates the node with its first
    moves together with its ephemeral owner node (``label`` names the plan there), so of two
    runs started together one wins and the other is refused with ReassignmentInProgress naming
    the plan in its way; moves left in the node by an earlier run of this same plan (a run that
    timed out, was interrupted or gave up) are taken over, which is how a run is resumed. Other
    moves in the node (left by an ended run, or written by another tool or the admin API) are
    refused too unless ``additional`` (Kafka's ``--additional``): then this plan's moves join
    them, which the controller carries on beside them (a partition of the plan already moving
    to another target is still refused, and a run executing the node still is).
    NoActiveController when no controller could carry the plan out. With ``throttle`` (bytes
    per second) the moves' replication is throttled first, as Kafka's tool does
    (:func:`rebalancer.throttles.set_throttles`); nothing is throttled when the claim is
    refused.

    The run tops the node up only with its own moves, only while its claim holds, and stops
    submitting (following what it sent) when anything else appears in the node: a cancel, a
    refusal, another writer. A coordinator outage is ridden out for ``retry``'s deadline
    (default :func:`outage_retry`: twice the session timeout; a metadata client given keeps its
    own policy, see :func:`execution_client`); past it, or when ``timeout``
    seconds have passed, the run returns: moves still in the node are left to the controller
    (``in_flight``), moves never sent are ``not_sent``, both reported failed with the reason.
    """
    if max_concurrent_moves < 1:
        raise ValueError(f"max_concurrent_moves must be >= 1, got {max_concurrent_moves}")
    if max_moves_per_broker is not None and max_moves_per_broker < 1:
        raise ValueError(f"max_moves_per_broker must be >= 1, got {max_moves_per_broker}")
    started = time.monotonic()
    md = execution_client(coordinator, retry=retry)
    plan = validate_plan(md, plan)
    targets = plan_moves(plan)
    owner = ReassignmentOwner(run=uuid.uuid4().hex, digest=plan_digest(plan),
                              partitions=len(targets), plan=label, host=socket.gethostname(),
                              pid=os.getpid())
    node, holder = md.reassignment_and_owner()
    decision = claim_decision(targets, node.value if node is not None else None,
                              holder[0] if holder is not None else None, additional=additional)
    if isinstance(decision, ClaimRefused):
        raise ReassignmentInProgress(decision.reason, owner=decision.owner,
                                     pending=node.value if node is not None else {})
    require_controller(md, "reassignment")
    if throttle is not None:
        set_throttles(md, plan, throttle)
    md.coordinator.ensure_path(layout.ADMIN)
    run = _Run(md, targets, owner, max_concurrent_moves, max_moves_per_broker,
               additional=additional)
    run.start(node if decision in ("adopt", "join") else None)
    wake = threading.Event()
    watch = md.coordinator.watch_data(layout.REASSIGN_PARTITIONS, lambda _event: wake.set())
    timed_out, gave_up, detail = False, None, ""
    outage: float | None = None

    def report() -> None:
        if progress is not None:
            progress(run.progress())

    try:
        while run.busy:
            wake.clear()
            step_started = time.monotonic()
            expired = timeout is not None and step_started - started >= timeout
            try:
                settled = run.step(submit=not expired)
                outage = None
            except (ConnectionLoss, SessionExpired) as exc:
                # reads retry until the policy's deadline: this is an outage that outlasted it
                # (or a session that ended under a read: the next read renews the claim)
                outage = step_started if outage is None else outage
                lasted = time.monotonic() - outage
                if expired:
                    timed_out = True
                    break
                if isinstance(exc, RetryFailed) or lasted >= (md.retry.deadline or 0):
                    gave_up = f"the coordinator could not be reached for {lasted:.0f}s"
                    detail = str(exc)
                    break
                wake.wait(poll_interval)
                continue
            if expired:
                timed_out = run.busy
                break
            if not settled:
                continue  # a conflict: read again at once
            report()
            if run.busy:
                wait = poll_interval
                if timeout is not None:
                    wait = max(0.0, min(wait, timeout - (time.monotonic() - started)))
                wake.wait(wait)
    finally:
        watch.cancel()
        try:  # once, without riding out an outage: the node goes with the session anyway
            md.release_reassignment(owner, retry=NO_RETRY)
        except CoordinatorError:
            pass
    report()
    return run.result(elapsed=time.monotonic() - started, timed_out=timed_out, gave_up=gave_up,
                      detail=detail)
