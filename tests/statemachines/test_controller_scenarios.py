"""Controller scenarios on the memory coordinator, driven event by event by ``Cluster.pump``."""

from __future__ import annotations

import logging
import random

import pytest

from coordinator import layout
from coordinator.codecs import BrokerInfo, PartitionStateNode, TopicPartition, encode_reassignment
from interbroker.channel import BrokerResponse
from interbroker.errors import ErrorCode, StaleBrokerEpoch
from interbroker.requests import (
    EPOCH_DURING_DELETE,
    BrokerRequest,
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from statemachines import ReplicaState
from statemachines import events as ev
from statemachines.partition_sm import NoLiveReplica, Refusal, refusal
from statemachines.states import PartitionState
from tests.recording_broker import change_isr
from tests.statemachines.conftest import Cluster, tp

# --- brokers -----------------------------------------------------------------------------------


def test_first_participant_becomes_controller_and_others_stand_by(three: Cluster) -> None:
    assert three.active().id == 1
    assert three.admin.controller_status().broker_id == 1
    assert not three.participants[2].controller.active


def test_new_topic_gets_leaders_and_isr_written_and_sent(three: Cluster) -> None:
    for p, leader in enumerate((1, 2, 3)):
        s = three.state("t", p)
        assert (s.leader, s.leader_epoch, s.controller_epoch) == (leader, 0, 1)
        assert set(s.isr) == {1, 2, 3}
    assert three.participants[2].handler.leads() == {tp("t", 1)}
    lai = three.participants[3].handler.received(LeaderAndIsrRequest)[-1]
    assert lai.controller_epoch == 1
    assert lai.broker_epoch == three.participants[3].broker_epoch
    assert all(p.is_new for p in lai.partitions)


def test_broker_loss_elects_new_leaders_and_shrinks_follower_isrs(three: Cluster) -> None:
    three.kill(2)
    s0, s1, s2 = (three.state("t", p) for p in range(3))
    assert s1.leader == 3 and s1.isr == (3, 1) and s1.leader_epoch == 1
    assert s0.leader == 1 and 2 not in s0.isr and s0.leader_epoch == 1
    assert s2.leader == 3 and 2 not in s2.isr
    meta = three.participants[1].handler.metadata()
    assert meta[tp("t", 1)].leader == 3
    assert three.participants[1].handler.live_brokers() == [1, 3]


def test_losing_every_isr_member_leaves_partition_offline_until_one_returns(
        cluster: Cluster) -> None:
    for b in (1, 2, 3):
        cluster.add(b)
    cluster.admin.create_topic("solo", assignment={0: [3]})
    cluster.pump()
    cluster.kill(3)
    ctl = cluster.active().controller
    assert ctl.ctx.partition_states[tp("solo", 0)] is PartitionState.OFFLINE
    cluster.add(3)
    assert cluster.state("solo", 0).leader == 3
    assert ctl.ctx.partition_states[tp("solo", 0)] is PartitionState.ONLINE


def test_a_returning_broker_hears_of_each_leaderless_partition_once(cluster: Cluster) -> None:
    """Its replicas of partitions without a leader are told of them by the election, with
    the leader found (Kafka's controller first sends them with none, then again); one the
    election cannot lead is told of it after, with none."""
    for b in (1, 2, 3, 4):
        cluster.add(b)
    cluster.admin.create_topic("r", assignment={0: [2, 3], 1: [4, 3]})
    cluster.pump()
    for b in (2, 3, 4):
        cluster.kill(b)
    assert [cluster.state("r", p).leader for p in (0, 1)] == [-1, -1]
    assert [list(cluster.state("r", p).isr) for p in (0, 1)] == [[3], [4]]
    back = cluster.add(3).handler
    told: dict[TopicPartition, list[int]] = {}
    for request in back.received(LeaderAndIsrRequest):
        assert isinstance(request, LeaderAndIsrRequest)
        for p in request.partitions:
            told.setdefault(tp(p.topic, p.partition), []).append(p.leader)
    assert told == {tp("r", 0): [3], tp("r", 1): [-1]}
    assert cluster.active().controller.ctx.replica_states[(tp("r", 1), 3)] is ReplicaState.ONLINE


def test_bounce_is_leave_then_join_with_the_new_broker_epoch(three: Cluster) -> None:
    b2 = three.participants[2].handler
    old_epoch = b2.epoch
    three.bounce(2)
    assert b2.epoch != old_epoch
    ctl = three.active().controller
    assert ctl.ctx.brokers[2].epoch == b2.epoch
    # leadership moved away on the leave; the join sent LeaderAndIsr for its replicas
    assert three.state("t", 1).leader == 3
    latest = b2.received(LeaderAndIsrRequest)[-1]
    assert latest.broker_epoch == b2.epoch
    assert {(p.topic, p.partition) for p in latest.partitions} == {("t", 0), ("t", 1), ("t", 2)}
    assert ctl.ctx.replica_states[(tp("t", 1), 2)] is ReplicaState.ONLINE


def _deliver(c: Cluster, broker: int, request: BrokerRequest) -> BrokerResponse:
    answers: list[BrokerResponse] = []
    c.network.channel().send(broker, [request], lambda _b, _r, answer: answers.append(answer))
    return answers[0]


def test_requests_for_an_old_broker_epoch_are_refused_by_the_participant(three: Cluster
                                                                        ) -> None:
    """The participant fences its handler: a request meant for an earlier registration of the
    broker is answered STALE_BROKER_EPOCH and never reaches the handler."""
    b3 = three.participants[3].handler
    stale = b3.received(UpdateMetadataRequest)[-1]
    three.bounce(3)
    assert stale.broker_epoch < three.participants[3].broker_epoch
    seen = len(b3.received())
    assert _deliver(three, 3, stale).error == ErrorCode.STALE_BROKER_EPOCH
    assert len(b3.received()) == seen and b3.rejected() == []
    assert b3.handle(stale).error == ErrorCode.STALE_BROKER_EPOCH  # the double fences on its own too


def test_requests_from_an_older_controller_epoch_are_refused_by_the_participant(
        three: Cluster) -> None:
    three.kill(1)  # controller moves to 2 at epoch 2
    b3 = three.participants[3].handler
    assert b3.controller_epoch == 2
    from dataclasses import replace

    old = replace(b3.received(UpdateMetadataRequest)[-1], controller_epoch=1)
    seen = len(b3.received())
    assert _deliver(three, 3, old).error == ErrorCode.STALE_CONTROLLER_EPOCH
    assert len(b3.received()) == seen and b3.rejected() == []
    assert b3.handle(old).error == ErrorCode.STALE_CONTROLLER_EPOCH


# --- topics ------------------------------------------------------------------------------------


def test_topic_from_replication_factor_uses_rack_aware_assignment(cluster: Cluster) -> None:
    for b, rack in ((1, "a"), (2, "a"), (3, "b"), (4, "b"), (5, "c"), (6, "c")):
        cluster.add(b, rack=rack)
    a = cluster.admin.create_topic("r", 12, 3, rng=random.Random(7))
    cluster.pump()
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    for replicas in a.partitions.values():
        assert len({racks[b] for b in replicas}) == 3
    for p, replicas in a.partitions.items():
        assert cluster.state("r", p).leader == replicas[0]


def test_partition_addition_creates_only_the_new_partitions(three: Cluster) -> None:
    before = three.state("t", 0)
    three.admin.add_partitions("t", 5, rng=random.Random(1))
    three.pump()
    assert three.state("t", 0) == before
    for p in (3, 4):
        s = three.state("t", p)
        assert s.leader_epoch == 0 and s.leader in (1, 2, 3)
    ctx = three.active().controller.ctx
    assert ctx.partition_states[tp("t", 4)] is PartitionState.ONLINE


# --- ISR change notifications ------------------------------------------------------------------


def test_isr_change_notification_updates_metadata_and_is_deleted(three: Cluster) -> None:
    leader_md = three.participants[1].metadata
    assert change_isr(leader_md, tp("t", 0), [1, 2])
    three.pump()
    ctl = three.active().controller
    assert ctl.ctx.leaders[tp("t", 0)].isr == (1, 2)
    assert three.participants[3].handler.metadata()[tp("t", 0)].isr == (1, 2)
    assert three.metadata.isr_change_notifications() == []


# --- reassignment ------------------------------------------------------------------------------


def _catch_up(c: Cluster, part: TopicPartition, isr: list[int]) -> None:
    leader = c.state(part.topic, part.partition).leader
    assert change_isr(c.participants[leader].metadata, part, isr)
    c.pump()


def test_reassignment_follows_kafkas_procedure(cluster: Cluster) -> None:
    for b in (1, 2, 3, 4):
        cluster.add(b)
    cluster.admin.create_topic("m", assignment={0: [1, 2]})
    cluster.pump()
    cluster.admin.reassign({tp("m", 0): [3, 4]})
    cluster.pump()
    # phase A: RS = target + original, adding/removing in the topic node, new replicas told
    a = cluster.metadata.assignments(["m"])["m"].value
    assert a.partitions[0] == (3, 4, 1, 2)
    assert a.adding[0] == (3, 4) and a.removing[0] == (1, 2)
    assert cluster.state("m", 0).leader_epoch == 1
    assert tp("m", 0) in cluster.participants[4].handler.leader_and_isr()
    assert cluster.admin.reassignments_in_progress() == {tp("m", 0): (3, 4)}
    # phase B once the ISR covers the target
    _catch_up(cluster, tp("m", 0), [1, 2, 3, 4])
    a = cluster.metadata.assignments(["m"])["m"].value
    assert a.partitions[0] == (3, 4) and not a.adding and not a.removing
    s = cluster.state("m", 0)
    assert s.leader == 3 and set(s.isr) == {3, 4}
    assert cluster.admin.reassignments_in_progress() == {}
    assert cluster.metadata.reassignment() is None
    assert tp("m", 0) in cluster.participants[1].handler.stopped(deleted=True)
    ctx = cluster.active().controller.ctx
    assert (tp("m", 0), 1) not in ctx.replica_states
    assert ctx.replicas[tp("m", 0)] == (3, 4)


def test_a_replica_reassigned_away_is_deleted_at_the_leader_epoch_not_as_a_topic_deletion(
        cluster: Cluster) -> None:
    """Kafka's controller sends EPOCH_DURING_DELETE (-2) only for a topic being deleted: a
    tiered replica told so deletes the topic's remote data too. A replica that leaves by
    reassignment gets the partition's leader epoch: the remote data stays for the others."""
    for b in (1, 2, 3, 4):
        cluster.add(b)
    cluster.admin.create_topic("m", assignment={0: [1, 2]})
    cluster.pump()
    cluster.admin.reassign({tp("m", 0): [3, 4]})
    cluster.pump()
    _catch_up(cluster, tp("m", 0), [1, 2, 3, 4])
    epoch = cluster.state("m", 0).leader_epoch
    deletes = [p for r in cluster.participants[1].handler.received(StopReplicaRequest)
               for p in r.partitions if p.delete]
    assert deletes and {p.leader_epoch for p in deletes} == {epoch}
    assert epoch >= 0
    cluster.admin.delete_topic("m")
    cluster.pump()
    deletes = [p for r in cluster.participants[3].handler.received(StopReplicaRequest)
               for p in r.partitions if p.delete]
    assert deletes and {p.leader_epoch for p in deletes} == {EPOCH_DURING_DELETE}


def test_reassignment_to_an_offline_broker_waits_until_it_returns(cluster: Cluster) -> None:
    for b in (1, 2, 3, 4):
        cluster.add(b)
    cluster.admin.create_topic("m", assignment={0: [1, 2]})
    cluster.pump()
    cluster.kill(4)
    cluster.admin.reassign({tp("m", 0): [1, 4]})
    cluster.pump()
    assert cluster.metadata.assignments(["m"])["m"].value.partitions[0] == (1, 4, 2)
    assert cluster.admin.reassignments_in_progress()  # waiting
    back = cluster.add(4)
    assert tp("m", 0) in back.handler.leader_and_isr()
    _catch_up(cluster, tp("m", 0), [1, 2, 4])
    assert cluster.metadata.assignments(["m"])["m"].value.partitions[0] == (1, 4)
    assert set(cluster.state("m", 0).isr) == {1, 4}
    assert cluster.admin.reassignments_in_progress() == {}


def test_reassignment_is_resumed_by_a_new_controller(cluster: Cluster) -> None:
    for b in (1, 2, 3, 4):
        cluster.add(b)
    cluster.admin.create_topic("m", assignment={0: [1, 2], 1: [2, 1]})
    cluster.pump()
    cluster.admin.reassign({tp("m", 0): [3, 4], tp("m", 1): [2, 3]})
    cluster.pump()
    cluster.kill(1)  # the controller dies mid-reassignment
    ctl = cluster.active().controller
    assert ctl.broker_id == 2
    assert set(ctl.ctx.reassignments) == {tp("m", 0), tp("m", 1)}
    _catch_up(cluster, tp("m", 0), [2, 3, 4])
    _catch_up(cluster, tp("m", 1), [2, 3])
    a = cluster.metadata.assignments(["m"])["m"].value
    assert a.partitions == {0: (3, 4), 1: (2, 3)}
    assert cluster.state("m", 0).leader in (3, 4)
    assert cluster.metadata.reassignment() is None


def test_a_new_controller_drops_requests_already_done_or_not_valid(three: Cluster) -> None:
    """Found by the fault harness (seed of kind failover-during-reassignment): the controller
    wrote a move's final assignment and died before taking it out of
    /admin/reassign_partitions. The standbys had seen the request and ignored it, as standbys
    do; the next controller skipped it at failover as already done, and it stayed for good
    (every later ``reassign`` refused as in progress). Kafka's controller drops such entries at
    failover, and invalid ones too."""
    three.admin_client.create(layout.REASSIGN_PARTITIONS, encode_reassignment({
        tp("t", 0): [1, 2, 3],  # what the topic node already says: done
        tp("nope", 0): [1],  # no such topic
    }))
    three.kill(1)  # its queued event never runs; 2 and 3 saw the node as standbys
    assert three.active().id == 2
    assert three.metadata.reassignment() is None


def test_a_request_the_controller_died_before_reading_is_carried_out_by_the_next(
        three: Cluster) -> None:
    """The same with a move still to do: a reorder, which waits for the dead broker 1 (out of
    the ISR since the failover) to return and catch up."""
    three.admin_client.create(layout.REASSIGN_PARTITIONS, encode_reassignment({
        tp("t", 0): [1, 2, 3],
        tp("t", 1): [1, 3, 2],
    }))
    three.kill(1)
    assert three.metadata.reassignment().value == {tp("t", 1): (1, 3, 2)}  # t-0 dropped
    assert 1 not in three.state("t", 1).isr
    three.add(1)
    _catch_up(three, tp("t", 1), [2, 3, 1])
    assert three.metadata.reassignment() is None
    assert three.metadata.assignments(["t"])["t"].value.partitions[1] == (1, 3, 2)
    assert three.active().controller.ctx.reassignments == {}


def test_a_reassignment_cancelled_after_its_leader_died_never_empties_the_isr(
        cluster: Cluster) -> None:
    """Issue 14 #6, on the public path: topic on [1], reassigned to [2, 3, 4] (the ISR grows
    to [1, 2, 3]), broker 1 dies (leader 2, ISR [2, 3]), and the request is rewritten back to
    [1]. Replicas 2, 3 and 4 go Offline; Kafka takes them out of the ISR one at a time and
    keeps the last member: leader -1, ISR [3] (it was written as leader -1, ISR [])."""
    for b in (1, 2, 3, 4, 5):
        cluster.add(b)  # 5: the controller stays put when 1 dies
    cluster.admin.create_topic("m", assignment={0: [1]})
    cluster.pump()
    cluster.admin.reassign({tp("m", 0): [2, 3, 4]})
    cluster.pump()
    _catch_up(cluster, tp("m", 0), [1, 2, 3])
    assert cluster.metadata.assignments(["m"])["m"].value.partitions[0] == (2, 3, 4, 1)
    cluster.kill(1)
    s = cluster.state("m", 0)
    assert (s.leader, s.isr) == (2, (2, 3))
    cluster.admin_client.set(layout.REASSIGN_PARTITIONS, encode_reassignment({tp("m", 0): [1]}))
    cluster.pump()
    s = cluster.state("m", 0)
    assert (s.leader, s.isr) == (-1, (3,))
    assert cluster.metadata.assignments(["m"])["m"].value.partitions[0] == (1,)


def test_invalid_reassignment_entries_are_dropped(three: Cluster) -> None:
    three.metadata.request_reassignment({tp("t", 0): [1, 1], tp("nope", 0): [1]})
    three.pump()
    assert three.metadata.reassignment() is None
    assert three.state("t", 0).leader_epoch == 0


# --- preferred election ------------------------------------------------------------------------


def test_preferred_election_moves_leadership_back_and_deletes_the_node(three: Cluster) -> None:
    three.bounce(2)  # partition 1 moves to 3
    assert three.state("t", 1).leader == 3
    _catch_up(three, tp("t", 1), [3, 1, 2])  # broker 2 is back in the ISR
    three.admin.elect_preferred([tp("t", 1)])
    three.pump()
    assert three.state("t", 1).leader == 2
    assert three.metadata.preferred_election() is None


def _rejoined_unannounced(cluster: Cluster) -> TopicPartition:
    """Broker 2 is back in the ISR of ``p-0`` (leader 3) as its leader writes it, but the ISR
    change notification that tells the controller has not come yet (leaders batch them)."""
    for b in (1, 2, 3):
        cluster.add(b)
    cluster.admin.create_topic("p", assignment={0: [2, 3]})
    cluster.pump()
    cluster.kill(2)
    cluster.add(2)
    part = tp("p", 0)
    assert (cluster.state("p", 0).leader, list(cluster.state("p", 0).isr)) == (3, [3])
    path = layout.partition_state("p", 0)
    data, stat = cluster.admin_client.get(path)
    node = PartitionStateNode.decode(path, data)
    cluster.admin_client.set(path, PartitionStateNode(
        leader=3, leader_epoch=node.leader_epoch, isr=(3, 2),
        controller_epoch=node.controller_epoch, extra=node.extra).encode(), stat.version)
    return part


def test_an_election_refused_on_a_stale_isr_is_decided_again_on_the_stored_one(
        cluster: Cluster) -> None:
    """Kafka's controller reads every partition's state before it elects; this one decides
    on its context, and re-reads what it refused: broker 2 is in the stored ISR, so the
    preferred election makes it leader instead of finding no eligible leader."""
    part = _rejoined_unannounced(cluster)
    reply = cluster.active().controller.request_leader_election([part])
    cluster.pump()
    assert reply.result(5)[part].error is None and reply.result(5)[part].leader == 2
    state = cluster.state("p", 0)
    assert (state.leader, sorted(state.isr)) == (2, [2, 3])


def test_a_controlled_shutdown_moves_a_leader_whose_isr_grew_unannounced(
        cluster: Cluster) -> None:
    part = _rejoined_unannounced(cluster)
    b3 = cluster.participants[3]
    reply = cluster.active().controller.request_controlled_shutdown(3, b3.broker_epoch)
    cluster.pump()
    assert reply.result(5) == ()
    state = cluster.state("p", 0)
    assert (state.leader, list(state.isr)) == (2, [2]), part


@pytest.mark.parametrize("crowded", [False, True], ids=["found-by-broker", "decided"])
def test_a_partition_without_a_live_replica_is_refused_without_a_read(cluster: Cluster,
                                                                      crowded: bool) -> None:
    """A broker's return elects the offline partitions; those with no live replica at all
    fail, and are not re-read as a refusal on a stale ISR is (no stored value can give them a
    leader). The stored node below moved without the controller hearing of it: a re-read
    would have brought its partition epoch into the context. With few replicas on the live
    brokers they are found from the brokers' side; ``crowded`` (broker 1 hosts more
    partitions than are offline), each is decided and refused."""
    for b in (1, 2, 3, 4):
        cluster.add(b)
    if crowded:
        cluster.admin.create_topic("filler", assignment={p: [1] for p in range(4)})
    cluster.admin.create_topic("q", assignment={0: [2, 3], 1: [3, 4]})
    cluster.pump()
    for b in (4, 2, 3):
        cluster.kill(b)
    ctl = cluster.active().controller
    dead, hosted = tp("q", 0), tp("q", 1)
    assert ctl.ctx.leaders[dead].leader < 0 and ctl.ctx.leaders[hosted].leader < 0
    for part in (dead, hosted):
        path = layout.partition_state(part.topic, part.partition)
        data, stat = cluster.admin_client.get(path)
        cluster.admin_client.set(path, data, stat.version)  # the node moves, its value does not
    before = {part: ctl.ctx.leaders[part].partition_epoch for part in (dead, hosted)}
    cluster.add(4)
    assert ctl.ctx.leaders[dead].partition_epoch == before[dead]
    assert dead in ctl.ctx.leaderless
    # q-1's replica 4 is live but not in the ISR (3): that refusal is re-read, as before
    assert ctl.ctx.leaders[hosted].partition_epoch == before[hosted] + 1
    assert refusal((2, 3), (3,), frozenset({1, 4})) == "no eligible leader among (2, 3) (isr (3,))"
    assert type(refusal((2, 3), (3,), frozenset({1, 4}))) is NoLiveReplica
    assert type(refusal((3, 4), (3,), frozenset({1, 4}))) is Refusal


def test_preferred_election_node_is_deleted_even_when_it_cannot_happen(cluster: Cluster) -> None:
    for b in (1, 2, 3):
        cluster.add(b)
    cluster.admin.create_topic("p", assignment={0: [3, 2]})
    cluster.pump()
    cluster.kill(3)
    epoch = cluster.state("p", 0).leader_epoch
    cluster.admin.elect_preferred([tp("p", 0), tp("p", 0)])
    cluster.pump()
    assert cluster.metadata.preferred_election() is None
    assert cluster.state("p", 0).leader == 2 and cluster.state("p", 0).leader_epoch == epoch


# --- controlled shutdown -----------------------------------------------------------------------


@pytest.mark.parametrize("leaving", [1, 2, 3])
def test_controlled_shutdown_of_each_broker_in_turn(three: Cluster, leaving: int) -> None:
    p = three.participants[leaving]
    future = three.active().controller.request_controlled_shutdown(leaving, p.broker_epoch)
    three.pump()
    assert future.result(1) == ()
    for part in range(3):
        s = three.state("t", part)
        assert s.leader != leaving and leaving not in s.isr
    stopped = p.handler.stopped(deleted=False)
    assert stopped == {tp("t", x) for x in range(3)} - {tp("t", (leaving - 1))}
    ctl = three.active().controller
    assert leaving in ctl.ctx.shutting_down
    three.kill(leaving)
    assert leaving not in three.active().controller.ctx.shutting_down


def test_controlled_shutdown_through_the_network_api(three: Cluster) -> None:
    three.threaded = False
    import threading

    result: list[object] = []
    t = threading.Thread(target=lambda: result.append(three.participants[3].controlled_shutdown(5)))
    t.start()
    while t.is_alive():
        three.pump()
        t.join(0.01)
    assert result == [()]
    assert three.state("t", 2).leader != 3


def test_controlled_shutdown_with_a_stale_broker_epoch_is_refused(three: Cluster) -> None:
    p = three.participants[2]
    stale = p.broker_epoch
    three.bounce(2)
    future = three.active().controller.request_controlled_shutdown(2, stale)
    three.pump()
    with pytest.raises(StaleBrokerEpoch):
        future.result(1)
    assert 2 not in three.active().controller.ctx.shutting_down


def _shut_down_3(three: Cluster):  # type: ignore[no-untyped-def]
    b3 = three.participants[3].handler
    future = three.active().controller.request_controlled_shutdown(3, b3.epoch)
    three.pump()
    assert future.result(1) == ()
    return b3


def test_a_broker_in_controlled_shutdown_hears_of_its_own_leaders_moving(three: Cluster) -> None:
    """Kafka sends the metadata of a LeaderAndIsr change to liveOrShuttingDownBrokerIds: the
    broker shutting down hears it too. Its live list leaves that broker out here, from the
    controlled shutdown's announcement on, so that no leader proposes it back into an ISR;
    Kafka 3.9's lists it (ControllerChannelManager builds the list from
    liveOrShuttingDownBrokers) and refuses such a proposal in AlterPartition instead."""
    b3 = _shut_down_3(three)
    meta = b3.metadata()[tp("t", 2)]
    assert meta.leader == 1 and 3 not in meta.isr
    assert 3 not in b3.live_brokers()


def test_a_new_leader_hears_that_the_broker_leaving_is_not_live_before_it_leads(
        three: Cluster) -> None:
    """partctl's leaders write their ISRs themselves (the state node, as Kafka's brokers did
    before AlterPartition), so the controller cannot refuse a leaving broker back into an
    ISR: each leader must leave it out on its own. The live list without it reaches every
    broker before any LeaderAndIsr of the controlled shutdown, and the follower step (ISR
    shrink, StopReplica) comes after both."""
    for p in three.participants.values():
        p.handler.clear()
    _shut_down_3(three)
    for b in (1, 2):
        got = three.participants[b].handler.received()
        lais = [i for i, r in enumerate(got) if isinstance(r, LeaderAndIsrRequest)]
        assert lais, f"broker {b} heard no LeaderAndIsr"
        announced = [r for r in got[:lais[0]] if isinstance(r, UpdateMetadataRequest)]
        assert announced and all(3 not in [x.id for x in r.live_brokers] for r in announced)
        moved, *shrunk = (got[i] for i in lais)
        assert all(3 not in x.isr for x in moved.partitions)
        # the ISR shrink of what broker 3 followed came in a later LeaderAndIsr
        assert shrunk and all(3 not in x.isr for r in shrunk for x in r.partitions)
    first = three.participants[1].handler.received(LeaderAndIsrRequest)[0]
    assert [(x.topic, x.partition, x.leader) for x in first.partitions] == [("t", 2, 1)]


def _isr_change(c: Cluster) -> None:
    assert change_isr(c.participants[1].metadata, tp("t", 0), [1])


def _broker_update(c: Cluster) -> None:
    info = BrokerInfo(id=2, host="127.0.0.1", port=9093)
    c.admin_client.set(layout.broker(2), info.encode())


@pytest.mark.parametrize(("trigger", "heard"), [
    (_isr_change, lambda m, live: m[tp("t", 0)].isr == (1,)),
    (lambda c: c.admin.create_topic("n", assignment={0: [1, 2]}),
     lambda m, live: tp("n", 0) in m),
    (lambda c: c.kill(2), lambda m, live: live == [1]),
    (lambda c: c.add(4), lambda m, live: live == [1, 2, 4]),
    (_broker_update, lambda m, live: True),
    (lambda c: c.admin.delete_topic("t"), lambda m, live: m[tp("t", 0)].leader == -2),
], ids=["isr-change", "new-topic", "broker-failure", "broker-startup", "broker-update",
        "topic-deletion"])
def test_a_broker_in_controlled_shutdown_still_gets_every_metadata_update(
        three: Cluster, trigger, heard) -> None:  # type: ignore[no-untyped-def]
    """Every UpdateMetadata path of Kafka's controller goes to liveOrShuttingDownBrokerIds."""
    b3 = _shut_down_3(three)
    b3.clear()
    trigger(three)
    three.pump()
    assert b3.received(UpdateMetadataRequest), "no UpdateMetadata reached broker 3"
    assert heard(b3.metadata(), b3.live_brokers())


def test_a_new_broker_gets_the_full_metadata_and_the_others_the_news(three: Cluster) -> None:
    """Kafka's onBrokerStartup: the brokers already there get UpdateMetadata with no partition
    (the new live broker list), the new one a single UpdateMetadata with every partition."""
    for p in three.participants.values():
        p.handler.clear()
    four = three.add(4)
    updates = four.handler.received(UpdateMetadataRequest)
    assert len(updates) == 1 and len(updates[0].partitions) == 3
    for b in (1, 2, 3):
        assert [len(r.partitions) for r in
                three.participants[b].handler.received(UpdateMetadataRequest)] == [0]


def test_controlled_shutdown_answers_with_partitions_it_still_leads(cluster: Cluster) -> None:
    """Kafka's answer: the replicated partitions the broker could not hand over ("stuck": its
    other replica's broker died, so the ISR is the leader alone). A single-replica partition
    is not counted: it cannot move, and the broker must not keep asking for it."""
    for b in (1, 2, 3):
        cluster.add(b)
    cluster.admin.create_topic("single", assignment={0: [2]})
    cluster.admin.create_topic("double", assignment={0: [2, 1]})
    cluster.admin.create_topic("stuck", assignment={0: [2, 3]})
    cluster.pump()
    cluster.kill(3)
    cluster.pump()
    assert cluster.state("stuck", 0).leader == 2 and cluster.state("stuck", 0).isr == (2,)
    future = cluster.active().controller.request_controlled_shutdown(
        2, cluster.participants[2].broker_epoch)
    cluster.pump()
    assert future.result(1) == (tp("stuck", 0),)
    assert cluster.state("double", 0).leader == 1
    assert cluster.state("single", 0).leader == 2


def test_controlled_shutdown_leaves_a_topic_being_deleted_alone(
    three: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """Kafka's partitionsToActOn: partitions of a topic queued for deletion are not acted on
    (not even tried, and refused by the state machine) when a broker shuts down; the other
    topic's are. Nor are they counted as still led: the broker would ask again and again for
    a deletion that waits for a dead broker (found by the fault harness)."""
    three.admin.create_topic("other", assignment={0: [1, 2]})
    three.pump()
    three.kill(3)
    three.admin.delete_topic("t")  # waits for broker 3: "t" stays, queued for deletion
    three.pump()
    ctl = three.active().controller
    led = (tp("t", 0), tp("t", 2))  # t-2's leader 3 died: 1 took over
    assert all(ctl.ctx.is_deleting(x) and ctl.ctx.leaders[x].leader == 1 for x in led)
    before = {x: ctl.ctx.leaders[x] for x in led}
    caplog.set_level(logging.INFO, logger="state.change.logger")
    future = ctl.request_controlled_shutdown(1, three.participants[1].broker_epoch)
    three.pump()
    assert future.result(1) == ()
    assert {x: ctl.ctx.leaders[x] for x in led} == before
    assert not [r for r in caplog.records if "refused" in r.getMessage()]
    assert three.state("other", 0).leader == 2 and three.state("other", 0).isr == (2,)


# --- topic deletion ----------------------------------------------------------------------------


def test_topic_deletion(three: Cluster) -> None:
    three.admin.delete_topic("t")
    three.pump()
    assert "t" not in three.admin.list_topics()
    assert three.metadata.topics_to_delete() == []
    assert three.participants[2].handler.stopped(deleted=True) == {tp("t", p) for p in range(3)}
    assert three.admin_client.exists(layout.partitions("t")) is None
    ctx = three.active().controller.ctx
    assert not ctx.replica_states and not ctx.partition_states and "t" not in ctx.topics


def test_topic_deletion_with_a_broker_down_resumes_when_it_returns(three: Cluster) -> None:
    three.kill(3)
    three.admin.delete_topic("t")
    three.pump()
    ctx = three.active().controller.ctx
    assert "t" in ctx.deletion_ineligible
    assert ctx.replica_states[(tp("t", 0), 3)] is ReplicaState.DELETION_INELIGIBLE
    assert ctx.replica_states[(tp("t", 0), 1)] is ReplicaState.DELETION_SUCCESSFUL
    assert "t" in three.admin.list_topics()
    back = three.add(3)
    assert "t" not in three.admin.list_topics()
    assert back.handler.stopped(deleted=True) == {tp("t", p) for p in range(3)}
    assert three.metadata.topics_to_delete() == []


def test_topic_deletion_begun_after_a_failover_with_brokers_down_waits_for_them(
        three: Cluster) -> None:
    """The controller that takes over with 3 and 1 down stores no state for their replicas
    (they read Offline by the rule); a deletion begun then stores them Ineligible, so that
    3's return resumes the deletion of its replicas while 1's stay Ineligible, and the topic
    goes once 1 is back too."""
    three.kill(3)
    three.kill(1)  # the controller moves to 2, with 3 and 1 down
    ctl = three.active().controller
    ctx = ctl.ctx
    assert ctl.broker_id == 2 and ctx.replica_states.explicit() == {}
    three.admin.delete_topic("t")
    three.pump()
    assert "t" in ctx.deletion_ineligible
    on_1, on_3 = (tp("t", 0), 1), (tp("t", 0), 3)
    for key in (on_1, on_3):
        assert ctx.replica_states.explicit()[key] is ReplicaState.DELETION_INELIGIBLE
    three.add(3)
    assert ctx.replica_states[on_3] is ReplicaState.DELETION_SUCCESSFUL
    assert ctx.replica_states[on_1] is ReplicaState.DELETION_INELIGIBLE
    assert "t" in three.admin.list_topics()
    back = three.add(1)
    assert "t" not in three.admin.list_topics()
    assert back.handler.stopped(deleted=True) == {tp("t", p) for p in range(3)}


def test_deleting_an_unknown_topic_request_is_removed(three: Cluster) -> None:
    three.admin_client.create(layout.delete_topic("ghost"), make_parents=True)
    three.pump()
    assert three.metadata.topics_to_delete() == []


# --- auto leader rebalance ---------------------------------------------------------------------


def test_auto_rebalance_after_a_broker_returns(three: Cluster) -> None:
    three.bounce(2)
    assert three.state("t", 1).leader == 3
    _catch_up(three, tp("t", 1), [3, 1, 2])
    ctl = three.active().controller
    ctl.process(ev.AutoRebalanceTick())
    three.pump()
    assert three.state("t", 1).leader == 2
    assert three.participants[2].handler.leads() == {tp("t", 1)}


def test_auto_rebalance_leaves_balanced_clusters_alone(three: Cluster) -> None:
    ctl = three.active().controller
    before = [three.state("t", p) for p in range(3)]
    ctl.process(ev.AutoRebalanceTick())
    assert [three.state("t", p) for p in range(3)] == before


def test_auto_rebalance_timer_fires_on_its_interval() -> None:
    from statemachines.controller import ControllerConfig

    c = Cluster(threaded=True,
                config=ControllerConfig(leader_imbalance_check_interval_seconds=0.05))
    try:
        for b in (1, 2, 3):
            c.add(b)
        c.admin.create_topic("t", assignment={0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]})
        c.pump()
        c.bounce(2)
        _catch_up(c, tp("t", 1), [3, 1, 2])
        from tests.waiting import wait_until

        wait_until(lambda: c.state("t", 1).leader == 2, timeout=5, message="rebalance")
    finally:
        c.close()


def test_stop_replica_requests_carry_epochs(three: Cluster) -> None:
    three.kill(2)
    b1 = three.participants[1].handler
    assert all(r.controller_epoch == 1 and r.broker_epoch == b1.epoch
               for r in b1.received(StopReplicaRequest) + b1.received(UpdateMetadataRequest))
