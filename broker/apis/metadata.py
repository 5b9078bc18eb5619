"""Metadata (key 3): brokers, topics and partitions, from the broker's metadata cache.

Answered as a ZooKeeper-mode Kafka broker answers it (``ZkMetadataCache``): the live brokers
that have an endpoint on the listener the request came in on; per partition the leader (or
LEADER_NOT_AVAILABLE with leader -1 when it is not live on that listener; LISTENER_NOT_FOUND
from version 6 when it is live without that listener), the leader epoch, replicas, ISR and
offline replicas (version 0 leaves out replicas not live on the listener and says
REPLICA_NOT_AVAILABLE); the controller's id and the cluster id. A controller that is no broker
(``partctl controller start``) is named by this broker's id instead: clients send the admin
requests to the controller they are told of, and a broker takes them through the admin path, as
KRaft brokers name a live broker as controller and forward.

A topic the cache does not know is UNKNOWN_TOPIC_OR_PARTITION, unless the request allows
creating it (always before version 4), ``auto.create.topics.enable`` is on and the name is
legal: then the topic is created through the admin path with ``num.partitions`` and
``default.replication.factor`` and answered LEADER_NOT_AVAILABLE (the client asks again once
the controller has elected its leaders), or with the creation's error. An illegal name is
INVALID_TOPIC_EXCEPTION.

Topic ids (KIP-516): from version 10 every topic answered carries its id, as Kafka keeps it in
``/brokers/topics/<t>`` (looked up for the metadata cache the first time it is asked for:
:mod:`broker.apis.topic_ids`), the zero id for a topic not found. From version 12 a topic may
be asked for by id: an id the cache does not know is UNKNOWN_TOPIC_ID, answered without a name.
Before version 12 an id given beside a name is INVALID_REQUEST, and a topic without a name
costs the connection (Kafka refuses the request; its answer would need the name).
"""

from __future__ import annotations

import uuid
import weakref
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.apis.base import CLOSE_CONNECTION, Api, Reply, RequestContext
from broker.apis.cluster import NOT_ASKED, cluster_operations
from broker.apis.metadata_encoding import (
    TopicCache,
    empty_partitions,
    encode_topic,
    live_on,
    shape,
)
from broker.apis.metadata_encoding import encode_response as encode_body
from broker.apis.topic_ids import ZERO, ensure_topic_ids
from broker.metadata_cache import MetadataCache, MetadataSnapshot
from broker.security.acls import Operation, ResourceType
from broker.wire import EncodedBody, response_module
from coordinator.layout import validate_topic
from interbroker.requests import LiveBroker
from kafkaclient.messages import build

if TYPE_CHECKING:
    import kio.schema.metadata.v0
    import kio.schema.metadata.v1
    import kio.schema.metadata.v2
    import kio.schema.metadata.v3
    from typing_extensions import TypeIs

    from broker.apis.messages import MetadataRequest, MetadataResponse
    from broker.apis.services import MetadataServices

__all__ = ["APIS", "API_KEY"]

API_KEY = 3
NO_LEADER = -1
FIRST_VERSION_WITH_IDS = 10
INTERNAL_TOPIC = "__consumer_offsets"
"""Marked internal, as Kafka marks it (clients leave it out of pattern subscriptions)."""
_TOPIC_CACHES: weakref.WeakKeyDictionary[MetadataCache, TopicCache] = (
    weakref.WeakKeyDictionary())


def _endpoint(broker: LiveBroker | None, listener: str) -> tuple[str, int] | None:
    if broker is None:
        return None
    for endpoint in broker.endpoints:
        if endpoint.listener == listener:
            return endpoint.host, endpoint.port
    return None


def _topic(module: Any, name: str | None, error: ErrorCode, partitions: tuple[Any, ...] = (),
           topic_id: uuid.UUID | None = None, operations: int = NOT_ASKED) -> Any:
    return build(module.MetadataResponseTopic, error_code=error, name=name, topic_id=topic_id,
                 is_internal=name == INTERNAL_TOPIC, partitions=partitions,
                 topic_authorized_operations=operations)


def _requested(request: Any, version: int) -> list[str] | None:
    """The topic names asked for, or None for every topic (an empty list in version 0)."""
    if request.topics is None or (version == 0 and not request.topics):
        return None
    names: list[str] = []
    for topic in request.topics:
        if topic.name is not None and topic.name not in names:
            names.append(topic.name)
    return names


def _requested_ids(request: Any) -> list[uuid.UUID]:
    """The topic ids asked for (version 12): topics named by id rather than by name."""
    ids: list[uuid.UUID] = []
    for topic in request.topics or ():
        topic_id = getattr(topic, "topic_id", None)
        if topic.name is None and topic_id not in (None, ZERO) and topic_id not in ids:
            ids.append(topic_id)
    return ids


def _bad_ids(request: Any, version: int) -> bool:
    """Kafka's refusal before version 12: a topic without a name, or one given by id."""
    return version < 12 and any(
        t.name is None or getattr(t, "topic_id", None) not in (None, ZERO)
        for t in request.topics or ())


def _before_auto_creation(request: MetadataRequest, version: int) -> TypeIs[
        kio.schema.metadata.v0.MetadataRequest | kio.schema.metadata.v1.MetadataRequest
        | kio.schema.metadata.v2.MetadataRequest | kio.schema.metadata.v3.MetadataRequest]:
    """Whether the request (of ``version``) predates allow_auto_topic_creation (v4), when a
    request allowed it always."""
    return version < 4


def _legal(name: str) -> bool:
    try:
        validate_topic(name)
    except ValueError:
        return False
    return True


def handle(ctx: RequestContext[MetadataServices],
           request: MetadataRequest) -> Reply[MetadataResponse | EncodedBody]:
    broker = ctx.broker
    version = ctx.api_version
    if _bad_ids(request, version):
        if any(t.name is None for t in request.topics or ()):
            return CLOSE_CONNECTION  # no name to answer it under in these versions
        return _refused(ctx, request)
    snap = broker.metadata.snapshot
    names = _requested(request, version)
    ids = _requested_ids(request) if version >= 12 else []
    denied = set() if names is None else {
        n for n in names if not ctx.authorized(Operation.DESCRIBE, ResourceType.TOPIC, n)}
    unknown = [] if names is None else [n for n in names if n not in snap.topics
                                         and n not in denied]
    allowed = _before_auto_creation(request, version) or request.allow_auto_topic_creation
    creatable = [n for n in unknown if allowed and broker.config.auto_create_topics_enable
                 and broker.create_topic is not None and _legal(n)]
    if creatable and not ctx.authorized(Operation.CREATE, ResourceType.CLUSTER):
        # Kafka: auto-creation needs Create on the cluster or on the topic
        refused = {n for n in creatable
                   if not ctx.authorized(Operation.CREATE, ResourceType.TOPIC, n)}
        denied |= refused
        creatable = [n for n in creatable if n not in refused]
    errors = dict.fromkeys(denied, ErrorCode.topic_authorization_failed)
    if not creatable and not _ids_missing(snap, names, ids, version):
        return _response(ctx, request, snap, names, errors, ids)
    return _after_creating(ctx, request, names, creatable, ids, errors)


def _ids_missing(snap: MetadataSnapshot, names: list[str] | None, ids: list[uuid.UUID],
                 version: int) -> bool:
    """Whether a topic answered (version 10+) or asked for by id has no id in the cache yet."""
    if version < FIRST_VERSION_WITH_IDS:
        return False
    if any(i not in snap.topic_names for i in ids):
        return True
    answered = snap.topics if names is None else [n for n in names if n in snap.topics]
    return any(n not in snap.topic_ids for n in answered)


async def _after_creating(ctx: RequestContext, request: Any, names: list[str] | None,
                          creatable: list[str], ids: list[uuid.UUID],
                          errors: dict[str, ErrorCode]) -> Any:
    broker = ctx.broker
    config = broker.config
    create = broker.create_topic
    for name in creatable:
        assert create is not None
        errors[name] = await broker.loop.run_in_executor(
            None, create, name, config.num_partitions, config.default_replication_factor)
    snap = broker.metadata.snapshot
    if _ids_missing(snap, names, ids, ctx.api_version):
        snap = await ensure_topic_ids(broker, None if ids else names)
    return _response(ctx, request, snap, names, errors, ids)


def _refused(ctx: RequestContext, request: Any) -> Any:
    module = response_module(API_KEY, ctx.api_version)
    topics = tuple(_topic(module, t.name, ErrorCode.invalid_request,
                          topic_id=getattr(t, "topic_id", None)) for t in request.topics)
    snap = ctx.broker.metadata.snapshot
    return build(module.MetadataResponse, throttle_time=timedelta(0), brokers=(),
                 cluster_id=ctx.broker.cluster_id, controller_id=snap.controller_id,
                 topics=topics)


def _response(ctx: RequestContext, request: Any, snap: MetadataSnapshot,
              names: list[str] | None,
              created: dict[str, ErrorCode], ids: Sequence[uuid.UUID] = ()) -> EncodedBody:
    """The answer, encoded by :mod:`broker.apis.metadata_encoding` (kio's bytes, without
    building kio objects); a topic's partitions are encoded once per metadata change."""
    version = ctx.api_version
    listener = ctx.listener
    s = shape(version)
    if ids:
        ids = [i for i in ids if i not in snap.topic_names or ctx.authorized(
            Operation.DESCRIBE, ResourceType.TOPIC, snap.topic_names[i])]
    if ids:  # asked by id (version 12): the names known, then the ids unknown
        names = list(dict.fromkeys([*(names or []),
                                    *(snap.topic_names[i] for i in ids if i in snap.topic_names)]))
    brokers = []
    for broker_id, broker in sorted(snap.brokers.items()):
        endpoint = _endpoint(broker, listener)
        if endpoint is not None:
            brokers.append((broker_id, endpoint[0], endpoint[1], broker.rack))
    live = live_on(snap.brokers, listener)
    cache = _topic_cache(ctx.broker.metadata)
    topics = []
    topic_operations = getattr(request, "include_topic_authorized_operations", False)
    if names is None:  # every topic: those the principal may Describe
        names = [n for n in sorted(snap.topics)
                 if ctx.authorized(Operation.DESCRIBE, ResourceType.TOPIC, n)]
    empty = empty_partitions(s)
    for name in names:
        if created.get(name) is ErrorCode.topic_authorization_failed:
            error, partitions = ErrorCode.topic_authorization_failed, empty
        elif name in snap.topics:
            error = ErrorCode.none
            partitions = cache.partitions(name, snap.topics[name], snap.brokers, live,
                                          listener, s, len(snap.topics))
        elif name in created:
            error, partitions = created[name], empty
        elif not _legal(name):
            error, partitions = ErrorCode.invalid_topic_exception, empty
        else:
            error, partitions = ErrorCode.unknown_topic_or_partition, empty
        operations = (ctx.authorized_operations(ResourceType.TOPIC, name)
                      if error is ErrorCode.none and topic_operations else NOT_ASKED)
        topics.append(encode_topic(s, error, name, snap.topic_ids.get(name)
                                   if error is ErrorCode.none else None,
                                   name == INTERNAL_TOPIC, partitions, operations))
    topics += [encode_topic(s, ErrorCode.unknown_topic_id, None, i, False, empty, NOT_ASKED)
               for i in ids if i not in snap.topic_names]
    cluster_ops = (cluster_operations(ctx)
                   if getattr(request, "include_cluster_authorized_operations", False)
                   else NOT_ASKED)
    return EncodedBody(s.header_class, encode_body(
        s, brokers, ctx.broker.cluster_id, _controller_id(ctx, snap), topics, cluster_ops))


def _topic_cache(metadata: MetadataCache) -> TopicCache:
    """The encoded topics kept for one broker's metadata cache."""
    cache = _TOPIC_CACHES.get(metadata)
    if cache is None:
        cache = _TOPIC_CACHES[metadata] = TopicCache()
    return cache


def _controller_id(ctx: RequestContext, snap: MetadataSnapshot) -> int:
    """The controller's id, or this broker's when the controller is not a broker."""
    me = ctx.broker.broker_id
    if snap.controller_id >= 0 and snap.controller_id not in snap.brokers and me in snap.brokers:
        return me
    return snap.controller_id


APIS = [Api(key=API_KEY, name="Metadata", min_version=0, max_version=12, handle=handle)]
