"""Per-partition producer state for idempotent and transactional producers: Kafka's
ProducerStateManager (KIP-98).

For every producer id that wrote to the partition the state keeps its epoch and its last five
batches (first and last sequence, first and last offset, max timestamp). A leader checks each
batch of an idempotent producer against it before appending, by the rules of Kafka 3.9's
``ProducerAppendInfo`` and ``UnifiedLog.analyzeAndValidateProducerState``:

- a batch with the epoch, first and last sequence of one of the last five is a retry: nothing is
  appended and the produce is answered with the original batch's offsets (Kafka answers NONE
  with the original base offset, not DUPLICATE_SEQUENCE_NUMBER);
- an epoch below the producer's is a fenced producer: INVALID_PRODUCER_EPOCH;
- a new (higher) epoch must start at sequence 0, unless the partition knew no epoch for the
  producer: OUT_OF_ORDER_SEQUENCE_NUMBER otherwise;
- the same epoch must continue at the last sequence + 1, wrapping from 2**31-1 to 0:
  OUT_OF_ORDER_SEQUENCE_NUMBER otherwise;
- a producer id the partition does not know (never seen, or its state removed by expiry or a
  log restarted empty) is taken at sequence 0 only: UNKNOWN_PRODUCER_ID otherwise, Kafka 0.11
  to 2.4's answer. Kafka since 2.5 (KIP-360) takes such a batch at any sequence, but then a
  new producer's (and, as every epoch bump librdkafka makes gets a new producer id, any
  bumped producer's) first batch refused before it was appended (NOT_LEADER_OR_FOLLOWER,
  NOT_ENOUGH_REPLICAS during a failover) is overtaken by the next one, which is taken, and
  librdkafka, which reads a later batch's success as proof that the earlier ones were written,
  reports the first delivered (without an offset) though no log holds it. Answered
  UNKNOWN_PRODUCER_ID, librdkafka takes a new producer id and sends both again, in order; a
  producer whose state expired does the same with its next batch (librdkafka and Kafka's Java
  producer both handle the error).

Batches without a producer id (-1) are not looked at. Followers and recovery apply the same
updates without the checks (Kafka's REPLICATION origin), so every replica holds the state and a
new leader recognises a retry of a batch its predecessor appended.

Transactions (the rules are :mod:`replication.producer_entry`'s): a transactional batch opens
the producer's transaction in the partition (its first offset is the entry's
``current_txn_first_offset``) unless one is open; a non-transactional batch while it is open
is INVALID_TXN_STATE; an end-transaction marker (a control batch, appended by the partition's
leader for the transaction coordinator, see :mod:`replication.txn_markers`) closes it after
the checks of its producer epoch (INVALID_PRODUCER_EPOCH) and coordinator epoch
(TRANSACTION_COORDINATOR_FENCED), and leaves the coordinator epoch in the entry. A
coordinator's own appends (:meth:`ProducerStateManager.check_coordinator_append`, Kafka's
COORDINATOR origin) are checked for the epoch only: no sequence, no duplicates. Followers and
recovery track transactions and markers as the leader did (a control batch that is not a
marker is skipped, as Kafka skips it), and a producer with an open transaction never expires.

State outlives the process through snapshots, one owner (the partition's
:class:`~replication.log.Log`) and Kafka's file format: ``<offset, 20 digits>.snapshot`` holds the
state of the log below ``offset``, each producer with its last batch only (as Kafka's)::

    version int16 (1) | crc uint32 | count int32 | count x entry, big-endian;
    entry: producerId int64 | producerEpoch int16 | lastSequence int32 | lastOffset int64
           | offsetDelta int32 | timestamp int64 | coordinatorEpoch int32
           | currentTxnFirstOffset int64

The CRC-32C covers everything after itself. A snapshot is taken when a segment rolls (at the new
segment's base offset: its batches can then be replayed from it) and at a clean shutdown (at the
log end), written to a temporary file and renamed over its name; the one at shutdown is fsynced
with its directory at once, those at rolls by the next flush of the log (Kafka's choice: no
fsync under the log's lock). On open the state is the latest snapshot at or below the log end
(later ones are deleted), with the batch headers after it replayed from the log; a snapshot that
does not parse or fails its CRC is moved aside (``.corrupt-<ms>``) with a warning and the next
older one, or the log start, is used instead. Truncation reloads the same way. Snapshots go
with their segments: those below the log start are deleted, and on open those that name no
segment, except the latest past the last segment (Kafka's stray rule).
"""

from __future__ import annotations

import logging
import os
import struct
from bisect import insort
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import crc32c

from coordinator.clock import Clock
from replication.checkpoints import PRIVATE_FILE_MODE, fsync_directory, fsync_files, move_aside
from replication.control import marker_fields
from replication.errors import (
    CorruptSnapshotError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
)
from replication.producer_entry import (
    BATCHES_TO_RETAIN,
    MAX_SEQUENCE,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    BatchMetadata,
    Duplicate,
    ProducerBatch,
    ProducerEntry,
    after_data_batch,
    after_marker,
    check_client_batch,
    decrement_sequence,
    in_sequence,
    increment_sequence,
    last_sequence,
)
from replication.transactions import CompletedTxn, TxnTracker
from replication.txn_verification import NO_GUARD, VerificationStates

__all__ = [
    "BATCHES_TO_RETAIN",
    "DEFAULT_PRODUCER_ID_EXPIRATION_MS",
    "MAX_SEQUENCE",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "SNAPSHOT_SUFFIX",
    "BatchMetadata",
    "Duplicate",
    "ProducerBatch",
    "ProducerEntry",
    "ProducerStateManager",
    "after_data_batch",
    "after_marker",
    "check_client_batch",
    "decode_snapshot",
    "decrement_sequence",
    "encode_snapshot",
    "increment_sequence",
    "snapshot_file_name",
]

log = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 24 * 3600 * 1000  # producer.id.expiration.ms

_CONTROL_MASK = 0x20
_TRANSACTIONAL_MASK = 0x10
# attributes, lastOffsetDelta, (baseTimestamp), maxTimestamp, producerId, producerEpoch,
# baseSequence: from the attributes (byte 21) of a batch header to its end.
_PRODUCER_FIELDS = struct.Struct(">hi8xqqhi")
_ATTRIBUTES_OFFSET = 21
_SNAPSHOT_HEAD = struct.Struct(">hIi")  # version, crc, entry count
_SNAPSHOT_CRC_FROM = 6
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")


def snapshot_file_name(offset: int) -> str:
    """``00000000000000000042.snapshot`` for offset 42."""
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


# -- snapshots ----------------------------------------------------------------------------------


def encode_snapshot(entries: Iterable[ProducerEntry]) -> bytes:
    """Kafka's ProducerSnapshot (version 1) of ``entries``, ordered by producer id."""
    ordered = sorted(entries, key=lambda e: e.producer_id)
    out = bytearray(_SNAPSHOT_HEAD.size + _SNAPSHOT_ENTRY.size * len(ordered))
    pos = _SNAPSHOT_HEAD.size
    for e in ordered:
        last = e.batches[-1] if e.batches else None
        _SNAPSHOT_ENTRY.pack_into(
            out, pos, e.producer_id, e.epoch,
            last.last_seq if last else NO_SEQUENCE, last.last_offset if last else -1,
            last.offset_delta if last else 0, e.last_timestamp, e.coordinator_epoch,
            e.current_txn_first_offset)
        pos += _SNAPSHOT_ENTRY.size
    _SNAPSHOT_HEAD.pack_into(out, 0, SNAPSHOT_VERSION, 0, len(ordered))
    crc = crc32c.crc32c(memoryview(out)[_SNAPSHOT_CRC_FROM:])
    _SNAPSHOT_HEAD.pack_into(out, 0, SNAPSHOT_VERSION, crc, len(ordered))
    return bytes(out)


def decode_snapshot(data: bytes, name: str = "snapshot") -> list[ProducerEntry]:
    """The entries of a snapshot; :class:`CorruptSnapshotError` for anything but a whole,
    version 1 snapshot whose CRC matches."""
    if len(data) < _SNAPSHOT_HEAD.size:
        raise CorruptSnapshotError(f"{name}: {len(data)} bytes, shorter than the header")
    version, crc, count = _SNAPSHOT_HEAD.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"{name}: unknown snapshot version {version}")
    actual = crc32c.crc32c(memoryview(data)[_SNAPSHOT_CRC_FROM:])
    if actual != crc:
        raise CorruptSnapshotError(
            f"{name}: CRC is no longer valid (stored {crc:#010x}, computed {actual:#010x})")
    if count < 0 or len(data) != _SNAPSHOT_HEAD.size + count * _SNAPSHOT_ENTRY.size:
        raise CorruptSnapshotError(f"{name}: {count} entries do not fill {len(data)} bytes")
    entries = []
    for fields in _SNAPSHOT_ENTRY.iter_unpack(memoryview(data)[_SNAPSHOT_HEAD.size:]):
        pid, epoch, seq, offset, delta, timestamp, coordinator_epoch, txn_first = fields
        batches = (BatchMetadata(seq, offset, delta, timestamp),) if offset >= 0 else ()
        entries.append(ProducerEntry(pid, epoch, batches, timestamp, coordinator_epoch,
                                     txn_first))
    return entries


def _write_file(path: Path, data: bytes, *, sync: bool) -> None:
    """Write ``data`` to a temporary file and rename it to ``path``: a crash never leaves a
    half-written file under the name. With ``sync`` the file and the rename are fsynced too."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE_MODE)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_directory(path.parent)


# -- the manager --------------------------------------------------------------------------------


Aborted = tuple[CompletedTxn, int]
"""A transaction an abort marker ended, and the LSO when it did (an aborted-transaction index
entry's)."""

Replay = Callable[[int, int], Iterable[ProducerBatch]]
"""``replay(start, end)``: the idempotent batches of the log from ``start`` to before ``end``."""


class ProducerStateManager:
    """The producer state of the log in ``directory`` and its snapshots. Not thread-safe: the
    owning :class:`~replication.log.Log` calls it under its lock.

    ``expiration_ms`` is ``producer.id.expiration.ms``: a producer whose last batch's timestamp
    is that old is forgotten (:meth:`remove_expired`, and when a snapshot is loaded).
    ``clock``'s wall-clock milliseconds age producers."""

    def __init__(self, directory: Path, *, expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
                 clock: Clock) -> None:
        if expiration_ms < 1:
            raise ValueError(f"producer id expiration must be positive: {expiration_ms}")
        self.directory = directory
        self.expiration_ms = expiration_ms
        self._clock = clock
        self._where = directory.name
        self._producers: dict[int, ProducerEntry] = {}
        self._txns = TxnTracker()
        self._staged: list[Aborted] = []  # what the last check found completed
        self._replayed: list[Aborted] = []
        self._snapshots: list[int] = []
        self._unsynced: set[int] = set()
        self.verifications = VerificationStates()

    # -- reading -------------------------------------------------------------------------------

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self._producers.get(producer_id)

    def entries(self) -> dict[int, ProducerEntry]:
        """A copy of the state: producer id -> entry."""
        return dict(self._producers)

    @property
    def snapshot_offsets(self) -> tuple[int, ...]:
        """Offsets of the snapshot files on disk, ascending."""
        return tuple(self._snapshots)

    # -- appends -------------------------------------------------------------------------------

    def check_client_append(
        self, buf: bytes | bytearray | memoryview, facts: Sequence[tuple[int, ...]],
        first_offset: int, guard: int | None = None,
    ) -> ProducerEntry | Duplicate | None:
        """Check a producer's append (``facts``: the log's per-batch facts, position first and
        producer id last; ``first_offset``: the offset its first batch will get) before
        anything is written.

        None: no batch has a producer id, nothing to do. A :class:`Duplicate`: the batch is a
        retry of one in the log. Otherwise the producer's entry as it will be once the batch is
        appended (:meth:`apply` it then). Raises :class:`InvalidRecordError` for an idempotent
        batch sent with others or without a sequence, and the errors of
        :func:`check_client_batch`. ``guard`` is the KIP-890 verification guard of the produce
        (:meth:`start_verification`); None when the broker does not verify: see
        :meth:`_verified`."""
        if self._staged:  # from a coordinator's append that failed after its check
            self._staged = []
        if len(facts) == 1:
            pos = facts[0][0]
            if facts[0][-1] < 0:
                return None
        elif all(f[-1] < 0 for f in facts):
            return None
        else:
            raise InvalidRecordError(
                f"{self._where}: a produce holding a batch with a producer id must hold one "
                f"batch, not {len(facts)}")
        (attributes, last_delta, max_ts, pid, epoch, base_seq) = _PRODUCER_FIELDS.unpack_from(
            buf, pos + _ATTRIBUTES_OFFSET)
        if base_seq < 0:
            raise InvalidRecordError(
                f"{self._where}: invalid sequence number {base_seq} in a batch with producer id "
                f"{pid}")
        last_seq = increment_sequence(base_seq, last_delta)
        entry = self._producers.get(pid)
        verify = bool(attributes & _TRANSACTIONAL_MASK) and (
            guard is not None or bool(self.verifications))
        if entry is None or epoch != entry.epoch or not entry.batches or not in_sequence(
                entry.batches[-1].last_seq, base_seq):
            # Anything but the producer's next batch (which can be neither a retry nor out of
            # order: the common case, decided without the rest).
            if entry is not None:
                duplicate = entry.find_duplicate(epoch, base_seq, last_seq)
                if duplicate is not None and (not attributes & _TRANSACTIONAL_MASK
                                              or entry.in_open_transaction(duplicate)):
                    return Duplicate(batch=duplicate)
            if verify:  # before the sequence, as Kafka checks them
                self._verified(entry or ProducerEntry.empty(pid), base_seq, guard, first_offset,
                               client=True)
                verify = False
            check_client_batch(entry, producer_id=pid, epoch=epoch, first_seq=base_seq,
                               offset=first_offset, where=self._where)
            entry = entry or ProducerEntry.empty(pid)
        if verify:
            self._verified(entry, base_seq, guard, first_offset, client=True)
        updated = entry.with_batch(
            epoch, BatchMetadata(last_seq, first_offset + last_delta, last_delta, max_ts))
        if attributes & _TRANSACTIONAL_MASK or updated.current_txn_first_offset >= 0:
            return after_data_batch(updated, bool(attributes & _TRANSACTIONAL_MASK),
                                    first_offset, strict=True, where=self._where)
        return updated

    def check_coordinator_append(
        self, buf: bytes | bytearray | memoryview, facts: Sequence[tuple[int, ...]],
        first_offset: int, guard: int | None = None,
    ) -> ProducerEntry | None:
        """:meth:`check_client_append` for a coordinator's append (Kafka's COORDINATOR
        origin): no duplicate detection and no sequence check, but the producer epoch is
        checked (:class:`InvalidProducerEpochError`), a transactional batch opens the
        producer's transaction, and a control batch must be an end-transaction marker, checked
        by :func:`after_marker`. None when no batch has a producer id. ``guard``: a
        transactional offset commit's verification, as for :meth:`check_client_append`."""
        if all(f[-1] < 0 for f in facts):
            return None
        if len(facts) != 1:
            raise InvalidRecordError(
                f"{self._where}: a coordinator's append holding a batch with a producer id must "
                f"hold one batch, not {len(facts)}")
        pos = facts[0][0]
        (attributes, last_delta, max_ts, pid, epoch, base_seq) = _PRODUCER_FIELDS.unpack_from(
            buf, pos + _ATTRIBUTES_OFFSET)
        entry = self._producers.get(pid) or ProducerEntry.empty(pid)
        if attributes & _CONTROL_MASK:
            marker = marker_fields(buf, pos)
            if marker is None:
                raise InvalidRecordError(
                    f"{self._where}: a control batch of producer {pid} that is not a "
                    "transaction marker")
            ended = after_marker(entry, producer_epoch=epoch, coordinator_epoch=marker[1],
                                 timestamp=max_ts, offset=first_offset, strict=True,
                                 where=self._where)
            self.verifications.clear(pid)
            self._staged = []
            if entry.current_txn_first_offset >= 0:
                txn = CompletedTxn(pid, entry.current_txn_first_offset, first_offset,
                                   not marker[0])
                self._staged = [(txn, self._txns.last_stable_offset_of(txn))]
            return ended
        self._staged = []
        if epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"epoch of producer {pid} at offset {first_offset} in {self._where} is {epoch}, "
                f"which is smaller than the last seen epoch {entry.epoch}")
        if attributes & _TRANSACTIONAL_MASK and (guard is not None or self.verifications):
            self._verified(entry, base_seq, guard, first_offset, client=False)
        updated = entry.with_batch(epoch, BatchMetadata(
            last_sequence(base_seq, last_delta), first_offset + last_delta, last_delta, max_ts))
        return after_data_batch(updated, bool(attributes & _TRANSACTIONAL_MASK), first_offset,
                                strict=True, where=self._where)

    def start_verification(self, producer_id: int, sequence: int, epoch: int) -> int:
        """The guard of a transactional produce about to ask the coordinator whether this
        partition is in the producer's transaction (:mod:`replication.txn_verification`);
        :data:`NO_GUARD` when the transaction is open here already (nothing to ask)."""
        entry = self._producers.get(producer_id)
        if entry is not None and entry.current_txn_first_offset >= 0:
            return NO_GUARD
        return self.verifications.start(producer_id, sequence, epoch, self._clock.now_ms())

    def _verified(self, entry: ProducerEntry, base_seq: int, guard: int | None, offset: int,
                  *, client: bool) -> None:
        """KIP-890 part 1 for a transactional data batch: unless its transaction is open here,
        it needs the guard still registered for its producer (INVALID_TXN_STATE otherwise); a
        client's batch above the lowest sequence seen while verifying is out of order. The
        producer's guard is spent either way."""
        pid = entry.producer_id
        pending = self.verifications.entry(pid)
        if guard is not None and entry.current_txn_first_offset < 0 and (
                not self.verifications.verified(pid, guard)):
            raise InvalidTxnStateError(
                f"{self._where}: the batch of producer {pid} at offset {offset} is not part of "
                "an ongoing transaction (the coordinator did not verify it)")
        if client and pending is not None and base_seq > pending.lowest_sequence:
            raise OutOfOrderSequenceError(
                f"{self._where}: sequence {base_seq} of producer {pid} at offset {offset} is "
                f"above {pending.lowest_sequence}, the earliest seen while verifying")
        self.verifications.clear(pid)

    def replicated_entries(
        self, buf: bytes | bytearray | memoryview, facts: Sequence[tuple[int, ...]]
    ) -> list[ProducerEntry] | None:
        """The entries a follower's append of ``facts`` (offsets already assigned) leads to,
        unchecked (Kafka's REPLICATION origin); None when no batch has a producer id."""
        self._staged = []
        producers = [f for f in facts if f[-1] >= 0]
        if not producers:
            return None
        updated: dict[int, ProducerEntry] = {}
        for pos, _size, base, *_rest in producers:
            fields = _PRODUCER_FIELDS.unpack_from(buf, pos + _ATTRIBUTES_OFFSET)
            attributes, last_delta, max_ts, pid, epoch, seq = fields
            marker = marker_fields(buf, pos) if attributes & _CONTROL_MASK else None
            done = self._replay_one(updated, ProducerBatch(base, last_delta, max_ts, pid, epoch,
                                                           seq, attributes, marker))
            if done is not None:
                self._staged.append(done)
        return list(updated.values())

    def replay_batch(self, batch: ProducerBatch) -> None:
        """Apply a batch of the log unchecked, at once (recovery walking a segment); a
        transaction it aborts is kept for :meth:`take_replayed_aborted`."""
        done = self._replay_one(self._producers, batch)
        if done is not None:
            self._txns.complete(done[0])
        entry = self._producers.get(batch.producer_id)
        if entry is not None:
            self._txns.update(entry.producer_id, entry.current_txn_first_offset)
        if done is not None and done[0].aborted:
            self._replayed.append(done)

    def take_replayed_aborted(self) -> list[Aborted]:
        """The transactions aborted in the batches replayed since the state was last loaded
        (the log rebuilds the aborted-transaction index of what recovery walked from them)."""
        taken, self._replayed = self._replayed, []
        return taken

    def _replay_one(self, updated: dict[int, ProducerEntry], b: ProducerBatch
                    ) -> Aborted | None:
        """Put the entry after ``b`` in ``updated`` (which may be the state itself); the
        transaction it completes, if it is a marker ending one, with its LSO."""
        pid = b.producer_id
        entry = updated.get(pid) or self._producers.get(pid) or ProducerEntry.empty(pid)
        if b.attributes & _TRANSACTIONAL_MASK:
            self.verifications.clear(pid)
        if b.attributes & _CONTROL_MASK:
            if b.marker is None:  # not a marker: skipped, as Kafka skips it
                return None
            updated[pid] = after_marker(entry, producer_epoch=b.producer_epoch,
                                        coordinator_epoch=b.marker[1],
                                        timestamp=b.max_timestamp, offset=b.base_offset,
                                        strict=False, where=self._where)
            if entry.current_txn_first_offset < 0:
                return None
            txn = CompletedTxn(pid, entry.current_txn_first_offset, b.base_offset,
                               not b.marker[0])
            return txn, self._lso_of(txn, updated)
        if b.producer_epoch < entry.epoch:
            log.warning("%s: epoch of producer %d at offset %d is %d, which is smaller than the "
                        "last seen epoch %d", self._where, pid, b.base_offset, b.producer_epoch,
                        entry.epoch)
        batch = BatchMetadata(last_sequence(b.base_sequence, b.last_offset_delta),
                              b.base_offset + b.last_offset_delta, b.last_offset_delta,
                              b.max_timestamp)
        entry = entry.with_batch(b.producer_epoch, batch)
        if b.attributes & _TRANSACTIONAL_MASK or entry.current_txn_first_offset >= 0:
            entry = after_data_batch(entry, bool(b.attributes & _TRANSACTIONAL_MASK),
                                     b.base_offset, strict=False, where=self._where)
        updated[pid] = entry
        return None

    def _lso_of(self, txn: CompletedTxn, updated: dict[int, ProducerEntry]) -> int:
        """``txn``'s LSO, the transactions of the entries in ``updated`` (not stored yet) as
        they are there."""
        if updated is self._producers:
            return self._txns.last_stable_offset_of(txn)
        firsts = [first for pid, first in self._txns.ongoing.items()
                  if pid != txn.producer_id and pid not in updated]
        firsts += [e.current_txn_first_offset for pid, e in updated.items()
                   if pid != txn.producer_id and e.current_txn_first_offset >= 0]
        return min(firsts) if firsts else txn.last_offset + 1

    def apply(self, entries: ProducerEntry | Iterable[ProducerEntry]) -> list[Aborted]:
        """Store what :meth:`check_client_append`, :meth:`check_coordinator_append` or
        :meth:`replicated_entries` returned, once the batches are in the log; returns the
        transactions the batches aborted, each with its LSO (for the aborted-transaction
        index)."""
        aborted: list[Aborted] = []
        if self._staged:
            staged, self._staged = self._staged, []
            for txn, lso in staged:
                self._txns.complete(txn)
                if txn.aborted:
                    aborted.append((txn, lso))
        txns = self._txns
        if isinstance(entries, ProducerEntry):
            self._producers[entries.producer_id] = entries
            txns.update(entries.producer_id, entries.current_txn_first_offset)
        else:
            for entry in entries:
                self._producers[entry.producer_id] = entry
                txns.update(entry.producer_id, entry.current_txn_first_offset)
        return aborted

    def last_stable_offset(self, high_watermark: int, log_start_offset: int) -> int:
        """The LSO (:mod:`replication.transactions`)."""
        return self._txns.last_stable_offset(high_watermark, log_start_offset)

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        return self._txns.first_unstable_offset(high_watermark)

    def ongoing_transactions(self) -> dict[int, int]:
        """Producer id -> first offset of its open transaction."""
        return self._txns.ongoing

    def remove_expired(self, now_ms: int) -> int:
        """Forget producers whose last batch is ``producer.id.expiration.ms`` old (by its
        timestamp, as Kafka measures it); returns how many."""
        expired = [pid for pid, e in self._producers.items() if self._expired(e, now_ms)]
        for pid in expired:
            del self._producers[pid]
        self.verifications.expire(now_ms, self.expiration_ms)
        return len(expired)

    def _expired(self, entry: ProducerEntry, now_ms: int) -> bool:
        return entry.current_txn_first_offset < 0 and (
            now_ms - entry.last_timestamp >= self.expiration_ms)

    # -- snapshots -----------------------------------------------------------------------------

    def take_snapshot(self, offset: int, *, sync: bool) -> bool:
        """Write the state as the snapshot at ``offset`` (the state must be that of the log
        below it), unless one is there already; returns whether one was written. Without
        ``sync`` it waits for :meth:`sync_snapshots` to be fsynced."""
        if offset in self._snapshots:
            return False
        path = self.directory / snapshot_file_name(offset)
        _write_file(path, encode_snapshot(self._producers.values()), sync=sync)
        insort(self._snapshots, offset)
        if not sync:
            self._unsynced.add(offset)
        return True

    def sync_snapshots(self) -> None:
        """fsync the snapshots written without it, and their directory (the log's flush)."""
        if not self._unsynced:
            return
        fsync_files(self.directory / snapshot_file_name(o) for o in sorted(self._unsynced))
        fsync_directory(self.directory)
        self._unsynced.clear()

    def _delete_snapshots(self, doomed: Iterable[int]) -> bool:
        gone = set(doomed)
        for offset in gone:
            (self.directory / snapshot_file_name(offset)).unlink(missing_ok=True)
            self._unsynced.discard(offset)
        self._snapshots = [o for o in self._snapshots if o not in gone]
        return bool(gone)

    def delete_snapshots_below(self, offset: int) -> bool:
        """Delete the snapshots below ``offset`` (the log start after retention); returns
        whether any went."""
        return self._delete_snapshots(o for o in self._snapshots if o < offset)

    def _list_snapshots(self) -> list[int]:
        found = []
        for path in self.directory.iterdir():
            name = path.name
            if (name.endswith(SNAPSHOT_SUFFIX) and len(name) == 20 + len(SNAPSHOT_SUFFIX)
                    and name[:20].isdigit()):
                found.append(int(name[:20]))
        return sorted(found)

    # -- loading and truncation ----------------------------------------------------------------

    def load(self, *, segment_bases: Sequence[int], log_start: int, log_end: int,
             replay: Replay) -> None:
        """Build the state of a log just opened: :meth:`start_load` up to ``log_end``, then
        :meth:`finish_load`."""
        self.start_load(segment_bases=segment_bases, log_start=log_start, upto=log_end,
                        replay=replay)
        self.finish_load(log_end)

    def start_load(self, *, segment_bases: Sequence[int], log_start: int, upto: int,
                   replay: Replay) -> None:
        """Begin building the state of a log being opened: drop stray snapshots (those naming
        no segment, but the latest past the last segment) and those below ``log_start``, load
        the latest snapshot at or below ``upto`` and replay the log after it, up to ``upto``.
        Recovery then hands each batch it walks past ``upto`` to :meth:`replay_batch`, and
        :meth:`finish_load` ends it once the log's end is known."""
        self._snapshots = self._list_snapshots()
        bases = set(segment_bases)
        strays = [o for o in self._snapshots if o not in bases]
        keep = strays[-1] if strays and strays[-1] > max(segment_bases, default=-1) else None
        self._delete_snapshots(o for o in strays if o != keep)
        self._delete_snapshots(o for o in self._snapshots if o < log_start)
        self._load_latest(log_start, upto, replay)

    def finish_load(self, log_end: int) -> None:
        """Delete the snapshots past the end of the log as it was opened (recovery cut it)."""
        self._delete_snapshots(o for o in self._snapshots if o > log_end)

    def reload(self, *, log_start: int, log_end: int, replay: Replay) -> None:
        """The state of the log from ``log_start`` to ``log_end`` (after a truncation):
        snapshots outside that range are deleted, the latest one left is loaded and the log's
        batches after it are replayed."""
        self._delete_snapshots(o for o in self._snapshots if o > log_end or o < log_start)
        self._load_latest(log_start, log_end, replay)

    def _load_latest(self, log_start: int, upto: int, replay: Replay) -> None:
        """The state at ``upto``: the latest snapshot at or below it (a corrupt one is moved
        aside and the next older tried), then the batches after it."""
        self._producers = {}
        self._replayed = []
        start = log_start
        now = self._clock.now_ms()
        for offset in reversed([o for o in self._snapshots if o <= upto]):
            path = self.directory / snapshot_file_name(offset)
            try:
                entries = decode_snapshot(path.read_bytes(), path.name)
            except (CorruptSnapshotError, FileNotFoundError) as exc:
                self._snapshots.remove(offset)
                self._unsynced.discard(offset)
                if path.exists():
                    moved = move_aside(path, now)
                    log.warning("%s is corrupt (%s); moved to %s, rebuilding the producer state "
                                "from an earlier snapshot or the log", path, exc, moved.name)
                continue
            self._producers = {e.producer_id: e for e in entries if not self._expired(e, now)}
            start = offset
            break
        self._reset_txns()
        if start < upto:
            for batch in replay(start, upto):
                self.replay_batch(batch)

    def install_snapshot(self, offset: int, data: bytes) -> None:
        """Take ``data`` (a snapshot from elsewhere: a remote segment's, KIP-405) as the
        snapshot at ``offset`` and the state now, the log being empty at ``offset``. Raises
        :class:`CorruptSnapshotError` for data that is not a whole snapshot (nothing changed)."""
        entries = decode_snapshot(data, f"remote snapshot at {offset}")
        _write_file(self.directory / snapshot_file_name(offset), data, sync=True)
        if offset not in self._snapshots:
            insort(self._snapshots, offset)
        self._unsynced.discard(offset)
        now = self._clock.now_ms()
        self._producers = {e.producer_id: e for e in entries if not self._expired(e, now)}
        self._reset_txns()

    def _reset_txns(self) -> None:
        self._staged = []
        self._txns.reset((e.producer_id, e.current_txn_first_offset)
                         for e in self._producers.values() if e.current_txn_first_offset >= 0)

    def truncate_fully(self) -> None:
        """Forget everything and delete every snapshot (the log restarts empty)."""
        self._producers = {}
        self._reset_txns()
        self._delete_snapshots(list(self._snapshots))

    def __repr__(self) -> str:
        return (f"ProducerStateManager({self._where}, {len(self._producers)} producers, "
                f"snapshots at {self._snapshots})")

