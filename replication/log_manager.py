"""A broker's logs (Kafka's LogManager): its log directory, the logs in it and their upkeep.

The log manager opens every partition directory of the log directory on start (the storage
layer recovers those that were not closed cleanly, :mod:`replication.log_loader`), from the
checkpoints it keeps there: ``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint``, ``replication-offset-checkpoint`` (the high watermarks, which
the replica manager reads back into its partitions) and ``cleaner-offset-checkpoint``. It opens
and deletes the logs of partitions as the replica manager asks, holds the topics' configs the
logs run on, and does the logs' periodic duties: retention, flushes (with the recovery points),
the expiry of idle producers, the log cleaner's threads and the remote log manager's (KIP-405).
Which logs exist is the replica manager's business (its partitions): the log manager reads them,
each with its high watermark, through ``hosted``.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from coordinator.clock import Clock
from coordinator.codecs import TopicPartition
from coordinator.errors import CoordinatorError
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
from replication.config import ReplicaConfig
from replication.crash import cut_unflushed
from replication.errors import CorruptCheckpointError, StorageError
from replication.log import Log
from replication.log_cleaner import LogCleaner
from replication.tiered import (
    FileRemoteLogMetadataManager,
    RemoteLogManager,
    RemoteLogMetadataManager,
    RemoteStorageError,
    TieredPartition,
    load_remote_storage_manager,
)
from replication.tiered.metadata_manager import S3RemoteLogMetadataManager
from replication.topic_settings import topic_replica_config

__all__ = ["LogManager"]

log = logging.getLogger(__name__)

LOAD_THREADS = 8
"""Threads opening the logs at start-up (Kafka's num.recovery.threads.per.data.dir, whose
default is 1: a JVM opening a log does not wait on the disk as this one does)."""


class LogManager:
    """The logs of broker ``broker_id`` under ``log_dir``, on ``config`` (the broker's
    settings) with the topics' overrides.

    ``hosted()`` lists the logs in use, each with the high watermark retention, the cleaner
    and the HW checkpoint stay below; ``tiered_partitions()`` the partitions the remote log
    manager's passes take (when remote storage is on). ``on_topic_settings(topic, settings)``
    is told when a topic's settings change, to apply them to its partitions. ``topic_configs``,
    if given, reads the overrides of topics from the store (Kafka's config repository)."""

    def __init__(
        self,
        broker_id: int,
        log_dir: Path | str,
        clock: Clock,
        config: ReplicaConfig,
        *,
        hosted: Callable[[], Iterable[tuple[TopicPartition, Log, int]]],
        tiered_partitions: Callable[[], list[TieredPartition]],
        on_topic_settings: Callable[[str, ReplicaConfig], None],
        topic_configs: Callable[[Iterable[str]], Mapping[str, Mapping[str, str]]] | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.log_dir = Path(log_dir)
        make_private_directory(self.log_dir)
        self.clock = clock
        self.config = config
        self._hosted = hosted
        self._on_topic_settings = on_topic_settings
        self._topic_configs = topic_configs
        self._topic_overrides: dict[str, dict[str, str]] = {}
        self._topic_settings: dict[str, ReplicaConfig] = {}
        self._hw_checkpoint = OffsetCheckpointFile(self.log_dir / HIGH_WATERMARK_CHECKPOINT_FILE)
        self._rp_checkpoint = OffsetCheckpointFile(self.log_dir / RECOVERY_POINT_CHECKPOINT_FILE)
        self._log_start_checkpoint = OffsetCheckpointFile(
            self.log_dir / LOG_START_OFFSET_CHECKPOINT_FILE)
        self._cleaner_checkpoint = OffsetCheckpointFile(
            self.log_dir / CLEANER_OFFSET_CHECKPOINT_FILE)
        self.remote: RemoteLogManager | None = self._open_remote(tiered_partitions)
        now = clock.now_ms()
        self._next_flush_ms = now + (config.flush_interval_ms or 0)
        self._next_producer_expiration_ms = now + config.producer_id_expiration_check_interval_ms
        self._next_retention_ms = now + config.log_retention_check_interval_ms
        self.cleaner = LogCleaner(
            config.cleaner, self._compacted_logs, clock,
            checkpoints=dict[object, int](self._read_checkpoint(self._cleaner_checkpoint)),
            on_checkpoint=self._write_cleaner_checkpoint)

    # -- start-up ------------------------------------------------------------------------------

    def _read_checkpoint(self, checkpoint: OffsetCheckpointFile) -> dict[TopicPartition, int]:
        try:
            return checkpoint.read()
        except CorruptCheckpointError:
            log.warning("ignoring corrupt %s (recovering from scratch)", checkpoint.path)
            return {}

    def _open_remote(self, partitions: Callable[[], list[TieredPartition]]
                     ) -> RemoteLogManager | None:
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
        return RemoteLogManager(self.broker_id, storage, metadata, self.clock,
                                interval_ms=cfg.task_interval_ms,
                                reader_threads=cfg.reader_threads,
                                partitions=partitions,
                                backoff=cfg.retry_backoff,
                                compaction=cfg.metadata_compaction)

    def load_logs(self) -> list[tuple[TopicPartition, Log, int]]:
        """Open every partition directory of the log directory: each log with the high
        watermark checkpointed for it (0 if none)."""
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
        self.fetch_topic_configs({tp.topic for _d, tp in found})

        def open_log(directory: Path, tp: TopicPartition) -> Log:
            return Log.open(
                directory, config=self.config_for(tp.topic).log,
                recovery_point=recovery_points.get(tp, 0), log_start_offset=log_starts.get(tp),
                clock=self.clock,
                producer_id_expiration_ms=self.config.producer_id_expiration_ms,
            )

        # Opening a log waits on the disk (directory fsyncs for the clean-shutdown marker,
        # index and segment fsyncs after a recovery) far more than it computes, so the logs
        # open on a few threads at once, as Kafka's num.recovery.threads.per.data.dir; the
        # result keeps the directories' order, and the first log that fails is the error.
        workers = min(LOAD_THREADS, len(found))
        if workers <= 1:
            logs = [open_log(directory, tp) for directory, tp in found]
        else:
            with ThreadPoolExecutor(workers, thread_name_prefix="log-loader") as pool:
                futures = [pool.submit(open_log, directory, tp) for directory, tp in found]
                try:
                    logs = [f.result() for f in futures]
                except BaseException:
                    for f in futures:
                        f.cancel()
                    for f in futures:  # no file is left open behind a failed start
                        if not f.cancelled() and f.exception() is None:
                            f.result().close()
                    raise
        return [(tp, log_, hws.get(tp, 0)) for (_d, tp), log_ in zip(found, logs, strict=True)]

    def create_log(self, tp: TopicPartition) -> Log:
        """Open (creating it if needed) the log of ``tp``, on its topic's settings; raises
        :class:`StorageError`, :class:`OSError` or :class:`ValueError` when it cannot."""
        return Log.open(
            self.log_dir / log_directory_name(tp), config=self.config_for(tp.topic).log,
            clock=self.clock,
            producer_id_expiration_ms=self.config.producer_id_expiration_ms,
        )

    def delete_log(self, tp: TopicPartition, log_: Log | None) -> bool:
        """Close ``log_`` (the log of ``tp``, if open) and delete its directory; False when the
        directory could not be deleted."""
        directory = self.log_dir / log_directory_name(tp)
        try:
            if log_ is not None:
                log_.close()
            shutil.rmtree(directory, ignore_errors=False)
        except FileNotFoundError:
            pass
        except OSError:
            log.exception("broker %d could not delete %s", self.broker_id, directory)
            return False
        return True

    # -- per-topic configs ----------------------------------------------------------------------

    def config_for(self, topic: str) -> ReplicaConfig:
        """The settings ``topic``'s partitions run on: the broker's, with its overrides."""
        settings = self._topic_settings.get(topic)
        return settings if settings is not None else self.config

    def topic_overrides(self, topic: str) -> dict[str, str]:
        """The overrides last given for ``topic`` (empty: the broker's defaults)."""
        return dict(self._topic_overrides.get(topic, {}))

    def set_topic_config(self, topic: str, overrides: Mapping[str, str]) -> None:
        """Run ``topic`` on the broker's defaults with ``overrides`` (see
        :meth:`replication.replica_manager.ReplicaManager.update_topic_config`); the caller
        serialises these calls."""
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
            self._on_topic_settings(topic, settings)

    def fetch_topic_configs(self, topics: set[str]) -> None:
        """Read the overrides of ``topics`` from the store (the caller serialises these
        calls); on a coordinator error keep what is known (the watcher brings changes
        later)."""
        if self._topic_configs is None or not topics:
            return
        try:
            found = self._topic_configs(sorted(topics))
        except CoordinatorError as exc:
            log.warning("broker %d could not read the configs of %s: %s", self.broker_id,
                        sorted(topics), exc)
            return
        for topic in topics:
            self.set_topic_config(topic, found.get(topic, {}))

    # -- periodic duties -----------------------------------------------------------------------

    def cleanup_logs(self) -> int:
        """Apply each log's retention (its topic's ``retention.ms``, ``retention.bytes`` and
        ``cleanup.policy``), never past the partition's HW (Kafka's LogManager.cleanupLogs);
        returns the segments deleted."""
        deleted = 0
        for tp, log_, hw in list(self._hosted()):
            try:
                deleted += log_.delete_old_segments(high_watermark=hw)
            except StorageError as exc:
                log.warning("broker %d: retention of %s failed: %s", self.broker_id, tp, exc)
        return deleted

    def _compacted_logs(self) -> dict[object, tuple[Log, int]]:
        """The logs the cleaner may clean, with the HW it must stay below."""
        return {tp: (log_, hw) for tp, log_, hw in list(self._hosted()) if log_.config.compact}

    def _write_cleaner_checkpoint(self, offsets: Mapping[object, int]) -> None:
        """Persist the cleaner's first dirty offsets (Kafka's cleaner-offset-checkpoint), for
        the partitions still here."""
        hosted = {tp for tp, _log, _hw in list(self._hosted())}
        try:
            self._cleaner_checkpoint.write(
                {tp: o for tp, o in offsets.items() if isinstance(tp, TopicPartition)
                 and tp in hosted})
        except OSError as exc:
            log.warning("broker %d could not write the cleaner checkpoint: %s",
                        self.broker_id, exc)

    def remove_expired_producers(self) -> int:
        """Forget, in every log, the idempotent producers idle for ``producer.id.expiration.ms``
        (Kafka's periodic producer expiration check); returns how many."""
        now = self.clock.now_ms()
        return sum(log_.remove_expired_producers(now) for _tp, log_, _hw in list(self._hosted()))

    def checkpoint_high_watermarks(self) -> None:
        """Write every partition's HW to ``replication-offset-checkpoint``, and its log start
        offset to ``log-start-offset-checkpoint`` (below the first local segment for a tiered
        log)."""
        hosted = list(self._hosted())
        self._hw_checkpoint.write({tp: hw for tp, _log, hw in hosted})
        self._log_start_checkpoint.write({tp: log_.log_start_offset for tp, log_, _hw in hosted})

    def flush_logs(self) -> None:
        """fsync every log and record the recovery points (log.flush.interval.ms)."""
        for _tp, log_, _hw in list(self._hosted()):
            log_.flush()
        self._rp_checkpoint.write(
            {tp: log_.recovery_point for tp, log_, _hw in list(self._hosted())})

    def tick(self, now: int) -> None:
        """Run the logs' periodic duties that are due at ``now``."""
        cfg = self.config
        if now >= self._next_producer_expiration_ms:
            self._next_producer_expiration_ms = now + cfg.producer_id_expiration_check_interval_ms
            self.remove_expired_producers()
        if cfg.flush_interval_ms is not None and now >= self._next_flush_ms:
            self._next_flush_ms = now + cfg.flush_interval_ms
            self.flush_logs()
        if now >= self._next_retention_ms:
            self._next_retention_ms = now + cfg.log_retention_check_interval_ms
            self.cleanup_logs()

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Run the log cleaner and the remote log manager on their background threads."""
        self.cleaner.start()
        if self.remote is not None:
            self.remote.start()

    def stop(self) -> None:
        """Stop the background threads."""
        self.cleaner.stop()
        if self.remote is not None:
            self.remote.close()

    def shutdown(self) -> None:
        """Checkpoint the HWs and recovery points and close every log (threads stopped)."""
        self.checkpoint_high_watermarks()
        self.flush_logs()
        for _tp, log_, _hw in self._hosted():
            log_.close()

    def crash(self, *, lose_unflushed: bool = False, torn_bytes: int = 0) -> None:
        """Close every log as a killed process leaves it (tests): see
        :meth:`replication.replica_manager.ReplicaManager.crash`."""
        for _tp, log_, _hw in self._hosted():
            flushed = log_.recovery_point
            log_.close(clean=False)
            clear_clean_shutdown(log_.directory)
            if lose_unflushed:
                cut_unflushed(log_.directory, flushed, torn_bytes=torn_bytes)

    def __repr__(self) -> str:
        return f"LogManager(broker={self.broker_id}, {self.log_dir})"
