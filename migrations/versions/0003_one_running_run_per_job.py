"""At most one running run per job (the job lock), and the runs' heartbeats.

A unique index over ``job_id`` for rows whose outcome is 'running' (a partial index, which
SQLite and PostgreSQL both have) makes starting a run the taking of the job's lock: a second
``jobs run-now`` or a second scheduler fails to insert its row and runs nothing. The lock dies
with its holder because the row says who holds it: ``runner`` (host:pid) and ``heartbeat_at``,
refreshed while the run lasts; a run whose process is gone is closed as interrupted by whoever
next wants the job.

Runs left 'running' side by side for one job (two `run-now`s at once were possible before) would
block the index: all but the newest of each job are closed as interrupted first.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEX = "uq_partctl_job_runs_running_job_id"
RUNNING = sa.text("outcome = 'running'")


def upgrade() -> None:
    op.add_column("partctl_job_runs",
                  sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True))
    bind = op.get_bind()
    runs = sa.table("partctl_job_runs", sa.column("id", sa.Integer()),
                    sa.column("job_id", sa.String()), sa.column("outcome", sa.String()),
                    sa.column("error", sa.Text()), sa.column("ended_at", sa.DateTime()))
    newest = (sa.select(runs.c.job_id, sa.func.max(runs.c.id).label("id"))
              .where(runs.c.outcome == "running").group_by(runs.c.job_id)
              .having(sa.func.count() > 1))
    for job_id, keep in bind.execute(newest).all():
        now = datetime.now(UTC)
        bind.execute(runs.update()
                     .where(runs.c.job_id == job_id, runs.c.outcome == "running",
                            runs.c.id != keep)
                     .values(outcome="interrupted", ended_at=now if bind.dialect.name !=
                             "sqlite" else now.replace(tzinfo=None),
                             error="found running beside a later run of the same job when "
                                   "the store was upgraded to revision 0003"))
    op.create_index(INDEX, "partctl_job_runs", ["job_id"], unique=True,
                    sqlite_where=RUNNING, postgresql_where=RUNNING)


def downgrade() -> None:
    op.drop_index(INDEX, table_name="partctl_job_runs")
    with op.batch_alter_table("partctl_job_runs") as batch:
        batch.drop_column("heartbeat_at")
