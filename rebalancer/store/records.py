"""The store's values: its errors, the statuses and outcomes it records, and the frozen records
it hands out (no ORM object escapes), with the canonical JSON and digests they are keyed by."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from rebalancer.store.models import ExecutionRow, JobRunRow, PlanRow


class StoreError(RuntimeError):
    """The store cannot be opened or used: one line saying why."""


class JobExists(StoreError):
    """A job with that id is already stored."""


class RunConflict(StoreError):
    """The job is running already (its run holds the job's lock): nothing was started."""

    def __init__(self, holder: JobRun) -> None:
        started = holder.started_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
        super().__init__(f"job {holder.job_id} is already running: run {holder.id} on "
                         f"{holder.runner or 'an unknown process'}, started {started} UTC; "
                         f"not started again")
        self.holder = holder


class ExecutionStatus(StrEnum):
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    CANCELLED = "cancelled"


class MoveProgress(StrEnum):
    """Where one partition's move of an execution stands, as the store records it."""

    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    DONE = "done"
    FAILED = "failed"


class RunOutcome(StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    NOTHING_TO_DO = "nothing_to_do"
    DRY_RUN = "dry_run"
    FAILED = "failed"
    INTERRUPTED = "interrupted"


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanRecord:
    id: int
    created_at: datetime
    snapshot_digest: str
    goal: str
    options: Mapping[str, Any]
    scores: Mapping[str, Any]
    plan: Mapping[str, Any]
    moves: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionProgress:
    topic: str
    partition: int
    target_replicas: tuple[int, ...]
    status: MoveProgress
    updated_at: datetime
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionRecord:
    id: int
    plan_id: int
    started_at: datetime
    finished_at: datetime | None
    status: ExecutionStatus
    max_concurrent_moves: int
    error: str | None
    partitions: tuple[PartitionProgress, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRun:
    id: int
    job_id: str
    kind: str
    started_at: datetime
    ended_at: datetime | None
    outcome: RunOutcome
    error: str | None
    scores_before: Mapping[str, Any] | None
    scores_after: Mapping[str, Any] | None
    details: Mapping[str, Any] | None
    plan_id: int | None
    execution_id: int | None
    runner: str | None
    heartbeat_at: datetime | None = None
    """When the running process last said it is alive, by the database's clock."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredJob:
    """A row of ``partctl_jobs`` exactly as read: nothing in it is trusted yet. The fields are
    whatever the database returned (a damaged or crafted row may hold anything, even in a typed
    column on SQLite); ``rebalancer.jobs`` checks them before a job is listed as runnable, and
    never runs one that fails."""

    id: Any
    kind: Any
    func_ref: Any
    schedule: Any
    """The schedule's JSON text."""
    arguments: Any
    """The arguments' JSON text."""
    next_run_time: Any
    """Seconds since the epoch (UTC), or None."""
    problem: Any


def canonical_json(doc: Any) -> str:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def snapshot_digest(snapshot: Any) -> str:
    """sha256 of the snapshot's canonical JSON: brokers, partitions (with sizes), decommission
    and new brokers; free-form ``meta`` (timestamps, sources) is left out so that the same
    cluster gives the same digest."""
    from rebalancer.snapshot import snapshot_to_dict

    doc = snapshot_to_dict(snapshot)
    doc["meta"] = {"new_brokers": doc["meta"].get("new_brokers", [])}
    return hashlib.sha256(canonical_json(doc).encode()).hexdigest()


def scores_json(scores: Any) -> dict[str, Any]:
    """A Scores value (or any dataclass) as plain JSON-able data."""
    if dataclasses.is_dataclass(scores) and not isinstance(scores, type):
        return dataclasses.asdict(scores)
    return dict(scores)


def plan_record(row: PlanRow) -> PlanRecord:
    return PlanRecord(id=row.id, created_at=row.created_at, snapshot_digest=row.snapshot_digest,
                      goal=row.goal, options=row.options, scores=row.scores, plan=row.plan,
                      moves=row.moves)


def execution_record(row: ExecutionRow) -> ExecutionRecord:
    return ExecutionRecord(
        id=row.id, plan_id=row.plan_id, started_at=row.started_at, finished_at=row.finished_at,
        status=ExecutionStatus(row.status), max_concurrent_moves=row.max_concurrent_moves,
        error=row.error,
        partitions=tuple(PartitionProgress(topic=p.topic, partition=p.partition,
                                           target_replicas=tuple(p.target_replicas),
                                           status=MoveProgress(p.status),
                                           updated_at=p.updated_at, reason=p.reason)
                         for p in row.partitions))


def run_record(row: JobRunRow) -> JobRun:
    return JobRun(id=row.id, job_id=row.job_id, kind=row.kind, started_at=row.started_at,
                  ended_at=row.ended_at, outcome=RunOutcome(row.outcome), error=row.error,
                  scores_before=row.scores_before, scores_after=row.scores_after,
                  details=row.details, plan_id=row.plan_id, execution_id=row.execution_id,
                  runner=row.runner, heartbeat_at=row.heartbeat_at)
