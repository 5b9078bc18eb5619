"""A participant: one coordinator session, one broker id, registered and standing for controller.

The embedded entry point. The application passes its broker side, a factory that builds its
:class:`~interbroker.channel.RequestHandler` from the :class:`ControllerClient` the
participant gives it (a class taking the client will do)::

    participant = Participant("memory://demo", 1, handler=MyBroker).start()

``start`` registers broker 1 (its ephemeral node; a new broker epoch after each session loss),
attaches the handler to its network (in process by default) and runs a controller candidate.
The handler then receives the controller's LeaderAndIsr, UpdateMetadata and StopReplica
requests, and through the client the application reports ISR changes and asks for a controlled
shutdown.
docs/embedding.md walks through an example.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import coordinator
from coordinator.base import Coordinator
from coordinator.codecs import BrokerInfo, TopicPartition
from coordinator.metadata import BrokerIdInUse, MetadataClient
from coordinator.model import SessionState
from interbroker.channel import BrokerNetwork, BrokerResponse, RequestHandler
from interbroker.controller_client import ControllerClient
from interbroker.fencing import RequestFence
from interbroker.requests import LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest
from statemachines.controller import Controller, ControllerConfig
from statemachines.in_process import InProcessNetwork

log = logging.getLogger(__name__)

__all__ = ["HandlerFactory", "Participant"]

HandlerFactory = Callable[[ControllerClient], RequestHandler]
"""Builds a broker's request handler, given the client it calls the controller with."""

REGISTRATION_POLL = 0.1
"""Seconds between looks at a previous registration the participant waits to see go."""


def registration_wait(session_timeout: float) -> float:
    """How long a starting broker waits for a previous session's registration of its id to
    expire: that session's timeout (taken to be ours: the same broker, the same configuration)
    and a margin for the server to notice (ZooKeeper checks expiry by ticks, etcd leases
    whole seconds)."""
    return session_timeout + max(3.0, session_timeout / 2)


class Participant:
    """Broker ``broker_id`` of the cluster on ``url``: its registration, its candidacy for
    controller, and the application's ``handler`` answering the controller's requests.

    ``url`` may be an open coordinator instead, which the participant then uses but does not
    close. ``rack``, ``host`` and ``port`` go into the registration, as Kafka's broker
    registration has them; ``registration`` replaces them with a whole
    :class:`~coordinator.codecs.BrokerInfo` (a broker process registers its advertised
    listeners, as Kafka's brokers do). ``network`` is where the handler is attached and
    the controller reachable (default: a new :class:`~statemachines.in_process.InProcessNetwork`;
    a broker process passes its network one, ``broker.controller_channel``).
    """

    def __init__(
        self,
        url: str | Coordinator,
        broker_id: int,
        *,
        handler: HandlerFactory,
        rack: str | None = None,
        host: str = "127.0.0.1",
        port: int = 9092,
        network: BrokerNetwork | None = None,
        config: ControllerConfig | None = None,
        threaded: bool = True,
        connect_options: Mapping[str, Any] | None = None,
        registration: BrokerInfo | None = None,
    ) -> None:
        if registration is not None and registration.id != broker_id:
            raise ValueError(f"registration of broker {registration.id} given to broker "
                             f"{broker_id}")
        self.coordinator = (coordinator.connect(url, **dict(connect_options or {}))
                            if isinstance(url, str) else url)
        self._owns_coordinator = isinstance(url, str)
        self.metadata = MetadataClient(self.coordinator)
        self.network: BrokerNetwork = network or InProcessNetwork()
        self.info = registration or BrokerInfo(id=broker_id, host=host, port=port, rack=rack)
        self._broker_epoch: int | None = None
        self.controller_client = ControllerClient(self.metadata, self.network, broker_id,
                                                  lambda: self._broker_epoch)
        self.handler: RequestHandler = handler(self.controller_client)
        self._fenced = _Fenced(self.handler, lambda: self._broker_epoch, broker_id)
        self.controller = Controller(self.coordinator, broker_id, self.network.channel(),
                                     config=config, threaded=threaded)
        # Reachable as this broker's controller endpoint from the start, as a broker's is: a
        # request reaching it before it is active (or while its failover runs) is refused
        # with NotController (or waits in its queue), as Kafka's brokers answer.
        self.network.register_controller(broker_id, self.controller)
        self._started = False
        self._closing = threading.Event()
        self.cluster_id: str | None = None
        """Read (or, by the cluster's first broker, created) at start, as a Kafka broker does."""

    @property
    def id(self) -> int:
        return self.info.id

    @property
    def broker_epoch(self) -> int | None:
        """The epoch of the current registration (None before the first)."""
        return self._broker_epoch

    def start(self) -> Participant:
        self._started = True
        self.network.attach(self.id, self._fenced)
        self.cluster_id = self.metadata.init_broker()
        self._register_once_free()
        self.coordinator.add_listener(self._on_session)
        self.controller.start()
        return self

    def register(self) -> int:
        self._broker_epoch = self.metadata.register_broker(self.info)
        return self._broker_epoch

    def _register_once_free(self) -> int:
        """Register; if another session holds this id's node (a previous run of this broker
        killed a moment ago: its session lives until it times out), say so once, wait for the
        node to go, up to :func:`registration_wait`, then register. A node still there after
        that (another live broker with this id) raises :class:`BrokerIdInUse`, as at once
        before. As Kafka's brokers wait on their registration's ephemeral node."""
        try:
            return self.register()
        except BrokerIdInUse:
            pass
        path = f"/brokers/ids/{self.id}"
        wait = registration_wait(self.coordinator.session_timeout)
        stat = self.coordinator.exists(path)
        owner = f"session 0x{stat.ephemeral_owner:x}" if stat is not None else "a session"
        log.warning("broker %d: %s is still registered by %s (this broker's previous run?): "
                    "waiting up to %.0f s for that session to expire before registering",
                    self.id, path, owner, wait)
        deadline = time.monotonic() + wait
        while True:
            stat = self.coordinator.exists(path)
            if stat is None or stat.ephemeral_owner == self.coordinator.session_id:
                try:
                    return self.register()
                except BrokerIdInUse:
                    pass  # taken again meanwhile: wait on
            if time.monotonic() >= deadline or self._closing.wait(REGISTRATION_POLL):
                raise BrokerIdInUse(self.id)

    def _on_session(self, state: SessionState) -> None:
        if state is SessionState.CONNECTED and self._started:
            try:
                stat = self.coordinator.exists(f"/brokers/ids/{self.id}")
                if stat is None or stat.ephemeral_owner != self.coordinator.session_id:
                    self.register()
            except Exception:
                log.exception("broker %d could not register again", self.id)

    def controlled_shutdown(self, timeout: float = 30.0) -> tuple[TopicPartition, ...]:
        """Ask the active controller to move everything off this broker; returns what it still
        leads (empty when it may stop at once). See :meth:`ControllerClient.controlled_shutdown`."""
        return self.controller_client.controlled_shutdown(timeout)

    def close(self) -> None:
        """Stop answering the controller, stop standing for it, and close the session if the
        participant opened it."""
        self._started = False
        self._closing.set()
        self.network.detach(self.id, self._fenced)
        self.network.unregister_controller(self.id)
        self.coordinator.remove_listener(self._on_session)
        self.controller.close()
        if self._owns_coordinator:
            self.coordinator.close()


class _Fenced:
    """What the participant attaches to the network for its handler: it refuses, as a Kafka
    broker does, a request from a controller older than the newest it has heard from
    (``STALE_CONTROLLER_EPOCH``) and one meant for an earlier registration of this broker
    (``STALE_BROKER_EPOCH``), by :class:`~interbroker.fencing.RequestFence`, and passes the
    rest on."""

    __slots__ = ("_fence", "_handler")

    def __init__(self, handler: RequestHandler, broker_epoch: Callable[[], int | None],
                 broker_id: int) -> None:
        self._handler = handler
        self._fence = RequestFence(broker_id, broker_epoch)

    def handle_leader_and_isr(self, request: LeaderAndIsrRequest) -> BrokerResponse:
        refused = self._fence.check("LeaderAndIsr", request)
        if refused:
            return BrokerResponse(error=refused)
        return self._handler.handle_leader_and_isr(request)

    def handle_update_metadata(self, request: UpdateMetadataRequest) -> BrokerResponse:
        refused = self._fence.check("UpdateMetadata", request)
        if refused:
            return BrokerResponse(error=refused)
        return self._handler.handle_update_metadata(request)

    def handle_stop_replica(self, request: StopReplicaRequest) -> BrokerResponse:
        refused = self._fence.check("StopReplica", request)
        if refused:
            return BrokerResponse(error=refused)
        return self._handler.handle_stop_replica(request)
