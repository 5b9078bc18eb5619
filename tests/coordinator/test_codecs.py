"""Kafka's exact JSON shapes decode, and re-encode to the same JSON."""

from __future__ import annotations

import base64
import json
import random
from typing import Any, NamedTuple

import pytest

from coordinator import layout
from coordinator.codecs import (
    PRODUCER_ID_BLOCK_SIZE,
    BrokerInfo,
    ControllerInfo,
    CorruptMetadata,
    PartitionStateNode,
    ProducerIdBlock,
    ReassignmentOwner,
    TopicAssignment,
    TopicPartition,
    decode_cluster_id,
    decode_entity_config,
    decode_epoch,
    decode_partition_state,
    decode_partitions,
    decode_reassignment,
    encode_cluster_id,
    encode_entity_config,
    encode_epoch,
    encode_partition_state,
    encode_partitions,
    encode_reassignment,
    new_kafka_uuid,
    sorted_partitions,
)

# As Kafka's ZooKeeper mode writes them (key order as Kafka's Json.encode produced it).
KAFKA_BROKER = (b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
                b'"endpoints":["PLAINTEXT://kafka-1.example:9092"],"jmx_port":-1,"port":9092,'
                b'"host":"kafka-1.example","version":5,"timestamp":"1700000000123","rack":"r1"}')
KAFKA_CONTROLLER_V1 = b'{"version":1,"brokerid":2,"timestamp":"1700000000456"}'  # before 3.4
# Kafka 3.4+ (ZkData.scala's ControllerZNode.encode, field order included).
KAFKA_CONTROLLER = (b'{"version":2,"brokerid":2,"timestamp":"1700000000456",'
                    b'"kraftControllerEpoch":-1}')
KAFKA_TOPIC_CONFIG = b'{"version":1,"config":{}}'
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
    assert info.kraft_controller_epoch == -1 and not info.extra
    assert info.encode() == KAFKA_CONTROLLER  # byte for byte, Kafka's field order
    assert isinstance(json.loads(ControllerInfo(broker_id=1).encode())["timestamp"], str)


def test_controller_is_written_as_version_2_and_version_1_is_still_read() -> None:
    assert ControllerInfo(broker_id=2, timestamp="1700000000456").encode() == KAFKA_CONTROLLER
    old = ControllerInfo.decode("/controller", KAFKA_CONTROLLER_V1)
    assert (old.broker_id, old.timestamp, old.kraft_controller_epoch) == (2, "1700000000456", -1)
    assert old.encode() == KAFKA_CONTROLLER  # rewritten in the current form
    migrating = ControllerInfo.decode(
        "/controller", b'{"version":2,"brokerid":3000,"timestamp":"1","kraftControllerEpoch":7}')
    assert (migrating.broker_id, migrating.kraft_controller_epoch) == (3000, 7)
    with pytest.raises(CorruptMetadata, match="kraftControllerEpoch"):
        ControllerInfo.decode("/controller", b'{"brokerid":1,"kraftControllerEpoch":"x"}')


def test_topic_config_is_kafkas_config_entity() -> None:
    assert encode_entity_config({}) == KAFKA_TOPIC_CONFIG
    assert decode_entity_config("/config/topics/t", KAFKA_TOPIC_CONFIG) == {}
    data = encode_entity_config({"retention.ms": "1000"})
    assert data == b'{"version":1,"config":{"retention.ms":"1000"}}'
    assert decode_entity_config("/config/topics/t", data) == {"retention.ms": "1000"}
    with pytest.raises(CorruptMetadata, match="/config/topics/t"):
        decode_entity_config("/config/topics/t", b'{"version":1,"config":{"a":1}}')


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
    state = PartitionStateNode.decode("/s", KAFKA_STATE)
    assert (state.leader, state.leader_epoch, state.controller_epoch, state.isr) == (2, 12, 7, (2, 3, 1))
    assert same_json(state.encode(), KAFKA_STATE)
    newer = json.loads(KAFKA_STATE)
    newer["leader_recovery_state"] = 1
    again = PartitionStateNode.decode("/s", json.dumps(newer).encode())
    assert json.loads(again.encode()) == newer
    no_leader = PartitionStateNode(leader=-1, leader_epoch=3, isr=(), controller_epoch=1)
    assert json.loads(no_leader.encode()) == {"version": 1, "leader": -1, "leader_epoch": 3,
                                              "controller_epoch": 1, "isr": []}


class Held(NamedTuple):
    """A controller's own per-partition value (as elections.LeaderAndIsr): the fast paths
    take and give the fields positionally."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    partition_epoch: int = 0


def _json_state(leader: int, leader_epoch: int, isr: tuple[int, ...], epoch: int) -> bytes:
    return json.dumps({"version": 1, "leader": leader, "leader_epoch": leader_epoch,
                       "controller_epoch": epoch, "isr": list(isr)},
                      separators=(",", ":")).encode()


@pytest.mark.parametrize("fields", [(1, 0, (1, 2, 3), 1), (-1, 17, (3,), 12), (1002, 3, (), 2)])
def test_partition_state_bytes_are_what_json_gives_and_decode_back(
    fields: tuple[int, int, tuple[int, ...], int],
) -> None:
    leader, leader_epoch, isr, epoch = fields
    want = _json_state(*fields)
    state = PartitionStateNode(leader=leader, leader_epoch=leader_epoch, isr=isr,
                               controller_epoch=epoch)
    assert encode_partition_state(state) == want
    assert state.encode() == want
    assert encode_partition_state(Held(leader, leader_epoch, isr, epoch)) == want
    back = decode_partition_state(TopicPartition("t", 0), want, 7, Held)
    assert back == Held(leader, leader_epoch, isr, epoch, 7) and type(back.isr) is tuple


def test_partition_state_bytes_stay_json_past_the_isr_cache_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import coordinator.codecs as codecs

    monkeypatch.setattr(codecs, "_ISR_JSON", {})
    monkeypatch.setattr(codecs, "_ISR_JSON_MAX", 2)
    isrs = [(1,), (1, 2), (2, 1), (3, 2, 1), (1, 2), ()]
    for epoch, isr in enumerate(isrs * 2):
        leader = isr[0] if isr else -1
        assert encode_partition_state(Held(leader, epoch, isr, 3)) == _json_state(
            leader, epoch, isr, 3)
        assert len(codecs._ISR_JSON) <= 2


def test_partition_state_with_extra_fields_or_a_list_isr_encodes_as_json_does() -> None:
    extra = PartitionStateNode(leader=2, leader_epoch=1, isr=(2, 1), controller_epoch=3,
                               extra={"leader_recovery_state": 0})
    assert json.loads(extra.encode()) == {"leader_recovery_state": 0, "version": 1, "leader": 2,
                                          "leader_epoch": 1, "controller_epoch": 3, "isr": [2, 1]}
    listed = PartitionStateNode(leader=2, leader_epoch=1, isr=[2, 1], controller_epoch=3)  # type: ignore[arg-type]
    assert listed.encode() == _json_state(2, 1, (2, 1), 3)


def test_odd_partition_state_nodes_decode_through_the_checked_path() -> None:
    tp0 = TopicPartition("t", 0)
    extra = PartitionStateNode(leader=2, leader_epoch=1, isr=(2, 1), controller_epoch=3,
                               extra={"leader_recovery_state": 0}).encode()
    assert decode_partition_state(tp0, extra, 1, Held).isr == (2, 1)
    assert decode_partition_state(tp0, KAFKA_STATE, 5, Held) == Held(2, 12, (2, 3, 1), 7, 5)
    assert decode_partition_state(tp0, b" \n" + KAFKA_STATE + b" ", 5, Held).leader == 2
    state = _json_state(1, 0, (1,), 1)
    for bad in (b"not json", b"[]", b"", state + b"{}", state[:-1], b'{"leader": "1", '
                b'"leader_epoch": 0, "controller_epoch": 1, "isr": [1]}', b"\xff"):
        with pytest.raises(CorruptMetadata) as info:
            decode_partition_state(tp0, bad, 1, Held)
        assert layout.partition_state("t", 0) in str(info.value)


def test_partition_state_read_from_its_bytes_or_the_cache_is_what_its_json_gives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The bytes partctl writes are read without JSON (a pattern of them) and every
    well-formed node's fields are kept for the next node of the same bytes (a bounded cache):
    both give what the JSON path gives, and near misses of the pattern (a leading zero, a
    number too long for it, another key order, spaces) take that path."""
    import coordinator.codecs as codecs

    monkeypatch.setattr(codecs, "_STATES", {})
    monkeypatch.setattr(codecs, "_STATES_MAX", 3)
    tp0 = TopicPartition("t", 0)
    big = 10 ** 30
    nodes = [_json_state(*f) for f in [(1, 0, (1, 2, 3), 1), (-1, 17, (3,), 12),
                                       (1002, 3, (), 2), (big, 2, (big, 0), 0), (-5, -1, (1,), 0)]]
    nodes += [b'{"version":1,"leader":01,"leader_epoch":0,"controller_epoch":0,"isr":[1]}',
              b'{"version":2,"leader":1,"leader_epoch":0,"controller_epoch":0,"isr":[1]}',
              b'{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":0,"isr":[1,]}',
              b'{"version":1, "leader":1,"leader_epoch":0,"controller_epoch":0,"isr":[1]}',
              KAFKA_STATE]
    assert codecs._CANONICAL_STATE(nodes[0]) and not codecs._CANONICAL_STATE(nodes[3])
    for _ in range(2):  # the second time from the cache where it kept them
        for data in nodes:
            try:
                want = PartitionStateNode.decode("/p", data)
            except CorruptMetadata:
                with pytest.raises(CorruptMetadata):
                    decode_partition_state(tp0, data, 4, Held)
                continue
            got = decode_partition_state(tp0, data, 4, Held)
            assert got == Held(want.leader, want.leader_epoch, want.isr, want.controller_epoch, 4)
            assert type(got.isr) is tuple
            assert len(codecs._STATES) <= 3
    assert decode_partition_state(tp0, bytearray(nodes[0]), 9, Held) == Held(1, 0, (1, 2, 3), 1, 9)


@pytest.mark.parametrize("partitions", [
    {"0": [1, 2], "1": [2, 3]}, {"0": []}, {"7": [0, 2147483647]},
    {"0": [1, 1]}, {"x": [1]}, {"": [1]}, {"-1": [1]}, {"2147483648": [1]}, {"0001": [2]},
    {"0": [1], "01": [2]}, {"٣": [1]}, {"0": [-1]}, {"0": [2147483648]}, {"0": [True]},
    {"0": [1.0]}, {"0": "1"}, {"0": (1,)}, {"0": list(range(1001))}, {"0": [1], "1": None}, {},
])
def test_assignment_checked_whole_says_what_the_loop_says(partitions: dict[str, Any]) -> None:
    """A topic's partitions are checked over the whole object at once, the loop only reading
    what that check refuses: the same map, or the same CorruptMetadata, either way."""
    import coordinator.codecs as codecs

    data = json.dumps({"version": 3, "partitions": partitions}).encode()
    path = layout.topic("t")

    def outcome() -> Any:
        try:
            return TopicAssignment.decode(path, data, "t").partitions
        except CorruptMetadata as exc:
            return str(exc)

    fast = outcome()
    with pytest.MonkeyPatch.context() as m:
        m.setattr(codecs, "_partition_map_checked", lambda value: None)
        assert outcome() == fast


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
    assert encode_cluster_id("Mk3OEYBSD34fcwNTJENDM2Qk") == KAFKA_CLUSTER_ID  # byte for byte
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
        PartitionStateNode.decode("/brokers/topics/t/partitions/0/state", data)
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
    assert layout.topic_config("t") == "/config/topics/t"


def test_persistent_paths_are_those_a_kafka_broker_creates() -> None:
    # Kafka 3.9's ZkData.PersistentZkPaths, in its order (ConfigType.ALL last), and /cluster
    assert layout.PERSISTENT_PATHS == (
        "/consumers", "/brokers/ids", "/brokers/topics", "/config/changes",
        "/admin/delete_topics", "/brokers/seqid", "/isr_change_notification",
        "/latest_producer_id_block", "/log_dir_event_notification", "/config/topics",
        "/config/clients", "/config/users", "/config/brokers", "/config/ips", "/cluster")


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


def test_the_reassignment_owner_node_round_trips() -> None:
    owner = ReassignmentOwner(run="9f" * 16, digest="ab" * 32, partitions=8, plan="plan.json",
                              host="ops1", pid=4242, timestamp="1700000000000")
    data = owner.encode()
    assert json.loads(data) == {"version": 1, "run": "9f" * 16, "plan": "plan.json",
                                "digest": "ab" * 32, "partitions": 8, "host": "ops1",
                                "pid": 4242, "timestamp": "1700000000000"}
    assert ReassignmentOwner.decode(layout.REASSIGN_PARTITIONS_OWNER, data) == owner
    assert owner.describe() == ("plan plan.json (sha256 abababababab, 8 partition(s)), executed "
                                "by pid 4242 on ops1 since 2023-11-14 22:13:20 UTC")
    with pytest.raises(CorruptMetadata, match="'run' must be a string"):
        ReassignmentOwner.decode(layout.REASSIGN_PARTITIONS_OWNER, b'{"digest":"x"}')


# As Kafka 3.9's ProducerIdBlockZNode.generateProducerIdBlockJson writes it (Jackson, in the
# order of the map it is given; the ids are strings).
KAFKA_PRODUCER_ID_BLOCK = b'{"version":1,"broker":2,"block_start":"1000","block_end":"1999"}'


def test_the_producer_id_block_is_kafkas_json() -> None:
    path = layout.LATEST_PRODUCER_ID_BLOCK
    block = ProducerIdBlock.decode(path, KAFKA_PRODUCER_ID_BLOCK)
    assert (block.broker, block.block_start, block.block_end) == (2, 1000, 1999)
    assert (block.size, block.next_block_start) == (PRODUCER_ID_BLOCK_SIZE, 2000)
    assert block.encode() == KAFKA_PRODUCER_ID_BLOCK
    # the largest ids survive as strings (a JSON number would lose them in many readers)
    top = ProducerIdBlock(broker=1, block_start=(1 << 63) - 1000, block_end=(1 << 63) - 1)
    assert json.loads(top.encode())["block_end"] == "9223372036854775807"
    assert ProducerIdBlock.decode(path, top.encode()) == top
    # a field a later version may add is kept
    extra = ProducerIdBlock.decode(path, KAFKA_PRODUCER_ID_BLOCK[:-1] + b',"x":1}')
    assert json.loads(extra.encode())["x"] == 1


@pytest.mark.parametrize("data", [
    b'{"version":1,"broker":2,"block_start":1000,"block_end":"1999"}',  # a number
    b'{"version":1,"broker":2,"block_start":"-1","block_end":"1999"}',
    b'{"version":1,"broker":2,"block_start":"2000","block_end":"1999"}',
    b'{"version":1,"broker":2,"block_start":"0","block_end":"9223372036854775808"}',
    b'{"version":1,"broker":"2","block_start":"0","block_end":"999"}',
    b'{"version":1,"block_start":"0","block_end":"999"}',
    b"not json",
])
def test_a_malformed_producer_id_block_is_corrupt_metadata(data: bytes) -> None:
    with pytest.raises(CorruptMetadata, match="latest_producer_id_block"):
        ProducerIdBlock.decode(layout.LATEST_PRODUCER_ID_BLOCK, data)
