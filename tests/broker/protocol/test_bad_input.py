"""Bad input on the wire costs its connection at most, never the broker: after each case a
real client (librdkafka) still produces and consumes. Kafka's answers: a frame over
socket.request.max.bytes (a 2 GiB length prefix) or of negative size, an api key or version
not served, a body that does not parse: the connection is closed; an ApiVersions of a version
not served: UNSUPPORTED_VERSION in a version 0 response with the ApiVersions range (KIP-511),
and the connection stays open. Pipelined requests are answered in order."""

from __future__ import annotations

import socket
import struct
import uuid
from collections.abc import Iterator
from datetime import timedelta

import confluent_kafka as ck
import pytest
from kio.schema.errors import ErrorCode

from kafkaclient.messages import build
from tests.broker.processes import BrokerProcess, create_topic
from tests.broker.wire_client import RawClient, encode_request, request, request_module
from tests.waiting import wait_until

pytestmark = pytest.mark.servers


@pytest.fixture(scope="module")
def topic(broker: BrokerProcess) -> str:
    name = f"bad-input-{uuid.uuid4().hex[:8]}"
    create_topic(broker, name, 1)
    return name


def round_trip(broker: BrokerProcess, topic: str) -> None:
    """A real client produces one message and reads it back."""
    value = uuid.uuid4().bytes
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    acked = []
    producer.produce(topic, value=value, partition=0,
                     on_delivery=lambda err, msg: acked.append((err, msg.offset())))
    assert producer.flush(30) == 0
    ((err, offset),) = acked
    assert err is None
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused",
                            "enable.auto.commit": False})
    try:
        consumer.assign([ck.TopicPartition(topic, 0, offset)])
        msg = None
        for _ in range(60):
            msg = consumer.poll(0.5)
            if msg is not None:
                break
        assert msg is not None and msg.error() is None and msg.value() == value
    finally:
        consumer.close()


@pytest.fixture
def still_serving(broker: BrokerProcess, topic: str) -> Iterator[None]:
    yield
    assert broker.process.poll() is None, broker.log()[-3000:]
    round_trip(broker, topic)


def api_versions(version: int) -> object:
    return request(18, version, client_software_name="test", client_software_version="1")


def metadata(version: int = 12) -> object:
    return request(3, version, topics=None, allow_auto_topic_creation=False,
                   include_topic_authorized_operations=False)


@pytest.mark.usefixtures("still_serving")
@pytest.mark.parametrize("data", [
    pytest.param(b"\x7f\xff\xff\xff", id="2GiB-length-prefix"),
    pytest.param(b"\xff\xff\xff\xff", id="negative-length"),
    pytest.param(struct.pack(">i", 4) + b"\x00\x03", id="shorter-than-a-header"),
    pytest.param(encode_request(request(57, 0, timeout=timedelta(seconds=1),
                                        feature_updates=()), 1), id="api-not-served"),
    pytest.param(encode_request(metadata(), 1).replace(b"\x00\x03\x00\x0c", b"\x03\xe7\x00\x00",
                                                       1), id="unknown-api-key"),
    pytest.param(encode_request(request(0, 2, acks=1, timeout=timedelta(seconds=1),
                                        topic_data=()), 1), id="produce-v2-not-served"),
    pytest.param(encode_request(metadata(13 - 1), 1).replace(b"\x00\x03\x00\x0c",
                                                             b"\x00\x03\x00\x0d", 1),
                 id="metadata-v13-not-served"),
    pytest.param(encode_request(metadata(), 1)[:4 + 14] + b"\xff" * 40, id="garbage-body"),
])
def test_refused_requests_close_the_connection(broker: BrokerProcess, data: bytes) -> None:
    with RawClient(broker.address) as client:
        client.send_bytes(data[:4] if data[:4] in (b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff")
                          else struct.pack(">i", len(data) - 4) + data[4:])
        assert client.closed_by_peer()


@pytest.mark.usefixtures("still_serving")
def test_a_truncated_frame_then_a_hang_up(broker: BrokerProcess) -> None:
    frame = encode_request(metadata(), 3)
    with socket.create_connection(broker.address) as sock:
        sock.sendall(frame[:len(frame) // 2])


@pytest.mark.usefixtures("still_serving")
def test_a_client_that_sends_nothing_or_half_a_frame_holds_nobody_up(
        broker: BrokerProcess, topic: str) -> None:
    with socket.create_connection(broker.address) as silent, \
            socket.create_connection(broker.address) as halfway:
        halfway.sendall(encode_request(metadata(), 3)[:6])
        round_trip(broker, topic)
        with RawClient(broker.address) as client:
            assert client.call(metadata()).controller_id == 1
        silent.settimeout(0.2)
        with pytest.raises(TimeoutError):  # still open: the broker does not drop idle clients
            silent.recv(1)


@pytest.mark.usefixtures("still_serving")
def test_an_unsupported_api_versions_is_answered_in_version_0(broker: BrokerProcess) -> None:
    newer = encode_request(api_versions(3), 9).replace(b"\x00\x12\x00\x03", b"\x00\x12\x00\x63", 1)
    with RawClient(broker.address) as client:
        client.send_bytes(newer)
        correlation_id, response = client.receive(18, 0)
        assert correlation_id == 9
        assert response.error_code == ErrorCode.unsupported_version
        assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [
            (18, 0, 4)]
        assert client.call(api_versions(3)).error_code == ErrorCode.none  # still open


def test_api_versions_advertises_exactly_what_is_served(broker: BrokerProcess) -> None:
    with RawClient(broker.address) as client:
        response = client.call(api_versions(3))
        bad = client.call(request(18, 3, client_software_name="-bad name",
                                  client_software_version="1"))
    assert response.error_code == ErrorCode.none
    assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [
        (0, 3, 11), (1, 4, 17), (2, 1, 9), (3, 0, 12), (4, 5, 7), (5, 3, 4), (6, 7, 8),
        (7, 2, 3), (8, 0, 9), (9, 0, 9), (10, 0, 5), (11, 0, 9), (12, 0, 4), (13, 0, 5),
        (14, 0, 5), (15, 0, 5), (16, 0, 5), (17, 0, 1), (18, 0, 4), (19, 0, 7), (20, 0, 6),
        (21, 0, 2), (22, 0, 5), (23, 0, 4), (24, 0, 5), (25, 0, 4), (26, 0, 4), (27, 0, 1),
        (28, 0, 4), (29, 0, 3), (30, 0, 3), (31, 0, 3), (32, 0, 4), (33, 0, 2),
        (35, 0, 4), (36, 0, 2), (37, 0, 3), (42, 0, 2),
        (43, 0, 2), (44, 0, 1), (45, 0, 0), (46, 0, 0), (47, 0, 0), (48, 0, 1), (50, 0, 0),
        (51, 0, 0),
        (56, 0, 3), (60, 0, 1), (61, 0, 0), (65, 0, 0), (66, 0, 1), (67, 0, 0), (68, 0, 1),
        (69, 0, 0)]
    assert bad.error_code == ErrorCode.invalid_request


def test_pipelined_requests_are_answered_in_order(broker: BrokerProcess, topic: str) -> None:
    m = request_module(1, 12)
    long_poll = request(1, 12, replica_id=-1, max_wait=timedelta(milliseconds=300),
                        min_bytes=1 << 30, max_bytes=1 << 20, isolation_level=0, session_id=0,
                        session_epoch=-1, topics=(build(m.FetchTopic, topic=topic, partitions=(
                            build(m.FetchPartition, partition=0, fetch_offset=0,
                                  partition_max_bytes=1 << 20),)),),
                        forgotten_topics_data=(), rack_id="")
    with RawClient(broker.address) as client:
        client.send_bytes(b"".join([
            encode_request(metadata(), 1), encode_request(long_poll, 2),
            encode_request(api_versions(3), 3), encode_request(metadata(1), 4)]))
        answers = [client.receive(3, 12)[0], client.receive(1, 12)[0], client.receive(18, 3)[0],
                   client.receive(3, 1)[0]]
    assert answers == [1, 2, 3, 4]


LENGTH_LIES = {
    # a Metadata v9 header, then a compact array of 2^32-2 topics: 12 bytes that made kio's
    # reader allocate 200 GiB and abort the process
    "metadata-v9-topics-2^32-1": struct.pack(">hhih", 3, 9, 1, 1) + b"x\x00"
                                 + b"\xff\xff\xff\xff\x0f",
    "incremental-alter-configs-v1-2^32-1": struct.pack(">hhih", 44, 1, 1, 1) + b"x\x00"
                                           + b"\xff\xff\xff\xff\x0f",
    "produce-v3-2^31-1-topics": struct.pack(">hhih", 0, 3, 1, 1) + b"x" + b"\xff\xff"
                                + struct.pack(">hi", 1, 1000) + b"\x7f\xff\xff\xff",
    # a -1 count in a non-nullable array: kio read it as None and 23 handlers raised TypeError
    "describe-groups-v0-null-groups": struct.pack(">hhih", 15, 0, 1, 1) + b"x"
                                      + b"\xff\xff\xff\xff",
    "create-topics-v2-null-topics": struct.pack(">hhih", 19, 2, 1, 1) + b"x"
                                    + b"\xff\xff\xff\xff" + struct.pack(">i?", 1000, False),
}


@pytest.mark.usefixtures("still_serving")
@pytest.mark.parametrize("body", LENGTH_LIES.values(), ids=LENGTH_LIES.keys())
def test_a_lying_length_costs_its_connection_and_one_line_never_the_broker(
        broker: BrokerProcess, body: bytes) -> None:
    before = broker.log().count("\n")
    with RawClient(broker.address) as client:
        client.send_bytes(struct.pack(">i", len(body)) + body)
        assert client.closed_by_peer()
    # the line is written by the broker's log writer, just after the connection closed
    after = wait_until(lambda: (lines := broker.log().splitlines()[before:]) and any(
        "closing" in line for line in lines) and lines, message="the closing line")
    assert not [line for line in after if "Traceback" in line], after
    assert sum("closing" in line for line in after) == 1, after


@pytest.mark.usefixtures("still_serving")
def test_an_unknown_tagged_field_is_skipped_and_answered(broker: BrokerProcess) -> None:
    frame = encode_request(metadata(), 5)
    assert frame.endswith(b"\x00")  # Metadata v12 ends with its (empty) tagged fields
    tagged = frame[4:-1] + b"\x01" + b"\x63\x03abc"  # tag 99, three bytes
    with RawClient(broker.address) as client:
        client.send_bytes(struct.pack(">i", len(tagged)) + tagged)
        correlation_id, response = client.receive(3, 12)
        assert correlation_id == 5 and response.controller_id == 1
