"""The transactional side of a partition's log: its producer state as readers see it, the
last stable offset, and the aborted-transaction index (``.txnindex``) of its segments.

:class:`LogTransactions` is the part of :class:`replication.log.Log` that answers for producers
and transactions (DescribeProducers, the LSO of read_committed reads, the aborted transactions
a read_committed fetch lists); the log's state and lock are the log's (a base class of
:class:`~replication.log.Log`, as :class:`~replication.log_retention.LogRetention` is).
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections.abc import Iterator
from typing import TYPE_CHECKING

from coordinator.clock import Clock
from replication.local_log import LocalLog
from replication.producer_state import Aborted, ProducerEntry, ProducerStateManager
from replication.records import CONTROL_MASK, TRANSACTIONAL_MASK
from replication.txn_index import AbortedTxn, TxnIndexes

__all__ = ["LogTransactions"]


class LogTransactions:
    """Producers, transactions and the LSO of a :class:`replication.log.Log`."""

    _clock: Clock
    _lock: threading.RLock
    _local: LocalLog
    _producers: ProducerStateManager
    _txn_index: TxnIndexes

    if TYPE_CHECKING:
        @property
        def log_start_offset(self) -> int: ...

    def producer_entry(self, producer_id: int) -> ProducerEntry | None:
        """What the log knows of idempotent producer ``producer_id`` (None: nothing)."""
        with self._lock:
            return self._producers.entry(producer_id)

    def producer_entries(self) -> dict[int, ProducerEntry]:
        """The producer state: producer id -> entry (a copy)."""
        with self._lock:
            return self._producers.entries()

    @property
    def producer_snapshot_offsets(self) -> tuple[int, ...]:
        """Offsets of the producer state snapshots on disk."""
        with self._lock:
            return self._producers.snapshot_offsets

    def remove_expired_producers(self, now_ms: int | None = None) -> int:
        """Forget the producers idle for ``producer.id.expiration.ms`` (by their last batch's
        timestamp, as Kafka measures it); returns how many."""
        with self._lock:
            return self._producers.remove_expired(self._clock.now_ms() if now_ms is None else now_ms)

    def start_txn_verification(self, producer_id: int, sequence: int, epoch: int) -> int:
        """The KIP-890 guard a transactional produce presents once the coordinator verified
        it (:mod:`replication.txn_verification`); ``NO_GUARD`` when the producer's transaction
        is open here already."""
        with self._lock:
            return self._producers.start_verification(producer_id, sequence, epoch)

    def last_stable_offset(self, high_watermark: int) -> int:
        """The LSO at ``high_watermark`` (:mod:`replication.transactions`): what a
        read_committed consumer reads up to."""
        with self._lock:
            return self._producers.last_stable_offset(high_watermark, self.log_start_offset)

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset of a transaction not decided below ``high_watermark`` (None:
        none)."""
        with self._lock:
            return self._producers.first_unstable_offset(high_watermark)

    def ongoing_transactions(self) -> dict[int, int]:
        """Producer id -> first offset of its open transaction in this log."""
        with self._lock:
            return self._producers.ongoing_transactions()

    # -- the aborted-transaction index ---------------------------------------------------------

    def aborted_transactions(self, start: int, upper: int) -> list[AbortedTxn]:
        """The aborted transactions a read of ``[start, upper)`` overlaps (their marker at or
        after ``start``, their first offset below ``upper``), oldest marker first (tests,
        tools; a fetch answer lists :meth:`aborted_in_read`'s)."""
        with self._lock:
            return self._txn_index.collect(start, upper)

    def aborted_in_read(self, offset: int, size: int, upto: int) -> list[AbortedTxn]:
        """The aborted transactions a read_committed fetch answer lists beside the ``size``
        bytes a read of ``offset`` found, never reaching ``upto`` (the LSO): those overlapping
        the records read, up to Kafka's bound past them (the first indexed batch after them),
        and not every one up to the LSO, which made each answer of a read from the start of a
        long log list thousands."""
        with self._lock:
            if not self._txn_index.has_entries():
                return []
            upper = min(self._local.fetch_upper_bound(offset, size), upto)
            return self._txn_index.collect(offset, upper)

    def txn_index_entries(self) -> dict[int, list[AbortedTxn]]:
        """Segment base -> the entries of its ``.txnindex`` (tests, tools)."""
        with self._lock:
            return self._txn_index.entries()

    def _segment_of(self, offset: int) -> int:
        bases = self._local.bases
        return bases[max(bisect_right(bases, offset) - 1, 0)]

    def _index_aborted(self, aborted: list[Aborted]) -> None:
        """Index the transactions an append aborted, in the segment holding each marker."""
        for txn, lso in aborted:
            self._txn_index.append(self._segment_of(txn.last_offset), AbortedTxn(
                txn.producer_id, txn.first_offset, txn.last_offset, lso))

    def _load_txn_index(self) -> None:
        """On open: the index files as they are (rebuilt from the log if one is corrupt), with
        what recovery replayed added and nothing past the log end."""
        self._txn_index.load(self._local.bases, self._walk_aborted)
        self._index_aborted(self._producers.take_replayed_aborted())
        self._txn_index.truncate_to(self._local.leo)

    def _walk_aborted(self) -> Iterator[tuple[int, AbortedTxn]]:
        """Every transaction aborted in the log, from its batch headers and markers: (segment
        base, entry). Transactions begun below the log start are not known here."""
        ongoing: dict[int, int] = {}
        for b in self._local.producer_batches(self._local.first_base, self._local.leo):
            if b.attributes & CONTROL_MASK:
                first = ongoing.pop(b.producer_id, None) if b.marker is not None else None
                if first is not None and b.marker is not None and not b.marker[0]:
                    lso = min(ongoing.values()) if ongoing else b.base_offset + 1
                    yield self._segment_of(b.base_offset), AbortedTxn(
                        b.producer_id, first, b.base_offset, lso)
            elif b.attributes & TRANSACTIONAL_MASK:
                ongoing.setdefault(b.producer_id, b.base_offset)
