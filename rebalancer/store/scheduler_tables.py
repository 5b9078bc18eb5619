"""APScheduler's table in the store's database: not ours, so not in our migrations."""

from __future__ import annotations

SCHEDULER_JOBS_TABLE = "apscheduler_jobs"


def is_scheduler_table(name: str) -> bool:
    return name == SCHEDULER_JOBS_TABLE
