"""Where a consumer group's offsets go when they are reset: pure decisions, no I/O.

A reset names a target per partition (:data:`ResetSpec`, a closed set of strategies) and the
figures the cluster gave (each partition's log start and log end, its committed offset, the
offset found for a timestamp); :func:`plan_reset` turns them into the new offset of every
partition, with Kafka's rules (its ``kafka-consumer-groups --reset-offsets``):

- ``ToEarliest``/``ToLatest``: the log start / the log end (the high watermark);
- ``ToOffset(n)`` and ``ShiftBy(n)`` (committed + n): clamped into [log start, log end];
  shifting a partition the group never committed is refused (there is nothing to shift);
- ``ToTimestamp(ms)`` (``--to-datetime`` and ``--by-duration`` both come to this): the first
  offset whose record's timestamp is at or after ``ms``; a partition without one (every record
  older, or empty) goes to its log end.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from coordinator.codecs import TopicPartition

__all__ = [
    "LogRange",
    "ResetError",
    "ResetSpec",
    "ShiftBy",
    "ToEarliest",
    "ToLatest",
    "ToOffset",
    "ToTimestamp",
    "plan_reset",
]


class ResetError(Exception):
    """The reset cannot be planned as asked (its message says why, for the user)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToEarliest:
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class ToLatest:
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class ToOffset:
    offset: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ShiftBy:
    delta: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ToTimestamp:
    timestamp_ms: int


ResetSpec = ToEarliest | ToLatest | ToOffset | ShiftBy | ToTimestamp


@dataclass(frozen=True, slots=True, kw_only=True)
class LogRange:
    """A partition's offsets a consumer may start at: ``earliest`` (log start) to ``latest``
    (log end, the high watermark) inclusive."""

    earliest: int
    latest: int

    def clamp(self, offset: int) -> int:
        return min(max(offset, self.earliest), self.latest)


def plan_reset(spec: ResetSpec, partitions: Iterable[TopicPartition], *,
               ranges: Mapping[TopicPartition, LogRange],
               committed: Mapping[TopicPartition, int],
               by_time: Mapping[TopicPartition, int | None] | None = None
               ) -> dict[TopicPartition, int]:
    """The new offset of each of ``partitions``, in their order. ``ranges`` must hold every
    partition; ``committed`` the group's committed offsets (any subset); ``by_time`` (for
    :class:`ToTimestamp`) the offset found for the timestamp, None where none was."""
    plan: dict[TopicPartition, int] = {}
    for tp in partitions:
        span = ranges[tp]
        match spec:
            case ToEarliest():
                plan[tp] = span.earliest
            case ToLatest():
                plan[tp] = span.latest
            case ToOffset(offset=offset):
                plan[tp] = span.clamp(offset)
            case ShiftBy(delta=delta):
                current = committed.get(tp)
                if current is None:
                    raise ResetError(f"--shift-by moves committed offsets, and the group "
                                     f"has none for {tp}")
                plan[tp] = span.clamp(current + delta)
            case ToTimestamp():
                found = (by_time or {}).get(tp)
                plan[tp] = span.latest if found is None else span.clamp(found)
    return plan
