"""Brokers whose registrations go together (a cluster stopped, a rack lost) fail together, as
Kafka's BrokerChange handles every broker it finds dead at once."""

from __future__ import annotations

from tests.statemachines.conftest import Cluster


def test_brokers_gone_together_fail_in_one_pass_one_election_each(cluster: Cluster) -> None:
    for b in (1, 2, 3, 4):
        cluster.add(b)
    cluster.admin.create_topic("t", assignment={0: [2, 3, 4], 1: [3, 2, 4], 2: [1, 4, 2]})
    cluster.pump()
    before = {p: cluster.state("t", p) for p in range(3)}
    assert [before[p].leader for p in range(3)] == [2, 3, 1]
    for b in (2, 3):  # both processes die before the controller hears of either
        gone = cluster.participants.pop(b)
        gone.close()
        cluster.retired.append(gone)
    cluster.pump()
    after = {p: cluster.state("t", p) for p in range(3)}
    # straight to 4, not to 3 first (a broker that was already gone) and then to 4
    for p in (0, 1):
        assert after[p].leader == 4
        assert after[p].leader_epoch == before[p].leader_epoch + 1
        assert after[p].isr == (4,)
    assert after[2].leader == 1 and after[2].isr == (1, 4)
    assert set(cluster.active().controller.ctx.brokers) == {1, 4}


def test_brokers_back_together_start_in_one_pass_and_every_partition_is_online(
        cluster: Cluster) -> None:
    for b in (1, 2, 3):
        cluster.add(b)
    cluster.admin.create_topic("t", assignment={0: [2, 3], 1: [3, 2]})
    cluster.pump()
    for b in (2, 3):
        gone = cluster.participants.pop(b)
        gone.close()
        cluster.retired.append(gone)
    cluster.pump()
    assert cluster.state("t", 0).leader == -1 and cluster.state("t", 1).leader == -1
    for b in (2, 3):  # both register before the controller hears of either
        cluster.add(b, pump=False)
    cluster.pump()
    assert {cluster.state("t", p).leader for p in (0, 1)} <= {2, 3}
    assert set(cluster.active().controller.ctx.brokers) == {1, 2, 3}
