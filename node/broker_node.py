"""A real broker in process: registration, controller candidacy and a replica manager.

:class:`BrokerNode` is a :class:`statemachines.Participant` whose broker side is a
:class:`~replication.replica_manager.ReplicaManager`: the participant opens nothing of its own
(the node hands it its coordinator session), registers ``/brokers/ids/<id>`` (the creation id
of that node is its broker epoch), stands for controller and attaches the replica manager, a
:class:`~interbroker.channel.RequestHandler` itself, to its network (in process, or a broker
process's network one), so that the controller's LeaderAndIsr, UpdateMetadata and StopReplica
requests reach real logs as they are, and its answers (the contract's codes) go back as they
are. Leaders' ISR changes and the controlled shutdown go back through the participant's
:class:`~interbroker.controller_client.ControllerClient`, the interface every embedding
application uses (docs/embedding.md).

The node also follows the topics' configs (:class:`~replication.config_watcher.TopicConfigWatcher`
over its session: every topic's at start, then each change notification) and lets the replica
manager read a new topic's from the store when a LeaderAndIsr creates its first partition here.

A node runs once: :meth:`crash`, :meth:`shutdown` and :meth:`controlled_shutdown` end it, and
an embedded cluster restarts a broker by building a new node on the same log directory (the
storage layer recovers what was not closed cleanly; registration gives a new broker epoch).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import coordinator
from coordinator.base import Coordinator
from coordinator.clock import SYSTEM_CLOCK, Clock
from coordinator.codecs import BrokerInfo, TopicPartition
from coordinator.errors import CoordinatorError
from coordinator.metadata import MetadataClient
from elections.controller_election import NotController
from interbroker.channel import BrokerNetwork, RequestHandler
from interbroker.controller_client import ControllerClient
from interbroker.errors import BrokerNotAvailable, StaleBrokerEpoch
from replication.config import ReplicaConfig
from replication.config_watcher import TopicConfigWatcher
from replication.producer_ids import ProducerIdManager
from replication.protocol import FetchEndpoint
from replication.replica_manager import ReplicaManager
from statemachines.controller import Controller, ControllerConfig
from statemachines.participant import Participant

__all__ = ["BrokerNode", "ControlledShutdownFailed"]

log = logging.getLogger(__name__)


class ControlledShutdownFailed(RuntimeError):
    """The controller could not move every leadership off the broker in time."""


class BrokerNode:
    """One incarnation of broker ``broker_id`` storing its logs under ``log_dir``.

    ``transport`` maps broker ids to the endpoints its followers fetch from (a live view the
    cluster keeps); ``network`` carries controller requests and finds the active controller.
    ``registration`` is the broker node to write (default: this host, port 9092 + id, the
    rack); ``wrap_handler`` may put a handler of its own in front of the replica manager's (a
    broker process keeps its metadata cache that way).
    """

    def __init__(
        self,
        url: str,
        broker_id: int,
        log_dir: Path | str,
        *,
        network: BrokerNetwork,
        transport: Mapping[int, FetchEndpoint],
        rack: str | None = None,
        replica_config: ReplicaConfig | None = None,
        controller_config: ControllerConfig | None = None,
        clock: Clock = SYSTEM_CLOCK,
        connect_options: Mapping[str, Any] | None = None,
        registration: BrokerInfo | None = None,
        wrap_handler: Callable[[RequestHandler], RequestHandler] | None = None,
    ) -> None:
        self.url = url
        self.id = broker_id
        self.log_dir = Path(log_dir)
        self.network = network
        self._rack = rack
        self._transport = transport
        self._replica_config = replica_config or ReplicaConfig()
        self._controller_config = controller_config
        self._clock = clock
        self._connect_options = dict(connect_options or {})
        self._registration = registration
        self._wrap_handler = wrap_handler
        self.coordinator: Coordinator | None = None
        self.participant: Participant | None = None
        self.replica_manager: ReplicaManager | None = None
        self.producer_ids: ProducerIdManager | None = None
        """This broker's producer ids for InitProducerId, claimed in blocks on its coordinator
        session (None before start)."""
        self.recovery_seconds: float | None = None
        """How long opening the logs took (recovery after a crash)."""
        self.recovered_offsets: dict[TopicPartition, int] = {}
        """Each partition's log end offset as opened, before any fetching."""
        self.config_watcher: TopicConfigWatcher | None = None
        """Feeds the replica manager the topics' configs (from start to the end)."""
        self._running = False

    @property
    def running(self) -> bool:
        return self._running

    @property
    def metadata(self) -> MetadataClient | None:
        return self.participant.metadata if self.participant is not None else None

    @property
    def controller(self) -> Controller | None:
        """This broker's controller candidate (None before start)."""
        return self.participant.controller if self.participant is not None else None

    @property
    def epoch(self) -> int | None:
        """The broker epoch of the current registration (None before the first)."""
        return self.participant.broker_epoch if self.participant is not None else None

    def start(self) -> BrokerNode:
        """Open the logs (recovering them), register, stand for controller."""
        if self.coordinator is not None:
            raise RuntimeError(f"broker {self.id}: a node starts once; build a new one")
        self.coordinator = coordinator.connect(self.url, **self._connect_options)
        # The node keeps the session (the participant does not close it): a crash or a
        # shutdown first stops the replica manager, then ends the session.
        self.participant = Participant(
            self.coordinator, self.id, handler=self._open_replicas, rack=self._rack,
            port=9092 + self.id, network=self.network, config=self._controller_config,
            registration=self._registration)
        assert self.replica_manager is not None
        self.producer_ids = ProducerIdManager(MetadataClient(self.coordinator), self.id)
        # The topics' configs before registration: no LeaderAndIsr reaches a log before its
        # topic's overrides do.
        self.config_watcher = TopicConfigWatcher(
            self.coordinator, self.replica_manager.update_topic_config,
            broker=(self.id, self.replica_manager.update_broker_config)).start()
        self.replica_manager.start()
        self._running = True
        self.participant.start()  # /cluster/id and the persistent paths, registration, candidacy
        return self

    def _open_replicas(self, controller: ControllerClient) -> RequestHandler:
        """The participant's handler factory: open the logs (recovering them)."""
        began = time.monotonic()
        assert self.coordinator is not None
        metadata = MetadataClient(self.coordinator)
        rm = ReplicaManager(self.id, self.log_dir, controller, self._clock,
                            self._replica_config, transport=self._transport,
                            topic_configs=lambda topics: {
                                t: v.value for t, v in metadata.topic_configs(topics).items()})
        self.recovery_seconds = time.monotonic() - began
        self.recovered_offsets = {tp: p.log.log_end_offset for tp, p in rm.partitions().items()}
        self.replica_manager = rm
        return self._wrap_handler(rm) if self._wrap_handler is not None else rm

    # -- ending --------------------------------------------------------------------------------

    def _leave(self) -> None:
        """Stop answering the controller and stop standing for it."""
        self._running = False
        if self.producer_ids is not None:
            self.producer_ids.close()
        if self.config_watcher is not None:
            self.config_watcher.close()
        if self.participant is not None:
            self.participant.close()

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
        """Stop cleanly without asking the controller first (checkpoints, clean logs).

        The followers stop fetching first, before the controller candidate resigns, as a
        Kafka broker stops its replica manager before its controller: a controller elected
        meanwhile still counts this broker live (its session is open), and a fetch from it
        then could bring it back into an ISR it is leaving for good."""
        if not self._running:
            return
        if self.replica_manager is not None:
            self.replica_manager.fetcher.stop()
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
        participant = self.participant
        assert participant is not None
        deadline = time.monotonic() + timeout
        remaining: tuple[TopicPartition, ...] = ()
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            try:
                remaining = participant.controlled_shutdown(
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
