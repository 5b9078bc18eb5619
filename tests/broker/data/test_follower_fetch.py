"""Followers fetching over Kafka's protocol: the leader's side of a follower Fetch (replica id
>= 0) on the real server, and the network fetch endpoint driving a real follower replica manager
against it: diverging epochs answered and acted on, the fallback to OffsetsForLeaderEpoch
against a leader whose Fetch stops below version 12, epoch fencing, and a follower's fetch
moving the HW that completes an acks=all produce."""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from broker.apis import ApiRegistry, default_registry
from broker.fetch_client import NetworkFetchEndpoint, NetworkTransport
from coordinator.codecs import TopicPartition
from interbroker.errors import ErrorCode as DataErrorCode
from kafkaclient.messages import build
from replication.protocol import PartitionFetch
from tests.broker.harness import InProcessBroker
from tests.broker.protocol.test_apis import only_partition, produce, records
from tests.broker.wire_client import RawClient, request, request_module
from tests.replication.test_replica_manager_cluster import batch_signature
from tests.waiting import wait_until

TP = TopicPartition("t", 0)


@pytest.fixture
def leader(tmp_path: Path) -> Iterator[InProcessBroker]:
    b = InProcessBroker(tmp_path / "leader")
    yield b
    b.close()


def follower_fetch(*, replica_id: int = 2, offset: int = 0, epoch: int = -1,
                   last_fetched_epoch: int = -1, max_wait_ms: int = 0, version: int = 12,
                   topic: str = "t", partition: int = 0) -> object:
    m = request_module(1, version)
    part = build(m.FetchPartition, partition=partition, current_leader_epoch=epoch, fetch_offset=offset,
                 last_fetched_epoch=last_fetched_epoch, log_start_offset=-1,
                 partition_max_bytes=1 << 20)
    return request(1, version, replica_id=replica_id, max_wait=timedelta(milliseconds=max_wait_ms),
                   min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
                   session_epoch=-1, topics=(build(m.FetchTopic, topic=topic, partitions=(part,)),),
                   forgotten_topics_data=(), rack_id="")


def produce_one(client: RawClient, n: int, *, acks: int = 1) -> None:
    response = client.call(produce(acks=acks, data={("t", 0): records(n)}))
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.none


# --- the leader's side ----------------------------------------------------------------------


def test_a_follower_reads_past_the_hw_and_its_next_fetch_completes_an_acks_all_produce(
        leader: InProcessBroker) -> None:
    leader.set_partition("t", 0, replicas=(1, 2))
    with RawClient(leader.address) as client, RawClient(leader.address) as producer:
        correlation = producer.send(produce(acks=-1, timeout_ms=30_000,
                                            data={("t", 0): records(3)}))
        wait_until(lambda: leader.replica_manager.status(TP).log_end_offset == 3)
        first = only_partition(client.call(follower_fetch(offset=0)))
        # uncommitted records go to the follower (up to the log end, not the HW)
        assert (first.error_code, first.high_watermark, len(first.records) > 0) == (
            ErrorCode.none, 0, True)
        producer.sock.settimeout(0.3)
        with pytest.raises(TimeoutError):  # acks=all: waits for the follower
            producer.sock.recv(1)
        producer.sock.settimeout(10)
        second = only_partition(client.call(follower_fetch(offset=3)))
        assert (second.error_code, second.high_watermark) == (ErrorCode.none, 3)
        got, response = producer.receive(0, 9)
        assert got == correlation
        p = response.responses[0].partition_responses[0]
        assert (p.error_code, p.base_offset) == (ErrorCode.none, 0)
    status = leader.replica_manager.status(TP)
    assert status is not None and status.high_watermark == 3 and status.isr == (1, 2)


def test_a_follower_outside_the_isr_joins_it_once_caught_up(leader: InProcessBroker) -> None:
    leader.set_partition("t", 0, replicas=(1, 2), isr=(1,))
    with RawClient(leader.address) as client:
        produce_one(client, 2)
        assert only_partition(client.call(follower_fetch(offset=0))).error_code == ErrorCode.none
        assert leader.replica_manager.status(TP).isr == (1,)
        assert only_partition(client.call(follower_fetch(offset=2))).high_watermark == 2
    assert leader.replica_manager.status(TP).isr == (1, 2)


def test_a_follower_fetch_checks_the_leader_epoch_and_leadership(
        leader: InProcessBroker) -> None:
    leader.set_partition("t", 0, replicas=(1, 2), leader_epoch=3)
    with RawClient(leader.address) as client:
        assert only_partition(client.call(follower_fetch(epoch=2))).error_code == \
            ErrorCode.fenced_leader_epoch
        assert only_partition(client.call(follower_fetch(epoch=4))).error_code == \
            ErrorCode.unknown_leader_epoch
        assert only_partition(client.call(follower_fetch(epoch=3))).error_code == ErrorCode.none
        leader.set_partition("t", 0, leader=2, replicas=(1, 2), leader_epoch=4,
                             partition_epoch=1)
        assert only_partition(client.call(follower_fetch(epoch=4))).error_code == \
            ErrorCode.not_leader_or_follower


def test_a_diverging_epoch_is_answered_with_where_the_leaders_copy_ends(
        leader: InProcessBroker) -> None:
    """The leader wrote 3 records at epoch 0 and 2 at epoch 2. A follower whose last batch is
    of epoch 1 (which the leader never had) is told epoch 0 ends at 3; one whose epoch 0 goes
    on past the leader's copy (fetching at 4) is told the same; one that agrees gets records;
    one naming an epoch above any the leader has is out of range."""
    leader.set_partition("t", 0, replicas=(1, 2))
    with RawClient(leader.address) as client:
        produce_one(client, 3)
        leader.set_partition("t", 0, replicas=(1, 2), leader_epoch=2, partition_epoch=1)
        produce_one(client, 2)
        for last, offset in ((1, 5), (0, 4)):
            p = only_partition(client.call(
                follower_fetch(offset=offset, epoch=2, last_fetched_epoch=last)))
            assert (p.error_code, p.diverging_epoch.epoch, p.diverging_epoch.end_offset) == (
                ErrorCode.none, 0, 3)
            assert not p.records
        agrees = only_partition(client.call(follower_fetch(offset=3, epoch=2,
                                                           last_fetched_epoch=0)))
        assert (agrees.error_code, agrees.diverging_epoch.epoch) == (ErrorCode.none, -1)
        assert agrees.records
        unknown = only_partition(client.call(follower_fetch(offset=0, epoch=2,
                                                            last_fetched_epoch=7)))
        # an epoch the leader knows nothing of (above its latest): out of range, as in Kafka
        assert (unknown.error_code, unknown.diverging_epoch.epoch) == (
            ErrorCode.offset_out_of_range, -1)


def test_a_follower_long_poll_is_parked_until_an_append(leader: InProcessBroker) -> None:
    leader.set_partition("t", 0, replicas=(1, 2))
    with RawClient(leader.address) as poller, RawClient(leader.address) as producer:
        correlation = poller.send(follower_fetch(offset=0, max_wait_ms=60_000))
        poller.sock.settimeout(0.3)
        with pytest.raises(TimeoutError):
            poller.sock.recv(1)
        poller.sock.settimeout(10)
        produce_one(producer, 1)
        got, response = poller.receive(1, 12)
        assert got == correlation and only_partition(response).records


def test_offset_for_leader_epoch_answers_a_follower(leader: InProcessBroker) -> None:
    leader.set_partition("t", 0, replicas=(1, 2))
    with RawClient(leader.address) as client:
        produce_one(client, 3)
        m = request_module(23, 4)
        ask = request(23, 4, replica_id=2, topics=(build(
            m.OffsetForLeaderTopic, topic="t", partitions=(build(
                m.OffsetForLeaderPartition, partition=0, current_leader_epoch=0,
                leader_epoch=0),)),))
        (p,) = client.call(ask).topics[0].partitions
        assert (p.error_code, p.leader_epoch, p.end_offset) == (ErrorCode.none, 0, 3)


def test_offset_for_leader_epoch_from_a_follower_only_for_the_debugging_id(
        leader: InProcessBroker) -> None:
    """Broker 1 wrote 2 records leading epoch 0, then follows broker 2 at epoch 1: a follower
    (replica id 3) or a consumer (-1) asking it is told NOT_LEADER_OR_FOLLOWER; the debugging
    id (-2) is answered from its log."""
    leader.set_partition("t", 0, replicas=(1, 2, 3))
    with RawClient(leader.address) as client:
        produce_one(client, 2)
        leader.set_partition("t", 0, leader=2, replicas=(1, 2, 3), leader_epoch=1,
                             partition_epoch=1)
        m = request_module(23, 4)
        answers = {}
        for replica_id in (3, -1, -2):
            ask = request(23, 4, replica_id=replica_id, topics=(build(
                m.OffsetForLeaderTopic, topic="t", partitions=(build(
                    m.OffsetForLeaderPartition, partition=0, current_leader_epoch=1,
                    leader_epoch=0),)),))
            (p,) = client.call(ask).topics[0].partitions
            answers[replica_id] = (p.error_code, p.leader_epoch, p.end_offset)
    assert answers == {3: (ErrorCode.not_leader_or_follower, -1, -1),
                       -1: (ErrorCode.not_leader_or_follower, -1, -1),
                       -2: (ErrorCode.none, 0, 2)}


# --- the network endpoint -------------------------------------------------------------------


def _registry_with_fetch_up_to(version: int) -> ApiRegistry:
    apis = [dataclasses.replace(api, max_version=version) if api.key == 1 else api
            for api in default_registry().values()]
    return ApiRegistry(apis)


def _diverged_pair(tmp_path: Path, registry: ApiRegistry | None
                   ) -> tuple[InProcessBroker, InProcessBroker]:
    """Leader 1 with 3 records at epoch 0 and 2 at epoch 2; broker 2 with 4 records it wrote as
    leader at epoch 1 (never replicated), then told to follow 1 at epoch 2."""
    leader = InProcessBroker(tmp_path / "leader", registry=registry)
    transport = NetworkTransport(2, lambda b: leader.address if b == 1 else None,
                                 max_wait_ms=100)
    follower = InProcessBroker(tmp_path / "follower", broker_id=2, transport=transport)
    follower.transport = transport  # type: ignore[attr-defined]
    leader.set_partition("t", 0, replicas=(1, 2), isr=(1,))
    follower.set_partition("t", 0, leader=2, replicas=(1, 2), isr=(2,), leader_epoch=1)
    with RawClient(leader.address) as to_leader, RawClient(follower.address) as to_follower:
        produce_one(to_leader, 3)
        produce_one(to_follower, 4)
        leader.set_partition("t", 0, replicas=(1, 2), isr=(1,), leader_epoch=2,
                             partition_epoch=1)
        produce_one(to_leader, 2)
    follower.set_partition("t", 0, leader=1, replicas=(1, 2), isr=(1,), leader_epoch=2,
                           partition_epoch=1)
    return leader, follower


def _log(broker: InProcessBroker):  # noqa: ANN202
    partition = broker.replica_manager.partition(TP)
    assert partition is not None
    return partition.log


@pytest.mark.parametrize("fetch_version", [12, 11], ids=["diverging-epoch", "epoch-rounds"])
def test_a_diverged_follower_converges_over_the_network(tmp_path: Path, fetch_version: int
                                                        ) -> None:
    """Against a leader serving Fetch 12 the follower truncates on the diverging epoch its
    fetch is answered with, asking no OffsetsForLeaderEpoch; against one whose Fetch stops at
    11 it runs the OffsetsForLeaderEpoch rounds first. Either way it ends with the leader's
    batches, joins the ISR and learns the HW."""
    registry = _registry_with_fetch_up_to(fetch_version) if fetch_version < 12 else None
    leader, follower = _diverged_pair(tmp_path, registry)
    try:
        endpoint = follower.transport[1]  # type: ignore[attr-defined]
        assert endpoint.truncates_on_fetch is (fetch_version >= 12)
        fetcher = follower.replica_manager.fetcher
        # the follower can learn the HW before the fetch that brings it back into the ISR
        wait_until(lambda: batch_signature(_log(follower)) == batch_signature(_log(leader))
                   and follower.replica_manager.status(TP).high_watermark == 5
                   and leader.replica_manager.status(TP).isr == (1, 2),
                   message="the follower converged and is in the ISR")
        if fetch_version >= 12:
            assert fetcher.diverging_epochs >= 1 and fetcher.epoch_requests == 0
        else:
            assert fetcher.diverging_epochs == 0 and fetcher.epoch_requests >= 1
    finally:
        follower.close()
        follower.transport.close()  # type: ignore[attr-defined]
        leader.close()


def test_a_network_follower_completes_an_acks_all_produce(tmp_path: Path) -> None:
    leader = InProcessBroker(tmp_path / "leader")
    transport = NetworkTransport(2, lambda b: leader.address if b == 1 else None,
                                 max_wait_ms=500)
    follower = InProcessBroker(tmp_path / "follower", broker_id=2, transport=transport)
    try:
        leader.set_partition("t", 0, replicas=(1, 2))
        follower.set_partition("t", 0, leader=1, replicas=(1, 2))
        wait_until(lambda: transport[1] is not None and follower.replica_manager.fetcher
                   .positions()[TP].fetch_offset == 0)
        with RawClient(leader.address) as client:
            for n in (1, 3, 2):  # each waits for the follower's long poll to take it
                produce_one(client, n, acks=-1)
        assert leader.replica_manager.status(TP).high_watermark == 6
        wait_until(lambda: follower.replica_manager.status(TP).high_watermark == 6)
        assert batch_signature(_log(follower)) == batch_signature(_log(leader))
    finally:
        follower.close()
        transport.close()
        leader.close()


def test_a_leader_that_never_answers_holds_up_only_its_own_partitions(tmp_path: Path) -> None:
    """Broker 2 follows t-0 from broker 1 and t-1 from "broker 3", a socket that accepts
    connections and never answers. Each leader has its own fetcher thread, so t-0 replicates
    while the fetch from 3 waits out its 20 s request timeout."""
    black_hole = socket.socket()
    black_hole.bind(("127.0.0.1", 0))
    black_hole.listen(8)
    leader = InProcessBroker(tmp_path / "leader")
    addresses = {1: leader.address, 3: black_hole.getsockname()}
    transport = NetworkTransport(2, addresses.get, max_wait_ms=100, request_timeout_ms=20_000)
    follower = InProcessBroker(tmp_path / "follower", broker_id=2, transport=transport)
    try:
        leader.set_partition("t", 0, replicas=(1, 2))
        follower.set_partition("t", 1, leader=3, replicas=(3, 2))
        follower.set_partition("t", 0, leader=1, replicas=(1, 2))
        with RawClient(leader.address) as client:
            produce_one(client, 3, acks=-1)
        wait_until(lambda: follower.replica_manager.status(TP).high_watermark == 3, timeout=10,
                   message="t-0 replicated while the fetch from 3 hangs")
    finally:
        transport.close()  # aborts the hanging fetch, so the fetcher stops at once
        follower.close()
        leader.close()
        black_hole.close()


def test_an_unreachable_leader_is_answered_broker_not_available(tmp_path: Path) -> None:
    leader = InProcessBroker(tmp_path / "leader")
    host, port = leader.address
    leader.close()
    endpoint = NetworkFetchEndpoint(1, host, port, replica_id=2, request_timeout_ms=2_000)
    try:
        assert endpoint.truncates_on_fetch is False
        want = PartitionFetch(tp=TP, fetch_offset=0, leader_epoch=0, last_fetched_epoch=-1,
                              max_bytes=1024)
        assert endpoint.fetch_partitions(2, [want])[TP].error == \
            DataErrorCode.BROKER_NOT_AVAILABLE
        assert endpoint.offsets_for_leader_epoch(TP, 0, 0).error == \
            DataErrorCode.BROKER_NOT_AVAILABLE
    finally:
        endpoint.close()


def test_an_empty_long_poll_is_followed_by_the_next_fetch_at_once(tmp_path: Path) -> None:
    """After a long poll that found nothing the follower fetches again at once, as Kafka's
    fetcher threads do (they back off only after an error): with a backoff of a minute, an
    acks=all produce sent after the follower's polls came back empty still completes as soon
    as the next poll takes it."""
    leader = InProcessBroker(tmp_path / "leader")
    transport = NetworkTransport(2, lambda b: leader.address if b == 1 else None,
                                 max_wait_ms=50)
    follower = InProcessBroker(tmp_path / "follower", broker_id=2, transport=transport,
                               replica_fetch_backoff_ms=60_000)
    try:
        leader.set_partition("t", 0, replicas=(1, 2))
        follower.set_partition("t", 0, leader=1, replicas=(1, 2))
        fetcher = follower.replica_manager.fetcher
        wait_until(lambda: fetcher.fetch_requests >= 5, timeout=10,
                   message="empty long polls, one after the other")
        with RawClient(leader.address) as client:
            client.sock.settimeout(10)
            produce_one(client, 2, acks=-1)
        assert leader.replica_manager.status(TP).high_watermark == 2
    finally:
        follower.close()
        transport.close()
        leader.close()
