"""The fetch session cache's rules (KIP-227): epochs, ids, and which session gives way to a new
one when the cache is full."""

from __future__ import annotations

import itertools

from broker.fetch_sessions import (
    FINAL_EPOCH,
    INVALID_SESSION_ID,
    CachedPartition,
    FetchSession,
    FetchSessionCache,
    PartitionKey,
    SessionView,
    next_epoch,
)
from coordinator.clock import ManualClock


def parts(n: int) -> dict[PartitionKey, CachedPartition]:
    return {("t", p): CachedPartition(fetch_offset=0, max_bytes=1) for p in range(n)}


def held(cache: FetchSessionCache, session_id: int) -> FetchSession:
    session = cache.get(session_id)
    assert session is not None
    return session


def cache_of(slots: int, clock: ManualClock) -> FetchSessionCache:
    ids = itertools.count(1)
    return FetchSessionCache(slots, eviction_seconds=120, clock=clock,
                             random_id=lambda: next(ids))


def test_epochs_count_up_wrap_to_one_and_the_final_epoch_stays() -> None:
    assert [next_epoch(e) for e in (0, 1, 41, 0x7FFFFFFF, FINAL_EPOCH)] == [1, 2, 42, 1, -1]


def test_ids_are_positive_and_never_reused_while_held() -> None:
    drawn = iter([0, 5, 5, 7])  # 0 is no session; 5 is taken by then
    cache = FetchSessionCache(10, random_id=lambda: next(drawn))
    assert cache.create(False, False, parts(1)) == 5
    assert cache.create(False, False, parts(1)) == 7
    session = cache.get(5)
    assert session is not None and session.epoch == 1  # the first incremental fetch's


def test_a_stale_session_gives_way_to_any_new_one() -> None:
    clock = ManualClock()
    cache = cache_of(2, clock)
    follower = cache.create(True, False, parts(100))
    clock.advance(1_000)
    consumer = cache.create(False, False, parts(1))
    clock.advance(121_000)  # both unused for two minutes; the follower's longer
    cache.touch(held(cache, consumer))
    newcomer = cache.create(False, False, parts(1))
    assert newcomer != INVALID_SESSION_ID
    assert follower not in cache and consumer in cache and cache.evictions == 1


def test_a_young_session_is_kept_from_a_consumer_but_not_from_a_follower() -> None:
    clock = ManualClock()
    cache = cache_of(1, clock)
    consumer = cache.create(False, False, parts(1))
    clock.advance(60_000)  # in use, and younger than two minutes
    cache.touch(held(cache, consumer))
    assert cache.create(False, False, parts(50)) == INVALID_SESSION_ID
    follower = cache.create(True, False, parts(1))
    assert follower != INVALID_SESSION_ID and consumer not in cache
    # a follower's young session is kept from another follower
    assert cache.create(True, False, parts(500)) == INVALID_SESSION_ID


def test_an_old_enough_session_gives_way_to_a_larger_or_more_privileged_one_only() -> None:
    clock = ManualClock()
    cache = cache_of(2, clock)
    small = cache.create(False, False, parts(2))
    big = cache.create(False, False, parts(10))
    clock.advance(200_000)
    for s in (small, big):  # used just now: not stale, but old enough
        cache.touch(held(cache, s))
    assert cache.create(False, False, parts(2)) == INVALID_SESSION_ID  # as small: no
    larger = cache.create(False, False, parts(3))
    assert larger != INVALID_SESSION_ID and small not in cache and big in cache
    assert len(cache) == 2 and cache.partitions == 13


def test_session_updates_replace_request_fields_and_keep_what_was_answered() -> None:
    cache = FetchSessionCache(1)
    sid = cache.create(False, False, {("t", 0): CachedPartition(
        fetch_offset=0, max_bytes=1, high_watermark=7, log_start_offset=0)})
    session = cache.get(sid)
    assert session is not None
    session.update([(("t", 0), CachedPartition(fetch_offset=7, max_bytes=2, leader_epoch=3)),
                    (("t", 1), CachedPartition(fetch_offset=0, max_bytes=1))], [("t", 9)])
    kept = session.partitions[("t", 0)]
    assert (kept.fetch_offset, kept.max_bytes, kept.leader_epoch, kept.high_watermark) == (
        7, 2, 3, 7)
    assert not kept.must_answer(records=0, high_watermark=7, log_start_offset=0, error=False,
                                diverging=False)
    assert kept.must_answer(records=0, high_watermark=8, log_start_offset=0, error=False,
                            diverging=False)
    kept.answered(high_watermark=7, log_start_offset=0, error=True)
    assert kept.must_answer(records=0, high_watermark=7, log_start_offset=0, error=False,
                            diverging=False)  # after an error the HW is said again
    session.update([], [("t", 0)])
    assert list(session.partitions) == [("t", 1)]


def test_a_sessions_view_is_dropped_when_its_partitions_change_and_kept_otherwise() -> None:
    """The view a fetch reads is built again when a partition is added or forgotten, and
    for a consumer's session when one moves to the end; a partition the fetcher changed
    is named for the caller to update in place, and an idle fetch keeps the view."""
    session = FetchSession(1, False, False, 0.0, 0.0, partitions=parts(3))
    changes = [
        lambda: session.update([(("t", 7), CachedPartition(fetch_offset=0, max_bytes=1))], []),
        lambda: session.update([], [("t", 2)]),
        lambda: session.to_end(("t", 0)),
    ]
    for change in changes:
        session.view = SessionView(None, False, [], [], {})
        change()
        assert session.view is None
    kept = session.view = SessionView(None, False, [], [], {})
    assert session.update([(("t", 1), CachedPartition(fetch_offset=5, max_bytes=1))],
                          [("t", 9)]) == [("t", 1)]  # changed in place; 9 was not held
    assert session.partitions[("t", 1)].fetch_offset == 5
    session.to_end(("t", 9))  # not in the session
    assert session.view is kept


def test_a_followers_session_keeps_its_view_and_orders_its_partitions_by_rank() -> None:
    """A follower's session ranks its partitions in its order (a partition that returned
    records goes to the end, one added comes last): the view keeps its positions and gives
    them in the session's order now."""
    session = FetchSession(1, True, False, 0.0, 0.0, partitions=parts(3))
    view = session.view = SessionView(None, False, [], list(session.partitions.values()), {})
    assert view.by_rank(session.moved) == [0, 1, 2]
    session.to_end(("t", 0))
    session.to_end(("t", 1))
    assert session.view is view
    assert view.by_rank(session.moved) == [2, 0, 1]
    assert list(session.partitions) == [("t", 2), ("t", 0), ("t", 1)]
    session.update([(("t", 5), CachedPartition(fetch_offset=0, max_bytes=1))], [])
    assert session.view is None
    ranks = [part.rank for part in session.partitions.values()]
    assert ranks == sorted(ranks) and len(set(ranks)) == 4  # the dict's order is the ranks'
