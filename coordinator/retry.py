"""Retry as a policy object: tries, backoff, jitter, deadline, and an injectable clock.

Only :class:`~coordinator.errors.ConnectionLoss` (and its timeout subclass) is retried: the
request may not have reached the server. Fencing failures, version conflicts and session expiry
are answers, not accidents, and go straight to the caller.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from coordinator.clock import SYSTEM_CLOCK, Clock
from coordinator.errors import ConnectionLoss

T = TypeVar("T")


class RetryFailed(ConnectionLoss):
    """Every try failed with a connection loss, or the deadline passed; chains the last one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Retry:
    """``max_tries`` attempts (None: until the deadline), sleeping ``delay`` then ``delay *
    backoff**n`` capped at ``max_delay``, each sleep stretched by up to ``jitter`` of itself, and
    never past ``deadline`` seconds after the first try."""

    max_tries: int | None = 5
    delay: float = 0.1
    backoff: float = 2.0
    max_delay: float = 2.0
    jitter: float = 0.2
    deadline: float | None = 30.0
    clock: Clock = SYSTEM_CLOCK
    """Its monotonic reading bounds the deadline; its sleep waits between tries."""
    rng: random.Random = field(default_factory=random.Random)

    def __post_init__(self) -> None:
        if self.max_tries is None and self.deadline is None:
            raise ValueError("a retry policy needs max_tries or a deadline")
        if self.max_tries is not None and self.max_tries < 1:
            raise ValueError("max_tries must be at least 1")

    def __call__(self, fn: Callable[..., T], *args: object, **kwargs: object) -> T:
        start = self.clock.monotonic()
        pause = self.delay
        attempt = 0
        while True:
            attempt += 1
            try:
                return fn(*args, **kwargs)
            except ConnectionLoss as exc:
                if self.max_tries is not None and attempt >= self.max_tries:
                    raise RetryFailed(f"gave up after {attempt} tries: {exc}") from exc
                wait = min(pause, self.max_delay) * (1 + self.jitter * self.rng.random())
                if self.deadline is not None:
                    left = self.deadline - (self.clock.monotonic() - start)
                    if left <= 0:
                        raise RetryFailed(f"deadline of {self.deadline}s passed: {exc}") from exc
                    wait = min(wait, left)
                self.clock.sleep(wait)
                pause *= self.backoff


NO_RETRY = Retry(max_tries=1, deadline=None)
