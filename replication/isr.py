"""The in-sync replica set: pure decisions, the conditional write, and batched announcements.

The leader alone changes the ISR between elections. Its decisions are pure functions here:

- the high watermark is the smallest log end offset over the ISR (the leader's included), and
  a leader never moves it back; while the ISR is smaller than the effective
  ``min.insync.replicas`` it does not move at all (Kafka since KAFKA-15583), so records that
  only a minority holds are never committed over the heads of acks=all producers;
- a follower is out of sync when it is behind the leader's log end and has not been caught up
  for longer than ``replica.lag.time.max.ms`` (a caught-up follower that merely has nothing to
  fetch stays in);
- an outside follower may join once its log end offset reaches both the high watermark and the
  start of the leader's current epoch, so it holds every committed record and nothing of an
  older leader's that the current one might have overwritten.

A decided ISR is written to the partition state node conditionally on its version (the
partition epoch), through the broker's :class:`~interbroker.controller_client.ControllerClient`:
the leader is not the controller, so it is not fenced by the controller epoch, only by that
version. On a version conflict it re-reads the node; if the leader epoch moved, the controller
has taken over and the leader stops. Written changes are announced to the controller through
ISR change notifications, batched: see :class:`IsrChangeBatcher`.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterable, Mapping
from typing import Protocol

from coordinator.codecs import PartitionStateNode, TopicPartition
from interbroker.controller_client import IsrConflict, IsrWriteFailed, IsrWriteOutcome, IsrWritten

__all__ = [
    "IsrChangeBatcher",
    "IsrConflict",
    "IsrStore",
    "IsrWriteFailed",
    "IsrWriteOutcome",
    "IsrWritten",
    "LocalIsrStore",
    "UNKNOWN_OFFSET",
    "can_join_isr",
    "effective_min_isr",
    "high_watermark",
    "out_of_sync_replicas",
]

UNKNOWN_OFFSET = -1
"""A follower's log end offset before its first fetch to the current leader."""


# -- pure decisions ---------------------------------------------------------------------------


def effective_min_isr(min_insync_replicas: int, replication_factor: int) -> int:
    """``min.insync.replicas`` capped at the replication factor, as Kafka caps it since
    KAFKA-15583: a topic configured for more in-sync replicas than it has would otherwise never
    commit anything, now that the high watermark waits for the minimum."""
    return min(min_insync_replicas, max(replication_factor, 1))


def high_watermark(
    current: int,
    leader_leo: int,
    isr: Collection[int],
    leader_id: int,
    leos: Mapping[int, int],
    *,
    min_isr: int,
) -> int:
    """The leader's HW: the minimum log end offset over the ISR, never below ``current``.

    A follower whose LEO is unknown (it has not fetched from this leader yet) holds the HW
    where it is. An ISR smaller than ``min_isr`` (see :func:`effective_min_isr`) freezes it at
    ``current``: acks=1 records written meanwhile are held by too few replicas to be committed,
    and committing them would let them overtake acks=all writes on an election. Once the ISR
    is back to the minimum, the HW moves on to the smallest LEO of that ISR, taking those
    records in (every member now holds them).
    """
    if len(isr) < min_isr:
        return current
    hw = leader_leo
    for replica in isr:
        if replica != leader_id:
            leo = leos.get(replica, UNKNOWN_OFFSET)
            if leo < hw:
                hw = leo
    return hw if hw > current else current


def out_of_sync_replicas(
    isr: Iterable[int],
    leader_id: int,
    leader_leo: int,
    leos: Mapping[int, int],
    last_caught_up_ms: Mapping[int, int],
    now_ms: int,
    max_lag_ms: int,
) -> frozenset[int]:
    """The ISR followers to drop: behind the leader and not caught up within ``max_lag_ms``."""
    return frozenset(
        r
        for r in isr
        if r != leader_id
        and leos.get(r, UNKNOWN_OFFSET) != leader_leo
        and now_ms - last_caught_up_ms.get(r, 0) > max_lag_ms
    )


def can_join_isr(follower_leo: int, high_watermark: int, epoch_start_offset: int) -> bool:
    """Whether a follower outside the ISR has caught up enough to join it."""
    return follower_leo >= high_watermark and follower_leo >= epoch_start_offset


# -- the conditional write --------------------------------------------------------------------


class IsrStore(Protocol):
    """Where a leader writes the ISR it decided: its broker's
    :class:`~interbroker.controller_client.ControllerClient` (the partition state node, fenced by
    its version), or a :class:`LocalIsrStore`."""

    def write_isr(
        self, tp: TopicPartition, state: PartitionStateNode, expected_partition_epoch: int
    ) -> IsrWriteOutcome: ...


class LocalIsrStore:
    """ISR writes kept in memory, for a replica manager without a coordinator: every write
    succeeds and bumps the version."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.states: dict[TopicPartition, tuple[PartitionStateNode, int]] = {}

    def write_isr(
        self, tp: TopicPartition, state: PartitionStateNode, expected_partition_epoch: int
    ) -> IsrWriteOutcome:
        with self._lock:
            version = expected_partition_epoch + 1
            self.states[tp] = (state, version)
            return IsrWritten(partition_epoch=version)


# -- announcing changes -----------------------------------------------------------------------


class IsrChangeBatcher:
    """Collects partitions whose ISR changed and says when to announce them, as Kafka batches
    its ISR change notifications so a flapping cluster does not flood the controller.

    Pending changes are due when at least ``check_interval_ms`` passed since the last
    announcement and either no new change arrived for ``blackout_ms`` (things settled) or the
    last announcement is ``max_delay_ms`` old (they never settle, announce anyway).
    Thread-safe.
    """

    def __init__(
        self, *, check_interval_ms: int, blackout_ms: int, max_delay_ms: int, now_ms: int
    ) -> None:
        self.check_interval_ms = check_interval_ms
        self.blackout_ms = blackout_ms
        self.max_delay_ms = max_delay_ms
        self._lock = threading.Lock()
        self._pending: set[TopicPartition] = set()
        self._last_change_ms = now_ms
        self._last_propagation_ms = now_ms

    @property
    def pending(self) -> frozenset[TopicPartition]:
        return frozenset(self._pending)

    def record(self, tp: TopicPartition, now_ms: int) -> None:
        with self._lock:
            self._pending.add(tp)
            self._last_change_ms = now_ms

    def take_due(self, now_ms: int) -> list[TopicPartition]:
        """The partitions to announce now (sorted), or an empty list if not yet due."""
        with self._lock:
            if not self._pending:
                return []
            since_propagation = now_ms - self._last_propagation_ms
            if since_propagation < self.check_interval_ms:
                return []
            if (
                now_ms - self._last_change_ms < self.blackout_ms
                and since_propagation < self.max_delay_ms
            ):
                return []
            due = sorted(self._pending)
            self._pending.clear()
            self._last_propagation_ms = now_ms
            return due

    def put_back(self, tps: Iterable[TopicPartition]) -> None:
        """Return partitions whose announcement failed, to go out with the next one."""
        with self._lock:
            self._pending.update(tps)
