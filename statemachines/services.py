"""What a handler is given: the narrow interface to the controller.

A handler (statemachines/handlers/) sees the context, the two state machines, the fence every
write goes through, the metadata client it reads admin nodes with, the settings, and the few
operations it needs of the controller: a new request batch, sending one (and going on once its
answers are in), and no longer following a deleted topic. It never sees the controller itself (its election, its view's
watches, its event queue), so handlers depend on this module and the state machines, and the
controller depends on the handlers, never the reverse.

One is built per term, when a new controller's view is ready, and dropped when it resigns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from coordinator.metadata import MetadataClient
from elections.controller_election import Fence
from interbroker.requests import RequestBatch
from statemachines.config import ControllerConfig
from statemachines.context import ControllerContext
from statemachines.events import ControllerEvent
from statemachines.partition_sm import PartitionStateMachine
from statemachines.replica_sm import ReplicaStateMachine

__all__ = ["ControllerServices"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerServices:
    """The context, the state machines, the fence and the operations a handler may use."""

    broker_id: int
    """This controller's broker (for logs)."""
    ctx: ControllerContext
    partitions: PartitionStateMachine
    replicas: ReplicaStateMachine
    fence: Fence
    metadata: MetadataClient
    config: ControllerConfig
    send: Callable[[RequestBatch], None]
    """Send a batch once: each broker its requests, with this controller's epoch (raises
    NotController once this controller has resigned)."""
    send_then: Callable[[RequestBatch, ControllerEvent], None]
    """Send a batch as ``send`` does, then queue the event once every broker not shutting
    down has answered its requests of it (or left), or once ``config.shutdown_answers_wait``
    has passed, whichever comes first. A controller that resigns meanwhile fails the event's
    ``reply`` (NotController)."""
    unwatch_topic: Callable[[str], None]
    """Stop following a deleted topic's node."""

    @property
    def epoch(self) -> int:
        """The controller epoch of this term."""
        return self.fence.epoch.epoch

    def new_batch(self) -> RequestBatch:
        """A batch whose UpdateMetadata goes to every registered broker, those shutting down
        too (Kafka's liveOrShuttingDownBrokerIds), and lists as live only those not shutting
        down: leaders do not take a stopping broker back into an ISR."""
        ctx = self.ctx
        return RequestBatch(live_brokers=ctx.live_brokers.values(),
                            shutting_down=ctx.shutting_down)
