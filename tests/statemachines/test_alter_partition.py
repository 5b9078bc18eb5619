"""AlterPartition (KIP-497) answered by partctl's controller, as Kafka 3.9's ZooKeeper-mode
controller answers its brokers: the pure decision over every case, and the controller event on
memory and ZooKeeper (the ISR written fenced and conditional on the partition epoch, answered
with the new partition epoch; a stale broker epoch, an older leader epoch or partition epoch,
an ineligible replica refused and nothing written)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from elections.controller_election import NotController
from elections.leader import LeaderAndIsr
from interbroker.errors import ErrorCode, StaleBrokerEpoch
from interbroker.requests import IsrProposal
from statemachines import events as ev
from statemachines.handlers.alter_partition import decide
from tests.statemachines.conftest import tp
from tests.statemachines.test_topic_unclean import Brokers
from tests.waiting import wait_until

CURRENT = LeaderAndIsr(1, 5, (1, 2), 3, 7)
REPLICAS = (1, 2, 3)


def _proposal(isr: tuple[int, ...], *, leader_epoch: int = 5, partition_epoch: int = 7,
              recovery: int = 0, topic: str = "t") -> IsrProposal:
    return IsrProposal(topic=topic, partition=0, leader_epoch=leader_epoch, new_isr=isr,
                          partition_epoch=partition_epoch, leader_recovery_state=recovery)


@pytest.mark.parametrize(("broker", "proposal", "eligible", "version", "expected"), [
    (1, _proposal((1, 2, 3)), {1, 2, 3}, 3, LeaderAndIsr(1, 5, (1, 2, 3), 9, 7)),
    (1, _proposal((1,)), {1, 2, 3}, 3, LeaderAndIsr(1, 5, (1,), 9, 7)),
    (1, _proposal((1, 2), partition_epoch=6), {1, 2, 3}, 3, "same"),  # a retry: idempotent
    (1, _proposal((1, 2, 3), partition_epoch=8), {1, 2, 3}, 3, ErrorCode.NOT_CONTROLLER),
    (1, _proposal((1, 2, 3), leader_epoch=6), {1, 2, 3}, 3, ErrorCode.NOT_CONTROLLER),
    (1, _proposal((1, 2, 3), leader_epoch=4), {1, 2, 3}, 3, ErrorCode.FENCED_LEADER_EPOCH),
    (1, _proposal((1, 2, 3), partition_epoch=6), {1, 2, 3}, 3, ErrorCode.INVALID_UPDATE_VERSION),
    (1, _proposal((1, 2, 3)), {1, 2}, 3, ErrorCode.INELIGIBLE_REPLICA),
    (1, _proposal((1, 2, 3)), {1, 2}, 1, ErrorCode.OPERATION_NOT_ATTEMPTED),
    (1, _proposal((1, 2, 3), recovery=1), {1, 2, 3}, 3, ErrorCode.INVALID_REQUEST),
    (2, _proposal((1, 2, 3)), {1, 2, 3}, 3, ErrorCode.INVALID_REQUEST),  # not the leader
    (1, _proposal(()), {1, 2, 3}, 3, ErrorCode.INVALID_REQUEST),
    (1, _proposal((2, 3)), {1, 2, 3}, 3, ErrorCode.INVALID_REQUEST),  # leaves the leader out
    (1, _proposal((1, 1)), {1, 2, 3}, 3, ErrorCode.INVALID_REQUEST),
    (1, _proposal((1, 4)), {1, 2, 3, 4}, 3, ErrorCode.INVALID_REQUEST),  # not assigned
])
def test_how_a_proposed_isr_is_decided(broker: int, proposal: IsrProposal,
                                       eligible: set[int], version: int,
                                       expected: LeaderAndIsr | ErrorCode | str) -> None:
    decided = decide(broker, proposal, CURRENT, REPLICAS, frozenset(eligible), 9, version)
    if expected == "same":
        assert decided is CURRENT
    else:
        assert decided == expected


def test_an_unknown_partition_is_refused() -> None:
    assert decide(1, _proposal((1,)), None, (), frozenset({1}), 9) == \
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


@pytest.fixture(params=["memory", "zookeeper"])
def brokers(request: pytest.FixtureRequest) -> Iterator[Brokers]:
    name = f"t{uuid.uuid4().hex[:12]}"
    if request.param == "memory":
        url = f"memory://{name}"
    else:
        url = f"zookeeper://{request.getfixturevalue('zookeeper_server').address}/{name}"
    cluster = Brokers(url)
    yield cluster
    cluster.close()


def _ask(controller, broker: int, proposals: tuple[IsrProposal, ...],  # type: ignore[no-untyped-def]
         epoch: int | None = None, version: int = 0):
    if epoch is None:
        epoch = controller.ctx.brokers[broker].epoch
    return controller.request_alter_partition(ev.AlterPartitionRequested(
        broker_id=broker, broker_epoch=epoch, proposals=proposals, version=version)).result(20)


def test_the_controller_writes_a_leaders_isr_and_answers_the_new_partition_epoch(
        brokers: Brokers) -> None:
    controller = brokers.start((3, 2, 1)).controller  # 3 the controller
    brokers.admin.create_topic("t", assignment={0: [2, 3, 1]})
    # the store is written before the controller's own view: wait for the view too
    wait_until(lambda: brokers.state("t") is not None and brokers.state("t").leader == 2
               and tp("t", 0) in controller.ctx.leaders, 20, message="t led by 2")
    current = controller.ctx.leaders[tp("t", 0)]
    shrink = IsrProposal(topic="t", partition=0, leader_epoch=current.leader_epoch,
                            new_isr=(2, 3), partition_epoch=current.partition_epoch)
    (result,) = _ask(controller, 2, (shrink,))
    assert result.error is None, result
    assert result.state.isr == (2, 3)
    assert result.state.partition_epoch == current.partition_epoch + 1
    stored = brokers.metadata.partition_states([tp("t", 0)])[tp("t", 0)]
    assert (stored.value.leader, stored.value.isr, stored.version) == (
        2, (2, 3), current.partition_epoch + 1)
    assert stored.value.controller_epoch == controller.epoch
    # the same proposal again (a retry whose answer was lost): the stored value, unwritten
    (again,) = _ask(controller, 2, (shrink,))
    assert again.state == result.state
    # a stale partition epoch, an older leader epoch, a stale broker epoch, a broker not live:
    # refused, nothing written
    expand = IsrProposal(topic="t", partition=0, leader_epoch=current.leader_epoch,
                            new_isr=(2, 3, 1), partition_epoch=current.partition_epoch)
    older = IsrProposal(topic="t", partition=0, leader_epoch=current.leader_epoch - 1,
                           new_isr=(2, 3, 1), partition_epoch=result.state.partition_epoch)
    unknown = IsrProposal(topic="nope", partition=0, leader_epoch=0, new_isr=(2,),
                             partition_epoch=0)
    answers = _ask(controller, 2, (expand, older, unknown))
    assert [a.error for a in answers] == [
        ErrorCode.INVALID_UPDATE_VERSION, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    with pytest.raises(StaleBrokerEpoch):
        _ask(controller, 2, (expand,), epoch=controller.ctx.brokers[2].epoch + 1)
    brokers.kill(1)
    wait_until(lambda: 1 not in controller.ctx.brokers, 20, message="broker 1 gone")
    fresh = IsrProposal(topic="t", partition=0, leader_epoch=current.leader_epoch,
                           new_isr=(2, 3, 1), partition_epoch=result.state.partition_epoch)
    (ineligible,) = _ask(controller, 2, (fresh,), version=1)
    assert ineligible.error == ErrorCode.OPERATION_NOT_ATTEMPTED
    topic_id = controller.ctx.topics["t"].topic_id
    (ineligible,) = _ask(controller, 2, (IsrProposal(
        topic=topic_id, partition=0, leader_epoch=current.leader_epoch, new_isr=(2, 3, 1),
        partition_epoch=result.state.partition_epoch),), version=3)
    assert ineligible.error == ErrorCode.INELIGIBLE_REPLICA
    assert brokers.metadata.partition_states([tp("t", 0)])[tp("t", 0)].version == \
        result.state.partition_epoch
    # by topic id (version 2 and up)
    by_id = IsrProposal(topic=topic_id, partition=0, leader_epoch=current.leader_epoch,
                           new_isr=(2,), partition_epoch=result.state.partition_epoch)
    (shrunk,) = _ask(controller, 2, (by_id,), version=3)
    assert shrunk.error is None and shrunk.state.isr == (2,)


def test_a_broker_that_is_not_controller_refuses(brokers: Brokers) -> None:
    brokers.start()
    standby = brokers.participants[2].controller
    with pytest.raises(NotController):
        standby.request_alter_partition(ev.AlterPartitionRequested(
            broker_id=2, broker_epoch=0, proposals=())).result(5)
