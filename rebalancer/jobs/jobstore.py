"""APScheduler's view of ``partctl_jobs``: a job store that builds jobs from checked rows.

APScheduler 3 stays the scheduler; only where it keeps jobs changes. Its own SQLAlchemy job store
pickles each job and unpickles every row it reads, so a crafted row runs code in the reading
process and a corrupt one fails with UnpicklingError. This store reads the plain rows the store
keeps (``rebalancer.store.Store.jobs``), checks each one (``spec.check_stored``) and builds the
APScheduler Job from the checked values; a row that fails is logged once and skipped, never run
and never deleted (``partctl jobs list`` shows it as BROKEN, ``jobs remove`` deletes it).

Each Job is given its id and the store's URL as the ``job_id`` and ``db`` arguments in memory, so
the password of a PostgreSQL store is never written into a job.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from apscheduler.job import Job
from apscheduler.jobstores.base import BaseJobStore, ConflictingIdError, JobLookupError
from apscheduler.util import datetime_to_utc_timestamp

from rebalancer.jobs import spec, tasks
from rebalancer.jobs.triggers import schedule_of, schedule_to_json, to_trigger
from rebalancer.store import JobExists, RunConflict, Store, StoredJob

log = logging.getLogger(__name__)

JOB_DEFAULTS: Mapping[str, Any] = {"coalesce": True, "max_instances": 1,
                                   "misfire_grace_time": 600}
"""A late or piled-up job runs once, never twice at once; up to 10 minutes late still runs."""


def _unless_running(func: Callable[..., Any], job_id: str) -> Callable[..., Any]:
    """The job function as the scheduler calls it: when another process is running the job
    (RunConflict, nothing recorded), one warning line, not an error with a traceback from
    APScheduler's executor. The Job keeps its registered import string."""

    @functools.wraps(func)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except RunConflict as exc:
            log.warning("job %s not run: %s", job_id, exc)
            return None

    return run


class SqlJobStore(BaseJobStore):
    """APScheduler's job store over the store's ``partctl_jobs`` table."""

    def __init__(self, store: Store, *, db_url: str) -> None:
        super().__init__()
        self.store = store
        self._db_url = db_url
        self._reported: dict[str, str] = {}
        self._lock = threading.Lock()

    # --- reading ---------------------------------------------------------------------------

    def _job(self, stored: StoredJob) -> Job | None:
        """The runnable Job a row describes, or None (logged once) when it is broken."""
        try:
            checked = spec.check_stored(stored)
            func_ref = checked.func_ref
            spec.resolve(checked)  # imports only the registered module, fails early
            trigger = to_trigger(checked.schedule)
        except ValueError as exc:  # JobSpecError, TriggerError
            self._report(stored.id, str(exc))
            return None
        with self._lock:
            self._reported.pop(repr(checked.id), None)
        job = Job.__new__(Job)
        job.__setstate__({
            "version": 1, "id": checked.id, "func": func_ref, "trigger": trigger,
            "executor": "default", "args": (),
            "kwargs": {**checked.arguments, "job_id": checked.id, "db": self._db_url},
            "name": f"{checked.kind} {checked.id}",
            "misfire_grace_time": JOB_DEFAULTS["misfire_grace_time"],
            "coalesce": JOB_DEFAULTS["coalesce"], "max_instances": JOB_DEFAULTS["max_instances"],
            "next_run_time": checked.next_run_time,
        })
        job.func = _unless_running(job.func, checked.id)
        job._scheduler = self._scheduler
        job._jobstore_alias = self._alias
        return job

    def _report(self, job_id: Any, reason: str) -> None:
        key = repr(job_id)
        with self._lock:
            first = self._reported.get(key) != reason
            self._reported[key] = reason
        if first:
            log.error("job %s is broken and is not run (`partctl jobs list` shows it, `partctl "
                      "jobs remove` deletes it): %s", key, reason)

    def lookup_job(self, job_id: str) -> Job | None:
        stored = self.store.get_job(job_id)
        return None if stored is None else self._job(stored)

    def get_due_jobs(self, now: datetime) -> list[Job]:
        due = self.store.jobs(due_by=datetime_to_utc_timestamp(now))
        return [job for job in map(self._job, due) if job is not None]

    def get_next_run_time(self) -> datetime | None:
        """The soonest next run of a job that can run: a broken job due long ago must not make
        the scheduler wake up for it again and again."""
        for stored in self.store.jobs(scheduled=True):
            job = self._job(stored)
            if job is not None:
                return job.next_run_time
        return None

    def get_all_jobs(self) -> list[Job]:
        """Every job that can run, soonest first, those without a next run time last (the
        order APScheduler expects)."""
        jobs = [job for job in map(self._job, self.store.jobs()) if job is not None]
        return sorted(jobs, key=lambda j: (j.next_run_time is None,
                                           datetime_to_utc_timestamp(j.next_run_time) or 0.0))

    # --- writing ---------------------------------------------------------------------------

    def _row(self, job: Job) -> dict[str, Any]:
        """A Job as the store's row values, checked as a typed job is."""
        kind = next((k for k, ref in tasks.JOB_FUNCTIONS.items() if ref == job.func_ref), None)
        if kind is None:
            raise ValueError(f"job {job.id!r}: {job.func_ref!r} is not a partctl job function "
                             f"(one of {', '.join(tasks.JOB_FUNCTIONS.values())})")
        schedule = schedule_of(job.trigger)
        if schedule is None:
            raise ValueError(f"job {job.id!r}: partctl stores the schedules it makes "
                             f"(rebalancer.jobs.make_schedule), not {job.trigger!r}")
        arguments = {k: v for k, v in job.kwargs.items() if k not in spec.RUNTIME_ARGUMENTS}
        if job.args:
            raise ValueError(f"job {job.id!r}: partctl jobs take keyword arguments only")
        return {"kind": kind, "func_ref": job.func_ref, "schedule": schedule_to_json(schedule),
                "arguments": spec.check_arguments(kind, arguments),
                "next_run_time": datetime_to_utc_timestamp(job.next_run_time)}

    def add_job(self, job: Job) -> None:
        spec.check_id(job.id)
        try:
            self.store.add_job(job_id=job.id, **self._row(job))
        except JobExists:
            raise ConflictingIdError(job.id) from None

    def update_job(self, job: Job) -> None:
        """Write the job back: after a run the scheduler moves its next run time on."""
        if not self.store.update_job(job.id, **self._row(job)):
            raise JobLookupError(job.id)

    def remove_job(self, job_id: str) -> None:
        if not self.store.remove_job(job_id):
            raise JobLookupError(job_id)

    def remove_all_jobs(self) -> None:
        self.store.remove_all_jobs()

    def shutdown(self) -> None:
        self.store.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} ({self.store!r})>"
