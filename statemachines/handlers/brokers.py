"""Brokers joining, leaving and bouncing (Kafka's onBrokerStartup / onBrokerFailure).

A bounce is a registration with a new broker epoch (a new create id of its node): the old
incarnation is treated as failed, then the new one as joined.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from coordinator.codecs import TopicPartition, sorted_partitions
from statemachines import events as ev
from statemachines.context import ControllerContext, ReplicaKey
from statemachines.full_metadata import full_metadata
from statemachines.handlers import deletion, reassignment
from statemachines.reads import apply_broker_node
from statemachines.services import ControllerServices
from statemachines.states import ReplicaState


def on_broker_node(svc: ControllerServices, event: ev.BrokerNodeChanged) -> None:
    """A registration changed (the active controller): apply it to the view, then act on
    what it was."""
    ctx = svc.ctx
    known = ctx.brokers.get(event.broker_id)
    change = apply_broker_node(ctx, event)
    b = event.broker_id
    if change == "left":
        on_broker_failure(svc, [b])
    elif change == "joined":
        on_broker_startup(svc, [b])
    elif change == "bounced":
        assert known is not None
        current = ctx.brokers[b]
        ctx.add_broker(known)  # fail the old incarnation first
        on_broker_failure(svc, [b])
        ctx.add_broker(current)
        on_broker_startup(svc, [b])
    elif change == "updated":
        batch = svc.new_batch()
        batch.add_update_metadata(None)
        svc.send(batch)


def on_broker_nodes(svc: ControllerServices, events: list[ev.BrokerNodeChanged]) -> None:
    """A run of registration changes queued one after another (a cluster stopped or started,
    a rack lost): the brokers that left one after another fail together, and those that
    joined one after another start together, as Kafka's BrokerChange handles every broker it
    finds dead or new at once; bounces and updates, and the order between the groups, stay as
    they came. One at a time, each failure elected new leaders among brokers the next event
    removes, and each sent every broker the whole cluster's metadata again: at 1,000,000
    partitions, 100 brokers stopping kept the controller busy for over ten minutes."""
    ctx = svc.ctx
    group: list[int] = []
    kind = ""

    def flush() -> None:
        if group:
            (on_broker_failure if kind == "left" else on_broker_startup)(svc, list(group))
            group.clear()

    for event in events:
        known = event.broker_id in ctx.brokers
        gone = event.stat is None or event.data is None
        now = "left" if gone and known else "joined" if not gone and not known else ""
        if now != kind:
            flush()
            kind = now
        if now:
            apply_broker_node(ctx, event)
            group.append(event.broker_id)
        else:
            on_broker_node(svc, event)
    flush()


def on_broker_failure(svc: ControllerServices, ids: list[int]) -> None:
    ctx, psm, rsm = svc.ctx, svc.partitions, svc.replicas
    for b in ids:
        ctx.remove_broker(b)
    led = sorted_partitions(_not_deleting(ctx, [tp for b in ids for tp in ctx.led_by(b)]))
    psm.to_offline(led)
    # New leaders first, and told at once (Kafka's onReplicasBecomeOffline); then the failed
    # replicas leave the ISR of the partitions they followed.
    batch = svc.new_batch()
    psm.to_online(led, batch)
    svc.send(batch)
    batch = svc.new_batch()
    keys = [(tp, b) for b in ids for tp in sorted_partitions(ctx.replicas_on(b))]
    topics = ctx.deleting
    deleting = [k for k in keys if k[0].topic in topics] if topics else []
    rsm.handle([k for k in keys if k[0].topic not in topics] if deleting else keys,
               ReplicaState.OFFLINE, batch,
               derived_was=ReplicaState.ONLINE)
    if deleting:
        deletion.fail_replicas(svc, deleting, batch)
    batch.add_update_metadata(None)
    svc.send(batch)


def take_dead_replicas_out_of_isrs(svc: ControllerServices) -> None:
    """At failover, after the leaderless partitions were elected: replicas on brokers that are
    not live and still in an ISR go Offline through the transition (ISR shrink, one replica at
    a time, never emptied), as Kafka's ReplicaStateMachine.startup moves the offline replicas to
    OfflineReplica. Without it a dead follower stayed in the ISR until its leader dropped it
    for lagging (replica.lag.time.max.ms), and acks=all writes waited that long after every
    controller failover that lost a broker (the fault harness's write availability showed it)."""
    ctx = svc.ctx
    live = ctx.brokers
    leaders = ctx.leaders
    # Only the brokers that host replicas and are not live: nothing to scan when all are.
    keys = [(tp, b) for b, hosted in sorted(ctx.replicas_on_all().items()) if b not in live
            for tp in sorted_partitions(hosted)
            if tp in leaders and b in leaders[tp].isr and not ctx.is_deleting(tp)]
    if keys:
        batch = svc.new_batch()
        svc.replicas.handle(keys, ReplicaState.OFFLINE, batch)
        svc.send(batch)


def on_broker_startup(svc: ControllerServices, ids: list[int]) -> None:
    ctx, rsm = svc.ctx, svc.replicas
    # The brokers already there learn of the new ones; the new ones get every partition.
    batch = svc.new_batch()
    batch.add_update_metadata([b for b in ctx.brokers if b not in ids])
    svc.send(batch)
    send_full_metadata(svc, ids)
    batch = svc.new_batch()
    # The replicas of partitions without a leader hear of them from the election below, with
    # the leader it finds, and only those it leaves without one are told of them after it.
    # Kafka's controller tells them before it too, with no leader: twice the LeaderAndIsr
    # entries and metadata for every partition when a whole cluster comes back.
    # (Split by set operations, a broker at a time: when a whole cluster comes back, every
    # one of three million replicas waits. derived_was: a replica with no stored state read
    # Offline until its broker came back. live_hosts: each key is a replica on a broker of
    # ``ids``, just registered, of a partition it hosts.)
    leaderless, topics = ctx.leaderless, ctx.deleting
    led: list[ReplicaKey] = []
    waiting: list[ReplicaKey] = []
    for b in ids:
        hosted = ctx.replicas_on(b)
        some = hosted & leaderless if leaderless else ()
        waiting += [(tp, b) for tp in some if tp.topic not in topics] if topics else [
            (tp, b) for tp in some]
        if len(some) < len(hosted):
            rest = hosted - leaderless if some else hosted
            led += [(tp, b) for tp in rest if tp.topic not in topics] if topics else [
                (tp, b) for tp in rest]
    was = ReplicaState.OFFLINE
    if led:
        rsm.handle(led, ReplicaState.ONLINE, batch, derived_was=was, live_hosts=True)
    waiting = rsm.handle(waiting, ReplicaState.ONLINE, batch, tell=False, derived_was=was,
                         live_hosts=True)
    svc.send(batch)
    elect_leaderless(svc, joined=ids)
    unled = [k for k in waiting if k[0] in ctx.leaderless]
    if unled:
        batch = svc.new_batch()
        rsm.send_leader_and_isr(unled, batch)
        svc.send(batch)
    reassignment.on_brokers_started(svc, ids)
    deletion.on_brokers_started(svc, ids)


def elect_leaderless(svc: ControllerServices, joined: Collection[int] | None = None) -> None:
    """New and Offline partitions (not being deleted) to Online (Kafka's
    triggerOnlinePartitionStateChange): the partition machine alone. Replica states are left
    as they are, as Kafka's are: at failover a never-led partition's replicas on dead
    brokers stay Offline, where the replica machine's startup put them.

    With ``joined`` (brokers that just registered), only the partitions that broker can
    change: those with a replica on one of them, and those whose last election failed for an
    error. Kafka's controller tries every offline partition on each broker's return, and
    fails again for each whose replicas' brokers are as they were; here that was a pass over
    all of them per return, and a whole cluster of a million partitions coming back one
    broker at a time did a hundred such passes."""
    ctx, psm = svc.ctx, svc.partitions
    leaderless = ctx.leaderless
    candidates: set[TopicPartition] = leaderless
    errors = ctx.election_errors
    if joined is not None and errors:  # (leaderless all: the partition machine keeps them so)
        # Those whose node could not be read (missing or malformed) are read again: deciding
        # goes by the context, where they have no leader and ISR to go by.
        unread = [tp for tp in errors if tp not in ctx.leaders]
        if unread:
            psm.refresh(unread)
    if joined is not None and sum(len(ctx.replicas_on(b)) for b in joined) < len(leaderless):
        candidates = set().union(*(leaderless & ctx.replicas_on(b) for b in joined))
        candidates |= errors
    tps = _not_deleting(ctx, candidates)
    if not tps:
        return
    batch = svc.new_batch()
    psm.to_online(tps, batch)
    svc.send(batch)


def send_full_metadata(svc: ControllerServices, brokers_: list[int] | None) -> None:
    """UpdateMetadata with every partition to ``brokers_`` (None: every registered one): one
    entry per partition, shared by every broker's request."""
    batch = svc.new_batch()
    entries = full_metadata(svc.ctx)
    kept = svc.ctx.full_metadata
    batch.add_full_metadata(brokers_, entries, kept.topics if kept is not None else None)
    svc.send(batch)


def _not_deleting(ctx: ControllerContext, tps: Iterable[TopicPartition]) -> list[TopicPartition]:
    """``tps`` but those of topics being deleted (a million partitions are tested by topic
    name in one pass, and not at all when no topic is being deleted)."""
    deleting = ctx.deleting
    return [tp for tp in tps if tp.topic not in deleting] if deleting else list(tps)
