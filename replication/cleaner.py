"""Log compaction: keep the latest record per key in logs whose ``cleanup.policy`` has ``compact``.

One pass over a log, as Kafka's cleaner makes it:

1. The *dirty* section runs from the cleaner's checkpoint (the end of the last pass; the log
   start at first) up to the first offset that may not be cleaned: the active segment, the high
   watermark, and the first segment younger than ``min.compaction.lag.ms``. An
   :class:`OffsetMap` maps each key met there to its last offset. The map has a fixed number
   of slots (``log.cleaner.dedupe.buffer.size`` / 24 bytes, Kafka's cost of an entry); once a
   batch would not fit, the pass stops there and cleans only what was mapped.
2. Every segment from the log start up to the mapped end is copied, in groups whose old sizes
   sum to at most ``segment.bytes``, keeping a record when the map has no later offset for its
   key. Offsets never change: a batch keeps its base offset, last offset delta, producer
   fields and leader epoch even when records leave it, and the log then has gaps. A batch that
   loses every record goes, except the last batch of an idempotent producer the log still
   tracks, which stays as an empty header so that producer state rebuilds from the log.
   Records without a key are dropped (Kafka counts them as invalid). A compressed batch is
   inflated (bounded, :mod:`replication.compression`) for both steps: its keys are mapped like
   any other, and one that loses some records is rebuilt with the rest recompressed in its
   codec (and, for snappy, its framing), the header kept as above and the CRC recomputed; one
   that keeps them all is copied byte for byte. Control batches are kept whole.

   Transactions (as Kafka 3.9's cleaner): nothing at or after the first unstable offset is
   cleaned (an undecided transaction's records may still be aborted); the records of aborted
   transactions (from the segments' ``.txnindex``) are never mapped and are dropped, their
   batch kept as an empty header while it is its producer's last. A marker stays while the
   pass read a batch of its transaction (since the producer's previous marker); once none is
   left it gets a delete horizon (now + ``delete.retention.ms``, as a tombstone's) and a pass
   after the horizon removes it. The cleaned segment's ``.txnindex`` keeps the entry of an
   aborted transaction only while its marker stays for that reason (a batch of it was read),
   as Kafka's cleaned index does: a transaction with no record left needs no entry.
3. Tombstones (a key with a null value) are kept on the first pass that meets them, which
   stamps a *delete horizon* (now + ``delete.retention.ms``) into their batch, as Kafka's
   KIP-534 does: the batch's base timestamp becomes the horizon, attribute bit 0x40 says so,
   and the records' timestamp deltas are rewritten so every record keeps its timestamp. A later
   pass after the horizon drops them.
4. Each group is written to ``<base>.log.cleaned``, fsynced, renamed to ``<base>.log.swap``,
   the old segments are deleted in offset order, and the swap file becomes ``<base>.log``.
   :meth:`replication.log.Log.open` finishes or forgets an interrupted swap (see there), so a
   crash at any step leaves a consistent log: the old segments, or the new one.

This module is the compaction of one log (Kafka's Cleaner); the threads that pick the dirtiest
log and clean it are :class:`replication.log_cleaner.LogCleaner`. The record parser both passes
use (records read from a file in chunks, records sections walked without decoding them) is
:mod:`replication.records`'.
"""

from __future__ import annotations

import logging
import os
import struct
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import crc32c

from replication.compression import SNAPPY, compress, inflate_limit, is_xerial
from replication.errors import CorruptRecordError, SegmentChangedError
from replication.records import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_MASK,
    LOG_OVERHEAD,
    RECORDS_OFFSET,
    TRANSACTIONAL_MASK,
    file_batches,
    inflate_section,
    read_zigzag,
    record_spans,
)
from replication.txn_index import AbortedTxn
from replication.varint import write_varint, write_varlong

if TYPE_CHECKING:
    from replication.log import Log

__all__ = [
    "DELETE_HORIZON_MASK",
    "NATIVE_SCAN",
    "CleanResult",
    "CleanerConfig",
    "OffsetMap",
    "clean_log",
    "cleanable_range",
]

_logger = logging.getLogger(__name__)

DELETE_HORIZON_MASK = 0x40
"""Attribute bit of a v2 batch whose base timestamp is its tombstones' delete horizon."""
BYTES_PER_ENTRY = 24
"""What Kafka charges an offset map entry (a 16-byte key hash and an 8-byte offset)."""
LOAD_FACTOR = 0.9  # log.cleaner.io.buffer.load.factor
_WRITE_CHUNK = 4 << 20
_COUNT = struct.Struct(">i")
_CRC = struct.Struct(">I")
_LEN = struct.Struct(">i")
_BASE_TS = struct.Struct(">q")
_ATTR = struct.Struct(">h")
_BASE_TIMESTAMP_OFFSET = 27
_COUNT_OFFSET = 57
_CRC_OFFSET = 17


@dataclass(frozen=True, slots=True, kw_only=True)
class CleanerConfig:
    """The broker's ``log.cleaner.*`` settings, with Kafka's defaults."""

    enable: bool = True  # log.cleaner.enable
    threads: int = 1  # log.cleaner.threads
    dedupe_buffer_size: int = 128 << 20  # log.cleaner.dedupe.buffer.size (shared by threads)
    backoff_ms: int = 15_000  # log.cleaner.backoff.ms

    def __post_init__(self) -> None:
        if self.threads < 0:
            raise ValueError(f"log.cleaner.threads must be >= 0: {self.threads}")
        if self.dedupe_buffer_size < BYTES_PER_ENTRY:
            raise ValueError(f"log.cleaner.dedupe.buffer.size too small: "
                             f"{self.dedupe_buffer_size}")
        if self.backoff_ms < 0:
            raise ValueError(f"log.cleaner.backoff.ms must be >= 0: {self.backoff_ms}")

    @property
    def map_slots(self) -> int:
        """Entries one thread's offset map may hold."""
        per_thread = self.dedupe_buffer_size // max(self.threads, 1)
        return max(int(per_thread // BYTES_PER_ENTRY * LOAD_FACTOR), 1)


class OffsetMap:
    """Key -> the last offset seen for it, with at most ``slots`` keys.

    Kafka hashes keys into a fixed array; a dict of the keys themselves gives the same bound on
    entries and no hash collisions."""

    __slots__ = ("_map", "latest_offset", "null_offsets", "slots")

    def __init__(self, slots: int) -> None:
        if slots < 1:
            raise ValueError(f"an offset map needs at least one slot: {slots}")
        self.slots = slots
        self._map: dict[bytes, int] = {}
        self.latest_offset = -1
        self.null_offsets: list[int] = []
        """Offsets of the tombstones mapped, in increasing order (superseded ones too)."""

    def __len__(self) -> int:
        return len(self._map)

    def room_for(self, n: int) -> bool:
        """Whether ``n`` more keys are sure to fit."""
        return len(self._map) + n <= self.slots

    def put(self, key: bytes, offset: int) -> None:
        self._map[key] = offset
        self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """The last offset of ``key``, or -1."""
        return self._map.get(key, -1)

    def live_offsets(self) -> list[int]:
        """The offsets the map holds, sorted: in the mapped section, the records to keep."""
        return sorted(self._map.values())

    def clear(self) -> None:
        self._map.clear()
        self.latest_offset = -1
        self.null_offsets.clear()


@dataclass(frozen=True, slots=True, kw_only=True)
class CleanResult:
    """What one pass did: the offsets it covered, bytes in and out, records kept and dropped,
    and the latest delete horizon it stamped (-1: none)."""

    first_dirty: int
    end_offset: int
    bytes_read: int
    bytes_written: int
    records_kept: int
    records_dropped: int
    segments_replaced: int
    delete_horizon: int = -1



def _map_sequential(data: bytes, pos: int, end: int, count: int, base: int,
                    keys: dict[bytes, int], nulls: list[int]) -> None:
    """Map the keys of a batch's records section ``data[pos:end]`` (uncompressed or inflated)
    whose records have the offset deltas 0, 1, 2... (as every producer writes them):
    ``keys[key] = offset``, and each tombstone's offset to
    ``nulls``. The map pass's fast path: it skips over the timestamp and offset deltas instead
    of decoding them. Raises :class:`CorruptRecordError` if the records do not fill the
    section exactly. ``replication._cleaner_native`` has the same scan in C, which the map pass
    uses where it is built (see :data:`NATIVE_SCAN`); this code is its reference."""
    offset = base
    try:
        for _ in range(count):
            b = data[pos]
            if b < 0x80:
                length, p = (b >> 1) ^ -(b & 1), pos + 1
            elif data[pos + 1] < 0x80:
                z = (b & 0x7F) | (data[pos + 1] << 7)
                length, p = (z >> 1) ^ -(z & 1), pos + 2
            else:
                length, p = read_zigzag(data, pos)
            rec_end = p + length
            if length < 1 or rec_end > end:
                raise CorruptRecordError(f"record of length {length} runs past its batch")
            p += 1  # attributes
            while data[p] >= 0x80:  # timestamp delta
                p += 1
            p += 1
            while data[p] >= 0x80:  # offset delta
                p += 1
            p += 1
            b = data[p]
            if b < 0x80:
                key_len, p = (b >> 1) ^ -(b & 1), p + 1
            else:
                key_len, p = read_zigzag(data, p)
            if key_len >= 0:
                if p + key_len >= rec_end:
                    raise CorruptRecordError("record key runs past the end of its record")
                keys[data[p : p + key_len]] = offset
                if data[p + key_len] == 1:  # a value length of -1 (zigzag 1): a tombstone
                    nulls.append(offset)
            offset += 1
            pos = rec_end
    except IndexError as exc:
        raise CorruptRecordError("record runs past the end of its batch") from exc
    if pos != end:
        raise CorruptRecordError(f"batch declares {count} records but {end - pos} bytes are "
                                 "left over")


try:  # the same scan in C, built by the install where a C compiler is at hand (pyproject.toml)
    from replication._cleaner_native import map_sequential as _map_keys
except ImportError:
    _map_keys = _map_sequential
NATIVE_SCAN = _map_keys is not _map_sequential
"""Whether the map pass scans keys with the C extension ``replication._cleaner_native`` (else
with :func:`_map_sequential`, its reference, which it matches exactly)."""


# -- one pass -----------------------------------------------------------------------------------


def cleanable_range(log: Log, first_dirty: int, high_watermark: int, now_ms: int
                    ) -> tuple[int, int]:
    """``(first dirty offset, first uncleanable offset)`` of ``log``: the checkpoint brought
    inside the log, and the least of the active segment's base, the high watermark, the
    first unstable offset (an open transaction, or one whose marker the HW has not passed)
    and the base of the first segment younger than ``min.compaction.lag.ms``."""
    segments = log.segment_infos()
    start = segments[0][0]
    first_dirty = min(max(first_dirty, start), segments[-1][0])
    bound = min(segments[-1][0], high_watermark)
    unstable = log.first_unstable_offset(high_watermark)
    if unstable is not None:  # an undecided transaction: nothing from it on is cleaned
        bound = min(bound, unstable)
    lag = log.config.min_compaction_lag_ms
    if lag > 0:
        for base, _next, _size, largest_ts in segments[:-1]:
            if base >= first_dirty and largest_ts > now_ms - lag:
                bound = min(bound, base)
                break
    return first_dirty, max(bound, first_dirty)


Aborted = Mapping[int, list[tuple[int, int]]]
"""Producer id -> (first offset, marker offset) of each of its aborted transactions."""


def _aborted_ranges(log: Log, upto: int) -> dict[int, list[tuple[int, int]]]:
    ranges: dict[int, list[tuple[int, int]]] = {}
    for txn in log.aborted_transactions(0, upto):
        ranges.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))
    return ranges


def _aborted(aborted: Aborted, attributes: int, pid: int, base: int) -> bool:
    """Whether a data batch belongs to an aborted transaction (its records are dropped and
    never mapped, as Kafka's cleaner discards them)."""
    if not attributes & TRANSACTIONAL_MASK or attributes & CONTROL_MASK or pid not in aborted:
        return False
    return any(first <= base <= last for first, last in aborted[pid])


def _build_map(log: Log, views: list[tuple[int, int, int, int]], first_dirty: int, upto: int,
               offset_map: OffsetMap, verified: set[int], limit: int,
               aborted: Aborted | None = None) -> tuple[int, int]:
    """Map the keys of the batches in ``[first_dirty, upto)``; returns ``(end offset, bytes
    read)``: the offset up to which the map is complete (a full map stops before the batch that
    would not fit) and what was read. The base offsets of the segments whose every batch was
    checked go to ``verified``. Compressed batches are inflated to at most ``limit`` bytes."""
    end, read = first_dirty, 0
    keys, nulls = offset_map._map, offset_map.null_offsets  # the hot loop fills them directly
    for base, next_offset, size, fd in views:
        if next_offset <= first_dirty or base >= upto:
            continue
        read += size
        for chunk, rel, head in file_batches(fd, size):
            batch_base, last_delta, count, attributes = head[0], head[6], head[12], head[5]
            last = batch_base + last_delta
            if last < first_dirty:
                continue
            if batch_base >= upto:
                return end, read
            if attributes & CONTROL_MASK == 0 and not (
                    aborted and _aborted(aborted, attributes, head[9], batch_base)):
                if not offset_map.room_for(count) and len(offset_map):
                    return end, read
                if attributes & COMPRESSION_MASK:
                    data = inflate_section(chunk, rel, head, limit)
                    start, stop = 0, len(data)
                else:
                    data, start, stop = chunk, rel + RECORDS_OFFSET, rel + head[1] + LOG_OVERHEAD
                if count == last_delta + 1:
                    _map_keys(data, start, stop, count, batch_base, keys, nulls)
                else:  # a batch compacted before (copied from a compacted leader)
                    for _s, _e, delta, key, null in record_spans(data, start, stop, count):
                        if key is not None:
                            keys[bytes(key)] = batch_base + delta
                            if null:
                                nulls.append(batch_base + delta)
                offset_map.latest_offset = last
            end = last + 1
        verified.add(base)
    return max(end, first_dirty), read


def _rebuild_batch(chunk: bytes, rel: int, head: tuple, section: bytes | None,
                   kept: list[tuple[int, int]], horizon: int) -> bytes:
    """The batch at ``chunk[rel:]`` with only the records ``kept`` (their byte ranges in
    ``section``, its records section: ``chunk`` itself when uncompressed, else inflated), and,
    if ``horizon`` >= 0, the delete horizon stamped (record timestamp deltas rewritten). A
    compressed batch's records are recompressed in its codec (and snappy framing); one left
    with no record says no codec, as Kafka writes an empty batch."""
    out = bytearray(chunk[rel : rel + RECORDS_OFFSET])
    attributes = head[5]
    codec = attributes & COMPRESSION_MASK
    records = bytearray() if codec else out
    if horizon >= 0:
        assert section is not None
        shift = head[7] - horizon  # old base timestamp - new base timestamp
        for s, e in kept:
            length, body = read_zigzag(section, s)
            ts_delta, p = read_zigzag(section, body + 1)
            rec = bytearray(section[body : body + 1])
            write_varlong(rec, ts_delta + shift)
            rec += section[p:e]
            write_varint(records, len(rec))
            records += rec
        attributes |= DELETE_HORIZON_MASK
        _BASE_TS.pack_into(out, _BASE_TIMESTAMP_OFFSET, horizon)
    else:
        for s, e in kept:
            records += section[s:e]  # type: ignore[index]
    if codec:
        if kept:
            original = memoryview(chunk)[rel + RECORDS_OFFSET : rel + head[1] + LOG_OVERHEAD]
            out += compress(codec, records, xerial=codec != SNAPPY or is_xerial(original))
        else:
            attributes &= ~COMPRESSION_MASK
    _ATTR.pack_into(out, ATTRIBUTES_OFFSET, attributes)
    _LEN.pack_into(out, 8, len(out) - LOG_OVERHEAD)
    _COUNT.pack_into(out, _COUNT_OFFSET, len(kept))
    _CRC.pack_into(out, _CRC_OFFSET, crc32c.crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


class _Counts:
    __slots__ = ("dropped", "horizon", "kept", "markers_read", "txn_read", "written")

    def __init__(self) -> None:
        self.kept = self.dropped = self.written = 0
        self.horizon = -1
        self.txn_read: dict[int, bool] = {}
        """Producers whose transactional batches this pass read since their last marker."""
        self.markers_read: set[tuple[int, int]] = set()
        """(producer id, offset) of the markers reached after a batch of their transaction."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Pass:
    """What every segment of one pass is cleaned against."""

    offset_map: OffsetMap
    first_dirty: int
    end: int
    live: list[int]
    """The mapped offsets, sorted: in ``[first_dirty, end)`` exactly the records to keep."""
    nulls: list[int]
    now_ms: int
    new_horizon: int
    producer_last: Mapping[int, int]
    limit: int
    """What a compressed batch may inflate to."""
    aborted: Aborted


def _clean_segment(fd: int, size: int, out_fd: int, cp: _Pass, counts: _Counts,
                   check_crc: bool) -> None:
    """Copy the batches of one segment to ``out_fd``, keeping what the rules keep.

    A batch of the mapped section decides from the sorted mapped offsets alone when it can: all
    of its offsets mapped (kept whole) or none (dropped), with no tombstone among them; only the
    others are walked record by record."""
    pending: list[bytes | memoryview] = []
    pending_size = 0
    offset_map, end, now_ms = cp.offset_map, cp.end, cp.now_ms
    live, nulls, first_dirty = cp.live, cp.nulls, cp.first_dirty
    for chunk, rel, head in file_batches(fd, size, check_crc):
        total = head[1] + LOG_OVERHEAD
        base, attributes, last_delta, count, pid = head[0], head[5], head[6], head[12], head[9]
        last = base + last_delta
        whole: bytes | memoryview | None = None
        decided = False
        if attributes & TRANSACTIONAL_MASK and base < end:
            if attributes & CONTROL_MASK:
                if not counts.txn_read.pop(pid, False):  # its transaction holds no batch
                    whole = _empty_txn_marker(chunk, rel, head, cp, counts)
                    decided = True
                else:
                    counts.markers_read.add((pid, base))
            else:
                counts.txn_read[pid] = True
        if decided:
            pass
        elif base >= end or attributes & CONTROL_MASK:
            whole = memoryview(chunk)[rel : rel + total]
            counts.kept += count
            decided = True
        elif count == 0:  # an empty header stays while it is its producer's last batch
            if pid >= 0 and cp.producer_last.get(pid) == last:
                whole = memoryview(chunk)[rel : rel + total]
            decided = True
        elif cp.aborted and last < end and _aborted(cp.aborted, attributes, pid, base):
            counts.dropped += count  # an aborted transaction's records
            if cp.producer_last.get(pid) == last:
                whole = _rebuild_batch(chunk, rel, head, None, [], -1)  # producer's last
            decided = True
        elif (base >= first_dirty and last < end and not attributes & DELETE_HORIZON_MASK
              and bisect_right(nulls, last) == bisect_left(nulls, base)):
            live_count = bisect_right(live, last) - bisect_left(live, base)
            if live_count == count:
                whole = memoryview(chunk)[rel : rel + total]
                counts.kept += count
                decided = True
            elif live_count == 0:
                counts.dropped += count
                if pid >= 0 and cp.producer_last.get(pid) == last:
                    whole = _rebuild_batch(chunk, rel, head, None, [], -1)  # producer's last
                decided = True
        if not decided:
            horizon_set = bool(attributes & DELETE_HORIZON_MASK)
            tombstones_expire = horizon_set and now_ms >= head[7]
            kept: list[tuple[int, int]] = []
            has_tombstone = False
            get = offset_map.get
            if attributes & COMPRESSION_MASK:
                section = inflate_section(chunk, rel, head, cp.limit)
                start, stop = 0, len(section)
            else:
                section, start, stop = chunk, rel + RECORDS_OFFSET, rel + total
            for s, e, delta, key, null in record_spans(section, start, stop, count):
                offset = base + delta
                if key is None:
                    continue
                if offset >= end or offset >= get(key):
                    if null:
                        if tombstones_expire:
                            continue
                        has_tombstone = True
                    kept.append((s, e))
            counts.kept += len(kept)
            counts.dropped += count - len(kept)
            stamp = cp.new_horizon if has_tombstone and not horizon_set else -1
            if has_tombstone:
                counts.horizon = max(counts.horizon, head[7] if horizon_set else cp.new_horizon)
            if len(kept) == count and stamp < 0:
                whole = memoryview(chunk)[rel : rel + total]
            elif kept or stamp >= 0:
                whole = _rebuild_batch(chunk, rel, head, section, kept, stamp)
            elif pid >= 0 and cp.producer_last.get(pid) == last:
                whole = _rebuild_batch(chunk, rel, head, None, [], -1)  # the producer's last
        if whole is not None:
            pending.append(whole)
            pending_size += len(whole)
            if pending_size >= _WRITE_CHUNK:
                _write_all(out_fd, b"".join(pending))
                counts.written += pending_size
                pending, pending_size = [], 0
    if pending:
        _write_all(out_fd, b"".join(pending))
        counts.written += pending_size


def _empty_txn_marker(chunk: bytes, rel: int, head: tuple, cp: _Pass, counts: _Counts
                      ) -> bytes | memoryview | None:
    """A marker whose transaction has no batch left (Kafka's rule): stamped with the delete
    horizon the first time, dropped by a pass after it."""
    count, total = head[12], head[1] + LOG_OVERHEAD
    if head[5] & COMPRESSION_MASK:  # no coordinator writes one: kept as it is
        counts.kept += count
        return memoryview(chunk)[rel : rel + total]
    if head[5] & DELETE_HORIZON_MASK:
        if cp.now_ms >= head[7]:
            counts.dropped += count
            return None
        counts.horizon = max(counts.horizon, head[7])
        counts.kept += count
        return memoryview(chunk)[rel : rel + total]
    kept = [(s, e) for s, e, _d, _k, _n in record_spans(chunk, rel + RECORDS_OFFSET,
                                                        rel + total, count)]
    counts.horizon = max(counts.horizon, cp.new_horizon)
    counts.kept += count
    return _rebuild_batch(chunk, rel, head, chunk, kept, cp.new_horizon)


def _kept_entry(end: int, markers_read: set[tuple[int, int]]
                ) -> Callable[[AbortedTxn], bool]:
    """Which ``.txnindex`` entries of the cleaned segments the cleaned one keeps: those whose
    marker was not cleaned (at or past ``end``) and those whose marker a batch of their
    transaction preceded (Kafka's CleanedTransactionMetadata)."""
    def keep(txn: AbortedTxn) -> bool:
        return txn.last_offset >= end or (txn.producer_id, txn.last_offset) in markers_read
    return keep


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _group(views: list[tuple[int, int, int, int]], max_bytes: int
           ) -> list[list[tuple[int, int, int, int]]]:
    """Consecutive segments in groups whose sizes sum to at most ``max_bytes`` and whose
    offsets fit one segment's 32-bit relative offsets (Kafka's groupSegmentsBySize)."""
    groups: list[list[tuple[int, int, int, int]]] = []
    for view in views:
        if groups:
            last = groups[-1]
            if (sum(v[2] for v in last) + view[2] <= max_bytes
                    and view[1] - last[0][0] <= (1 << 31) - 1):
                last.append(view)
                continue
        groups.append([view])
    return groups


def clean_log(
    log: Log,
    *,
    first_dirty: int,
    high_watermark: int,
    offset_map: OffsetMap,
    now_ms: int,
    stage: Callable[[str], None] | None = None,
    release: list[int] | None = None,
) -> CleanResult | None:
    """Clean ``log`` once (see the module's description): map the dirty section, recopy the
    segments below the mapped end and swap them in. Returns what was done, or None when there
    was nothing to clean. ``stage(name)`` is called at each step of each swap (tests inject
    crashes there).

    The pass reads the segments through descriptors of its own; with ``release`` they are
    handed over there, for the caller to close, instead of closed at once. Closing the last
    descriptor of a replaced (deleted) file is what frees its pages, work Kafka leaves to an
    asynchronous delete (``file.delete.delay.ms``); the benchmark times it apart.

    Raises :class:`CorruptRecordError` if a segment does not parse; the log is then as it was
    (cleaned files written so far are removed)."""
    first_dirty, upto = cleanable_range(log, first_dirty, high_watermark, now_ms)
    segments, views = log.open_cleanable(upto)
    try:
        if not views:
            return None
        offset_map.clear()
        verified: set[int] = set()
        limit = inflate_limit(log.config.max_message_bytes)
        aborted = _aborted_ranges(log, upto)
        try:
            end, read = _build_map(log, views, first_dirty, upto, offset_map, verified, limit,
                                   aborted)
        except SegmentChangedError:
            return None
        if end <= first_dirty and not log.delete_horizon_due(now_ms):
            return None
        to_clean = [v for v in views if v[0] < end]
        if not to_clean:
            return None
        cp = _Pass(offset_map=offset_map, first_dirty=first_dirty, end=end,
                   live=offset_map.live_offsets(), nulls=offset_map.null_offsets, now_ms=now_ms,
                   new_horizon=now_ms + log.config.delete_retention_ms,
                   producer_last={pid: e.last_offset
                                  for pid, e in log.producer_entries().items()}, limit=limit,
                   aborted=aborted)
        counts = _Counts()
        replaced = 0
        by_base = dict(zip((v[0] for v in views), segments, strict=True))
        for group in _group(to_clean, log.config.segment_bytes):
            cleaned = log.directory / f"{group[0][0]:020d}.log.cleaned"
            out_fd = os.open(cleaned, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                for base, _next, size, fd in group:
                    read += size
                    _clean_segment(fd, size, out_fd, cp, counts, base not in verified)
                os.fsync(out_fd)
            except SegmentChangedError:
                os.close(out_fd)
                cleaned.unlink(missing_ok=True)
                break  # the log changed under the pass: stop here
            except BaseException:
                os.close(out_fd)
                cleaned.unlink(missing_ok=True)
                raise
            os.close(out_fd)
            if stage is not None:
                stage("cleaned")
            if not log.replace_segments([by_base[v[0]] for v in group], cleaned, stage=stage,
                                        sizes=[v[2] for v in group],
                                        keep_txn=_kept_entry(end, counts.markers_read)):
                cleaned.unlink(missing_ok=True)
                break  # the log changed under the pass (truncation, retention): stop here
            replaced += len(group)
        else:
            log.note_delete_horizon(counts.horizon)
        return CleanResult(first_dirty=first_dirty, end_offset=max(end, first_dirty),
                           bytes_read=read, bytes_written=counts.written,
                           records_kept=counts.kept, records_dropped=counts.dropped,
                           segments_replaced=replaced, delete_horizon=counts.horizon)
    finally:
        if release is not None:
            release.extend(view[3] for view in views)
        else:
            for view in views:
                os.close(view[3])
