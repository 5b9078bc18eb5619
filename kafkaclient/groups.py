"""Consumer groups administered over Kafka's protocol: what ``kafka-consumer-groups`` asks of a
cluster, as a client of its brokers (any cluster that speaks Kafka's protocol, this one
included).

:class:`GroupAdmin` starts from bootstrap addresses, learns the brokers from Metadata, and
speaks to each broker with :class:`~kafkaclient.connection.KafkaConnection` (one connection per broker,
kio messages, the highest version both sides serve within the range each call can read):

- ListGroups to every broker (each lists the groups it coordinates);
- FindCoordinator, then DescribeGroups, OffsetFetch, OffsetCommit and DeleteGroups to the
  group's coordinator;
- ListOffsets to each partition's leader (earliest, latest, or by timestamp).

A member's assignment in DescribeGroups is the consumer protocol's ``ConsumerProtocolAssignment``
(a version, then the body), decoded with kio's schema; a group of another protocol type shows no
partitions.

What a cluster says while it moves (a coordinator loading its partition or gone elsewhere, a
leader that changed, ``__consumer_offsets`` still being created) is asked again until the
operation's ``timeout`` has passed; anything else, and brokers that cannot be reached, is a
:class:`GroupAdminError` whose message is for the user.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, Self

from kio.schema.consumer_protocol_assignment.v3 import data as assignment_v3
from kio.schema.errors import ErrorCode

from coordinator.codecs import TopicPartition
from kafkaclient.connection import BrokerUnreachable, KafkaConnection
from kafkaclient.messages import build, request_module, request_schema
from kafkaclient.offset_reset import LogRange, ResetSpec, ToTimestamp, plan_reset
from kafkaclient.wire_check import read_checked

if TYPE_CHECKING:
    from coordinator.metadata import RegisteredBroker

__all__ = [
    "DEAD",
    "EARLIEST",
    "LATEST",
    "GroupAdmin",
    "GroupAdminError",
    "GroupDescription",
    "ListedGroup",
    "Member",
    "Node",
    "PartitionLag",
    "decode_assignment",
    "partition_lags",
    "plaintext_addresses",
]

METADATA = 3
LIST_OFFSETS = 2
OFFSET_COMMIT = 8
OFFSET_FETCH = 9
FIND_COORDINATOR = 10
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
DELETE_GROUPS = 42
CONSUMER_GROUP_DESCRIBE = 69

EARLIEST = -2
LATEST = -1
DEAD = "Dead"
"""The state DescribeGroups gives a group its coordinator does not hold: no such group."""
CONSUMER_PROTOCOL = "consumer"

_RETRY_PAUSE = 0.1
_COORDINATOR_MOVED = frozenset({ErrorCode.not_coordinator, ErrorCode.coordinator_not_available})
_COORDINATOR_BUSY = frozenset({ErrorCode.coordinator_load_in_progress})
_LEADER_MOVED = frozenset({ErrorCode.not_leader_or_follower, ErrorCode.leader_not_available,
                           ErrorCode.fenced_leader_epoch, ErrorCode.unknown_leader_epoch,
                           ErrorCode.offset_not_available, ErrorCode.replica_not_available})


class GroupAdminError(Exception):
    """The cluster could not do what was asked (the message says what and why)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Node:
    node_id: int
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ListedGroup:
    group_id: str
    state: str
    protocol_type: str
    coordinator: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    """The assignor of a consumer group (``range``, ``roundrobin``...), empty unless Stable."""
    members: tuple[Member, ...]
    coordinator: Node

    @property
    def exists(self) -> bool:
        return self.state != DEAD


def decode_assignment(data: bytes) -> tuple[TopicPartition, ...]:
    """The partitions of a ``ConsumerProtocolAssignment`` (a version, then the body; a version
    newer than kio's is read as the newest, whose fields it starts with, as Kafka reads it)."""
    if len(data) < 2:
        return ()
    version = int.from_bytes(data[:2], "big", signed=True)
    if version < 0:
        raise GroupAdminError(f"a member assignment of version {version}")
    # every version up to 3 has the same two fields; v3's reader reads them all
    try:
        body, _ = read_checked(assignment_v3.ConsumerProtocolAssignment, bytes(data[2:]))
    except Exception as exc:  # kio raises several types; all mean unreadable bytes
        raise GroupAdminError(f"cannot read a member assignment: {exc}") from exc
    return tuple(TopicPartition(t.topic, int(p)) for t in body.assigned_partitions
                 for p in t.partitions)


class GroupAdmin:
    """Consumer-group operations on the cluster reached through ``bootstrap`` ((host, port)
    pairs); for a ``with`` block. ``timeout`` (seconds) bounds connecting, each request, and
    the asking again of each operation."""

    def __init__(self, bootstrap: Sequence[tuple[str, int]], *, timeout: float,
                 client_id: str = "partctl-groups") -> None:
        if not bootstrap:
            raise GroupAdminError("no bootstrap server given")
        self._bootstrap = list(bootstrap)
        self._timeout = timeout
        self._client_id = client_id
        self._connections: dict[tuple[str, int], KafkaConnection] = {}
        self._nodes: dict[int, Node] = {}
        self._coordinators: dict[str, Node] = {}

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()

    # -- requests ------------------------------------------------------------------------------

    def _connection(self, host: str, port: int) -> KafkaConnection:
        key = (host, port)
        connection = self._connections.get(key)
        if connection is None:
            connection = KafkaConnection(host, port, client_id=self._client_id,
                                         timeout=self._timeout)
            self._connections[key] = connection
        return connection

    def _call(self, address: tuple[str, int], api_key: int, low: int, high: int,
              make: Callable[[ModuleType, int], Any]) -> Any:
        """``make(module, version)``'s request sent to ``address`` at the highest version in
        ``low``..``high`` it serves. Raises BrokerUnreachable."""
        connection = self._connection(*address)
        version = connection.version(api_key, low, high)
        if version is None:
            name = request_schema(api_key, high).__name__.removesuffix("Request")
            raise GroupAdminError(f"broker {address[0]}:{address[1]} serves no version "
                                  f"{low}-{high} of {name}")
        return connection.call(make(request_module(api_key, version), version))

    def _any_broker(self, api_key: int, low: int, high: int,
                    make: Callable[[ModuleType, int], Any]) -> Any:
        """The request answered by the first broker that answers: the known brokers, then the
        bootstrap servers."""
        tried = []
        addresses = [(n.host, n.port) for n in self._nodes.values()] + self._bootstrap
        for address in dict.fromkeys(addresses):
            try:
                return self._call(address, api_key, low, high, make)
            except BrokerUnreachable as exc:
                tried.append(str(exc))
        raise GroupAdminError(f"cannot reach any broker: {'; '.join(tried)}")

    def _deadline(self) -> float:
        return time.monotonic() + self._timeout

    def _pause(self, deadline: float, what: str, why: object) -> None:
        if time.monotonic() + _RETRY_PAUSE > deadline:
            raise GroupAdminError(f"{what}: still {why} after {self._timeout:g}s")
        time.sleep(_RETRY_PAUSE)

    # -- metadata ------------------------------------------------------------------------------

    def _metadata(self, topics: Sequence[str] | None) -> Any:
        def make(m: ModuleType, version: int) -> Any:
            wanted = None if topics is None else tuple(
                build(m.MetadataRequestTopic, name=t, topic_id=None) for t in topics)
            return build(m.MetadataRequest, topics=wanted, allow_auto_topic_creation=False,
                         include_topic_authorized_operations=False,
                         include_cluster_authorized_operations=False)

        response = self._any_broker(METADATA, 1, 12, make)
        self._nodes = {int(b.node_id): Node(node_id=int(b.node_id), host=b.host, port=int(b.port))
                       for b in response.brokers}
        return response

    def brokers(self) -> list[Node]:
        """The cluster's live brokers, by id."""
        self._metadata(())
        return [self._nodes[i] for i in sorted(self._nodes)]

    def partitions(self, topics: Iterable[str]) -> dict[str, dict[int, int]]:
        """Each of ``topics`` that exists: partition -> leader id (-1 without one)."""
        names = sorted(set(topics))
        if not names:
            return {}
        response = self._metadata(names)
        out: dict[str, dict[int, int]] = {}
        for topic in response.topics:
            if topic.error_code == ErrorCode.unknown_topic_or_partition or topic.name is None:
                continue
            out[topic.name] = {int(p.partition_index): int(p.leader_id)
                               for p in topic.partitions}
        return out

    # -- ListGroups ----------------------------------------------------------------------------

    def list_groups(self, states: Iterable[str] = ()) -> list[ListedGroup]:
        """Every group of every broker (in ``states`` when given, compared without case), by
        group id."""
        wanted = {s.lower() for s in states}
        found: dict[str, ListedGroup] = {}
        for node in self.brokers():
            for group in self._list_on(node, tuple(states)):
                if (not wanted or group.state.lower() in wanted) and group.group_id not in found:
                    found[group.group_id] = group
        return [found[g] for g in sorted(found)]

    def _list_on(self, node: Node, states: tuple[str, ...]) -> list[ListedGroup]:
        def make(m: ModuleType, version: int) -> Any:
            return build(m.ListGroupsRequest, states_filter=states, types_filter=())

        deadline = self._deadline()
        while True:
            try:
                response = self._call((node.host, node.port), LIST_GROUPS, 0, 4, make)
            except BrokerUnreachable as exc:
                raise GroupAdminError(f"broker {node.node_id} ({node}) did not answer "
                                      f"ListGroups: {exc}") from None
            error = ErrorCode(response.error_code)
            if error is ErrorCode.none:
                return [ListedGroup(group_id=g.group_id, state=getattr(g, "group_state", ""),
                                    protocol_type=g.protocol_type, coordinator=node.node_id)
                        for g in response.groups]
            if error not in _COORDINATOR_BUSY | _COORDINATOR_MOVED:
                raise GroupAdminError(f"broker {node.node_id} ({node}) answered ListGroups "
                                      f"with {error.name.upper()}")
            self._pause(deadline, f"listing the groups of broker {node.node_id}",
                        error.name.upper())

    # -- the group's coordinator ---------------------------------------------------------------

    def coordinator(self, group: str) -> Node:
        """The broker coordinating ``group`` (FindCoordinator, asked again while the cluster
        creates ``__consumer_offsets`` or elects its leaders)."""
        cached = self._coordinators.get(group)
        if cached is not None:
            return cached

        def make(m: ModuleType, version: int) -> Any:
            return build(m.FindCoordinatorRequest, key=group, key_type=0)

        deadline = self._deadline()
        while True:
            response = self._any_broker(FIND_COORDINATOR, 0, 3, make)
            error = ErrorCode(response.error_code)
            if error is ErrorCode.none:
                node = Node(node_id=int(response.node_id), host=response.host,
                            port=int(response.port))
                self._coordinators[group] = node
                return node
            if error not in _COORDINATOR_BUSY | _COORDINATOR_MOVED:
                raise GroupAdminError(f"FindCoordinator for group '{group}' answered "
                                      f"{error.name.upper()}")
            self._pause(deadline, f"finding the coordinator of group '{group}'",
                        error.name.upper())

    def _to_coordinator(self, group: str, api_key: int, low: int, high: int,
                        make: Callable[[ModuleType, int], Any],
                        error_of: Callable[[Any], ErrorCode], what: str) -> Any:
        """The request answered by ``group``'s coordinator, found again when it moved."""
        deadline = self._deadline()
        while True:
            node = self.coordinator(group)
            try:
                response = self._call((node.host, node.port), api_key, low, high, make)
            except BrokerUnreachable as exc:
                self._coordinators.pop(group, None)
                self._pause(deadline, what, f"unreachable ({exc})")
                continue
            error = ErrorCode(error_of(response))
            if error in _COORDINATOR_MOVED:
                self._coordinators.pop(group, None)
            elif error not in _COORDINATOR_BUSY:
                return response
            self._pause(deadline, what, error.name.upper())

    # -- DescribeGroups ------------------------------------------------------------------------

    def describe(self, group: str) -> GroupDescription:
        """The group as its coordinator holds it (state Dead: no such group)."""
        def make(m: ModuleType, version: int) -> Any:
            return build(m.DescribeGroupsRequest, groups=(group,),
                         include_authorized_operations=False)

        response = self._to_coordinator(
            group, DESCRIBE_GROUPS, 0, 5, make, lambda r: r.groups[0].error_code,
            f"describing group '{group}'")
        (described,) = response.groups
        error = ErrorCode(described.error_code)
        if error is not ErrorCode.none:
            raise GroupAdminError(f"DescribeGroups for group '{group}' answered "
                                  f"{error.name.upper()}")
        if described.group_state == DEAD:
            # DescribeGroups knows only classic groups: a KIP-848 group is described by
            # ConsumerGroupDescribe (as Kafka's admin client asks, with a fallback).
            modern = self._describe_consumer_group(group)
            if modern is not None:
                return modern
        consumer = described.protocol_type == CONSUMER_PROTOCOL
        members = tuple(
            Member(member_id=m.member_id, group_instance_id=getattr(m, "group_instance_id", None),
                   client_id=m.client_id, host=m.client_host,
                   assignment=decode_assignment(m.member_assignment) if consumer else ())
            for m in described.members)
        return GroupDescription(group_id=group, state=described.group_state,
                                protocol_type=described.protocol_type,
                                protocol=described.protocol_data, members=members,
                                coordinator=self.coordinator(group))

    def _describe_consumer_group(self, group: str) -> GroupDescription | None:
        """``group`` as a KIP-848 consumer group (ConsumerGroupDescribe), None when it is not
        one (GROUP_ID_NOT_FOUND) or the coordinator does not serve the API."""
        node = self.coordinator(group)
        try:
            if self._connection(node.host, node.port).version(
                    CONSUMER_GROUP_DESCRIBE, 0, 0) is None:
                return None
        except BrokerUnreachable:
            return None

        def make(m: ModuleType, version: int) -> Any:
            return build(m.ConsumerGroupDescribeRequest, group_ids=(group,),
                         include_authorized_operations=False)

        response = self._to_coordinator(
            group, CONSUMER_GROUP_DESCRIBE, 0, 0, make, lambda r: r.groups[0].error_code,
            f"describing consumer group '{group}'")
        (described,) = response.groups
        error = ErrorCode(described.error_code)
        if error is ErrorCode.group_id_not_found:
            return None
        if error is not ErrorCode.none:
            raise GroupAdminError(f"ConsumerGroupDescribe for group '{group}' answered "
                                  f"{error.name.upper()}")
        members = tuple(
            Member(member_id=m.member_id, group_instance_id=m.instance_id,
                   client_id=m.client_id, host=m.client_host,
                   assignment=tuple(TopicPartition(t.topic_name, p)
                                    for t in m.assignment.topic_partitions
                                    for p in t.partitions))
            for m in described.members)
        return GroupDescription(group_id=group, state=described.group_state,
                                protocol_type=CONSUMER_PROTOCOL,
                                protocol=described.assignor_name, members=members,
                                coordinator=self.coordinator(group))

    # -- OffsetFetch, OffsetCommit -------------------------------------------------------------

    def committed(self, group: str) -> dict[TopicPartition, int]:
        """The group's committed offsets, every partition it has one for."""
        def make(m: ModuleType, version: int) -> Any:
            return build(m.OffsetFetchRequest, group_id=group, topics=None,
                         require_stable=False)

        response = self._to_coordinator(group, OFFSET_FETCH, 2, 7, make,
                                        lambda r: r.error_code,
                                        f"fetching the offsets of group '{group}'")
        error = ErrorCode(response.error_code)
        if error is not ErrorCode.none:
            raise GroupAdminError(f"OffsetFetch for group '{group}' answered "
                                  f"{error.name.upper()}")
        return {TopicPartition(t.name, int(p.partition_index)): int(p.committed_offset)
                for t in response.topics for p in t.partitions
                if p.error_code == ErrorCode.none and p.committed_offset >= 0}

    def commit(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit ``offsets`` for ``group`` as an admin does: no member, no generation (the
        coordinator takes that only from a group without members)."""
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for tp, offset in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, []).append((tp.partition, offset))
        if not by_topic:
            return

        def make(m: ModuleType, version: int) -> Any:
            return build(m.OffsetCommitRequest, group_id=group, generation_id_or_member_epoch=-1,
                         member_id="", group_instance_id=None,
                         topics=tuple(build(m.OffsetCommitRequestTopic, name=t, partitions=tuple(
                             build(m.OffsetCommitRequestPartition, partition_index=p,
                                   committed_offset=o, committed_leader_epoch=-1,
                                   committed_metadata="", commit_timestamp=-1)
                             for p, o in ps)) for t, ps in by_topic.items()))

        def first_error(response: Any) -> ErrorCode:
            for t in response.topics:
                for p in t.partitions:
                    if p.error_code != ErrorCode.none:
                        return ErrorCode(p.error_code)
            return ErrorCode.none

        response = self._to_coordinator(group, OFFSET_COMMIT, 2, 8, make, first_error,
                                        f"committing the offsets of group '{group}'")
        failed = {}
        for t in response.topics:
            for p in t.partitions:
                if p.error_code != ErrorCode.none:
                    failed[TopicPartition(t.name, int(p.partition_index))] = ErrorCode(
                        p.error_code)
        if failed:
            errors = sorted({e.name.upper() for e in failed.values()})
            raise GroupAdminError(
                f"the coordinator refused the offsets of group '{group}' for "
                f"{', '.join(str(tp) for tp in sorted(failed))}: {', '.join(errors)}")

    # -- DeleteGroups --------------------------------------------------------------------------

    def delete(self, groups: Sequence[str]) -> dict[str, ErrorCode]:
        """DeleteGroups, each group at its coordinator: the answer per group."""
        out = {}
        for group in groups:
            def make(m: ModuleType, version: int, group: str = group) -> Any:
                return build(m.DeleteGroupsRequest, groups_names=(group,))

            response = self._to_coordinator(group, DELETE_GROUPS, 0, 2, make,
                                            lambda r: r.results[0].error_code,
                                            f"deleting group '{group}'")
            out[group] = ErrorCode(response.results[0].error_code)
        return out

    # -- ListOffsets ---------------------------------------------------------------------------

    def offsets(self, partitions: Iterable[TopicPartition], spec: int
                ) -> dict[TopicPartition, int | None]:
        """ListOffsets at each partition's leader: ``spec`` is EARLIEST, LATEST or a timestamp
        (ms); the offset per partition, None where the leader found none (no record at or
        after the timestamp)."""
        remaining = sorted(set(partitions))
        out: dict[TopicPartition, int | None] = {}
        deadline = self._deadline()
        while remaining:
            leaders = self.partitions(tp.topic for tp in remaining)
            retry: list[TopicPartition] = []
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in remaining:
                leader = leaders.get(tp.topic, {}).get(tp.partition)
                if leader is None:
                    raise GroupAdminError(f"partition {tp} does not exist")
                if leader < 0 or leader not in self._nodes:
                    retry.append(tp)
                else:
                    by_leader.setdefault(leader, []).append(tp)
            for leader, tps in by_leader.items():
                retry += self._offsets_at(self._nodes[leader], tps, spec, out)
            remaining = retry
            if remaining:
                self._pause(deadline, "listing offsets",
                            f"waiting for the leaders of {', '.join(map(str, remaining))}")
        return out

    def _offsets_at(self, node: Node, tps: list[TopicPartition], spec: int,
                    out: dict[TopicPartition, int | None]) -> list[TopicPartition]:
        by_topic: dict[str, list[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp.partition)

        def make(m: ModuleType, version: int) -> Any:
            return build(m.ListOffsetsRequest, replica_id=-1, isolation_level=0,
                         topics=tuple(build(m.ListOffsetsTopic, name=t, partitions=tuple(
                             build(m.ListOffsetsPartition, partition_index=p,
                                   current_leader_epoch=-1, timestamp=spec, max_num_offsets=1)
                             for p in ps)) for t, ps in by_topic.items()))

        try:
            response = self._call((node.host, node.port), LIST_OFFSETS, 1, 7, make)
        except BrokerUnreachable:
            return tps  # the leader may have moved: Metadata again
        retry = []
        answered = set()
        for t in response.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, int(p.partition_index))
                answered.add(tp)
                error = ErrorCode(p.error_code)
                if error is ErrorCode.none:
                    out[tp] = int(p.offset) if p.offset >= 0 else None
                elif error in _LEADER_MOVED:
                    retry.append(tp)
                elif error is ErrorCode.unknown_topic_or_partition:
                    raise GroupAdminError(f"partition {tp} does not exist")
                else:
                    raise GroupAdminError(f"ListOffsets for {tp} answered {error.name.upper()}")
        return retry + [tp for tp in tps if tp not in answered]

    def log_ranges(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, LogRange]:
        """Each partition's log start and log end (the high watermark)."""
        tps = list(partitions)
        earliest = self.offsets(tps, EARLIEST)
        latest = self.offsets(tps, LATEST)
        return {tp: LogRange(earliest=earliest.get(tp) or 0, latest=latest.get(tp) or 0)
                for tp in tps}

    def plan_reset(self, spec: ResetSpec, partitions: Sequence[TopicPartition],
                   committed: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """The new offsets of ``partitions`` (:func:`kafkaclient.offset_reset.plan_reset`) from the
        figures the cluster gives now."""
        ranges = self.log_ranges(partitions)
        by_time = (self.offsets(partitions, spec.timestamp_ms)
                   if isinstance(spec, ToTimestamp) else None)
        return plan_reset(spec, partitions, ranges=ranges, committed=committed, by_time=by_time)


# -- what describe shows -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionLag:
    """A row of ``groups describe``: a partition the group has an offset for or a member
    consumes (``partition`` None: a member with no partitions), and how far behind it is."""

    partition: TopicPartition | None
    current: int | None
    log_end: int | None
    member: Member | None

    @property
    def lag(self) -> int | None:
        if self.current is None or self.log_end is None:
            return None
        return self.log_end - self.current


def partition_lags(group: GroupDescription, committed: Mapping[TopicPartition, int],
                   log_end: Mapping[TopicPartition, int | None]) -> list[PartitionLag]:
    """Every partition the group has committed or its members are assigned, by topic and
    partition, with its consumer; then the members assigned nothing."""
    owner = {tp: m for m in group.members for tp in m.assignment}
    rows = [PartitionLag(partition=tp, current=committed.get(tp), log_end=log_end.get(tp),
                         member=owner.get(tp))
            for tp in sorted(set(committed) | set(owner))]
    rows += [PartitionLag(partition=None, current=None, log_end=None, member=m)
             for m in group.members if not m.assignment]
    return rows


def plaintext_addresses(brokers: Mapping[int, RegisteredBroker]) -> list[tuple[str, int]]:
    """Each registered broker's PLAINTEXT listener (host, port), by broker id; brokers without
    one are left out."""
    out = []
    for _, registered in sorted(brokers.items()):
        info = registered.info
        for listener in info.listeners:
            name, sep, address = listener.partition("://")
            host, colon, port = address.rpartition(":")
            protocol = info.security_protocol_map.get(name, name)
            if sep and colon and host and port.isdigit() and protocol == "PLAINTEXT":
                out.append((host.removeprefix("[").removesuffix("]"), int(port)))
                break
    return out
