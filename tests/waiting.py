"""Waiting helpers for tests: poll a condition, collect events from callbacks."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.01,
               message: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


def wait_while_progressing(predicate: Callable[[], Any], progress: Callable[[], Any],
                           stall: float = 30.0, limit: float = 300.0, interval: float = 0.2,
                           message: str = "condition") -> Any:
    """Wait for ``predicate`` as long as ``progress()`` keeps changing: fail when it has not
    changed for ``stall`` seconds, or after ``limit`` in all. For work that drains a backlog
    whose size depends on the machine's speed (a slow machine lags further, and catches up
    later, but must keep catching up)."""
    start = changed = time.monotonic()
    seen = progress()
    while True:
        value = predicate()
        if value:
            return value
        now = time.monotonic()
        current = progress()
        if current != seen:
            seen, changed = current, now
        if now - changed > stall:
            raise AssertionError(f"no progress for {stall}s waiting for {message}; at {seen!r}")
        if now - start > limit:
            raise AssertionError(f"timed out after {limit}s waiting for {message}; at {seen!r}")
        time.sleep(interval)


class Recorder(Generic[T]):
    """A callback that records what it is called with, thread-safely."""

    def __init__(self) -> None:
        self.items: list[T] = []
        self._cond = threading.Condition()

    def __call__(self, item: T) -> None:
        with self._cond:
            self.items.append(item)
            self._cond.notify_all()

    def wait_for(self, predicate: Callable[[list[T]], Any], timeout: float = 10.0,
                 message: str = "events") -> Any:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                value = predicate(self.items)
                if value:
                    return value
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(
                        f"timed out after {timeout}s waiting for {message}; got {self.items!r}"
                    )
                self._cond.wait(remaining)

    def wait_count(self, n: int, timeout: float = 10.0) -> list[T]:
        self.wait_for(lambda items: len(items) >= n, timeout, f"{n} events")
        return list(self.items)
