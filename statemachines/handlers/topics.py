"""Topic creation and partition addition (Kafka's onNewPartitionCreation). The topic node
itself is applied to the view by the controller, which hands over the partitions it added."""

from __future__ import annotations

from coordinator.codecs import TopicPartition
from interbroker.requests import RequestBatch
from statemachines.services import ControllerServices
from statemachines.states import ReplicaState


def on_new_partitions(svc: ControllerServices, tps: list[TopicPartition]) -> None:
    """Partitions new to the view (a new topic's, or added to a topic): New, then Online."""
    batch = svc.new_batch()
    svc.partitions.to_new(tps)
    bring_online(svc, tps, batch)
    svc.send(batch)


def bring_online(svc: ControllerServices, tps: list[TopicPartition], batch: RequestBatch) -> None:
    """New partitions: replicas New, first leader and ISR written, replicas Online."""
    ctx, psm, rsm = svc.ctx, svc.partitions, svc.replicas
    keys = [(tp, b) for tp in tps for b in ctx.replicas.get(tp, ())]
    rsm.handle([k for k in keys if rsm.state(k) is ReplicaState.NON_EXISTENT],
               ReplicaState.NEW, batch)
    psm.to_online(tps, batch)
    rsm.handle(keys, ReplicaState.ONLINE, batch)
