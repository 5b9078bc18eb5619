"""The scheduled jobs themselves: a rebalance and a preferred-leader election (self-healing is
in rebalancer.jobs.self_heal), on any cluster: each run reaches its cluster through one
rebalancer.access.ClusterAccess, by coordinator or by bootstrap servers (rebalancer.jobs.cluster).

A stored job names its function by a stable import string (``JOB_FUNCTIONS``) and holds plain
JSON keyword arguments, never a pickled callable, so a refactor cannot silently orphan a stored
job (and a stored job cannot name any other function: ``rebalancer.jobs.spec``).
Every run is recorded in the store's ``partctl_job_runs`` table: a failure (an unreachable
coordinator, a bad plan, a cluster that moved) becomes a failed run with one line saying why; it
never escapes into the scheduler. ``STOP`` is set by ``partctl scheduler run`` on SIGTERM: a
running job notices at its next checkpoint and records itself as interrupted.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rebalancer.jobs.errors import JobSpecError
from rebalancer.store import RunOutcome, Store, scores_json, snapshot_digest

if TYPE_CHECKING:
    from coordinator.codecs import TopicPartition
    from rebalancer.access import ClusterAccess, ClusterView
    from rebalancer.goals import Spelling
    from rebalancer.planner.goals import Goal

log = logging.getLogger(__name__)

REBALANCE = "rebalance"
PREFERRED_ELECTION = "preferred-election"
SELF_HEAL = "self-heal"

JOB_FUNCTIONS: Mapping[str, str] = {
    REBALANCE: "rebalancer.jobs:run_rebalance",
    PREFERRED_ELECTION: "rebalancer.jobs:run_preferred_election",
    SELF_HEAL: "rebalancer.jobs:run_self_heal",
}
"""Job kind -> the import string stored with each job. Never rename these targets."""

ENGINES = ("local", "spark", "auto")

STOP = threading.Event()
"""Set when the scheduler is stopping: running jobs wind down and record 'interrupted'."""


class Interrupted(Exception):
    """The scheduler is stopping; the job stops at a checkpoint."""


class JobFailed(Exception):
    """A job's expected failure, with the one line to record."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSummary:
    """What a job run returns (and what ``jobs run-now`` prints)."""

    run_id: int
    job_id: str
    kind: str
    outcome: RunOutcome
    error: str | None = None
    summary: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Result:
    outcome: RunOutcome
    summary: str
    error: str | None = None
    fields: Mapping[str, Any] = field(default_factory=dict)


def runner_id() -> str:
    """host:pid, so a later scheduler can tell a crashed run from one still going."""
    return f"{socket.gethostname()}:{os.getpid()}"


def one_line(exc: BaseException) -> str:
    """An exception as the one line a run records: ``Type: message``; errors that carry a list
    of problems (PlanError, SnapshotError) have them joined on the line. A plan's problems
    (rebalancer.validation's, as the CLI prints them) and JobFailed need no type name."""
    from rebalancer.plan import PlanError

    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    problems = getattr(exc, "problems", None)
    if problems:
        shown = "; ".join(str(p) for p in list(problems)[:5])
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        first = f"{first.rstrip(':')}: {shown}{more}" if first else f"{shown}{more}"
    if isinstance(exc, JobFailed | PlanError):
        return first
    name = type(exc).__name__
    return f"{name}: {first}" if first else name


_current = threading.local()
"""The heartbeat of the run this thread is carrying out (checkpoints consult it)."""


def _checkpoint() -> None:
    if STOP.is_set():
        raise Interrupted("the scheduler is stopping")
    heartbeat = getattr(_current, "heartbeat", None)
    if heartbeat is not None and heartbeat.lost.is_set():
        raise Interrupted(f"stopped: this run lost the job's lock ({heartbeat.reason})")


def _wait(seconds: float, why: str) -> None:
    """Sleep at a checkpoint: wakes up (Interrupted) when the scheduler stops."""
    if STOP.wait(seconds):
        raise Interrupted(f"the scheduler is stopping; {why}")
    _checkpoint()


def _record(kind: str, job_id: str, db: str | None,
            body: Callable[[Store, int], _Result]) -> RunSummary:
    """Take the job's lock by recording its run (RunConflict, and nothing recorded, when
    another run holds it: rebalancer.jobs.lock), run ``body`` with a heartbeat, record the
    outcome."""
    from rebalancer.jobs.lock import Heartbeat, is_gone

    store = Store.open(db)
    try:
        run = store.claim_run(job_id, kind, runner=runner_id(), is_gone=is_gone)
        try:
            with Heartbeat(store, run.id) as heartbeat:
                _current.heartbeat = heartbeat
                try:
                    result = body(store, run.id)
                finally:
                    _current.heartbeat = None
        except Interrupted as exc:
            result = _Result(outcome=RunOutcome.INTERRUPTED, summary="interrupted",
                             error=str(exc))
        except KeyboardInterrupt:
            store.finish_run(run.id, RunOutcome.INTERRUPTED, error="interrupted by the user")
            raise
        except Exception as exc:  # recorded, never raised into the scheduler
            log.debug("job %s (%s) failed", job_id, kind, exc_info=True)
            result = _Result(outcome=RunOutcome.FAILED, summary="failed", error=one_line(exc))
        store.finish_run(run.id, result.outcome, error=result.error, **result.fields)
        level = logging.WARNING if result.outcome is RunOutcome.FAILED else logging.INFO
        log.log(level, "job %s (%s) run %d: %s%s", job_id, kind, run.id, result.outcome.value,
                f": {result.error}" if result.error else f" ({result.summary})"
                if result.summary else "")
        return RunSummary(run_id=run.id, job_id=job_id, kind=kind, outcome=result.outcome,
                          error=result.error, summary=result.summary)
    finally:
        store.close()


def _open(coordinator: str | None, bootstrap: str | None, command_config: str | None,
          timeout: float) -> ClusterAccess:
    """The run's cluster, by coordinator or by bootstrap servers (rebalancer.jobs.cluster);
    JobFailed with one line when it cannot be reached."""
    from rebalancer.access import AccessError
    from rebalancer.jobs.cluster import ClusterUnavailable, open_cluster, target_of

    target = target_of({"coordinator": coordinator, "bootstrap": bootstrap,
                        "command_config": command_config})
    try:
        return open_cluster(target, timeout=timeout)
    except (ClusterUnavailable, AccessError) as exc:
        raise JobFailed(f"{target.describe()}: {one_line(exc)}") from None


# --- preferred-leader election ---------------------------------------------------------------


def _imbalance(view: ClusterView, percentage: float) -> Any:
    """The pure imbalance computation over the live cluster: assignments, leaders and ISRs,
    live brokers; partitions moving are set aside as the controller's own timer sets them aside
    (partitions being deleted are not in the view)."""
    from elections.imbalance import leader_imbalance
    from rebalancer.access import NO_LEADER

    partitions: dict[TopicPartition, tuple[Sequence[int], int | None, Iterable[int]]] = {}
    for p in view.partitions:
        # no leader and no ISR: the controller has not elected it yet (not counted as misled)
        leader = None if p.leader == NO_LEADER and not p.isr else p.leader
        partitions[p.tp] = (p.replicas, leader, p.isr)
    return leader_imbalance(partitions, view.brokers, percentage=percentage,
                            reassigning=[p.tp for p in view.partitions if p.moving])


def _imbalance_scores(result: Any) -> dict[str, Any]:
    return {
        "imbalanced_brokers": list(result.imbalanced_brokers),
        "not_led": {str(b): v.not_led for b, v in result.brokers.items()},
        "ratios": {str(b): round(v.ratio, 4) for b, v in result.brokers.items()},
        "candidates": len(result.candidates),
    }


def _names(tps: Iterable[TopicPartition], limit: int = 50) -> list[str]:
    out = [str(tp) for tp in tps]
    return out[:limit] + ([f"... {len(out) - limit} more"] if len(out) > limit else [])


def _pending_election(access: ClusterAccess) -> bool:
    """Whether preferred elections handed to the controller are still to be carried out: the
    coordinator's ``/admin/preferred_replica_election`` (the Admin API elects at once)."""
    from rebalancer.access import CoordinatorAccess

    return isinstance(access, CoordinatorAccess) and \
        access.metadata.preferred_election() is not None


def run_preferred_election(*, job_id: str, coordinator: str | None = None,
                           bootstrap: str | None = None, command_config: str | None = None,
                           db: str | None = None, percentage: float = 10.0, wait: float = 30.0,
                           connect_timeout: float = 10.0) -> RunSummary:
    """Compute the leader imbalance and have the preferred replicas of its candidates elected.

    Through a coordinator, waits up to ``wait`` seconds for the controller to carry the
    elections out; through the Admin API they are done when ElectLeaders answers. Records the
    imbalance before and after. Refuses (a failed run, nothing written) when no controller is
    active; records 'nothing_to_do' when no broker is past ``percentage``.
    """

    def body(store: Store, run_id: int) -> _Result:
        access = _open(coordinator, bootstrap, command_config, connect_timeout)
        try:
            view = access.view(sizes=False)
            before = _imbalance(view, percentage)
            scores_before = _imbalance_scores(before)
            store.update_run(run_id, scores_before=scores_before)
            if not before.candidates:
                return _Result(outcome=RunOutcome.NOTHING_TO_DO,
                               summary="leaders are balanced",
                               fields={"scores_after": scores_before,
                                       "details": {"requested": []}})
            if _pending_election(access):
                return _Result(outcome=RunOutcome.NOTHING_TO_DO,
                               summary="a preferred election is already in progress",
                               fields={"details": {"requested": []}})
            if view.controller is None:
                raise JobFailed("no controller is active to carry out the election")
            _checkpoint()
            result = access.elect_preferred(before.candidates)
            requested = (*result.elected, *result.requested)
            details: dict[str, Any] = {"requested": _names(requested), "count": len(requested)}
            if result.failed:
                details["failed"] = {str(tp): why for tp, why in
                                     sorted(result.failed.items())[:50]}
            store.update_run(run_id, details=details)
            if result.failed and not requested:
                first = next(iter(sorted(result.failed.items())))
                raise JobFailed(f"no preferred election succeeded: {len(result.failed)} "
                                f"failed ({first[0]}: {first[1]})")
            deadline = time.monotonic() + wait
            while result.requested and _pending_election(access):
                if time.monotonic() >= deadline:
                    raise JobFailed(f"requested {len(requested)} preferred election(s) but the "
                                    f"controller had not carried them out after {wait:g}s")
                _wait(0.1, f"{len(requested)} election(s) requested")
            after = _imbalance(access.view(sizes=False), percentage)
            failed = f", {len(result.failed)} failed" if result.failed else ""
            return _Result(outcome=RunOutcome.SUCCEEDED,
                           summary=f"{len(requested)} preferred election(s) requested{failed}",
                           fields={"scores_after": _imbalance_scores(after)})
        finally:
            access.close()

    return _record(PREFERRED_ELECTION, job_id, db, body)


# --- rebalance -------------------------------------------------------------------------------


def goals_for(goal: str, brokers: Sequence[int] = (), *, count_slack: float | None = None,
              sizes: str | None = None, replication_factor: Mapping[str, int] | None = None,
              spelling: Spelling | None = None) -> tuple[Goal, ...]:
    """The planner's goals for a job's ``goal``, by the one goal parser (rebalancer.goals):
    "disk" evens bytes per broker (replica counts within ``count_slack``) and needs ``sizes``,
    the partition sizes file each run reads; the others plan with sizes too when the job has
    them (the fewest bytes moved); "replication-factor" sets the ``replication_factor`` of
    each topic named. JobSpecError, with the parser's line, for what does not go together."""
    from rebalancer.goals import JOB, GoalError, parse_goal

    try:
        return (parse_goal(goal, brokers=brokers, count_slack=count_slack,
                           replication_factor=replication_factor, sizes=sizes is not None,
                           spelling=spelling or JOB, allow_no_new_brokers=True),)
    except GoalError as exc:
        raise JobSpecError(str(exc)) from None


_STORE_STATUS = {"done": "done", "in progress": "in_progress", "failed": "failed"}


def _verify_statuses(report: Any) -> tuple[dict[tuple[str, int], str], dict[tuple[str, int], str]]:
    """verify_plan's per-partition states as the store's statuses, and the failure reasons."""
    statuses: dict[tuple[str, int], str] = {}
    reasons: dict[tuple[str, int], str] = {}
    for s in report.statuses:
        key = (s.partition.topic, s.partition.partition)
        statuses[key] = _STORE_STATUS.get(str(s.state.value), "failed")
        if s.reason:
            reasons[key] = s.reason
    return statuses, reasons


class _ProgressRecorder:
    """execute_plan's progress callback: honours STOP, and every ``interval`` seconds records
    which partitions are moving or done (verify_plan), leaving the rest pending."""

    def __init__(self, store: Store, execution_id: int, verify: Callable[[], Any],
                 interval: float = 2.0) -> None:
        self.store, self.execution_id, self.verify = store, execution_id, verify
        self.interval = interval
        self._last = time.monotonic()

    def __call__(self, progress: Any) -> None:
        _checkpoint()
        if time.monotonic() - self._last < self.interval:
            return
        self._last = time.monotonic()
        statuses, _ = _verify_statuses(self.verify())
        self.store.set_partition_status(  # not yet submitted reads as failed: keep it pending
            self.execution_id, {k: v for k, v in statuses.items() if v != "failed"})


def read_sizes(path: str) -> dict[tuple[str, int], int]:
    """A job's partition sizes file (``rebalancer.live_snapshot.parse_sizes``' format), read now;
    JobFailed with one line when it cannot be read or does not parse."""
    from rebalancer.live_snapshot import parse_sizes
    from rebalancer.snapshot import SnapshotError

    try:
        with open(path, "rb") as f:
            return parse_sizes(f.read())
    except OSError as exc:
        raise JobFailed(f"cannot read the sizes file {path}: {exc.strerror or exc}") from None
    except SnapshotError as exc:
        raise JobFailed(f"the sizes file {path} is not valid: {one_line(exc)}") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class Executed:
    """How the execution of a recorded plan ended: ``not_done`` the partitions not at their
    target; ``in_flight`` True when moves were left running in the cluster (a timeout), the
    execution then staying recorded as running."""

    execution_id: int
    not_done: tuple[str, ...]
    timed_out: bool
    in_flight: bool
    error: str | None


def execute_recorded(access: ClusterAccess, store: Store, run_id: int, plan: Any,
                     plan_id: int, *, job_id: str, max_concurrent_moves: int,
                     throttle: int | None = None, timeout: float | None = None,
                     poll_interval: float = 0.5, leave_running: bool = False) -> Executed:
    """Validate ``plan`` against the live cluster, record its execution, carry it out within
    the limits (throttled at ``throttle`` bytes per second, the throttles taken off once every
    move is done), record each partition's progress and the outcome. With ``leave_running``, a
    timeout that leaves moves in the cluster keeps the execution recorded as running (a later
    run finds it and does not start the same fix again)."""
    plan = access.validate(plan)
    ex = store.start_execution(plan_id, max_concurrent_moves=max_concurrent_moves)
    store.update_run(run_id, execution_id=ex.id)
    recorder = _ProgressRecorder(store, ex.id, lambda: access.verify(plan))
    try:
        result = access.execute(plan, max_concurrent_moves=max_concurrent_moves,
                                throttle=throttle, poll_interval=poll_interval, timeout=timeout,
                                progress=recorder, label=f"job {job_id} (plan {plan_id})")
    except (Interrupted, KeyboardInterrupt) as exc:
        who = "the user" if isinstance(exc, KeyboardInterrupt) else "the scheduler"
        _record_verify(store, ex.id, access.verify(plan), final=False)
        store.finish_execution(ex.id, "interrupted",
                               error=f"stopped by {who}; moves already submitted "
                                     f"continue in the controller")
        raise
    except Exception as exc:
        store.finish_execution(ex.id, "failed", error=one_line(exc))
        raise
    statuses = _record_verify(store, ex.id, access.verify(plan), failed=result.failed)
    not_done = tuple(sorted(f"{t}-{p}" for (t, p), s in statuses.items() if s != "done"))
    moves = len(plan.partitions)
    if not not_done:
        if throttle is not None:
            access.remove_throttles(sorted({r.topic for r in plan.partitions}))
        store.finish_execution(ex.id, "done")
        return Executed(execution_id=ex.id, not_done=(), timed_out=False, in_flight=False,
                        error=None)
    timed_out = " (timed out)" if result.timed_out else ""
    error = (f"{len(not_done)} of {moves} partition(s) not done{timed_out}: "
             f"{', '.join(not_done[:10])}{' ...' if len(not_done) > 10 else ''}")
    in_flight = bool(result.in_flight)
    if not (leave_running and in_flight):
        store.finish_execution(ex.id, "failed", error=error)
    return Executed(execution_id=ex.id, not_done=not_done, timed_out=result.timed_out,
                    in_flight=in_flight, error=error)


def _snapshot(view: ClusterView, goal: str, brokers: Sequence[int],
              sizes: Mapping[tuple[str, int], int] | None, *, after: bool = False) -> Any:
    """The planner's snapshot of ``view`` for ``goal``; ``after`` a drain, a broker it emptied
    that is gone is no longer in the cluster at all (nothing left to decommission)."""
    if after and goal == "decommission":
        brokers = [b for b in brokers if b in view.brokers or b in view.offline_brokers]
    return view.snapshot(decommission=tuple(brokers) if goal == "decommission" else (),
                         new_brokers=tuple(brokers) if goal == "add-brokers" else (),
                         sizes=sizes)


def run_rebalance(*, job_id: str, coordinator: str | None = None, bootstrap: str | None = None,
                  command_config: str | None = None, db: str | None = None,
                  goal: str = "balance", brokers: Sequence[int] = (),
                  count_slack: float | None = None, sizes: str | None = None,
                  replication_factor: Mapping[str, int] | None = None,
                  max_concurrent_moves: int = 50, throttle: int | None = None,
                  dry_run: bool = False, engine: str = "local",
                  seed: int = 0, spark_master: str = "local[*]", timeout: float | None = None,
                  poll_interval: float = 0.5, connect_timeout: float = 10.0) -> RunSummary:
    """Snapshot the live cluster (with the partition sizes the cluster reports, or those of the
    ``sizes`` file, read at each run, so the planner moves the fewest bytes and goal "disk"
    evens them), plan for ``goal``, record the plan, execute it with at most
    ``max_concurrent_moves`` partitions moving at once (throttled at ``throttle`` bytes per
    second), verify, and record the outcome with the cluster's scores before and after.
    ``dry_run`` records the plan and stops there. Goal "replication-factor" sets each topic of
    ``replication_factor`` to its count, as ``reassign generate --goal replication-factor``."""

    def body(store: Store, run_id: int) -> _Result:
        from rebalancer.engines import plan_reassignment
        from rebalancer.plan import score_plan
        from rebalancer.planner.goals import BalanceDisk

        file_sizes = read_sizes(sizes) if sizes is not None else None
        access = _open(coordinator, bootstrap, command_config, connect_timeout)
        try:
            if access.in_progress():
                raise JobFailed("a reassignment is already in progress; not planning on a "
                                "cluster that is moving")
            view = access.view(sizes=file_sizes is None)
            known = file_sizes is not None or view.sizes_known
            goals = goals_for(goal, brokers, count_slack=count_slack,
                              sizes="known" if known else None,
                              replication_factor=replication_factor)
            snap = _snapshot(view, goal, brokers, file_sizes)
            before = scores_json(score_plan(snap))
            store.update_run(run_id, scores_before=before)
            _checkpoint()
            plan = plan_reassignment(snap, goals, engine=engine, seed=seed,  # type: ignore[arg-type]
                                     master=spark_master)
            projected = scores_json(score_plan(snap, plan))
            record = store.add_plan(
                snapshot_digest=snapshot_digest(snap), goal=goal, scores=projected,
                plan=plan.as_dict(),
                options={"job_id": job_id, "engine": engine, "seed": seed,
                         "brokers": list(brokers), "max_concurrent_moves": max_concurrent_moves,
                         "dry_run": dry_run, **({"count_slack": goals[0].count_slack}
                                                if isinstance(goals[0], BalanceDisk) else {}),
                         **({"replication_factor": dict(replication_factor)}
                            if replication_factor else {}),
                         "sizes": sizes, "cluster": access.description})
            moves = len(plan.partitions)
            store.update_run(run_id, plan_id=record.id,
                             details={"moves": moves, "projected": projected})
            if not moves:
                return _Result(outcome=RunOutcome.NOTHING_TO_DO,
                               summary="the cluster is already balanced",
                               fields={"scores_after": before})
            if dry_run:
                return _Result(outcome=RunOutcome.DRY_RUN,
                               summary=f"planned {moves} move(s) (plan {record.id}), not run")
            _checkpoint()
            done = execute_recorded(access, store, run_id, plan, record.id, job_id=job_id,
                                    max_concurrent_moves=max_concurrent_moves,
                                    throttle=throttle, timeout=timeout,
                                    poll_interval=poll_interval)
            after_view = access.view(sizes=file_sizes is None)
            after = scores_json(score_plan(_snapshot(after_view, goal, brokers, file_sizes,
                                                      after=True)))
            if done.error is not None:
                return _Result(outcome=RunOutcome.FAILED, summary="failed", error=done.error,
                               fields={"scores_after": after})
            return _Result(outcome=RunOutcome.SUCCEEDED,
                           summary=f"moved {moves} partition(s) (plan {record.id})",
                           fields={"scores_after": after})
        finally:
            access.close()

    return _record(REBALANCE, job_id, db, body)


def _record_verify(store: Store, execution_id: int, report: Any, *, final: bool = True,
                   failed: Mapping[Any, str] | None = None) -> dict[tuple[str, int], str]:
    """Record a verify report; with ``final`` False, partitions not moving stay pending."""
    statuses, reasons = _verify_statuses(report)
    for tp, why in (failed or {}).items():
        key = (tp.topic, tp.partition)
        if statuses.get(key) == "failed":
            reasons[key] = why  # execute_plan knows better why it gave up on it
    if not final:
        statuses = {k: v for k, v in statuses.items() if v != "failed"}
    store.set_partition_status(execution_id, statuses, reasons=reasons)
    return statuses
