"""The coordinator protocol and what every backend shares.

Backends subclass :class:`Coordinator` and implement the abstract primitives; bulk writes
(chunked, pipelined, fenced), callback dispatch and session listeners live here once.
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from typing import Any, ClassVar

from coordinator import paths
from coordinator.errors import (
    ClosedError,
    CoordinatorError,
    GuardFailed,
    MultiFailed,
    NodeExists,
    NoNode,
    NotEmpty,
    RequestTooLarge,
)
from coordinator.model import (
    Capabilities,
    Check,
    ChildrenCallback,
    ChildrenEvent,
    Create,
    DataCallback,
    DataEvent,
    Delete,
    Op,
    OpResult,
    SessionListener,
    SessionState,
    Stat,
    TreeCallback,
    TreeEvent,
    Watch,
    op_size,
)
from coordinator.url import CoordinatorURL, redact

log = logging.getLogger(__name__)

DEFAULT_IN_FLIGHT = 32
"""Chunks a bulk write keeps in flight. A producer that works out each batch while earlier ones
are written (a mass election) sends in bursts; with room for several batches' chunks the store
is not left idle while the next batch is decided. (8 held about one batch of a mass election:
its elections took 5-12% longer on etcd; a plain write_many measured the same either way.)"""


class Dispatcher:
    """One thread that runs callbacks in the order they were queued.

    Watch events and session-state changes of a coordinator all pass through its dispatcher, so
    a listener sees them in one order and may call back into the coordinator without deadlock.
    """

    def __init__(self, name: str) -> None:
        self._queue: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[[], None]) -> None:
        self._queue.put(fn)

    def _run(self) -> None:
        while True:
            fn = self._queue.get()
            if fn is None:
                return
            try:
                fn()
            except Exception:  # a faulty callback must not stop the others
                log.exception("coordinator callback failed")

    def stop(self, wait: bool = True) -> None:
        self._queue.put(None)
        if wait and threading.current_thread() is not self._thread:
            self._thread.join(timeout=5)

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until everything queued so far has run (tests and orderly shutdown)."""
        if threading.current_thread() is self._thread:
            return True
        done = threading.Event()
        self._queue.put(done.set)
        return done.wait(timeout)


class WatchHandle:
    """A cancellable persistent watch; the backend holds it and checks ``active``."""

    __slots__ = ("path", "callback", "active", "_on_cancel")

    def __init__(
        self,
        path: str,
        callback: Callable[..., None],
        on_cancel: Callable[[WatchHandle], None] | None = None,
    ) -> None:
        self.path = path
        self.callback = callback
        self.active = True
        self._on_cancel = on_cancel

    def cancel(self) -> None:
        if self.active:
            self.active = False
            if self._on_cancel is not None:
                self._on_cancel(self)


class Coordinator(ABC):
    """One protocol over ZooKeeper, etcd and the in-process store, shaped after ZooKeeper.

    Reads are versioned; writes can be conditional on a version; ``multi`` is atomic; watches
    are persistent; the session has explicit states. Every method raises only
    :class:`~coordinator.errors.CoordinatorError` subclasses.
    """

    capabilities: Capabilities
    url: str
    default_port: ClassVar[int | None]
    """The port of a host its URLs name without one; None for a backend whose URLs name a
    store, ``scheme://NAME``, rather than hosts (see :mod:`coordinator.url`)."""
    session_timeout: float = 10.0
    """Seconds a session outlives a lost connection (its ephemerals with it): how long a
    client that wants to keep them should ride out an outage."""

    def __init__(self, url: str) -> None:
        self.url = redact(url)  # only ever shown: never a secret (coordinator.url.redact)
        self._listeners: list[SessionListener] = []
        self._listeners_lock = threading.Lock()
        self._dispatcher = Dispatcher(f"partctl-coordinator-{id(self):x}")
        self._closed = False

    @classmethod
    @abstractmethod
    def from_url(cls, parsed: CoordinatorURL, **options: Any) -> Coordinator:
        """Open a session on the store ``parsed`` names: what :func:`coordinator.connect` calls
        for the backend its scheme is registered to (``options`` as it documents them, and the
        backend's own)."""

    # --- session -------------------------------------------------------------------------

    @property
    @abstractmethod
    def state(self) -> SessionState:
        """The current session state."""

    @property
    @abstractmethod
    def session_id(self) -> int:
        """The current session's id (changes after LOST)."""

    def add_listener(self, listener: SessionListener) -> None:
        """Call ``listener(state)`` on every later session state change, on the dispatcher."""
        with self._listeners_lock:
            self._listeners.append(listener)

    def remove_listener(self, listener: SessionListener) -> None:
        with self._listeners_lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def _notify_state(self, state: SessionState) -> None:
        """Queue a state change for the listeners (backends call it on every transition)."""
        with self._listeners_lock:
            listeners = list(self._listeners)
        for listener in listeners:
            self._dispatcher.submit(functools.partial(listener, state))

    def close(self) -> None:
        """Close the session (its ephemerals go) and stop delivering events. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self._close()
        finally:
            self._notify_state(SessionState.CLOSED)
            self._dispatcher.stop(wait=True)

    @abstractmethod
    def _close(self) -> None: ...

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError(f"coordinator {self.url} is closed")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.url}>"

    def __enter__(self) -> Coordinator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def sync(self, timeout: float = 5.0) -> bool:
        """Wait until the watch events queued so far reached their callbacks.

        On memory (which reports as it writes) and ZooKeeper (which overrides this) that is
        every change committed before the call. On etcd each watch is its own stream of
        revisions: a tree watch's :attr:`TreeEvent.revision` tells how far it has come."""
        return self._dispatcher.flush(timeout)

    # --- reads ---------------------------------------------------------------------------

    @abstractmethod
    def get(self, path: str) -> tuple[bytes, Stat]:
        """Data and stat of ``path``; :class:`NoNode` if absent."""

    @abstractmethod
    def exists(self, path: str) -> Stat | None:
        """Stat of ``path`` or None."""

    @abstractmethod
    def children(self, path: str) -> list[str]:
        """Sorted names of the direct children of ``path``; :class:`NoNode` if absent."""

    def children_hinted(self, path: str, likely: Iterable[str]) -> list[str]:
        """:meth:`children`, told names likely among them (read around, where a listing would
        read their subtrees: ``capabilities.listing_reads_subtrees``); the answer never
        depends on them."""
        return self.children(path)

    def get_many(self, paths_: Sequence[str]) -> list[tuple[bytes, Stat] | None]:
        """Data and stat of each path (None where absent), in order, pipelined by the backend."""
        out: list[tuple[bytes, Stat] | None] = []
        for path in paths_:
            try:
                out.append(self.get(path))
            except NoNode:
                out.append(None)
        return out

    # --- writes --------------------------------------------------------------------------

    @abstractmethod
    def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> str:
        """Create a node and return its path (with the suffix when sequential).

        ``make_parents`` creates missing ancestors as empty persistent nodes first.
        """

    @abstractmethod
    def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        """Replace the data if the version matches (-1: any); returns the new stat."""

    @abstractmethod
    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        """Delete a node if the version matches; ``recursive`` deletes its subtree first."""

    @abstractmethod
    def multi_async(self, ops: Sequence[Op]) -> Future[list[OpResult]]:
        """Submit an atomic multi; the future raises :class:`MultiFailed` if any op failed."""

    def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        """Apply all ``ops`` atomically or none; returns one result per op."""
        return self.multi_async(ops).result()

    def ensure_path(self, path: str) -> None:
        """Create ``path`` and its ancestors as empty persistent nodes where missing."""
        for p in [*paths.ancestors(path), path]:
            try:
                self.create(p)
            except NodeExists:
                pass

    def _delete_tree(self, path: str) -> None:
        """Delete ``path`` and its subtree, children first; tolerant of concurrent deletes."""
        try:
            kids = self.children(path)
        except NoNode:
            return
        for kid in kids:
            self._delete_tree(paths.join(path, kid))
        try:
            self.delete(path)
        except NoNode:
            pass
        except NotEmpty:  # a child appeared meanwhile
            self._delete_tree(path)

    def write_many(
        self,
        ops: Sequence[Op],
        *,
        guard: Check | None = None,
        max_in_flight: int = DEFAULT_IN_FLIGHT,
    ) -> list[OpResult | CoordinatorError]:
        """Apply many independent ops in atomic chunks, pipelined; one result per op.

        Chunks respect the backend's op-count and byte limits. With a ``guard``, every chunk
        starts with that check, so no chunk lands once the guard node moved on; the first failed
        guard raises :class:`GuardFailed` (the only error that escapes). Any other failing op
        gets its error as its result and the rest of its chunk is submitted again without it
        (split, see :func:`split_after_failure`), so one bad item never fails the batch and
        many cost a few times their number. Ops must touch distinct paths: chunks run
        concurrently and a retried chunk runs after later ones.
        """
        (results,) = self.write_stream([ops], guard=guard, max_in_flight=max_in_flight)
        return results

    def write_stream(
        self,
        batches: Iterable[Sequence[Op]],
        *,
        guard: Check | None = None,
        max_in_flight: int = DEFAULT_IN_FLIGHT,
    ) -> Iterator[list[OpResult | CoordinatorError]]:
        """:meth:`write_many` over ops that arrive in batches: yields one result list per batch,
        in batch order, as soon as that batch's chunks are all answered.

        The next batch is taken from ``batches`` whenever the pipeline has room, while earlier
        chunks are still in flight, so the work that produces it (deciding the next elections,
        say) overlaps with the store's. A batch is chunked whole before any of it is sent, so an
        op too large to send fails its batch before the batch writes anything; that error, or
        one raised by ``batches``, is raised once every batch sent before it has been answered
        and yielded. Ops of every batch must touch distinct paths.
        """
        self._check_open()
        source = iter(batches)
        exhausted = False
        failure: Exception | None = None  # from producing or chunking a batch
        opened: deque[_Batch] = deque()  # taken from the source, not yet yielded
        pending: deque[tuple[_Batch, list[int]]] = deque()
        in_flight: deque[tuple[_Batch, list[int], Future[list[OpResult]]]] = deque()
        try:
            while True:
                # Answers already in are taken first, so a finished batch is yielded before
                # the next one is produced.
                while in_flight and in_flight[0][2].done():
                    self._settle_chunk(in_flight.popleft(), guard, pending)
                while opened and opened[0].outstanding == 0:
                    yield opened.popleft().results
                while pending and len(in_flight) < max_in_flight:
                    batch, idxs = pending.popleft()
                    body: list[Op] = [guard] if guard is not None else []
                    body.extend(batch.ops[i] for i in idxs)
                    in_flight.append((batch, idxs, self.multi_async(body)))
                if len(in_flight) < max_in_flight and not exhausted:
                    try:
                        ops = next(source)
                        chunks = list(self._chunks(ops, guard))
                    except StopIteration:
                        exhausted = True
                        continue
                    except Exception as exc:  # raised once what was sent is answered
                        failure, exhausted = exc, True
                        continue
                    batch = _Batch(ops)
                    batch.outstanding = len(chunks)
                    opened.append(batch)
                    pending.extend((batch, idxs) for idxs in chunks)
                    continue
                if not in_flight:  # all produced, sent, answered and yielded
                    if failure is not None:
                        raise failure
                    return
                self._settle_chunk(in_flight.popleft(), guard, pending)
        finally:
            for _, _, other in in_flight:  # let them settle (after a failed guard none lands)
                _settle(other)

    @staticmethod
    def _settle_chunk(
        chunk: tuple[_Batch, list[int], Future[list[OpResult]]],
        guard: Check | None,
        pending: deque[tuple[_Batch, list[int]]],
    ) -> None:
        """Take one chunk's answer (waiting for it) into its batch: its results, or the failing
        op's error and the rest of the chunk queued again as :func:`split_after_failure`
        divides it; a failed guard raises."""
        batch, idxs, future = chunk
        offset = 1 if guard is not None else 0
        try:
            chunk_results = future.result()
        except MultiFailed as failure:
            if guard is not None and failure.index == 0:
                raise GuardFailed(guard.path, failure.cause) from failure
            at = failure.index - offset
            batch.results[idxs[at]] = failure.cause
            pieces = split_after_failure(idxs, at)
            batch.outstanding += len(pieces) - 1
            pending.extendleft((batch, piece) for piece in reversed(pieces))  # first, in order
            return
        results = batch.results
        for i, result in zip(idxs, chunk_results[offset:], strict=True):
            results[i] = result
        batch.outstanding -= 1

    def _op_size(self, op: Op) -> int:
        """An op's size as the backend's request limit counts it (default: a safe estimate)."""
        return op_size(op)

    def _chunk_target_bytes(self) -> int:
        """How big a chunk aims to be; a single op may still use ``max_multi_bytes``."""
        return self.capabilities.max_multi_bytes

    def _chunks(self, ops: Sequence[Op], guard: Check | None) -> Iterable[list[int]]:
        """Split op indices into chunks that each fit one multi, guard included.

        Counts ops against ``capabilities.max_multi_ops`` and sizes (``_op_size``) against
        ``_chunk_target_bytes``; an op that alone exceeds ``max_multi_bytes`` is refused with
        :class:`RequestTooLarge` before anything is sent. A backend whose ops cost unequal
        shares of a request limit (etcd's compares) overrides this.
        """
        limit_ops = self.capabilities.max_multi_ops
        limit_bytes = self.capabilities.max_multi_bytes
        target = min(self._chunk_target_bytes(), limit_bytes)
        base_ops = 1 if guard is not None else 0
        base_bytes = self._op_size(guard) if guard is not None else 0
        chunk: list[int] = []
        size = base_bytes
        for i, op in enumerate(ops):
            n = self._op_size(op)
            if base_bytes + n > limit_bytes:
                raise RequestTooLarge(
                    f"op on {op.path} is {n} bytes; {self.capabilities.name} takes at most "
                    f"{limit_bytes} bytes in one request"
                )
            full = limit_ops is not None and base_ops + len(chunk) + 1 > limit_ops
            if chunk and (full or size + n > target):
                yield chunk
                chunk, size = [], base_bytes
            chunk.append(i)
            size += n
        if chunk:
            yield chunk

    # --- watches -------------------------------------------------------------------------

    def _deliver(self, handle: WatchHandle, kind: str, state: Any) -> None:
        """Queue a watch's new state for its callback, unless the watch is cancelled by then.

        ``kind`` is "data" (``state``: (data, stat) or None) or "children" (a sorted list of
        names or None). Every backend reports watch states through here, in order.
        """
        path = handle.path
        if kind == "data":
            event: DataEvent | ChildrenEvent = DataEvent(
                path=path,
                data=None if state is None else state[0],
                stat=None if state is None else state[1],
            )
        else:
            event = ChildrenEvent(path=path, children=state)

        def run() -> None:
            if handle.active:
                handle.callback(event)

        self._dispatcher.submit(run)

    def _deliver_tree(self, handle: WatchHandle, event: TreeEvent) -> None:
        """Queue a tree watch's batch for its callback, unless the watch is cancelled by then."""

        def run() -> None:
            if handle.active:
                handle.callback(event)

        self._dispatcher.submit(run)

    def watch_data(self, path: str, callback: DataCallback) -> Watch:
        """Call ``callback(DataEvent)`` now with the node's state and after every change.

        The node need not exist. Survives reconnects and session loss (the backend re-arms it
        and reports the state it finds), until ``cancel()``.
        """
        return self._arm("data", path, callback)

    def watch_children(self, path: str, callback: ChildrenCallback) -> Watch:
        """Call ``callback(ChildrenEvent)`` now with the children and after every change."""
        return self._arm("children", path, callback)

    def watch_tree(self, path: str, callback: TreeCallback) -> Watch:
        """Call ``callback(TreeEvent)`` with every create, data change and delete at or below
        ``path`` made after this returns, in store order, in batches.

        One watch for a whole subtree (a standby's 100,000 partition states), not one per
        node. Survives reconnects and session loss: where the backend cannot resume without
        loss it reports a ``resync`` event first, and the consumer re-reads. No initial event:
        read the subtree after arming it. The node need not exist.
        """
        return self._arm("tree", path, callback)

    def _arm(self, kind: str, path: str, callback: Callable[..., None]) -> Watch:
        paths.validate(path)
        self._check_open()
        return self._add_watch(kind, path, callback)

    @abstractmethod
    def _add_watch(self, kind: str, path: str, callback: Callable[..., None]) -> Watch:
        """Arm a persistent watch of ``kind`` ("data", "children" or "tree") on a valid path."""


def same_state(kind: str, a: Any, b: Any) -> bool:
    """Whether two states of a watch of ``kind`` (as :meth:`Coordinator._deliver` takes them)
    are the same, so that a backend reports a state only when it differs from the last one it
    reported: data by its stat (every write moves a node's version and modify id, however its
    bytes compare), children by their names; None (no node) equals only None."""
    if a is None or b is None:
        return a is b
    if kind == "data":
        return a[1] == b[1]
    return a == b


SPLIT_WAYS = 8
"""A failed chunk's unknown rest is sent again in at most this many pieces (see
:func:`split_after_failure`)."""


def split_after_failure(idxs: list[int], at: int) -> list[list[int]]:
    """What to send again of a chunk (``idxs``) whose multi failed first at position ``at``.

    A multi names only its first failing op, and its ops touch distinct paths, so the ops
    before ``at`` passed and go again as one piece (known good), the op at ``at`` has its
    error, and the ops after it are unknown. Sending the unknown rest whole again (as this
    once did) finds one failure per round: a chunk with k failing ops went out k times,
    quadratic (a failover after a partial write sent 4.5 million ops for 7,500). The rest is
    split instead, into pieces no longer than the run of good ops just seen (``at`` + 1: where
    failures are dense the pieces are small) and no shorter than an eighth of the rest (where
    they are sparse, few multis). An op's piece at least halves each time it goes again, so
    no op is sent more than log2(chunk) + 2 times; every op of a chunk failing costs about
    n * log8(n) ops (332 for 100), a few scattered failures two to three times the chunk.
    """
    good, rest = idxs[:at], idxs[at + 1:]
    pieces = [good] if good else []
    if rest:
        size = max(at + 1, -(-len(rest) // SPLIT_WAYS))
        pieces.extend(rest[i:i + size] for i in range(0, len(rest), size))
    return pieces


class _Batch:
    """One batch of :meth:`Coordinator.write_stream`: its ops, their results so far, and how
    many of its chunks are still unanswered."""

    __slots__ = ("ops", "results", "outstanding")

    def __init__(self, ops: Sequence[Op]) -> None:
        self.ops = ops
        self.results: list[OpResult | CoordinatorError] = [None] * len(ops)
        self.outstanding = 0


def _settle(future: Future[list[OpResult]]) -> None:
    try:
        future.result()
    except CoordinatorError:
        pass


__all__ = [
    "Coordinator", "Dispatcher", "WatchHandle", "Create", "Delete", "same_state",
    "split_after_failure",
]
