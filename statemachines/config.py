"""The controller's settings (Kafka's names and defaults where Kafka has them).

Apart from the controller so that the handlers, which are given the settings, do not import
the controller to name their type."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["ControllerConfig", "StandBackoff"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StandBackoff:
    """How long a controller that resigned over an unexpected error waits before it stands
    again: ``base`` seconds, doubled for each such resignation in a row, at most ``cap``.

    Kafka's controller, moved by an error, stands again at once with the other brokers and may
    win again; a bug that strikes every time (an event it cannot handle, met again at each
    failover) would then keep one process resigning and winning. Holding back lets another
    candidate win first; a lone candidate stands again after the hold, which grows. A term
    that lasted ``cap`` seconds or more starts the count afresh. ``clock`` is injectable."""

    base: float = 1.0
    cap: float = 60.0
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        if not 0 < self.base <= self.cap:
            raise ValueError("a stand backoff needs 0 < base <= cap")

    def hold(self, in_a_row: int) -> float:
        """The hold after the ``in_a_row``-th error resignation in a row (1, 2, ...)."""
        return min(self.cap, self.base * 2.0 ** min(max(in_a_row, 1) - 1, 64))


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerConfig:
    """Kafka's controller settings that apply here, with Kafka's defaults."""

    leader_imbalance_check_interval_seconds: float = 300.0
    leader_imbalance_per_broker_percentage: float = 10.0
    auto_leader_rebalance_enable: bool = True
    unclean_leader_election_enable: bool = False
    delete_topic_enable: bool = True
    hot_standby: bool = True
    """Keep the view warm from watches while not active (else read everything on winning)."""
    view_sync_timeout: float = 5.0
    """How long a new controller waits for its watches to reach the election's write before
    it re-reads what they might have missed instead."""
    pause_gc_during_events: bool = True
    """Hold Python's cyclic garbage collector while an event is handled. A mass election
    allocates some 100,000 objects, which would set off full collections over the millions of
    long-lived objects a large view holds (up to half the time of a broker loss); the
    collector runs again as soon as the event is done. It is re-enabled only if this handler
    disabled it."""
    error_backoff: StandBackoff = field(default_factory=StandBackoff)
    """How long to hold back from standing after resigning over an unexpected error."""
    candidate: bool = True
    """Stand for controller. False: a participant that never stands (a broker process with
    ``partctl.controller.candidate=false``, leaving the role to dedicated controllers); it
    still answers a controlled shutdown with NotController, as any non-controller does."""
