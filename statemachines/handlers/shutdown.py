"""Controlled shutdown (Kafka's doControlledShutdown): move leadership off the broker, take its
follower replicas Offline (ISR shrink, StopReplica), answer with what it still leads."""

from __future__ import annotations

from typing import TYPE_CHECKING

from elections.leader import ControlledShutdown
from statemachines import events as ev
from statemachines.errors import BrokerNotAvailable, StaleBrokerEpoch
from statemachines.partition_sm import record_leader_and_isr
from statemachines.states import ReplicaState

if TYPE_CHECKING:
    from statemachines.controller import Controller


def on_controlled_shutdown(ctl: Controller, event: ev.ControlledShutdownRequested) -> None:
    ctx, psm, rsm = ctl.ctx, ctl.partitions, ctl.replicas
    assert psm is not None and rsm is not None
    b = event.broker_id
    registered = ctx.brokers.get(b)
    if registered is None:
        event.reply.set_exception(BrokerNotAvailable(b))
        return
    if registered.epoch != event.broker_epoch:
        event.reply.set_exception(StaleBrokerEpoch(b, event.broker_epoch, registered.epoch))
        return
    ctx.shutting_down.add(b)
    replicas = ctx.replicas
    leaders = ctx.leaders
    hosted = [tp for tp in ctx.replicas_on(b)
              if len(replicas.get(tp, ())) > 1 and not ctx.is_deleting(tp)]
    hosted.sort()
    led = [tp for tp in hosted if (value := leaders.get(tp)) is not None and value.leader == b]
    led_set = set(led)
    followers = rsm.split([(tp, b) for tp in hosted if tp not in led_set], ReplicaState.OFFLINE)
    leaving = {tp: (b,) for tp, _ in followers if tp in leaders}
    # One pass, one bulk write: leadership moves off the broker (ISR minus every broker
    # shutting down) and its follower replicas leave the ISR of the others.
    outcome, written, unshrunk = psm.elect_and_shrink(
        led, ControlledShutdown(shutting_down=frozenset(ctx.shutting_down)), leaving)
    batch = ctl.new_batch()
    brokers, shutting = ctx.brokers, ctx.shutting_down
    recipients = {}
    for tp in written:
        if tp in led_set:
            recipients[tp] = [r for r in replicas.get(tp, ()) if r in brokers and r not in shutting]
        else:
            recipients[tp] = [r for r in replicas.get(tp, ())
                              if r != b and ctx.replica_online(tp, r)]
    record_leader_and_isr(ctx, batch, written, recipients=recipients)
    rsm.mark_offline([k for k in followers if k[0] not in unshrunk], batch)
    ctl.send(batch)
    still_led = sorted(tp for tp in ctx.led_by(b))
    event.reply.set_result(tuple(still_led))
