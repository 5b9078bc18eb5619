"""What a broker calls on its controller: ISR changes and controlled shutdown.

An embedding application gets a :class:`ControllerClient` from its
:class:`~statemachines.participant.Participant` when the participant builds the application's
:class:`~interbroker.channel.RequestHandler` (see docs/embedding.md). The calls are those of a
Kafka broker in ZooKeeper mode:

- a partition's leader changes its ISR itself: it writes the partition state node conditionally
  on the version it was told (the partition epoch, in LeaderAndIsr), so that a write racing the
  controller's loses (:meth:`ControllerClient.write_isr`), then announces the change with an ISR
  change notification, which the controller watches and answers by sending the new ISR to every
  broker (:meth:`ControllerClient.notify_isr_change`; Kafka batches these, so may a caller);
- a broker about to stop asks the active controller to move its leaderships away first
  (:meth:`ControllerClient.controlled_shutdown`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from coordinator import layout
from coordinator.admin import controller_status
from coordinator.codecs import PartitionStateNode, TopicPartition
from coordinator.errors import BadVersion, CoordinatorError, NoNode
from coordinator.metadata import MetadataClient
from elections.controller_election import NotController
from interbroker.channel import BrokerNetwork
from interbroker.errors import BrokerNotAvailable

__all__ = [
    "ControllerClient",
    "IsrConflict",
    "IsrWriteFailed",
    "IsrWriteOutcome",
    "IsrWritten",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class IsrWritten:
    """The write landed; the node now has version ``partition_epoch``."""

    partition_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class IsrConflict:
    """The node's version was not the one expected: here is what it holds now (``None`` if it
    is gone, e.g. the topic was deleted)."""

    current: PartitionStateNode | None
    partition_epoch: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class IsrWriteFailed:
    """The coordinator could not be reached; the outcome is unknown. Try again later."""

    reason: str


IsrWriteOutcome = IsrWritten | IsrConflict | IsrWriteFailed


class ControllerClient:
    """Broker ``broker_id``'s calls to the controller, over its participant's session.

    Built by a :class:`~statemachines.participant.Participant` (``broker_epoch`` reads the
    epoch of its current registration); safe to call from any thread but a handler's (see
    :class:`~interbroker.channel.RequestHandler`).
    """

    __slots__ = ("_broker_epoch", "_metadata", "_network", "broker_id")

    def __init__(
        self,
        metadata: MetadataClient,
        network: BrokerNetwork,
        broker_id: int,
        broker_epoch: Callable[[], int | None],
    ) -> None:
        self._metadata = metadata
        self._network = network
        self._broker_epoch = broker_epoch
        self.broker_id = broker_id

    @property
    def broker_epoch(self) -> int | None:
        """The epoch of this broker's current registration (None before it registered)."""
        return self._broker_epoch()

    def write_isr(
        self, tp: TopicPartition, state: PartitionStateNode, expected_partition_epoch: int
    ) -> IsrWriteOutcome:
        """Write ``state`` to ``tp``'s state node if its version is still
        ``expected_partition_epoch``. On a conflict the outcome carries what the node holds
        now: if its leader epoch moved, the controller has taken the partition on; else decide
        again from the stored ISR and write at the version given."""
        data = state.encode()
        path = layout.partition_state(tp.topic, tp.partition)
        try:
            stat = self._metadata.coordinator.set(path, data, version=expected_partition_epoch)
            return IsrWritten(partition_epoch=stat.version)
        except NoNode:
            return IsrConflict(current=None)
        except BadVersion:
            pass
        except CoordinatorError as exc:
            return IsrWriteFailed(reason=f"{type(exc).__name__}: {exc}")
        try:
            stored = self._metadata.partition_states([tp])[tp]
        except CoordinatorError as exc:
            return IsrWriteFailed(reason=f"{type(exc).__name__}: {exc}")
        if stored is None:
            return IsrConflict(current=None)
        value = stored.value
        # The fields a leader decides from, without the node's other fields (extra): the value
        # compares equal to one the leader builds itself.
        return IsrConflict(
            current=PartitionStateNode(
                leader=value.leader,
                leader_epoch=value.leader_epoch,
                isr=tuple(value.isr),
                controller_epoch=value.controller_epoch,
            ),
            partition_epoch=stored.version,
        )

    def notify_isr_change(self, partitions: Iterable[TopicPartition]) -> None:
        """Tell the controller the ISRs of ``partitions`` changed (after :meth:`write_isr`):
        it reads them and sends them to every broker. Raises
        :class:`~coordinator.errors.CoordinatorError` if the coordinator cannot be reached
        (announce them again later)."""
        self._metadata.notify_isr_change(partitions)

    def controlled_shutdown(self, timeout: float = 30.0) -> tuple[TopicPartition, ...]:
        """Ask the active controller to move every leadership off this broker and to stop its
        follower replicas; returns the partitions it still leads (empty: it may stop now;
        else ask again after a while, as Kafka's brokers do).

        The active controller is the one ``/controller`` names, asked through the
        participant's network (in process, or over Kafka's protocol). Raises
        :class:`~elections.controller_election.NotController` when there is none or it cannot
        be reached, :class:`~interbroker.errors.StaleBrokerEpoch` or
        :class:`~interbroker.errors.BrokerNotAvailable` when the controller does not know
        this registration, ``TimeoutError`` after ``timeout``."""
        epoch = self.broker_epoch
        if epoch is None:
            raise BrokerNotAvailable(self.broker_id)
        status = controller_status(self._metadata)
        if status.broker_id is None:
            raise NotController("no controller is active")
        return self._network.controlled_shutdown(self._metadata, status.broker_id,
                                                 self.broker_id, epoch, timeout)
