"""Followers fetching from leaders over Kafka's protocol: the network fetch endpoint.

A follower's :class:`~replication.fetcher.ReplicaFetcher` reaches each leader through a
:class:`~replication.protocol.FetchEndpoint`. In process that is the leader's replica manager;
between broker processes it is :class:`NetworkFetchEndpoint`, a client of the leader broker's
Kafka listener (:class:`~kafkaclient.connection.KafkaConnection`), as Kafka's ReplicaFetcherThread is a
client of its leader:

- Fetch with ``replica_id`` = this broker's id (a follower fetch: the leader reads up to its log
  end, moves this follower's fetch state, and may grow its ISR and HW), one request for all the
  partitions the follower has on that leader, waiting on the leader up to ``max_wait_ms`` for
  ``min_bytes`` (``replica.fetch.wait.max.ms``, ``replica.fetch.min.bytes``), each partition
  with its fetch offset, the follower's current leader epoch and, from version 12, the epoch of
  its last batch (``last_fetched_epoch``), which the leader answers with a diverging epoch
  when the logs diverged (KIP-595): the endpoint then says ``truncates_on_fetch`` and the
  fetcher skips the OffsetsForLeaderEpoch rounds a new follower otherwise goes through.
- OffsetsForLeaderEpoch (key 23) with ``replica_id`` = this broker's id, for those rounds:
  against a leader whose Fetch stops below version 12, and when a fetch answer shows the log
  diverged in another way.
- ListOffsets (key 2) EARLIEST_LOCAL (-4) with ``replica_id`` = this broker's id, when the
  leader answers a fetch of a tiered partition with OFFSET_MOVED_TO_TIERED_STORAGE (KIP-405):
  where its local log starts, and the epoch there.

The Fetch requests to one leader keep an incremental fetch session (KIP-227, from version 7,
as Kafka's followers do): the first is full, at epoch 0, and when the leader opens a session
the next ones name only the partitions added or whose position, epochs, log start or size
changed, and forget the ones dropped; the leader answers only the partitions with news, and
the others are left out of the result (nothing new). A session error (FETCH_SESSION_ID_NOT_FOUND,
INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR: the leader restarted or evicted it)
is answered by a full fetch at once; a failed connection makes the next fetch full.

Versions are the highest both sides serve, as ApiVersions tells on each new connection; Fetch
stops at 12 here (from 13 topics are named by id, which a follower would have to learn first).
Records come back as the leader's raw batches and go to the follower's log as they are
(:meth:`~replication.partition.Partition.append_as_follower` checks them and builds the
producer state). A failed connection is answered BROKER_NOT_AVAILABLE for every partition
asked: the fetcher backs off and the next call connects again.

:class:`NetworkTransport` is the live mapping a broker hands its replica manager: broker id ->
endpoint, the address read on every lookup (from the controller's requests: LeaderAndIsr's
live leaders, UpdateMetadata's live brokers) on ``inter.broker.listener.name``, so brokers that
come, go or move are followed; a broker it has no address for is absent.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import timedelta
from typing import Any

from broker.config import BrokerConfig
from broker.fetch_sessions import FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch
from coordinator.codecs import TopicPartition
from interbroker.errors import ErrorCode
from interbroker.requests import LiveBroker
from kafkaclient.connection import BrokerUnreachable, KafkaConnection
from kafkaclient.messages import build, request_schema
from kafkaclient.security.connector import Connector
from replication.protocol import (
    EpochAnswer,
    FetchEndpoint,
    FetchResult,
    OffsetAnswer,
    PartitionFetch,
)

__all__ = [
    "FETCH",
    "FIRST_FETCH_WITH_LAST_EPOCH",
    "OFFSET_FOR_LEADER_EPOCH",
    "NetworkFetchEndpoint",
    "NetworkTransport",
    "broker_fetch_transport",
    "live_broker_addresses",
]

log = logging.getLogger(__name__)

FETCH = 1
LIST_OFFSETS = 2
LIST_OFFSETS_VERSIONS = (4, 8)
"""From 4 (the current leader epoch) to 8 (the first in which Kafka's clients send -4)."""
EARLIEST_LOCAL_TIMESTAMP = -4
OFFSET_FOR_LEADER_EPOCH = 23
FETCH_VERSIONS = (4, 12)
"""What this client sends: 4 (Kafka's records v2, log start offsets) up to 12 (the last with
topic names)."""
FIRST_FETCH_WITH_LAST_EPOCH = 12
EPOCH_VERSIONS = (0, 4)
FIRST_EPOCH_WITH_REPLICA_ID = 3


FIRST_FETCH_WITH_SESSIONS = 7
_SESSION_ERRORS = frozenset({ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
                             ErrorCode.INVALID_FETCH_SESSION_EPOCH,
                             ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR})


_SESSION_LOST: dict[TopicPartition, FetchResult] = {}
"""What a fetch answered with a session error returns (compared by identity)."""


class FetchSessionState:
    """The follower's side of its fetch session with one leader (Kafka's FetchSessionHandler):
    the session id (0: none), the epoch of the next fetch (0: a full one, which opens a
    session) and the partitions as the session holds them."""

    __slots__ = ("epoch", "id", "sent")

    def __init__(self) -> None:
        self.id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self.sent: dict[TopicPartition, PartitionFetch] = {}

    @property
    def full(self) -> bool:
        """Whether the next fetch names every partition."""
        return self.id == INVALID_SESSION_ID or self.epoch == INITIAL_EPOCH

    def delta(self, wanted: Sequence[PartitionFetch],
              changed: Sequence[PartitionFetch] | None = None,
              ) -> tuple[list[PartitionFetch], list[TopicPartition]]:
        """What the next fetch sends: every partition of a full one; else the partitions
        added or changed, and those to forget. ``changed``: the caller's word that ``wanted``
        names the partitions the last fetch named and that only these may differ from what
        it asked (a follower's round on the partitions of the one before)."""
        if self.full:
            return list(wanted), []
        sent = self.sent
        if changed is not None:
            return [w for w in changed if (was := sent.get(w.tp)) is not w and was != w], []
        changed = [w for w in wanted if (was := sent.get(w.tp)) is not w and was != w]
        asked = {w.tp for w in wanted}
        return changed, [tp for tp in sent if tp not in asked]

    def answered(self, session_id: int, wanted: Sequence[PartitionFetch],
                 changed: Sequence[PartitionFetch] | None = None) -> None:
        """The leader answered the fetch built for ``wanted`` (and ``changed``, as
        :meth:`delta` took them) with ``session_id``."""
        if self.full:
            self.id = session_id
            self.epoch = next_epoch(INITIAL_EPOCH) if session_id != INVALID_SESSION_ID \
                else INITIAL_EPOCH
        else:
            self.epoch = next_epoch(self.epoch)
            if changed is not None:  # the others are as the session holds them
                self.sent.update((w.tp, w) for w in changed)
                return
        self.sent = {w.tp: w for w in wanted} if self.id != INVALID_SESSION_ID else {}

    def reset(self, *, gone: bool = False) -> None:
        """Start again with a full fetch, which closes the session unless it is ``gone``."""
        if gone:
            self.id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self.sent = {}


def _code(value: int) -> ErrorCode:
    try:
        return ErrorCode(int(value))
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


class NetworkFetchEndpoint:
    """Fetch and OffsetsForLeaderEpoch sent to leader ``leader_id`` at ``host``:``port`` on
    behalf of follower ``replica_id``."""

    def __init__(self, leader_id: int, host: str, port: int, *, replica_id: int,
                 max_wait_ms: int = 500, min_bytes: int = 1,
                 response_max_bytes: int = 10 * 1024 * 1024, request_timeout_ms: int = 30_000,
                 client_id: str | None = None, connector: Connector | None = None) -> None:
        self.leader_id = leader_id
        self.address = (host, port)
        self.replica_id = replica_id
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.response_max_bytes = response_max_bytes
        self._timeout = request_timeout_ms / 1000
        self.connection = KafkaConnection(
            host, port, client_id=client_id or f"broker-{replica_id}-fetcher-{leader_id}",
            timeout=self._timeout, connector=connector)
        self.session = FetchSessionState()
        self._session_lock = threading.Lock()
        self.session_errors = 0
        """Fetches the leader answered with a session error, for tests and metrics."""

    def __repr__(self) -> str:
        return f"NetworkFetchEndpoint(leader={self.leader_id}, {self.address[0]}:{self.address[1]})"

    def close(self) -> None:
        self.connection.close()

    # -- versions ------------------------------------------------------------------------------

    def fetch_version(self) -> int | None:
        """The Fetch version to send (None: the leader serves none this client speaks)."""
        return self.connection.version(FETCH, *FETCH_VERSIONS)

    @property
    def long_polls(self) -> bool:
        """Whether the leader holds a fetch until it has records (``replica.fetch.wait.max.ms``
        above 0): then an empty answer has waited already, and the next fetch goes at once."""
        return self.max_wait_ms > 0

    @property
    def truncates_on_fetch(self) -> bool:
        """Whether the leader answers ``last_fetched_epoch`` with a diverging epoch (its Fetch
        reaches version 12). False while it cannot be reached: the fetcher then falls back to
        the OffsetsForLeaderEpoch rounds, which wait for it as well."""
        try:
            version = self.fetch_version()
        except BrokerUnreachable:
            return False
        return version is not None and version >= FIRST_FETCH_WITH_LAST_EPOCH

    # -- Fetch ---------------------------------------------------------------------------------

    def fetch(self, tp: TopicPartition, offset: int, max_bytes: int, replica_id: int,
              leader_epoch: int) -> FetchResult:
        """One partition, without waiting on the leader (the protocol's single fetch)."""
        wanted = [PartitionFetch(tp=tp, fetch_offset=offset, leader_epoch=leader_epoch,
                                 last_fetched_epoch=-1, max_bytes=max_bytes)]
        return self._fetch(replica_id, wanted, 0, None)[tp]

    def fetch_partitions(self, replica_id: int, wanted: Sequence[PartitionFetch], *,
                         max_wait_ms: int | None = None,
                         changed: Sequence[PartitionFetch] | None = None,
                         ) -> dict[TopicPartition, FetchResult]:
        """One Fetch request for ``wanted``, in the fetch session: a :class:`FetchResult` for
        each partition the leader had news of (an error code for every one when the fetch
        failed); a partition left out had nothing new. ``changed``: see
        :meth:`FetchSessionState.delta` (an incremental fetch then costs what changed, not
        what the session holds)."""
        wait = self.max_wait_ms if max_wait_ms is None else max_wait_ms
        with self._session_lock:
            results = self._fetch(replica_id, wanted, wait, self.session, changed)
            if results is _SESSION_LOST:  # the leader lost the session: a full fetch now
                results = self._fetch(replica_id, wanted, wait, self.session)
        if results is _SESSION_LOST:
            return self._all(wanted, ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        return results

    def _fetch(self, replica_id: int, wanted: Sequence[PartitionFetch], wait: int,
               session: FetchSessionState | None,
               changed: Sequence[PartitionFetch] | None = None,
               ) -> dict[TopicPartition, FetchResult]:
        """One Fetch request, in ``session`` (None: without one, at the final epoch)."""
        try:
            version = self.fetch_version()
            if version is None:
                log.warning("leader %d at %s:%d serves no Fetch version in %d..%d",
                            self.leader_id, *self.address, *FETCH_VERSIONS)
                return self._all(wanted, ErrorCode.BROKER_NOT_AVAILABLE)
            if version < FIRST_FETCH_WITH_SESSIONS:
                session = None
            full = session is None or session.full
            request = self._fetch_request(version, replica_id, wanted, wait, session, changed)
            response = self.connection.call(request, self._timeout + wait / 1000)
        except BrokerUnreachable as exc:
            log.debug("fetch from leader %d failed: %s", self.leader_id, exc)
            if session is not None:
                session.reset()
            return self._all(wanted, ErrorCode.BROKER_NOT_AVAILABLE)
        error = _code(response.error_code)
        if error in _SESSION_ERRORS and session is not None:
            log.info("leader %d answered fetch session %d at epoch %d with %s: fetching in "
                     "full", self.leader_id, session.id, session.epoch, error.name)
            self.session_errors += 1
            session.reset(gone=error is ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
            return _SESSION_LOST
        if error is not ErrorCode.NONE:
            log.warning("leader %d answered Fetch with error %d", self.leader_id, int(error))
            if session is not None:
                session.reset()
            return self._all(wanted, error)
        if session is not None:
            session.answered(response.session_id, wanted, changed)
        results: dict[TopicPartition, FetchResult] = {}
        for topic in response.responses:
            for p in topic.partitions:
                results[TopicPartition(topic.topic, p.partition_index)] = self._result(p)
        if full:  # a full answer carries every partition asked
            for want in wanted:
                results.setdefault(want.tp, FetchResult(error=ErrorCode.UNKNOWN_SERVER_ERROR))
        return results

    def _fetch_request(self, version: int, replica_id: int, wanted: Sequence[PartitionFetch],
                       wait_ms: int, session: FetchSessionState | None,
                       changed: Sequence[PartitionFetch] | None = None) -> Any:
        cls = request_schema(FETCH, version)
        module = _module_of(cls)
        forget: list[TopicPartition] = []
        if session is None:
            session_id, epoch, send = INVALID_SESSION_ID, FINAL_EPOCH, wanted
        else:
            send, forget = session.delta(wanted, changed)
            session_id, epoch = session.id, session.epoch
        forgotten: dict[str, list[int]] = {}
        for tp in forget:
            forgotten.setdefault(tp.topic, []).append(tp.partition)
        topics: list[tuple[str, list[Any]]] = []
        for want in send:
            part = build(module.FetchPartition, partition=want.tp.partition,
                         current_leader_epoch=want.leader_epoch, fetch_offset=want.fetch_offset,
                         last_fetched_epoch=want.last_fetched_epoch,
                         log_start_offset=want.log_start_offset,
                         partition_max_bytes=want.max_bytes)
            if topics and topics[-1][0] == want.tp.topic:
                topics[-1][1].append(part)
            else:
                topics.append((want.tp.topic, [part]))
        return build(cls, replica_id=replica_id, max_wait=timedelta(milliseconds=wait_ms),
                     min_bytes=self.min_bytes, max_bytes=self.response_max_bytes,
                     isolation_level=0, session_id=session_id, session_epoch=epoch,
                     topics=tuple(build(module.FetchTopic, topic=name, partitions=tuple(parts))
                                  for name, parts in topics),
                     forgotten_topics_data=tuple(
                         build(module.ForgottenTopic, topic=name, partitions=tuple(parts))
                         for name, parts in forgotten.items()) if forgotten else (),
                     rack_id="")

    @staticmethod
    def _result(p: Any) -> FetchResult:
        diverging = getattr(p, "diverging_epoch", None)
        epoch, end = (-1, -1) if diverging is None else (diverging.epoch, diverging.end_offset)
        return FetchResult(
            error=_code(p.error_code), records=bytes(p.records or b""),
            high_watermark=p.high_watermark, log_start_offset=p.log_start_offset,
            # Kafka's Fetch carries no log end offset; an out-of-range answer is followed by
            # the epoch rounds, which need none.
            log_end_offset=-1, diverging_epoch=epoch, diverging_end_offset=end)

    @staticmethod
    def _all(wanted: Iterable[PartitionFetch], error: ErrorCode
             ) -> dict[TopicPartition, FetchResult]:
        return {w.tp: FetchResult(error=error) for w in wanted}

    # -- OffsetsForLeaderEpoch -----------------------------------------------------------------

    def offsets_for_leader_epoch(self, tp: TopicPartition, epoch: int,
                                 current_leader_epoch: int) -> EpochAnswer:
        try:
            version = self.connection.version(OFFSET_FOR_LEADER_EPOCH, *EPOCH_VERSIONS)
            if version is None:
                return EpochAnswer(error=ErrorCode.BROKER_NOT_AVAILABLE)
            cls = request_schema(OFFSET_FOR_LEADER_EPOCH, version)
            module = _module_of(cls)
            request = build(cls, replica_id=self.replica_id, topics=(build(
                module.OffsetForLeaderTopic, topic=tp.topic, partitions=(build(
                    module.OffsetForLeaderPartition, partition=tp.partition,
                    current_leader_epoch=current_leader_epoch, leader_epoch=epoch),)),))
            response = self.connection.call(request)
        except BrokerUnreachable as exc:
            log.debug("OffsetsForLeaderEpoch to leader %d failed: %s", self.leader_id, exc)
            return EpochAnswer(error=ErrorCode.BROKER_NOT_AVAILABLE)
        for topic in response.topics:
            for p in topic.partitions:
                if topic.topic == tp.topic and p.partition == tp.partition:
                    return EpochAnswer(error=_code(p.error_code), epoch=p.leader_epoch,
                                       end_offset=p.end_offset)
        return EpochAnswer(error=ErrorCode.UNKNOWN_SERVER_ERROR)

    # -- ListOffsets EARLIEST_LOCAL ------------------------------------------------------------

    def earliest_local_offset(self, tp: TopicPartition, current_leader_epoch: int
                              ) -> OffsetAnswer:
        """The leader's local log start of ``tp`` and the epoch there (ListOffsets -4)."""
        try:
            version = self.connection.version(LIST_OFFSETS, *LIST_OFFSETS_VERSIONS)
            if version is None:
                return OffsetAnswer(error=ErrorCode.BROKER_NOT_AVAILABLE)
            cls = request_schema(LIST_OFFSETS, version)
            module = _module_of(cls)
            request = build(cls, replica_id=self.replica_id, isolation_level=0, topics=(build(
                module.ListOffsetsTopic, name=tp.topic, partitions=(build(
                    module.ListOffsetsPartition, partition_index=tp.partition,
                    current_leader_epoch=current_leader_epoch,
                    timestamp=EARLIEST_LOCAL_TIMESTAMP),)),))
            response = self.connection.call(request)
        except BrokerUnreachable as exc:
            log.debug("ListOffsets to leader %d failed: %s", self.leader_id, exc)
            return OffsetAnswer(error=ErrorCode.BROKER_NOT_AVAILABLE)
        for topic in response.topics:
            for p in topic.partitions:
                if topic.name == tp.topic and p.partition_index == tp.partition:
                    return OffsetAnswer(error=_code(p.error_code), offset=p.offset,
                                        leader_epoch=p.leader_epoch)
        return OffsetAnswer(error=ErrorCode.UNKNOWN_SERVER_ERROR)


def _module_of(cls: type) -> Any:
    return sys.modules[cls.__module__]


def live_broker_addresses(
    sources: Sequence[Callable[[], Mapping[int, LiveBroker]]], listener: str,
) -> Callable[[int], tuple[str, int] | None]:
    """Broker id -> (host, port) of its ``listener`` endpoint, from the first of ``sources``
    (each a live view of broker registrations as the controller sent them) that knows it."""

    def address(broker_id: int) -> tuple[str, int] | None:
        for source in sources:
            broker = source().get(broker_id)
            if broker is None:
                continue
            for endpoint in broker.endpoints:
                if endpoint.listener == listener:
                    return endpoint.host, endpoint.port
        return None

    return address


class NetworkTransport(Mapping[int, FetchEndpoint]):
    """Broker id -> :class:`NetworkFetchEndpoint`, over the brokers ``addresses`` knows.

    The address is looked up on every access: an endpoint whose broker moved is closed and a
    new one made, and a broker with no address is absent (the fetcher skips its partitions
    until it has one). ``settings`` go to each endpoint (``max_wait_ms``, ``min_bytes``,
    ``response_max_bytes``, ``request_timeout_ms``)."""

    def __init__(self, replica_id: int, addresses: Callable[[int], tuple[str, int] | None],
                 **settings: Any) -> None:
        self.replica_id = replica_id
        self._addresses = addresses
        self._settings = settings
        self._endpoints: dict[int, NetworkFetchEndpoint] = {}
        self._lock = threading.Lock()
        self._closed = False

    def __getitem__(self, broker_id: int) -> NetworkFetchEndpoint:
        if broker_id == self.replica_id:
            raise KeyError(broker_id)
        address = self._addresses(broker_id)
        with self._lock:
            endpoint = self._endpoints.get(broker_id)
            if address is None or self._closed:
                raise KeyError(broker_id)
            if endpoint is not None and endpoint.address == address:
                return endpoint
            if endpoint is not None:
                endpoint.close()
            endpoint = self._endpoints[broker_id] = NetworkFetchEndpoint(
                broker_id, *address, replica_id=self.replica_id, **self._settings)
            return endpoint

    def __iter__(self) -> Iterator[int]:
        with self._lock:
            return iter(list(self._endpoints))

    def __len__(self) -> int:
        return len(self._endpoints)

    def close(self) -> None:
        """Close every connection (the broker is stopping); later lookups find nothing."""
        with self._lock:
            self._closed = True
            endpoints = list(self._endpoints.values())
            self._endpoints.clear()
        for endpoint in endpoints:
            endpoint.close()


def broker_fetch_transport(config: BrokerConfig,
                           live: Sequence[Callable[[], Mapping[int, LiveBroker]]],
                           ) -> NetworkTransport:
    """A broker's transport: its followers reach each leader's ``inter.broker.listener.name``
    endpoint, found in ``live`` (views of the live brokers, first match wins), waiting on the
    leader up to ``replica.fetch.wait.max.ms``, each request bounded by
    ``request.timeout.ms``."""
    addresses = live_broker_addresses(live, config.inter_broker_listener_name)
    security = config.inter_broker_security
    return NetworkTransport(config.broker_id, addresses,
                            max_wait_ms=config.replica_fetch_wait_max_ms,
                            request_timeout_ms=config.request_timeout_ms,
                            connector=Connector(security) if security.protocol != "PLAINTEXT"
                            else None)
