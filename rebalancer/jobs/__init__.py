"""Scheduled jobs: rebalances and preferred-leader elections on APScheduler 3, persisted in SQL.

Jobs live in APScheduler's ``SQLAlchemyJobStore`` in the store's database and name their
function by a stable import string (``JOB_FUNCTIONS``); their runs are recorded in the store.
"""

from rebalancer.jobs.scheduler import (
    DurableJobStore,
    JobInfo,
    JobNotFound,
    add_job,
    list_jobs,
    make_scheduler,
    reap_stale_runs,
    remove_job,
    run_job_now,
    run_scheduler,
)
from rebalancer.jobs.tasks import (
    ENGINES,
    GOALS,
    JOB_FUNCTIONS,
    PREFERRED_ELECTION,
    REBALANCE,
    STOP,
    RunSummary,
    goals_for,
    run_preferred_election,
    run_rebalance,
)
from rebalancer.jobs.triggers import (
    TriggerError,
    describe_trigger,
    format_duration,
    make_trigger,
    parse_duration,
)

__all__ = [
    "ENGINES",
    "GOALS",
    "JOB_FUNCTIONS",
    "PREFERRED_ELECTION",
    "REBALANCE",
    "STOP",
    "DurableJobStore",
    "JobInfo",
    "JobNotFound",
    "RunSummary",
    "TriggerError",
    "add_job",
    "describe_trigger",
    "format_duration",
    "goals_for",
    "list_jobs",
    "make_scheduler",
    "make_trigger",
    "parse_duration",
    "reap_stale_runs",
    "remove_job",
    "run_job_now",
    "run_preferred_election",
    "run_rebalance",
    "run_scheduler",
]
