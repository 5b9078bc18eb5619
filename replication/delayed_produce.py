"""Produces waiting for the high watermark (Kafka's DelayedProduce and its purgatory).

An acks=all produce is answered once the leader's HW passes its last offset: until then it waits
in its partition's :class:`ProducePurgatory`, ordered by the offset it needs, and leaves it when
the HW reaches that offset, when its timeout passes, or when the partition stops leading. The
partition calls these under its lock and completes the futures they return outside it
(:func:`complete`), so a producer's callback cannot deadlock the partition.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import Future

from interbroker.errors import ErrorCode
from replication.errors import (
    CorruptRecordError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    StorageError,
    TransactionCoordinatorFencedError,
    UnknownProducerIdError,
)
from replication.protocol import ProduceResult

__all__ = [
    "Done",
    "PendingProduce",
    "ProduceFuture",
    "ProducePurgatory",
    "append_error",
    "complete",
    "failed",
]

ProduceFuture = Future[ProduceResult]
"""Completed with the produce's answer: at once for acks 0 and 1, when the HW passes it for
acks=all."""
Done = list[tuple[ProduceFuture, ProduceResult]]
"""Futures to complete, with their answers."""


_APPEND_ERRORS: tuple[tuple[type[StorageError], ErrorCode, bool], ...] = (
    (CorruptRecordError, ErrorCode.CORRUPT_MESSAGE, False),
    (RecordBatchTooLargeError, ErrorCode.RECORD_LIST_TOO_LARGE, False),
    (RecordTooLargeError, ErrorCode.MESSAGE_TOO_LARGE, False),
    (OutOfOrderSequenceError, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, True),
    (InvalidProducerEpochError, ErrorCode.INVALID_PRODUCER_EPOCH, True),
    (UnknownProducerIdError, ErrorCode.UNKNOWN_PRODUCER_ID, True),
    (InvalidTxnStateError, ErrorCode.INVALID_TXN_STATE, True),
    (TransactionCoordinatorFencedError, ErrorCode.TRANSACTION_COORDINATOR_FENCED, True),
    (InvalidRecordError, ErrorCode.INVALID_RECORD, True),
)
"""A refused append's error, the first class that matches, and whether the answer carries
the error's message (a producer-state or record refusal does)."""


def append_error(exc: StorageError) -> tuple[ErrorCode, bool]:
    """The code a produce refused with ``exc`` is answered with, and whether the answer
    carries its message; KAFKA_STORAGE_ERROR for a failure of the storage itself."""
    for cls, code, with_message in _APPEND_ERRORS:
        if isinstance(exc, cls):
            return code, with_message
    return ErrorCode.KAFKA_STORAGE_ERROR, False


class PendingProduce:
    """An acks=all produce waiting for the HW to reach ``required``, answered ``result`` then
    (or failed at ``deadline_ms``)."""

    __slots__ = ("deadline_ms", "future", "required", "result")

    def __init__(
        self, required: int, deadline_ms: int, future: ProduceFuture, result: ProduceResult
    ) -> None:
        self.required = required
        self.deadline_ms = deadline_ms
        self.future = future
        self.result = result  # the answer once the HW reaches ``required``


def complete(done: Done) -> None:
    """Complete the futures of ``done`` not completed yet (outside the partition's lock)."""
    for future, result in done:
        if not future.done():
            future.set_result(result)


def failed(future: ProduceFuture, error: ErrorCode, message: str | None = None
           ) -> ProduceFuture:
    """``future``, answered with ``error``."""
    future.set_result(ProduceResult(error=error, error_message=message))
    return future


class ProducePurgatory:
    """The acks=all produces of one partition waiting for its HW. Not thread-safe: the
    partition's lock guards it."""

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending: deque[PendingProduce] = deque()

    def __bool__(self) -> bool:
        return bool(self._pending)

    def park(self, waiting: PendingProduce) -> None:
        """Queue an acks=all produce in the order of the offsets it waits for (a duplicate may
        wait for less than the produces queued before it)."""
        pending = self._pending
        i = len(pending)
        while i and pending[i - 1].required > waiting.required:
            i -= 1
        pending.insert(i, waiting)

    def expire(self, now_ms: int) -> Done:
        """The produces whose timeout passed, failed (their records stay in the log)."""
        if not self._pending or all(p.deadline_ms > now_ms for p in self._pending):
            return []
        done: Done = [
            (p.future, ProduceResult(error=ErrorCode.REQUEST_TIMED_OUT))
            for p in self._pending
            if p.deadline_ms <= now_ms
        ]
        self._pending = deque(p for p in self._pending if p.deadline_ms > now_ms)
        return done

    def fail_all(self, error: ErrorCode) -> Done:
        """Every waiting produce, failed with ``error``."""
        done: Done = [(p.future, ProduceResult(error=error)) for p in self._pending]
        self._pending.clear()
        return done

    def complete_upto(self, hw: int, enough_in_sync: bool) -> Done:
        """The produces the HW ``hw`` completes: answered as appended, or, without
        ``enough_in_sync`` replicas, NOT_ENOUGH_REPLICAS_AFTER_APPEND."""
        pending = self._pending
        done: Done = []
        while pending and pending[0].required <= hw:
            p = pending.popleft()
            if enough_in_sync:
                result = p.result
            else:
                result = ProduceResult(error=ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
            done.append((p.future, result))
        return done
