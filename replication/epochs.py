"""The leader epoch cache: which leader epoch started at which offset.

Kafka keeps, per partition, the list of ``(epoch, start_offset)`` pairs seen in the log and
answers OffsetsForLeaderEpoch from it; followers use the answers to find where their log parts
from the leader's (KIP-101, KIP-279). The lookup rules are pure functions over a tuple of
:class:`EpochEntry` so the follower-truncation decision can use them without any file; the
:class:`LeaderEpochCache` adds the ``leader-epoch-checkpoint`` file, rewritten atomically on
every change (changes happen once per epoch, not per append).

A LeaderAndIsr that moves many partitions changes many caches at once: within
:func:`batched_epoch_writes` a thread's changes take effect in memory at once and reach their
files together when the block ends, each file written as :func:`atomic_write` writes it, but all
of them in flight at the same time, so that the file system commits their fsyncs as a group
instead of one after another. Kafka writes and fsyncs each partition's file in turn as it
becomes leader, before it answers the LeaderAndIsr; a broker's replica manager hands the
files to writer threads of its own and answers at once (the block's ``background``): on this
machine's disk the fsyncs of 833 new leaders' files were most of the time a broker took to
take leadership over. Either way a cache still waiting for its write is written first
whenever its log is flushed (:meth:`LeaderEpochCache.sync`), so the recovery point never
passes an entry that is not on disk, and recovery rebuilds the entries of the batches past
the recovery point from the batches themselves: a crash before a file is written loses no
entry a batch needs. An entry no batch carries yet (a leader that has appended nothing in
its epoch) describes no record, so losing it loses nothing either.
"""

from __future__ import annotations

import logging
import threading
from bisect import bisect_right
from collections.abc import Iterator
from concurrent.futures import Executor, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from replication.checkpoints import atomic_write, format_checkpoint, parse_checkpoint, parse_int
from replication.errors import CorruptCheckpointError, InvalidEpochError

__all__ = [
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "EpochEndOffset",
    "EpochEntry",
    "LeaderEpochCache",
    "assign_epoch",
    "batched_epoch_writes",
    "end_offset_for",
    "truncate_entries_from_end",
    "truncate_entries_from_start",
]

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class EpochEntry:
    """Leader epoch ``epoch`` wrote its first record at ``start_offset``."""

    epoch: int
    start_offset: int


@dataclass(frozen=True, slots=True, kw_only=True)
class EpochEndOffset:
    """An OffsetsForLeaderEpoch answer: the largest known epoch <= the one asked for, and the
    offset where that epoch's records end (exclusive). Both -1 when undefined."""

    epoch: int
    end_offset: int

    @property
    def undefined(self) -> bool:
        return self.end_offset == UNDEFINED_EPOCH_OFFSET


UNDEFINED = EpochEndOffset(epoch=UNDEFINED_EPOCH, end_offset=UNDEFINED_EPOCH_OFFSET)


def end_offset_for(
    entries: tuple[EpochEntry, ...], requested_epoch: int, log_end_offset: int
) -> EpochEndOffset:
    """OffsetsForLeaderEpoch over ``entries`` (ordered by epoch and start offset), answered as
    Kafka's ``LeaderEpochFileCache.endOffsetFor`` answers it, since consumers validating their
    position after a leader change (KIP-320) and followers both read it off the wire:

    - the latest known epoch ends at the log end offset (it is still being written);
    - an older epoch ends where the first larger known epoch starts, reported against the largest
      known epoch <= the requested one (the requester may not know that one, which is how a
      follower learns to go round again, KIP-279);
    - an epoch below the first known one ends where the first known one starts, reported
      against the requested epoch itself: whatever came before is gone from this log (retention
      moved its start), and the requester should carry on from there;
    - an epoch above the latest, UNDEFINED, or any epoch of an empty history is UNDEFINED.
    """
    if requested_epoch == UNDEFINED_EPOCH or not entries:
        return UNDEFINED
    latest = entries[-1]
    if requested_epoch == latest.epoch:
        return EpochEndOffset(epoch=latest.epoch, end_offset=log_end_offset)
    if requested_epoch > latest.epoch:
        return UNDEFINED
    if requested_epoch < entries[0].epoch:
        return EpochEndOffset(epoch=requested_epoch, end_offset=entries[0].start_offset)
    i = bisect_right([e.epoch for e in entries], requested_epoch)  # first epoch > requested
    return EpochEndOffset(epoch=entries[i - 1].epoch, end_offset=entries[i].start_offset)


def assign_epoch(
    entries: tuple[EpochEntry, ...], epoch: int, start_offset: int
) -> tuple[EpochEntry, ...]:
    """``entries`` with ``epoch`` starting at ``start_offset``, by Kafka's rule.

    The same epoch at the same or a later offset changes nothing (every append of an epoch
    calls this). Otherwise the new entry goes last, and every entry it would leave out of order
    (an epoch at or above it, or a start at or past its start) is removed first: the entries
    always increase in both epoch and start offset. Whether a lower epoch than the latest may be
    assigned at all is the caller's decision (a leader refuses it, see
    :meth:`replication.log.Log.assign_leader_epoch`); the history itself stays consistent
    either way. A negative epoch or offset is refused with :class:`InvalidEpochError`.
    """
    if epoch < 0 or start_offset < 0:
        raise InvalidEpochError(f"epoch {epoch} at offset {start_offset} is not a valid entry")
    if entries:
        last = entries[-1]
        if epoch == last.epoch and start_offset >= last.start_offset:
            return entries
    # Entries increase in both fields, so the ones out of order with the new entry are a suffix.
    kept = tuple(e for e in entries if e.epoch < epoch and e.start_offset < start_offset)
    return (*kept, EpochEntry(epoch=epoch, start_offset=start_offset))


def truncate_entries_from_end(
    entries: tuple[EpochEntry, ...], end_offset: int
) -> tuple[EpochEntry, ...]:
    """Drop entries starting at or after ``end_offset`` (the log was truncated there).

    A negative ``end_offset`` (UNDEFINED_EPOCH_OFFSET, an answer with no offset in it) changes
    nothing, as in Kafka: it names no place the log was cut.
    """
    if end_offset < 0:
        return entries
    return tuple(e for e in entries if e.start_offset < end_offset)


def truncate_entries_from_start(
    entries: tuple[EpochEntry, ...], start_offset: int
) -> tuple[EpochEntry, ...]:
    """Forget history below a new log start offset.

    Entries starting at or below ``start_offset`` are removed except the last of them, which is
    kept with its start moved up to ``start_offset``: that epoch still owns the first records.
    """
    below = [e for e in entries if e.start_offset <= start_offset]
    if not below:
        return entries
    above = entries[len(below) :]
    return (EpochEntry(epoch=below[-1].epoch, start_offset=start_offset), *above)


BATCH_WRITERS = 16
"""Files of a batch written at the same time (:func:`batched_epoch_writes`)."""

_batches = threading.local()
log = logging.getLogger(__name__)


@contextmanager
def batched_epoch_writes(background: Executor | None = None) -> Iterator[None]:
    """Defer this thread's epoch-cache writes to the end of the block, then write them all,
    :data:`BATCH_WRITERS` at a time, each file as :func:`atomic_write` writes it. Nested
    blocks join the outermost. A write that fails is raised once every other was tried; its
    cache stays pending and is written by its next change or flush.

    With ``background`` the block ends without waiting: ``background`` writes each file, and
    a write that fails is logged (one line); its cache stays pending as above, so its log's
    next flush writes it, or fails."""
    if getattr(_batches, "pending", None) is not None:
        yield
        return
    pending: dict[int, LeaderEpochCache] = {}
    _batches.pending = pending
    try:
        yield
    finally:
        _batches.pending = None
        caches = list(pending.values())
        if background is None:
            _write_all(caches)
        else:
            for cache in caches:
                try:
                    background.submit(_write_later, cache)
                except RuntimeError:  # the writers are shut down: this thread writes it
                    _write_later(cache)


def _write_later(cache: LeaderEpochCache) -> None:
    try:
        cache.sync()
    except OSError as exc:
        if cache.path.parent.exists():
            log.warning("leader epoch file %s not written (%s); its log's next flush writes "
                        "it", cache.path, exc)
        # else the partition's directory is gone (deleted, moved aside): nothing to write


def _write_all(caches: list[LeaderEpochCache]) -> None:
    if len(caches) <= 1:
        for cache in caches:
            cache.sync()
        return
    with ThreadPoolExecutor(min(BATCH_WRITERS, len(caches)),
                            thread_name_prefix="epoch-write") as pool:
        failures = [f.exception() for f in [pool.submit(c.sync) for c in caches]]
    first = next((e for e in failures if e is not None), None)
    if first is not None:
        raise first


class LeaderEpochCache:
    """The epoch history of one partition, persisted in ``leader-epoch-checkpoint``.

    Thread-safe: a leader's request threads read it while its append path writes it.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._entries = self._read(path)
        self._unwritten = False  # changed in a batch, file not yet rewritten

    @staticmethod
    def _read(path: Path) -> tuple[EpochEntry, ...]:
        entries: tuple[EpochEntry, ...] = ()
        for epoch, offset in parse_checkpoint(path, 2):
            entry = EpochEntry(epoch=parse_int(path, epoch), start_offset=parse_int(path, offset))
            if entries and (
                entry.epoch <= entries[-1].epoch or entry.start_offset < entries[-1].start_offset
            ):
                raise CorruptCheckpointError(f"{path}: entries out of order at epoch {epoch}")
            entries = (*entries, entry)
        return entries

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        return self._entries

    @property
    def latest_epoch(self) -> int | None:
        entries = self._entries
        return entries[-1].epoch if entries else None

    def epoch_at(self, offset: int) -> int:
        """The epoch whose leader wrote ``offset``: the last entry starting at or before it
        (-1 when none does)."""
        epoch = -1
        for entry in self._entries:
            if entry.start_offset > offset:
                break
            epoch = entry.epoch
        return epoch

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset`` (see :func:`assign_epoch`).

        Returns whether anything changed; the file is rewritten only then.
        """
        entries = self._entries
        if entries and entries[-1].epoch == epoch and start_offset >= entries[-1].start_offset:
            return False  # the append path's common case, without taking the lock
        with self._lock:
            new = assign_epoch(self._entries, epoch, start_offset)
            return self._replace(new)

    def assign_all(self, pairs: list[tuple[int, int]]) -> bool:
        """:meth:`assign` each ``(epoch, start_offset)`` in turn, writing the file once."""
        with self._lock:
            new = self._entries
            for epoch, start_offset in pairs:
                new = assign_epoch(new, epoch, start_offset)
            return self._replace(new)

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> EpochEndOffset:
        """The OffsetsForLeaderEpoch answer for ``requested_epoch`` (see :func:`end_offset_for`)."""
        return end_offset_for(self._entries, requested_epoch, log_end_offset)

    def truncate_from_end(self, end_offset: int) -> bool:
        with self._lock:
            return self._replace(truncate_entries_from_end(self._entries, end_offset))

    def truncate_from_start(self, start_offset: int) -> bool:
        with self._lock:
            return self._replace(truncate_entries_from_start(self._entries, start_offset))

    def clear(self) -> bool:
        with self._lock:
            return self._replace(())

    @property
    def unwritten(self) -> bool:
        """Whether the entries have changed since the file was last written (a batch's)."""
        return self._unwritten

    def sync(self) -> None:
        """Write the file now if a batch left it behind the entries."""
        with self._lock:
            if self._unwritten:
                self._write(self._entries)

    def _replace(self, new: tuple[EpochEntry, ...]) -> bool:
        if new == self._entries:
            return False
        pending = getattr(_batches, "pending", None)
        if pending is None:
            self._write(new)
        else:
            self._unwritten = True
            pending[id(self)] = self
        self._entries = new
        return True

    def _write(self, entries: tuple[EpochEntry, ...]) -> None:
        atomic_write(self.path, format_checkpoint(f"{e.epoch} {e.start_offset}" for e in entries))
        self._unwritten = False
