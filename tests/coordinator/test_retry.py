"""The retry policy: what it retries, how long it waits, when it gives up."""

from __future__ import annotations

import random

import pytest

from coordinator.clock import ManualClock
from coordinator.errors import BadVersion, ConnectionLoss, OperationTimeout, SessionExpired
from coordinator.metadata import ControllerMoved
from coordinator.retry import Retry, RetryFailed


class FakeClock(ManualClock):
    """The product's manual clock, keeping what it was asked to sleep."""

    __slots__ = ("sleeps",)

    def __init__(self) -> None:
        super().__init__(start_ms=0)
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        super().sleep(seconds)


def flaky(failures: list[Exception], result: str = "ok"):  # noqa: ANN201
    calls = {"n": 0}

    def fn() -> str:
        calls["n"] += 1
        if failures:
            raise failures.pop(0)
        return result

    return fn, calls


def policy(clock: FakeClock, **kw: object) -> Retry:
    return Retry(clock=clock, rng=random.Random(1), **kw)  # type: ignore[arg-type]


def test_retries_connection_loss_with_backoff_and_jitter() -> None:
    clock = FakeClock()
    fn, calls = flaky([ConnectionLoss("x"), OperationTimeout("y"), ConnectionLoss("z")])
    assert policy(clock, delay=0.1, backoff=2, jitter=0.5)(fn) == "ok"
    assert calls["n"] == 4
    base = [0.1, 0.2, 0.4]
    for slept, b in zip(clock.sleeps, base, strict=True):
        assert b <= slept <= b * 1.5


def test_backoff_is_capped() -> None:
    clock = FakeClock()
    fn, _ = flaky([ConnectionLoss("x")] * 6)
    policy(clock, max_tries=7, delay=1, backoff=10, max_delay=3, jitter=0, deadline=None)(fn)
    assert clock.sleeps == [1, 3, 3, 3, 3, 3]


@pytest.mark.parametrize("error", [ControllerMoved("moved"), BadVersion("/p"),
                                   SessionExpired("gone"), ValueError("bug")])
def test_answers_are_never_retried(error: Exception) -> None:
    clock = FakeClock()
    fn, calls = flaky([error])
    with pytest.raises(type(error)):
        policy(clock)(fn)
    assert calls["n"] == 1 and clock.sleeps == []


def test_gives_up_after_max_tries_chaining_the_cause() -> None:
    clock = FakeClock()
    fn, calls = flaky([ConnectionLoss(str(i)) for i in range(10)])
    with pytest.raises(RetryFailed) as info:
        policy(clock, max_tries=3)(fn)
    assert calls["n"] == 3 and isinstance(info.value.__cause__, ConnectionLoss)
    assert isinstance(info.value, ConnectionLoss)  # callers that catch ConnectionLoss still do


def test_deadline_bounds_the_total_wait() -> None:
    clock = FakeClock()
    fn, calls = flaky([ConnectionLoss("x")] * 100)
    with pytest.raises(RetryFailed, match="deadline"):
        policy(clock, max_tries=None, delay=1, backoff=1, jitter=0, deadline=5.5)(fn)
    assert clock.monotonic() == pytest.approx(5.5)
    assert calls["n"] == 7


def test_policy_needs_a_bound() -> None:
    with pytest.raises(ValueError):
        Retry(max_tries=None, deadline=None)
