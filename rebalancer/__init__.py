"""Auto leader rebalance, the reassignment planner (local and Spark), scheduled jobs, SQL store.

The leader-imbalance computation is imported eagerly (the controller uses it); the planner and
the executor load on first use of one of their names, so importing this package stays cheap
(no numpy, pyspark or pyarrow until a plan is made).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from rebalancer.imbalance import (
    DEFAULT_IMBALANCE_PERCENTAGE,
    BrokerImbalance,
    LeaderImbalance,
    leader_imbalance,
)

if TYPE_CHECKING:
    from rebalancer.engines import plan_reassignment
    from rebalancer.execution import (
        CancelledMove,
        CancelReport,
        ExecutionProgress,
        ExecutionResult,
        MoveState,
        NoActiveController,
        PartitionStatus,
        ReassignmentInProgress,
        VerifyReport,
        cancel_reassignment,
        execute_plan,
        parse_topics_to_move,
        scope_snapshot,
        snapshot_from_coordinator,
        validate_plan,
        verify_plan,
    )
    from rebalancer.plan import (
        Plan,
        PlanError,
        Reassignment,
        Scores,
        parse_plan,
        render_plan,
        score_plan,
    )
    from rebalancer.planner.goals import (
        AddBrokers,
        Balance,
        ChangeReplicationFactor,
        Decommission,
        Goal,
        RepairRacks,
    )
    from rebalancer.planner.model import PlanningError
    from rebalancer.snapshot import (
        Broker,
        PartitionReplicas,
        Snapshot,
        SnapshotError,
        load_snapshot,
        save_snapshot,
    )

_LAZY: dict[str, str] = {
    **dict.fromkeys(["Snapshot", "Broker", "PartitionReplicas", "SnapshotError", "load_snapshot",
                     "save_snapshot"], "rebalancer.snapshot"),
    **dict.fromkeys(["Plan", "Reassignment", "PlanError", "parse_plan", "render_plan", "Scores",
                     "score_plan"], "rebalancer.plan"),
    **dict.fromkeys(["Balance", "AddBrokers", "Decommission", "ChangeReplicationFactor",
                     "RepairRacks", "Goal"], "rebalancer.planner.goals"),
    "PlanningError": "rebalancer.planner.model",
    "plan_reassignment": "rebalancer.engines",
    **dict.fromkeys(["snapshot_from_coordinator", "validate_plan", "execute_plan", "verify_plan",
                     "cancel_reassignment", "scope_snapshot", "parse_topics_to_move",
                     "ExecutionProgress", "ExecutionResult", "VerifyReport", "PartitionStatus",
                     "MoveState", "CancelReport", "CancelledMove", "ReassignmentInProgress",
                     "NoActiveController"], "rebalancer.execution"),
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'rebalancer' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "DEFAULT_IMBALANCE_PERCENTAGE",
    "AddBrokers",
    "Balance",
    "Broker",
    "BrokerImbalance",
    "CancelReport",
    "CancelledMove",
    "ChangeReplicationFactor",
    "Decommission",
    "ExecutionProgress",
    "ExecutionResult",
    "Goal",
    "LeaderImbalance",
    "MoveState",
    "NoActiveController",
    "PartitionReplicas",
    "PartitionStatus",
    "Plan",
    "PlanError",
    "PlanningError",
    "Reassignment",
    "ReassignmentInProgress",
    "RepairRacks",
    "Scores",
    "Snapshot",
    "SnapshotError",
    "VerifyReport",
    "cancel_reassignment",
    "execute_plan",
    "leader_imbalance",
    "load_snapshot",
    "parse_plan",
    "parse_topics_to_move",
    "plan_reassignment",
    "render_plan",
    "save_snapshot",
    "scope_snapshot",
    "score_plan",
    "snapshot_from_coordinator",
    "validate_plan",
    "verify_plan",
]
