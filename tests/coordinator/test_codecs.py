"""Kafka's exact JSON shapes decode, and re-encode to the same JSON."""

from __future__ import annotations

import base64
import json
import random

import pytest

from coordinator import layout
from coordinator.codecs import (
    BrokerInfo,
    ControllerInfo,
    CorruptMetadata,
    PartitionState,
    TopicAssignment,
    TopicPartition,
    decode_cluster_id,
    decode_epoch,
    decode_partitions,
    decode_reassignment,
    encode_cluster_id,
    encode_epoch,
    encode_partitions,
    encode_reassignment,
    new_kafka_uuid,
    sorted_partitions,
)

# As Kafka's ZooKeeper mode writes them (key order as Kafka's Json.encode produced it).
KAFKA_BROKER = (b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
                b'"endpoints":["PLAINTEXT://kafka-1.example:9092"],"jmx_port":-1,"port":9092,'
                b'"host":"kafka-1.example","version":5,"timestamp":"1700000000123","rack":"r1"}')
KAFKA_CONTROLLER = b'{"version":1,"brokerid":2,"timestamp":"1700000000456"}'
KAFKA_TOPIC = (b'{"partitions":{"0":[1,2,3],"1":[2,3,1],"10":[3,1,2]},'
               b'"topic_id":"sPbm9OXcQQaPzQ6lTsfQ6w","adding_replicas":{"1":[4]},'
               b'"removing_replicas":{"1":[1]},"version":3}')
KAFKA_STATE = b'{"controller_epoch":7,"leader":2,"version":1,"leader_epoch":12,"isr":[2,3,1]}'
KAFKA_REASSIGN = (b'{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[4,5,6]},'
                  b'{"topic":"orders","partition":3,"replicas":[5,6,4]}]}')
KAFKA_PARTITIONS = b'{"version":1,"partitions":[{"topic":"a","partition":1},{"topic":"b","partition":0}]}'
KAFKA_CLUSTER_ID = b'{"version":"1","id":"Mk3OEYBSD34fcwNTJENDM2Qk"}'


def same_json(a: bytes, b: bytes) -> bool:
    return json.loads(a) == json.loads(b)


def test_broker_registration_round_trip() -> None:
    info = BrokerInfo.decode("/brokers/ids/1", KAFKA_BROKER, 1)
    assert (info.id, info.host, info.port, info.rack) == (1, "kafka-1.example", 9092, "r1")
    assert info.endpoints == ("PLAINTEXT://kafka-1.example:9092",)
    assert info.timestamp == "1700000000123" and info.jmx_port == -1
    assert same_json(info.encode(), KAFKA_BROKER)


def test_broker_without_rack_has_no_rack_key() -> None:
    info = BrokerInfo(id=3, host="h", port=1, timestamp="1")
    obj = json.loads(info.encode())
    assert "rack" not in obj
    assert obj == {"version": 5, "host": "h", "port": 1, "endpoints": ["PLAINTEXT://h:1"],
                   "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
                   "jmx_port": -1, "timestamp": "1", "features": {}}


def test_controller_round_trip() -> None:
    info = ControllerInfo.decode("/controller", KAFKA_CONTROLLER)
    assert info.broker_id == 2 and info.timestamp == "1700000000456"
    assert same_json(info.encode(), KAFKA_CONTROLLER)
    assert isinstance(json.loads(ControllerInfo(broker_id=1).encode())["timestamp"], str)


def test_controller_epoch_is_a_plain_integer() -> None:
    assert encode_epoch(0) == b"0" and encode_epoch(42) == b"42"
    assert decode_epoch("/controller_epoch", b"17") == 17
    with pytest.raises(CorruptMetadata, match="/controller_epoch"):
        decode_epoch("/controller_epoch", b"seventeen")


def test_topic_assignment_round_trip() -> None:
    topic = TopicAssignment.decode("/brokers/topics/orders", KAFKA_TOPIC, "orders")
    assert topic.partitions == {0: (1, 2, 3), 1: (2, 3, 1), 10: (3, 1, 2)}
    assert topic.adding == {1: (4,)} and topic.removing == {1: (1,)}
    assert topic.topic_id == "sPbm9OXcQQaPzQ6lTsfQ6w"
    assert same_json(topic.encode(), KAFKA_TOPIC)


def test_partition_state_round_trip_and_unknown_fields_kept() -> None:
    state = PartitionState.decode("/s", KAFKA_STATE)
    assert (state.leader, state.leader_epoch, state.controller_epoch, state.isr) == (2, 12, 7, (2, 3, 1))
    assert same_json(state.encode(), KAFKA_STATE)
    newer = json.loads(KAFKA_STATE)
    newer["leader_recovery_state"] = 1
    again = PartitionState.decode("/s", json.dumps(newer).encode())
    assert json.loads(again.encode()) == newer
    no_leader = PartitionState(leader=-1, leader_epoch=3, isr=(), controller_epoch=1)
    assert json.loads(no_leader.encode()) == {"version": 1, "leader": -1, "leader_epoch": 3,
                                              "controller_epoch": 1, "isr": []}


def test_reassignment_round_trip() -> None:
    moves = decode_reassignment(layout.REASSIGN_PARTITIONS, KAFKA_REASSIGN)
    assert moves == {TopicPartition(topic="orders", partition=0): (4, 5, 6),
                     TopicPartition(topic="orders", partition=3): (5, 6, 4)}
    assert same_json(encode_reassignment(moves), KAFKA_REASSIGN)


def test_partition_lists_round_trip() -> None:
    tps = decode_partitions(layout.PREFERRED_REPLICA_ELECTION, KAFKA_PARTITIONS)
    assert tps == [TopicPartition(topic="a", partition=1), TopicPartition(topic="b", partition=0)]
    assert same_json(encode_partitions(tps), KAFKA_PARTITIONS)


def test_partition_lists_are_the_bytes_json_would_give_sorted_and_deduplicated() -> None:
    tps = [TopicPartition(topic=t, partition=p)
           for t in ("b", 'quo"te', "caf\u00e9", "a\\b") for p in (10, 2, 0, 2)]
    expected = json.dumps({"version": 1, "partitions": [
        {"topic": tp.topic, "partition": tp.partition} for tp in sorted(set(tps))
    ]}, separators=(",", ":")).encode()
    assert encode_partitions(reversed(tps)) == expected
    assert decode_partitions(layout.PREFERRED_REPLICA_ELECTION, expected) == sorted(set(tps))
    assert encode_partitions([]) == b'{"version":1,"partitions":[]}'


def test_cluster_id_round_trip_and_kafka_uuid_form() -> None:
    assert decode_cluster_id(layout.CLUSTER_ID, KAFKA_CLUSTER_ID) == "Mk3OEYBSD34fcwNTJENDM2Qk"
    assert same_json(encode_cluster_id("Mk3OEYBSD34fcwNTJENDM2Qk"), KAFKA_CLUSTER_ID)
    new = new_kafka_uuid()
    assert len(new) == 22 and "=" not in new
    assert len(base64.urlsafe_b64decode(new + "==")) == 16


@pytest.mark.parametrize("data, reason", [
    (b"not json", "not JSON"),
    (b"[1,2]", "not a JSON object"),
    (b'{"leader":"2","leader_epoch":1,"controller_epoch":1,"isr":[2]}', "'leader' must be an integer"),
    (b'{"leader":2,"leader_epoch":1,"controller_epoch":1,"isr":"2"}', "isr must be a list"),
    (b'{"leader":2,"leader_epoch":1,"controller_epoch":1,"isr":[true]}', "isr must be a list"),
])
def test_corrupt_partition_state_is_one_clear_error(data: bytes, reason: str) -> None:
    with pytest.raises(CorruptMetadata) as info:
        PartitionState.decode("/brokers/topics/t/partitions/0/state", data)
    assert "/brokers/topics/t/partitions/0/state" in str(info.value)
    assert reason in str(info.value)


def test_corrupt_topic_and_admin_nodes() -> None:
    with pytest.raises(CorruptMetadata, match="partition number"):
        TopicAssignment.decode("/t", b'{"version":3,"partitions":{"x":[1]}}', "t")
    for replicas in (b"[1,true]", b"[1.0]", b'["1"]', b"[[1]]", b"{}", b"1"):
        with pytest.raises(CorruptMetadata, match="list of integers"):
            TopicAssignment.decode("/t", b'{"version":3,"partitions":{"0":%s}}' % replicas, "t")
    assert TopicAssignment.decode("/t", b'{"version":3,"partitions":{"0":[]}}', "t").partitions \
        == {0: ()}
    with pytest.raises(CorruptMetadata, match="topic name"):
        decode_reassignment("/r", b'{"version":1,"partitions":[{"partition":0,"replicas":[1]}]}')


def test_paths_are_kafkas() -> None:
    assert layout.broker(3) == "/brokers/ids/3"
    assert layout.topic("t") == "/brokers/topics/t"
    assert layout.partition_state("t", 7) == "/brokers/topics/t/partitions/7/state"
    assert layout.delete_topic("t") == "/admin/delete_topics/t"
    assert layout.ISR_CHANGE_SEQUENTIAL == "/isr_change_notification/isr_change_"
    assert (layout.CONTROLLER, layout.CONTROLLER_EPOCH, layout.CLUSTER_ID) == (
        "/controller", "/controller_epoch", "/cluster/id")
    assert layout.REASSIGN_PARTITIONS == "/admin/reassign_partitions"
    assert layout.PREFERRED_REPLICA_ELECTION == "/admin/preferred_replica_election"


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "x" * 250, "sp ace", "ü"])
def test_illegal_topic_names(name: str) -> None:
    with pytest.raises(ValueError):
        layout.validate_topic(name)


def test_sorted_partitions_is_sorted() -> None:
    """The grouped sort gives exactly sorted()'s order: topic names that are prefixes of each
    other, that sort differently as text and by length, partitions past 9 (10 < 9 as text),
    duplicates, any iterable."""
    rng = random.Random(7)
    names = ["a", "a-1", "a.1", "a_1", "ab", "b", "B", "topic-10", "topic-9", "é", "z" * 200]
    tps = [TopicPartition(rng.choice(names), rng.randrange(1200)) for _ in range(5000)]
    assert sorted_partitions(tps) == sorted(tps)
    assert sorted_partitions(tp for tp in set(tps)) == sorted(set(tps))
    assert sorted_partitions({tp: None for tp in tps}) == sorted(set(tps))
    assert sorted_partitions([]) == []
    one = [TopicPartition("t", p) for p in (10, 2, 9, 0, 100)]
    assert sorted_partitions(one) == [TopicPartition("t", p) for p in (0, 2, 9, 10, 100)]
