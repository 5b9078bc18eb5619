"""Injectable clocks for the replica manager: the real one, and a manual one for tests.

Everything time-driven in the data plane (ISR expiry, ISR change propagation, high-watermark
checkpoints, produce timeouts, segment rolls) reads a :class:`Clock` instead of ``time``, so a
test can move time by hand and see exactly when an ISR shrinks.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "ManualClock", "SystemClock"]


@runtime_checkable
class Clock(Protocol):
    """A source of wall-clock milliseconds."""

    def now_ms(self) -> int: ...


class SystemClock:
    """The real clock: milliseconds since the epoch."""

    __slots__ = ()

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def __repr__(self) -> str:
        return "SystemClock()"


class ManualClock:
    """A clock that moves only when told to; thread-safe."""

    __slots__ = ("_lock", "_now")

    def __init__(self, start_ms: int = 1_000_000) -> None:
        self._lock = threading.Lock()
        self._now = start_ms

    def now_ms(self) -> int:
        return self._now

    def advance(self, ms: int) -> int:
        """Move forward by ``ms`` (never backwards); returns the new time."""
        if ms < 0:
            raise ValueError(f"a clock does not go backwards: {ms}")
        with self._lock:
            self._now += ms
            return self._now

    def __repr__(self) -> str:
        return f"ManualClock(now_ms={self._now})"
