"""Persistent data and children watches over ZooKeeper's one-shot watches, for the ZooKeeper backend.

Each watch is a chain of async reads that set a one-shot watch: ``get``/``get_children`` with a
watcher, or ``exists`` with a watcher while the node is missing. A firing watcher (or kazoo's
"watches reset" event on a dropped connection or expired session) re-arms the chain; a read that
fails for want of a connection is re-armed when the session is CONNECTED again (the backend
calls :meth:`WatchSet.rearm_all`).

Ordering: every read completes on kazoo's single completion thread in the order the server
answered, and a later answer on a session never shows an older state, so reporting a state only
when it differs from the last one reported keeps states moving forward and drops duplicates from
overlapping chains. Events go to the caller through the backend's dispatcher, never on a kazoo
thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import NoNodeError

from coordinator.base import WatchHandle, same_state
from coordinator.model import Stat

if TYPE_CHECKING:
    from coordinator.zookeeper import ZooKeeperCoordinator

_UNSET = object()


class _Chain:
    """One persistent watch: arms kazoo one-shot watches and reports each new state."""

    __slots__ = ("owner", "handle", "kind", "last", "watcher", "__weakref__")

    def __init__(self, owner: ZooKeeperCoordinator, handle: WatchHandle, kind: str) -> None:
        self.owner = owner
        self.handle = handle
        self.kind = kind
        self.last: Any = _UNSET
        # One bound method per chain: kazoo keeps watchers in sets, so re-arming never stacks.
        self.watcher = self._fired

    def arm(self) -> None:
        if not self.handle.active:
            return
        kazoo = self.owner.kazoo
        if self.kind == "data":
            kazoo.get_async(self.handle.path, watch=self.watcher).rawlink(self._got)
        else:
            kazoo.get_children_async(self.handle.path, watch=self.watcher).rawlink(self._got)

    def _fired(self, _event: Any) -> None:  # kazoo's watch thread
        self.arm()

    def _got(self, result: Any) -> None:  # kazoo's completion thread, in server order
        if not self.handle.active:
            return
        exc = result.exception
        if exc is None:
            value = result.value
            if self.kind == "data":
                data, zstat = value
                self._report((data, _stat(zstat)))
            else:
                self._report(sorted(value))
        elif isinstance(exc, NoNodeError):
            self.owner.kazoo.exists_async(self.handle.path, watch=self.watcher).rawlink(
                self._got_exists
            )
        else:
            self._retry()

    def _got_exists(self, result: Any) -> None:
        if not self.handle.active:
            return
        if result.exception is not None:
            self._retry()
        elif result.value is None:
            self._report(None)
        else:  # created since: read it (the exists watcher stays set, harmlessly)
            self.arm()

    def _retry(self) -> None:
        """The read failed for want of a session: re-arm now if connected again, else on
        the next CONNECTED (the backend re-arms every chain then)."""
        if self.owner.kazoo.connected and not self.owner._closed:
            self.arm()

    def _report(self, state: Any) -> None:
        if self.last is not _UNSET and same_state(self.kind, self.last, state):
            return
        self.last = state
        self.owner._deliver(self.handle, self.kind, state)


def _stat(zstat: Any) -> Stat:
    return Stat(version=zstat.version, create_id=zstat.czxid, modify_id=zstat.mzxid,
                ephemeral_owner=zstat.ephemeralOwner)


class WatchSet:
    """The active persistent watches of one backend."""

    def __init__(self, owner: ZooKeeperCoordinator) -> None:
        self._owner = owner
        self._chains: dict[WatchHandle, _Chain] = {}  # O(1) cancel of one among many
        self._lock = threading.Lock()

    def add(self, kind: str, path: str, callback: Callable[..., Any]) -> WatchHandle:
        handle = WatchHandle(path, callback, self._remove)
        chain = _Chain(self._owner, handle, kind)
        with self._lock:
            self._chains[handle] = chain
        chain.arm()
        return handle

    def _remove(self, handle: WatchHandle) -> None:
        with self._lock:
            self._chains.pop(handle, None)

    def rearm_all(self) -> None:
        """Re-arm every watch; a chain that is still armed reads once more, which is harmless."""
        with self._lock:
            chains = list(self._chains.values())
        for chain in chains:
            chain.arm()

    def cancel_all(self) -> None:
        with self._lock:
            chains, self._chains = list(self._chains.values()), {}
        for chain in chains:
            chain.handle.active = False
