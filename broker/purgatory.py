"""Requests that must wait, parked until their condition holds or their time is up.

Kafka parks a fetch that found too little (``DelayedFetch``) in a purgatory watched by the
partitions it reads: an append or a high watermark move on one of them makes it check again,
and a timer completes it with whatever there is when ``max_wait_ms`` runs out. Nothing waits on
a thread. This is that purgatory on the broker's event loop: every method but
:meth:`Purgatory.wake_threadsafe` runs on the loop, where the appends of the produce path
happen, so waking is a dictionary lookup; threads of the data plane (the replica manager's
ticker, the controller's requests) wake it through the loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Container, Hashable, Iterable

__all__ = ["Delayed", "Purgatory", "delete_records_key"]

log = logging.getLogger(__name__)

ALL = object()
"""Wakes every parked operation (leadership or metadata changed)."""
MOVES_KEPT = 4096
"""How many of the last wakes the purgatory keeps for :meth:`Purgatory.moved_since` (at
least; half as many again before it drops the older half)."""


def delete_records_key(tp: Hashable) -> Hashable:
    """The key DeleteRecords requests on ``tp`` wait on (Kafka's delete-records purgatory):
    woken when a follower's fetch may have moved its log start, not by appends."""
    return ("DeleteRecords", tp)


class Delayed:
    """One parked operation. ``check()`` says whether it can complete now; ``complete()``
    answers it, exactly once, on a successful check or at the deadline. ``check_key(key)``,
    when given, is the check of a wake of that one key: what changed for ``key`` alone."""

    __slots__ = ("_check", "_check_key", "_complete", "_timer", "done", "keys", "scan")

    def __init__(self, keys: tuple[Hashable, ...], check: Callable[[], bool],
                 complete: Callable[[], None],
                 check_key: Callable[[Hashable], bool] | None = None) -> None:
        self.keys = keys
        self._check = check
        self._check_key = check_key
        self._complete = complete
        self._timer: asyncio.TimerHandle | None = None
        self.done = False
        self.scan: Container[Hashable] | None = None


class Purgatory:
    """Operations watched by keys (topic partitions), completed when woken and able to, or
    when their timeout fires.

    It also keeps the keys of its last wakes, counted (:meth:`moved_since`): a follower's
    fetch session looks there for the partitions that moved since its last fetch, rather
    than at every partition it holds."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._watchers: dict[Hashable, set[Delayed]] = {}
        self._scanning: dict[Delayed, None] = {}
        """Operations whose keys are a container each wake asks (:meth:`park`'s ``scan``)."""
        self._pending_wakes: set[object] = set()
        self._wake_lock = threading.Lock()
        self._moves: list[object] = []
        self._moves_base = 0
        """The count of the wake at ``_moves[0]``."""
        self._all_at = -1
        """The count of the last wake of every operation."""

    def __len__(self) -> int:
        return len({op for ops in self._watchers.values() for op in ops} | set(self._scanning))

    def park(self, keys: Iterable[Hashable], timeout: float, check: Callable[[], bool],
             complete: Callable[[], None], *,
             check_key: Callable[[Hashable], bool] | None = None,
             scan: Container[Hashable] | None = None) -> Delayed:
        """Watch ``keys`` for ``op``; it completes by ``timeout`` seconds at the latest. The
        caller has checked once already (Kafka's tryCompleteElseWatch). With ``check_key``, a
        wake of one key checks that key only (a fetch of a thousand partitions, one of them
        appended to, looks at that one); a wake of every operation still runs ``check``.
        With ``scan`` instead of ``keys``, every wake asks whether its key is in ``scan``
        (a follower's fetch of a session of many partitions parks without adding itself to
        a set per partition, and without taking itself out of them when done)."""
        op = Delayed(() if scan is not None else tuple(keys), check, complete, check_key)
        if scan is not None:
            op.scan = scan
            self._scanning[op] = None
        watchers = self._watchers
        for key in op.keys:
            ops = watchers.get(key)
            if ops is None:
                watchers[key] = {op}
            else:
                ops.add(op)
        op._timer = self._loop.call_later(max(timeout, 0.0), self._expire, op)
        return op

    def _finish(self, op: Delayed) -> None:
        if op.done:
            return
        op.done = True
        if op._timer is not None:
            op._timer.cancel()
        if op.scan is not None:
            self._scanning.pop(op, None)
        watchers = self._watchers
        for key in op.keys:
            ops = watchers.get(key)
            if ops is not None:
                ops.discard(op)
                if not ops:
                    del watchers[key]
        try:
            op._complete()
        except Exception:
            log.exception("completing a parked request failed")

    def _expire(self, op: Delayed) -> None:
        self._finish(op)

    def _try(self, op: Delayed, key: Hashable = ALL) -> None:
        if op.done:
            return
        try:
            ready = op._check() if key is ALL or op._check_key is None else op._check_key(key)
        except Exception:
            log.exception("checking a parked request failed; answering it now")
            ready = True
        if ready:
            self._finish(op)

    def wake(self, key: Hashable) -> None:
        """Something changed for ``key``: parked operations watching it check again."""
        self._moved(key)
        for op in list(self._watchers.get(key, ())):
            self._try(op, key)
        if self._scanning:
            for op in list(self._scanning):
                if key in op.scan:  # type: ignore[operator]
                    self._try(op, key)

    def wake_all(self) -> None:
        self._all_at = self.moves
        self._moved(ALL)
        for op in list({op for ops in self._watchers.values() for op in ops}
                       | set(self._scanning)):
            self._try(op)

    @property
    def moves(self) -> int:
        """How many wakes there have been."""
        return self._moves_base + len(self._moves)

    def moved_since(self, count: int) -> list[object] | None:
        """The keys woken since there had been ``count`` wakes (:attr:`moves`), with repeats;
        None when every operation was woken since, or when they are no longer all kept."""
        base = self._moves_base
        if count < base or count <= self._all_at:
            return None
        return self._moves[count - base:]

    def _moved(self, key: object) -> None:
        moves = self._moves
        moves.append(key)
        if len(moves) >= MOVES_KEPT + MOVES_KEPT // 2:
            dropped = len(moves) - MOVES_KEPT
            del moves[:dropped]
            self._moves_base += dropped

    def wake_threadsafe(self, key: Hashable = ALL) -> None:
        """:meth:`wake` (or, without a key, :meth:`wake_all`) from any thread; wakes of one key
        that arrive before the loop gets to them are taken together."""
        with self._wake_lock:
            first = not self._pending_wakes
            self._pending_wakes.add(key)
        if first:
            try:
                self._loop.call_soon_threadsafe(self._drain_wakes)
            except RuntimeError:  # the loop is closed: nothing is parked any more
                pass

    def _drain_wakes(self) -> None:
        with self._wake_lock:
            keys, self._pending_wakes = self._pending_wakes, set()
        if ALL in keys:
            self.wake_all()
            return
        for key in keys:
            self.wake(key)

    def complete_all(self) -> None:
        """Answer every parked operation now (the broker is stopping)."""
        for op in list({op for ops in self._watchers.values() for op in ops}
                       | set(self._scanning)):
            self._finish(op)
