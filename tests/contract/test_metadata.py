"""Kafka's metadata layout through the typed client, on every backend."""

from __future__ import annotations

import base64
import json
import threading

import pytest

from coordinator import Coordinator, SessionState, SetData, layout
from coordinator.codecs import BrokerInfo, PartitionStateNode, TopicAssignment, TopicPartition
from coordinator.metadata import (
    BrokerIdInUse,
    ControllerExists,
    ControllerMoved,
    MetadataClient,
    RequestInProgress,
    TopicExists,
    UnknownTopic,
)
from statemachines.participant import Participant
from tests.recording_broker import RecordingBroker
from tests.waiting import Recorder, wait_until


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic=topic, partition=partition)


def test_broker_registration_and_epochs(client: Coordinator, other: Coordinator, backend) -> None:  # noqa: ANN001
    md = MetadataClient(client)
    md.ensure_layout()
    e1 = md.register_broker(BrokerInfo(id=1, host="h1", port=9092, rack="r1"))
    e2 = MetadataClient(other).register_broker(BrokerInfo(id=2, host="h2", port=9092))
    assert e2 > e1 > 0
    brokers = MetadataClient(other).brokers()
    assert sorted(brokers) == [1, 2]
    assert brokers[1].epoch == e1 and brokers[1].info.rack == "r1"
    raw = json.loads(other.get("/brokers/ids/1")[0])
    assert raw["version"] == 5 and raw["endpoints"] == ["PLAINTEXT://h1:9092"]
    with pytest.raises(BrokerIdInUse):
        MetadataClient(other).register_broker(BrokerInfo(id=1, host="x", port=1))
    # a bounce is a new broker epoch
    states: Recorder[SessionState] = Recorder()
    client.add_listener(states)
    backend.expire(client)
    wait_until(lambda: 1 not in MetadataClient(other).brokers(), timeout=20)
    states.wait_for(lambda s: SessionState.LOST in s and s[-1] is SessionState.CONNECTED,
                    timeout=20, message="LOST, then a new session")
    e1b = MetadataClient(client).register_broker(BrokerInfo(id=1, host="h1", port=9092))
    assert e1b > e2


def test_controller_election_bumps_the_epoch_atomically(client: Coordinator, other: Coordinator) -> None:
    a, b = MetadataClient(client), MetadataClient(other)
    first = a.register_controller(1)
    assert first.epoch == 1
    data, epoch_stat = client.get("/controller_epoch")
    assert data == b"1"
    # the election's write id, as every later read and watch reports it
    assert first.revision == epoch_stat.modify_id > 0
    assert b.controller_epoch() == first
    info, stat = b.controller()
    assert info.broker_id == 1 and stat.ephemeral_owner == client.session_id
    with pytest.raises(ControllerExists) as lost:
        b.register_controller(2)
    assert lost.value.broker_id == 1
    assert b.controller_epoch().epoch == 1  # the loser changed nothing
    client.close()
    second = b.register_controller(2)
    assert second.epoch == 2 and second.version == first.version + 1
    assert b.controller()[0].broker_id == 2


def test_fenced_writes_fail_for_a_deposed_controller(client: Coordinator, other: Coordinator) -> None:
    old = MetadataClient(client)
    epoch = old.register_controller(1)
    old.ensure_layout()
    old.create_topic(TopicAssignment(topic="t", partitions={0: (1, 2)}))
    old.create_partition_states(epoch, {tp("t", 0): PartitionStateNode(
        leader=1, leader_epoch=0, isr=(1, 2), controller_epoch=epoch.epoch)})
    # another controller takes over (the old session lost /controller)
    client.delete("/controller")
    new = MetadataClient(other).register_controller(2)
    assert new.epoch == epoch.epoch + 1
    with pytest.raises(ControllerMoved):
        old.fenced(epoch, [SetData(path=layout.partition_state("t", 0), data=b"{}")])
    with pytest.raises(ControllerMoved):
        old.update_partition_states(epoch, {tp("t", 0): (PartitionStateNode(
            leader=2, leader_epoch=1, isr=(2,), controller_epoch=epoch.epoch), 0)})
    state = old.partition_states([tp("t", 0)])[tp("t", 0)]
    assert state.value.leader == 1 and state.version == 0


def test_topics_and_partition_states_in_bulk(client: Coordinator) -> None:
    md = MetadataClient(client)
    md.ensure_layout()
    epoch = md.register_controller(1)
    created = md.create_topic(TopicAssignment(topic="orders", partitions={0: (1, 2, 3), 1: (2, 3, 1)}))
    assert created.topic_id and len(created.topic_id) == 22
    with pytest.raises(TopicExists):
        md.create_topic(TopicAssignment(topic="orders", partitions={0: (1,)}))
    raw = json.loads(client.get("/brokers/topics/orders")[0])
    assert raw == {"version": 3, "topic_id": created.topic_id,
                   "partitions": {"0": [1, 2, 3], "1": [2, 3, 1]},
                   "adding_replicas": {}, "removing_replicas": {}}
    assert md.topics() == ["orders"]
    assigned = md.assignments(["orders", "missing"])
    assert list(assigned) == ["orders"] and assigned["orders"].value.partitions[1] == (2, 3, 1)

    states = {tp("orders", p): PartitionStateNode(leader=r[0], leader_epoch=0, isr=r,
                                                  controller_epoch=epoch.epoch)
              for p, r in {0: (1, 2, 3), 1: (2, 3, 1)}.items()}
    assert md.create_partition_states(epoch, states) == {tp("orders", 0): 0, tp("orders", 1): 0}
    assert md.partitions_of("orders") == [0, 1]
    read = md.partition_states([tp("orders", 0), tp("orders", 1), tp("orders", 9)])
    assert read[tp("orders", 9)] is None
    assert read[tp("orders", 0)].value == states[tp("orders", 0)]
    raw_state = json.loads(client.get("/brokers/topics/orders/partitions/1/state")[0])
    assert raw_state == {"version": 1, "leader": 2, "leader_epoch": 0,
                         "controller_epoch": epoch.epoch, "isr": [2, 3, 1]}

    new0 = PartitionStateNode(leader=2, leader_epoch=1, isr=(2, 3), controller_epoch=epoch.epoch)
    result = md.update_partition_states(epoch, {tp("orders", 0): (new0, 0),
                                                tp("orders", 1): (new0, 5)})
    assert result.finished == {tp("orders", 0): 1}
    assert result.retry == [tp("orders", 1)]
    assert md.partition_states([tp("orders", 0)])[tp("orders", 0)].value.leader == 2


def test_isr_change_notifications(client: Coordinator) -> None:
    md = MetadataClient(client)
    md.ensure_layout()
    epoch = md.register_controller(1)
    first = md.notify_isr_change([tp("a", 0), tp("a", 1)])
    second = md.notify_isr_change([tp("b", 0)])
    assert first.startswith("/isr_change_notification/isr_change_")
    assert len(first.rsplit("_", 1)[1]) == 10
    names = md.isr_change_notifications()
    assert names == [first.rsplit("/", 1)[1], second.rsplit("/", 1)[1]]
    read = md.read_isr_change_notifications(names)
    assert read[names[0]] == [tp("a", 0), tp("a", 1)] and read[names[1]] == [tp("b", 0)]
    md.delete_isr_change_notifications(epoch, names)
    assert md.isr_change_notifications() == []


def test_admin_request_nodes(client: Coordinator) -> None:
    md = MetadataClient(client)
    md.ensure_layout()
    epoch = md.register_controller(1)
    md.create_topic(TopicAssignment(topic="t", partitions={0: (1, 2)}))

    md.request_reassignment({tp("t", 0): (2, 3)})
    with pytest.raises(RequestInProgress):
        md.request_reassignment({tp("t", 0): (3, 4)})
    pending = md.reassignment()
    assert pending.value == {tp("t", 0): (2, 3)}
    md.update_reassignment(epoch, {}, pending.version)
    assert md.reassignment() is None

    md.request_preferred_election([tp("t", 0)])
    assert md.preferred_election() == [tp("t", 0)]
    with pytest.raises(RequestInProgress):
        md.request_preferred_election([tp("t", 0)])
    md.delete_preferred_election(epoch)
    assert md.preferred_election() is None

    with pytest.raises(UnknownTopic):
        md.request_topic_deletion("nope")
    md.request_topic_deletion("t")
    assert md.topics_to_delete() == ["t"]
    md.create_partition_states(epoch, {tp("t", 0): PartitionStateNode(
        leader=1, leader_epoch=0, isr=(1, 2), controller_epoch=epoch.epoch)})
    md.complete_topic_deletion(epoch, "t")
    assert md.topics() == [] and md.topics_to_delete() == []


def test_cluster_id_is_stable(client: Coordinator, other: Coordinator) -> None:
    first = MetadataClient(client).cluster_id()
    assert MetadataClient(other).cluster_id() == first
    assert json.loads(client.get("/cluster/id")[0]) == {"version": "1", "id": first}


def test_the_first_broker_start_creates_kafkas_persistent_paths_and_cluster_id(
        client: Coordinator, backend) -> None:  # noqa: ANN001
    assert client.exists(layout.CLUSTER_ID) is None
    first = Participant(backend.url(), 1, handler=RecordingBroker).start()
    try:
        data, stat = client.get(layout.CLUSTER_ID)
        cluster_id = first.cluster_id
        assert cluster_id is not None and len(cluster_id) == 22 and "=" not in cluster_id
        assert len(base64.urlsafe_b64decode(cluster_id + "==")) == 16  # a UUID's 16 bytes
        assert data == b'{"version":"1","id":"' + cluster_id.encode() + b'"}'
        for path in layout.PERSISTENT_PATHS:
            assert client.exists(path) is not None, path
        # a later broker reads it
        second = Participant(backend.url(), 2, handler=RecordingBroker).start()
        try:
            assert second.cluster_id == cluster_id
            assert client.get(layout.CLUSTER_ID)[1] == stat  # untouched
        finally:
            second.close()
    finally:
        first.close()


def test_an_existing_cluster_id_is_kept_and_concurrent_first_starts_agree(
        client: Coordinator, backend) -> None:  # noqa: ANN001
    sessions = [backend.connect() for _ in range(4)]
    barrier = threading.Barrier(len(sessions))
    ids: list[str] = []

    def start(c: Coordinator) -> None:
        barrier.wait()
        ids.append(MetadataClient(c).init_broker())

    threads = [threading.Thread(target=start, args=(c,)) for c in sessions]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(ids) == 4 and len(set(ids)) == 1
    data, stat = client.get(layout.CLUSTER_ID)
    assert stat.version == 0 and json.loads(data)["id"] == ids[0]
    # an id a Kafka cluster wrote is kept, never overwritten
    client.set(layout.CLUSTER_ID, b'{"version":"1","id":"Mk3OEYBSD34fcwNTJENDM2Qk"}')
    assert MetadataClient(backend.connect()).init_broker() == "Mk3OEYBSD34fcwNTJENDM2Qk"
    assert client.get(layout.CLUSTER_ID)[1].version == 1


def test_the_controller_node_is_kafkas_version_2(client: Coordinator) -> None:
    md = MetadataClient(client)
    md.ensure_layout()
    md.register_controller(3)
    obj = json.loads(client.get(layout.CONTROLLER)[0])
    assert list(obj) == ["version", "brokerid", "timestamp", "kraftControllerEpoch"]
    assert (obj["version"], obj["brokerid"], obj["kraftControllerEpoch"]) == (2, 3, -1)
    assert md.controller()[0].broker_id == 3


def test_a_topic_gets_its_config_node_and_loses_it_with_the_topic(client: Coordinator) -> None:
    md = MetadataClient(client)
    md.ensure_layout()
    epoch = md.register_controller(1)
    md.create_topic(TopicAssignment(topic="t", partitions={0: (1, 2)}))
    assert client.get(layout.topic_config("t"))[0] == b'{"version":1,"config":{}}'
    assert md.topic_config("t") == {}
    with pytest.raises(TopicExists):  # a second create changes nothing
        md.create_topic(TopicAssignment(topic="t", partitions={0: (3,)}),
                        config={"retention.ms": "1"})
    assert md.topic_config("t") == {} and md.assignments(["t"])["t"].value.partitions == {
        0: (1, 2)}
    # a config node left behind (a topic deleted by a tool that kept it) is replaced
    client.create(layout.topic_config("u"), b'{"version":1,"config":{"cleanup.policy":"x"}}')
    md.create_topic(TopicAssignment(topic="u", partitions={0: (1,)}),
                    config={"retention.ms": "1000"})
    assert md.topic_config("u") == {"retention.ms": "1000"}

    md.request_topic_deletion("t")
    md.create_partition_states(epoch, {tp("t", 0): PartitionStateNode(
        leader=1, leader_epoch=0, isr=(1, 2), controller_epoch=epoch.epoch)})
    md.complete_topic_deletion(epoch, "t")
    assert client.exists(layout.topic_config("t")) is None and md.topic_config("t") is None
    assert md.topics() == ["u"] and client.exists(layout.topic_config("u")) is not None


def test_reads_ride_out_a_short_connection_loss(backend) -> None:  # noqa: ANN001
    import threading

    client = backend.connect(proxied=True, session_timeout=10.0)
    md = MetadataClient(client)
    md.ensure_layout()
    md.register_broker(BrokerInfo(id=7, host="h", port=1))
    cut = threading.Thread(target=backend.drop, args=(client, 0.5))
    cut.start()
    try:
        import time

        time.sleep(0.1)  # the connection is down now; the read retries until it is back
        assert sorted(md.brokers()) == [7]
    finally:
        cut.join()
