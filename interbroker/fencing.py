"""The fence a broker puts before the controller's requests, written once, and the line it
writes for every refusal on the state-change log.

A broker refuses, as Kafka's brokers do, a LeaderAndIsr, UpdateMetadata or StopReplica from a
controller older than the newest it has heard from (STALE_CONTROLLER_EPOCH), and one meant for
an earlier registration of itself (STALE_BROKER_EPOCH): :class:`RequestFence`. A
:class:`~statemachines.participant.Participant` keeps one before its handler, a
:class:`~replication.replica_manager.ReplicaManager` one of its own (it also runs without a
participant).

The state-change log is the logger named ``state.change.logger`` (Kafka's name, so log routing
written for a Kafka cluster applies unchanged); each line carries its facts as a dict on the
record's :data:`FIELD` attribute. The controller's lines are :mod:`statemachines.state_change`;
:func:`log_fenced` is the line both sides write when an epoch check refuses something.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from coordinator.codecs import TopicPartition
from interbroker.errors import ErrorCode
from interbroker.requests import BrokerRequest

__all__ = [
    "FIELD",
    "LOGGER_NAME",
    "RequestFence",
    "emit",
    "enabled",
    "log_fenced",
    "state_change_log",
]

LOGGER_NAME = "state.change.logger"
FIELD = "state_change"
"""The record attribute holding a line's structured fields (a dict of JSON-ready values)."""

state_change_log = logging.getLogger(LOGGER_NAME)


def enabled(level: int = logging.INFO) -> bool:
    """Whether lines at ``level`` would be written (the logger caches the answer)."""
    return state_change_log.isEnabledFor(level)


def emit(level: int, message: str, fields: dict[str, Any]) -> None:
    """One line on the state-change log, with ``fields`` on the record's :data:`FIELD`."""
    state_change_log.log(level, message, extra={FIELD: fields})


def log_fenced(
    who: str,
    node_id: int,
    what: str,
    reason: str,
    *,
    given: int,
    current: int | None = None,
    partition: TopicPartition | None = None,
    controller_id: int | None = None,
    controller_epoch: int | None = None,
) -> None:
    """One INFO line for a request or write refused by an epoch check: ``who`` (controller or
    broker) ``node_id`` refused ``what`` (a request or write kind) for ``reason`` (stale
    controller epoch, stale broker epoch, stale leader epoch) because it carried ``given``
    where ``current`` is the newest known (None: not known here, the store's check said no)."""
    if not enabled(logging.INFO):
        return
    fields: dict[str, Any] = {"event": "fenced", "node": who, "node_id": node_id,
                              "request": what, "reason": reason, "given_epoch": given,
                              "current_epoch": current}
    about = ""
    if partition is not None:
        fields.update(topic=partition.topic, partition=partition.partition)
        about = f" for {partition}"
    sender = ""
    if controller_id is not None:
        fields.update(controller_id=controller_id, controller_epoch=controller_epoch)
        sender = f" from controller {controller_id} epoch {controller_epoch}"
    measured = f"carried {given}" + (f", current {current}" if current is not None else "")
    emit(logging.INFO, f"[{who.capitalize()} id={node_id}] Refused {what}{sender}{about}: "
                       f"{reason} ({measured})", fields)


class RequestFence:
    """Broker ``broker_id``'s epoch checks of the controller's requests.

    :meth:`check` refuses a request from a controller epoch older than the newest passed so
    far (STALE_CONTROLLER_EPOCH) and one carrying a broker epoch older than the current
    registration's, ``broker_epoch()`` (STALE_BROKER_EPOCH; None: not registered yet, no
    check), each refusal on the state-change log; a request that passes makes its controller
    epoch the newest. Thread-safe."""

    __slots__ = ("_broker_epoch", "_controller_epoch", "_lock", "broker_id")

    def __init__(self, broker_id: int, broker_epoch: Callable[[], int | None]) -> None:
        self.broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._controller_epoch = -1
        self._lock = threading.Lock()

    @property
    def controller_epoch(self) -> int:
        """The newest controller epoch passed (-1 before the first request)."""
        return self._controller_epoch

    def check(self, what: str, request: BrokerRequest) -> ErrorCode:
        """NONE if ``request`` (a ``what``: LeaderAndIsr, UpdateMetadata, StopReplica) passes,
        else the code it is refused with."""
        controller_epoch, broker_epoch = request.controller_epoch, request.broker_epoch
        with self._lock:
            if controller_epoch < self._controller_epoch:
                log_fenced("broker", self.broker_id, what, "stale controller epoch",
                           given=controller_epoch, current=self._controller_epoch,
                           controller_id=request.controller_id,
                           controller_epoch=controller_epoch)
                return ErrorCode.STALE_CONTROLLER_EPOCH
            current = self._broker_epoch()
            if current is not None and 0 <= broker_epoch < current:
                log_fenced("broker", self.broker_id, what, "stale broker epoch",
                           given=broker_epoch, current=current,
                           controller_id=request.controller_id,
                           controller_epoch=controller_epoch)
                return ErrorCode.STALE_BROKER_EPOCH
            self._controller_epoch = controller_epoch
            return ErrorCode.NONE
