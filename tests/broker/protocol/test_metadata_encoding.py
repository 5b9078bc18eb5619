"""The Metadata response the broker encodes itself (broker.apis.metadata_encoding) is byte for
byte what kio's generic writer gives for the same response, for every version the broker
serves; and the encoded topics kept between metadata changes follow the changes."""

from __future__ import annotations

import io
import uuid
from datetime import timedelta
from types import MappingProxyType
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from broker.apis.metadata import APIS
from broker.apis.metadata_encoding import (
    TopicCache,
    empty_partitions,
    encode_partitions,
    encode_response,
    encode_topic,
    live_on,
    shape,
)
from broker.wire import response_module
from interbroker.requests import Endpoint, LiveBroker, UpdateMetadataPartition
from kafkaclient.messages import build

VERSIONS = range(APIS[0].min_version, APIS[0].max_version + 1)
NOT_ASKED = -2147483648
LISTENER = "PLAINTEXT"

BROKERS = MappingProxyType({
    1: LiveBroker(id=1, endpoints=(Endpoint(listener=LISTENER, host="10.0.0.1", port=9092),),
                  rack="r1"),
    2: LiveBroker(id=2, endpoints=(Endpoint(listener=LISTENER, host="broker-two.example",
                                            port=19092),)),
    # live, but without the request's listener: leader LISTENER_NOT_FOUND from version 6
    3: LiveBroker(id=3, endpoints=(Endpoint(listener="INTERNAL", host="10.0.0.3", port=9093),),
                  rack="r3"),
    # a long rack name: a length over one varint byte
    4: LiveBroker(id=4, endpoints=(Endpoint(listener=LISTENER, host="h" * 200, port=9094),),
                  rack="ρ" * 90),
})


def _partition(topic: str, index: int, leader: int, replicas: tuple[int, ...],
               isr: tuple[int, ...], offline: tuple[int, ...] = (), epoch: int = 7
               ) -> UpdateMetadataPartition:
    return UpdateMetadataPartition(topic, index, 3, leader, epoch, isr, 11, replicas, offline)


TOPICS = {
    "orders": MappingProxyType({
        2: _partition("orders", 2, 2, (2, 1, 4), (2, 1)),
        0: _partition("orders", 0, 1, (1, 2, 4), (1, 2, 4), epoch=0),
        1: _partition("orders", 1, 3, (3, 1, 2), (3, 1)),           # leader without listener
        3: _partition("orders", 3, 9, (9, 1, 2), (1,), (9,)),      # leader not live
        4: _partition("orders", 4, 1, (1, 3, 5), (1, 3), (5,)),    # replicas not available
    }),
    "__consumer_offsets": MappingProxyType({
        p: _partition("__consumer_offsets", p, 1 + p % 2, (1, 2), (1, 2)) for p in range(130)}),
    "empty-ids": MappingProxyType({0: _partition("empty-ids", 0, 4, (4,), (4,))}),
}
TOPIC_IDS = {"orders": uuid.UUID("6a1b4c3d-0000-4000-8000-00000000abcd"),
             "__consumer_offsets": uuid.uuid4()}


# --- the reference: kio objects, as the handler built them before, written by kio -----------


def _endpoint(broker: LiveBroker | None) -> tuple[str, int] | None:
    if broker is None:
        return None
    return next(((e.host, e.port) for e in broker.endpoints if e.listener == LISTENER), None)


def _kio_partitions(module: Any, topic: str, version: int) -> tuple[Any, ...]:
    out = []
    for index, state in sorted(TOPICS[topic].items()):
        replicas, isr = state.replicas, state.isr
        if version == 0:
            replicas = tuple(r for r in replicas if _endpoint(BROKERS.get(r)))
            isr = tuple(r for r in isr if _endpoint(BROKERS.get(r)))
        leader = BROKERS.get(state.leader)
        if _endpoint(leader) is None:
            error = (ErrorCode.listener_not_found if leader is not None and version >= 6
                     else ErrorCode.leader_not_available)
            leader_id = -1
        else:
            error = (ErrorCode.replica_not_available
                     if len(replicas) < len(state.replicas) or len(isr) < len(state.isr)
                     else ErrorCode.none)
            leader_id = state.leader
        out.append(build(module.MetadataResponsePartition, error_code=error,
                         partition_index=index, leader_id=leader_id,
                         leader_epoch=state.leader_epoch, replica_nodes=tuple(replicas),
                         isr_nodes=tuple(isr), offline_replicas=tuple(state.offline_replicas)))
    return tuple(out)


def _kio_topic(module: Any, name: str | None, error: ErrorCode, partitions: tuple = (),
               topic_id: uuid.UUID | None = None, operations: int = NOT_ASKED) -> Any:
    return build(module.MetadataResponseTopic, error_code=error, name=name, topic_id=topic_id,
                 is_internal=name == "__consumer_offsets", partitions=partitions,
                 topic_authorized_operations=operations)


def _kio_bytes(response: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(response))(buffer, response)
    return buffer.getvalue()


# --- the cases ------------------------------------------------------------------------------


CASES = {
    # name: (topics as (name, error, operations), unknown ids, cluster id, cluster operations)
    "every topic": ([("__consumer_offsets", ErrorCode.none, NOT_ASKED),
                     ("empty-ids", ErrorCode.none, NOT_ASKED),
                     ("orders", ErrorCode.none, NOT_ASKED)], [], "cluster-Ω", NOT_ASKED),
    "errors and operations": ([("orders", ErrorCode.none, 0b1011_1000),
                               ("secret", ErrorCode.topic_authorization_failed, NOT_ASKED),
                               ("missing", ErrorCode.unknown_topic_or_partition, NOT_ASKED),
                               ("bad name!", ErrorCode.invalid_topic_exception, NOT_ASKED),
                               ("made", ErrorCode.leader_not_available, NOT_ASKED)],
                              [uuid.UUID(int=5)], None, 0b1_1111_1000),
    "no topics": ([], [], "c", NOT_ASKED),
}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_broker_encodes_the_bytes_kio_writes(version: int, case: str) -> None:
    topics, unknown_ids, cluster_id, cluster_ops = CASES[case]
    module = response_module(3, version)
    s = shape(version)
    live = live_on(BROKERS, LISTENER)
    brokers = [(i, *_endpoint(b), b.rack) for i, b in sorted(BROKERS.items())
               if _endpoint(b) is not None]
    ours, theirs = [], []
    for name, error, operations in topics:
        if error is ErrorCode.none:
            partitions = encode_partitions(TOPICS[name], live, BROKERS, s)
            ours.append(encode_topic(s, error, name, TOPIC_IDS.get(name),
                                     name == "__consumer_offsets", partitions, operations))
            theirs.append(_kio_topic(module, name, error, _kio_partitions(module, name, version),
                                     TOPIC_IDS.get(name), operations))
        else:
            ours.append(encode_topic(s, error, name, None, False, empty_partitions(s),
                                     NOT_ASKED))
            theirs.append(_kio_topic(module, name, error))
    for topic_id in unknown_ids if version >= 12 else ():  # asked by id: version 12
        ours.append(encode_topic(s, ErrorCode.unknown_topic_id, None, topic_id, False,
                                 empty_partitions(s), NOT_ASKED))
        theirs.append(_kio_topic(module, None, ErrorCode.unknown_topic_id, topic_id=topic_id))
    reference = build(module.MetadataResponse, throttle_time=timedelta(0), brokers=tuple(
        build(module.MetadataResponseBroker, node_id=i, host=h, port=p, rack=r)
        for i, h, p, r in brokers), cluster_id=cluster_id, controller_id=2,
        topics=tuple(theirs), cluster_authorized_operations=cluster_ops)
    body = encode_response(s, brokers, cluster_id, 2, ours, cluster_ops)
    assert body == _kio_bytes(reference)
    assert s.header_class is type(reference).__header_schema__


def test_a_topic_is_encoded_again_once_it_or_the_live_brokers_change() -> None:
    s = shape(12)
    cache = TopicCache()
    live = live_on(BROKERS, LISTENER)
    first = cache.partitions("orders", TOPICS["orders"], BROKERS, live, LISTENER, s, 3)
    assert cache.partitions("orders", TOPICS["orders"], BROKERS, live, LISTENER, s, 3) is first
    # the metadata cache replaces a changed topic's mapping: a new leader for partition 0
    changed = MappingProxyType({**TOPICS["orders"],
                                0: _partition("orders", 0, 2, (1, 2, 4), (2, 4), epoch=1)})
    second = cache.partitions("orders", changed, BROKERS, live, LISTENER, s, 3)
    assert second == encode_partitions(changed, live, BROKERS, s) != first
    # broker 2 gone: its partitions lose their leader
    fewer = MappingProxyType({i: b for i, b in BROKERS.items() if i != 2})
    third = cache.partitions("orders", changed, fewer, live_on(fewer, LISTENER), LISTENER, s, 3)
    assert third == encode_partitions(changed, live_on(fewer, LISTENER), fewer, s) != second
    # broker 3 (live without the listener, leading partition 1) gone: LEADER_NOT_AVAILABLE
    # instead of LISTENER_NOT_FOUND, though the brokers live on the listener are the same
    no_three = MappingProxyType({i: b for i, b in fewer.items() if i != 3})
    assert live_on(no_three, LISTENER) == live_on(fewer, LISTENER)
    fourth = cache.partitions("orders", changed, no_three, live_on(no_three, LISTENER),
                              LISTENER, s, 3)
    assert fourth == encode_partitions(changed, live_on(no_three, LISTENER), no_three,
                                       s) != third
    # another version or listener is its own entry
    assert cache.partitions("orders", changed, fewer, live_on(fewer, LISTENER), LISTENER,
                            shape(0), 3) == encode_partitions(
        changed, live_on(fewer, LISTENER), fewer, shape(0))
    assert len(cache) == 2


def test_the_kept_topics_are_bounded_by_the_topics_there_are() -> None:
    s = shape(12)
    cache = TopicCache(limit_per_topic=2)
    live = live_on(BROKERS, LISTENER)
    for n in range(50):  # topics created and deleted one after another
        cache.partitions(f"t{n}", TOPICS["empty-ids"], BROKERS, live, LISTENER, s, 1)
    assert len(cache) <= 2
