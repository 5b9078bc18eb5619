"""Preferred replica elections: requested in /admin/preferred_replica_election (the node is
deleted once processed, whether or not each election could happen) or by the auto rebalance."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from coordinator.codecs import TopicPartition
from elections.leader import Preferred
from statemachines.partition_sm import ElectionOutcome
from statemachines.services import ControllerServices

log = logging.getLogger(__name__)


def on_preferred_election_request(svc: ControllerServices) -> None:
    requested = svc.metadata.preferred_election()
    if requested is None:
        return
    outcome = run_preferred(svc, requested)
    log.info("preferred election: %d of %d requested partitions moved, %d could not",
             len(outcome.elected), len(requested), len(outcome.failed))
    svc.fence.delete_preferred_election()


def run_preferred(svc: ControllerServices, tps: Iterable[TopicPartition]) -> ElectionOutcome:
    """Preferred elections for those of ``tps`` not led by their preferred replica (and not
    being deleted or reassigned); one pass, one bulk write, one batch."""
    ctx, psm = svc.ctx, svc.partitions
    assigned, leaders, deleting, moving = ctx.replicas, ctx.leaders, ctx.deleting, ctx.reassignments
    eligible = []
    for tp in tps:
        replicas = assigned.get(tp)
        value = leaders.get(tp)
        if (replicas and value is not None and value.leader != replicas[0]
                and tp.topic not in deleting and tp not in moving):
            eligible.append(tp)
    if not eligible:
        return ElectionOutcome()
    batch = svc.new_batch()
    outcome = psm.to_online(eligible, batch, Preferred())
    svc.send(batch)
    return outcome
