"""Errors the controller answers requests with (besides :class:`elections.NotController`)."""

from __future__ import annotations

from coordinator.errors import CoordinatorError
from elections.controller_election import NotController

__all__ = ["BrokerNotAvailable", "NotController", "StaleBrokerEpoch"]


class BrokerNotAvailable(CoordinatorError):
    """The broker is not registered (not live) as far as the controller knows."""

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        super().__init__(f"broker {broker_id} is not registered")


class StaleBrokerEpoch(CoordinatorError):
    """A request from an earlier incarnation of a broker (it bounced since)."""

    def __init__(self, broker_id: int, given: int, current: int) -> None:
        self.broker_id = broker_id
        self.given = given
        self.current = current
        super().__init__(f"broker {broker_id}: epoch {given} is stale (current {current})")
