"""Scheduled jobs over the store's ``partctl_jobs`` table: adding, listing, removing and running
jobs, and the foreground scheduler loop that ``partctl scheduler run`` drives.

Adding, listing, removing and running a job read and write the table directly: no scheduler is
started for them, so none can run (or fail to submit) an overdue job as a side effect. The
running scheduler (APScheduler 3 over ``SqlJobStore``) polls the table every few seconds, so it
picks up jobs added or removed meanwhile.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from apscheduler.events import (
    EVENT_JOB_ERROR,
    EVENT_JOB_MAX_INSTANCES,
    EVENT_JOB_MISSED,
    JobExecutionEvent,
)
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.util import datetime_to_utc_timestamp

from rebalancer.jobs import lock, spec, tasks
from rebalancer.jobs.jobstore import JOB_DEFAULTS, SqlJobStore
from rebalancer.jobs.triggers import (
    Schedule,
    check_schedule,
    describe_schedule,
    first_run_time,
    schedule_to_json,
)
from rebalancer.store import JobExists, RunOutcome, Store, resolve_db_url

log = logging.getLogger(__name__)


class JobNotFound(LookupError):
    def __init__(self, job_id: str) -> None:
        super().__init__(f"no job {job_id!r} in the job store")
        self.job_id = job_id


class Scheduler(BackgroundScheduler):
    """BackgroundScheduler that can be closed to new work before it shuts down.

    APScheduler's loop may be waiting to process due jobs while ``shutdown()`` closes the
    executors; it then submits to a closed pool (a logged RuntimeError). Closed under the job
    stores' lock, no round starts after that, and rounds already running finish first.
    """

    _closing = False

    def close_for_shutdown(self) -> None:
        with self._jobstores_lock:
            self._closing = True

    def _process_jobs(self) -> float | None:
        with self._jobstores_lock:
            if self._closing:
                return None
            return super()._process_jobs()


def make_scheduler(db: str | None = None, *, max_workers: int = 4,
                   timezone: Any = None) -> Scheduler:
    """A (not started) scheduler whose job store is the store's ``partctl_jobs`` table; the
    store is migrated first. The job store owns the Store and closes it at shutdown."""
    url = resolve_db_url(db)
    jobstore = SqlJobStore(Store.open(url), db_url=url)
    options: dict[str, Any] = {"jobstores": {"default": jobstore},
                               "executors": {"default": ThreadPoolExecutor(max_workers)},
                               "job_defaults": dict(JOB_DEFAULTS)}
    if timezone is not None:
        options["timezone"] = timezone
    return Scheduler(**options)


@dataclass(frozen=True, slots=True, kw_only=True)
class JobInfo:
    id: str
    kind: str | None
    func_ref: str | None
    schedule: str
    next_run_time: datetime | None
    arguments: Mapping[str, Any]
    broken: str | None = None
    """Why the job cannot run (a damaged row, a function that no longer resolves, a job
    carried over from the pickled store), else None."""


def _info(stored: Any) -> JobInfo:
    """A stored row as listed: checked, or broken with the reason."""
    try:
        checked = spec.check_stored(stored)
        spec.resolve(checked)
    except ValueError as exc:
        kind = stored.kind if stored.kind in tasks.JOB_FUNCTIONS else None
        return JobInfo(id=str(stored.id), kind=kind,
                       func_ref=stored.func_ref if isinstance(stored.func_ref, str) else None,
                       schedule="?", next_run_time=None, arguments={}, broken=str(exc))
    return JobInfo(id=checked.id, kind=checked.kind, func_ref=checked.func_ref,
                   schedule=describe_schedule(checked.schedule),
                   next_run_time=checked.next_run_time, arguments=dict(checked.arguments))


def new_job_id(kind: str) -> str:
    return f"{kind}-{os.urandom(4).hex()}"


def add_job(db: str | None, *, kind: str, schedule: Schedule, arguments: Mapping[str, Any],
            job_id: str | None = None, now: datetime | None = None) -> JobInfo:
    """Store a job of ``kind`` (a key of JOB_FUNCTIONS) with its function's keyword
    ``arguments`` (plain JSON values, checked against the function's; never ``job_id`` or
    ``db``, which each run is given). JobSpecError or TriggerError (one line) when anything is
    wrong, an id already taken included. A coordinator URL is stored without its credentials;
    bootstrap servers are stored with the path of their properties file, never its
    contents."""
    from coordinator.url import without_credentials

    kind = spec.check_kind(kind)
    job_id = spec.check_id(job_id or new_job_id(kind))
    checked = spec.check_arguments(kind, arguments)
    if checked.get("coordinator") is not None:
        # never a password in the database: the job authenticates with the credentials of
        # the environment it runs in (PARTCTL_COORDINATOR_USER and its password)
        checked["coordinator"] = without_credentials(checked["coordinator"])
    check_schedule(schedule, now=now)
    first = first_run_time(schedule, now=now)
    with Store.open(db) as store:
        try:
            store.add_job(job_id=job_id, kind=kind, func_ref=tasks.JOB_FUNCTIONS[kind],
                          schedule=schedule_to_json(schedule), arguments=checked,
                          next_run_time=datetime_to_utc_timestamp(first))
        except JobExists as exc:
            raise spec.JobSpecError(str(exc)) from None
        stored = store.get_job(job_id)
    assert stored is not None
    return _info(stored)


def list_jobs(db: str | None = None) -> list[JobInfo]:
    """Every stored job, sorted by id; jobs that cannot run are listed as broken."""
    with Store.open(db) as store:
        rows = store.jobs()
    return sorted((_info(row) for row in rows), key=lambda j: j.id)


def remove_job(db: str | None, job_id: str) -> None:
    with Store.open(db) as store:
        if not store.remove_job(job_id):
            raise JobNotFound(job_id)


class JobBroken(ValueError):
    """A stored job that cannot be run as it is."""


def run_job_now(db: str | None, job_id: str) -> tasks.RunSummary:
    """Run a stored job once, here and now, in the foreground; its schedule is unchanged."""
    url = resolve_db_url(db)
    with Store.open(url) as store:
        stored = store.get_job(job_id)
    if stored is None:
        raise JobNotFound(job_id)
    try:
        checked = spec.check_stored(stored)
        func = spec.resolve(checked)
    except ValueError as exc:
        raise JobBroken(f"job {job_id!r} is broken and cannot run: {exc}") from None
    return func(**checked.arguments, job_id=checked.id, db=url)


# --- the foreground scheduler ------------------------------------------------------------------


def reap_stale_runs(store: Store) -> int:
    """Close as interrupted, with their executions, the runs recorded as running whose process
    is gone (a scheduler or `jobs run-now` killed without a chance to record its end): gone from
    this host, or silent for longer than the lease (rebalancer.jobs.lock)."""
    now = store.now()
    reaped = 0
    for run in store.runs(outcome=RunOutcome.RUNNING, limit=None):
        why = lock.is_gone(run, now)
        if why is not None:
            reaped += store.interrupt_runs([run.id], why)
    return reaped


def _on_event(event: Any) -> None:
    if event.code == EVENT_JOB_ERROR and isinstance(event, JobExecutionEvent):
        log.error("job %s raised %s", event.job_id, tasks.one_line(event.exception))
    elif event.code == EVENT_JOB_MISSED:
        log.warning("job %s missed its run at %s (the scheduler was busy or down)",
                    event.job_id, getattr(event, "scheduled_run_time", "?"))
    elif event.code == EVENT_JOB_MAX_INSTANCES:
        log.warning("job %s is still running; this run is skipped", event.job_id)


def run_scheduler(db: str | None = None, *, stop: threading.Event,
                  poll_interval: float = 5.0, max_workers: int = 4,
                  on_started: Callable[[Scheduler], None] | None = None) -> None:
    """Run the scheduler until ``stop`` is set, then shut it down cleanly.

    Every ``poll_interval`` seconds the scheduler re-reads the job store (jobs added, removed
    or changed by other processes). On stop, running jobs are told to wind down
    (``tasks.STOP``): each finishes or records itself as interrupted before this returns.
    """
    url = resolve_db_url(db)
    with Store.open(url) as store:
        reaped = reap_stale_runs(store)
    if reaped:
        log.warning("marked %d run(s) left running by a dead process as interrupted", reaped)
    scheduler = make_scheduler(url, max_workers=max_workers)
    scheduler.add_listener(_on_event, EVENT_JOB_ERROR | EVENT_JOB_MISSED
                           | EVENT_JOB_MAX_INSTANCES)
    tasks.STOP.clear()
    scheduler.start()
    try:
        if on_started is not None:
            on_started(scheduler)
        while not stop.wait(poll_interval):
            scheduler.wakeup()
    finally:
        tasks.STOP.set()
        scheduler.close_for_shutdown()
        try:
            scheduler.shutdown(wait=True)
        finally:
            tasks.STOP.clear()  # every job has returned; later runs in this process may run
