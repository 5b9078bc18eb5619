"""One broker node assembled, above the data plane and the controller.

A :class:`BrokerNode` (:mod:`node.broker_node`) is a broker with its registration, controller
candidacy (a :class:`~statemachines.participant.Participant`) and replica manager
(:class:`~replication.replica_manager.ReplicaManager`); an :class:`EmbeddedCluster`
(:mod:`node.cluster`) runs several in one process (the demo, tests, embedding), with a small
:class:`Producer` and :class:`Consumer` (:mod:`node.clients`).
"""

from node.broker_node import BrokerNode, ControlledShutdownFailed
from node.clients import (
    AckCheck,
    ClientError,
    ConsumedRecord,
    Consumer,
    Delivery,
    ProduceError,
    Producer,
    check_acknowledged,
)
from node.cluster import (
    ClusterTimeout,
    EmbeddedCluster,
    PartitionReport,
    ReplicaReport,
    embedded_replica_config,
)

__all__ = [
    "AckCheck",
    "BrokerNode",
    "ClientError",
    "ClusterTimeout",
    "ConsumedRecord",
    "Consumer",
    "ControlledShutdownFailed",
    "Delivery",
    "EmbeddedCluster",
    "PartitionReport",
    "ProduceError",
    "Producer",
    "ReplicaReport",
    "check_acknowledged",
    "embedded_replica_config",
]
