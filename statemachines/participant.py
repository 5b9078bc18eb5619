"""A participant: one coordinator session, one broker id, registered and standing for controller.

The embedded entry point: ``Participant("memory://demo", 1).start()`` registers broker 1 (its
ephemeral node; a new broker epoch after each session loss), attaches its broker to the
in-process network and runs a controller candidate.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import coordinator
from coordinator.base import Coordinator
from coordinator.codecs import TopicPartition
from coordinator.metadata import MetadataClient
from coordinator.model import SessionState
from elections.controller_election import NotController, controller_status
from statemachines.broker import Broker
from statemachines.channel import InProcessNetwork
from statemachines.controller import Controller, ControllerConfig

log = logging.getLogger(__name__)

__all__ = ["Participant", "request_controlled_shutdown"]


class Participant:
    def __init__(
        self,
        url: str | Coordinator,
        broker_id: int,
        *,
        rack: str | None = None,
        host: str = "127.0.0.1",
        port: int = 9092,
        network: InProcessNetwork | None = None,
        config: ControllerConfig | None = None,
        threaded: bool = True,
        connect_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.coordinator = (coordinator.connect(url, **dict(connect_options or {}))
                            if isinstance(url, str) else url)
        self._owns_coordinator = isinstance(url, str)
        self.metadata = MetadataClient(self.coordinator)
        self.network = network or InProcessNetwork()
        self.broker = Broker(broker_id, rack=rack, host=host, port=port)
        self.controller = Controller(self.coordinator, broker_id, self.network.channel(),
                                     config=config, threaded=threaded)
        # Reachable as this broker's controller endpoint from the start, as a broker's is: a
        # request reaching it before it is active (or while its failover runs) is refused
        # with NotController (or waits in its queue), as Kafka's brokers answer.
        self.network.register_controller(broker_id, self.controller)
        self._started = False

    @property
    def id(self) -> int:
        return self.broker.id

    def start(self) -> Participant:
        self._started = True
        self.network.attach(self.id, self.broker)
        self.register()
        self.coordinator.add_listener(self._on_session)
        self.controller.start()
        return self

    def register(self) -> int:
        self.broker.epoch = self.metadata.register_broker(self.broker.info)
        return self.broker.epoch

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
        leads (empty when it may stop at once)."""
        assert self.broker.epoch is not None
        return request_controlled_shutdown(self.metadata, self.network, self.id,
                                           self.broker.epoch, timeout)

    def close(self) -> None:
        self._started = False
        self.coordinator.remove_listener(self._on_session)
        self.controller.close()
        self.network.unregister_controller(self.id)
        self.network.detach(self.id, self.broker)
        if self._owns_coordinator:
            self.coordinator.close()


def request_controlled_shutdown(
    metadata: MetadataClient, network: InProcessNetwork, broker_id: int, broker_epoch: int,
    timeout: float = 30.0,
) -> tuple[TopicPartition, ...]:
    status = controller_status(metadata)
    ctl = network.controller(status.broker_id) if status.broker_id is not None else None
    if not isinstance(ctl, Controller):
        raise NotController("no active controller reachable in this process")
    return tuple(ctl.request_controlled_shutdown(broker_id, broker_epoch).result(timeout))
