"""One clock for every package: the real one, and a manual one for tests and simulations.

Everything time-driven (retry backoffs, the controller's stand hold, ISR expiry, segment rolls,
retention, replication quotas, remote-storage retries) reads a :class:`Clock` it was given
instead of :mod:`time`, so a test moves time by hand and sees exactly what happens when. It
lives at the bottom of the layers (the coordination layer's retry is its first user), where
every package may import it.

Two readings, as Kafka's ``Time`` has them: wall-clock milliseconds (``now_ms``: timestamps,
retention, what is stored) and monotonic seconds (``monotonic``: intervals, deadlines, rates).
A :class:`ManualClock` moves both together.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol, runtime_checkable

__all__ = ["SYSTEM_CLOCK", "Clock", "ManualClock", "SystemClock"]


@runtime_checkable
class Clock(Protocol):
    """Wall-clock milliseconds, monotonic seconds, and a sleep that the clock can see."""

    def now_ms(self) -> int: ...

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real clock."""

    __slots__ = ()

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def __repr__(self) -> str:
        return "SystemClock()"


SYSTEM_CLOCK = SystemClock()


class ManualClock:
    """A clock that moves only when told to (``advance``, ``set``) or slept on; thread-safe.

    Its monotonic reading is its wall-clock reading in seconds: both move together. A sleep
    returns at once, having moved the clock by the time slept, so code that backs off under a
    manual clock runs at full speed and its waits can be read off the clock."""

    __slots__ = ("_lock", "_now")

    def __init__(self, start_ms: int = 1_000_000) -> None:
        self._lock = threading.Lock()
        self._now = start_ms

    def now_ms(self) -> int:
        return self._now

    def monotonic(self) -> float:
        return self._now / 1000

    def sleep(self, seconds: float) -> None:
        self.advance(round(seconds * 1000))

    def advance(self, ms: int) -> int:
        """Move forward by ``ms`` (never backwards); returns the new time."""
        if ms < 0:
            raise ValueError(f"a clock does not go backwards: {ms}")
        with self._lock:
            self._now += ms
            return self._now

    def set(self, now_ms: int) -> None:
        """Move to ``now_ms`` (never backwards)."""
        with self._lock:
            if now_ms < self._now:
                raise ValueError(f"a clock does not go backwards: {now_ms} < {self._now}")
            self._now = now_ms

    def __repr__(self) -> str:
        return f"ManualClock(now_ms={self._now})"
