"""Incremental fetch sessions (KIP-227): what a leader remembers of a fetcher's partitions.

A fetcher (a follower's replica fetcher, or a consumer such as Kafka's Java client) that sends
a full fetch with session epoch 0 asks the broker to remember the partitions it named. Kafka
opens sessions for both; a partctl broker opens them for followers only, for now
(:attr:`FetchSessionCache.serves_consumers`): a consumer's full fetch is answered with session
id 0, which the protocol allows (a full cache answers so too), and the consumer goes on with
full fetches, as it did before sessions. One full test run with consumer sessions on saw
Kafka's read_committed Java consumer read one value of a transactional copy twice, which is not
explained yet (a paused copier that polled nothing for two minutes in another run is the
copier's own doing: it had reset to offsets another copier had already committed to the end).

When the cache has room (``max.incremental.fetch.session.cache.slots``), the answer carries a
new session id, and from then on the fetcher sends only what changed: the partitions it adds or whose fetch
position, epoch, log start or size changed, and the ones it drops (``forgotten_topics_data``),
with the epoch counting up (1, 2, ... wrapping from 2**31 - 1 to 1). The broker reads every
partition of a consumer's session on each fetch, as before (a follower's: those that moved,
``broker.apis.fetch_follower``), but answers only the partitions with something to say: records, a high watermark or log start offset that moved since the session
last told it, an error, or a diverging epoch. An idle partition then costs no bytes either way,
and nothing to encode or decode.

Kafka's rules, kept here:

- Epoch -1 (the final epoch) is a fetch without a session; with a session id it closes that
  session first. Epoch 0 with a session id closes it and opens a new one.
- An incremental fetch names a session the cache does not hold: FETCH_SESSION_ID_NOT_FOUND; the
  wrong epoch: INVALID_FETCH_SESSION_EPOCH; a session opened with topic names asked with topic
  ids (Fetch 13+) or the other way round: FETCH_SESSION_TOPIC_ID_ERROR. Each of these answers
  no partitions and changes nothing.
- A session whose last partition is forgotten is closed, and the fetch is answered without one.
- An incremental answer moves each partition it returned records for to the end of the session,
  so the byte budget reaches every partition in turn.
- When the cache is full, a new session may take the place of one unused for longer than the
  eviction time (two minutes); else of the least valuable one that is old enough (older than the
  eviction time): a follower's session ranks above a consumer's, then the larger one, and a
  follower's may also take a consumer's of any age. A session that cannot be made leaves the
  fetcher on full fetches (session id 0), which it retries on its next fetch.

Everything here runs on the broker's event loop.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

from coordinator.clock import SYSTEM_CLOCK, Clock
from coordinator.codecs import TopicPartition
from replication.protocol import QuietStamp

__all__ = [
    "DEFAULT_SLOTS",
    "EVICTION_SECONDS",
    "FINAL_EPOCH",
    "INITIAL_EPOCH",
    "INVALID_SESSION_ID",
    "CachedPartition",
    "FetchSession",
    "FetchSessionCache",
    "PartitionKey",
    "SessionView",
    "Wanted",
    "next_epoch",
]

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
DEFAULT_SLOTS = 1000
"""Kafka's ``max.incremental.fetch.session.cache.slots``."""
EVICTION_SECONDS = 120.0
"""How long a session must go unused before any new one may take its place, and how old a
session must be before a larger one may (Kafka's fixed two minutes)."""
_INT32_MAX = 0x7FFFFFFF

PartitionKey = tuple[str | uuid.UUID, int]
"""A session's name for a partition: (topic name or, from Fetch 13, topic id, partition)."""


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch``: the final epoch stays final, and the count wraps to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _INT32_MAX else epoch + 1


@dataclass(frozen=True, slots=True)
class Wanted:
    """One partition a fetch reads: where from, how much, at which epochs, and how."""

    tp: TopicPartition
    offset: int
    max_bytes: int
    leader_epoch: int
    topic_id: uuid.UUID | None = None
    unknown_id: bool = False
    """Named by an id the metadata cache cannot resolve (the topic name is empty)."""
    last_fetched_epoch: int = -1
    denied: bool = False
    """The principal may not Read the topic (TOPIC_AUTHORIZATION_FAILED)."""
    log_start_offset: int = -1
    """A follower's own log start (v5+), for DeleteRecords' low watermark."""
    committed: bool = False
    """read_committed: up to the last stable offset, with the aborted transactions."""


@dataclass(slots=True)
class CachedPartition:
    """One partition of a session: what the fetcher last asked (its position, its epochs, its
    log start, its size) and what the broker last told it (the high watermark and the log start
    offset; -1: nothing yet, or an error since)."""

    fetch_offset: int
    max_bytes: int
    leader_epoch: int = -1
    last_fetched_epoch: int = -1
    fetcher_log_start: int = -1
    high_watermark: int = -1
    log_start_offset: int = -1
    quiet: QuietStamp | None = None
    """A follower's last read of it found nothing, with the leader at this state
    (:attr:`~replication.protocol.FetchResult.quiet`): while it holds, the next fetch need not
    read it."""
    want: Wanted | None = None
    """What a fetch reads of it, as last built (rebuilt when the fetcher changes it)."""
    quiet_read: Any = None
    """The read a fetch answers for it while ``quiet`` holds (``broker.apis.fetch_session``'s
    ``PartitionRead``, built once per stamp)."""
    rank: int = 0
    """Its place in the session's order (the session's count when it was added or last
    moved to the end): a follower's fetch reads its partitions by rank."""

    @classmethod
    def asked(cls, want: Wanted, *, high_watermark: int = -1, log_start_offset: int = -1,
              quiet: QuietStamp | None = None) -> CachedPartition:
        """A partition as a fetch names it (and, when a full fetch opens the session, as its
        answer told the fetcher)."""
        return cls(fetch_offset=want.offset, max_bytes=want.max_bytes,
                   leader_epoch=want.leader_epoch, last_fetched_epoch=want.last_fetched_epoch,
                   fetcher_log_start=want.log_start_offset, high_watermark=high_watermark,
                   log_start_offset=log_start_offset, quiet=quiet)

    def must_answer(self, *, records: int, high_watermark: int, log_start_offset: int,
                    error: bool, diverging: bool) -> bool:
        """Whether an incremental answer carries this partition (Kafka's rule)."""
        return (records > 0 or error or diverging or high_watermark != self.high_watermark
                or log_start_offset != self.log_start_offset)

    def answered(self, *, high_watermark: int, log_start_offset: int, error: bool) -> None:
        """The answer went with this partition: remember what it said (after an error the
        high watermark is forgotten, so the next answer carries the partition again)."""
        self.high_watermark = -1 if error else high_watermark
        self.log_start_offset = log_start_offset


@dataclass(slots=True, eq=False)
class SessionView:
    """What a fetch reads of a session (``broker.apis.fetch_session``): built with these
    topic ``names`` (None: the session names topics), read_committed or not, its partitions
    as read (``wanted``) and as cached, in the session's order when built, and where each
    partition is in them (by key in ``index``; by topic partition in ``positions``, the keys
    a parked fetch watches, made when first asked).

    A follower's fetch keeps more here (``broker.apis.fetch_follower``): the reads its last
    answer was made of, the positions of the partitions every fetch must read (``loud``:
    their last read was not quiet), the purgatory's count of moves it has looked at
    (``seen``), and when it last checked every partition (``swept_ms``)."""

    names: object
    committed: bool
    wanted: list[Wanted]
    cached: list[CachedPartition]
    index: dict[PartitionKey, int]
    positions: dict[Hashable, list[int]] | None = None
    reads: list[Any] | None = None
    loud: set[int] = field(default_factory=set)
    seen: int = -1
    starts: int = -1
    """``LogRetention.start_moves`` when ``seen`` was counted."""
    swept_ms: int = 0
    ranked: int = -1
    """The session's count of moves to the end when ``order`` was made."""
    order: list[int] | None = None
    """The positions by rank (the session's order now)."""

    def by_rank(self, ranked: int) -> list[int]:
        """Every position, in the session's order now (``ranked``: its count of moves)."""
        if self.order is None or self.ranked != ranked:
            cached = self.cached
            self.order = sorted(range(len(cached)), key=lambda i: cached[i].rank)
            self.ranked = ranked
        return self.order


@dataclass(slots=True, eq=False)
class FetchSession:
    """One fetcher's session: its partitions in order, the epoch its next fetch must carry."""

    id: int
    privileged: bool
    """A follower's (replica id >= 0)."""
    uses_topic_ids: bool
    created: float
    last_used: float
    epoch: int = 1
    partitions: dict[PartitionKey, CachedPartition] = field(default_factory=dict)
    view: SessionView | None = None
    """What a fetch reads of the session, kept while the same partitions are in it (a
    follower's idle fetch names none; one that moves a partition's position names that one,
    and its view is updated in place)."""
    ranks: int = 0
    """How many ranks were given (:attr:`CachedPartition.rank`)."""
    moved: int = 0
    """How many times a partition went to the end."""

    def __post_init__(self) -> None:
        for part in self.partitions.values():
            part.rank = self.ranks
            self.ranks += 1

    def update(self, changed: Iterable[tuple[PartitionKey, CachedPartition]],
               forgotten: Iterable[PartitionKey]) -> list[PartitionKey]:
        """An incremental fetch's partitions: added, or their request fields replaced; then the
        forgotten ones removed. Returns the keys of those replaced (added or forgotten ones
        drop the view, replaced ones are for the caller to update in it)."""
        parts = self.partitions
        replaced = []
        for key, asked in changed:
            known = parts.get(key)
            if known is None:
                self.view = None
                asked.rank = self.ranks
                self.ranks += 1
                parts[key] = asked
            else:
                known.fetch_offset = asked.fetch_offset
                known.max_bytes = asked.max_bytes
                known.leader_epoch = asked.leader_epoch
                known.last_fetched_epoch = asked.last_fetched_epoch
                known.fetcher_log_start = asked.fetcher_log_start
                known.quiet = known.want = known.quiet_read = None
                replaced.append(key)
        for key in forgotten:
            if parts.pop(key, None) is not None:
                self.view = None
        return replaced

    def to_end(self, key: PartitionKey) -> None:
        """Move a partition that returned records behind the others. A consumer's view is
        made again in the new order; a follower's keeps its positions and reads by rank."""
        part = self.partitions.pop(key, None)
        if part is not None:
            self.partitions[key] = part
            part.rank = self.ranks
            self.ranks += 1
            self.moved += 1
            if not self.privileged:
                self.view = None


class FetchSessionCache:
    """The broker's sessions, at most ``slots`` of them (0: none are made)."""

    def __init__(self, slots: int = DEFAULT_SLOTS, *, eviction_seconds: float = EVICTION_SECONDS,
                 clock: Clock = SYSTEM_CLOCK, random_id: Callable[[], int] | None = None,
                 consumers: bool = False) -> None:
        self.slots = slots
        self.serves_consumers = consumers
        """Whether a consumer's full fetch at epoch 0 opens a session too (Kafka's rule); off
        in the broker for now: a consumer is answered without one, as when the cache is
        full, and goes on with full fetches. Followers always get one."""
        self.eviction_seconds = eviction_seconds
        self._clock = clock
        self._random_id = random_id or (lambda: random.randint(1, _INT32_MAX))
        self._sessions: dict[int, FetchSession] = {}
        self.evictions = 0
        """Sessions evicted to make room, for the metrics."""

    def __len__(self) -> int:
        return len(self._sessions)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._sessions

    @property
    def partitions(self) -> int:
        """Partitions held by all the sessions (Kafka's NumIncrementalFetchPartitionsCached)."""
        return sum(len(s.partitions) for s in list(self._sessions.values()))

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def remove(self, session_id: int) -> FetchSession | None:
        return self._sessions.pop(session_id, None)

    def touch(self, session: FetchSession) -> None:
        session.last_used = self._clock.monotonic()

    def create(self, privileged: bool, uses_topic_ids: bool,
               partitions: dict[PartitionKey, CachedPartition]) -> int:
        """A new session holding ``partitions`` (its first incremental fetch carries epoch 1);
        its id, or :data:`INVALID_SESSION_ID` when the cache has no room for it."""
        now = self._clock.monotonic()
        if len(self._sessions) >= self.slots and not self._evict(privileged, len(partitions),
                                                                 now):
            return INVALID_SESSION_ID
        session_id = self._random_id()
        while session_id in self._sessions or session_id == INVALID_SESSION_ID:
            session_id = self._random_id()
        self._sessions[session_id] = FetchSession(session_id, privileged, uses_topic_ids, now, now,
                                                  partitions=partitions)
        return session_id

    def _evict(self, privileged: bool, size: int, now: float) -> bool:
        """Make room for a session of ``size`` partitions (Kafka's tryEvict): the least
        recently used session if it is stale, else the least valuable evictable one, when
        the new one is worth at least as much."""
        if not self._sessions:
            return False
        stalest = min(self._sessions.values(), key=lambda s: (s.last_used, s.id))
        if now - stalest.last_used > self.eviction_seconds:
            self._drop(stalest)
            return True
        candidates = [s for s in self._sessions.values()
                      if now - s.created > self.eviction_seconds
                      or (privileged and not s.privileged)]
        if not candidates:
            return False
        cheapest = min(candidates, key=lambda s: (s.privileged, len(s.partitions), s.id))
        if (privileged, size) <= (cheapest.privileged, len(cheapest.partitions)):
            return False  # the new session (id 0) ranks below one with the same key
        self._drop(cheapest)
        return True

    def _drop(self, session: FetchSession) -> None:
        del self._sessions[session.id]
        self.evictions += 1
