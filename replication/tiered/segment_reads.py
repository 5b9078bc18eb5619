"""Batches read out of a remote log segment: from a stream positioned at a batch (what a remote
storage manager's fetch returns), or as a slice of a local file descriptor it gave, with the
bounds a consumer's read sets (the batches from an offset, within a byte budget, below the
high watermark). Used by :class:`replication.tiered.manager.RemoteLogManager`.
"""

from __future__ import annotations

import os
import struct
from typing import BinaryIO

from replication.log import LogSlice
from replication.records import LOG_OVERHEAD, decode_batch, find_record, read_batch_header
from replication.tiered.storage import RemoteStorageError

__all__ = ["batch_max", "read_batches", "read_exact", "slice_batches"]

_HEAD = struct.Struct(">qi")  # baseOffset, batchLength
_LAST_DELTA = struct.Struct(">i")
_LAST_DELTA_AT = 23  # after baseOffset, length, epoch, magic, crc, attributes
_CHUNK = 64 << 10


def read_batches(stream: BinaryIO, offset: int, max_bytes: int, upto: int,
                  min_one: bool = True) -> bytes:
    """Whole batches from ``stream`` (positioned at a batch), skipping those ending before
    ``offset``; the first one kept whole (with ``min_one``, else only if it fits), the rest
    while they fit ``max_bytes`` and end below ``upto``."""
    buf = bytearray()
    pos = 0
    eof = False

    def fill(n: int) -> bool:
        nonlocal eof
        while len(buf) < n and not eof:
            chunk = stream.read(max(n - len(buf), _CHUNK))
            if not chunk:
                eof = True
            buf.extend(chunk)
        return len(buf) >= n

    start = -1
    while fill(pos + _LAST_DELTA_AT + _LAST_DELTA.size):
        base, length = _HEAD.unpack_from(buf, pos)
        size = length + LOG_OVERHEAD
        (last_delta,) = _LAST_DELTA.unpack_from(buf, pos + _LAST_DELTA_AT)
        last = base + last_delta
        if last < offset:
            pos += size
            if pos > len(buf) and not fill(pos):
                break
            continue
        if last >= upto:
            break
        if start >= 0 and pos + size - start > max_bytes:
            break
        if start < 0 and not min_one and size > max_bytes:
            break  # not even the first batch fits
        if not fill(pos + size):
            break  # a torn last batch: not served
        if start < 0:
            start = pos
        pos += size
        if pos - start >= max_bytes:
            break
    return bytes(memoryview(buf)[start:pos]) if start >= 0 else b""


def batch_max(batch: bytes, min_offset: int) -> tuple[int, int, int] | None:
    """``(timestamp, offset, leader epoch)`` of the first record at or after ``min_offset``
    with the largest timestamp of those in ``batch`` (a compressed batch: its largest timestamp
    and first offset, as :func:`find_record`), None when it holds no timestamped one there."""
    header = read_batch_header(batch)
    if header.compression:
        return find_record(batch, header.max_timestamp.__eq__, min_offset=min_offset)
    best = None
    for record in decode_batch(batch).records:
        if record.offset >= min_offset and record.timestamp >= 0 and (
                best is None or record.timestamp > best[0]):
            best = (record.timestamp, record.offset, max(header.partition_leader_epoch, -1))
    return best


def read_exact(stream: BinaryIO, n: int) -> bytes | None:
    """``n`` bytes of ``stream``, None when it ends first."""
    parts, left = [], n
    while left > 0:
        chunk = stream.read(left)
        if not chunk:
            return None
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def slice_batches(fd: int, position: int, offset: int, max_bytes: int, upto: int,
                   min_one: bool = True) -> LogSlice | bytes:
    """What :func:`read_batches` would return, as a slice of the file open as ``fd`` (which it
    takes: owned by the slice, or closed), found by reading the batch headers only."""
    try:
        file_size = os.fstat(fd).st_size
        pos = position
        start = first = -1
        while pos + _LAST_DELTA_AT + _LAST_DELTA.size <= file_size:
            head = os.pread(fd, _LAST_DELTA_AT + _LAST_DELTA.size, pos)
            base, length = _HEAD.unpack_from(head)
            size = length + LOG_OVERHEAD
            (last_delta,) = _LAST_DELTA.unpack_from(head, _LAST_DELTA_AT)
            if base + last_delta < offset:
                pos += size
                continue
            if base + last_delta >= upto or pos + size > file_size:
                break  # past what may be read, or a torn last batch
            if start >= 0 and pos + size - start > max_bytes:
                break
            if start < 0 and not min_one and size > max_bytes:
                break  # not even the first batch fits
            if start < 0:
                start, first = pos, base
            pos += size
            if pos - start >= max_bytes:
                break
    except OSError as exc:
        os.close(fd)
        raise RemoteStorageError(f"cannot read a remote segment: {exc.strerror or exc}") from exc
    if start < 0:
        os.close(fd)
        return b""
    return LogSlice(fd, start, pos - start, first)
