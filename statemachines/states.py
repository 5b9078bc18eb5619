"""Partition and replica states, their tables of legal predecessors, and the pure check.

The tables are Kafka's `validPreviousStates`, kept as data so a transition is refused before
anything is written: the controller splits a batch into valid and invalid members, logs the
invalid ones to the state-change log and acts only on the valid ones. One bad partition never
fails the batch.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Generic, TypeVar, overload

__all__ = [
    "PARTITION_VALID_PREVIOUS",
    "REPLICA_VALID_PREVIOUS",
    "InvalidTransition",
    "PartitionState",
    "ReplicaState",
    "TransitionSplit",
    "is_valid_transition",
    "previous_states",
    "split_transitions",
    "valid_previous_states",
]


class PartitionState(enum.Enum):
    """Where a partition is in its life. Values are Kafka's names, so logs read the same."""

    NON_EXISTENT = "NonExistentPartition"
    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"

    def __str__(self) -> str:
        return self.value


class ReplicaState(enum.Enum):
    """Where one replica (a partition on one broker) is in its life, including deletion."""

    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"
    NON_EXISTENT = "NonExistentReplica"

    def __str__(self) -> str:
        return self.value


_P = PartitionState
_R = ReplicaState

PARTITION_VALID_PREVIOUS: Mapping[PartitionState, frozenset[PartitionState]] = MappingProxyType(
    {
        _P.NEW: frozenset({_P.NON_EXISTENT}),
        # Online -> Online is legal: a leader election on a partition that already has a leader.
        _P.ONLINE: frozenset({_P.NEW, _P.ONLINE, _P.OFFLINE}),
        _P.OFFLINE: frozenset({_P.NEW, _P.ONLINE, _P.OFFLINE}),
        # Only an offline partition can be deleted: deletion takes it offline first.
        _P.NON_EXISTENT: frozenset({_P.OFFLINE}),
    }
)
"""For each partition state, the states a partition may be in just before entering it."""

REPLICA_VALID_PREVIOUS: Mapping[ReplicaState, frozenset[ReplicaState]] = MappingProxyType(
    {
        _R.NEW: frozenset({_R.NON_EXISTENT}),
        # Ineligible -> Online/Offline: a replica whose deletion was halted comes back to life.
        _R.ONLINE: frozenset({_R.NEW, _R.ONLINE, _R.OFFLINE, _R.DELETION_INELIGIBLE}),
        _R.OFFLINE: frozenset({_R.NEW, _R.ONLINE, _R.OFFLINE, _R.DELETION_INELIGIBLE}),
        _R.DELETION_STARTED: frozenset({_R.OFFLINE}),
        _R.DELETION_SUCCESSFUL: frozenset({_R.DELETION_STARTED}),
        # Offline -> Ineligible: a replica on a dead broker cannot be deleted until it returns.
        _R.DELETION_INELIGIBLE: frozenset({_R.OFFLINE, _R.DELETION_STARTED}),
        _R.NON_EXISTENT: frozenset({_R.DELETION_SUCCESSFUL}),
    }
)
"""For each replica state, the states a replica may be in just before entering it."""

del _P, _R

K = TypeVar("K", bound=Hashable)
S = TypeVar("S", PartitionState, ReplicaState)


@overload
def valid_previous_states(target: PartitionState) -> frozenset[PartitionState]: ...
@overload
def valid_previous_states(target: ReplicaState) -> frozenset[ReplicaState]: ...
def valid_previous_states(
        target: PartitionState | ReplicaState) -> frozenset[PartitionState] | frozenset[ReplicaState]:
    """The legal predecessors of `target`, from its machine's table."""
    if isinstance(target, PartitionState):
        return PARTITION_VALID_PREVIOUS[target]
    if isinstance(target, ReplicaState):
        return REPLICA_VALID_PREVIOUS[target]
    raise TypeError(f"not a partition or replica state: {target!r}")


_PREVIOUS_IN_ORDER: dict[PartitionState | ReplicaState,
                         tuple[PartitionState, ...] | tuple[ReplicaState, ...]] = {
    **{target: tuple(previous) for target, previous in PARTITION_VALID_PREVIOUS.items()},
    **{target: tuple(previous) for target, previous in REPLICA_VALID_PREVIOUS.items()},
}


@overload
def previous_states(target: PartitionState) -> tuple[PartitionState, ...]: ...
@overload
def previous_states(target: ReplicaState) -> tuple[ReplicaState, ...]: ...
def previous_states(
        target: PartitionState | ReplicaState
) -> tuple[PartitionState, ...] | tuple[ReplicaState, ...]:
    """:func:`valid_previous_states` as a tuple, for the batch splits' membership tests: a
    tuple tests its few members by identity, where a set hashes the enum member in Python
    (three million replicas go Online when a whole cluster comes back)."""
    previous = _PREVIOUS_IN_ORDER.get(target) if isinstance(target, enum.Enum) else None
    if previous is None:
        raise TypeError(f"not a partition or replica state: {target!r}")
    return previous


def is_valid_transition(current: S, target: S) -> bool:
    """Whether a member in state `current` may move to `target`.

    States of the other machine are never legal predecessors, so mixing them up is refused
    rather than silently accepted.
    """
    return current in valid_previous_states(target)


@dataclass(frozen=True, slots=True, kw_only=True)
class InvalidTransition(Generic[K, S]):
    """One refused transition, with what the state-change log needs to say why."""

    key: K
    current: S
    target: S

    def __str__(self) -> str:
        allowed = ",".join(sorted(str(s) for s in valid_previous_states(self.target)))
        return (
            f"{self.key} should be in one of {allowed} states before moving to {self.target}"
            f" state; instead it is in {self.current} state"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class TransitionSplit(Generic[K, S]):
    """A batch split by legality: keys to act on, and refusals to log. Input order is kept."""

    valid: tuple[K, ...]
    invalid: tuple[InvalidTransition[K, S], ...]


def split_transitions(
    members: Iterable[tuple[K, S]] | Mapping[K, S], target: S
) -> TransitionSplit[K, S]:
    """Split `(key, current_state)` pairs (or a key -> state mapping) for a move to `target`."""
    pairs = members.items() if isinstance(members, Mapping) else members
    allowed = previous_states(target)
    valid: list[K] = []
    invalid: list[InvalidTransition[K, S]] = []
    for key, current in pairs:
        if current in allowed:
            valid.append(key)
        else:
            invalid.append(InvalidTransition(key=key, current=current, target=target))
    return TransitionSplit(valid=tuple(valid), invalid=tuple(invalid))
