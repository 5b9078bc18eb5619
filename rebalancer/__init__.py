"""The reassignment planner (local and Spark), plan execution, scheduled jobs, SQL store.

The planner and the executor load on first use of one of their names, so importing this package
stays cheap (no numpy, pyspark or pyarrow until a plan is made).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rebalancer.engines import plan_reassignment
    from rebalancer.execution import (
        ExecutionProgress,
        ExecutionResult,
        ReassignmentInProgress,
        execute_plan,
    )
    from rebalancer.live_snapshot import (
        parse_topics_to_move,
        scope_snapshot,
        snapshot_from_coordinator,
    )
    from rebalancer.plan import (
        PartitionMove,
        Plan,
        PlanError,
        parse_plan,
        render_plan,
    )
    from rebalancer.planner.goals import (
        AddBrokers,
        Balance,
        BalanceDisk,
        ChangeReplicationFactor,
        Decommission,
        Goal,
        RepairRacks,
    )
    from rebalancer.planner.model import PlanningError
    from rebalancer.scoring import LowerBounds, Scores, lower_bounds, score_plan
    from rebalancer.snapshot import (
        PartitionReplicas,
        Snapshot,
        SnapshotBroker,
        SnapshotError,
        load_snapshot,
        save_snapshot,
    )
    from rebalancer.validation import validate_plan
    from rebalancer.verification import (
        CancelledMove,
        CancelReport,
        MoveState,
        MoveStatus,
        NoActiveController,
        VerifyReport,
        cancel_reassignment,
        verify_plan,
    )

_LAZY: dict[str, str] = {
    **dict.fromkeys(["Snapshot", "SnapshotBroker", "PartitionReplicas", "SnapshotError",
                     "load_snapshot", "save_snapshot"], "rebalancer.snapshot"),
    **dict.fromkeys(["Plan", "PartitionMove", "PlanError", "parse_plan", "render_plan"],
                    "rebalancer.plan"),
    **dict.fromkeys(["Scores", "LowerBounds", "score_plan", "lower_bounds"], "rebalancer.scoring"),
    **dict.fromkeys(["Balance", "BalanceDisk", "AddBrokers", "Decommission", "ChangeReplicationFactor",
                     "RepairRacks", "Goal"], "rebalancer.planner.goals"),
    "PlanningError": "rebalancer.planner.model",
    "plan_reassignment": "rebalancer.engines",
    **dict.fromkeys(["execute_plan", "ExecutionProgress", "ExecutionResult",
                     "ReassignmentInProgress"], "rebalancer.execution"),
    **dict.fromkeys(["snapshot_from_coordinator", "scope_snapshot", "parse_topics_to_move"],
                    "rebalancer.live_snapshot"),
    "validate_plan": "rebalancer.validation",
    **dict.fromkeys(["verify_plan", "cancel_reassignment", "VerifyReport", "MoveStatus",
                     "MoveState", "CancelReport", "CancelledMove", "NoActiveController"],
                    "rebalancer.verification"),
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
    "AddBrokers",
    "Balance",
    "BalanceDisk",
    "CancelReport",
    "CancelledMove",
    "ChangeReplicationFactor",
    "Decommission",
    "ExecutionProgress",
    "ExecutionResult",
    "Goal",
    "LowerBounds",
    "MoveState",
    "MoveStatus",
    "NoActiveController",
    "PartitionMove",
    "PartitionReplicas",
    "Plan",
    "PlanError",
    "PlanningError",
    "ReassignmentInProgress",
    "RepairRacks",
    "Scores",
    "Snapshot",
    "SnapshotBroker",
    "SnapshotError",
    "VerifyReport",
    "cancel_reassignment",
    "execute_plan",
    "load_snapshot",
    "lower_bounds",
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
