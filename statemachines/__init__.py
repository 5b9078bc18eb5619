"""Partition and replica state machines and the controller that drives them."""

from statemachines.admin import Admin, InvalidRequest, PartitionDescription, TopicDescription
from statemachines.broker import Broker, change_isr
from statemachines.channel import (
    BrokerChannel,
    BrokerResponse,
    InProcessChannel,
    InProcessNetwork,
)
from statemachines.context import ControllerContext, Reassignment
from statemachines.controller import Controller, ControllerConfig, FailoverTimings
from statemachines.errors import BrokerNotAvailable, NotController, StaleBrokerEpoch
from statemachines.event_manager import EventManager
from statemachines.participant import Participant
from statemachines.partition_sm import ElectionOutcome, PartitionStateMachine
from statemachines.replica_sm import ReplicaStateMachine
from statemachines.states import PartitionState, ReplicaState

__all__ = [
    "Admin",
    "Broker",
    "BrokerChannel",
    "BrokerNotAvailable",
    "BrokerResponse",
    "Controller",
    "ControllerConfig",
    "ControllerContext",
    "ElectionOutcome",
    "EventManager",
    "FailoverTimings",
    "InProcessChannel",
    "InProcessNetwork",
    "InvalidRequest",
    "NotController",
    "Participant",
    "PartitionDescription",
    "PartitionState",
    "PartitionStateMachine",
    "Reassignment",
    "ReplicaState",
    "ReplicaStateMachine",
    "StaleBrokerEpoch",
    "TopicDescription",
    "change_isr",
]
