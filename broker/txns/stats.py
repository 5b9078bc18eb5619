"""The numbers the transaction coordinator and the leaders' verification keep for the metrics
(:mod:`broker.metrics.transactions` serves them): plain counters, updated on the broker's loop,
read by a scrape from its own thread (a read may miss the update made at that instant)."""

from __future__ import annotations

import math

from coordinator.clock import SYSTEM_CLOCK, Clock

__all__ = ["SAMPLES", "SAMPLE_WINDOW_MS", "Timings", "WindowedStat"]

SAMPLE_WINDOW_MS = 30_000
"""``metrics.sample.window.ms``'s default: the span of one sample of a windowed stat."""
SAMPLES = 2
"""``metrics.num.samples``'s default: a windowed stat forgets what is older than this many
windows."""


class Timings:
    """Events and the milliseconds they took (a Kafka histogram or timer, served as a
    summary: ``_count`` and ``_sum``)."""

    __slots__ = ("count", "total_ms")

    def __init__(self) -> None:
        self.count = 0
        self.total_ms = 0.0

    def observe(self, ms: float) -> None:
        self.total_ms += ms
        self.count += 1


class WindowedStat:
    """The max and the mean of what was recorded in the last windows, as Kafka's sampled
    ``Max`` and ``Avg`` measure them: :data:`SAMPLES` samples of :data:`SAMPLE_WINDOW_MS`
    each; a sample whose last event is :data:`SAMPLES` windows old is forgotten; NaN when
    nothing is left."""

    __slots__ = ("_clock", "_samples")

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self._clock = clock
        self._samples: list[list[float]] = []
        """[start ms, last event ms, count, total, max], the newest last."""

    def record(self, value: float) -> None:
        now = self._clock.now_ms()
        current = self._samples[-1] if self._samples else None
        if current is None or now - current[0] >= SAMPLE_WINDOW_MS:
            current = [now, now, 0, 0.0, -math.inf]
            self._samples = [*self._samples[-SAMPLES:], current]
        current[1] = now
        current[2] += 1
        current[3] += value
        current[4] = max(current[4], value)

    def _live(self) -> list[list[float]]:
        now = self._clock.now_ms()
        return [s for s in self._samples if now - s[1] < SAMPLES * SAMPLE_WINDOW_MS]

    @property
    def max(self) -> float:
        live = self._live()
        return max(s[4] for s in live) if live else math.nan

    @property
    def avg(self) -> float:
        live = self._live()
        count = sum(s[2] for s in live)
        return sum(s[3] for s in live) / count if count else math.nan
