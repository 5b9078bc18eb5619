"""The in-process transport of the controller's channel: every broker and controller candidate
of one process (the embedded cluster, the demo, tests, an embedding application's default).

The network transport of broker processes is ``broker.controller_channel``; both implement
:class:`~interbroker.channel.BrokerNetwork`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from coordinator.codecs import TopicPartition
from coordinator.metadata import MetadataClient
from elections.controller_election import NotController
from interbroker.channel import (
    AttachedHere,
    BrokerResponse,
    ResponseCallback,
    Target,
    deliver,
)
from interbroker.errors import ErrorCode
from interbroker.requests import BrokerRequest

__all__ = ["InProcessChannel", "InProcessNetwork"]


class InProcessNetwork(AttachedHere):
    """Brokers of one process by id, and which controller is active (for controlled shutdown)."""

    def channel(self) -> InProcessChannel:
        return InProcessChannel(self)

    def controlled_shutdown(
        self, metadata: MetadataClient, controller_id: int, broker_id: int, broker_epoch: int,
        timeout: float,
    ) -> tuple[TopicPartition, ...]:
        """Straight to the controller candidate registered here: NotController when the
        active controller runs in another process."""
        ctl = self.controller(controller_id)
        if ctl is None:
            raise NotController("no active controller reachable in this process")
        return tuple(ctl.request_controlled_shutdown(broker_id, broker_epoch).result(timeout))


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
                response = BrokerResponse(error=ErrorCode.BROKER_NOT_AVAILABLE)
            else:
                response = deliver(handler, request)
            on_response(broker_id, request, response)

    def update_brokers(self, brokers: Mapping[int, Target]) -> None:
        """Nothing to keep: each send finds the handler attached at that moment."""

    def reset(self) -> None:
        """Nothing is pending: delivery is synchronous."""
