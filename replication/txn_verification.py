"""KIP-890 part 1 on a partition's log: the verification state of producers whose transaction
has not written to this partition yet.

Before a transaction's first batch reaches a partition, its leader asks the transaction
coordinator whether the partition is in the transaction (the broker's side:
:mod:`broker.txns.verifier`). Between the question and the append an end marker may be written
and a new transaction begun, so a plain "verified" answer could let a stale batch into the next
transaction. Each question therefore gets a fresh guard (:meth:`VerificationStates.start`), and
the append must present the guard that is still registered for its producer
(:meth:`VerificationStates.verified`). Any transactional batch of the producer that reaches the
log, data or marker, removes the producer's guard (:meth:`VerificationStates.clear`): after a
data batch the transaction is open here and needs no guard, and after a marker the old guard
must never pass again. An entry that was never used expires with ``producer.id.expiration.ms``.

The entry also keeps the lowest sequence seen while verifying, per producer epoch: a batch with
a higher sequence of the same epoch is refused as out of order until the lowest one is written,
so a retried first batch cannot be overtaken by a later one that was verified sooner (Kafka's
VerificationStateEntry does the same).

A guard is a positive integer, unique within the process; :data:`NO_GUARD` (0) is the guard of
a produce that started no verification because the producer's transaction was already open
here: it passes only while that transaction still is.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

__all__ = ["NO_GUARD", "VerificationEntry", "VerificationStates"]

NO_GUARD = 0

_guards = itertools.count(1)


@dataclass(slots=True)
class VerificationEntry:
    """A producer's verification under way at one partition."""

    guard: int
    started_ms: int
    lowest_sequence: int
    epoch: int

    def saw(self, sequence: int, epoch: int) -> None:
        """Keep the lowest sequence of the newest epoch asked about."""
        if epoch > self.epoch:
            self.epoch, self.lowest_sequence = epoch, sequence
        elif epoch == self.epoch and sequence < self.lowest_sequence:
            self.lowest_sequence = sequence


class VerificationStates:
    """Producer id -> :class:`VerificationEntry`, for one log (under the log's lock)."""

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: dict[int, VerificationEntry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def start(self, producer_id: int, sequence: int, epoch: int, now_ms: int) -> int:
        """The guard of ``producer_id``'s verification, created if none is under way."""
        entry = self._entries.get(producer_id)
        if entry is None:
            entry = self._entries[producer_id] = VerificationEntry(
                next(_guards), now_ms, sequence, epoch)
        else:
            entry.saw(sequence, epoch)
        return entry.guard

    def entry(self, producer_id: int) -> VerificationEntry | None:
        return self._entries.get(producer_id)

    def verified(self, producer_id: int, guard: int) -> bool:
        """Whether ``guard`` is the producer's registered guard (never :data:`NO_GUARD`)."""
        entry = self._entries.get(producer_id)
        return guard != NO_GUARD and entry is not None and entry.guard == guard

    def clear(self, producer_id: int) -> None:
        if self._entries:
            self._entries.pop(producer_id, None)

    def expire(self, now_ms: int, expiration_ms: int) -> None:
        """Drop the entries started ``expiration_ms`` ago or more."""
        doomed = [pid for pid, e in self._entries.items() if now_ms - e.started_ms >= expiration_ms]
        for pid in doomed:
            del self._entries[pid]
