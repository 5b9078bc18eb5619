"""Sparse offset and time indexes, in Kafka's on-disk formats.

``.index`` entries are ``relativeOffset uint32 | position uint32`` and ``.timeindex`` entries are
``timestamp int64 | relativeOffset uint32``, big-endian, relative to the segment's base offset.
As in Kafka, an offset-index entry maps the *last* offset of a batch to the position where that
batch starts, and one is written only every ``index.interval.bytes`` of log, so a lookup is a
binary search followed by a short forward scan of batch headers.

The entries live in memory (two compact arrays) and reach the file on :meth:`flush`: Kafka
memory-maps the file to the same end. An index never needs to be durable on its own because
recovery rebuilds it from the log, which is the single source of truth.
"""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path

from replication.checkpoints import PRIVATE_FILE_MODE
from replication.errors import CorruptIndexError

__all__ = ["OffsetIndex", "TimeIndex"]


class _SparseIndex:
    """Two parallel arrays (``keys`` searched, ``values`` returned) backed by a file."""

    _entry: struct.Struct
    _key_type: str
    _value_type: str

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._keys = array(self._key_type)
        self._values = array(self._value_type)
        self._synced = 0  # entries known to be on disk, unchanged since
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, PRIVATE_FILE_MODE)
        self._file_entries = os.fstat(self._fd).st_size // self._entry.size

    def __len__(self) -> int:
        return len(self._keys)

    def _load(self) -> None:
        size = os.fstat(self._fd).st_size
        if size % self._entry.size:
            raise CorruptIndexError(
                f"{self.path.name}: size {size} is not a multiple of {self._entry.size}"
            )
        data = os.pread(self._fd, size, 0)
        for key, value in self._entry.iter_unpack(data):
            self._keys.append(key)
            self._values.append(value)
        self._synced = self._file_entries = len(self._keys)

    def _append(self, key: int, value: int) -> None:
        self._keys.append(key)
        self._values.append(value)

    def _cut(self, n: int) -> None:
        """Keep the first ``n`` entries."""
        del self._keys[n:]
        del self._values[n:]
        self._synced = min(self._synced, n)

    def reset(self) -> None:
        """Drop every entry (the file follows on the next flush)."""
        self._cut(0)

    def flush(self, fsync: bool = True) -> None:
        """Write entries added since the last flush, trim a truncated tail, and fsync."""
        n = len(self._keys)
        pack = self._entry.pack
        if self._synced < n:
            tail = b"".join(pack(self._keys[i], self._values[i]) for i in range(self._synced, n))
            os.pwrite(self._fd, tail, self._synced * self._entry.size)
        if self._file_entries > n:
            os.ftruncate(self._fd, n * self._entry.size)
        self._synced = self._file_entries = n
        if fsync:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            self.flush(fsync=True)
            os.close(self._fd)
            self._fd = -1

    def close_and_delete(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self.path.unlink(missing_ok=True)


class OffsetIndex(_SparseIndex):
    """Maps a batch's last offset to the file position where the batch starts."""

    _entry = struct.Struct(">II")
    _key_type = "I"
    _value_type = "I"

    @classmethod
    def open(cls, path: Path, base_offset: int, log_size: int) -> OffsetIndex:
        """Load an existing index, checking it is consistent with a log of ``log_size`` bytes.

        Raises :class:`CorruptIndexError` if the file is missing, torn, unordered or points
        past the log; the caller then rebuilds it from the log.
        """
        if not path.exists():
            raise CorruptIndexError(f"{path.name} is missing")
        index = cls(path, base_offset)
        try:
            index._load()
            keys, values = index._keys, index._values
            for i in range(1, len(keys)):
                if keys[i] <= keys[i - 1] or values[i] <= values[i - 1]:
                    raise CorruptIndexError(f"{path.name}: entry {i} is out of order")
            if values and values[-1] >= log_size:
                raise CorruptIndexError(
                    f"{path.name}: last entry points at {values[-1]}, log has {log_size} bytes"
                )
        except BaseException:
            os.close(index._fd)
            raise
        return index

    def append(self, offset: int, position: int) -> None:
        self._append(offset - self.base_offset, position)

    def lookup(self, offset: int) -> int:
        """Position of the last indexed batch whose last offset is <= ``offset`` (else 0)."""
        i = bisect_right(self._keys, offset - self.base_offset)
        return self._values[i - 1] if i else 0

    def offset_at_or_after(self, position: int) -> int | None:
        """The (last) offset of the first indexed batch starting at or after ``position``;
        None when no entry is there."""
        i = bisect_left(self._values, position)
        return self.base_offset + self._keys[i] if i < len(self._values) else None

    def last_entry(self) -> tuple[int, int] | None:
        """(absolute offset, position) of the last entry, if any."""
        if not self._keys:
            return None
        return self.base_offset + self._keys[-1], self._values[-1]

    def truncate_to(self, offset: int) -> None:
        """Remove entries for offsets >= ``offset``."""
        self._cut(bisect_left(self._keys, max(offset - self.base_offset, 0)))


class TimeIndex(_SparseIndex):
    """Maps a timestamp to the offset of the batch holding the largest timestamp so far."""

    _entry = struct.Struct(">qI")
    _key_type = "q"
    _value_type = "I"

    @classmethod
    def open(cls, path: Path, base_offset: int, next_offset: int) -> TimeIndex:
        """Load an existing time index; offsets must lie in ``[base_offset, next_offset)``."""
        if not path.exists():
            raise CorruptIndexError(f"{path.name} is missing")
        index = cls(path, base_offset)
        try:
            index._load()
            keys, values = index._keys, index._values
            for i in range(1, len(keys)):
                if keys[i] <= keys[i - 1] or values[i] < values[i - 1]:
                    raise CorruptIndexError(f"{path.name}: entry {i} is out of order")
            if values and base_offset + values[-1] >= next_offset:
                raise CorruptIndexError(
                    f"{path.name}: last entry names offset {base_offset + values[-1]} past the "
                    f"segment end {next_offset}"
                )
        except BaseException:
            os.close(index._fd)
            raise
        return index

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add an entry if ``timestamp`` is larger than the last one (Kafka's rule)."""
        if not self._keys or timestamp > self._keys[-1]:
            self._append(timestamp, offset - self.base_offset)

    def lookup(self, timestamp: int) -> int:
        """Offset of the last entry with timestamp <= ``timestamp`` (else the base offset)."""
        i = bisect_right(self._keys, timestamp)
        return self.base_offset + (self._values[i - 1] if i else 0)

    def last_entry(self) -> tuple[int, int] | None:
        """(timestamp, absolute offset) of the last entry, if any."""
        if not self._keys:
            return None
        return self._keys[-1], self.base_offset + self._values[-1]

    def truncate_to(self, offset: int) -> None:
        """Remove entries for offsets >= ``offset``."""
        self._cut(bisect_left(self._values, max(offset - self.base_offset, 0)))
