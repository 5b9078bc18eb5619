"""The store's self-healing records: the anomalies its jobs see and the decisions they make
(tables ``partctl_anomalies`` and ``partctl_heal_decisions``), as frozen records."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session

from rebalancer.store.models import AnomalyRow, ExecutionRow, HealDecisionRow, utcnow
from rebalancer.store.records import ExecutionStatus, StoreError

__all__ = ["AnomalyRecord", "HealDecision", "HealingRecords", "SeenAnomaly"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SeenAnomaly:
    """An anomaly as a run saw it, to be recorded."""

    kind: str
    subject: str
    first_seen: datetime
    last_seen: datetime
    figures: Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class AnomalyRecord:
    id: int
    job_id: str
    kind: str
    subject: str
    first_seen: datetime
    last_seen: datetime
    resolved_at: datetime | None
    figures: Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class HealDecision:
    id: int
    run_id: int | None
    job_id: str
    decided_at: datetime
    decision: str
    action: str | None
    reason: str
    anomalies: tuple[int, ...]
    plan_id: int | None
    execution_id: int | None
    figures: Mapping[str, Any] | None


def _anomaly(row: AnomalyRow) -> AnomalyRecord:
    return AnomalyRecord(id=row.id, job_id=row.job_id, kind=row.kind, subject=row.subject,
                         first_seen=row.first_seen, last_seen=row.last_seen,
                         resolved_at=row.resolved_at, figures=dict(row.figures or {}))


def _decision(row: HealDecisionRow) -> HealDecision:
    ids = row.anomalies if isinstance(row.anomalies, list) else []
    return HealDecision(id=row.id, run_id=row.run_id, job_id=row.job_id,
                        decided_at=row.decided_at, decision=row.decision, action=row.action,
                        reason=row.reason,
                        anomalies=tuple(i for i in ids if isinstance(i, int)),
                        plan_id=row.plan_id, execution_id=row.execution_id,
                        figures=row.figures)


class _HasSessions(Protocol):
    def _session(self) -> AbstractContextManager[Session]: ...


class HealingRecords:
    """The Store's methods for self-healing (mixed into rebalancer.store.Store)."""

    def open_anomalies(self: _HasSessions, job_id: str) -> list[AnomalyRecord]:
        """The job's anomalies still seen at its last run, oldest first."""
        with self._session() as s:
            return [_anomaly(r) for r in s.scalars(
                select(AnomalyRow).where(AnomalyRow.job_id == job_id,
                                         AnomalyRow.resolved_at.is_(None))
                .order_by(AnomalyRow.id))]

    def record_anomalies(self: _HasSessions, job_id: str, seen: Iterable[SeenAnomaly], *,
                         now: datetime | None = None) -> list[AnomalyRecord]:
        """Record what a run saw: an open anomaly of the same kind and subject is updated
        (last seen, figures), a new one added; open ones not seen any more are resolved.
        Returns the records of ``seen``, in its order."""
        now = now or utcnow()
        out: list[AnomalyRecord] = []
        with self._session() as s:
            open_rows = {(r.kind, r.subject): r for r in s.scalars(
                select(AnomalyRow).where(AnomalyRow.job_id == job_id,
                                         AnomalyRow.resolved_at.is_(None)))}
            rows: list[AnomalyRow] = []
            for a in seen:
                row = open_rows.pop((a.kind, a.subject), None)
                if row is None:
                    row = AnomalyRow(job_id=job_id, kind=a.kind, subject=a.subject[:255],
                                     first_seen=a.first_seen, last_seen=a.last_seen,
                                     resolved_at=None, figures=dict(a.figures))
                    s.add(row)
                else:
                    row.last_seen, row.figures = a.last_seen, dict(a.figures)
                rows.append(row)
            for gone in open_rows.values():
                gone.resolved_at = now
            s.flush()
            out = [_anomaly(r) for r in rows]
        return out

    def anomalies(self: _HasSessions, *, job_id: str | None = None, limit: int = 20
                  ) -> list[AnomalyRecord]:
        """Newest first."""
        q = select(AnomalyRow).order_by(AnomalyRow.id.desc()).limit(limit)
        if job_id is not None:
            q = q.where(AnomalyRow.job_id == job_id)
        with self._session() as s:
            return [_anomaly(r) for r in s.scalars(q)]

    def add_decision(self: _HasSessions, *, run_id: int | None, job_id: str, decision: str,
                     reason: str, action: str | None = None, anomalies: Sequence[int] = (),
                     plan_id: int | None = None, execution_id: int | None = None,
                     figures: Mapping[str, Any] | None = None) -> HealDecision:
        row = HealDecisionRow(run_id=run_id, job_id=job_id, decided_at=utcnow(),
                              decision=decision, action=action, reason=reason,
                              anomalies=list(anomalies), plan_id=plan_id,
                              execution_id=execution_id,
                              figures=dict(figures) if figures is not None else None)
        with self._session() as s:
            s.add(row)
            s.flush()
            return _decision(row)

    def update_decision(self: _HasSessions, decision_id: int, **fields: Any) -> HealDecision:
        """Set the fix's ``plan_id``, ``execution_id`` or ``figures``."""
        unknown = set(fields) - {"plan_id", "execution_id", "figures"}
        if unknown:
            raise TypeError(f"cannot update {sorted(unknown)} of a decision")
        with self._session() as s:
            row = s.get(HealDecisionRow, decision_id)
            if row is None:
                raise StoreError(f"no decision {decision_id} in the store")
            for name, value in fields.items():
                setattr(row, name, value)
            s.flush()
            return _decision(row)

    def decisions(self: _HasSessions, *, job_id: str | None = None,
                  run_ids: Iterable[int] | None = None, limit: int | None = 20
                  ) -> list[HealDecision]:
        """Newest first."""
        q = select(HealDecisionRow).order_by(HealDecisionRow.id.desc())
        if job_id is not None:
            q = q.where(HealDecisionRow.job_id == job_id)
        if run_ids is not None:
            q = q.where(HealDecisionRow.run_id.in_(list(run_ids)))
        if limit is not None:
            q = q.limit(limit)
        with self._session() as s:
            return [_decision(r) for r in s.scalars(q)]

    def running_fixes(self: _HasSessions, job_id: str) -> list[HealDecision]:
        """The job's decisions to act whose execution is still recorded as running."""
        with self._session() as s:
            return [_decision(r) for r in s.scalars(
                select(HealDecisionRow).join(
                    ExecutionRow, ExecutionRow.id == HealDecisionRow.execution_id)
                .where(HealDecisionRow.job_id == job_id,
                       ExecutionRow.status == ExecutionStatus.RUNNING.value)
                .order_by(HealDecisionRow.id))]
