import threading
from pathlib import Path

import pytest

import replication.epochs as epochs_module
from replication.epochs import (
    EpochEndOffset,
    EpochEntry,
    LeaderEpochCache,
    batched_epoch_writes,
    end_offset_for,
)
from replication.errors import CorruptCheckpointError, InvalidEpochError
from replication.log import Log

from .test_replica_manager_cluster import make_batch


def entries(*pairs: tuple[int, int]) -> tuple[EpochEntry, ...]:
    return tuple(EpochEntry(epoch=e, start_offset=o) for e, o in pairs)


def test_checkpoint_file_is_kafkas_text_format_byte_for_byte(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")
    cache.assign(0, 0)
    cache.assign(0, 5)  # same epoch later on: no change
    cache.assign(3, 120)
    cache.assign(4, 9000)
    assert (tmp_path / "leader-epoch-checkpoint").read_bytes() == b"0\n3\n0 0\n3 120\n4 9000\n"
    assert not list(tmp_path.glob("*.tmp"))
    assert LeaderEpochCache(tmp_path / "leader-epoch-checkpoint").entries == entries(
        (0, 0), (3, 120), (4, 9000)
    )


def test_empty_cache_writes_a_zero_count(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")
    cache.assign(1, 10)
    cache.clear()
    assert (tmp_path / "leader-epoch-checkpoint").read_bytes() == b"0\n0\n"


@pytest.mark.parametrize(
    "content",
    [b"1\n0\n", b"0\n2\n0 0\n", b"0\n1\n0\n", b"0\n1\nzero 0\n", b"0\n2\n3 10\n2 20\n", b""],
)
def test_malformed_checkpoint_is_a_typed_error(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "leader-epoch-checkpoint").write_bytes(content)
    with pytest.raises(CorruptCheckpointError):
        LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")


def test_an_older_epoch_replaces_the_entries_it_would_leave_out_of_order(tmp_path: Path) -> None:
    # Kafka's LeaderEpochFileCache.assign: no refusal, the non-monotonic suffix goes.
    cache = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")
    cache.assign(2, 0)
    cache.assign(5, 10)
    assert cache.assign(4, 20)
    assert cache.entries == entries((2, 0), (4, 20))
    assert LeaderEpochCache(tmp_path / "leader-epoch-checkpoint").entries == cache.entries
    cache.assign(1, 30)  # below every epoch: the whole history goes
    assert cache.entries == entries((1, 30))


def test_negative_epochs_and_offsets_are_refused(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")
    cache.assign(2, 0)
    before = (tmp_path / "leader-epoch-checkpoint").read_bytes()
    for epoch, offset in [(-1, 5), (3, -1)]:
        with pytest.raises(InvalidEpochError):
            cache.assign(epoch, offset)
    assert cache.entries == entries((2, 0))
    assert (tmp_path / "leader-epoch-checkpoint").read_bytes() == before


def test_new_epoch_starting_below_earlier_entries_removes_them(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")
    for epoch, offset in [(1, 0), (2, 10), (3, 20)]:
        cache.assign(epoch, offset)
    cache.assign(4, 15)
    assert cache.entries == entries((1, 0), (2, 10), (4, 15))
    cache.assign(4, 12)  # same epoch, earlier start: moved back
    assert cache.entries == entries((1, 0), (2, 10), (4, 12))
    cache.assign(6, 10)
    assert cache.entries == entries((1, 0), (6, 10))


# OffsetsForLeaderEpoch against a log with epochs 1@0, 2@10, 5@30 and log end offset 50.
HISTORY = entries((1, 0), (2, 10), (5, 30))


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        (5, (5, 50)),  # the latest epoch ends at the log end offset
        (2, (2, 30)),  # a known epoch ends where the next one starts
        (1, (1, 10)),
        (3, (2, 30)),  # unknown epoch between: largest known below it, next start
        (4, (2, 30)),
        (0, (0, 0)),  # below the first known epoch: it ends where the first one starts
        (6, (-1, -1)),  # above the latest
        (-1, (-1, -1)),  # UNDEFINED asked
    ],
)
def test_offsets_for_leader_epoch_table(requested: int, expected: tuple[int, int]) -> None:
    assert end_offset_for(HISTORY, requested, 50) == EpochEndOffset(
        epoch=expected[0], end_offset=expected[1]
    )


def test_offsets_for_leader_epoch_on_an_empty_history() -> None:
    assert end_offset_for((), 0, 10).undefined


def test_an_epoch_below_the_first_known_ends_where_the_first_known_starts() -> None:
    # Kafka answers (requested epoch, start of the first entry): earlier epochs were removed
    # with the log's start, and the requester carries on from there.
    trimmed = entries((4, 120), (6, 300))
    assert end_offset_for(trimmed, 1, 400) == EpochEndOffset(epoch=1, end_offset=120)
    assert end_offset_for(trimmed, 3, 400) == EpochEndOffset(epoch=3, end_offset=120)
    assert end_offset_for(trimmed, 5, 400) == EpochEndOffset(epoch=4, end_offset=300)


def test_truncate_from_end_drops_entries_at_or_after_the_offset(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")
    for e in HISTORY:
        cache.assign(e.epoch, e.start_offset)
    cache.truncate_from_end(31)
    assert cache.entries == HISTORY
    cache.truncate_from_end(30)
    assert cache.entries == entries((1, 0), (2, 10))
    assert cache.end_offset_for(2, 25) == EpochEndOffset(epoch=2, end_offset=25)
    assert LeaderEpochCache(tmp_path / "leader-epoch-checkpoint").entries == cache.entries


def test_truncate_from_end_with_an_undefined_offset_changes_nothing(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")
    for e in HISTORY:
        cache.assign(e.epoch, e.start_offset)
    assert not cache.truncate_from_end(-1)
    assert cache.entries == HISTORY
    assert LeaderEpochCache(tmp_path / "leader-epoch-checkpoint").entries == HISTORY
    assert cache.truncate_from_end(0)  # offset 0 is a real cut: everything goes
    assert cache.entries == ()


def test_truncate_from_start_keeps_the_epoch_owning_the_new_start(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")
    for e in HISTORY:
        cache.assign(e.epoch, e.start_offset)
    cache.truncate_from_start(15)
    assert cache.entries == entries((2, 15), (5, 30))
    cache.truncate_from_start(30)
    assert cache.entries == entries((5, 30))
    cache.truncate_from_start(5)  # below the first entry: nothing to do
    assert cache.entries == entries((5, 30))
    assert (tmp_path / "leader-epoch-checkpoint").read_bytes() == b"0\n1\n5 30\n"


def test_the_epoch_that_wrote_an_offset(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")
    assert cache.epoch_at(0) == -1
    cache.assign(2, 10)
    cache.assign(5, 40)
    assert [cache.epoch_at(o) for o in (9, 10, 39, 40, 10_000)] == [-1, 2, 2, 5, 5]


# -- batched writes: many caches changed by one request, their files written together ----------


def _on_disk(cache: LeaderEpochCache) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in LeaderEpochCache(cache.path).entries]


def test_a_batch_changes_memory_at_once_and_the_files_at_its_end(tmp_path: Path) -> None:
    caches = []
    for i in range(40):
        (tmp_path / f"t-{i}").mkdir()
        caches.append(LeaderEpochCache(tmp_path / f"t-{i}" / "leader-epoch-checkpoint"))
        caches[-1].assign(0, 0)
    written_by: set[str] = set()
    real = epochs_module.atomic_write

    def watched(path: Path, data: bytes) -> None:
        written_by.add(threading.current_thread().name)
        real(path, data)

    epochs_module.atomic_write = watched
    try:
        with batched_epoch_writes():
            for i, cache in enumerate(caches):
                assert cache.assign(1, 10 + i)
                assert cache.latest_epoch == 1 and cache.unwritten
                assert _on_disk(cache) == [(0, 0)]  # nothing written yet
            with batched_epoch_writes():  # a nested block joins the outer one
                caches[0].truncate_from_end(5)
            assert _on_disk(caches[0]) == [(0, 0)]
    finally:
        epochs_module.atomic_write = real
    assert [_on_disk(c) for c in caches] == [[(0, 0)]] + [[(0, 0), (1, 10 + i)]
                                                         for i in range(1, 40)]
    assert not any(c.unwritten for c in caches)
    # written by the batch's writers, side by side, not one after another on this thread
    assert written_by and all(name.startswith("epoch-write") for name in written_by)
    assert len(written_by) > 1
    # outside a batch, a change is written at once, as before
    caches[1].assign(2, 50)
    assert _on_disk(caches[1])[-1] == (2, 50) and not caches[1].unwritten


def test_a_batch_write_that_fails_is_raised_after_the_others_and_stays_pending(
        tmp_path: Path) -> None:
    good, bad = tmp_path / "good", tmp_path / "bad"
    good.mkdir()
    bad.mkdir()
    first = LeaderEpochCache(good / "leader-epoch-checkpoint")
    second = LeaderEpochCache(bad / "leader-epoch-checkpoint")
    (bad / "leader-epoch-checkpoint.tmp").mkdir()  # the temporary file cannot be opened
    with pytest.raises(IsADirectoryError), batched_epoch_writes():
        first.assign(3, 7)
        second.assign(3, 7)
    assert _on_disk(first) == [(3, 7)] and not first.unwritten
    assert second.unwritten and second.latest_epoch == 3
    (bad / "leader-epoch-checkpoint.tmp").rmdir()
    second.sync()  # what the log's next flush does
    assert _on_disk(second) == [(3, 7)] and not second.unwritten


def test_a_flush_inside_a_batch_writes_the_epochs_before_the_recovery_point_moves(
        tmp_path: Path) -> None:
    """Recovery rebuilds epochs from the batches past the recovery point only: a flush must
    not move the point past an epoch entry that is not on disk yet."""
    log = Log.open(tmp_path / "t-0")
    try:
        with batched_epoch_writes():
            log.assign_leader_epoch(4)
            assert log.leader_epoch_cache.unwritten
            log.append_as_leader(make_batch(3)[0], leader_epoch=4)
            log.flush()
            assert not log.leader_epoch_cache.unwritten
            assert _on_disk(log.leader_epoch_cache) == [(4, 0)]
            assert log.recovery_point == 3
    finally:
        log.close()
