"""The controller's own LeaderAndIsr v7 and UpdateMetadata v8 writers against kio's: the same
bytes for requests of every shape (the wire is checked by kio, the speed is the writers')."""

from __future__ import annotations

import random

import pytest

from broker.controller_channel import (
    NetworkChannel,
    encode_body,
    encode_request,
    security_protocol_id,
    topic_uuid,
)
from broker.controller_codec import encode_leader_and_isr_v7, encode_update_metadata_v8
from interbroker.requests import (
    Endpoint,
    LeaderAndIsrPartition,
    LeaderAndIsrRequest,
    LiveBroker,
    UpdateMetadataPartition,
    UpdateMetadataRequest,
)

TOPIC_ID = "r2Bx3RPGQXCjHVG6Mm2OeA"


def _id(text: str | None) -> bytes:
    return topic_uuid(text).bytes


def _ints(rng: random.Random, most: int) -> tuple[int, ...]:
    return tuple(rng.randrange(-1, 2**31 - 1) if rng.random() < 0.1 else rng.randrange(1000)
                 for _ in range(rng.randrange(most + 1)))


def _broker(rng: random.Random, i: int) -> LiveBroker:
    endpoints = tuple(
        Endpoint(listener=rng.choice(["PLAINTEXT", "INTERNAL", "SASL_SSL", "ÉXTERNE"]),
                 host=rng.choice(["127.0.0.1", "b.example", "h" * 200]), port=rng.randrange(65536),
                 security_protocol=rng.choice(["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]))
        for _ in range(rng.randrange(3)))
    return LiveBroker(id=i, endpoints=endpoints, rack=rng.choice([None, "", "rack-ä", "r" * 130]))


def _requests(seed: int) -> tuple[LeaderAndIsrRequest, UpdateMetadataRequest]:
    rng = random.Random(seed)
    topics = [rng.choice(["t", "orders", "ü-topic", "x" * 140, "__consumer_offsets"]) + str(i)
              for i in range(rng.randrange(1, 6))]
    # many partitions in some runs: counts past one varint byte, replica lists shared
    count = rng.choice([0, 1, 5, 200, 3000])
    lai = []
    um = []
    for _ in range(count):
        topic = rng.choice(topics)
        partition = rng.randrange(2**31 - 1) if rng.random() < 0.05 else rng.randrange(10_000)
        replicas = _ints(rng, 5) if rng.random() < 0.3 else (1, 2, 3)
        isr = _ints(rng, 4) if rng.random() < 0.3 else (1, 2)
        lai.append(LeaderAndIsrPartition(
            topic, partition, rng.randrange(100), rng.randrange(-1, 10), rng.randrange(2**31 - 1),
            isr, rng.randrange(2**31 - 1), replicas, _ints(rng, 2), _ints(rng, 2),
            rng.random() < 0.5))
        um.append(UpdateMetadataPartition(
            topic, partition, rng.randrange(100), rng.randrange(-1, 10), rng.randrange(1000),
            isr, rng.randrange(2**31 - 1), replicas, _ints(rng, 3)))
    ids = {t: TOPIC_ID for t in topics if rng.random() < 0.7}
    brokers = tuple(_broker(rng, i) for i in range(rng.randrange(4)))
    head = dict(controller_id=rng.randrange(-1, 3000), controller_epoch=rng.randrange(2**31 - 1),
                broker_epoch=rng.choice([-1, 0, 2**40 + 7]))
    return (LeaderAndIsrRequest(partitions=tuple(lai), live_leaders=brokers, topic_ids=ids,
                                **head),
            UpdateMetadataRequest(partitions=tuple(um), live_brokers=brokers, topic_ids=ids,
                                  **head))


@pytest.mark.parametrize("seed", range(40))
def test_the_bytes_are_kios(seed: int) -> None:
    lai, um = _requests(seed)
    for listener in ("PLAINTEXT", "INTERNAL", "NONE"):
        assert encode_leader_and_isr_v7(lai, listener, _id) == encode_body(
            encode_request(lai, listener)), listener
    assert encode_update_metadata_v8(um, _id, security_protocol_id) == encode_body(
        encode_request(um, "PLAINTEXT"))


def test_the_channel_sends_the_writers_bytes_for_both_and_shares_the_metadata() -> None:
    lai, um = _requests(3)
    channel = NetworkChannel(listener="PLAINTEXT")
    cls, data = channel.encode(lai)
    assert (cls.__api_key__, cls.__version__) == (4, 7)
    assert data == encode_body(encode_request(lai, "PLAINTEXT"))
    cls, data = channel.encode(um)
    assert (cls.__api_key__, cls.__version__) == (6, 8)
    assert data == encode_body(encode_request(um, "PLAINTEXT"))
    # the next broker's copy of the same metadata: its own epoch written into the shared body
    other = UpdateMetadataRequest(
        controller_id=um.controller_id, controller_epoch=um.controller_epoch, broker_epoch=99,
        partitions=um.partitions, live_brokers=um.live_brokers, topic_ids=um.topic_ids)
    assert channel.encode(other)[1] == encode_body(encode_request(other, "PLAINTEXT"))
