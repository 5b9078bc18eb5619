"""Transaction markers on a partition leader: appending one (what WriteTxnMarkers asks of the
broker leading a partition of a transaction) and telling who listens once it is committed.

A marker is one control batch (:func:`replication.control.encode_marker_batch`) appended as
leader with acks=all, as Kafka appends it, through the producer state's COORDINATOR origin:
a marker whose producer epoch is older than the partition's for the producer is
INVALID_PRODUCER_EPOCH, one whose coordinator epoch is older than the one the partition saw
for the producer TRANSACTION_COORDINATOR_FENCED, and nothing is appended then. A producer id
or epoch below zero names no producer: INVALID_PRODUCER_ID_MAPPING and INVALID_PRODUCER_EPOCH,
nothing appended (Kafka would append such a marker as it came; no coordinator sends one).

:class:`MarkerListeners` calls each listener once a marker it wrote has completed (acks=all
satisfied) on this leader: the group coordinator materialises the offsets a transaction
committed to ``__consumer_offsets`` then (Kafka's scheduleHandleTxnCompletion).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Future

from coordinator.clock import Clock
from coordinator.codecs import TopicPartition
from interbroker.errors import ErrorCode
from replication.control import encode_marker_batch
from replication.delayed_produce import ProduceFuture, failed
from replication.partition import Partition
from replication.protocol import ACKS_ALL, AppendOrigin, ProduceResult

__all__ = ["MarkerListener", "MarkerListeners", "append_marker"]

log = logging.getLogger(__name__)

MarkerListener = Callable[[TopicPartition, int, int, bool], None]
"""``callback(tp, producer_id, producer_epoch, commit)``."""


def append_marker(partition: Partition, clock: Clock, *, producer_id: int, producer_epoch: int,
                  commit: bool, coordinator_epoch: int, timeout_ms: int) -> ProduceFuture:
    """Append one end-transaction marker to ``partition`` as its leader, acks=all: a future of
    the :class:`ProduceResult`, complete once the HW passes the marker (or on error)."""
    if producer_id < 0:
        return failed(Future(), ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                      f"a marker needs a producer id, not {producer_id}")
    if producer_epoch < 0:
        return failed(Future(), ErrorCode.INVALID_PRODUCER_EPOCH,
                      f"a marker needs a producer epoch, not {producer_epoch}")
    batch = encode_marker_batch(producer_id=producer_id, producer_epoch=producer_epoch,
                                commit=commit, coordinator_epoch=coordinator_epoch,
                                timestamp=clock.now_ms())
    return partition.append_as_leader(bytearray(batch), ACKS_ALL, timeout_ms,
                                      AppendOrigin.COORDINATOR)


class MarkerListeners:
    """Who is told of the markers this broker's leaders committed. A listener added on an
    event loop (or with one) is called on that loop; one added elsewhere is called on the
    thread that completed the marker (the one that moved the HW). Thread-safe enough: adding
    and removing build a new list."""

    def __init__(self) -> None:
        self._listeners: tuple[tuple[MarkerListener, asyncio.AbstractEventLoop | None], ...] = ()

    def add(self, callback: MarkerListener, loop: asyncio.AbstractEventLoop | None = None
            ) -> None:
        if loop is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
        self._listeners = (*self._listeners, (callback, loop))

    def remove(self, callback: MarkerListener) -> None:
        self._listeners = tuple(entry for entry in self._listeners if entry[0] != callback)

    def watch(self, future: ProduceFuture, tp: TopicPartition, producer_id: int,
              producer_epoch: int, commit: bool) -> None:
        """Tell the listeners once ``future`` (a marker's append) completes without error."""
        if not self._listeners:
            return

        def done(f: Future[ProduceResult]) -> None:
            if f.result().error == ErrorCode.NONE:
                self._notify(tp, producer_id, producer_epoch, commit)

        future.add_done_callback(done)

    def _notify(self, tp: TopicPartition, producer_id: int, producer_epoch: int,
                commit: bool) -> None:
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        for callback, loop in self._listeners:
            args = (tp, producer_id, producer_epoch, commit)
            if loop is None:
                _call(callback, *args)
            elif loop is running:
                loop.call_soon(_call, callback, *args)
            else:
                try:
                    loop.call_soon_threadsafe(_call, callback, *args)
                except RuntimeError:  # the loop is closed: the broker is stopping
                    pass


def _call(callback: MarkerListener, tp: TopicPartition, producer_id: int, producer_epoch: int,
          commit: bool) -> None:
    try:
        callback(tp, producer_id, producer_epoch, commit)
    except Exception:
        log.exception("a transaction marker listener failed on %s (producer %d)", tp,
                      producer_id)
