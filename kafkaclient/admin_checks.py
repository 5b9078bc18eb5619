"""A broker's answers to the Admin API, checked and turned into :mod:`kafkaclient.admin_types`.

Every answer is treated as hostile: kio has already refused lengths and counts the frame
cannot hold (:mod:`kafkaclient.wire_check`); what is checked here is what a well-formed frame
can still get wrong: a broker id or port out of range, a broker or partition listed twice, a
replica list that names a broker twice, a topic without a name. Each is one
:class:`AdminError` line naming the broker, the API and the item; nothing is half-returned.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from kafkaclient.admin_types import (
    AdminError,
    BrokerNode,
    LogDirInfo,
    PartitionInfo,
    Reassignment,
    ReplicaInfo,
    TopicInfo,
)

__all__ = ["AUTHORIZATION", "check_brokers", "check_ids", "error_name", "log_dir_infos",
           "reassignment", "topic_info"]

AUTHORIZATION = frozenset({"CLUSTER_AUTHORIZATION_FAILED", "TOPIC_AUTHORIZATION_FAILED",
                           "GROUP_AUTHORIZATION_FAILED", "DELEGATION_TOKEN_AUTHORIZATION_FAILED",
                           "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"})
_MAX_ID = 2**31 - 1


def error_name(code: Any) -> str | None:
    """Kafka's name of an error code (``NOT_CONTROLLER``), None for none."""
    try:
        value = int(code)
    except (TypeError, ValueError):
        return f"UNKNOWN_ERROR_CODE({code!r})"
    if value == 0:
        return None
    try:
        return ErrorCode(value).name.upper()
    except ValueError:
        return f"UNKNOWN_ERROR_CODE({value})"


def _bad(where: str, what: str) -> AdminError:
    return AdminError(f"{where} answered {what}")


def check_ids(where: str, what: str, ids: Iterable[Any], *, allow_none: bool = False
              ) -> tuple[int, ...]:
    """Broker ids from an answer, each a non-negative int and named once."""
    out: list[int] = []
    seen: set[int] = set()
    for raw in ids:
        value = int(raw)
        if value < 0 or value > _MAX_ID:
            raise _bad(where, f"{what} with broker id {value}")
        if value in seen:
            raise _bad(where, f"{what} naming broker {value} twice")
        seen.add(value)
        out.append(value)
    return tuple(out)


def check_brokers(where: str, brokers: Iterable[Any], *, id_field: str) -> dict[int, BrokerNode]:
    """Metadata's or DescribeCluster's brokers by id, each checked."""
    out: dict[int, BrokerNode] = {}
    for b in brokers:
        node_id, port, host = int(getattr(b, id_field)), int(b.port), b.host
        if node_id < 0:
            raise _bad(where, f"a broker with id {node_id}")
        if node_id in out:
            raise _bad(where, f"broker {node_id} twice")
        if not 0 < port < 65536:
            raise _bad(where, f"broker {node_id} on port {port}")
        if not host or any(c.isspace() for c in host):
            raise _bad(where, f"broker {node_id} with host {host[:100]!r}")
        rack = getattr(b, "rack", None)
        out[node_id] = BrokerNode(id=node_id, host=host, port=port, rack=rack or None)
    return out


def topic_info(where: str, topic: Any) -> TopicInfo:
    """One topic of a Metadata answer."""
    name = topic.name
    if not name:
        raise _bad(where, "a topic without a name")
    partitions: dict[int, PartitionInfo] = {}
    for p in topic.partitions:
        index = int(p.partition_index)
        if index < 0:
            raise _bad(where, f"partition {index} of topic {name!r}")
        if index in partitions:
            raise _bad(where, f"partition {name}-{index} twice")
        label = f"partition {name}-{index}"
        leader = int(p.leader_id)
        if leader < -1:
            raise _bad(where, f"{label} with leader {leader}")
        epoch = int(getattr(p, "leader_epoch", -1))
        if epoch < -1:
            raise _bad(where, f"{label} with leader epoch {epoch}")
        partitions[index] = PartitionInfo(
            topic=name, partition=index, leader=leader, leader_epoch=epoch,
            replicas=check_ids(where, f"{label} with a replica list", p.replica_nodes),
            isr=check_ids(where, f"{label} with an ISR", p.isr_nodes),
            offline=check_ids(where, f"{label} with offline replicas",
                              getattr(p, "offline_replicas", ())),
            error=error_name(p.error_code))
    return TopicInfo(name=name, internal=bool(getattr(topic, "is_internal", False)),
                     partitions=tuple(partitions[i] for i in sorted(partitions)),
                     error=error_name(topic.error_code))


def _non_negative(where: str, what: str, value: Any) -> int:
    number = int(value)
    if number < 0:
        raise _bad(where, f"{what} of {number}")
    return number


def log_dir_infos(where: str, results: Iterable[Any]) -> tuple[LogDirInfo, ...]:
    """DescribeLogDirs' results of one broker."""
    out: list[LogDirInfo] = []
    paths: set[str] = set()
    for result in results:
        path = result.log_dir
        if not path or path in paths:
            raise _bad(where, f"log directory {path!r} " + ("twice" if path else "(empty)"))
        paths.add(path)
        replicas: list[ReplicaInfo] = []
        seen: set[tuple[str, int, bool]] = set()
        for topic in result.topics:
            if not topic.name:
                raise _bad(where, f"a topic without a name in {path}")
            for p in topic.partitions:
                index = _non_negative(where, f"a partition of {topic.name!r} numbered",
                                      p.partition_index)
                key = (topic.name, index, bool(p.is_future_key))
                if key in seen:
                    raise _bad(where, f"{topic.name}-{index} twice in {path}")
                seen.add(key)
                replicas.append(ReplicaInfo(
                    topic=topic.name, partition=index,
                    size=_non_negative(where, f"{topic.name}-{index} a size", p.partition_size),
                    offset_lag=int(p.offset_lag), future=bool(p.is_future_key)))
        total = int(getattr(result, "total_bytes", -1))
        usable = int(getattr(result, "usable_bytes", -1))
        out.append(LogDirInfo(path=path, error=error_name(result.error_code),
                              total_bytes=total if total >= 0 else None,
                              usable_bytes=usable if usable >= 0 else None,
                              replicas=tuple(replicas)))
    return tuple(out)


def reassignment(where: str, label: str, p: Any) -> Reassignment:
    """One partition of ListPartitionReassignments."""
    replicas = check_ids(where, f"{label} with a replica list", p.replicas)
    adding = check_ids(where, f"{label} with adding replicas", p.adding_replicas)
    removing = check_ids(where, f"{label} with removing replicas", p.removing_replicas)
    if not set(adding) <= set(replicas) or not set(removing) <= set(replicas):
        raise _bad(where, f"{label} adding or removing replicas outside its replica list")
    return Reassignment(replicas=replicas, adding=adding, removing=removing)
