"""DescribeConfigs (key 32), AlterConfigs (key 33) and IncrementalAlterConfigs (key 44).

TOPIC resources go through the topic config library (:mod:`coordinator.topic_config`, composed
with the config node's writes by :class:`coordinator.admin.Admin`), as Kafka's ZooKeeper-mode
brokers served them (``ConfigHelper``, ``ZkAdminManager``): every Kafka 3.9 topic key, its
value, source (TOPIC_CONFIG for an override, STATIC_BROKER_CONFIG where this broker's
server.properties sets a synonym, else DEFAULT_CONFIG) and synonyms; AlterConfigs replaces a
topic's overrides whole, IncrementalAlterConfigs applies SET, DELETE, APPEND and SUBTRACT; both
validate the result as Kafka's LogConfig does (INVALID_CONFIG) and write it, with its change
notification, unless ``validate_only``. A topic the metadata cache does not know is
UNKNOWN_TOPIC_OR_PARTITION; an empty topic name INVALID_REQUEST ("Default topic resources are
not allowed.").

BROKER resources: this broker's static config, read-only, as Kafka lists it: every key it
declares (:mod:`broker.config_keys`), those server.properties sets as STATIC_BROKER_CONFIG, the
others with their defaults as DEFAULT_CONFIG, each with its doc; then its dynamic keys that are set
(:mod:`coordinator.broker_config`: the replication throttle rates, its own value as
DYNAMIC_BROKER_CONFIG, else the cluster default's as DYNAMIC_DEFAULT_BROKER_CONFIG); an empty
name describes the cluster's dynamic defaults alone. AlterConfigs (the whole dynamic config) and
IncrementalAlterConfigs (SET, DELETE) change them at ``/config/brokers/<id>``, or
``/config/brokers/<default>`` for an empty name, with their change notification, as Kafka's
ZooKeeper-mode brokers did; the brokers' data plane follows them without a restart. Any other
key is INVALID_REQUEST ("Cannot update these configs dynamically"), as is a bad value (Kafka's
answer for a broker resource); APPEND and SUBTRACT are INVALID_CONFIG. A broker id other than
this broker's, or one that is not a number, is INVALID_REQUEST as in Kafka. BROKER_LOGGER
(Kafka's log4j levels) and other resource types are INVALID_REQUEST.

Secrets are never answered: a password or JAAS key (Kafka's PASSWORD type, listener-prefixed
ones too) and a URL-valued key whose value carries credentials (``zookeeper.connect`` as
``user:password@host/chroot``, ``partctl.coordinator``, the remote storage URL) have a null
value and ``is_sensitive``, in their synonyms too, as Kafka answers (``hides_value``).

Request checks first, as Kafka's ConfigAdminManager makes them: a resource named twice
(INVALID_REQUEST for both), a key named twice, a missing value (other than for DELETE), an
operation that does not exist.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.apis.admin_support import blocking
from broker.apis.base import Api, Reply, RequestContext
from broker.config_keys import BROKER_CONFIG
from broker.security import hides_value, is_sensitive
from broker.security.acls import Operation, ResourceType
from broker.wire import response_module
from coordinator.admin import InvalidRequest
from coordinator.configdef import ConfigType, InvalidConfig
from coordinator.errors import CoordinatorError
from coordinator.layout import validate_topic
from coordinator.metadata import UnknownTopic
from coordinator.topic_config import (
    AlterOp,
    ConfigEntry,
    ConfigSource,
    IncrementalOp,
)
from kafkaclient.messages import build

if TYPE_CHECKING:
    from broker.apis.messages import (
        AlterConfigsRequest,
        AlterConfigsResponse,
        DescribeConfigsRequest,
        DescribeConfigsResponse,
        IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResponse,
    )
    from broker.apis.services import ConfigServices

__all__ = ["ALTER_CONFIGS", "APIS", "DESCRIBE_CONFIGS", "INCREMENTAL_ALTER_CONFIGS",
           "describe_broker"]

DESCRIBE_CONFIGS = 32
ALTER_CONFIGS = 33
INCREMENTAL_ALTER_CONFIGS = 44

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8


class _Refused(Exception):
    """A resource answered with an error (the request's other resources go on)."""

    def __init__(self, error: ErrorCode, message: str | None = None) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def _broker_id(services: ConfigServices, name: str, *, empty_ok: bool) -> int | None:
    """The broker a BROKER resource names: None for the cluster's defaults (an empty name)."""
    if not name:
        if empty_ok:
            return None
        raise _Refused(ErrorCode.invalid_request, "Broker id must not be empty")
    try:
        broker_id = int(name)
    except ValueError:
        raise _Refused(ErrorCode.invalid_request,
                       f"Broker id must be an integer, but it is: {name}") from None
    if broker_id != services.broker_id:
        expected = f"{services.broker_id} or empty string" if empty_ok else str(
            services.broker_id)
        raise _Refused(ErrorCode.invalid_request,
                       f"Unexpected broker id, expected {expected}, but received {name}")
    return broker_id


# --- DescribeConfigs --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class _Described:
    name: str
    value: str | None
    source: int
    type: int
    read_only: bool
    synonyms: tuple[tuple[str, str | None, int], ...]
    documentation: str | None = None
    sensitive: bool = False
    """A secret: ``value`` (and the synonyms' values) are None, as Kafka answers for its
    PASSWORD keys."""


def _shown(name: str, value: str | None) -> str | None:
    return None if hides_value(name, value) else value


def _from_topic_entry(entry: ConfigEntry) -> _Described:
    return _Described(name=entry.name, value=_shown(entry.name, entry.value),
                      source=entry.source.value, type=entry.type.value,
                      read_only=entry.read_only,
                      synonyms=tuple((s.name, _shown(s.name, s.value), s.source.value)
                                     for s in entry.synonyms),
                      documentation=entry.documentation,
                      sensitive=hides_value(entry.name, entry.value))


def describe_broker(services: ConfigServices, names: list[str] | None) -> list[_Described]:
    """This broker's static config, read-only, as Kafka lists it: every declared key
    (:data:`~broker.config_keys.BROKER_CONFIG`), the ones server.properties sets as
    STATIC_BROKER_CONFIG and the others with their defaults (null where there is none) as
    DEFAULT_CONFIG, and the TLS and SASL keys it sets; a secret one (a password, a JAAS entry,
    a URL with credentials) with a null value and is_sensitive."""
    props, secret = services.config.properties, services.config.sensitive_keys
    known = set(props) | secret | set(BROKER_CONFIG)
    wanted = sorted(known) if names is None else [n for n in dict.fromkeys(names)
                                                  if n in known]
    out = []
    for name in wanted:
        key = BROKER_CONFIG.get(name)
        doc = None if key is None else key.doc + (f" (partctl: {key.note})" if key.note else "")
        if name in props or name in secret:
            source = ConfigSource.STATIC_BROKER_CONFIG.value
            value = None if name in secret else props[name]
        else:
            source = ConfigSource.DEFAULT_CONFIG.value
            value = None if key is None else key.default
        out.append(_Described(name=name, value=value, source=source, type=_type_id(name),
                              read_only=True, synonyms=((name, value, source),),
                              documentation=doc, sensitive=name in secret))
    return out


def _type_id(name: str) -> int:
    """Kafka's ConfigType id of a static key: PASSWORD (9) for a password or JAAS entry;
    0 (UNKNOWN) for a TLS or SASL key, which is not declared here."""
    if is_sensitive(name):
        return ConfigType.PASSWORD.value
    key = BROKER_CONFIG.get(name)
    return 0 if key is None else key.type.value


def _describe_one(services: ConfigServices, rtype: int, name: str, keys: list[str] | None
                  ) -> list[_Described]:
    """One resource's entries (blocking: a topic's config is read from the coordinator)."""
    if rtype == TOPIC:
        try:
            validate_topic(name)
        except ValueError as exc:
            raise _Refused(ErrorCode.invalid_topic_exception, str(exc)) from None
        if name not in services.metadata.snapshot.topics or services.admin is None:
            raise _Refused(ErrorCode.unknown_topic_or_partition)
        try:
            entries = services.admin.describe_topic_config(
                name, names=keys, broker_config=services.config.applied_properties())
        except UnknownTopic:
            raise _Refused(ErrorCode.unknown_topic_or_partition) from None
        return [_from_topic_entry(e) for e in entries]
    if rtype == BROKER:
        broker = _broker_id(services, name, empty_ok=True)
        static = [] if broker is None else describe_broker(services, keys)
        if services.admin is None:
            return static
        dynamic = services.admin.describe_broker_config(broker, names=keys)
        shown = {e.name for e in dynamic}
        return [e for e in static if e.name not in shown] + [_from_topic_entry(e)
                                                             for e in dynamic]
    if rtype == BROKER_LOGGER:
        raise _Refused(ErrorCode.invalid_request, "BROKER_LOGGER resources are not supported "
                                                  "by this broker")
    raise _Refused(ErrorCode.invalid_request, f"Unsupported resource type: {rtype}")


def _describe_all(services: ConfigServices, resources: list[tuple[int, str, list[str] | None]]
                  ) -> list[tuple[ErrorCode, str | None, list[_Described]]]:
    out: list[tuple[ErrorCode, str | None, list[_Described]]] = []
    for rtype, name, keys in resources:
        try:
            out.append((ErrorCode.none, None, _describe_one(services, rtype, name, keys)))
        except _Refused as refused:
            out.append((refused.error, refused.message, []))
        except CoordinatorError as exc:
            out.append((ErrorCode.unknown_server_error, str(exc), []))
    return out


def _denied(ctx: RequestContext, operation: Operation, rtype: int, name: str
            ) -> ErrorCode | None:
    """Kafka's check: the operation on the topic, or on the cluster for a broker resource."""
    if rtype == TOPIC:
        if not ctx.authorized(operation, ResourceType.TOPIC, name):
            return ErrorCode.topic_authorization_failed
    elif rtype == BROKER and not ctx.authorized(operation, ResourceType.CLUSTER):
        return ErrorCode.cluster_authorization_failed
    return None


def handle_describe_configs(ctx: RequestContext[ConfigServices],
                            request: DescribeConfigsRequest) -> Reply[DescribeConfigsResponse]:
    return _describe_configs(ctx, request)


async def _describe_configs(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    synonyms = bool(getattr(request, "include_synonyms", False))
    documentation = bool(getattr(request, "include_documentation", False))
    resources = [(r.resource_type, r.resource_name,
                  list(r.configuration_keys) if r.configuration_keys else None)
                 for r in request.resources]
    denied = {i: _denied(ctx, Operation.DESCRIBE_CONFIGS, rtype, name)
              for i, (rtype, name, _k) in enumerate(resources)}
    allowed = [r for i, r in enumerate(resources) if denied[i] is None]
    described = iter(await blocking(ctx, _describe_all, ctx.broker, allowed))
    answers = [next(described) if denied[i] is None else (denied[i], None, [])
               for i in range(len(resources))]
    module = response_module(DESCRIBE_CONFIGS, version)
    results = []
    for (rtype, name, _keys), (error, message, entries) in zip(resources, answers,
                                                              strict=True):
        configs = tuple(
            build(module.DescribeConfigsResourceResult, name=e.name, value=e.value,
                  read_only=e.read_only, is_default=e.source == ConfigSource.DEFAULT_CONFIG.value,
                  config_source=e.source, is_sensitive=e.sensitive,
                  synonyms=tuple(build(module.DescribeConfigsSynonym, name=n, value=v, source=s)
                                 for n, v, s in e.synonyms) if synonyms else (),
                  config_type=e.type, documentation=e.documentation if documentation else None)
            for e in entries)
        results.append(build(module.DescribeConfigsResult, error_code=error,
                             error_message=message, resource_type=rtype, resource_name=name,
                             configs=configs))
    return build(module.DescribeConfigsResponse, throttle_time=timedelta(0),
                 results=tuple(results))


# --- AlterConfigs and IncrementalAlterConfigs ---------------------------------------------------


def _preprocess(resources: list[Any], incremental: bool) -> dict[int, _Refused]:
    """Kafka's ConfigAdminManager.preprocess: per resource (by position), what is refused
    before anything is read."""
    refused: dict[int, _Refused] = {}
    seen = Counter((r.resource_type, r.resource_name) for r in resources)
    for i, r in enumerate(resources):
        if seen[(r.resource_type, r.resource_name)] > 1:
            refused[i] = _Refused(ErrorCode.invalid_request,
                                  "Each resource must appear at most once.")
            continue
        names = [c.name for c in r.configs]
        if len(names) != len(set(names)):
            refused[i] = _Refused(ErrorCode.invalid_request, "Error due to duplicate config keys")
            continue
        unset = [c.name for c in r.configs if c.value is None and not (
            incremental and c.config_operation == AlterOp.DELETE.value)]
        if unset:
            refused[i] = _Refused(ErrorCode.invalid_request,
                                  "Null value not supported for : " + ", ".join(unset))
            continue
        if incremental:
            ops = {op.value for op in AlterOp}
            bad = [c.config_operation for c in r.configs if c.config_operation not in ops]
            if bad:
                refused[i] = _Refused(ErrorCode.invalid_request,
                                      f"Unknown operations type {bad[0]}")
    return refused


def _alter_one(services: ConfigServices, resource: Any, incremental: bool,
               validate_only: bool) -> None:
    """One resource's change (blocking); raises _Refused."""
    rtype, name = resource.resource_type, resource.resource_name
    if rtype == BROKER:
        _alter_broker(services, _broker_id(services, name, empty_ok=True), resource,
                      incremental, validate_only)
        return
    if rtype == BROKER_LOGGER and incremental:
        raise _Refused(ErrorCode.invalid_request, "BROKER_LOGGER resources are not supported "
                                                  "by this broker")
    if rtype != TOPIC:
        raise _Refused(ErrorCode.invalid_request, f"Unknown resource type {rtype}")
    if not name:
        raise _Refused(ErrorCode.invalid_request, "Default topic resources are not allowed.")
    admin = services.admin
    if name not in services.metadata.snapshot.topics or admin is None:
        raise _Refused(ErrorCode.unknown_topic_or_partition,
                       f"The topic '{name}' does not exist.")
    broker_config = services.config.applied_properties()
    try:
        if incremental:
            ops = [IncrementalOp(name=c.name, op=AlterOp(c.config_operation), value=c.value)
                   for c in resource.configs]
            admin.alter_topic_config(name, ops=ops, validate_only=validate_only,
                                     broker_config=broker_config)
        else:
            admin.replace_topic_config(name, {c.name: c.value for c in resource.configs},
                                       validate_only=validate_only, broker_config=broker_config)
    except UnknownTopic:
        raise _Refused(ErrorCode.unknown_topic_or_partition,
                       f"The topic '{name}' does not exist.") from None
    except InvalidConfig as exc:
        raise _Refused(ErrorCode.invalid_config, str(exc)) from None
    except InvalidRequest as exc:
        raise _Refused(ErrorCode.invalid_request, str(exc)) from None


def _alter_broker(services: ConfigServices, broker: int | None, resource: Any,
                  incremental: bool, validate_only: bool) -> None:
    """A broker resource's dynamic config change (blocking); raises _Refused."""
    admin = services.admin
    if admin is None:
        raise _Refused(ErrorCode.invalid_request, "this broker has no coordinator session for "
                                                  "dynamic broker configs")
    try:
        if incremental:
            ops = [IncrementalOp(name=c.name, op=AlterOp(c.config_operation), value=c.value)
                   for c in resource.configs]
            admin.alter_broker_config(broker, ops, validate_only=validate_only)
        else:
            admin.replace_broker_config(broker, {c.name: c.value for c in resource.configs},
                                        validate_only=validate_only)
    except InvalidConfig as exc:
        raise _Refused(ErrorCode.invalid_config, str(exc)) from None
    except InvalidRequest as exc:
        raise _Refused(ErrorCode.invalid_request, str(exc)) from None


def _alter_all(services: ConfigServices, resources: list[Any], incremental: bool,
               validate_only: bool) -> list[_Refused | None]:
    refused = _preprocess(resources, incremental)
    out: list[_Refused | None] = []
    for i, resource in enumerate(resources):
        if i in refused:
            out.append(refused[i])
            continue
        try:
            _alter_one(services, resource, incremental, validate_only)
            out.append(None)
        except _Refused as exc:
            out.append(exc)
        except CoordinatorError as exc:
            out.append(_Refused(ErrorCode.unknown_server_error, str(exc)))
    return out


async def _alter(ctx: RequestContext, request: Any, incremental: bool) -> Any:
    resources = list(request.resources)
    denied = [_denied(ctx, Operation.ALTER_CONFIGS, r.resource_type, r.resource_name)
              for r in resources]
    altered = iter(await blocking(ctx, _alter_all, ctx.broker,
                                  [r for r, d in zip(resources, denied, strict=True) if d is None],
                                  incremental, bool(request.validate_only)))
    answers = [next(altered) if d is None else _Refused(d) for d in denied]
    key = INCREMENTAL_ALTER_CONFIGS if incremental else ALTER_CONFIGS
    module = response_module(key, ctx.api_version)
    results = tuple(
        build(module.AlterConfigsResourceResponse,
              error_code=a.error if a is not None else ErrorCode.none,
              error_message=a.message if a is not None else None,
              resource_type=r.resource_type, resource_name=r.resource_name)
        for r, a in zip(resources, answers, strict=True))
    response = (module.IncrementalAlterConfigsResponse if incremental
                else module.AlterConfigsResponse)
    return build(response, throttle_time=timedelta(0), responses=results)


def handle_alter_configs(ctx: RequestContext[ConfigServices],
                         request: AlterConfigsRequest) -> Reply[AlterConfigsResponse]:
    return _alter(ctx, request, incremental=False)


def handle_incremental_alter_configs(
        ctx: RequestContext[ConfigServices], request: IncrementalAlterConfigsRequest,
) -> Reply[IncrementalAlterConfigsResponse]:
    return _alter(ctx, request, incremental=True)


APIS = [
    Api(key=DESCRIBE_CONFIGS, name="DescribeConfigs", min_version=0, max_version=4,
        handle=handle_describe_configs),
    Api(key=ALTER_CONFIGS, name="AlterConfigs", min_version=0, max_version=2,
        handle=handle_alter_configs),
    Api(key=INCREMENTAL_ALTER_CONFIGS, name="IncrementalAlterConfigs", min_version=0,
        max_version=1, handle=handle_incremental_alter_configs),
]
