"""The windowed max and mean behind the transaction coordinator's partition-load-time metrics,
as Kafka's sampled stats measure them: NaN with nothing recorded, what was recorded in the
last two 30-second samples, forgotten once a sample's last event is a minute old."""

from __future__ import annotations

import math

from broker.txns.stats import SAMPLE_WINDOW_MS, WindowedStat
from coordinator.clock import ManualClock


def test_a_windowed_stat_remembers_the_last_windows_only() -> None:
    clock = ManualClock(1_000_000)
    stat = WindowedStat(clock)
    assert math.isnan(stat.max) and math.isnan(stat.avg)
    stat.record(40.0)
    stat.record(20.0)
    assert (stat.max, stat.avg) == (40.0, 30.0)
    clock.advance(SAMPLE_WINDOW_MS)  # a second sample
    stat.record(90.0)
    assert (stat.max, stat.avg) == (90.0, 50.0)
    clock.advance(SAMPLE_WINDOW_MS)  # the first sample's last event is a minute old
    assert (stat.max, stat.avg) == (90.0, 90.0)
    clock.advance(SAMPLE_WINDOW_MS)
    assert math.isnan(stat.max) and math.isnan(stat.avg)
    for value in (1.0, 2.0, 3.0, 4.0):  # a sample per window: the last two are live
        clock.advance(SAMPLE_WINDOW_MS)
        stat.record(value)
    assert (stat.max, stat.avg) == (4.0, 3.5)
