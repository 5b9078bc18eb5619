"""The channel from the controller to brokers: protocols, the broker side, the answer.

The controller hands the channel every request of one batch for one broker at once and gets each
answer through a callback, which must only enqueue an event (it may run on any thread). On the
broker's side a :class:`RequestHandler` answers LeaderAndIsr, UpdateMetadata and StopReplica: an
application's own replicas (see docs/embedding.md), or partctl's replica manager.

A :class:`BrokerNetwork` is what a participant plugs into: where its handler is attached, where
its controller candidate is reachable, the channels its controller sends with, and how a broker
asks the active controller for a controlled shutdown. Two exist: the in-process one
(:class:`statemachines.in_process.InProcessNetwork`: every broker and controller in one
process, as the embedded cluster and the demo run them) and the network one of broker processes
(``broker.controller_channel``: Kafka's protocol over TCP, one connection and one queue per
broker, as Kafka's ControllerChannelManager).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol

from coordinator.codecs import TopicPartition
from coordinator.metadata import MetadataClient
from interbroker.errors import ErrorCode
from interbroker.requests import (
    BrokerRequest,
    LeaderAndIsrRequest,
    LiveBroker,
    StopReplicaRequest,
    UpdateMetadataRequest,
)

__all__ = [
    "AttachedHere",
    "BrokerChannel",
    "BrokerNetwork",
    "BrokerResponse",
    "RequestHandler",
    "ResponseCallback",
    "ShutdownTarget",
    "Target",
    "deliver",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerResponse:
    """A broker's answer: a request-level error code, and a code per partition (a partition
    not listed, or listed with NONE, is fine).

    Codes are Kafka's (:class:`~interbroker.errors.ErrorCode`); a refused request (stale
    controller or broker epoch) has its code in ``error`` and no partitions. The controller
    acts on the answers to a StopReplica that deletes: a request-level error, or an error for
    a partition, means that replica was not deleted (it is retried later, as Kafka's topic deletion does). The
    answers to LeaderAndIsr and UpdateMetadata are not acted on (the controller does not wait
    for them), but the answer must still say what happened, for the logs and for tests.
    """

    error: ErrorCode = ErrorCode.NONE
    partition_errors: Mapping[TopicPartition, ErrorCode] = field(default_factory=lambda: _NONE)

    @classmethod
    def of(cls, partition_errors: Mapping[TopicPartition, ErrorCode]) -> BrokerResponse:
        """An answer with a code for each partition (a frozen copy of ``partition_errors``)."""
        return cls(partition_errors=MappingProxyType(dict(partition_errors)))

    @property
    def ok(self) -> bool:
        """No error, for the request or any partition."""
        return not self.error and not any(self.partition_errors.values())


_NONE: Mapping[TopicPartition, ErrorCode] = MappingProxyType({})


ResponseCallback = Callable[[int, BrokerRequest, BrokerResponse], None]


class Target(NamedTuple):
    """A registered broker as a channel reaches it: its registration's epoch and endpoints."""

    epoch: int
    broker: LiveBroker


class BrokerChannel(Protocol):
    """One controller's way to its brokers (each controller candidate has its own)."""

    def send(
        self, broker_id: int, requests: Sequence[BrokerRequest], on_response: ResponseCallback
    ) -> None:
        """Send ``requests`` (in order) to ``broker_id``; report each answer to ``on_response``."""
        ...

    def update_brokers(self, brokers: Mapping[int, Target]) -> None:
        """The registered brokers now (the controller tells the channel before sending when
        they changed): a channel that keeps a queue per broker drops those of brokers gone or
        registered again (another epoch), whose pending requests could only be refused, as
        Kafka's controller removes a dead broker's queue and adds one for its new
        incarnation."""
        ...

    def reset(self) -> None:
        """Drop every queue and pending request (the controller resigned or closed); the
        channel may be used again after a new :meth:`update_brokers`."""
        ...


class ShutdownTarget(Protocol):
    """What a network knows a controller candidate by: it takes controlled shutdowns (a
    :class:`~statemachines.controller.Controller`)."""

    def request_controlled_shutdown(self, broker_id: int, broker_epoch: int) -> Future[Any]: ...


class BrokerNetwork(Protocol):
    """What a :class:`~statemachines.participant.Participant` plugs into: the broker's
    handler is attached here (requests for it arrive through this network), its controller
    candidate is registered here (controlled shutdowns reach it through this network), its
    controller's channel comes from here, and a broker asks the active controller for a
    controlled shutdown through it."""

    def attach(self, broker_id: int, handler: RequestHandler) -> None: ...

    def detach(self, broker_id: int, handler: RequestHandler | None = None) -> None: ...

    def handler(self, broker_id: int) -> RequestHandler | None: ...

    def register_controller(self, broker_id: int, controller: ShutdownTarget) -> None: ...

    def unregister_controller(self, broker_id: int) -> None: ...

    def channel(self) -> BrokerChannel: ...

    def controlled_shutdown(
        self, metadata: MetadataClient, controller_id: int, broker_id: int, broker_epoch: int,
        timeout: float,
    ) -> tuple[TopicPartition, ...]:
        """Ask controller ``controller_id`` (the active one, as ``/controller`` names it; read
        more with ``metadata``, the caller's session) to shut broker ``broker_id`` of
        registration ``broker_epoch`` down; the partitions it still leads. Raises
        :class:`~elections.controller_election.NotController`,
        :class:`~interbroker.errors.StaleBrokerEpoch`,
        :class:`~interbroker.errors.BrokerNotAvailable`, ``TimeoutError``, or a
        :class:`~coordinator.errors.CoordinatorError` the lookup met."""
        ...


class RequestHandler(Protocol):
    """A broker's side of the controller's requests: what an embedding application implements
    (see docs/embedding.md) and what partctl's replica manager is behind.

    In process, each method is called on the sending controller's event thread, in the order
    that controller sent them (LeaderAndIsr, then UpdateMetadata, then StopReplica of one
    batch); during a failover two controllers' threads may call at once, so guard the state
    with a lock. Return promptly: no blocking I/O, and no call back to the controller
    (:class:`~interbroker.controller_client.ControllerClient`) from inside a handler; do such
    work on a thread of your own.

    Under a :class:`~statemachines.participant.Participant` a handler only sees requests of
    the newest controller epoch it has seen and of its current registration: the participant
    answers the others ``STALE_CONTROLLER_EPOCH`` or ``STALE_BROKER_EPOCH`` itself.
    """

    def handle_leader_and_isr(self, request: LeaderAndIsrRequest) -> BrokerResponse:
        """Lead or follow each partition listed (``leader`` is this broker's id: lead; another
        id: follow it; below zero: no leader for now). An entry with an older leader epoch
        than the one the replica has is stale: ignore it (answer an error for it)."""
        ...

    def handle_update_metadata(self, request: UpdateMetadataRequest) -> BrokerResponse:
        """Learn the live brokers and every listed partition's leader and ISR: what a broker
        tells its clients (where to send a read, which broker leads)."""
        ...

    def handle_stop_replica(self, request: StopReplicaRequest) -> BrokerResponse:
        """Stop leading or following each partition listed; with ``delete``, drop its data (an
        error for a partition says it could not be deleted)."""
        ...


def deliver(handler: RequestHandler, request: BrokerRequest) -> BrokerResponse:
    """Hand ``request`` to the method of ``handler`` for its kind."""
    match request:
        case LeaderAndIsrRequest():
            return handler.handle_leader_and_isr(request)
        case UpdateMetadataRequest():
            return handler.handle_update_metadata(request)
        case StopReplicaRequest():
            return handler.handle_stop_replica(request)
    raise TypeError(f"not a controller request: {request!r}")


class AttachedHere:
    """What runs in this process: broker handlers and controller candidates by id. The part
    every :class:`BrokerNetwork` shares: the in-process network delivers to these handlers, a
    network one serves its listener's requests with them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._brokers: dict[int, RequestHandler] = {}
        self._controllers: dict[int, ShutdownTarget] = {}

    def attach(self, broker_id: int, handler: RequestHandler) -> None:
        with self._lock:
            self._brokers[broker_id] = handler

    def detach(self, broker_id: int, handler: RequestHandler | None = None) -> None:
        with self._lock:
            if handler is None or self._brokers.get(broker_id) is handler:
                self._brokers.pop(broker_id, None)

    def handler(self, broker_id: int) -> RequestHandler | None:
        with self._lock:
            return self._brokers.get(broker_id)

    def register_controller(self, broker_id: int, controller: ShutdownTarget) -> None:
        with self._lock:
            self._controllers[broker_id] = controller

    def unregister_controller(self, broker_id: int) -> None:
        with self._lock:
            self._controllers.pop(broker_id, None)

    def controller(self, broker_id: int) -> ShutdownTarget | None:
        with self._lock:
            return self._controllers.get(broker_id)
