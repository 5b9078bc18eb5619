"""The controller's requests over Kafka's protocol (broker/controller_channel.py and
broker/apis/controller_requests.py): kio round trips of every version served, and the channel
against real servers on loopback: queue order, a down broker retried until it listens, a
removed broker's queue dropped, a new registration served afresh; then participants on one
memory coordinator, each behind its own server, the controller reaching the other broker and
the broker's controlled shutdown reaching the controller only over the network."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import io
import socket
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.serial import entity_writer

import coordinator
from broker import controller_channel
from broker.apis import BrokerServices, default_registry
from broker.apis.controller_requests import APIS, decode_request, encode_response
from broker.config import BrokerConfig, Listener
from broker.controller_channel import (
    CONTROLLED_SHUTDOWN,
    LEADER_AND_ISR,
    MAX_IN_FLIGHT,
    STOP_REPLICA,
    UPDATE_METADATA,
    KafkaNetwork,
    NetworkChannel,
    decode_response,
    encode_body,
    encode_request,
)
from broker.metadata_cache import MetadataCache
from broker.purgatory import Purgatory
from broker.server import KafkaServer
from broker.wire import encode_response as encode_wire_response
from broker.wire import parse_request, peek
from coordinator.admin import Admin
from coordinator.clock import SYSTEM_CLOCK
from coordinator.codecs import BrokerInfo, TopicPartition
from coordinator.metadata import MetadataClient
from coordinator.servers import free_port
from elections.controller_election import NotController
from interbroker.channel import BrokerResponse, Target
from interbroker.controller_client import ControllerClient
from interbroker.errors import ErrorCode, StaleBrokerEpoch
from interbroker.requests import (
    BrokerRequest,
    Endpoint,
    LeaderAndIsrPartition,
    LeaderAndIsrRequest,
    LiveBroker,
    StopReplicaPartition,
    StopReplicaRequest,
    UpdateMetadataPartition,
    UpdateMetadataRequest,
)
from kafkaclient.frames import SIZE, receive_frame
from replication.config import ReplicaConfig
from replication.replica_manager import ReplicaManager
from statemachines.config import ControllerConfig
from statemachines.participant import Participant
from tests.recording_broker import RecordingBroker
from tests.waiting import Recorder, wait_until

TOPIC_ID = "AAECAwQFBgcICQoLDA0ODw"  # 16 bytes, Kafka's text form

B1 = LiveBroker(id=1, rack="r1", endpoints=(
    Endpoint(listener="PLAINTEXT", host="127.0.0.1", port=9001),))
B2 = LiveBroker(id=2, rack=None, endpoints=(
    Endpoint(listener="PLAINTEXT", host="127.0.0.1", port=9002),
    Endpoint(listener="CLIENTS", host="10.0.0.2", port=9102, security_protocol="SASL_SSL")))

LAI = LeaderAndIsrRequest(
    controller_id=1, controller_epoch=3, broker_epoch=77,
    partitions=(
        LeaderAndIsrPartition("t", 0, 2, 1, 5, (1, 2), 9, (1, 2, 3), (3,), (), True),
        LeaderAndIsrPartition("t", 1, 3, 2, 0, (2,), 0, (2, 1), (), (1,), False),
        LeaderAndIsrPartition("u", 0, 3, 1, 1, (1,), 4, (1,), (), (), False),
    ),
    live_leaders=(LiveBroker(id=1, endpoints=(B1.endpoints[0],)),
                  LiveBroker(id=2, endpoints=(B2.endpoints[0],))),
    topic_ids={"t": TOPIC_ID})
UM = UpdateMetadataRequest(
    controller_id=1, controller_epoch=3, broker_epoch=77,
    partitions=(UpdateMetadataPartition("t", 0, 2, 1, 5, (1, 2), 9, (1, 2, 3), (3,)),
                UpdateMetadataPartition("u", 0, 3, -1, 1, (), 4, (1,), (1,))),
    live_brokers=(B1, B2), topic_ids={"t": TOPIC_ID})
SR = StopReplicaRequest(
    controller_id=1, controller_epoch=3, broker_epoch=77,
    partitions=(StopReplicaPartition(topic="t", partition=0, delete=True, leader_epoch=-2),
                StopReplicaPartition(topic="u", partition=2, delete=False, leader_epoch=7)))


def _versions(key: int) -> list[int]:
    api = next(a for a in APIS if a.key == key)
    return list(range(api.min_version, api.max_version + 1))


def _wire(body: object) -> bytes:
    """The request as a frame body (header and body, no size), as the server reads it."""
    cls = type(body)
    header_cls = cls.__header_schema__  # type: ignore[attr-defined]
    buf = io.BytesIO()
    entity_writer(header_cls)(buf, header_cls(
        request_api_key=cls.__api_key__, request_api_version=cls.__version__,  # type: ignore[attr-defined]
        correlation_id=5, client_id="test"))
    entity_writer(cls)(buf, body)
    return buf.getvalue()


@pytest.mark.parametrize(("key", "value"), [
    *((LEADER_AND_ISR, v) for v in _versions(LEADER_AND_ISR)),
    *((UPDATE_METADATA, v) for v in _versions(UPDATE_METADATA)),
    *((STOP_REPLICA, v) for v in _versions(STOP_REPLICA)),
])
def test_requests_round_trip_through_kio(key: int, value: int) -> None:
    original: BrokerRequest = {LEADER_AND_ISR: LAI, UPDATE_METADATA: UM, STOP_REPLICA: SR}[key]
    body = encode_request(original, "PLAINTEXT", value)
    assert body.__version__ == value
    _, parsed = parse_request(_wire(body), key, value)
    assert decode_request(key, parsed, "PLAINTEXT") == original


def test_the_versions_sent_are_served() -> None:
    for original in (LAI, UM, SR):
        body = encode_request(original, "PLAINTEXT")
        assert default_registry().supports(int(body.__api_key__), int(body.__version__))
    assert default_registry().supports(CONTROLLED_SHUTDOWN, 3)


@pytest.mark.parametrize("original", [LAI, UM, SR], ids=["LeaderAndIsr", "UpdateMetadata",
                                                          "StopReplica"])
def test_answers_round_trip_error_codes(original: BrokerRequest) -> None:
    """The contract's codes are Kafka's numbers: they go on the wire and come back as they are."""
    key = {LeaderAndIsrRequest: LEADER_AND_ISR, UpdateMetadataRequest: UPDATE_METADATA,
           StopReplicaRequest: STOP_REPLICA}[type(original)]
    version = max(_versions(key))
    fine = BrokerResponse()
    assert decode_response(original, encode_response(key, version, original, fine)) == fine
    refused = BrokerResponse(error=ErrorCode.STALE_CONTROLLER_EPOCH)
    wire = encode_response(key, version, original, refused)
    assert int(wire.error_code) == 11 == KioErrorCode.stale_controller_epoch
    assert decode_response(original, wire).error is ErrorCode.STALE_CONTROLLER_EPOCH
    if key != UPDATE_METADATA:  # UpdateMetadata answers one code only
        first = original.partitions[0]
        tp = TopicPartition(first.topic, first.partition)
        some = BrokerResponse(partition_errors={tp: ErrorCode.KAFKA_STORAGE_ERROR})
        back = decode_response(original, encode_response(key, version, original, some))
        assert not back.error
        assert dict(back.partition_errors) == {tp: ErrorCode.KAFKA_STORAGE_ERROR}


def test_an_update_metadata_shared_by_a_batch_is_encoded_once_per_batch() -> None:
    """Each broker's copy is what encoding it alone gives (its own broker epoch)."""
    channel = NetworkChannel(controller_id=1)
    first = channel.encode(UM)
    for epoch in (5, 1 << 40, -1):
        mine = dataclasses.replace(UM, broker_epoch=epoch)
        body = encode_request(mine, "PLAINTEXT")
        assert channel.encode(mine) == (type(body), encode_body(body))
    assert channel.encode(UM) == first
    other = dataclasses.replace(UM, partitions=UM.partitions[:1], broker_epoch=5)
    body = encode_request(other, "PLAINTEXT")
    assert channel.encode(other) == (type(body), encode_body(body))


# --- the channel against real servers -----------------------------------------------------------



class _Server:
    """A broker's real server on loopback (the default registry, a real replica manager) whose
    network has ``handler`` attached for broker ``broker_id``."""

    def __init__(self, log_dir: Path, broker_id: int, handler_factory, *,  # noqa: ANN001
                 port: int = 0, participant_of=None) -> None:  # noqa: ANN001
        self.network = KafkaNetwork(node_id=broker_id, retry_backoff=0.02)
        config = BrokerConfig(broker_id=broker_id, coordinator_url="memory://unused",
                              listeners=(Listener(name="PLAINTEXT", host="127.0.0.1",
                                                  port=port),), log_dir=log_dir)
        self.replica_manager = ReplicaManager(broker_id, log_dir, None, SYSTEM_CLOCK,
                                              ReplicaConfig())
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        registry = default_registry()
        self.server = KafkaServer(config.listeners, registry, max_request_bytes=1 << 20)
        self.port = self._run(self.server.bind())["PLAINTEXT"]
        self.participant: Participant | None = None
        if handler_factory is not None:
            self.network.attach(broker_id, handler_factory(self.network))
        self.server.services = BrokerServices(
            broker_id=broker_id, config=config, replica_manager=self.replica_manager,
            metadata=MetadataCache(), purgatory=Purgatory(self.loop), loop=self.loop,
            cluster_id="c", registry=registry, network=self.network,
            controller=lambda: self.participant.controller if self.participant else None)
        self._run(self.server.start_serving())

    def _run(self, coro):  # noqa: ANN001, ANN202
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def close(self) -> None:
        self._run(self.server.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.network.close()
        self.replica_manager.shutdown()


class _Recording:
    """A recording broker without a participant: the controller is the test, the broker's
    epoch is ``epoch`` (its client is never called)."""

    def __init__(self, broker_id: int = 2, epoch: int = 77) -> None:
        self.broker_id, self.epoch = broker_id, epoch
        self.broker: RecordingBroker | None = None

    def __call__(self, network: KafkaNetwork) -> RecordingBroker:
        store = MetadataClient(coordinator.connect(f"memory://rec-{uuid.uuid4().hex[:10]}"))
        self.broker = RecordingBroker(ControllerClient(store, network, self.broker_id,
                                                       lambda: self.epoch))
        return self.broker


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[list[_Server]]:
    started: list[_Server] = []
    yield started
    for s in started:
        s.close()


def _target(port: int, epoch: int = 77, broker_id: int = 2) -> Target:
    return Target(epoch, LiveBroker(id=broker_id, endpoints=(
        Endpoint(listener="PLAINTEXT", host="127.0.0.1", port=port),)))


def _um(n: int, epoch: int = 77) -> UpdateMetadataRequest:
    return UpdateMetadataRequest(
        controller_id=1, controller_epoch=1, broker_epoch=epoch,
        partitions=(UpdateMetadataPartition("t", n, 1, 2, n, (2,), 0, (2,)),),
        live_brokers=(B2,))


def test_requests_arrive_in_order_and_answers_come_back(tmp_path: Path,
                                                        servers: list[_Server]) -> None:
    recording = _Recording()
    server = _Server(tmp_path / "b2", 2, recording)
    servers.append(server)
    channel = NetworkChannel(controller_id=1)
    answers: Recorder[tuple[int, BrokerRequest, BrokerResponse]] = Recorder()
    try:
        channel.update_brokers({2: _target(server.port)})
        requests = [_um(n) for n in range(20)]
        channel.send(2, requests[:10], lambda *a: answers(a))
        channel.send(2, requests[10:], lambda *a: answers(a))
        got = answers.wait_count(20)
        assert [r for _, r, _ in got] == requests
        assert all(b == 2 and resp == BrokerResponse() for b, _, resp in got)
        assert recording.broker.received() == requests
    finally:
        channel.reset()


def test_a_down_broker_is_retried_until_it_listens(tmp_path: Path,
                                                   servers: list[_Server]) -> None:
    port = free_port()
    channel = NetworkChannel(controller_id=1, retry_backoff=0.02, max_retry_backoff=0.1)
    answers: Recorder[tuple[int, BrokerRequest, BrokerResponse]] = Recorder()
    try:
        channel.update_brokers({2: _target(port)})
        requests = [_um(n) for n in range(3)]
        channel.send(2, requests, lambda *a: answers(a))
        with pytest.raises(AssertionError):
            answers.wait_count(1, timeout=0.5)
        recording = _Recording()
        servers.append(_Server(tmp_path / "b2", 2, recording, port=port))
        got = answers.wait_count(3)
        assert [r for _, r, _ in got] == requests
        assert recording.broker.received() == requests
    finally:
        channel.reset()


def test_a_removed_broker_gets_nothing_more_and_a_new_registration_gets_fresh_requests(
        tmp_path: Path, servers: list[_Server]) -> None:
    port = free_port()
    channel = NetworkChannel(controller_id=1, retry_backoff=0.02, max_retry_backoff=0.1)
    answers: Recorder[tuple[int, BrokerRequest, BrokerResponse]] = Recorder()
    try:
        channel.update_brokers({2: _target(port, epoch=77)})
        channel.send(2, [_um(0, epoch=77)], lambda *a: answers(a))  # pending: nobody listens
        channel.update_brokers({})  # the broker left: its queue goes
        assert channel.brokers() == {}
        channel.send(2, [_um(1, epoch=77)], lambda *a: answers(a))
        (gone,) = answers.wait_count(1)
        assert gone[2].error == ErrorCode.BROKER_NOT_AVAILABLE and gone[1] == _um(1, epoch=77)
        # It registers again (epoch 78) and listens: only what was sent to it now arrives.
        recording = _Recording(epoch=78)
        servers.append(_Server(tmp_path / "b2", 2, recording, port=port))
        channel.update_brokers({2: _target(port, epoch=78)})
        channel.send(2, [_um(2, epoch=78)], lambda *a: answers(a))
        got = answers.wait_count(2)
        assert got[1][1] == _um(2, epoch=78) and got[1][2] == BrokerResponse()
        assert recording.broker.received() == [_um(2, epoch=78)]
        # A registration's epoch changing drops the old queue the same way.
        channel.update_brokers({2: _target(port, epoch=79)})
        assert channel.brokers()[2].epoch == 79
    finally:
        channel.reset()


def test_a_broker_without_a_handler_answers_broker_not_available(
        tmp_path: Path, servers: list[_Server]) -> None:
    server = _Server(tmp_path / "b2", 2, None)
    servers.append(server)
    channel = NetworkChannel(controller_id=1)
    answers: Recorder[tuple[int, BrokerRequest, BrokerResponse]] = Recorder()
    try:
        channel.update_brokers({2: _target(server.port)})
        channel.send(2, [LAI, SR], lambda *a: answers(a))
        got = answers.wait_count(2)
        assert [resp.error for _, _, resp in got] == [ErrorCode.BROKER_NOT_AVAILABLE] * 2
    finally:
        channel.reset()


class _WirePeer:
    """A broker's side of the wire for the sender's pipelining: a listener on loopback that
    reads the controller's frames as they come (each connection numbered) and answers them
    only when the test says, in order, with the real encoding of an UpdateMetadata answer."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.frames: Recorder[tuple[int, int]] = Recorder()
        """(connection number, correlation id) of each request read."""
        self._conns: list[socket.socket] = []
        self._unanswered: list[int] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with self._lock:
                self._conns.append(conn)
                self._unanswered = []
                number = len(self._conns)
            threading.Thread(target=self._read, args=(conn, number), daemon=True).start()

    def _read(self, conn: socket.socket, number: int) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            while True:
                frame = receive_frame(conn)
                key, _, correlation_id = peek(frame)
                assert key == UPDATE_METADATA
                with self._lock:
                    if conn is self._conns[-1]:
                        self._unanswered.append(correlation_id)
                self.frames((number, correlation_id))

    def answer(self, n: int) -> None:
        """Answer the ``n`` oldest requests not answered on the newest connection."""
        with self._lock:
            conn, due = self._conns[-1], self._unanswered[:n]
            del self._unanswered[:n]
        for correlation_id in due:
            body = encode_response(UPDATE_METADATA, 8, _um(0), BrokerResponse())
            encoded = encode_wire_response(correlation_id, body)
            conn.sendall(SIZE.pack(encoded.size) + b"".join(encoded.parts))

    def drop(self) -> None:
        with self._lock:
            conn = self._conns[-1]
        conn.shutdown(socket.SHUT_RDWR)  # wakes this side's reader too, where close would not
        conn.close()

    def close(self) -> None:
        self.listener.close()
        for conn in self._conns:
            conn.close()


@pytest.fixture
def peer() -> Iterator[_WirePeer]:
    p = _WirePeer()
    yield p
    p.close()


def test_requests_go_out_before_the_first_is_answered_up_to_the_bound(
        peer: _WirePeer) -> None:
    """Four requests under way at once (MAX_IN_FLIGHT), the fifth once the first is
    answered; the answers come back in order, each once."""
    channel = NetworkChannel(controller_id=1)
    answers: Recorder[tuple[int, BrokerRequest, BrokerResponse]] = Recorder()
    try:
        channel.update_brokers({2: _target(peer.port)})
        requests = [_um(n) for n in range(6)]
        channel.send(2, requests, lambda *a: answers(a))
        assert [c for c, _ in peer.frames.wait_count(MAX_IN_FLIGHT)] == [1] * MAX_IN_FLIGHT
        with pytest.raises(AssertionError):
            peer.frames.wait_count(MAX_IN_FLIGHT + 1, timeout=0.3)
        assert answers.items == []
        peer.answer(1)
        assert [r for _, r, _ in answers.wait_count(1)] == requests[:1]
        peer.frames.wait_count(MAX_IN_FLIGHT + 1)
        peer.answer(5)
        peer.frames.wait_count(6)
        peer.answer(1)
        got = answers.wait_count(6)
        assert [r for _, r, _ in got] == requests
        assert all(resp == BrokerResponse() for _, _, resp in got)
        assert [i for _, i in peer.frames.items] == [1, 2, 3, 4, 5, 6]
    finally:
        channel.reset()


def test_the_requests_under_way_on_a_lost_connection_are_sent_again_in_order(
        peer: _WirePeer) -> None:
    channel = NetworkChannel(controller_id=1, retry_backoff=0.02)
    answers: Recorder[tuple[int, BrokerRequest, BrokerResponse]] = Recorder()
    try:
        channel.update_brokers({2: _target(peer.port)})
        requests = [_um(n) for n in range(3)]
        channel.send(2, requests, lambda *a: answers(a))
        peer.frames.wait_count(3)
        peer.answer(1)
        answers.wait_count(1)
        peer.drop()  # the second and third were read, never answered
        again = peer.frames.wait_count(5)[3:]
        assert [c for c, _ in again] == [2, 2]
        peer.answer(2)
        got = answers.wait_count(3)
        assert [r for _, r, _ in got] == requests
        with pytest.raises(AssertionError):
            answers.wait_count(4, timeout=0.3)
    finally:
        channel.reset()


def test_past_the_byte_bound_a_request_waits_for_the_answers_before_it(
        peer: _WirePeer, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a bound of one byte, Kafka's one request at a time."""
    monkeypatch.setattr(controller_channel, "IN_FLIGHT_BYTES", 1)
    channel = NetworkChannel(controller_id=1)
    answers: Recorder[tuple[int, BrokerRequest, BrokerResponse]] = Recorder()
    try:
        channel.update_brokers({2: _target(peer.port)})
        channel.send(2, [_um(n) for n in range(3)], lambda *a: answers(a))
        for n in (1, 2, 3):
            peer.frames.wait_count(n)
            with pytest.raises(AssertionError):
                peer.frames.wait_count(n + 1, timeout=0.2)
            peer.answer(1)
        assert len(answers.wait_count(3)) == 3
    finally:
        channel.reset()


# --- participants over the network ---------------------------------------------------------------


def test_participants_reach_each_other_only_over_the_network(tmp_path: Path,
                                                             servers: list[_Server]) -> None:
    """Two participants on one memory coordinator, each with its own network and server:
    the controller's requests to the other broker and that broker's controlled shutdown only
    cross the loopback connections."""
    url = f"memory://netchan-{uuid.uuid4().hex[:10]}"
    nodes = {}
    for b in (1, 2):
        server = _Server(tmp_path / f"b{b}", b, None)
        servers.append(server)
        info = BrokerInfo(id=b, host="127.0.0.1", port=server.port,
                          endpoints=(f"PLAINTEXT://127.0.0.1:{server.port}",))
        participant = Participant(url, b, handler=RecordingBroker, network=server.network,
                                  registration=info)
        server.participant = participant
        nodes[b] = participant
    try:
        nodes[1].start()
        wait_until(lambda: nodes[1].controller.active)
        nodes[2].start()
        Admin(nodes[1].coordinator).create_topic("t", assignment={0: [2, 1], 1: [1, 2]})
        broker2 = nodes[2].handler
        assert isinstance(broker2, RecordingBroker)
        tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
        wait_until(lambda: broker2.leads() == {tp0} and {tp0, tp1} <= set(broker2.metadata()))
        assert broker2.live_brokers() == [1, 2]
        assert broker2.leader_and_isr()[tp1].leader == 1
        # Broker 2's controlled shutdown reaches controller 1 through its server.
        assert nodes[2].controlled_shutdown(10) == ()
        wait_until(lambda: broker2.leads() == set())
        assert nodes[1].metadata.partition_states([tp0])[tp0].value.leader == 1
        # An earlier registration of broker 2 is refused as Kafka refuses it.
        with pytest.raises(StaleBrokerEpoch):
            nodes[2].network.controlled_shutdown(
                nodes[2].metadata, 1, 2, nodes[2].broker_epoch - 1, 10)
        # The controller's channel follows the registrations: broker 2 leaving drops its
        # queue.
        channel = nodes[1].controller.channel
        assert isinstance(channel, NetworkChannel)
        assert channel.brokers()[2].epoch == nodes[2].broker_epoch
        nodes[2].close()
        wait_until(lambda: set(channel.brokers()) == {1})
    finally:
        for p in reversed(nodes.values()):
            p.close()


def test_services_without_a_network_refuse_controller_requests(tmp_path: Path,
                                                                servers: list[_Server]) -> None:
    server = _Server(tmp_path / "b2", 2, None)
    servers.append(server)
    server.server.services = dataclasses.replace(server.server.services, network=None)
    channel = NetworkChannel(controller_id=1)
    answers: Recorder[tuple[int, BrokerRequest, BrokerResponse]] = Recorder()
    try:
        channel.update_brokers({2: _target(server.port)})
        channel.send(2, [_um(0)], lambda *a: answers(a))
        assert answers.wait_count(1)[0][2].error == ErrorCode.BROKER_NOT_AVAILABLE
    finally:
        channel.reset()


# --- a controlled shutdown's two steps, over the network -----------------------------------------


class _Silent:
    """A listener on loopback that accepts connections and never answers: a registered broker
    whose process hangs."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]

    def close(self) -> None:
        self.sock.close()


def _three_over_the_network(tmp_path: Path, servers: list[_Server], wait: float,
                            silent: _Silent | None = None) -> dict[int, Participant]:
    """Participants 1 (the controller), 2 and 3 on one memory coordinator, each behind its own
    server, but 3 registered at ``silent`` if given; topic ``t``: 2 leads partition 0 and
    follows 1 and 2."""
    url = f"memory://steps-{uuid.uuid4().hex[:10]}"
    config = ControllerConfig(shutdown_answers_wait=wait)
    nodes: dict[int, Participant] = {}
    for b in (1, 2, 3):
        server = _Server(tmp_path / f"b{b}", b, None)
        servers.append(server)
        port = silent.port if b == 3 and silent is not None else server.port
        info = BrokerInfo(id=b, host="127.0.0.1", port=port,
                          endpoints=(f"PLAINTEXT://127.0.0.1:{port}",))
        nodes[b] = Participant(url, b, handler=RecordingBroker, network=server.network,
                               registration=info, config=config)
        server.participant = nodes[b]
    nodes[1].start()
    wait_until(lambda: nodes[1].controller.active)
    nodes[2].start()
    nodes[3].start()
    wait_until(lambda: set(nodes[1].controller.ctx.brokers) == {1, 2, 3})
    Admin(nodes[1].coordinator).create_topic(
        "t", assignment={0: [2, 1, 3], 1: [1, 2, 3], 2: [3, 2, 1]})
    wait_until(lambda: len(nodes[1].controller.ctx.leaders) == 3)
    return nodes


@contextmanager
def _three(tmp_path: Path, servers: list[_Server], wait: float, *, silent: bool = False
           ) -> Iterator[dict[int, Participant]]:
    """:func:`_three_over_the_network`, broker 3 behind a :class:`_Silent` listener if
    ``silent``; everything closed after."""
    listener = _Silent() if silent else None
    nodes = _three_over_the_network(tmp_path, servers, wait, listener)
    try:
        yield nodes
    finally:
        for p in reversed(nodes.values()):
            p.close()
        if listener is not None:
            listener.close()


def _waiting_shutdown_of_2(nodes: dict[int, Participant]) -> Future[Any]:
    """Broker 2's controlled shutdown, once its leadership has moved and the follower step
    waits (broker 3 silent)."""
    reply = nodes[1].controller.request_controlled_shutdown(2, nodes[2].broker_epoch)
    wait_until(lambda: _states(nodes[1])[0] == (1, (1, 3)))
    assert not reply.done()
    return reply


def _states(p: Participant) -> dict[int, tuple[int, tuple[int, ...]]]:
    tps = [TopicPartition("t", n) for n in range(3)]
    states = p.metadata.partition_states(tps)
    return {tp.partition: (states[tp].value.leader, tuple(states[tp].value.isr)) for tp in tps}


def test_the_follower_step_runs_once_every_broker_has_answered_the_leadership_move(
        tmp_path: Path, servers: list[_Server]) -> None:
    """The wait for answers is ten minutes here: the broker is answered (and its follower
    replicas shrunk out of their ISRs) only because every broker answered the first step."""
    with _three(tmp_path, servers, wait=600) as nodes:
        ctl = nodes[1].controller
        assert ctl.request_controlled_shutdown(2, nodes[2].broker_epoch).result(60) == ()
        assert _states(nodes[1]) == {0: (1, (1, 3)), 1: (1, (1, 3)), 2: (3, (3, 1))}
        broker2 = nodes[2].handler
        assert isinstance(broker2, RecordingBroker)
        # what it led it still follows; what it followed is stopped (not deleted)
        wait_until(lambda: broker2.stopped(deleted=False) == {
            TopicPartition("t", 1), TopicPartition("t", 2)})
        assert ctl._awaiting == set()


def test_a_broker_that_never_answers_holds_the_follower_step_only_for_the_wait(
        tmp_path: Path, servers: list[_Server]) -> None:
    with _three(tmp_path, servers, wait=5, silent=True) as nodes:
        # the leadership moved; broker 3 has not answered it, so the second step waits
        reply = _waiting_shutdown_of_2(nodes)
        followed = _states(nodes[1])
        assert 2 in followed[1][1] and 2 in followed[2][1]
        assert reply.result(60) == ()
        assert _states(nodes[1]) == {0: (1, (1, 3)), 1: (1, (1, 3)), 2: (3, (3, 1))}


def test_a_controller_that_resigns_while_waiting_fails_the_shutdown_request(
        tmp_path: Path, servers: list[_Server]) -> None:
    """The broker asks the next controller: this one says NOT_CONTROLLER at once instead of
    leaving it waiting for its request to time out."""
    with _three(tmp_path, servers, wait=600, silent=True) as nodes:
        reply = _waiting_shutdown_of_2(nodes)
        nodes[1].close()
        with pytest.raises(NotController):
            reply.result(30)


def test_a_broker_that_leaves_is_no_longer_waited_for(tmp_path: Path,
                                                      servers: list[_Server]) -> None:
    """Its registration gone, its queue is dropped and no answer can come: the follower step
    runs then, not after the ten-minute wait."""
    with _three(tmp_path, servers, wait=600, silent=True) as nodes:
        ctl = nodes[1].controller
        reply = _waiting_shutdown_of_2(nodes)
        nodes[3].close()
        assert reply.result(30) == ()
        assert ctl._awaiting == set()


def test_brokers_shutting_down_are_not_waited_for(tmp_path: Path,
                                                  servers: list[_Server]) -> None:
    """A whole cluster stopping: a broker that asked to shut down may have closed its server
    while still registered. Broker 3 never answers, but it is leaving too."""
    with _three(tmp_path, servers, wait=600, silent=True) as nodes:
        ctl = nodes[1].controller
        assert ctl.request_controlled_shutdown(3, nodes[3].broker_epoch).result(30) == ()
        assert ctl.request_controlled_shutdown(2, nodes[2].broker_epoch).result(30) == ()
        assert _states(nodes[1]) == {0: (1, (1,)), 1: (1, (1,)), 2: (1, (1,))}
