"""What a controller does on winning the election (Kafka's onControllerFailover)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from statemachines.handlers import brokers, deletion, isr, preferred, reassignment
from statemachines.partition_sm import PartitionStateMachine, record_leader_and_isr
from statemachines.replica_sm import ReplicaStateMachine
from statemachines.requests import UpdateMetadataPartition

if TYPE_CHECKING:
    from statemachines.controller import Controller


def on_controller_failover(ctl: Controller, started: float, elected: float) -> None:
    from statemachines.controller import FailoverTimings

    ctx, md = ctl.ctx, ctl.metadata
    assert ctl.fence is not None
    warm = ctl.config.hot_standby
    exact = False
    if warm:
        exact = ctl.complete_view(ctl.fence.epoch.revision)
    else:
        ctl.load_view()
    ctl.partitions = PartitionStateMachine(
        ctx, ctl.fence, md, unclean=ctl.config.unclean_leader_election_enable)
    if warm:
        # The brokers come from watches of their own, which on etcd need not have kept pace
        # with the tree watch: re-read the few of them. A view not known complete up to the
        # election also re-reads the topic list (and in bulk any topic it lacks).
        _reconcile_brokers(ctl)
        if not exact:
            _reconcile_topics(ctl)
        # Partitions whose state the view lacks (none written yet, or a re-read that failed).
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
    # The metadata of these partitions went out just above, unchanged since.
    batch = ctl.new_batch()
    replicas = ctx.replicas
    record_leader_and_isr(ctx, batch, [tp for tp in ctx.leaders if tp in replicas],
                          metadata=False)
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
        metadata_sent=metadata_sent, done=time.monotonic(), warm=warm,
        exact=exact)


def _reconcile_brokers(ctl: Controller) -> None:
    ctx = ctl.ctx
    registered = ctl.metadata.brokers()
    for b in [b for b in ctx.brokers if b not in registered]:
        ctx.remove_broker(b)
    for broker in registered.values():
        ctx.add_broker(broker)


def _reconcile_topics(ctl: Controller) -> None:
    ctx = ctl.ctx
    names = set(ctl.metadata.topics())
    for t in [t for t in ctx.topics if t not in names]:
        ctx.remove_topic(t)
        ctl.unwatch_topic(t)
    missing = [t for t in names if t not in ctx.topics]
    if not missing:
        return
    for t, versioned in ctl.metadata.assignments(missing).items():
        ctx.set_topic(versioned.value, versioned.version)
        ctl.watch_topic(t)


def send_full_metadata(ctl: Controller, brokers_: list[int] | None) -> None:
    """UpdateMetadata with every partition to ``brokers_`` (None: every live broker): one
    entry per partition, shared by every broker's request."""
    ctx = ctl.ctx
    live = ctx.brokers
    entry = UpdateMetadataPartition
    assigned = ctx.replicas
    leaders = ctx.leaders
    dead = {b for b in ctx.replicas_on_all() if b not in live}
    entries = []
    for tp in sorted(leaders):
        replicas = assigned.get(tp)
        if replicas is None:
            continue
        v = leaders[tp]
        offline = tuple(r for r in replicas if r in dead) if dead else ()
        # (positional: a named tuple built by keyword takes twice as long, 100k times here)
        entries.append((tp, entry(
            tp.topic, tp.partition, v.controller_epoch, v.leader, v.leader_epoch, v.isr,
            v.partition_epoch, replicas, offline)))
    batch = ctl.new_batch()
    batch.add_update_metadata_entries(brokers_, entries)
    ctl.send(batch)
