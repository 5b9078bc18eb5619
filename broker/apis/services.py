"""What each API group's handlers use of the broker: one narrow protocol per group module.

A handler is typed ``RequestContext[<its group's protocol>]``, so what it may reach is written
beside it, not the whole :class:`~broker.apis.BrokerServices`; that class satisfies every one of
these, and :class:`~broker.apis.ControllerNodeServices` those of the APIs a controller-only
process serves (ApiVersions, ControlledShutdown, AlterPartition, AllocateProducerIds):
tests/broker/protocol/test_api_services.py checks both. Members are read-only properties, as the
services are frozen.

What a handler reads with ``getattr(..., None)`` (a member one kind of services lacks: the
controller's ``network`` on a controller-only process) is not declared here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from broker.apis.base import ApiRegistry, TopicCreator
    from broker.config import BrokerConfig
    from broker.fetch_sessions import FetchSessionCache
    from broker.groups import GroupCoordinator
    from broker.metadata_cache import MetadataCache
    from broker.metrics.traffic import TopicTraffic
    from broker.purgatory import Purgatory
    from broker.security.authorizer import Authorizer
    from broker.txns import TransactionCoordinator
    from coordinator.admin import Admin
    from replication.producer_ids import ProducerIdManager
    from replication.replica_manager import ReplicaManager
    from statemachines.controller import Controller

__all__ = [
    "AclServices",
    "AdminServices",
    "AlterPartitionServices",
    "ClusterServices",
    "ConfigServices",
    "ConsumerGroupServices",
    "ControllerRequestServices",
    "DeleteRecordsServices",
    "ElectionServices",
    "FetchServices",
    "GroupServices",
    "LogDirServices",
    "LoopServices",
    "MetadataServices",
    "OffsetServices",
    "ParkingServices",
    "ProduceServices",
    "ProducerIdServices",
    "TopicIdServices",
    "TopicServices",
    "TransactionServices",
    "VersionServices",
]


# -- what several groups share ---------------------------------------------------------------


class LoopServices(Protocol):
    """The event loop (:func:`~broker.apis.admin_support.blocking` runs on its executor)."""

    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...


class ParkingServices(LoopServices, Protocol):
    """The purgatory, where a request that must wait is parked."""

    @property
    def purgatory(self) -> Purgatory: ...


class AdminServices(LoopServices, Protocol):
    """The admin path on the broker's coordinator session (None: not reachable)."""

    @property
    def admin(self) -> Admin | None: ...


class TopicIdServices(AdminServices, Protocol):
    """The metadata cache and the admin path, for
    :func:`~broker.apis.topic_ids.ensure_topic_ids`."""

    @property
    def metadata(self) -> MetadataCache: ...


class _Controller(Protocol):
    @property
    def controller(self) -> Callable[[], Controller | None] | None: ...


# -- one per group module ----------------------------------------------------------------------


class AclServices(AdminServices, Protocol):
    """:mod:`broker.apis.acls`."""

    @property
    def authorizer(self) -> Authorizer | None: ...


class AlterPartitionServices(_Controller, Protocol):
    """:mod:`broker.apis.alter_partition` (a controller-only process's too)."""


class ClusterServices(Protocol):
    """:mod:`broker.apis.cluster`."""

    @property
    def cluster_id(self) -> str | None: ...

    @property
    def metadata(self) -> MetadataCache: ...


class ConfigServices(TopicIdServices, Protocol):
    """:mod:`broker.apis.configs`."""

    @property
    def broker_id(self) -> int: ...

    @property
    def config(self) -> BrokerConfig: ...


class ConsumerGroupServices(TopicIdServices, Protocol):
    """:mod:`broker.apis.consumer_groups` (KIP-848)."""

    @property
    def groups(self) -> GroupCoordinator | None: ...

    @property
    def authorizer(self) -> Authorizer | None: ...


class ControllerRequestServices(_Controller, LoopServices, Protocol):
    """:mod:`broker.apis.controller_requests` (a controller-only process's too)."""

    @property
    def broker_id(self) -> int: ...


class DeleteRecordsServices(ParkingServices, Protocol):
    """:mod:`broker.apis.delete_records`."""

    @property
    def metadata(self) -> MetadataCache: ...

    @property
    def replica_manager(self) -> ReplicaManager: ...


class ElectionServices(_Controller, ParkingServices, Protocol):
    """:mod:`broker.apis.elections`."""

    @property
    def metadata(self) -> MetadataCache: ...


class ProduceServices(ParkingServices, Protocol):
    """:mod:`broker.apis.produce`."""

    @property
    def metadata(self) -> MetadataCache: ...

    @property
    def replica_manager(self) -> ReplicaManager: ...

    @property
    def traffic(self) -> TopicTraffic | None: ...

    @property
    def transactions(self) -> TransactionCoordinator | None: ...


class FetchServices(ProduceServices, TopicIdServices, Protocol):
    """:mod:`broker.apis.fetch`."""

    @property
    def fetch_sessions(self) -> FetchSessionCache: ...


class GroupServices(TopicIdServices, Protocol):
    """:mod:`broker.apis.groups` (the classic protocol and offsets)."""

    @property
    def broker_id(self) -> int: ...

    @property
    def groups(self) -> GroupCoordinator | None: ...

    @property
    def transactions(self) -> TransactionCoordinator | None: ...

    @property
    def replica_manager(self) -> ReplicaManager: ...


class LogDirServices(LoopServices, Protocol):
    """:mod:`broker.apis.log_dirs`."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def replica_manager(self) -> ReplicaManager: ...


class MetadataServices(TopicIdServices, Protocol):
    """:mod:`broker.apis.metadata`."""

    @property
    def broker_id(self) -> int: ...

    @property
    def cluster_id(self) -> str | None: ...

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def create_topic(self) -> TopicCreator | None: ...


class OffsetServices(Protocol):
    """:mod:`broker.apis.offsets`."""

    @property
    def metadata(self) -> MetadataCache: ...

    @property
    def replica_manager(self) -> ReplicaManager: ...


class ProducerIdServices(LoopServices, Protocol):
    """:mod:`broker.apis.producers`."""

    @property
    def producer_ids(self) -> ProducerIdManager | None: ...


class TopicServices(ParkingServices, TopicIdServices, Protocol):
    """:mod:`broker.apis.topics`."""

    @property
    def broker_id(self) -> int: ...

    @property
    def config(self) -> BrokerConfig: ...


class VersionServices(Protocol):
    """:mod:`broker.apis.versions` (a controller-only process's too)."""

    @property
    def registry(self) -> ApiRegistry | None: ...


class TransactionServices(ProducerIdServices, Protocol):
    """:mod:`broker.apis.transactions` and :mod:`broker.apis.producers`."""

    @property
    def metadata(self) -> MetadataCache: ...

    @property
    def transactions(self) -> TransactionCoordinator | None: ...
