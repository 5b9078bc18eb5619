"""Topic deletion (Kafka's TopicDeletionManager), driven by /admin/delete_topics.

A topic's partitions go Offline then NonExistent (brokers are told with leader -2 in their
metadata); its replicas go Offline then DeletionStarted (StopReplica with delete). Brokers'
answers move each replica to DeletionSuccessful or DeletionIneligible; a replica on a dead
broker is Ineligible until the broker returns, when deletion resumes. When every replica of the
topic is DeletionSuccessful, the replicas become NonExistent and the topic's nodes are removed.
A topic with a reassignment in progress waits for it.
"""

from __future__ import annotations

import logging

from interbroker.requests import RequestBatch, UpdateMetadataPartition
from statemachines import events as ev
from statemachines.context import ReplicaKey
from statemachines.services import ControllerServices
from statemachines.states import ReplicaState

log = logging.getLogger(__name__)

LEADER_DURING_DELETE = -2
"""The leader brokers see in metadata for a partition being deleted (Kafka's marker)."""

_R = ReplicaState


def on_delete_topics_request(svc: ControllerServices) -> None:
    ctx, fence = svc.ctx, svc.fence
    for topic in svc.metadata.topics_to_delete():
        if topic not in ctx.topics or not svc.config.delete_topic_enable:
            if topic not in ctx.topics:
                log.info("deletion of unknown topic %.300r ignored", topic)
            else:
                log.warning("deletion of %s ignored: topic deletion is disabled", topic)
            fence.delete_topic_request(topic)
        elif topic not in ctx.deleting:
            log.info("deleting topic %s", topic)
            ctx.deleting.add(topic)
    resume(svc)


def resume(svc: ControllerServices) -> None:
    ctx = svc.ctx
    for topic in sorted(ctx.deleting):
        tps = ctx.partitions_of(topic)
        if any(tp in ctx.reassignments for tp in tps):
            ctx.deletion_ineligible.add(topic)
            continue
        if _all_deleted(svc, topic):
            complete(svc, topic)
        else:
            start(svc, topic)


def _keys(svc: ControllerServices, topic: str) -> list[ReplicaKey]:
    ctx = svc.ctx
    return [(tp, b) for tp in ctx.partitions_of(topic) for b in ctx.replicas.get(tp, ())]


def _all_deleted(svc: ControllerServices, topic: str) -> bool:
    states = svc.ctx.replica_states
    return all(states.get(k) is _R.DELETION_SUCCESSFUL for k in _keys(svc, topic))


def start(svc: ControllerServices, topic: str) -> None:
    """Start (or retry) deleting the replicas that are neither started nor done."""
    ctx, psm, rsm = svc.ctx, svc.partitions, svc.replicas
    batch = svc.new_batch()
    tps = sorted(ctx.partitions_of(topic))
    still = [tp for tp in tps if tp in ctx.partition_states]
    if still:
        metadata = []
        for tp in still:
            value = ctx.leaders.get(tp)
            if value is not None:
                marked = UpdateMetadataPartition.of(tp, value, ctx.replicas.get(tp, ()))
                metadata.append(UpdateMetadataPartition(
                    topic=marked.topic, partition=marked.partition,
                    controller_epoch=marked.controller_epoch, leader=LEADER_DURING_DELETE,
                    leader_epoch=marked.leader_epoch, isr=marked.isr,
                    partition_epoch=marked.partition_epoch, replicas=marked.replicas))
        batch.add_update_metadata(None, metadata)
        psm.to_offline(still)
        psm.to_non_existent(still)
    todo = [k for k in _keys(svc, topic)
            if rsm.state(k) not in (_R.DELETION_STARTED, _R.DELETION_SUCCESSFUL)]
    dead = [k for k in todo if k[1] not in ctx.brokers]
    live = [k for k in todo if k[1] in ctx.brokers]
    fail_replicas(svc, dead, batch)
    rsm.handle(live, _R.OFFLINE, batch)
    rsm.handle(live, _R.DELETION_STARTED, batch)
    if not dead:
        ctx.deletion_ineligible.discard(topic)
    svc.send(batch)


def fail_replicas(svc: ControllerServices, keys: list[ReplicaKey], batch: RequestBatch) -> None:
    """Replicas of topics being deleted that cannot be deleted now (their broker is down):
    Ineligible until their broker returns. One with no stored state on a broker that is down
    (none is stored for it since a failover or its broker's loss) reads Ineligible by
    derivation already; it is stored so, or its broker's return would read it Online."""
    rsm = svc.replicas
    stored = svc.ctx.replica_states.explicit()
    ineligible = _R.DELETION_INELIGIBLE
    derived = [k for k in keys if k not in stored and rsm.state(k) is ineligible]
    keys = [k for k in keys if rsm.state(k) is not ineligible]
    rsm.handle([k for k in keys if rsm.state(k) in (_R.ONLINE, _R.NEW)], _R.OFFLINE, batch)
    rsm.handle(keys, ineligible, batch)
    rsm.store_derived(derived, ineligible, was=_R.OFFLINE)
    svc.ctx.deletion_ineligible.update(tp.topic for tp, _ in (*keys, *derived))


def on_replica_deletion_finished(svc: ControllerServices, event: ev.ReplicaDeletionFinished) -> None:
    ctx, rsm = svc.ctx, svc.replicas
    b = event.broker_id
    # Only deletions the controller waits for (topic deletion) are still DeletionStarted; a
    # reassignment takes its removed replicas to NonExistent at once, as Kafka's does, and the
    # brokers' answers to those StopReplicas need nothing more.
    waiting = _R.DELETION_STARTED
    deleted = [(tp, b) for tp in event.deleted if rsm.state((tp, b)) is waiting]
    failed = [(tp, b) for tp in event.failed if rsm.state((tp, b)) is waiting]
    batch = svc.new_batch()
    rsm.handle(deleted, _R.DELETION_SUCCESSFUL, batch)
    if failed:
        fail_replicas(svc, failed, batch)
    svc.send(batch)
    topics = {tp.topic for tp in (*event.deleted, *event.failed)} & ctx.deleting
    for topic in sorted(topics):
        if _all_deleted(svc, topic):
            complete(svc, topic)


def on_brokers_started(svc: ControllerServices, ids: list[int]) -> None:
    back = set(ids)
    ctx = svc.ctx
    if any(b in back for t in ctx.deleting for tp in ctx.partitions_of(t)
           for b in ctx.replicas.get(tp, ())):
        resume(svc)


def complete(svc: ControllerServices, topic: str) -> None:
    ctx, rsm, fence = svc.ctx, svc.replicas, svc.fence
    rsm.handle(_keys(svc, topic), _R.NON_EXISTENT, svc.new_batch())
    fence.complete_topic_deletion(topic)
    svc.unwatch_topic(topic)
    ctx.remove_topic(topic)
    log.info("topic %s deleted", topic)
