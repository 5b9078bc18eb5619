"""What one Fetch reads and how its answer is made: the partitions asked, each one's read, and
the fetch's part in the incremental fetch sessions (KIP-227, :mod:`broker.fetch_sessions`).

A fetch without a session (before version 7, or at the final epoch) reads the partitions it
names and answers them all. A full fetch at epoch 0 does the same and opens a session with
them (closing the one it names, if any). An incremental fetch updates its session with the
partitions it names and forgets the ones it drops, moves the session to its next epoch, reads
every partition of the session, and answers only those with news; its answer checks that the
session is still at that epoch (a duplicate request moved it on otherwise).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.apis.base import RequestContext
from broker.fetch_sessions import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    CachedPartition,
    FetchSession,
    PartitionKey,
    SessionView,
    Wanted,
    next_epoch,
)
from coordinator.codecs import TopicPartition
from replication.log import LogSlice
from replication.partition import Partition, Role
from replication.protocol import QuietStamp
from replication.txn_index import AbortedTxn

if TYPE_CHECKING:
    import kio.schema.fetch.v4
    import kio.schema.fetch.v5
    import kio.schema.fetch.v6
    from typing_extensions import TypeIs

    from broker.apis.messages import FetchRequest

__all__ = ["READ_COMMITTED", "FetchContext", "PartitionRead", "Wanted", "check_epoch",
           "close_reads", "leader_partition", "open_context", "replica_id_of", "wanted_of"]

READ_COMMITTED = 1

log = logging.getLogger(__name__)


@dataclass(slots=True, kw_only=True)
class PartitionRead:
    """One partition's part of a fetch response: records as a slice of a segment file
    (consumers) or as bytes (followers, read by the data plane); ``diverging`` the epoch and
    end offset a follower must truncate to."""

    index: int
    error: ErrorCode
    high_watermark: int = -1
    log_start_offset: int = -1
    last_stable_offset: int = -1
    """-1: the HW (no transaction is open below it, or the read did not ask)."""
    records: LogSlice | bytes | None = None
    aborted: tuple[AbortedTxn, ...] | None = None
    """A read_committed read's aborted transactions (None: a read_uncommitted one)."""
    diverging: tuple[int, int] | None = None
    quiet: QuietStamp | None = None
    """A follower's read that found nothing at the log end: the leader's state then."""
    remote: tuple[int, int, bool] | None = None
    """(offset, max bytes, whether at least one batch) of a read to make from remote storage
    (a tiered partition's offset below its local log start)."""

    @property
    def size(self) -> int:
        return len(self.records) if self.records is not None else 0


def check_epoch(current_leader_epoch: int, leader_epoch: int) -> ErrorCode:
    """Kafka's check of a client's current leader epoch (-1: the client does not know it)."""
    if current_leader_epoch < 0 or current_leader_epoch == leader_epoch:
        return ErrorCode.none
    if current_leader_epoch < leader_epoch:
        return ErrorCode.fenced_leader_epoch
    return ErrorCode.unknown_leader_epoch


def leader_partition(ctx: RequestContext, tp: TopicPartition, leader_epoch: int
            ) -> tuple[Partition | None, ErrorCode]:
    partition = ctx.broker.replica_manager.partition(tp)
    if partition is None:
        known = ctx.broker.metadata.snapshot.contains(tp)
        return None, (ErrorCode.not_leader_or_follower if known
                      else ErrorCode.unknown_topic_or_partition)
    role, epoch = partition.leading()
    error = check_epoch(leader_epoch, epoch)
    if error is ErrorCode.none and role is not Role.LEADER:
        error = ErrorCode.not_leader_or_follower
    return partition, error


def close_reads(reads: Iterable[PartitionRead]) -> None:
    """Close the reads' file slices (a response will not carry them)."""
    for read in reads:
        if isinstance(read.records, LogSlice):
            read.records.close()
        read.records = None


def wanted_of(request: Any, names: Mapping[uuid.UUID, str] | None = None) -> list[Wanted]:
    """The partitions asked for, in order; ``names`` resolves topic ids (version 13+)."""
    out = []
    committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
    for topic in request.topics:
        topic_id = getattr(topic, "topic_id", None) if names is not None else None
        name = topic.topic if names is None else names.get(topic_id, "")  # type: ignore[arg-type]
        for p in topic.partitions:
            out.append(Wanted(TopicPartition(name, p.partition), p.fetch_offset,
                               p.partition_max_bytes, getattr(p, "current_leader_epoch", -1),
                               topic_id, names is not None and not name,
                               getattr(p, "last_fetched_epoch", -1),
                               log_start_offset=getattr(p, "log_start_offset", -1),
                               committed=committed))
    return out


def replica_id_of(request: Any) -> int:
    """The fetching replica: -1 for a consumer (in ``replica_state`` from version 15)."""
    state = getattr(request, "replica_state", None)
    return state.replica_id if state is not None else request.replica_id


def _sessionless(request: FetchRequest, version: int) -> TypeIs[
        kio.schema.fetch.v4.FetchRequest | kio.schema.fetch.v5.FetchRequest
        | kio.schema.fetch.v6.FetchRequest]:
    """Whether the request (of ``version``) predates fetch sessions (KIP-227, v7)."""
    return version < 7


@dataclass(slots=True, eq=False)
class FetchContext:
    """A fetch's part in the fetch sessions: the partitions it reads (those it names, or its
    session's), and how its answer is made: without a session, opening one (``opening``), or
    as the incremental answer of ``session`` at ``epoch``."""

    wanted: list[Wanted]
    session: FetchSession | None = None
    epoch: int = 0
    """The epoch ``session`` moved to when this fetch arrived (it answers only if it still
    has it)."""
    opening: bool = False
    privileged: bool = False
    uses_topic_ids: bool = False
    cached: list[CachedPartition] | None = None
    """An incremental fetch's session partitions, as ``wanted`` lists them: a follower's read
    of one whose last read found nothing (its ``quiet`` stamp) checks that stamp first."""
    view: SessionView | None = None
    """An incremental fetch's: the session's view ``wanted`` and ``cached`` come from."""
    order: list[int] | None = None
    """A follower's incremental fetch: the positions it read (or checked), in the session's
    order; the others are as its last answer found them (``view.reads``)."""
    seen: int = -1
    """With ``order``: the purgatory's count of moves when the fetch looked at them."""
    swept_ms: int = -1
    """With ``order``, when the fetch checked every partition (-1: it did not)."""
    starts: int = -1
    """With ``order``: ``LogRetention.start_moves`` when the fetch looked."""

    def looked_at(self) -> Sequence[int]:
        """The positions this fetch reads (or checks), in order: ``order``, or every one."""
        return range(len(self.wanted)) if self.order is None else self.order

    def positions(self) -> dict[Hashable, list[int]]:
        """Where each partition is in ``wanted`` (the keys a parked fetch watches); the
        session's, made once for as long as its partitions stay as they are."""
        view = self.view
        if view is not None and view.positions is not None:
            return view.positions
        positions: dict[Hashable, list[int]] = {}
        for i, want in enumerate(self.wanted):
            positions.setdefault(want.tp, []).append(i)
        if view is not None:
            view.positions = positions
        return positions

    def answer(self, ctx: RequestContext, reads: list[PartitionRead]
               ) -> tuple[int, list[Wanted], list[PartitionRead]] | ErrorCode:
        """The session id the answer carries and the partitions it carries (of ``wanted``,
        read as ``reads``; a follower's fetch of its session: those at ``order``, in that
        order), or the session error it is instead."""
        wanted = self.wanted
        if self.opening:
            cached = {_key(w, self.uses_topic_ids): CachedPartition.asked(
                w, high_watermark=r.high_watermark, log_start_offset=r.log_start_offset,
                quiet=r.quiet) for w, r in zip(wanted, reads, strict=True)}
            session_id = ctx.broker.fetch_sessions.create(self.privileged, self.uses_topic_ids,
                                                          cached)
            return session_id, wanted, reads
        session = self.session
        if session is None:
            return INVALID_SESSION_ID, wanted, reads
        if session.epoch != self.epoch:
            log.info("fetch session %d is at epoch %d, this fetch moved it to %d: a duplicate "
                     "request", session.id, session.epoch, self.epoch)
            return ErrorCode.invalid_fetch_session_epoch
        kept_wants, kept_reads = [], []
        # ``cached`` lists the session's partitions as ``wanted`` does; only a fetch of the
        # next epoch changes them, and then this one answered an error above
        parts = self.cached
        assert parts is not None and len(parts) == len(wanted) == len(reads)
        view = self.view
        if self.order is not None:
            assert view is not None
            view.reads, view.seen, view.starts = reads, self.seen, self.starts
            if self.swept_ms >= 0:
                view.swept_ms = self.swept_ms
        loud = view.loud if view is not None else set()
        for i in self.looked_at():
            want, read, part = wanted[i], reads[i], parts[i]
            part.quiet = read.quiet
            if read.quiet is None:
                loud.add(i)
            else:
                loud.discard(i)
            if (read.quiet is not None and read.high_watermark == part.high_watermark
                    and read.log_start_offset == part.log_start_offset):
                continue  # a caught-up follower's partition with nothing to tell, at a glance
            error = read.error is not ErrorCode.none
            if not part.must_answer(
                    records=read.size, high_watermark=read.high_watermark,
                    log_start_offset=read.log_start_offset, error=error,
                    diverging=read.diverging is not None):
                continue
            part.answered(high_watermark=read.high_watermark,
                          log_start_offset=read.log_start_offset, error=error)
            if read.size:
                session.to_end(_key(want, self.uses_topic_ids))
            kept_wants.append(want)
            kept_reads.append(read)
        return session.id, kept_wants, kept_reads


def _key(want: Wanted, uses_topic_ids: bool) -> PartitionKey:
    if uses_topic_ids and want.topic_id is not None:
        return want.topic_id, want.tp.partition
    return want.tp.topic, want.tp.partition


def _forgotten(request: Any, uses_topic_ids: bool) -> list[PartitionKey]:
    out: list[PartitionKey] = []
    for topic in request.forgotten_topics_data:
        name = topic.topic_id if uses_topic_ids else topic.topic
        out.extend((name, p) for p in topic.partitions)
    return out


def _want_of(key: PartitionKey, part: CachedPartition, names: Mapping[uuid.UUID, str] | None,
             committed: bool) -> Wanted:
    """What a fetch reads of a session partition, named as the metadata cache names it now
    (a topic id it cannot resolve reads as UNKNOWN_TOPIC_ID)."""
    topic, index = key
    if isinstance(topic, uuid.UUID):
        name = names.get(topic, "") if names is not None else ""
        topic_id: uuid.UUID | None = topic
    else:
        name, topic_id = topic, None
    want = part.want
    if want is None or want.tp.topic != name or want.committed != committed:
        want = part.want = Wanted(
            TopicPartition(name, index), part.fetch_offset, part.max_bytes,
            part.leader_epoch, topic_id, topic_id is not None and not name,
            part.last_fetched_epoch, log_start_offset=part.fetcher_log_start,
            committed=committed)
    return want


def _view(session: FetchSession, names: Mapping[uuid.UUID, str] | None,
          committed: bool) -> SessionView:
    """Every partition of ``session``, in its order."""
    parts = session.partitions
    return SessionView(names, committed,
                       [_want_of(key, part, names, committed) for key, part in parts.items()],
                       list(parts.values()), {key: i for i, key in enumerate(parts)},
                       loud={i for i, part in enumerate(parts.values()) if part.quiet is None})


def open_context(ctx: RequestContext, request: Any, names: Mapping[uuid.UUID, str] | None
          ) -> FetchContext | ErrorCode:
    """The fetch's session (Kafka's FetchManager.newContext): none before version 7 or with
    the final epoch, a new one at epoch 0 (either closes the one named), else the named one,
    moved to its next epoch with the request's changes."""
    asked = wanted_of(request, names)
    privileged = replica_id_of(request) >= 0
    if _sessionless(request, ctx.api_version):
        return FetchContext(asked)
    cache = ctx.broker.fetch_sessions
    session_id, epoch = request.session_id, request.session_epoch
    uses_ids = names is not None
    if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
        if session_id != INVALID_SESSION_ID:
            cache.remove(session_id)
        opening = epoch == INITIAL_EPOCH and (privileged or cache.serves_consumers)
        return FetchContext(asked, opening=opening, privileged=privileged,
                            uses_topic_ids=uses_ids)
    session = cache.get(session_id)
    if session is None:
        return ErrorCode.fetch_session_id_not_found
    if session.epoch != epoch:
        return ErrorCode.invalid_fetch_session_epoch
    if session.uses_topic_ids != uses_ids:
        return ErrorCode.fetch_session_topic_id_error
    replaced = session.update(((_key(w, uses_ids), CachedPartition.asked(w)) for w in asked),
                              _forgotten(request, uses_ids))
    if not session.partitions:  # its last partition forgotten: closed
        cache.remove(session_id)
        return FetchContext(asked)
    cache.touch(session)
    session.epoch = next_epoch(session.epoch)
    committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
    view = session.view
    if view is None or view.names is not names or view.committed is not committed:
        view = session.view = _view(session, names, committed)
    else:
        for key in replaced:  # a new position (or epoch, or size) for these: read them again
            i = view.index[key]
            view.wanted[i] = _want_of(key, session.partitions[key], names, committed)
            view.loud.add(i)
    return FetchContext(view.wanted, session=session, epoch=session.epoch,
                        privileged=privileged, uses_topic_ids=uses_ids, cached=view.cached,
                        view=view)
