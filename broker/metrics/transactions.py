"""Kafka 3.9's transaction metrics: what the transaction coordinator, its marker channel and
the leaders' KIP-890 verification count, and the families a scrape builds from them.

The coordinator side keeps plain numbers (:class:`Timings`, :class:`WindowedStat`) on its own
objects, updated on its loop; :func:`transaction_families` reads them when a scrape asks. The
families per partition and per replica manager (LastStableOffsetLag, ProducerIdCount,
PartitionsWithLateTransactionsCount) are read from the logs by
:mod:`broker.metrics.collector`. docs/metrics.md lists them all.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)

from coordinator.clock import SYSTEM_CLOCK, Clock

if TYPE_CHECKING:
    from broker.txns.coordinator import TransactionCoordinator

__all__ = ["LATE_TRANSACTION_BUFFER_MS", "Timings", "WindowedStat", "transaction_families"]

LATE_TRANSACTION_BUFFER_MS = 5 * 60 * 1000
"""How far past ``transaction.max.timeout.ms`` an open transaction's producer must have been
silent for its partition to count as having a late transaction (Kafka's
``ProducerStateManager.LATE_TRANSACTION_BUFFER_MS``)."""

SAMPLE_WINDOW_MS = 30_000
"""``metrics.sample.window.ms``'s default: the span of one sample of a windowed stat."""
SAMPLES = 2
"""``metrics.num.samples``'s default: a windowed stat forgets what is older than this many
windows."""

_TX = "kafka_coordinator_transaction_transactionmarkerchannelmanager_"
_AP = "kafka_server_addpartitionstotxnmanager_"
_TC = "kafka_server_transaction_coordinator_metrics_"


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


def transaction_families(coordinator: TransactionCoordinator) -> Iterator[Metric]:
    """The families of a broker's transaction coordinator, its marker channel and its
    leaders' verification (Kafka's AddPartitionsToTxnManager)."""
    verifier = coordinator.verifier
    failures = CounterMetricFamily(
        _AP + "verificationfailurerate",
        "Partitions of transactional produces and offset commits that the transaction "
        "coordinator did not verify (an error in its answer, or no answer)")
    failures.add_metric([], verifier.failures)
    yield failures
    times = SummaryMetricFamily(
        _AP + "verificationtimems",
        "Verifications with the transaction coordinator and the milliseconds each took, "
        "waiting behind the request in flight included")
    times.add_metric([], verifier.times.count, verifier.times.total_ms)
    yield times
    loads = coordinator.manager.load_times
    yield GaugeMetricFamily(
        _TC + "partition_load_time_max",
        "The longest load of a __transaction_state partition in the last 30 to 60 seconds, "
        "in milliseconds (NaN: none)", value=loads.max)
    yield GaugeMetricFamily(
        _TC + "partition_load_time_avg",
        "The mean load time of the __transaction_state partitions loaded in the last 30 to "
        "60 seconds, in milliseconds (NaN: none)", value=loads.avg)
    markers = coordinator.markers
    yield GaugeMetricFamily(
        _TX + "unknowndestinationqueuesize",
        "Transaction markers waiting for their partition's leader to be known",
        value=markers.unknown_destination_waiting)
    yield GaugeMetricFamily(
        _TX + "logappendretryqueuesize",
        "Completed transactions whose CompleteCommit/CompleteAbort write to "
        "__transaction_state failed and waits to be retried",
        value=markers.log_append_retry_waiting)
