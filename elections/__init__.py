"""Controller election with epoch fencing; the four partition leader elections and the leader
imbalance rule (pure)."""

from elections.controller_election import (
    Fence,
    NotController,
    stand_for_controller,
)
from elections.imbalance import (
    DEFAULT_IMBALANCE_PERCENTAGE,
    BrokerImbalance,
    LeaderImbalance,
    leader_imbalance,
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
    "DEFAULT_IMBALANCE_PERCENTAGE",
    "NO_LEADER",
    "BrokerImbalance",
    "ControlledShutdown",
    "Fence",
    "NotController",
    "stand_for_controller",
    "Election",
    "ElectionStrategy",
    "LeaderAndIsr",
    "LeaderImbalance",
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
    "leader_imbalance",
]
