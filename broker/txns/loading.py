"""Rebuilding a partition's transactional ids from ``__transaction_state``: what a new
coordinator does before it answers for them (Kafka's ``TransactionStateManager.
loadTransactionMetadata``).

:func:`read_txn_records` reads a partition's log from its start to its end (off the event
loop: it is file I/O); :func:`build_txns` replays them in log order, a pure function: the last
value of each transactional id wins, a tombstone removes it.

Only what a transaction coordinator wrote is believed, by the rule the group loader applies to
``__consumer_offsets`` (:mod:`broker.groups.loading`): a plain batch (not control, not
transactional, no producer id), a record carrying exactly the coordinator's header, a key and
value that parse. Everything else is skipped, and a load that skips any says so in one warning
(how many, of which kind, the first offset of each).
"""

from __future__ import annotations

import logging

from broker.groups.records import COORDINATOR_HEADER
from broker.txns.metadata import TxnMetadata
from broker.txns.records import TxnLogValue, TxnRecordError, decode_txn_key, decode_txn_value
from replication.errors import CorruptRecordError
from replication.log import Log
from replication.records import NO_PRODUCER_ID, decode_batch, read_batch_header

__all__ = ["TxnLoaded", "build_txns", "read_txn_records"]

log = logging.getLogger(__name__)

READ_BYTES = 1 << 20
TxnLoaded = list[tuple[str, TxnLogValue | None]]
_MARKED = (COORDINATOR_HEADER,)
_FOREIGN = "not written by a transaction coordinator"


def read_txn_records(plog: Log, where: str) -> TxnLoaded:
    """Every (transactional id, value) a coordinator wrote to ``plog``, in log order
    (blocking); what it did not write is skipped with one warning."""
    offset, end = plog.log_start_offset, plog.log_end_offset
    found: TxnLoaded = []
    skipped: dict[str, tuple[int, int]] = {}

    def skip(why: str, at: int, n: int = 1) -> None:
        seen, first = skipped.get(why, (0, at))
        skipped[why] = (seen + n, first)

    while offset < end:
        read = plog.read(offset, READ_BYTES)
        data = read.records
        if not data:
            break
        pos = 0
        while pos < len(data):
            header = read_batch_header(data, pos)
            count = header.last_offset_delta + 1
            if header.is_control:
                pass
            elif header.is_transactional or header.producer_id != NO_PRODUCER_ID:
                skip(_FOREIGN, header.base_offset, count)
            else:
                try:
                    batch = decode_batch(data, pos)
                except CorruptRecordError:
                    skip("in batches that do not decode", header.base_offset, count)
                    batch = None
                for record in batch.records if batch is not None else ():
                    if record.headers != _MARKED or record.key is None:
                        skip(_FOREIGN, record.offset)
                        continue
                    try:
                        found.append((decode_txn_key(record.key),
                                      decode_txn_value(record.value)))
                    except TxnRecordError as exc:
                        skip(f"not in a transaction schema ({exc})", record.offset)
            pos += header.size
        offset = read.next_offset
    if skipped:
        log.warning("%s: loaded %d records, skipped %d: %s", where, len(found),
                    sum(n for n, _ in skipped.values()),
                    "; ".join(f"{n} {why} (first at offset {first})"
                              for why, (n, first) in skipped.items()))
    return found


def build_txns(records: TxnLoaded) -> dict[str, TxnMetadata]:
    """The transactional ids ``records`` (one partition's, in log order) leave standing."""
    last: dict[str, TxnLogValue | None] = {}
    for transactional_id, value in records:
        last[transactional_id] = value
    return {tid: TxnMetadata.from_value(tid, value)
            for tid, value in last.items() if value is not None}
