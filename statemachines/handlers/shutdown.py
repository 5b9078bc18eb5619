"""Controlled shutdown (Kafka's doControlledShutdown): move leadership off the broker, take its
follower replicas Offline (ISR shrink, StopReplica), answer with what it still leads.

What it still leads is counted as Kafka counts it: the partitions of more than one replica,
of a topic not queued for deletion. A single-replica partition cannot move and a topic being
deleted is left alone, so neither keeps the broker asking again: it stops, and they go
offline with it (a deletion waits for its replicas anyway).

Kafka does both steps in one event and then answers. Here the second step waits until the
brokers have answered the first (``ControllerServices.send_then``: those not shutting down
themselves and still registered, at most ``shutdown_answers_wait``): the new leaders take
over, and every broker's metadata names them, without the controller's process busy with the
follower step meanwhile. The broker is answered after both, as in Kafka, so it is out of every
ISR before it stops and no acks=all write waits on it. Between the steps other events may run; the broker is then already in
``shutting_down``, so no election chooses it and no ISR change takes it back: the leaders have
heard it is no longer live (step 0), and AlterPartition refuses it (INELIGIBLE_REPLICA)."""

from __future__ import annotations

from coordinator.codecs import TopicPartition, sorted_partitions
from elections.leader import ControlledShutdown
from interbroker.errors import BrokerNotAvailable, StaleBrokerEpoch
from interbroker.fencing import log_fenced
from statemachines import events as ev
from statemachines.context import ControllerContext
from statemachines.partition_sm import record_leader_and_isr
from statemachines.services import ControllerServices
from statemachines.states import ReplicaState


def _acted_on(ctx: ControllerContext, b: int) -> set[TopicPartition]:
    """The partitions of ``b`` a controlled shutdown acts on (Kafka's partitionsToActOn):
    more than one replica, ``b`` among them, the topic not being deleted."""
    replicas, deleting = ctx.replicas, ctx.deleting
    return {tp for tp in ctx.replicas_on(b)
            if len(replicas.get(tp, ())) > 1 and tp.topic not in deleting}


def _registered(svc: ControllerServices, b: int, epoch: int) -> Exception | None:
    """Why broker ``b`` at ``epoch`` cannot shut down now, or None."""
    registered = svc.ctx.brokers.get(b)
    if registered is None:
        return BrokerNotAvailable(b)
    if registered.epoch != epoch:
        log_fenced("controller", svc.broker_id, f"ControlledShutdown of broker {b}",
                   "stale broker epoch", given=epoch, current=registered.epoch)
        return StaleBrokerEpoch(b, epoch, registered.epoch)
    return None


def on_controlled_shutdown(svc: ControllerServices, event: ev.ControlledShutdownRequested) -> None:
    ctx, psm = svc.ctx, svc.partitions
    b = event.broker_id
    refused = _registered(svc, b, event.broker_epoch)
    if refused is not None:
        event.reply.set_exception(refused)
        return
    ctx.shutting_down.add(b)
    # 0. Every broker (b too, as every UpdateMetadata) learns first that b is no longer live
    #    (the live list leaves it out), so no leader takes b back into an ISR while it follows
    #    on its way out: the leaders write ISRs themselves, so the controller cannot refuse
    #    it as Kafka's does in AlterPartition (KIP-841's rule).
    announce = svc.new_batch()
    announce.add_update_metadata(None)
    svc.send(announce)
    acted_on = _acted_on(ctx, b)
    led = sorted_partitions(tp for tp in ctx.led_by(b) if tp in acted_on)
    # 1. Leadership moves off the broker: one write per partition, new leader and ISR minus
    #    every broker shutting down.
    _, written = psm.elect_unrecorded(
        led, ControlledShutdown(shutting_down=frozenset(ctx.shutting_down)))
    batch = svc.new_batch()
    # Kafka's liveOrShuttingDownReplicas: the old leader hears it too and becomes a follower
    # before it stops, instead of leading until its process ends.
    brokers, replicas = ctx.brokers, ctx.replicas
    recipients = {tp: [r for r in replicas.get(tp, ()) if r in brokers] for tp in written}
    record_leader_and_isr(ctx, batch, written, recipients=recipients)
    # 2. comes once the brokers have answered: the replicas it follows (what it led stays a
    #    follower replica until the broker stops, as in Kafka)
    followed = tuple(sorted_partitions(acted_on.difference(led)))
    svc.send_then(batch, ev.ControlledShutdownLeadersMoved(
        broker_id=b, broker_epoch=event.broker_epoch, controller_epoch=svc.epoch,
        followed=followed, reply=event.reply))


def on_leaders_moved(svc: ControllerServices, event: ev.ControlledShutdownLeadersMoved) -> None:
    """2. The replicas the broker followed go Offline (StopReplica, ISR shrink written in one
    bulk pass), those still acted on; then the broker is answered with what it still leads."""
    ctx, rsm = svc.ctx, svc.replicas
    b = event.broker_id
    refused = _registered(svc, b, event.broker_epoch)
    if refused is not None or b not in ctx.shutting_down:
        # gone (or back with a new registration) since the first step: nobody to answer
        event.reply.set_exception(refused or BrokerNotAvailable(b))
        return
    acted_on = _acted_on(ctx, b)
    followers = [(tp, b) for tp in event.followed if tp in acted_on]
    batch = svc.new_batch()
    rsm.handle(followers, ReplicaState.OFFLINE, batch)
    svc.send(batch)
    event.reply.set_result(tuple(sorted_partitions(tp for tp in ctx.led_by(b) if tp in acted_on)))
