"""What the controller counts as it works, for the metrics a process serves.

Plain numbers, kept where the work happens and read when someone asks (a Prometheus scrape in
:mod:`broker.metrics`): no metrics library here, and nothing in the pure decisions. Counts only
grow. A count read from another thread may miss an increment made at that instant; it never
goes back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ControllerStats", "Timing"]


@dataclass(slots=True)
class Timing:
    """How many times something happened and the seconds it took in all (a Prometheus summary's
    ``_count`` and ``_sum``)."""

    count: int = 0
    seconds: float = 0.0

    def add(self, seconds: float) -> None:
        self.count += 1
        self.seconds += seconds


@dataclass(slots=True)
class ControllerStats:
    """A controller candidate's counts over its life (every term it was active).

    ``elections``: the election rounds that gave at least one partition a leader and the time
    each took (Kafka's LeaderElectionRateAndTimeMs); ``unclean_elections``: the partitions
    given a leader from outside their ISR (UncleanLeaderElectionsPerSec)."""

    elections: Timing = field(default_factory=Timing)
    unclean_elections: int = 0
