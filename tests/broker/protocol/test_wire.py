"""The Fetch path's records leave the log files as LogSlice parts that kio encodes around
(its writer takes len() and write() of a records value, nothing else), and the bytes on the
wire are exactly kio's own encoding of the response they decode to, in every Fetch version
served. Frames kio cannot read are FrameErrors."""

from __future__ import annotations

import io
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from broker.wire import FrameError, SGBuffer, encode_response, parse_request, response_module
from coordinator.codecs import TopicPartition
from kafkaclient.messages import build
from replication.log import Log, LogConfig
from tests.broker.harness import InProcessBroker
from tests.broker.wire_client import RawClient, encode_request, request, request_module
from tests.replication._util import batch

TOPIC_ID = uuid.UUID("6f1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d")


def kio_frame(correlation_id: int, response: object) -> bytes:
    """kio's own encoding of a response, size prefix included."""
    cls = type(response)
    buf = io.BytesIO()
    entity_writer(cls.__header_schema__)(buf, cls.__header_schema__(correlation_id=correlation_id))
    entity_writer(cls)(buf, response)
    data = buf.getvalue()
    return len(data).to_bytes(4, "big") + data


@pytest.fixture
def log(tmp_path: Path) -> Log:
    log = Log.open(tmp_path / "t-0", config=LogConfig())
    for i in range(4):
        log.append_as_leader(batch(3 + i, value_size=100), leader_epoch=2)
    return log


@pytest.mark.parametrize("version", range(4, 17))
def test_a_slice_is_kept_as_a_part_and_encodes_as_kio_encodes_the_bytes(log: Log,
                                                                        version: int) -> None:
    module = response_module(1, version)
    records = log.read_slice(0, 1 << 20)
    assert records is not None

    def response(value: object) -> object:
        part = build(module.PartitionData, partition_index=0, error_code=ErrorCode.none,
                     high_watermark=18, last_stable_offset=18, log_start_offset=0,
                     aborted_transactions=None, preferred_read_replica=-1, records=value)
        topic = build(module.FetchableTopicResponse, topic="t", topic_id=TOPIC_ID,
                      partitions=(part,))
        return build(module.FetchResponse, throttle_time=timedelta(0), error_code=ErrorCode.none,
                     session_id=0, responses=(topic,))

    encoded = encode_response(7, response(records), scatter=True)
    assert encoded.slices == 1
    assert sum(1 for p in encoded.parts if p is records) == 1  # the slice itself, not a copy
    assert encoded.materialize() == kio_frame(7, response(records.read()))
    records.close()


def test_sgbuffer_joins_bytes_around_slices(log: Log) -> None:
    s = log.read_slice(0, 1 << 20)
    assert s is not None
    buf = SGBuffer()
    buf.write(b"ab")
    buf.write(b"cd")
    assert buf.write(s) == s.size
    buf.write(b"ef")
    assert buf.finish() == [b"abcd", s, b"ef"]
    s.close()


@pytest.fixture
def broker(tmp_path: Path):  # noqa: ANN201
    b = InProcessBroker(tmp_path / "logs")
    b.set_partition("t", 0, leader_epoch=2)
    b.set_partition("t", 1, leader_epoch=2)
    b.metadata.set_topic_ids({"t": TOPIC_ID})
    for i in range(5):
        b.replica_manager.produce(TopicPartition("t", 0), batch(2 + i, value_size=300), 1
                                  ).result(5)
    b.replica_manager.produce(TopicPartition("t", 1), batch(1), 1).result(5)
    yield b
    b.close()


@pytest.mark.parametrize("version", range(4, 17))
def test_fetch_bytes_on_the_wire_are_kios_encoding(broker: InProcessBroker,
                                                   version: int) -> None:
    m = request_module(1, version)
    partitions = [build(m.FetchPartition, partition=p, current_leader_epoch=2, fetch_offset=o,
                        log_start_offset=-1, partition_max_bytes=1 << 20)
                  for p, o in ((0, 3), (1, 0))]
    state = {"replica_state": m.ReplicaState(replica_id=-1)} if version >= 15 else {}
    body = request(1, version, replica_id=-1, max_wait=timedelta(0), min_bytes=1,
                   max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                   topics=(build(m.FetchTopic, topic="t", topic_id=TOPIC_ID,
                                 partitions=tuple(partitions)),),
                   forgotten_topics_data=(), rack_id="", **state)
    with RawClient(broker.address) as client:
        client.send(body, correlation_id=41)
        frame = client.receive_frame()
    cls = type(body)
    response_cls = response_module(1, version).FetchResponse
    header, offset = entity_reader(response_cls.__header_schema__)(frame, 0)
    response, _ = entity_reader(response_cls)(frame, offset)
    assert header.correlation_id == 41 and cls.__version__ == version
    assert kio_frame(41, response) == len(frame).to_bytes(4, "big") + frame
    (topic,) = response.responses
    assert getattr(topic, "topic", None) == ("t" if version < 13 else None)
    assert getattr(topic, "topic_id", None) == (TOPIC_ID if version >= 13 else None)
    p0, p1 = topic.partitions
    log0 = broker.replica_manager.partition(TopicPartition("t", 0)).log
    assert p0.records == log0.read(3, 1 << 20).records  # from the batch holding offset 3
    assert (p0.error_code, p0.high_watermark) == (ErrorCode.none, 20)
    assert p1.records == broker.replica_manager.partition(TopicPartition("t", 1)).log.read(
        0, 1 << 20).records


def test_requests_kio_cannot_read_are_frame_errors() -> None:
    body = request(3, 12, topics=None, allow_auto_topic_creation=False,
                   include_topic_authorized_operations=False)
    frame = encode_request(body, 5)[4:]
    header, parsed = parse_request(frame, 3, 12)
    assert (header.correlation_id, parsed) == (5, body)
    assert parse_request(frame + b"trailing", 3, 12)[1] == body  # Kafka ignores them too
    for cut in (3, 9, len(frame) - 1):
        with pytest.raises(FrameError):
            parse_request(frame[:cut], 3, 12)
    with pytest.raises(FrameError):
        parse_request(frame[:10] + b"\xff" * 30, 3, 12)
