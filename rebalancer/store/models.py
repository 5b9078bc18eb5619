"""The SQL store's tables, as typed SQLAlchemy 2 models. Alembic migrations own the schema.

Four tables, all prefixed ``partctl_`` so the store can share a team database:

- ``partctl_plans``: every plan made (by a job or by hand), with the digest of the snapshot it
  was made from, its goal and options, its projected scores and the plan in Kafka's JSON.
- ``partctl_executions``: one attempt to carry out a plan, within a move limit.
- ``partctl_execution_partitions``: per-partition progress of an execution.
- ``partctl_job_runs``: one row per run of a scheduled job, with its outcome and the cluster's
  scores before and after.
- ``partctl_jobs``: the scheduled jobs themselves, as plain data (kind, the function's import
  string, the schedule and the arguments as JSON text); ``rebalancer.jobs`` checks every row it
  reads and never runs one that does not pass.
- ``partctl_anomalies``: what self-healing jobs saw (rebalancer.anomalies): kind, subject,
  first and last seen, the figures, when it was no longer seen.
- ``partctl_heal_decisions``: what a self-healing run decided about them (act, wait, skip,
  nothing to do), why, and the plan and execution of the fix it started.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    text,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.types import TypeDecorator

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC datetime on every backend (SQLite keeps no offset: we add it back)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: the store keeps UTC-aware times")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {datetime: UTCDateTime(), dict[str, Any]: JSON()}


class PlanRow(Base):
    __tablename__ = "partctl_plans"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    created_at: Mapped[datetime] = mapped_column(index=True)
    snapshot_digest: Mapped[str] = mapped_column(String(64), index=True)
    """sha256 (hex) of the canonical JSON of the snapshot the plan was made from."""
    goal: Mapped[str] = mapped_column(String(64))
    options: Mapped[dict[str, Any]]
    scores: Mapped[dict[str, Any]]
    """The projected scores of the cluster after the plan (rebalancer.plan.Scores as JSON)."""
    plan: Mapped[dict[str, Any]]
    """Kafka's reassignment JSON: {"version": 1, "partitions": [...]}."""
    moves: Mapped[int] = mapped_column(Integer)
    """Partitions the plan changes (len(plan["partitions"]))."""

    executions: Mapped[list[ExecutionRow]] = relationship(back_populates="plan_row")


class ExecutionRow(Base):
    __tablename__ = "partctl_executions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    plan_id: Mapped[int] = mapped_column(ForeignKey("partctl_plans.id", ondelete="CASCADE"),
                                         index=True)
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime | None]
    status: Mapped[str] = mapped_column(String(16))
    max_concurrent_moves: Mapped[int] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text)

    plan_row: Mapped[PlanRow] = relationship(back_populates="executions")
    partitions: Mapped[list[ExecutionPartitionRow]] = relationship(
        back_populates="execution", cascade="all, delete-orphan",
        order_by="(ExecutionPartitionRow.topic, ExecutionPartitionRow.partition)")


class ExecutionPartitionRow(Base):
    __tablename__ = "partctl_execution_partitions"

    execution_id: Mapped[int] = mapped_column(
        ForeignKey("partctl_executions.id", ondelete="CASCADE"), primary_key=True)
    topic: Mapped[str] = mapped_column(String(255), primary_key=True)
    partition: Mapped[int] = mapped_column(Integer, primary_key=True)
    target_replicas: Mapped[list[int]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(Text)
    """Why the partition failed (None unless it did)."""
    updated_at: Mapped[datetime]

    execution: Mapped[ExecutionRow] = relationship(back_populates="partitions")


RUNNING_RUN_INDEX = "uq_partctl_job_runs_running_job_id"
"""At most one run of a job is 'running': the lock that keeps a job from running twice at once
(from `jobs run-now` and from schedulers alike), in the database itself."""


class JobRunRow(Base):
    __tablename__ = "partctl_job_runs"
    __table_args__ = (
        Index(RUNNING_RUN_INDEX, "job_id", unique=True,
              sqlite_where=text("outcome = 'running'"),
              postgresql_where=text("outcome = 'running'")),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(String(191), index=True)
    kind: Mapped[str] = mapped_column(String(32))
    started_at: Mapped[datetime] = mapped_column(index=True)
    ended_at: Mapped[datetime | None]
    outcome: Mapped[str] = mapped_column(String(16))
    error: Mapped[str | None] = mapped_column(Text)
    scores_before: Mapped[dict[str, Any] | None]
    scores_after: Mapped[dict[str, Any] | None]
    details: Mapped[dict[str, Any] | None]
    plan_id: Mapped[int | None] = mapped_column(
        ForeignKey("partctl_plans.id", ondelete="SET NULL"), index=True)
    execution_id: Mapped[int | None] = mapped_column(
        ForeignKey("partctl_executions.id", ondelete="SET NULL"))
    runner: Mapped[str | None] = mapped_column(String(255))
    """host:pid of the process running the job, to tell a crashed run from a live one."""
    heartbeat_at: Mapped[datetime | None]
    """When the running process last said it is alive (the database's clock): a run whose
    heartbeat is older than the lease is taken for dead, wherever its process ran."""


class JobRow(Base):
    """A scheduled job. Columns that hold JSON are Text, parsed by the reader row by row, so
    that one damaged row is reported as broken instead of failing every read."""

    __tablename__ = "partctl_jobs"

    id: Mapped[str] = mapped_column(String(191), primary_key=True)
    kind: Mapped[str | None] = mapped_column(String(32))
    func_ref: Mapped[str | None] = mapped_column(String(255))
    """The job function's stable import string (rebalancer.jobs.JOB_FUNCTIONS[kind])."""
    schedule: Mapped[str | None] = mapped_column(Text)
    """JSON: {"cron": "0 3 * * *", "timezone": "Europe/Paris"} or {"every": 300, "start": ISO}."""
    arguments: Mapped[str | None] = mapped_column(Text)
    """JSON object of the job function's keyword arguments; never the store's URL."""
    next_run_time: Mapped[float | None] = mapped_column(Float, index=True)
    """Seconds since the epoch (UTC), as APScheduler keeps it; None: not scheduled."""
    problem: Mapped[str | None] = mapped_column(Text)
    """Why the job can never run as stored (a job carried over from APScheduler's pickles)."""


class AnomalyRow(Base):
    """An anomaly a self-healing job saw, open (``resolved_at`` None) while it is seen."""

    __tablename__ = "partctl_anomalies"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(String(191), index=True)
    kind: Mapped[str] = mapped_column(String(32))
    subject: Mapped[str] = mapped_column(String(255))
    first_seen: Mapped[datetime]
    last_seen: Mapped[datetime]
    resolved_at: Mapped[datetime | None]
    """When a run first no longer saw it (None: still seen)."""
    figures: Mapped[dict[str, Any]]


class HealDecisionRow(Base):
    """What one self-healing run decided, and the fix it started (its plan and execution)."""

    __tablename__ = "partctl_heal_decisions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[int | None] = mapped_column(
        ForeignKey("partctl_job_runs.id", ondelete="SET NULL"), index=True)
    job_id: Mapped[str] = mapped_column(String(191), index=True)
    decided_at: Mapped[datetime]
    decision: Mapped[str] = mapped_column(String(16))
    action: Mapped[str | None] = mapped_column(String(32))
    reason: Mapped[str] = mapped_column(Text)
    anomalies: Mapped[list[int]] = mapped_column(JSON)
    """The ids of the anomalies (partctl_anomalies) it is about."""
    plan_id: Mapped[int | None] = mapped_column(
        ForeignKey("partctl_plans.id", ondelete="SET NULL"))
    execution_id: Mapped[int | None] = mapped_column(
        ForeignKey("partctl_executions.id", ondelete="SET NULL"))
    figures: Mapped[dict[str, Any] | None]
    """The fix's plan: moves, its projected scores."""
