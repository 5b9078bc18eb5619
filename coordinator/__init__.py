"""The coordination layer: one protocol, three backends chosen by URL, Kafka's metadata layout.

>>> import coordinator
>>> c = coordinator.connect("memory://demo")
"""

from coordinator.base import Coordinator
from coordinator.credentials import Credentials
from coordinator.errors import (
    BadVersion,
    ClosedError,
    ConnectionFailed,
    ConnectionLoss,
    CoordinatorError,
    GuardFailed,
    InvalidPath,
    InvalidURL,
    MultiFailed,
    NoChildrenForEphemerals,
    NodeError,
    NodeExists,
    NoNode,
    NotAuthorized,
    NotEmpty,
    OperationTimeout,
    RequestTooLarge,
    SessionExpired,
)
from coordinator.model import (
    Capabilities,
    Check,
    ChildrenEvent,
    Create,
    DataEvent,
    Delete,
    Op,
    OpResult,
    SessionState,
    SetData,
    Stat,
    TreeChange,
    TreeEvent,
    Watch,
)
from coordinator.retry import Retry, RetryFailed
from coordinator.url import CoordinatorURL, connect, parse

__all__ = [
    "BadVersion",
    "Capabilities",
    "Check",
    "ChildrenEvent",
    "ClosedError",
    "ConnectionFailed",
    "ConnectionLoss",
    "Coordinator",
    "CoordinatorError",
    "CoordinatorURL",
    "Credentials",
    "Create",
    "DataEvent",
    "Delete",
    "GuardFailed",
    "InvalidPath",
    "InvalidURL",
    "MultiFailed",
    "NoChildrenForEphemerals",
    "NoNode",
    "NodeError",
    "NodeExists",
    "NotAuthorized",
    "NotEmpty",
    "Op",
    "OpResult",
    "OperationTimeout",
    "RequestTooLarge",
    "Retry",
    "RetryFailed",
    "SessionExpired",
    "SessionState",
    "SetData",
    "Stat",
    "TreeChange",
    "TreeEvent",
    "Watch",
    "connect",
    "parse",
]
