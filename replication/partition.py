"""One partition on one broker: its log, its role, and (as leader) its HW, ISR and waiting produces.

A :class:`Partition` is driven from three sides, each under the partition's lock:

- the control plane makes it leader or follower (:meth:`Partition.make_leader`,
  :meth:`Partition.make_follower`) from a LeaderAndIsr entry;
- as leader, it takes produce appends and serves follower fetches, learning each follower's
  log end offset from its fetch offset, moving the HW and the ISR (see :mod:`replication.isr`)
  and completing acks=all produces once the HW passes them;
- as follower, the fetcher truncates and appends through it; every such call names the leader
  epoch it acts for and is refused once the partition moved on, so a fetch that raced a
  LeaderAndIsr can never write into a leader's log.

Futures are completed outside the lock, so a producer's callback cannot deadlock the partition;
acks=all produces wait in the partition's :class:`~replication.delayed_produce.ProducePurgatory`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future

from coordinator.clock import Clock
from coordinator.codecs import PartitionStateNode, TopicPartition
from interbroker.errors import ErrorCode
from interbroker.fencing import log_fenced
from interbroker.requests import LeaderAndIsrPartition
from replication.config import ReplicaConfig
from replication.delayed_produce import (
    Done,
    PendingProduce,
    ProduceFuture,
    ProducePurgatory,
    append_error,
    complete,
    failed,
)
from replication.delete_records import DeleteRecordsResult, low_watermark, resolve_delete_offset
from replication.errors import (
    OffsetOutOfRangeError,
    StorageError,
)
from replication.isr import (
    UNKNOWN_OFFSET,
    IsrConflict,
    IsrStore,
    IsrWritten,
    can_join_isr,
    effective_min_isr,
    high_watermark,
    out_of_sync_replicas,
)
from replication.local_log import COPY_BELOW
from replication.log import Log, LogSlice
from replication.protocol import (
    ACKS_ALL,
    AppendOrigin,
    ConsumerRead,
    FetchResult,
    OffsetAnswer,
    ProduceResult,
    QuietStamp,
)
from replication.replica_status import IsrCounts, ReplicaStatus, Role
from replication.truncation import FollowerEpochView

__all__ = ["IsrCounts", "Partition", "ReplicaStatus", "Role"]

log = logging.getLogger(__name__)


def _follower_records(log_: Log, offset: int, max_bytes: int, leo: int, as_slice: bool
                      ) -> bytes | LogSlice:
    """Whole batches from ``offset`` for a follower: bytes, or where they lie (``as_slice``,
    unless fewer than :data:`~replication.local_log.COPY_BELOW`)."""
    if offset >= leo:
        return b""
    if as_slice:
        return log_.read_slice(offset, max_bytes, whole=True, copy_below=COPY_BELOW) or b""
    return log_.read(offset, max_bytes).records


class Partition:
    """A partition replica on broker ``broker_id``. See the module docstring."""

    def __init__(
        self,
        tp: TopicPartition,
        log_: Log,
        *,
        broker_id: int,
        clock: Clock,
        config: ReplicaConfig,
        isr_store: IsrStore,
        on_isr_change: Callable[[TopicPartition], None],
        high_watermark: int = 0,
        isr_eligible: Callable[[int], bool] | None = None,
        isr_counts: IsrCounts | None = None,
        waiting: set[Partition] | None = None,
    ) -> None:
        """``isr_eligible(replica)`` says whether a caught-up follower may join the ISR: not
        when the controller's metadata no longer counts its broker live (it is shutting down;
        Kafka's KIP-841 rule). None: every replica may. ``waiting``, shared by a broker's
        partitions, holds each one with an acks=all produce waiting (added when it parks one,
        removed by the expiry that finds none left): the periodic expiry visits those, not
        every partition of the broker."""
        self.tp = tp
        self._waiting: set[Partition] = waiting if waiting is not None else set()
        self.log = log_
        self.broker_id = broker_id
        self._clock = clock
        self._config = config
        self._isr_store = isr_store
        self._on_isr_change = on_isr_change
        self._isr_eligible = isr_eligible
        self._isr_counts = isr_counts
        self._lock = threading.RLock()
        self._role = Role.NONE
        self._leader = -1
        self._leader_epoch = -1
        self._leading_since = -1
        self._partition_epoch = -1
        self._controller_epoch = -1
        self._isr: tuple[int, ...] = ()
        self._replicas: tuple[int, ...] = ()
        self._hw = max(min(high_watermark, log_.log_end_offset), log_.local_log_start_offset)
        self._epoch_start_offset = 0
        # The leader's view of each follower.
        self._leos: dict[int, int] = {}
        self._caught_up_ms: dict[int, int] = {}
        self._last_fetch_leader_leo: dict[int, int] = {}
        self._last_fetch_ms: dict[int, int] = {}
        self._log_starts: dict[int, int] = {}  # each follower's, as its last fetch said
        self._pending = ProducePurgatory()

    # -- state ---------------------------------------------------------------------------------

    @property
    def role(self) -> Role:
        return self._role

    @property
    def leader_epoch(self) -> int:
        return self._leader_epoch

    @property
    def partition_epoch(self) -> int:
        return self._partition_epoch

    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def last_stable_offset(self) -> int:
        """The LSO: the HW, or below it the first offset of a transaction not yet decided
        below it (what a read_committed consumer reads up to)."""
        with self._lock:
            return self.log.last_stable_offset(self._hw)

    @property
    def isr(self) -> tuple[int, ...]:
        return self._isr

    @property
    def min_insync_replicas(self) -> int:
        """The topic's ``min.insync.replicas`` as this replica runs with it."""
        return self._config.min_insync_replicas

    def status(self) -> ReplicaStatus:
        with self._lock:
            return ReplicaStatus(
                tp=self.tp,
                role=self._role,
                leader=self._leader,
                leader_epoch=self._leader_epoch,
                partition_epoch=self._partition_epoch,
                isr=self._isr,
                replicas=self._replicas,
                high_watermark=self._hw,
                log_start_offset=self.log.log_start_offset,
                log_end_offset=self.log.log_end_offset,
                local_log_start_offset=self.log.local_log_start_offset,
                leading_since=self._leading_since if self._role is Role.LEADER else -1,
            )

    def leading(self) -> tuple[Role, int]:
        """Its role and leader epoch, read together: what every fetch checks of each partition
        it names, without the rest of :meth:`status`."""
        with self._lock:
            return self._role, self._leader_epoch

    def epoch_view(self) -> FollowerEpochView:
        return self.log.epoch_view()

    # -- control plane -------------------------------------------------------------------------

    def _take_entry(self, entry: LeaderAndIsrPartition) -> None:
        self._leader = entry.leader
        self._leader_epoch = entry.leader_epoch
        self._partition_epoch = entry.partition_epoch
        self._controller_epoch = entry.controller_epoch
        self._isr = tuple(entry.isr)
        self._replicas = tuple(entry.replicas)

    def make_leader(self, entry: LeaderAndIsrPartition) -> None:
        """Lead from ``entry``'s epoch on. The epoch enters the epoch cache at the log end
        before anything else can append. Raises :class:`InvalidEpochError` if the log already
        holds a later epoch (nothing changes then)."""
        now = self._clock.now_ms()
        with self._lock:
            self.log.assign_leader_epoch(entry.leader_epoch)
            was_leader = self._role is Role.LEADER
            self._take_entry(entry)
            self._role = Role.LEADER
            if not was_leader:
                self._leading_since = entry.leader_epoch
            self._epoch_start_offset = self.log.log_end_offset
            followers = [r for r in self._replicas if r != self.broker_id]
            if not was_leader:
                self._leos = dict.fromkeys(followers, UNKNOWN_OFFSET)
                self._last_fetch_leader_leo = dict.fromkeys(followers, UNKNOWN_OFFSET)
                self._last_fetch_ms = dict.fromkeys(followers, 0)
                self._log_starts = dict.fromkeys(followers, UNKNOWN_OFFSET)
            else:
                for r in followers:
                    self._leos.setdefault(r, UNKNOWN_OFFSET)
                    self._last_fetch_leader_leo.setdefault(r, UNKNOWN_OFFSET)
                    self._last_fetch_ms.setdefault(r, 0)
                    self._log_starts.setdefault(r, UNKNOWN_OFFSET)
            self._caught_up_ms = {r: (now if r in self._isr else 0) for r in followers}
            done = self._advance_hw()
        complete(done)

    def make_follower(self, entry: LeaderAndIsrPartition) -> bool:
        """Follow ``entry.leader``; waiting produces fail. Returns whether the leader or its
        epoch changed, i.e. whether the follower must go through truncation again."""
        with self._lock:
            changed = (
                self._role is not Role.FOLLOWER
                or entry.leader != self._leader
                or entry.leader_epoch != self._leader_epoch
            )
            self._take_entry(entry)
            self._role = Role.FOLLOWER
            self._leos.clear()
            self._log_starts.clear()
            self._caught_up_ms.clear()
            done = self._pending.fail_all(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        complete(done)
        return changed

    def update_metadata(self, entry: LeaderAndIsrPartition) -> None:
        """Take a newer partition epoch (ISR or replicas changed) at the same leader epoch."""
        with self._lock:
            self._take_entry(entry)
            if self._role is Role.LEADER:
                for r in self._replicas:
                    if r != self.broker_id:
                        self._leos.setdefault(r, UNKNOWN_OFFSET)
                        self._caught_up_ms.setdefault(r, 0)
                        self._last_fetch_leader_leo.setdefault(r, UNKNOWN_OFFSET)
                        self._last_fetch_ms.setdefault(r, 0)
                        self._log_starts.setdefault(r, UNKNOWN_OFFSET)
                done = self._advance_hw()
            else:
                done = []
        complete(done)

    def reconfigure(self, config: ReplicaConfig) -> None:
        """Take the topic's settings (its config changed): ``min.insync.replicas`` from the
        next produce on, and the log's. A leader recomputes its HW at once, so lowering the
        minimum commits what the larger one held back (and completes the produces waiting
        on it)."""
        with self._lock:
            self._config = config
            self.log.reconfigure(config.log)
            done = self._advance_hw() if self._role is Role.LEADER else []
        complete(done)

    def stop(self, error: ErrorCode = ErrorCode.NOT_LEADER_OR_FOLLOWER) -> None:
        """Neither lead nor follow any more (StopReplica, shutdown); waiting produces fail."""
        with self._lock:
            self._role = Role.NONE
            done = self._pending.fail_all(error)
        complete(done)

    # -- leader: produce -----------------------------------------------------------------------

    def append_as_leader(
        self, records: bytes | bytearray, acks: int, timeout_ms: int,
        origin: AppendOrigin = AppendOrigin.CLIENT, guard: int | None = None,
    ) -> ProduceFuture:
        """Append a producer's batches. The future completes at once for acks 0 and 1, and
        for acks=all when the HW passes the last offset (or on error, leadership loss or
        timeout). With acks=all and too small an ISR nothing is appended.

        An idempotent producer's retry of a batch the log holds is answered with that batch's
        offsets (for acks=all once they are committed) and not appended again; a batch that
        does not continue the producer's sequence, or comes from a fenced epoch, is refused
        (see :mod:`replication.producer_state`). ``origin`` and ``guard`` are the log's
        (:meth:`Log.append_as_leader`)."""
        future: ProduceFuture = Future()
        if acks not in (0, 1, ACKS_ALL):
            return failed(future, ErrorCode.INVALID_REQUIRED_ACKS)
        with self._lock:
            if self._role is not Role.LEADER:
                return failed(future, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            if acks == ACKS_ALL and len(self._isr) < self._min_isr():
                return failed(future, ErrorCode.NOT_ENOUGH_REPLICAS)
            try:
                info = self.log.append_as_leader(records, self._leader_epoch, origin, guard)
            except StorageError as exc:
                code, with_message = append_error(exc)
                if code is ErrorCode.KAFKA_STORAGE_ERROR:
                    log.exception("append to %s failed", self.tp)
                return failed(future, code, str(exc) if with_message else None)
            result = ProduceResult(
                error=ErrorCode.NONE, base_offset=info.first_offset,
                last_offset=info.last_offset, log_append_time=info.log_append_time,
                log_start_offset=self.log.log_start_offset, duplicate=info.duplicate,
            )
            if info.duplicate:
                log.debug("%s: a retried batch is answered with offsets %d..%d", self.tp,
                          info.first_offset, info.last_offset)
            if acks == ACKS_ALL and info.last_offset >= self._hw:
                deadline = self._clock.now_ms() + timeout_ms
                if not self._pending:
                    self._waiting.add(self)
                self._pending.park(PendingProduce(info.last_offset + 1, deadline, future,
                                                  result))
                done = self._advance_hw()
            else:  # acks 0 or 1, or a duplicate of a committed batch
                done = [(future, result), *self._advance_hw()]
        complete(done)
        return future

    def expire_produces(self, now_ms: int) -> None:
        """Fail acks=all produces whose timeout passed (their records stay in the log); with
        none left waiting, leave the broker's set of partitions with produces waiting."""
        with self._lock:
            done = self._pending.expire(now_ms)
            if not self._pending:
                self._waiting.discard(self)
        complete(done)

    def _min_isr(self) -> int:
        return effective_min_isr(self._config.min_insync_replicas, len(self._replicas))

    def _advance_hw(self) -> Done:
        """Recompute the HW (lock held); returns the produces it completes."""
        min_isr = self._min_isr()
        new = high_watermark(
            self._hw, self.log.log_end_offset, self._isr, self.broker_id, self._leos,
            min_isr=min_isr,
        )
        if new == self._hw:
            return []
        self._hw = new
        # The HW only moves with enough replicas in sync, so this holds; it is Kafka's check on
        # completing a waiting produce all the same.
        return self._pending.complete_upto(new, len(self._isr) >= min_isr)

    # -- leader: fetches -----------------------------------------------------------------------

    def _check_leader(self, leader_epoch: int) -> ErrorCode:
        if self._role is not Role.LEADER:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if leader_epoch >= 0:
            if leader_epoch < self._leader_epoch:
                return ErrorCode.FENCED_LEADER_EPOCH
            if leader_epoch > self._leader_epoch:
                return ErrorCode.UNKNOWN_LEADER_EPOCH
        return ErrorCode.NONE

    def fetch_for_follower(
        self, replica_id: int, offset: int, max_bytes: int, leader_epoch: int,
        last_fetched_epoch: int = -1, *, update_state: bool = True, log_start_offset: int = -1,
        as_slice: bool = False,
    ) -> FetchResult:
        """Serve a follower's fetch (``log_start_offset``: the follower's own, kept for
        :meth:`low_watermark`): its fetch offset is its log end offset, which may move the
        HW, complete produces and let it into the ISR. Without ``update_state`` (a long poll
        answered later: Kafka's DelayedFetch reads from the purgatory without updating) only
        the read is done; the follower may be gone by then, and must not rejoin the ISR on
        the strength of a fetch it made before.

        ``last_fetched_epoch`` (Fetch v12+, KIP-595; -1: not sent) is the epoch of the last
        batch in the follower's log. When this leader's copy of that epoch (the largest epoch
        it knows at or below it) is an older epoch or ends before ``offset``, the follower's
        log has diverged: the answer carries no records but that epoch and its end offset
        (``diverging_epoch``), where the follower truncates, and the follower's fetch state is
        left alone (its offset is not a position in this log), as Kafka's fetchRecords does.
        An epoch this leader knows nothing about is OFFSET_OUT_OF_RANGE.

        Followers copy only the local part of a tiered log (KIP-405): an offset in the remote
        part (at or after the log start, below the local log start) is answered
        OFFSET_MOVED_TO_TIERED_STORAGE, and the follower rebuilds its state below the local
        log start from remote storage. ``log_start_offset`` is the log start of the whole log,
        remote part included, as Kafka's fetch response carries it.

        With ``as_slice`` the records are a :class:`~replication.log.LogSlice` of the same whole
        batches (the caller sends and closes it) instead of bytes."""
        now = self._clock.now_ms()
        with self._lock:
            error = self._check_leader(leader_epoch)
            if error:
                return FetchResult(error=error)
            if replica_id not in self._leos:
                return FetchResult(error=ErrorCode.REPLICA_NOT_AVAILABLE)
            log_ = self.log
            leo = log_.log_end_offset
            start = log_.log_start_offset
            if last_fetched_epoch >= 0:
                mine = log_.end_offset_for_epoch(last_fetched_epoch)
                if mine.epoch < 0 or mine.end_offset < 0:
                    return FetchResult(
                        error=ErrorCode.OFFSET_OUT_OF_RANGE, high_watermark=self._hw,
                        log_start_offset=start, log_end_offset=leo,
                    )
                if mine.epoch < last_fetched_epoch or mine.end_offset < offset:
                    return FetchResult(
                        error=ErrorCode.NONE, high_watermark=self._hw, log_start_offset=start,
                        log_end_offset=leo, diverging_epoch=mine.epoch,
                        diverging_end_offset=mine.end_offset,
                    )
            if offset < start or offset > leo:
                return FetchResult(
                    error=ErrorCode.OFFSET_OUT_OF_RANGE, high_watermark=self._hw,
                    log_start_offset=start, log_end_offset=leo,
                )
            if offset < log_.local_log_start_offset:
                # The remote part of a tiered log: the follower rebuilds it from remote storage.
                return FetchResult(
                    error=ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE, high_watermark=self._hw,
                    log_start_offset=start, log_end_offset=leo,
                )
            if not update_state:
                records = _follower_records(log_, offset, max_bytes, leo, as_slice)
                return FetchResult(error=ErrorCode.NONE, records=records,
                                   high_watermark=self._hw, log_start_offset=start,
                                   log_end_offset=leo,
                                   quiet=self._quiet(replica_id, offset, records))
            if offset >= leo:
                self._caught_up_ms[replica_id] = now
            elif offset >= self._last_fetch_leader_leo[replica_id]:
                self._caught_up_ms[replica_id] = max(
                    self._caught_up_ms[replica_id], self._last_fetch_ms[replica_id]
                )
            self._leos[replica_id] = offset
            self._last_fetch_leader_leo[replica_id] = leo
            self._last_fetch_ms[replica_id] = now
            self._log_starts[replica_id] = log_start_offset
            if replica_id not in self._isr and can_join_isr(
                offset, self._hw, self._epoch_start_offset
            ) and (self._isr_eligible is None or self._isr_eligible(replica_id)):
                self._update_isr(
                    lambda isr: None if replica_id in isr else (*isr, replica_id)
                )
            done = self._advance_hw()
            records = _follower_records(log_, offset, max_bytes, leo, as_slice)
            result = FetchResult(
                error=ErrorCode.NONE, records=records, high_watermark=self._hw,
                log_start_offset=start, log_end_offset=leo,
                quiet=self._quiet(replica_id, offset, records),
            )
        complete(done)
        return result

    def _quiet(self, replica_id: int, offset: int, records: bytes | LogSlice) -> QuietStamp | None:
        """The stamp of a fetch that found nothing for a follower in the ISR at the log end."""
        if records or replica_id not in self._isr:
            return None
        stamp = self._stamp()
        return stamp if stamp[1] == offset else None

    def _stamp(self) -> QuietStamp:
        log_ = self.log
        return (self._leader_epoch, log_.log_end_offset, self._hw, log_.log_start_offset,
                log_.local_log_start_offset)

    def follower_unchanged(self, replica_id: int, stamp: QuietStamp, *,
                           update_state: bool = True, now_ms: int | None = None) -> bool:
        """Whether the fetch answered nothing at ``stamp`` (:attr:`FetchResult.quiet`) would be
        answered the same now: still the leader at that epoch, nothing moved, the follower
        still in the ISR; then, with ``update_state``, the fetch is recorded as a read would
        (caught up now, ``now_ms`` if given: the clock read once for a fetch of many
        partitions). An incremental fetch session's idle partitions cost this only."""
        with self._lock:
            if (self._role is not Role.LEADER or replica_id not in self._isr
                    or self._stamp() != stamp):
                return False
            if update_state:
                now = self._clock.now_ms() if now_ms is None else now_ms
                self._caught_up_ms[replica_id] = now
                self._last_fetch_ms[replica_id] = now
            return True

    def delete_records(self, offset: int) -> DeleteRecordsResult:
        """DeleteRecords on the leader: move the log start to ``offset`` (-1: the HW);
        POLICY_VIOLATION unless ``cleanup.policy`` has ``delete``, OFFSET_OUT_OF_RANGE above
        the HW, NOT_LEADER_OR_FOLLOWER off the leader."""
        with self._lock:
            if self._role is not Role.LEADER:
                return DeleteRecordsResult(error=ErrorCode.NOT_LEADER_OR_FOLLOWER)
            if not self.log.config.cleanup_delete:
                return DeleteRecordsResult(error=ErrorCode.POLICY_VIOLATION)
            resolved = resolve_delete_offset(offset, self._hw)
            if resolved is None:
                return DeleteRecordsResult(error=ErrorCode.OFFSET_OUT_OF_RANGE)
            self.log.maybe_increment_log_start_offset(resolved, high_watermark=self._hw)
            return DeleteRecordsResult(error=ErrorCode.NONE, requested_offset=resolved,
                                       low_watermark=self._low_watermark())

    def low_watermark(self) -> int | None:
        """The lowest log start over this leader and its followers on live brokers (Kafka's
        lowWatermarkIfLeader); None off the leader."""
        with self._lock:
            return self._low_watermark() if self._role is Role.LEADER else None

    def _low_watermark(self) -> int:
        live = self._isr_eligible or (lambda _replica: True)
        starts = {r: s for r, s in self._log_starts.items() if r in self._replicas}
        return low_watermark(self.log.log_start_offset, starts, live)

    def end_offset_for_epoch(self, epoch: int, current_leader_epoch: int) -> tuple[
        ErrorCode, int, int
    ]:
        """OffsetsForLeaderEpoch, answered by the leader: (error, epoch, end offset)."""
        with self._lock:
            error = self._check_leader(current_leader_epoch)
            if error:
                return error, -1, -1
            answer = self.log.end_offset_for_epoch(epoch)
            return ErrorCode.NONE, answer.epoch, answer.end_offset

    def earliest_local_offset(self, current_leader_epoch: int) -> OffsetAnswer:
        """The leader's local log start and the leader epoch of the batch there (ListOffsets
        EARLIEST_LOCAL, -4)."""
        with self._lock:
            error = self._check_leader(current_leader_epoch)
            if error:
                return OffsetAnswer(error=error)
            local = self.log.local_log_start_offset
            return OffsetAnswer(error=ErrorCode.NONE, offset=local,
                                leader_epoch=self.log.leader_epoch_cache.epoch_at(local))

    def read_committed(self, offset: int, max_bytes: int) -> ConsumerRead:
        """A consumer's read: whole batches below the HW only."""
        with self._lock:
            if self._role is not Role.LEADER:
                return ConsumerRead(error=ErrorCode.NOT_LEADER_OR_FOLLOWER)
            hw = self._hw
            try:
                result = self.log.read(offset, max_bytes, upto=hw)
            except OffsetOutOfRangeError:
                return ConsumerRead(error=ErrorCode.OFFSET_OUT_OF_RANGE, high_watermark=hw)
        return ConsumerRead(
            error=ErrorCode.NONE, records=result.records, high_watermark=hw,
            next_offset=result.next_offset,
        )

    # -- leader: ISR ---------------------------------------------------------------------------

    def maybe_shrink_isr(self) -> bool:
        """Drop followers that fell out of sync; returns whether the ISR changed."""
        now = self._clock.now_ms()
        max_lag = self._config.replica_lag_time_max_ms
        with self._lock:
            if self._role is not Role.LEADER:
                return False

            def shrink(isr: tuple[int, ...]) -> tuple[int, ...] | None:
                out = out_of_sync_replicas(
                    isr, self.broker_id, self.log.log_end_offset, self._leos,
                    self._caught_up_ms, now, max_lag,
                )
                return tuple(r for r in isr if r not in out) if out else None

            changed = self._update_isr(shrink)
            done = self._advance_hw() if changed else []
        complete(done)
        return changed

    def _update_isr(
        self, decide: Callable[[tuple[int, ...]], tuple[int, ...] | None], attempts: int = 3
    ) -> bool:
        """Write the ISR ``decide`` makes of the current one, conditionally on the partition
        epoch (lock held). On a conflict: re-read; stop if the controller moved the leader
        epoch, else take the stored ISR and version and decide again."""
        for _ in range(attempts):
            new = decide(self._isr)
            if new is None or new == self._isr:
                return False
            state = PartitionStateNode(
                leader=self.broker_id, leader_epoch=self._leader_epoch, isr=new,
                controller_epoch=self._controller_epoch,
            )
            outcome = self._isr_store.write_isr(self.tp, state, self._partition_epoch)
            if isinstance(outcome, IsrWritten):
                self._set_isr(new, outcome.partition_epoch)
                return True
            if not isinstance(outcome, IsrConflict):
                log.warning("ISR update of %s failed, will retry: %s", self.tp, outcome.reason)
                return False
            current = outcome.current
            if (
                current is None
                or current.leader != self.broker_id
                or current.leader_epoch != self._leader_epoch
            ):
                log.info("ISR update of %s skipped: the controller moved it on (%s)",
                         self.tp, current)
                log_fenced("broker", self.broker_id, "ISR write", "stale leader epoch",
                           given=self._leader_epoch,
                           current=current.leader_epoch if current is not None else None,
                           partition=self.tp)
                return False
            if current.isr == new:  # our own earlier write landed after all
                self._set_isr(new, outcome.partition_epoch)
                return True
            self._isr = current.isr
            self._partition_epoch = outcome.partition_epoch
        return False

    def _set_isr(self, isr: tuple[int, ...], partition_epoch: int) -> None:
        log.info("%s: ISR %s -> %s (partition epoch %d)", self.tp, self._isr, isr,
                 partition_epoch)
        counts = self._isr_counts
        if counts is not None:
            if any(r not in isr for r in self._isr):
                counts.shrinks += 1
            if any(r not in self._isr for r in isr):
                counts.expands += 1
        self._isr = isr
        self._partition_epoch = partition_epoch
        self._on_isr_change(self.tp)

    # -- follower ------------------------------------------------------------------------------

    def _is_following(self, leader_epoch: int) -> bool:
        return self._role is Role.FOLLOWER and self._leader_epoch == leader_epoch

    def truncate_as_follower(self, offset: int, leader_epoch: int) -> int | None:
        """Truncate the log to ``offset`` for the fetch at ``leader_epoch``; returns the new
        log end offset, or None if the partition no longer follows at that epoch."""
        with self._lock:
            if not self._is_following(leader_epoch):
                return None
            self.log.truncate_to(offset)
            leo = self.log.log_end_offset
            if self._hw > leo:
                self._hw = leo
            return leo

    def restart_log_as_follower(self, offset: int, leader_epoch: int) -> int | None:
        """Drop the whole log and start it empty at ``offset`` (the leader's log start)."""
        with self._lock:
            if not self._is_following(leader_epoch):
                return None
            self.log.truncate_fully_and_start_at(offset)
            self._hw = offset
            return offset

    def start_from_remote_as_follower(
        self, offset: int, log_start_offset: int, epochs: Sequence[tuple[int, int]],
        producer_snapshot: bytes | None, leader_epoch: int,
    ) -> int | None:
        """Drop the whole log and start it empty at ``offset`` (where the leader's local log
        starts, the end of the remote segment below it) with what lies below from remote
        storage: the log start ``log_start_offset`` (the leader's), the leader epochs of the
        remote segment's checkpoint and its producer snapshot (KIP-405's auxiliary state).
        Returns the new log end offset, or None if the partition no longer follows at that
        epoch. Raises ValueError for epochs or a snapshot that cannot be installed."""
        with self._lock:
            if not self._is_following(leader_epoch):
                return None
            self.log.start_from_remote_state(offset, log_start_offset=log_start_offset,
                                             epochs=epochs, producer_snapshot=producer_snapshot)
            self._hw = offset
            return offset

    def append_as_follower(
        self, records: bytes, leader_hw: int, leader_epoch: int
    ) -> int | None:
        """Append fetched batches and take the leader's HW (capped at our log end); returns
        the new log end offset, or None if the partition no longer follows at that epoch.
        Storage errors (out-of-order offsets, epochs going back) propagate."""
        with self._lock:
            if not self._is_following(leader_epoch):
                return None
            log_ = self.log
            if records:
                log_.append_as_follower(records)
            leo = log_.log_end_offset
            self._hw = leader_hw if leader_hw < leo else leo
            return leo

