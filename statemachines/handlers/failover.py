"""What a controller does on winning the election, once its view is ready (Kafka's
onControllerFailover): derive the machines' states, tell every broker, and take up what the
previous controller left (leaderless partitions, reassignments, deletions, a requested
preferred election, ISR change notifications)."""

from __future__ import annotations

import time

from statemachines.handlers import brokers, deletion, isr, preferred, reassignment
from statemachines.partition_sm import record_leader_and_isr
from statemachines.services import ControllerServices


def on_controller_failover(svc: ControllerServices) -> float:
    """Returns when the full metadata went out (monotonic seconds, for the timings)."""
    ctx = svc.ctx
    ctx.reset_controller_state()
    if svc.config.delete_topic_enable:
        ctx.deleting.update(t for t in svc.metadata.topics_to_delete() if t in ctx.topics)
    stale_moves = reassignment.load_in_progress(svc)

    # Kafka's order: every broker hears the live brokers and every partition before the state
    # machines start (they derive nothing the metadata needs: at a million partitions that
    # was 0.1-0.2 s before the metadata went out)
    brokers.send_full_metadata(svc, None)
    metadata_sent = time.monotonic()
    svc.partitions.initialize()
    svc.replicas.initialize()

    # Tell every online replica its leader and ISR: the old controller may have died between
    # writing a decision and sending it.
    # The metadata of these partitions went out just above, unchanged since.
    batch = svc.new_batch()
    replicas = ctx.replicas
    record_leader_and_isr(ctx, batch, [tp for tp in ctx.leaders if tp in replicas],
                          metadata=False)
    svc.send(batch)

    brokers.elect_leaderless(svc)
    brokers.take_dead_replicas_out_of_isrs(svc)
    reassignment.resume(svc, stale_moves)
    deletion.resume(svc)
    preferred.on_preferred_election_request(svc)
    isr.on_isr_change_notification(svc)
    return metadata_sent
