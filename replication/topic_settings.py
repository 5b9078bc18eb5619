"""A topic's config overrides made into the settings the data plane runs on.

A broker's :class:`~replication.config.ReplicaConfig` holds its defaults (server.properties);
a topic's overrides (``/config/topics/<t>``, Kafka's keys) replace the ones partctl applies:
``min.insync.replicas`` and the log's ``segment.bytes``, ``segment.ms``, ``retention.ms``,
``retention.bytes``, ``index.interval.bytes``, ``max.message.bytes``, the compaction settings
(``min.cleanable.dirty.ratio``, ``min.compaction.lag.ms``, ``max.compaction.lag.ms``,
``delete.retention.ms``), tiered storage (``remote.storage.enable``, ``local.retention.ms``,
``local.retention.bytes``) and whether ``cleanup.policy`` holds ``delete`` and ``compact``. Keys
partctl only stores change nothing here (see
``coordinator.topic_config``). Pure.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from coordinator.configdef import InvalidConfig, parse_value
from coordinator.topic_config import TOPIC_CONFIG_KEYS
from replication.config import ReplicaConfig

__all__ = ["LOG_FIELDS", "topic_replica_config"]

log = logging.getLogger(__name__)

LOG_FIELDS = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "max.message.bytes": "max_message_bytes",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
    "delete.retention.ms": "delete_retention_ms",
    "remote.storage.enable": "remote_storage_enable",
    "local.retention.ms": "local_retention_ms",
    "local.retention.bytes": "local_retention_bytes",
}
"""Topic config keys -> the LogConfig fields they set."""


def topic_replica_config(base: ReplicaConfig, overrides: Mapping[str, str],
                         topic: str = "") -> ReplicaConfig:
    """``base`` with ``overrides`` applied. An override that does not parse (written to the
    store by something that skipped validation) is left out with a warning, as a Kafka broker
    keeps its defaults for a config it cannot read: one bad key does not keep the others from
    taking effect."""
    typed: dict[str, object] = {}
    for name, raw in overrides.items():
        key = TOPIC_CONFIG_KEYS.get(name)
        if key is None:
            log.warning("topic %s: ignoring unknown config %s", topic, name)
            continue
        try:
            typed[name] = parse_value(key, raw)
        except InvalidConfig as exc:
            log.warning("topic %s: ignoring %s", topic, exc)
    changes: dict[str, Any] = {
        field: typed[key] for key, field in LOG_FIELDS.items() if key in typed}
    retention_bytes = changes.get("retention_bytes")
    if retention_bytes is not None:
        assert isinstance(retention_bytes, int)
        changes["retention_bytes"] = max(retention_bytes, -1)  # any negative: unlimited
    if changes.get("remote_storage_enable") and not base.remote.system_enable:
        log.warning("topic %s: remote.storage.enable ignored: this broker has "
                    "remote.log.storage.system.enable=false", topic)
        changes["remote_storage_enable"] = False
    if "cleanup.policy" in typed:
        policy = typed["cleanup.policy"]
        assert isinstance(policy, list)
        changes["cleanup_delete"] = "delete" in policy
        changes["compact"] = "compact" in policy
    min_isr = typed.get("min.insync.replicas", base.min_insync_replicas)
    assert isinstance(min_isr, int)
    if not changes and min_isr == base.min_insync_replicas:
        return base
    return replace(base, log=replace(base.log, **changes), min_insync_replicas=min_isr)
