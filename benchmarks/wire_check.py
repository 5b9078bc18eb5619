"""What checking a request against its schema costs before kio reads it; prints numbers,
asserts nothing.

    .venv/bin/python benchmarks/wire_check.py [--repeat 2000]

For requests as clients send them (Produce of one topic with 1, 6 and 36 partitions of 16 KiB
records each, a follower's and a consumer's Fetch of 6 partitions, Metadata of 50 topics), the
CPU time (``time.process_time``, so other work on the machine counts less) per request of:
``kafkaclient.wire_check.check_frame`` alone (the walk, which allocates nothing), kio's native reader
alone, and ``broker.wire.parse_request`` (both, as the server calls them). Best of three runs
of ``--repeat`` requests each. The records of a Produce are a ``bytes`` field to the walk: their
size costs it nothing (they are checked by the log's validation, measured by log_append.py).

Then answers, as a client (``kafkaclient.connection``) or the controller's channel reads them
(``kafkaclient.wire_check.read_checked``): a Metadata v12 answer for one topic of 6 and of 5,000
partitions (RF 3), the walk alone, kio alone, and both.
"""

from __future__ import annotations

import argparse
import io
import sys
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kio.schema.errors import ErrorCode  # noqa: E402
from kio.serial import entity_reader, entity_writer  # noqa: E402

from broker.wire import parse_request, request_class, response_module  # noqa: E402
from kafkaclient.messages import build
from kafkaclient.wire_check import _entity_scan, check_frame, read_checked  # noqa: E402


def _module(key: int, version: int):  # type: ignore[no-untyped-def]
    return sys.modules[request_class(key, version).__module__]


def encode(body: object) -> bytes:
    cls = type(body)
    header = cls.__header_schema__
    out = io.BytesIO()
    entity_writer(header)(out, header(request_api_key=cls.__api_key__,
                                      request_api_version=cls.__version__,
                                      correlation_id=1, client_id="bench"))
    entity_writer(cls)(out, body)
    return out.getvalue()


def produce(partitions: int) -> bytes:
    m = _module(0, 9)
    data = tuple(build(m.PartitionProduceData, index=i, records=b"\0" * 16384)
                 for i in range(partitions))
    return encode(build(m.ProduceRequest, transactional_id=None, acks=-1,
                        timeout=timedelta(seconds=30),
                        topic_data=(build(m.TopicProduceData, name="orders",
                                          partition_data=data),)))


def fetch(replica_id: int) -> bytes:
    m = _module(1, 12)
    parts = tuple(build(m.FetchPartition, partition=i, current_leader_epoch=3,
                        fetch_offset=1000, last_fetched_epoch=3, log_start_offset=0,
                        partition_max_bytes=1 << 20) for i in range(6))
    return encode(build(m.FetchRequest, replica_id=replica_id,
                        max_wait=timedelta(milliseconds=500), min_bytes=1,
                        max_bytes=50 << 20, isolation_level=0, session_id=0,
                        session_epoch=-1, topics=(build(m.FetchTopic, topic="orders",
                                                        partitions=parts),),
                        forgotten_topics_data=(), rack_id=""))


def metadata(topics: int) -> bytes:
    m = _module(3, 12)
    return encode(build(m.MetadataRequest, topics=tuple(
        build(m.MetadataRequestTopic, topic_id=uuid.UUID(int=0), name=f"topic-{i:04d}")
        for i in range(topics)), allow_auto_topic_creation=False,
        include_topic_authorized_operations=False))


def _walk(cls: type, data: bytes) -> int:
    return _entity_scan(cls)(data, 0, len(data), [])


def metadata_response(partitions: int) -> bytes:
    """A Metadata v12 answer (body only) for one topic of ``partitions`` partitions, RF 3: what
    a client polling a big topic reads back, and what the client side walks."""
    m = response_module(3, 12)
    parts = tuple(build(m.MetadataResponsePartition, error_code=ErrorCode.none, partition_index=i,
                        leader_id=1 + i % 3, leader_epoch=4, replica_nodes=(1, 2, 3),
                        isr_nodes=(1, 2, 3), offline_replicas=())
                  for i in range(partitions))
    body = build(m.MetadataResponse, throttle_time=timedelta(0),
                 brokers=tuple(build(m.MetadataResponseBroker, node_id=b, host="127.0.0.1",
                                     port=9092 + b, rack=None) for b in (1, 2, 3)),
                 cluster_id="bench", controller_id=1, topics=(build(
                     m.MetadataResponseTopic, error_code=ErrorCode.none, name="big",
                     topic_id=uuid.UUID(int=7), is_internal=False, partitions=parts,
                     topic_authorized_operations=-2147483648),))
    out = io.BytesIO()
    entity_writer(type(body))(out, body)
    return out.getvalue()


def best(repeat: int, run: Callable[[], object]) -> float:
    times = []
    for _ in range(3):
        start = time.process_time()
        for _ in range(repeat):
            run()
        times.append((time.process_time() - start) / repeat)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=2000)
    args = parser.parse_args()
    cases = [("Produce v9, 1 partition", 0, 9, produce(1)),
             ("Produce v9, 6 partitions", 0, 9, produce(6)),
             ("Produce v9, 36 partitions", 0, 9, produce(36)),
             ("Fetch v12, follower, 6 partitions", 1, 12, fetch(2)),
             ("Fetch v12, consumer, 6 partitions", 1, 12, fetch(-1)),
             ("Metadata v12, 50 topics", 3, 12, metadata(50))]
    response_module(0, 9)  # load the schemas before timing
    print(f"{'request':<36} {'bytes':>8} {'check µs':>9} {'kio µs':>8} {'both µs':>8}")
    for name, key, version, frame in cases:
        cls = request_class(key, version)
        header_reader, body_reader = entity_reader(cls.__header_schema__), entity_reader(cls)

        def kio_only(frame: bytes = frame, header_reader: Callable = header_reader,
                     body_reader: Callable = body_reader) -> object:
            _header, offset = header_reader(frame, 0)
            return body_reader(frame, offset)

        check = best(args.repeat, lambda f=frame, c=cls: check_frame(f, c, c.__header_schema__))
        kio = best(args.repeat, kio_only)
        both = best(args.repeat, lambda f=frame, k=key, v=version: parse_request(f, k, v))
        print(f"{name:<36} {len(frame):>8} {check * 1e6:>9.1f} {kio * 1e6:>8.1f} "
              f"{both * 1e6:>8.1f}")
    # an answer, as a client (kafkaclient.connection) or the controller's channel reads one
    for partitions in (6, 5000):
        answer = metadata_response(partitions)
        cls = response_module(3, 12).MetadataResponse
        reader = entity_reader(cls)
        repeat = max(1, args.repeat * 6 // partitions)
        walk = best(repeat, lambda a=answer, c=cls: _walk(c, a))
        kio = best(repeat, lambda a=answer, r=reader: r(a, 0))
        both = best(repeat, lambda a=answer, c=cls: read_checked(c, a))
        name = f"Metadata v12 answer, {partitions} parts"
        print(f"{name:<36} {len(answer):>8} {walk * 1e6:>9.1f} {kio * 1e6:>8.1f} "
              f"{both * 1e6:>8.1f}")


if __name__ == "__main__":
    main()
