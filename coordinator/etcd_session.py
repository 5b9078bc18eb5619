"""The etcd session: a lease kept alive over one long-lived keep-alive stream.

A broken stream means the connection dropped: SUSPENDED, fail over to the next host and reopen
at once. The first answer on the new stream tells whether the lease still lives (CONNECTED, same
session) or is gone (TTL 0: LOST, grant a new lease, CONNECTED with the new id).
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Iterator
from typing import Any

import grpc
from etcd3 import etcdrpc

from coordinator.errors import CoordinatorError
from coordinator.etcd_conn import Connection, translate
from coordinator.model import SessionState

log = logging.getLogger(__name__)

RETRY_DELAY = 0.2


def lease_ttl(session_timeout: float) -> int:
    """etcd leases have whole-second TTLs; below 2 s the server raises them anyway."""
    return max(2, math.ceil(session_timeout))


class LeaseKeeper:
    """Owns the session lease and the thread that keeps it alive."""

    def __init__(self, conn: Connection, session_timeout: float,
                 on_state: Callable[[SessionState], None]) -> None:
        self._conn = conn
        self.ttl = lease_ttl(session_timeout)
        self.interval = self.ttl / 3
        self._on_state = on_state
        self.lease_id = 0
        self._stop = threading.Event()
        self._call: Any = None
        self._thread: threading.Thread | None = None
        self._renew_lock = threading.Lock()

    def grant(self) -> int:
        with self._conn.translating("grant session lease", self._conn.generation):
            resp = self._conn.lease.LeaseGrant(etcdrpc.LeaseGrantRequest(TTL=self.ttl),
                                               self._conn.request_timeout)
        self.lease_id = resp.ID
        return resp.ID

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="partctl-etcd-lease", daemon=True)
        self._thread.start()

    def _requests(self, done: threading.Event) -> Iterator[Any]:
        while not done.is_set() and not self._stop.is_set():
            yield etcdrpc.LeaseKeepAliveRequest(ID=self.lease_id)
            done.wait(self.interval)

    def _run(self) -> None:
        suspended = False
        while not self._stop.is_set():
            generation = self._conn.generation
            done = threading.Event()
            try:
                self._call = call = self._conn.lease.LeaseKeepAlive(self._requests(done))
                for resp in call:
                    if self._stop.is_set():
                        break
                    if resp.TTL <= 0:
                        self._renew_after_loss(resp.ID)
                    elif suspended:
                        self._on_state(SessionState.CONNECTED)
                    suspended = False
            except grpc.RpcError as exc:
                if self._stop.is_set():
                    break
                if not suspended:
                    suspended = True
                    self._on_state(SessionState.SUSPENDED)
                if not self._conn.stream_broke(exc, generation):
                    log.warning("lease keep-alive failed: %s", translate(exc, "keep-alive"))
            except ValueError:  # the channel was closed under us by a failover
                pass
            finally:
                done.set()
            self._stop.wait(RETRY_DELAY)

    def _renew_after_loss(self, lease_id: int) -> None:
        """Lease ``lease_id`` is gone: report LOST, then grant a new one until it works."""
        with self._renew_lock:
            if lease_id != self.lease_id:
                return  # replaced already
            self._on_state(SessionState.LOST)
            while not self._stop.is_set():
                try:
                    self.grant()
                except CoordinatorError as exc:
                    log.info("granting a new session lease failed, retrying: %s", exc)
                    self._stop.wait(RETRY_DELAY)
                    continue
                self._on_state(SessionState.CONNECTED)
                return

    def replace_if_expired(self, lease_id: int) -> bool:
        """A write found ``lease_id`` missing: confirm, then start a new session (LOST,
        CONNECTED) without waiting for the next keep-alive. True if a newer lease is in place."""
        if lease_id != self.lease_id:
            return True
        try:
            resp = self._conn.lease.LeaseTimeToLive(
                etcdrpc.LeaseTimeToLiveRequest(ID=lease_id), self._conn.request_timeout)
        except (grpc.RpcError, ValueError):
            return False
        if resp.TTL > 0:
            return False
        self._renew_after_loss(lease_id)
        return lease_id != self.lease_id

    def stop(self) -> None:
        self._stop.set()
        call = self._call
        if call is not None:
            call.cancel()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def revoke(self, timeout: float) -> None:
        try:
            self._conn.lease.LeaseRevoke(etcdrpc.LeaseRevokeRequest(ID=self.lease_id), timeout)
        except (grpc.RpcError, ValueError) as exc:  # the server ends it after the TTL anyway
            log.info("revoking lease %x failed: %s", self.lease_id, exc)
