"""Partition and replica state machines, the controller that drives them, and the participant
(one broker's registration and candidacy) an embedding application starts. What passes between
controller and brokers is :mod:`interbroker`."""

from statemachines.config import ControllerConfig, StandBackoff
from statemachines.context import ControllerContext, OngoingReassignment
from statemachines.controller import Controller, FailoverTimings
from statemachines.event_manager import EventManager
from statemachines.in_process import InProcessChannel, InProcessNetwork
from statemachines.participant import HandlerFactory, Participant
from statemachines.partition_sm import ElectionOutcome, PartitionStateMachine
from statemachines.replica_sm import ReplicaStateMachine
from statemachines.states import PartitionState, ReplicaState

__all__ = [
    "Controller",
    "ControllerConfig",
    "ControllerContext",
    "ElectionOutcome",
    "EventManager",
    "FailoverTimings",
    "HandlerFactory",
    "InProcessChannel",
    "InProcessNetwork",
    "OngoingReassignment",
    "Participant",
    "PartitionState",
    "PartitionStateMachine",
    "ReplicaState",
    "ReplicaStateMachine",
    "StandBackoff",
]
