"""Topic config changes (Kafka's TopicConfigHandler on the controller's broker, and the
controller's TopicUncleanLeaderElectionEnable event): when a topic may now elect out of sync,
its leaderless partitions are elected again, with that topic's setting."""

from __future__ import annotations

from statemachines.services import ControllerServices


def on_topic_config_change(svc: ControllerServices, topic: str) -> None:
    """The topic's New and Offline partitions to Online when its offline elections may now be
    unclean (its override, else the controller's default: the partition machine reads it at
    election, as for every offline election). Kafka reacts to the override being set to true;
    a topic being deleted is left alone."""
    ctx, psm = svc.ctx, svc.partitions
    tps = sorted(tp for tp in ctx.leaderless if tp.topic == topic)
    if not tps or topic in ctx.deleting or topic not in psm.unclean_topics([topic]):
        return
    batch = svc.new_batch()
    psm.to_online(tps, batch)
    svc.send(batch)
