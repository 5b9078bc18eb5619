"""Controller election with epoch fencing and the four partition leader elections (pure)."""

from elections.controller_election import (
    ControllerStatus,
    Fence,
    NotController,
    controller_status,
    stand_for_controller,
)
from elections.leader import (
    NO_LEADER,
    ControlledShutdown,
    Election,
    ElectionStrategy,
    LeaderAndIsr,
    Offline,
    Preferred,
    Reassign,
    apply_election,
    elect,
    elect_controlled_shutdown,
    elect_offline,
    elect_preferred,
    elect_reassign,
    elector,
)

__all__ = [
    "NO_LEADER",
    "ControlledShutdown",
    "ControllerStatus",
    "Fence",
    "NotController",
    "controller_status",
    "stand_for_controller",
    "Election",
    "ElectionStrategy",
    "LeaderAndIsr",
    "Offline",
    "Preferred",
    "Reassign",
    "apply_election",
    "elect",
    "elect_controlled_shutdown",
    "elect_offline",
    "elect_preferred",
    "elect_reassign",
    "elector",
]
