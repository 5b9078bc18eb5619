"""A real broker in process: registration, controller candidacy and a replica manager.

:class:`BrokerNode` is what :class:`statemachines.Participant` is with real replicas behind the
channel: it opens its own coordinator session, registers ``/brokers/ids/<id>`` (the creation id
of that node is its broker epoch), stands for controller, and attaches its
:class:`~replication.replica_manager.ReplicaManager` to the in-process network, so that the
controller's LeaderAndIsr, UpdateMetadata and StopReplica requests reach real logs. Leaders'
ISR changes go back through the coordinator (the partition state node, then an ISR change
notification), written by the replica manager with this node's session.

A node runs once: :meth:`crash`, :meth:`shutdown` and :meth:`controlled_shutdown` end it, and
an embedded cluster restarts a broker by building a new node on the same log directory (the
storage layer recovers what was not closed cleanly; registration gives a new broker epoch).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import coordinator
from coordinator.base import Coordinator
from coordinator.codecs import BrokerInfo, TopicPartition
from coordinator.errors import CoordinatorError
from coordinator.metadata import MetadataClient
from coordinator.model import SessionState
from elections.controller_election import NotController
from replication.clock import Clock, SystemClock
from replication.config import ReplicaConfig
from replication.protocol import FetchEndpoint, ReplicaResponse
from replication.replica_manager import ReplicaManager
from statemachines.channel import BrokerResponse, InProcessNetwork
from statemachines.controller import Controller, ControllerConfig
from statemachines.errors import BrokerNotAvailable, StaleBrokerEpoch
from statemachines.participant import request_controlled_shutdown
from statemachines.requests import BrokerRequest

__all__ = ["BrokerNode", "ControlledShutdownFailed", "to_broker_response"]

log = logging.getLogger(__name__)


class ControlledShutdownFailed(RuntimeError):
    """The controller could not move every leadership off the broker in time."""


def to_broker_response(response: ReplicaResponse) -> BrokerResponse:
    """The replica manager's codes as the controller's channel reports them (error names)."""
    return BrokerResponse(
        error=response.error.name if response.error else None,
        partition_errors={tp: e.name for tp, e in response.partitions.items() if e},
    )


class _ReplicaHandler:
    """The channel's broker-side handler: controller requests into the replica manager."""

    __slots__ = ("replica_manager",)

    def __init__(self, replica_manager: ReplicaManager) -> None:
        self.replica_manager = replica_manager

    def handle(self, request: BrokerRequest) -> BrokerResponse:
        return to_broker_response(self.replica_manager.handle(request))


class BrokerNode:
    """One incarnation of broker ``broker_id`` storing its logs under ``log_dir``.

    ``transport`` maps broker ids to the endpoints its followers fetch from (a live view the
    cluster keeps); ``network`` carries controller requests and finds the active controller.
    """

    def __init__(
        self,
        url: str,
        broker_id: int,
        log_dir: Path | str,
        *,
        network: InProcessNetwork,
        transport: Mapping[int, FetchEndpoint],
        rack: str | None = None,
        replica_config: ReplicaConfig | None = None,
        controller_config: ControllerConfig | None = None,
        clock: Clock | None = None,
        connect_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.url = url
        self.id = broker_id
        self.log_dir = Path(log_dir)
        self.network = network
        self.info = BrokerInfo(id=broker_id, host="127.0.0.1", port=9092 + broker_id, rack=rack)
        self._transport = transport
        self._replica_config = replica_config or ReplicaConfig()
        self._controller_config = controller_config
        self._clock = clock or SystemClock()
        self._connect_options = dict(connect_options or {})
        self.coordinator: Coordinator | None = None
        self.metadata: MetadataClient | None = None
        self.replica_manager: ReplicaManager | None = None
        self.controller: Controller | None = None
        self._handler: _ReplicaHandler | None = None
        self.epoch: int | None = None
        self.recovery_seconds: float | None = None
        """How long opening the logs took (recovery after a crash)."""
        self.recovered_offsets: dict[TopicPartition, int] = {}
        """Each partition's log end offset as opened, before any fetching."""
        self._running = False

    @property
    def running(self) -> bool:
        return self._running

    def start(self) -> BrokerNode:
        """Open the logs (recovering them), register, stand for controller."""
        if self.coordinator is not None:
            raise RuntimeError(f"broker {self.id}: a node starts once; build a new one")
        self.coordinator = coordinator.connect(self.url, **self._connect_options)
        self.metadata = MetadataClient(self.coordinator)
        began = time.monotonic()
        rm = ReplicaManager(self.id, self.log_dir, self.metadata, self._clock,
                            self._replica_config, transport=self._transport)
        self.recovery_seconds = time.monotonic() - began
        self.recovered_offsets = {tp: p.log.log_end_offset for tp, p in rm.partitions().items()}
        self.replica_manager = rm
        self.controller = Controller(self.coordinator, self.id, self.network.channel(),
                                     config=self._controller_config)
        self.network.register_controller(self.id, self.controller)
        self._handler = _ReplicaHandler(rm)
        self.network.attach(self.id, self._handler)
        rm.start()
        self._running = True
        self._register()
        self.coordinator.add_listener(self._on_session)
        self.controller.start()
        return self

    def _register(self) -> None:
        assert self.metadata is not None and self.replica_manager is not None
        self.epoch = self.metadata.register_broker(self.info)
        self.replica_manager.broker_epoch = self.epoch

    def _on_session(self, state: SessionState) -> None:
        """A new session (after the old one expired) registers again, with a new epoch."""
        if state is not SessionState.CONNECTED or not self._running:
            return
        c = self.coordinator
        assert c is not None
        try:
            stat = c.exists(f"/brokers/ids/{self.id}")
            if stat is None or stat.ephemeral_owner != c.session_id:
                self._register()
        except CoordinatorError:
            log.exception("broker %d could not register again", self.id)

    # -- ending --------------------------------------------------------------------------------

    def _leave(self) -> None:
        """Stop answering the controller and stop standing for it."""
        self._running = False
        if self._handler is not None:
            self.network.detach(self.id, self._handler)
        self.network.unregister_controller(self.id)
        if self.coordinator is not None:
            self.coordinator.remove_listener(self._on_session)
        if self.controller is not None:
            self.controller.close()

    def _close_session(self) -> None:
        if self.coordinator is not None:
            try:
                self.coordinator.close()
            except CoordinatorError:
                log.debug("broker %d: closing the session failed", self.id, exc_info=True)

    def crash(self, *, lose_unflushed: bool = False, torn_bytes: int = 0) -> None:
        """Die as a killed process: no checkpoints, logs left unclean (with ``lose_unflushed``,
        as after a power failure, cut back to their last fsync, plus ``torn_bytes`` of a torn
        batch); the session ends at once, as if it expired."""
        if not self._running:
            return
        self._leave()
        if self.replica_manager is not None:
            self.replica_manager.crash(lose_unflushed=lose_unflushed, torn_bytes=torn_bytes)
        self._close_session()

    def shutdown(self) -> None:
        """Stop cleanly without asking the controller first (checkpoints, clean logs)."""
        if not self._running:
            return
        self._leave()
        if self.replica_manager is not None:
            self.replica_manager.shutdown()
        self._close_session()

    def controlled_shutdown(self, timeout: float = 30.0, *, retry_backoff: float = 0.1
                            ) -> None:
        """Ask the active controller to move every leadership off this broker, retrying until
        it leads nothing (as Kafka's broker does), then stop cleanly. Raises
        :class:`ControlledShutdownFailed` (and stops anyway, uncontrolled) after ``timeout``."""
        if not self._running:
            return
        assert self.metadata is not None and self.epoch is not None
        deadline = time.monotonic() + timeout
        remaining: tuple[TopicPartition, ...] = ()
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            try:
                remaining = request_controlled_shutdown(
                    self.metadata, self.network, self.id, self.epoch,
                    max(deadline - time.monotonic(), 0.1))
                last_error = None
                if not remaining:
                    break
            except (NotController, BrokerNotAvailable, StaleBrokerEpoch, CoordinatorError,
                    TimeoutError) as exc:
                last_error = exc
            time.sleep(retry_backoff)
        else:
            self.shutdown()
            detail = f"still leads {list(remaining)}" if remaining else str(last_error)
            raise ControlledShutdownFailed(f"broker {self.id}: {detail}")
        self.shutdown()

    def __repr__(self) -> str:
        state = "running" if self._running else "stopped"
        return f"BrokerNode({self.id}, epoch={self.epoch}, {state})"
