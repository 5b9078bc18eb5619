"""The cyclic garbage collector in a broker process: its passes timed, and kept short.

CPython's full collection walks every object the collector tracks, holding the interpreter's
lock throughout: every request in flight waits for it. In a broker most of those objects live
as long as the process (its modules, classes and functions, then the state of each partition
it hosts), and each full pass walked them all again. Measured on the 2-core machine
(2026-12-03, librdkafka producing 1,000 and 10,000 records/s): a full pass took 25 to 45 ms of
CPU with 60,000 tracked objects (three brokers, one topic of six partitions), and 104 to 109
ms of wall time on average with 1,672 partition replicas per broker
(``benchmarks/idle_partitions.py latency --idle 1666 --gc-thaw-ms -1``), one every 10 s or so
per broker.

So the objects that survive a full pass are frozen (``gc.freeze``), as they are when the
broker starts serving: the full passes after it walk only what was promoted since (the same
benchmark: 23 to 26 ms on average, the longest the first after the topic's creation; 4 to 8 ms
of CPU each after that). Frozen objects are still freed when
their last reference goes, as every object is; what the collector no longer finds is a cycle
among frozen objects that became garbage after they were frozen (a connection open through a
pass and closed later, say). So every ``partctl.gc.thaw.interval.ms`` the next full pass is
preceded by ``gc.unfreeze()``: that pass walks everything once, frees such cycles, and
freezes again what survives it. Not when more than :data:`THAW_LIMIT` objects are frozen: a
controller candidate in the same process freezes its view of the cluster too
(``statemachines.controller.settle_garbage``), and one pass over the view of a million
partitions held the interpreter for 13 to 14 s, past a coordinator session; such a process
keeps its frozen cycles until it ends, as a controller-only process does. A thaw interval of
-1 leaves the collector as Python runs it; its passes are timed either way.

The number of objects frozen is counted only when a thaw is due (``gc.get_freeze_count``
walks them: 23 ms for two million here), never per pass or per scrape.
"""

from __future__ import annotations

import bisect
import gc
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from coordinator.clock import SYSTEM_CLOCK, Clock

__all__ = ["PAUSE_BUCKETS", "THAW_LIMIT", "GarbageCollection", "GarbageSnapshot"]

PAUSE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
"""Upper bounds (seconds) of the pause histogram's buckets, +Inf beyond."""

THAW_LIMIT = 1_000_000
"""Frozen objects beyond which a thaw that is due is skipped (and due again an interval
later): a pass over them would hold the interpreter for about a second or more."""

_OLDEST = 2


@dataclass(frozen=True, slots=True)
class GarbageSnapshot:
    """Per generation (0, 1, 2): passes per bucket of :data:`PAUSE_BUCKETS` (+Inf last, not
    cumulative), their seconds in all and the longest; the freezes (the one at install, and
    one per full pass since), the thaws, and the thaws skipped for :data:`THAW_LIMIT`."""

    buckets: tuple[tuple[int, ...], ...]
    seconds: tuple[float, ...]
    longest: tuple[float, ...]
    freezes: int
    thaws: int
    thaws_skipped: int


class GarbageCollection:
    """Times every pass of the process's collector, by generation, from the time
    :meth:`install` is called; with ``thaw_interval`` (seconds; None: never freeze), freezes
    what each full pass leaves and thaws everything before the first full pass once
    ``thaw_interval`` has gone by since the last thaw (or the install).

    The collector calls :meth:`_callback` on whichever thread allocated when a pass became
    due, before and after the pass, one pass at a time: the counts are kept there, and
    :meth:`snapshot` (any thread) copies them."""

    def __init__(self, *, thaw_interval: float | None,
                 clock: Clock = SYSTEM_CLOCK,
                 timer: Callable[[], float] = time.perf_counter) -> None:
        self.thaw_interval = thaw_interval
        self._clock = clock
        self._timer = timer
        self._rows = [[0] * (len(PAUSE_BUCKETS) + 1) for _ in range(_OLDEST + 1)]
        self._seconds = [0.0] * (_OLDEST + 1)
        self._longest = [0.0] * (_OLDEST + 1)
        self._started = 0.0
        self._thaw_at = 0.0
        self.freezes = 0
        self.thaws = 0
        self.thaws_skipped = 0
        self.installed = False

    def install(self) -> None:
        """Start timing passes; with freezing on, collect everything once now and freeze what
        survives (the process's modules and the state it started with)."""
        if self.installed:
            return
        if self.thaw_interval is not None:
            gc.collect()
            gc.freeze()
            self.freezes += 1
            self._thaw_at = self._clock.monotonic() + self.thaw_interval
        self._started = self._timer()
        gc.callbacks.append(self._callback)
        self.installed = True

    def remove(self) -> None:
        """Stop timing and freezing. What is frozen stays so (thawing it would have the next
        full pass walk it all, a controller's view too)."""
        if not self.installed:
            return
        gc.callbacks.remove(self._callback)
        self.installed = False

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        generation = info["generation"]
        interval = self.thaw_interval
        freezing = interval is not None and generation == _OLDEST
        if phase == "start":
            if interval is not None and freezing and self._clock.monotonic() >= self._thaw_at:
                self._thaw_at = self._clock.monotonic() + interval
                if gc.get_freeze_count() <= THAW_LIMIT:
                    gc.unfreeze()  # this pass walks everything: cycles among frozen objects go
                    self.thaws += 1
                else:
                    self.thaws_skipped += 1
            self._started = self._timer()
            return
        took = self._timer() - self._started
        self._rows[generation][bisect.bisect_left(PAUSE_BUCKETS, took)] += 1
        self._seconds[generation] += took
        if took > self._longest[generation]:
            self._longest[generation] = took
        if freezing:
            gc.freeze()  # right after a full pass: only what survived it
            self.freezes += 1

    def snapshot(self) -> GarbageSnapshot:
        return GarbageSnapshot(buckets=tuple(tuple(row) for row in self._rows),
                               seconds=tuple(self._seconds), longest=tuple(self._longest),
                               freezes=self.freezes, thaws=self.thaws,
                               thaws_skipped=self.thaws_skipped)
