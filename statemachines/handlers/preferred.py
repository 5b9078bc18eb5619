"""Preferred replica elections: requested in /admin/preferred_replica_election (the node is
deleted once processed, whether or not each election could happen) or by the auto rebalance."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from coordinator.codecs import TopicPartition
from elections.leader import Preferred
from statemachines.partition_sm import ElectionOutcome

if TYPE_CHECKING:
    from statemachines.controller import Controller

log = logging.getLogger(__name__)


def on_preferred_election_request(ctl: Controller) -> None:
    requested = ctl.metadata.preferred_election()
    if requested is None:
        return
    outcome = run_preferred(ctl, requested)
    log.info("preferred election: %d of %d requested partitions moved, %d could not",
             len(outcome.elected), len(requested), len(outcome.failed))
    assert ctl.fence is not None
    ctl.fence.delete_preferred_election()


def run_preferred(ctl: Controller, tps: Iterable[TopicPartition]) -> ElectionOutcome:
    """Preferred elections for those of ``tps`` not led by their preferred replica (and not
    being deleted or reassigned); one pass, one bulk write, one batch."""
    ctx, psm = ctl.ctx, ctl.partitions
    assert psm is not None
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
    batch = ctl.new_batch()
    outcome = psm.to_online(eligible, batch, Preferred())
    ctl.send(batch)
    return outcome
