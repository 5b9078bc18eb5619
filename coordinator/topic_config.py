"""Kafka's topic configs: the keys, their types, ranges and defaults, and the rules that check,
change and resolve them (Kafka's LogConfig, ConfigDef parsing and ConfigAdminManager's
incremental operations), as pure functions.

Overrides are kept at ``/config/topics/<t>`` as Kafka keeps them: the strings a client sent
(``coordinator.metadata`` reads and writes them; ``coordinator.admin`` composes these rules with
those writes). Every key of Kafka 3.9's topic config is accepted and validated, so that Kafka's
clients and tools (Streams creating compacted topics, ``kafka-configs``) work unchanged; each key
says how far partctl applies it (:class:`Effect`): a key that is only *stored* is kept and
described, but nothing in partctl acts on it yet. Describe answers carry that in their
documentation, and ``read_only`` stays False, as Kafka's does for every topic config: the value
can be altered, and is kept for when it takes effect.

Values are parsed as Kafka's ConfigDef parses them (trimmed; integers in Java's forms; booleans
``true``/``false`` in any case; lists split at commas), and errors read as Kafka's
(``Invalid value X for configuration Y: ...``; ``Unknown topic config name: Y``).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from coordinator.configdef import (
    AtLeast,
    Between,
    Check,
    ConfigDef,
    ConfigKey,
    ConfigType,
    Effect,
    Importance,
    InvalidConfig,
    ListOf,
    OneOf,
    Synonym,
    parse_value,
    render_value,
)

__all__ = [
    "TOPIC_CONFIG_KEYS",
    "AlterOp",
    "ConfigEntry",
    "ConfigSource",
    "ConfigSynonymValue",
    "IncrementalOp",
    "apply_incremental",
    "describe_config",
    "typed_overrides",
    "validate_topic_config",
    "validate_topic_config_change",
]


class ConfigSource(enum.Enum):
    """Where a described value comes from (Kafka's DescribeConfigs ``config_source`` ids)."""

    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class AlterOp(enum.Enum):
    """IncrementalAlterConfigs' operations (Kafka's AlterConfigOp.OpType ids)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class IncrementalOp:
    """One IncrementalAlterConfigs entry: ``value`` is ignored for DELETE."""

    name: str
    op: AlterOp
    value: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigSynonymValue:
    """One synonym of a described entry (Kafka's DescribeConfigsSynonym)."""

    name: str
    value: str
    source: ConfigSource


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigEntry:
    """One described topic config (Kafka's DescribeConfigsResourceResult), plus partctl's
    ``effect`` and a ``documentation`` line that says when a value is only stored."""

    name: str
    value: str
    source: ConfigSource
    type: ConfigType
    effect: Effect
    read_only: bool = False
    sensitive: bool = False
    synonyms: tuple[ConfigSynonymValue, ...] = ()
    documentation: str | None = None

    @property
    def is_default(self) -> bool:
        return self.source is ConfigSource.DEFAULT_CONFIG

# --- validators of their own, as Kafka's -------------------------------------------------------


def _gzip_level(name: str, value: object) -> str | None:
    assert isinstance(value, int)
    if value > 9 or (value < 1 and value != -1):
        return "Value must be between 1 and 9 or equal to -1"
    return None


_THROTTLED_ITEM = re.compile(r"([0-9]+:[0-9]+)?")


def _throttled_replicas(name: str, value: object) -> str | None:
    assert isinstance(value, list)
    items = [v.strip() for v in value]
    if not (all(_THROTTLED_ITEM.fullmatch(v) for v in items) or "".join(items) == "*"):
        return (f"{name} must be the literal '*' or a list of replicas in the following "
                "format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")
    return None


def _metadata_versions() -> frozenset[str]:
    """The strings Kafka 3.9's MetadataVersion.fromVersionString takes: every version with its
    sub-version (``2.8-IV1``) and the release of every production version (up to 3.9)."""
    full = ["0.8.0", "0.8.1", "0.8.2", "0.9.0", "0.10.0-IV0", "0.10.0-IV1", "0.10.1-IV0",
            "0.10.1-IV1", "0.10.1-IV2", "0.10.2-IV0", "0.11.0-IV0", "0.11.0-IV1", "0.11.0-IV2",
            "1.0-IV0", "1.1-IV0", "2.0-IV0", "2.0-IV1", "2.1-IV0", "2.1-IV1", "2.1-IV2",
            "2.2-IV0", "2.2-IV1", "2.3-IV0", "2.3-IV1", "2.4-IV0", "2.4-IV1", "2.5-IV0",
            "2.6-IV0", "2.7-IV0", "2.7-IV1", "2.7-IV2", "2.8-IV0", "2.8-IV1", "3.0-IV0",
            "3.0-IV1", "3.1-IV0", "3.2-IV0", "3.3-IV0", "3.3-IV1", "3.3-IV2", "3.3-IV3",
            "3.4-IV0", "3.5-IV0", "3.5-IV1", "3.5-IV2", "3.6-IV0", "3.6-IV1", "3.6-IV2",
            "3.7-IV0", "3.7-IV1", "3.7-IV2", "3.7-IV3", "3.7-IV4", "3.8-IV0", "3.9-IV0"]
    releases = {v.split("-")[0] for v in full}
    return frozenset([*full, *releases, "4.0-IV0", "4.0-IV1"])


_MESSAGE_FORMAT_VERSIONS = _metadata_versions()


def _message_format_version(name: str, value: object) -> str | None:
    text = str(value)
    parts = text.split(".")
    keep = 3 if text.startswith("0.") else 2
    key = text if keep >= len(parts) else ".".join(parts[:keep])
    if key not in _MESSAGE_FORMAT_VERSIONS:
        return f"Version {text} is not a valid version"
    return None


# --- the table ---------------------------------------------------------------------------------

_DAY_MS = 24 * 60 * 60 * 1000
_HOUR_MS, _MINUTE_MS = 3_600_000, 60_000
_LONG_MAX_S = str((1 << 63) - 1)
_B, _S, _I, _L, _D, _LS = (ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT,
                           ConfigType.LONG, ConfigType.DOUBLE, ConfigType.LIST)
_APPLIED, _PARTIAL, _STORED = Effect.APPLIED, Effect.PARTIAL, Effect.STORED
_COMPACTION = "applied by the log cleaner (log.cleaner.enable) to compacted topics"
_NO_TIERED = "remote storage has no per-topic copy/delete switch in ZooKeeper mode"
_TIERED = ("applied to topics with remote.storage.enable: the local part of the log (only "
           "segments already in remote storage are deleted); -2: retention's value")
_RECOMPRESS = "stored: partctl does not recompress"
_FLUSH = "stored: partctl flushes on log.flush.interval.ms (broker-wide) and on shutdown"
_NO_QUOTA = "stored: partctl has no replication quotas"
_NOT_CHECKED = "stored: timestamps are not checked on append"
_RETENTION = "with 'delete' in cleanup.policy; checked every log.retention.check.interval.ms"
_THROTTLED = Check(_throttled_replicas, "[partitionId]:[brokerId],... or *")


def _log(name: str, default: str | None = None) -> tuple[Synonym, ...]:
    return (Synonym(name=f"log.{name}", default=default),)


def _topic(name: str, type: ConfigType, default: str, doc: str, *, effect: Effect,
           importance: Importance = Importance.MEDIUM, **more: Any) -> ConfigKey:
    return ConfigKey(name=name, type=type, default=default, doc=doc, effect=effect,
                     importance=importance, **more)


TOPIC_CONFIG_KEYS = ConfigDef("topic", (
    _topic("cleanup.policy", _LS, "delete",
           "What happens to old segments: delete them past retention, compact them to the "
           "last record of each key, or both.", effect=_APPLIED,
           note="retention deletes segments with 'delete' in the policy; the log cleaner "
                "compacts with 'compact' (records without a key refused)",
           validator=ListOf(("compact", "delete")), synonyms=_log("cleanup.policy", "delete")),
    _topic("compression.type", _S, "producer",
           "The codec batches are stored with; 'producer' keeps the producer's.",
           effect=_PARTIAL,
           note="batches are kept as the producer compressed them ('producer'); other "
                "values are stored, not applied",
           validator=OneOf(("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
           synonyms=(Synonym(name="compression.type", default="producer"),)),
    _topic("compression.gzip.level", _I, "-1", "The gzip level used when recompressing.",
           effect=_STORED, note=_RECOMPRESS,
           validator=Check(_gzip_level, "[1,...,9] or -1"),
           synonyms=(Synonym(name="compression.gzip.level", default="-1"),)),
    _topic("compression.lz4.level", _I, "9", "The lz4 level used when recompressing.",
           effect=_STORED, note=_RECOMPRESS, validator=Between(1, 17),
           synonyms=(Synonym(name="compression.lz4.level", default="9"),)),
    _topic("compression.zstd.level", _I, "3", "The zstd level used when recompressing.",
           effect=_STORED, note=_RECOMPRESS, validator=Between(-131072, 22),
           synonyms=(Synonym(name="compression.zstd.level", default="3"),)),
    _topic("delete.retention.ms", _L, str(_DAY_MS),
           "How long a tombstone stays in a compacted log, so that readers see the delete.",
           effect=_APPLIED, note=_COMPACTION, validator=AtLeast(0),
           synonyms=(Synonym(name="log.cleaner.delete.retention.ms", default=str(_DAY_MS)),)),
    _topic("file.delete.delay.ms", _L, "60000",
           "How long a deleted segment's files wait before they are removed.",
           effect=_STORED, note="stored: partctl deletes a segment's files at once",
           validator=AtLeast(0), synonyms=_log("segment.delete.delay.ms", "60000")),
    _topic("flush.messages", _L, _LONG_MAX_S,
           "Force an fsync after this many records.", effect=_STORED, note=_FLUSH,
           validator=AtLeast(1), synonyms=_log("flush.interval.messages", _LONG_MAX_S)),
    _topic("flush.ms", _L, _LONG_MAX_S,
           "Force an fsync once the oldest unflushed record is this old.", effect=_STORED,
           note=_FLUSH, validator=AtLeast(0),
           synonyms=(Synonym(name="log.flush.interval.ms"),
                     Synonym(name="log.flush.scheduler.interval.ms", default=_LONG_MAX_S))),
    _topic("follower.replication.throttled.replicas", _LS, "",
           "The replicas whose follower-side replication is throttled.",
           effect=_STORED, note=_NO_QUOTA, validator=_THROTTLED),
    _topic("index.interval.bytes", _I, "4096",
           "How many bytes of records lie between two offset index entries.",
           effect=_APPLIED, note="segments rolled after the change use it",
           validator=AtLeast(0), synonyms=_log("index.interval.bytes", "4096")),
    _topic("leader.replication.throttled.replicas", _LS, "",
           "The replicas whose leader-side replication is throttled.",
           effect=_STORED, note=_NO_QUOTA, validator=_THROTTLED),
    _topic("local.retention.bytes", _L, "-2",
           "With remote storage: how many bytes of the log stay on local disk.",
           effect=_APPLIED, note=_TIERED, validator=AtLeast(-2),
           synonyms=_log("local.retention.bytes", "-2")),
    _topic("local.retention.ms", _L, "-2",
           "With remote storage: how long segments stay on local disk.",
           effect=_APPLIED, note=_TIERED, validator=AtLeast(-2),
           synonyms=_log("local.retention.ms", "-2")),
    _topic("max.compaction.lag.ms", _L, _LONG_MAX_S,
           "The longest a record may stay uncompacted.", effect=_APPLIED, note=_COMPACTION,
           validator=AtLeast(1),
           synonyms=(Synonym(name="log.cleaner.max.compaction.lag.ms", default=_LONG_MAX_S),)),
    _topic("max.message.bytes", _I, "1048588",
           "The largest record batch the topic takes.", effect=_APPLIED,
           note="a produced batch larger than this is refused (MESSAGE_TOO_LARGE)",
           validator=AtLeast(0), synonyms=(Synonym(name="message.max.bytes", default="1048588"),)),
    _topic("message.downconversion.enable", _B, "true",
           "Whether old consumers may be served batches converted down to their format.",
           effect=_STORED, importance=Importance.LOW,
           note="stored: partctl serves record batches v2 only",
           synonyms=_log("message.downconversion.enable", "true")),
    _topic("message.format.version", _S, "3.0-IV1",
           "The record format version batches are written in (deprecated by Kafka).",
           effect=_STORED, note="stored: partctl writes record batches v2 only",
           validator=Check(_message_format_version, "a Kafka version such as 3.0-IV1"),
           synonyms=_log("message.format.version", "3.0-IV1")),
    _topic("message.timestamp.after.max.ms", _L, _LONG_MAX_S,
           "How far ahead of the broker's clock a record's timestamp may be.",
           effect=_STORED, note=_NOT_CHECKED, validator=AtLeast(0),
           synonyms=_log("message.timestamp.after.max.ms", _LONG_MAX_S)),
    _topic("message.timestamp.before.max.ms", _L, _LONG_MAX_S,
           "How far behind the broker's clock a record's timestamp may be.",
           effect=_STORED, note=_NOT_CHECKED, validator=AtLeast(0),
           synonyms=_log("message.timestamp.before.max.ms", _LONG_MAX_S)),
    _topic("message.timestamp.difference.max.ms", _L, _LONG_MAX_S,
           "How far a record's timestamp may be from the broker's clock (deprecated by "
           "Kafka for the two keys above).", effect=_STORED, note=_NOT_CHECKED,
           validator=AtLeast(0), synonyms=_log("message.timestamp.difference.max.ms", _LONG_MAX_S)),
    _topic("message.timestamp.type", _S, "CreateTime",
           "Whether a record keeps the producer's timestamp or gets the append time.",
           effect=_STORED, note="stored: batches keep the producer's timestamps",
           validator=OneOf(("CreateTime", "LogAppendTime")),
           synonyms=_log("message.timestamp.type", "CreateTime")),
    _topic("min.cleanable.dirty.ratio", _D, "0.5",
           "The share of a compacted log not yet cleaned above which the cleaner takes it.",
           effect=_APPLIED, note=_COMPACTION, validator=Between(0, 1),
           synonyms=(Synonym(name="log.cleaner.min.cleanable.ratio", default="0.5"),)),
    _topic("min.compaction.lag.ms", _L, "0",
           "The least time a record stays uncompacted.", effect=_APPLIED, note=_COMPACTION,
           validator=AtLeast(0),
           synonyms=(Synonym(name="log.cleaner.min.compaction.lag.ms", default="0"),)),
    _topic("min.insync.replicas", _I, "1",
           "How many in-sync replicas an acks=all write needs.", effect=_APPLIED,
           note="acks=all produce and the high watermark (capped at the replication factor)",
           validator=AtLeast(1), synonyms=(Synonym(name="min.insync.replicas", default="1"),)),
    _topic("preallocate", _B, "false", "Whether a new segment's file is allocated whole.",
           effect=_STORED, note="stored: segments are not preallocated",
           synonyms=_log("preallocate", "false")),
    _topic("remote.log.copy.disable", _B, "false",
           "Stop copying segments to remote storage (KRaft mode only).",
           effect=_STORED, note=f"only false is accepted: {_NO_TIERED}"),
    _topic("remote.log.delete.on.disable", _B, "false",
           "Delete the remote copy when remote storage is turned off (KRaft mode only).",
           effect=_STORED, note=f"only false is accepted: {_NO_TIERED}"),
    _topic("remote.storage.enable", _B, "false",
           "Keep the topic's rolled segments in remote storage (tiered storage, KIP-405).",
           effect=_APPLIED,
           note="rolled segments are copied to remote storage by the leader and read back "
                "below the local log start (KIP-405); needs "
                "remote.log.storage.system.enable=true on the brokers"),
    _topic("retention.bytes", _L, "-1",
           "How many bytes a partition keeps before its oldest segments go; -1: no limit.",
           effect=_APPLIED, note=_RETENTION, synonyms=_log("retention.bytes", "-1")),
    _topic("retention.ms", _L, str(7 * _DAY_MS),
           "How long a segment is kept after its last record; -1: no limit.",
           effect=_APPLIED, note=_RETENTION, validator=AtLeast(-1),
           synonyms=(Synonym(name="log.retention.ms"),
                     Synonym(name="log.retention.minutes", scale=_MINUTE_MS),
                     Synonym(name="log.retention.hours", scale=_HOUR_MS, default="168"))),
    _topic("segment.bytes", _I, str(1 << 30), "The size at which a segment is rolled.",
           effect=_APPLIED, note="the roll size; a produced batch larger than it is refused",
           validator=AtLeast(14), synonyms=_log("segment.bytes", str(1 << 30))),
    _topic("segment.index.bytes", _I, str(10 << 20), "The size of a segment's index files.",
           effect=_STORED, note="stored: partctl's indexes grow as needed",
           validator=AtLeast(4), synonyms=_log("index.size.max.bytes", str(10 << 20))),
    _topic("segment.jitter.ms", _L, "0",
           "A random time taken off segment.ms, so that segments do not all roll at once.",
           effect=_STORED, note="stored: segments roll at segment.ms exactly",
           validator=AtLeast(0),
           synonyms=(Synonym(name="log.roll.jitter.ms"),
                     Synonym(name="log.roll.jitter.hours", scale=_HOUR_MS, default="0"))),
    _topic("segment.ms", _L, str(7 * _DAY_MS),
           "The age at which a segment is rolled even if it is not full.", effect=_APPLIED,
           validator=AtLeast(1),
           synonyms=(Synonym(name="log.roll.ms"),
                     Synonym(name="log.roll.hours", scale=_HOUR_MS, default="168"))),
    _topic("unclean.leader.election.enable", _B, "false",
           "Whether a replica outside the ISR may become leader when no ISR member is alive, "
           "at the cost of losing records.", effect=_APPLIED,
           note="the controller's offline elections; a change to true elects the topic's "
                "offline partitions",
           synonyms=(Synonym(name="unclean.leader.election.enable", default="false"),)),
))
"""Every topic config key of Kafka 3.9 (LogConfig), by name."""

LIST_KEYS = frozenset(k.name for k in TOPIC_CONFIG_KEYS.values() if k.type is ConfigType.LIST)


def _key(name: str) -> ConfigKey:
    key = TOPIC_CONFIG_KEYS.get(name)
    if key is None:
        raise InvalidConfig(f"Unknown topic config name: {name}")
    return key


def typed_overrides(overrides: Mapping[str, str], *, strict: bool = True
                    ) -> dict[str, object]:
    """Parse every override by its key. ``strict``: InvalidConfig for the first unknown name
    or bad value; otherwise those are left out (a broker applying what is stored: one bad key
    must not keep the others from taking effect)."""
    out: dict[str, object] = {}
    for name, raw in overrides.items():
        try:
            out[name] = parse_value(_key(name), raw)
        except InvalidConfig:
            if strict:
                raise
    return out


def validate_topic_config(overrides: Mapping[str, str],
                          broker: Mapping[str, str] | None = None) -> dict[str, object]:
    """Kafka's LogConfig.validate for a topic in ZooKeeper mode: names first (``Unknown topic
    config name``), then each value, then the rules across keys with the defaults filled in
    (``min.compaction.lag.ms`` not above ``max.compaction.lag.ms``) and the remote storage
    rules: ZooKeeper mode refuses the remote copy/delete switches; ``remote.storage.enable``
    needs ``remote.log.storage.system.enable`` in ``broker`` (the broker's settings) and a
    topic that is not compacted, and then ``local.retention.ms|bytes`` may not exceed
    ``retention.ms|bytes`` (nor be unlimited under a limited one), as Kafka's LogConfig
    checks them. Returns the parsed overrides."""
    for name in overrides:
        _key(name)
    typed = typed_overrides(overrides)

    def value(name: str) -> object:
        if name in typed:
            return typed[name]
        return resolve_default(TOPIC_CONFIG_KEYS[name], broker or {})[0]

    low, high = value("min.compaction.lag.ms"), value("max.compaction.lag.ms")
    assert isinstance(low, int) and isinstance(high, int)
    if low > high:
        raise InvalidConfig(f"conflict topic config setting min.compaction.lag.ms ({low}) > "
                            f"max.compaction.lag.ms ({high})")
    if value("remote.log.delete.on.disable") or value("remote.log.copy.disable"):
        raise InvalidConfig("It is invalid to set `remote.log.delete.on.disable` or "
                            "`remote.log.copy.disable` under Zookeeper's mode.")
    if value("remote.storage.enable"):
        system = (broker or {}).get("remote.log.storage.system.enable", "false")
        if system.strip().lower() != "true":
            raise InvalidConfig("Tiered Storage functionality is disabled in the broker. Topic "
                                "cannot be configured with remote log storage.")
        policy = value("cleanup.policy")
        assert isinstance(policy, list)
        if "compact" in policy:
            raise InvalidConfig("Remote log storage is unsupported for the compacted topics")
        for local_key, total_key in (("local.retention.ms", "retention.ms"),
                                     ("local.retention.bytes", "retention.bytes")):
            local, total = value(local_key), value(total_key)
            assert isinstance(local, int) and isinstance(total, int)
            if total >= 0 and local == -1:
                raise InvalidConfig(f"Invalid value {local} for configuration {local_key}: "
                                    f"Value must not be -1 as {total_key} value is set as "
                                    f"{total}")
            if total >= 0 and local > total:
                raise InvalidConfig(f"Invalid value {local} for configuration {local_key}: "
                                    f"Value must not be more than {total_key} property "
                                    f"value: {total}")
    return typed


def validate_topic_config_change(current: Mapping[str, str], new: Mapping[str, str]) -> None:
    """The rule a change of a topic's overrides obeys besides :func:`validate_topic_config`:
    ``remote.storage.enable`` once on cannot be turned off (set false or removed), as Kafka
    refuses it in ZooKeeper mode (InvalidConfig). Pure."""
    def enabled(overrides: Mapping[str, str]) -> bool:
        return bool(typed_overrides(overrides, strict=False).get("remote.storage.enable", False))

    if enabled(current) and not enabled(new):
        raise InvalidConfig("Disabling remote storage feature on the topic level is not "
                            "supported.")


def apply_incremental(current: Mapping[str, str], ops: Sequence[IncrementalOp]
                      ) -> dict[str, str]:
    """The overrides after IncrementalAlterConfigs' ``ops`` (Kafka's
    prepareIncrementalConfigs): SET and DELETE any key; APPEND and SUBTRACT list keys only,
    starting from the override or, absent one, the key's default (APPEND adds the items not
    there before it; SUBTRACT removes one occurrence per item given, a multiset difference). A key named twice, or a
    null value other than for DELETE, is InvalidConfig's sibling InvalidRequest territory and
    is checked by the caller; values are validated afterwards, on the result."""
    out = dict(current)
    for op in ops:
        name = op.name
        match op.op:
            case AlterOp.SET:
                assert op.value is not None
                out[name] = op.value
            case AlterOp.DELETE:
                out.pop(name, None)
            case AlterOp.APPEND | AlterOp.SUBTRACT:
                key = _key(name)
                verb = "append" if op.op is AlterOp.APPEND else "subtract"
                if key.type is not ConfigType.LIST:
                    raise InvalidConfig(f"Config value {verb} is not allowed for config key: "
                                        f"{name}")
                assert op.value is not None
                old = out.get(name, key.default or "")
                given = _java_split(op.value)
                if op.op is AlterOp.APPEND:
                    items = _java_split(old) if old else []
                    old_items = list(items)
                    items += [s for s in given if s not in old_items]
                else:
                    items = _java_split(old)
                    for s in given:  # a multiset difference, as Scala's List.diff
                        if s in items:
                            items.remove(s)
                out[name] = ",".join(items)
    return out


def _java_split(text: str) -> list[str]:
    """Java's ``String.split(",")``: no comma gives the text itself; trailing empty strings
    are dropped."""
    if "," not in text:
        return [text]
    parts = text.split(",")
    while parts and not parts[-1]:
        parts.pop()
    return parts


def resolve_default(key: ConfigKey, broker: Mapping[str, str]
                    ) -> tuple[object, ConfigSource, list[ConfigSynonymValue]]:
    """A key's value without a topic override: the first of its broker synonyms that the
    broker's static config sets (scaled to milliseconds), else the first synonym's own default,
    else the key's default. Returns the value, its source and the synonyms Kafka lists.

    Kafka gathers each set synonym as STATIC_BROKER_CONFIG, then each synonym default as
    DEFAULT_CONFIG, and then drops every entry before the first that names the key's primary
    broker synonym (ConfigHelper's ``dropWhile``, meant for listener overrides): a key whose
    primary synonym is neither set nor defaulted (``retention.ms``: ``log.retention.ms``) lists
    none, even where ``log.retention.hours`` supplies the value. The source is the first listed
    synonym's, DEFAULT_CONFIG when none is listed, as Kafka derives it."""
    synonyms: list[ConfigSynonymValue] = []
    chosen: object = None
    found = False
    for syn in key.synonyms:
        raw = broker.get(syn.name)
        if raw is not None:
            synonyms.append(ConfigSynonymValue(name=syn.name, value=raw.strip(),
                                               source=ConfigSource.STATIC_BROKER_CONFIG))
            if not found:
                chosen, found = _scaled(key, syn, raw), True
    for syn in key.synonyms:
        if syn.default is not None:
            synonyms.append(ConfigSynonymValue(name=syn.name, value=syn.default,
                                               source=ConfigSource.DEFAULT_CONFIG))
            if not found:
                chosen, found = _scaled(key, syn, syn.default), True
    if not found:
        chosen = parse_value(key, key.default or "")  # every topic key has a default
    if key.synonyms:
        primary = key.synonyms[0].name
        listed = next((i for i, s in enumerate(synonyms) if s.name == primary), len(synonyms))
        del synonyms[:listed]
    source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
    return chosen, source, synonyms


def _scaled(key: ConfigKey, syn: Synonym, raw: str) -> object:
    if syn.scale == 1:
        return parse_value(replace(key, name=syn.name), raw)
    units = parse_value(replace(key, name=syn.name, type=ConfigType.LONG, validator=None), raw)
    assert isinstance(units, int)
    return units * syn.scale


def describe_config(overrides: Mapping[str, str], broker: Mapping[str, str] | None = None,
                    *, names: Iterable[str] | None = None) -> list[ConfigEntry]:
    """Every key (or those of ``names``, Kafka's DescribeConfigs ``configuration_keys``) as
    DescribeConfigs shows it: a topic override first (source TOPIC_CONFIG), else the broker's
    static config, else the default; with its synonyms in Kafka's order. An override that no
    longer parses is shown as stored. Unknown names are left out, as Kafka leaves them."""
    broker = broker or {}
    wanted = sorted(TOPIC_CONFIG_KEYS) if names is None else [
        n for n in dict.fromkeys(names) if n in TOPIC_CONFIG_KEYS]
    out = []
    for name in wanted:
        key = TOPIC_CONFIG_KEYS[name]
        default, source, synonyms = resolve_default(key, broker)
        value = render_value(default)
        if name in overrides:
            raw = overrides[name]
            try:
                value = render_value(parse_value(key, raw))
            except InvalidConfig:
                value = raw
            source = ConfigSource.TOPIC_CONFIG
            synonyms.insert(0, ConfigSynonymValue(name=name, value=value,
                                                  source=ConfigSource.TOPIC_CONFIG))
        doc = key.doc
        if key.effect is not Effect.APPLIED and key.note:
            doc += f" (partctl: {key.note})"
        out.append(ConfigEntry(name=name, value=value, source=source, type=key.type,
                               effect=key.effect, synonyms=tuple(synonyms),
                               documentation=doc))
    return out
