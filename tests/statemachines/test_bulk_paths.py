"""The controller's bulk paths keep Kafka's behaviour: two bulk writes in a controlled shutdown
(leaders, then followers), replica states derived from the view, and a standby that applies
many watched states in one event. (The state node's bytes: tests/coordinator/test_codecs.py.)"""

from __future__ import annotations

import random

import pytest

import statemachines.partition_sm as psm_module
from coordinator import Create, layout
from coordinator.codecs import TopicAssignment, TopicPartition
from coordinator.metadata import ControllerMoved
from elections.controller_election import Fence, NotController
from elections.leader import LeaderAndIsr
from statemachines import events as ev
from statemachines.context import ControllerContext, FullMetadata
from statemachines.partition_sm import ElectionOutcome, shrink_isr
from statemachines.states import ReplicaState
from tests.statemachines.conftest import Cluster, tp


def test_controlled_shutdown_moves_leaders_then_shrinks_followers_in_two_bulk_writes(
        three: Cluster) -> None:
    ctl = three.active().controller
    assert ctl.fence is not None
    writes = ctl.fence.writes
    future = ctl.request_controlled_shutdown(2, three.participants[2].broker_epoch)
    three.pump()
    assert future.result(1) == ()
    assert ctl.fence.writes == writes + 2
    for p in range(3):
        s = three.state("t", p)
        assert s.leader != 2 and 2 not in s.isr
    keys = [(tp("t", p), 2) for p in range(3)]
    # the partition it led keeps its replica on 2 (a follower now); the others' go Offline
    assert [ctl.ctx.replica_states[k] for k in keys] == [
        ReplicaState.OFFLINE, ReplicaState.ONLINE, ReplicaState.OFFLINE]


def test_replica_states_are_derived_from_the_view_after_failover(three: Cluster) -> None:
    three.kill(3)
    ctx = three.active().controller.ctx
    assert ctx.replica_states[(tp("t", 0), 1)] is ReplicaState.ONLINE
    assert ctx.replica_states[(tp("t", 0), 3)] is ReplicaState.OFFLINE
    assert (tp("t", 0), 4) not in ctx.replica_states
    three.add(3)
    assert ctx.replica_states[(tp("t", 0), 3)] is ReplicaState.ONLINE
    assert ctx.replica_states.explicit() == {}
    assert len(ctx.replica_states) == 9


def test_a_broker_loss_stores_no_state_for_its_replicas(three: Cluster) -> None:
    """The replicas of a broker that is gone read Offline by the rule, as after a failover:
    nothing is stored for them (a whole cluster lost at a million partitions stored three
    million entries), and its return reads them Online. An Offline stored on a live broker
    (a controlled shutdown's follower) is forgotten once the broker is gone."""
    ctx = three.active().controller.ctx
    explicit = ctx.replica_states.explicit()
    three.kill(3)
    gone = [(tp("t", p), 3) for p in range(3)]
    assert [ctx.replica_states[k] for k in gone] == [ReplicaState.OFFLINE] * 3
    assert explicit == {}
    three.add(3)
    assert [ctx.replica_states[k] for k in gone] == [ReplicaState.ONLINE] * 3
    assert explicit == {}
    three.active().controller.request_controlled_shutdown(2, three.participants[2].broker_epoch)
    three.pump()
    followed = (tp("t", 0), 2)
    assert explicit.get(followed) is ReplicaState.OFFLINE  # stored: 2 is still live
    three.kill(2)
    assert followed not in explicit and ctx.replica_states[followed] is ReplicaState.OFFLINE


def test_a_replica_added_after_failover_is_non_existent_until_new(three: Cluster) -> None:
    ctx = three.active().controller.ctx
    ctx.set_replicas(tp("t", 0), (1, 2, 3, 4))
    assert (tp("t", 0), 4) not in ctx.replica_states
    ctx.replica_states[(tp("t", 0), 4)] = ReplicaState.NEW
    assert ctx.replica_states[(tp("t", 0), 4)] is ReplicaState.NEW
    ctx.set_replicas(tp("t", 0), (1, 2, 3))  # leaving the assignment keeps its state
    assert ctx.replica_states[(tp("t", 0), 4)] is ReplicaState.NEW


def test_replica_states_read_and_set_in_bulk_as_one_at_a_time(three: Cluster) -> None:
    """states_of and set_all (a whole cluster's replicas at once) give and store what the
    one-key reads and writes do, in every case the rule has: stored, derived Online and
    Offline, Ineligible for a topic being deleted, NonExistent out of the assignment."""
    three.admin.create_topic("t2", assignment={0: [3]})
    three.pump()
    three.kill(3)
    ctx = three.active().controller.ctx
    states = ctx.replica_states
    states[(tp("t", 1), 2)] = ReplicaState.OFFLINE  # stored on a live broker
    ctx.set_replicas(tp("t", 0), (1, 2, 3, 4))  # 4 joins: stored NonExistent
    ctx.deleting.add("t2")
    assert (tp("t2", 0), 3) not in states.explicit()  # derived: Ineligible (none stored on the loss)
    keys = [(tp("t", p), b) for p in range(3) for b in (1, 2, 3, 4, 5)] + [
        (tp("t2", 0), 3), (tp("t2", 0), 1)]
    one_at_a_time = [states.get(k, ReplicaState.NON_EXISTENT) for k in keys]
    assert states.states_of(keys) == one_at_a_time
    assert {ReplicaState.ONLINE, ReplicaState.OFFLINE, ReplicaState.NON_EXISTENT,
            ReplicaState.DELETION_INELIGIBLE} <= set(one_at_a_time)
    for target in (ReplicaState.ONLINE, ReplicaState.OFFLINE, ReplicaState.NEW):
        before = dict(states.explicit())
        for k in keys:
            states[k] = target
        by_key = dict(states.explicit())
        states.start_tracking(before)
        states.set_all(keys, target)
        assert states.explicit() == by_key, target


def test_the_standby_applies_many_state_changes_in_one_event(three: Cluster) -> None:
    standby = three.participants[2].controller
    assert not standby.active
    target = [tp("t", 1), tp("t", 2)]
    three.metadata.request_preferred_election(target)
    for c in [three.admin_client, *(p.coordinator for p in three.participants.values())]:
        c.sync()
    three.participants[1].controller.events.run_pending()
    three.participants[2].coordinator.sync()
    queued = standby.events.take(lambda e: isinstance(e, ev.PartitionStatesPending))
    assert len(queued) <= 1
    for e in queued:
        standby.process(e)
    three.pump()
    for t in target:
        active_view = three.active().controller.ctx.leaders[t]
        assert standby.ctx.leaders[t] == active_view
        item = three.metadata.partition_states([t])[t]
        assert item is not None and item.version == active_view.partition_epoch


def test_the_standby_follows_every_state_with_one_tree_watch(three: Cluster) -> None:
    standby = three.participants[2].controller
    assert not standby.active
    assert standby.view.following
    three.active().controller.close()  # the active one has no tree watch
    three.pump()
    now = three.active().controller
    assert now.active and not now.view.following


def test_a_resync_makes_the_standby_reread_every_state(three: Cluster) -> None:
    from coordinator.model import TreeEvent

    standby = three.participants[2].controller
    three.pump()
    truth = dict(standby.ctx.leaders)
    for t in list(truth)[:2]:
        standby.ctx.remove_leader(t)  # as if changes had been missed
    standby.view.on_tree_event(TreeEvent(path="/brokers/topics", changes=[], revision=0,
                                         resync=True))
    queued = standby.events.take(lambda e: isinstance(e, ev.PartitionStatesPending))
    assert len(queued) == 1
    standby.process(queued[0])
    assert standby.ctx.leaders == truth


def test_a_leader_write_reaches_the_view_slice_by_slice(
        three: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first slices' new leaders are in the context while later slices are still being
    decided: a broker loss shows its first new leaders before the last are written."""
    monkeypatch.setattr(psm_module, "WRITE_SLICE", 1)
    ctl = three.active().controller
    psm = ctl.partitions
    assert psm is not None
    tps = [tp("t", p) for p in range(3)]
    before = {t: ctl.ctx.leaders[t].leader_epoch for t in tps}
    seen_when_deciding: dict[TopicPartition, int] = {}

    def bump(t: TopicPartition, cur: LeaderAndIsr) -> LeaderAndIsr:
        seen_when_deciding[t] = ctl.ctx.leaders[tps[0]].leader_epoch
        return cur._replace(leader_epoch=cur.leader_epoch + 1,
                            controller_epoch=psm.controller_epoch)

    outcome = ElectionOutcome()
    assert psm.write_leaders(tps, bump, outcome) == tps
    assert seen_when_deciding[tps[0]] == before[tps[0]]
    # On the memory store a slice is answered as it is sent: the first partition's new
    # epoch is in the view before the third partition is decided.
    assert seen_when_deciding[tps[2]] == before[tps[0]] + 1
    for t in tps:
        assert three.state("t", t.partition).leader_epoch == before[t] + 1
        assert ctl.ctx.leaders[t] == outcome.elected[t]


def _fence_and_scratch(three: Cluster) -> Fence:
    """The active controller's fence, and an empty /scratch for its streams to write in."""
    fence = three.active().controller.fence
    assert fence is not None
    three.admin_client.create("/scratch")
    return fence


def test_a_fenced_stream_sends_nothing_once_the_fence_is_closed(three: Cluster) -> None:
    fence = _fence_and_scratch(three)

    def batches():  # type: ignore[no-untyped-def]
        yield [Create(path="/scratch/a")]
        fence.close()  # a session loss, seen between two batches
        yield [Create(path="/scratch/b")]

    got = []
    with pytest.raises(NotController):
        for answer in fence.write_stream(batches()):
            got.append(answer)
    assert got == [["/scratch/a"]]
    assert three.admin_client.children("/scratch") == ["a"]


def test_a_fenced_stream_of_a_deposed_controller_lands_nothing_more(three: Cluster) -> None:
    fence = _fence_and_scratch(three)

    def batches():  # type: ignore[no-untyped-def]
        yield [Create(path="/scratch/a")]
        three.admin_client.set(layout.CONTROLLER_EPOCH, b"99")  # another controller's election
        for i in range(20):
            yield [Create(path=f"/scratch/z{i}")]

    with pytest.raises(ControllerMoved):
        list(fence.write_stream(batches()))
    assert not fence.is_open
    assert three.admin_client.children("/scratch") == ["a"]


@pytest.mark.parametrize(("leader", "isr", "leaving", "expected"), [
    (2, (2, 3), [2, 3, 4], (-1, (3,))),  # the last member stays, whoever it is
    (2, (2, 3), [3, 2], (-1, (2,))),  # one at a time, in the order given
    (1, (1, 2, 3), [2], (1, (1, 3))),
    (1, (1,), [1], (-1, (1,))),  # a sole leader leaves the lead, not the ISR
    (1, (1, 2), [4], None),
    (1, (1, 2), [], None),
])
def test_replicas_leave_the_isr_one_at_a_time_and_never_empty_it(
    leader: int, isr: tuple[int, ...], leaving: list[int], expected: tuple | None  # type: ignore[type-arg]
) -> None:
    current = LeaderAndIsr(leader=leader, leader_epoch=4, isr=isr, controller_epoch=1,
                           partition_epoch=9)
    got = shrink_isr(current, leaving, 2)
    if expected is None:
        assert got is None
    else:
        assert got == LeaderAndIsr(leader=expected[0], leader_epoch=5, isr=expected[1],
                                   controller_epoch=2, partition_epoch=9)


def test_a_cold_load_keys_leaders_and_replicas_by_the_same_partition_objects() -> None:
    """set_topic hands a cold load the partition objects it keyed the replicas by (``every``),
    and the load reads the states with them: one object per partition, not two."""
    from coordinator.codecs import TopicAssignment
    from statemachines.context import ControllerContext

    ctx = ControllerContext()
    every: list[TopicPartition] = []
    ctx.set_topic(TopicAssignment(topic="a", partitions={0: (1,)}), 0)
    added = ctx.set_topic(TopicAssignment(topic="t", partitions={0: (1, 2), 1: (2, 3)}), 0,
                          every=every)
    assert every == [tp("t", 0), tp("t", 1)] == added
    keys = {id(k) for k in ctx.replicas}
    assert all(id(p) in keys for p in every)
    ctx.set_topic(TopicAssignment(topic="a", partitions={0: (1,), 1: (2,)}), 1, every=every)
    assert every[2:] == [tp("a", 0), tp("a", 1)]


def test_a_new_topic_is_set_a_topic_at_a_time_as_partition_by_partition() -> None:
    """A cold load sets each topic in one pass (_set_new_topic): the same replicas, hosts and
    partitions per topic as set_replicas partition by partition; a known topic, or one set
    while metadata changes are noted, goes partition by partition."""
    from coordinator.codecs import TopicAssignment
    from statemachines.context import ControllerContext

    topics = [TopicAssignment(topic=f"t{t}", partitions={
        p: tuple((p + k) % 5 + 1 for k in range(1 + p % 3)) for p in range(7)}) for t in range(3)]
    topics.append(TopicAssignment(topic="none", partitions={}))
    bulk, each = ControllerContext(), ControllerContext()
    for a in topics:
        assert bulk.set_topic(a, 0) == [tp(a.topic, p) for p in a.partitions]
        for p, replicas in a.partitions.items():
            each.set_replicas(tp(a.topic, p), replicas)
    assert bulk.replicas == each.replicas
    assert bulk.replicas_on_all() == each.replicas_on_all()
    assert bulk._partitions_of == each._partitions_of  # noqa: SLF001
    assert "none" in bulk.topics and "none" not in bulk._partitions_of  # noqa: SLF001
    grown = TopicAssignment(topic="t0", partitions={**topics[0].partitions, 7: (2,)})
    assert bulk.set_topic(grown, 1) == [tp("t0", 7)]
    assert bulk.replicas_on(2) >= {tp("t0", 7)}
    with pytest.MonkeyPatch.context() as m:  # a cold load's topic is set in one pass
        m.setattr(ControllerContext, "set_replicas", lambda *_: pytest.fail("per partition"))
        assert len(ControllerContext().set_topic(topics[1], 0)) == 7


@pytest.mark.parametrize("seed", range(6))
def test_the_count_of_partitions_without_a_state_follows_every_change(seed: int) -> None:
    """``ControllerContext.unstated``, which spares a hot failover a pass over every partition,
    is the count a pass would find, whatever order topics, states and deletions come in."""
    rng = random.Random(seed)
    ctx = ControllerContext()
    if seed % 2:
        ctx.keep_full_metadata(FullMetadata((), (), frozenset()))  # set_topic's general path
    topics = ["a", "b", "c", "d"]
    for _ in range(400):
        topic = rng.choice(topics)
        op = rng.random()
        if op < 0.3:
            partitions = {p: (1 + p % 3, 2) for p in range(rng.randint(1, 6))}
            ctx.set_topic(TopicAssignment(topic=topic, partitions=partitions), 0,
                          only_new=rng.random() < 0.3)
        elif op < 0.6:
            p = TopicPartition(topic, rng.randint(0, 7))  # some of no topic's assignment
            ctx.set_leader(p, LeaderAndIsr(1, 0, (1,), 1, 0))
        elif op < 0.85:
            ctx.remove_leader(TopicPartition(topic, rng.randint(0, 7)))
        else:
            ctx.remove_topic(topic)
        assert ctx.unstated == sum(1 for tp in ctx.replicas if tp not in ctx.leaders)


@pytest.mark.parametrize("seed", range(6))
def test_the_hosted_index_a_cold_load_defers_is_built_as_one_kept_all_along(seed: int) -> None:
    """A cold load leaves the per-broker index of hosted partitions to be built when first
    asked for (a cold failover's metadata needs the brokers only). Whatever changes come
    meanwhile (topics added and grown, replicas moved, topics removed), the index built then
    equals one kept up to date all along, and the brokers named meanwhile (hosting_brokers)
    include every broker that hosts a partition."""
    rng = random.Random(seed)
    lazy, kept = ControllerContext(), ControllerContext()
    first = {p: (1 + p % 4, 1 + (p + 1) % 4) for p in range(6)}
    for ctx in (lazy, kept):
        ctx.set_topic(TopicAssignment(topic="a", partitions=first), 0)  # a cold load's topic
    assert lazy._replicas_on is None  # noqa: SLF001
    kept.replicas_on_all()
    topics = ["a", "b", "c", "d"]
    for _ in range(300):
        topic = rng.choice(topics)
        op = rng.random()
        for ctx in (lazy, kept):
            state = random.Random(op)  # the same choices for both
            if op < 0.4:
                partitions = {p: tuple(state.sample(range(1, 9), 2))
                              for p in range(state.randint(1, 6))}
                ctx.set_topic(TopicAssignment(topic=topic, partitions=partitions), 0)
            elif op < 0.85:
                ctx.set_replicas(TopicPartition(topic, state.randint(0, 7)),
                                 state.sample(range(1, 9), state.randint(1, 3)))
            else:
                ctx.remove_topic(topic)
        named = {b for b, hosted in kept.replicas_on_all().items() if hosted}
        assert named <= set(lazy.hosting_brokers())
    assert lazy._replicas_on is None  # noqa: SLF001 (nothing asked for it yet)

    def hosting(ctx: ControllerContext) -> dict[int, set[TopicPartition]]:
        return {b: hosted for b, hosted in ctx.replicas_on_all().items() if hosted}

    assert hosting(lazy) == hosting(kept)
    assert {b: lazy.replicas_on(b) for b in range(10)} == {b: kept.replicas_on(b)
                                                           for b in range(10)}


def test_a_bulk_read_of_states_shares_equal_ones_and_skips_a_corrupt_one(
        caplog: pytest.LogCaptureFixture) -> None:
    """Equal state nodes (same bytes, same version) give one shared value; a node of the same
    bytes at another version its own; a corrupt one is skipped with one warning and an absent
    one leaves the partition without a state, whatever the values shared before them."""
    import logging
    import uuid

    import coordinator
    from coordinator.codecs import PartitionStateNode
    from coordinator.metadata import MetadataClient
    from coordinator.skipped import SkippedTopics
    from statemachines.reads import read_partition_states

    client = coordinator.connect(f"memory://shared-{uuid.uuid4().hex[:8]}")
    try:
        md = MetadataClient(client)
        md.ensure_layout()
        state = PartitionStateNode(leader=1, leader_epoch=4, isr=(1, 2),
                                   controller_epoch=3).encode()
        nodes = {0: state, 1: state, 2: state, 3: b"{not json", 5: state}
        client.ensure_path(layout.partition_state("t", 0).rsplit("/", 2)[0])
        for p in range(6):
            client.ensure_path(layout.partition_state("t", p).rsplit("/", 1)[0])
            if p in nodes:
                client.create(layout.partition_state("t", p), nodes[p])
        client.set(layout.partition_state("t", 2), state)  # version 1
        ctx = ControllerContext()
        every: list[TopicPartition] = []
        ctx.set_topic(TopicAssignment(topic="t", partitions={p: (1, 2) for p in range(6)}), 0,
                      every=every)
        with caplog.at_level(logging.WARNING):
            read_partition_states(md, ctx, every, SkippedTopics(logging.getLogger("x"), "c"))
        expected = LeaderAndIsr(1, 4, (1, 2), 3, 0)
        leaders = ctx.leaders
        assert leaders[tp("t", 0)] == expected and leaders[tp("t", 0)] is leaders[tp("t", 1)]
        assert leaders[tp("t", 5)] is leaders[tp("t", 0)]
        assert leaders[tp("t", 2)] == expected._replace(partition_epoch=1)
        assert tp("t", 3) not in leaders and tp("t", 4) not in leaders
        assert ctx.unstated == 2
        assert [r.getMessage() for r in caplog.records
                if "skipping the state" in r.getMessage()] != []
    finally:
        client.close()


def test_replica_moves_refuse_the_illegal_ones_and_move_the_rest(three: Cluster) -> None:
    """One replica out of the assignment (NonExistent) among legal ones: it keeps its state
    and is not returned, the others move; when every one is legal, all move, in order."""
    ctl = three.active().controller
    rsm, states = ctl.services.replicas, ctl.ctx.replica_states
    legal = [(tp("t", p), b) for p in range(3) for b in (1, 2)]
    stranger = (tp("t", 0), 9)
    batch = ctl.services.new_batch()
    moved = rsm.handle([*legal[:3], stranger, *legal[3:]], ReplicaState.OFFLINE, batch)
    assert moved == legal
    assert all(states[k] is ReplicaState.OFFLINE for k in legal)
    assert states.get(stranger) is None
    assert rsm.handle(list(reversed(legal)), ReplicaState.ONLINE, batch,
                      tell=False) == list(reversed(legal))
    assert all(states[k] is ReplicaState.ONLINE for k in legal)
    assert rsm.handle([stranger], ReplicaState.ONLINE, batch) == []


def test_live_hosts_read_and_set_as_the_rule_does(three: Cluster) -> None:
    """For replicas on live brokers in their assignment (a returning broker's), the bulk
    paths that skip the rule give and store what the rule's paths do: stored states first
    (Offline on a live broker, NonExistent for a replica added after failover), else Online;
    and with nothing stored, a move Online stores nothing and moves every key."""
    ctl = three.active().controller
    ctx, rsm = ctl.ctx, ctl.services.replicas
    states = ctx.replica_states
    states[(tp("t", 1), 2)] = ReplicaState.OFFLINE  # stored on a live broker
    ctx.set_replicas(tp("t", 0), (1, 2, 3, 4))
    three.add(4)  # 4 registers: its replica of t-0 stays NonExistent (stored) until New
    keys = [(tp("t", p), b) for p in range(3) for b in (1, 2, 3)] + [(tp("t", 0), 4)]
    assert all(b in ctx.brokers and b in ctx.replicas[t] for t, b in keys)
    assert states.states_of(keys, live_hosts=True) == states.states_of(keys)
    assert ReplicaState.NON_EXISTENT in states.states_of(keys, live_hosts=True)
    before = dict(states.explicit())
    states.set_all(keys, ReplicaState.ONLINE)
    by_rule = dict(states.explicit())
    states.start_tracking(dict(before))
    states.set_all(keys, ReplicaState.ONLINE, live_hosts=True)
    assert states.explicit() == by_rule
    states.start_tracking(dict(before))
    batch = ctl.services.new_batch()
    moved = rsm.handle(keys, ReplicaState.ONLINE, batch, tell=False, live_hosts=True)
    assert moved == keys[:-1]  # the NonExistent one is refused, as the rule's path refuses it
    assert states.explicit() == {(tp("t", 0), 4): ReplicaState.NON_EXISTENT}
    states.start_tracking({})  # nothing stored: every key moves, nothing is looked up
    assert rsm.handle(keys[:-1], ReplicaState.ONLINE, batch, tell=False,
                      live_hosts=True) == keys[:-1]
    assert not states.explicit()
