"""What this broker knows of the cluster, from the controller's UpdateMetadata requests.

Kafka's ZooKeeper-mode brokers answer clients' Metadata requests from a cache the controller
fills (``ZkMetadataCache``): live brokers with their endpoints, every partition's leader, leader
epoch, replicas, ISR and offline replicas, and the controller's id. This is that cache. Requests
arrive on the controller's channel (another thread); the event loop reads. Each update builds a
new immutable :class:`MetadataSnapshot` and swaps it in, so a reader takes one snapshot and sees
one consistent view without a lock.

:class:`ObservingHandler` sits between the controller's channel and the replica manager's
handler: it passes every request on and, when the replica manager took it, applies an
UpdateMetadata to the cache and reports the change (the broker wakes parked fetches, whose
leaders may have moved).

Topic ids (KIP-516) are kept beside the partitions: the id of each topic the cache holds, as
Kafka keeps it in ``/brokers/topics/<t>``. The controller's UpdateMetadata carries them (from
version 7, as the controller's view has them); a topic it names without one (an older topic
whose node has none) is read from its topic node the first time a request needs it (:mod:`broker.apis.topic_ids`) and
recorded with :meth:`MetadataCache.set_topic_ids`. An id
lives as long as its topic stays in the cache: a topic that leaves it (deleted: the delete
marker) loses its id, so a topic created again under the same name is looked up afresh.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from broker.controller_channel import topic_uuid
from coordinator.codecs import TopicPartition
from coordinator.skipped import SkippedTopics
from interbroker.channel import BrokerResponse, RequestHandler
from interbroker.requests import (
    LeaderAndIsrRequest,
    LiveBroker,
    StopReplicaRequest,
    UpdateMetadataPartition,
    UpdateMetadataRequest,
)

__all__ = ["NO_TOPIC_ID", "MetadataCache", "MetadataSnapshot", "ObservingHandler"]

log = logging.getLogger(__name__)

LEADER_DURING_DELETE = -2

NO_TOPIC_ID = uuid.UUID(int=0)
"""The id of a topic whose node has none (written by a tool older than KIP-516): recorded as
such, so that it is not looked up again, and answered as Kafka answers it (the zero id)."""
"""UpdateMetadata's leader for a partition of a topic being deleted: forget it."""

_EMPTY: Mapping = MappingProxyType({})


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataSnapshot:
    """The cluster as of one UpdateMetadata: -1 as the controller until the first."""

    controller_id: int = -1
    brokers: Mapping[int, LiveBroker] = field(default_factory=lambda: _EMPTY)
    topics: Mapping[str, Mapping[int, UpdateMetadataPartition]] = field(
        default_factory=lambda: _EMPTY)
    topic_ids: Mapping[str, uuid.UUID] = field(default_factory=lambda: _EMPTY)
    """The ids known of the topics held (a topic may not have its id yet)."""
    topic_names: Mapping[uuid.UUID, str] = field(default_factory=lambda: _EMPTY)
    """The same, by id."""

    def partition(self, tp: TopicPartition) -> UpdateMetadataPartition | None:
        partitions = self.topics.get(tp.topic)
        return partitions.get(tp.partition) if partitions is not None else None

    def contains(self, tp: TopicPartition) -> bool:
        return self.partition(tp) is not None


class MetadataCache:
    """The latest :class:`MetadataSnapshot`; updates are serialised, reads take
    :attr:`snapshot`."""

    def __init__(self, broker_id: int | None = None) -> None:
        self._snapshot = MetadataSnapshot()
        self._lock = threading.Lock()
        self._skipped = SkippedTopics(
            log, "metadata cache" if broker_id is None else f"broker {broker_id}")

    @property
    def snapshot(self) -> MetadataSnapshot:
        return self._snapshot

    def update(self, request: UpdateMetadataRequest) -> MetadataSnapshot:
        """Apply ``request``: the live brokers are replaced, the partitions it names updated
        (or, with the delete marker, dropped); partitions it does not name are kept, as Kafka's
        controller sends only what changed. A topic whose name Kafka forbids is left out (with
        one warning): no client is told of it."""
        with self._lock:
            old = self._snapshot
            topics = dict(old.topics)
            changed: dict[str, dict[int, UpdateMetadataPartition]] = {}
            illegal = {t for t in {e.topic for e in request.partitions}
                       if t not in topics and not self._skipped.legal(t)}
            for entry in request.partitions:
                if illegal and entry.topic in illegal:
                    continue
                partitions = changed.get(entry.topic)
                if partitions is None:
                    partitions = changed[entry.topic] = dict(topics.get(entry.topic, {}))
                if entry.leader == LEADER_DURING_DELETE:
                    partitions.pop(entry.partition, None)
                else:
                    partitions[entry.partition] = entry
            for topic, partitions in changed.items():
                if partitions:
                    topics[topic] = MappingProxyType(partitions)
                else:
                    topics.pop(topic, None)
            ids = old.topic_ids
            if any(t not in topics for t in ids):
                ids = {t: i for t, i in ids.items() if t in topics}
            sent = {t: i for t, text in request.topic_ids.items()
                    if t in topics and (i := topic_uuid(text)) != NO_TOPIC_ID
                    and ids.get(t) != i}
            if sent:  # the controller's ids (over the network) win over ones read before
                ids = {**ids, **sent}
            self._snapshot = _with_ids(MetadataSnapshot(
                controller_id=request.controller_id,
                brokers=MappingProxyType({b.id: b for b in request.live_brokers}),
                topics=MappingProxyType(topics),
            ), ids, old)
            return self._snapshot

    def set_topic_ids(self, ids: Mapping[str, uuid.UUID]) -> MetadataSnapshot:
        """Record topic ids read from the topic nodes, for the topics the cache holds and has
        no id for yet (a topic deleted meanwhile is not given the id it had)."""
        with self._lock:
            old = self._snapshot
            new = {t: i for t, i in ids.items() if t in old.topics and t not in old.topic_ids}
            if new:
                self._snapshot = _with_ids(old, {**old.topic_ids, **new})
            return self._snapshot


def _with_ids(snapshot: MetadataSnapshot, ids: Mapping[str, uuid.UUID],
              unchanged_from: MetadataSnapshot | None = None) -> MetadataSnapshot:
    if unchanged_from is not None and ids is unchanged_from.topic_ids:
        names = unchanged_from.topic_names
    else:
        ids = MappingProxyType(dict(ids))
        names = MappingProxyType({i: t for t, i in ids.items() if i != NO_TOPIC_ID})
    return MetadataSnapshot(controller_id=snapshot.controller_id, brokers=snapshot.brokers,
                            topics=snapshot.topics, topic_ids=ids, topic_names=names)


class ObservingHandler:
    """A :class:`~interbroker.channel.RequestHandler` that passes requests to ``inner`` and
    keeps ``cache`` in step with the UpdateMetadata requests ``inner`` accepts; ``on_change``
    is called (on the controller's thread) after every request."""

    __slots__ = ("_cache", "_inner", "_on_change")

    def __init__(self, inner: RequestHandler, cache: MetadataCache,
                 on_change: Callable[[], None]) -> None:
        self._inner = inner
        self._cache = cache
        self._on_change = on_change

    def handle_leader_and_isr(self, request: LeaderAndIsrRequest) -> BrokerResponse:
        response = self._inner.handle_leader_and_isr(request)
        self._on_change()
        return response

    def handle_update_metadata(self, request: UpdateMetadataRequest) -> BrokerResponse:
        response = self._inner.handle_update_metadata(request)
        if not response.error:
            self._cache.update(request)
        self._on_change()
        return response

    def handle_stop_replica(self, request: StopReplicaRequest) -> BrokerResponse:
        response = self._inner.handle_stop_replica(request)
        self._on_change()
        return response
