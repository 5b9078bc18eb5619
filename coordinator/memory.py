"""The in-process coordinator: the embedded default and the deterministic test bed.

A named :class:`MemoryStore` plays the server; every :class:`MemoryCoordinator` connected to
``memory://NAME`` is one client session on it. Semantics follow ZooKeeper: versions from 0,
zxid-like create and modify ids, sequential suffixes from the parent's child version, ephemerals
that die with their session, watches that report states. Fault injection (``suspend``,
``resume``, ``expire_session``) drives the same session-state paths a real server would.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from coordinator import paths
from coordinator.base import Coordinator, WatchHandle, same_state
from coordinator.errors import (
    BadVersion,
    ConnectionLoss,
    CoordinatorError,
    InvalidURL,
    MultiFailed,
    NoChildrenForEphemerals,
    NodeExists,
    NoNode,
    NotEmpty,
)
from coordinator.model import (
    Capabilities,
    Check,
    Create,
    Delete,
    Op,
    OpResult,
    SessionState,
    SetData,
    Stat,
    TreeChange,
    TreeEvent,
    Watch,
)
from coordinator.url import CoordinatorURL

CAPABILITIES = Capabilities(name="memory", max_multi_ops=1000, max_multi_bytes=4 << 20)


class _Node:
    __slots__ = ("data", "version", "czxid", "mzxid", "owner", "children", "cversion")

    def __init__(self, data: bytes, zxid: int, owner: int) -> None:
        self.data = data
        self.version = 0
        self.czxid = zxid
        self.mzxid = zxid
        self.owner = owner
        self.children: set[str] = set()
        self.cversion = 0

    def stat(self) -> Stat:
        return Stat(self.version, self.czxid, self.mzxid, self.owner)


class _StoreWatch:
    """A watch as the store holds it: its client, its handle and the last state it reported."""

    __slots__ = ("client", "handle", "kind", "last")

    def __init__(self, client: MemoryCoordinator, handle: WatchHandle, kind: str) -> None:
        self.client = client
        self.handle = handle
        self.kind = kind
        self.last: Any = _UNSET


_UNSET = object()


class _TreeWatch:
    """A tree watch as the store holds it; changes wait in ``backlog`` while its client is
    suspended, as a real server's would until the client reconnects and resumes."""

    __slots__ = ("client", "handle", "slash", "backlog")

    def __init__(self, client: MemoryCoordinator, handle: WatchHandle) -> None:
        self.client = client
        self.handle = handle
        self.slash = "/" if handle.path == "/" else handle.path + "/"
        self.backlog: list[TreeChange] = []

    def covers(self, path: str) -> bool:
        return path.startswith(self.slash) or path == self.handle.path

    def push(self, changes: list[TreeChange]) -> None:
        if not self.handle.active:
            return
        if self.client.suspended:
            self.backlog.extend(changes)
            return
        self.client._deliver_tree(self.handle, TreeEvent(
            path=self.handle.path, changes=changes, revision=changes[-1].revision))

    def reconnected(self, resync: bool, revision: int) -> None:
        """Resume after a reconnect: the backlog, or (after session loss) a resync."""
        backlog, self.backlog = self.backlog, []
        if not self.handle.active:
            return
        if resync:
            self.client._deliver_tree(self.handle, TreeEvent(
                path=self.handle.path, changes=[], revision=revision, resync=True))
        elif backlog:
            self.push(backlog)


class MemoryStore:
    """The shared state behind ``memory://NAME``; one per name per process."""

    _registry: dict[str, MemoryStore] = {}
    _registry_lock = threading.Lock()

    def __init__(self, name: str) -> None:
        self.name = name
        self.lock = threading.RLock()
        self.zxid = 0
        self.nodes: dict[str, _Node] = {"/": _Node(b"", 0, 0)}
        self.watches: dict[tuple[str, str], list[_StoreWatch]] = {}
        self.tree_watches: list[_TreeWatch] = []
        self._session_ids = itertools.count(0x5E55_0000_0001)

    @classmethod
    def named(cls, name: str) -> MemoryStore:
        with cls._registry_lock:
            store = cls._registry.get(name)
            if store is None:
                store = cls._registry[name] = MemoryStore(name)
            return store

    @classmethod
    def drop(cls, name: str) -> None:
        """Forget a named store (its clients keep the old one until they close)."""
        with cls._registry_lock:
            cls._registry.pop(name, None)

    def new_session_id(self) -> int:
        return next(self._session_ids)

    # --- transactions --------------------------------------------------------------------

    def apply(self, ops: Sequence[Op], session: int) -> list[OpResult]:
        """Apply ops atomically: on the first failure undo what was done and raise MultiFailed."""
        with self.lock:
            self.zxid += 1
            zxid = self.zxid
            undo: list[Callable[[], None]] = []
            results: list[OpResult] = []
            touched: list[tuple[str, bool]] = []  # (path, created_or_deleted)
            for index, op in enumerate(ops):
                try:
                    results.append(self._apply_one(op, session, zxid, undo, touched))
                except CoordinatorError as exc:
                    for action in reversed(undo):
                        action()
                    self.zxid -= 1
                    raise MultiFailed(index, exc) from None
            self._fire(touched)
            if self.tree_watches:
                self._fire_tree(touched, zxid)
            return results

    def _apply_one(
        self,
        op: Op,
        session: int,
        zxid: int,
        undo: list[Callable[[], None]],
        touched: list[tuple[str, bool]],
    ) -> OpResult:
        nodes = self.nodes
        match op:
            case Create(path=path, data=data, ephemeral=ephemeral, sequential=sequential):
                paths.validate(path)
                if path == "/":
                    raise NodeExists(path)
                parent_path = paths.parent(path)
                parent = nodes.get(parent_path)
                if parent is None:
                    raise NoNode(parent_path, f"parent does not exist: {parent_path}")
                if parent.owner:
                    raise NoChildrenForEphemerals(parent_path)
                if sequential:
                    path = paths.sequential_name(path, parent.cversion)
                if path in nodes:
                    raise NodeExists(path)
                created = _Node(bytes(data), zxid, session if ephemeral else 0)
                name = paths.basename(path)
                nodes[path] = created
                parent.children.add(name)
                parent.cversion += 1

                def undo_create(path: str = path, parent: _Node = parent, name: str = name) -> None:
                    del nodes[path]
                    parent.children.discard(name)
                    parent.cversion -= 1

                undo.append(undo_create)
                touched.append((path, True))
                return path
            case SetData(path=path, data=data, version=version):
                node = nodes.get(paths.validate(path))
                if node is None:
                    raise NoNode(path)
                if version != -1 and version != node.version:
                    raise _version_mismatch(path, version, node.version)
                saved = (node.data, node.version, node.mzxid)
                node.data, node.version, node.mzxid = bytes(data), node.version + 1, zxid

                def undo_set(node: _Node = node, saved: tuple[bytes, int, int] = saved) -> None:
                    node.data, node.version, node.mzxid = saved

                undo.append(undo_set)
                touched.append((path, False))
                return node.stat()
            case Delete(path=path, version=version):
                node = nodes.get(paths.validate(path))
                if node is None or path == "/":
                    raise NoNode(path)
                if version != -1 and version != node.version:
                    raise _version_mismatch(path, version, node.version)
                if node.children:
                    raise NotEmpty(path)
                parent = nodes[paths.parent(path)]
                name = paths.basename(path)
                del nodes[path]
                parent.children.discard(name)
                parent.cversion += 1

                def undo_delete(
                    path: str = path, node: _Node = node, parent: _Node = parent, name: str = name
                ) -> None:
                    nodes[path] = node
                    parent.children.add(name)
                    parent.cversion -= 1

                undo.append(undo_delete)
                touched.append((path, True))
                return None
            case Check(path=path, version=version):
                node = nodes.get(paths.validate(path))
                if node is None:
                    raise NoNode(path)
                if version != -1 and version != node.version:
                    raise _version_mismatch(path, version, node.version)
                return None
        raise TypeError(f"not a coordinator op: {op!r}")

    # --- watches -------------------------------------------------------------------------

    def state_of(self, kind: str, path: str) -> Any:
        node = self.nodes.get(path)
        if kind == "data":
            return None if node is None else (node.data, node.stat())
        return None if node is None else sorted(node.children)

    def deliver(self, watch: _StoreWatch) -> None:
        """Queue the watch's current state to its client unless it already reported it."""
        if not watch.handle.active or watch.client.suspended:
            return
        state = self.state_of(watch.kind, watch.handle.path)
        if watch.last is not _UNSET and same_state(watch.kind, watch.last, state):
            return
        watch.last = state
        watch.client._deliver(watch.handle, watch.kind, state)

    def _fire(self, touched: list[tuple[str, bool]]) -> None:
        seen: set[tuple[str, str]] = set()
        for path, structural in touched:
            keys = [("data", path)]
            if structural:
                keys.append(("children", paths.parent(path)))
                keys.append(("children", path))
            for key in keys:
                if key in seen:
                    continue
                seen.add(key)
                for watch in self.watches.get(key, ()):
                    self.deliver(watch)

    def _fire_tree(self, touched: list[tuple[str, bool]], zxid: int) -> None:
        nodes = self.nodes
        changes: list[TreeChange] = []
        for path, _ in touched:
            node = nodes.get(path)
            changes.append(TreeChange(path, None, None, zxid) if node is None
                           else TreeChange(path, node.data, node.stat(), zxid))
        for tw in self.tree_watches:
            mine = changes if tw.slash == "/" else [c for c in changes if tw.covers(c.path)]
            if mine:
                tw.push(mine)

    def add_tree_watch(self, tw: _TreeWatch) -> None:
        with self.lock:
            self.tree_watches.append(tw)

    def remove_tree_watch(self, tw: _TreeWatch) -> None:
        with self.lock:
            if tw in self.tree_watches:
                self.tree_watches.remove(tw)

    def tree_watches_of(self, client: MemoryCoordinator) -> list[_TreeWatch]:
        return [tw for tw in self.tree_watches if tw.client is client]

    def add_watch(self, watch: _StoreWatch) -> None:
        with self.lock:
            self.watches.setdefault((watch.kind, watch.handle.path), []).append(watch)
            self.deliver(watch)

    def remove_watch(self, watch: _StoreWatch) -> None:
        with self.lock:
            lst = self.watches.get((watch.kind, watch.handle.path))
            if lst and watch in lst:
                lst.remove(watch)
                if not lst:
                    del self.watches[(watch.kind, watch.handle.path)]

    def watches_of(self, client: MemoryCoordinator) -> list[_StoreWatch]:
        return [w for lst in self.watches.values() for w in lst if w.client is client]

    def end_session(self, session: int) -> None:
        """Delete the session's ephemerals, as a server does when a session ends."""
        with self.lock:
            owned = [p for p, n in self.nodes.items() if n.owner == session]
            owned.sort(key=lambda p: -p.count("/"))
            if owned:
                self.apply([Delete(path=p) for p in owned], session)


def _version_mismatch(path: str, expected: int, found: int) -> BadVersion:
    """The error of a conditional op whose version is not the node's. The comparison itself
    stays inline in :meth:`MemoryStore._apply_one`, the bulk-write path, which makes no helper
    call per op."""
    return BadVersion(path, f"version mismatch on {path}: expected {expected}, found {found}")


class MemoryCoordinator(Coordinator):
    """A client session on a named in-process store."""

    capabilities = CAPABILITIES
    default_port = None

    def __init__(self, url: str, store: MemoryStore, session_timeout: float = 10.0) -> None:
        super().__init__(url)
        self.store = store
        self.session_timeout = session_timeout
        self.suspended = False
        self._expired_while_suspended = False
        self._expiry_timer: threading.Timer | None = None
        self._session = store.new_session_id()
        self._state = SessionState.CONNECTED

    @classmethod
    def from_url(
        cls, parsed: CoordinatorURL, *, timeout: float = 10.0, session_timeout: float = 10.0,
        **options: Any,
    ) -> MemoryCoordinator:
        if options:
            raise ValueError(f"memory:// takes no option {', '.join(sorted(options))}")
        if parsed.root:
            raise InvalidURL(f"memory URLs take no path: {parsed.display!r}")
        return cls(parsed.raw, MemoryStore.named(parsed.name), session_timeout=session_timeout)

    # --- session -------------------------------------------------------------------------

    @property
    def state(self) -> SessionState:
        return self._state

    @property
    def session_id(self) -> int:
        return self._session

    def _set_state(self, state: SessionState) -> None:
        self._state = state
        self._notify_state(state)

    def suspend(self) -> None:
        """Drop the connection: requests fail with ConnectionLoss and events wait for resume().

        If it stays suspended longer than the session timeout the store expires the session.
        """
        with self.store.lock:
            if self.suspended or self._closed:
                return
            self.suspended = True
            self._set_state(SessionState.SUSPENDED)
            timer = threading.Timer(self.session_timeout, self._expire_if_suspended)
            timer.daemon = True
            self._expiry_timer = timer
            timer.start()

    def _expire_if_suspended(self) -> None:
        with self.store.lock:
            if self.suspended and not self._expired_while_suspended:
                self._expired_while_suspended = True
                self.store.end_session(self._session)

    def resume(self) -> None:
        """Reconnect; a session that expired meanwhile is reported LOST, then a new one starts."""
        with self.store.lock:
            if not self.suspended:
                return
            self.suspended = False
            if self._expiry_timer is not None:
                self._expiry_timer.cancel()
            lost = self._expired_while_suspended
            if lost:
                self._expired_while_suspended = False
                self._start_new_session()
            else:
                self._set_state(SessionState.CONNECTED)
            for watch in self.store.watches_of(self):
                self.store.deliver(watch)
            for tw in self.store.tree_watches_of(self):
                tw.reconnected(lost, self.store.zxid)

    def expire_session(self) -> None:
        """Expire the session now, as the server would: ephemerals go, LOST, then a new session."""
        with self.store.lock:
            if self._closed:
                return
            if self.suspended:
                self._expire_if_suspended()
                return
            self.store.end_session(self._session)
            self._start_new_session()
            for watch in self.store.watches_of(self):
                self.store.deliver(watch)
            for tw in self.store.tree_watches_of(self):
                tw.reconnected(True, self.store.zxid)

    def _start_new_session(self) -> None:
        self._set_state(SessionState.LOST)
        self._session = self.store.new_session_id()
        self._set_state(SessionState.CONNECTED)

    def _close(self) -> None:
        with self.store.lock:
            if self._expiry_timer is not None:
                self._expiry_timer.cancel()
            for watch in self.store.watches_of(self):
                watch.handle.active = False
                self.store.remove_watch(watch)
            for tw in self.store.tree_watches_of(self):
                tw.handle.active = False
                self.store.remove_tree_watch(tw)
            if not self._expired_while_suspended:
                self.store.end_session(self._session)
            self._state = SessionState.CLOSED

    def _connected(self) -> None:
        self._check_open()
        if self.suspended:
            raise ConnectionLoss(f"{self.url}: connection suspended")

    # --- reads ---------------------------------------------------------------------------

    def get(self, path: str) -> tuple[bytes, Stat]:
        paths.validate(path)
        with self.store.lock:
            self._connected()
            node = self.store.nodes.get(path)
            if node is None:
                raise NoNode(path)
            return node.data, node.stat()

    def exists(self, path: str) -> Stat | None:
        paths.validate(path)
        with self.store.lock:
            self._connected()
            node = self.store.nodes.get(path)
            return None if node is None else node.stat()

    def children(self, path: str) -> list[str]:
        paths.validate(path)
        with self.store.lock:
            self._connected()
            node = self.store.nodes.get(path)
            if node is None:
                raise NoNode(path)
            return sorted(node.children)

    def get_many(self, paths_: Sequence[str]) -> list[tuple[bytes, Stat] | None]:
        paths.validate_all(paths_)
        with self.store.lock:
            self._connected()
            nodes = self.store.nodes
            out: list[tuple[bytes, Stat] | None] = []
            for path in paths_:
                node = nodes.get(path)
                out.append(None if node is None else (node.data, node.stat()))
            return out

    # --- writes --------------------------------------------------------------------------

    def _apply(self, ops: Sequence[Op]) -> list[OpResult]:
        with self.store.lock:
            self._connected()
            return self.store.apply(ops, self._session)

    def _single(self, op: Op) -> OpResult:
        try:
            return self._apply([op])[0]
        except MultiFailed as failure:
            raise failure.cause from None

    def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> str:
        paths.validate(path)
        if make_parents:
            for ancestor in paths.ancestors(path):
                with self.store.lock:
                    if ancestor in self.store.nodes:
                        continue
                try:
                    self._single(Create(path=ancestor))
                except NodeExists:
                    pass
        result = self._single(
            Create(path=path, data=data, ephemeral=ephemeral, sequential=sequential)
        )
        assert isinstance(result, str)
        return result

    def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        result = self._single(SetData(path=path, data=data, version=version))
        assert isinstance(result, Stat)
        return result

    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        paths.validate(path)
        if recursive:
            self._delete_tree(path)
            return
        self._single(Delete(path=path, version=version))

    def multi_async(self, ops: Sequence[Op]) -> Future[list[OpResult]]:
        future: Future[list[OpResult]] = Future()
        try:
            future.set_result(self._apply(list(ops)))
        except CoordinatorError as exc:
            future.set_exception(exc)
        return future

    # --- watches -------------------------------------------------------------------------

    def _add_watch(self, kind: str, path: str, callback: Callable[..., None]) -> Watch:
        if kind == "tree":
            tree_holder: list[_TreeWatch] = []
            handle = WatchHandle(path, callback,
                                 lambda _h: self.store.remove_tree_watch(tree_holder[0]))
            tw = _TreeWatch(self, handle)
            tree_holder.append(tw)
            self.store.add_tree_watch(tw)
            return handle
        holder: list[_StoreWatch] = []
        handle = WatchHandle(path, callback, lambda _h: self.store.remove_watch(holder[0]))
        watch = _StoreWatch(self, handle, kind)
        holder.append(watch)
        self.store.add_watch(watch)
        return handle
