"""The job lock: a job never runs twice at once, from `jobs run-now` or from any scheduler.

The lock is the run's own row. The store allows one 'running' run per job (a unique partial
index, on SQLite and PostgreSQL alike), so starting a run takes the lock and a second start fails
with RunConflict naming the holder; finishing the run, in any outcome, releases it.

A holder killed with ``kill -9`` cannot release it, so the row says how to tell it is gone: its
``runner`` (host:pid) and its ``heartbeat_at``, which a thread of the running process refreshes
every ``HEARTBEAT_EVERY`` seconds by the database's clock. Whoever next wants the job closes a
running run as interrupted (with its execution) when its process is gone from this host, or
when its heartbeat is older than ``LEASE`` (a process on another host, or a pid reused). A
holder that cannot refresh its heartbeat for about a lease, or finds its run closed by another
process, stops at its next checkpoint: it can no longer show that it holds the lock.

A database-level lock that dies with its connection (PostgreSQL advisory locks) was the other
way: exact on PostgreSQL, but SQLite has nothing like it per job, and a connection lost for a
moment would free the lock while the job still runs. One rule over the row serves both.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from datetime import datetime

from rebalancer.store import JobRun, Store

log = logging.getLogger(__name__)

HEARTBEAT_EVERY = 5.0
"""Seconds between heartbeats of a running run."""
LEASE = 60.0
"""A run whose heartbeat is older than this is taken for dead (twelve missed heartbeats)."""


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True


def holder_gone(run: JobRun, now: datetime, *, host: str, alive: Callable[[int], bool],
                lease: float) -> str | None:
    """Why the process of a run recorded as running is gone, or None when it may be alive:
    a process of this host that no longer exists, or a heartbeat older than ``lease`` at
    ``now`` (the database's time)."""
    runner_host, _, pid = (run.runner or "").rpartition(":")
    if runner_host == host and pid.isdigit() and not alive(int(pid)):
        return f"its process ({run.runner}) exited before it finished"
    last = run.heartbeat_at or run.started_at
    age = (now - last).total_seconds()
    if age > lease:
        return (f"its process ({run.runner or 'unknown'}) gave no sign of life for "
                f"{age:.0f}s")
    return None


def is_gone(run: JobRun, now: datetime) -> str | None:
    """``holder_gone`` for this host, with the lease in force."""
    return holder_gone(run, now, host=socket.gethostname(), alive=pid_alive, lease=LEASE)


class Heartbeat:
    """Refreshes a run's heartbeat from a thread while the run lasts; ``lost`` is set (with
    ``reason``) when the run can no longer show it holds the job's lock."""

    def __init__(self, store: Store, run_id: int, *, every: float | None = None,
                 lease: float | None = None) -> None:
        self.store, self.run_id = store, run_id
        self.every = HEARTBEAT_EVERY if every is None else every
        self.lease = LEASE if lease is None else lease
        self.lost = threading.Event()
        self.reason = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{run_id}",
                                        daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        last_ok = time.monotonic()
        while not self._stop.wait(self.every):
            try:
                if self.store.beat(self.run_id):
                    last_ok = time.monotonic()
                    continue
                self._lose("another process closed this run, taking its process for dead")
                return
            except Exception as exc:  # the database is unreachable: retried until the lease
                silent = time.monotonic() - last_ok
                if silent + self.every > self.lease:
                    self._lose(f"its heartbeat could not be recorded for {silent:.0f}s "
                               f"({type(exc).__name__}: {exc})".splitlines()[0])
                    return

    def _lose(self, reason: str) -> None:
        self.reason = reason
        self.lost.set()
        log.error("run %d of a job lost the job's lock: %s; it stops at its next checkpoint",
                  self.run_id, reason)
