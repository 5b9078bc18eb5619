"""The transaction coordinator's settings (Kafka's ``transaction.*`` broker keys and
defaults; declared in :mod:`broker.config_keys`, read by :mod:`broker.config_sections`)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TRANSACTION_STATE_TOPIC", "TxnConfig"]

TRANSACTION_STATE_TOPIC = "__transaction_state"


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnConfig:
    """What the transaction coordinator runs on."""

    state_log_num_partitions: int = 50
    """``transaction.state.log.num.partitions``."""
    state_log_replication_factor: int = 3
    """``transaction.state.log.replication.factor`` (fewer while fewer brokers are alive)."""
    state_log_min_isr: int = 2
    """``transaction.state.log.min.isr``: the topic's ``min.insync.replicas``."""
    state_log_segment_bytes: int = 100 * 1024 * 1024
    """``transaction.state.log.segment.bytes``."""
    max_timeout_ms: int = 900_000
    """``transaction.max.timeout.ms``: a longer ``transaction.timeout.ms`` is refused."""
    transactional_id_expiration_ms: int = 7 * 24 * 3600 * 1000
    """``transactional.id.expiration.ms``: an id idle this long is forgotten."""
    abort_timed_out_interval_ms: int = 10_000
    """``transaction.abort.timed.out.transaction.cleanup.interval.ms``."""
    remove_expired_interval_ms: int = 3_600_000
    """``transaction.remove.expired.transaction.cleanup.interval.ms``."""
    partition_verification_enable: bool = True
    """``transaction.partition.verification.enable`` (KIP-890 part 1): a partition leader asks
    the coordinator before a transaction's first batch there (:mod:`broker.txns.verifier`)."""
    add_hold_ms: int = 1000
    """``partctl.transaction.add.hold.ms``: how long an AddPartitionsToTxn or AddOffsetsToTxn
    waits for the producer's previous transaction to end (its markers written) before it is
    answered CONCURRENT_TRANSACTIONS; 0: at once, as Kafka."""
    request_timeout_ms: int = 30_000
    """How long a tombstone or a marker request waits (``request.timeout.ms``)."""
