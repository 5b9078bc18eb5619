"""Controller election and the fence every controller write goes through.

Standing is one atomic multi (over :meth:`MetadataClient.register_controller`) that creates the
ephemeral ``/controller`` and bumps ``/controller_epoch`` at the version read; the version it
writes is the fencing token. A :class:`Fence` carries that token and is the only way the
controller writes: each write is a multi (or guarded chunks) that checks the epoch node first.
The fence can also be closed from outside the event thread (a session listener seeing LOST), so
a zombie stops before it even tries; the epoch check catches whatever slips past.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Concatenate, ParamSpec, TypeVar

from coordinator import layout
from coordinator.codecs import PartitionStateNode, TopicAssignment, TopicPartition
from coordinator.errors import CoordinatorError, NoNode
from coordinator.metadata import (
    ControllerEpoch,
    ControllerExists,
    ControllerMoved,
    MetadataClient,
    StateUpdateResult,
)
from coordinator.model import Delete, Op, OpResult

P = ParamSpec("P")
R = TypeVar("R")

__all__ = [
    "Fence",
    "NotController",
    "stand_for_controller",
]


class NotController(CoordinatorError):
    """This controller is not (or no longer) the active one; nothing was written."""


def stand_for_controller(metadata: MetadataClient, broker_id: int) -> ControllerEpoch | None:
    """Try to become the controller; the new epoch (fencing token) or None if another holds it.

    A ``/controller`` left by this very session (a resignation whose delete did not get
    through) is removed first, so the session can win again at a new epoch.
    """
    c = metadata.coordinator
    for _ in range(3):
        try:
            return metadata.register_controller(broker_id)
        except ControllerExists:
            holder = metadata.controller()
            if holder is None:
                continue  # it went away meanwhile: try again
            info, stat = holder
            if info.broker_id == broker_id and stat.ephemeral_owner == c.session_id:
                try:
                    c.delete(layout.CONTROLLER, stat.version)
                except NoNode:
                    pass
                continue
            return None
    return None


class Fence:
    """The controller's epoch and every write it may make, each one checked against it.

    Raises :class:`NotController` once closed (resigned, session lost) without writing, and
    closes itself on :class:`ControllerMoved` (the epoch check failed) before re-raising.
    """

    def __init__(self, metadata: MetadataClient, epoch: ControllerEpoch) -> None:
        self.metadata = metadata
        self.epoch = epoch
        self._open = True
        self._lock = threading.Lock()
        self.writes = 0
        """Successful write calls, for tests and metrics."""

    @property
    def is_open(self) -> bool:
        return self._open

    def close(self) -> None:
        with self._lock:
            self._open = False

    def _check(self) -> None:
        if not self._open:
            raise NotController(f"controller epoch {self.epoch.epoch} was given up")

    def _run(self, fn: Callable[Concatenate[ControllerEpoch, P], R], *args: P.args,
             **kwargs: P.kwargs) -> R:
        self._check()
        try:
            result = fn(self.epoch, *args, **kwargs)
        except ControllerMoved:
            self.close()
            raise
        self.writes += 1
        return result

    def write(self, ops: Sequence[Op]) -> list[OpResult]:
        return self._run(self.metadata.fenced, ops)

    def write_many(self, ops: Sequence[Op]) -> list[OpResult | CoordinatorError]:
        return self._run(self.metadata.fenced_write_many, ops)

    def write_stream(
        self, batches: Iterable[Sequence[Op]]
    ) -> Iterator[list[OpResult | CoordinatorError]]:
        """Fenced ``write_stream``: each batch's results as soon as it is written. A stale
        epoch closes the fence as for any other write; once the fence is closed (a session
        loss, say) no further batch is sent."""

        def checked() -> Iterator[Sequence[Op]]:
            for ops in batches:
                self._check()
                yield ops

        self._check()
        try:
            yield from self.metadata.fenced_write_stream(self.epoch, checked())
        except ControllerMoved:
            self.close()
            raise
        self.writes += 1

    def create_partition_states(
        self, states: Mapping[TopicPartition, PartitionStateNode]
    ) -> dict[TopicPartition, int | CoordinatorError]:
        return self._run(self.metadata.create_partition_states, states)

    def update_partition_states(
        self, updates: Mapping[TopicPartition, tuple[PartitionStateNode, int]]
    ) -> StateUpdateResult:
        if not updates:
            return StateUpdateResult()
        return self._run(self.metadata.update_partition_states, updates)

    def set_assignment(self, assignment: TopicAssignment, version: int = -1) -> int:
        return self._run(self.metadata.set_assignment, assignment, version)

    def update_reassignment(
        self, moves: Mapping[TopicPartition, Sequence[int]], version: int = -1
    ) -> None:
        self._run(self.metadata.update_reassignment, moves, version)

    def delete_preferred_election(self) -> None:
        self._run(self.metadata.delete_preferred_election)

    def delete_isr_change_notifications(self, names: Sequence[str]) -> None:
        if names:
            self._run(self.metadata.delete_isr_change_notifications, names)

    def complete_topic_deletion(self, topic: str) -> None:
        self._run(self.metadata.complete_topic_deletion, topic)

    def delete_topic_request(self, topic: str) -> None:
        """Remove ``/admin/delete_topics/<topic>`` (a request for a topic that does not exist)."""
        results = self.write_many([Delete(path=layout.delete_topic(topic))])
        for result in results:
            if isinstance(result, CoordinatorError) and not isinstance(result, NoNode):
                raise result

    def resign(self) -> None:
        """Delete ``/controller`` if this epoch still holds it, then close."""
        if self._open:
            self.close()
            try:
                self.metadata.resign_controller(self.epoch)
            except CoordinatorError:
                pass
