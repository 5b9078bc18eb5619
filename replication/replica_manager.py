"""A broker's replica manager: its partitions, the control-plane requests, produce and fetch.

The controller's requests arrive here (LeaderAndIsr, StopReplica, UpdateMetadata) and are
answered with a code per partition: a request from an older controller epoch is refused whole,
a partition entry with an older leader epoch is ignored, as Kafka does. Producers, consumers
and followers call :meth:`ReplicaManager.produce`, :meth:`ReplicaManager.read`,
:meth:`ReplicaManager.fetch` and :meth:`ReplicaManager.offsets_for_leader_epoch`.

Time-driven duties (ISR expiry, ISR change announcements, HW checkpoints, produce timeouts, and
the logs' own through its :class:`~replication.log_manager.LogManager`) run from
:meth:`ReplicaManager.tick`, which a background thread calls in real use and a test calls after
moving a manual clock. On start the log manager opens every partition directory in the log
directory and the partitions get their high watermarks back from its checkpoint.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from coordinator.clock import Clock
from coordinator.codecs import TopicPartition
from coordinator.errors import CoordinatorError
from coordinator.skipped import SkippedTopics
from interbroker.channel import BrokerResponse
from interbroker.controller_client import ControllerClient
from interbroker.errors import ErrorCode
from interbroker.fencing import RequestFence, log_fenced
from interbroker.requests import (
    EPOCH_DURING_DELETE,
    NO_EPOCH,
    LeaderAndIsrPartition,
    LeaderAndIsrRequest,
    LiveBroker,
    StopReplicaRequest,
    UpdateMetadataPartition,
    UpdateMetadataRequest,
)
from replication.config import ReplicaConfig
from replication.delayed_produce import ProduceFuture, failed
from replication.epochs import BATCH_WRITERS, batched_epoch_writes
from replication.errors import InvalidEpochError, StorageError
from replication.fetcher import ReplicaFetcher
from replication.isr import IsrChangeBatcher, IsrStore, LocalIsrStore
from replication.log import Log, LogSlice
from replication.log_manager import LogManager
from replication.log_throttle import ThrottledLog, out_of_descriptors
from replication.partition import IsrCounts, Partition, ReplicaStatus, Role
from replication.protocol import (
    ACKS_ALL,
    AppendOrigin,
    ConsumerRead,
    EpochAnswer,
    FetchEndpoint,
    FetchResult,
    OffsetAnswer,
)
from replication.quota import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    ReplicationQuota,
    ThrottledReplicas,
)
from replication.tiered import RemoteLogManager, TopicIdPartition
from replication.tiered_replicas import TieredReplicas, topic_id_of
from replication.txn_markers import MarkerListener, MarkerListeners, append_marker

__all__ = ["ReplicaManager"]

log = logging.getLogger(__name__)
_OUT_OF_FILES = ThrottledLog(log)
"""Logs the logs that cannot open for want of descriptors: once per interval, no traceback."""

LEADER_DURING_DELETE = -2  # UpdateMetadata's leader for a partition being deleted


class ReplicaManager:
    """The replicas of broker ``broker_id``, stored under ``log_dir``.

    ``controller`` is the broker's client of the controller, through which leaders write ISR
    changes and announce them; without one (unit tests) ISR changes stay in memory.
    ``transport`` maps broker ids to the endpoints followers fetch from; it is read on every
    round, so it may be a live view that changes as brokers come and go. ``broker_epoch``, if
    given, refuses requests for an earlier registration; under a
    :class:`~statemachines.participant.Participant` (a broker node) the participant does that.
    The manager is a :class:`~interbroker.channel.RequestHandler`: the controller's requests
    reach it as they are and it answers with the contract's codes.

    Per-topic configs: ``config`` holds the broker's defaults; :meth:`update_topic_config`
    gives a topic's overrides (Kafka's keys), applied to its partitions at once and to those
    created later. ``topic_configs``, if given, reads the overrides of topics from the store
    (Kafka's config repository): called, in bulk, for the topics of partitions a LeaderAndIsr
    creates here, so a topic created with overrides starts with them. Without it (no
    coordinator) only what :meth:`update_topic_config` gave applies.
    Thread-safe.
    """

    def __init__(
        self,
        broker_id: int,
        log_dir: Path | str,
        controller: ControllerClient | None,
        clock: Clock,
        config: ReplicaConfig | None = None,
        *,
        transport: Mapping[int, FetchEndpoint] | None = None,
        broker_epoch: int | None = None,
        topic_configs: Callable[[Iterable[str]], Mapping[str, Mapping[str, str]]] | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.controller = controller
        self.clock = clock
        self.config = config or ReplicaConfig()
        self.broker_epoch = broker_epoch
        self._isr_store: IsrStore = controller if controller is not None else LocalIsrStore()
        now = clock.now_ms()
        cfg = self.config
        self._isr_changes = IsrChangeBatcher(
            check_interval_ms=cfg.isr_change_check_interval_ms,
            blackout_ms=cfg.isr_change_blackout_ms,
            max_delay_ms=cfg.isr_change_max_delay_ms,
            now_ms=now,
        )
        self._lock = threading.RLock()  # serialises control-plane requests
        self._partitions: dict[TopicPartition, Partition] = {}
        self.isr_counts = IsrCounts()
        """The ISR shrinks and expands this broker wrote as a leader (for the metrics)."""
        self._waiting: set[Partition] = set()  # partitions with acks=all produces waiting
        self._fence = RequestFence(broker_id, lambda: self.broker_epoch)
        self._metadata_cache: dict[TopicPartition, UpdateMetadataPartition] = {}
        # Partitions named in LeaderAndIsr requests: like the metadata cache, what this broker
        # knows to exist in the cluster whether or not it hosts them.
        self._named_in_leader_and_isr: set[TopicPartition] = set()
        self._skipped = SkippedTopics(log, f"broker {broker_id}")
        """Topics with names Kafka forbids (another tool wrote them in the store, another
        controller sent them): no log directory, one warning each."""
        self._live_brokers: dict[int, LiveBroker] = {}
        self._append_listeners: list[Callable[[], None]] = []
        self._markers = MarkerListeners()
        self._topic_ids: dict[str, uuid.UUID] = {}
        self.tiered = TieredReplicas(broker_id, self._partitions, self._topic_ids)
        self.logs = LogManager(broker_id, log_dir, clock, self.config, hosted=self._hosted_logs,
                               tiered_partitions=self.tiered.tiered_partitions,
                               on_topic_settings=self._reconfigure_topic,
                               topic_configs=topic_configs)
        """The broker's logs: loading, checkpoints, retention, flushes, cleaner, remote tier."""
        self.log_dir = self.logs.log_dir
        self.remote: RemoteLogManager | None = self.logs.remote
        self.tiered.remote = self.remote
        self._next_isr_check_ms = now + cfg.replica_lag_time_max_ms // 2
        self._next_hw_checkpoint_ms = now + cfg.high_watermark_checkpoint_interval_ms
        self._running = True
        self._epoch_writer = ThreadPoolExecutor(BATCH_WRITERS, thread_name_prefix="epoch-write")
        self._ticker: threading.Thread | None = None
        self._ticker_stop = threading.Event()
        # Replication throttles (Kafka's ReplicationQuotaManager, one per side): the rates
        # come from the broker's dynamic config, the replicas from the topics' configs.
        self.leader_quota = ReplicationQuota()
        self.follower_quota = ReplicationQuota()
        self.leader_throttled = ThrottledReplicas(broker_id, LEADER_REPLICAS)
        self.follower_throttled = ThrottledReplicas(broker_id, FOLLOWER_REPLICAS)
        self.fetcher = ReplicaFetcher(
            broker_id, transport if transport is not None else {}, self._partitions.get, cfg,
            remote_aux=self.tiered.remote_aux_state if self.remote is not None else None,
            quota=self.follower_quota, throttled=self.follower_throttled.__contains__,
        )
        for tp, log_, hw in self.logs.load_logs():
            self._partitions[tp] = self._new_partition(tp, log_, hw)

    # -- start-up ------------------------------------------------------------------------------

    def _tiered_id(self, tp: TopicPartition) -> TopicIdPartition | None:
        return self.tiered.tiered_id(tp)

    def _hosted_logs(self) -> list[tuple[TopicPartition, Log, int]]:
        """The logs of the partitions here, each with its high watermark."""
        return [(tp, p.log, p.high_watermark) for tp, p in list(self._partitions.items())]

    def _new_partition(self, tp: TopicPartition, log_: Log, hw: int) -> Partition:
        return Partition(
            tp, log_, broker_id=self.broker_id, clock=self.clock,
            config=self.config_for(tp.topic),
            isr_store=self._isr_store, on_isr_change=self._record_isr_change,
            high_watermark=hw, isr_eligible=self._isr_eligible, isr_counts=self.isr_counts,
            waiting=self._waiting,
        )

    def _isr_eligible(self, replica: int) -> bool:
        """A follower may join an ISR while the latest metadata counts its broker live (or
        before any metadata arrived): a broker in controlled shutdown is left out of it."""
        live = self._live_brokers
        return not live or replica in live

    def _record_isr_change(self, tp: TopicPartition) -> None:
        self._isr_changes.record(tp, self.clock.now_ms())

    # -- per-topic configs ----------------------------------------------------------------------

    def config_for(self, topic: str) -> ReplicaConfig:
        """The settings ``topic``'s partitions run on: the broker's, with its overrides."""
        return self.logs.config_for(topic)

    def update_topic_config(self, topic: str, overrides: Mapping[str, str]) -> None:
        """Run ``topic``'s partitions, here now and created later, on the broker's defaults
        with ``overrides`` (Kafka's topic config keys, as stored; an empty mapping returns to
        the defaults). Takes effect at once: ``min.insync.replicas`` on the next produce (and
        the HW), the log settings on the next append and retention pass. Keys partctl does not
        apply are kept and ignored; values that do not parse are ignored with a warning."""
        with self._lock:
            self.logs.set_topic_config(topic, overrides)
        self.leader_throttled.update(topic, overrides)
        self.follower_throttled.update(topic, overrides)

    def update_broker_config(self, overrides: Mapping[str, str]) -> None:
        """Apply this broker's dynamic config (``/config/brokers/<id>`` over the cluster's
        ``<default>``): the replication throttle rates, bytes per second (unset: no limit).
        Values that do not parse are ignored with a warning (they are validated where they
        are written)."""
        for key, quota in ((LEADER_RATE, self.leader_quota),
                           (FOLLOWER_RATE, self.follower_quota)):
            quota.configure(key, overrides.get(key), f"broker {self.broker_id}")

    def leader_throttles(self, tp: TopicPartition, replica_id: int) -> bool:
        """Whether a fetch of ``tp`` by follower ``replica_id`` gets nothing now: the
        partition is leader-throttled here, the follower is out of sync, and the leader's
        quota is spent (Kafka's shouldLeaderThrottle)."""
        return self._leader_throttled(tp, replica_id) and self.leader_quota.exceeded()

    def _leader_throttled(self, tp: TopicPartition, replica_id: int) -> bool:
        if self.leader_quota.rate is None or tp not in self.leader_throttled:
            return False
        partition = self._partitions.get(tp)
        return partition is not None and replica_id not in partition.isr

    def _reconfigure_topic(self, topic: str, settings: ReplicaConfig) -> None:
        for tp, partition in list(self._partitions.items()):
            if tp.topic == topic:
                partition.reconfigure(settings)

    # -- introspection -------------------------------------------------------------------------

    @property
    def transport(self) -> Mapping[int, FetchEndpoint]:
        """Broker id -> the endpoint this broker's fetcher reaches that leader through."""
        return self.fetcher.transport

    @transport.setter
    def transport(self, transport: Mapping[int, FetchEndpoint]) -> None:
        self.fetcher.transport = transport

    @property
    def running(self) -> bool:
        return self._running

    @property
    def controller_epoch(self) -> int:
        """The highest controller epoch seen."""
        return self._fence.controller_epoch

    def partition(self, tp: TopicPartition) -> Partition | None:
        return self._partitions.get(tp)

    def partitions(self) -> dict[TopicPartition, Partition]:
        return dict(self._partitions)

    def status(self, tp: TopicPartition) -> ReplicaStatus | None:
        p = self._partitions.get(tp)
        return p.status() if p is not None else None

    def metadata_for(self, tp: TopicPartition) -> UpdateMetadataPartition | None:
        """The partition's leader and ISR as the last UpdateMetadata told them."""
        return self._metadata_cache.get(tp)

    @property
    def live_brokers(self) -> dict[int, LiveBroker]:
        return dict(self._live_brokers)

    def add_append_listener(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (cheaply, on the producer's thread) after every leader append: how
        in-process followers learn there is something to fetch without polling."""
        self._append_listeners.append(callback)

    def remove_append_listener(self, callback: Callable[[], None]) -> None:
        try:
            self._append_listeners.remove(callback)
        except ValueError:
            pass

    # -- control plane -------------------------------------------------------------------------

    def _check_request(
        self, what: str,
        request: LeaderAndIsrRequest | StopReplicaRequest | UpdateMetadataRequest,
    ) -> ErrorCode:
        """The epoch checks of a controller request (the contract's fence), each refusal on the
        state-change log."""
        if not self._running:
            return ErrorCode.BROKER_NOT_AVAILABLE
        return self._fence.check(what, request)

    def handle_leader_and_isr(self, request: LeaderAndIsrRequest) -> BrokerResponse:
        """Become leader or follower of each partition in ``request``."""
        with self._lock:
            error = self._check_request("LeaderAndIsr", request)
            if error:
                log.warning("broker %d refuses LeaderAndIsr from controller %d epoch %d: %s",
                            self.broker_id, request.controller_id, request.controller_epoch,
                            error.name)
                return BrokerResponse(error=error)
            for broker in request.live_leaders:
                self._live_brokers[broker.id] = broker
            for topic, text in request.topic_ids.items():
                topic_id = topic_id_of(text)
                if topic_id is not None:
                    self._topic_ids[topic] = topic_id
            illegal = {t for t in {e.topic for e in request.partitions}
                       if not self._skipped.legal(t)}
            self.logs.fetch_topic_configs({
                e.topic for e in request.partitions
                if self.broker_id in e.replicas and TopicPartition(
                    topic=e.topic, partition=e.partition) not in self._partitions
                and e.topic not in illegal})
            errors = {}
            with batched_epoch_writes(self._epoch_writer):  # after the answer (epochs.py)
                for entry in request.partitions:
                    tp = TopicPartition(topic=entry.topic, partition=entry.partition)
                    if illegal and tp.topic in illegal:
                        errors[tp] = ErrorCode.INVALID_TOPIC_EXCEPTION
                        continue
                    self._named_in_leader_and_isr.add(tp)
                    errors[tp] = self._apply(tp, entry, request)
            self.tiered.tell_remote_of_roles(tp for tp, e in errors.items() if not e)
            return BrokerResponse.of(errors)

    def _apply(self, tp: TopicPartition, entry: LeaderAndIsrPartition,
               request: LeaderAndIsrRequest) -> ErrorCode:
        if self.broker_id not in entry.replicas:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        partition = self._partitions.get(tp)
        if partition is not None:
            current = partition.leader_epoch
            if entry.leader_epoch < current:
                log_fenced("broker", self.broker_id, "LeaderAndIsr", "stale leader epoch",
                           given=entry.leader_epoch, current=current, partition=tp,
                           controller_id=request.controller_id,
                           controller_epoch=request.controller_epoch)
                return ErrorCode.STALE_CONTROLLER_EPOCH
            if entry.leader_epoch == current and partition.role is not Role.NONE:
                if entry.partition_epoch > partition.partition_epoch:
                    partition.update_metadata(entry)
                    return ErrorCode.NONE
                return ErrorCode.STALE_CONTROLLER_EPOCH
        if partition is None:
            try:
                log_ = self.logs.create_log(tp)
            except (StorageError, OSError, ValueError) as exc:
                if out_of_descriptors(exc):  # one line per interval, not one per partition
                    _OUT_OF_FILES.warning("broker %d cannot open the log of %s: %s (the "
                                          "open-file limit)", self.broker_id, tp, exc)
                else:
                    log.exception("broker %d cannot open the log of %s", self.broker_id, tp)
                return ErrorCode.KAFKA_STORAGE_ERROR
            partition = self._partitions[tp] = self._new_partition(tp, log_, 0)
        if entry.leader == self.broker_id:
            self.fetcher.remove_partition(tp)
            try:
                partition.make_leader(entry)
            except InvalidEpochError as exc:
                log.error("broker %d cannot lead %s: %s", self.broker_id, tp, exc)
                return ErrorCode.FENCED_LEADER_EPOCH
            log.info("broker %d leads %s at epoch %d, ISR %s", self.broker_id, tp,
                     entry.leader_epoch, entry.isr)
        else:
            if partition.make_follower(entry):
                self.fetcher.follow(tp, entry.leader, entry.leader_epoch)
            elif entry.leader < 0:
                self.fetcher.remove_partition(tp)
        return ErrorCode.NONE

    def handle_stop_replica(self, request: StopReplicaRequest) -> BrokerResponse:
        """Stop leading or following each partition; delete its log when asked."""
        with self._lock:
            error = self._check_request("StopReplica", request)
            if error:
                return BrokerResponse(error=error)
            errors = {}
            for entry in request.partitions:
                tp = TopicPartition(topic=entry.topic, partition=entry.partition)
                partition = self._partitions.get(tp)
                if (
                    partition is not None
                    and entry.leader_epoch not in (NO_EPOCH, EPOCH_DURING_DELETE)
                    and entry.leader_epoch < partition.leader_epoch
                ):
                    log_fenced("broker", self.broker_id, "StopReplica", "stale leader epoch",
                               given=entry.leader_epoch, current=partition.leader_epoch,
                               partition=tp, controller_id=request.controller_id,
                               controller_epoch=request.controller_epoch)
                    errors[tp] = ErrorCode.FENCED_LEADER_EPOCH
                    continue
                self.fetcher.remove_partition(tp)
                if partition is not None:
                    partition.stop()
                tid = self._tiered_id(tp)
                tiered = (self.remote is not None and tid is not None and partition is not None
                          and partition.log.config.remote_storage_enable)
                if tiered:
                    assert self.remote is not None and tid is not None
                    self.remote.metadata.on_stop_partitions([tid])
                if entry.delete:
                    if entry.leader_epoch == EPOCH_DURING_DELETE:  # the topic itself goes
                        self._named_in_leader_and_isr.discard(tp)
                        if tiered:
                            assert self.remote is not None and tid is not None
                            log.info("broker %d deletes the remote data of %s", self.broker_id,
                                     tid)
                            self.remote.delete_partition(tid)
                    errors[tp] = self._delete_partition(tp, partition)
                else:
                    errors[tp] = ErrorCode.NONE
            return BrokerResponse.of(errors)

    def _delete_partition(self, tp: TopicPartition, partition: Partition | None) -> ErrorCode:
        self._partitions.pop(tp, None)
        deleted = self.logs.delete_log(tp, partition.log if partition is not None else None)
        return ErrorCode.NONE if deleted else ErrorCode.KAFKA_STORAGE_ERROR

    def handle_update_metadata(self, request: UpdateMetadataRequest) -> BrokerResponse:
        """Remember leaders and live brokers, for clients and fetchers."""
        with self._lock:
            error = self._check_request("UpdateMetadata", request)
            if error:
                return BrokerResponse(error=error)
            self._live_brokers = {b.id: b for b in request.live_brokers}
            for entry in request.partitions:
                tp = TopicPartition(topic=entry.topic, partition=entry.partition)
                if entry.leader == LEADER_DURING_DELETE:
                    self._metadata_cache.pop(tp, None)
                    self._named_in_leader_and_isr.discard(tp)
                else:
                    self._metadata_cache[tp] = entry
            return BrokerResponse()

    # -- data plane ----------------------------------------------------------------------------

    def produce(
        self,
        tp: TopicPartition,
        records: bytes | bytearray,
        acks: int = ACKS_ALL,
        timeout_ms: int | None = None,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        guard: int | None = None,
    ) -> ProduceFuture:
        """Append a producer's raw v2 batches to the partition this broker leads: what a
        Produce request's partition entry turns into (``records`` as the request carries them,
        ``acks`` and ``timeout_ms`` from the request).

        Returns a future of :class:`ProduceResult`, complete at once for acks 0 and 1 and, for
        acks=all, once the HW passes the batches (or with an error on leadership loss or after
        ``timeout_ms``), carrying what the response needs: ``error`` (Kafka's code),
        ``base_offset``, ``log_append_time``, ``log_start_offset`` and ``error_message``.

        An idempotent producer's batch (producer id >= 0) is checked against the partition's
        producer state first: a retry of one of the producer's last five batches is answered
        NONE with the original ``base_offset`` (``duplicate`` set) and not appended again; a
        gap in its sequence is OUT_OF_ORDER_SEQUENCE_NUMBER, an older epoch
        INVALID_PRODUCER_EPOCH, such a batch sent along with others or without a sequence
        INVALID_RECORD. Nothing is appended then. ``origin`` COORDINATOR is a coordinator
        appending to its internal topic (:class:`AppendOrigin`: epochs checked, sequences not,
        control batches taken); ``guard`` is KIP-890's (:meth:`Log.append_as_leader`)."""
        if not self._running:
            return failed(Future(), ErrorCode.BROKER_NOT_AVAILABLE)
        partition = self._partitions.get(tp)
        if partition is None:
            return failed(Future(), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        future = partition.append_as_leader(
            records, acks, self.config.request_timeout_ms if timeout_ms is None else timeout_ms,
            origin, guard)
        for listener in self._append_listeners:
            listener()
        return future

    def write_txn_marker(self, tp: TopicPartition, *, producer_id: int, producer_epoch: int,
                         commit: bool, coordinator_epoch: int, timeout_ms: int | None = None
                         ) -> ProduceFuture:
        """Append an end-transaction marker to ``tp`` as its leader, acks=all (see
        :mod:`replication.txn_markers`): a future of :class:`ProduceResult` as
        :meth:`produce` answers. UNKNOWN_TOPIC_OR_PARTITION when the partition is not here,
        NOT_LEADER_OR_FOLLOWER when it is not led here; nothing is appended on any error.
        Once the marker completes, the :meth:`add_marker_listener` listeners are told."""
        if not self._running:
            return failed(Future(), ErrorCode.BROKER_NOT_AVAILABLE)
        partition = self._partitions.get(tp)
        if partition is None:
            return failed(Future(), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        future = append_marker(
            partition, self.clock, producer_id=producer_id, producer_epoch=producer_epoch,
            commit=commit, coordinator_epoch=coordinator_epoch,
            timeout_ms=self.config.request_timeout_ms if timeout_ms is None else timeout_ms)
        self._markers.watch(future, tp, producer_id, producer_epoch, commit)
        for listener in self._append_listeners:
            listener()
        return future

    def add_marker_listener(self, callback: MarkerListener,
                            loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Call ``callback(tp, producer_id, producer_epoch, commit)`` after each marker
        :meth:`write_txn_marker` wrote completes (acks=all satisfied) here: on ``loop``, by
        default the loop this is called on (else on the thread that completed it)."""
        self._markers.add(callback, loop)

    def remove_marker_listener(self, callback: MarkerListener) -> None:
        self._markers.remove(callback)

    def fetch(
        self, tp: TopicPartition, offset: int, max_bytes: int, replica_id: int, leader_epoch: int,
        last_fetched_epoch: int = -1, *, update_state: bool = True, log_start_offset: int = -1,
        as_slice: bool = False,
    ) -> FetchResult:
        """A fetch from a follower (``replica_id`` >= 0: up to the log end, moving its state
        here unless ``update_state`` is false, answering a diverging epoch against
        ``last_fetched_epoch``, see :meth:`Partition.fetch_for_follower`) or a consumer (below
        the HW only). ``log_start_offset`` is a follower's own (for DeleteRecords). A
        follower's records come as a :class:`~replication.log.LogSlice` with ``as_slice``
        (sent with ``sendfile``; the caller closes it)."""
        if not self._running:
            return FetchResult(error=ErrorCode.BROKER_NOT_AVAILABLE)
        partition = self._partitions.get(tp)
        if partition is None:
            return FetchResult(error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if replica_id < 0:
            read = self.tiered.read_with_remote(tp, partition, offset, max_bytes)
            return FetchResult(error=read.error, records=read.records,
                               high_watermark=read.high_watermark)
        throttled = self._leader_throttled(tp, replica_id)
        if throttled and self.leader_quota.exceeded():
            max_bytes = 0  # the follower's position is still recorded; no records go out
        result = partition.fetch_for_follower(replica_id, offset, max_bytes, leader_epoch,
                                              last_fetched_epoch, update_state=update_state,
                                              log_start_offset=log_start_offset,
                                              as_slice=as_slice)
        if throttled and max_bytes == 0 and result.records:
            if isinstance(result.records, LogSlice):
                result.records.close()
            result = replace(result, records=b"")
        if throttled and result.records:
            self.leader_quota.record(len(result.records))
        return result

    def offsets_for_leader_epoch(
        self, tp: TopicPartition, epoch: int, current_leader_epoch: int
    ) -> EpochAnswer:
        """Where this leader's copy of ``epoch`` ends (the largest known epoch <= it).

        A partition not hosted here is NOT_LEADER_OR_FOLLOWER if the broker knows it exists
        (from UpdateMetadata or LeaderAndIsr), so the asker refreshes its metadata and goes to
        the leader, and UNKNOWN_TOPIC_OR_PARTITION only if it does not (Kafka's rule)."""
        if not self._running:
            return EpochAnswer(error=ErrorCode.BROKER_NOT_AVAILABLE)
        partition = self._partitions.get(tp)
        if partition is None:
            if tp in self._metadata_cache or tp in self._named_in_leader_and_isr:
                return EpochAnswer(error=ErrorCode.NOT_LEADER_OR_FOLLOWER)
            return EpochAnswer(error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        error, answer_epoch, end = partition.end_offset_for_epoch(epoch, current_leader_epoch)
        return EpochAnswer(error=error, epoch=answer_epoch, end_offset=end)

    def earliest_local_offset(self, tp: TopicPartition, current_leader_epoch: int
                              ) -> OffsetAnswer:
        """ListOffsets EARLIEST_LOCAL (-4) from a follower: where this leader's local log
        starts, with the epoch there (the log start for a topic that is not tiered)."""
        if not self._running:
            return OffsetAnswer(error=ErrorCode.BROKER_NOT_AVAILABLE)
        partition = self._partitions.get(tp)
        if partition is None:
            return OffsetAnswer(error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return partition.earliest_local_offset(current_leader_epoch)

    def read(self, tp: TopicPartition, offset: int, max_bytes: int) -> ConsumerRead:
        """A consumer's read from the leader: whole batches below the high watermark."""
        if not self._running:
            return ConsumerRead(error=ErrorCode.BROKER_NOT_AVAILABLE)
        partition = self._partitions.get(tp)
        if partition is None:
            return ConsumerRead(error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return self.tiered.read_with_remote(tp, partition, offset, max_bytes)

    # -- periodic duties -----------------------------------------------------------------------

    def maybe_shrink_isr(self) -> list[TopicPartition]:
        """Drop out-of-sync followers from the ISR of every partition led here."""
        return [tp for tp, p in list(self._partitions.items()) if p.maybe_shrink_isr()]

    def maybe_propagate_isr_changes(self) -> list[TopicPartition]:
        """Announce the ISR changes that are due (see :class:`IsrChangeBatcher`)."""
        due = self._isr_changes.take_due(self.clock.now_ms())
        if due and self.controller is not None:
            try:
                self.controller.notify_isr_change(due)
            except CoordinatorError as exc:
                log.warning("broker %d could not announce ISR changes: %s", self.broker_id, exc)
                self._isr_changes.put_back(due)
                return []
        return due

    def expire_produces(self) -> None:
        """Fail the acks=all produces whose timeout passed, on the partitions where some
        wait (``_waiting``: idle partitions cost the ticker nothing)."""
        now = self.clock.now_ms()
        for p in list(self._waiting):
            p.expire_produces(now)

    def tick(self) -> None:
        """Run the periodic duties that are due at the clock's current time."""
        if not self._running:
            return
        cfg = self.config
        now = self.clock.now_ms()
        if now >= self._next_isr_check_ms:
            self._next_isr_check_ms = now + cfg.replica_lag_time_max_ms // 2
            self.maybe_shrink_isr()
        self.maybe_propagate_isr_changes()
        self.expire_produces()
        self.logs.tick(now)
        if now >= self._next_hw_checkpoint_ms:
            self._next_hw_checkpoint_ms = now + cfg.high_watermark_checkpoint_interval_ms
            self.logs.checkpoint_high_watermarks()

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Run the fetcher, the periodic duties and the log manager's threads (the cleaner,
        the remote tier) in the background."""
        self.fetcher.start()
        self.logs.start()
        if self._ticker is None:
            self._ticker_stop.clear()
            self._ticker = threading.Thread(
                target=self._tick_loop, name=f"replica-ticker-{self.broker_id}", daemon=True
            )
            self._ticker.start()

    def _tick_loop(self) -> None:
        interval = self.config.tick_interval_ms / 1000
        while not self._ticker_stop.wait(interval):
            try:
                self.tick()
            except Exception as exc:
                if out_of_descriptors(exc):
                    _OUT_OF_FILES.warning("broker %d: periodic duties failed: %s (the open-file "
                                          "limit)", self.broker_id, exc)
                else:
                    log.exception("broker %d: periodic duties failed", self.broker_id)

    def _stop_threads(self) -> None:
        self._epoch_writer.shutdown()  # the epoch files queued, written before the logs close
        self.fetcher.stop()
        self.logs.stop()
        if self._ticker is not None:
            self._ticker_stop.set()
            self._ticker.join()
            self._ticker = None

    def shutdown(self) -> None:
        """Stop cleanly: checkpoint the HWs and recovery points, close every log."""
        with self._lock:
            if not self._running:
                return
            self._running = False
            self._stop_threads()
            for p in self._partitions.values():
                p.stop(ErrorCode.BROKER_NOT_AVAILABLE)
            self.logs.shutdown()

    def crash(self, *, lose_unflushed: bool = False, torn_bytes: int = 0) -> None:
        """Stop as a killed process would (tests): no checkpoints, no clean-shutdown marker,
        and with ``lose_unflushed`` as after a power failure, every log cut back to what was
        fsynced (leaving ``torn_bytes`` of the first lost batch). Waiting produces fail, as
        their connections would."""
        with self._lock:
            if not self._running:
                return
            self._running = False
            self._stop_threads()
            for p in self._partitions.values():
                p.stop(ErrorCode.BROKER_NOT_AVAILABLE)
            self.logs.crash(lose_unflushed=lose_unflushed, torn_bytes=torn_bytes)

    def __repr__(self) -> str:
        state = "running" if self._running else "stopped"
        return f"ReplicaManager(broker={self.broker_id}, {state}, {len(self._partitions)} partitions)"
