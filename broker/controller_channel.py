"""The controller's requests over Kafka's protocol: the network a broker process plugs into.

:class:`KafkaNetwork` is the :class:`~interbroker.channel.BrokerNetwork` of broker (and
controller-only) processes. Its channels (:class:`NetworkChannel`, one per controller candidate)
work as Kafka's ControllerChannelManager does: one connection and one queue per broker, a
sender thread per broker sending the requests in the order queued (a few under way at once,
where Kafka sends one at a time: :class:`_BrokerQueue` says why), to the endpoint of
the inter-broker listener (``inter.broker.listener.name``) in the broker's registration. A
broker that cannot be reached is retried, with backoff, until it answers or the controller
drops it (a broker gone, or registered again with another epoch: its queue goes with it, the new
registration gets a queue of its own). The answers' error codes come back as they are, in a
:class:`~interbroker.channel.BrokerResponse` (the contract's :class:`~interbroker.errors.ErrorCode`
is Kafka's numbers), so the controller acts on them as on in-process answers.

Versions are those Kafka 3.9's ZooKeeper-mode controller sends: LeaderAndIsr v7, UpdateMetadata
v8 and StopReplica v4 (``isKRaftController`` false); ControlledShutdown v3. The codecs are kio's
(``kio==0.6.2``); this module turns the controller's request values into kio's classes and
reads the answers, :mod:`broker.apis.controller_requests` does the reverse on the broker. The
two large requests, LeaderAndIsr and UpdateMetadata, are sent as :mod:`broker.controller_codec`
writes them: kio's bytes, ten times faster.

A broker asks the active controller for a controlled shutdown through
:meth:`KafkaNetwork.controlled_shutdown`: the controller's endpoint is in its broker registration
(``/brokers/ids/<id>``), or, for a controller-only process, in its controller registration
(``/partctl/controllers/<id>``, see :func:`controller_endpoint`).

The handler the participant attaches (the broker's own, behind its fence) is kept here too: the
broker's API handlers for keys 4, 5 and 6 hand it the decoded requests, one at a time and in the
order they arrived, on :attr:`KafkaNetwork.executor` (a single thread: the handler may take a
lock, the event loop must not wait for it).
"""

from __future__ import annotations

import base64
import binascii
import collections
import io
import logging
import queue
import socket
import struct
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kio.serial import entity_writer

from broker.controller_codec import encode_leader_and_isr_v7, encode_update_metadata_v8
from broker.wire import request_class
from coordinator import layout
from coordinator.codecs import BrokerInfo, TopicPartition
from coordinator.errors import NoNode
from coordinator.metadata import MetadataClient
from elections.controller_election import NotController
from interbroker.channel import AttachedHere, BrokerResponse, ResponseCallback, Target
from interbroker.errors import BrokerNotAvailable, ErrorCode, StaleBrokerEpoch
from interbroker.requests import (
    BrokerRequest,
    Endpoint,
    LeaderAndIsrRequest,
    LiveBroker,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from kafkaclient.frames import SIZE, receive_frame
from kafkaclient.messages import build, request_module, response_schema
from kafkaclient.security.connector import Connector
from kafkaclient.wire_check import read_checked

__all__ = [
    "CONTROLLED_SHUTDOWN",
    "CONTROLLER_API_KEYS",
    "LEADER_AND_ISR",
    "STOP_REPLICA",
    "UPDATE_METADATA",
    "KafkaNetwork",
    "NetworkChannel",
    "controller_endpoint",
    "decode_response",
    "encode_body",
    "encode_request",
    "request_module",
    "security_protocol_id",
    "topic_uuid",
]

log = logging.getLogger(__name__)

LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA, CONTROLLED_SHUTDOWN = 4, 5, 6, 7
CONTROLLER_API_KEYS = frozenset({LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA,
                                 CONTROLLED_SHUTDOWN, 18})
"""What a broker serves before its first metadata is in: the controller's requests, a broker's
controlled shutdown, and ApiVersions (18)."""
SEND_VERSIONS = {LEADER_AND_ISR: 7, UPDATE_METADATA: 8, STOP_REPLICA: 4, CONTROLLED_SHUTDOWN: 3}
"""The versions sent (Kafka 3.9's ZooKeeper-mode controller's, and its brokers')."""

SECURITY_PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
"""Kafka's SecurityProtocol ids, as UpdateMetadata carries them."""

ZERO_UUID = uuid.UUID(int=0)

MAX_IN_FLIGHT = 4
"""Requests sent to one broker before the first of them is answered (:class:`_BrokerQueue`);
Kafka's controller sends one at a time. Well under the requests a broker reads ahead on a
connection (:data:`broker.server.MAX_IN_FLIGHT`), so it never stops reading while the
controller is still sending."""
IN_FLIGHT_BYTES = 32 << 20
"""Beyond the first, no request is sent while those under way add up to this (an
UpdateMetadata of a million partitions is tens of megabytes)."""


# --- values <-> kio ---------------------------------------------------------------------------


def _name(code: int) -> str:
    """A code's name for a message (``UNKNOWN_ERROR_<code>`` for one the contract lacks)."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"UNKNOWN_ERROR_{code}"


def topic_uuid(text: str | None) -> uuid.UUID:
    """A topic id in Kafka's text form (URL-safe base64 of 16 bytes) as the wire's UUID; the
    zero UUID for none (Kafka's "no id")."""
    if not text:
        return ZERO_UUID
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return ZERO_UUID
    return uuid.UUID(bytes=raw) if len(raw) == 16 else ZERO_UUID


def _topic_id_bytes(text: str | None) -> bytes:
    return topic_uuid(text).bytes


def security_protocol_id(name: str) -> int:
    return SECURITY_PROTOCOLS.get(name, 0)


def _endpoint(broker: LiveBroker, listener: str) -> Endpoint | None:
    return next((e for e in broker.endpoints if e.listener == listener), None)


def _by_topic(parts: Sequence[Any]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for p in parts:
        out.setdefault(p.topic, []).append(p)
    return out


def encode_request(request: BrokerRequest, listener: str, version: int | None = None) -> Any:
    """The kio request for one of the controller's request values, at ``version`` (default:
    the version sent). ``listener`` names the endpoint a LeaderAndIsr's live leaders are
    given by (the inter-broker listener)."""
    match request:
        case LeaderAndIsrRequest():
            return _encode_leader_and_isr(request, listener, version
                                          or SEND_VERSIONS[LEADER_AND_ISR])
        case UpdateMetadataRequest():
            return _encode_update_metadata(request, version or SEND_VERSIONS[UPDATE_METADATA])
        case StopReplicaRequest():
            return _encode_stop_replica(request, version or SEND_VERSIONS[STOP_REPLICA])
    raise TypeError(f"not a controller request: {request!r}")


def _encode_leader_and_isr(request: LeaderAndIsrRequest, listener: str, version: int) -> Any:
    m = request_module(LEADER_AND_ISR, version)
    topics = tuple(
        build(m.LeaderAndIsrTopicState, topic_name=topic,
              topic_id=topic_uuid(request.topic_ids.get(topic)),
              partition_states=tuple(build(
                  m.LeaderAndIsrPartitionState, partition_index=p.partition,
                  controller_epoch=p.controller_epoch, leader=p.leader,
                  leader_epoch=p.leader_epoch, isr=p.isr, partition_epoch=p.partition_epoch,
                  replicas=p.replicas, adding_replicas=p.adding_replicas,
                  removing_replicas=p.removing_replicas, is_new=p.is_new) for p in parts))
        for topic, parts in _by_topic(request.partitions).items())
    leaders = []
    for b in request.live_leaders:
        endpoint = _endpoint(b, listener)
        if endpoint is not None:
            leaders.append(build(m.LeaderAndIsrLiveLeader, broker_id=b.id,
                                 host_name=endpoint.host, port=endpoint.port))
    return build(m.LeaderAndIsrRequest, controller_id=request.controller_id,
                 is_k_raft_controller=False, controller_epoch=request.controller_epoch,
                 broker_epoch=request.broker_epoch, type_=0, topic_states=topics,
                 live_leaders=tuple(leaders))


def _encode_update_metadata(request: UpdateMetadataRequest, version: int) -> Any:
    m = request_module(UPDATE_METADATA, version)
    topics = tuple(
        build(m.UpdateMetadataTopicState, topic_name=topic,
              topic_id=topic_uuid(request.topic_ids.get(topic)),
              partition_states=tuple(build(
                  m.UpdateMetadataPartitionState, partition_index=p.partition,
                  controller_epoch=p.controller_epoch, leader=p.leader,
                  leader_epoch=p.leader_epoch, isr=p.isr, zk_version=p.partition_epoch,
                  replicas=p.replicas, offline_replicas=p.offline_replicas) for p in parts))
        for topic, parts in _by_topic(request.partitions).items())
    brokers = tuple(
        build(m.UpdateMetadataBroker, id_=b.id, rack=b.rack, endpoints=tuple(
            build(m.UpdateMetadataEndpoint, port=e.port, host=e.host, listener=e.listener,
                  security_protocol=security_protocol_id(e.security_protocol))
            for e in b.endpoints))
        for b in request.live_brokers)
    return build(m.UpdateMetadataRequest, controller_id=request.controller_id,
                 is_k_raft_controller=False, controller_epoch=request.controller_epoch,
                 broker_epoch=request.broker_epoch, topic_states=topics, live_brokers=brokers)


def _encode_stop_replica(request: StopReplicaRequest, version: int) -> Any:
    m = request_module(STOP_REPLICA, version)
    topics = tuple(
        build(m.StopReplicaTopicState, topic_name=topic, partition_states=tuple(
            build(m.StopReplicaPartitionState, partition_index=p.partition,
                  leader_epoch=p.leader_epoch, delete_partition=p.delete) for p in parts))
        for topic, parts in _by_topic(request.partitions).items())
    return build(m.StopReplicaRequest, controller_id=request.controller_id,
                 is_k_raft_controller=False, controller_epoch=request.controller_epoch,
                 broker_epoch=request.broker_epoch, topic_states=topics)


def decode_response(request: BrokerRequest, response: Any) -> BrokerResponse:
    """A broker's kio answer to ``request`` as the controller's :class:`BrokerResponse` (the
    partitions with an error only)."""
    error = ErrorCode.of(response.error_code)
    partition_errors: dict[TopicPartition, ErrorCode] = {}
    match request:
        case LeaderAndIsrRequest():
            names = {topic_uuid(i): t for t, i in request.topic_ids.items()}
            for topic in response.topics:
                name = names.get(topic.topic_id)
                for p in topic.partition_errors:
                    if not (e := ErrorCode.of(p.error_code)):
                        continue
                    if name is not None:
                        partition_errors[TopicPartition(name, p.partition_index)] = e
                    else:  # a topic without id: every partition of that number
                        for q in request.partitions:
                            if q.partition == p.partition_index and q.topic not in \
                                    request.topic_ids:
                                partition_errors[TopicPartition(q.topic, q.partition)] = e
        case StopReplicaRequest():
            for p in response.partition_errors:
                if e := ErrorCode.of(p.error_code):
                    partition_errors[TopicPartition(p.topic_name, p.partition_index)] = e
    return BrokerResponse(error=error, partition_errors=partition_errors)


def encode_body(body: Any) -> bytes:
    """A kio request body as bytes (no header, no size)."""
    buf = io.BytesIO()
    entity_writer(type(body))(buf, body)
    return buf.getvalue()


_UM_EPOCH_AT = 9
"""Where an UpdateMetadata v8 body has its broker epoch: after the controller id (int32), the
KRaft flag (bool) and the controller epoch (int32)."""
_EPOCH = struct.Struct(">q")


class _SharedMetadata:
    """The last UpdateMetadata encoded, for the other brokers of its batch.

    The controller sends every broker of a batch the same UpdateMetadata but for the broker
    epoch (one partition tuple shared by all: ``RequestBatch.build``); encoding 100,000
    partitions takes over a second, so the body is encoded once and each broker's copy gets its
    epoch written in place. The layout is checked on the body encoded (the epoch must be where
    it is looked for), else nothing is shared."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: tuple[UpdateMetadataRequest, type, bytes] | None = None

    def encode(self, request: UpdateMetadataRequest) -> tuple[type, bytes]:
        with self._lock:
            last = self._last
            if last is not None and _same_metadata(last[0], request):
                patched = bytearray(last[2])
                _EPOCH.pack_into(patched, _UM_EPOCH_AT, request.broker_epoch)
                return last[1], bytes(patched)
            cls = request_class(UPDATE_METADATA, SEND_VERSIONS[UPDATE_METADATA])
            data = encode_update_metadata_v8(request, _topic_id_bytes, security_protocol_id)
            shareable = (len(data) >= _UM_EPOCH_AT + 8
                         and _EPOCH.unpack_from(data, _UM_EPOCH_AT)[0] == request.broker_epoch)
            self._last = (request, cls, data) if shareable else None
            return cls, data


def _same_metadata(a: UpdateMetadataRequest, b: UpdateMetadataRequest) -> bool:
    return (a.partitions is b.partitions and a.live_brokers is b.live_brokers
            and a.topic_ids is b.topic_ids and a.controller_id == b.controller_id
            and a.controller_epoch == b.controller_epoch)


# --- a blocking client connection ---------------------------------------------------------------


class _Connection:
    """One blocking connection to a broker: a request, then its response, at a time."""

    def __init__(self, host: str, port: int, timeout: float, client_id: str,
                 connector: Connector | None = None) -> None:
        if connector is None:
            self.sock = socket.create_connection((host, port), timeout=timeout)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        else:
            self.sock = connector.open(host, port, timeout)
        self.client_id = client_id
        self._next = 0
        self.renew_at: float | None = None
        """When the SASL session ends soon (KIP-368): the connection is replaced then."""
        if connector is not None and connector.sasl:
            try:
                self.call(build(request_module(18, 3).ApiVersionsRequest,
                                client_software_name="partctl", client_software_version="1"))
                self.renew_at = connector.authenticate(self.call)
            except BaseException:
                self.close()
                raise

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def call(self, body: Any) -> Any:
        """Send a kio request; its answer."""
        cls = type(body)
        return self.receive(cls, self.send_encoded(cls, encode_body(body)))

    def send_encoded(self, cls: Any, body: bytes) -> int:
        """Send a request body already encoded (of kio class ``cls``) without waiting for
        its answer; its correlation id, for :meth:`receive`."""
        self._next += 1
        correlation_id = self._next
        header_cls: Any = cls.__header_schema__
        buf = io.BytesIO()
        entity_writer(header_cls)(buf, header_cls(
            request_api_key=cls.__api_key__,
            request_api_version=cls.__version__,
            correlation_id=correlation_id, client_id=self.client_id))
        head = buf.getvalue()
        self.sock.sendall(b"".join((SIZE.pack(len(head) + len(body)), head, body)))
        return correlation_id

    def receive(self, cls: Any, correlation_id: int) -> Any:
        """The next answer on the connection, which must be that of the request of kio class
        ``cls`` sent as ``correlation_id`` (a broker answers a connection's requests in
        order)."""
        frame = receive_frame(self.sock)
        response_cls = response_schema(int(cls.__api_key__), int(cls.__version__))
        try:
            header, offset = read_checked(response_cls.__header_schema__, frame)
            response, _ = read_checked(response_cls, frame, offset)
        except Exception as exc:  # kio raises several types; all mean a bad answer
            raise ConnectionError(f"cannot read {response_cls.__name__}: {exc!r}") from exc
        if header.correlation_id != correlation_id:
            raise ConnectionError(f"correlation id {header.correlation_id}, expected "
                                  f"{correlation_id}")
        return response


# --- the controller's channel ------------------------------------------------------------------


class _BrokerQueue:
    """One broker's queue and sender thread (Kafka's RequestSendThread): each request is sent
    until answered, retried with backoff while the broker cannot be reached, and answered
    (its callback called) in the order queued.

    Up to :data:`MAX_IN_FLIGHT` requests (and :data:`IN_FLIGHT_BYTES` once more than one is
    under way) are sent before the first is answered, where Kafka's controller waits for each
    answer before the next request. A change of leaders is a LeaderAndIsr then an
    UpdateMetadata to every broker: the broker has the second before it has answered the
    first, and serves the new leaders to clients as soon as it has applied both, not a round
    trip later. The broker handles a connection's requests in the order they came and answers
    them in that order, as Kafka's brokers do, so the broker sees what it saw before. A
    connection lost with requests under way is replaced and every request not yet answered is
    sent again on the new one, in order, as a single request was before."""

    def __init__(self, channel: NetworkChannel, broker_id: int, target: Target) -> None:
        self.channel = channel
        self.broker_id = broker_id
        self.target = target
        self.queue: queue.SimpleQueue[tuple[BrokerRequest, ResponseCallback] | None] = (
            queue.SimpleQueue())
        self.stopped = threading.Event()
        self._conn: _Connection | None = None
        self._sent: collections.deque[tuple[Any, int, int]] = collections.deque()
        """The requests under way on :attr:`_conn`, oldest first: kio class, correlation id,
        bytes."""
        self._thread = threading.Thread(
            target=self._run, daemon=True,
            name=f"partctl-controller-{channel.controller_id}-to-{broker_id}")
        self._thread.start()

    def stop(self) -> None:
        self.stopped.set()
        self.queue.put(None)
        conn = self._conn
        if conn is not None:
            conn.close()  # a send or receive under way ends now

    def retarget(self, target: Target) -> None:
        """New endpoints of the same registration: the next connection goes there."""
        self.target = target
        conn = self._conn
        if conn is not None:
            conn.close()

    def _run(self) -> None:
        # taken from the queue and not answered yet, oldest first
        pending: collections.deque[tuple[BrokerRequest, ResponseCallback]] = (
            collections.deque())
        try:
            while not self.stopped.is_set():
                if not pending:
                    item = self.queue.get()
                    if item is None:
                        return
                    pending.append(item)
                while len(pending) < MAX_IN_FLIGHT:
                    try:
                        item = self.queue.get_nowait()
                    except queue.Empty:
                        break
                    if item is None:
                        return
                    pending.append(item)
                response = self._answer_first(pending)
                if response is None:
                    return  # dropped meanwhile
                request, on_response = pending.popleft()
                try:
                    on_response(self.broker_id, request, response)
                except Exception:
                    log.exception("controller %s: handling broker %d's answer failed",
                                  self.channel.controller_id, self.broker_id)
        finally:
            self._drop_connection()

    def _drop_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self._sent.clear()

    def _connection(self, endpoint: Endpoint) -> _Connection:
        """The connection to send on: a new one when there is none, or when a SASL session
        ends and nothing is under way on it."""
        channel, conn = self.channel, self._conn
        if conn is not None and conn.renew_at is not None and not self._sent \
                and time.monotonic() >= conn.renew_at:
            self._drop_connection()
            conn = None
        if conn is None:  # (nothing is under way without a connection: _drop_connection)
            conn = self._conn = _Connection(endpoint.host, endpoint.port,
                                            channel.request_timeout, channel.client_id,
                                            channel.connector)
        return conn

    def _answer_first(self, pending: collections.deque[tuple[BrokerRequest, ResponseCallback]]
                      ) -> BrokerResponse | None:
        """Send what of ``pending`` is not under way yet (within the bounds), then read the
        first one's answer; over a new connection, with backoff, while the broker cannot be
        reached. None once the queue is stopped."""
        channel = self.channel
        backoff = channel.retry_backoff
        failures = 0
        while not self.stopped.is_set():
            endpoint = _endpoint(self.target.broker, channel.listener)
            if endpoint is None:
                log.warning("controller %s: broker %d registers no %s endpoint",
                            channel.controller_id, self.broker_id, channel.listener)
                self._drop_connection()  # the rest under way go again on the next one
                return BrokerResponse(error=ErrorCode.BROKER_NOT_AVAILABLE)
            try:
                conn = self._connection(endpoint)
                sent = self._sent
                while len(sent) < len(pending) and (
                        not sent or sum(n for _, _, n in sent) < IN_FLIGHT_BYTES):
                    cls, body = channel.encode(pending[len(sent)][0])
                    sent.append((cls, conn.send_encoded(cls, body), len(body)))
                cls, correlation_id, _ = sent[0]
                answer = conn.receive(cls, correlation_id)
                sent.popleft()
                if self.stopped.is_set():
                    return None  # dropped while it was under way: nobody waits for it
                return decode_response(pending[0][0], answer)
            except OSError as exc:  # ConnectionError and timeouts are OSErrors
                self._drop_connection()
                if self.stopped.is_set():
                    return None
                failures += 1
                level = logging.INFO if failures == 1 else logging.DEBUG
                log.log(level, "controller %s: broker %d at %s:%d not reachable (%s); "
                        "retrying", channel.controller_id, self.broker_id, endpoint.host,
                        endpoint.port, exc)
                if self.stopped.wait(backoff):
                    return None
                backoff = min(backoff * 2, channel.max_retry_backoff)
        return None


class NetworkChannel:
    """One controller candidate's channel: a :class:`_BrokerQueue` per registered broker."""

    def __init__(self, *, controller_id: int | str = "?", listener: str = "PLAINTEXT",
                 request_timeout: float = 30.0, retry_backoff: float = 0.1,
                 max_retry_backoff: float = 1.0, connector: Connector | None = None) -> None:
        self.connector = connector
        self.controller_id = controller_id
        self.listener = listener
        self.request_timeout = request_timeout
        self.retry_backoff = retry_backoff
        self.max_retry_backoff = max_retry_backoff
        self.client_id = f"partctl-controller-{controller_id}"
        self._lock = threading.Lock()
        self._queues: dict[int, _BrokerQueue] = {}
        self._metadata = _SharedMetadata()

    def encode(self, request: BrokerRequest) -> tuple[type, bytes]:
        """``request`` as a kio class and its encoded body (an UpdateMetadata shared by the
        brokers of a batch is encoded once)."""
        if isinstance(request, UpdateMetadataRequest):
            return self._metadata.encode(request)
        if isinstance(request, LeaderAndIsrRequest):
            return (request_class(LEADER_AND_ISR, SEND_VERSIONS[LEADER_AND_ISR]),
                    encode_leader_and_isr_v7(request, self.listener, _topic_id_bytes))
        body = encode_request(request, self.listener)
        return type(body), encode_body(body)

    def brokers(self) -> dict[int, Target]:
        """The brokers with a queue now, and the registration each serves."""
        with self._lock:
            return {b: q.target for b, q in self._queues.items()}

    def send(self, broker_id: int, requests: Sequence[BrokerRequest],
             on_response: ResponseCallback) -> None:
        with self._lock:
            q = self._queues.get(broker_id)
            if q is not None:
                for request in requests:
                    q.queue.put((request, on_response))
                return
        for request in requests:  # not registered as far as the controller told us
            on_response(broker_id, request, BrokerResponse(error=ErrorCode.BROKER_NOT_AVAILABLE))

    def update_brokers(self, brokers: Mapping[int, Target]) -> None:
        dropped = []
        with self._lock:
            for b, q in list(self._queues.items()):
                target = brokers.get(b)
                if target is None or target.epoch != q.target.epoch:
                    dropped.append(self._queues.pop(b))
                elif target != q.target:
                    q.retarget(target)
            for b, target in brokers.items():
                if b not in self._queues:
                    self._queues[b] = _BrokerQueue(self, b, target)
        for q in dropped:
            log.info("controller %s: no more requests to broker %d (epoch %d)",
                     self.controller_id, q.broker_id, q.target.epoch)
            q.stop()

    def reset(self) -> None:
        with self._lock:
            queues = list(self._queues.values())
            self._queues.clear()
        for q in queues:
            q.stop()


# --- the network -------------------------------------------------------------------------------


def controller_endpoint(metadata: MetadataClient, controller_id: int, listener: str
                        ) -> tuple[str, int] | None:
    """Where controller ``controller_id`` takes requests on ``listener``: from its broker
    registration, else from its controller-only registration (``/partctl/controllers/<id>``);
    None when neither exists or names that listener."""
    c = metadata.coordinator
    for path in (layout.broker(controller_id), layout.controller_node(controller_id)):
        try:
            data, _ = c.get(path)
        except NoNode:
            continue
        info = BrokerInfo.decode(path, data, controller_id)
        for text in info.listeners:
            name, _, address = text.partition("://")
            host, _, port = address.rpartition(":")
            if name == listener and port.isdigit():
                return host.strip("[]") or info.host, int(port)
        return None
    return None


class KafkaNetwork(AttachedHere):
    """A broker (or controller-only) process's :class:`~interbroker.channel.BrokerNetwork`:
    the handler and controller candidate of this process, channels over Kafka's protocol to
    the brokers' ``listener`` endpoints, and controlled shutdown sent to the active
    controller's endpoint on that listener."""

    def __init__(self, *, node_id: int | str = "?", listener: str = "PLAINTEXT",
                 request_timeout: float = 30.0, retry_backoff: float = 0.1,
                 connector: Connector | None = None) -> None:
        self.connector = connector
        """How the channels and controlled shutdown connect (TLS, SASL); None: plaintext."""
        self.node_id = node_id
        self.listener = listener
        self.request_timeout = request_timeout
        self.retry_backoff = retry_backoff
        super().__init__()
        self._channels: list[NetworkChannel] = []
        self.executor = ThreadPoolExecutor(max_workers=1,
                                           thread_name_prefix="partctl-controller-requests")
        """Runs the attached handler's calls, one at a time, in the order they arrived."""

    def channel(self) -> NetworkChannel:
        channel = NetworkChannel(controller_id=self.node_id, listener=self.listener,
                                 request_timeout=self.request_timeout,
                                 retry_backoff=self.retry_backoff, connector=self.connector)
        with self._lock:
            self._channels.append(channel)
        return channel

    def close(self) -> None:
        """Stop every channel's senders and the handler's thread."""
        with self._lock:
            channels = list(self._channels)
        for channel in channels:
            channel.reset()
        self.executor.shutdown(wait=False, cancel_futures=True)

    def controlled_shutdown(
        self, metadata: MetadataClient, controller_id: int, broker_id: int, broker_epoch: int,
        timeout: float,
    ) -> tuple[TopicPartition, ...]:
        """ControlledShutdown (v3) to the active controller's endpoint: NOT_CONTROLLER,
        STALE_BROKER_EPOCH and BROKER_NOT_AVAILABLE come back as the exceptions the
        in-process network raises; an unreachable controller is NotController (ask again)."""
        address = controller_endpoint(metadata, controller_id, self.listener)
        if address is None:
            raise NotController(f"controller {controller_id} has no {self.listener} endpoint "
                                "registered")
        m = request_module(CONTROLLED_SHUTDOWN, SEND_VERSIONS[CONTROLLED_SHUTDOWN])
        body = build(m.ControlledShutdownRequest, broker_id=broker_id, broker_epoch=broker_epoch)
        try:
            conn = _Connection(address[0], address[1], timeout, f"partctl-broker-{broker_id}",
                               self.connector)
        except OSError as exc:
            raise NotController(f"controller {controller_id} at {address[0]}:{address[1]} not "
                                f"reachable: {exc}") from exc
        try:
            response = conn.call(body)
        except TimeoutError:
            raise
        except OSError as exc:
            raise NotController(f"controller {controller_id}: {exc}") from exc
        finally:
            conn.close()
        code = int(response.error_code)
        if code == ErrorCode.NOT_CONTROLLER:
            raise NotController(f"broker {controller_id} is not the controller")
        if code == ErrorCode.STALE_BROKER_EPOCH:
            raise StaleBrokerEpoch(broker_id, broker_epoch, -1)
        if code == ErrorCode.BROKER_NOT_AVAILABLE:
            raise BrokerNotAvailable(broker_id)
        if code == ErrorCode.REQUEST_TIMED_OUT:
            raise TimeoutError(f"controller {controller_id} did not answer in time")
        if code != ErrorCode.NONE:
            raise NotController(f"controller {controller_id} answered {_name(code)}")
        return tuple(TopicPartition(p.topic_name, p.partition_index)
                     for p in response.remaining_partitions)
