"""Kafka's dynamic broker configs that partctl applies, as pure rules: the keys, their checks,
the incremental operations on them, how a broker's own config and the cluster's defaults
combine, and how DescribeConfigs shows them.

They are kept as Kafka keeps them in ZooKeeper mode: ``/config/brokers/<id>`` for one broker,
``/config/brokers/<default>`` for every broker (Kafka's ``ZooKeeperInternals.DEFAULT_STRING``),
each announced by a change notification (``coordinator.metadata`` reads and writes them;
``coordinator.admin`` composes these rules with those writes). A broker's own value of a key
wins over the default's. The only keys are the replication throttle rates (bytes per second,
a LONG of at least 0, unset: no limit), which a broker's data plane applies without a restart
(``replication.quota``); any other key is refused, as Kafka refuses a config that cannot be
changed dynamically.

Errors read as Kafka's (``Invalid value X for configuration Y: ...``; ``Cannot update these
configs dynamically: ...``). Kafka answers both with INVALID_REQUEST for a broker resource
(its ZkAdminManager wraps the ConfigException), and an APPEND or SUBTRACT on a key that is not
a list with INVALID_CONFIG, as for topics.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from coordinator.configdef import (
    AtLeast,
    ConfigDef,
    ConfigKey,
    ConfigType,
    Importance,
    InvalidConfig,
    parse_value,
    render_value,
)
from coordinator.topic_config import (
    AlterOp,
    ConfigEntry,
    ConfigSource,
    ConfigSynonymValue,
    IncrementalOp,
)

__all__ = [
    "BROKER_DEFAULT",
    "DYNAMIC_BROKER_KEYS",
    "FOLLOWER_RATE",
    "LEADER_RATE",
    "NotDynamic",
    "apply_broker_incremental",
    "check_broker_config",
    "describe_dynamic",
    "effective_broker_config",
]

BROKER_DEFAULT = "<default>"
"""The entity name of the cluster's default broker config (an empty resource name in the
Kafka protocol)."""

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
_LONG_MAX = str((1 << 63) - 1)


def _rate(name: str, side: str) -> ConfigKey:
    return ConfigKey(
        name=name, type=ConfigType.LONG, default=_LONG_MAX, importance=Importance.MEDIUM,
        validator=AtLeast(0),
        doc=f"Bytes per second of the {side} side of replication for the replicas the topics' "
            f"{side}.replication.throttled.replicas name; unset: no limit.")


DYNAMIC_BROKER_KEYS = ConfigDef("dynamic broker", (
    _rate(LEADER_RATE, "leader"),
    _rate(FOLLOWER_RATE, "follower"),
))
"""Every dynamic broker key partctl accepts, by name (Kafka's QuotaConfigs broker keys)."""


class NotDynamic(ValueError):
    """A broker config key partctl cannot change at run time (Kafka's "Cannot update these
    configs dynamically", INVALID_REQUEST); nothing was written."""


def check_broker_config(config: Mapping[str, str]) -> dict[str, str]:
    """``config`` as it is stored, once every key is dynamic and every value parses (Kafka's
    DynamicConfig.Broker.validate). NotDynamic names the keys that are not (sorted);
    InvalidConfig the first bad value."""
    refused = sorted(k for k in config if k not in DYNAMIC_BROKER_KEYS)
    if refused:
        raise NotDynamic(f"Cannot update these configs dynamically: {', '.join(refused)}")
    for name in sorted(config):
        parse_value(DYNAMIC_BROKER_KEYS[name], config[name])
    return dict(config)


def apply_broker_incremental(current: Mapping[str, str], ops: Sequence[IncrementalOp]
                             ) -> dict[str, str]:
    """The config after IncrementalAlterConfigs' ``ops``: SET and DELETE; APPEND and
    SUBTRACT are InvalidConfig (no dynamic broker key is a list). The result is for
    :func:`check_broker_config` to check (a DELETE of a key that is not there is fine, as in
    Kafka)."""
    out = dict(current)
    for op in ops:
        match op.op:
            case AlterOp.SET:
                assert op.value is not None
                out[op.name] = op.value
            case AlterOp.DELETE:
                out.pop(op.name, None)
            case AlterOp.APPEND | AlterOp.SUBTRACT:
                verb = "append" if op.op is AlterOp.APPEND else "subtract"
                raise InvalidConfig(f"Config value {verb} is not allowed for config key: "
                                    f"{op.name}")
    return out


def effective_broker_config(defaults: Mapping[str, str], own: Mapping[str, str]
                            ) -> dict[str, str]:
    """What a broker runs on: the cluster's dynamic defaults, overridden key by key by its
    own dynamic config (Kafka's DynamicBrokerConfig order)."""
    return {**defaults, **own}


@dataclass(frozen=True, slots=True, kw_only=True)
class _Level:
    values: Mapping[str, str]
    source: ConfigSource


def describe_dynamic(defaults: Mapping[str, str], own: Mapping[str, str] | None,
                     names: Iterable[str] | None = None) -> list[ConfigEntry]:
    """The dynamic keys that are set, as DescribeConfigs shows a broker resource: for one
    broker (``own`` given) its value, else the default's, with both as synonyms (source
    DYNAMIC_BROKER_CONFIG, then DYNAMIC_DEFAULT_BROKER_CONFIG); for the cluster's defaults
    (``own`` None) only theirs. ``names`` narrows to the keys asked. Alterable, so not
    read-only."""
    levels = [_Level(values=defaults, source=ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)]
    if own is not None:
        levels.insert(0, _Level(values=own, source=ConfigSource.DYNAMIC_BROKER_CONFIG))
    wanted = sorted(DYNAMIC_BROKER_KEYS) if names is None else [
        n for n in dict.fromkeys(names) if n in DYNAMIC_BROKER_KEYS]
    out = []
    for name in wanted:
        key = DYNAMIC_BROKER_KEYS[name]
        synonyms = tuple(ConfigSynonymValue(name=name, value=_shown(key, lv.values[name]),
                                            source=lv.source)
                         for lv in levels if name in lv.values)
        if not synonyms:
            continue
        out.append(ConfigEntry(name=name, value=synonyms[0].value, source=synonyms[0].source,
                               type=key.type, effect=key.effect, synonyms=synonyms,
                               documentation=key.doc))
    return out


def _shown(key: ConfigKey, raw: str) -> str:
    """A stored value as Kafka renders it; as stored when it does not parse."""
    try:
        return render_value(parse_value(key, raw))
    except InvalidConfig:
        return raw
