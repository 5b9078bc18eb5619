"""Partition and replica state machines and the controller that drives them."""

from statemachines.broker_side import (
    ControllerClient,
    IsrConflict,
    IsrWriteFailed,
    IsrWriteOutcome,
    IsrWritten,
)
from statemachines.channel import (
    BrokerChannel,
    BrokerResponse,
    InProcessChannel,
    InProcessNetwork,
    RequestHandler,
)
from statemachines.config import ControllerConfig, StandBackoff
from statemachines.context import ControllerContext, OngoingReassignment
from statemachines.controller import Controller, FailoverTimings
from statemachines.errors import BrokerNotAvailable, NotController, StaleBrokerEpoch
from statemachines.event_manager import EventManager
from statemachines.participant import HandlerFactory, Participant
from statemachines.partition_sm import ElectionOutcome, PartitionStateMachine
from statemachines.replica_sm import ReplicaStateMachine
from statemachines.states import PartitionState, ReplicaState

__all__ = [
    "BrokerChannel",
    "BrokerNotAvailable",
    "BrokerResponse",
    "Controller",
    "ControllerClient",
    "ControllerConfig",
    "ControllerContext",
    "ElectionOutcome",
    "EventManager",
    "FailoverTimings",
    "HandlerFactory",
    "InProcessChannel",
    "InProcessNetwork",
    "IsrConflict",
    "IsrWriteFailed",
    "IsrWriteOutcome",
    "IsrWritten",
    "NotController",
    "OngoingReassignment",
    "Participant",
    "PartitionState",
    "PartitionStateMachine",
    "ReplicaState",
    "ReplicaStateMachine",
    "RequestHandler",
    "StaleBrokerEpoch",
    "StandBackoff",
]
