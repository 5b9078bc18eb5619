"""Broker-side replication settings, named after Kafka's broker configs, with Kafka's defaults."""

from __future__ import annotations

from dataclasses import dataclass, field

from replication.log import LogConfig

__all__ = ["ReplicaConfig"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaConfig:
    """Settings of one broker's :class:`~replication.replica_manager.ReplicaManager`.

    ``legacy_hw_truncation`` exists for tests only: followers truncate to their high watermark,
    the rule KIP-101 replaced, so a test can show its scenario fails without the epoch rule.
    """

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
    legacy_hw_truncation: bool = False

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
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive: {getattr(self, name)}")
        if self.isr_change_blackout_ms < 0 or self.isr_change_max_delay_ms < 0:
            raise ValueError("ISR change propagation delays must be >= 0")
        if self.replica_fetch_backoff_ms < 0:
            raise ValueError("replica_fetch_backoff_ms must be >= 0")
        if self.flush_interval_ms is not None and self.flush_interval_ms < 1:
            raise ValueError(f"flush_interval_ms must be positive: {self.flush_interval_ms}")
