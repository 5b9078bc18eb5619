"""What a broker process composes a BrokerNode with: the registration it writes (its advertised
listeners, as Kafka's brokers register them) and a handler of its own in front of the replica
manager's, which sees every controller request (the process keeps its metadata cache so)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

import coordinator
from coordinator.codecs import BrokerInfo, TopicPartition
from interbroker.channel import RequestHandler
from interbroker.requests import UpdateMetadataRequest
from node.broker_node import BrokerNode
from replication.log import Log, LogConfig
from statemachines.in_process import InProcessNetwork
from statemachines.participant import Participant
from tests.recording_broker import RecordingBroker
from tests.waiting import wait_until

from ._util import batch


def test_a_participant_writes_the_registration_it_is_given() -> None:
    url = f"memory://registration-{uuid.uuid4().hex}"
    info = BrokerInfo(id=4, host="h", port=19092, rack="r",
                      endpoints=("PLAINTEXT://h:19092", "INTERNAL://h:19093"),
                      security_protocol_map={"PLAINTEXT": "PLAINTEXT", "INTERNAL": "PLAINTEXT"})
    p = Participant(url, 4, handler=RecordingBroker, registration=info).start()
    try:
        data, _ = p.coordinator.get("/brokers/ids/4")
        node = json.loads(data)
        assert node["endpoints"] == ["PLAINTEXT://h:19092", "INTERNAL://h:19093"]
        assert node["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT",
                                                          "INTERNAL": "PLAINTEXT"}
        assert (node["host"], node["port"], node["rack"]) == ("h", 19092, "r")
    finally:
        p.close()
    with pytest.raises(ValueError, match="broker 4 given to broker 5"):
        Participant(url, 5, handler=RecordingBroker, registration=info)


class Watching:
    """A handler in front of the replica manager's that notes the UpdateMetadata it passes."""

    def __init__(self, inner: RequestHandler) -> None:
        self.inner = inner
        self.metadata: list[UpdateMetadataRequest] = []

    def handle_leader_and_isr(self, request):  # noqa: ANN001, ANN201
        return self.inner.handle_leader_and_isr(request)

    def handle_update_metadata(self, request):  # noqa: ANN001, ANN201
        self.metadata.append(request)
        return self.inner.handle_update_metadata(request)

    def handle_stop_replica(self, request):  # noqa: ANN001, ANN201
        return self.inner.handle_stop_replica(request)


def test_a_broker_node_puts_a_wrapping_handler_in_front_of_its_replica_manager(
        tmp_path: Path) -> None:
    url = f"memory://wrapped-{uuid.uuid4().hex}"
    wrappers: list[Watching] = []

    def wrap(handler: RequestHandler) -> RequestHandler:
        wrappers.append(Watching(handler))
        return wrappers[-1]

    node = BrokerNode(url, 1, tmp_path, network=InProcessNetwork(), transport={},
                      registration=BrokerInfo(id=1, host="127.0.0.1", port=1234),
                      wrap_handler=wrap).start()
    try:
        client = coordinator.connect(url)
        from coordinator.admin import Admin

        Admin(client).create_topic("t", 1, 1)
        (watching,) = wrappers
        wait_until(lambda: any(p.topic == "t" for m in watching.metadata for p in m.partitions),
                   message="the topic's metadata through the wrapper")
        assert node.replica_manager is not None
        wait_until(lambda: node.replica_manager.status(TopicPartition("t", 0)) is not None)
        data, _ = client.get("/brokers/ids/1")
        assert json.loads(data)["port"] == 1234
        client.close()
    finally:
        node.shutdown()


def test_max_timestamp_is_the_largest_and_where_it_is(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", config=LogConfig(segment_bytes=2 * len(batch(2))))
    assert log.max_timestamp() is None
    for ts in (5, 9, 7):
        log.append_as_leader(batch(2, timestamp=ts), leader_epoch=0)
    assert log.max_timestamp() == (9, 3)
    log.close()
    assert Log.open(tmp_path / "t-0").max_timestamp() == (9, 3)
