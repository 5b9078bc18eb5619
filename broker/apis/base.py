"""What every API module shares: the services a handler may use, the request context, the
API declaration and the reply markers. The registry in :mod:`broker.apis` imports the API
modules; they import this module, never the registry (no import cycle)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeAlias, TypeVar

from kio.schema.errors import ErrorCode

from broker.config import BrokerConfig
from broker.controller_channel import KafkaNetwork
from broker.fetch_sessions import FetchSessionCache
from broker.groups import GroupCoordinator
from broker.metadata_cache import MetadataCache
from broker.metrics.traffic import TopicTraffic
from broker.purgatory import Purgatory
from broker.security.acls import CLUSTER_NAME, SUPPORTED_OPERATIONS, Operation, ResourceType
from broker.security.authorizer import Authorizer
from broker.txns import TransactionCoordinator
from coordinator.admin import Admin
from replication.log import LogSlice
from replication.producer_ids import ProducerIdManager
from replication.replica_manager import ReplicaManager
from statemachines.controller import Controller

__all__ = [
    "CLOSE_CONNECTION",
    "NO_RESPONSE",
    "Api",
    "ApiRegistry",
    "BrokerServices",
    "ControllerNodeServices",
    "Handler",
    "Reply",
    "RequestContext",
    "TopicCreator",
]


class _Marker:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


NO_RESPONSE = _Marker("NO_RESPONSE")
"""The request gets no response (a produce with acks=0)."""

CLOSE_CONNECTION = _Marker("CLOSE_CONNECTION")
"""Close the connection once earlier responses are out (Kafka's answer to a failed acks=0
produce: the client learns of the failure by the closed connection)."""


class TopicCreator(Protocol):
    """Creates a topic through the admin path (blocking: the caller runs it off the loop);
    the error code a Metadata answer gives the topic."""

    def __call__(self, name: str, partitions: int, replication_factor: int) -> ErrorCode: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerServices:
    """What the handlers work with: this broker's identity and settings, its replica manager
    (called directly from the loop: its calls do not block), the metadata cache, the purgatory,
    the cluster id, and the admin path that creates topics."""

    broker_id: int
    config: BrokerConfig
    replica_manager: ReplicaManager
    metadata: MetadataCache
    purgatory: Purgatory
    loop: asyncio.AbstractEventLoop
    cluster_id: str | None
    create_topic: TopicCreator | None = None
    registry: ApiRegistry | None = None
    admin: Admin | None = None
    """The admin path on the broker's coordinator session (what Kafka's ZooKeeper-mode brokers
    did through AdminZkClient); blocking, so called off the loop. None: the admin APIs answer
    that the cluster cannot be reached."""
    controller: Callable[[], Controller | None] | None = None
    """This broker's controller candidate, for what Kafka hands the active controller as an
    event (ElectLeaders); None when there is none."""
    producer_ids: ProducerIdManager | None = None
    """Where InitProducerId takes producer ids from (claimed in blocks on the session)."""
    network: KafkaNetwork | None = None
    """Where the controller's requests are handed to this broker's participant (keys 4 to 6);
    None: they are answered BROKER_NOT_AVAILABLE."""
    groups: GroupCoordinator | None = None
    """The group coordinator (classic protocol); None: the group APIs answer
    COORDINATOR_NOT_AVAILABLE."""
    authorizer: Authorizer | None = None
    """The ACL authorizer (``authorizer.class.name``); None: every request is allowed."""
    traffic: TopicTraffic | None = None
    """Where produce and fetch count their bytes and records per topic for the metrics
    (``metrics.listener``); None: not counted."""
    transactions: TransactionCoordinator | None = None
    """The transaction coordinator; None: the transaction APIs answer
    COORDINATOR_NOT_AVAILABLE."""
    fetch_sessions: FetchSessionCache = field(default_factory=FetchSessionCache)
    """The incremental fetch sessions (KIP-227) of the fetchers of this broker's partitions."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerNodeServices:
    """What a controller-only process serves with (``partctl controller start``): ApiVersions
    and ControlledShutdown, answered by its controller candidate."""

    broker_id: int
    """The candidate's id (``node.id``)."""
    loop: asyncio.AbstractEventLoop
    registry: ApiRegistry
    controller: Callable[[], Controller | None]


S = TypeVar("S", covariant=True)
"""What a handler uses of the services (a protocol of :mod:`broker.apis.services`)."""
R = TypeVar("R")


class RequestContext(Generic[S]):
    """One request as a handler sees it. ``slices`` collects the log slices its response
    carries, which the server closes once the response is sent or dropped. ``broker`` is a
    controller-only process's :class:`ControllerNodeServices` only for the APIs of
    :func:`controller_registry`; a handler's type names the part of the services it uses
    (``RequestContext[ProduceServices]``)."""

    __slots__ = ("api_key", "api_version", "broker", "client_id", "correlation_id", "listener",
                 "metric_name", "peer", "principal", "received", "slices")

    def __init__(self, broker: S, *, api_key: int, api_version: int,
                 correlation_id: int, client_id: str | None, listener: str,
                 peer: str = "", principal: str = "User:ANONYMOUS") -> None:
        self.broker = broker
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.listener = listener
        self.peer = peer
        """The client's address, ``host:port``."""
        self.principal = principal
        """Who the client authenticated as (Kafka's KafkaPrincipal, ``User:<name>``):
        ``User:ANONYMOUS`` on a plaintext listener, the certificate's subject on TLS."""
        self.slices: list[LogSlice] = []
        self.received = time.monotonic()
        """When the request was read (its total time runs from here to its response sent)."""
        self.metric_name: str | None = None
        """The ``request`` label the metrics count this request under when not its API's name
        (a Fetch is ``FetchConsumer`` or ``FetchFollower``, as in Kafka); set by its handler."""

    def authorized(self, operation: Operation, resource_type: ResourceType,
                   name: str = CLUSTER_NAME) -> bool:
        """Whether this request's principal, from its host, may do ``operation`` on the
        resource (always, without an authorizer)."""
        authorizer = getattr(self.broker, "authorizer", None)
        if authorizer is None:
            return True
        return authorizer.authorized(self.principal, self.peer, operation, resource_type, name)

    def authorized_operations(self, resource_type: ResourceType,
                              name: str = CLUSTER_NAME) -> int:
        """Kafka's ``authorized_operations`` bit field: a bit ``1 << code`` for each operation
        of the resource type's supported ones the principal may do on the resource."""
        return sum(1 << op for op in SUPPORTED_OPERATIONS[resource_type]
                   if self.authorized(op, resource_type, name))

    def authorized_any(self, operation: Operation, resource_type: ResourceType) -> bool:
        """Whether the principal may do ``operation`` on some resource of the type."""
        authorizer = getattr(self.broker, "authorizer", None)
        if authorizer is None:
            return True
        return authorizer.authorized_any(self.principal, self.peer, operation, resource_type)

    def close_slices(self) -> None:
        for s in self.slices:
            s.close()
        self.slices.clear()


Reply: TypeAlias = R | Awaitable[R] | _Marker
"""What a handler returns: its response (a kio response of the request's version), an
awaitable of one, :data:`NO_RESPONSE` or :data:`CLOSE_CONNECTION`."""

Handler = Callable[[RequestContext[Any], Any], Reply[Any]]
"""(context, request) -> response | Awaitable[response] | NO_RESPONSE | CLOSE_CONNECTION.
Each handler is typed with its API's kio request and response unions
(:mod:`broker.apis.messages`) and its group's services protocol (:mod:`broker.apis.services`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Api:
    """One API: its key, its name, the versions handled, and the handler."""

    key: int
    name: str
    min_version: int
    max_version: int
    handle: Handler

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


class ApiRegistry(Mapping[int, Api]):
    """The APIs by key; iterating gives them in key order, as ApiVersions lists them."""

    def __init__(self, apis: list[Api]) -> None:
        by_key = {api.key: api for api in apis}
        if len(by_key) != len(apis):
            raise ValueError("two APIs with one key")
        self._apis = dict(sorted(by_key.items()))

    def __getitem__(self, key: int) -> Api:
        return self._apis[key]

    def __iter__(self) -> Iterator[int]:
        return iter(self._apis)

    def __len__(self) -> int:
        return len(self._apis)

    def supports(self, key: int, version: int) -> bool:
        api = self._apis.get(key)
        return api is not None and api.supports(version)
