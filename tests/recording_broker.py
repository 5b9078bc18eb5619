"""A test double of a broker's side: it records and acknowledges the controller's requests,
refusing those of a stale controller epoch or meant for another registration of itself.

Controller tests build participants with it (``Participant(url, 1, handler=RecordingBroker)``)
and read back what each broker was told. Recording is O(1) per request (the controller's thread
delivers in-process); the views of what the broker was told (leaders, metadata) are folded from
the record when asked for. ``change_isr`` is what a partition leader does when its ISR changes,
for tests that play the leader.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from coordinator import layout
from coordinator.codecs import PartitionStateNode, TopicPartition
from coordinator.errors import BadVersion, NoNode
from coordinator.metadata import MetadataClient
from interbroker.channel import BrokerResponse
from interbroker.controller_client import ControllerClient
from interbroker.errors import ErrorCode
from interbroker.requests import (
    BrokerRequest,
    LeaderAndIsrPartition,
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataPartition,
    UpdateMetadataRequest,
)

__all__ = ["RecordingBroker", "Rejected", "change_isr"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Rejected:
    request: BrokerRequest
    error: ErrorCode


class RecordingBroker:
    """A :class:`~interbroker.channel.RequestHandler` that records what it is told."""

    def __init__(self, controller: ControllerClient) -> None:
        self.controller = controller
        self.id = controller.broker_id
        self._lock = threading.Lock()
        self._received: list[BrokerRequest] = []
        self._rejected: list[Rejected] = []
        self._controller_epoch = -1

    @property
    def epoch(self) -> int | None:
        """The broker's current registration epoch (its participant's)."""
        return self.controller.broker_epoch

    def handle_leader_and_isr(self, request: LeaderAndIsrRequest) -> BrokerResponse:
        return self.handle(request)

    def handle_update_metadata(self, request: UpdateMetadataRequest) -> BrokerResponse:
        return self.handle(request)

    def handle_stop_replica(self, request: StopReplicaRequest) -> BrokerResponse:
        return self.handle(request)

    def handle(self, request: BrokerRequest) -> BrokerResponse:
        """Any request: refuse it if stale, else record and acknowledge it."""
        with self._lock:
            if request.controller_epoch < self._controller_epoch:
                refused = ErrorCode.STALE_CONTROLLER_EPOCH
                self._rejected.append(Rejected(request=request, error=refused))
                return BrokerResponse(error=refused)
            epoch = self.epoch
            if epoch is None or request.broker_epoch != epoch:
                refused = ErrorCode.STALE_BROKER_EPOCH
                self._rejected.append(Rejected(request=request, error=refused))
                return BrokerResponse(error=refused)
            self._controller_epoch = request.controller_epoch
            self._received.append(request)
            return BrokerResponse()

    # --- what it was told ----------------------------------------------------------------

    @property
    def controller_epoch(self) -> int:
        return self._controller_epoch

    def received(self, kind: type | None = None) -> list[BrokerRequest]:
        with self._lock:
            items = list(self._received)
        return items if kind is None else [r for r in items if isinstance(r, kind)]

    def rejected(self) -> list[Rejected]:
        with self._lock:
            return list(self._rejected)

    def clear(self) -> None:
        with self._lock:
            self._received.clear()
            self._rejected.clear()

    def leader_and_isr(self) -> dict[TopicPartition, LeaderAndIsrPartition]:
        """The latest LeaderAndIsr per partition (by leader epoch, then arrival)."""
        out: dict[TopicPartition, LeaderAndIsrPartition] = {}
        for request in self.received(LeaderAndIsrRequest):
            assert isinstance(request, LeaderAndIsrRequest)
            for p in request.partitions:
                tp = TopicPartition(p.topic, p.partition)
                old = out.get(tp)
                if old is None or p.leader_epoch >= old.leader_epoch:
                    out[tp] = p
        return out

    def leads(self) -> set[TopicPartition]:
        return {tp for tp, p in self.leader_and_isr().items() if p.leader == self.id}

    def metadata(self) -> dict[TopicPartition, UpdateMetadataPartition]:
        out: dict[TopicPartition, UpdateMetadataPartition] = {}
        for request in self.received(UpdateMetadataRequest):
            assert isinstance(request, UpdateMetadataRequest)
            for p in request.partitions:
                out[TopicPartition(p.topic, p.partition)] = p
        return out

    def live_brokers(self) -> list[int]:
        updates = self.received(UpdateMetadataRequest)
        if not updates:
            return []
        last = updates[-1]
        assert isinstance(last, UpdateMetadataRequest)
        return [b.id for b in last.live_brokers]

    def stopped(self, *, deleted: bool | None = None) -> set[TopicPartition]:
        out = set()
        for request in self.received(StopReplicaRequest):
            assert isinstance(request, StopReplicaRequest)
            for p in request.partitions:
                if deleted is None or p.delete == deleted:
                    out.add(TopicPartition(p.topic, p.partition))
        return out


def change_isr(metadata: MetadataClient, tp: TopicPartition, isr: list[int]) -> bool:
    """What a partition leader does when its ISR changes: write the state node conditionally
    (same leader and leader epoch) and announce it with an ISR change notification."""
    path = layout.partition_state(tp.topic, tp.partition)
    for _ in range(5):
        try:
            data, stat = metadata.coordinator.get(path)
        except NoNode:
            return False
        s = PartitionStateNode.decode(path, data)
        new = PartitionStateNode(leader=s.leader, leader_epoch=s.leader_epoch, isr=tuple(isr),
                                 controller_epoch=s.controller_epoch, extra=s.extra)
        try:
            metadata.coordinator.set(path, new.encode(), stat.version)
        except BadVersion:
            continue
        metadata.notify_isr_change([tp])
        return True
    return False
