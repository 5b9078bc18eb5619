"""ISR change notifications from partition leaders (Kafka's IsrChangeNotification handler):
re-read the changed partitions, tell every broker, finish reassignments that caught up, and
delete the processed notifications."""

from __future__ import annotations

from interbroker.requests import UpdateMetadataPartition
from statemachines.handlers import reassignment
from statemachines.services import ControllerServices


def on_isr_change_notification(svc: ControllerServices) -> None:
    md, ctx, psm, fence = svc.metadata, svc.ctx, svc.partitions, svc.fence
    names = md.isr_change_notifications()
    if not names:
        return
    changed = {tp for tps in md.read_isr_change_notifications(names).values() for tp in tps}
    tps = [tp for tp in sorted(changed) if tp in ctx.replicas]
    if tps:
        psm.refresh(tps)
        batch = svc.new_batch()
        live = ctx.brokers
        batch.add_update_metadata(None, [
            UpdateMetadataPartition.of(tp, ctx.leaders[tp], ctx.replicas[tp],
                                       [r for r in ctx.replicas[tp] if r not in live])
            for tp in tps if tp in ctx.leaders])
        svc.send(batch)
        reassignment.complete_if_caught_up(svc, tps)
    fence.delete_isr_change_notifications(names)
