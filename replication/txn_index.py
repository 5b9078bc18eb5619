"""The aborted-transaction index of a log's segments: Kafka's ``.txnindex`` files.

One file per segment that saw an abort marker, ``<base offset, 20 digits>.txnindex``, holding
one 34-byte entry per transaction aborted in that segment (Kafka 3.9's AbortedTxn), big-endian::

    version int16 (0) | producerId int64 | firstOffset int64 | lastOffset int64
    | lastStableOffset int64

``firstOffset`` is the transaction's first offset (possibly in an earlier segment),
``lastOffset`` its abort marker's, ``lastStableOffset`` the partition's LSO once it was aborted.
A read_committed fetch lists the aborted transactions its range overlaps from here (Kafka's
collectAbortedTransactions), so that consumers skip their records.

:class:`TxnIndexes` keeps the files of one log, in memory too (aborted transactions are few):
an entry is appended when an abort marker is appended (leader and follower alike), entries
past a truncation point go with the truncation, a segment's file goes with the segment, the
files of segments the cleaner merged are merged (without the entries of transactions the
cleaner emptied), and on open a file whose size is not a
multiple of 34, that holds an entry of another version, or whose entries are not in marker
order (each marker after the one before and after its transaction's first offset: a read's walk
relies on that order) is corrupt: it is rebuilt from the log with one warning. Files are
fsynced with the log's flush.
"""

from __future__ import annotations

import logging
import os
import struct
from bisect import bisect_right, insort
from collections.abc import Callable, Iterable, Sequence
from operator import attrgetter
from pathlib import Path
from typing import NamedTuple

from replication.checkpoints import PRIVATE_FILE_MODE, fsync_files

__all__ = ["ENTRY_SIZE", "TXN_INDEX_SUFFIX", "AbortedTxn", "CorruptTxnIndexError", "TxnIndexes",
           "decode_entries", "encode_entry", "file_name"]

log = logging.getLogger(__name__)

TXN_INDEX_SUFFIX = ".txnindex"
VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
_MARKER = attrgetter("last_offset")


class AbortedTxn(NamedTuple):
    """One aborted transaction: its producer, first offset, abort marker's offset and the LSO
    once it was aborted."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class CorruptTxnIndexError(ValueError):
    """A ``.txnindex`` that is not whole entries of version 0."""


def encode_entry(txn: AbortedTxn) -> bytes:
    return _ENTRY.pack(VERSION, *txn)


def decode_entries(data: bytes, name: str = "txnindex") -> list[AbortedTxn]:
    """The entries of a ``.txnindex``; :class:`CorruptTxnIndexError` for anything else."""
    if len(data) % ENTRY_SIZE:
        raise CorruptTxnIndexError(f"{name}: {len(data)} bytes are not whole {ENTRY_SIZE}-byte "
                                   "entries")
    entries: list[AbortedTxn] = []
    for version, *fields in _ENTRY.iter_unpack(data):
        if version != VERSION:
            raise CorruptTxnIndexError(f"{name}: an entry of unknown version {version}")
        txn = AbortedTxn(*fields)
        if txn.first_offset > txn.last_offset or (entries and
                                                  txn.last_offset <= entries[-1].last_offset):
            raise CorruptTxnIndexError(f"{name}: entry {len(entries)} is not after the one "
                                       "before it (markers in offset order, each after its "
                                       "transaction's first offset)")
        entries.append(txn)
    return entries


def file_name(base_offset: int) -> str:
    return f"{base_offset:020d}{TXN_INDEX_SUFFIX}"


Rebuild = Callable[[], Iterable[tuple[int, AbortedTxn]]]
"""The log's aborted transactions, walked from its batches: (segment base, entry) pairs."""


class TxnIndexes:
    """The ``.txnindex`` files of the log in ``directory``: segment base -> its entries, in
    append order. Not thread-safe: the log calls it under its lock."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._entries: dict[int, list[AbortedTxn]] = {}
        self._unsynced: set[int] = set()

    def load(self, segment_bases: Sequence[int], rebuild: Rebuild) -> None:
        """Read the files of the log just opened: those naming no segment are deleted, and if
        any is corrupt every file is rebuilt from ``rebuild`` (one warning)."""
        bases = set(segment_bases)
        self._entries = {}
        corrupt: list[str] = []
        for path in sorted(self.directory.glob(f"*{TXN_INDEX_SUFFIX}")):
            stem = path.name[:-len(TXN_INDEX_SUFFIX)]
            if len(stem) != 20 or not stem.isdigit():
                continue
            base = int(stem)
            if base not in bases:
                path.unlink(missing_ok=True)
                continue
            try:
                entries = decode_entries(path.read_bytes(), path.name)
            except (CorruptTxnIndexError, OSError) as exc:
                corrupt.append(str(exc))
                continue
            if entries:
                self._entries[base] = entries
        if corrupt:
            log.warning("%s: corrupt aborted-transaction index (%s); rebuilding it from the log",
                        self.directory.name, "; ".join(corrupt))
            self.rebuild(rebuild)

    def rebuild(self, rebuild: Rebuild) -> None:
        """Write every file anew from the log's batches."""
        for base in list(self._entries):
            (self.directory / file_name(base)).unlink(missing_ok=True)
        for path in self.directory.glob(f"*{TXN_INDEX_SUFFIX}"):
            path.unlink(missing_ok=True)
        self._entries = {}
        for base, txn in rebuild():
            self._entries.setdefault(base, []).append(txn)
        for base in self._entries:
            self._write(base)

    def append(self, segment_base: int, txn: AbortedTxn) -> None:
        """Add ``txn`` to the file of the segment holding its marker (not twice: recovery
        replays markers the file may hold). Markers come in offset order, so only one at or
        below the last entry's can be there already: a segment of 20,000 aborted transactions
        compared each new one with all of them (4 ms an abort, under the log's lock)."""
        entries = self._entries.setdefault(segment_base, [])
        if entries and entries[-1].last_offset >= txn.last_offset:
            if not any(t[:3] == txn[:3] for t in entries):
                # one the file missed: in its place, which a read's walk relies on
                # (collect stops at the first entry past the read)
                insort(entries, txn, key=_MARKER)
                self._write(segment_base)
            return
        entries.append(txn)
        fd = os.open(self.directory / file_name(segment_base),
                     os.O_WRONLY | os.O_CREAT | os.O_APPEND, PRIVATE_FILE_MODE)
        try:
            os.write(fd, encode_entry(txn))
        finally:
            os.close(fd)
        self._unsynced.add(segment_base)

    def _write(self, base: int) -> None:
        path = self.directory / file_name(base)
        entries = self._entries.get(base)
        if not entries:
            self._entries.pop(base, None)
            path.unlink(missing_ok=True)
            return
        tmp = path.with_name(path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE_MODE)
        try:
            os.write(fd, b"".join(encode_entry(t) for t in entries))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or past ``offset`` (a truncation)."""
        for base, entries in list(self._entries.items()):
            kept = [t for t in entries if t.last_offset < offset]
            if len(kept) != len(entries):
                self._entries[base] = kept
                self._write(base)

    def delete_below(self, first_base: int) -> None:
        """Delete the files of segments below ``first_base`` (they were deleted)."""
        for base in [b for b in self._entries if b < first_base]:
            del self._entries[base]
            self._unsynced.discard(base)
            (self.directory / file_name(base)).unlink(missing_ok=True)

    def delete_all(self) -> None:
        for base in list(self._entries):
            (self.directory / file_name(base)).unlink(missing_ok=True)
        self._entries = {}
        self._unsynced.clear()

    def merge(self, bases: Sequence[int], keep: Callable[[AbortedTxn], bool] | None = None
              ) -> None:
        """The segments ``bases`` became one, at ``bases[0]`` (the cleaner swapped them),
        holding the entries of theirs that ``keep`` keeps (all without it)."""
        merged = [t for base in bases for t in self._entries.get(base, ())
                  if keep is None or keep(t)]
        for base in bases[1:]:
            self._entries.pop(base, None)
            self._unsynced.discard(base)
            (self.directory / file_name(base)).unlink(missing_ok=True)
        self._entries[bases[0]] = merged
        self._unsynced.discard(bases[0])
        self._write(bases[0])

    def sync(self) -> None:
        """fsync the files appended to since the last call (the log's flush)."""
        fsync_files(self.directory / file_name(base) for base in sorted(self._unsynced))
        self._unsynced.clear()

    def has_entries(self) -> bool:
        return bool(self._entries)

    def collect(self, start: int, upper: int) -> list[AbortedTxn]:
        """The aborted transactions that overlap ``[start, upper)``: marker at or after
        ``start``, first offset below ``upper`` (Kafka's collectAbortedTransactions). From the
        segment holding ``start``, in marker order, until an entry whose LSO is at or past
        ``upper``: every transaction aborted after it began at or after that LSO."""
        bases = sorted(self._entries)
        found = []
        for base in bases[max(bisect_right(bases, start) - 1, 0):]:
            for txn in self._entries[base]:
                if txn.last_offset >= start and txn.first_offset < upper:
                    found.append(txn)
                if txn.last_stable_offset >= upper:
                    return found
        return found

    def entries(self) -> dict[int, list[AbortedTxn]]:
        """Segment base -> its entries (a copy)."""
        return {base: list(entries) for base, entries in self._entries.items()}
