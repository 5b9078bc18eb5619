"""What a controller does on winning the election (Kafka's onControllerFailover)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from statemachines.handlers import brokers, deletion, isr, preferred, reassignment
from statemachines.partition_sm import PartitionStateMachine, record_leader_and_isr, tp_key
from statemachines.replica_sm import ReplicaStateMachine
from statemachines.requests import UpdateMetadataPartition

if TYPE_CHECKING:
    from statemachines.controller import Controller


def on_controller_failover(ctl: Controller, started: float, elected: float) -> None:
    from statemachines.controller import FailoverTimings

    ctx, md = ctl.ctx, ctl.metadata
    assert ctl.fence is not None
    warm = ctl.config.hot_standby
    if warm:
        ctl.complete_view()
    else:
        ctl.load_view()
    ctl.partitions = PartitionStateMachine(
        ctx, ctl.fence, md, unclean=ctl.config.unclean_leader_election_enable)
    if warm:
        # Watches of different nodes need not arrive in store order (etcd watch streams):
        # re-read the few brokers, and any partition the view has no leader for yet.
        _reconcile_brokers(ctl)
        missing = [tp for tp in ctx.replicas if tp not in ctx.leaders]
        if missing:
            ctl.partitions.refresh(missing)
    view_ready = time.monotonic()

    ctl.replicas = ReplicaStateMachine(ctx, ctl.partitions)
    ctx.reset_controller_state()
    if ctl.config.delete_topic_enable:
        ctx.deleting.update(t for t in md.topics_to_delete() if t in ctx.topics)
    reassignment.load_in_progress(ctl)
    ctl.partitions.initialize()
    ctl.replicas.initialize()

    send_full_metadata(ctl, None)
    metadata_sent = time.monotonic()

    # Tell every online replica its leader and ISR: the old controller may have died between
    # writing a decision and sending it.
    batch = ctl.new_batch()
    record_leader_and_isr(ctx, batch, [tp for tp in ctx.leaders if tp in ctx.replicas])
    ctl.send(batch)

    brokers.elect_leaderless(ctl)
    reassignment.resume(ctl)
    deletion.resume(ctl)
    preferred.on_preferred_election_request(ctl)
    isr.on_isr_change_notification(ctl)
    if warm:
        ctl.unwatch_partition_states()
    else:
        ctl.arm_watches_after_load()
    ctl.start_rebalance_timer()
    ctl.last_failover = FailoverTimings(
        epoch=ctl.fence.epoch.epoch, started=started, elected=elected, view_ready=view_ready,
        metadata_sent=metadata_sent, done=time.monotonic(), warm=warm)


def _reconcile_brokers(ctl: Controller) -> None:
    ctx = ctl.ctx
    registered = ctl.metadata.brokers()
    for b in [b for b in ctx.brokers if b not in registered]:
        ctx.remove_broker(b)
    for broker in registered.values():
        ctx.add_broker(broker)


def send_full_metadata(ctl: Controller, brokers_: list[int] | None) -> None:
    """UpdateMetadata with every partition to ``brokers_`` (None: every live broker)."""
    ctx = ctl.ctx
    live = ctx.brokers
    of = UpdateMetadataPartition.of
    partitions = []
    leaders = ctx.leaders
    for tp in sorted(leaders, key=tp_key):
        value = leaders[tp]
        replicas = ctx.replicas.get(tp)
        if replicas is None:
            continue
        offline = [r for r in replicas if r not in live]
        partitions.append(of(tp, value, replicas, offline))
    batch = ctl.new_batch()
    batch.add_update_metadata(brokers_, partitions)
    ctl.send(batch)
