"""APScheduler 3 over the store's database: adding, listing, removing and running jobs, and the
foreground scheduler loop that ``partctl scheduler run`` drives.

Jobs are added, listed and removed from any process by starting a *paused* scheduler on the same
job store (APScheduler's way of editing a persistent store); the running scheduler polls the
store every few seconds, so it picks up jobs added or removed meanwhile.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import re
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
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
from apscheduler.job import Job
from apscheduler.jobstores.base import BaseJobStore
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.background import BackgroundScheduler
from sqlalchemy import and_, inspect, null, select
from sqlalchemy.exc import SQLAlchemyError

from rebalancer.jobs import tasks
from rebalancer.jobs.triggers import describe_trigger
from rebalancer.store import RunOutcome, Store, create_store_engine, resolve_db_url
from rebalancer.store.scheduler_tables import SCHEDULER_JOBS_TABLE

log = logging.getLogger("rebalancer.jobs")

JOB_DEFAULTS = {"coalesce": True, "max_instances": 1, "misfire_grace_time": 600}
"""A late or piled-up job runs once, never twice at once; up to 10 minutes late still runs."""

_create_lock = threading.Lock()
_JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


class JobNotFound(LookupError):
    def __init__(self, job_id: str) -> None:
        super().__init__(f"no job {job_id!r} in the job store")
        self.job_id = job_id


class DurableJobStore(SQLAlchemyJobStore):
    """SQLAlchemyJobStore that never deletes a job it cannot restore.

    APScheduler's store deletes any row it fails to unpickle (a renamed job function, a missing
    module), silently losing the schedule. This one logs the job as broken, leaves the row for
    ``jobs list`` to show and ``jobs remove`` to delete, and skips it (also when computing the
    next wake-up, so a broken due job cannot make the scheduler spin).
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(tablename=SCHEDULER_JOBS_TABLE, **kwargs)
        self.broken: dict[str, str] = {}
        self._broken_lock = threading.Lock()

    def start(self, scheduler: Any, alias: str) -> None:
        """Create APScheduler's table if missing, tolerating a concurrent creator (a CLI call
        and a starting scheduler): APScheduler's own check-then-create races."""
        BaseJobStore.start(self, scheduler, alias)
        with _create_lock:
            try:
                self.jobs_t.create(self.engine, checkfirst=True)
            except SQLAlchemyError:
                if not inspect(self.engine).has_table(self.jobs_t.name,
                                                      schema=self.jobs_t.schema):
                    raise

    def _restore(self, job_id: str, state: bytes) -> Job | None:
        try:
            return self._reconstitute_job(state)
        except Exception as exc:
            reason = tasks.one_line(exc)
            with self._broken_lock:
                first = job_id not in self.broken
                self.broken[job_id] = reason
            if first:
                log.error("job %r cannot be restored and is skipped (kept in the store; "
                          "`partctl jobs remove %s` deletes it): %s", job_id, job_id, reason)
            return None

    def _skip_broken(self) -> Any:
        with self._broken_lock:
            ids = list(self.broken)
        return self.jobs_t.c.id.notin_(ids) if ids else None

    def lookup_job(self, job_id: str) -> Job | None:
        with self.engine.begin() as conn:
            state = conn.execute(select(self.jobs_t.c.job_state)
                                 .where(self.jobs_t.c.id == job_id)).scalar()
        return None if state is None else self._restore(job_id, state)

    def _get_jobs(self, *conditions: Any) -> list[Job]:
        skip = self._skip_broken()
        where = [c for c in (*conditions, skip) if c is not None]
        q = select(self.jobs_t.c.id, self.jobs_t.c.job_state).order_by(
            self.jobs_t.c.next_run_time)
        if where:
            q = q.where(and_(*where))
        with self.engine.begin() as conn:
            rows = list(conn.execute(q))
        jobs = [self._restore(row.id, row.job_state) for row in rows]
        return [j for j in jobs if j is not None]

    def get_next_run_time(self) -> datetime | None:
        from apscheduler.util import utc_timestamp_to_datetime

        q = (select(self.jobs_t.c.next_run_time)
             .where(self.jobs_t.c.next_run_time != null())
             .order_by(self.jobs_t.c.next_run_time).limit(1))
        skip = self._skip_broken()
        if skip is not None:
            q = q.where(skip)
        with self.engine.begin() as conn:
            return utc_timestamp_to_datetime(conn.execute(q).scalar())

    def all_broken(self) -> dict[str, str]:
        """Every stored job that cannot be restored now, with the reason (one line)."""
        with self.engine.begin() as conn:
            rows = list(conn.execute(select(self.jobs_t.c.id, self.jobs_t.c.job_state)))
        out = {}
        for row in rows:
            try:
                self._reconstitute_job(row.job_state)
            except Exception as exc:
                out[row.id] = tasks.one_line(exc)
        return out

    def raw_states(self) -> dict[str, Mapping[str, Any]]:
        """Each stored job's pickled state, with its function reference left as text (for
        checking references without importing them)."""
        with self.engine.begin() as conn:
            rows = list(conn.execute(select(self.jobs_t.c.id, self.jobs_t.c.job_state)))
        return {row.id: pickle.loads(row.job_state) for row in rows}


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
    """A (not started) scheduler whose job store is APScheduler's table in the store's
    database; the store's own tables are migrated first."""
    url = resolve_db_url(db)
    Store.open(url).close()  # migrations to head before anything else touches the database
    jobstore = DurableJobStore(engine=create_store_engine(url))
    options: dict[str, Any] = {"jobstores": {"default": jobstore},
                               "executors": {"default": ThreadPoolExecutor(max_workers)},
                               "job_defaults": dict(JOB_DEFAULTS)}
    if timezone is not None:
        options["timezone"] = timezone
    return Scheduler(**options)


@contextmanager
def _editing(db: str | None) -> Iterator[Scheduler]:
    scheduler = make_scheduler(db)
    scheduler.start(paused=True)
    try:
        yield scheduler
    finally:
        scheduler.shutdown(wait=False)


def _store_of(scheduler: Scheduler) -> DurableJobStore:
    store = scheduler._lookup_jobstore("default")
    assert isinstance(store, DurableJobStore)
    return store


@dataclass(frozen=True, slots=True, kw_only=True)
class JobInfo:
    id: str
    kind: str | None
    func_ref: str
    schedule: str
    next_run_time: datetime | None
    kwargs: Mapping[str, Any]
    broken: str | None = None
    """Why the job cannot be restored (its function does not resolve), else None."""


def _kind_of(func_ref: str) -> str | None:
    for kind, ref in tasks.JOB_FUNCTIONS.items():
        if ref == func_ref:
            return kind
    return None


def _info(job: Job) -> JobInfo:
    return JobInfo(id=job.id, kind=_kind_of(job.func_ref), func_ref=job.func_ref,
                   schedule=describe_trigger(job.trigger), next_run_time=job.next_run_time,
                   kwargs=dict(job.kwargs))


def new_job_id(kind: str) -> str:
    return f"{kind}-{os.urandom(4).hex()}"


def add_job(db: str | None, *, kind: str, trigger: Any, kwargs: Mapping[str, Any],
            job_id: str | None = None) -> JobInfo:
    """Store a job of ``kind`` (a key of JOB_FUNCTIONS) with plain JSON-able ``kwargs``.

    ``job_id`` and ``db`` (the database the job records its runs in, resolved to an absolute
    URL) are added to the kwargs.
    """
    if kind not in tasks.JOB_FUNCTIONS:
        raise ValueError(f"unknown job kind {kind!r} (expected one of "
                         f"{', '.join(tasks.JOB_FUNCTIONS)})")
    job_id = job_id or new_job_id(kind)
    if not _JOB_ID.fullmatch(job_id):
        raise ValueError(f"bad job id {job_id!r}: letters, digits, '.', '_' and '-', "
                         f"at most 100")
    url = resolve_db_url(db)
    full = {**kwargs, "job_id": job_id, "db": url}
    try:
        json.dumps(full)
    except TypeError as exc:
        raise ValueError(f"job arguments must be plain JSON values: {exc}") from None
    from apscheduler.jobstores.base import ConflictingIdError

    with _editing(url) as scheduler:
        try:
            job = scheduler.add_job(tasks.JOB_FUNCTIONS[kind], trigger=trigger, id=job_id,
                                    name=f"{kind} {job_id}", kwargs=full)
        except ConflictingIdError:
            raise ValueError(f"a job with id {job_id!r} already exists") from None
        stored = scheduler.get_job(job.id)
        assert stored is not None
        return _info(stored)


def list_jobs(db: str | None = None) -> list[JobInfo]:
    """Every stored job, sorted by id; jobs that cannot be restored are listed as broken."""
    with _editing(db) as scheduler:
        store = _store_of(scheduler)
        broken = store.all_broken()
        jobs = [_info(j) for j in scheduler.get_jobs()]
        for job_id, reason in broken.items():
            state = store.raw_states().get(job_id, {})
            ref = str(state.get("func", "?"))
            jobs.append(JobInfo(id=job_id, kind=_kind_of(ref), func_ref=ref, schedule="?",
                                next_run_time=None, kwargs=dict(state.get("kwargs", {})),
                                broken=reason))
    return sorted(jobs, key=lambda j: j.id)


def remove_job(db: str | None, job_id: str) -> None:
    from apscheduler.jobstores.base import JobLookupError

    with _editing(db) as scheduler:
        try:
            scheduler.remove_job(job_id)
        except JobLookupError:
            raise JobNotFound(job_id) from None


def run_job_now(db: str | None, job_id: str) -> tasks.RunSummary:
    """Run a stored job once, here and now, in the foreground; its schedule is unchanged."""
    with _editing(db) as scheduler:
        job = scheduler.get_job(job_id)
        broken = _store_of(scheduler).broken.get(job_id)
    if broken is not None:
        raise ValueError(f"job {job_id!r} cannot be restored: {broken}")
    if job is None:
        raise JobNotFound(job_id)
    return job.func(*job.args, **job.kwargs)


# --- the foreground scheduler ------------------------------------------------------------------


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap_stale_runs(store: Store) -> int:
    """Mark runs left 'running' by a process of this host that no longer exists as interrupted
    (a scheduler killed without a chance to record its runs)."""
    host = socket.gethostname()
    stale = []
    for run in store.runs(outcome=RunOutcome.RUNNING, limit=None):
        h, _, pid = (run.runner or "").rpartition(":")
        if h == host and pid.isdigit() and not _pid_alive(int(pid)):
            stale.append(run.id)
    return store.interrupt_runs(stale, "the process running it exited before it finished")


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
