"""The ZooKeeper backend, over kazoo: ``zookeeper://h1:2181,h2:2181/chroot`` (alias ``zk://``).

kazoo is imported here, and this module only when a ZooKeeper URL is used. kazoo's exceptions
are translated once, in :func:`_translate`; what reaches into kazoo's internals is in
:mod:`coordinator.kazoo_patches`, which also refuses a kazoo it is not tested with. kazoo runs
three threads of its own (connection, completions, watch events); nothing here blocks on them,
and every event for the caller goes through the base class dispatcher. Bulk reads use
ZooKeeper's read-only multi and bulk writes a leaner multi codec, both in
:mod:`coordinator.zk_protocol`; watches live in :mod:`coordinator.zk_watch`.
"""

from __future__ import annotations

import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from kazoo import exceptions as kx
from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import Callback, KazooState

from coordinator import kazoo_patches, paths
from coordinator.base import Coordinator
from coordinator.credentials import Credentials
from coordinator.errors import (
    BadVersion,
    ClosedError,
    ConnectionFailed,
    ConnectionLoss,
    CoordinatorError,
    InvalidPath,
    MultiFailed,
    NoChildrenForEphemerals,
    NodeExists,
    NoNode,
    NotAuthorized,
    NotEmpty,
    OperationTimeout,
    RequestTooLarge,
    SessionExpired,
)
from coordinator.model import (
    Capabilities,
    Create,
    Delete,
    Op,
    OpResult,
    SessionState,
    Stat,
    Watch,
)
from coordinator.url import CoordinatorURL
from coordinator.zk_io import ReadAheadHandler
from coordinator.zk_protocol import (
    FRAME_BYTES,
    MultiRead,
    MultiWrite,
    OpError,
    encoded_op_size,
    is_sensitive,
    open_acl,
    secure_acl,
)
from coordinator.zk_tree import TreeWatches
from coordinator.zk_watch import WatchSet

SYNC_ROUNDS = 3  # read, look again at a vanished node, read it if it came back

#: ZooKeeper's default jute.maxbuffer: a longer request makes the server drop the connection.
JUTE_MAXBUFFER = 0xFFFFF
#: Encoded bytes of the ops in one multi: jute.maxbuffer less the frame, with a margin.
MULTI_BYTES_LIMIT = 1_000_000
assert MULTI_BYTES_LIMIT + FRAME_BYTES < JUTE_MAXBUFFER
#: Bulk writes cut multis at about this size (chunks of a few hundred KB pipeline better than
#: ones of a megabyte: benchmarks/coordinator.py).
MULTI_CHUNK_TARGET = 256 << 10

#: Paths in the probe that starts a bulk read, and at most in any later read-only multi.
READ_PROBE, READ_BATCH_MAX = 200, 10_000
#: Aim for responses of about this size (far below jute.maxbuffer) and requests below it too.
READ_BATCH_TARGET_BYTES = 256 << 10
READ_IN_FLIGHT = 4

#: How a server without multiRead (before 3.6) may answer one.
_NO_MULTI_READ = (kx.UnimplementedError, kx.MarshallingError, struct.error)

_STATES = {
    KazooState.CONNECTED: SessionState.CONNECTED,
    KazooState.SUSPENDED: SessionState.SUSPENDED,
    KazooState.LOST: SessionState.LOST,
}

_NODE_ERRORS: list[tuple[type[Exception], type[CoordinatorError]]] = [
    (kx.NoNodeError, NoNode),
    (kx.NodeExistsError, NodeExists),
    (kx.BadVersionError, BadVersion),
    (kx.NotEmptyError, NotEmpty),
    (kx.NoChildrenForEphemeralsError, NoChildrenForEphemerals),
    (kx.BadArgumentsError, InvalidPath),
]


def _translate(exc: BaseException, path: str | None = None, *, closed: bool = False
               ) -> CoordinatorError:
    """The coordinator error for a kazoo (or handler) exception, with the cause chained."""
    out: CoordinatorError
    if isinstance(exc, CoordinatorError):
        return exc
    for kazoo_type, ours in _NODE_ERRORS:
        if isinstance(exc, kazoo_type):
            out = ours(path or "?")
            break
    else:
        if isinstance(exc, kx.ConnectionClosedError) or closed:
            out = ClosedError(f"ZooKeeper client closed: {exc}")
        elif isinstance(exc, (kx.NoAuthError, kx.AuthFailedError)):
            out = NotAuthorized(f"ZooKeeper refused access{_on(path)}: not authorized (are "
                                f"the coordinator credentials right?)")
        elif isinstance(exc, kx.SessionExpiredError):
            out = SessionExpired(f"ZooKeeper session expired{_on(path)}")
        elif isinstance(exc, (KazooTimeoutError, kx.OperationTimeoutError,
                              kx.RequestTimeoutError)):
            out = OperationTimeout(f"ZooKeeper request timed out{_on(path)}")
        elif isinstance(exc, (kx.ConnectionLoss, kx.ConnectionDropped)):
            out = ConnectionLoss(f"ZooKeeper connection lost{_on(path)}")
        else:
            out = CoordinatorError(f"ZooKeeper error{_on(path)}: {exc!r}")
    out.__cause__ = exc
    return out


def _on(path: str | None) -> str:
    return f" on {path}" if path else ""


def _op_error(code: int, path: str) -> CoordinatorError:
    return _translate(kx.EXCEPTIONS[code](), path)


def _multi_error(code: int, op: Op) -> CoordinatorError:
    """A failed op's error; a create's missing or ephemeral parent is named, as in memory."""
    error = kx.EXCEPTIONS[code]()
    if isinstance(op, Create) and isinstance(error, (kx.NoNodeError,
                                                     kx.NoChildrenForEphemeralsError)):
        return _translate(error, paths.parent(op.path))
    return _translate(error, op.path)


def _stat(zstat: Any) -> Stat:
    return Stat(zstat.version, zstat.czxid, zstat.mzxid, zstat.ephemeralOwner)


def _kazoo_acl(path: str) -> list[Any]:
    """kazoo's form of :func:`coordinator.zk_protocol.secure_acl` for ``path``."""
    from kazoo.security import CREATOR_ALL_ACL, READ_ACL_UNSAFE

    return list(CREATOR_ALL_ACL) if is_sensitive(path) else [*CREATOR_ALL_ACL, *READ_ACL_UNSAFE]


def _hosts_string(parsed: CoordinatorURL) -> str:
    hosts = ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in parsed.hosts)
    return hosts + parsed.root


class ZooKeeperCoordinator(Coordinator):
    """A ZooKeeper session through kazoo; ``kazoo`` is the underlying KazooClient.

    Requests made while the connection is down fail at once with :class:`ConnectionLoss` (kazoo
    would queue them until it reconnects), as the memory backend does. ``secure_acls``: nodes
    are created with Kafka's ``zookeeper.set.acl`` ACLs (see :func:`~coordinator.zk_protocol.
    secure_acl`), else open to everyone.
    """

    default_port = 2181

    def __init__(self, url: str, client: KazooClient, *, request_timeout: float,
                 secure_acls: bool = False) -> None:
        super().__init__(url)
        self.kazoo = client
        self.root = client.chroot or ""
        self.request_timeout = request_timeout
        self.secure_acls = secure_acls
        self._acl = secure_acl if secure_acls else open_acl
        self.capabilities = Capabilities(
            name="zookeeper", max_multi_ops=None, max_multi_bytes=MULTI_BYTES_LIMIT,
        )
        self._session = (client.client_id or (0, b""))[0]
        self._watches = WatchSet(self)
        self._trees = TreeWatches(self)
        self._multi_read = True
        client.add_listener(self._on_kazoo_state)

    def _op_size(self, op: Op) -> int:
        """The exact encoded size of ``op`` as ZooKeeper sees it, chroot included.

        ``model.op_size`` does not know the chroot in front of every path, so a chunk of many
        small ops under a long chroot could pass jute.maxbuffer and cost the connection.
        """
        return encoded_op_size(op, self.root, self._acl)

    def _chunk_target_bytes(self) -> int:
        """More, smaller multis pipeline better than a few near 1 MiB."""
        return MULTI_CHUNK_TARGET

    @classmethod
    def from_url(
        cls,
        parsed: CoordinatorURL,
        *,
        timeout: float = 10.0,
        session_timeout: float = 10.0,
        request_timeout: float | None = None,
        credentials: Credentials | None = None,
        set_acl: bool | None = None,
        **options: Any,
    ) -> ZooKeeperCoordinator:
        """Connect within ``timeout`` seconds or raise :class:`ConnectionFailed`.

        ``request_timeout`` bounds each blocking request (default: ``timeout``). With
        ``credentials`` the session authenticates with ZooKeeper's ``digest`` scheme;
        ``set_acl`` creates nodes with Kafka's secure ACLs (default: when authenticated).
        Other options go to KazooClient as they are. A missing chroot is created, as Kafka
        does.
        """
        kazoo_patches.check_version()
        hosts = _hosts_string(parsed)
        if set_acl is None:
            set_acl = credentials is not None
        if set_acl and credentials is None:
            raise NotAuthorized("zookeeper.set.acl needs coordinator credentials: nodes would "
                                "belong to nobody")
        if credentials is not None:
            options["auth_data"] = [("digest", f"{credentials.user}:{credentials.password}")]
        # kazoo's default reconnect backoff grows to an hour; a session needs a reconnect well
        # within its timeout, so cap the delay to a fraction of it and never give up.
        options.setdefault("connection_retry", {
            "max_tries": -1, "delay": 0.1, "backoff": 2, "max_jitter": 0.2,
            "max_delay": max(0.2, min(2.0, session_timeout / 4)),
        })
        options.setdefault("handler", ReadAheadHandler())
        client = KazooClient(hosts=hosts, timeout=session_timeout, **options)
        kazoo_patches.patch_client(client)
        # Not client.start(timeout): when the wait ends it stops the client in this thread,
        # which waits for the connection thread, and that one may sit in a read of the
        # handshake for the whole session timeout (a server that accepts and never answers
        # held the caller about 11s whatever the timeout). Stop it in the background instead.
        try:
            connected = client.start_async().wait(timeout=timeout) and client.connected
        except Exception as exc:
            _stop_quietly(client, wait=False)
            raise _translate(exc) from exc
        if not connected:
            _stop_quietly(client, wait=False)
            names = ", ".join(f"{h}:{p}" for h, p in parsed.hosts)
            raise ConnectionFailed(
                f"could not connect to ZooKeeper at {names} within {timeout:g}s")
        coord = cls(parsed.raw, client, request_timeout=request_timeout or timeout,
                    secure_acls=set_acl)
        coord.session_timeout = session_timeout
        try:
            coord._ensure_root()
        except BaseException:
            coord.close()
            raise
        return coord

    def _ensure_root(self) -> None:
        if not self.root or self.exists("/") is not None:
            return
        from kazoo.protocol.serialization import Create as KazooCreate
        from kazoo.security import OPEN_ACL_UNSAFE

        acl = _kazoo_acl("/") if self.secure_acls else OPEN_ACL_UNSAFE
        for path in [*paths.ancestors(self.root), self.root]:
            # Absolute paths: _call does not prefix the chroot, the client methods would.
            result = self._call(KazooCreate(path, b"", acl, 0))
            try:
                self._wait(result, path)
            except NodeExists:
                pass

    # --- session -------------------------------------------------------------------------

    @property
    def state(self) -> SessionState:
        if self._closed:
            return SessionState.CLOSED
        return _STATES[self.kazoo.state]

    @property
    def session_id(self) -> int:
        client_id = self.kazoo.client_id
        if client_id is not None:
            self._session = client_id[0]
        return self._session

    def _on_kazoo_state(self, kstate: str) -> None:
        """kazoo's listener, on its connection thread: queue work, never block here."""
        if self._closed:
            return
        state = _STATES[kstate]
        if state is SessionState.CONNECTED:
            client_id = self.kazoo.client_id
            if client_id is not None:
                self._session = client_id[0]
        self._notify_state(state)
        if state is SessionState.CONNECTED:
            self._dispatcher.submit(self._watches.rearm_all)
            self._dispatcher.submit(self._trees.rearm_all)

    def _close(self) -> None:
        self.kazoo.remove_listener(self._on_kazoo_state)
        self._watches.cancel_all()
        self._trees.cancel_all()
        _stop_quietly(self.kazoo)

    # --- plumbing ------------------------------------------------------------------------

    def _ready(self) -> None:
        self._check_open()
        if not self.kazoo.connected:
            raise ConnectionLoss(f"{self.url}: not connected ({self.kazoo.state})")

    def _wait(self, result: Any, path: str | None = None) -> Any:
        try:
            return result.get(timeout=self.request_timeout)
        except Exception as exc:
            raise _translate(exc, path, closed=self._closed) from exc

    def _call(self, request: Any) -> Any:
        """Submit a raw kazoo request object; returns kazoo's async result."""
        return kazoo_patches.send(self.kazoo, request)

    def sync(self, timeout: float = 5.0) -> bool:
        """Wait until every change committed before the call has reached its watches'
        callbacks (False on timeout or without a connection).

        ZooKeeper sends a session the notifications of a change before any later reply, but a
        persistent watch here learns the new state by a read that its notification starts on
        kazoo's watch thread. So: let kazoo's watch thread run what it has (those reads are
        then sent), then make one round trip (its answer comes after theirs, and its completion
        after theirs), and repeat for reads that those answers started (a node that vanished
        is looked at once more); finally the dispatcher delivers what they reported.
        """
        deadline = time.monotonic() + timeout
        handler = self.kazoo.handler
        for _ in range(SYNC_ROUNDS):
            watched = threading.Event()
            handler.dispatch_callback(Callback("watch", watched.set, ()))
            if not watched.wait(max(0.0, deadline - time.monotonic())):
                return False
            answered = threading.Event()
            try:
                self.kazoo.exists_async("/").rawlink(lambda _r, done=answered: done.set())
            except Exception:  # closed or stopping: nothing more will arrive
                return False
            if not answered.wait(max(0.0, deadline - time.monotonic())):
                return False
        return self._dispatcher.flush(max(0.0, deadline - time.monotonic()))

    # --- reads ---------------------------------------------------------------------------

    def get(self, path: str) -> tuple[bytes, Stat]:
        paths.validate(path)
        self._ready()
        data, zstat = self._wait(self.kazoo.get_async(path), path)
        return data, _stat(zstat)

    def exists(self, path: str) -> Stat | None:
        paths.validate(path)
        self._ready()
        zstat = self._wait(self.kazoo.exists_async(path), path)
        return None if zstat is None else _stat(zstat)

    def children(self, path: str) -> list[str]:
        paths.validate(path)
        self._ready()
        return sorted(self._wait(self.kazoo.get_children_async(path), path))

    def get_many(self, paths_: Sequence[str]) -> list[tuple[bytes, Stat] | None]:
        """Pipelined read-only multis (ZooKeeper 3.6+), several in flight.

        Node sizes are unknown up front, so a small probe goes first, alone; every answer then
        sizes the next batches to about READ_BATCH_TARGET_BYTES. A batch whose answer costs the
        connection (or times out) is read again in halves once reconnected: reads are idempotent.
        """
        paths.validate_all(paths_)
        self._ready()
        if not self._multi_read:
            return self._get_many_pipelined(paths_)
        out: list[tuple[bytes, Stat] | None] = [None] * len(paths_)
        root = self.root
        full = [root + p for p in paths_] if root else list(paths_)
        pending: deque[tuple[int, int]] = deque()
        start = 0
        batch = READ_PROBE
        probing = True
        in_flight: deque[tuple[int, int, MultiRead, Any]] = deque()
        while start < len(full) or pending or in_flight:
            limit = 1 if probing else READ_IN_FLIGHT
            while len(in_flight) < limit and (pending or start < len(full)):
                if pending:
                    lo, hi = pending.popleft()
                else:
                    lo, hi = start, _read_span(full, start, batch)
                    start = hi
                request = MultiRead(full[lo:hi])
                in_flight.append((lo, hi, request, self._call(request)))
            lo, hi, request, result = in_flight.popleft()
            try:
                items = self._wait(result)
            except ConnectionLoss:
                if hi - lo <= 1:
                    raise
                self._await_connected()
                mid = (lo + hi) // 2
                batch = max(1, min(batch, mid - lo))
                pending.extendleft([(mid, hi), (lo, mid)])
                continue
            except CoordinatorError as exc:
                if probing and isinstance(exc.__cause__, _NO_MULTI_READ):
                    self._multi_read = False  # a server before 3.6
                    return self._get_many_pipelined(paths_)
                raise
            for i, item in enumerate(items, lo):
                if type(item) is int:
                    if item != kx.NoNodeError.code:
                        raise _op_error(item, paths_[i])
                else:
                    out[i] = item
            per_item = request.response_bytes / (hi - lo)
            batch = max(1, min(READ_BATCH_MAX, int(READ_BATCH_TARGET_BYTES / per_item)))
            probing = False
        return out

    def _get_many_pipelined(self, paths_: Sequence[str]) -> list[tuple[bytes, Stat] | None]:
        """Bulk read for servers without multiRead: kazoo's get_async, all in flight."""
        out: list[tuple[bytes, Stat] | None] = []
        for path, result in [(p, self.kazoo.get_async(p)) for p in paths_]:
            try:
                data, zstat = self._wait(result, path)
            except NoNode:
                out.append(None)
            else:
                out.append((data, _stat(zstat)))
        return out

    def _await_connected(self) -> None:
        deadline = time.monotonic() + self.request_timeout
        while not self.kazoo.connected:
            self._check_open()
            if time.monotonic() > deadline:
                raise ConnectionLoss(f"{self.url}: not reconnected within "
                                     f"{self.request_timeout:g}s")
            time.sleep(0.05)

    # --- writes --------------------------------------------------------------------------

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
        self._ready()
        if self.secure_acls:
            return self._create_secure(path, bytes(data), ephemeral, sequential, make_parents)
        result = self.kazoo.create_async(
            path, bytes(data), ephemeral=ephemeral, sequence=sequential, makepath=make_parents,
        )
        try:
            return self._wait(result, path)
        except NoNode as exc:
            raise NoNode(paths.parent(path), f"parent does not exist: {paths.parent(path)}"
                         ) from exc.__cause__
        except NoChildrenForEphemerals as exc:
            raise NoChildrenForEphemerals(paths.parent(path)) from exc.__cause__

    def _create_secure(self, path: str, data: bytes, ephemeral: bool, sequential: bool,
                       make_parents: bool) -> str:
        """A create with secure ACLs; missing parents get their own path's ACLs (kazoo's
        makepath would give them the child's)."""
        def attempt() -> str:
            result = self.kazoo.create_async(path, data, acl=_kazoo_acl(path),
                                             ephemeral=ephemeral, sequence=sequential)
            return self._wait(result, path)

        try:
            return attempt()
        except NoNode:
            if not make_parents:
                raise NoNode(paths.parent(path), f"parent does not exist: "
                                                 f"{paths.parent(path)}") from None
        except NoChildrenForEphemerals as exc:
            raise NoChildrenForEphemerals(paths.parent(path)) from exc.__cause__
        for ancestor in paths.ancestors(path):
            try:
                self._wait(self.kazoo.create_async(ancestor, b"", acl=_kazoo_acl(ancestor)),
                           ancestor)
            except NodeExists:
                pass
        return attempt()

    def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        paths.validate(path)
        self._ready()
        return _stat(self._wait(self.kazoo.set_async(path, bytes(data), version), path))

    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        paths.validate(path)
        self._ready()
        if recursive:
            self._delete_subtree(path)
            return
        self._wait(self.kazoo.delete_async(path, version), path)

    def _delete_subtree(self, path: str) -> None:
        """Delete a subtree a level at a time, deepest first, each level a pipelined bulk write.

        Tolerant of concurrent changes as the base class's walk is: a node already gone is
        fine, a node that gained a child meanwhile is walked again.
        """
        levels = [[path]]
        while levels[-1]:
            pending = [(p, self.kazoo.get_children_async(p)) for p in levels[-1]]
            below: list[str] = []
            for parent, result in pending:
                try:
                    below.extend(paths.join(parent, kid) for kid in self._wait(result, parent))
                except NoNode:
                    pass
            levels.append(below)
        for level in reversed(levels):
            if not level:
                continue
            results = self.write_many([Delete(path=p) for p in level])
            for p, result in zip(level, results, strict=True):
                if isinstance(result, NotEmpty):
                    self._delete_tree(p)
                elif isinstance(result, CoordinatorError) and not isinstance(result, NoNode):
                    raise result

    def multi_async(self, ops: Sequence[Op]) -> Future[list[OpResult]]:
        future: Future[list[OpResult]] = Future()
        ops = list(ops)
        root = self.root
        size = 0
        for index, op in enumerate(ops):
            path = op.path
            try:
                paths.validate(path)
            except CoordinatorError as exc:  # as the memory backend reports it
                future.set_exception(MultiFailed(index, exc))
                return future
            size += encoded_op_size(op, root, self._acl)
        try:
            if size > MULTI_BYTES_LIMIT:  # the server would drop the connection
                raise RequestTooLarge(f"multi of {len(ops)} ops is {size} bytes encoded; "
                                      f"zookeeper takes at most {MULTI_BYTES_LIMIT}")
            self._ready()
        except CoordinatorError as exc:
            future.set_exception(exc)
            return future
        if not ops:
            future.set_result([])
            return future
        closed = self._closed_flag

        def done(result: Any) -> None:  # on kazoo's completion thread
            try:
                items = result.get_nowait()
            except Exception as exc:
                future.set_exception(_translate(exc, closed=closed()))
                return
            failed = [i for i, item in enumerate(items) if type(item) is OpError]
            if failed:
                # Ops before the culprit come back 0 (rolled back), after it -2 (not reached).
                real = [i for i in failed if items[i].code not in (0, -2)]
                index = (real or failed)[0]
                future.set_exception(MultiFailed(index, _multi_error(items[index].code,
                                                                     ops[index])))
                return
            future.set_result(items)

        self._call(MultiWrite(ops, self.root, self._acl)).rawlink(done)
        return future

    def _closed_flag(self) -> bool:
        return self._closed

    # --- watches -------------------------------------------------------------------------

    def _add_watch(self, kind: str, path: str, callback: Callable[..., None]) -> Watch:
        if kind == "tree":  # one persistent recursive watch (3.6+), see coordinator.zk_tree
            self._ready()
            return self._trees.add(path, callback)
        return self._watches.add(kind, path, callback)


def _read_span(full: list[str], start: int, batch: int) -> int:
    """The end of the batch from ``start``: ``batch`` paths, fewer if the request gets big."""
    end = min(len(full), start + batch)
    size = 0
    for i in range(start, end):
        size += MultiRead.request_size(full[i])
        if size > READ_BATCH_TARGET_BYTES and i > start:
            return i
    return end


def _stop_quietly(client: KazooClient, *, wait: bool = True) -> None:
    """Stop and close a kazoo client from any state, in a helper thread: waited for up to a
    deadline, or (``wait`` False: a failed connect, whose caller must not wait) not at all."""

    def stop() -> None:
        try:
            client.stop()
        except Exception:
            pass
        try:
            client.close()
        except Exception:
            pass

    worker = threading.Thread(target=stop, name="partctl-kazoo-stop", daemon=True)
    worker.start()
    if wait:
        worker.join(timeout=15)
