"""Jobs as plain data in partctl_jobs; APScheduler's pickled table is retired.

Before this revision jobs lived in APScheduler's ``apscheduler_jobs`` table as pickles, which
APScheduler unpickles on every read: a crafted row ran code in whatever process read it, and each
job's state held the store's URL, password included. Those rows cannot be read safely, so they
are not read: each one is carried over as a row of ``partctl_jobs`` that keeps its id and a
``problem`` saying it must be added again (it is listed as BROKEN and never run). Its kind is
recognised when one of partctl's two function import strings appears among the pickle's string
constants, found by disassembling the opcodes (``pickletools.genops``), which builds no object and
imports nothing. ``apscheduler_jobs`` is then dropped, and with it the pickles and the passwords
they held: only partctl used that table in this database (partctl before 0002 ran every job in
it), and nothing may unpickle them later.

Downgrading drops ``partctl_jobs``: the jobs are lost both ways (an older partctl cannot read the
new rows, and the pickles are gone); add them again with the partctl in use.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-24
"""

from __future__ import annotations

import pickletools
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LEGACY_TABLE = "apscheduler_jobs"
LEGACY_REFS = {"rebalancer.jobs:run_rebalance": "rebalance",
               "rebalancer.jobs:run_preferred_election": "preferred-election"}
"""partctl's job functions as jobs before 0002 named them (facts of that revision)."""
LEGACY_PROBLEM = ("stored as a pickle by partctl before store revision 0002, which is never "
                  "read: `partctl jobs remove {id}` and add the job again")


def _kind_of_pickle(state: object) -> str | None:
    """The job's kind, when one of partctl's function references is a string constant of the
    pickle; None when not (or when the bytes are not a pickle at all)."""
    try:
        for _opcode, arg, _pos in pickletools.genops(bytes(state)):  # type: ignore[arg-type]
            if isinstance(arg, str) and arg in LEGACY_REFS:
                return LEGACY_REFS[arg]
    except Exception:  # damaged or not a pickle: nothing to recognise
        return None
    return None


def upgrade() -> None:
    jobs = op.create_table(
        "partctl_jobs",
        sa.Column("id", sa.String(length=191), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=True),
        sa.Column("func_ref", sa.String(length=255), nullable=True),
        sa.Column("schedule", sa.Text(), nullable=True),
        sa.Column("arguments", sa.Text(), nullable=True),
        sa.Column("next_run_time", sa.Float(), nullable=True),
        sa.Column("problem", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_partctl_jobs")),
    )
    op.create_index(op.f("ix_partctl_jobs_next_run_time"), "partctl_jobs", ["next_run_time"])
    bind = op.get_bind()
    if not sa.inspect(bind).has_table(LEGACY_TABLE):
        return
    legacy = sa.table(LEGACY_TABLE, sa.column("id", sa.String()),
                      sa.column("job_state", sa.LargeBinary()))
    rows = bind.execute(sa.select(legacy.c.id, legacy.c.job_state)).all()
    if rows:
        op.bulk_insert(jobs, [
            {"id": row.id, "kind": _kind_of_pickle(row.job_state), "func_ref": None,
             "schedule": None, "arguments": None, "next_run_time": None,
             "problem": LEGACY_PROBLEM.format(id=row.id)}
            for row in rows])
    op.drop_table(LEGACY_TABLE)


def downgrade() -> None:
    op.drop_index(op.f("ix_partctl_jobs_next_run_time"), table_name="partctl_jobs")
    op.drop_table("partctl_jobs")
