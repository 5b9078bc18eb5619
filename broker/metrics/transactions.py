"""Kafka 3.9's transaction metrics: what the transaction coordinator, its marker channel and
the leaders' KIP-890 verification count, and the families a scrape builds from them.

The coordinator side keeps plain numbers (:mod:`broker.txns.stats`) on its own objects, updated
on its loop; :func:`transaction_families` reads them when a scrape asks. The
families per partition and per replica manager (LastStableOffsetLag, ProducerIdCount,
PartitionsWithLateTransactionsCount) are read from the logs by
:mod:`broker.metrics.collector`. docs/metrics.md lists them all.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)

if TYPE_CHECKING:
    from broker.txns.coordinator import TransactionCoordinator

__all__ = ["LATE_TRANSACTION_BUFFER_MS", "transaction_families"]

LATE_TRANSACTION_BUFFER_MS = 5 * 60 * 1000
"""How far past ``transaction.max.timeout.ms`` an open transaction's producer must have been
silent for its partition to count as having a late transaction (Kafka's
``ProducerStateManager.LATE_TRANSACTION_BUFFER_MS``)."""

_TX = "kafka_coordinator_transaction_transactionmarkerchannelmanager_"
_AP = "kafka_server_addpartitionstotxnmanager_"
_TC = "kafka_server_transaction_coordinator_metrics_"


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
