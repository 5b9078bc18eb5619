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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from broker.config_keys import BROKER_CONFIG, CONTROLLER_PROCESS_CONFIG
from broker.config_sections import (
    ConfigError,
    authorizer,
    coordinator_options,
    group_config,
    metrics_listener,
    remote_log_config,
    super_users,
    txn_config,
)
from broker.groups.metadata_manager import GroupConfig
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
from broker.txns.config import TxnConfig
from coordinator.configdef import Effect, InvalidConfig, parse_value
from coordinator.errors import InvalidURL
from coordinator.url import parse as parse_url
from kafkaclient.properties import PropertiesError, Property, parse_properties
from replication.cleaner import CleanerConfig
from replication.config import ReplicaConfig
from replication.log import LogConfig
from replication.tiered.config import RemoteLogConfig
from statemachines.config import ControllerConfig

__all__ = [
    "DEFAULT_SECURITY_PROTOCOL_MAP",
    "BrokerConfig",
    "ConfigError",
    "Listener",
    "LoadedConfig",
    "load_config",
    "parse_config",
    "parse_controller_config",
]

KNOWN_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})
DEFAULT_SECURITY_PROTOCOL_MAP: Mapping[str, str] = MappingProxyType(
    {p: p for p in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")})

_HOUR_MS = 3_600_000
_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-%._:")


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
    gc_thaw_interval_ms: int = 600_000
    """How often a full pass of the garbage collector walks every object again (between,
    what survives a full pass is frozen: broker.garbage); -1: nothing is frozen."""
    controlled_shutdown_enable: bool = True
    controlled_shutdown_max_retries: int = 3
    controlled_shutdown_retry_backoff_ms: int = 5_000
    message_max_bytes: int = 1024 * 1024 + 12
    replica_fetch_max_bytes: int = 1024 * 1024
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_backoff_ms: int = 1_000
    """How long a follower's fetcher waits after a failed fetch (Kafka's default)."""
    max_incremental_fetch_session_cache_slots: int = 1000
    """Incremental fetch sessions (KIP-227) kept for the fetchers of this broker's partitions."""
    controller_candidate: bool = True
    """``partctl.controller.candidate``: stand for controller (false: leave the role to the
    other brokers or to dedicated ``partctl controller start`` processes)."""
    state_change_log_file: str | None = None
    """``partctl.state.change.log.file``: where the state-change log goes (appended), instead
    of the process's log (Kafka's state-change.log)."""
    groups: GroupConfig = field(default_factory=GroupConfig)
    """The group coordinator's settings (``offsets.*``, ``group.*``)."""
    transactions: TxnConfig = field(default_factory=TxnConfig)
    """The transaction coordinator's settings (``transaction.*``)."""
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


def parse_controller_config(data: str | bytes, *, source: str = "controller.properties"
                            ) -> LoadedConfig:
    """Read the ``controller.properties`` of ``partctl controller start``: a broker's keys
    where they apply to a controller candidate without a data plane
    (:data:`~broker.config_keys.CONTROLLER_PROCESS_CONFIG`;
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
        spec = BROKER_CONFIG.get(key)
        if spec is None and is_security_key(key):
            security[key] = entry.value if is_sensitive(key) else entry.value.strip()
            continue
        if spec is None:
            warnings.append(f"{source} line {entry.line}: unknown key {key!r} (ignored)")
            continue
        if controller_only and key not in CONTROLLER_PROCESS_CONFIG:
            warnings.append(f"{source} line {entry.line}: {key} is ignored: it does not apply "
                            "to a controller-only process")
            continue
        values[key] = _typed(entry, source)
        lines[key] = entry.line
        raw[key] = entry.value
    for key in values:
        if BROKER_CONFIG[key].effect is Effect.STORED:
            warnings.append(f"{source} line {lines[key]}: {key} is ignored: "
                            f"{BROKER_CONFIG[key].note}")
    if controller_only:
        if "broker.id" not in values:
            raise ConfigError(f"{source}: node.id is not set (the controller's candidacy id)")
        return LoadedConfig(config=_build(values, raw, source, security, default_port=9093),
                            warnings=tuple(warnings))
    config = _build(values, raw, source, security)
    return LoadedConfig(config=config, warnings=tuple(warnings))


def _typed(entry: Property, source: str) -> Any:
    """A value parsed and checked by its key's declaration; a list as a tuple. A refused one
    is one line naming the file, the line and the key."""
    key = BROKER_CONFIG[entry.key]
    text = entry.value.strip()
    try:
        value = parse_value(key, text)
    except InvalidConfig as exc:
        reason = exc.reason[:1].lower() + exc.reason[1:]
        raise ConfigError(f"{source} line {entry.line}: invalid value {text!r} for "
                          f"{entry.key}: {reason.removeprefix('value ')}") from None
    return tuple(value) if isinstance(value, list) else value


_DEFAULTS: Mapping[str, Any] = MappingProxyType({
    name: tuple(v) if isinstance(v := BROKER_CONFIG.default(name), list) else v
    for name in BROKER_CONFIG})
"""Each key's declared default, parsed."""
_UNSET: Any = object()


def _build(values: dict[str, Any], raw: dict[str, str], source: str,
           security: Mapping[str, str] | None = None, *, default_port: int = 9092
           ) -> BrokerConfig:
    def get(key: str, default: Any = _UNSET) -> Any:
        """The value set, else ``default`` if given, else the key's declared default."""
        if key in values:
            return values[key]
        return _DEFAULTS[key] if default is _UNSET else default

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
    connect = coordinator_options(get, parse_url(url).scheme)
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
        protocol = get("security.inter.broker.protocol").strip().upper()
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
        log_dir = get("log.dir").strip()
    if not log_dir:
        raise ConfigError("log.dir: empty")

    if "log.retention.ms" in values:
        retention_ms = values["log.retention.ms"]
    elif "log.retention.minutes" in values:
        minutes = values["log.retention.minutes"]
        retention_ms = -1 if minutes < 0 else minutes * 60_000
    else:
        hours = get("log.retention.hours")
        retention_ms = -1 if hours < 0 else hours * _HOUR_MS

    lag = get("replica.lag.time.max.ms")
    wait = get("replica.fetch.wait.max.ms")
    if wait >= lag:
        raise ConfigError(f"replica.fetch.wait.max.ms ({wait}) must be less than "
                          f"replica.lag.time.max.ms ({lag}), or followers drop out of the ISR")
    rack = get("broker.rack")
    remote_log = remote_log_config(get)
    acls = authorizer(get("authorizer.class.name"))
    supers = super_users(get("super.users"))
    return BrokerConfig(
        broker_id=values["broker.id"],
        coordinator_url=url,
        coordinator_options=MappingProxyType(connect),
        listeners=listeners,
        advertised_listeners=advertised,
        security_protocol_map=MappingProxyType(protocols),
        inter_broker_listener_name=inter,
        log_dir=Path(log_dir).expanduser(),
        session_timeout_ms=get("zookeeper.session.timeout.ms"),
        connection_timeout_ms=get("zookeeper.connection.timeout.ms"),
        rack=rack.strip() or None if rack is not None else None,
        num_partitions=get("num.partitions"),
        default_replication_factor=get("default.replication.factor"),
        min_insync_replicas=get("min.insync.replicas"),
        unclean_leader_election_enable=get("unclean.leader.election.enable"),
        auto_create_topics_enable=get("auto.create.topics.enable"),
        auto_leader_rebalance_enable=get("auto.leader.rebalance.enable"),
        delete_topic_enable=get("delete.topic.enable"),
        leader_imbalance_check_interval_seconds=get(
            "leader.imbalance.check.interval.seconds", 300),
        leader_imbalance_per_broker_percentage=get("leader.imbalance.per.broker.percentage"),
        replica_lag_time_max_ms=lag,
        log_segment_bytes=get("log.segment.bytes"),
        log_retention_ms=retention_ms,
        log_retention_bytes=get("log.retention.bytes"),
        log_flush_interval_ms=get("log.flush.interval.ms"),
        log_cleanup_policy=get("log.cleanup.policy"),
        log_cleaner_min_cleanable_ratio=get("log.cleaner.min.cleanable.ratio"),
        log_cleaner_enable=get("log.cleaner.enable"),
        log_cleaner_threads=get("log.cleaner.threads"),
        log_cleaner_dedupe_buffer_size=get("log.cleaner.dedupe.buffer.size"),
        log_cleaner_backoff_ms=get("log.cleaner.backoff.ms"),
        log_cleaner_delete_retention_ms=get("log.cleaner.delete.retention.ms"),
        log_cleaner_min_compaction_lag_ms=get("log.cleaner.min.compaction.lag.ms"),
        log_cleaner_max_compaction_lag_ms=get("log.cleaner.max.compaction.lag.ms"),
        socket_request_max_bytes=get("socket.request.max.bytes"),
        connections_max_idle_ms=get("connections.max.idle.ms"),
        gc_thaw_interval_ms=get("partctl.gc.thaw.interval.ms"),
        controlled_shutdown_enable=get("controlled.shutdown.enable"),
        controller_candidate=get("partctl.controller.candidate"),
        state_change_log_file=get("partctl.state.change.log.file", None),
        controlled_shutdown_max_retries=get("controlled.shutdown.max.retries"),
        controlled_shutdown_retry_backoff_ms=get("controlled.shutdown.retry.backoff.ms"),
        message_max_bytes=get("message.max.bytes"),
        replica_fetch_max_bytes=get("replica.fetch.max.bytes"),
        replica_fetch_wait_max_ms=wait,
        replica_fetch_backoff_ms=get("replica.fetch.backoff.ms"),
        max_incremental_fetch_session_cache_slots=get(
            "max.incremental.fetch.session.cache.slots"),
        groups=group_config(get),
        transactions=txn_config(get),
        log_retention_check_interval_ms=get("log.retention.check.interval.ms"),
        log_local_retention_ms=get("log.local.retention.ms"),
        log_local_retention_bytes=get("log.local.retention.bytes"),
        remote_log=remote_log,
        listener_security=MappingProxyType(by_listener),
        inter_broker_security=inter_security,
        authorizer=acls,
        super_users=supers,
        allow_everyone_if_no_acl_found=get("allow.everyone.if.no.acl.found"),
        metrics_listener=metrics_listener(get("metrics.listener")),
        extra={k: raw[k] for k in values if BROKER_CONFIG[k].effect is Effect.STORED},
        properties={k: v for k, v in shown.items() if not hides_value(k, v)},
        sensitive_keys=frozenset(k for k, v in shown.items() if hides_value(k, v)),
    )


def load_config(path: str | Path, *, controller_only: bool = False) -> LoadedConfig:
    """Read ``path`` (a broker's ``server.properties``, or with ``controller_only`` a
    ``controller.properties``); a file that cannot be read is a :class:`ConfigError` too."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    return _parse(data, str(path), controller_only=controller_only)
