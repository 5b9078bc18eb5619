"""A whole cluster coming back one broker at a time (memory coordinator): each return elects
the partitions it can bring online, and only those and the ones an error left behind."""

from __future__ import annotations

import random

import pytest

from coordinator import layout
from coordinator.codecs import PartitionStateNode
from tests.statemachines.conftest import Cluster, tp

HOSTS = range(2, 8)  # broker 1 hosts nothing and stays: the controller


def _bump(cluster: Cluster, topic: str, partition: int, data: bytes | None = None) -> None:
    """Another tool writes the partition's state node (its value unchanged unless ``data``):
    the controller hears nothing of it."""
    path = layout.partition_state(topic, partition)
    old, stat = cluster.admin_client.get(path)
    cluster.admin_client.set(path, old if data is None else data, stat.version)


@pytest.mark.parametrize("seed", range(6))
def test_each_partition_comes_back_with_its_last_isr_member_one_broker_at_a_time(
        cluster: Cluster, seed: int) -> None:
    """Every broker stops in one order and returns in another, one at a time: after each
    return exactly the partitions whose last in-sync replica is back have a leader, and it
    is that replica (a clean election), as when Kafka's controller tries every offline
    partition on each return."""
    rng = random.Random(seed)
    cluster.add(1)
    for b in HOSTS:
        cluster.add(b)
    assignment = {p: rng.sample(list(HOSTS), 3) for p in range(60)}
    cluster.admin.create_topic("r", assignment=assignment)
    cluster.pump()
    for b in rng.sample(list(HOSTS), len(HOSTS)):
        cluster.kill(b)
    last = {p: cluster.state("r", p).isr for p in assignment}
    assert all(len(isr) == 1 for isr in last.values())
    assert all(cluster.state("r", p).leader == -1 for p in assignment)
    back: set[int] = set()
    for b in rng.sample(list(HOSTS), len(HOSTS)):
        cluster.add(b)
        back.add(b)
        for p, isr in last.items():
            state = cluster.state("r", p)
            if isr[0] in back:
                assert state.leader == isr[0], (p, state)
            else:
                assert state.leader == -1, (p, state)
    ctx = cluster.active().controller.ctx
    assert not ctx.leaderless and not ctx.election_errors


def test_a_return_decides_only_the_partitions_with_a_replica_on_it(cluster: Cluster) -> None:
    """q-1 (replicas 3 and 4, in-sync 3) was refused when 4 came back, and re-read then (a
    refusal may rest on a stale ISR). Broker 5's return cannot change it: it is not decided
    again, so its node, moved since by another tool, is not read either. Kafka's controller
    would try it and fail the same way; at a million partitions that pass over every offline
    partition per return made a rolling return of a hundred brokers take minutes."""
    for b in (1, 2, 3, 4, 5):
        cluster.add(b)
    cluster.admin.create_topic("q", assignment={0: [2, 5], 1: [3, 4]})
    cluster.pump()
    for b in (5, 2, 4, 3):
        cluster.kill(b)
    ctl = cluster.active().controller
    q1 = tp("q", 1)
    assert list(cluster.state("q", 1).isr) == [3]
    _bump(cluster, "q", 1)
    epoch = ctl.ctx.leaders[q1].partition_epoch
    cluster.add(4)
    assert ctl.ctx.leaders[q1].partition_epoch == epoch + 1  # refused, and re-read
    assert q1 in ctl.ctx.leaderless and q1 not in ctl.ctx.election_errors
    _bump(cluster, "q", 1)
    cluster.add(5)
    assert ctl.ctx.leaders[q1].partition_epoch == epoch + 1  # not decided: not read
    assert cluster.state("q", 0).leader == -1  # 2 was its last in-sync replica
    cluster.add(3)
    assert cluster.state("q", 1).leader == 3


@pytest.mark.parametrize("crowded", [False, True], ids=["few-hosted", "crowded"])
def test_a_partition_an_error_left_offline_is_tried_again_when_any_broker_returns(
        cluster: Cluster, crowded: bool) -> None:
    """Another tool wrote q-0's state node malformed: broker 3's return elects it, the write
    finds the node moved, and the re-read cannot parse it (an error, not a refusal). Once the
    node is sound again, broker 4's return, which hosts none of q-0, tries it again and it
    comes online: an error is retried on every return, as Kafka's controller does.
    ``crowded``: broker 4 hosts more replicas than there are offline partitions (every one of
    them is elected then, without picking)."""
    for b in (1, 2, 3, 4):
        cluster.add(b)
    if crowded:
        cluster.admin.create_topic("filler", assignment={0: [1, 4], 1: [1, 4]})
    cluster.admin.create_topic("q", assignment={0: [2, 3]})
    cluster.pump()
    for b in (4, 2, 3):
        cluster.kill(b)
    ctl = cluster.active().controller
    q0 = tp("q", 0)
    stored = cluster.state("q", 0)
    assert (stored.leader, list(stored.isr)) == (-1, [3])
    _bump(cluster, "q", 0, b"{not json")
    cluster.add(3)
    assert q0 in ctl.ctx.leaderless and q0 in ctl.ctx.election_errors
    _bump(cluster, "q", 0, PartitionStateNode(
        leader=-1, leader_epoch=stored.leader_epoch, isr=(3,),
        controller_epoch=stored.controller_epoch).encode())
    cluster.add(4)
    assert cluster.state("q", 0).leader == 3
    assert q0 not in ctl.ctx.leaderless and not ctl.ctx.election_errors
