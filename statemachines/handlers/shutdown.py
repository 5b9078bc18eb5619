"""Controlled shutdown (Kafka's doControlledShutdown): move leadership off the broker, answer
with what it still leads, take its follower replicas Offline (ISR shrink, StopReplica).

What it still leads is counted as Kafka counts it: the partitions of more than one replica,
of a topic not queued for deletion. A single-replica partition cannot move and a topic being
deleted is left alone, so neither keeps the broker asking again: it stops, and they go
offline with it (a deletion waits for its replicas anyway).

Kafka answers after both steps; here the answer goes out once leadership has moved (the only
thing the broker waits for), and the follower step follows in the same event, so no other
event sees the broker half shut down."""

from __future__ import annotations

from coordinator.codecs import TopicPartition, sorted_partitions
from elections.leader import ControlledShutdown
from interbroker.errors import BrokerNotAvailable, StaleBrokerEpoch
from interbroker.fencing import log_fenced
from statemachines import events as ev
from statemachines.partition_sm import record_leader_and_isr
from statemachines.services import ControllerServices
from statemachines.states import ReplicaState


def on_controlled_shutdown(svc: ControllerServices, event: ev.ControlledShutdownRequested) -> None:
    ctx, psm, rsm = svc.ctx, svc.partitions, svc.replicas
    b = event.broker_id
    registered = ctx.brokers.get(b)
    if registered is None:
        event.reply.set_exception(BrokerNotAvailable(b))
        return
    if registered.epoch != event.broker_epoch:
        log_fenced("controller", svc.broker_id, f"ControlledShutdown of broker {b}",
                   "stale broker epoch", given=event.broker_epoch, current=registered.epoch)
        event.reply.set_exception(StaleBrokerEpoch(b, event.broker_epoch, registered.epoch))
        return
    ctx.shutting_down.add(b)
    # 0. Every broker (b too, as every UpdateMetadata) learns first that b is no longer live
    #    (the live list leaves it out), so no leader takes b back into an ISR while it follows
    #    on its way out (KIP-841's rule; Kafka's ZooKeeper controller refuses such an ISR).
    announce = svc.new_batch()
    announce.add_update_metadata(None)
    svc.send(announce)
    replicas = ctx.replicas
    deleting = ctx.deleting

    def acted_on(tp: TopicPartition) -> bool:  # Kafka's partitionsToActOn
        assigned = replicas.get(tp, ())
        return len(assigned) > 1 and b in assigned and tp.topic not in deleting

    led = sorted_partitions(tp for tp in ctx.led_by(b) if acted_on(tp))
    # 1. Leadership moves off the broker: one write per partition, new leader and ISR minus
    #    every broker shutting down. The broker is answered as soon as that is done and told:
    #    what it still leads is all it needs to know to stop.
    _, written = psm.elect_unrecorded(
        led, ControlledShutdown(shutting_down=frozenset(ctx.shutting_down)))
    batch = svc.new_batch()
    # Kafka's liveOrShuttingDownReplicas: the old leader hears it too and becomes a follower
    # before it stops, instead of leading until its process ends.
    brokers = ctx.brokers
    recipients = {tp: [r for r in replicas.get(tp, ()) if r in brokers] for tp in written}
    record_leader_and_isr(ctx, batch, written, recipients=recipients)
    svc.send(batch)
    event.reply.set_result(tuple(sorted_partitions(tp for tp in ctx.led_by(b) if acted_on(tp))))
    # 2. Its follower replicas go Offline (StopReplica, ISR shrink written in one bulk pass),
    #    in the same event: nothing else runs in between. (Worked out only now: the broker
    #    is not kept waiting for it.)
    led_set = set(led)
    followers = [(tp, b) for tp in sorted_partitions(ctx.replicas_on(b))
                 if tp not in led_set and acted_on(tp)]
    batch = svc.new_batch()
    rsm.handle(followers, ReplicaState.OFFLINE, batch)
    svc.send(batch)
