"""A small producer and consumer for an embedded cluster.

The :class:`Producer` finds each partition's leader in the brokers' metadata caches (what the
controller's UpdateMetadata told them), appends there, and keeps several produces in flight.
A produce that fails before it was appended (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, no
leader yet) is simply sent again, to the leader the metadata names by then. One that fails
*after* it was appended (the leader crashed or lost leadership, or it timed out waiting for
the ISR) may still be committed by the next leader; re-sending it blindly would duplicate it.
So the producer stamps every batch with its producer id and a sequence number (the v2 header
fields Kafka's idempotent producer uses) and, before re-sending such a batch, reads the current
leader's log once everything it holds is committed: a batch found there is delivered at the
offsets it has; a batch not found can never appear later (a later leader comes from this
leader's ISR, whose logs match its committed prefix), so it is re-sent. Every acknowledged
batch is therefore in the log exactly once.

Sequence numbers are per partition and count records, as Kafka's idempotent producer numbers
them, so the leaders' producer state (:mod:`replication.producer_state`) checks them too: a
batch re-sent after all is answered with its original offsets, and one that overtook an
earlier batch still to be re-sent (OUT_OF_ORDER_SEQUENCE_NUMBER, refused before appending) is
sent again after it.

A partition can lose its record of the producer (the state expired after
``producer.id.expiration.ms`` idle, or the log was emptied): its next batch, not at sequence 0,
is answered UNKNOWN_PRODUCER_ID. And a batch that fails for good leaves a gap in the sequence
its partition's later batches cannot pass. In both cases the producer does what Kafka's
idempotent producer does since KIP-360: once none of the partition's batches is in flight or
unsettled, it bumps its epoch for the partition and numbers the batches still to be delivered
from sequence 0 in the new epoch, in their order. A replica that still knows the old epoch
takes a new epoch from sequence 0, one that knows nothing takes sequence 0, so the batches go
through, and none of them can be mistaken for a retry of an old batch.

The :class:`Consumer` reads whole batches from the leader, below its high watermark only.
"""

from __future__ import annotations

import itertools
import queue
import random
import struct
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from typing import Protocol

import crc32c

from coordinator.codecs import TopicPartition
from interbroker.errors import ErrorCode
from interbroker.requests import UpdateMetadataPartition
from replication.partition import Role
from replication.producer_state import increment_sequence
from replication.protocol import ACKS_ALL, ProduceResult
from replication.records import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    Record,
    decode_batch,
    encode_batch,
    read_batch_header,
    validate_batches,
)
from replication.replica_manager import ReplicaManager

__all__ = [
    "AckCheck",
    "ClientError",
    "ClusterView",
    "ConsumedRecord",
    "Consumer",
    "Delivery",
    "ProduceError",
    "Producer",
    "check_acknowledged",
    "restamp_producer",
]

_PRODUCER_FIELDS = struct.Struct(">qhi")  # producerId, producerEpoch, baseSequence
_PRODUCER_ID_OFFSET = 43
_CRC = struct.Struct(">I")
_FATAL = frozenset({
    ErrorCode.CORRUPT_MESSAGE, ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE,
    ErrorCode.INVALID_REQUIRED_ACKS,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.INVALID_RECORD,
})
_MAX_EPOCH = (1 << 15) - 1
_RECORDS_COUNT = struct.Struct(">i")
_RECORDS_COUNT_OFFSET = 57
_producer_ids = itertools.count(random.randrange(1, 1 << 40) << 16)


class ClusterView(Protocol):
    """What clients need from a cluster: cached metadata, and the brokers to talk to."""

    def metadata_for(self, tp: TopicPartition) -> UpdateMetadataPartition | None: ...

    def replica_manager(self, broker_id: int) -> ReplicaManager | None: ...


def restamp_producer(batch: bytes | bytearray, producer_id: int, producer_epoch: int,
                     base_sequence: int) -> bytearray:
    """A copy of one encoded v2 batch with new producer fields and its CRC recomputed."""
    out = bytearray(batch)
    _PRODUCER_FIELDS.pack_into(out, _PRODUCER_ID_OFFSET, producer_id, producer_epoch,
                               base_sequence)
    _CRC.pack_into(out, CRC_OFFSET, crc32c.crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Delivery:
    """Where an acknowledged batch is: ``base_offset`` .. ``last_offset`` of ``tp``.

    ``recovered`` says it was found in the log after an ambiguous failure rather than
    acknowledged by the produce that wrote it."""

    tp: TopicPartition
    base_offset: int
    last_offset: int
    attempts: int
    recovered: bool = False


class ClientError(Exception):
    """A client request that failed for good, with the broker's code."""

    def __init__(self, tp: TopicPartition, error: ErrorCode, detail: str = "") -> None:
        super().__init__(f"{tp.topic}-{tp.partition}: {error.name}{': ' + detail if detail else ''}")
        self.tp = tp
        self.error = error


class ProduceError(ClientError):
    """A batch that could not be delivered (a fatal code, or the delivery timeout)."""


class _Item:
    __slots__ = ("tp", "data", "pid", "epoch", "sequence", "future", "attempts", "ambiguous", "hint",
                 "deadline", "error", "in_flight")

    def __init__(self, tp: TopicPartition, data: bytes | bytearray, pid: int, epoch: int,
                 sequence: int, deadline: float) -> None:
        self.tp = tp
        self.data = data
        self.pid = pid
        self.epoch = epoch
        self.sequence = sequence
        self.in_flight = False
        self.future: Future[Delivery] = Future()
        self.attempts = 0
        self.ambiguous = False
        self.hint = 0  # an offset at or below where any earlier attempt landed
        self.deadline = deadline
        self.error = ErrorCode.NONE


class Producer:
    """Sends batches to partition leaders with ``acks``; up to ``max_in_flight`` at once.

    :meth:`send` returns a future of :class:`Delivery` (or :class:`ProduceError`);
    :meth:`produce` waits for it. Retries happen on a background thread until
    ``delivery_timeout_ms`` passes."""

    def __init__(
        self,
        cluster: ClusterView,
        *,
        acks: int = ACKS_ALL,
        max_in_flight: int = 16,
        request_timeout_ms: int = 10_000,
        delivery_timeout_ms: int = 60_000,
        retry_backoff_ms: int = 20,
    ) -> None:
        self.cluster = cluster
        self.acks = acks
        self.request_timeout_ms = request_timeout_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.producer_id = next(_producer_ids)
        self.retries = 0
        """Attempts after the first, over all batches (for reports)."""
        self.recovered = 0
        """Batches found in the log after an ambiguous failure instead of being re-sent."""
        self.epoch_bumps = 0
        """Times a partition's batches were numbered afresh in a new epoch."""
        self._sequences: dict[TopicPartition, int] = {}
        self._epochs: dict[TopicPartition, tuple[int, int]] = {}
        """A partition's (producer id, epoch) once its first epoch was used up (a new id then
        takes over, at epoch 0, as Kafka's producer takes one when its epoch is exhausted)."""
        self._open: dict[TopicPartition, list[_Item]] = {}
        """Each partition's batches not yet delivered or failed, in sequence order."""
        self._renumber: set[TopicPartition] = set()
        """Partitions whose open batches wait for a new epoch (see the module's docstring)."""
        self._sequence_lock = threading.Lock()
        self._leaders: dict[TopicPartition, ReplicaManager] = {}
        self._slots = threading.BoundedSemaphore(max_in_flight)
        self._outstanding = 0
        self._cond = threading.Condition()
        self._retries: queue.Queue[_Item | None] = queue.Queue()
        self._closed = False
        self._thread = threading.Thread(target=self._retry_loop, daemon=True,
                                        name=f"producer-{self.producer_id:x}")
        self._thread.start()

    # -- sending -------------------------------------------------------------------------------

    def send(self, tp: TopicPartition, values: Sequence[bytes], *, key: bytes | None = None,
             timestamp_ms: int | None = None) -> Future[Delivery]:
        """Send ``values`` as one batch to ``tp``; blocks while ``max_in_flight`` are out."""
        ts = time.time_ns() // 1_000_000 if timestamp_ms is None else timestamp_ms
        data = encode_batch([Record(key=key, value=v, timestamp=ts) for v in values],
                            producer_id=self.producer_id, producer_epoch=0, base_sequence=0)
        return self._submit(tp, data, len(values))

    def send_encoded(self, tp: TopicPartition, batch: bytes | bytearray) -> Future[Delivery]:
        """Send an already encoded v2 batch (re-stamped with this producer's id and sequence)."""
        count = _RECORDS_COUNT.unpack_from(batch, _RECORDS_COUNT_OFFSET)[0]
        return self._submit(tp, batch, count)

    def produce(self, tp: TopicPartition, values: Sequence[bytes], **kwargs: object
                ) -> Delivery:
        """Send and wait: the delivery, or :class:`ProduceError`."""
        return self.send(tp, values, **kwargs).result()  # type: ignore[arg-type]

    def _submit(self, tp: TopicPartition, batch: bytes | bytearray, records: int
                ) -> Future[Delivery]:
        """Number ``batch`` (``records`` records) as the partition's next and send it."""
        if self._closed:
            raise RuntimeError("producer is closed")
        self._slots.acquire()
        with self._cond:
            self._outstanding += 1
        deadline = time.monotonic() + self.delivery_timeout_ms / 1000
        with self._sequence_lock:
            pid, epoch = self._epochs.get(tp, (self.producer_id, 0))
            sequence = self._sequences.get(tp, 0)
            self._sequences[tp] = increment_sequence(sequence, max(records, 1))
            item = _Item(tp, restamp_producer(batch, pid, epoch, sequence), pid, epoch,
                         sequence, deadline)
            item.in_flight = True  # until its first attempt is answered
            self._open.setdefault(tp, []).append(item)
        self._attempt(item)
        return item.future
    def _leader(self, tp: TopicPartition) -> ReplicaManager | None:
        """The leader's broker from cached metadata, looked up again after any failure."""
        rm = self._leaders.get(tp)
        if rm is None or not rm.running:
            meta = self.cluster.metadata_for(tp)
            rm = self.cluster.replica_manager(meta.leader) if meta and meta.leader >= 0 else None
            if rm is not None:
                self._leaders[tp] = rm
        return rm

    def _attempt(self, item: _Item) -> None:
        rm = self._leader(item.tp)
        partition = rm.partition(item.tp) if rm is not None else None
        if rm is None or partition is None:
            self._leaders.pop(item.tp, None)
            item.error = ErrorCode.NOT_LEADER_OR_FOLLOWER
            item.in_flight = False
            self._retries.put(item)
            return
        if not item.ambiguous:
            item.hint = partition.log.log_end_offset
        item.in_flight = True
        item.attempts += 1
        if item.attempts > 1:
            self.retries += 1
        future = rm.produce(item.tp, item.data, self.acks, self.request_timeout_ms)
        before_append = future.done()
        future.add_done_callback(partial(self._on_result, item, before_append))

    def _on_result(self, item: _Item, before_append: bool, future: Future[ProduceResult]
                   ) -> None:
        """Any thread (a fetcher's, the controller's): finish or queue, nothing more."""
        result = future.result()
        if result.error == ErrorCode.NONE:
            self._finish(item, Delivery(tp=item.tp, base_offset=result.base_offset,
                                        last_offset=result.last_offset,
                                        attempts=item.attempts))
        elif result.error in _FATAL:
            self._fail(item, result.error)
        else:
            self._leaders.pop(item.tp, None)
            # Errors answered at once were decided before appending; later ones were not.
            if not before_append or result.error == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND:
                item.ambiguous = True
            item.error = result.error
            if result.error == ErrorCode.UNKNOWN_PRODUCER_ID:
                with self._sequence_lock:
                    self._want_new_epoch(item)
            item.in_flight = False
            self._retries.put(item)

    def _want_new_epoch(self, item: _Item) -> None:
        """Under the sequence lock: the partition forgot this producer at ``item``. Only the
        earliest open batch asks for a new epoch; a later one was merely overtaken."""
        open_items = self._open.get(item.tp, ())
        if open_items and open_items[0] is item and (item.pid, item.epoch) == self._epochs.get(
                item.tp, (self.producer_id, 0)):
            self._renumber.add(item.tp)

    def _finish(self, item: _Item, delivery: Delivery) -> None:
        self._close_item(item, failed=False)
        if not item.future.done():
            item.future.set_result(delivery)
        self._release()

    def _fail(self, item: _Item, error: ErrorCode, detail: str = "") -> None:
        self._close_item(item, failed=True)
        if not item.future.done():
            item.future.set_exception(ProduceError(item.tp, error, detail))
        self._release()

    def _close_item(self, item: _Item, *, failed: bool) -> None:
        """Take ``item`` off its partition's open batches; a failed one leaves a gap in the
        sequence, so the batches after it need a new epoch."""
        with self._sequence_lock:
            item.in_flight = False
            open_items = self._open.get(item.tp)
            if open_items is None or item not in open_items:
                return
            open_items.remove(item)
            if failed and open_items:
                self._renumber.add(item.tp)
            if not open_items:
                del self._open[item.tp]
                if failed:  # nothing to renumber: start the next batch in a new epoch
                    self._new_epoch(item.tp)

    def _new_epoch(self, tp: TopicPartition) -> None:
        """Under the sequence lock: bump ``tp``'s epoch and number its open batches from 0."""
        pid, epoch = self._epochs.get(tp, (self.producer_id, 0))
        pid, epoch = (next(_producer_ids), 0) if epoch >= _MAX_EPOCH else (pid, epoch + 1)
        self._epochs[tp] = (pid, epoch)
        sequence = 0
        for item in self._open.get(tp, ()):
            records = _RECORDS_COUNT.unpack_from(item.data, _RECORDS_COUNT_OFFSET)[0]
            item.data = restamp_producer(item.data, pid, epoch, sequence)
            item.pid, item.epoch, item.sequence = pid, epoch, sequence
            sequence = increment_sequence(sequence, max(records, 1))
        self._sequences[tp] = sequence
        self._renumber.discard(tp)
        self.epoch_bumps += 1

    def _renumbered(self, tp: TopicPartition) -> bool:
        """Give ``tp``'s open batches a new epoch if they wait for one and none of them is in
        flight or unsettled; False while they must still wait."""
        with self._sequence_lock:
            if tp not in self._renumber:
                return True
            if any(i.in_flight or i.ambiguous for i in self._open.get(tp, ())):
                return False
            self._new_epoch(tp)
            return True

    def _release(self) -> None:
        self._slots.release()
        with self._cond:
            self._outstanding -= 1
            self._cond.notify_all()

    # -- retries -------------------------------------------------------------------------------

    def _retry_loop(self) -> None:
        while True:
            first = self._retries.get()
            if first is None:
                return
            time.sleep(self.retry_backoff_ms / 1000)
            items = [first]
            while True:
                try:
                    more = self._retries.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._retries.put(None)
                    break
                items.append(more)
            self._retry(items)

    def _retry(self, items: list[_Item]) -> None:
        now = time.monotonic()
        live = []
        for item in items:
            if now >= item.deadline:
                self._fail(item, item.error, "delivery timeout")
            else:
                live.append(item)
        plain = [item for item in live if not item.ambiguous]
        by_tp: dict[TopicPartition, list[_Item]] = {}
        for item in live:
            if item.ambiguous:
                by_tp.setdefault(item.tp, []).append(item)
        for tp, ambiguous in by_tp.items():
            found = self._find_in_log(tp, ambiguous)
            if found is None:  # no settled leader to ask yet: later
                for item in ambiguous:
                    self._retries.put(item)
                continue
            for item in ambiguous:
                where = found.get((item.pid, item.epoch, item.sequence))
                if where is not None:
                    self.recovered += 1
                    self._finish(item, Delivery(tp=tp, base_offset=where[0],
                                                last_offset=where[1], attempts=item.attempts,
                                                recovered=True))
                else:
                    item.ambiguous = False
                    self._attempt(item)
        waiting = set()
        for item in sorted(plain, key=lambda i: (i.tp, i.sequence)):
            if item.tp in waiting or not self._renumbered(item.tp):
                waiting.add(item.tp)
                self._retries.put(item)  # until its partition's batches have settled
            else:
                self._attempt(item)

    def _find_in_log(self, tp: TopicPartition, items: Sequence[_Item]
                     ) -> dict[tuple[int, int, int], tuple[int, int]] | None:
        """Where this producer's batches ``items`` are in the current leader's log, once all it
        holds is committed; None if there is no leader to settle with right now."""
        meta = self.cluster.metadata_for(tp)
        rm = self.cluster.replica_manager(meta.leader) if meta and meta.leader >= 0 else None
        status = rm.status(tp) if rm is not None else None
        if rm is None or status is None or status.role is not Role.LEADER:
            return None
        end, epoch = status.log_end_offset, status.leader_epoch
        deadline = time.monotonic() + self.request_timeout_ms / 1000
        while True:
            status = rm.status(tp)
            if status is None or status.role is not Role.LEADER or status.leader_epoch != epoch:
                return None
            if status.high_watermark >= end:
                break
            if time.monotonic() > deadline:
                return None
            time.sleep(0.005)
        wanted = {(item.pid, item.epoch, item.sequence) for item in items}
        found: dict[tuple[int, int, int], tuple[int, int]] = {}
        offset = max(min(item.hint for item in items), status.log_start_offset)
        while offset < end and len(found) < len(wanted):
            read = rm.read(tp, offset, 1 << 20)
            if read.error or not read.records:
                return None if read.error else found
            for pos, *_ in validate_batches(read.records):
                header = read_batch_header(read.records, pos)
                key = (header.producer_id, header.producer_epoch, header.base_sequence)
                if key in wanted:
                    found[key] = (header.base_offset, header.last_offset)
            offset = read.next_offset
        return found

    # -- lifecycle -----------------------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every batch sent so far is delivered or failed."""
        with self._cond:
            return self._cond.wait_for(lambda: self._outstanding == 0, timeout)

    def close(self, timeout: float | None = 30.0) -> None:
        if self._closed:
            return
        self.flush(timeout)
        self._closed = True
        self._retries.put(None)
        self._thread.join(timeout)

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumedRecord:
    offset: int
    key: bytes | None
    value: bytes | None
    leader_epoch: int


class Consumer:
    """Reads committed records (below the leader's high watermark) from partition leaders."""

    def __init__(self, cluster: ClusterView, *, max_bytes: int = 1 << 20,
                 timeout: float = 15.0) -> None:
        self.cluster = cluster
        self.max_bytes = max_bytes
        self.timeout = timeout

    def fetch(self, tp: TopicPartition, offset: int) -> tuple[list[ConsumedRecord], int, int]:
        """One read at ``offset``: (records at or after it, next offset, leader's HW). Retries
        on a missing or moving leader until ``timeout``."""
        deadline = time.monotonic() + self.timeout
        while True:
            meta = self.cluster.metadata_for(tp)
            rm = self.cluster.replica_manager(meta.leader) if meta and meta.leader >= 0 else None
            if rm is not None:
                read = rm.read(tp, offset, self.max_bytes)
                if read.error == ErrorCode.NONE:
                    return (_decode(read.records, offset),
                            read.next_offset if read.records else offset, read.high_watermark)
                if read.error == ErrorCode.OFFSET_OUT_OF_RANGE:
                    raise ClientError(tp, read.error, f"offset {offset}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"no leader answered for {tp.topic}-{tp.partition}")
            time.sleep(0.02)

    def read_all(self, tp: TopicPartition, offset: int = 0) -> list[ConsumedRecord]:
        """Every committed record from ``offset`` up to the leader's HW."""
        out: list[ConsumedRecord] = []
        while True:
            records, nxt, hw = self.fetch(tp, offset)
            out.extend(records)
            if nxt >= hw or nxt == offset:
                return out
            offset = nxt


def _decode(data: bytes, from_offset: int) -> list[ConsumedRecord]:
    out = []
    for pos, *_ in validate_batches(data) if data else ():
        batch = decode_batch(data, pos)
        for r in batch.records:
            if r.offset >= from_offset:
                out.append(ConsumedRecord(offset=r.offset, key=r.key, value=r.value,
                                          leader_epoch=batch.partition_leader_epoch))
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class AckCheck:
    """Acknowledged records against what a consumer read: ``missing`` are acknowledged offsets
    whose record is not there (or is another), ``duplicated`` acknowledged values found more
    than once."""

    acknowledged: int
    read: int
    missing: tuple[int, ...]
    duplicated: tuple[bytes, ...]

    @property
    def ok(self) -> bool:
        return not self.missing and not self.duplicated


def check_acknowledged(records: Iterable[ConsumedRecord], acknowledged: Mapping[int, bytes]
                       ) -> AckCheck:
    """Is every acknowledged value (offset -> value) readable exactly once, at its offset?"""
    by_offset: dict[int, bytes | None] = {}
    counts: Counter[bytes | None] = Counter()
    for r in records:
        by_offset[r.offset] = r.value
        counts[r.value] += 1
    missing = tuple(sorted(o for o, v in acknowledged.items() if by_offset.get(o) != v))
    duplicated = tuple(sorted({v for v in acknowledged.values() if counts[v] > 1}))
    return AckCheck(acknowledged=len(acknowledged), read=len(by_offset), missing=missing,
                    duplicated=duplicated)
