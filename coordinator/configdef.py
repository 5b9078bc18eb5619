"""Configuration declared once, as Kafka's ConfigDef declares it: each key with its type,
default, validator, importance and documentation.

One :class:`ConfigKey` per key and one :class:`ConfigDef` per scope: the topic keys
(``coordinator.topic_config``), the dynamic broker keys (``coordinator.broker_config``), the
controller's keys (``statemachines.config``) and a broker process's static keys
(``broker.config_keys``). Parsing (``server.properties``, ``/config/topics`` nodes),
DescribeConfigs, ``partctl topics describe-config`` and the reference page
(``docs/configuration.md``, written by ``python -m broker.configdoc``) all read these tables.

Values are parsed as Kafka's ConfigDef parses them (trimmed; integers in Java's forms; booleans
``true``/``false`` in any case; lists split at commas) and refused with Kafka's messages
(``Invalid value X for configuration Y: ...``). Pure.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

__all__ = [
    "AtLeast",
    "Between",
    "Check",
    "ConfigDef",
    "ConfigKey",
    "ConfigType",
    "Effect",
    "Importance",
    "InvalidConfig",
    "ListOf",
    "OneOf",
    "Problem",
    "Synonym",
    "Validator",
    "java_string",
    "parse_value",
    "render_value",
]

_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1


class InvalidConfig(ValueError):
    """A config value Kafka would refuse (Kafka's InvalidConfigurationException and
    ConfigException, both answered with INVALID_CONFIG); nothing was written. ``reason`` is
    the message without the ``Invalid value X for configuration Y:`` before it, where there
    is one."""

    kafka_error = "INVALID_CONFIG"

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason if reason is not None else message


class ConfigType(enum.Enum):
    """Kafka's ConfigDef types, as DescribeConfigs reports them (``config_type``)."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    LONG = 5
    DOUBLE = 6
    LIST = 7
    PASSWORD = 9


class Importance(enum.Enum):
    """Kafka's ConfigDef importance: how likely an operator is to need the key."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class Effect(enum.Enum):
    """How far partctl applies a key."""

    APPLIED = "applied"
    """Takes effect (for a topic key: per topic, without a restart)."""
    PARTIAL = "partial"
    """Part of it takes effect (the key's ``note`` says which)."""
    STORED = "stored"
    """Accepted, validated and kept; nothing in partctl acts on it yet."""


def java_string(value: object) -> str:
    """A value as Java's toString would print it in Kafka's messages."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(value) + "]"
    return str(value)


# --- validators -------------------------------------------------------------------------------
# Each is a value: called with (key name, parsed value), it returns what is wrong (Kafka's
# words; with the offending item first where it is one item of a list) or None; str() gives
# the valid values as the reference page shows them.

Problem = str | tuple[object, str] | None


@dataclass(frozen=True, slots=True)
class AtLeast:
    """Kafka's ``Range.atLeast``."""

    low: int | float

    def __call__(self, name: str, value: object) -> str | None:
        assert isinstance(value, int | float)
        if math.isnan(value) or value < self.low:
            return f"Value must be at least {java_string(self.low)}"
        return None

    def __str__(self) -> str:
        return f"[{java_string(self.low)},...]"


@dataclass(frozen=True, slots=True)
class Between:
    """Kafka's ``Range.between`` (both ends included)."""

    low: int | float
    high: int | float

    def __call__(self, name: str, value: object) -> str | None:
        assert isinstance(value, int | float)
        if math.isnan(value) or value < self.low:
            return f"Value must be at least {java_string(self.low)}"
        if value > self.high:
            return f"Value must be no more than {java_string(self.high)}"
        return None

    def __str__(self) -> str:
        return f"[{java_string(self.low)},...,{java_string(self.high)}]"


@dataclass(frozen=True, slots=True)
class OneOf:
    """Kafka's ``ValidString.in``."""

    allowed: tuple[str, ...]

    def __call__(self, name: str, value: object) -> str | None:
        if value not in self.allowed:
            return "String must be one of: " + ", ".join(self.allowed)
        return None

    def __str__(self) -> str:
        return "[" + ", ".join(self.allowed) + "]"


@dataclass(frozen=True, slots=True)
class ListOf:
    """Kafka's ``ValidList.in``: every item one of ``allowed``."""

    allowed: tuple[str, ...]

    def __call__(self, name: str, value: object) -> Problem:
        assert isinstance(value, list | tuple)
        for item in value:
            if item not in self.allowed:
                return item, "String must be one of: " + ", ".join(self.allowed)
        return None

    def __str__(self) -> str:
        return "[" + ", ".join(self.allowed) + "]"


@dataclass(frozen=True, slots=True)
class Check:
    """A rule of its own: ``rule(name, value)`` says what is wrong or None; ``text`` is what
    the reference page shows as the valid values."""

    rule: Callable[[str, object], Problem] = field(compare=False)
    text: str

    def __call__(self, name: str, value: object) -> Problem:
        return self.rule(name, value)

    def __str__(self) -> str:
        return self.text


Validator = AtLeast | Between | OneOf | ListOf | Check


# --- the declaration --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Synonym:
    """A broker config that supplies a topic key's default (Kafka's ServerTopicConfigSynonyms):
    its name, how many milliseconds one of its units is (``log.retention.hours``: 3,600,000),
    and its own default, in its units, where Kafka's broker config has one."""

    name: str
    scale: int = 1
    default: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigKey:
    """One configuration key, declared once (Kafka's ``ConfigDef.define``)."""

    name: str
    type: ConfigType
    default: str | None
    """Kafka's default in Kafka's string form (what DescribeConfigs shows); None: no
    default (DescribeConfigs shows null)."""
    importance: Importance
    doc: str
    """What the key does, in a sentence or two (the reference page and DescribeConfigs'
    documentation)."""
    validator: Validator | None = None
    effect: Effect = Effect.APPLIED
    note: str = ""
    """What partctl does with it, said where the effect is not simply "applied"."""
    synonyms: tuple[Synonym, ...] = ()


def _invalid(name: str, value: object, reason: str) -> InvalidConfig:
    return InvalidConfig(f"Invalid value {java_string(value)} for configuration {name}: "
                         f"{reason}", reason=reason)


_INT_RE = re.compile(r"[+-]?[0-9]+")
_DOUBLE_RE = re.compile(
    r"[+-]?(NaN|Infinity|(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)[fFdD]?)")
_LIST_SPLIT = re.compile(r"\s*,\s*")
_JAVA_SPACE = "".join(chr(c) for c in range(0x21))  # what Java's String.trim() removes


def parse_value(key: ConfigKey, raw: str) -> object:
    """``raw`` as Kafka parses a value of ``key``'s type (ConfigDef.parseType), then checked
    by its validator: bool, int, float, str or list of str. InvalidConfig with Kafka's message
    otherwise."""
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
        case ConfigType.PASSWORD:
            value = raw
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
    if key.validator is not None:
        problem = key.validator(name, value)
        if isinstance(problem, tuple):
            raise _invalid(name, problem[0], problem[1])
        if problem is not None:
            raise _invalid(name, value, problem)
    return value


def render_value(value: object) -> str:
    """A parsed value in Kafka's string form (ConfigDef.convertToString)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(value)
    if isinstance(value, float):
        return java_string(value)
    return str(value)


class ConfigDef(Mapping[str, ConfigKey]):
    """One scope's keys by name, each declared once; read-only."""

    __slots__ = ("_keys", "scope")

    def __init__(self, scope: str, keys: Iterable[ConfigKey]) -> None:
        self.scope = scope
        self._keys: dict[str, ConfigKey] = {}
        for key in keys:
            if key.name in self._keys:
                raise ValueError(f"{scope}: {key.name} is declared twice")
            self._keys[key.name] = key

    def __getitem__(self, name: str) -> ConfigKey:
        return self._keys[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __repr__(self) -> str:
        return f"ConfigDef({self.scope!r}, {len(self)} keys)"

    def default(self, name: str) -> object:
        """The parsed default of ``name`` (None where it has none)."""
        key = self._keys[name]
        return None if key.default is None else parse_value(key, key.default)

    def only(self, scope: str, names: Iterable[str]) -> ConfigDef:
        """The keys of ``names`` (each declared here) as a scope of their own."""
        return ConfigDef(scope, (self._keys[n] for n in names))
