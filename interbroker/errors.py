"""Kafka's error codes as the controller and brokers exchange them, and the errors the
controller answers a broker's calls with (besides :class:`elections.NotController`).

:class:`ErrorCode` is one enum for the whole contract: a broker's handler answers with it, the
controller reads it, and the network transport puts it on the wire as it is (its values are
Kafka's numbers, so kio takes them unchanged: no translation through names). The data plane
answers produce and fetch with the same codes (:mod:`replication.protocol`).
"""

from __future__ import annotations

from enum import IntEnum

from coordinator.errors import CoordinatorError
from elections.controller_election import NotController

__all__ = ["BrokerNotAvailable", "ErrorCode", "NotController", "StaleBrokerEpoch"]


class ErrorCode(IntEnum):
    """Kafka's error codes, those the controller, the brokers and the data plane answer with
    (:meth:`of` reads one off the wire)."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    COORDINATOR_LOAD_IN_PROGRESS = 14
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    CLUSTER_AUTHORIZATION_FAILED = 31
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    TRANSACTION_COORDINATOR_FENCED = 52
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    UNKNOWN_PRODUCER_ID = 59
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    STALE_BROKER_EPOCH = 77
    INVALID_RECORD = 87
    INVALID_UPDATE_VERSION = 95
    UNKNOWN_TOPIC_ID = 100
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    INELIGIBLE_REPLICA = 107
    OFFSET_MOVED_TO_TIERED_STORAGE = 109

    @classmethod
    def of(cls, code: int) -> ErrorCode:
        """The member for Kafka's ``code``; UNKNOWN_SERVER_ERROR for a code not listed (another
        Kafka's broker may answer one)."""
        try:
            return cls(int(code))
        except ValueError:
            return cls.UNKNOWN_SERVER_ERROR


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
