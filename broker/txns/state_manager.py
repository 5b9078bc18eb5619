"""The transaction state manager: the ``__transaction_state`` partitions this broker answers
for, their transactional ids, and every write to them (Kafka's ``TransactionStateManager``).

A transactional id belongs to one partition of ``__transaction_state`` (``abs(Java
hashCode) % partitions``, as for groups: :func:`~broker.groups.records.partition_for`), and the
broker leading that partition is its coordinator; the partition's leader epoch is the
coordinator epoch. It follows the shape of :mod:`broker.groups.metadata_manager`: a broker that
becomes leader reads the partition from its start and rebuilds its ids before it answers for
them (COORDINATOR_LOAD_IN_PROGRESS until then), then tells its :class:`TxnPartitionListener`
(the coordinator, which sends again the markers of transactions left in PrepareCommit or
PrepareAbort by the coordinator before); one that stops leading drops them (NOT_COORDINATOR).

Every state change is written (acks=all, one plain record per change) before it is applied and
answered (:meth:`TxnStateManager.append`). It all runs on the broker's event loop; only the
reading of a partition being loaded runs off it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Protocol

from kio.schema.errors import ErrorCode

from broker.groups.records import COORDINATOR_HEADER, partition_for
from broker.metadata_cache import MetadataCache
from broker.purgatory import Purgatory
from broker.txns.config import TRANSACTION_STATE_TOPIC, TxnConfig
from broker.txns.loading import TxnLoaded, build_txns, read_txn_records
from broker.txns.metadata import IllegalTransition, Transit, TxnMetadata, TxnState
from broker.txns.records import encode_txn_key, encode_txn_value
from broker.txns.stats import WindowedStat
from coordinator.clock import SYSTEM_CLOCK, Clock
from coordinator.codecs import TopicPartition
from interbroker.errors import ErrorCode as DataErrorCode
from replication.partition import Role
from replication.protocol import AppendOrigin, ProduceResult
from replication.records import Record, encode_batch
from replication.replica_manager import ReplicaManager

__all__ = ["Lookup", "TxnPartitionListener", "TxnStateManager", "TxnSummary"]

log = logging.getLogger(__name__)

LEADERSHIP_CHECK_S = 0.2
_MARKED = (COORDINATOR_HEADER,)
S = TxnState


class TxnPartitionListener(Protocol):
    """Told of the partitions the manager loads and drops (Kafka's onElection and
    onResignation)."""

    def loaded(self, partition: int, epoch: int, txns: Iterable[TxnMetadata], /) -> None: ...

    def unloaded(self, partition: int, /) -> None: ...


@dataclass(frozen=True, slots=True)
class Lookup:
    """A transactional id looked up: NONE with its coordinator epoch and metadata (None: no
    such id), or the error to answer."""

    error: ErrorCode
    epoch: int = -1
    txn: TxnMetadata | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnSummary:
    """What ListTransactions shows of one id."""

    transactional_id: str
    producer_id: int
    state: str


@dataclass(slots=True)
class _Partition:
    epoch: int
    loaded: bool = False
    txns: dict[str, TxnMetadata] = field(default_factory=dict)


def append_error(error: int) -> ErrorCode:
    """Kafka's mapping of a ``__transaction_state`` append's error to the coordinator's."""
    code = DataErrorCode(error) if error in DataErrorCode._value2member_map_ else None
    match code:
        case DataErrorCode.NONE:
            return ErrorCode.none
        case (DataErrorCode.UNKNOWN_TOPIC_OR_PARTITION | DataErrorCode.NOT_ENOUGH_REPLICAS
              | DataErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND | DataErrorCode.REQUEST_TIMED_OUT):
            return ErrorCode.coordinator_not_available
        case (DataErrorCode.NOT_LEADER_OR_FOLLOWER | DataErrorCode.KAFKA_STORAGE_ERROR
              | DataErrorCode.BROKER_NOT_AVAILABLE):
            return ErrorCode.not_coordinator
        case _:
            return ErrorCode.unknown_server_error


class TxnStateManager:
    """The ``__transaction_state`` partitions of broker ``broker_id`` and what they hold;
    every method runs on ``loop`` except :meth:`leadership_changed`."""

    def __init__(self, broker_id: int, replica_manager: ReplicaManager, metadata: MetadataCache,
                 purgatory: Purgatory, loop: asyncio.AbstractEventLoop,
                 config: TxnConfig | None = None, clock: Clock = SYSTEM_CLOCK) -> None:
        self.broker_id = broker_id
        self.replica_manager = replica_manager
        self.metadata = metadata
        self.purgatory = purgatory
        self.loop = loop
        self.config = config or TxnConfig()
        self.clock = clock
        self._partitions: dict[int, _Partition] = {}
        self._listeners: list[TxnPartitionListener] = []
        self._timer: asyncio.TimerHandle | None = None
        self._running = False
        self.load_times = WindowedStat(clock)
        """How long the partitions' loads took (Kafka's partition-load-time-max and -avg)."""
        self.creating: asyncio.Future | None = None
        """The creation of ``__transaction_state`` under way (FindCoordinator starts it)."""

    def listen(self, listener: TxnPartitionListener) -> None:
        self._listeners.append(listener)

    # -- life cycle --------------------------------------------------------------------------

    def start(self) -> None:
        self._running = True
        self._tick()

    def stop(self) -> None:
        self._running = False
        if self._timer is not None:
            self._timer.cancel()
        for p in list(self._partitions):
            self._unload(p)

    def leadership_changed(self) -> None:
        """Something changed in what this broker leads (any thread): check now."""
        try:
            self.loop.call_soon_threadsafe(self._check_leadership)
        except RuntimeError:  # the loop is closed
            pass

    def _tick(self) -> None:
        if not self._running:
            return
        self._check_leadership()
        self._timer = self.loop.call_later(LEADERSHIP_CHECK_S, self._tick)

    # -- partitions --------------------------------------------------------------------------

    def partition_count(self) -> int:
        """Partitions of ``__transaction_state`` (0: the topic does not exist yet)."""
        return len(self.metadata.snapshot.topics.get(TRANSACTION_STATE_TOPIC, {}))

    def partition_of(self, transactional_id: str) -> int | None:
        count = self.partition_count()
        return partition_for(transactional_id, count) if count else None

    def _leader_epoch(self, p: int) -> int | None:
        partition = self.replica_manager.partition(TopicPartition(TRANSACTION_STATE_TOPIC, p))
        if partition is None:
            return None
        status = partition.status()
        return status.leader_epoch if status.role is Role.LEADER else None

    def _check_leadership(self) -> None:
        if not self._running:
            return
        for p in list(self._partitions):
            if self._leader_epoch(p) != self._partitions[p].epoch:
                self._unload(p)
        for p in range(self.partition_count()):
            if p not in self._partitions:
                epoch = self._leader_epoch(p)
                if epoch is not None:
                    self._load(p, epoch)

    def _state_of(self, p: int) -> ErrorCode:
        epoch = self._leader_epoch(p)
        held = self._partitions.get(p)
        if held is not None and held.epoch != epoch:
            self._unload(p)
            held = None
        if epoch is None:
            return ErrorCode.not_coordinator
        if held is None:
            self._load(p, epoch)
            held = self._partitions[p]
        return ErrorCode.none if held.loaded else ErrorCode.coordinator_load_in_progress

    def _load(self, p: int, epoch: int) -> None:
        self._partitions[p] = _Partition(epoch=epoch)
        where = f"{TRANSACTION_STATE_TOPIC}-{p}"
        log.info("loading the transactions of %s (coordinator epoch %d)", where, epoch)
        started = time.monotonic()
        reading = self.loop.run_in_executor(None, self._read_partition, p)

        def done(future: asyncio.Future) -> None:
            held = self._partitions.get(p)
            if held is None or held.epoch != epoch or held.loaded:
                return  # unloaded (or reloaded) meanwhile
            if future.cancelled() or future.exception() is not None:
                log.error("loading %s failed: %s", where,
                          None if future.cancelled() else future.exception())
                del self._partitions[p]  # the next request or tick tries again
                return
            held.txns = build_txns(future.result())
            held.loaded = True
            took_ms = (time.monotonic() - started) * 1000
            self.load_times.record(took_ms)
            log.info("loaded %d transactional id(s) of %s in %.0f ms", len(held.txns), where,
                     took_ms)
            for listener in self._listeners:
                listener.loaded(p, epoch, list(held.txns.values()))

        reading.add_done_callback(done)

    def _read_partition(self, p: int) -> TxnLoaded:
        partition = self.replica_manager.partition(TopicPartition(TRANSACTION_STATE_TOPIC, p))
        if partition is None:
            return []
        return read_txn_records(partition.log, f"{TRANSACTION_STATE_TOPIC}-{p}")

    def _unload(self, p: int) -> None:
        held = self._partitions.pop(p, None)
        if held is None:
            return
        for listener in reversed(self._listeners):
            listener.unloaded(p)
        log.info("unloaded %d transactional id(s) of %s-%d", len(held.txns),
                 TRANSACTION_STATE_TOPIC, p)

    @property
    def loading(self) -> bool:
        return any(not p.loaded for p in self._partitions.values())

    # -- lookups -----------------------------------------------------------------------------

    def get(self, transactional_id: str) -> Lookup:
        """``transactional_id``'s metadata here, or NOT_COORDINATOR /
        COORDINATOR_LOAD_IN_PROGRESS."""
        if not self._running:
            return Lookup(ErrorCode.not_coordinator)
        p = self.partition_of(transactional_id)
        if p is None:
            return Lookup(ErrorCode.not_coordinator)
        error = self._state_of(p)
        if error is not ErrorCode.none:
            return Lookup(error)
        held = self._partitions[p]
        return Lookup(ErrorCode.none, held.epoch, held.txns.get(transactional_id))

    def put_if_absent(self, txn: TxnMetadata) -> Lookup:
        """Hold ``txn`` unless its id is held already (then that one is given)."""
        found = self.get(txn.transactional_id)
        if found.error is not ErrorCode.none or found.txn is not None:
            return found
        p = self.partition_of(txn.transactional_id)
        assert p is not None
        self._partitions[p].txns[txn.transactional_id] = txn
        return Lookup(ErrorCode.none, found.epoch, txn)

    def held(self) -> list[tuple[int, TxnMetadata]]:
        """(coordinator epoch, metadata) of every id of the loaded partitions."""
        return [(held.epoch, txn) for held in self._partitions.values() if held.loaded
                for txn in held.txns.values()]

    def list_transactions(self, states: Iterable[str], producer_ids: Iterable[int],
                          min_duration_ms: int = -1
                          ) -> tuple[ErrorCode, list[str], list[TxnSummary]]:
        """ListTransactions: (error, the state filters not known, the ids that pass)."""
        if self._running:
            self._check_leadership()
        if self.loading:
            return ErrorCode.coordinator_load_in_progress, [], []
        wanted_states: set[TxnState] = set()
        unknown: list[str] = []
        given_states = list(states)
        for name in given_states:
            state = TxnState.by_label(name)
            if state is None:
                unknown.append(name)
            else:
                wanted_states.add(state)
        pids = set(producer_ids)
        now = self.clock.now_ms()
        found = []
        for _, txn in self.held():
            if txn.state is S.DEAD or (pids and txn.producer_id not in pids) \
                    or (given_states and txn.state not in wanted_states) \
                    or (min_duration_ms >= 0 and now - txn.start_ms <= min_duration_ms):
                continue
            found.append(TxnSummary(transactional_id=txn.transactional_id,
                                    producer_id=txn.producer_id, state=txn.state.label))
        return ErrorCode.none, unknown, found

    # -- writing -----------------------------------------------------------------------------

    def _produce(self, p: int, records: list[Record], timeout_ms: int) -> asyncio.Future:
        """Append ``records`` to partition ``p`` with acks=all: a loop future of the
        coordinator's error."""
        answer: asyncio.Future = self.loop.create_future()
        tp = TopicPartition(TRANSACTION_STATE_TOPIC, p)
        produced: Future = self.replica_manager.produce(tp, encode_batch(records), -1,
                                                        timeout_ms, AppendOrigin.COORDINATOR)
        self.purgatory.wake(tp)

        def finish(result: ProduceResult) -> None:
            if not answer.done():
                answer.set_result(append_error(result.error))

        def on_done(future: Future) -> None:
            try:
                result = future.result()
            except Exception:  # noqa: BLE001 - the append failed: nothing was acknowledged
                log.exception("appending to %s failed", tp)
                result = ProduceResult(error=DataErrorCode.UNKNOWN_SERVER_ERROR)
            try:
                self.loop.call_soon_threadsafe(finish, result)
            except RuntimeError:
                pass

        produced.add_done_callback(on_done)
        return answer

    def append(self, transactional_id: str, epoch: int, transit: Transit, *,
               retry_on: Callable[[ErrorCode], bool] = lambda _: False) -> asyncio.Future:
        """Write ``transit`` (pending on the id's metadata) and apply it once written: a loop
        future of the error. A failed write clears the pending state (unless ``retry_on``
        says the caller tries again); a change of coordinator meanwhile is NOT_COORDINATOR."""
        found = self.get(transactional_id)
        if found.error is not ErrorCode.none:
            return _resolved(self.loop, found.error)
        if found.txn is None or found.epoch != epoch:
            return _resolved(self.loop, ErrorCode.not_coordinator)
        p = self.partition_of(transactional_id)
        assert p is not None
        record = Record(key=encode_txn_key(transactional_id),
                        value=encode_txn_value(transit.value()),
                        timestamp=self.clock.now_ms(), headers=_MARKED)
        answer: asyncio.Future = self.loop.create_future()

        def written(f: asyncio.Future) -> None:
            error: ErrorCode = f.result()
            now = self.get(transactional_id)
            txn = now.txn
            if error is ErrorCode.none:
                if now.error is not ErrorCode.none:
                    error = now.error
                elif txn is None or now.epoch != epoch:
                    error = ErrorCode.not_coordinator
                else:
                    try:
                        txn.complete(transit)
                    except IllegalTransition as exc:
                        log.error("%s", exc)
                        txn.abandon()
                        error = ErrorCode.unknown_server_error
            elif txn is not None and now.epoch == epoch and not retry_on(error):
                txn.abandon()
            if error is not ErrorCode.none:
                log.info("transactional id %s: writing %s failed: %s", transactional_id,
                         transit.state.label, error.name)
            if not answer.done():  # cancelled: the request's connection is gone
                answer.set_result(error)

        self._produce(p, [record], transit.timeout_ms).add_done_callback(written)
        return answer

    def expire_transactional_ids(self) -> None:
        """Tombstones for the ids idle past ``transactional.id.expiration.ms`` in Empty,
        CompleteCommit or CompleteAbort; each is dropped once its tombstone is written."""
        now = self.clock.now_ms()
        horizon = now - self.config.transactional_id_expiration_ms
        for p, held in list(self._partitions.items()):
            if not held.loaded:
                continue
            expiring = [(txn, txn.prepare_dead()) for txn in list(held.txns.values())
                        if txn.pending is None and txn.state.expirable
                        and txn.last_update_ms <= horizon]
            if not expiring:
                continue
            records = [Record(key=encode_txn_key(txn.transactional_id), value=None,
                              timestamp=now, headers=_MARKED) for txn, _ in expiring]
            epoch = held.epoch

            def written(f: asyncio.Future, p: int = p, epoch: int = epoch,
                        expiring: list = expiring) -> None:
                error: ErrorCode = f.result()
                current = self._partitions.get(p)
                for txn, transit in expiring:
                    if (error is ErrorCode.none and current is not None
                            and current.epoch == epoch and txn.pending is S.DEAD
                            and txn.producer_epoch == transit.producer_epoch):
                        current.txns.pop(txn.transactional_id, None)
                        log.info("transactional id %s expired", txn.transactional_id)
                    else:
                        txn.abandon()
                if error is not ErrorCode.none:
                    log.warning("expiring %d transactional id(s) of %s-%d failed: %s",
                                len(expiring), TRANSACTION_STATE_TOPIC, p, error.name)

            self._produce(p, records, self.config.request_timeout_ms).add_done_callback(written)

    def timed_out(self) -> list[tuple[str, int, int]]:
        """(id, producer id, epoch) of the Ongoing transactions past their timeout."""
        now = self.clock.now_ms()
        return [(txn.transactional_id, txn.producer_id, txn.producer_epoch)
                for _, txn in self.held()
                if txn.pending is None and txn.state is S.ONGOING
                and txn.start_ms + txn.timeout_ms < now]


def _resolved(loop: asyncio.AbstractEventLoop, result: object) -> asyncio.Future:
    future: asyncio.Future = loop.create_future()
    future.set_result(result)
    return future
