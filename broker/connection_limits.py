"""What the server does about connections that hold resources for nothing: idle ones
(``connections.max.idle.ms``), and accepts that fail for want of descriptors.

Idle expiry works as Kafka's Selector expires idle channels: a connection that has neither
completed a request nor written a response for ``connections.max.idle.ms`` (Kafka's default:
10 minutes) is closed, one that sent only part of a request (a slow-loris) included; a
connection whose request is still being answered (a long poll, an acks=all produce) is not
idle. One sweep runs every so often (a tenth of the idle time, at most every second); the
connections it closes are one log line, however many.

When the process runs out of descriptors, asyncio's server stops accepting on the listener
for a second and tries again (so the server recovers on its own once descriptors are freed),
but it reports each failed attempt through the loop's exception handler with a traceback:
:func:`guard_out_of_descriptors` makes every such report, from accepts or from any callback,
one line per interval (:class:`~replication.log_throttle.ThrottledLog`), the reports
left out counted.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from replication.log_throttle import ThrottledLog, out_of_descriptors

__all__ = ["ACCEPT_OUT_OF_RESOURCE", "Expirable", "expire_idle", "guard_out_of_descriptors",
           "idle_among", "log_failure", "sweep_interval"]

log = logging.getLogger(__name__)

ACCEPT_OUT_OF_RESOURCE = "socket.accept() out of system resource"
"""What asyncio's server reports when an accept fails with EMFILE, ENFILE, ENOBUFS or ENOMEM
(it then pauses that listener for a second)."""

_OUT_OF_FILES = ThrottledLog(log, 10.0)
_IDLE_CHECK_MAX = 1.0
_IDLE_CHECK_MIN = 0.05


class Expirable(Protocol):
    """A connection as idle expiry sees it."""

    @property
    def active(self) -> float:
        """When it last completed a request or wrote a response (monotonic seconds)."""
        ...

    def busy(self) -> bool:
        """Whether a request of it is being answered (it is not idle then)."""
        ...

    def expire(self) -> None:
        """Close it now (nothing is owed to it)."""
        ...


def idle_among(connections: Iterable[Expirable], now: float, idle_s: float
               ) -> list[Expirable]:
    """The connections idle for more than ``idle_s`` at ``now``."""
    return [c for c in connections if now - c.active > idle_s and not c.busy()]


def sweep_interval(idle_ms: int) -> float:
    """How often to look for idle connections: a tenth of the idle time, within bounds."""
    return min(max(idle_ms / 10_000, _IDLE_CHECK_MIN), _IDLE_CHECK_MAX)


async def expire_idle(connections: Callable[[], Iterable[Expirable]], idle_ms: int, *,
                      clock: Callable[[], float] = time.monotonic) -> None:
    """Close the connections idle for more than ``idle_ms``, until cancelled."""
    idle_s = idle_ms / 1000
    interval = sweep_interval(idle_ms)
    while True:
        await asyncio.sleep(interval)
        idle = idle_among(list(connections()), clock(), idle_s)
        for connection in idle:
            connection.expire()
        if idle:
            log.info("closed %d connection(s) idle for more than %d ms "
                     "(connections.max.idle.ms)", len(idle), idle_ms)


_FAILURES_SEEN: set[tuple[type, str]] = set()
_FAILURES_LIMIT = 1000


def log_failure(exc: BaseException, message: str, *args: object) -> None:
    """Log an unexpected failure answering a request (its connection closes, as Kafka closes
    it). The open-file limit is one line per interval. Otherwise the first failure of each
    kind (type and place raised) comes with its traceback, as a bug to fix, and the same
    again is one line: a client repeating a request that trips it cannot fill the log with
    tracebacks."""
    if out_of_descriptors(exc):
        _OUT_OF_FILES.warning(message + ": %s (the open-file limit)", *args, exc)
        return
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    key = (type(exc), f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}" if tb else "?")
    if key in _FAILURES_SEEN or len(_FAILURES_SEEN) >= _FAILURES_LIMIT:
        log.error(message + ": %s: %.200s (again)", *args, type(exc).__name__, exc)
        return
    _FAILURES_SEEN.add(key)
    log.error(message, *args, exc_info=exc)


def guard_out_of_descriptors(loop: asyncio.AbstractEventLoop) -> None:
    """Route ``loop``'s reports of descriptors running out (a failed accept above all) to one
    line per interval; every other report goes where it went (once per loop)."""
    previous = loop.get_exception_handler()
    if getattr(previous, "out_of_descriptors_guard", False):
        return

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if exc is not None and out_of_descriptors(exc):
            what = ("cannot accept a connection; accepting again in a second"
                    if context.get("message") == ACCEPT_OUT_OF_RESOURCE
                    else str(context.get("message", "")))
            _OUT_OF_FILES.warning("%s: %s (the open-file limit)", what, exc)
        elif previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    handler.out_of_descriptors_guard = True  # type: ignore[attr-defined]
    loop.set_exception_handler(handler)
