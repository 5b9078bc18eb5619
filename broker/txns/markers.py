"""The marker channel: WriteTxnMarkers from the transaction coordinator to the leaders of a
transaction's partitions, then the transaction's completion (Kafka's
``TransactionMarkerChannelManager`` and ``TransactionMarkerRequestCompletionHandler``).

When a transaction is prepared to commit or abort (EndTxn, a timeout, a fenced producer, or a
load that finds it prepared), :meth:`MarkerChannel.add` takes its partitions and queues one
marker per partition's leader, read from the metadata cache; a partition whose leader is not
known waits and is routed again after :data:`RETRY_S`, and one whose topic is gone is done
(there is nothing left to mark). Each broker has one in-order queue, drained by one task that
sends everything waiting as one WriteTxnMarkers request over the inter-broker listener (with
its security), on a connection of its own (:class:`~kafkaclient.connection.KafkaConnection`,
used from one thread per broker).

Each answer is judged as Kafka does: a partition marked is removed from the transaction;
NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
REQUEST_TIMED_OUT and KAFKA_STORAGE_ERROR are routed again (the leader may have moved);
INVALID_PRODUCER_EPOCH and TRANSACTION_COORDINATOR_FENCED stop the transaction's markers (a
newer producer or coordinator owns it); UNSUPPORTED_FOR_MESSAGE_FORMAT and UNSUPPORTED_VERSION
drop the partition. A broker that cannot be reached has its whole request routed again. Before
any of that the transaction is looked up: if this broker no longer coordinates it, or another
coordinator epoch does, its markers are dropped. When no partition is left, CompleteCommit or
CompleteAbort is written (retried while the log answers COORDINATOR_NOT_AVAILABLE).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from broker.metadata_cache import MetadataCache
from broker.txns.metadata import Transit, TxnMetadata, TxnState
from broker.txns.peer import PeerLink
from broker.txns.state_manager import TxnStateManager
from coordinator.codecs import TopicPartition
from kafkaclient.connection import BrokerUnreachable, KafkaConnection
from kafkaclient.messages import build, request_schema
from kafkaclient.security.connector import Connector

__all__ = ["RETRY_S", "WRITE_TXN_MARKERS", "MarkerChannel"]

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS = 27
RETRY_S = 0.1
"""The wait before a marker whose leader is unknown, or which failed retriably, is routed
again (Kafka drains its queue for unknown brokers at every poll)."""

_RETRY = frozenset({ErrorCode.unknown_topic_or_partition, ErrorCode.not_leader_or_follower,
                    ErrorCode.not_enough_replicas, ErrorCode.not_enough_replicas_after_append,
                    ErrorCode.request_timed_out, ErrorCode.kafka_storage_error})
_STOP = frozenset({ErrorCode.invalid_producer_epoch, ErrorCode.transaction_coordinator_fenced})
_SKIP = frozenset({ErrorCode.unsupported_for_message_format, ErrorCode.unsupported_version})

TP = tuple[str, int]


@dataclass(slots=True, eq=False)
class _Pending:
    """A transaction whose markers are under way."""

    transactional_id: str
    coordinator_epoch: int
    commit: bool
    txn: TxnMetadata
    complete: Transit
    """The CompleteCommit or CompleteAbort to write once every partition is marked."""
    dropped: bool = False


@dataclass(frozen=True, slots=True)
class _Item:
    pending: _Pending
    partitions: frozenset[TP]


class _BrokerQueue:
    """One broker's in-order queue: a task sends what waits, one request at a time, from a
    thread of its own."""

    def __init__(self, channel: MarkerChannel, broker_id: int) -> None:
        self.channel = channel
        self.broker_id = broker_id
        self.items: list[_Item] = []
        self.wake = asyncio.Event()
        self.link = PeerLink(channel.broker_id, broker_id, "txn-markers",
                             timeout_ms=channel.request_timeout_ms, connector=channel.connector)
        self.task = asyncio.ensure_future(self._run())

    def put(self, item: _Item) -> None:
        self.items.append(item)
        self.wake.set()

    def close(self) -> None:
        self.task.cancel()
        self.link.close()

    async def _run(self) -> None:
        while True:
            await self.wake.wait()
            self.wake.clear()
            items = [i for i in self.items if not i.pending.dropped]
            self.items = []
            if not items:
                continue
            address = self.channel.address(self.broker_id)
            answer: Any = None
            if address is not None:
                try:
                    answer = await self.link.call(address, _send, items)
                except (BrokerUnreachable, OSError) as exc:
                    log.info("transaction markers to broker %d failed: %s; routing again",
                             self.broker_id, exc)
                except Exception:  # noqa: BLE001 - an answer kio cannot read: route again
                    log.exception("transaction markers to broker %d failed", self.broker_id)
            if answer is None:
                await asyncio.sleep(RETRY_S)
                for item in items:
                    self.channel._retry(item.pending, item.partitions)
            else:
                self.channel._answered(items, answer)


def _send(conn: KafkaConnection, items: list[_Item]) -> dict[int, dict[TP, ErrorCode]]:
    """One WriteTxnMarkers request for ``items`` (blocking): errors by producer id and
    partition."""
    version = conn.version(WRITE_TXN_MARKERS, 0, 1)
    if version is None:
        raise BrokerUnreachable(f"{conn!r} serves no WriteTxnMarkers version 0-1")
    cls = request_schema(WRITE_TXN_MARKERS, version)
    module: Any = sys.modules[cls.__module__]
    markers = []
    for item in items:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(item.partitions):
            by_topic.setdefault(topic, []).append(partition)
        markers.append(build(
            module.WritableTxnMarker, producer_id=item.pending.txn.producer_id,
            producer_epoch=item.pending.complete.producer_epoch,
            transaction_result=item.pending.commit,
            coordinator_epoch=item.pending.coordinator_epoch,
            topics=tuple(build(module.WritableTxnMarkerTopic, name=t, partition_indexes=tuple(ps))
                         for t, ps in by_topic.items())))
    response = conn.call(build(cls, markers=tuple(markers)))
    errors: dict[int, dict[TP, ErrorCode]] = {}
    for marker in response.markers:
        found = errors.setdefault(int(marker.producer_id), {})
        for topic in marker.topics:
            for p in topic.partitions:
                try:
                    found[(str(topic.name), int(p.partition_index))] = ErrorCode(
                        int(p.error_code))
                except ValueError:
                    found[(str(topic.name), int(p.partition_index))] = \
                        ErrorCode.unknown_server_error
    return errors


class MarkerChannel:
    """The markers of broker ``broker_id``'s transactions; on the loop, as the state manager."""

    def __init__(self, broker_id: int, manager: TxnStateManager, metadata: MetadataCache, *,
                 listener: str, connector: Connector | None = None,
                 request_timeout_ms: int = 30_000,
                 on_complete: Callable[[str, ErrorCode], None] | None = None) -> None:
        self.broker_id = broker_id
        self.manager = manager
        self.metadata = metadata
        self.listener = listener
        self.connector = connector
        self.request_timeout_ms = request_timeout_ms
        self.on_complete = on_complete
        self._queues: dict[int, _BrokerQueue] = {}
        self._pending: dict[str, _Pending] = {}
        self._closed = False
        self.unknown_destination_waiting = 0
        """Markers waiting for their partition's leader to be known (Kafka's
        UnknownDestinationQueueSize)."""
        self.log_append_retry_waiting = 0
        """Completions whose write to ``__transaction_state`` waits to be retried (Kafka's
        LogAppendRetryQueueSize)."""

    def address(self, broker_id: int) -> tuple[str, int] | None:
        broker = self.metadata.snapshot.brokers.get(broker_id)
        if broker is None:
            return None
        for endpoint in broker.endpoints:
            if endpoint.listener == self.listener:
                return endpoint.host, endpoint.port
        return None

    def close(self) -> None:
        self._closed = True
        for queue in self._queues.values():
            queue.close()
        self._queues.clear()
        for pending in self._pending.values():
            pending.dropped = True
        self._pending.clear()

    def pending_ids(self) -> list[str]:
        return sorted(self._pending)

    # -- adding ------------------------------------------------------------------------------

    def add(self, coordinator_epoch: int, commit: bool, txn: TxnMetadata,
            complete: Transit) -> None:
        """Send the markers of ``txn`` (prepared, ``complete`` pending on it), then write
        ``complete``."""
        if self._closed:
            txn.abandon()
            return
        old = self._pending.pop(txn.transactional_id, None)
        if old is not None:
            old.dropped = True
        pending = _Pending(txn.transactional_id, coordinator_epoch, commit, txn, complete)
        self._pending[txn.transactional_id] = pending
        self._route(pending, frozenset(complete_partitions(txn)))

    def drop_partition(self, partition: int) -> None:
        """Forget the markers of the transactions of ``__transaction_state`` partition
        ``partition`` (this broker no longer coordinates them)."""
        for tid, pending in list(self._pending.items()):
            if self.manager.partition_of(tid) == partition:
                self._drop(pending)

    def _drop(self, pending: _Pending) -> None:
        pending.dropped = True
        if self._pending.get(pending.transactional_id) is pending:
            del self._pending[pending.transactional_id]

    def _route(self, pending: _Pending, partitions: frozenset[TP]) -> None:
        if pending.dropped:
            return
        snapshot = self.metadata.snapshot
        by_broker: dict[int, set[TP]] = {}
        unknown: set[TP] = set()
        for tp in partitions:
            if tp not in pending.txn.partitions:
                continue
            if tp[0] not in snapshot.topics:
                log.info("transactional id %s: topic %s is gone; no marker for %s-%d",
                         pending.transactional_id, tp[0], *tp)
                pending.txn.remove_partition(tp)
                continue
            state = snapshot.partition(TopicPartition(*tp))
            leader = state.leader if state is not None else -1
            if leader < 0 or self.address(leader) is None:
                unknown.add(tp)
            else:
                by_broker.setdefault(leader, set()).add(tp)
        for broker_id, tps in by_broker.items():
            queue = self._queues.get(broker_id)
            if queue is None:
                queue = self._queues[broker_id] = _BrokerQueue(self, broker_id)
            queue.put(_Item(pending, frozenset(tps)))
        if unknown:
            self.unknown_destination_waiting += len(unknown)
            asyncio.get_running_loop().call_later(RETRY_S, self._route_unknown, pending,
                                                  frozenset(unknown))
        elif not by_broker:
            self._maybe_complete(pending)

    def _route_unknown(self, pending: _Pending, partitions: frozenset[TP]) -> None:
        self.unknown_destination_waiting -= len(partitions)
        self._route(pending, partitions)

    def _retry(self, pending: _Pending, partitions: frozenset[TP]) -> None:
        if self._still_ours(pending):
            self._route(pending, partitions)

    def _still_ours(self, pending: _Pending) -> bool:
        if pending.dropped:
            return False
        found = self.manager.get(pending.transactional_id)
        if found.error is not ErrorCode.none or found.txn is None \
                or found.epoch != pending.coordinator_epoch:
            log.info("transactional id %s: no longer coordinated here at epoch %d (%s); its "
                     "markers are dropped", pending.transactional_id,
                     pending.coordinator_epoch, found.error.name)
            self._drop(pending)
            return False
        return True

    # -- answers -----------------------------------------------------------------------------

    def _answered(self, items: list[_Item], errors: dict[int, dict[TP, ErrorCode]]) -> None:
        for item in items:
            pending = item.pending
            if not self._still_ours(pending):
                continue
            found = errors.get(pending.txn.producer_id, {})
            retry: set[TP] = set()
            stop = False
            for tp in item.partitions:
                error = found.get(tp, ErrorCode.unknown_server_error)
                if error is ErrorCode.none or error in _SKIP:
                    pending.txn.partitions.discard(tp)
                elif error in _RETRY:
                    retry.add(tp)
                elif error in _STOP:
                    log.info("transactional id %s: marker for %s-%d refused (%s); no more "
                             "markers are sent", pending.transactional_id, *tp, error.name)
                    stop = True
                else:
                    log.warning("transactional id %s: marker for %s-%d failed: %s; retrying",
                                pending.transactional_id, *tp, error.name)
                    retry.add(tp)
            if stop:
                self._drop(pending)
            elif retry:
                asyncio.get_running_loop().call_later(RETRY_S, self._retry, pending,
                                                      frozenset(retry))
            else:
                self._maybe_complete(pending)

    def _maybe_complete(self, pending: _Pending) -> None:
        if pending.dropped or pending.txn.partitions:
            return
        self._drop(pending)
        self._write_completion(pending)

    def _write_completion(self, pending: _Pending) -> None:
        written = self.manager.append(pending.transactional_id, pending.coordinator_epoch,
                                      pending.complete,
                                      retry_on=lambda e: e is ErrorCode.coordinator_not_available)

        def done(f: asyncio.Future) -> None:
            error: ErrorCode = f.result()
            if error is ErrorCode.coordinator_not_available and not self._closed:
                log.info("transactional id %s: writing %s failed (%s); retrying",
                         pending.transactional_id, pending.complete.state.label, error.name)
                self.log_append_retry_waiting += 1
                asyncio.get_running_loop().call_later(RETRY_S, self._retry_completion, pending)
                return
            if error is ErrorCode.none:
                log.info("transactional id %s: %s", pending.transactional_id,
                         pending.complete.state.label)
            if self.on_complete is not None:
                self.on_complete(pending.transactional_id, error)

        written.add_done_callback(done)

    def _retry_completion(self, pending: _Pending) -> None:
        self.log_append_retry_waiting -= 1
        self._write_completion(pending)


def complete_partitions(txn: TxnMetadata) -> set[TP]:
    """The partitions still waiting for a marker (those of a prepared transaction)."""
    assert txn.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT), txn
    return set(txn.partitions)
