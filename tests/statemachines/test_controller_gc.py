"""The controller and Python's cyclic collector: a large view, once loaded, is frozen so that no
later full collection walks it (one over 1,000,000 partitions held the GIL past a coordinator
session's timeout)."""

from __future__ import annotations

import gc

from statemachines.controller import FREEZE_AFTER, ControllerConfig
from tests.statemachines.conftest import Cluster

PARTITIONS = 20_000


def test_a_failover_that_loads_a_large_view_freezes_it_and_a_small_event_does_not(
        cluster: Cluster) -> None:
    cold = ControllerConfig(hot_standby=False)
    for b in (1, 2, 3):
        cluster.add(b, config=cold)
    cluster.admin.create_topic("big", assignment={
        p: [1 + p % 3, 1 + (p + 1) % 3, 1 + (p + 2) % 3] for p in range(PARTITIONS)})
    cluster.pump()
    gc.unfreeze()
    try:
        cluster.kill(1)
        ctl = cluster.active().controller
        assert ctl.last_failover is not None and not ctl.last_failover.warm
        assert len(ctl.ctx.leaders) == PARTITIONS
        frozen = gc.get_freeze_count()
        assert frozen > max(FREEZE_AFTER, PARTITIONS)  # the view read at failover
        cluster.admin.create_topic("small", assignment={0: [2, 3]})
        cluster.pump()
        assert cluster.state("small", 0).leader == 2
        assert gc.get_freeze_count() <= frozen  # nothing more frozen (some freed)
    finally:
        gc.unfreeze()
