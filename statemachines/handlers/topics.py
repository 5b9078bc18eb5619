"""Topic creation and partition addition (Kafka's onNewPartitionCreation)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from coordinator.codecs import TopicPartition
from statemachines import events as ev
from statemachines.requests import RequestBatch
from statemachines.states import ReplicaState

if TYPE_CHECKING:
    from statemachines.controller import Controller


def apply_topic_node(ctl: Controller, event: ev.TopicNodeChanged, *, only_new: bool = False,
                     revision: int | None = None) -> list[TopicPartition]:
    """Apply a topic node to the view; returns the partitions new to it.

    ``revision`` is the store's id of the change (a deletion's too), known to tree watches; a
    node's own stat gives it otherwise. A report older than the last one applied is ignored:
    watches of different keys need not keep pace with each other (etcd)."""
    from statemachines.controller import decode_assignment

    ctx, topic = ctl.ctx, event.topic
    if revision is None and event.stat is not None:
        revision = event.stat.modify_id
    if revision is not None:
        if revision < ctl.topic_revisions.get(topic, 0):
            return []
        ctl.topic_revisions[topic] = revision
    if event.stat is None or event.data is None:
        if topic in ctx.topics and not (ctl.active and topic in ctx.deleting):
            ctx.remove_topic(topic)
            ctl.unwatch_topic(topic)
        return []
    if topic in ctx.topics and event.stat.version <= ctx.topic_versions.get(topic, -1):
        return []
    added = ctx.set_topic(decode_assignment(topic, event.data), event.stat.version,
                          only_new=only_new)
    ctl.watch_partition_states(added)
    return added


def on_topic_node(ctl: Controller, event: ev.TopicNodeChanged) -> None:
    if not ctl.active:
        apply_topic_node(ctl, event)
        return
    added = apply_topic_node(ctl, event, only_new=True)
    if added:
        on_new_partitions(ctl, added)


def on_new_partitions(ctl: Controller, tps: list[TopicPartition]) -> None:
    batch = ctl.new_batch()
    ctl.partitions.to_new(tps)  # type: ignore[union-attr]
    bring_online(ctl, tps, batch)
    ctl.send(batch)


def bring_online(ctl: Controller, tps: list[TopicPartition], batch: RequestBatch) -> None:
    """New partitions: replicas New, first leader and ISR written, replicas Online."""
    ctx, psm, rsm = ctl.ctx, ctl.partitions, ctl.replicas
    assert psm is not None and rsm is not None
    keys = [(tp, b) for tp in tps for b in ctx.replicas.get(tp, ())]
    rsm.handle([k for k in keys if rsm.state(k) is ReplicaState.NON_EXISTENT],
               ReplicaState.NEW, batch)
    psm.to_online(tps, batch)
    rsm.handle(keys, ReplicaState.ONLINE, batch)
