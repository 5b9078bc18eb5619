"""Controlled shutdown (Kafka's doControlledShutdown): move leadership off the broker, take its
follower replicas Offline (ISR shrink, StopReplica), answer with what it still leads."""

from __future__ import annotations

from typing import TYPE_CHECKING

from elections.leader import ControlledShutdown
from statemachines import events as ev
from statemachines.errors import BrokerNotAvailable, StaleBrokerEpoch
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
    hosted = [tp for tp in ctx.replicas_on(b)
              if len(ctx.replicas.get(tp, ())) > 1 and not ctx.is_deleting(tp)]
    led = [tp for tp in hosted if ctx.leaders.get(tp) is not None
           and ctx.leaders[tp].leader == b]
    led_set = set(led)
    batch = ctl.new_batch()
    psm.to_online(led, batch, ControlledShutdown(shutting_down=frozenset(ctx.shutting_down)))
    rsm.handle([(tp, b) for tp in hosted if tp not in led_set], ReplicaState.OFFLINE, batch)
    ctl.send(batch)
    still_led = sorted(tp for tp in ctx.led_by(b))
    event.reply.set_result(tuple(still_led))
