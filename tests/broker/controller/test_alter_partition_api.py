"""AlterPartition (key 56) and AllocateProducerIds (key 67) over the wire, at a partctl broker
that is the active controller, as a Kafka 3.9 broker sends them to its ZooKeeper-mode
controller: a stale broker epoch is refused whole, a proposal of the ISR already stored is
answered with it (leader, ISR, partition epoch) and writes nothing, a stale partition epoch is
INVALID_UPDATE_VERSION, and AllocateProducerIds hands out consecutive blocks of 1000 ids."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

import coordinator
from broker.controller_channel import topic_uuid
from coordinator.codecs import TopicPartition
from coordinator.metadata import MetadataClient
from tests.broker.processes import BrokerProcess, create_topic, start_broker
from tests.broker.wire_client import RawClient, request, request_module
from tests.servers import Server

pytestmark = pytest.mark.servers


@pytest.fixture(scope="module")
def broker(zookeeper_server: Server, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[BrokerProcess]:
    process = start_broker(Path(tmp_path_factory.mktemp("alter-partition")), zookeeper_server)
    yield process
    assert process.stop() == 0, process.log()[-3000:]


def _epoch(md: MetadataClient) -> int:
    stat = md.coordinator.exists("/brokers/ids/1")
    assert stat is not None
    return stat.create_id


def _alter(broker: BrokerProcess, broker_epoch: int, topic_id: str, isr: tuple[int, ...],
           leader_epoch: int, partition_epoch: int):  # type: ignore[no-untyped-def]
    m = request_module(56, 3)
    body = request(56, 3, broker_id=1, broker_epoch=broker_epoch, topics=(m.TopicData(
        topic_id=topic_uuid(topic_id), partitions=(m.PartitionData(
            partition_index=0, leader_epoch=leader_epoch, new_isr_with_epochs=tuple(
                m.BrokerState(broker_id=b, broker_epoch=-1) for b in isr),
            leader_recovery_state=0, partition_epoch=partition_epoch),)),))
    with RawClient(broker.address) as client:
        return client.call(body)


def test_alter_partition_at_the_controller(broker: BrokerProcess) -> None:
    name = f"ap-{uuid.uuid4().hex[:8]}"
    create_topic(broker, name, 1)
    md = MetadataClient(coordinator.connect(broker.coordinator_url, timeout=10))
    try:
        tp = TopicPartition(name, 0)
        stored = md.partition_states([tp])[tp]
        assert stored is not None
        topic_id = md.assignments([name])[name].value.topic_id
        assert topic_id is not None
        epoch = _epoch(md)
        state = stored.value
        stale = _alter(broker, epoch + 1, topic_id, (1,), state.leader_epoch, stored.version)
        assert stale.error_code == ErrorCode.stale_broker_epoch
        same = _alter(broker, epoch, topic_id, tuple(state.isr), state.leader_epoch,
                      stored.version)
        assert same.error_code == ErrorCode.none
        (answer,) = same.topics[0].partitions
        assert (answer.error_code, answer.leader_id, tuple(answer.isr), answer.partition_epoch
                ) == (ErrorCode.none, 1, (1,), stored.version)
        assert same.topics[0].topic_id == topic_uuid(topic_id)
        old = _alter(broker, epoch, topic_id, (1,), state.leader_epoch - 1, stored.version)
        assert old.topics[0].partitions[0].error_code == ErrorCode.fenced_leader_epoch
        for missing in ("AAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAQ"):  # zero, unknown
            unknown = _alter(broker, epoch, missing, (1,), 0, 0)
            assert unknown.topics[0].partitions[0].error_code == ErrorCode.unknown_topic_id
        assert md.partition_states([tp])[tp].version == stored.version  # nothing written
    finally:
        md.coordinator.close()


def test_allocate_producer_ids_at_the_controller(broker: BrokerProcess) -> None:
    md = MetadataClient(coordinator.connect(broker.coordinator_url, timeout=10))
    try:
        epoch = _epoch(md)
        with RawClient(broker.address) as client:
            first = client.call(request(67, 0, broker_id=1, broker_epoch=epoch))
            second = client.call(request(67, 0, broker_id=1, broker_epoch=epoch))
            stale = client.call(request(67, 0, broker_id=1, broker_epoch=epoch - 1))
    finally:
        md.coordinator.close()
    assert (first.error_code, first.producer_id_len) == (ErrorCode.none, 1000)
    assert second.producer_id_start == first.producer_id_start + 1000
    assert stale.error_code == ErrorCode.stale_broker_epoch
