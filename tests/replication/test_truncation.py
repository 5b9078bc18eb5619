"""Follower truncation by leader epoch, in rounds, checked against simulated logs."""

from pathlib import Path

import pytest

from replication.epochs import (
    EpochEndOffset,
    EpochEntry,
    end_offset_for,
    truncate_entries_from_end,
)
from replication.log import Log
from replication.truncation import (
    AskAgain,
    FollowerEpochView,
    Truncate,
    decide_truncation,
    decide_without_epochs,
    first_epoch_to_ask,
)

from ._util import batch


def entries(*pairs: tuple[int, int]) -> tuple[EpochEntry, ...]:
    return tuple(EpochEntry(epoch=e, start_offset=o) for e, o in pairs)


def view(pairs: tuple[tuple[int, int], ...], leo: int, start: int = 0) -> FollowerEpochView:
    return FollowerEpochView(entries=entries(*pairs), log_start_offset=start, log_end_offset=leo)


def run_protocol(
    follower: FollowerEpochView, leader: tuple[EpochEntry, ...], leader_leo: int
) -> tuple[int, list[int]]:
    """Drive the rounds as a fetcher would; returns the final offset and the epochs asked."""
    asked: list[int] = []
    epoch = first_epoch_to_ask(follower)
    assert epoch is not None
    for _ in range(20):
        asked.append(epoch)
        answer = end_offset_for(leader, epoch, leader_leo)
        decision = decide_truncation(follower, epoch, answer)
        assert decision.offset <= follower.log_end_offset
        follower = FollowerEpochView(
            entries=truncate_entries_from_end(follower.entries, decision.offset),
            log_start_offset=follower.log_start_offset,
            log_end_offset=decision.offset,
        )
        match decision:
            case Truncate(offset=offset):
                return offset, asked
            case AskAgain(epoch=next_epoch):
                epoch = next_epoch
    raise AssertionError("the rounds did not end")


def test_rounds_walk_back_over_several_epochs_the_leader_never_had() -> None:
    # The follower led in epochs 2, 3 and 5 while cut off; the leader knows 0, 1, 4 and leads
    # epoch 6, which it entered (as Kafka's makeLeader does) at its log end offset 50.
    follower = view(((0, 0), (2, 10), (3, 20), (5, 30)), leo=40)
    leader = entries((0, 0), (1, 8), (4, 15), (6, 50))
    offset, asked = run_protocol(follower, leader, leader_leo=50)
    # Ask 5 -> (4, 50): unknown, cut to 30; ask 3 -> (1, 15): unknown, cut to 10;
    # ask 0 -> (0, 8): known, cut to 8.
    assert asked == [5, 3, 0]
    assert offset == 8


def test_first_round_of_the_example_is_ask_again() -> None:
    follower = view(((0, 0), (2, 10), (3, 20), (5, 30)), leo=40)
    decision = decide_truncation(follower, 5, EpochEndOffset(epoch=4, end_offset=50))
    assert decision == AskAgain(offset=30, epoch=3)


def test_matching_epoch_truncates_to_the_smaller_end() -> None:
    follower = view(((0, 0), (3, 100)), leo=180)
    assert decide_truncation(follower, 3, EpochEndOffset(epoch=3, end_offset=150)) == Truncate(
        offset=150
    )
    assert decide_truncation(follower, 3, EpochEndOffset(epoch=3, end_offset=400)) == Truncate(
        offset=180
    )


def test_leader_answers_an_older_epoch_the_follower_also_knows() -> None:
    follower = view(((1, 0), (2, 10), (4, 20)), leo=30)
    # The leader never had epoch 4, and its epoch 2 ends at 14. Epoch 2 is known to both, so no
    # extra round is needed.
    assert decide_truncation(follower, 4, EpochEndOffset(epoch=2, end_offset=14)) == Truncate(
        offset=14
    )


def test_kip101_scenario_1_hw_truncation_would_lose_committed_data() -> None:
    # Leader A and follower B both hold m1, m2 (offsets 0, 1) in epoch 0. B's HW is still 1
    # (the leader's HW update had not reached it) when B restarts. Truncating to the HW would
    # drop m2, and if A then dies and B leads, the committed m2 is gone.
    follower_hw = 1
    follower = view(((0, 0),), leo=2)
    answer = end_offset_for(entries((0, 0)), 0, 2)
    decision = decide_truncation(follower, 0, answer)
    assert decision == Truncate(offset=2)
    assert decision.offset != follower_hw


def test_kip101_scenario_2_hw_truncation_would_keep_diverged_data() -> None:
    # A (epoch 0) wrote m1, m2; B (epoch 0) had only m1 when both crashed. B came back first and
    # leads epoch 1, writing m3 at offset 1. A returns with HW 2: truncating to its HW keeps m2
    # at offset 1, which now differs from the leader's m3 forever.
    follower_hw = 2
    follower = view(((0, 0),), leo=2)
    leader = entries((0, 0), (1, 1))
    offset, asked = run_protocol(follower, leader, leader_leo=2)
    assert (offset, asked) == (1, [0])
    assert offset < follower_hw


def test_follower_behind_leader_keeps_everything() -> None:
    follower = view(((0, 0), (1, 5)), leo=7)
    offset, _ = run_protocol(follower, entries((0, 0), (1, 5), (2, 12)), leader_leo=20)
    assert offset == 7


def test_an_epoch_the_leader_no_longer_has_keeps_the_follower_below_the_leaders_start() -> None:
    # The leader's history starts at epoch 7 (older segments deleted, its log starts at 500);
    # the follower's data is all from epochs 3 and 4. Kafka's leader answers (4, 500): the
    # follower keeps its log, and its fetch at 200, below the leader's start, is out of range,
    # so it restarts there (see the fetcher and the MiniCluster scenario).
    follower = view(((3, 100), (4, 150)), leo=200, start=90)
    answer = end_offset_for(entries((7, 500)), 4, 900)
    assert answer == EpochEndOffset(epoch=4, end_offset=500)
    assert decide_truncation(follower, 4, answer) == Truncate(offset=200)


def test_undefined_answer_drops_everything_from_the_first_epoch_on() -> None:
    # A leader without any epoch history answers UNDEFINED: nothing of the follower's can be
    # shown to match.
    follower = view(((3, 100), (4, 150)), leo=200, start=90)
    answer = end_offset_for((), 4, 900)
    assert answer.undefined
    assert decide_truncation(follower, 4, answer) == Truncate(offset=100)


def test_follower_knowing_no_epoch_below_the_answer_keeps_nothing_of_its_epochs() -> None:
    follower = view(((5, 40),), leo=60, start=0)
    assert decide_truncation(follower, 5, EpochEndOffset(epoch=2, end_offset=55)) == Truncate(
        offset=40
    )


def test_follower_without_epochs() -> None:
    empty = view((), leo=0)
    assert first_epoch_to_ask(empty) is None
    assert decide_without_epochs(view((), leo=30, start=10)) == Truncate(offset=10)


def test_an_answer_above_the_asked_epoch_is_refused() -> None:
    with pytest.raises(ValueError, match="answered epoch"):
        decide_truncation(view(((1, 0),), leo=5), 1, EpochEndOffset(epoch=2, end_offset=5))


def test_diverged_follower_log_converges_through_real_logs(tmp_path: Path) -> None:
    """Two real logs: the follower truncates by the rounds, then fetches, and ends identical."""
    leader = Log.open(tmp_path / "leader" / "t-0")
    follower = Log.open(tmp_path / "follower" / "t-0")
    for log in (leader, follower):  # common history: epoch 0, offsets 0..5
        for _ in range(3):
            log.append_as_leader(batch(2, value_size=20), leader_epoch=0)
    # Then, across unclean elections, the follower led epochs 1 and 3 and the leader 2 and 4;
    # neither replicated the other's.
    follower.append_as_leader(batch(3, value_size=21), leader_epoch=1)
    follower.append_as_leader(batch(2, value_size=22), leader_epoch=3)
    leader.append_as_leader(batch(4, value_size=23), leader_epoch=2)
    leader.assign_leader_epoch(4)
    leader.append_as_leader(batch(1, value_size=24), leader_epoch=4)

    epoch = first_epoch_to_ask(follower.epoch_view())
    asked = []
    while epoch is not None:
        asked.append(epoch)
        decision = decide_truncation(
            follower.epoch_view(), epoch, leader.end_offset_for_epoch(epoch)
        )
        follower.truncate_to(decision.offset)
        epoch = decision.epoch if isinstance(decision, AskAgain) else None
    # Ask 3 -> (2, 10): epoch 2 is unknown here, cut to 9 where epoch 3 began; ask 1 -> (0, 6).
    assert asked == [3, 1]
    assert follower.log_end_offset == 6

    while follower.log_end_offset < leader.log_end_offset:
        follower.append_as_follower(leader.read(follower.log_end_offset, 1 << 20).records)
    assert follower.read(0, 1 << 20).records == leader.read(0, 1 << 20).records
    assert follower.leader_epoch_cache.entries == leader.leader_epoch_cache.entries
