"""Kafka's metrics, as the Prometheus JMX exporter names them, computed when a scrape asks.

One :class:`KafkaCollector` per process reads the state the process already keeps: the
controller candidate's context and counts (every process that stands for controller), the
replica manager's partitions, the group coordinator's committed offsets, and the counters of
:mod:`broker.metrics.traffic`. Nothing per partition is updated as records flow: the gauges per
partition are built here, at scrape time, from the partitions' current state.

The names are the JMX exporter's for Kafka's MBeans, lower-cased
(``kafka.controller:type=KafkaController,name=ActiveControllerCount`` ->
``kafka_controller_kafkacontroller_activecontrollercount``); Kafka's meters (``...PerSec``) are
counters, so the text format gives them the ``_total`` suffix; Kafka's timers are summaries
(``_count`` and ``_sum`` in milliseconds) but the request total time, a histogram. The consumer
lag follows kafka_exporter's names (``kafka_consumergroup_lag``). The transaction coordinator's
families come from :mod:`broker.metrics.transactions`. docs/metrics.md lists them all.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Literal

from prometheus_client import generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.registry import Collector

from broker.garbage import PAUSE_BUCKETS
from broker.metrics.traffic import REQUEST_TIME_BUCKETS_MS, RequestTimes, TopicTraffic
from broker.metrics.transactions import LATE_TRANSACTION_BUFFER_MS, transaction_families
from coordinator.clock import SYSTEM_CLOCK, Clock
from coordinator.codecs import TopicPartition
from replication.partition import Role

if TYPE_CHECKING:
    from broker.fetch_sessions import FetchSessionCache
    from broker.garbage import GarbageCollection
    from broker.groups import GroupCoordinator
    from broker.txns import TransactionCoordinator
    from replication.log import Log
    from replication.replica_manager import ReplicaManager
    from statemachines.controller import Controller

__all__ = ["KafkaCollector"]

log = logging.getLogger(__name__)

GROUP_READ_TIMEOUT = 2.0
"""How long a scrape waits for the group coordinator's loop to hand over the offsets."""

_KC = "kafka_controller_kafkacontroller_"
_CS = "kafka_controller_controllerstats_"
_EM = "kafka_controller_controllereventmanager_"
_RM = "kafka_server_replicamanager_"
_BT = "kafka_server_brokertopicmetrics_"
_RQ = "kafka_network_requestmetrics_"
_FS = "kafka_server_fetchsessioncache_"
_PARTITION = ("topic", "partition")
_LogRow = tuple[TopicPartition, int, int, int, int]
"""A replica's (partition, log size, log start offset, log end offset, LSO lag)."""
_LOG_GAUGES: tuple[tuple[str, str, Literal[1, 2, 3, 4]], ...] = (
    ("kafka_log_log_size", "Bytes of the partition's local log", 1),
    ("kafka_log_log_logstartoffset", "The partition's log start offset", 2),
    ("kafka_log_log_logendoffset", "The partition's log end offset", 3),
    ("kafka_cluster_partition_laststableoffsetlag",
     "The partition's high watermark minus its last stable offset", 4))
"""The per-partition gauges: name, help, column of a :data:`_LogRow`."""
DEFAULT_MAX_TXN_TIMEOUT_MS = 900_000
"""``transaction.max.timeout.ms``'s default, for a process without a transaction coordinator."""
_LABEL_CACHE = 200_000
"""Partitions whose label text is kept between scrapes (beyond: forgotten and made again)."""


class KafkaCollector(Collector):
    """The families of one process (a broker, or a controller-only process with only
    ``controller``). Every source is optional and read at :meth:`collect`; the callables
    return None while their object does not exist yet (a broker starting up)."""

    def __init__(self, *, controller: Callable[[], Controller | None] = lambda: None,
                 replica_manager: Callable[[], ReplicaManager | None] = lambda: None,
                 groups: Callable[[], GroupCoordinator | None] = lambda: None,
                 loop: asyncio.AbstractEventLoop | None = None,
                 traffic: TopicTraffic | None = None,
                 requests: RequestTimes | None = None,
                 transactions: Callable[[], TransactionCoordinator | None] = lambda: None,
                 fetch_sessions: Callable[[], FetchSessionCache | None] = lambda: None,
                 garbage: Callable[[], GarbageCollection | None] = lambda: None,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self._controller = controller
        self._garbage = garbage
        self._fetch_sessions = fetch_sessions
        self._replica_manager = replica_manager
        self._groups = groups
        self._transactions = transactions
        self._clock = clock
        self._loop = loop
        self._traffic = traffic
        self._requests = requests
        self._label_text: dict[TopicPartition, str] = {}

    def collect(self) -> Iterator[Metric]:
        yield from self._families(None)

    def exposition(self) -> bytes:
        """Every family in Prometheus's text format (version 0.0.4), as a scrape gets it. The
        gauges per partition are written here directly, each partition's labels formatted
        once and kept: prometheus_client's writer checks and escapes every label of every
        sample, which for 10,000 partitions takes longer than reading their state."""
        logs: list[_LogRow] = []
        head = generate_latest(_Families(list(self._families(logs))))
        if not logs:
            return head
        out = [head.decode()]
        labels = self._labels
        for name, text, column in _LOG_GAUGES:
            out.append(f"# HELP {name} {text}\n# TYPE {name} gauge\n")
            out.extend(f"{name}{labels(row[0])} {row[column]}\n" for row in logs)
        return "".join(out).encode()

    def _labels(self, tp: TopicPartition) -> str:
        text = self._label_text.get(tp)
        if text is None:
            if len(self._label_text) > _LABEL_CACHE:
                self._label_text.clear()
            text = self._label_text[tp] = (f'{{topic="{_escape(tp.topic)}",'
                                           f'partition="{tp.partition}"}}')
        return text

    def _families(self, logs: list[_LogRow] | None) -> Iterator[Metric]:
        """The families; with ``logs``, the per-partition log gauges go there as rows instead
        (for :meth:`exposition`)."""
        yield from self._controller_families(self._controller())
        manager = self._replica_manager()
        transactions = self._transactions()
        if manager is not None:
            yield from self._replica_families(manager, logs, transactions)
        if transactions is not None:
            yield from transaction_families(transactions)
        sessions = self._fetch_sessions()
        if sessions is not None:
            yield from _session_families(sessions)
        if self._traffic is not None:
            yield from self._traffic_families(self._traffic)
        if self._requests is not None:
            yield from self._request_families(self._requests)
        groups = self._groups()
        if groups is not None and manager is not None:
            yield from self._lag_families(groups, manager)
        garbage = self._garbage()
        if garbage is not None:
            yield from _garbage_families(garbage)

    # -- the controller ---------------------------------------------------------------------------

    def _controller_families(self, controller: Controller | None) -> Iterator[Metric]:
        active = controller is not None and controller.active
        offline = imbalance = partitions = topics = brokers = 0
        if controller is not None and active:
            ctx = controller.ctx
            live = set(ctx.brokers)
            deleting = set(ctx.deleting)
            leaders = dict(ctx.leaders)
            replicas = dict(ctx.replicas)
            partitions = len(replicas)
            topics = len(dict(ctx.topics))
            brokers = len(live)
            for tp, assigned in replicas.items():
                if tp.topic in deleting:
                    continue
                current = leaders.get(tp)
                leader = current.leader if current is not None else -1
                if leader not in live:
                    offline += 1
                if assigned and leader != assigned[0]:
                    imbalance += 1
        yield _gauge(_KC + "activecontrollercount",
                     "1 on the process whose candidate is the active controller, else 0",
                     1 if active else 0)
        yield _gauge(_KC + "offlinepartitionscount",
                     "Partitions without a live leader (topics being deleted left out); "
                     "reported by the active controller", offline)
        yield _gauge(_KC + "preferredreplicaimbalancecount",
                     "Partitions whose leader is not their preferred (first) replica; "
                     "reported by the active controller", imbalance)
        yield _gauge(_KC + "globalpartitioncount",
                     "Partitions in the cluster; reported by the active controller", partitions)
        yield _gauge(_KC + "globaltopiccount",
                     "Topics in the cluster; reported by the active controller", topics)
        yield _gauge(_KC + "activebrokercount",
                     "Registered (live) brokers; reported by the active controller", brokers)
        stats = controller.stats if controller is not None else None
        events = controller.events if controller is not None else None
        unclean = CounterMetricFamily(
            _CS + "uncleanleaderelectionspersec",
            "Partitions given a leader from outside their ISR by this process's controller")
        unclean.add_metric([], stats.unclean_elections if stats is not None else 0)
        yield unclean
        elections = SummaryMetricFamily(
            _CS + "leaderelectionrateandtimems",
            "Leader election rounds of this process's controller (that elected at least one "
            "leader) and the milliseconds they took")
        elections.add_metric([], stats.elections.count if stats is not None else 0,
                             stats.elections.seconds * 1000 if stats is not None else 0.0)
        yield elections
        yield _gauge(_EM + "eventqueuesize", "Events waiting in the controller's event queue",
                     events.pending() if events is not None else 0)
        queued = SummaryMetricFamily(
            _EM + "eventqueuetimems",
            "Controller events taken off the queue and the milliseconds they waited in it")
        timing = events.queue_time if events is not None else None
        queued.add_metric([], timing.count if timing is not None else 0,
                          timing.seconds * 1000 if timing is not None else 0.0)
        yield queued

    # -- the replica manager ---------------------------------------------------------------------

    def _replica_families(self, manager: ReplicaManager, logs: list[_LogRow] | None,
                          transactions: TransactionCoordinator | None) -> Iterator[Metric]:
        under = under_min = at_min = leaders = producer_ids = late = 0
        rows: list[_LogRow] = [] if logs is None else logs
        remote_sizes: dict[str, int] = {}
        partitions = manager.partitions()
        max_timeout_ms = (transactions.config.max_timeout_ms if transactions is not None
                          else DEFAULT_MAX_TXN_TIMEOUT_MS)
        late_before = self._clock.now_ms() - max_timeout_ms - LATE_TRANSACTION_BUFFER_MS
        for tp, partition in partitions.items():
            status = partition.status()
            lso_lag = partition.high_watermark - partition.last_stable_offset
            rows.append((tp, partition.log.size_bytes, status.log_start_offset,
                         status.log_end_offset, max(0, lso_lag)))
            producer_ids += len(partition.log.producer_entries())
            if status.role is not Role.LEADER:
                continue
            leaders += 1
            if _late_transaction(partition.log, late_before):
                late += 1
            isr = len(status.isr)
            if isr < len(status.replicas):
                under += 1
            min_isr = partition.min_insync_replicas
            if isr < min_isr:
                under_min += 1
            elif isr == min_isr:
                at_min += 1
            if manager.remote is not None and partition.log.config.remote_storage_enable:
                remote = manager.tiered.remote_log_size(tp)
                if remote is not None:
                    remote_sizes[tp.topic] = remote_sizes.get(tp.topic, 0) + remote
        yield _gauge(_RM + "partitioncount", "Partition replicas on this broker",
                     len(partitions))
        yield _gauge(_RM + "leadercount", "Partitions this broker leads", leaders)
        yield _gauge(_RM + "underreplicatedpartitions",
                     "Partitions led here whose ISR is smaller than their replica set", under)
        yield _gauge(_RM + "underminisrpartitioncount",
                     "Partitions led here whose ISR is smaller than min.insync.replicas",
                     under_min)
        yield _gauge(_RM + "atminisrpartitioncount",
                     "Partitions led here whose ISR is exactly min.insync.replicas", at_min)
        yield _gauge(_RM + "produceridcount",
                     "Producer ids (idempotent and transactional) in the producer state of "
                     "the partition replicas on this broker", producer_ids)
        yield _gauge(_RM + "partitionswithlatetransactionscount",
                     "Partitions led here whose oldest open transaction's producer last wrote "
                     "more than transaction.max.timeout.ms + 5 minutes ago", late)
        counts = manager.isr_counts
        shrinks = CounterMetricFamily(_RM + "isrshrinkspersec",
                                      "ISR writes of this broker's leaders that dropped a replica")
        shrinks.add_metric([], counts.shrinks)
        yield shrinks
        expands = CounterMetricFamily(_RM + "isrexpandspersec",
                                      "ISR writes of this broker's leaders that added a replica")
        expands.add_metric([], counts.expands)
        yield expands
        if logs is None:
            for name, text, column in _LOG_GAUGES:
                family = GaugeMetricFamily(name, text, labels=_PARTITION)
                for row in rows:
                    family.add_metric([row[0].topic, str(row[0].partition)], row[column])
                yield family
        if manager.remote is not None:
            copied = CounterMetricFamily(_BT + "remotecopybytespersec",
                                         "Bytes of log segments copied to remote storage")
            copied.add_metric([], manager.remote.copied_bytes)
            yield copied
            remote_size = GaugeMetricFamily(
                _BT + "remotelogsizebytes",
                "Bytes in remote storage of the partitions led here, per topic",
                labels=("topic",))
            for topic, total in sorted(remote_sizes.items()):
                remote_size.add_metric([topic], total)
            yield remote_size

    # -- traffic and requests ----------------------------------------------------------------------

    def _traffic_families(self, traffic: TopicTraffic) -> Iterator[Metric]:
        for name, counts, text in (
                ("bytesinpersec", traffic.bytes_in,
                 "Bytes produced to partitions led here"),
                ("messagesinpersec", traffic.messages_in,
                 "Records produced to partitions led here"),
                ("bytesoutpersec", traffic.bytes_out,
                 "Bytes of records fetched by consumers"),
                ("replicationbytesoutpersec", traffic.replication_bytes_out,
                 "Bytes of records fetched by followers")):
            family = CounterMetricFamily(_BT + name, text, labels=("topic",))
            for topic, value in sorted(dict(counts).items()):
                family.add_metric([topic], value)
            yield family

    def _request_families(self, requests: RequestTimes) -> Iterator[Metric]:
        rates = CounterMetricFamily(_RQ + "requestspersec", "Requests answered, per API",
                                    labels=("request",))
        times = HistogramMetricFamily(
            _RQ + "totaltimems",
            "Milliseconds from reading a request to sending its response, per API",
            labels=("request",))
        for name, (buckets, total) in sorted(requests.snapshot().items()):
            count = sum(buckets)
            rates.add_metric([name], count)
            times.add_metric([name], _cumulative(REQUEST_TIME_BUCKETS_MS, buckets), total)
        yield rates
        yield times

    # -- consumer lag ------------------------------------------------------------------------------

    def _lag_families(self, groups: GroupCoordinator, manager: ReplicaManager
                      ) -> Iterator[Metric]:
        offsets = self._committed(groups)
        labels = ("consumergroup", "topic", "partition")
        current = GaugeMetricFamily("kafka_consumergroup_current_offset",
                                    "A group's committed offset, for the groups coordinated here",
                                    labels=labels)
        lag = GaugeMetricFamily(
            "kafka_consumergroup_lag",
            "High watermark minus the committed offset, where this broker hosts a replica of "
            "the partition", labels=labels)
        for group_id, committed in sorted(offsets.items()):
            for (topic, index), offset in sorted(committed.items()):
                row = [group_id, topic, str(index)]
                current.add_metric(row, offset)
                partition = manager.partition(TopicPartition(topic, index))
                if partition is not None:
                    lag.add_metric(row, max(0, partition.high_watermark - offset))
        yield current
        yield lag

    def _committed(self, groups: GroupCoordinator) -> dict[str, dict[tuple[str, int], int]]:
        """The coordinator's offsets, read on its loop (it owns them)."""
        loop = self._loop
        if loop is None:
            return groups.manager.committed_offsets()
        answer: concurrent.futures.Future[dict[str, dict[tuple[str, int], int]]] = (
            concurrent.futures.Future())

        def read() -> None:
            try:
                answer.set_result(groups.manager.committed_offsets())
            except Exception as exc:  # reported on the scrape's side
                answer.set_exception(exc)

        try:
            loop.call_soon_threadsafe(read)
            return answer.result(GROUP_READ_TIMEOUT)
        except (RuntimeError, concurrent.futures.TimeoutError):  # loop closed or busy
            log.debug("consumer group offsets not read for this scrape", exc_info=True)
            return {}


def _late_transaction(log: Log, before_ms: int) -> bool:
    """Whether the producer of ``log``'s oldest open transaction last wrote (by its last
    batch's timestamp, as Kafka's ProducerStateManager.hasLateTransaction) before
    ``before_ms``."""
    ongoing = log.ongoing_transactions()
    if not ongoing:
        return False
    oldest = min(ongoing, key=ongoing.__getitem__)
    entry = log.producer_entry(oldest)
    return entry is not None and 0 < entry.last_timestamp < before_ms


def _session_families(cache: FetchSessionCache) -> Iterator[Metric]:
    """Kafka's FetchSessionCache MBeans: sessions held, their partitions, evictions."""
    yield _gauge(_FS + "numincrementalfetchsessions", "Incremental fetch sessions held",
                 len(cache))
    yield _gauge(_FS + "numincrementalfetchpartitionscached",
                 "Partitions of the incremental fetch sessions held", cache.partitions)
    evictions = CounterMetricFamily(_FS + "incrementalfetchsessionevictionspersec",
                                    "Fetch sessions evicted to make room for new ones")
    evictions.add_metric([], cache.evictions)
    yield evictions


def _cumulative(bounds: Sequence[float], counts: Sequence[float]) -> list[tuple[str, float]]:
    """A histogram's buckets for prometheus_client: ``counts`` per bucket of ``bounds`` (+Inf
    last, not cumulative) as (``le``, running count) pairs."""
    out, running = [], 0.0
    for bound, n in zip((*bounds, float("inf")), counts, strict=True):
        running += n
        out.append(("+Inf" if bound == float("inf") else repr(bound), running))
    return out


def _garbage_families(garbage: GarbageCollection) -> Iterator[Metric]:
    """The collector's passes (broker.garbage): not Kafka's, whose JVM reports its own."""
    seen = garbage.snapshot()
    pauses = HistogramMetricFamily(
        "partctl_gc_pause_seconds", "Seconds each pass of Python's garbage collector held "
        "the process, per generation (2: the full passes)", labels=("generation",))
    for generation, (row, total) in enumerate(zip(seen.buckets, seen.seconds, strict=True)):
        pauses.add_metric([str(generation)], _cumulative(PAUSE_BUCKETS, row), total)
    yield pauses
    longest = GaugeMetricFamily("partctl_gc_longest_pause_seconds", "The longest pass of the "
                                "collector since the broker started serving, per generation",
                                labels=("generation",))
    for generation, took in enumerate(seen.longest):
        longest.add_metric([str(generation)], took)
    yield longest
    for name, text, value in (
            ("partctl_gc_freezes", "Times what the collector's passes walk was frozen: once "
             "when the broker started serving, then after each full pass", seen.freezes),
            ("partctl_gc_thaws", "Full passes that walked the frozen objects again "
             "(partctl.gc.thaw.interval.ms)", seen.thaws),
            ("partctl_gc_thaws_skipped", "Thaws not done for the number of objects frozen "
             "(a controller's view in the process)", seen.thaws_skipped)):
        family = CounterMetricFamily(name, text)
        family.add_metric([], value)
        yield family


def _gauge(name: str, text: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, text, value=value)


def _escape(value: str) -> str:
    """A label value as the text format writes it."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class _Families:
    """Families already collected, in the shape prometheus_client's writer reads."""

    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return self._families
