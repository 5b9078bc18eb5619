"""The contract between the controller and its brokers: what passes between them and the rules
both sides hold to.

- :mod:`interbroker.requests`: LeaderAndIsr, UpdateMetadata and StopReplica as values, the batch
  the controller records them in, and AlterPartition's ISR proposals and answers;
- :mod:`interbroker.channel`: the channel's protocols (a broker's :class:`RequestHandler`, a
  :class:`BrokerNetwork`, a controller's :class:`BrokerChannel`) and a broker's answer,
  :class:`BrokerResponse`;
- :mod:`interbroker.controller_client`: what a broker calls on its controller (ISR writes and
  change notifications, controlled shutdown);
- :mod:`interbroker.errors`: one :class:`ErrorCode` enum (Kafka's numbers, put on the wire
  unchanged) and the errors the controller answers a broker's calls with;
- :mod:`interbroker.fencing`: the broker's epoch fence before the controller's requests, and
  the state-change log line of every refusal.

Below both the controller (:mod:`statemachines`) and the data plane (:mod:`replication`), which
never import each other: they meet here and are assembled in :mod:`node`.
"""

from interbroker.channel import BrokerChannel, BrokerNetwork, BrokerResponse, RequestHandler
from interbroker.controller_client import (
    ControllerClient,
    IsrConflict,
    IsrWriteFailed,
    IsrWriteOutcome,
    IsrWritten,
)
from interbroker.errors import BrokerNotAvailable, ErrorCode, NotController, StaleBrokerEpoch
from interbroker.fencing import RequestFence, log_fenced

__all__ = [
    "BrokerChannel",
    "BrokerNetwork",
    "BrokerNotAvailable",
    "BrokerResponse",
    "ControllerClient",
    "ErrorCode",
    "IsrConflict",
    "IsrWriteFailed",
    "IsrWriteOutcome",
    "IsrWritten",
    "NotController",
    "RequestFence",
    "RequestHandler",
    "StaleBrokerEpoch",
    "log_fenced",
]
