"""One thread, one queue: the only place controller state changes (Kafka's ControllerEventManager).

Producers call :meth:`EventManager.put` from any thread. The thread takes one event at a time
and hands it to the processor. Tests may skip the thread (``threaded=False``) and call
:meth:`EventManager.run_pending` to process what was queued, deterministically, on their own
thread. :meth:`pause` holds the thread between events (used to make a zombie controller).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from statemachines.events import ControllerEvent
from statemachines.stats import Timing

log = logging.getLogger(__name__)

__all__ = ["EventManager"]


class EventManager:
    def __init__(
        self,
        processor: Callable[[ControllerEvent], None],
        *,
        name: str = "partctl-controller",
        threaded: bool = True,
    ) -> None:
        self._processor = processor
        self._queue: deque[ControllerEvent] = deque()
        self._queued_at: deque[float] = deque()
        """When each queued event was put (monotonic seconds), in the queue's order."""
        self.queue_time = Timing()
        """The time events waited in the queue before their processing began (Kafka's
        EventQueueTimeMs)."""
        self._cond = threading.Condition()
        self._paused = False
        self._stopped = False
        self._busy = False
        self._thread: threading.Thread | None = None
        if threaded:
            self._thread = threading.Thread(target=self._run, name=name, daemon=True)
            self._thread.start()

    @property
    def threaded(self) -> bool:
        return self._thread is not None

    def put(self, event: ControllerEvent) -> None:
        with self._cond:
            if self._stopped:
                return
            self._queue.append(event)
            self._queued_at.append(time.monotonic())
            self._cond.notify_all()

    def drain(self) -> list[ControllerEvent]:
        """Take every queued event out (resignation: the caller decides what each one gets)."""
        with self._cond:
            events = list(self._queue)
            self._queue.clear()
            self._queued_at.clear()
            return events

    def take(self, predicate: Callable[[ControllerEvent], bool]) -> list[ControllerEvent]:
        """Take the queued events that match ``predicate`` out; the others keep their order."""
        with self._cond:
            taken = [e for e in self._queue if predicate(e)]
            if taken:
                kept = [(e, t) for e, t in zip(self._queue, self._queued_at, strict=True)
                        if not predicate(e)]
                self._queue.clear()
                self._queued_at.clear()
                self._queue.extend(e for e, _ in kept)
                self._queued_at.extend(t for _, t in kept)
            return taken

    def take_leading(self, predicate: Callable[[ControllerEvent], bool]) -> list[ControllerEvent]:
        """Take the events at the head of the queue while they match ``predicate``: the run
        the caller may handle together with the one it holds, as if one after the other."""
        taken: list[ControllerEvent] = []
        with self._cond:
            now = time.monotonic()
            while self._queue and predicate(self._queue[0]):
                taken.append(self._queue.popleft())
                self.queue_time.add(now - self._queued_at.popleft())
        return taken

    def pending(self) -> int:
        with self._cond:
            return len(self._queue)

    def run_pending(self, limit: int = 1_000_000) -> int:
        """Process queued events on the calling thread, until none are left (unthreaded use)."""
        if self._thread is not None:
            raise RuntimeError("run_pending is for an unthreaded event manager")
        done = 0
        while done < limit:
            with self._cond:
                if not self._queue:
                    return done
                event = self._queue.popleft()
                self.queue_time.add(time.monotonic() - self._queued_at.popleft())
            self._process(event)
            done += 1
        return done

    def pause(self) -> None:
        """Hold the event thread before its next event until :meth:`resume`."""
        with self._cond:
            self._paused = True

    def resume(self) -> None:
        with self._cond:
            self._paused = False
            self._cond.notify_all()

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Wait until the queue is empty and no event is being processed (not while paused)."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._queue and not self._busy, timeout)

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._paused = False
            self._cond.notify_all()
        if self._thread is not None and threading.current_thread() is not self._thread:
            self._thread.join(timeout=10)

    def _process(self, event: ControllerEvent) -> None:
        try:
            self._processor(event)
        except Exception:  # one faulty event must not stop the controller
            log.exception("controller event %s failed", type(event).__name__)

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._stopped or (self._queue and not self._paused))
                if self._stopped:
                    return
                event = self._queue.popleft()
                self.queue_time.add(time.monotonic() - self._queued_at.popleft())
                self._busy = True
            try:
                self._process(event)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
