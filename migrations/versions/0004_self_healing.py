"""Self-healing: the anomalies its jobs see and the decisions they make.

``partctl_anomalies``: one row per anomaly a self-healing job saw (kind, subject, first and
last seen, figures), resolved when a run no longer sees it. ``partctl_heal_decisions``: per run,
what it decided (act, wait, skip, nothing to do), why, and the plan and execution of the fix it
started, so a later run sees a fix still running and does not start it again.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _when(name: str, nullable: bool = False) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "partctl_anomalies",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("job_id", sa.String(length=191), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("subject", sa.String(length=255), nullable=False),
        _when("first_seen"),
        _when("last_seen"),
        _when("resolved_at", nullable=True),
        sa.Column("figures", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_partctl_anomalies")),
    )
    op.create_index(op.f("ix_partctl_anomalies_job_id"), "partctl_anomalies", ["job_id"])
    op.create_table(
        "partctl_heal_decisions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("job_id", sa.String(length=191), nullable=False),
        _when("decided_at"),
        sa.Column("decision", sa.String(length=16), nullable=False),
        sa.Column("action", sa.String(length=32), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("anomalies", sa.JSON(), nullable=False),
        sa.Column("plan_id", sa.Integer(), nullable=True),
        sa.Column("execution_id", sa.Integer(), nullable=True),
        sa.Column("figures", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(
            ["execution_id"], ["partctl_executions.id"], ondelete="SET NULL",
            name=op.f("fk_partctl_heal_decisions_execution_id_partctl_executions")),
        sa.ForeignKeyConstraint(
            ["plan_id"], ["partctl_plans.id"], ondelete="SET NULL",
            name=op.f("fk_partctl_heal_decisions_plan_id_partctl_plans")),
        sa.ForeignKeyConstraint(
            ["run_id"], ["partctl_job_runs.id"], ondelete="SET NULL",
            name=op.f("fk_partctl_heal_decisions_run_id_partctl_job_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_partctl_heal_decisions")),
    )
    op.create_index(op.f("ix_partctl_heal_decisions_job_id"), "partctl_heal_decisions",
                    ["job_id"])
    op.create_index(op.f("ix_partctl_heal_decisions_run_id"), "partctl_heal_decisions",
                    ["run_id"])


def downgrade() -> None:
    op.drop_table("partctl_heal_decisions")
    op.drop_table("partctl_anomalies")
