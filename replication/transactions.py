"""A partition's transactions as its producer state sees them: the ongoing ones (a producer's
first transactional offset, until its marker), the completed ones whose marker is not yet
below the high watermark, and from both the first unstable offset and the last stable offset
(LSO), by Kafka 3.9's rules (ProducerStateManager's ongoingTxns and unreplicatedTxns,
UnifiedLog's firstUnstableOffset):

- the first unstable offset is the least first offset of an ongoing transaction or of a
  completed one whose marker is at or above the HW (its outcome is not committed yet), never
  below the log start;
- the LSO is that offset when it is below the HW, else the HW: a read_committed consumer reads
  below it only;
- a completed transaction's own LSO (what its aborted-transaction index entry records) is the
  first offset of the earliest transaction of another producer still ongoing, else the offset
  after its marker.

Not thread-safe: the producer state's owner (the log) holds its lock.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

__all__ = ["CompletedTxn", "TxnTracker"]


class CompletedTxn(NamedTuple):
    """A transaction a marker ended: its producer, first offset, the marker's offset (its last
    offset) and whether it was aborted (Kafka's CompletedTxn)."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


class TxnTracker:
    """The ongoing transactions (producer id -> first offset) and the completed ones not yet
    replicated below the HW."""

    __slots__ = ("_ongoing", "_unreplicated")

    def __init__(self) -> None:
        self._ongoing: dict[int, int] = {}
        self._unreplicated: list[CompletedTxn] = []

    def reset(self, ongoing: Iterable[tuple[int, int]] = ()) -> None:
        """Start again from ``ongoing`` (producer id, first offset) pairs and no completed ones
        (a snapshot was loaded, or the log restarted)."""
        self._ongoing = dict(ongoing)
        self._unreplicated = []

    def update(self, producer_id: int, first_offset: int) -> None:
        """The producer's transaction starts at ``first_offset`` (-1: it has none open)."""
        if first_offset >= 0:
            self._ongoing[producer_id] = first_offset
        else:
            self._ongoing.pop(producer_id, None)

    def last_stable_offset_of(self, txn: CompletedTxn) -> int:
        """The LSO once ``txn`` completes (the producer's own transaction aside)."""
        others = [first for pid, first in self._ongoing.items() if pid != txn.producer_id]
        return min(others) if others else txn.last_offset + 1

    def complete(self, txn: CompletedTxn) -> None:
        """``txn``'s marker is in the log: it is no longer ongoing, and stays unstable until
        the HW passes its marker."""
        if self._ongoing.get(txn.producer_id) == txn.first_offset:
            del self._ongoing[txn.producer_id]
        self._unreplicated.append(txn)

    @property
    def ongoing(self) -> dict[int, int]:
        """Producer id -> first offset of its open transaction (a copy)."""
        return dict(self._ongoing)

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The least first offset of a transaction not yet decided below ``high_watermark``
        (None: every transaction is); completed transactions whose marker the HW passed are
        forgotten here."""
        if self._unreplicated:
            self._unreplicated = [t for t in self._unreplicated if t.last_offset >= high_watermark]
        firsts = [t.first_offset for t in self._unreplicated]
        if self._ongoing:
            firsts.append(min(self._ongoing.values()))
        return min(firsts) if firsts else None

    def last_stable_offset(self, high_watermark: int, log_start_offset: int) -> int:
        """The LSO: the first unstable offset (at least the log start) when it is below the
        HW, else the HW."""
        first = self.first_unstable_offset(high_watermark)
        if first is None:
            return high_watermark
        return min(max(first, log_start_offset), high_watermark)

    def __repr__(self) -> str:
        return f"TxnTracker(ongoing={self._ongoing}, unreplicated={self._unreplicated})"
