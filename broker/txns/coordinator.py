"""The transaction coordinator: what InitProducerId (with a transactional id),
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions and ListTransactions decide
(Kafka's ``TransactionCoordinator``), over the :class:`~broker.txns.state_manager.
TxnStateManager` that holds and writes the state and the :class:`~broker.txns.markers.
MarkerChannel` that writes the markers.

The rules are Kafka 3.9's:

- InitProducerId: a timeout above ``transaction.max.timeout.ms`` (or not above 0) is
  INVALID_TRANSACTION_TIMEOUT; a new id gets a new producer id at epoch 0; a known one gets its
  epoch bumped (the old producer is fenced); an ongoing transaction is aborted first with the
  epoch bumped (PrepareEpochFence) and the request answered CONCURRENT_TRANSACTIONS, which the
  client retries; a transaction completing is CONCURRENT_TRANSACTIONS; an exhausted epoch gives
  a new producer id. With a producer id and epoch in the request (KIP-360), the epoch must be
  the current one (bumped) or the last one (a retry: the same answer again), else
  PRODUCER_FENCED.
- AddPartitionsToTxn: another producer id is INVALID_PRODUCER_ID_MAPPING, another epoch
  PRODUCER_FENCED, a transition under way or a transaction completing CONCURRENT_TRANSACTIONS;
  partitions already in the ongoing transaction are answered at once. Where partctl differs:
  an add (or AddOffsetsToTxn) that finds the producer's previous transaction ending by itself
  (being prepared, its markers under way, its completion being written) waits for the end, up
  to ``partctl.transaction.add.hold.ms``, and is then decided as if it had just arrived;
  Kafka answers it CONCURRENT_TRANSACTIONS at once and the client retries after a backoff. ``verify_only`` (KIP-890
  part 1, from brokers) answers whether each partition is in the ongoing transaction.
- EndTxn: a stale epoch is PRODUCER_FENCED; Ongoing goes to PrepareCommit/PrepareAbort, is
  written, answered, and the markers follow; a retried EndTxn of a completed transaction with
  the same result is NONE, of one completing CONCURRENT_TRANSACTIONS; the wrong result or an
  Empty transaction INVALID_TXN_STATE.
- Every :data:`~broker.txns.config.TxnConfig.abort_timed_out_interval_ms`, Ongoing
  transactions older than their timeout are aborted with the epoch bumped; every
  ``remove_expired_interval_ms``, idle ids are expired.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Coroutine, Iterable
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

from broker.metadata_cache import MetadataCache
from broker.purgatory import Purgatory
from broker.txns.config import TxnConfig
from broker.txns.markers import MarkerChannel
from broker.txns.metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    IllegalTransition,
    Transit,
    TxnMetadata,
    TxnState,
    epoch_exhausted,
)
from broker.txns.state_manager import TxnStateManager, TxnSummary
from broker.txns.verifier import TxnVerifier
from coordinator.clock import SYSTEM_CLOCK, Clock
from kafkaclient.security.connector import Connector
from replication.producer_ids import ProducerIdManager, ProducerIdsUnavailable
from replication.replica_manager import ReplicaManager

__all__ = ["InitResult", "TransactionCoordinator"]

log = logging.getLogger(__name__)

S = TxnState
WAIT_FOR_IDS = 5.0
InitResult = tuple[ErrorCode, int, int]
"""(error, producer id, epoch)."""
TP = tuple[str, int]
T = TypeVar("T")


class TransactionCoordinator:
    """Broker ``broker_id``'s transaction coordinator (on ``loop``)."""

    def __init__(self, broker_id: int, replica_manager: ReplicaManager, metadata: MetadataCache,
                 purgatory: Purgatory, loop: asyncio.AbstractEventLoop,
                 producer_ids: ProducerIdManager | None, config: TxnConfig | None = None, *,
                 listener: str = "PLAINTEXT", connector: Connector | None = None,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.config = config or TxnConfig()
        self.loop = loop
        self.clock = clock
        self.producer_ids = producer_ids
        self.manager = TxnStateManager(broker_id, replica_manager, metadata, purgatory, loop,
                                       self.config, clock)
        self.markers = MarkerChannel(broker_id, self.manager, metadata, listener=listener,
                                     connector=connector,
                                     request_timeout_ms=self.config.request_timeout_ms,
                                     on_complete=self._ended)
        self.verifier = TxnVerifier(broker_id, self, metadata, self.markers.address,
                                    connector=connector,
                                    request_timeout_ms=self.config.request_timeout_ms)
        self.manager.listen(self)
        self._timers: list[asyncio.TimerHandle] = []
        self._active = False
        self._ending: dict[str, list[asyncio.Future]] = {}
        """The adds held until their transactional id's previous transaction has ended."""

    # -- life cycle --------------------------------------------------------------------------

    def start(self) -> None:
        self._active = True
        self.manager.start()
        self._every(self.config.abort_timed_out_interval_ms, self.abort_timed_out)
        self._every(self.config.remove_expired_interval_ms,
                    self.manager.expire_transactional_ids)

    def stop(self) -> None:
        self._active = False
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()
        self.markers.close()
        self.verifier.close()
        self.manager.stop()
        for transactional_id in list(self._ending):
            self._ended(transactional_id, ErrorCode.none)

    def _every(self, interval_ms: int, task: object) -> None:
        def run() -> None:
            if not self._active:
                return
            try:
                task()  # type: ignore[operator]
            except Exception:  # noqa: BLE001 - a periodic task's bug must not stop it
                log.exception("transaction coordinator: %s failed", task)
            self._timers.append(self.loop.call_later(interval_ms / 1000, run))
        self._timers.append(self.loop.call_later(interval_ms / 1000, run))

    # -- partitions loaded and dropped (TxnPartitionListener) ----------------------------------

    def loaded(self, partition: int, epoch: int, txns: Iterable[TxnMetadata]) -> None:
        """Send again the markers of the transactions left prepared (coordinator failover)."""
        self.markers.drop_partition(partition)
        for txn in txns:
            if txn.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT) and txn.pending is None:
                log.info("transactional id %s: %s after loading; sending its markers",
                         txn.transactional_id, txn.state.label)
                self.markers.add(epoch, txn.state is S.PREPARE_COMMIT, txn,
                                 txn.prepare_complete(self.clock.now_ms()))

    def unloaded(self, partition: int) -> None:
        self.markers.drop_partition(partition)
        for transactional_id in list(self._ending):  # its held adds: no longer ours
            if self.manager.partition_of(transactional_id) == partition:
                self._ended(transactional_id, ErrorCode.none)

    # -- producer ids ------------------------------------------------------------------------

    async def _new_producer_id(self) -> int | ErrorCode:
        manager = self.producer_ids
        if manager is None:
            return ErrorCode.coordinator_not_available
        try:
            return manager.next_producer_id(timeout=0)
        except ProducerIdsUnavailable:
            pass
        try:
            return await self.loop.run_in_executor(None, manager.next_producer_id, WAIT_FOR_IDS)
        except ProducerIdsUnavailable as exc:
            return ErrorCode(int(exc.error_code))

    # -- InitProducerId ----------------------------------------------------------------------

    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None = None) -> InitResult:
        """InitProducerId with a transactional id; ``expected`` is the (producer id, epoch) a
        KIP-360 client passes."""
        return await _to_the_end(self._init(transactional_id, timeout_ms, expected))

    async def _init(self, transactional_id: str, timeout_ms: int,
                    expected: tuple[int, int] | None) -> InitResult:
        fail = (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        if not transactional_id:
            return ErrorCode.invalid_request, *fail
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return ErrorCode.invalid_transaction_timeout, *fail
        found = self.manager.get(transactional_id)
        if found.error is ErrorCode.none and found.txn is None:
            pid = await self._new_producer_id()
            if isinstance(pid, ErrorCode):
                return pid, *fail
            found = self.manager.put_if_absent(TxnMetadata(
                transactional_id, producer_id=pid, producer_epoch=NO_PRODUCER_EPOCH,
                timeout_ms=timeout_ms, last_update_ms=self.clock.now_ms()))
        if found.error is not ErrorCode.none:
            return found.error, *fail
        txn, epoch = found.txn, found.epoch
        assert txn is not None
        prepared = await self._prepare_init(txn, timeout_ms, expected)
        if isinstance(prepared, ErrorCode):
            return prepared, *fail
        if prepared.state is S.PREPARE_EPOCH_FENCE:
            error = await self._end(transactional_id, prepared.producer_id,
                                    prepared.producer_epoch, commit=False, from_client=False)
            return (error if error is not ErrorCode.none
                    else ErrorCode.concurrent_transactions), *fail
        error = await self.manager.append(transactional_id, epoch, prepared)
        if error is not ErrorCode.none:
            return error, *fail
        log.info("transactional id %s: producer id %d epoch %d", transactional_id,
                 prepared.producer_id, prepared.producer_epoch)
        return ErrorCode.none, prepared.producer_id, prepared.producer_epoch

    async def _prepare_init(self, txn: TxnMetadata, timeout_ms: int,
                            expected: tuple[int, int] | None) -> Transit | ErrorCode:
        if txn.in_transition:
            return ErrorCode.concurrent_transactions
        if expected is not None:
            pid, epoch = expected
            valid = (txn.producer_epoch == NO_PRODUCER_EPOCH or pid == txn.producer_id
                     or (pid == txn.last_producer_id and epoch_exhausted(epoch)))
            if not valid:
                return ErrorCode.producer_fenced
        match txn.state:
            case S.PREPARE_ABORT | S.PREPARE_COMMIT:
                return ErrorCode.concurrent_transactions
            case S.COMPLETE_ABORT | S.COMPLETE_COMMIT | S.EMPTY:
                now = self.clock.now_ms()
                if epoch_exhausted(txn.producer_epoch) and (
                        expected is None or expected[1] == txn.producer_epoch):
                    new_pid = await self._new_producer_id()
                    if isinstance(new_pid, ErrorCode):
                        return new_pid
                    if txn.in_transition:  # something started while the id was fetched
                        return ErrorCode.concurrent_transactions
                    return txn.prepare_rotation(new_pid, timeout_ms, now,
                                                record_last_epoch=expected is not None)
                return txn.prepare_increment_epoch(
                    timeout_ms, expected[1] if expected is not None else None, now)
            case S.ONGOING:
                return txn.prepare_fence_epoch()
            case _:
                log.error("transactional id %s in %s: never expected", txn.transactional_id,
                          txn.state.label)
                return ErrorCode.unknown_server_error

    # -- AddPartitionsToTxn, AddOffsetsToTxn -------------------------------------------------

    async def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                             partitions: Iterable[TP]) -> ErrorCode:
        return await _to_the_end(self._add(transactional_id, producer_id, epoch, partitions))

    async def _add(self, transactional_id: str, producer_id: int, epoch: int,
                   partitions: Iterable[TP], *, hold: bool = True) -> ErrorCode:
        if not transactional_id:
            return ErrorCode.invalid_request
        wanted = frozenset(partitions)
        found = self.manager.get(transactional_id)
        if found.error is not ErrorCode.none:
            return found.error
        txn = found.txn
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if txn.producer_epoch != epoch:
            return ErrorCode.producer_fenced
        if txn.in_transition or txn.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            if hold and self.config.add_hold_ms > 0 and _ending(txn):
                await self._until_ended(transactional_id)
                return await self._add(transactional_id, producer_id, epoch, wanted,
                                       hold=False)
            return ErrorCode.concurrent_transactions
        if txn.state is S.ONGOING and wanted <= txn.partitions:
            return ErrorCode.none
        try:
            transit = txn.prepare_add_partitions(wanted, self.clock.now_ms())
        except IllegalTransition as exc:
            log.error("%s", exc)
            return ErrorCode.invalid_txn_state
        return await self.manager.append(transactional_id, found.epoch, transit)

    async def _until_ended(self, transactional_id: str) -> None:
        """Wait, at most ``partctl.transaction.add.hold.ms``, for the end of the id's
        transaction: its CompleteCommit or CompleteAbort written (or failed), or the id's
        partition gone from this coordinator."""
        ended = self.loop.create_future()
        waiting = self._ending.setdefault(transactional_id, [])
        waiting.append(ended)
        try:
            await asyncio.wait_for(asyncio.shield(ended), self.config.add_hold_ms / 1000)
        except TimeoutError:
            pass
        finally:
            if ended in waiting:
                waiting.remove(ended)
            if not waiting:
                self._ending.pop(transactional_id, None)

    def _ended(self, transactional_id: str, _error: ErrorCode) -> None:
        for ended in self._ending.pop(transactional_id, ()):
            if not ended.done():
                ended.set_result(None)

    def verify_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                          partitions: Iterable[TP]) -> dict[TP, ErrorCode]:
        """KIP-890 part 1: whether each partition is in the ongoing transaction."""
        wanted = list(partitions)
        if not transactional_id:
            return dict.fromkeys(wanted, ErrorCode.invalid_request)
        found = self.manager.get(transactional_id)
        txn = found.txn
        if found.error is not ErrorCode.none:
            error = found.error
        elif txn is None or txn.producer_id != producer_id:
            error = ErrorCode.invalid_producer_id_mapping
        elif txn.producer_epoch != epoch:
            error = ErrorCode.producer_fenced
        elif txn.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            error = ErrorCode.concurrent_transactions
        else:
            return {tp: ErrorCode.none if tp in txn.partitions
                    else ErrorCode.transaction_abortable for tp in wanted}
        return dict.fromkeys(wanted, error)

    # -- EndTxn ------------------------------------------------------------------------------

    async def end_txn(self, transactional_id: str, producer_id: int, epoch: int,
                      commit: bool) -> ErrorCode:
        return await _to_the_end(self._end(transactional_id, producer_id, epoch, commit=commit,
                                           from_client=True))

    async def _end(self, transactional_id: str, producer_id: int, epoch: int, *, commit: bool,
                   from_client: bool) -> ErrorCode:
        if not transactional_id:
            return ErrorCode.invalid_request
        found = self.manager.get(transactional_id)
        if found.error is not ErrorCode.none:
            return found.error
        txn, coordinator_epoch = found.txn, found.epoch
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if (from_client and epoch != txn.producer_epoch) or epoch < txn.producer_epoch:
            return ErrorCode.producer_fenced
        if txn.in_transition and (from_client or txn.pending is not S.PREPARE_EPOCH_FENCE):
            # a fence under way is the coordinator's own abort to finish, never a client's
            return ErrorCode.concurrent_transactions
        fencing = False
        match txn.state:
            case S.ONGOING:
                target = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
                if target is S.PREPARE_ABORT and txn.pending is S.PREPARE_EPOCH_FENCE:
                    fencing = True  # the bumped epoch goes into the abort written
                    txn.pending = None
                    txn.producer_epoch = epoch
                    txn.last_producer_epoch = NO_PRODUCER_EPOCH
                try:
                    transit = txn.prepare_end(target, self.clock.now_ms())
                except IllegalTransition as exc:
                    log.error("%s", exc)
                    return ErrorCode.invalid_txn_state
            case S.COMPLETE_COMMIT | S.COMPLETE_ABORT:
                done = commit == (txn.state is S.COMPLETE_COMMIT)
                return ErrorCode.none if done else self._invalid(txn, commit)
            case S.PREPARE_COMMIT | S.PREPARE_ABORT:
                same = commit == (txn.state is S.PREPARE_COMMIT)
                return ErrorCode.concurrent_transactions if same else self._invalid(txn, commit)
            case _:
                return self._invalid(txn, commit)
        error = await self.manager.append(transactional_id, coordinator_epoch, transit)
        if error is not ErrorCode.none:
            if fencing:
                now = self.manager.get(transactional_id)
                if now.txn is not None and now.epoch == coordinator_epoch:
                    now.txn.failed_epoch_fence = True
            return error
        # written: the transaction is prepared; answer and send the markers
        now = self.manager.get(transactional_id)
        if now.error is not ErrorCode.none:
            return now.error
        txn = now.txn
        if txn is None or now.epoch != coordinator_epoch:
            return ErrorCode.not_coordinator
        if txn.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if txn.producer_epoch != transit.producer_epoch:
            return ErrorCode.producer_fenced
        if txn.in_transition:
            return ErrorCode.concurrent_transactions
        if txn.state is not target:
            return self._invalid(txn, commit)
        self.markers.add(coordinator_epoch, commit, txn, txn.prepare_complete(self.clock.now_ms()))
        return ErrorCode.none

    @staticmethod
    def _invalid(txn: TxnMetadata, commit: bool) -> ErrorCode:
        log.info("transactional id %s: %s in state %s is not a legal transition",
                 txn.transactional_id, "commit" if commit else "abort", txn.state.label)
        return ErrorCode.invalid_txn_state

    # -- timeouts ----------------------------------------------------------------------------

    def abort_timed_out(self) -> None:
        """Abort the Ongoing transactions past their timeout, fencing their producers."""
        for transactional_id, producer_id, _ in self.manager.timed_out():
            found = self.manager.get(transactional_id)
            txn = found.txn
            if txn is None or txn.producer_id != producer_id or txn.in_transition:
                continue
            fence = txn.prepare_fence_epoch()
            log.info("transactional id %s: aborting the transaction past its timeout of %d ms",
                     transactional_id, txn.timeout_ms)
            ending = asyncio.ensure_future(self._end(
                transactional_id, fence.producer_id, fence.producer_epoch, commit=False,
                from_client=False))

            def done(f: asyncio.Future, tid: str = transactional_id) -> None:
                error = f.result()
                if error is not ErrorCode.none:
                    log.info("transactional id %s: aborting it after its timeout: %s", tid,
                             error.name)
            ending.add_done_callback(done)

    # -- describing --------------------------------------------------------------------------

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TxnMetadata | None]:
        if not self._active:
            return ErrorCode.coordinator_not_available, None
        if not transactional_id:
            return ErrorCode.invalid_request, None
        found = self.manager.get(transactional_id)
        if found.error is not ErrorCode.none:
            return found.error, None
        if found.txn is None or found.txn.state is S.DEAD:
            return ErrorCode.transactional_id_not_found, None
        return ErrorCode.none, found.txn

    def list_transactions(self, states: Iterable[str], producer_ids: Iterable[int],
                          min_duration_ms: int = -1
                          ) -> tuple[ErrorCode, list[str], list[TxnSummary]]:
        if not self._active:
            return ErrorCode.coordinator_not_available, [], []
        return self.manager.list_transactions(states, producer_ids, min_duration_ms)


def _ending(txn: TxnMetadata) -> bool:
    """Whether ``txn`` is on its way to CompleteCommit or CompleteAbort with nothing asked of
    its producer: a commit or abort being prepared, prepared (its markers under way), or its
    completion being written. The end comes without the client: an add may wait for it."""
    if txn.in_transition:
        return txn.pending in (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.COMPLETE_COMMIT,
                               S.COMPLETE_ABORT)
    return txn.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT)


def _to_the_end(work: Coroutine[Any, Any, T]) -> Awaitable[T]:
    """Run ``work`` (a request's change of a transaction) to its end even when the request
    awaiting it is cancelled because its connection closed. A change is written first and
    followed up after (a prepared commit's markers, a fence's abort): cut between the two, it
    would leave the transaction prepared with no markers ever sent, and every read_committed
    consumer of its partitions stuck at its first offset (a client that gives up on a slow
    EndTxn closes its connection)."""
    task = asyncio.ensure_future(work)
    task.add_done_callback(_retrieved)
    return asyncio.shield(task)


def _retrieved(task: asyncio.Future) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("transaction coordinator: %s", task.exception())
