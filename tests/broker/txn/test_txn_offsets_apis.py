"""TxnOffsetCommit (key 28) and the markers that end its transactions, on the real server over
a real replica manager in this process (the test plays the controller and the transaction
coordinator: raw WriteTxnMarkers into ``__consumer_offsets``): offsets committed in a
transaction stay invisible to OffsetFetch until the commit marker, an abort drops them,
``require_stable`` answers UNSTABLE_OFFSET_COMMIT while they are pending, a broker that reads
the partition again holds them pending still; KIP-447's member checks against a group joined
with raw JoinGroup/SyncGroup; the ACLs Kafka checks; DeleteGroups and expiry with pending
offsets as Kafka 3.9 does them."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.groups import OFFSETS_TOPIC, GroupConfig, partition_for
from broker.groups.records import OffsetCommitKey
from broker.security.acls import Operation, ResourceType
from coordinator.codecs import TopicPartition
from kafkaclient.messages import build
from replication.records import iter_batches
from tests.broker.groups.test_group_apis import (
    CONFIG,
    PARTITIONS,
    _join_new,
    commit,
    fetch,
    join,
    records_of,
    sync,
)
from tests.broker.harness import InProcessBroker
from tests.broker.wire_client import RawClient, request, request_module
from tests.waiting import wait_until

PID = 4000
GROUP = "txg"


def _start(log_dir: Path, config: GroupConfig = CONFIG) -> InProcessBroker:
    b = InProcessBroker(log_dir, groups=config)
    for p in range(PARTITIONS):
        b.set_partition(OFFSETS_TOPIC, p)
    for t in ("t", "u"):
        b.set_partition(t, 0)
        b.set_partition(t, 1)
    return b


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[InProcessBroker]:
    b = _start(tmp_path / "logs")
    yield b
    b.close()


def txn_commit(client: RawClient, group: str, offsets: dict[tuple[str, int], int], *,
               pid: int = PID, epoch: int = 0, version: int = 3, generation: int = -1,
               member: str = "", instance: str | None = None, txn_id: str = "tx",
               metadata: str | None = "m") -> dict[tuple[str, int], ErrorCode]:
    m = request_module(28, version)
    topics: dict[str, list[Any]] = {}
    for (t, p), o in offsets.items():
        topics.setdefault(t, []).append(build(
            m.TxnOffsetCommitRequestPartition, partition_index=p, committed_offset=o,
            committed_leader_epoch=2, committed_metadata=metadata))
    response = client.call(request(
        28, version, transactional_id=txn_id, group_id=group, producer_id=pid,
        producer_epoch=epoch, generation_id=generation, member_id=member,
        group_instance_id=instance, topics=tuple(
            build(m.TxnOffsetCommitRequestTopic, name=t, partitions=tuple(ps))
            for t, ps in topics.items())))
    return {(t.name, p.partition_index): p.error_code for t in response.topics
            for p in t.partitions}


def end_txn(client: RawClient, group: str, commit: bool, *, pid: int = PID,
            epoch: int = 0) -> ErrorCode:
    """What the transaction coordinator sends once the producer's EndTxn is logged: the marker
    into the group's partition of ``__consumer_offsets``."""
    m = request_module(27, 1)
    response = client.call(request(27, 1, markers=(build(
        m.WritableTxnMarker, producer_id=pid, producer_epoch=epoch, transaction_result=commit,
        coordinator_epoch=0, topics=(build(
            m.WritableTxnMarkerTopic, name=OFFSETS_TOPIC,
            partition_indexes=(partition_for(group, PARTITIONS),)),)),)))
    (code,) = [p.error_code for mk in response.markers for t in mk.topics for p in t.partitions]
    return code


def fetched(client: RawClient, group: str, partitions: list[tuple[str, int]], *,
            stable: bool = False, version: int = 7
            ) -> dict[tuple[str, int], tuple[int, ErrorCode]]:
    """OffsetFetch: (offset, the partition's error) per partition; v8+ in the batched form."""
    m = request_module(9, version)
    by: dict[str, list[int]] = {}
    for t, p in partitions:
        by.setdefault(t, []).append(p)
    if version >= 8:
        response = client.call(request(9, version, require_stable=stable, groups=(build(
            m.OffsetFetchRequestGroup, group_id=group, member_id=None, member_epoch=-1,
            topics=tuple(build(m.OffsetFetchRequestTopics, name=t, partition_indexes=tuple(ps))
                         for t, ps in by.items())),)))
        (answer,) = response.groups
        assert answer.error_code is ErrorCode.none
        topics = answer.topics
    else:
        response = client.call(request(9, version, group_id=group, require_stable=stable,
                                       topics=tuple(build(m.OffsetFetchRequestTopic, name=t,
                                                          partition_indexes=tuple(ps))
                                                    for t, ps in by.items())))
        assert response.error_code is ErrorCode.none
        topics = response.topics
    return {(t.name, p.partition_index): (p.committed_offset, p.error_code)
            for t in topics for p in t.partitions}


def _ready(client: RawClient) -> None:
    """Every partition of ``__consumer_offsets`` loaded (the groups named here cover them)."""
    assert {partition_for(g, PARTITIONS) for g in NAMED} == set(range(PARTITIONS))
    wait_until(lambda: all(fetch(client, g, [("t", 0)])[0] is ErrorCode.none for g in NAMED),
               message="the offsets partitions loaded")


NAMED = (GROUP, "static", "secret", "new-group", "other", "more")


OK = ErrorCode.none
UNSTABLE = ErrorCode.unstable_offset_commit


@pytest.mark.parametrize("fetch_version", [7, 8])
def test_transactional_offsets_show_once_the_commit_marker_is_written(
        broker: InProcessBroker, fetch_version: int) -> None:
    with RawClient(broker.address) as c:
        _ready(c)
        assert commit(c, GROUP, {("t", 1): 3}) == {("t", 1): OK}
        assert txn_commit(c, GROUP, {("t", 0): 42, ("t", 1): 43}) == {
            ("t", 0): OK, ("t", 1): OK}
        asked = [("t", 0), ("t", 1)]
        # pending: the committed values as they were; unstable for a reader that asks
        assert fetched(c, GROUP, asked, version=fetch_version) == {
            ("t", 0): (-1, OK), ("t", 1): (3, OK)}
        assert fetched(c, GROUP, asked, stable=True, version=fetch_version) == {
            ("t", 0): (-1, UNSTABLE), ("t", 1): (-1, UNSTABLE)}
        assert end_txn(c, GROUP, commit=True) is OK
        wait_until(lambda: fetched(c, GROUP, asked, stable=True, version=fetch_version) == {
            ("t", 0): (42, OK), ("t", 1): (43, OK)}, message="the offsets committed")
    # one transactional batch of the producer's id and epoch, then the marker
    tp = TopicPartition(OFFSETS_TOPIC, partition_for(GROUP, PARTITIONS))
    partition = broker.replica_manager.partition(tp).log.read(0, 1 << 20).records
    kinds = [(h.producer_id, h.is_transactional, h.is_control, h.last_offset_delta + 1)
             for h in iter_batches(partition)]
    assert kinds == [(-1, False, False, 1), (PID, True, False, 2), (PID, True, True, 1)]


def test_an_aborted_transaction_leaves_the_committed_offsets_as_they_were(
        broker: InProcessBroker) -> None:
    with RawClient(broker.address) as c:
        _ready(c)
        assert commit(c, GROUP, {("t", 0): 5}) == {("t", 0): OK}
        assert txn_commit(c, GROUP, {("t", 0): 50, ("u", 0): 51}) == {
            ("t", 0): OK, ("u", 0): OK}
        assert end_txn(c, GROUP, commit=False) is OK
        wait_until(lambda: fetched(c, GROUP, [("t", 0), ("u", 0)], stable=True) == {
            ("t", 0): (5, OK), ("u", 0): (-1, OK)}, message="the transaction's offsets gone")
        # the producer's next transaction commits
        assert txn_commit(c, GROUP, {("t", 0): 60}) == {("t", 0): OK}
        assert end_txn(c, GROUP, commit=True) is OK
        wait_until(lambda: fetched(c, GROUP, [("t", 0)], stable=True) == {("t", 0): (60, OK)})
        # a stale epoch is refused by the log's producer state, nothing pending
        assert txn_commit(c, GROUP, {("t", 0): 70}, epoch=1) == {("t", 0): OK}
        assert txn_commit(c, GROUP, {("t", 1): 71}, epoch=0) == {
            ("t", 1): ErrorCode.invalid_producer_epoch}
        assert fetched(c, GROUP, [("t", 1)], stable=True) == {("t", 1): (-1, OK)}


def test_pending_offsets_survive_a_reload_and_commit_after_it(tmp_path: Path) -> None:
    b = _start(tmp_path / "logs")
    try:
        with RawClient(b.address) as c:
            _ready(c)
            assert txn_commit(c, GROUP, {("t", 0): 7}) == {("t", 0): OK}
            assert txn_commit(c, GROUP, {("t", 0): 8}, pid=PID + 1) == {("t", 0): OK}
            assert end_txn(c, GROUP, commit=False, pid=PID + 1) is OK
            wait_until(lambda: b.groups.txn.open_producers() == 1)
    finally:
        b.close()
    again = _start(tmp_path / "logs")
    try:
        with RawClient(again.address) as c:
            _ready(c)
            assert wait_until(lambda: fetched(c, GROUP, [("t", 0)], stable=True)) == {
                ("t", 0): (-1, UNSTABLE)}
            assert end_txn(c, GROUP, commit=True) is OK
            wait_until(lambda: fetched(c, GROUP, [("t", 0)], stable=True) == {
                ("t", 0): (7, OK)}, message="the loaded transaction committed")
    finally:
        again.close()


def test_kip447_the_committer_is_checked_against_the_group(broker: InProcessBroker) -> None:
    with RawClient(broker.address) as c:
        _ready(c)
        me = _join_new(c, GROUP).member_id
        assert sync(c, GROUP, me, 1, {me: b""}).error_code is OK
        static = join(c, "static", instance="i-1", version=9)
        sync(c, "static", static.member_id, 1, {static.member_id: b""}, instance="i-1")
        tp = {("t", 0): 1}
        assert txn_commit(c, GROUP, tp, generation=1, member=me) == {("t", 0): OK}
        assert txn_commit(c, GROUP, tp, generation=0, member=me) == {
            ("t", 0): ErrorCode.illegal_generation}
        assert txn_commit(c, GROUP, tp, generation=1, member="nobody") == {
            ("t", 0): ErrorCode.unknown_member_id}
        assert txn_commit(c, "static", tp, generation=1, member="other", instance="i-1") == {
            ("t", 0): ErrorCode.fenced_instance_id}
        assert txn_commit(c, "static", tp, generation=1, member=static.member_id,
                          instance="i-1") == {("t", 0): OK}
        # no member named (-1, empty), and versions before 3: not checked, group Stable or not
        assert txn_commit(c, GROUP, tp) == {("t", 0): OK}
        assert txn_commit(c, GROUP, tp, version=2) == {("t", 0): OK}
        # an unknown group with a generation: it does not exist, its member cannot either
        assert txn_commit(c, "new-group", tp, generation=1, member=me) == {
            ("t", 0): ErrorCode.unknown_member_id}


class _Denying:
    """An authorizer that refuses exactly the (operation, resource type, name) it holds."""

    def __init__(self, *denied: tuple[Operation, ResourceType, str]) -> None:
        self.denied = set(denied)

    def authorized(self, principal: str, peer: str, operation: Operation,
                   resource_type: ResourceType, name: str = "") -> bool:
        return (operation, resource_type, name) not in self.denied


def test_the_acls_and_request_checks_kafka_makes(broker: InProcessBroker) -> None:
    services = broker.server.services
    assert services is not None
    acls = _Denying((Operation.WRITE, ResourceType.TRANSACTIONAL_ID, "not-mine"),
                    (Operation.READ, ResourceType.GROUP, "secret"),
                    (Operation.READ, ResourceType.TOPIC, "u"))
    broker.server.services = dataclasses.replace(services, authorizer=acls)
    both = {("t", 0): 1, ("u", 0): 2}
    with RawClient(broker.address) as c:
        _ready(c)
        assert txn_commit(c, GROUP, both, txn_id="not-mine") == {
            tp: ErrorCode.transactional_id_authorization_failed for tp in both}
        assert txn_commit(c, "secret", both) == {
            tp: ErrorCode.group_authorization_failed for tp in both}
        assert txn_commit(c, GROUP, both) == {
            ("t", 0): OK, ("u", 0): ErrorCode.topic_authorization_failed}
        assert txn_commit(c, GROUP, {("t", 9): 1, ("nowhere", 0): 1}) == {
            ("t", 9): ErrorCode.unknown_topic_or_partition,
            ("nowhere", 0): ErrorCode.unknown_topic_or_partition}
        assert txn_commit(c, GROUP, {("t", 1): 1}, metadata="x" * 5000) == {
            ("t", 1): ErrorCode.offset_metadata_too_large}
        assert txn_commit(c, "", {("t", 1): 1}) == {("t", 1): ErrorCode.invalid_group_id}


def test_deleting_a_group_deletes_its_pending_offsets_as_kafka_does(
        broker: InProcessBroker) -> None:
    """Kafka 3.9 deletes an Empty group with pending transactional offsets (DeleteGroups NONE)
    and writes a tombstone for each of their partitions: a commit marker afterwards brings
    nothing back, here or in a coordinator that loads the log."""
    with RawClient(broker.address) as c:
        _ready(c)
        assert txn_commit(c, GROUP, {("t", 0): 9}) == {("t", 0): OK}
        deleted = c.call(request(42, 2, groups_names=(GROUP,)))
        assert [r.error_code for r in deleted.results] == [OK]
        assert (OffsetCommitKey(GROUP, "t", 0), None) in records_of(broker, GROUP)
        assert end_txn(c, GROUP, commit=True) is OK
        wait_until(lambda: broker.groups.txn.open_producers() == 0)
        assert fetched(c, GROUP, [("t", 0)], stable=True) == {("t", 0): (-1, OK)}


def test_a_group_with_pending_offsets_does_not_expire(tmp_path: Path) -> None:
    config = GroupConfig(offsets_topic_num_partitions=PARTITIONS,
                         group_min_session_timeout_ms=100, group_initial_rebalance_delay_ms=0,
                         offsets_retention_ms=200, offsets_retention_check_interval_ms=50)
    b = _start(tmp_path / "logs", config)
    try:
        with RawClient(b.address) as c:
            _ready(c)
            assert commit(c, GROUP, {("t", 0): 1, ("t", 1): 2}) == {
                ("t", 0): OK, ("t", 1): OK}
            assert txn_commit(c, GROUP, {("t", 0): 3}) == {("t", 0): OK}
            # t1 expires; t0, which the open transaction committed for, does not
            wait_until(lambda: fetched(c, GROUP, [("t", 1)]) == {("t", 1): (-1, OK)})
            assert fetched(c, GROUP, [("t", 0)]) == {("t", 0): (1, OK)}
            assert end_txn(c, GROUP, commit=False) is OK
            wait_until(lambda: fetched(c, GROUP, [("t", 0)]) == {("t", 0): (-1, OK)},
                       message="the offset expired once the transaction ended")
    finally:
        b.close()
