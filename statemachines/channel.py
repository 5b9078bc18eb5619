"""The channel from the controller to brokers: a protocol, and the in-process transport.

The controller hands the channel every request of one batch for one broker at once and gets each
answer through a callback, which must only enqueue an event (it may run on any thread). The
in-process transport delivers to :class:`~statemachines.broker.Broker`-like handlers registered
in an :class:`InProcessNetwork` by broker id; a network transport (later) sends the same values.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

from coordinator.codecs import TopicPartition
from statemachines.requests import BrokerRequest

__all__ = [
    "BrokerChannel",
    "BrokerResponse",
    "InProcessChannel",
    "InProcessNetwork",
    "RequestHandler",
    "ResponseCallback",
]

STALE_CONTROLLER_EPOCH = "STALE_CONTROLLER_EPOCH"
STALE_BROKER_EPOCH = "STALE_BROKER_EPOCH"
BROKER_NOT_AVAILABLE = "BROKER_NOT_AVAILABLE"


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerResponse:
    """A broker's answer: a request-level error, or per-partition errors (empty = all fine)."""

    error: str | None = None
    partition_errors: Mapping[TopicPartition, str] = field(
        default_factory=lambda: MappingProxyType({}))


ResponseCallback = Callable[[int, BrokerRequest, BrokerResponse], None]


class BrokerChannel(Protocol):
    def send(
        self, broker_id: int, requests: Sequence[BrokerRequest], on_response: ResponseCallback
    ) -> None:
        """Send ``requests`` (in order) to ``broker_id``; report each answer to ``on_response``."""
        ...


class RequestHandler(Protocol):
    def handle(self, request: BrokerRequest) -> BrokerResponse: ...


class InProcessNetwork:
    """Brokers of one process by id, and which controller is active (for controlled shutdown)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._brokers: dict[int, RequestHandler] = {}
        self._controllers: dict[int, object] = {}

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

    def register_controller(self, broker_id: int, controller: object) -> None:
        with self._lock:
            self._controllers[broker_id] = controller

    def unregister_controller(self, broker_id: int) -> None:
        with self._lock:
            self._controllers.pop(broker_id, None)

    def controller(self, broker_id: int) -> object | None:
        with self._lock:
            return self._controllers.get(broker_id)

    def channel(self) -> InProcessChannel:
        return InProcessChannel(self)


class InProcessChannel:
    """Delivers synchronously to the handler registered for the broker id; a missing broker
    answers BROKER_NOT_AVAILABLE."""

    def __init__(self, network: InProcessNetwork) -> None:
        self.network = network

    def send(
        self, broker_id: int, requests: Sequence[BrokerRequest], on_response: ResponseCallback
    ) -> None:
        handler = self.network.handler(broker_id)
        for request in requests:
            if handler is None:
                response = BrokerResponse(error=BROKER_NOT_AVAILABLE)
            else:
                response = handler.handle(request)
            on_response(broker_id, request, response)
