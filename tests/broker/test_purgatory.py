"""The purgatory's record of its wakes (what a follower's fetch session looks at) and
operations parked on a container of keys rather than on each key."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from broker.purgatory import MOVES_KEPT, Purgatory


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def test_the_wakes_since_a_count_with_repeats_until_every_operation_is_woken(
        loop: asyncio.AbstractEventLoop) -> None:
    purgatory = Purgatory(loop)
    start = purgatory.moves
    purgatory.wake("a")
    purgatory.wake("b")
    middle = purgatory.moves
    purgatory.wake("a")
    assert purgatory.moved_since(start) == ["a", "b", "a"]
    assert purgatory.moved_since(middle) == ["a"]
    assert purgatory.moved_since(purgatory.moves) == []
    purgatory.wake_all()
    after = purgatory.moves
    assert purgatory.moved_since(start) is None and purgatory.moved_since(middle) is None
    purgatory.wake("c")
    assert purgatory.moved_since(after) == ["c"]


def test_the_record_keeps_the_last_wakes_and_says_when_it_no_longer_has_them(
        loop: asyncio.AbstractEventLoop) -> None:
    purgatory = Purgatory(loop)
    for i in range(3 * MOVES_KEPT):
        purgatory.wake(i)
    assert purgatory.moves == 3 * MOVES_KEPT
    assert purgatory.moved_since(0) is None
    recent = purgatory.moves - MOVES_KEPT
    assert purgatory.moved_since(recent) == list(range(recent, 3 * MOVES_KEPT))


def test_an_operation_parked_on_a_container_is_woken_by_its_keys_alone(
        loop: asyncio.AbstractEventLoop) -> None:
    purgatory = Purgatory(loop)
    checked: list[object] = []
    completed: list[str] = []
    def check_key(key: object) -> bool:
        checked.append(key)
        return key == "ready"

    op = purgatory.park((), 60, lambda: False, lambda: completed.append("done"),
                        check_key=check_key, scan={"x": [0], "ready": [1]})
    assert len(purgatory) == 1
    purgatory.wake("elsewhere")
    purgatory.wake("x")
    assert checked == ["x"] and not completed
    purgatory.wake("ready")
    assert completed == ["done"] and op.done and len(purgatory) == 0
    purgatory.wake("ready")
    assert completed == ["done"]  # once


def test_every_operation_woken_or_completed_includes_those_parked_on_a_container(
        loop: asyncio.AbstractEventLoop) -> None:
    purgatory = Purgatory(loop)
    completed: list[int] = []
    purgatory.park((), 60, lambda: True, lambda: completed.append(1), scan={"x": [0]})
    purgatory.park((), 60, lambda: False, lambda: completed.append(2), scan={"y": [0]})
    purgatory.wake_all()
    assert completed == [1]
    purgatory.complete_all()
    assert completed == [1, 2] and len(purgatory) == 0
