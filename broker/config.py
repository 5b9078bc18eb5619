"""``server.properties``: Kafka's broker settings, their defaults, and what they map onto.

A broker is configured the way a Kafka broker is, with Kafka's key names and defaults, so a
``server.properties`` written for Kafka's ZooKeeper mode starts a partctl broker. The keys that
apply are typed and checked here (:class:`BrokerConfig`), then mapped onto the settings the
library already has: the replica manager's :class:`~replication.ReplicaConfig` (with the log's
:class:`~replication.LogConfig`) and the controller's
:class:`~statemachines.config.ControllerConfig`.

Reading is all or nothing: the first bad value (a type, a range, a malformed listener) is one
:class:`ConfigError` naming the key and the line; an unknown key, or one that is accepted but
does not apply to a partctl broker, is one warning each (:attr:`LoadedConfig.warnings`).
``zookeeper.connect`` takes Kafka's ``host:port,host:port/chroot``; ``partctl.coordinator``
takes any coordinator URL (etcd included) instead.

The coordinator's credentials (see docs/security-coordinators.md): ZooKeeper's digest identity
from ``zookeeper.digest.user`` and ``zookeeper.digest.password.file``, with Kafka's
``zookeeper.set.acl``; etcd's user from ``etcd.user`` and ``etcd.password.file`` and its TLS
from ``etcd.ssl.cafile``, ``etcd.ssl.certfile`` and ``etcd.ssl.keyfile``. Without them the
coordinator URL's user info or the environment's ``PARTCTL_COORDINATOR_USER`` apply.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any
from urllib.parse import urlparse

from broker.groups.metadata_manager import GroupConfig
from broker.properties import PropertiesError, Property, parse_properties
from broker.security import (
    PLAINTEXT_CLIENT,
    ClientSecurity,
    ListenerSecurity,
    SecurityConfigError,
    client_security,
    hides_value,
    is_security_key,
    is_sensitive,
    listener_security,
)
from coordinator.credentials import Credentials, CredentialsError, read_password_file
from coordinator.errors import InvalidURL
from coordinator.url import parse as parse_url
from coordinator.url import redact
from replication.cleaner import CleanerConfig
from replication.config import ReplicaConfig
from replication.log import LogConfig
from replication.records import BATCH_OVERHEAD
from replication.tiered.config import (
    FORGET_DELETED_AFTER_MS,
    MIN_STALE_RECORDS,
    MetadataCompaction,
    RemoteLogConfig,
    RetryBackoff,
)
from statemachines.config import ControllerConfig

__all__ = [
    "CONTROLLER_KEYS",
    "DEFAULT_SECURITY_PROTOCOL_MAP",
    "BrokerConfig",
    "ConfigError",
    "Listener",
    "LoadedConfig",
    "key_type",
    "load_config",
    "parse_config",
    "parse_controller_config",
]

KNOWN_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})
DEFAULT_SECURITY_PROTOCOL_MAP: Mapping[str, str] = MappingProxyType(
    {p: p for p in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")})

_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)
_HOUR_MS = 3_600_000
_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-%._:")


class ConfigError(ValueError):
    """A ``server.properties`` the broker cannot start with; the message names the key."""


# --- value types ------------------------------------------------------------------------------


def _integer(bounds: tuple[int, int], kind: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise ValueError(f"not a number of type {kind}") from None
        if not bounds[0] <= value <= bounds[1]:
            raise ValueError(f"out of range for type {kind}")
        return value
    return parse


def _boolean(text: str) -> bool:
    lowered = text.lower()
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    raise ValueError("expected true or false")


def _string(text: str) -> str:
    return text


def _list(text: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in text.split(",")) if text else ()


_INT = _integer(_INT32, "INT")
_LONG = _integer(_INT64, "LONG")


def _ratio(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError("not a number of type DOUBLE") from None
    if not 0.0 <= value <= 1.0:  # also refuses nan
        raise ValueError("must be between 0 and 1")
    return value


def _cleanup_policy(text: str) -> tuple[str, ...]:
    policy = _list(text)
    unknown = [p for p in policy if p not in ("compact", "delete")]
    if unknown:
        raise ValueError(f"{', '.join(unknown)}: a policy is compact or delete")
    return policy


IBP_RANGE = ((2, 8), (3, 9))
"""The ``inter.broker.protocol.version`` values a partctl broker follows: from 2.8, the oldest
whose ZooKeeper-mode controller sends the LeaderAndIsr (5), UpdateMetadata (7) and StopReplica
(3) versions it serves, to 3.9, the last with ZooKeeper mode."""


def _ibp(text: str) -> str:
    """Kafka's ``X.Y``, ``X.Y.Z`` or ``X.Y-IVn``, within :data:`IBP_RANGE`."""
    parts = text.split("-", 1)[0].split(".")
    try:
        major, minor = int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        raise ValueError("not a Kafka version (such as 3.9 or 3.9-IV0)") from None
    (lo_major, lo_minor), (hi_major, hi_minor) = IBP_RANGE
    if not (lo_major, lo_minor) <= (major, minor) <= (hi_major, hi_minor):
        raise ValueError(f"partctl follows {lo_major}.{lo_minor} to {hi_major}.{hi_minor} (it "
                         "serves LeaderAndIsr 5-7, UpdateMetadata 7-8 and StopReplica 3-4; "
                         "4.0 and later have no ZooKeeper mode)")
    return text


@dataclass(frozen=True, slots=True)
class _Key:
    parse: Callable[[str], Any]
    at_least: int | None = None
    applies: bool = True
    """False: accepted (Kafka has it) but nothing here uses it; setting it warns."""


_KEYS: dict[str, _Key] = {
    "broker.id": _Key(_INT, at_least=0),
    "listeners": _Key(_list),
    "advertised.listeners": _Key(_list),
    "listener.security.protocol.map": _Key(_list),
    "inter.broker.listener.name": _Key(_string),
    "security.inter.broker.protocol": _Key(_string),
    "inter.broker.protocol.version": _Key(_ibp),
    "log.dirs": _Key(_list),
    "log.dir": _Key(_string),
    "zookeeper.connect": _Key(_string),
    "partctl.coordinator": _Key(_string),
    "partctl.controller.candidate": _Key(_boolean),
    "partctl.state.change.log.file": _Key(_string),
    "zookeeper.session.timeout.ms": _Key(_INT, at_least=1),
    "zookeeper.connection.timeout.ms": _Key(_INT, at_least=1),
    "zookeeper.set.acl": _Key(_boolean),
    "zookeeper.digest.user": _Key(_string),
    "zookeeper.digest.password.file": _Key(_string),
    "etcd.user": _Key(_string),
    "etcd.password.file": _Key(_string),
    "etcd.ssl.cafile": _Key(_string),
    "etcd.ssl.certfile": _Key(_string),
    "etcd.ssl.keyfile": _Key(_string),
    "broker.rack": _Key(_string),
    "num.partitions": _Key(_INT, at_least=1),
    "default.replication.factor": _Key(_INT, at_least=1),
    "min.insync.replicas": _Key(_INT, at_least=1),
    "unclean.leader.election.enable": _Key(_boolean),
    "auto.create.topics.enable": _Key(_boolean),
    "auto.leader.rebalance.enable": _Key(_boolean),
    "delete.topic.enable": _Key(_boolean),
    "leader.imbalance.check.interval.seconds": _Key(_LONG, at_least=1),
    "leader.imbalance.per.broker.percentage": _Key(_INT, at_least=0),
    "replica.lag.time.max.ms": _Key(_LONG, at_least=1),
    "log.segment.bytes": _Key(_INT, at_least=BATCH_OVERHEAD),
    "log.retention.hours": _Key(_INT, at_least=-1),
    "log.retention.minutes": _Key(_INT, at_least=-1),
    "log.retention.ms": _Key(_LONG, at_least=-1),
    "log.retention.bytes": _Key(_LONG, at_least=-1),
    "log.flush.interval.ms": _Key(_LONG, at_least=1),
    "log.flush.interval.messages": _Key(_LONG, at_least=1, applies=False),
    "log.cleanup.policy": _Key(_cleanup_policy),
    "log.cleaner.enable": _Key(_boolean),
    "log.cleaner.min.cleanable.ratio": _Key(_ratio),
    "log.cleaner.threads": _Key(_INT, at_least=0),
    "log.cleaner.dedupe.buffer.size": _Key(_LONG, at_least=24),
    "log.cleaner.backoff.ms": _Key(_LONG, at_least=0),
    "log.cleaner.delete.retention.ms": _Key(_LONG, at_least=0),
    "log.cleaner.min.compaction.lag.ms": _Key(_LONG, at_least=0),
    "log.cleaner.max.compaction.lag.ms": _Key(_LONG, at_least=1),
    "socket.request.max.bytes": _Key(_INT, at_least=1),
    "connections.max.idle.ms": _Key(_LONG, at_least=-1),
    "controlled.shutdown.enable": _Key(_boolean),
    "controlled.shutdown.max.retries": _Key(_INT, at_least=0),
    "controlled.shutdown.retry.backoff.ms": _Key(_LONG, at_least=0),
    "message.max.bytes": _Key(_INT, at_least=0),
    "replica.fetch.max.bytes": _Key(_INT, at_least=1),
    "replica.fetch.wait.max.ms": _Key(_INT, at_least=0),
    "replica.fetch.backoff.ms": _Key(_INT, at_least=0),
    "num.network.threads": _Key(_INT, at_least=1, applies=False),
    "num.io.threads": _Key(_INT, at_least=1, applies=False),
    "offsets.topic.num.partitions": _Key(_INT, at_least=1),
    "offsets.topic.replication.factor": _Key(_INT, at_least=1),
    "offsets.topic.segment.bytes": _Key(_INT, at_least=1),
    "offsets.retention.minutes": _Key(_INT, at_least=1),
    "offsets.retention.check.interval.ms": _Key(_LONG, at_least=1),
    "offsets.commit.timeout.ms": _Key(_INT, at_least=1),
    "offset.metadata.max.bytes": _Key(_INT, at_least=0),
    "group.min.session.timeout.ms": _Key(_INT, at_least=0),
    "group.max.session.timeout.ms": _Key(_INT, at_least=0),
    "group.initial.rebalance.delay.ms": _Key(_INT, at_least=0),
    "group.max.size": _Key(_INT, at_least=1),
    "group.consumer.session.timeout.ms": _Key(_INT, at_least=1),
    "group.consumer.heartbeat.interval.ms": _Key(_INT, at_least=1),
    "group.consumer.assignors": _Key(_list),
    "log.retention.check.interval.ms": _Key(_LONG, at_least=1),
    "log.local.retention.ms": _Key(_LONG, at_least=-2),
    "log.local.retention.bytes": _Key(_LONG, at_least=-2),
    "remote.log.storage.system.enable": _Key(_boolean),
    "remote.log.storage.url": _Key(_string),
    "remote.log.storage.manager.class.name": _Key(_string),
    "remote.log.storage.s3.endpoint": _Key(_string),
    "partctl.remote.log.metadata.dir": _Key(_string),
    "remote.log.manager.task.interval.ms": _Key(_LONG, at_least=1),
    "remote.log.reader.threads": _Key(_INT, at_least=1),
    "authorizer.class.name": _Key(_string),
    "super.users": _Key(_string),
    "allow.everyone.if.no.acl.found": _Key(_boolean),
    "remote.log.manager.task.retry.backoff.ms": _Key(_LONG, at_least=0),
    "remote.log.manager.task.retry.backoff.max.ms": _Key(_LONG, at_least=0),
    "remote.log.manager.task.retry.jitter": _Key(_ratio),
    "partctl.remote.log.metadata.compaction.min.stale.records": _Key(_INT, at_least=1),
    "partctl.remote.log.metadata.compaction.delete.retention.ms": _Key(_LONG, at_least=0),
    "metrics.listener": _Key(_string),
}
"""Every key read here. Kafka's defaults are the field defaults of :class:`BrokerConfig`."""

def key_type(key: str) -> str | None:
    """The Kafka ConfigDef type of a key read here (BOOLEAN, STRING, INT, LONG, LIST), None
    for one it does not read."""
    spec = _KEYS.get(key)
    if spec is None:
        return None
    return {_INT: "INT", _LONG: "LONG", _boolean: "BOOLEAN", _string: "STRING",
            _list: "LIST", _cleanup_policy: "LIST", _ratio: "DOUBLE"}.get(spec.parse)


_NOT_APPLIED = {
    "log.flush.interval.messages": "logs are flushed by time (log.flush.interval.ms) only",
    "num.network.threads": "one event loop serves every connection",
    "num.io.threads": "requests are handled on the event loop",
}


# --- listeners --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Listener:
    """One ``NAME://host:port`` of ``listeners`` or ``advertised.listeners``. An empty host
    binds every interface (and is advertised as this machine's name); port 0 binds a free port
    (and is advertised as the port bound)."""

    name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    @property
    def connection_string(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


def _parse_listener(text: str, key: str, protocols: Mapping[str, str]) -> Listener:
    name, sep, address = text.partition("://")
    host, colon, port_text = address.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if (not sep or not name or not colon or not port_text.lstrip("-").isdigit()
            or any(c not in _HOST_CHARS for c in host)):
        raise ConfigError(f"{key}: cannot parse {text!r} as a listener (want NAME://host:port)")
    port = int(port_text)
    if not 0 <= port <= 65535:
        raise ConfigError(f"{key}: port {port} of {text!r} is out of range")
    name = name.upper()
    if name not in protocols:
        raise ConfigError(f"{key}: no security protocol is defined for listener {name} "
                          "(listener.security.protocol.map)")
    return Listener(name=name, host=host, port=port, security_protocol=protocols[name])


def _listeners(texts: tuple[str, ...], key: str, protocols: Mapping[str, str]
               ) -> tuple[Listener, ...]:
    if not texts or not any(texts):
        raise ConfigError(f"{key}: no listener given")
    out = tuple(_parse_listener(t, key, protocols) for t in texts)
    names = [listener.name for listener in out]
    if len(set(names)) != len(names):
        raise ConfigError(f"{key}: each listener must have a different name: {', '.join(texts)}")
    ports = [listener.port for listener in out if listener.port]
    if len(set(ports)) != len(ports):
        raise ConfigError(f"{key}: each listener must have a different port: {', '.join(texts)}")
    return out


def _protocol_map(items: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or not protocol:
            raise ConfigError(f"listener.security.protocol.map: cannot parse {item!r} "
                              "(want LISTENER:PROTOCOL,...)")
        if protocol not in KNOWN_PROTOCOLS:
            raise ConfigError(f"listener.security.protocol.map: unknown security protocol "
                              f"{protocol!r} for listener {name}")
        out[name] = protocol
    return out


# --- the configuration ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerConfig:
    """A broker's settings, Kafka's names in snake case, Kafka's defaults."""

    broker_id: int
    coordinator_url: str = field(repr=False)
    """``zookeeper.connect`` as a ``zookeeper://`` URL, or ``partctl.coordinator`` (perhaps
    with a password: left out of the repr)."""
    listeners: tuple[Listener, ...] = (Listener(name="PLAINTEXT", host="", port=9092),)
    advertised_listeners: tuple[Listener, ...] = ()
    """As configured; empty means the listeners (see :meth:`advertised`)."""
    security_protocol_map: Mapping[str, str] = field(
        default_factory=lambda: DEFAULT_SECURITY_PROTOCOL_MAP)
    inter_broker_listener_name: str = "PLAINTEXT"
    log_dir: Path = Path("/tmp/kafka-logs")
    coordinator_options: Mapping[str, Any] = field(default_factory=dict, compare=False)
    """The coordinator's ``credentials`` (a :class:`~coordinator.credentials.Credentials`,
    whose repr masks the password), ``set_acl`` (ZooKeeper) and TLS files (etcd), as
    :func:`coordinator.connect` takes them; empty: the URL's or the environment's."""
    session_timeout_ms: int = 18_000
    connection_timeout_ms: int | None = None
    """``zookeeper.connection.timeout.ms``; None: the session timeout, as Kafka."""
    rack: str | None = None
    num_partitions: int = 1
    default_replication_factor: int = 1
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    auto_create_topics_enable: bool = True
    auto_leader_rebalance_enable: bool = True
    delete_topic_enable: bool = True
    leader_imbalance_check_interval_seconds: int = 300
    leader_imbalance_per_broker_percentage: int = 10
    replica_lag_time_max_ms: int = 30_000
    log_segment_bytes: int = 1 << 30
    log_retention_ms: int = 168 * _HOUR_MS
    """Resolved from ``log.retention.ms``, else ``.minutes``, else ``.hours``; -1: unlimited."""
    log_retention_bytes: int = -1
    log_flush_interval_ms: int | None = None
    """None: leave flushing to the OS (Kafka's default of Long.MAX_VALUE)."""
    log_cleanup_policy: tuple[str, ...] = ("delete",)
    """The ``cleanup.policy`` of topics that do not set one."""
    log_cleaner_min_cleanable_ratio: float = 0.5
    """The ``min.cleanable.dirty.ratio`` of topics that do not set one."""
    log_cleaner_enable: bool = True
    log_cleaner_threads: int = 1
    log_cleaner_dedupe_buffer_size: int = 128 << 20
    log_cleaner_backoff_ms: int = 15_000
    log_cleaner_delete_retention_ms: int = 24 * _HOUR_MS
    log_cleaner_min_compaction_lag_ms: int = 0
    log_cleaner_max_compaction_lag_ms: int = (1 << 63) - 1
    socket_request_max_bytes: int = 100 * 1024 * 1024
    connections_max_idle_ms: int = 600_000
    """A connection with no request read and no response written for this long is closed
    (one holding part of a request too); -1: never."""
    controlled_shutdown_enable: bool = True
    controlled_shutdown_max_retries: int = 3
    controlled_shutdown_retry_backoff_ms: int = 5_000
    message_max_bytes: int = 1024 * 1024 + 12
    replica_fetch_max_bytes: int = 1024 * 1024
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_backoff_ms: int = 1_000
    """How long a follower's fetcher waits after a failed fetch (Kafka's default)."""
    controller_candidate: bool = True
    """``partctl.controller.candidate``: stand for controller (false: leave the role to the
    other brokers or to dedicated ``partctl controller start`` processes)."""
    state_change_log_file: str | None = None
    """``partctl.state.change.log.file``: where the state-change log goes (appended), instead
    of the process's log (Kafka's state-change.log)."""
    groups: GroupConfig = field(default_factory=GroupConfig)
    """The group coordinator's settings (``offsets.*``, ``group.*``)."""
    request_timeout_ms: int = 30_000
    """How long a controlled-shutdown attempt waits for the controller (Kafka's
    controller.socket.timeout.ms)."""
    log_retention_check_interval_ms: int = 300_000
    log_local_retention_ms: int = -2
    """The ``local.retention.ms`` of topics that do not set one (-2: their retention.ms)."""
    log_local_retention_bytes: int = -2
    remote_log: RemoteLogConfig = field(default_factory=RemoteLogConfig)
    """``remote.log.*``: tiered storage (KIP-405), off unless
    ``remote.log.storage.system.enable``."""
    listener_security: Mapping[str, ListenerSecurity] = field(default_factory=dict,
                                                              compare=False)
    """Each listener's TLS and SASL settings (``ssl.*``, ``sasl.*``, per listener under
    ``listener.name.<l>.``), by listener name."""
    inter_broker_security: ClientSecurity = field(default=PLAINTEXT_CLIENT, compare=False)
    """How this broker's own connections reach the inter-broker listener (TLS, SASL
    mechanism and credentials)."""
    authorizer: bool = False
    """``authorizer.class.name`` names the ACL authorizer (Kafka's AclAuthorizer or
    partctl's): every request is checked against the ACLs on the coordinator."""
    super_users: frozenset[str] = frozenset()
    """``super.users``: principals (``User:admin``, separated by ``;``) allowed everything."""
    allow_everyone_if_no_acl_found: bool = False
    metrics_listener: tuple[str, int] | None = None
    """(host, port) the process serves its Prometheus metrics on (``metrics.listener``,
    ``http://host:port``; an empty host: every interface; port 0: a free one); None: no
    metrics are kept or served."""
    extra: Mapping[str, str] = field(default_factory=dict)
    """Keys accepted but not applied, as given."""
    properties: Mapping[str, str] = field(default_factory=dict, compare=False)
    """Every key read here that server.properties sets, with its value as written (trimmed):
    the broker's static config, as DescribeConfigs shows it (where the settings came from,
    not a setting: left out of comparisons). Keys whose value is secret are not here but in
    :attr:`sensitive_keys`."""
    sensitive_keys: frozenset[str] = field(default=frozenset(), compare=False)
    """The keys server.properties sets whose values are never shown
    (:func:`~broker.security.hides_value`: passwords, JAAS entries, a coordinator or storage
    URL with credentials): DescribeConfigs names them with a null value and is_sensitive."""

    def applied_properties(self) -> dict[str, str]:
        """The keys of :attr:`properties` this broker applies: what topic configs default to
        (a key accepted but not applied must not be shown as a topic's default)."""
        return {k: v for k, v in self.properties.items() if k not in self.extra}

    def listener(self, name: str) -> Listener:
        for listener in self.listeners:
            if listener.name == name:
                return listener
        raise KeyError(name)

    def advertised(self, bound_ports: Mapping[str, int] | None = None) -> tuple[Listener, ...]:
        """The endpoints to register: ``advertised.listeners`` (else ``listeners``), with a
        port of 0 replaced by the port its listener bound and an empty host by this machine's
        name, as Kafka registers them."""
        ports = bound_ports or {}
        out = []
        for listener in self.advertised_listeners or self.listeners:
            port = listener.port or ports.get(listener.name, 0)
            host = listener.host or socket.getfqdn()
            out.append(Listener(name=listener.name, host=host, port=port,
                                security_protocol=listener.security_protocol))
        return tuple(out)

    @property
    def connect_timeout_seconds(self) -> float:
        ms = self.connection_timeout_ms or self.session_timeout_ms
        return ms / 1000

    def connect_options(self) -> dict[str, Any]:
        """The options of :func:`coordinator.connect` for this process's sessions: timeouts,
        then the credentials, ACL and TLS settings of :attr:`coordinator_options`."""
        return {"timeout": self.connect_timeout_seconds,
                "session_timeout": self.session_timeout_ms / 1000,
                **self.coordinator_options}

    def log_config(self) -> LogConfig:
        return LogConfig(segment_bytes=self.log_segment_bytes, retention_ms=self.log_retention_ms,
                         retention_bytes=self.log_retention_bytes,
                         max_message_bytes=self.message_max_bytes,  # max.message.bytes' default
                         cleanup_delete="delete" in self.log_cleanup_policy,
                         compact="compact" in self.log_cleanup_policy,
                         min_cleanable_dirty_ratio=self.log_cleaner_min_cleanable_ratio,
                         delete_retention_ms=self.log_cleaner_delete_retention_ms,
                         min_compaction_lag_ms=self.log_cleaner_min_compaction_lag_ms,
                         max_compaction_lag_ms=self.log_cleaner_max_compaction_lag_ms,
                         local_retention_ms=self.log_local_retention_ms,
                         local_retention_bytes=self.log_local_retention_bytes)

    def cleaner_config(self) -> CleanerConfig:
        """The ``log.cleaner.*`` settings of this broker's log cleaner."""
        return CleanerConfig(enable=self.log_cleaner_enable, threads=self.log_cleaner_threads,
                             dedupe_buffer_size=self.log_cleaner_dedupe_buffer_size,
                             backoff_ms=self.log_cleaner_backoff_ms)

    def replica_config(self) -> ReplicaConfig:
        return ReplicaConfig(
            log=self.log_config(),
            min_insync_replicas=self.min_insync_replicas,
            replica_lag_time_max_ms=self.replica_lag_time_max_ms,
            replica_fetch_max_bytes=self.replica_fetch_max_bytes,
            replica_fetch_backoff_ms=self.replica_fetch_backoff_ms,
            flush_interval_ms=self.log_flush_interval_ms,
            cleaner=self.cleaner_config(),
            log_retention_check_interval_ms=self.log_retention_check_interval_ms,
            remote=self.remote_log,
        )

    def controller_config(self) -> ControllerConfig:
        return ControllerConfig(
            leader_imbalance_check_interval_seconds=float(
                self.leader_imbalance_check_interval_seconds),
            leader_imbalance_per_broker_percentage=float(
                self.leader_imbalance_per_broker_percentage),
            auto_leader_rebalance_enable=self.auto_leader_rebalance_enable,
            unclean_leader_election_enable=self.unclean_leader_election_enable,
            delete_topic_enable=self.delete_topic_enable,
            candidate=self.controller_candidate,
            hot_standby=self.controller_candidate,  # a view kept warm for nothing otherwise
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadedConfig:
    """A parsed configuration and the warnings to show once each (unknown or unused keys)."""

    config: BrokerConfig
    warnings: tuple[str, ...] = ()


def _zookeeper_url(connect: str) -> str:
    """Kafka's ``host:port,host:port/chroot`` as a ``zookeeper://`` URL."""
    text = connect.strip()
    if not text:
        raise ConfigError("zookeeper.connect: empty")
    if "://" in text:
        raise ConfigError(f"zookeeper.connect: want host:port,host:port/chroot, not a URL "
                          f"({text!r}); a coordinator URL goes in partctl.coordinator")
    return f"zookeeper://{text}"


def _check_url(url: str, key: str) -> str:
    try:
        parse_url(url)
    except InvalidURL as exc:
        raise ConfigError(f"{key}: {exc}") from None
    return url


def parse_config(data: str | bytes, *, source: str = "server.properties") -> LoadedConfig:
    """Read a ``server.properties`` text. Raises :class:`ConfigError` on the first bad value."""
    return _parse(data, source, controller_only=False)


CONTROLLER_KEYS = frozenset({
    "broker.id", "listeners", "advertised.listeners", "listener.security.protocol.map",
    "inter.broker.listener.name", "security.inter.broker.protocol", "zookeeper.connect",
    "partctl.coordinator", "zookeeper.session.timeout.ms", "zookeeper.connection.timeout.ms",
    "unclean.leader.election.enable", "auto.leader.rebalance.enable", "delete.topic.enable",
    "leader.imbalance.check.interval.seconds", "leader.imbalance.per.broker.percentage",
    "socket.request.max.bytes", "connections.max.idle.ms", "partctl.state.change.log.file",
    "zookeeper.set.acl", "zookeeper.digest.user", "zookeeper.digest.password.file",
    "etcd.user", "etcd.password.file", "etcd.ssl.cafile", "etcd.ssl.certfile",
    "etcd.ssl.keyfile", "metrics.listener",
})
"""The keys a controller-only process applies (``node.id`` is read as ``broker.id``)."""


def parse_controller_config(data: str | bytes, *, source: str = "controller.properties"
                            ) -> LoadedConfig:
    """Read the ``controller.properties`` of ``partctl controller start``: a broker's keys
    where they apply to a controller candidate without a data plane (:data:`CONTROLLER_KEYS`;
    the others warn and are ignored), the candidacy id in ``node.id`` (or ``broker.id``), and
    ``listeners`` (default ``PLAINTEXT://:9093``) where brokers ask it for their controlled
    shutdown: they look for the listener named as their ``inter.broker.listener.name``, which
    is also the brokers' listener this controller sends its requests to."""
    return _parse(data, source, controller_only=True)


def _parse(data: str | bytes, source: str, *, controller_only: bool) -> LoadedConfig:
    try:
        entries = parse_properties(data)
    except PropertiesError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    warnings: list[str] = []
    values: dict[str, Any] = {}
    lines: dict[str, int] = {}
    raw: dict[str, str] = {}
    security: dict[str, str] = {}
    for entry in entries:
        key = entry.key
        if controller_only and key in ("node.id", "broker.id"):
            if "broker.id" in values:
                raise ConfigError(f"{source} line {entry.line}: give node.id or broker.id, "
                                  "not both")
            key = "broker.id"
            entry = Property(key=key, value=entry.value, line=entry.line)
        spec = _KEYS.get(key)
        if spec is None and is_security_key(key):
            security[key] = entry.value if is_sensitive(key) else entry.value.strip()
            continue
        if spec is None:
            warnings.append(f"{source} line {entry.line}: unknown key {key!r} (ignored)")
            continue
        if controller_only and key not in CONTROLLER_KEYS:
            warnings.append(f"{source} line {entry.line}: {key} is ignored: it does not apply "
                            "to a controller-only process")
            continue
        values[key] = _typed(entry, spec, source)
        lines[key] = entry.line
        raw[key] = entry.value
    for key in values:
        if not _KEYS[key].applies:
            warnings.append(f"{source} line {lines[key]}: {key} is ignored: {_NOT_APPLIED[key]}")
    if controller_only:
        if "broker.id" not in values:
            raise ConfigError(f"{source}: node.id is not set (the controller's candidacy id)")
        return LoadedConfig(config=_build(values, raw, source, security, default_port=9093),
                            warnings=tuple(warnings))
    config = _build(values, raw, source, security)
    return LoadedConfig(config=config, warnings=tuple(warnings))


def _typed(entry: Property, spec: _Key, source: str) -> Any:
    text = entry.value.strip()
    try:
        value = spec.parse(text)
    except ValueError as exc:
        raise ConfigError(f"{source} line {entry.line}: invalid value {text!r} for "
                          f"{entry.key}: {exc}") from None
    if spec.at_least is not None and value < spec.at_least:
        raise ConfigError(f"{source} line {entry.line}: invalid value {text!r} for "
                          f"{entry.key}: must be at least {spec.at_least}")
    return value


def _build(values: dict[str, Any], raw: dict[str, str], source: str,
           security: Mapping[str, str] | None = None, *, default_port: int = 9092
           ) -> BrokerConfig:
    def get(key: str, default: Any = None) -> Any:
        return values.get(key, default)

    if "broker.id" not in values:
        raise ConfigError(f"{source}: broker.id is not set (automatic broker ids are not "
                          "supported)")
    zk, other = get("zookeeper.connect"), get("partctl.coordinator")
    if zk is not None and other is not None:
        raise ConfigError(f"{source}: give zookeeper.connect or partctl.coordinator, not both")
    if zk is None and other is None:
        raise ConfigError(f"{source}: no coordinator: set zookeeper.connect (host:port/chroot) "
                          "or partctl.coordinator (a coordinator URL)")
    url = (_check_url(_zookeeper_url(zk), "zookeeper.connect") if zk is not None
           else _check_url(other.strip(), "partctl.coordinator"))
    coordinator_options = _coordinator_options(get, parse_url(url).scheme)
    shown = {**{k: raw[k].strip() for k in values}, **(security or {})}

    protocols = dict(DEFAULT_SECURITY_PROTOCOL_MAP)
    if "listener.security.protocol.map" in values:
        protocols = _protocol_map(values["listener.security.protocol.map"])
    listeners = _listeners(get("listeners", (f"PLAINTEXT://:{default_port}",)), "listeners",
                           protocols)
    advertised: tuple[Listener, ...] = ()
    if "advertised.listeners" in values:
        advertised = _listeners(values["advertised.listeners"], "advertised.listeners",
                                protocols)
        for listener in advertised:
            if listener.host in ("0.0.0.0", "::"):
                raise ConfigError(f"advertised.listeners: {listener.connection_string} uses "
                                  "the non-routable meta-address")
    effective = advertised or listeners
    inter = get("inter.broker.listener.name")
    if inter is not None and "security.inter.broker.protocol" in values:
        raise ConfigError("give inter.broker.listener.name or security.inter.broker.protocol, "
                          "not both")
    if inter is None:
        protocol = get("security.inter.broker.protocol", "PLAINTEXT").strip().upper()
        if protocol not in KNOWN_PROTOCOLS:
            raise ConfigError(f"security.inter.broker.protocol: {protocol}: unknown (one of "
                              f"{', '.join(sorted(KNOWN_PROTOCOLS))})")
        inter = protocol
    inter = inter.strip().upper()
    if inter not in {listener.name for listener in effective}:
        raise ConfigError(f"inter.broker.listener.name: {inter} is not one of the advertised "
                          f"listeners ({', '.join(x.name for x in effective)})")

    security = dict(security or {})
    try:
        by_listener = listener_security(
            [(x.name, x.security_protocol) for x in listeners], security)
        inter_listener = by_listener.get(inter)
        if inter_listener is None:  # advertised only: its settings as the keys give them
            inter_listener = listener_security([(inter, protocols.get(inter, "PLAINTEXT"))],
                                               security, check_names=False)[inter]
        inter_security = client_security(inter_listener, security)
    except SecurityConfigError as exc:
        raise ConfigError(str(exc)) from None

    dirs = get("log.dirs")
    if dirs is not None:
        dirs = tuple(d for d in dirs if d)
        if len(dirs) != 1:
            raise ConfigError(f"log.dirs: exactly one log directory is supported, got "
                              f"{len(dirs)}: {raw['log.dirs']!r}")
        log_dir = dirs[0]
    else:
        log_dir = get("log.dir", "/tmp/kafka-logs").strip()
    if not log_dir:
        raise ConfigError("log.dir: empty")

    if "log.retention.ms" in values:
        retention_ms = values["log.retention.ms"]
    elif "log.retention.minutes" in values:
        minutes = values["log.retention.minutes"]
        retention_ms = -1 if minutes < 0 else minutes * 60_000
    else:
        hours = get("log.retention.hours", 168)
        retention_ms = -1 if hours < 0 else hours * _HOUR_MS

    lag = get("replica.lag.time.max.ms", 30_000)
    wait = get("replica.fetch.wait.max.ms", 500)
    if wait >= lag:
        raise ConfigError(f"replica.fetch.wait.max.ms ({wait}) must be less than "
                          f"replica.lag.time.max.ms ({lag}), or followers drop out of the ISR")
    rack = get("broker.rack")
    remote_log = _remote_log_config(get)
    authorizer = _authorizer(get("authorizer.class.name", ""))
    super_users = _super_users(get("super.users", ""))
    return BrokerConfig(
        broker_id=values["broker.id"],
        coordinator_url=url,
        coordinator_options=MappingProxyType(coordinator_options),
        listeners=listeners,
        advertised_listeners=advertised,
        security_protocol_map=MappingProxyType(protocols),
        inter_broker_listener_name=inter,
        log_dir=Path(log_dir).expanduser(),
        session_timeout_ms=get("zookeeper.session.timeout.ms", 18_000),
        connection_timeout_ms=get("zookeeper.connection.timeout.ms"),
        rack=rack.strip() or None if rack is not None else None,
        num_partitions=get("num.partitions", 1),
        default_replication_factor=get("default.replication.factor", 1),
        min_insync_replicas=get("min.insync.replicas", 1),
        unclean_leader_election_enable=get("unclean.leader.election.enable", False),
        auto_create_topics_enable=get("auto.create.topics.enable", True),
        auto_leader_rebalance_enable=get("auto.leader.rebalance.enable", True),
        delete_topic_enable=get("delete.topic.enable", True),
        leader_imbalance_check_interval_seconds=get(
            "leader.imbalance.check.interval.seconds", 300),
        leader_imbalance_per_broker_percentage=get("leader.imbalance.per.broker.percentage", 10),
        replica_lag_time_max_ms=lag,
        log_segment_bytes=get("log.segment.bytes", 1 << 30),
        log_retention_ms=retention_ms,
        log_retention_bytes=get("log.retention.bytes", -1),
        log_flush_interval_ms=get("log.flush.interval.ms"),
        log_cleanup_policy=get("log.cleanup.policy", ("delete",)),
        log_cleaner_min_cleanable_ratio=get("log.cleaner.min.cleanable.ratio", 0.5),
        log_cleaner_enable=get("log.cleaner.enable", True),
        log_cleaner_threads=get("log.cleaner.threads", 1),
        log_cleaner_dedupe_buffer_size=get("log.cleaner.dedupe.buffer.size", 128 << 20),
        log_cleaner_backoff_ms=get("log.cleaner.backoff.ms", 15_000),
        log_cleaner_delete_retention_ms=get("log.cleaner.delete.retention.ms", 24 * _HOUR_MS),
        log_cleaner_min_compaction_lag_ms=get("log.cleaner.min.compaction.lag.ms", 0),
        log_cleaner_max_compaction_lag_ms=get("log.cleaner.max.compaction.lag.ms",
                                              (1 << 63) - 1),
        socket_request_max_bytes=get("socket.request.max.bytes", 100 * 1024 * 1024),
        connections_max_idle_ms=get("connections.max.idle.ms", 600_000),
        controlled_shutdown_enable=get("controlled.shutdown.enable", True),
        controller_candidate=get("partctl.controller.candidate", True),
        state_change_log_file=get("partctl.state.change.log.file", None),
        controlled_shutdown_max_retries=get("controlled.shutdown.max.retries", 3),
        controlled_shutdown_retry_backoff_ms=get("controlled.shutdown.retry.backoff.ms", 5_000),
        message_max_bytes=get("message.max.bytes", 1024 * 1024 + 12),
        replica_fetch_max_bytes=get("replica.fetch.max.bytes", 1024 * 1024),
        replica_fetch_wait_max_ms=wait,
        replica_fetch_backoff_ms=get("replica.fetch.backoff.ms", 1_000),
        groups=_group_config(get),
        log_retention_check_interval_ms=get("log.retention.check.interval.ms", 300_000),
        log_local_retention_ms=get("log.local.retention.ms", -2),
        log_local_retention_bytes=get("log.local.retention.bytes", -2),
        remote_log=remote_log,
        listener_security=MappingProxyType(by_listener),
        inter_broker_security=inter_security,
        authorizer=authorizer,
        super_users=super_users,
        allow_everyone_if_no_acl_found=get("allow.everyone.if.no.acl.found", False),
        metrics_listener=_metrics_listener(get("metrics.listener")),
        extra={k: raw[k] for k in values if not _KEYS[k].applies},
        properties={k: v for k, v in shown.items() if not hides_value(k, v)},
        sensitive_keys=frozenset(k for k, v in shown.items() if hides_value(k, v)),
    )


def _metrics_listener(text: str | None) -> tuple[str, int] | None:
    """``metrics.listener`` (``http://host:port``, optionally ending in ``/metrics``) as
    (host, port); None when unset or empty."""
    if text is None or not text.strip():
        return None
    text = text.strip()
    problem = "want http://host:port (port 0: a free one)"
    try:
        parsed = urlparse(text)
        port = parsed.port
    except ValueError:
        raise ConfigError(f"metrics.listener: {text!r}: {problem}") from None
    if "@" in parsed.netloc:  # not echoed: it may hold a password
        raise ConfigError(f"metrics.listener: no user or password belongs there; {problem}")
    if parsed.scheme != "http" or port is None or parsed.path not in ("", "/", "/metrics") \
            or parsed.query or parsed.fragment:
        raise ConfigError(f"metrics.listener: {text!r}: {problem}")
    return parsed.hostname or "", port


_ZOOKEEPER_KEYS = ("zookeeper.set.acl", "zookeeper.digest.user", "zookeeper.digest.password.file")
_ETCD_KEYS = ("etcd.user", "etcd.password.file", "etcd.ssl.cafile", "etcd.ssl.certfile",
              "etcd.ssl.keyfile")


def _coordinator_options(get: Callable[[str, Any], Any], scheme: str) -> dict[str, Any]:
    """The coordinator's credentials, ACL and TLS settings as connect options; the keys of
    the other kind of coordinator are refused, a password file is read now."""
    zookeeper = scheme in ("zookeeper", "zk")
    for key in _ETCD_KEYS if zookeeper else _ZOOKEEPER_KEYS:
        if get(key, None) is not None:
            raise ConfigError(f"{key}: the coordinator is not "
                              f"{'etcd' if zookeeper else 'ZooKeeper'} ({scheme}://)")
    prefix = "zookeeper.digest" if zookeeper else "etcd"
    user, password_file = get(f"{prefix}.user", None), get(f"{prefix}.password.file", None)
    out: dict[str, Any] = {}
    if (user is None) != (password_file is None):
        given, missing = ((f"{prefix}.user", f"{prefix}.password.file") if user is not None
                          else (f"{prefix}.password.file", f"{prefix}.user"))
        raise ConfigError(f"{given} is set but {missing} is not")
    if user is not None:
        try:
            out["credentials"] = Credentials(
                user.strip(), read_password_file(password_file.strip(),
                                                 f"{prefix}.password.file"))
        except CredentialsError as exc:
            raise ConfigError(str(exc)) from None
    if zookeeper:
        out["set_acl"] = get("zookeeper.set.acl", False)  # Kafka's default
    else:
        for key, option in (("etcd.ssl.cafile", "ca_file"), ("etcd.ssl.certfile", "cert_file"),
                            ("etcd.ssl.keyfile", "key_file")):
            value = get(key, None)
            if value is not None and value.strip():
                out[option] = value.strip()
        if ("cert_file" in out) != ("key_file" in out):
            raise ConfigError("etcd.ssl.certfile and etcd.ssl.keyfile go together")
        if "cert_file" in out and "ca_file" not in out:
            raise ConfigError("etcd.ssl.certfile needs etcd.ssl.cafile (TLS to etcd)")
    return out


AUTHORIZER_CLASSES = frozenset({"kafka.security.authorizer.AclAuthorizer",
                                "partctl.AclAuthorizer"})
"""The ``authorizer.class.name`` values that enable ACLs (Kafka's ZooKeeper-mode name, or ours)."""


def _authorizer(name: str) -> bool:
    name = name.strip()
    if not name:
        return False
    if name not in AUTHORIZER_CLASSES:
        raise ConfigError(f"authorizer.class.name: {name}: unknown (one of "
                          f"{', '.join(sorted(AUTHORIZER_CLASSES))})")
    return True


def _super_users(text: str) -> frozenset[str]:
    users = [u.strip() for u in text.split(";") if u.strip()]
    for user in users:
        kind, sep, name = user.partition(":")
        if not sep or not kind or not name:
            raise ConfigError(f"super.users: {user!r} is not a principal of the form Type:name "
                              "(User:admin)")
    return frozenset(users)


def _remote_log_config(get: Callable[[str, Any], Any]) -> RemoteLogConfig:
    """The ``remote.log.*`` settings; the storage URL or class is checked now (one clear line
    for a bad one), the store itself is opened when the broker starts."""
    url = get("remote.log.storage.url", None)
    url = url.strip() or None if url is not None else None
    class_name = get("remote.log.storage.manager.class.name", None)
    class_name = class_name.strip() or None if class_name is not None else None
    metadata_dir = get("partctl.remote.log.metadata.dir", None)
    enable = get("remote.log.storage.system.enable", False)
    if enable and class_name is None:
        if url is None:
            raise ConfigError("remote.log.storage.system.enable: set remote.log.storage.url "
                              "(file:///path) or remote.log.storage.manager.class.name")
        parsed = urlparse(url)
        if parsed.scheme not in ("file", "s3"):
            raise ConfigError(f"remote.log.storage.url: {redact(url)!r}: unsupported scheme "
                              f"{parsed.scheme or '(none)'!r} (file:///path or "
                              "s3://bucket/prefix)")
        if parsed.scheme == "s3" and not parsed.netloc:
            raise ConfigError(f"remote.log.storage.url: {redact(url)!r}: name the bucket, "
                              "s3://bucket/prefix")
        if parsed.scheme == "file" and (parsed.netloc not in ("", "localhost")
                                        or not parsed.path.startswith("/")):
            raise ConfigError(f"remote.log.storage.url: {redact(url)!r}: give an absolute path, "
                              "file:///path")
    try:
        return RemoteLogConfig(
            system_enable=enable, storage_url=url, manager_class_name=class_name,
            metadata_dir=Path(metadata_dir.strip()).expanduser() if metadata_dir else None,
            task_interval_ms=get("remote.log.manager.task.interval.ms", 30_000),
            reader_threads=get("remote.log.reader.threads", 10),
            retry_backoff=RetryBackoff(
                initial_ms=get("remote.log.manager.task.retry.backoff.ms", 500),
                max_ms=get("remote.log.manager.task.retry.backoff.max.ms", 30_000),
                jitter=get("remote.log.manager.task.retry.jitter", 0.2)),
            metadata_compaction=MetadataCompaction(
                min_stale_records=get("partctl.remote.log.metadata.compaction.min.stale.records",
                                      MIN_STALE_RECORDS),
                delete_retention_ms=get("partctl.remote.log.metadata.compaction.delete.retention.ms",
                                        FORGET_DELETED_AFTER_MS)),
            s3_endpoint=(get("remote.log.storage.s3.endpoint", None) or "").strip() or None)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _group_config(get: Callable[[str, Any], Any]) -> GroupConfig:
    d = GroupConfig()
    low = get("group.min.session.timeout.ms", d.group_min_session_timeout_ms)
    high = get("group.max.session.timeout.ms", d.group_max_session_timeout_ms)
    if low > high:
        raise ConfigError(f"group.min.session.timeout.ms ({low}) is above "
                          f"group.max.session.timeout.ms ({high})")
    return GroupConfig(
        offsets_topic_num_partitions=get("offsets.topic.num.partitions",
                                         d.offsets_topic_num_partitions),
        offsets_topic_replication_factor=get("offsets.topic.replication.factor",
                                             d.offsets_topic_replication_factor),
        offsets_topic_segment_bytes=get("offsets.topic.segment.bytes",
                                        d.offsets_topic_segment_bytes),
        offsets_retention_ms=get("offsets.retention.minutes",
                                 d.offsets_retention_ms // 60_000) * 60_000,
        offsets_retention_check_interval_ms=get("offsets.retention.check.interval.ms",
                                                d.offsets_retention_check_interval_ms),
        offsets_commit_timeout_ms=get("offsets.commit.timeout.ms", d.offsets_commit_timeout_ms),
        offset_metadata_max_bytes=get("offset.metadata.max.bytes", d.offset_metadata_max_bytes),
        group_min_session_timeout_ms=low,
        group_max_session_timeout_ms=high,
        group_initial_rebalance_delay_ms=get("group.initial.rebalance.delay.ms",
                                             d.group_initial_rebalance_delay_ms),
        group_max_size=get("group.max.size", d.group_max_size),
        consumer_session_timeout_ms=get("group.consumer.session.timeout.ms",
                                        d.consumer_session_timeout_ms),
        consumer_heartbeat_interval_ms=get("group.consumer.heartbeat.interval.ms",
                                           d.consumer_heartbeat_interval_ms),
        consumer_assignors=_assignors(get("group.consumer.assignors", None),
                                      d.consumer_assignors),
    )


def _assignors(given: tuple[str, ...] | None, default: tuple[str, ...]) -> tuple[str, ...]:
    """``group.consumer.assignors``: short names or Kafka's class names of its two."""
    if given is None:
        return default
    names = []
    for raw in given:
        name = raw.strip().rsplit(".", 1)[-1].lower().removesuffix("assignor")
        if name not in ("uniform", "range"):
            raise ConfigError(f"group.consumer.assignors: unknown assignor {raw.strip()!r} "
                              f"(uniform and range are known)")
        names.append(name)
    if not names:
        raise ConfigError("group.consumer.assignors: name at least one assignor")
    return tuple(names)


def load_config(path: str | Path, *, controller_only: bool = False) -> LoadedConfig:
    """Read ``path`` (a broker's ``server.properties``, or with ``controller_only`` a
    ``controller.properties``); a file that cannot be read is a :class:`ConfigError` too."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    return _parse(data, str(path), controller_only=controller_only)
