"""Crash simulation for tests: what a power failure leaves of a partition's files.

A process crash keeps everything the kernel accepted; a power failure also loses what was
written after the last fsync. :func:`cut_unflushed` cuts a closed log directory back to its
flushed prefix (optionally leaving a torn fragment of the first lost batch), so reopening it
goes through recovery exactly as after the real thing. The leader epoch checkpoint is left as
is: it is fsynced on every change, so it survives and may name epochs the data lost.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from replication.records import LOG_OVERHEAD
from replication.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX

__all__ = ["cut_unflushed"]

_PREFIX = struct.Struct(">qi")  # baseOffset, batchLength


def cut_unflushed(directory: Path, flushed_offset: int, *, torn_bytes: int = 0) -> int:
    """Drop every batch at or after ``flushed_offset`` from the segments in ``directory``
    (closed, or copied from an open log); returns the bytes removed.

    Segments starting at or after the offset disappear (except the first, which is emptied);
    the segment holding it is cut at that batch's position, plus ``torn_bytes`` of it left
    behind as a torn write.
    """
    logs = sorted(p for p in directory.iterdir() if p.name.endswith(LOG_SUFFIX))
    removed = 0
    for i, path in enumerate(logs):
        base = int(path.name[:20])
        size = path.stat().st_size
        if i > 0 and base >= flushed_offset:
            removed += size
            for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                path.with_name(path.name[:20] + suffix).unlink(missing_ok=True)
            continue
        with open(path, "rb") as f:
            data = f.read()
        pos = 0
        while pos + LOG_OVERHEAD <= size:
            batch_base, length = _PREFIX.unpack_from(data, pos)
            if batch_base >= flushed_offset:
                break
            pos += LOG_OVERHEAD + length
        if pos < size:
            torn = max(torn_bytes, 0)
            if pos + LOG_OVERHEAD <= size:  # never a whole batch: a torn one
                torn = min(torn, LOG_OVERHEAD + _PREFIX.unpack_from(data, pos)[1] - 1)
            keep = min(pos + torn, size)
            os.truncate(path, keep)
            removed += size - keep
    return removed
