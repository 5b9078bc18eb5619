"""What a partition knows of one producer, and the rules of a batch or a marker against it
(Kafka 3.9's ProducerStateEntry and ProducerAppendInfo): pure values and checks, no I/O.
:mod:`replication.producer_state` keeps these per producer id, snapshots them and re-exports
them.

The rules, by origin (:class:`~replication.protocol.AppendOrigin`): a producer's batch is
checked by :func:`check_client_batch` (epoch, sequence); a coordinator's batch by its epoch
only; both then open the producer's transaction when the batch is transactional, and a
non-transactional batch while it is open is INVALID_TXN_STATE (:func:`after_data_batch`). An
end-transaction marker (:func:`after_marker`) closes the transaction, after the checks of its
producer epoch (INVALID_PRODUCER_EPOCH) and coordinator epoch (TRANSACTION_COORDINATOR_FENCED).
A follower and recovery apply the same updates unchecked, logging what a leader would refuse.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import NamedTuple

from replication.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
    UnknownProducerIdError,
)

__all__ = [
    "BATCHES_TO_RETAIN",
    "MAX_SEQUENCE",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "BatchMetadata",
    "Duplicate",
    "ProducerBatch",
    "ProducerEntry",
    "after_data_batch",
    "after_marker",
    "check_client_batch",
    "decrement_sequence",
    "in_sequence",
    "increment_sequence",
    "last_sequence",
]

log = logging.getLogger(__name__)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1
MAX_SEQUENCE = (1 << 31) - 1
BATCHES_TO_RETAIN = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN


def increment_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment``, wrapping past 2**31-1 to 0 (Kafka's producers wrap so)."""
    if sequence > MAX_SEQUENCE - increment:
        return increment - (MAX_SEQUENCE - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    """``sequence - decrement``, the inverse of :func:`increment_sequence`."""
    if sequence < decrement:
        return MAX_SEQUENCE - (decrement - sequence) + 1
    return sequence - decrement


class BatchMetadata(NamedTuple):
    """One batch of a producer as the state remembers it (Kafka's BatchMetadata). A named
    tuple, as the entries holding it: the leader builds one per idempotent append."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class ProducerEntry(NamedTuple):
    """What a partition knows of one producer: its epoch and its last batches, oldest first
    (at most :data:`BATCHES_TO_RETAIN`). Immutable: an append builds the next entry, which is
    stored only once the batch is in the log."""

    producer_id: int
    epoch: int
    batches: tuple[BatchMetadata, ...]
    last_timestamp: int
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1

    @classmethod
    def empty(cls, producer_id: int) -> ProducerEntry:
        return cls(producer_id, NO_PRODUCER_EPOCH, (), NO_TIMESTAMP)

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The retained batch with exactly this epoch and sequence range, if any."""
        if epoch != self.epoch:
            return None
        for batch in self.batches:
            if batch.last_seq == last_seq and batch.first_seq == first_seq:
                return batch
        return None

    def in_open_transaction(self, batch: BatchMetadata) -> bool:
        """Whether ``batch``, one of the retained ones, belongs to the producer's transaction
        open here. A transactional batch is a retry only of one of those: a batch of a
        transaction that has ended (its marker written) is never written again, and a batch
        with its sequence numbers after the marker is a new one, which the sequence check
        refuses (OUT_OF_ORDER_SEQUENCE_NUMBER). Kafka 3.9 answers it with the old batch's
        offset and writes nothing, and the next commit then commits nothing of it
        (docs/transactions.md)."""
        return 0 <= self.current_txn_first_offset <= batch.first_offset

    @property
    def in_transaction(self) -> bool:
        """Whether the producer has a transaction open in this partition."""
        return self.current_txn_first_offset >= 0

    def with_batch(self, epoch: int, batch: BatchMetadata) -> ProducerEntry:
        """The entry after ``batch``: a new epoch starts the retained batches afresh."""
        kept = self.batches if epoch == self.epoch else ()
        if len(kept) >= BATCHES_TO_RETAIN:
            kept = kept[1 - BATCHES_TO_RETAIN:]
        return ProducerEntry(self.producer_id, epoch, (*kept, batch), batch.timestamp,
                             self.coordinator_epoch, self.current_txn_first_offset)


class ProducerBatch(NamedTuple):
    """The header fields of one idempotent batch that the state is built from (a named tuple:
    recovery builds one per batch it walks), and for a control batch the end-transaction
    marker it holds: (commit, coordinator epoch), None when it holds none."""

    base_offset: int
    last_offset_delta: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    attributes: int
    marker: tuple[bool, int] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Duplicate:
    """A produced batch the partition already holds: answer with where it is, append nothing."""

    batch: BatchMetadata


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == MAX_SEQUENCE)


def check_client_batch(entry: ProducerEntry | None, *, producer_id: int, epoch: int,
                       first_seq: int, offset: int, where: str) -> None:
    """Kafka's checks of a producer's batch against the partition's entry for it (None: the
    partition does not know the producer): raises :class:`InvalidProducerEpochError`,
    :class:`OutOfOrderSequenceError` or (a producer the partition does not know, not starting
    at sequence 0) :class:`UnknownProducerIdError`, naming the batch's ``offset`` in
    ``where``."""
    current = entry.epoch if entry is not None else NO_PRODUCER_EPOCH
    if epoch < current:
        raise InvalidProducerEpochError(
            f"epoch of producer {producer_id} at offset {offset} in {where} is {epoch}, which "
            f"is smaller than the last seen epoch {current}")
    if epoch != current:
        if first_seq != 0:
            if current == NO_PRODUCER_EPOCH:
                raise UnknownProducerIdError(
                    f"found no record of producer {producer_id} in {where} at offset {offset}: "
                    f"its batch at sequence {first_seq} may follow batches never written")
            raise OutOfOrderSequenceError(
                f"invalid sequence number for new epoch of producer {producer_id} at offset "
                f"{offset} in {where}: {epoch} (request epoch), {first_seq} (seq. number), "
                f"{current} (current producer epoch)")
        return
    last_seq = entry.last_seq if entry is not None else NO_SEQUENCE
    if current != NO_PRODUCER_EPOCH and not in_sequence(last_seq, first_seq):
        raise OutOfOrderSequenceError(
            f"out of order sequence number for producer {producer_id} at offset {offset} in "
            f"{where}: {first_seq} (incoming seq. number), {last_seq} (current end sequence "
            "number)")


def after_data_batch(entry: ProducerEntry, transactional: bool, first_offset: int, *,
                     strict: bool, where: str) -> ProducerEntry:
    """``entry`` (already holding a data batch of the producer at ``first_offset``) with the
    batch's effect on the producer's transaction (Kafka's ProducerAppendInfo): a
    transactional batch opens a transaction unless one is open; a non-transactional one while
    a transaction is open is :class:`InvalidTxnStateError` when ``strict`` (a leader's
    append), a warning otherwise (a follower copies what its leader wrote)."""
    if transactional:
        if entry.current_txn_first_offset < 0:
            return entry._replace(current_txn_first_offset=first_offset)
        return entry
    if entry.current_txn_first_offset >= 0:
        message = (f"expected a transactional write from producer {entry.producer_id} at "
                   f"offset {first_offset} in {where}: its transaction is open since offset "
                   f"{entry.current_txn_first_offset}")
        if strict:
            raise InvalidTxnStateError(message)
        log.warning("%s", message)
    return entry


def after_marker(entry: ProducerEntry, *, producer_epoch: int, coordinator_epoch: int,
                 timestamp: int, offset: int, strict: bool, where: str) -> ProducerEntry:
    """``entry`` once an end-transaction marker of ``producer_epoch`` and
    ``coordinator_epoch`` is appended at ``offset``: its transaction is over, the epochs are
    the marker's (a new producer epoch drops the retained batches, as any new epoch does).
    With ``strict`` (a leader's append, Kafka's CLIENT and COORDINATOR origins) a marker of
    an older producer epoch is :class:`InvalidProducerEpochError` and one of an older
    coordinator epoch :class:`TransactionCoordinatorFencedError`; otherwise (a follower,
    recovery) they are logged and taken."""
    pid = entry.producer_id
    if producer_epoch < entry.epoch:
        message = (f"epoch of producer {pid} at offset {offset} in {where} is "
                   f"{producer_epoch}, which is smaller than the last seen epoch {entry.epoch}")
        if strict:
            raise InvalidProducerEpochError(message)
        log.warning("%s", message)
    if entry.coordinator_epoch > coordinator_epoch:
        message = (f"invalid coordinator epoch for producer {pid} at offset {offset} in "
                   f"{where}: {coordinator_epoch} (zombie), {entry.coordinator_epoch} "
                   "(current)")
        if strict:
            raise TransactionCoordinatorFencedError(message)
        log.info("%s", message)
    batches = entry.batches if producer_epoch == entry.epoch else ()
    return ProducerEntry(pid, producer_epoch, batches, timestamp, coordinator_epoch, -1)


def last_sequence(base_seq: int, last_delta: int) -> int:
    return NO_SEQUENCE if base_seq == NO_SEQUENCE else increment_sequence(base_seq, last_delta)
