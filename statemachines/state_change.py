"""The state-change log: one line per partition or replica transition, leader election, ISR
change and fenced decision, on the logger named ``state.change.logger``
(:mod:`interbroker.fencing` holds the logger and the fenced line, which brokers write too).

The name is Kafka's, so that log routing written for a Kafka cluster (a file of its own, a
level of its own) applies unchanged. Each line says what happened in words and carries the
same facts as a dict on the record's :data:`FIELD` attribute (controller id and epoch, topic
and partition, from and to state, leader, leader epoch and ISR, election kind and result, or
what a fenced request carried and what it was measured against), which the json log format
writes out as fields.

Levels: partition transitions, elections, ISR changes and fenced decisions are INFO; replica
transitions are DEBUG (Kafka writes those at TRACE: a topic of 100,000 partitions creates
600,000 of them); refused transitions are WARNING. The callers are the controller's mass paths,
so each asks :func:`enabled` once per batch and builds nothing when the answer is no: a
100,000-partition failover with the log off pays one check per batch.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from coordinator.codecs import TopicPartition
from elections.leader import (
    ControlledShutdown,
    ElectionStrategy,
    LeaderAndIsr,
    Offline,
    Preferred,
    Reassign,
)
from interbroker.fencing import FIELD, LOGGER_NAME, enabled, state_change_log
from interbroker.fencing import emit as _emit

__all__ = [
    "FIELD",
    "LOGGER_NAME",
    "election_kind",
    "enabled",
    "log_elections",
    "log_isr_changes",
    "log_partition_transitions",
    "log_replica_transitions",
    "state_change_log",
]

INFO = logging.INFO
DEBUG = logging.DEBUG


def election_kind(strategy: ElectionStrategy) -> str:
    """A strategy's name on the log: offline, unclean_offline, reassign, preferred,
    controlled_shutdown."""
    match strategy:
        case Offline(unclean=False):
            return "offline"
        case Offline():
            return "unclean_offline"
        case Reassign():
            return "reassign"
        case Preferred():
            return "preferred"
        case ControlledShutdown():
            return "controlled_shutdown"
    raise TypeError(f"not an election strategy: {strategy!r}")


def _prefix(controller_id: int, controller_epoch: int) -> str:
    return f"[Controller id={controller_id} epoch={controller_epoch}]"


def _leader_text(value: LeaderAndIsr) -> str:
    return (f"leader {value.leader}, leader epoch {value.leader_epoch}, "
            f"ISR {list(value.isr)}, partition epoch {value.partition_epoch}")


def _leader_fields(value: LeaderAndIsr) -> dict[str, Any]:
    return {"leader": value.leader, "leader_epoch": value.leader_epoch, "isr": list(value.isr),
            "partition_epoch": value.partition_epoch}


def log_partition_transitions(
    controller_id: int,
    controller_epoch: int,
    moves: Iterable[tuple[TopicPartition, object]],
    target: object,
    leaders: Mapping[TopicPartition, LeaderAndIsr],
) -> None:
    """One INFO line per ``(partition, previous state)`` in ``moves`` entering ``target``; the
    leader and ISR ride along when ``leaders`` has them."""
    prefix = _prefix(controller_id, controller_epoch)
    to = str(target)
    for tp, before in moves:
        fields: dict[str, Any] = {
            "event": "partition", "controller_id": controller_id,
            "controller_epoch": controller_epoch, "topic": tp.topic, "partition": tp.partition,
            "from": str(before), "to": to}
        message = f"{prefix} Partition {tp}: {before} -> {to}"
        value = leaders.get(tp)
        if value is not None:
            fields.update(_leader_fields(value))
            message += f" ({_leader_text(value)})"
        _emit(INFO, message, fields)


def log_replica_transitions(
    controller_id: int,
    controller_epoch: int,
    moves: Iterable[tuple[tuple[TopicPartition, int], object]],
    target: object,
) -> None:
    """One DEBUG line per ``((partition, replica), previous state)`` entering ``target``."""
    prefix = _prefix(controller_id, controller_epoch)
    to = str(target)
    for (tp, replica), before in moves:
        _emit(DEBUG, f"{prefix} Replica {replica} of {tp}: {before} -> {to}", {
            "event": "replica", "controller_id": controller_id,
            "controller_epoch": controller_epoch, "topic": tp.topic, "partition": tp.partition,
            "replica": replica, "from": str(before), "to": to})


def log_elections(
    controller_id: int,
    controller_epoch: int,
    kind: str | Mapping[TopicPartition, str],
    tps: Iterable[TopicPartition],
    elected: Mapping[TopicPartition, LeaderAndIsr],
    failed: Mapping[TopicPartition, str],
    unclean: Iterable[TopicPartition] = (),
) -> None:
    """One INFO line per partition of ``tps`` elected (its new leader and ISR, and whether the
    leader came from outside the ISR) or not (why), by the election ``kind`` (one for all, or
    per partition)."""
    prefix = _prefix(controller_id, controller_epoch)
    out_of_sync = set(unclean)
    for tp in tps:
        how = kind if isinstance(kind, str) else kind.get(tp, "offline")
        fields: dict[str, Any] = {
            "event": "election", "controller_id": controller_id,
            "controller_epoch": controller_epoch, "topic": tp.topic, "partition": tp.partition,
            "election": how}
        value = elected.get(tp)
        if value is not None:
            is_unclean = tp in out_of_sync
            fields.update(_leader_fields(value), result="elected", unclean=is_unclean)
            note = " out of sync (unclean)" if is_unclean else ""
            _emit(INFO, f"{prefix} {how} election for {tp}: elected{note} "
                        f"{_leader_text(value)}", fields)
        else:
            reason = failed.get(tp, "not written")
            fields.update(result="failed", reason=reason)
            _emit(INFO, f"{prefix} {how} election for {tp}: no leader: {reason}", fields)


def log_isr_changes(
    controller_id: int,
    controller_epoch: int,
    reason: str,
    tps: Iterable[TopicPartition],
    leaders: Mapping[TopicPartition, LeaderAndIsr],
) -> None:
    """One INFO line per partition of ``tps`` whose leader and ISR the controller rewrote
    without an election (``reason``: replicas went offline, a reassignment bumped the epoch)."""
    prefix = _prefix(controller_id, controller_epoch)
    for tp in tps:
        value = leaders.get(tp)
        if value is None:
            continue
        fields: dict[str, Any] = {
            "event": "isr", "controller_id": controller_id,
            "controller_epoch": controller_epoch, "topic": tp.topic, "partition": tp.partition,
            "reason": reason, **_leader_fields(value)}
        _emit(INFO, f"{prefix} Leader and ISR of {tp} rewritten ({reason}): "
                    f"{_leader_text(value)}", fields)
