"""A follower broker's replica fetcher: truncate by leader epochs, then fetch from the leaders.

One :class:`ReplicaFetcher` serves every partition its broker follows. A partition enters it in
the *truncating* state whenever its leader or leader epoch changes, and leaves that state after
the OffsetsForLeaderEpoch rounds of :mod:`replication.truncation` (KIP-101 as refined by
KIP-279): ask about the latest local epoch; if the leader answers with an epoch this log does
not have, cut where the largest local epoch below it ends and ask about that one; once the
epochs match, cut at the smaller of the two end offsets. It then fetches from its log end.
Never does it truncate to its high watermark. Whenever a leader's answer shows the log no
longer continues the leader's (a fetched batch does not follow on, or the fetch offset is
past the leader's end) the partition goes back to the epoch rounds.

:meth:`ReplicaFetcher.run_once` does one round over all partitions, which is what deterministic
tests drive; :meth:`ReplicaFetcher.start` runs rounds on background threads, one per leader
broker as Kafka's fetcher threads are, each sleeping when a round moved nothing until its
leader appends (or the backoff passes). The leaders are reached through ``transport``, a
mapping from broker id to a :class:`~replication.protocol.FetchEndpoint`: in process, the
brokers' replica managers; between processes, network clients speaking Kafka's Fetch
(:mod:`broker.fetch_client`), which take a leader's partitions in one request that waits on
the leader for data (a long poll, so the wait is the request's, not a backoff).

A leader that answers diverging epochs on fetch (Fetch v12+, KIP-595: its endpoint says
``truncates_on_fetch``) spares the rounds: a new follower fetches from its log end at once,
sending the epoch of its last batch, and when the leader answers with a diverging epoch it
truncates by the same decision an OffsetsForLeaderEpoch answer gets, then fetches again (which
asks again, with the epoch now last). Against an older leader, and whenever an answer shows the
log diverged otherwise, the rounds run as above.

A leader's fetcher thread makes a full round, over every partition it follows from that
leader, and then rounds on the partitions that round found, each building again only the
fetches of the partitions the previous answer carried (:class:`_Round`; with a fetch
session, the request names only those that moved): an idle partition costs a round nothing.
Kafka's fetcher builds every partition's fetch each round. A partition added, removed or
truncating, or a throttle with a rate, brings a full round, and so does a second passed
(:data:`SWEEP_SECONDS`): a log start moved by this broker's retention, which no answer
carries, reaches the leader within it.

A partition of a tiered topic (KIP-405) whose fetch offset lies below the leader's local log
start is answered OFFSET_MOVED_TO_TIERED_STORAGE: the fetcher then has ``remote_aux`` build
the state below the leader's local log start from remote storage
(:mod:`replication.tiered.follower`), restarts the log at the end of the remote segment found
with that state installed, and fetches on from there. A failure to build it (the leader or
remote storage not answering) is retried on the next round.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from coordinator.codecs import TopicPartition
from interbroker.errors import ErrorCode
from replication.config import ReplicaConfig
from replication.epochs import EpochEndOffset
from replication.errors import StorageError
from replication.log import LogSlice
from replication.partition import Partition
from replication.protocol import FetchEndpoint, FetchResult, PartitionFetch
from replication.quota import ReplicationQuota
from replication.tiered.follower import RemoteAuxState, TierStateError
from replication.truncation import (
    AskAgain,
    Truncate,
    TruncationDecision,
    decide_truncation,
    decide_without_epochs,
    first_epoch_to_ask,
)

__all__ = ["FetchPosition", "ReplicaFetcher"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchPosition:
    """Where a followed partition stands in its fetcher."""

    leader: int
    leader_epoch: int
    fetch_offset: int
    truncating: bool


class _State:
    __slots__ = ("by_epochs", "fetch_offset", "leader", "leader_epoch", "leader_hw",
                 "truncating", "want")

    def __init__(self, leader: int, leader_epoch: int) -> None:
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.fetch_offset = -1
        self.truncating = True
        self.leader_hw = -1
        """The leader's HW as last answered: at or past it, the replica is in sync and no
        throttle applies to it (Kafka's PartitionFetchState.isReplicaInSync)."""
        self.by_epochs = False
        """Truncate by the OffsetsForLeaderEpoch rounds even where the leader would answer a
        diverging epoch on fetch: its answer already showed the log diverged."""
        self.want: PartitionFetch | None = None
        """What the last batched fetch asked of this partition."""


class _Worker:
    """The background thread fetching from one leader broker, and what wakes it."""

    __slots__ = ("thread", "wake")

    def __init__(self) -> None:
        self.wake = threading.Event()
        self.thread: threading.Thread | None = None


SWEEP_SECONDS = 1.0
"""How long a leader's fetcher goes on the partitions its last full round found (a
:class:`_Round`) before it looks at every one of them again."""


class _Round:
    """A leader's partitions as a full round found them, fetched again as they are by the
    rounds after it (:meth:`ReplicaFetcher._quick_round`), each of which builds again only
    what the previous answer touched. What else moves a partition's fetch is seen by the next
    full round: a partition added, removed or following a new leader or epoch (the fetcher's
    ``version``), a truncation, the throttle, and within :data:`SWEEP_SECONDS` anything else
    (a log start moved by this broker's retention)."""

    __slots__ = ("endpoint", "index", "on_fetch", "ready", "swept", "touched", "version",
                 "wanted")

    def __init__(self, endpoint: FetchEndpoint, on_fetch: bool, version: int,
                 ready: list[tuple[TopicPartition, _State, Partition]],
                 wanted: list[PartitionFetch]) -> None:
        self.endpoint = endpoint
        self.on_fetch = on_fetch
        self.version = version
        self.ready = ready
        self.wanted = wanted
        self.index = {tp: i for i, (tp, _s, _p) in enumerate(ready)}
        self.touched: list[int] = []
        """Positions in ``ready`` of the partitions the last answer carried."""
        self.swept = time.monotonic()


class ReplicaFetcher:
    """Fetches every partition broker ``broker_id`` follows from its leader."""

    def __init__(
        self,
        broker_id: int,
        transport: Mapping[int, FetchEndpoint],
        partitions: Callable[[TopicPartition], Partition | None],
        config: ReplicaConfig,
        remote_aux: Callable[[TopicPartition, FetchEndpoint, int, int], RemoteAuxState]
        | None = None,
        quota: ReplicationQuota | None = None,
        throttled: Callable[[TopicPartition], bool] | None = None,
    ) -> None:
        """``remote_aux(tp, endpoint, leader_epoch, leader_log_start_offset)`` builds a tiered
        partition's state below its leader's local log start (raising
        :class:`~replication.tiered.follower.TierStateError` when it cannot yet); None: this
        broker has no remote storage. ``quota`` and ``throttled``: the follower's replication
        throttle and the partitions it applies to (Kafka's follower ReplicationQuotaManager):
        while the quota is spent, a throttled partition that is behind is left out of fetches,
        and what it fetches is recorded against the quota."""
        self.broker_id = broker_id
        self.quota = quota
        self._throttled = throttled
        self.remote_aux = remote_aux
        self.transport = transport
        self._partitions = partitions
        self._config = config
        self._lock = threading.Lock()
        self._states: dict[TopicPartition, _State] = {}
        self._version = 0
        """Moved on by every change to ``_states``: a :class:`_Round` of another is stale."""
        self._rounds: dict[int, _Round] = {}
        self._workers: dict[int, _Worker] = {}
        self._stopping = threading.Event()
        self._started = False
        self._subscribed: dict[int, tuple[object, Callable[[], None]]] = {}
        self.epoch_requests = 0
        """OffsetsForLeaderEpoch requests sent, for tests and metrics."""
        self.fetch_requests = 0
        self.diverging_epochs = 0
        """Fetch answers that carried a diverging epoch (KIP-595), for tests and metrics."""
        self.remote_restarts = 0
        """Logs restarted on state built from remote storage (KIP-405), for tests and metrics."""

    # -- membership ----------------------------------------------------------------------------

    def add_partition(self, tp: TopicPartition, leader: int, leader_epoch: int) -> None:
        """Follow ``leader`` at ``leader_epoch``: truncation first, then fetching."""
        with self._lock:
            self._states[tp] = _State(leader, leader_epoch)
            self._version += 1
            worker = self._worker(leader)
        worker.wake.set()

    def remove_partition(self, tp: TopicPartition) -> None:
        with self._lock:
            self._states.pop(tp, None)
            self._version += 1

    def follow(self, tp: TopicPartition, leader: int, leader_epoch: int) -> None:
        """The local replica's leader or leader epoch changed: truncate again before fetching
        from ``leader``, or, with no leader (``leader`` < 0), stop fetching."""
        if leader < 0:
            self.remove_partition(tp)
        else:
            self.add_partition(tp, leader, leader_epoch)

    def positions(self) -> dict[TopicPartition, FetchPosition]:
        with self._lock:
            return {
                tp: FetchPosition(
                    leader=s.leader, leader_epoch=s.leader_epoch,
                    fetch_offset=s.fetch_offset, truncating=s.truncating,
                )
                for tp, s in self._states.items()
            }

    # -- one round -----------------------------------------------------------------------------

    def run_once(self, leader: int | None = None) -> int:
        """Truncate what needs it, then fetch once for every partition (of ``leader`` only,
        if given); returns the bytes appended plus the truncations completed (0: the round
        changed nothing). Each leader gets one fetch request for all its partitions when its
        endpoint takes them together (``fetch_partitions``), else one per partition."""
        return self._run_round(leader)[0]

    def _run_round(self, leader: int | None) -> tuple[int, bool]:
        """:meth:`run_once`, and whether a leader answered a batched fetch without errors:
        such a fetch already waited on the leader (a long poll), so no backoff follows it."""
        if leader is not None:
            quick = self._quick_round(leader)
            if quick is not None:
                return quick
        with self._lock:
            version = self._version
            states = [(tp, s) for tp, s in self._states.items()
                      if leader is None or s.leader == leader]
        by_leader: dict[int, list[tuple[TopicPartition, _State]]] = {}
        for tp, state in states:
            by_leader.setdefault(state.leader, []).append((tp, state))
        progress, polled = 0, False
        for leader_id, items in by_leader.items():
            endpoint = self.transport.get(leader_id)
            if endpoint is None:
                continue
            if self._started:
                self._subscribe(leader_id, endpoint)
            moved, answered = self._round(endpoint, items, version)
            progress += moved
            polled = polled or answered
        return progress, polled

    def _round(self, endpoint: FetchEndpoint, items: list[tuple[TopicPartition, _State]],
               version: int = -1) -> tuple[int, bool]:
        """One leader's round over ``items`` (every partition it leads here, as the states
        were at the fetcher's ``version``)."""
        on_fetch = bool(getattr(endpoint, "truncates_on_fetch", False))
        leader = items[0][1].leader if items else -1
        self._rounds.pop(leader, None)
        progress = 0
        ready: list[tuple[TopicPartition, _State, Partition]] = []
        for tp, state in items:
            partition = self._partitions(tp)
            if partition is None:
                self.remove_partition(tp)
                continue
            if state.truncating:
                first = on_fetch and not state.by_epochs and self._fetch_first(state, partition)
                if not first and not self._truncate(tp, state, partition, endpoint):
                    continue
                progress += 1
            ready.append((tp, state, partition))
        # every partition fetched, none held by the throttle: the rounds after this one may
        # go on these (the throttle's byte budget changes from round to round)
        settled = len(ready) == len(items) and not self._throttling()
        if self.quota is not None and self.quota.exceeded():
            ready = [r for r in ready if not self._throttles(r[0], r[1])]
        if not ready:
            return progress, False
        fetch_partitions = getattr(endpoint, "fetch_partitions", None)
        if fetch_partitions is None:
            for tp, state, partition in ready:
                progress += self._fetch(tp, state, partition, endpoint)
            return progress, False
        wanted = [self._want(tp, state, partition, on_fetch) for tp, state, partition in ready]
        self.fetch_requests += 1
        results = fetch_partitions(self.broker_id, wanted)
        kept = _Round(endpoint, on_fetch, version, ready, wanted) \
            if settled and version >= 0 and leader >= 0 else None
        moved, answered = self._answered(endpoint, results, ready, wanted, kept)
        if kept is not None:
            self._rounds[leader] = kept
        return progress + moved, answered

    def _want(self, tp: TopicPartition, state: _State, partition: Partition,
              on_fetch: bool) -> PartitionFetch:
        """What the next fetch asks of ``tp``: the same object as last time while nothing
        moved (the session's delta sees it unchanged at a glance)."""
        last = self._last_fetched_epoch(partition) if on_fetch else -1
        want, max_bytes, start = state.want, self._max_bytes(tp, state), \
            partition.log.log_start_offset
        if (want is None or want.fetch_offset != state.fetch_offset
                or want.leader_epoch != state.leader_epoch
                or want.last_fetched_epoch != last or want.max_bytes != max_bytes
                or want.log_start_offset != start):
            want = state.want = PartitionFetch(
                tp=tp, fetch_offset=state.fetch_offset, leader_epoch=state.leader_epoch,
                last_fetched_epoch=last, max_bytes=max_bytes, log_start_offset=start)
        return want

    def _answered(self, endpoint: FetchEndpoint, results: Mapping[TopicPartition, FetchResult],
                  ready: list[tuple[TopicPartition, _State, Partition]],
                  wanted: list[PartitionFetch], kept: _Round | None) -> tuple[int, bool]:
        """Each partition the leader answered (a fetch session answers only those with news),
        handled; with ``kept``, their positions noted in it."""
        # A leader that held the request (a long poll) waited already; with no wait at the
        # leader (replica.fetch.wait.max.ms 0) an empty answer backs off as usual.
        answered = bool(getattr(endpoint, "long_polls", True))
        progress = 0
        index = kept.index if kept is not None else {tp: i for i, (tp, _s, _p) in enumerate(ready)}
        for key, result in results.items():
            i = index.get(key)
            if i is None:
                continue
            tp, state, partition = ready[i]
            if kept is not None and self._partitions(tp) is not partition:
                kept.version = -1  # the replica changed since the full round: another one
                continue
            if result.error != ErrorCode.NONE:
                answered = False
            progress += self._handle(tp, state, partition, result, wanted[i].last_fetched_epoch,
                                     endpoint)
            if kept is not None:
                kept.touched.append(i)
        return progress, answered

    def _quick_round(self, leader: int) -> tuple[int, bool] | None:
        """A round on the partitions of the leader's last full round (:class:`_Round`), each
        fetched as it was asked for but those its answer touched, which are built again; None
        when a full round must run instead."""
        kept = self._rounds.get(leader)
        if kept is None:
            return None
        endpoint = self.transport.get(leader)
        if (kept.version != self._version or endpoint is not kept.endpoint
                or time.monotonic() - kept.swept >= SWEEP_SECONDS or self._throttling()
                or bool(getattr(endpoint, "truncates_on_fetch", False)) != kept.on_fetch):
            del self._rounds[leader]
            return None
        changed = []
        for i in kept.touched:
            tp, state, partition = kept.ready[i]
            if state.truncating:
                del self._rounds[leader]
                return None
            want = kept.wanted[i] = self._want(tp, state, partition, kept.on_fetch)
            changed.append(want)
        kept.touched = []
        if self._started:
            self._subscribe(leader, endpoint)
        self.fetch_requests += 1
        results = endpoint.fetch_partitions(  # type: ignore[attr-defined]
            self.broker_id, kept.wanted, changed=changed)
        return self._answered(endpoint, results, kept.ready, kept.wanted, kept)

    def _throttling(self) -> bool:
        """Whether the follower's replication throttle has a rate (its byte budget, and so a
        throttled partition's fetch size, changes from round to round)."""
        return self.quota is not None and self.quota.rate is not None

    def _throttles(self, tp: TopicPartition, state: _State) -> bool:
        """Whether the follower throttle applies to ``tp``: named throttled and behind."""
        return (self._throttled is not None and self._throttled(tp)
                and not (0 <= state.leader_hw <= state.fetch_offset))

    def _max_bytes(self, tp: TopicPartition, state: _State) -> int:
        limit = self._config.replica_fetch_max_bytes
        if self.quota is not None and self._throttles(tp, state):
            return self.quota.read_size(limit)
        return limit

    @staticmethod
    def _last_fetched_epoch(partition: Partition) -> int:
        """The epoch of the log's last batch (its latest epoch entry), -1 if none: the epoch
        :func:`~replication.truncation.first_epoch_to_ask` would ask, read without the log's
        lock (the cache's entries are a tuple, replaced whole)."""
        latest = partition.log.latest_epoch
        return -1 if latest is None else latest

    def _fetch_first(self, state: _State, partition: Partition) -> bool:
        """A new leader that answers diverging epochs on fetch: start fetching at the log end
        at once (Kafka's truncation on fetch, KIP-595); the first answer says where to cut.
        False when the log's epochs cannot be checked that way (a log with batches but no
        epoch history: the rounds decide), or the partition no longer follows this epoch."""
        view = partition.epoch_view()
        if not view.entries and view.log_end_offset != view.log_start_offset:
            return False
        leo = partition.truncate_as_follower(view.log_end_offset, state.leader_epoch)
        if leo is None:
            return False
        state.fetch_offset = leo
        state.truncating = False
        return True

    def _truncate(
        self, tp: TopicPartition, state: _State, partition: Partition, endpoint: FetchEndpoint
    ) -> bool:
        offset = self._truncation_offset(tp, state, partition, endpoint)
        if offset is None:
            return False
        leo = partition.truncate_as_follower(offset, state.leader_epoch)
        if leo is None:
            return False
        state.fetch_offset = leo
        state.truncating = False
        state.by_epochs = False
        return True

    def _truncation_offset(
        self, tp: TopicPartition, state: _State, partition: Partition, endpoint: FetchEndpoint
    ) -> int | None:
        """Where to cut the log before fetching from a new leader; None to try again later."""
        decision = self._truncation_rounds(tp, state, partition, endpoint)
        return None if decision is None else decision.offset

    def _truncation_rounds(
        self, tp: TopicPartition, state: _State, partition: Partition, endpoint: FetchEndpoint
    ) -> TruncationDecision | None:
        """Run the OffsetsForLeaderEpoch rounds; None if the leader could not answer."""
        view = partition.epoch_view()
        asked = first_epoch_to_ask(view)
        if asked is None:
            if view.log_end_offset == view.log_start_offset:
                return Truncate(offset=view.log_end_offset)
            return decide_without_epochs(view)
        for _ in range(len(view.entries) + 1):
            self.epoch_requests += 1
            answer = endpoint.offsets_for_leader_epoch(tp, asked, state.leader_epoch)
            if answer.error:
                log.debug("%s: OffsetsForLeaderEpoch(%d) from %d: %s", tp, asked,
                          state.leader, answer.error.name)
                return None
            try:
                decision = decide_truncation(
                    view, asked, EpochEndOffset(epoch=answer.epoch, end_offset=answer.end_offset)
                )
            except ValueError:
                log.warning("%s: leader %d answered epoch %d to epoch %d", tp, state.leader,
                            answer.epoch, asked)
                return None
            if not isinstance(decision, AskAgain):
                return decision
            if partition.truncate_as_follower(decision.offset, state.leader_epoch) is None:
                return None
            view = partition.epoch_view()
            asked = decision.epoch
        log.warning("%s: truncation did not converge; will retry", tp)
        return None

    def _fetch(
        self, tp: TopicPartition, state: _State, partition: Partition, endpoint: FetchEndpoint
    ) -> int:
        self.fetch_requests += 1
        result = endpoint.fetch(tp, state.fetch_offset, self._max_bytes(tp, state),
                                self.broker_id, state.leader_epoch)
        return self._handle(tp, state, partition, result, -1, endpoint)

    def _handle(
        self, tp: TopicPartition, state: _State, partition: Partition, result: FetchResult,
        last_fetched_epoch: int, endpoint: FetchEndpoint,
    ) -> int:
        """Act on the leader's answer for one partition; returns the progress made."""
        epoch = state.leader_epoch
        error = result.error
        if self.quota is not None and result.records and self._throttles(tp, state):
            self.quota.record(len(result.records))
        if result.high_watermark >= 0:
            state.leader_hw = result.high_watermark
        if error == ErrorCode.NONE and result.diverging_epoch >= 0:
            return self._truncate_on_fetch(tp, state, partition, result, last_fetched_epoch)
        if error == ErrorCode.NONE:
            records = result.records
            assert not isinstance(records, LogSlice)  # endpoints answer followers with bytes
            try:
                leo = partition.append_as_follower(records, result.high_watermark, epoch)
            except StorageError as exc:
                # The fetched batches do not continue this log: it must have diverged.
                log.warning("%s: follower append at %d failed: %s", tp, state.fetch_offset, exc)
                return self._diverged(tp, state, partition, result)
            if leo is None:
                return 0
            state.fetch_offset = leo
            if result.log_start_offset >= 0:
                # Records the leader deleted (DeleteRecords, retention) go here too, up to
                # this replica's HW (Kafka's follower takes the leader's log start).
                partition.log.maybe_increment_log_start_offset(
                    result.log_start_offset, high_watermark=partition.high_watermark)
            return len(result.records)
        if error == ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE:
            return self._start_from_remote(tp, state, partition, result, endpoint)
        if error == ErrorCode.OFFSET_OUT_OF_RANGE:
            if state.fetch_offset >= result.log_start_offset:
                return self._diverged(tp, state, partition, result)
            leo = partition.restart_log_as_follower(result.log_start_offset, epoch)
            if leo is not None:
                state.fetch_offset = leo
                return 1
        return 0

    def _start_from_remote(
        self, tp: TopicPartition, state: _State, partition: Partition, result: FetchResult,
        endpoint: FetchEndpoint,
    ) -> int:
        """The fetch offset is in the remote part of the leader's log: build the state below
        the leader's local log start from remote storage and restart the log above it."""
        if self.remote_aux is None or not partition.log.config.remote_storage_enable:
            log.warning("%s: leader %d says offset %d is in tiered storage, but this broker "
                        "has no remote storage for it", tp, state.leader, state.fetch_offset)
            return 0
        try:
            aux = self.remote_aux(tp, endpoint, state.leader_epoch, result.log_start_offset)
        except TierStateError as exc:
            log.warning("%s: cannot build the log from remote storage yet, will retry: %s",
                        tp, exc)
            return 0
        try:
            leo = partition.start_from_remote_as_follower(
                aux.next_offset, aux.log_start_offset, aux.epochs, aux.producer_snapshot,
                state.leader_epoch)
        except (ValueError, StorageError) as exc:
            log.warning("%s: the state of remote segment %s cannot be installed: %s", tp,
                        aux.segment.segment_id, exc)
            return 0
        if leo is None:
            return 0
        self.remote_restarts += 1
        log.info("%s: log restarted at %d (log start %d) on the state of remote segment "
                 "%d..%d; fetching from leader %d", tp, leo, aux.log_start_offset,
                 aux.segment.start_offset, aux.segment.end_offset, state.leader)
        state.fetch_offset = leo
        return 1

    def _truncate_on_fetch(
        self, tp: TopicPartition, state: _State, partition: Partition, result: FetchResult,
        asked: int,
    ) -> int:
        """The leader answered the last fetched epoch ``asked`` with a diverging epoch: the
        same decision as for an OffsetsForLeaderEpoch answer (truncation.py). When the answer
        is an epoch this log never had, cut where the log's largest epoch below it ends; the
        next fetch sends that epoch and the leader answers again (each round removes an
        epoch, as the rounds do)."""
        self.diverging_epochs += 1
        answer = EpochEndOffset(epoch=result.diverging_epoch,
                                end_offset=result.diverging_end_offset)
        try:
            decision = decide_truncation(partition.epoch_view(), asked, answer)
        except ValueError:
            log.warning("%s: leader %d answered a diverging epoch %d to epoch %d", tp,
                        state.leader, answer.epoch, asked)
            return self._diverged(tp, state, partition, result)
        leo = partition.truncate_as_follower(decision.offset, state.leader_epoch)
        if leo is None:
            return 0
        log.info("%s: diverged from leader %d at epoch %d: truncated to %d", tp, state.leader,
                 answer.epoch, leo)
        state.fetch_offset = leo
        return 1

    def _diverged(
        self, tp: TopicPartition, state: _State, partition: Partition, result: FetchResult
    ) -> int:
        """The leader's answer shows this log no longer continues the leader's (``result``:
        the fetch answer, NONE with batches that do not follow on, or OFFSET_OUT_OF_RANGE past
        the leader's end): find the divergence again by the epoch rounds. Returns the progress
        made (none: the next round truncates)."""
        state.truncating = True
        state.by_epochs = True
        return 0

    # -- background threads --------------------------------------------------------------------

    def _worker(self, leader: int) -> _Worker:
        """The worker of ``leader`` (lock held), its thread started if the fetcher runs."""
        worker = self._workers.get(leader)
        if worker is None:
            worker = self._workers[leader] = _Worker()
        if self._started and worker.thread is None:
            worker.thread = threading.Thread(
                target=self._run, args=(leader, worker),
                name=f"replica-fetcher-{self.broker_id}-from-{leader}", daemon=True)
            worker.thread.start()
        return worker

    def _subscribe(self, leader: int, endpoint: FetchEndpoint) -> None:
        known = self._subscribed.get(leader)
        if known is not None and known[0] is endpoint:
            return
        with self._lock:
            callback = self._worker(leader).wake.set
        add = getattr(endpoint, "add_append_listener", None)
        if add is not None:
            add(callback)
        self._subscribed[leader] = (endpoint, callback)

    def wake(self) -> None:
        """Make the background threads run a round now."""
        with self._lock:
            workers = list(self._workers.values())
        for worker in workers:
            worker.wake.set()

    def start(self) -> None:
        """Fetch in the background: one thread per leader broker followed (Kafka's replica
        fetcher threads, ``num.replica.fetchers`` = 1), so that a slow leader, or a long poll
        waiting on one, holds up only the partitions it leads."""
        with self._lock:
            if self._started:
                return
            self._stopping.clear()
            self._started = True
            for leader in {s.leader for s in self._states.values()}:
                self._worker(leader)

    def _run(self, leader: int, worker: _Worker) -> None:
        backoff = self._config.replica_fetch_backoff_ms / 1000
        while not self._stopping.is_set():
            worker.wake.clear()
            try:
                moved, polled = self._run_round(leader)
            except Exception:  # a bug must not kill replication silently forever
                log.exception("replica fetcher of broker %d from %d failed a round",
                              self.broker_id, leader)
                moved, polled = 0, False
            if not moved and not polled:
                # held back by the throttle: fetch again as soon as the quota allows
                held = self.quota.wait_time() if self.quota is not None else 0.0
                worker.wake.wait(min(backoff, held) if held > 0 else backoff)

    def stop(self) -> None:
        with self._lock:
            if not self._started:
                return
            self._started = False
            self._stopping.set()
            workers = list(self._workers.values())
        for worker in workers:
            worker.wake.set()
        for worker in workers:
            if worker.thread is not None:
                worker.thread.join()
                worker.thread = None
        for endpoint, callback in self._subscribed.values():
            remove = getattr(endpoint, "remove_append_listener", None)
            if remove is not None:
                remove(callback)
        self._subscribed.clear()
