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
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

__all__ = [
    "TOPIC_CONFIG_KEYS",
    "AlterOp",
    "ConfigEntry",
    "ConfigSource",
    "ConfigSynonymValue",
    "ConfigType",
    "Effect",
    "IncrementalOp",
    "InvalidConfig",
    "TopicConfigKey",
    "apply_incremental",
    "describe_config",
    "parse_value",
    "typed_overrides",
    "validate_topic_config",
    "validate_topic_config_change",
]


class InvalidConfig(ValueError):
    """A topic config Kafka would refuse (Kafka's InvalidConfigurationException and
    ConfigException, both answered with INVALID_CONFIG); nothing was written."""

    kafka_error = "INVALID_CONFIG"


class ConfigType(enum.Enum):
    """Kafka's ConfigDef types, as DescribeConfigs reports them (``config_type``)."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    LONG = 5
    DOUBLE = 6
    LIST = 7


class ConfigSource(enum.Enum):
    """Where a described value comes from (Kafka's DescribeConfigs ``config_source`` ids)."""

    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class Effect(enum.Enum):
    """How far partctl applies a key."""

    APPLIED = "applied"
    """Takes effect, per topic, without a restart."""
    PARTIAL = "partial"
    """Part of it takes effect (the key's ``note`` says which)."""
    STORED = "stored"
    """Accepted, validated and kept; nothing in partctl acts on it yet."""


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
class Synonym:
    """A broker config that supplies a topic key's default (Kafka's ServerTopicConfigSynonyms):
    its name, how many milliseconds one of its units is (``log.retention.hours``: 3,600,000),
    and its own default, in its units, where Kafka's broker config has one."""

    name: str
    scale: int = 1
    default: str | None = None


Check = Callable[[str, object], None]
"""A validator: raises InvalidConfig for a parsed value it refuses."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicConfigKey:
    """One of Kafka's topic config keys."""

    name: str
    type: ConfigType
    default: str
    """Kafka's default, in Kafka's string form (what DescribeConfigs shows)."""
    effect: Effect
    note: str = ""
    """What partctl does with it, said where the effect is not simply "applied"."""
    check: Check | None = None
    synonyms: tuple[Synonym, ...] = ()


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


# --- parsing, as Kafka's ConfigDef.parseType --------------------------------------------------

_INT_RE = re.compile(r"[+-]?[0-9]+")
_DOUBLE_RE = re.compile(
    r"[+-]?(NaN|Infinity|(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)[fFdD]?)")
_LIST_SPLIT = re.compile(r"\s*,\s*")
_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1
_JAVA_SPACE = "".join(chr(c) for c in range(0x21))  # what Java's String.trim() removes


def _invalid(name: str, value: object, message: str) -> InvalidConfig:
    return InvalidConfig(f"Invalid value {_java(value)} for configuration {name}: {message}")


def _java(value: object) -> str:
    """A value as Java's toString would print it in Kafka's message."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(value) + "]"
    return str(value)


def parse_value(key: TopicConfigKey, raw: str) -> object:
    """``raw`` as Kafka parses a value of ``key``'s type, then checked by its validator:
    bool, int, float, str or list of str. InvalidConfig with Kafka's message otherwise."""
    if not isinstance(raw, str):
        raise _invalid(key.name, raw, "Expected a string value")
    name, trimmed = key.name, raw.strip(_JAVA_SPACE)
    value: object
    match key.type:
        case ConfigType.BOOLEAN:
            if trimmed.lower() == "true":
                value = True
            elif trimmed.lower() == "false":
                value = False
            else:
                raise _invalid(name, raw, "Expected value to be either true or false")
        case ConfigType.STRING:
            value = trimmed
        case ConfigType.INT | ConfigType.LONG:
            low, high = ((_INT_MIN, _INT_MAX) if key.type is ConfigType.INT
                         else (_LONG_MIN, _LONG_MAX))
            if not _INT_RE.fullmatch(trimmed) or not low <= int(trimmed) <= high:
                raise _invalid(name, raw, f"Not a number of type {key.type.name}")
            value = int(trimmed)
        case ConfigType.DOUBLE:
            if not _DOUBLE_RE.fullmatch(trimmed):
                raise _invalid(name, raw, "Not a number of type DOUBLE")
            value = float(trimmed.rstrip("fFdD").replace("Infinity", "inf"))
        case ConfigType.LIST:
            value = [] if not trimmed else _LIST_SPLIT.split(trimmed)
    if key.check is not None:
        key.check(name, value)
    return value


def render_value(key: TopicConfigKey, value: object) -> str:
    """A parsed value in Kafka's string form (ConfigDef.convertToString)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(value)
    if isinstance(value, float):
        return _java(value)
    return str(value)


# --- validators, as Kafka's ---------------------------------------------------------------------


def _at_least(low: int | float) -> Check:
    def check(name: str, value: object) -> None:
        assert isinstance(value, (int, float))
        if math.isnan(value) or value < low:
            raise _invalid(name, value, f"Value must be at least {_java(low)}")
    return check


def _between(low: int | float, high: int | float) -> Check:
    def check(name: str, value: object) -> None:
        assert isinstance(value, (int, float))
        if math.isnan(value) or value < low:
            raise _invalid(name, value, f"Value must be at least {_java(low)}")
        if value > high:
            raise _invalid(name, value, f"Value must be no more than {_java(high)}")
    return check


def _one_of(*allowed: str) -> Check:
    def check(name: str, value: object) -> None:
        if value not in allowed:
            raise _invalid(name, value, "String must be one of: " + ", ".join(allowed))
    return check


def _list_of(*allowed: str) -> Check:
    each = _one_of(*allowed)

    def check(name: str, value: object) -> None:
        assert isinstance(value, list)
        for item in value:
            each(name, item)
    return check


def _gzip_level(name: str, value: object) -> None:
    assert isinstance(value, int)
    if value > 9 or (value < 1 and value != -1):
        raise _invalid(name, value, "Value must be between 1 and 9 or equal to -1")


_THROTTLED_ITEM = re.compile(r"([0-9]+:[0-9]+)?")


def _throttled_replicas(name: str, value: object) -> None:
    assert isinstance(value, list)
    items = [v.strip() for v in value]
    if not (all(_THROTTLED_ITEM.fullmatch(v) for v in items) or "".join(items) == "*"):
        raise _invalid(name, value, f"{name} must be the literal '*' or a list of replicas in "
                       "the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")


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


def _message_format_version(name: str, value: object) -> None:
    text = str(value)
    parts = text.split(".")
    keep = 3 if text.startswith("0.") else 2
    key = text if keep >= len(parts) else ".".join(parts[:keep])
    if key not in _MESSAGE_FORMAT_VERSIONS:
        raise _invalid(name, text, f"Version {text} is not a valid version")


# --- the table ---------------------------------------------------------------------------------

_DAY_MS = 24 * 60 * 60 * 1000
_HOUR_MS, _MINUTE_MS = 3_600_000, 60_000
_LONG_MAX_S = str(_LONG_MAX)
_B, _S, _I, _L, _D, _LS = (ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT,
                           ConfigType.LONG, ConfigType.DOUBLE, ConfigType.LIST)
_APPLIED, _PARTIAL, _STORED = Effect.APPLIED, Effect.PARTIAL, Effect.STORED
_COMPACTION = "applied by the log cleaner (log.cleaner.enable) to compacted topics"
_NO_TIERED = "remote storage has no per-topic copy/delete switch in ZooKeeper mode"
_TIERED = ("applied to topics with remote.storage.enable: the local part of the log (only "
           "segments already in remote storage are deleted); -2: retention's value")


def _log(name: str, default: str | None = None) -> tuple[Synonym, ...]:
    return (Synonym(name=f"log.{name}", default=default),)


TOPIC_CONFIG_KEYS: Mapping[str, TopicConfigKey] = {k.name: k for k in (
    TopicConfigKey(name="cleanup.policy", type=_LS, default="delete", effect=_APPLIED,
                   note="retention deletes segments with 'delete' in the policy; the log "
                        "cleaner compacts with 'compact' (records without a key refused)",
                   check=_list_of("compact", "delete"), synonyms=_log("cleanup.policy", "delete")),
    TopicConfigKey(name="compression.type", type=_S, default="producer", effect=_PARTIAL,
                   note="batches are kept as the producer compressed them ('producer'); other "
                        "values are stored, not applied",
                   check=_one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
                   synonyms=(Synonym(name="compression.type", default="producer"),)),
    TopicConfigKey(name="compression.gzip.level", type=_I, default="-1", effect=_STORED,
                   note="stored: partctl does not recompress", check=_gzip_level,
                   synonyms=(Synonym(name="compression.gzip.level", default="-1"),)),
    TopicConfigKey(name="compression.lz4.level", type=_I, default="9", effect=_STORED,
                   note="stored: partctl does not recompress", check=_between(1, 17),
                   synonyms=(Synonym(name="compression.lz4.level", default="9"),)),
    TopicConfigKey(name="compression.zstd.level", type=_I, default="3", effect=_STORED,
                   note="stored: partctl does not recompress", check=_between(-131072, 22),
                   synonyms=(Synonym(name="compression.zstd.level", default="3"),)),
    TopicConfigKey(name="delete.retention.ms", type=_L, default=str(_DAY_MS), effect=_APPLIED,
                   note=_COMPACTION, check=_at_least(0),
                   synonyms=(Synonym(name="log.cleaner.delete.retention.ms",
                                     default=str(_DAY_MS)),)),
    TopicConfigKey(name="file.delete.delay.ms", type=_L, default="60000", effect=_STORED,
                   note="stored: partctl deletes a segment's files at once",
                   check=_at_least(0), synonyms=_log("segment.delete.delay.ms", "60000")),
    TopicConfigKey(name="flush.messages", type=_L, default=_LONG_MAX_S, effect=_STORED,
                   note="stored: partctl flushes on log.flush.interval.ms (broker-wide) and on "
                        "shutdown", check=_at_least(1),
                   synonyms=_log("flush.interval.messages", _LONG_MAX_S)),
    TopicConfigKey(name="flush.ms", type=_L, default=_LONG_MAX_S, effect=_STORED,
                   note="stored: partctl flushes on log.flush.interval.ms (broker-wide) and on "
                        "shutdown", check=_at_least(0),
                   synonyms=(Synonym(name="log.flush.interval.ms"),
                             Synonym(name="log.flush.scheduler.interval.ms",
                                     default=_LONG_MAX_S))),
    TopicConfigKey(name="follower.replication.throttled.replicas", type=_LS, default="",
                   effect=_STORED, note="stored: partctl has no replication quotas",
                   check=_throttled_replicas),
    TopicConfigKey(name="index.interval.bytes", type=_I, default="4096", effect=_APPLIED,
                   note="segments rolled after the change use it", check=_at_least(0),
                   synonyms=_log("index.interval.bytes", "4096")),
    TopicConfigKey(name="leader.replication.throttled.replicas", type=_LS, default="",
                   effect=_STORED, note="stored: partctl has no replication quotas",
                   check=_throttled_replicas),
    TopicConfigKey(name="local.retention.bytes", type=_L, default="-2", effect=_APPLIED,
                   note=_TIERED, check=_at_least(-2),
                   synonyms=_log("local.retention.bytes", "-2")),
    TopicConfigKey(name="local.retention.ms", type=_L, default="-2", effect=_APPLIED,
                   note=_TIERED, check=_at_least(-2),
                   synonyms=_log("local.retention.ms", "-2")),
    TopicConfigKey(name="max.compaction.lag.ms", type=_L, default=_LONG_MAX_S, effect=_APPLIED,
                   note=_COMPACTION, check=_at_least(1),
                   synonyms=(Synonym(name="log.cleaner.max.compaction.lag.ms",
                                     default=_LONG_MAX_S),)),
    TopicConfigKey(name="max.message.bytes", type=_I, default="1048588", effect=_APPLIED,
                   note="a produced batch larger than this is refused (MESSAGE_TOO_LARGE)",
                   check=_at_least(0),
                   synonyms=(Synonym(name="message.max.bytes", default="1048588"),)),
    TopicConfigKey(name="message.downconversion.enable", type=_B, default="true",
                   effect=_STORED, note="stored: partctl serves record batches v2 only",
                   synonyms=_log("message.downconversion.enable", "true")),
    TopicConfigKey(name="message.format.version", type=_S, default="3.0-IV1", effect=_STORED,
                   note="stored: partctl writes record batches v2 only",
                   check=_message_format_version,
                   synonyms=_log("message.format.version", "3.0-IV1")),
    TopicConfigKey(name="message.timestamp.after.max.ms", type=_L, default=_LONG_MAX_S,
                   effect=_STORED, note="stored: timestamps are not checked on append",
                   check=_at_least(0),
                   synonyms=_log("message.timestamp.after.max.ms", _LONG_MAX_S)),
    TopicConfigKey(name="message.timestamp.before.max.ms", type=_L, default=_LONG_MAX_S,
                   effect=_STORED, note="stored: timestamps are not checked on append",
                   check=_at_least(0),
                   synonyms=_log("message.timestamp.before.max.ms", _LONG_MAX_S)),
    TopicConfigKey(name="message.timestamp.difference.max.ms", type=_L, default=_LONG_MAX_S,
                   effect=_STORED, note="stored: timestamps are not checked on append",
                   check=_at_least(0),
                   synonyms=_log("message.timestamp.difference.max.ms", _LONG_MAX_S)),
    TopicConfigKey(name="message.timestamp.type", type=_S, default="CreateTime",
                   effect=_STORED, note="stored: batches keep the producer's timestamps",
                   check=_one_of("CreateTime", "LogAppendTime"),
                   synonyms=_log("message.timestamp.type", "CreateTime")),
    TopicConfigKey(name="min.cleanable.dirty.ratio", type=_D, default="0.5", effect=_APPLIED,
                   note=_COMPACTION, check=_between(0, 1),
                   synonyms=(Synonym(name="log.cleaner.min.cleanable.ratio", default="0.5"),)),
    TopicConfigKey(name="min.compaction.lag.ms", type=_L, default="0", effect=_APPLIED,
                   note=_COMPACTION, check=_at_least(0),
                   synonyms=(Synonym(name="log.cleaner.min.compaction.lag.ms", default="0"),)),
    TopicConfigKey(name="min.insync.replicas", type=_I, default="1", effect=_APPLIED,
                   note="acks=all produce and the high watermark (capped at the replication "
                        "factor)", check=_at_least(1),
                   synonyms=(Synonym(name="min.insync.replicas", default="1"),)),
    TopicConfigKey(name="preallocate", type=_B, default="false", effect=_STORED,
                   note="stored: segments are not preallocated",
                   synonyms=_log("preallocate", "false")),
    TopicConfigKey(name="remote.log.copy.disable", type=_B, default="false", effect=_STORED,
                   note=f"only false is accepted: {_NO_TIERED}"),
    TopicConfigKey(name="remote.log.delete.on.disable", type=_B, default="false",
                   effect=_STORED, note=f"only false is accepted: {_NO_TIERED}"),
    TopicConfigKey(name="remote.storage.enable", type=_B, default="false", effect=_APPLIED,
                   note="rolled segments are copied to remote storage by the leader and "
                        "read back below the local log start (KIP-405); needs "
                        "remote.log.storage.system.enable=true on the brokers"),
    TopicConfigKey(name="retention.bytes", type=_L, default="-1", effect=_APPLIED,
                   note="with 'delete' in cleanup.policy; checked every "
                        "log.retention.check.interval.ms",
                   synonyms=_log("retention.bytes", "-1")),
    TopicConfigKey(name="retention.ms", type=_L, default=str(7 * _DAY_MS), effect=_APPLIED,
                   note="with 'delete' in cleanup.policy; checked every "
                        "log.retention.check.interval.ms", check=_at_least(-1),
                   synonyms=(Synonym(name="log.retention.ms"),
                             Synonym(name="log.retention.minutes", scale=_MINUTE_MS),
                             Synonym(name="log.retention.hours", scale=_HOUR_MS,
                                     default="168"))),
    TopicConfigKey(name="segment.bytes", type=_I, default=str(1 << 30), effect=_APPLIED,
                   note="the roll size; a produced batch larger than it is refused",
                   check=_at_least(14), synonyms=_log("segment.bytes", str(1 << 30))),
    TopicConfigKey(name="segment.index.bytes", type=_I, default=str(10 << 20), effect=_STORED,
                   note="stored: partctl's indexes grow as needed", check=_at_least(4),
                   synonyms=_log("index.size.max.bytes", str(10 << 20))),
    TopicConfigKey(name="segment.jitter.ms", type=_L, default="0", effect=_STORED,
                   note="stored: segments roll at segment.ms exactly", check=_at_least(0),
                   synonyms=(Synonym(name="log.roll.jitter.ms"),
                             Synonym(name="log.roll.jitter.hours", scale=_HOUR_MS,
                                     default="0"))),
    TopicConfigKey(name="segment.ms", type=_L, default=str(7 * _DAY_MS), effect=_APPLIED,
                   check=_at_least(1),
                   synonyms=(Synonym(name="log.roll.ms"),
                             Synonym(name="log.roll.hours", scale=_HOUR_MS, default="168"))),
    TopicConfigKey(name="unclean.leader.election.enable", type=_B, default="false",
                   effect=_APPLIED,
                   note="the controller's offline elections; a change to true elects the "
                        "topic's offline partitions",
                   synonyms=(Synonym(name="unclean.leader.election.enable", default="false"),)),
)}
"""Every topic config key of Kafka 3.9 (LogConfig), by name."""

LIST_KEYS = frozenset(k.name for k in TOPIC_CONFIG_KEYS.values() if k.type is ConfigType.LIST)


def _key(name: str) -> TopicConfigKey:
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
                old = out.get(name, key.default)
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


def resolve_default(key: TopicConfigKey, broker: Mapping[str, str]
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
        chosen = parse_value(key, key.default)
    if key.synonyms:
        primary = key.synonyms[0].name
        listed = next((i for i, s in enumerate(synonyms) if s.name == primary), len(synonyms))
        del synonyms[:listed]
    source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
    return chosen, source, synonyms


def _scaled(key: TopicConfigKey, syn: Synonym, raw: str) -> object:
    if syn.scale == 1:
        return parse_value(replace(key, name=syn.name), raw)
    units = parse_value(replace(key, name=syn.name, type=ConfigType.LONG, check=None), raw)
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
        value = render_value(key, default)
        if name in overrides:
            raw = overrides[name]
            try:
                value = render_value(key, parse_value(key, raw))
            except InvalidConfig:
                value = raw
            source = ConfigSource.TOPIC_CONFIG
            synonyms.insert(0, ConfigSynonymValue(name=name, value=value,
                                                  source=ConfigSource.TOPIC_CONFIG))
        doc = None
        if key.effect is not Effect.APPLIED:
            doc = f"partctl: {key.note}" if key.note else None
        out.append(ConfigEntry(name=name, value=value, source=source, type=key.type,
                               effect=key.effect, synonyms=tuple(synonyms),
                               documentation=doc))
    return out
