"""A follower's Fetch, as its leader answers it, and the check a parked fetch makes when woken.

A follower's fetch (replica id >= 0) is served by the data plane
(:meth:`~replication.replica_manager.ReplicaManager.fetch`): the leader reads up to its log end,
records the follower's position, and answers a diverging epoch when the follower's log
diverged (:mod:`broker.apis.fetch` tells the rest).

A follower keeps an incremental fetch session with its leader (KIP-227) over every partition
it follows there, most of them idle at any time. Its fetch is answered at the cost of what
moved, not of what the session holds:

- A partition whose last read found the follower caught up at the log end (its quiet stamp,
  :attr:`~replication.protocol.FetchResult.quiet`) is not read while nothing about it moved.
  What moves it wakes the purgatory with its key (an append, a high watermark moved by a
  follower's fetch, a leadership change, which wakes every key), and the purgatory keeps the
  keys of its last wakes (:meth:`~broker.purgatory.Purgatory.moved_since`). A fetch looks at
  the partitions woken since the session's last answer, and at those whose last read was not
  quiet, and answers the others as its last answer found them: they are not looked up.
- A moved log start (retention, DeleteRecords, a tiered log's local segments going; counted
  in ``LogRetention.start_moves``) has the next fetch check every partition of the session.
- So does a sweep, at least once a second (:data:`SWEEP_MS`) and more often when
  ``replica.lag.time.max.ms`` is short: it tells what moved with no wake (a high watermark
  moved by the ISR check's shrink), and records the follower caught up on every quiet
  partition (:meth:`~replication.partition.Partition.follower_unchanged`).

Where this differs from Kafka, which reads every partition of the session on every fetch: a
quiet partition's follower is recorded as caught up at the last sweep, not at the last fetch,
so the ISR check sees it up to a sweep later than Kafka would (the sweep comes often enough
that a follower fetching at ``replica.fetch.wait.max.ms`` never lags ``replica.lag.time.max.ms``
by it); and a high watermark moved by an ISR shrink reaches the other followers by the next
sweep rather than by their next fetch.

A follower's session reads its partitions in the session's order (a partition that returned
records goes to the end, :attr:`~broker.fetch_sessions.CachedPartition.rank`), as Kafka's does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Hashable, Sequence
from datetime import timedelta
from typing import Any, NamedTuple

from kio.schema.errors import ErrorCode

from broker.apis.base import RequestContext
from broker.apis.fetch_session import (
    FetchContext,
    PartitionRead,
    Wanted,
    close_reads,
    leader_partition,
)
from broker.fetch_sessions import CachedPartition
from broker.purgatory import delete_records_key
from coordinator.codecs import TopicPartition
from replication.errors import StorageError
from replication.log import LogSlice
from replication.log_retention import LogRetention
from replication.partition import Partition

__all__ = ["SWEEP_MS", "follower_fetch", "readable"]

SWEEP_MS = 1000
"""How often, at most, a follower's fetch checks every partition of its session (less when
``replica.lag.time.max.ms`` is short: see :func:`_sweep_ms`)."""


def _follower_read(ctx: RequestContext, want: Wanted, replica_id: int, limit: int,
                   update: bool) -> PartitionRead:
    index = want.tp.partition
    if want.unknown_id:
        return PartitionRead(index=index, error=ErrorCode.unknown_topic_id)
    partition, error = leader_partition(ctx, want.tp, want.leader_epoch)
    if partition is None or error is not ErrorCode.none:
        return PartitionRead(index=index, error=error)
    hw_before = partition.high_watermark
    result = ctx.broker.replica_manager.fetch(want.tp, want.offset, limit, replica_id,
                                              want.leader_epoch, want.last_fetched_epoch,
                                              update_state=update,
                                              log_start_offset=want.log_start_offset,
                                              as_slice=True)
    if result.high_watermark > hw_before:
        ctx.broker.purgatory.wake(want.tp)  # consumers parked on the HW may now read
    if update:  # the follower's log start may have reached a DeleteRecords' offset
        ctx.broker.purgatory.wake(delete_records_key(want.tp))
    read = PartitionRead(index=index, error=ErrorCode(int(result.error)),
                         high_watermark=result.high_watermark,
                         log_start_offset=result.log_start_offset,
                         records=result.records or None, quiet=result.quiet)
    if result.diverging_epoch >= 0:
        read.diverging = (result.diverging_epoch, result.diverging_end_offset)
    return read


def _quiet_read(want: Wanted, cached: CachedPartition) -> PartitionRead:
    """The read of a session partition still as its last read found it (nothing to send):
    made once per quiet stamp and kept with the session partition."""
    quiet = cached.quiet
    assert quiet is not None
    read = cached.quiet_read
    if read is None or read.quiet is not quiet:
        read = cached.quiet_read = PartitionRead(
            index=want.tp.partition, error=ErrorCode.none, high_watermark=quiet[2],
            log_start_offset=quiet[3], quiet=quiet)
    return read


def _quiet_finder(ctx: RequestContext) -> Callable[[TopicPartition], Partition | None] | None:
    """How :func:`_unchanged` finds the partitions of a fetch: None while the replica
    manager is not running (every partition is then read)."""
    rm = ctx.broker.replica_manager
    return rm.partition if rm.running else None


def _unchanged(find: Callable[[TopicPartition], Partition | None] | None, want: Wanted,
               replica_id: int, cached: CachedPartition | None, update: bool,
               now_ms: int | None = None) -> bool:
    """Whether a session partition the follower did not name again, whose last read found
    nothing (its quiet stamp), would find nothing now: then it is not read (and, with
    ``update``, the fetch is recorded as caught up at ``now_ms``), as if read; the answer
    is the same. ``find``: :func:`_quiet_finder`'s, looked up once per fetch."""
    if find is None or cached is None or cached.quiet is None or want.unknown_id:
        return False
    partition = find(want.tp)
    return partition is not None and partition.follower_unchanged(
        replica_id, cached.quiet, update_state=update, now_ms=now_ms)


def _sweep_ms(ctx: RequestContext, max_wait_ms: int) -> int:
    """How long a follower's session may go without a fetch that checks every partition:
    :data:`SWEEP_MS`, or half of what ``replica.lag.time.max.ms`` leaves beyond the fetch's
    wait, so that a quiet partition's follower, recorded as caught up by the sweeps, is
    never taken for lagging."""
    lag = ctx.broker.replica_manager.config.replica_lag_time_max_ms
    return min(SWEEP_MS, max(0, lag - max_wait_ms) // 2)


def _plan(ctx: RequestContext, use: FetchContext, max_wait_ms: int, now: int) -> None:
    """What a follower's fetch of its session looks at (``use.order``): the partitions
    woken since its last answer and those whose last read was not quiet, or, when a sweep
    is due, the purgatory no longer has every wake since, or a log start moved, all of
    them (then ``use.swept_ms`` is ``now``). Each in the session's order."""
    view, cached, session = use.view, use.cached, use.session
    if view is None or cached is None or session is None or not session.privileged:
        return  # a sessionless fetch, or a consumer's: every partition, as named
    purgatory = ctx.broker.purgatory
    use.seen, use.starts = purgatory.moves, LogRetention.start_moves
    moved = None
    if (view.reads is not None and view.starts == use.starts
            and now - view.swept_ms < _sweep_ms(ctx, max_wait_ms)
            and ctx.broker.replica_manager.running):
        moved = purgatory.moved_since(view.seen)
    if moved is None:
        use.order, use.swept_ms = view.by_rank(session.moved), now
        return
    look = set(view.loud)
    positions = use.positions()
    for key in moved:
        at = positions.get(key)
        if at is not None:
            look.update(at)
    use.order = sorted(look, key=lambda i: cached[i].rank)


class FollowerReads(NamedTuple):
    reads: list[PartitionRead]
    """Each partition's, as ``wanted`` lists them."""
    size: int
    """The bytes of records read, in all."""
    urgent: bool
    """A partition answered an error or a diverging epoch: the fetch is answered now."""
    loaded: list[int]
    """The positions of the reads with records."""


def _follower_reads(ctx: RequestContext, use: FetchContext, replica_id: int, max_bytes: int,
                    *, update: bool = True, earlier: Sequence[PartitionRead] | None = None,
                    again: Collection[int] | None = None) -> FollowerReads:
    """The partitions at ``use.order`` (every one when None), in that order, the request's
    byte budget shared (a partition read once the budget is spent still returns its first
    batch: the follower's position moves on every partition it asks about, as Kafka's does).
    The others keep their ``earlier`` read, and so do those of the order not ``again``
    (None: all of them are read again). A parked fetch completing reads without ``update``:
    its fetch was recorded when it arrived, as Kafka's DelayedFetch does (the follower may
    have stopped since, and must not rejoin an ISR by it). A session partition whose last
    read found nothing (its quiet stamp) and that
    :meth:`~replication.partition.Partition.follower_unchanged` finds the same is not read
    (with ``update``, the fetch is recorded as caught up), as if read: the answer is the
    same."""
    wanted, cached = use.wanted, use.cached
    find = _quiet_finder(ctx) if cached is not None else None
    now = ctx.broker.replica_manager.clock.now_ms()
    left = max_bytes
    urgent = False
    loaded = []
    reads: list[Any] = list(earlier) if earlier is not None else [None] * len(wanted)
    for i in use.looked_at():
        if again is not None and i not in again:
            continue
        want = wanted[i]
        part = cached[i] if cached is not None else None
        if part is not None and _unchanged(find, want, replica_id, part, update, now):
            read = _quiet_read(want, part)
        else:
            read = _follower_read(ctx, want, replica_id, max(1, min(want.max_bytes, left)),
                                  update)
            if read.records is not None:
                left -= len(read.records)
                loaded.append(i)
            if read.error is not ErrorCode.none or read.diverging is not None:
                urgent = True
        reads[i] = read
    return FollowerReads(reads, max_bytes - left, urgent, loaded)


def follower_fetch(ctx: RequestContext, request: Any, use: FetchContext, replica_id: int,
                   max_bytes: int, respond: Callable[[list[PartitionRead]], Any]) -> Any:
    """A follower's fetch: answered (``respond``) at once when it read something, failed, or
    may not wait; else parked until a partition it reads is woken and has something, or
    until its wait is over."""
    max_wait = request.max_wait / timedelta(seconds=1)
    now = ctx.broker.replica_manager.clock.now_ms()
    _plan(ctx, use, int(max_wait * 1000), now)
    base = use.view.reads if use.order is not None and use.view is not None else None
    reads, size, urgent, loaded = _follower_reads(ctx, use, replica_id, max_bytes,
                                                  earlier=base)
    wanted, cached = use.wanted, use.cached
    if max_wait <= 0 or not wanted or size >= request.min_bytes or urgent:
        return respond(reads)
    rm = ctx.broker.replica_manager
    # What the parked fetch reads again when it completes: a partition woken meanwhile (an
    # append, a moved HW), one that had records (closed here) or that the leader's throttle
    # held back. The others answer as they read on arrival: nothing changed them that a
    # follower must hear of at once (a log start moved by retention is told by the next
    # fetch), as if the answer had been made then and sent late. A wake of every operation
    # (leadership changed) has them all read again.
    held = {i for i in use.looked_at() if rm.leader_throttles(wanted[i].tp, replica_id)} \
        if rm.leader_quota.rate is not None else set()  # (no rate: nothing is throttled)
    stale = held | set(loaded)
    if size:
        close_reads(reads[i] for i in loaded)
    positions = use.positions()
    view, session = use.view, use.session
    woken_all = False
    answer: asyncio.Future = ctx.broker.loop.create_future()

    def complete() -> None:
        if answer.done():
            return
        if woken_all:
            if use.order is not None and view is not None and session is not None:
                use.order = view.by_rank(session.moved)
            done = _follower_reads(ctx, use, replica_id, max_bytes, update=False,
                                   earlier=reads)
        else:
            if use.order is not None and cached is not None:
                use.order = sorted(set(use.order) | stale, key=lambda i: cached[i].rank)
            done = _follower_reads(ctx, use, replica_id, max_bytes, update=False,
                                   earlier=reads, again=stale)
        answer.set_result(respond(done.reads))

    def check() -> bool:
        nonlocal woken_all
        woken_all = True
        return answer.done() or readable(ctx, wanted, request.min_bytes, follower=True,
                                         replica_id=replica_id, cached=cached)

    def check_key(key: Hashable) -> bool:
        at = positions.get(key, ())
        stale.update(at)
        if request.min_bytes > 1:  # the bytes of every partition count
            return check()
        return answer.done() or readable(
            ctx, [wanted[i] for i in at], 1, follower=True, replica_id=replica_id,
            cached=[cached[i] for i in at] if cached is not None else None)

    # A partition held back by the leader's throttle is readable again once the quota
    # refills: the fetch waits no longer than that (appends do not tell it).
    if held:
        max_wait = min(max_wait, rm.leader_quota.wait_time())
    if view is not None:  # a session's: every wake asks its positions
        ctx.broker.purgatory.park((), max_wait, check, complete, check_key=check_key,
                                  scan=positions)
    else:
        ctx.broker.purgatory.park(positions, max_wait, check, complete, check_key=check_key)
    return answer


# -- long polls --------------------------------------------------------------------------------


def readable(ctx: RequestContext, wanted: list[Wanted], min_bytes: int, *,
             follower: bool = False, replica_id: int = -1,
             cached: list[CachedPartition] | None = None) -> bool:
    """Kafka's DelayedFetch.tryComplete: enough bytes readable (below the HWs for a consumer,
    below the log ends for a ``follower``), or a partition whose state changed (leadership,
    epoch, offset out of range), which the fetcher must hear of now. A follower's partition
    its leader throttles now (``replica_id``) counts as having nothing to read, and so does
    a session partition still as its last read found it (``cached``)."""
    total = 0
    find = _quiet_finder(ctx) if cached is not None else None
    for i, want in enumerate(wanted):
        if want.unknown_id or want.denied:
            return True
        if cached is not None and _unchanged(find, want, replica_id, cached[i], False):
            continue
        partition, error = leader_partition(ctx, want.tp, want.leader_epoch)
        if partition is None or error is not ErrorCode.none:
            return True
        status = partition.status()
        if want.offset < status.log_start_offset or want.offset > status.log_end_offset:
            return True
        if follower and want.offset < status.local_log_start_offset:
            return True  # OFFSET_MOVED_TO_TIERED_STORAGE, at once
        if follower:
            bound = status.log_end_offset
        elif want.committed:
            bound = partition.log.last_stable_offset(status.high_watermark)
        else:
            bound = status.high_watermark
        if bound <= want.offset:
            continue
        if replica_id >= 0 and ctx.broker.replica_manager.leader_throttles(want.tp, replica_id):
            continue  # nothing goes out to it until the leader's throttle allows
        if min_bytes <= 1:
            return True
        try:
            records = partition.log.read_slice(want.offset, want.max_bytes, bound)
        except StorageError:
            return True
        if isinstance(records, LogSlice):
            total += records.size
            records.close()
        if total >= min_bytes:
            return True
    return False
