"""The rebalancer's one seam to a live cluster (rebalancer.access), through the coordinator: the
view of a running controller's cluster (brokers, racks, replicas, leaders, ISRs), the moves in
progress whoever started them, and a snapshot equal to the coordinator's own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from coordinator import layout
from coordinator.codecs import TopicPartition
from rebalancer.access import ClusterAccess, CoordinatorAccess
from rebalancer.live_snapshot import snapshot_from_coordinator
from rebalancer.snapshot import SnapshotError
from tests.cli.memory_cluster import Cluster
from tests.waiting import wait_until


@pytest.fixture()
def cluster() -> Iterator[Cluster]:
    c = Cluster()
    try:
        yield c
    finally:
        c.close()


def test_the_view_shows_brokers_replicas_leaders_and_isrs(cluster: Cluster) -> None:
    access = CoordinatorAccess(cluster.client)
    assert isinstance(access, ClusterAccess)
    view = access.view()
    assert dict(view.brokers) == {1: "r1", 2: "r0", 3: "r1"}
    assert view.controller in (1, 2, 3)
    by_tp = {p.tp: p for p in view.partitions}
    assert {tp: p.replicas for tp, p in by_tp.items()} == {
        TopicPartition("t", 0): (1, 2), TopicPartition("t", 1): (2, 3),
        TopicPartition("t", 2): (3, 1)}
    for p in view.partitions:
        assert p.leader == p.replicas[0] and set(p.isr) == set(p.replicas)
        assert not p.moving and p.size_bytes is None
    assert not view.sizes_known and view.offline_brokers == ()
    assert view.snapshot() == snapshot_from_coordinator(cluster.client)


def test_moves_in_progress_are_listed_whoever_wrote_them(cluster: Cluster) -> None:
    access = CoordinatorAccess(cluster.client)
    assert access.in_progress() == {}
    # a foreign tool's move, to a broker that never catches up (the recording brokers do not
    # replicate): it stays in progress
    cluster.client.create(layout.REASSIGN_PARTITIONS,
                          b'{"version":1,"partitions":[{"topic":"t","partition":0,'
                          b'"replicas":[3,2]}]}')
    tp = TopicPartition("t", 0)
    wait_until(lambda: access.in_progress().get(tp) is not None
               and access.in_progress()[tp].adding == (3,), timeout=15)
    moving = access.in_progress()[tp]
    assert set(moving.replicas) == {1, 2, 3} and moving.removing == (1,)
    assert moving.target == (3, 2)
    assert [p.tp for p in access.view().moving] == [tp]


def test_a_dead_broker_holding_replicas_must_be_decommissioned(cluster: Cluster) -> None:
    cluster.participants[2].close()  # broker 3
    access = CoordinatorAccess(cluster.client)
    wait_until(lambda: 3 not in access.view().brokers, timeout=15)
    view = access.view()
    assert view.offline_brokers == (3,)
    with pytest.raises(SnapshotError, match="broker 3 holds replicas but is not registered"):
        view.snapshot()
    snap = view.snapshot(decommission=[3])
    assert snap.decommission == {3} and snap.meta["offline_brokers"] == [3]
