"""Remote log segment metadata, as Kafka's KIP-405 types: ids, states, events. Pure.

A remote segment is named by :class:`RemoteLogSegmentId` (the partition, named by topic id,
name and number, and a random uuid per copy, so two copies of the same offsets never collide).
Its life is a chain of states, each an event: COPY_SEGMENT_STARTED (the metadata is added
before a byte is copied), COPY_SEGMENT_FINISHED (the data is complete and may be served),
DELETE_SEGMENT_STARTED (no longer served; its data is being deleted), DELETE_SEGMENT_FINISHED
(gone). The legal moves are a table of predecessors (:data:`VALID_PREVIOUS_STATES`, Kafka's
``RemoteLogSegmentState.isValidTransition``): a copy that failed half-way may be deleted
straight from COPY_SEGMENT_STARTED, and a state may be repeated (a retry after a failover
writes the same event again).
"""

from __future__ import annotations

import base64
import enum
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

__all__ = [
    "VALID_PREVIOUS_STATES",
    "RemoteLogSegmentId",
    "RemoteLogSegmentMetadata",
    "RemoteLogSegmentMetadataUpdate",
    "RemoteLogSegmentState",
    "TopicIdPartition",
    "is_valid_transition",
    "kafka_uuid_text",
    "split_transitions",
]


class RemoteLogSegmentState(enum.Enum):
    """Kafka's states and their ids (the ids are the wire values of its metadata records)."""

    COPY_SEGMENT_STARTED = 0
    COPY_SEGMENT_FINISHED = 1
    DELETE_SEGMENT_STARTED = 2
    DELETE_SEGMENT_FINISHED = 3


_S = RemoteLogSegmentState
VALID_PREVIOUS_STATES: Mapping[RemoteLogSegmentState, frozenset[RemoteLogSegmentState | None]] = {
    _S.COPY_SEGMENT_STARTED: frozenset({None, _S.COPY_SEGMENT_STARTED}),
    _S.COPY_SEGMENT_FINISHED: frozenset({_S.COPY_SEGMENT_STARTED, _S.COPY_SEGMENT_FINISHED}),
    _S.DELETE_SEGMENT_STARTED: frozenset({_S.COPY_SEGMENT_STARTED, _S.COPY_SEGMENT_FINISHED,
                                          _S.DELETE_SEGMENT_STARTED}),
    _S.DELETE_SEGMENT_FINISHED: frozenset({_S.DELETE_SEGMENT_STARTED,
                                           _S.DELETE_SEGMENT_FINISHED}),
}
"""Target state -> the states it may follow (None: the segment is not known yet)."""


def kafka_uuid_text(value: uuid.UUID) -> str:
    """Kafka's text form of a uuid (url-safe base64, unpadded), as topic ids are shown."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


def is_valid_transition(current: RemoteLogSegmentState | None,
                        target: RemoteLogSegmentState) -> bool:
    """Whether a segment in ``current`` (None: unknown) may move to ``target``."""
    return current in VALID_PREVIOUS_STATES[target]


def split_transitions(
    moves: Iterable[tuple[RemoteLogSegmentState | None, RemoteLogSegmentState]],
) -> tuple[list[tuple[RemoteLogSegmentState | None, RemoteLogSegmentState]],
           list[tuple[RemoteLogSegmentState | None, RemoteLogSegmentState]]]:
    """``moves`` split into (valid, invalid), in order."""
    valid: list[tuple[RemoteLogSegmentState | None, RemoteLogSegmentState]] = []
    invalid: list[tuple[RemoteLogSegmentState | None, RemoteLogSegmentState]] = []
    for move in moves:
        (valid if is_valid_transition(*move) else invalid).append(move)
    return valid, invalid


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicIdPartition:
    """A partition named by its topic's id as well as its name (Kafka's TopicIdPartition)."""

    topic_id: uuid.UUID
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}({self.topic_id})"


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoteLogSegmentId:
    """One remote copy of a segment: its partition and a uuid of its own."""

    partition: TopicIdPartition
    id: uuid.UUID

    @classmethod
    def generate(cls, partition: TopicIdPartition) -> RemoteLogSegmentId:
        return cls(partition=partition, id=uuid.uuid4())

    def __str__(self) -> str:
        return f"{self.partition}:{self.id}"


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoteLogSegmentMetadata:
    """A remote segment: offsets ``start_offset`` to ``end_offset`` (both inclusive), its
    largest record timestamp, the broker that copied it and when (``event_timestamp_ms``),
    ``segment_leader_epochs`` (each leader epoch in it with the offset where it starts in the
    segment, ascending: its lineage), its size in bytes and its state."""

    segment_id: RemoteLogSegmentId
    start_offset: int
    end_offset: int
    max_timestamp_ms: int
    broker_id: int
    event_timestamp_ms: int
    segment_leader_epochs: tuple[tuple[int, int], ...]
    segment_size_in_bytes: int
    state: RemoteLogSegmentState = RemoteLogSegmentState.COPY_SEGMENT_STARTED

    def __post_init__(self) -> None:
        if self.start_offset < 0 or self.end_offset < self.start_offset:
            raise ValueError(f"bad offsets {self.start_offset}..{self.end_offset}")
        if not self.segment_leader_epochs:
            raise ValueError("a remote segment needs at least one leader epoch")
        epochs = self.segment_leader_epochs
        for (e1, o1), (e2, o2) in zip(epochs, epochs[1:], strict=False):
            if e2 <= e1 or o2 < o1:
                raise ValueError(f"leader epochs out of order: {epochs}")
        if epochs[0][1] != self.start_offset or epochs[-1][1] > self.end_offset:
            raise ValueError(f"leader epochs {epochs} do not fit "
                             f"{self.start_offset}..{self.end_offset}")

    @property
    def partition(self) -> TopicIdPartition:
        return self.segment_id.partition

    def epoch_ranges(self) -> list[tuple[int, int, int]]:
        """``(epoch, first offset, last offset)`` of each epoch in the segment."""
        epochs = self.segment_leader_epochs
        out = []
        for i, (epoch, start) in enumerate(epochs):
            end = epochs[i + 1][1] - 1 if i + 1 < len(epochs) else self.end_offset
            out.append((epoch, start, end))
        return out

    def with_update(self, update: RemoteLogSegmentMetadataUpdate) -> RemoteLogSegmentMetadata:
        """This metadata in the update's state (the caller checks the transition)."""
        return replace(self, state=update.state, event_timestamp_ms=update.event_timestamp_ms,
                       broker_id=update.broker_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoteLogSegmentMetadataUpdate:
    """A state change of segment ``segment_id`` made by ``broker_id`` at ``event_timestamp_ms``."""

    segment_id: RemoteLogSegmentId
    event_timestamp_ms: int
    state: RemoteLogSegmentState
    broker_id: int

    def __post_init__(self) -> None:
        if self.state is RemoteLogSegmentState.COPY_SEGMENT_STARTED:
            raise ValueError("an update cannot be COPY_SEGMENT_STARTED: add the metadata")
