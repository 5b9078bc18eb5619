"""The sections of ``server.properties`` that are more than one key each: the coordinator's
credentials and TLS, the authorizer, the metrics listener, remote storage and the group
coordinator. Each reads the parsed keys through ``get(key)`` (the value set, else the key's
declared default; ``get(key, None)``: None when it is not set) and raises :class:`ConfigError`,
one line naming the key, for what it refuses."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from broker.groups.metadata_manager import GroupConfig
from broker.txns.config import TxnConfig
from coordinator.credentials import Credentials, CredentialsError, read_password_file
from coordinator.url import redact
from replication.tiered.config import MetadataCompaction, RemoteLogConfig, RetryBackoff

__all__ = ["AUTHORIZER_CLASSES", "ConfigError", "Get", "authorizer", "coordinator_options",
           "group_config", "metrics_listener", "remote_log_config", "super_users", "txn_config"]

Get = Callable[..., Any]
"""``get(key)`` or ``get(key, default)``: a parsed value (see the module's doc)."""


class ConfigError(ValueError):
    """A ``server.properties`` the broker cannot start with; the message names the key."""


def metrics_listener(text: str | None) -> tuple[str, int] | None:
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
              "etcd.ssl.keyfile", "etcd.max.txn.ops", "etcd.max.request.bytes")


def coordinator_options(get: Get, scheme: str) -> dict[str, Any]:
    """The coordinator's credentials, ACL and TLS settings (and etcd's request limits) as
    connect options; the keys of the other kind of coordinator are refused, a password file is
    read now."""
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
        out["set_acl"] = get("zookeeper.set.acl")
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
        for key, option in (("etcd.max.txn.ops", "max_txn_ops"),
                            ("etcd.max.request.bytes", "max_request_bytes")):
            value = get(key, None)
            if value is not None:
                out[option] = value
    return out


AUTHORIZER_CLASSES = frozenset({"kafka.security.authorizer.AclAuthorizer",
                                "partctl.AclAuthorizer"})
"""The ``authorizer.class.name`` values that enable ACLs (Kafka's ZooKeeper-mode name, or ours)."""


def authorizer(name: str) -> bool:
    name = name.strip()
    if not name:
        return False
    if name not in AUTHORIZER_CLASSES:
        raise ConfigError(f"authorizer.class.name: {name}: unknown (one of "
                          f"{', '.join(sorted(AUTHORIZER_CLASSES))})")
    return True


def super_users(text: str) -> frozenset[str]:
    users = [u.strip() for u in text.split(";") if u.strip()]
    for user in users:
        kind, sep, name = user.partition(":")
        if not sep or not kind or not name:
            raise ConfigError(f"super.users: {user!r} is not a principal of the form Type:name "
                              "(User:admin)")
    return frozenset(users)


def remote_log_config(get: Get) -> RemoteLogConfig:
    """The ``remote.log.*`` settings; the storage URL or class is checked now (one clear line
    for a bad one), the store itself is opened when the broker starts."""
    url = get("remote.log.storage.url", None)
    url = url.strip() or None if url is not None else None
    class_name = get("remote.log.storage.manager.class.name", None)
    class_name = class_name.strip() or None if class_name is not None else None
    metadata_dir = get("partctl.remote.log.metadata.dir", None)
    enable = get("remote.log.storage.system.enable")
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
            task_interval_ms=get("remote.log.manager.task.interval.ms"),
            reader_threads=get("remote.log.reader.threads"),
            retry_backoff=RetryBackoff(
                initial_ms=get("remote.log.manager.task.retry.backoff.ms"),
                max_ms=get("remote.log.manager.task.retry.backoff.max.ms"),
                jitter=get("remote.log.manager.task.retry.jitter")),
            metadata_compaction=MetadataCompaction(
                min_stale_records=get("partctl.remote.log.metadata.compaction.min.stale.records"),
                delete_retention_ms=get(
                    "partctl.remote.log.metadata.compaction.delete.retention.ms")),
            s3_endpoint=(get("remote.log.storage.s3.endpoint", None) or "").strip() or None)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def group_config(get: Get) -> GroupConfig:
    """The group coordinator's settings (``offsets.*``, ``group.*``)."""
    low, high = get("group.min.session.timeout.ms"), get("group.max.session.timeout.ms")
    if low > high:
        raise ConfigError(f"group.min.session.timeout.ms ({low}) is above "
                          f"group.max.session.timeout.ms ({high})")
    return GroupConfig(
        offsets_topic_num_partitions=get("offsets.topic.num.partitions"),
        offsets_topic_replication_factor=get("offsets.topic.replication.factor"),
        offsets_topic_segment_bytes=get("offsets.topic.segment.bytes"),
        offsets_retention_ms=get("offsets.retention.minutes") * 60_000,
        offsets_retention_check_interval_ms=get("offsets.retention.check.interval.ms"),
        offsets_commit_timeout_ms=get("offsets.commit.timeout.ms"),
        offset_metadata_max_bytes=get("offset.metadata.max.bytes"),
        group_min_session_timeout_ms=low,
        group_max_session_timeout_ms=high,
        group_initial_rebalance_delay_ms=get("group.initial.rebalance.delay.ms"),
        group_max_size=get("group.max.size"),
        consumer_session_timeout_ms=get("group.consumer.session.timeout.ms"),
        consumer_heartbeat_interval_ms=get("group.consumer.heartbeat.interval.ms"),
        consumer_assignors=_assignors(get("group.consumer.assignors")),
    )


def txn_config(get: Get) -> TxnConfig:
    """The transaction coordinator's settings (``transaction.*``,
    ``transactional.id.expiration.ms``)."""
    return TxnConfig(
        state_log_num_partitions=get("transaction.state.log.num.partitions"),
        state_log_replication_factor=get("transaction.state.log.replication.factor"),
        state_log_min_isr=get("transaction.state.log.min.isr"),
        state_log_segment_bytes=get("transaction.state.log.segment.bytes"),
        max_timeout_ms=get("transaction.max.timeout.ms"),
        transactional_id_expiration_ms=get("transactional.id.expiration.ms"),
        abort_timed_out_interval_ms=get(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms"),
        remove_expired_interval_ms=get(
            "transaction.remove.expired.transaction.cleanup.interval.ms"),
        partition_verification_enable=get("transaction.partition.verification.enable"),
        add_hold_ms=get("partctl.transaction.add.hold.ms"),
    )


def _assignors(given: tuple[str, ...]) -> tuple[str, ...]:
    """``group.consumer.assignors``: short names or Kafka's class names of its two."""
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
