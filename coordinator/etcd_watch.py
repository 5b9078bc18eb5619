"""Persistent data and children watches over one shared etcd watch stream per coordinator.

Each watch reads its state at a revision R, reports it, and asks etcd for every event from
R + 1 on: a data watch on its key, a children watch on ``[key, key + '0')`` (the node and its
whole subtree; only the node itself and its direct children count). Every etcd watch remembers
the last revision it processed, so when the stream breaks (connection lost, failover) it resumes
from there and no change is lost; when that revision was compacted meanwhile the watch reads the
current state instead. States are reported through the coordinator's dispatcher, in order, and
only when they differ from the last one reported.

A tree watch is one etcd watch on the node's whole range (``[key, key + '0')``, keeping only the
key itself and keys below ``key + '/'``): each watch response becomes one
:class:`~coordinator.model.TreeEvent` with its events decoded in one pass, so a mass election's
100,000 writes cost the stream a few hundred responses, not 100,000 watchers' events. It
resumes after its last revision like the others; a compacted revision becomes a ``resync``.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import grpc
from etcd3 import etcdrpc

from coordinator.base import WatchHandle, same_state
from coordinator.errors import CoordinatorError
from coordinator.etcd_txn import ROOT_STAT, stat_of
from coordinator.model import Stat, TreeChange, TreeEvent, Watch

if TYPE_CHECKING:
    from coordinator.etcd import EtcdCoordinator

log = logging.getLogger(__name__)

PUT = 0  # mvccpb.Event.PUT; DELETE is 1
RETRY_DELAY = 0.2


class _Watch:
    __slots__ = ("handle", "kind", "path", "key", "start", "end", "rev", "last", "exists",
                 "kids", "watch_id", "root", "reported")

    def __init__(self, handle: WatchHandle, kind: str, path: str, key: bytes) -> None:
        self.handle = handle
        self.kind = kind
        self.path = path
        self.key = key
        self.root = path == "/"
        self.start = key
        self.end = b""
        self.rev = 0
        self.last: Any = None
        self.exists = False
        self.kids: set[str] = set()
        self.watch_id: int | None = None
        self.reported = False


class WatchManager:
    def __init__(self, coord: EtcdCoordinator) -> None:
        self._coord = coord
        self._conn = coord._conn
        self._keys = coord._keys
        self._lock = threading.RLock()
        self._watches: set[_Watch] = set()
        self._by_handle: dict[WatchHandle, _Watch] = {}  # O(1) cancel of one among many
        self._by_id: dict[int, _Watch] = {}
        self._pending: deque[_Watch] = deque()
        self._queue: queue.SimpleQueue[Any] | None = None
        self._call: Any = None
        self._stopped = False
        self._thread: threading.Thread | None = None

    # --- registration --------------------------------------------------------------------

    def add(self, kind: str, path: str, callback: Callable[..., None]) -> Watch:
        handle = WatchHandle(path, callback, self._cancel)
        w = _Watch(handle, kind, path, self._keys.key(path) if path != "/" else self._keys.prefix)
        if kind == "children" or kind == "tree":
            w.start, w.end = (self._keys.children_range(path) if w.root
                              else (w.key, w.key + b"0"))
        elif w.root:  # the implicit root never changes
            self._emit(w, (b"", ROOT_STAT))
            return handle
        self._read(w)  # raises ConnectionLoss when disconnected: nothing registered then
        with self._lock:
            self._watches.add(w)
            self._by_handle[handle] = w
            if self._queue is not None:
                self._send_create(w)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="partctl-etcd-watch",
                                                daemon=True)
                self._thread.start()
        return handle

    def _cancel(self, handle: WatchHandle) -> None:
        with self._lock:
            w = self._by_handle.pop(handle, None)
            if w is not None and w in self._watches:
                self._watches.discard(w)
                if w.watch_id is not None:
                    self._by_id.pop(w.watch_id, None)
                    self._send(etcdrpc.WatchRequest(cancel_request=etcdrpc.WatchCancelRequest(
                        watch_id=w.watch_id)))

    # --- state ---------------------------------------------------------------------------

    def _read(self, w: _Watch) -> None:
        """Read the watched state now, report it, and remember the revision it was read at.

        A tree watch reads nothing: it starts at the current revision, and when that is read
        again (history compacted) it reports a resync, once it was armed."""
        if w.kind == "tree":
            # Any key tells the revision; the root's own key is the bare prefix, empty (which
            # etcd refuses: "key is not provided") when the store has no prefix.
            _, revision = self._coord._read_key(w.start if w.root else w.key)
            if w.reported:
                self._coord._deliver_tree(w.handle, TreeEvent(
                    path=w.path, changes=[], revision=revision, resync=True))
            w.reported = True
            w.rev = revision
            return
        if w.kind == "data":
            kv, revision = self._coord._read_key(w.key)
            w.rev = revision
            self._emit(w, None if kv is None else (kv.value, stat_of(kv)))
        else:
            names, revision = self._coord._children_at(w.path)
            w.rev = revision
            w.exists = names is not None
            w.kids = set(names or ())
            self._emit_children(w)

    def _emit(self, w: _Watch, state: Any) -> None:
        if w.reported and same_state(w.kind, w.last, state):
            return
        w.reported = True
        w.last = state
        self._coord._deliver(w.handle, w.kind, state)

    def _emit_children(self, w: _Watch) -> None:
        self._emit(w, sorted(w.kids) if (w.exists or w.root) else None)

    def _apply_tree(self, w: _Watch, events: Any) -> None:
        key, slash = w.key, (w.start if w.root else w.key + b"/")
        cut = len(self._keys.prefix)
        changes: list[TreeChange] = []
        add = changes.append
        revision = 0
        for ev in events:
            kv = ev.kv
            k = kv.key
            revision = kv.mod_revision
            if not (k.startswith(slash) or k == key):
                continue
            path = k[cut:].decode()
            if ev.type == PUT:
                add(TreeChange(path, kv.value, Stat(kv.version - 1, kv.create_revision,
                                                    revision, kv.lease), revision))
            else:
                add(TreeChange(path, None, None, revision))
        if revision:
            w.rev = revision
        if changes:
            self._coord._deliver_tree(w.handle, TreeEvent(
                path=w.path, changes=changes, revision=revision))

    def _apply_events(self, w: _Watch, events: Any) -> None:
        if w.kind == "tree":
            self._apply_tree(w, events)
            return
        if w.kind == "data":
            for ev in events:
                kv = ev.kv
                w.rev = kv.mod_revision
                self._emit(w, (kv.value, stat_of(kv)) if ev.type == PUT else None)
            return
        # The range holds every descendant (a state write under /brokers/topics reaches the
        # topics' children watch): those are skipped after a look at the key alone. Changes
        # are reported a revision at a time, as they were made.
        key, root = w.key, w.root
        slash = w.start if root else key + b"/"
        cut = len(slash)
        kids = w.kids
        pending = 0  # revision of changes not yet reported
        for ev in events:
            kv = ev.kv
            k = kv.key
            if k == key and not root:
                child = None
            elif k.startswith(slash) and k.find(b"/", cut) < 0:
                child = k[cut:].decode()
            else:
                continue
            revision = kv.mod_revision
            if pending and revision != pending:
                self._emit_children(w)
            pending = revision
            if child is None:
                w.exists = ev.type == PUT
                if not w.exists:
                    kids.clear()
            elif ev.type == PUT:
                kids.add(child)
            else:
                kids.discard(child)
        if events:
            w.rev = events[-1].kv.mod_revision
        if pending:
            self._emit_children(w)

    # --- the stream ----------------------------------------------------------------------

    def _send(self, request: Any) -> None:
        if self._queue is not None:
            self._queue.put(request)

    def _send_create(self, w: _Watch) -> None:
        w.watch_id = None
        self._pending.append(w)
        self._send(etcdrpc.WatchRequest(create_request=etcdrpc.WatchCreateRequest(
            key=w.start, range_end=w.end, start_revision=w.rev + 1)))

    @staticmethod
    def _requests(q: queue.SimpleQueue[Any]) -> Iterator[Any]:
        while True:
            item = q.get()
            if item is None:
                return
            yield item

    def _run(self) -> None:
        while not self._stopped:
            generation = self._conn.generation
            q: queue.SimpleQueue[Any] = queue.SimpleQueue()
            try:
                call = self._conn.watch_stub().Watch(self._requests(q))
                with self._lock:
                    if self._stopped:
                        call.cancel()
                        return
                    self._call, self._queue = call, q
                    self._pending.clear()
                    self._by_id.clear()
                    for w in self._watches:
                        self._send_create(w)
                for resp in call:
                    with self._lock:
                        self._handle(resp)
            except grpc.RpcError as exc:
                if self._stopped:
                    return
                if not self._conn.stream_broke(exc, generation):
                    log.warning("etcd watch stream failed: %s", exc)
            except (ValueError, CoordinatorError) as exc:  # closed channel; failed re-read
                log.info("etcd watch stream interrupted: %s", exc)
            finally:
                with self._lock:
                    if self._queue is q:
                        self._queue = None
                q.put(None)
            if self._stopped:
                return
            threading.Event().wait(RETRY_DELAY)

    def _handle(self, resp: Any) -> None:
        if resp.created:
            if not self._pending:
                return
            w = self._pending.popleft()
            w.watch_id = resp.watch_id
            if w in self._watches:
                self._by_id[resp.watch_id] = w
            else:
                self._send(etcdrpc.WatchRequest(cancel_request=etcdrpc.WatchCancelRequest(
                    watch_id=resp.watch_id)))
            if not resp.canceled:
                return
        found = self._by_id.get(resp.watch_id)
        if found is None:
            return
        w = found
        if resp.canceled:
            self._by_id.pop(resp.watch_id, None)
            if resp.compact_revision:  # missed history: report the current state instead
                self._read(w)
            else:
                log.warning("etcd cancelled watch on %s: %s", w.path, resp.cancel_reason)
            self._send_create(w)
            return
        if resp.events:
            self._apply_events(w, resp.events)

    def close(self) -> None:
        with self._lock:
            self._stopped = True
            for w in self._watches:
                w.handle.active = False
            self._watches.clear()
            self._by_handle.clear()
            call, q = self._call, self._queue
        if call is not None:
            call.cancel()
        if q is not None:
            q.put(None)
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

