"""The records of ``__transaction_state``, in Kafka's formats (its ``TransactionLogKey`` and
``TransactionLogValue`` message schemas), so the topic reads the same to Kafka's tools.

One record per transactional id, keyed by it, so that compaction keeps the last state of each;
a tombstone (null value) removes an expired id.

- ``TransactionLogKey`` version 0: an int16 version, then the transactional id (an int16
  length and UTF-8 bytes).
- ``TransactionLogValue`` version 0 (what a ZooKeeper-mode Kafka 3.9 writes, with no
  ``transaction.version`` feature finalized): an int16 version, then producer id (int64),
  producer epoch (int16), transaction timeout (int32 ms), status (int8: the
  :class:`~broker.txns.metadata.TxnState` id), the partitions (an int32 count, -1 for null;
  each a topic as an int16-length string and an int32 count of int32 partition ids), the last
  update time and the start time (int64 ms). Version 1 is the same fields in the flexible
  encoding (compact strings and arrays, tagged fields, which are skipped); it is read, not
  written. An Empty state is written with null partitions, as Kafka writes it.

Decoding trusts no length: a count or a string longer than the bytes left, a version this
broker does not read, an unknown status or bytes left over are :class:`TxnRecordError` with
one line saying what, and nothing is allocated beyond what the record holds.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

__all__ = [
    "KEY_VERSION",
    "VALUE_VERSION",
    "TxnLogValue",
    "TxnRecordError",
    "decode_txn_key",
    "decode_txn_value",
    "encode_txn_key",
    "encode_txn_value",
]

KEY_VERSION = 0
VALUE_VERSION = 0
"""The value version written (Kafka 3.9 without the ``transaction.version`` feature)."""
_FLEXIBLE_VALUE_VERSION = 1
_STATUSES = range(8)

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class TxnRecordError(ValueError):
    """Bytes that are not a ``__transaction_state`` record this broker reads."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnLogValue:
    """One transactional id's stored state (Kafka's ``TransactionLogValue``)."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: int
    """The :class:`~broker.txns.metadata.TxnState` id (0-7)."""
    partitions: tuple[tuple[str, int], ...] = ()
    """(topic, partition), sorted; empty for Empty (written as null)."""
    last_update_ms: int = -1
    start_ms: int = -1


def encode_txn_key(transactional_id: str) -> bytes:
    raw = transactional_id.encode()
    return _I16.pack(KEY_VERSION) + _I16.pack(len(raw)) + raw


def encode_txn_value(value: TxnLogValue) -> bytes:
    """Version 0, as Kafka 3.9's ZooKeeper-mode coordinator writes it."""
    out = [_I16.pack(VALUE_VERSION), _I64.pack(value.producer_id),
           _I16.pack(value.producer_epoch), _I32.pack(value.timeout_ms), _I8.pack(value.status)]
    if value.status == 0:  # Empty: null partitions
        out.append(_I32.pack(-1))
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(value.partitions):
            by_topic.setdefault(topic, []).append(partition)
        out.append(_I32.pack(len(by_topic)))
        for topic, partitions in by_topic.items():
            raw = topic.encode()
            out += [_I16.pack(len(raw)), raw, _I32.pack(len(partitions)),
                    b"".join(_I32.pack(p) for p in partitions)]
    out += [_I64.pack(value.last_update_ms), _I64.pack(value.start_ms)]
    return b"".join(out)


class _Reader:
    """Reads fixed and variable fields off ``data``, every length checked first."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, s: struct.Struct, what: str) -> int:
        if self.pos + s.size > len(self.data):
            raise TxnRecordError(f"{what}: the record ends at byte {len(self.data)}")
        (value,) = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return int(value)

    def i8(self, what: str) -> int:
        return self._take(_I8, what)

    def i16(self, what: str) -> int:
        return self._take(_I16, what)

    def i32(self, what: str) -> int:
        return self._take(_I32, what)

    def i64(self, what: str) -> int:
        return self._take(_I64, what)

    def uvarint(self, what: str) -> int:
        value = shift = 0
        while True:
            if self.pos >= len(self.data) or shift > 28:
                raise TxnRecordError(f"{what}: a bad varint")
            byte = self.data[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7

    def raw(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise TxnRecordError(f"{what}: {n} bytes claimed, {len(self.data) - self.pos} left")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def text(self, n: int, what: str) -> str:
        try:
            return self.raw(n, what).decode()
        except UnicodeDecodeError:
            raise TxnRecordError(f"{what}: not UTF-8") from None

    def count(self, n: int, item_bytes: int, what: str) -> int:
        """A claimed array length, checked against the bytes left (each item at least
        ``item_bytes``)."""
        if n < 0 or n * item_bytes > len(self.data) - self.pos:
            raise TxnRecordError(f"{what}: {n} items claimed, {len(self.data) - self.pos} "
                                 "bytes left")
        return n

    def skip_tags(self, what: str) -> None:
        for _ in range(self.count(self.uvarint(what), 2, what)):
            self.uvarint(what)
            self.raw(self.uvarint(what), what)

    def done(self, what: str) -> None:
        if self.pos != len(self.data):
            raise TxnRecordError(f"{what}: {len(self.data) - self.pos} bytes left over")


def decode_txn_key(data: bytes | None) -> str:
    """The transactional id of a key (version 0)."""
    if data is None:
        raise TxnRecordError("transaction key: null")
    r = _Reader(bytes(data))
    version = r.i16("transaction key version")
    if version != KEY_VERSION:
        raise TxnRecordError(f"transaction key version {version} (this broker reads 0)")
    n = r.i16("transactional id length")
    text = r.text(n, "transactional id")
    r.done("transaction key")
    return text


def decode_txn_value(data: bytes | None) -> TxnLogValue | None:
    """A value (versions 0 and 1); None for a tombstone."""
    if data is None:
        return None
    r = _Reader(bytes(data))
    version = r.i16("transaction value version")
    if version not in (VALUE_VERSION, _FLEXIBLE_VALUE_VERSION):
        raise TxnRecordError(f"transaction value version {version} (this broker reads 0 and 1)")
    flexible = version == _FLEXIBLE_VALUE_VERSION
    producer_id = r.i64("producer id")
    epoch = r.i16("producer epoch")
    timeout = r.i32("transaction timeout")
    status = r.i8("transaction status")
    if status not in _STATUSES:
        raise TxnRecordError(f"transaction status {status} (0-7 are known)")
    n = (r.uvarint("partitions") - 1) if flexible else r.i32("partitions")
    partitions: list[tuple[str, int]] = []
    if n >= 0:
        for _ in range(r.count(n, 3 if flexible else 6, "partitions")):
            length = (r.uvarint("topic") - 1) if flexible else r.i16("topic")
            topic = r.text(length, "topic")
            m = (r.uvarint("partition ids") - 1) if flexible else r.i32("partition ids")
            partitions += [(topic, r.i32("partition id"))
                           for _ in range(r.count(m, 4, "partition ids"))]
            if flexible:
                r.skip_tags("partition tags")
    elif n < -1:
        raise TxnRecordError(f"partitions: count {n}")
    last_update = r.i64("last update time")
    start = r.i64("start time")
    if flexible:
        r.skip_tags("value tags")
    r.done("transaction value")
    return TxnLogValue(producer_id=producer_id, producer_epoch=epoch, timeout_ms=timeout,
                       status=status, partitions=tuple(sorted(set(partitions))) if status else (),
                       last_update_ms=last_update, start_ms=start)
