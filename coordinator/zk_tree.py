"""Tree watches on ZooKeeper: one persistent recursive watch (``addWatch``, 3.6+) per tree.

kazoo 2.11 neither sends ``addWatch`` nor knows its notifications: they arrive on its connection
thread as NodeCreated / NodeDataChanged / NodeDeleted events with the full (chrooted) path, which
kazoo hands to whatever one-shot watchers it holds for that path.
:func:`coordinator.kazoo_patches.route_node_events` lets kazoo still do exactly that, and then
this module routes each event to the tree watches covering its path.

Notifications carry no data, so a tree gathers the paths notified and reads them with one
read-only multi (:class:`~coordinator.zk_protocol.MultiRead`); notifications that arrive while
that read is in flight make the next batch. A tree behind by a whole batch or more (a standby
behind a mass election) has up to :data:`IN_FLIGHT` reads in flight, so that each does not wait
for the one before it to come back: behind a controller's stream of writes, one read at a time
left a standby at 200,000 partitions 159,000 changes behind, and its failover waited for them.
ZooKeeper sends a session's notifications in order and before any later reply, so a batch's data
is at least as new as its notifications (possibly newer: a change may be reported with a later
state of its node, never an older one), and batches go to the dispatcher in the order they were
taken, whatever order they are answered in.

Cancelling the last tree on a path removes the server's watch (``removeWatches``), so that a
session that stops following a tree, such as a standby that becomes the active controller, is no
longer told of every write under it.

A persistent watch lives on the connection: kazoo re-registers only its own watches after a
reconnect, so on every CONNECTED each tree adds its watch again and, once the server has it,
reports ``resync`` (changes in between are not recoverable). A failed read does the same.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from coordinator.base import WatchHandle
from coordinator.kazoo_patches import route_node_events
from coordinator.model import Stat, TreeChange, TreeEvent
from coordinator.zk_protocol import AddWatch, MultiRead, RemoveWatches

if TYPE_CHECKING:
    from coordinator.zookeeper import ZooKeeperCoordinator

log = logging.getLogger(__name__)

BATCH = 1000  # notifications per bulk read: the request must stay far below jute.maxbuffer
IN_FLIGHT = 4  # bulk reads at once, while a whole batch or more waits


class _Tree:
    __slots__ = ("owner", "handle", "full", "slash", "cut", "lock", "pending", "generation",
                 "taken", "delivered", "answered")

    def __init__(self, owner: ZooKeeperCoordinator, handle: WatchHandle) -> None:
        self.owner = owner
        self.handle = handle
        self.full = owner.root + handle.path if handle.path != "/" else (owner.root or "/")
        self.slash = self.full.rstrip("/") + "/"
        self.cut = len(owner.root)
        self.lock = threading.Lock()
        self.pending: deque[tuple[str, bool, int]] = deque()  # (chrooted path, deleted, zxid)
        self.generation = 0  # a new one drops the answers of reads taken before it
        self.taken = 0  # batches taken in this generation (a batch's number is its order)
        self.delivered = 0  # batches delivered in this generation (the rest are in flight,
        # or answered and waiting for one taken before them)
        self.answered: dict[int, list[TreeChange]] = {}  # answered, not yet deliverable

    def covers(self, path: str) -> bool:
        return path.startswith(self.slash) or path == self.full

    # --- kazoo's connection thread -------------------------------------------------------

    def notified(self, path: str, deleted: bool, zxid: int) -> None:
        with self.lock:
            self.pending.append((path, deleted, zxid))
            fetches = self._start()
        self._fetch_all(fetches)

    def _start(self) -> list[tuple[list[tuple[str, bool, int]], int, int]]:
        """The batches to read now (under the lock), each with its generation and number: one
        when none is in flight, and more while a whole batch waits and reads are fewer than
        :data:`IN_FLIGHT`."""
        fetches = []
        pending = self.pending
        while pending and ((out := self.taken - self.delivered) == 0
                           or (out < IN_FLIGHT and len(pending) >= BATCH)):
            fetches.append((self._take(), self.generation, self.taken))
            self.taken += 1
        return fetches

    def _fetch_all(self, fetches: list[tuple[list[tuple[str, bool, int]], int, int]]) -> None:
        """Send the reads of ``fetches``. A batch of deletions alone has nothing to read: it is
        done here, and what that starts is taken in the same loop (a million deletions are a
        thousand such batches one after another, not as many nested calls)."""
        while fetches:
            more = []
            for batch, generation, number in fetches:
                wanted = list(dict.fromkeys(p for p, deleted, _ in batch if not deleted))
                if not wanted:
                    more.extend(self._done(batch, generation, number, {}))
                    continue
                self.owner._call(MultiRead(wanted)).rawlink(
                    lambda result, batch=batch, generation=generation, number=number,
                    wanted=wanted: self._fetched(batch, generation, number, wanted, result))
            fetches = more

    def _fetched(self, batch: list[tuple[str, bool, int]], generation: int, number: int,
                 wanted: list[str], result: Any) -> None:  # kazoo's completion thread
        if result.exception is not None:
            with self.lock:
                if generation != self.generation:
                    return
                self._restart()  # (the reads still in flight are dropped as they come)
            self._resync()
            return
        self._fetch_all(self._done(batch, generation, number,
                                   dict(zip(wanted, result.value, strict=True))))

    def _restart(self) -> None:
        """Forget what was notified and read so far: a new generation (under the lock)."""
        self.generation += 1
        self.pending.clear()
        self.taken = self.delivered = 0
        self.answered.clear()

    def _done(self, batch: list[tuple[str, bool, int]], generation: int, number: int,
              items: dict[str, Any]) -> list[tuple[list[tuple[str, bool, int]], int, int]]:
        """Deliver what is answered, in order; returns the batches to read next."""
        cut = self.cut
        changes: list[TreeChange] = []
        add = changes.append
        for path, deleted, zxid in batch:
            item = None if deleted else items.get(path)
            if item is None or type(item) is int:
                add(TreeChange(path[cut:] or "/", None, None, zxid))
            else:
                stat: Stat = item[1]
                add(TreeChange(path[cut:] or "/", item[0], stat, max(zxid, stat.modify_id)))
        with self.lock:
            if generation != self.generation:
                return []
            # Delivered in the order taken: a batch of deletions alone is done before the
            # reads taken before it are answered.
            answered = self.answered
            answered[number] = changes
            while self.delivered in answered:
                ready = answered.pop(self.delivered)
                self.delivered += 1
                if ready:
                    self.owner._deliver_tree(self.handle, TreeEvent(
                        path=self.handle.path, changes=ready,
                        revision=max(c.revision for c in ready)))
            return self._start()

    def _take(self) -> list[tuple[str, bool, int]]:
        """The next batch of notifications, from the front (under the lock). Those behind it
        stay where they are: a standby behind a mass election holds a million of them, and
        slicing the rest off each time copied them all once a batch."""
        pending = self.pending
        if len(pending) <= BATCH:
            batch = list(pending)
            pending.clear()
            return batch
        take = pending.popleft
        return [take() for _ in range(BATCH)]

    # --- (re)arming ----------------------------------------------------------------------

    def arm(self, resync: bool) -> Any:
        """Add the persistent recursive watch; report a resync once the server has it."""
        with self.lock:
            self._restart()
        result = self.owner._call(AddWatch(self.full))
        if resync:
            result.rawlink(lambda r: self._resync() if r.exception is None else None)
        return result

    def _resync(self) -> None:
        if self.handle.active:
            self.owner._deliver_tree(self.handle, TreeEvent(
                path=self.handle.path, changes=[], revision=self.owner.kazoo.last_zxid or 0,
                resync=True))


class TreeWatches:
    """The tree watches of one ZooKeeper backend, and the hook into kazoo's connection."""

    def __init__(self, owner: ZooKeeperCoordinator) -> None:
        self._owner = owner
        self._trees: dict[WatchHandle, _Tree] = {}
        self._routes: tuple[_Tree, ...] = ()  # the trees, read on kazoo's thread without a lock
        self._lock = threading.Lock()
        self._hooked = False

    def add(self, path: str, callback: Callable[..., Any]) -> WatchHandle:
        handle = WatchHandle(path, callback, self._remove)
        tree = _Tree(self._owner, handle)
        self._hook()
        with self._lock:
            self._trees[handle] = tree
            self._routes = tuple(self._trees.values())
        try:
            self._owner._wait(tree.arm(resync=False), path)
        except Exception:
            self._remove(handle)
            raise
        return handle

    def _remove(self, handle: WatchHandle) -> None:
        """Forget the tree, and remove its persistent watch from the server unless another
        tree of this session watches the same path (the server keeps one watch per path).
        Events already on their way for a path no tree covers any more are dropped as they arrive."""
        with self._lock:
            tree = self._trees.pop(handle, None)
            self._routes = tuple(self._trees.values())
            if tree is None or any(t.full == tree.full for t in self._trees.values()):
                return
        if self._owner.kazoo.connected and not self._owner._closed:
            # Best effort: without a connection the server-side watch goes with the session, or
            # stays until it does (its events are dropped here).
            self._owner._call(RemoveWatches(tree.full))

    def rearm_all(self) -> None:
        with self._lock:
            trees = list(self._trees.values())
        for tree in trees:
            tree.arm(resync=True)

    def cancel_all(self) -> None:
        with self._lock:
            trees, self._trees = list(self._trees.values()), {}
            self._routes = ()
        for tree in trees:
            tree.handle.active = False

    def _hook(self) -> None:
        with self._lock:
            if self._hooked:
                return
            self._hooked = True
        route_node_events(self._owner.kazoo, self._route)

    def _route(self, path: str, deleted: bool, zxid: int) -> None:  # kazoo's connection thread
        for tree in self._routes:
            if tree.covers(path):
                tree.notified(path, deleted, zxid)
