"""The controller's settings (Kafka's names and defaults where Kafka has them) and its keys,
declared once (:data:`CONTROLLER_CONFIG`): a broker's ``server.properties`` and a controller's
``controller.properties`` read them, the reference page lists them.

Apart from the controller so that the handlers, which are given the settings, do not import
the controller to name their type."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from coordinator.clock import SYSTEM_CLOCK, Clock
from coordinator.configdef import AtLeast, ConfigDef, ConfigKey, ConfigType, Importance

__all__ = ["CONTROLLER_CONFIG", "ControllerConfig", "StandBackoff"]

_HIGH = Importance.HIGH

CONTROLLER_CONFIG = ConfigDef("controller", (
    ConfigKey(name="auto.leader.rebalance.enable", type=ConfigType.BOOLEAN, default="true",
              importance=_HIGH,
              doc="Move leaderships back to the preferred replicas when a broker holds too "
                  "few of its own (leader.imbalance.*)."),
    ConfigKey(name="leader.imbalance.check.interval.seconds", type=ConfigType.LONG,
              default="300", importance=_HIGH, validator=AtLeast(1),
              doc="How often the controller checks the brokers' leader imbalance."),
    ConfigKey(name="leader.imbalance.per.broker.percentage", type=ConfigType.INT,
              default="10", importance=_HIGH, validator=AtLeast(0),
              doc="The share of a broker's partitions led by another replica above which "
                  "their preferred leaders are elected."),
    ConfigKey(name="unclean.leader.election.enable", type=ConfigType.BOOLEAN,
              default="false", importance=_HIGH,
              doc="Let a replica outside the ISR become leader when no ISR member is alive "
                  "(records may be lost); a topic may override it."),
    ConfigKey(name="delete.topic.enable", type=ConfigType.BOOLEAN, default="true",
              importance=_HIGH,
              doc="Carry out topic deletions; false leaves them marked and pending."),
    ConfigKey(name="partctl.controller.candidate", type=ConfigType.BOOLEAN, default="true",
              importance=Importance.MEDIUM,
              doc="Stand for controller; false leaves the role to the other brokers or to "
                  "dedicated controller processes."),
))
"""The controller's keys, by name."""


def _default(name: str, kind: Callable[[Any], Any]) -> Any:
    return kind(CONTROLLER_CONFIG.default(name))


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
    clock: Clock = SYSTEM_CLOCK

    def __post_init__(self) -> None:
        if not 0 < self.base <= self.cap:
            raise ValueError("a stand backoff needs 0 < base <= cap")

    def hold(self, in_a_row: int) -> float:
        """The hold after the ``in_a_row``-th error resignation in a row (1, 2, ...)."""
        return min(self.cap, self.base * 2.0 ** min(max(in_a_row, 1) - 1, 64))


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerConfig:
    """Kafka's controller settings that apply here, with Kafka's defaults."""

    leader_imbalance_check_interval_seconds: float = _default(
        "leader.imbalance.check.interval.seconds", float)
    leader_imbalance_per_broker_percentage: float = _default(
        "leader.imbalance.per.broker.percentage", float)
    auto_leader_rebalance_enable: bool = _default("auto.leader.rebalance.enable", bool)
    unclean_leader_election_enable: bool = _default("unclean.leader.election.enable", bool)
    delete_topic_enable: bool = _default("delete.topic.enable", bool)
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
    disabled it; after an event that left many new objects, what survives it is frozen first
    (``statemachines.controller.settle_garbage``)."""
    shutdown_answers_wait: float = 5.0
    """How long a controlled shutdown's second step (its follower replicas) waits for the
    brokers to answer the first (the leadership move) before it runs anyway: a broker that
    does not answer, or whose queue was dropped, must not keep the shutting-down broker
    waiting until its request times out."""
    error_backoff: StandBackoff = field(default_factory=StandBackoff)
    """How long to hold back from standing after resigning over an unexpected error."""
    candidate: bool = _default("partctl.controller.candidate", bool)
    """Stand for controller. False: a participant that never stands (a broker process with
    ``partctl.controller.candidate=false``, leaving the role to dedicated controllers); it
    still answers a controlled shutdown with NotController, as any non-controller does."""
