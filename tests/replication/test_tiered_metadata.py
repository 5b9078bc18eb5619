"""Remote segment metadata: the transition table over every pair, the cache's answers, and the
metadata managers (events as files, or as objects in an S3 bucket on moto's server; state
rebuilt from them), one test body for both, and their compaction (the same state after it, and
after a compaction that crashed half-way)."""

from __future__ import annotations

import itertools
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from replication.tiered import (
    FileRemoteLogMetadataManager,
    InvalidTransitionError,
    RemoteLogMetadataCache,
    RemoteLogMetadataManager,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    S3RemoteLogMetadataManager,
    TopicIdPartition,
    UnknownSegmentError,
    is_valid_transition,
    split_transitions,
)
from replication.tiered.s3 import S3ObjectStore, parse_s3_url

from .s3_server import s3_endpoint, s3_url  # noqa: F401 (fixtures)

S = RemoteLogSegmentState
TP = TopicIdPartition(topic_id=uuid.UUID(int=7), topic="t", partition=0)

LEGAL = {
    (None, S.COPY_SEGMENT_STARTED),
    (S.COPY_SEGMENT_STARTED, S.COPY_SEGMENT_STARTED),
    (S.COPY_SEGMENT_STARTED, S.COPY_SEGMENT_FINISHED),
    (S.COPY_SEGMENT_STARTED, S.DELETE_SEGMENT_STARTED),
    (S.COPY_SEGMENT_FINISHED, S.COPY_SEGMENT_FINISHED),
    (S.COPY_SEGMENT_FINISHED, S.DELETE_SEGMENT_STARTED),
    (S.DELETE_SEGMENT_STARTED, S.DELETE_SEGMENT_STARTED),
    (S.DELETE_SEGMENT_STARTED, S.DELETE_SEGMENT_FINISHED),
    (S.DELETE_SEGMENT_FINISHED, S.DELETE_SEGMENT_FINISHED),
}


@pytest.mark.parametrize(("current", "target"),
                         list(itertools.product([None, *S], list(S))))
def test_every_transition_is_legal_exactly_as_kafka_says(current: S | None, target: S) -> None:
    assert is_valid_transition(current, target) == ((current, target) in LEGAL)


def test_split_transitions_keeps_order() -> None:
    moves = [(None, S.COPY_SEGMENT_FINISHED), (None, S.COPY_SEGMENT_STARTED),
             (S.DELETE_SEGMENT_FINISHED, S.COPY_SEGMENT_STARTED)]
    valid, invalid = split_transitions(moves)
    assert valid == [moves[1]]
    assert invalid == [moves[0], moves[2]]


def segment(start: int, end: int, epochs: tuple[tuple[int, int], ...] | None = None,
            size: int = 100, ts: int = 0) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(
        segment_id=RemoteLogSegmentId.generate(TP), start_offset=start, end_offset=end,
        max_timestamp_ms=ts, broker_id=1, event_timestamp_ms=1,
        segment_leader_epochs=epochs or ((0, start),), segment_size_in_bytes=size)


def update(m: RemoteLogSegmentMetadata, state: S) -> RemoteLogSegmentMetadataUpdate:
    return RemoteLogSegmentMetadataUpdate(segment_id=m.segment_id, event_timestamp_ms=2,
                                          state=state, broker_id=1)


def test_metadata_rejects_epochs_that_do_not_fit() -> None:
    with pytest.raises(ValueError):
        segment(10, 20, ((0, 5),))
    with pytest.raises(ValueError):
        segment(10, 20, ((1, 10), (0, 15)))
    with pytest.raises(ValueError):
        RemoteLogSegmentMetadataUpdate(segment_id=segment(0, 1).segment_id,
                                       event_timestamp_ms=0, state=S.COPY_SEGMENT_STARTED,
                                       broker_id=1)


def test_cache_serves_only_finished_segments_and_tracks_highest_offsets() -> None:
    cache = RemoteLogMetadataCache()
    a = segment(0, 99, ((0, 0), (1, 50)))
    cache.add(a)
    assert cache.segment_for(TP, 0, 10) is None  # started, not finished
    assert cache.highest_offset_for_epoch(TP, 0) is None
    cache.update(update(a, S.COPY_SEGMENT_FINISHED))
    assert cache.segment_for(TP, 0, 10).segment_id == a.segment_id
    assert cache.segment_for(TP, 0, 60) is None  # offset 60 was written in epoch 1
    assert cache.segment_for(TP, 1, 60).segment_id == a.segment_id
    assert cache.highest_offset_for_epoch(TP, 0) == 49
    assert cache.highest_offset_for_epoch(TP, 1) == 99
    assert [m.start_offset for m in cache.segments(TP, 1)] == [0]
    cache.update(update(a, S.DELETE_SEGMENT_STARTED))
    assert cache.segment_for(TP, 1, 60) is None
    assert cache.segments(TP, 1) == []
    cache.update(update(a, S.DELETE_SEGMENT_FINISHED))
    assert cache.segments(TP) == []
    assert cache.highest_offset_for_epoch(TP, 1) == 99  # never copied again


def test_cache_refuses_illegal_moves_and_unknown_segments() -> None:
    cache = RemoteLogMetadataCache()
    a = segment(0, 9)
    with pytest.raises(UnknownSegmentError):
        cache.update(update(a, S.COPY_SEGMENT_FINISHED))
    cache.add(a)
    cache.update(update(a, S.COPY_SEGMENT_FINISHED))
    with pytest.raises(InvalidTransitionError):
        cache.add(a)
    cache.update(update(a, S.DELETE_SEGMENT_STARTED))
    with pytest.raises(InvalidTransitionError):
        cache.update(update(a, S.COPY_SEGMENT_FINISHED))
    assert cache.segments(TP)[0].state is S.DELETE_SEGMENT_STARTED


class Store:
    """Metadata managers over one store (``make()``: another broker, or a restart) and the
    event records in it."""

    def __init__(self, kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
        self.kind = kind
        if kind == "file":
            self.make = lambda: FileRemoteLogMetadataManager(tmp_path)
            self.names = lambda: sorted(p.name for p in tmp_path.rglob("*.json"))
        else:
            url = request.getfixturevalue("s3_url")
            endpoint = request.getfixturevalue("s3_endpoint")
            self.make = lambda: S3RemoteLogMetadataManager(url, endpoint_url=endpoint)
            bucket, prefix = parse_s3_url(url)
            objects = S3ObjectStore(bucket, prefix, endpoint_url=endpoint)
            self.names = lambda: sorted(k.rsplit("/", 1)[-1] for k in objects.list("")
                                        if k.endswith(".json"))


@pytest.fixture(params=["file", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    return Store(request.param, tmp_path, request)


def test_manager_is_a_metadata_manager(store: Store) -> None:
    assert isinstance(store.make(), RemoteLogMetadataManager)


def test_manager_rebuilds_its_state_from_the_events(store: Store) -> None:
    first = store.make()
    a, b = segment(0, 9), segment(10, 19, ((2, 10),))
    for m in (a, b):
        first.add_remote_log_segment_metadata(m)
        first.update_remote_log_segment_metadata(update(m, S.COPY_SEGMENT_FINISHED))
    first.update_remote_log_segment_metadata(update(a, S.DELETE_SEGMENT_STARTED))
    again = store.make()  # another broker, or a restart
    listed = again.list_remote_log_segments(TP)
    assert [(m.start_offset, m.state) for m in listed] == [
        (0, S.DELETE_SEGMENT_STARTED), (10, S.COPY_SEGMENT_FINISHED)]
    assert again.highest_offset_for_epoch(TP, 2) == 19
    assert again.remote_log_segment_metadata(TP, 2, 15).segment_id == b.segment_id
    # What the first writes later reaches the second on refresh.
    first.update_remote_log_segment_metadata(update(a, S.DELETE_SEGMENT_FINISHED))
    again.refresh([TP])
    assert [m.start_offset for m in again.list_remote_log_segments(TP)] == [10]


def test_manager_refuses_an_illegal_move_and_writes_nothing(store: Store) -> None:
    rlmm = store.make()
    a = segment(0, 9)
    rlmm.add_remote_log_segment_metadata(a)
    before = store.names()
    assert len(before) == 1
    with pytest.raises(InvalidTransitionError):
        rlmm.update_remote_log_segment_metadata(update(a, S.DELETE_SEGMENT_FINISHED))
    with pytest.raises(UnknownSegmentError):
        rlmm.update_remote_log_segment_metadata(update(segment(5, 6), S.COPY_SEGMENT_FINISHED))
    assert store.names() == before


def test_manager_remove_partition_forgets_it(store: Store) -> None:
    rlmm = store.make()
    rlmm.add_remote_log_segment_metadata(segment(0, 9))
    rlmm.remove_partition(TP)
    assert rlmm.list_remote_log_segments(TP) == []
    assert store.make().list_remote_log_segments(TP) == []
    assert store.names() == []


# -- compaction ----------------------------------------------------------------------------------


def _history(rlmm: RemoteLogMetadataManager) -> list[RemoteLogSegmentMetadata]:
    """Six segments (epochs 0, 0, 1, 1, 2, 2) copied; the first four deleted, the fifth
    being deleted. Returns the segments."""
    segs = [segment(10 * i, 10 * i + 9, ((i // 2, 10 * i),)) for i in range(6)]
    for m in segs:
        rlmm.add_remote_log_segment_metadata(m)
        rlmm.update_remote_log_segment_metadata(update(m, S.COPY_SEGMENT_FINISHED))
    for m in segs[:4]:
        rlmm.update_remote_log_segment_metadata(update(m, S.DELETE_SEGMENT_STARTED))
        rlmm.update_remote_log_segment_metadata(update(m, S.DELETE_SEGMENT_FINISHED))
    rlmm.update_remote_log_segment_metadata(update(segs[4], S.DELETE_SEGMENT_STARTED))
    return segs


def _state(rlmm: RemoteLogMetadataManager) -> object:
    """Every answer a broker asks the metadata for."""
    return ([(m.segment_id, m.start_offset, m.end_offset, m.state)
             for m in rlmm.list_remote_log_segments(TP)],
            [rlmm.highest_offset_for_epoch(TP, e) for e in range(4)],
            [[m.segment_id for m in rlmm.list_remote_log_segments(TP, e)] for e in range(4)],
            [getattr(rlmm.remote_log_segment_metadata(TP, e, o), "segment_id", None)
             for e in range(3) for o in (5, 35, 45, 55)])


def _summaries(store: Store) -> list[str]:
    return [n for n in store.names() if n.startswith("compacted-")]


def test_compaction_keeps_the_state_and_drops_the_records_of_deleted_segments(
        store: Store) -> None:
    first = store.make()
    segs = _history(first)
    before = _state(first)
    assert before[1] == [19, 39, 59, None]  # the highest copied offsets outlive deletions
    assert len(store.names()) == 6 * 2 + 4 * 2 + 1
    assert first.compact(TP, 10, min_stale=17) == 0  # fewer dead records: nothing done
    assert first.compact(TP, 10, min_stale=1) == 16
    assert len(store.names()) == 6 * 2 + 1 - 4 * 2 + 1 and len(_summaries(store)) == 1
    assert _state(first) == before
    assert _state(store.make()) == before  # a restart, or another broker
    # Later deletions sum up with the earlier summary into one.
    first.update_remote_log_segment_metadata(update(segs[4], S.DELETE_SEGMENT_FINISHED))
    before = _state(first)
    assert first.compact(TP, 10, min_stale=1) == 4 + 1
    assert len(_summaries(store)) == 1 and len(store.names()) == 2 + 1
    assert _state(first) == _state(store.make()) == before


def test_a_broker_with_an_older_view_catches_up_with_a_compaction(store: Store) -> None:
    first, other = store.make(), store.make()
    segs = [segment(10 * i, 10 * i + 9) for i in range(3)]
    for m in segs:
        first.add_remote_log_segment_metadata(m)
        first.update_remote_log_segment_metadata(update(m, S.COPY_SEGMENT_FINISHED))
    assert len(other.list_remote_log_segments(TP)) == 3  # it knows them live
    for m in segs[:2]:
        first.update_remote_log_segment_metadata(update(m, S.DELETE_SEGMENT_STARTED))
        first.update_remote_log_segment_metadata(update(m, S.DELETE_SEGMENT_FINISHED))
    assert first.compact(TP, 10, min_stale=1) == 8
    other.refresh([TP])  # the deletion events are gone; the summary tells
    assert _state(other) == _state(first)
    assert [m.start_offset for m in other.list_remote_log_segments(TP)] == [20]


class CrashingStore:
    """An event store that dies (OSError) after deleting ``survive`` records of a call."""

    def __init__(self, inner: Any, survive: int) -> None:
        self.inner = inner
        self.survive = survive

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def delete(self, group: str, names: list[str]) -> None:
        self.inner.delete(group, names[:self.survive])
        raise OSError("the broker died mid-compaction")


def test_a_compaction_that_crashed_loads_to_the_same_state(store: Store, tmp_path: Path) -> None:
    """Killed after the summary is written and some dead records deleted, then (file store)
    with a summary's temporary file left behind: every reload gives the same state, and the
    next compaction finishes the work."""
    first = store.make()
    _history(first)
    before = _state(first)
    dying = store.make()
    dying.store = CrashingStore(dying.store, survive=5)
    with pytest.raises(OSError, match="mid-compaction"):
        dying.compact(TP, 10, min_stale=1)
    assert len(_summaries(store)) == 1 and len(store.names()) == 21 + 1 - 5
    assert _state(store.make()) == before
    if store.kind == "file":
        (group,) = [d for d in tmp_path.iterdir() if d.is_dir()]
        (group / "compacted-torn.json.tmp").write_bytes(b'{"highest_by_ep')
        assert _state(store.make()) == before
    again = store.make()
    assert again.compact(TP, 10, min_stale=1) == 16 - 5 + 1 + (store.kind == "file")
    assert len(_summaries(store)) == 1 and len(store.names()) == 6
    assert not list(tmp_path.rglob("*.tmp"))
    assert _state(again) == _state(store.make()) == _state(first) == before


def test_compaction_forgets_a_deleted_segment_only_when_none_of_its_records_is_left(
        store: Store) -> None:
    first = store.make()
    segs = _history(first)
    day = 24 * 3600 * 1000
    rlmm = store.make()
    group = rlmm._group(TP)  # noqa: SLF001 (the record's content is what is tested)

    def remembered() -> list[str]:
        (summary,) = _summaries(store)
        return [s for s, _t in json.loads(rlmm.store.read(group, summary))["deleted"]]

    # Long after the deletions, but their records are still there: remembered.
    assert first.compact(TP, 10 * day, min_stale=1, forget_after_ms=day) == 16
    assert len(remembered()) == 4
    # The next compaction (of a later deletion) forgets them; the highest offsets stay.
    first.update_remote_log_segment_metadata(update(segs[4], S.DELETE_SEGMENT_FINISHED))
    before = _state(first)
    assert first.compact(TP, 10 * day, min_stale=1, forget_after_ms=day) == 4 + 1
    assert remembered() == [str(segs[4].segment_id.id)]
    assert _state(first) == _state(store.make()) == before
    assert before[1] == [19, 39, 59, None]
