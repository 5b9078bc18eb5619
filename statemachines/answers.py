"""Waiting for a batch's answers: the controller's ``send_then``
(:meth:`statemachines.controller.Controller.send_then`), which a controlled shutdown's second
step waits on (:mod:`statemachines.handlers.shutdown`)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from interbroker.channel import BrokerResponse, ResponseCallback
from interbroker.requests import BrokerRequest
from statemachines.events import ControllerEvent

__all__ = ["AwaitedAnswers"]


class AwaitedAnswers:
    """A batch whose answers an event waits for: ``then`` goes to ``put`` once, when every
    awaited broker (``awaited``: answers per broker) has answered or been forgotten (its
    queue dropped), or when ``wait`` seconds have passed; ``done`` is told when the wait
    ends, either way. Each answer goes to ``handle`` first, as any other would."""

    def __init__(self, then: ControllerEvent, awaited: dict[int, int], wait: float, *,
                 handle: ResponseCallback, put: Callable[[ControllerEvent], None],
                 done: Callable[[AwaitedAnswers], None]) -> None:
        self.then = then
        self._left = {b: n for b, n in awaited.items() if n}
        """Answers still awaited, per broker."""
        self._handle, self._put, self._on_done = handle, put, done
        self._lock = threading.Lock()
        self._done = False
        self._timer = threading.Timer(wait, self.finish)
        self._timer.daemon = True

    def start(self) -> None:
        """Start the wait (or finish at once when nothing is awaited)."""
        if not self._left:
            self.finish()
        elif not self._done:
            self._timer.start()

    def on_response(self, broker_id: int, request: BrokerRequest, response: BrokerResponse
                    ) -> None:
        """Any thread: ``handle``, then one answer fewer to wait for."""
        self._handle(broker_id, request, response)
        self.forget((broker_id,), answers=1)

    def forget(self, brokers: Iterable[int], answers: int | None = None) -> None:
        """``answers`` fewer of each of ``brokers`` to wait for (None: all of them)."""
        with self._lock:
            for b in brokers:
                left = self._left.get(b)
                if left is None:
                    continue
                left = 0 if answers is None else left - answers
                if left > 0:
                    self._left[b] = left
                else:
                    del self._left[b]
            last = not self._left
        if last:
            self.finish()

    def finish(self) -> None:
        """Queue ``then`` (once): every answer is in, or the wait is over."""
        if self.cancel():
            self._put(self.then)

    def cancel(self) -> bool:
        """Stop waiting; whether this call did (False: it was already done)."""
        with self._lock:
            if self._done:
                return False
            self._done = True
        self._timer.cancel()
        self._on_done(self)
        return True
