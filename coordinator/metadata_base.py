"""What every part of the metadata client shares: its errors, value types, reads with retry,
the layout's set-up and the fenced writes (Kafka's KafkaZkClient, split by concern: this module,
the entity configs in :mod:`coordinator.metadata_configs`, the admin requests in
:mod:`coordinator.metadata_admin`, the rest in :mod:`coordinator.metadata`)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from coordinator import layout
from coordinator.base import Coordinator
from coordinator.codecs import (
    BrokerInfo,
    TopicPartition,
)
from coordinator.errors import (
    CoordinatorError,
    GuardFailed,
    MultiFailed,
    NoNode,
    RequestTooLarge,
)
from coordinator.model import Check, Op, OpResult, Stat
from coordinator.retry import Retry

log = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_RETRY = Retry(max_tries=5, delay=0.1, max_delay=1.0, deadline=10.0)


class ControllerMoved(CoordinatorError):
    """The controller epoch moved on: another controller was elected. Resign; write nothing."""


class ControllerExists(CoordinatorError):
    """Another broker is the controller; ``broker_id`` names it (-1 if it just went away)."""

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        super().__init__(f"broker {broker_id} is already the controller")


class BrokerIdInUse(CoordinatorError):
    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        super().__init__(f"broker id {broker_id} is already registered by another session")


class TopicExists(CoordinatorError):
    def __init__(self, topic: str) -> None:
        self.topic = topic
        super().__init__(f"topic {topic!r} already exists")


class UnknownTopic(CoordinatorError):
    def __init__(self, topic: str) -> None:
        self.topic = topic
        super().__init__(f"topic {topic!r} does not exist")


class AssignmentTooLarge(RequestTooLarge):
    """A topic's assignment would not fit in one node of the coordinator."""


class RequestInProgress(CoordinatorError):
    """An admin request node already exists: the controller is still working on the last one."""


class ReassignmentClaimLost(CoordinatorError):
    """The owner node of a run executing a reassignment is gone (its session ended): it must
    claim the node again before writing it."""


class ProducerIdsExhausted(CoordinatorError):
    """The next producer id block would pass the largest 64-bit id (Kafka's fatal error)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Versioned(Generic[T]):
    value: T
    version: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisteredBroker:
    info: BrokerInfo
    epoch: int
    """The broker epoch: the registration node's create id (czxid / create_revision)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerEpoch:
    """A controller's epoch and the version of ``/controller_epoch`` it wrote: the fencing token."""

    epoch: int
    version: int
    revision: int = 0
    """The store's id of that write (``Stat.modify_id``: zxid, etcd revision): a watch that
    reports ids has shown every earlier change once it reports this one or a later one."""

    def guard(self) -> Check:
        return Check(path=layout.CONTROLLER_EPOCH, version=self.version)


@dataclass(frozen=True, slots=True, kw_only=True)
class StateUpdateResult:
    """Kafka's updateLeaderAndIsr outcome: written (with the new partition epoch), to retry after
    a re-read (the partition epoch moved), or failed for another reason."""

    finished: dict[TopicPartition, int] = field(default_factory=dict)
    retry: list[TopicPartition] = field(default_factory=list)
    failed: dict[TopicPartition, CoordinatorError] = field(default_factory=dict)


class MetadataBase:
    """Kafka's ZooKeeper layout over one coordinator session: reads with retry, set-up,
    fenced writes."""

    def __init__(self, coordinator: Coordinator, *, retry: Retry = DEFAULT_RETRY) -> None:
        """``retry`` applies to reads, which are idempotent. Writes are never retried here: after
        a lost reply a retried create or conditional set would report a false conflict; the
        caller re-reads and decides (see :class:`StateUpdateResult`)."""
        self.coordinator = coordinator
        self.retry = retry

    def _get_many(self, paths_: Sequence[str]) -> list[tuple[bytes, Stat] | None]:
        return self.retry(self.coordinator.get_many, paths_)

    def _children(self, path: str) -> list[str]:
        return self.retry(self.coordinator.children, path)

    def _get(self, path: str) -> tuple[bytes, Stat]:
        return self.retry(self.coordinator.get, path)

    # --- set-up --------------------------------------------------------------------------

    def ensure_layout(self) -> None:
        """Create the persistent paths Kafka expects, where missing."""
        existing = self._get_many(list(layout.PERSISTENT_PATHS))
        for path, item in zip(layout.PERSISTENT_PATHS, existing, strict=True):
            if item is None:
                self.coordinator.ensure_path(path)

    def partitions_of(self, topic: str) -> list[int]:
        try:
            return sorted(int(p) for p in self._children(layout.partitions(topic)))
        except NoNode:
            return []

    # --- fenced writes -------------------------------------------------------------------

    def fenced(self, epoch: ControllerEpoch, ops: Sequence[Op]) -> list[OpResult]:
        """One atomic multi guarded by the controller epoch; :class:`ControllerMoved` if stale.

        Other failures raise :class:`MultiFailed` with the index into ``ops``.
        """
        try:
            results = self.coordinator.multi([epoch.guard(), *ops])
        except MultiFailed as failure:
            if failure.index == 0:
                raise ControllerMoved(
                    f"controller epoch {epoch.epoch} is stale: {failure.cause}") from failure
            raise MultiFailed(failure.index - 1, failure.cause) from failure
        return results[1:]

    def fenced_write_many(
        self, epoch: ControllerEpoch, ops: Sequence[Op]
    ) -> list[OpResult | CoordinatorError]:
        """Many independent ops in guarded chunks; one result per op (see ``write_many``)."""
        (results,) = self.fenced_write_stream(epoch, [ops])
        return results

    def fenced_write_stream(
        self, epoch: ControllerEpoch, batches: Iterable[Sequence[Op]]
    ) -> Iterator[list[OpResult | CoordinatorError]]:
        """Batches of independent ops in guarded chunks, each batch's results as soon as it is
        done (see ``write_stream``); :class:`ControllerMoved` if the epoch is stale."""
        try:
            yield from self.coordinator.write_stream(batches, guard=epoch.guard())
        except GuardFailed as failure:
            raise ControllerMoved(f"controller epoch {epoch.epoch} is stale") from failure
