"""The store's repository API: what jobs and the CLI read and write, as frozen records.

``Store.open(url)`` connects (SQLite by default, any SQLAlchemy URL), upgrades the schema to the
newest migration on first use, and hands out plain values: no ORM object or session escapes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import column, delete, func, insert, select, table, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session, selectinload, sessionmaker

from rebalancer.store import migrate
from rebalancer.store.engine import create_store_engine, first_line, sql_error
from rebalancer.store.healing import HealingRecords
from rebalancer.store.models import (
    ExecutionPartitionRow,
    ExecutionRow,
    JobRow,
    JobRunRow,
    PlanRow,
    utcnow,
)
from rebalancer.store.records import (
    ExecutionRecord,
    ExecutionStatus,
    JobExists,
    JobRun,
    MoveProgress,
    PlanRecord,
    RunConflict,
    RunOutcome,
    StoredJob,
    StoreError,
    canonical_json,
    execution_record,
    plan_record,
    run_record,
)
from rebalancer.store.urls import display_url, resolve_db_url

_upgraded: set[str] = set()
_upgraded_lock = threading.Lock()


class Store(HealingRecords):
    """Plans, executions with per-partition progress, job runs, and self-healing's anomalies
    and decisions (rebalancer.store.healing), in one SQL database."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    @classmethod
    def open(cls, url: str | None = None, *, upgrade: bool = True,
             create: bool = False) -> Store:
        """Open the store at ``url`` (default: $PARTCTL_DB, else the SQLite file), upgrading
        its schema to the newest migration unless ``upgrade`` is False. A bare path must name
        an existing SQLite file unless ``create`` is set (see resolve_db_url)."""
        resolved = resolve_db_url(url, create=create)
        engine = create_store_engine(resolved)
        store = cls(engine)
        if upgrade:
            try:
                store.upgrade(only_if_needed=True)
            except BaseException:
                engine.dispose()
                raise
        return store

    @property
    def url(self) -> str:
        return self.engine.url.render_as_string(hide_password=False)

    def __repr__(self) -> str:
        return f"Store({display_url(self.url)!r})"

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- schema ----------------------------------------------------------------------------

    def upgrade(self, revision: str = "head", *, only_if_needed: bool = False) -> str | None:
        """Migrate to ``revision``; return the revision the database is at afterwards."""
        key = self.url
        try:
            if only_if_needed and revision == "head":
                with _upgraded_lock:
                    if key in _upgraded:
                        return migrate.head_revision()
                migrate.ensure_head(self.engine)
                with _upgraded_lock:
                    _upgraded.add(key)
            else:
                migrate.upgrade(self.engine, revision)
            return migrate.current_revision(self.engine)
        except FileNotFoundError as exc:
            raise StoreError(str(exc)) from None
        except SQLAlchemyError as exc:
            raise sql_error(key, exc) from None
        except Exception as exc:
            if type(exc).__name__ == "CommandError":  # alembic: e.g. an unknown revision
                raise StoreError(f"store {display_url(key)}: {exc} (is the database newer "
                                 f"than this partctl?)") from None
            raise

    def downgrade(self, revision: str) -> str | None:
        with _upgraded_lock:
            _upgraded.discard(self.url)
        try:
            migrate.downgrade(self.engine, revision)
        except SQLAlchemyError as exc:
            raise StoreError(f"store {display_url(self.url)}: {first_line(exc)}") from None
        except Exception as exc:
            if type(exc).__name__ == "CommandError":
                raise StoreError(f"store {display_url(self.url)}: {exc}") from None
            raise
        return migrate.current_revision(self.engine)

    def revision(self) -> str | None:
        """The database's migration revision, None when it has none yet. The first call to
        reach the database: one that cannot be reached (a server that refuses) is a
        StoreError, as when upgrading."""
        try:
            return migrate.current_revision(self.engine)
        except SQLAlchemyError as exc:
            raise sql_error(self.url, exc) from None

    # --- sessions --------------------------------------------------------------------------

    @contextmanager
    def _session(self) -> Iterator[Session]:
        with self._sessions.begin() as session:
            yield session

    # --- plans -----------------------------------------------------------------------------

    def add_plan(self, *, snapshot_digest: str, goal: str, options: Mapping[str, Any],
                 scores: Mapping[str, Any], plan: Mapping[str, Any]) -> PlanRecord:
        partitions = plan.get("partitions", [])
        row = PlanRow(created_at=utcnow(), snapshot_digest=snapshot_digest, goal=goal,
                      options=dict(options), scores=dict(scores), plan=dict(plan),
                      moves=len(partitions))
        with self._session() as s:
            s.add(row)
            s.flush()
            return plan_record(row)

    def get_plan(self, plan_id: int) -> PlanRecord | None:
        with self._session() as s:
            row = s.get(PlanRow, plan_id)
            return None if row is None else plan_record(row)

    def plans(self, *, limit: int = 20, snapshot_digest: str | None = None
              ) -> list[PlanRecord]:
        """Newest first."""
        q = select(PlanRow).order_by(PlanRow.id.desc()).limit(limit)
        if snapshot_digest is not None:
            q = q.where(PlanRow.snapshot_digest == snapshot_digest)
        with self._session() as s:
            return [plan_record(r) for r in s.scalars(q)]

    # --- executions ------------------------------------------------------------------------

    def start_execution(self, plan_id: int, *, max_concurrent_moves: int,
                        targets: Iterable[tuple[str, int, Sequence[int]]] | None = None
                        ) -> ExecutionRecord:
        """Record an execution of ``plan_id``; one pending progress row per partition
        (``targets`` as (topic, partition, replicas); default: the stored plan's)."""
        now = utcnow()
        with self._session() as s:
            plan = s.get(PlanRow, plan_id)
            if plan is None:
                raise StoreError(f"no plan {plan_id} in the store")
            if targets is None:
                targets = [(p["topic"], p["partition"], p["replicas"])
                           for p in plan.plan.get("partitions", [])]
            row = ExecutionRow(plan_id=plan_id, started_at=now, finished_at=None,
                               status=ExecutionStatus.RUNNING.value,
                               max_concurrent_moves=max_concurrent_moves, error=None)
            row.partitions = [
                ExecutionPartitionRow(topic=t, partition=p, target_replicas=list(r),
                                      status=MoveProgress.PENDING.value, reason=None,
                                      updated_at=now)
                for t, p, r in targets]
            s.add(row)
            s.flush()
            return execution_record(row)

    def set_partition_status(self, execution_id: int,
                             statuses: Mapping[tuple[str, int], MoveProgress | str], *,
                             reasons: Mapping[tuple[str, int], str] | None = None) -> int:
        """Update progress rows whose status (or failure reason) changed; returns how many
        changed. Keys are (topic, partition); keys not in the execution are ignored."""
        if not statuses:
            return 0
        reasons = reasons or {}
        now = utcnow()
        changed = 0
        with self._session() as s:
            rows = s.scalars(select(ExecutionPartitionRow).where(
                ExecutionPartitionRow.execution_id == execution_id))
            for row in rows:
                key = (row.topic, row.partition)
                new = statuses.get(key)
                if new is None:
                    continue
                status = MoveProgress(new).value
                reason = reasons.get(key) if status == MoveProgress.FAILED.value else None
                if row.status != status or row.reason != reason:
                    row.status, row.reason, row.updated_at = status, reason, now
                    changed += 1
        return changed

    def finish_execution(self, execution_id: int, status: ExecutionStatus | str, *,
                         error: str | None = None) -> ExecutionRecord:
        with self._session() as s:
            row = s.get(ExecutionRow, execution_id,
                        options=[selectinload(ExecutionRow.partitions)])
            if row is None:
                raise StoreError(f"no execution {execution_id} in the store")
            row.status = ExecutionStatus(status).value
            row.finished_at = utcnow()
            row.error = error
            s.flush()
            return execution_record(row)

    def get_execution(self, execution_id: int) -> ExecutionRecord | None:
        with self._session() as s:
            row = s.get(ExecutionRow, execution_id,
                        options=[selectinload(ExecutionRow.partitions)])
            return None if row is None else execution_record(row)

    def executions(self, *, plan_id: int | None = None, limit: int = 20
                   ) -> list[ExecutionRecord]:
        q = (select(ExecutionRow).options(selectinload(ExecutionRow.partitions))
             .order_by(ExecutionRow.id.desc()).limit(limit))
        if plan_id is not None:
            q = q.where(ExecutionRow.plan_id == plan_id)
        with self._session() as s:
            return [execution_record(r) for r in s.scalars(q)]

    # --- job runs --------------------------------------------------------------------------

    def now(self) -> datetime:
        """The database's clock (UTC): heartbeats are written and judged by it, so processes
        on hosts whose clocks differ agree on how old a heartbeat is."""
        with self._session() as s:
            return _aware(s.execute(select(func.now())).scalar_one())

    def start_run(self, job_id: str, kind: str, *, runner: str | None = None) -> JobRun:
        """Record a run of ``job_id`` as running: RunConflict if one is running already."""
        return self.claim_run(job_id, kind, runner=runner, is_gone=lambda _run, _now: None)

    def claim_run(self, job_id: str, kind: str, *, runner: str | None,
                  is_gone: Callable[[JobRun, datetime], str | None]) -> JobRun:
        """Take the job's lock by recording a run of it as running, or RunConflict naming the
        run that holds it. A run still recorded as running whose process ``is_gone`` (it
        returns why, given the run and the database's time) is first closed as interrupted,
        with its execution; the one-running-run-per-job index settles two claims at once."""
        for _ in range(5):
            holder: JobRun | None = None
            try:
                with self._session() as s:
                    now = _aware(s.execute(select(func.now())).scalar_one())
                    running = s.scalars(select(JobRunRow).where(
                        JobRunRow.job_id == job_id,
                        JobRunRow.outcome == RunOutcome.RUNNING.value)).all()
                    for row in running:
                        why = is_gone(run_record(row), now)
                        if why is None:
                            holder = run_record(row)
                            break
                        self._interrupt(s, [row.id], why)
                    if holder is None:
                        row = JobRunRow(job_id=job_id, kind=kind, started_at=utcnow(),
                                        ended_at=None, outcome=RunOutcome.RUNNING.value,
                                        error=None, scores_before=None, scores_after=None,
                                        details=None, plan_id=None, execution_id=None,
                                        runner=runner, heartbeat_at=func.now())
                        s.add(row)
                        s.flush()
                        s.refresh(row)
                        return run_record(row)
            except IntegrityError:
                continue  # another process took it between our read and our write: look again
            raise RunConflict(holder)
        raise StoreError(f"could not start a run of job {job_id}: its lock kept changing hands")

    def beat(self, run_id: int) -> bool:
        """Record that the run's process is alive; False when the run is no longer running
        (another process closed it, taking its process for dead)."""
        with self._session() as s:
            result = s.execute(update(JobRunRow).where(
                JobRunRow.id == run_id, JobRunRow.outcome == RunOutcome.RUNNING.value
            ).values(heartbeat_at=func.now()))
            return bool(getattr(result, "rowcount", 0))

    def update_run(self, run_id: int, **fields: Any) -> JobRun:
        """Set fields of a run in progress (plan_id, execution_id, scores_before, details)."""
        allowed = {"plan_id", "execution_id", "scores_before", "scores_after", "details"}
        unknown = set(fields) - allowed
        if unknown:
            raise TypeError(f"cannot update {sorted(unknown)} of a job run")
        with self._session() as s:
            row = s.get(JobRunRow, run_id)
            if row is None:
                raise StoreError(f"no job run {run_id} in the store")
            for name, value in fields.items():
                setattr(row, name, value)
            s.flush()
            return run_record(row)

    def finish_run(self, run_id: int, outcome: RunOutcome | str, *, error: str | None = None,
                   **fields: Any) -> JobRun:
        """Close a run with its outcome; ``fields`` as for update_run."""
        if fields:
            self.update_run(run_id, **fields)
        with self._session() as s:
            row = s.get(JobRunRow, run_id)
            if row is None:
                raise StoreError(f"no job run {run_id} in the store")
            row.outcome = RunOutcome(outcome).value
            row.error = error
            row.ended_at = utcnow()
            s.flush()
            return run_record(row)

    def get_run(self, run_id: int) -> JobRun | None:
        with self._session() as s:
            row = s.get(JobRunRow, run_id)
            return None if row is None else run_record(row)

    def runs(self, *, job_id: str | None = None, limit: int | None = 20,
             outcome: RunOutcome | str | None = None) -> list[JobRun]:
        """Newest first."""
        q = select(JobRunRow).order_by(JobRunRow.started_at.desc(), JobRunRow.id.desc())
        if job_id is not None:
            q = q.where(JobRunRow.job_id == job_id)
        if outcome is not None:
            q = q.where(JobRunRow.outcome == RunOutcome(outcome).value)
        if limit is not None:
            q = q.limit(limit)
        with self._session() as s:
            return [run_record(r) for r in s.scalars(q)]

    # --- jobs ------------------------------------------------------------------------------
    #
    # Read with Core selects of plain columns and no type processing beyond the driver's, so a
    # damaged value in one row cannot make a whole read fail: it reaches the checker as is.

    def add_job(self, *, job_id: str, kind: str, func_ref: str, schedule: Mapping[str, Any],
                arguments: Mapping[str, Any], next_run_time: float | None) -> None:
        """Store a new job; JobExists if the id is taken."""
        try:
            with self._session() as s:
                s.execute(insert(JobRow).values(
                    id=job_id, kind=kind, func_ref=func_ref, schedule=canonical_json(schedule),
                    arguments=canonical_json(arguments), next_run_time=next_run_time,
                    problem=None))
        except IntegrityError:
            raise JobExists(f"a job with id {job_id!r} already exists") from None

    def update_job(self, job_id: str, *, kind: str, func_ref: str,
                   schedule: Mapping[str, Any], arguments: Mapping[str, Any],
                   next_run_time: float | None) -> bool:
        """Replace a job's contents; False if there is no such job."""
        with self._session() as s:
            result = s.execute(update(JobRow).where(JobRow.id == job_id).values(
                kind=kind, func_ref=func_ref, schedule=canonical_json(schedule),
                arguments=canonical_json(arguments), next_run_time=next_run_time,
                problem=None))
            return bool(getattr(result, "rowcount", 0))

    def get_job(self, job_id: str) -> StoredJob | None:
        with self._session() as s:
            row = s.execute(select(*_JOB_COLUMNS).where(_RAW_JOBS.c.id == job_id)).first()
            return None if row is None else _stored_job(row)

    def jobs(self, *, due_by: float | None = None, scheduled: bool = False
             ) -> list[StoredJob]:
        """Every job; with ``scheduled``, those with a next run time, soonest first; with
        ``due_by`` (seconds since the epoch), those due by then, soonest first."""
        raw = _RAW_JOBS.c
        q = select(*_JOB_COLUMNS)
        if due_by is not None:
            q = q.where(raw.next_run_time <= due_by)
        if scheduled or due_by is not None:
            q = q.where(raw.next_run_time.is_not(None)).order_by(raw.next_run_time, raw.id)
        else:
            q = q.order_by(raw.id)
        with self._session() as s:
            return [_stored_job(row) for row in s.execute(q)]

    def remove_job(self, job_id: str) -> bool:
        """Delete a job (its runs stay); False if there is no such job."""
        with self._session() as s:
            result = s.execute(delete(JobRow).where(JobRow.id == job_id))
            return bool(getattr(result, "rowcount", 0))

    def remove_all_jobs(self) -> int:
        with self._session() as s:
            return int(getattr(s.execute(delete(JobRow)), "rowcount", 0) or 0)

    def interrupt_runs(self, run_ids: Iterable[int], error: str) -> int:
        """Mark runs still recorded as running as interrupted (their process is gone), and the
        executions they were carrying out; returns how many runs changed."""
        ids = list(run_ids)
        if not ids:
            return 0
        with self._session() as s:
            return self._interrupt(s, ids, error)

    @staticmethod
    def _interrupt(s: Session, run_ids: list[int], error: str) -> int:
        now = utcnow()
        rows = s.scalars(select(JobRunRow).where(
            JobRunRow.id.in_(run_ids), JobRunRow.outcome == RunOutcome.RUNNING.value)).all()
        for row in rows:
            row.outcome, row.error, row.ended_at = RunOutcome.INTERRUPTED.value, error, now
        executions = [row.execution_id for row in rows if row.execution_id is not None]
        if executions:
            s.execute(update(ExecutionRow).where(
                ExecutionRow.id.in_(executions),
                ExecutionRow.status == ExecutionStatus.RUNNING.value,
            ).values(status=ExecutionStatus.INTERRUPTED.value, finished_at=now,
                     error=f"{error}; moves already submitted continue in the controller "
                           f"(`partctl reassign verify` follows them); partition progress is "
                           f"as last recorded"))
        s.flush()
        return len(rows)


_RAW_JOBS = table("partctl_jobs", *(column(name) for name in (
    "id", "kind", "func_ref", "schedule", "arguments", "next_run_time", "problem")))
"""partctl_jobs without column types, so values come back as the driver gives them (a typed
Float column would turn a damaged value into an error for the whole read)."""
_JOB_COLUMNS = tuple(_RAW_JOBS.c)


def _stored_job(row: Any) -> StoredJob:
    return StoredJob(id=row.id, kind=row.kind, func_ref=row.func_ref, schedule=row.schedule,
                     arguments=row.arguments, next_run_time=row.next_run_time,
                     problem=row.problem)


def _aware(value: Any) -> datetime:
    """A time read from the database as UTC-aware (SQLite returns its CURRENT_TIMESTAMP as text
    or a naive datetime, in UTC)."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
