"""Brokers joining, leaving and bouncing (Kafka's onBrokerStartup / onBrokerFailure).

A bounce is a registration with a new broker epoch (a new create id of its node): the old
incarnation is treated as failed, then the new one as joined.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from coordinator.codecs import sorted_partitions
from statemachines import events as ev
from statemachines.context import ControllerContext
from statemachines.states import PartitionState, ReplicaState

if TYPE_CHECKING:
    from statemachines.controller import Controller


def apply_broker_node(ctx: ControllerContext, event: ev.BrokerNodeChanged) -> str | None:
    """Apply a registration change to the view; what it was: joined, left, bounced, updated."""
    from statemachines.controller import registered_broker

    known = ctx.brokers.get(event.broker_id)
    if event.stat is None or event.data is None:
        if known is None:
            return None
        ctx.remove_broker(event.broker_id)
        return "left"
    new = registered_broker(event.broker_id, event.data, event.stat)
    ctx.add_broker(new)
    if known is None:
        return "joined"
    if known.epoch != new.epoch:
        return "bounced"
    return "updated" if known.info != new.info else None


def on_broker_node(ctl: Controller, event: ev.BrokerNodeChanged) -> None:
    ctx = ctl.ctx
    if not ctl.active:
        apply_broker_node(ctx, event)
        return
    known = ctx.brokers.get(event.broker_id)
    change = apply_broker_node(ctx, event)
    b = event.broker_id
    if change == "left":
        on_broker_failure(ctl, [b])
    elif change == "joined":
        on_broker_startup(ctl, [b])
    elif change == "bounced":
        assert known is not None
        current = ctx.brokers[b]
        ctx.add_broker(known)  # fail the old incarnation first
        on_broker_failure(ctl, [b])
        ctx.add_broker(current)
        on_broker_startup(ctl, [b])
    elif change == "updated":
        batch = ctl.new_batch()
        batch.add_update_metadata(None)
        ctl.send(batch)


def on_broker_failure(ctl: Controller, ids: list[int]) -> None:
    ctx, psm, rsm = ctl.ctx, ctl.partitions, ctl.replicas
    assert psm is not None and rsm is not None
    for b in ids:
        ctx.remove_broker(b)
    led = sorted_partitions(tp for b in ids for tp in ctx.led_by(b) if not ctx.is_deleting(tp))
    psm.to_offline(led)
    # New leaders first, and told at once (Kafka's onReplicasBecomeOffline); then the failed
    # replicas leave the ISR of the partitions they followed.
    batch = ctl.new_batch()
    psm.to_online(led, batch)
    ctl.send(batch)
    batch = ctl.new_batch()
    keys = [(tp, b) for b in ids for tp in sorted_partitions(ctx.replicas_on(b))]
    deleting = [k for k in keys if ctx.is_deleting(k[0])]
    rsm.handle([k for k in keys if not ctx.is_deleting(k[0])], ReplicaState.OFFLINE, batch)
    if deleting:
        from statemachines.handlers import deletion

        deletion.fail_replicas(ctl, deleting, batch)
    batch.add_update_metadata(None)
    ctl.send(batch)


def on_broker_startup(ctl: Controller, ids: list[int]) -> None:
    from statemachines.handlers import deletion, reassignment
    from statemachines.handlers.failover import send_full_metadata

    ctx, rsm = ctl.ctx, ctl.replicas
    assert rsm is not None
    batch = ctl.new_batch()
    batch.add_update_metadata(None)
    ctl.send(batch)
    send_full_metadata(ctl, ids)
    batch = ctl.new_batch()
    keys = [(tp, b) for b in ids for tp in ctx.replicas_on(b) if not ctx.is_deleting(tp)]
    rsm.handle(keys, ReplicaState.ONLINE, batch)
    ctl.send(batch)
    elect_leaderless(ctl)
    reassignment.on_brokers_started(ctl, ids)
    deletion.on_brokers_started(ctl, ids)


def elect_leaderless(ctl: Controller) -> None:
    """New and Offline partitions (not being deleted) to Online (Kafka's
    triggerOnlinePartitionStateChange)."""
    ctx, psm = ctl.ctx, ctl.partitions
    assert psm is not None
    tps = [tp for tp in ctx.leaderless if not ctx.is_deleting(tp)]
    if not tps:
        return
    batch = ctl.new_batch()
    offline = [tp for tp in tps if ctx.partition_states.get(tp) is PartitionState.OFFLINE]
    new = [tp for tp in tps if ctx.partition_states.get(tp) is PartitionState.NEW]
    if new:
        from statemachines.handlers.topics import bring_online

        bring_online(ctl, new, batch)
    if offline:
        psm.to_online(offline, batch)
    ctl.send(batch)
