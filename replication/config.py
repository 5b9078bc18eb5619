"""Broker-side replication settings, named after Kafka's broker configs, with Kafka's defaults."""

from __future__ import annotations

from dataclasses import dataclass, field

from replication.cleaner import CleanerConfig
from replication.log import LogConfig
from replication.producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS
from replication.tiered.config import RemoteLogConfig

__all__ = ["ReplicaConfig"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaConfig:
    """Settings of one broker's :class:`~replication.replica_manager.ReplicaManager`.

    ``log`` and ``min_insync_replicas`` are the broker's defaults; a topic's config overrides
    make a copy of this per topic (``replication.topic_settings``)."""

    log: LogConfig = field(default_factory=LogConfig)
    min_insync_replicas: int = 1  # min.insync.replicas
    replica_lag_time_max_ms: int = 30_000  # replica.lag.time.max.ms
    replica_fetch_max_bytes: int = 1 << 20  # replica.fetch.max.bytes (per partition)
    replica_fetch_backoff_ms: int = 100  # idle wait of a background fetcher between rounds
    request_timeout_ms: int = 30_000  # default acks=all timeout
    high_watermark_checkpoint_interval_ms: int = 5_000  # replica.high.watermark.checkpoint...
    isr_change_check_interval_ms: int = 2_500  # propagate ISR changes at most this often
    isr_change_blackout_ms: int = 5_000  # ...once no change was seen for this long
    isr_change_max_delay_ms: int = 60_000  # ...or once changes waited this long
    flush_interval_ms: int | None = None  # log.flush.interval.ms; None leaves it to the OS
    tick_interval_ms: int = 100  # how often the background ticker runs the periodic duties
    producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS  # producer.id.expiration.ms
    producer_id_expiration_check_interval_ms: int = 600_000  # producer.id.expiration.check...
    log_retention_check_interval_ms: int = 300_000  # log.retention.check.interval.ms
    cleaner: CleanerConfig = field(default_factory=CleanerConfig)  # log.cleaner.*
    remote: RemoteLogConfig = field(default_factory=RemoteLogConfig)  # remote.log.* (KIP-405)

    def __post_init__(self) -> None:
        if self.min_insync_replicas < 1:
            raise ValueError(f"min_insync_replicas must be >= 1: {self.min_insync_replicas}")
        for name in (
            "replica_lag_time_max_ms",
            "replica_fetch_max_bytes",
            "request_timeout_ms",
            "high_watermark_checkpoint_interval_ms",
            "isr_change_check_interval_ms",
            "tick_interval_ms",
            "producer_id_expiration_ms",
            "producer_id_expiration_check_interval_ms",
            "log_retention_check_interval_ms",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive: {getattr(self, name)}")
        if self.isr_change_blackout_ms < 0 or self.isr_change_max_delay_ms < 0:
            raise ValueError("ISR change propagation delays must be >= 0")
        if self.replica_fetch_backoff_ms < 0:
            raise ValueError("replica_fetch_backoff_ms must be >= 0")
        if self.flush_interval_ms is not None and self.flush_interval_ms < 1:
            raise ValueError(f"flush_interval_ms must be positive: {self.flush_interval_ms}")
