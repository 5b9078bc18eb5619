"""A broker's replica manager: its partitions, the control-plane requests, produce and fetch.

The controller's requests arrive here (LeaderAndIsr, StopReplica, UpdateMetadata) and are
answered with a code per partition: a request from an older controller epoch is refused whole,
a partition entry with an older leader epoch is ignored, as Kafka does. Producers, consumers
and followers call :meth:`ReplicaManager.produce`, :meth:`ReplicaManager.read`,
:meth:`ReplicaManager.fetch` and :meth:`ReplicaManager.offsets_for_leader_epoch`.

Time-driven duties (ISR expiry, ISR change announcements, HW checkpoints, produce timeouts,
flushes) run from :meth:`ReplicaManager.tick`, which a background thread calls in real use and a
test calls after moving a manual clock. On start the manager opens every partition directory in
its log directory (the storage layer recovers those that were not closed cleanly) and restores
their high watermarks from ``replication-offset-checkpoint``.
"""

from __future__ import annotations

import base64
import binascii
import logging
import shutil
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path

from coordinator.codecs import TopicPartition
from coordinator.errors import CoordinatorError
from coordinator.skipped import SkippedTopics
from replication.checkpoints import (
    CLEANER_OFFSET_CHECKPOINT_FILE,
    HIGH_WATERMARK_CHECKPOINT_FILE,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    OffsetCheckpointFile,
    clear_clean_shutdown,
    log_directory_name,
    make_private_directory,
    parse_log_directory_name,
)
from replication.clock import Clock
from replication.config import ReplicaConfig
from replication.crash import cut_unflushed
from replication.errors import (
    CorruptCheckpointError,
    InvalidEpochError,
    OffsetOutOfRangeError,
    StorageError,
)
from replication.fetcher import ReplicaFetcher
from replication.isr import IsrChangeBatcher, IsrStore, LocalIsrStore
from replication.log import Log, LogSlice
from replication.log_cleaner import LogCleaner
from replication.log_throttle import ThrottledLog, out_of_descriptors
from replication.partition import IsrCounts, Partition, ProduceFuture, ReplicaStatus, Role
from replication.protocol import (
    ACKS_ALL,
    ConsumerRead,
    EpochAnswer,
    ErrorCode,
    FetchEndpoint,
    FetchResult,
    OffsetAnswer,
    ProduceResult,
    ReplicaResponse,
)
from replication.quota import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    ReplicationQuota,
    ThrottledReplicas,
)
from replication.records import read_batch_header
from replication.tiered import (
    FileRemoteLogMetadataManager,
    RemoteLogManager,
    RemoteLogMetadataManager,
    RemoteStorageError,
    TieredPartition,
    TopicIdPartition,
    load_remote_storage_manager,
)
from replication.tiered.follower import RemoteAuxState, TierStateError, build_remote_aux_state
from replication.tiered.metadata_manager import S3RemoteLogMetadataManager
from replication.topic_settings import topic_replica_config
from statemachines.broker_side import ControllerClient
from statemachines.requests import (
    EPOCH_DURING_DELETE,
    NO_EPOCH,
    LeaderAndIsrPartition,
    LeaderAndIsrRequest,
    LiveBroker,
    StopReplicaRequest,
    UpdateMetadataPartition,
    UpdateMetadataRequest,
)
from statemachines.state_change import log_fenced

__all__ = ["ReplicaManager"]

log = logging.getLogger(__name__)
_OUT_OF_FILES = ThrottledLog(log)
"""Logs the logs that cannot open for want of descriptors: once per interval, no traceback."""

LEADER_DURING_DELETE = -2  # UpdateMetadata's leader for a partition being deleted


def _topic_id(text: str) -> uuid.UUID | None:
    """A topic id from Kafka's text form (url-safe base64 of 16 bytes), None if it is not."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return None
    return uuid.UUID(bytes=raw) if len(raw) == 16 else None


def _done(error: ErrorCode) -> ProduceFuture:
    future: ProduceFuture = Future()
    future.set_result(ProduceResult(error=error))
    return future


class ReplicaManager:
    """The replicas of broker ``broker_id``, stored under ``log_dir``.

    ``controller`` is the broker's client of the controller, through which leaders write ISR
    changes and announce them; without one (unit tests) ISR changes stay in memory.
    ``transport`` maps broker ids to the endpoints followers fetch from; it is read on every
    round, so it may be a live view that changes as brokers come and go. ``broker_epoch``, if
    given, refuses requests for an earlier registration; under a
    :class:`~statemachines.participant.Participant` (a broker node) the participant does that.

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
        self.log_dir = Path(log_dir)
        make_private_directory(self.log_dir)
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
        self._topic_configs = topic_configs
        self._topic_overrides: dict[str, dict[str, str]] = {}
        self._topic_settings: dict[str, ReplicaConfig] = {}
        self._controller_epoch = -1
        self._metadata_cache: dict[TopicPartition, UpdateMetadataPartition] = {}
        # Partitions named in LeaderAndIsr requests: like the metadata cache, what this broker
        # knows to exist in the cluster whether or not it hosts them.
        self._named_in_leader_and_isr: set[TopicPartition] = set()
        self._skipped = SkippedTopics(log, f"broker {broker_id}")
        """Topics with names Kafka forbids (another tool wrote them in the store, another
        controller sent them): no log directory, one warning each."""
        self._live_brokers: dict[int, LiveBroker] = {}
        self._append_listeners: list[Callable[[], None]] = []
        self._hw_checkpoint = OffsetCheckpointFile(self.log_dir / HIGH_WATERMARK_CHECKPOINT_FILE)
        self._rp_checkpoint = OffsetCheckpointFile(self.log_dir / RECOVERY_POINT_CHECKPOINT_FILE)
        self._log_start_checkpoint = OffsetCheckpointFile(
            self.log_dir / LOG_START_OFFSET_CHECKPOINT_FILE)
        self._topic_ids: dict[str, uuid.UUID] = {}
        self.remote: RemoteLogManager | None = self._open_remote()
        self._next_isr_check_ms = now + cfg.replica_lag_time_max_ms // 2
        self._next_hw_checkpoint_ms = now + cfg.high_watermark_checkpoint_interval_ms
        self._next_flush_ms = now + (cfg.flush_interval_ms or 0)
        self._next_producer_expiration_ms = now + cfg.producer_id_expiration_check_interval_ms
        self._next_retention_ms = now + cfg.log_retention_check_interval_ms
        self._running = True
        self._ticker: threading.Thread | None = None
        self._ticker_stop = threading.Event()
        self._cleaner_checkpoint = OffsetCheckpointFile(
            self.log_dir / CLEANER_OFFSET_CHECKPOINT_FILE)
        self.cleaner = LogCleaner(
            cfg.cleaner, self._compacted_logs, clock.now_ms,
            checkpoints=self._read_checkpoint(self._cleaner_checkpoint),
            on_checkpoint=self._write_cleaner_checkpoint)
        # Replication throttles (Kafka's ReplicationQuotaManager, one per side): the rates
        # come from the broker's dynamic config, the replicas from the topics' configs.
        self.leader_quota = ReplicationQuota()
        self.follower_quota = ReplicationQuota()
        self.leader_throttled = ThrottledReplicas(broker_id, LEADER_REPLICAS)
        self.follower_throttled = ThrottledReplicas(broker_id, FOLLOWER_REPLICAS)
        self.fetcher = ReplicaFetcher(
            broker_id, transport if transport is not None else {}, self._partitions.get, cfg,
            remote_aux=self._remote_aux_state if self.remote is not None else None,
            quota=self.follower_quota, throttled=self.follower_throttled.__contains__,
        )
        self._load_logs()

    # -- start-up ------------------------------------------------------------------------------

    def _read_checkpoint(self, checkpoint: OffsetCheckpointFile) -> dict[TopicPartition, int]:
        try:
            return checkpoint.read()
        except CorruptCheckpointError:
            log.warning("ignoring corrupt %s (recovering from scratch)", checkpoint.path)
            return {}

    def _open_remote(self) -> RemoteLogManager | None:
        """The remote log manager, when ``remote.log.storage.system.enable`` (KIP-405)."""
        cfg = self.config.remote
        if not cfg.system_enable:
            return None
        directory = cfg.resolved_metadata_dir()
        try:
            storage = load_remote_storage_manager(cfg.storage_url, cfg.manager_class_name,
                                                  broker_id=self.broker_id,
                                                  s3_endpoint=cfg.s3_endpoint)
            metadata: RemoteLogMetadataManager
            if directory is not None:
                metadata = FileRemoteLogMetadataManager(directory)
            else:
                assert cfg.storage_url is not None and cfg.metadata_in_s3()
                metadata = S3RemoteLogMetadataManager(cfg.storage_url,
                                                      endpoint_url=cfg.s3_endpoint)
        except (ValueError, RemoteStorageError, OSError) as exc:
            raise StorageError(f"remote storage: {exc}") from exc
        return RemoteLogManager(self.broker_id, storage, metadata, self.clock.now_ms,
                                interval_ms=cfg.task_interval_ms,
                                reader_threads=cfg.reader_threads,
                                partitions=self.tiered_partitions,
                                backoff=cfg.retry_backoff,
                                compaction=cfg.metadata_compaction)

    def _tiered_id(self, tp: TopicPartition) -> TopicIdPartition | None:
        topic_id = self._topic_ids.get(tp.topic)
        if topic_id is None:
            return None
        return TopicIdPartition(topic_id=topic_id, topic=tp.topic, partition=tp.partition)

    def _remote_aux_state(self, tp: TopicPartition, endpoint: FetchEndpoint, leader_epoch: int,
                          leader_log_start_offset: int) -> RemoteAuxState:
        """What a follower of ``tp`` installs below its leader's local log start, from remote
        storage (see :mod:`replication.tiered.follower`)."""
        tid = self._tiered_id(tp)
        if self.remote is None or tid is None:
            raise TierStateError(f"{tp}: its topic id is not known here yet")
        return build_remote_aux_state(tp, tid, endpoint, leader_epoch, leader_log_start_offset,
                                      self.remote.storage, self.remote.metadata)

    def tiered_partitions(self) -> list[TieredPartition]:
        """The hosted partitions of tiered topics whose topic id is known, as the remote log
        manager's pass takes them."""
        out = []
        for tp, p in list(self._partitions.items()):
            tid = self._tiered_id(tp)
            if tid is None or not p.log.config.remote_storage_enable:
                continue
            status = p.status()

            def still_leads(epoch: int, p: Partition = p) -> bool:
                return p.role is Role.LEADER and p.leader_epoch == epoch

            out.append(TieredPartition(
                id=tid, log=p.log, is_leader=status.role is Role.LEADER,
                leader_epoch=status.leader_epoch, high_watermark=status.high_watermark,
                still_leads=still_leads))
        return out

    def remote_log_size(self, tp: TopicPartition) -> int | None:
        """The bytes of ``tp``'s log in remote storage (:meth:`RemoteLogManager.remote_size`);
        None unless ``tp`` is hosted here, tiered, with its topic id known. May block on the
        remote log metadata: not for the event loop."""
        partition = self._partitions.get(tp)
        tid = self._tiered_id(tp)
        if (self.remote is None or partition is None or tid is None
                or not partition.log.config.remote_storage_enable):
            return None
        return self.remote.remote_size(tid, partition.log)

    def _load_logs(self) -> None:
        hws = self._read_checkpoint(self._hw_checkpoint)
        recovery_points = self._read_checkpoint(self._rp_checkpoint)
        log_starts = self._read_checkpoint(self._log_start_checkpoint)
        found: list[tuple[Path, TopicPartition]] = []
        for directory in sorted(self.log_dir.iterdir()):
            if not directory.is_dir():
                continue
            try:
                found.append((directory, parse_log_directory_name(directory.name)))
            except ValueError:
                continue
        # The topics' configs before their logs open, as Kafka's LogManager reads them: a
        # tiered log opened as a plain one would drop its log start and its epochs below the
        # first local segment, and the remote part would be gone for readers.
        self._fetch_topic_configs({tp.topic for _d, tp in found})
        for directory, tp in found:
            log_ = Log.open(
                directory, config=self.config_for(tp.topic).log,
                recovery_point=recovery_points.get(tp, 0), log_start_offset=log_starts.get(tp),
                clock=self.clock.now_ms,
                producer_id_expiration_ms=self.config.producer_id_expiration_ms,
            )
            self._partitions[tp] = self._new_partition(tp, log_, hws.get(tp, 0))

    def _new_partition(self, tp: TopicPartition, log_: Log, hw: int) -> Partition:
        return Partition(
            tp, log_, broker_id=self.broker_id, clock=self.clock,
            config=self.config_for(tp.topic),
            isr_store=self._isr_store, on_isr_change=self._record_isr_change,
            high_watermark=hw, isr_eligible=self._isr_eligible, isr_counts=self.isr_counts,
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
        settings = self._topic_settings.get(topic)
        return settings if settings is not None else self.config

    def topic_overrides(self, topic: str) -> dict[str, str]:
        """The overrides last given for ``topic`` (empty: the broker's defaults)."""
        return dict(self._topic_overrides.get(topic, {}))

    def update_topic_config(self, topic: str, overrides: Mapping[str, str]) -> None:
        """Run ``topic``'s partitions, here now and created later, on the broker's defaults
        with ``overrides`` (Kafka's topic config keys, as stored; an empty mapping returns to
        the defaults). Takes effect at once: ``min.insync.replicas`` on the next produce (and
        the HW), the log settings on the next append and retention pass. Keys partctl does not
        apply are kept and ignored; values that do not parse are ignored with a warning."""
        with self._lock:
            self._set_topic_config(topic, overrides)
        self.leader_throttled.update(topic, overrides)
        self.follower_throttled.update(topic, overrides)

    def update_broker_config(self, overrides: Mapping[str, str]) -> None:
        """Apply this broker's dynamic config (``/config/brokers/<id>`` over the cluster's
        ``<default>``): the replication throttle rates, bytes per second (unset: no limit).
        Values that do not parse are ignored with a warning (they are validated where they
        are written)."""
        for key, quota in ((LEADER_RATE, self.leader_quota),
                           (FOLLOWER_RATE, self.follower_quota)):
            value = overrides.get(key)
            rate: float | None = None
            if value is not None:
                try:
                    rate = float(int(value))
                except ValueError:
                    log.warning("broker %d: ignoring %s=%r", self.broker_id, key, value)
            if rate != quota.rate:
                log.info("broker %d: %s is %s", self.broker_id, key,
                         "unlimited" if rate is None else f"{rate:.0f} B/s")
                quota.set_rate(rate)

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

    def _set_topic_config(self, topic: str, overrides: Mapping[str, str]) -> None:
        old = self._topic_settings.get(topic, self.config)
        settings = topic_replica_config(self.config, overrides, topic)
        if overrides:
            self._topic_overrides[topic] = dict(overrides)
        else:
            self._topic_overrides.pop(topic, None)
        if settings is self.config:
            self._topic_settings.pop(topic, None)
        else:
            self._topic_settings[topic] = settings
        if settings != old:
            log.info("broker %d: topic %s runs on %s", self.broker_id, topic,
                     dict(overrides) or "the broker's defaults")
            for tp, partition in list(self._partitions.items()):
                if tp.topic == topic:
                    partition.reconfigure(settings)

    def _fetch_topic_configs(self, topics: set[str]) -> None:
        """Read the overrides of ``topics`` from the store (lock held); on a coordinator
        error keep what is known (the watcher brings changes later)."""
        if self._topic_configs is None or not topics:
            return
        try:
            found = self._topic_configs(sorted(topics))
        except CoordinatorError as exc:
            log.warning("broker %d could not read the configs of %s: %s", self.broker_id,
                        sorted(topics), exc)
            return
        for topic in topics:
            self._set_topic_config(topic, found.get(topic, {}))

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
        return self._controller_epoch

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
        """The epoch checks of a controller request, each refusal on the state-change log."""
        if not self._running:
            return ErrorCode.BROKER_NOT_AVAILABLE
        controller_epoch, broker_epoch = request.controller_epoch, request.broker_epoch
        if controller_epoch < self._controller_epoch:
            log_fenced("broker", self.broker_id, what, "stale controller epoch",
                       given=controller_epoch, current=self._controller_epoch,
                       controller_id=request.controller_id, controller_epoch=controller_epoch)
            return ErrorCode.STALE_CONTROLLER_EPOCH
        if self.broker_epoch is not None and 0 <= broker_epoch < self.broker_epoch:
            log_fenced("broker", self.broker_id, what, "stale broker epoch",
                       given=broker_epoch, current=self.broker_epoch,
                       controller_id=request.controller_id, controller_epoch=controller_epoch)
            return ErrorCode.STALE_BROKER_EPOCH
        self._controller_epoch = controller_epoch
        return ErrorCode.NONE

    def handle_leader_and_isr(self, request: LeaderAndIsrRequest) -> ReplicaResponse:
        """Become leader or follower of each partition in ``request``."""
        with self._lock:
            error = self._check_request("LeaderAndIsr", request)
            if error:
                log.warning("broker %d refuses LeaderAndIsr from controller %d epoch %d: %s",
                            self.broker_id, request.controller_id, request.controller_epoch,
                            error.name)
                return ReplicaResponse(error=error)
            for broker in request.live_leaders:
                self._live_brokers[broker.id] = broker
            for topic, text in request.topic_ids.items():
                topic_id = _topic_id(text)
                if topic_id is not None:
                    self._topic_ids[topic] = topic_id
            illegal = {t for t in {e.topic for e in request.partitions}
                       if not self._skipped.legal(t)}
            self._fetch_topic_configs({
                e.topic for e in request.partitions
                if self.broker_id in e.replicas and TopicPartition(
                    topic=e.topic, partition=e.partition) not in self._partitions
                and e.topic not in illegal})
            errors = {}
            for entry in request.partitions:
                tp = TopicPartition(topic=entry.topic, partition=entry.partition)
                if illegal and tp.topic in illegal:
                    errors[tp] = ErrorCode.INVALID_TOPIC_EXCEPTION
                    continue
                self._named_in_leader_and_isr.add(tp)
                errors[tp] = self._apply(tp, entry, request)
            self._tell_remote_of_roles(tp for tp, e in errors.items() if not e)
            return ReplicaResponse.of(errors)

    def _tell_remote_of_roles(self, tps: Iterable[TopicPartition]) -> None:
        """The remote log metadata manager's onPartitionLeadershipChange."""
        if self.remote is None:
            return
        leaders, followers = [], []
        for tp in tps:
            p, tid = self._partitions.get(tp), self._tiered_id(tp)
            if p is None or tid is None or not p.log.config.remote_storage_enable:
                continue
            (leaders if p.role is Role.LEADER else followers).append(tid)
        if leaders or followers:
            try:
                self.remote.metadata.on_partition_leadership_changes(leaders, followers)
            except (RemoteStorageError, OSError) as exc:
                log.warning("broker %d: remote log metadata: %s", self.broker_id, exc)

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
                log_ = Log.open(
                    self.log_dir / log_directory_name(tp), config=self.config_for(tp.topic).log,
                    clock=self.clock.now_ms,
                    producer_id_expiration_ms=self.config.producer_id_expiration_ms,
                )
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

    def handle_stop_replica(self, request: StopReplicaRequest) -> ReplicaResponse:
        """Stop leading or following each partition; delete its log when asked."""
        with self._lock:
            error = self._check_request("StopReplica", request)
            if error:
                return ReplicaResponse(error=error)
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
            return ReplicaResponse.of(errors)

    def _delete_partition(self, tp: TopicPartition, partition: Partition | None) -> ErrorCode:
        self._partitions.pop(tp, None)
        directory = self.log_dir / log_directory_name(tp)
        try:
            if partition is not None:
                partition.log.close()
            shutil.rmtree(directory, ignore_errors=False)
        except FileNotFoundError:
            pass
        except OSError:
            log.exception("broker %d could not delete %s", self.broker_id, directory)
            return ErrorCode.KAFKA_STORAGE_ERROR
        return ErrorCode.NONE

    def handle_update_metadata(self, request: UpdateMetadataRequest) -> ReplicaResponse:
        """Remember leaders and live brokers, for clients and fetchers."""
        with self._lock:
            error = self._check_request("UpdateMetadata", request)
            if error:
                return ReplicaResponse(error=error)
            self._live_brokers = {b.id: b for b in request.live_brokers}
            for entry in request.partitions:
                tp = TopicPartition(topic=entry.topic, partition=entry.partition)
                if entry.leader == LEADER_DURING_DELETE:
                    self._metadata_cache.pop(tp, None)
                    self._named_in_leader_and_isr.discard(tp)
                else:
                    self._metadata_cache[tp] = entry
            return ReplicaResponse()

    # -- data plane ----------------------------------------------------------------------------

    def produce(
        self,
        tp: TopicPartition,
        records: bytes | bytearray,
        acks: int = ACKS_ALL,
        timeout_ms: int | None = None,
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
        INVALID_RECORD. Nothing is appended then."""
        if not self._running:
            return _done(ErrorCode.BROKER_NOT_AVAILABLE)
        partition = self._partitions.get(tp)
        if partition is None:
            return _done(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        future = partition.append_as_leader(
            records, acks, self.config.request_timeout_ms if timeout_ms is None else timeout_ms
        )
        for listener in self._append_listeners:
            listener()
        return future

    def fetch(
        self, tp: TopicPartition, offset: int, max_bytes: int, replica_id: int, leader_epoch: int,
        last_fetched_epoch: int = -1, *, update_state: bool = True, log_start_offset: int = -1,
    ) -> FetchResult:
        """A fetch from a follower (``replica_id`` >= 0: up to the log end, moving its state
        here unless ``update_state`` is false, answering a diverging epoch against
        ``last_fetched_epoch``, see :meth:`Partition.fetch_for_follower`) or a consumer (below
        the HW only). ``log_start_offset`` is a follower's own (for DeleteRecords)."""
        if not self._running:
            return FetchResult(error=ErrorCode.BROKER_NOT_AVAILABLE)
        partition = self._partitions.get(tp)
        if partition is None:
            return FetchResult(error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if replica_id < 0:
            read = self._read_with_remote(tp, partition, offset, max_bytes)
            return FetchResult(error=read.error, records=read.records,
                               high_watermark=read.high_watermark)
        throttled = self._leader_throttled(tp, replica_id)
        if throttled and self.leader_quota.exceeded():
            max_bytes = 0  # the follower's position is still recorded; no records go out
        result = partition.fetch_for_follower(replica_id, offset, max_bytes, leader_epoch,
                                              last_fetched_epoch, update_state=update_state,
                                              log_start_offset=log_start_offset)
        if throttled and max_bytes == 0 and result.records:
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
        return self._read_with_remote(tp, partition, offset, max_bytes)

    def _read_with_remote(self, tp: TopicPartition, partition: Partition, offset: int,
                          max_bytes: int) -> ConsumerRead:
        read = partition.read_committed(offset, max_bytes)
        if read.error is not ErrorCode.OFFSET_OUT_OF_RANGE:
            return read
        remote = self.read_remote(tp, offset, max_bytes)
        if remote is None:
            return read
        try:
            records = remote.result()
            assert isinstance(records, bytes)  # not asked for a slice
        except OffsetOutOfRangeError:
            return read
        except (RemoteStorageError, StorageError, OSError) as exc:
            log.warning("broker %d: remote read of %s at %d failed: %s", self.broker_id, tp,
                        offset, exc)
            return ConsumerRead(error=ErrorCode.KAFKA_STORAGE_ERROR,
                                high_watermark=read.high_watermark)
        next_offset = offset
        pos = 0
        while pos < len(records):
            header = read_batch_header(records, pos)
            next_offset = header.base_offset + header.last_offset_delta + 1
            pos += header.size
        return ConsumerRead(error=ErrorCode.NONE, records=records,
                            high_watermark=read.high_watermark, next_offset=next_offset)

    def read_remote(self, tp: TopicPartition, offset: int, max_bytes: int, *,
                    zero_copy: bool = False, min_one: bool = True
                    ) -> Future[bytes | LogSlice] | None:
        """A consumer's read below the local log start of a tiered partition led here, from
        remote storage, on the remote log manager's reader threads (the future fails with
        :class:`OffsetOutOfRangeError` or :class:`RemoteStorageError`); None when the offset
        is not in the remote part of a tiered log (the caller reads locally or answers
        OFFSET_OUT_OF_RANGE). ``zero_copy``: a :class:`LogSlice` where the store allows it
        (see :meth:`RemoteLogManager.read`), which the caller closes; without ``min_one``,
        nothing when the first batch is larger than ``max_bytes``."""
        led = self._tiered_leader(tp)
        if led is None or self.remote is None:
            return None
        tid, partition = led
        log_ = partition.log
        if not log_.log_start_offset <= offset < log_.local_log_start_offset:
            return None
        return self.remote.read_async(tid, log_, offset, max_bytes, partition.high_watermark,
                                      zero_copy=zero_copy, min_one=min_one)

    def remote_offset_for_timestamp(self, tp: TopicPartition, timestamp: int
                                    ) -> Future[tuple[int, int, int] | None] | None:
        """ListOffsets by ``timestamp`` over the remote part of a tiered partition led here:
        ``(timestamp, offset, leader epoch)`` of the first record at or after it in remote
        storage, or None in the future when none is there (the caller then searches the local
        part), found on the remote log manager's reader threads (the future fails with
        :class:`RemoteStorageError`). None when the log has no remote part."""
        found = self._remote_part(tp)
        if found is None or self.remote is None:
            return None
        return self.remote.find_offset_by_timestamp_async(*found, timestamp)

    def remote_max_timestamp(self, tp: TopicPartition
                             ) -> Future[tuple[int, int, int] | None] | None:
        """ListOffsets' MAX_TIMESTAMP over the remote part of a tiered partition led here:
        ``(timestamp, offset, leader epoch)`` of the record with the largest timestamp in remote
        storage, or None in the future when none is there (the caller weighs it against the
        local part), found on the remote log manager's reader threads (the future fails with
        :class:`RemoteStorageError`). None when the log has no remote part."""
        found = self._remote_part(tp)
        if found is None or self.remote is None:
            return None
        return self.remote.find_max_timestamp_async(*found)

    def _tiered_leader(self, tp: TopicPartition) -> tuple[TopicIdPartition, Partition] | None:
        """The id and partition of a tiered partition led here, with remote storage on, else
        None."""
        partition = self._partitions.get(tp)
        tid = self._tiered_id(tp)
        if (self.remote is None or partition is None or tid is None
                or partition.role is not Role.LEADER
                or not partition.log.config.remote_storage_enable):
            return None
        return tid, partition

    def _remote_part(self, tp: TopicPartition) -> tuple[TopicIdPartition, Log] | None:
        """The id and log of a tiered partition led here whose log reaches below its local
        log start, else None."""
        led = self._tiered_leader(tp)
        if led is None:
            return None
        tid, partition = led
        log_ = partition.log
        if log_.log_start_offset >= log_.local_log_start_offset:
            return None
        return tid, log_

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

    def cleanup_logs(self) -> int:
        """Apply each log's retention (its topic's ``retention.ms``, ``retention.bytes`` and
        ``cleanup.policy``), never past the partition's HW (Kafka's LogManager.cleanupLogs);
        returns the segments deleted."""
        deleted = 0
        for tp, p in list(self._partitions.items()):
            try:
                deleted += p.log.delete_old_segments(high_watermark=p.high_watermark)
            except StorageError as exc:
                log.warning("broker %d: retention of %s failed: %s", self.broker_id, tp, exc)
        return deleted

    def _compacted_logs(self) -> dict[object, tuple[Log, int]]:
        """The logs the cleaner may clean, with the HW it must stay below."""
        return {tp: (p.log, p.high_watermark) for tp, p in list(self._partitions.items())
                if p.log.config.compact}

    def _write_cleaner_checkpoint(self, offsets: Mapping[object, int]) -> None:
        """Persist the cleaner's first dirty offsets (Kafka's cleaner-offset-checkpoint), for
        the partitions still here."""
        hosted = self._partitions
        try:
            self._cleaner_checkpoint.write(
                {tp: o for tp, o in offsets.items() if isinstance(tp, TopicPartition)
                 and tp in hosted})
        except OSError as exc:
            log.warning("broker %d could not write the cleaner checkpoint: %s",
                        self.broker_id, exc)

    def expire_produces(self) -> None:
        now = self.clock.now_ms()
        for p in list(self._partitions.values()):
            p.expire_produces(now)

    def remove_expired_producers(self) -> int:
        """Forget, in every log, the idempotent producers idle for ``producer.id.expiration.ms``
        (Kafka's periodic producer expiration check); returns how many."""
        now = self.clock.now_ms()
        return sum(p.log.remove_expired_producers(now) for p in list(self._partitions.values()))

    def checkpoint_high_watermarks(self) -> None:
        """Write every partition's HW to ``replication-offset-checkpoint``, and its log start
        offset to ``log-start-offset-checkpoint`` (below the first local segment for a tiered
        log)."""
        partitions = list(self._partitions.items())
        self._hw_checkpoint.write({tp: p.high_watermark for tp, p in partitions})
        self._log_start_checkpoint.write({tp: p.log.log_start_offset for tp, p in partitions})

    def flush_logs(self) -> None:
        """fsync every log and record the recovery points (log.flush.interval.ms)."""
        for p in list(self._partitions.values()):
            p.log.flush()
        self._rp_checkpoint.write(
            {tp: p.log.recovery_point for tp, p in list(self._partitions.items())}
        )

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
        if now >= self._next_producer_expiration_ms:
            self._next_producer_expiration_ms = now + cfg.producer_id_expiration_check_interval_ms
            self.remove_expired_producers()
        if cfg.flush_interval_ms is not None and now >= self._next_flush_ms:
            self._next_flush_ms = now + cfg.flush_interval_ms
            self.flush_logs()
        if now >= self._next_retention_ms:
            self._next_retention_ms = now + cfg.log_retention_check_interval_ms
            self.cleanup_logs()
        if now >= self._next_hw_checkpoint_ms:
            self._next_hw_checkpoint_ms = now + cfg.high_watermark_checkpoint_interval_ms
            self.checkpoint_high_watermarks()

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Run the fetcher, the periodic duties and the log cleaner on background threads."""
        self.fetcher.start()
        self.cleaner.start()
        if self.remote is not None:
            self.remote.start()
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
        self.fetcher.stop()
        self.cleaner.stop()
        if self.remote is not None:
            self.remote.close()
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
            self.checkpoint_high_watermarks()
            self.flush_logs()
            for p in self._partitions.values():
                p.log.close()

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
                flushed = p.log.recovery_point
                p.log.close(clean=False)
                clear_clean_shutdown(p.log.directory)
                if lose_unflushed:
                    cut_unflushed(p.log.directory, flushed, torn_bytes=torn_bytes)

    def __repr__(self) -> str:
        state = "running" if self._running else "stopped"
        return f"ReplicaManager(broker={self.broker_id}, {state}, {len(self._partitions)} partitions)"
