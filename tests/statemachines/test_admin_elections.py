"""Leader elections an admin asks for (ElectLeaders' controller event), on memory, ZooKeeper
and etcd: PREFERRED moves leadership back to the preferred replica once it is in sync again,
UNCLEAN elects a live replica out of sync, each partition answered on its own; and the pure
rule of when an admin's election is needed, over every case."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from elections.controller_election import NotController
from elections.leader import LeaderAndIsr
from statemachines.handlers.elect_leaders import AdminElectionResult, needs_election
from tests.recording_broker import change_isr
from tests.statemachines.conftest import tp
from tests.statemachines.test_topic_unclean import Brokers, url  # noqa: F401 - a fixture
from tests.waiting import wait_until


@pytest.mark.parametrize(("replicas", "leader", "unclean", "needed"), [
    ((1, 2), 1, False, False),  # the preferred replica leads
    ((1, 2), 2, False, True),
    ((1, 2), -1, False, True),
    ((1, 2), None, False, True),  # never elected
    ((), -1, False, False),  # nothing to prefer
    ((1, 2), 2, True, False),  # a live leader: no unclean election
    ((1, 2), 3, True, True),  # its leader is not live
    ((1, 2), -1, True, True),
    ((1, 2), None, True, True),
])
def test_when_an_admins_election_is_needed(replicas: tuple[int, ...], leader: int | None,
                                           unclean: bool, needed: bool) -> None:
    current = None if leader is None else LeaderAndIsr(leader, 0, (1,), 1, 0)
    assert needs_election(replicas, current, frozenset({1, 2}), unclean) is needed


@pytest.fixture
def brokers(url: str) -> Iterator[Brokers]:  # noqa: F811 - the fixture imported above
    cluster = Brokers(url)
    yield cluster
    cluster.close()


def test_a_preferred_election_moves_leadership_back_per_partition(brokers: Brokers) -> None:
    controller = brokers.start().controller
    brokers.admin.create_topic("moved", assignment={0: [2, 3]})
    wait_until(lambda: brokers.state("moved") is not None and brokers.state("moved").leader == 2,
               20, message="led by 2")
    brokers.kill(2)  # 3 takes over
    wait_until(lambda: brokers.state("moved").leader == 3, 20, message="3 leads")
    brokers.add(2)
    assert change_isr(brokers.metadata, tp("moved", 0), [3, 2])  # 2 caught up again
    wait_until(lambda: controller.ctx.leaders[tp("moved", 0)].isr == (3, 2), 20)
    preferred = controller.request_leader_election([tp("moved", 0), tp("gone", 0)]).result(20)
    assert preferred == {
        tp("moved", 0): AdminElectionResult(leader=2),
        tp("gone", 0): AdminElectionResult(error="UNKNOWN_TOPIC_OR_PARTITION",
                                           message="The partition does not exist.")}
    assert brokers.state("moved").leader == 2
    again = controller.request_leader_election([tp("moved", 0)]).result(20)
    assert again == {tp("moved", 0): AdminElectionResult(error="ELECTION_NOT_NEEDED")}


def test_an_unclean_election_takes_a_live_replica_out_of_sync(brokers: Brokers) -> None:
    controller = brokers.start().controller
    brokers.admin.create_topic("a", assignment={0: [2, 3]})
    brokers.admin.create_topic("b", assignment={0: [2]})
    wait_until(lambda: all(brokers.state(t) is not None and brokers.state(t).leader == 2
                           for t in ("a", "b")), 20, message="led by 2")
    assert change_isr(brokers.metadata, tp("a", 0), [2])
    wait_until(lambda: controller.ctx.leaders[tp("a", 0)].isr == (2,), 20)
    brokers.kill(2)
    wait_until(lambda: brokers.state("a").leader == -1 and brokers.state("b").leader == -1, 20)
    results = controller.request_leader_election([tp("a", 0), tp("b", 0)],
                                                 unclean=True).result(20)
    assert results[tp("a", 0)] == AdminElectionResult(leader=3)
    assert results[tp("b", 0)].error == "ELIGIBLE_LEADERS_NOT_AVAILABLE"
    state = brokers.state("a")
    assert (state.leader, state.isr) == (3, (3,))
    # not the controller: refused at once
    with pytest.raises(NotController):
        brokers.participants[3].controller.request_leader_election([tp("a", 0)]).result(5)
