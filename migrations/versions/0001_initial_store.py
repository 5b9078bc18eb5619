"""Initial store: plans, executions with per-partition progress, job runs.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _when(name: str, nullable: bool = False) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "partctl_plans",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        _when("created_at"),
        sa.Column("snapshot_digest", sa.String(length=64), nullable=False),
        sa.Column("goal", sa.String(length=64), nullable=False),
        sa.Column("options", sa.JSON(), nullable=False),
        sa.Column("scores", sa.JSON(), nullable=False),
        sa.Column("plan", sa.JSON(), nullable=False),
        sa.Column("moves", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_partctl_plans")),
    )
    op.create_index(op.f("ix_partctl_plans_created_at"), "partctl_plans", ["created_at"])
    op.create_index(op.f("ix_partctl_plans_snapshot_digest"), "partctl_plans",
                    ["snapshot_digest"])

    op.create_table(
        "partctl_executions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("plan_id", sa.Integer(), nullable=False),
        _when("started_at"),
        _when("finished_at", nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("max_concurrent_moves", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["plan_id"], ["partctl_plans.id"], ondelete="CASCADE",
                                name=op.f("fk_partctl_executions_plan_id_partctl_plans")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_partctl_executions")),
    )
    op.create_index(op.f("ix_partctl_executions_plan_id"), "partctl_executions", ["plan_id"])

    op.create_table(
        "partctl_execution_partitions",
        sa.Column("execution_id", sa.Integer(), nullable=False),
        sa.Column("topic", sa.String(length=255), nullable=False),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.Column("target_replicas", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        _when("updated_at"),
        sa.ForeignKeyConstraint(
            ["execution_id"], ["partctl_executions.id"], ondelete="CASCADE",
            name=op.f("fk_partctl_execution_partitions_execution_id_partctl_executions")),
        sa.PrimaryKeyConstraint("execution_id", "topic", "partition",
                                name=op.f("pk_partctl_execution_partitions")),
    )

    op.create_table(
        "partctl_job_runs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("job_id", sa.String(length=191), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        _when("started_at"),
        _when("ended_at", nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("scores_before", sa.JSON(), nullable=True),
        sa.Column("scores_after", sa.JSON(), nullable=True),
        sa.Column("details", sa.JSON(), nullable=True),
        sa.Column("plan_id", sa.Integer(), nullable=True),
        sa.Column("execution_id", sa.Integer(), nullable=True),
        sa.Column("runner", sa.String(length=255), nullable=True),
        sa.ForeignKeyConstraint(
            ["execution_id"], ["partctl_executions.id"], ondelete="SET NULL",
            name=op.f("fk_partctl_job_runs_execution_id_partctl_executions")),
        sa.ForeignKeyConstraint(["plan_id"], ["partctl_plans.id"], ondelete="SET NULL",
                                name=op.f("fk_partctl_job_runs_plan_id_partctl_plans")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_partctl_job_runs")),
    )
    op.create_index(op.f("ix_partctl_job_runs_job_id"), "partctl_job_runs", ["job_id"])
    op.create_index(op.f("ix_partctl_job_runs_plan_id"), "partctl_job_runs", ["plan_id"])
    op.create_index(op.f("ix_partctl_job_runs_started_at"), "partctl_job_runs", ["started_at"])


def downgrade() -> None:
    op.drop_table("partctl_job_runs")
    op.drop_table("partctl_execution_partitions")
    op.drop_table("partctl_executions")
    op.drop_table("partctl_plans")
