"""The auto leader rebalance timer's work: Kafka's checkAndTriggerAutoLeaderRebalance over the
pure imbalance computation in :mod:`rebalancer.imbalance`."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rebalancer.imbalance import leader_imbalance
from statemachines.handlers.preferred import run_preferred

if TYPE_CHECKING:
    from statemachines.controller import Controller

log = logging.getLogger(__name__)


def on_auto_rebalance(ctl: Controller) -> None:
    ctx = ctl.ctx
    leaders = ctx.leaders
    view = {}
    for tp, replicas in ctx.replicas.items():
        value = leaders.get(tp)
        view[tp] = (replicas, None if value is None else value.leader,
                    () if value is None else value.isr)
    deleting = [tp for t in ctx.deleting for tp in ctx.partitions_of(t)]
    result = leader_imbalance(
        view, ctx.live_ids(), percentage=ctl.config.leader_imbalance_per_broker_percentage,
        reassigning=ctx.reassignments.keys(), deleting=deleting)
    if not result.candidates:
        return
    log.info("leader imbalance on brokers %s: preferred elections for %d partitions",
             list(result.imbalanced_brokers), len(result.candidates))
    run_preferred(ctl, result.candidates)
