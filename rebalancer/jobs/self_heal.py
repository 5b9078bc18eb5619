"""The self-healing job: each run reads the live cluster, detects anomalies
(rebalancer.anomalies), decides, and, once an anomaly has lasted the grace period, fixes it:
drains a broker that is gone, rebalances, or moves bytes off full disks.

Everything is recorded in the store: the anomalies (first and last seen, figures), the decision
of every run (act, wait, skip, nothing to do) with its reason, and the fix's plan and execution.
A fix left running (its run timed out while moves were still going) keeps its execution recorded
as running: the next run sees it, and the moves in progress, and does not start the same fix
again; once the moves have ended it records how the fix ended and looks afresh.

Times are the database's (``Store.now``), so schedulers on hosts whose clocks differ agree on
how long an anomaly has lasted.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from rebalancer.anomalies import (
    Action,
    Anomaly,
    AnomalyKind,
    Decision,
    Thresholds,
    Verdict,
    decide,
    detect,
)
from rebalancer.jobs.tasks import (
    SELF_HEAL,
    JobFailed,
    RunSummary,
    _checkpoint,
    _open,
    _record,
    _Result,
    _snapshot,
    execute_recorded,
    goals_for,
)
from rebalancer.snapshot import SnapshotError
from rebalancer.store import RunOutcome, SeenAnomaly, Store, scores_json, snapshot_digest

if TYPE_CHECKING:
    from coordinator.codecs import TopicPartition
    from rebalancer.access import ClusterAccess, MovingPartition

log = logging.getLogger(__name__)

GOAL_OF = {Action.REMOVE_BROKERS: "decommission", Action.REBALANCE: "balance",
           Action.DISK: "disk"}
"""The planner's goal for each fix."""


def _previous(store: Store, job_id: str) -> list[Anomaly]:
    known = {k.value for k in AnomalyKind}
    return [Anomaly(kind=AnomalyKind(r.kind), subject=r.subject, first_seen=r.first_seen,
                    last_seen=r.last_seen, figures=r.figures)
            for r in store.open_anomalies(job_id) if r.kind in known]


def _settle_fixes(store: Store, access: ClusterAccess, job_id: str,
                  moving: dict[TopicPartition, MovingPartition]) -> str | None:
    """What says a fix of this job is still running (None: none is). A fix recorded as
    running whose moves have all ended is closed now: each partition at its target is done."""
    running = store.running_fixes(job_id)
    if not running:
        return None
    if moving:
        fix = running[-1]
        return (f"{fix.action} (plan {fix.plan_id}, execution {fix.execution_id}) with "
                f"{len(moving)} partition(s) still moving")
    current = {(p.topic, p.partition): p for p in access.view(sizes=False).partitions}
    for fix in running:
        assert fix.execution_id is not None
        ex = store.get_execution(fix.execution_id)
        if ex is None:
            continue
        statuses: dict[tuple[str, int], str] = {}
        for part in ex.partitions:
            live = current.get((part.topic, part.partition))
            at_target = (live is not None and not live.moving
                         and tuple(live.replicas) == tuple(part.target_replicas))
            statuses[(part.topic, part.partition)] = "done" if at_target else "failed"
        missed = sorted(f"{t}-{p}" for (t, p), s in statuses.items() if s != "done")
        store.set_partition_status(ex.id, statuses, reasons={
            k: "not at its target when the moves ended" for k, s in statuses.items()
            if s != "done"})
        throttle = (fix.figures or {}).get("throttle")
        if not missed and throttle:
            access.remove_throttles(sorted({p.topic for p in ex.partitions}))
        store.finish_execution(ex.id, "done" if not missed else "failed",
                               error=None if not missed else
                               f"{len(missed)} partition(s) not at their target when the moves "
                               f"ended: {', '.join(missed[:10])}")
    return None


def _shown(anomalies: Sequence[Anomaly], now: datetime) -> list[dict[str, Any]]:
    return [{"kind": a.kind.value, "subject": a.subject, "age": round(a.age(now), 1),
             "figures": dict(a.figures)} for a in anomalies[:50]]


def run_self_heal(*, job_id: str, grace: float, coordinator: str | None = None,
                  bootstrap: str | None = None, command_config: str | None = None,
                  db: str | None = None, replica_spread: float | None = None,
                  leader_spread: float | None = None, disk_max_over_mean: float | None = None,
                  rack_violations: bool = True, disk_usage: float | None = None,
                  max_concurrent_moves: int = 50, throttle: int | None = None,
                  timeout: float | None = None, poll_interval: float = 0.5,
                  engine: str = "local", seed: int = 0,
                  connect_timeout: float = 10.0) -> RunSummary:
    """One look at the cluster: record the anomalies, decide, and act on those older than
    ``grace`` seconds (the thresholds: rebalancer.anomalies.Thresholds). The fix is planned by
    the planner, executed within ``max_concurrent_moves`` (throttled at ``throttle`` bytes per
    second), and followed for ``timeout`` seconds (None: until it ends); moves still going
    then are left to the cluster and followed by the next run."""
    thresholds = Thresholds(grace=grace, replica_spread=replica_spread,
                            leader_spread=leader_spread, disk_max_over_mean=disk_max_over_mean,
                            rack_violations=rack_violations, disk_usage=disk_usage)

    def body(store: Store, run_id: int) -> _Result:
        access = _open(coordinator, bootstrap, command_config, connect_timeout)
        try:
            moving = access.in_progress()
            fix_running = _settle_fixes(store, access, job_id, moving)
            view = access.view()
            now = store.now()
            if fix_running is None:
                found = detect(view, thresholds, _previous(store, job_id), now)
                records = store.record_anomalies(job_id, [
                    SeenAnomaly(kind=a.kind.value, subject=a.subject, first_seen=a.first_seen,
                                last_seen=a.last_seen, figures=a.figures) for a in found],
                    now=now)
            else:  # the view shows the fix's targets: what it fixes stays as last seen
                records = store.open_anomalies(job_id)
                found = tuple(_previous(store, job_id))
            ids = {(r.kind, r.subject): r.id for r in records}
            decision = decide(found, thresholds, now, fix_running=fix_running,
                              moving=len(moving))
            details: dict[str, Any] = {
                "anomalies": _shown(found, now), "decision": decision.verdict.value,
                "reason": decision.reason,
                **({"action": decision.action.value} if decision.action else {}),
                **({"brokers": list(decision.brokers)} if decision.brokers else {})}
            store.update_run(run_id, details=details)
            anomaly_ids = [ids[a.key] for a in decision.anomalies if a.key in ids]
            if decision.verdict is not Verdict.ACT:
                store.add_decision(run_id=run_id, job_id=job_id,
                                   decision=decision.verdict.value, reason=decision.reason,
                                   anomalies=anomaly_ids)
                return _Result(outcome=RunOutcome.NOTHING_TO_DO, summary=decision.reason,
                               fields={"details": details})
            _checkpoint()
            return _fix(store, access, run_id, view, decision, anomaly_ids, details)
        finally:
            access.close()

    def _fix(store: Store, access: ClusterAccess, run_id: int, view: Any, decision: Decision,
             anomaly_ids: list[int], details: dict[str, Any]) -> _Result:
        from rebalancer.engines import plan_reassignment
        from rebalancer.plan import score_plan

        assert decision.action is not None
        goal = GOAL_OF[decision.action]
        brokers = decision.brokers
        if goal == "disk" and not view.sizes_known:
            raise JobFailed("the cluster reports no replica sizes: the disk goal cannot be "
                            "planned (reach it by bootstrap servers)")
        snap = _snapshot(view, goal, brokers, None)
        before = scores_json(score_plan(snap))
        goals = goals_for(goal, brokers, sizes="reported" if view.sizes_known else None)
        plan = plan_reassignment(snap, goals, engine=engine, seed=seed)  # type: ignore[arg-type]
        projected = scores_json(score_plan(snap, plan))
        moves = len(plan.partitions)
        record = store.add_plan(
            snapshot_digest=snapshot_digest(snap), goal=goal, scores=projected,
            plan=plan.as_dict(),
            options={"job_id": job_id, "self_heal": decision.action.value,
                     "brokers": list(brokers), "max_concurrent_moves": max_concurrent_moves,
                     "engine": engine, "seed": seed, "cluster": access.description})
        figures = {"moves": moves, "replicas_moved": projected.get("replicas_moved"),
                   "bytes_moved": projected.get("bytes_moved"), "throttle": throttle}
        made = store.add_decision(run_id=run_id, job_id=job_id, decision=Verdict.ACT.value,
                                  action=decision.action.value, reason=decision.reason,
                                  anomalies=anomaly_ids, plan_id=record.id, figures=figures)
        details.update(moves=moves, plan_id=record.id, projected=projected)
        store.update_run(run_id, plan_id=record.id, scores_before=before, details=details)
        if not moves:
            return _Result(outcome=RunOutcome.NOTHING_TO_DO,
                           summary=f"{decision.reason}; the plan moves nothing",
                           fields={"scores_after": before})
        try:
            done = execute_recorded(access, store, run_id, plan, record.id, job_id=job_id,
                                    max_concurrent_moves=max_concurrent_moves,
                                    throttle=throttle, timeout=timeout,
                                    poll_interval=poll_interval, leave_running=True)
        finally:
            run = store.get_run(run_id)
            if run is not None and run.execution_id is not None:
                store.update_decision(made.id, execution_id=run.execution_id)
        try:
            after: dict[str, Any] | None = scores_json(score_plan(
                _snapshot(access.view(), goal, brokers, None, after=True)))
        except SnapshotError as exc:  # the cluster changed again meanwhile (another broker gone)
            log.info("self-heal job %s: no scores after the fix: %s", job_id, exc)
            after = None
        if done.error is not None:
            left = "; the moves continue, the next run follows them" if done.in_flight else ""
            return _Result(outcome=RunOutcome.FAILED, summary="failed",
                           error=f"{done.error}{left}", fields={"scores_after": after})
        return _Result(outcome=RunOutcome.SUCCEEDED,
                       summary=f"{decision.action.value}: moved {moves} partition(s) "
                               f"(plan {record.id})",
                       fields={"scores_after": after})

    return _record(SELF_HEAL, job_id, db, body)
