"""Scheduled jobs: rebalances, preferred-leader elections and self-healing on APScheduler 3,
persisted in SQL, on any cluster (by coordinator or by bootstrap servers).

Jobs are rows of the store's ``partctl_jobs`` table, plain data checked whenever read (kind, the
function's stable import string from ``JOB_FUNCTIONS``, the schedule and the arguments as JSON);
nothing is pickled. Their runs are recorded in the store.
"""

from rebalancer.goals import GOALS
from rebalancer.jobs.jobstore import JOB_DEFAULTS, SqlJobStore
from rebalancer.jobs.scheduler import (
    JobBroken,
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
from rebalancer.jobs.self_heal import run_self_heal
from rebalancer.jobs.spec import ARGUMENTS, JobSpec, JobSpecError
from rebalancer.jobs.tasks import (
    ENGINES,
    JOB_FUNCTIONS,
    PREFERRED_ELECTION,
    REBALANCE,
    SELF_HEAL,
    STOP,
    RunSummary,
    goals_for,
    run_preferred_election,
    run_rebalance,
)
from rebalancer.jobs.triggers import (
    MAX_DURATION,
    MIN_INTERVAL,
    Cron,
    Every,
    Schedule,
    TriggerError,
    describe_schedule,
    format_duration,
    make_schedule,
    parse_duration,
)

__all__ = [
    "ARGUMENTS",
    "ENGINES",
    "GOALS",
    "JOB_DEFAULTS",
    "JOB_FUNCTIONS",
    "MAX_DURATION",
    "MIN_INTERVAL",
    "PREFERRED_ELECTION",
    "REBALANCE",
    "SELF_HEAL",
    "STOP",
    "Cron",
    "Every",
    "JobBroken",
    "JobInfo",
    "JobNotFound",
    "JobSpec",
    "JobSpecError",
    "RunSummary",
    "Schedule",
    "SqlJobStore",
    "TriggerError",
    "add_job",
    "describe_schedule",
    "format_duration",
    "goals_for",
    "list_jobs",
    "make_schedule",
    "make_scheduler",
    "parse_duration",
    "reap_stale_runs",
    "remove_job",
    "run_job_now",
    "run_preferred_election",
    "run_rebalance",
    "run_scheduler",
    "run_self_heal",
]
