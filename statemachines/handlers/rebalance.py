"""The auto leader rebalance timer's work: Kafka's checkAndTriggerAutoLeaderRebalance over the
pure imbalance computation in :mod:`elections.imbalance`."""

from __future__ import annotations

import logging

from elections.imbalance import leader_imbalance
from statemachines.handlers.preferred import run_preferred
from statemachines.services import ControllerServices

log = logging.getLogger(__name__)


def on_auto_rebalance(svc: ControllerServices) -> None:
    ctx = svc.ctx
    leaders = ctx.leaders
    view = {}
    for tp, replicas in ctx.replicas.items():
        value = leaders.get(tp)
        view[tp] = (replicas, None if value is None else value.leader,
                    () if value is None else value.isr)
    deleting = [tp for t in ctx.deleting for tp in ctx.partitions_of(t)]
    result = leader_imbalance(
        view, ctx.live_ids(), percentage=svc.config.leader_imbalance_per_broker_percentage,
        reassigning=ctx.reassignments.keys(), deleting=deleting)
    if not result.candidates:
        return
    log.info("leader imbalance on brokers %s: preferred elections for %d partitions",
             list(result.imbalanced_brokers), len(result.candidates))
    run_preferred(svc, result.candidates)
