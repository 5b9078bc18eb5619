"""Kafka's Admin API as a client: what the rebalancer and the CLI ask of any Kafka cluster
(Apache Kafka 3.x in ZooKeeper mode, 4.x in KRaft mode, partctl's brokers) by its bootstrap
servers alone.

:class:`AdminClient` learns the brokers and the controller from Metadata and routes each call
as Kafka's own AdminClient does:

- AlterPartitionReassignments, ListPartitionReassignments and ElectLeaders go to the controller
  Metadata names; on NOT_CONTROLLER the metadata is read again and the call sent again, a
  bounded number of times (in KRaft the broker named is any broker, which forwards);
- DescribeConfigs and IncrementalAlterConfigs of a broker resource go to that broker;
- DescribeLogDirs goes to each broker asked about;
- the rest (Metadata, DescribeCluster, topic configs) to any broker that answers.

Each call takes the highest version both sides serve within the range read here (Metadata
1-12, DescribeConfigs 1-4, DescribeLogDirs 1-4 — v4 gives the volumes' total and usable bytes
—, ElectLeaders 0-2, IncrementalAlterConfigs 0-1, the reassignment APIs 0, DescribeCluster
0-1, falling back to Metadata where it is not served). Each public call has ``timeout``
seconds in all, connecting, retrying and waiting included. Failures are one
:class:`~kafkaclient.admin_types.AdminError` line, never a secret: a server that cannot be
reached, an authentication that fails, a principal without the ACL a call needs, an answer
that makes no sense (:mod:`kafkaclient.admin_checks`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from types import ModuleType
from typing import Any, Self

from kio.static.primitive import i8, i32

from coordinator.codecs import TopicPartition
from kafkaclient.admin_checks import (
    AUTHORIZATION,
    check_brokers,
    error_name,
    log_dir_infos,
    reassignment,
    topic_info,
)
from kafkaclient.admin_types import (
    AdminError,
    BrokerNode,
    ClusterInfo,
    LogDirInfo,
    PartitionInfo,
    Reassignment,
    ReplicaInfo,
    TopicInfo,
)
from kafkaclient.bootstrap import (
    Address,
    NodePool,
    Unreachable,
    api_name,
    format_address,
    parse_bootstrap,
)
from kafkaclient.messages import build
from kafkaclient.security.connector import Connector
from kafkaclient.security.settings import ClientSecurity

__all__ = ["AdminClient", "AdminError", "BrokerNode", "ClusterInfo", "LogDirInfo",
           "PartitionInfo", "Reassignment", "ReplicaInfo", "TopicInfo", "TopicPartition"]

log = logging.getLogger(__name__)

METADATA = 3
DESCRIBE_CONFIGS = 32
DESCRIBE_LOG_DIRS = 35
ELECT_LEADERS = 43
INCREMENTAL_ALTER_CONFIGS = 44
ALTER_PARTITION_REASSIGNMENTS = 45
LIST_PARTITION_REASSIGNMENTS = 46
DESCRIBE_CLUSTER = 60

RESOURCE_TYPES = {"topic": 2, "broker": 4, "broker_logger": 8}
_SET, _DELETE = 0, 1
_PREFERRED, _UNCLEAN = 0, 1
_CONTROLLER_TRIES = 5
_NEEDS = {
    ALTER_PARTITION_REASSIGNMENTS: "ALTER on the cluster",
    LIST_PARTITION_REASSIGNMENTS: "DESCRIBE on the cluster",
    ELECT_LEADERS: "ALTER on the cluster",
    DESCRIBE_LOG_DIRS: "DESCRIBE on the cluster",
    DESCRIBE_CONFIGS: "DESCRIBE_CONFIGS on the resource",
    INCREMENTAL_ALTER_CONFIGS: "ALTER_CONFIGS on the resource",
    METADATA: "DESCRIBE on the topic",
    DESCRIBE_CLUSTER: "DESCRIBE on the cluster",
}

Make = Callable[[ModuleType, int, float], Any]


def _server_timeout(left: float) -> timedelta:
    """What a request asks the broker to wait at most: most of the time left, so the answer
    arrives before the client stops waiting."""
    return timedelta(milliseconds=max(100, int(left * 800)))


def _failure(api_key: int, code: str, message: str | None = None) -> AdminError:
    """A request-level error as one line: authorization ones say which ACL is missing."""
    if code in AUTHORIZATION:
        return AdminError(f"not authorized: {code} on {api_name(api_key)} (the principal "
                          f"needs {_NEEDS.get(api_key, 'an ACL for it')})", code=code)
    return AdminError(f"{api_name(api_key)} failed: {code}" + (f": {message}" if message
                                                               else ""), code=code)


def _outcome(code: str | None, message: str | None) -> str | None:
    """A per-item result: None for success, else ``NAME: message``."""
    if code is None:
        return None
    return f"{code}: {message}" if message else code


_NC = "NOT_CONTROLLER"


def _code(result: str | None) -> str | None:
    """The error name of a per-item result."""
    return None if result is None else result.split(":", 1)[0]


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in sorted(set(partitions)):
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


class AdminClient:
    """The Admin API of the cluster at ``bootstrap`` (``h1:9092,h2:9092``; IPv6 as
    ``[::1]:9092``), connecting as ``security`` says (None: plaintext). ``timeout``: seconds
    each call may take in all. Not thread-safe: one caller at a time; for a ``with`` block."""

    def __init__(self, bootstrap: str, *, security: ClientSecurity | None = None,
                 client_id: str = "partctl-admin", timeout: float = 30.0) -> None:
        self._bootstrap = parse_bootstrap(bootstrap)
        if not timeout > 0:
            raise AdminError(f"timeout {timeout!r}: must be a positive number of seconds")
        self._protocol = security.protocol if security is not None else "PLAINTEXT"
        plain = security is None or (security.ssl is None and security.mechanism is None)
        connector = None if plain else Connector(security)  # type: ignore[arg-type]
        self._pool = NodePool(client_id=client_id, timeout=timeout, connector=connector)
        self._nodes: dict[int, BrokerNode] = {}
        self._controller_id: int | None = None
        self._cluster_id: str | None = None
        self._last: Address | None = None
        """The address that answered last: asked first next time (its connection is open)."""

    @classmethod
    def from_command_config(cls, bootstrap: str, path: str | None, **kw: Any) -> AdminClient:
        """A client configured by a Kafka client properties file (a tool's
        ``--command-config``: ``security.protocol``, ``sasl.mechanism``, ``sasl.jaas.config``,
        ``ssl.*``); None: plaintext. :class:`AdminError` naming the file (and the key)."""
        from kafkaclient.properties import PropertiesError, parse_properties
        from kafkaclient.security.settings import SecurityConfigError, client_properties_security

        if path is None:
            return cls(bootstrap, **kw)
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise AdminError(f"cannot read the client properties {path}: "
                             f"{exc.strerror or type(exc).__name__}") from None
        try:
            props = {p.key: p.value for p in parse_properties(data)}
            security = client_properties_security(props)
        except (PropertiesError, SecurityConfigError) as exc:
            raise AdminError(f"client properties {path}: {exc}") from None
        return cls(bootstrap, security=security, **kw)

    def __repr__(self) -> str:
        servers = ",".join(format_address(a) for a in self._bootstrap)
        return f"AdminClient({servers}, {self._protocol})"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._pool.close()

    # -- routing -------------------------------------------------------------------------------

    def _addresses(self) -> list[Address]:
        known = [self._nodes[i].address for i in sorted(self._nodes)]
        first = [self._last] if self._last is not None else []
        return list(dict.fromkeys(first + known + list(self._bootstrap)))

    def _any(self, api_key: int, low: int, high: int, make: Make, deadline: float
             ) -> tuple[Address, int, Any]:
        """``make``'s request answered by the first address that answers: the one that
        answered last, the known brokers, then the bootstrap servers."""
        reasons = []
        for address in self._addresses():
            try:
                version, response = self._pool.call(address, api_key, low, high, make,
                                                     deadline)
            except Unreachable as exc:
                reasons.append(f"{format_address(address)}: {exc}")
                if self._pool.remaining(deadline) <= 0:
                    break
                continue
            self._last = address
            return address, version, response
        what = "any broker" if self._nodes else "any bootstrap server"
        raise AdminError(f"cannot reach {what} ({'; '.join(reasons)})")

    def _at(self, broker_id: int, api_key: int, low: int, high: int, make: Make,
            deadline: float) -> tuple[int, Any]:
        """``make``'s request answered by broker ``broker_id``."""
        node = self._node(broker_id, deadline)
        try:
            return self._pool.call(node.address, api_key, low, high, make, deadline)
        except Unreachable as exc:
            raise AdminError(f"cannot reach broker {broker_id} ({node}) for "
                             f"{api_name(api_key)}: {exc}") from None

    def _node(self, broker_id: int, deadline: float) -> BrokerNode:
        if broker_id not in self._nodes:
            self._metadata((), deadline)
        node = self._nodes.get(broker_id)
        if node is None:
            live = ", ".join(str(i) for i in sorted(self._nodes)) or "none"
            raise AdminError(f"broker {broker_id} is not a live broker of the cluster "
                             f"(live: {live})")
        return node

    def _controller_call(self, api_key: int, low: int, high: int, make: Make,
                         deadline: float, retry: Callable[[Any], bool]) -> tuple[int, Any]:
        """``make``'s request answered by the controller; sent again (metadata read again
        first) while ``retry(response)`` says the broker was not the controller, or the
        controller could not be reached, a bounded number of times within the deadline."""
        last = ""
        for attempt in range(_CONTROLLER_TRIES):
            if attempt:
                self._pause(attempt, deadline)
                self._metadata((), deadline)
            elif self._controller_id is None and not self._nodes:
                self._metadata((), deadline)
            controller = self._controller_id
            if controller is not None and controller in self._nodes:
                node = self._nodes[controller]
                try:
                    version, response = self._pool.call(node.address, api_key, low, high,
                                                        make, deadline)
                except Unreachable as exc:
                    last = f"cannot reach the controller, broker {controller} ({node}): {exc}"
                    continue
            else:  # no controller named (or not among the brokers): any broker, which forwards
                _address, version, response = self._any(api_key, low, high, make, deadline)
            if not retry(response):
                return version, response
            last = f"broker {controller} answered NOT_CONTROLLER"
        raise AdminError(f"{api_name(api_key)}: {last} ({_CONTROLLER_TRIES} tries)",
                         code="NOT_CONTROLLER" if "NOT_CONTROLLER" in last else None)

    def _pause(self, attempt: int, deadline: float) -> None:
        left = self._pool.remaining(deadline)
        if left <= 0:
            raise AdminError(f"no time left of {self._pool.timeout:g}s")
        self._pool.clock.sleep(min(0.1 * 2 ** (attempt - 1), 1.0, left / 2))

    # -- metadata ------------------------------------------------------------------------------

    def _metadata(self, topics: Sequence[str] | None, deadline: float) -> Any:
        """Metadata of ``topics`` (None: all); the brokers and the controller learnt."""
        def make(m: ModuleType, version: int, _left: float) -> Any:
            wanted = None if topics is None else tuple(
                build(m.MetadataRequestTopic, name=t, topic_id=None) for t in topics)
            return build(m.MetadataRequest, topics=wanted, allow_auto_topic_creation=False,
                         include_topic_authorized_operations=False,
                         include_cluster_authorized_operations=False)

        address, _version, response = self._any(METADATA, 1, 12, make, deadline)
        where = f"the broker at {format_address(address)}: Metadata"
        self._nodes = check_brokers(where, response.brokers, id_field="node_id")
        controller = int(response.controller_id)
        self._controller_id = controller if controller >= 0 else None
        self._cluster_id = getattr(response, "cluster_id", None)
        return response

    def describe_cluster(self) -> ClusterInfo:
        """The cluster id, the controller and the live brokers (DescribeCluster; Metadata on
        a broker that does not serve it)."""
        deadline = self._pool.deadline()

        def make(m: ModuleType, version: int, _left: float) -> Any:
            return build(m.DescribeClusterRequest, include_cluster_authorized_operations=False,
                         endpoint_type=i8(1))

        served, reached, reasons = None, None, []
        for address in self._addresses():
            try:
                served = self._pool.version(address, DESCRIBE_CLUSTER, 0, 1, deadline)
            except Unreachable as exc:
                reasons.append(f"{format_address(address)}: {exc}")
                if self._pool.remaining(deadline) <= 0:
                    break
                continue
            reached = address
            break
        if reached is None:
            what = "any broker" if self._nodes else "any bootstrap server"
            raise AdminError(f"cannot reach {what} ({'; '.join(reasons)})")
        if served is not None:
            try:
                _version, response = self._pool.call(reached, DESCRIBE_CLUSTER, 0, 1, make,
                                                     deadline)
            except Unreachable as exc:
                raise AdminError(f"cannot reach {format_address(reached)}: {exc}") from None
            address = reached
            self._last = address
            code = error_name(response.error_code)
            if code is not None:
                raise _failure(DESCRIBE_CLUSTER, code, response.error_message)
            where = f"the broker at {format_address(address)}: DescribeCluster"
            self._nodes = check_brokers(where, response.brokers, id_field="broker_id")
            controller = int(response.controller_id)
            self._controller_id = controller if controller >= 0 else None
            self._cluster_id = response.cluster_id or None
        else:
            self._metadata((), deadline)
        return ClusterInfo(cluster_id=self._cluster_id, controller_id=self._controller_id,
                           brokers=tuple(self._nodes[i] for i in sorted(self._nodes)))

    def topics(self, names: Iterable[str] | None = None, *, batch: int = 1000
               ) -> dict[str, TopicInfo]:
        """Topics, partitions, replicas, leaders and ISRs (Metadata) of ``names`` (None:
        every topic), by name; a topic that does not exist is left out. Names are asked
        ``batch`` at a time, so a request and its answer stay bounded by what is asked; all
        topics are one Metadata request (the protocol has no way to list names alone), whose
        answer is used as it is rather than asked again."""
        if not isinstance(batch, int) or batch < 1:
            raise AdminError(f"batch {batch!r}: must be a positive number of topics")
        deadline = self._pool.deadline()
        if names is None:
            return self._topic_infos(self._metadata(None, deadline), None)
        wanted = list(dict.fromkeys(names))
        for name in wanted:
            if not isinstance(name, str) or not name:
                raise AdminError(f"topic name {name!r}: not a topic name")
        out: dict[str, TopicInfo] = {}
        for start in range(0, len(wanted), batch):
            chunk = wanted[start:start + batch]
            out.update(self._topic_infos(self._metadata(chunk, deadline), set(chunk)))
        return out

    def _topic_infos(self, response: Any, asked: set[str] | None) -> dict[str, TopicInfo]:
        where = f"the broker at {format_address(self._last or self._bootstrap[0])}: Metadata"
        out: dict[str, TopicInfo] = {}
        for topic in response.topics:
            info = topic_info(where, topic)
            if asked is not None and info.name not in asked:
                continue  # not asked for: not kept
            if info.name in out:
                raise AdminError(f"{where} answered topic {info.name!r} twice")
            if info.error == "UNKNOWN_TOPIC_OR_PARTITION":
                continue
            if info.error in AUTHORIZATION:
                raise AdminError(f"not authorized: {info.error} on Metadata for topic "
                                 f"{info.name!r} (the principal needs DESCRIBE on the topic)",
                                 code=info.error)
            out[info.name] = info
        return out

    # -- log directories -----------------------------------------------------------------------

    def log_dirs(self, brokers: Iterable[int] | None = None) -> dict[int, tuple[LogDirInfo, ...]]:
        """Each broker's log directories with every replica's size (DescribeLogDirs to each
        broker; None: every live broker)."""
        deadline = self._pool.deadline()
        if brokers is None:
            self._metadata((), deadline)
            ids = sorted(self._nodes)
        else:
            ids = sorted(set(int(b) for b in brokers))

        def make(m: ModuleType, version: int, _left: float) -> Any:
            return build(m.DescribeLogDirsRequest, topics=None)

        out: dict[int, tuple[LogDirInfo, ...]] = {}
        for broker_id in ids:
            node = self._node(broker_id, deadline)
            version, response = self._at(broker_id, DESCRIBE_LOG_DIRS, 1, 4, make, deadline)
            code = error_name(getattr(response, "error_code", 0))
            if code is not None:
                raise _failure(DESCRIBE_LOG_DIRS, code)
            out[broker_id] = log_dir_infos(f"broker {broker_id} ({node}): DescribeLogDirs",
                                           response.results)
        return out

    # -- reassignments -------------------------------------------------------------------------

    def list_reassignments(self, partitions: Iterable[TopicPartition] | None = None
                           ) -> dict[TopicPartition, Reassignment]:
        """The partitions being moved (of ``partitions``, or all): their replica sets, adding
        and removing replicas."""
        deadline = self._pool.deadline()
        wanted = None if partitions is None else _by_topic(partitions)
        if wanted == {}:
            return {}

        def make(m: ModuleType, version: int, left: float) -> Any:
            topics = None if wanted is None else tuple(
                build(m.ListPartitionReassignmentsTopics, name=t,
                      partition_indexes=tuple(i32(p) for p in ps)) for t, ps in wanted.items())
            return build(m.ListPartitionReassignmentsRequest, timeout=_server_timeout(left),
                         topics=topics)

        _version, response = self._controller_call(
            LIST_PARTITION_REASSIGNMENTS, 0, 0, make, deadline,
            lambda r: error_name(r.error_code) == "NOT_CONTROLLER")
        code = error_name(response.error_code)
        if code is not None:
            raise _failure(LIST_PARTITION_REASSIGNMENTS, code, response.error_message)
        where = "the controller: ListPartitionReassignments"
        out: dict[TopicPartition, Reassignment] = {}
        for topic in response.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, int(p.partition_index))
                if tp in out:
                    raise AdminError(f"{where} answered {tp} twice")
                out[tp] = reassignment(where, f"partition {tp}", p)
        return out

    def alter_reassignments(self, targets: Mapping[TopicPartition, Sequence[int] | None]
                            ) -> dict[TopicPartition, str | None]:
        """Move each partition to its target replicas (None: cancel its move). Per
        partition: None when the move was accepted, else ``ERROR_NAME: message``; an error of
        the whole request (not authorized...) is :class:`AdminError`."""
        deadline = self._pool.deadline()
        asked = {TopicPartition(tp.topic, int(tp.partition)):
                 (None if r is None else tuple(int(b) for b in r)) for tp, r in targets.items()}
        if not asked:
            return {}
        results: dict[TopicPartition, str | None] = {}
        pending = dict(asked)
        for attempt in range(_CONTROLLER_TRIES):
            if attempt:
                self._pause(attempt, deadline)
                self._metadata((), deadline)
            answered = self._alter_once(pending, deadline)
            results.update(answered)
            pending = {tp: pending[tp] for tp, r in answered.items() if _code(r) == _NC}
            if not pending:
                break
        return {tp: results[tp] for tp in asked}

    def _alter_once(self, targets: Mapping[TopicPartition, tuple[int, ...] | None],
                    deadline: float) -> dict[TopicPartition, str | None]:
        by_topic: dict[str, list[tuple[int, tuple[int, ...] | None]]] = {}
        for tp in sorted(targets):
            by_topic.setdefault(tp.topic, []).append((tp.partition, targets[tp]))

        def make(m: ModuleType, version: int, left: float) -> Any:
            return build(m.AlterPartitionReassignmentsRequest, timeout=_server_timeout(left),
                         allow_replication_factor_change=True, topics=tuple(
                build(m.ReassignableTopic, name=t, partitions=tuple(
                    build(m.ReassignablePartition, partition_index=i32(p),
                          replicas=None if r is None else tuple(i32(b) for b in r))
                    for p, r in ps)) for t, ps in by_topic.items()))

        _version, response = self._controller_call(
            ALTER_PARTITION_REASSIGNMENTS, 0, 0, make, deadline,
            lambda r: error_name(r.error_code) == "NOT_CONTROLLER")
        code = error_name(response.error_code)
        if code is not None:
            raise _failure(ALTER_PARTITION_REASSIGNMENTS, code, response.error_message)
        out: dict[TopicPartition, str | None] = {}
        for topic in response.responses:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, int(p.partition_index))
                if tp in targets:
                    out[tp] = _outcome(error_name(p.error_code), p.error_message)
        for tp in targets:
            out.setdefault(tp, "UNKNOWN_SERVER_ERROR: the controller did not answer for it")
        return out

    # -- elections -----------------------------------------------------------------------------

    def elect_leaders(self, partitions: Iterable[TopicPartition] | None = None, *,
                      unclean: bool = False) -> dict[TopicPartition, str | None]:
        """Elect each partition's preferred leader (``unclean``: any live replica when none
        of the ISR is). Per partition: None when elected, ``"ELECTION_NOT_NEEDED"`` when the
        leader already is the one, else ``ERROR_NAME: message``. None: every partition (the
        answer then lists those that needed an election)."""
        deadline = self._pool.deadline()
        wanted = None if partitions is None else sorted(set(
            TopicPartition(tp.topic, int(tp.partition)) for tp in partitions))
        if wanted == []:
            return {}
        results: dict[TopicPartition, str | None] = {}
        pending = wanted
        for attempt in range(_CONTROLLER_TRIES):
            if attempt:
                self._pause(attempt, deadline)
                self._metadata((), deadline)
            answered = self._elect_once(pending, unclean, deadline)
            results.update(answered)
            retry = [tp for tp, r in answered.items() if _code(r) == _NC]
            if not retry:
                break
            if pending is not None:
                pending = retry
        return results

    def _elect_once(self, partitions: list[TopicPartition] | None, unclean: bool,
                    deadline: float) -> dict[TopicPartition, str | None]:
        kind = _UNCLEAN if unclean else _PREFERRED

        def make(m: ModuleType, version: int, left: float) -> Any:
            topics = None if partitions is None else tuple(
                build(m.TopicPartitions, topic=t, partitions=tuple(i32(p) for p in ps))
                for t, ps in _by_topic(partitions).items())
            return build(m.ElectLeadersRequest, election_type=i8(kind), topic_partitions=topics,
                         timeout=_server_timeout(left))

        _version, response = self._controller_call(
            ELECT_LEADERS, 1 if unclean else 0, 2, make, deadline,
            lambda r: error_name(getattr(r, "error_code", 0)) == "NOT_CONTROLLER")
        code = error_name(getattr(response, "error_code", 0))
        if code is not None:
            raise _failure(ELECT_LEADERS, code)
        asked = None if partitions is None else set(partitions)
        out: dict[TopicPartition, str | None] = {}
        for topic in response.replica_election_results:
            for p in topic.partition_result:
                tp = TopicPartition(topic.topic, int(p.partition_id))
                if asked is not None and tp not in asked:
                    continue
                name = error_name(p.error_code)
                if name in AUTHORIZATION:
                    raise _failure(ELECT_LEADERS, name)
                out[tp] = name if name in ("ELECTION_NOT_NEEDED", _NC) else (
                    _outcome(name, p.error_message))
        for tp in asked or ():
            out.setdefault(tp, "UNKNOWN_SERVER_ERROR: the controller did not answer for it")
        return out

    # -- configs -------------------------------------------------------------------------------

    def _route_resources(self, resources: Iterable[tuple[str, str]], deadline: float
                         ) -> dict[int | None, list[tuple[str, str]]]:
        """Resources by the broker that must answer for them (None: any)."""
        groups: dict[int | None, list[tuple[str, str]]] = {}
        for kind, name in dict.fromkeys(resources):
            if kind not in RESOURCE_TYPES:
                raise AdminError(f"resource type {kind!r}: one of "
                                 f"{', '.join(RESOURCE_TYPES)}")
            target: int | None = None
            if kind in ("broker", "broker_logger") and name != "":
                if not name.isascii() or not name.isdigit():
                    raise AdminError(f"{kind} resource {name!r}: not a broker id")
                target = int(name)
                self._node(target, deadline)
            elif kind == "topic" and not name:
                raise AdminError("topic resource: an empty topic name")
            groups.setdefault(target, []).append((kind, name))
        return groups

    def _config_call(self, target: int | None, api_key: int, high: int, make: Make,
                     deadline: float) -> tuple[str, Any]:
        if target is None:
            address, _version, response = self._any(api_key, 0 if high == 1 else 1, high, make,
                                                     deadline)
            return f"the broker at {format_address(address)}", response
        _version, response = self._at(target, api_key, 0 if high == 1 else 1, high, make,
                                      deadline)
        return f"broker {target}", response

    def describe_configs(self, resources: Iterable[tuple[str, str]]
                         ) -> dict[tuple[str, str], dict[str, str | None]]:
        """The configs of each resource (``("topic", name)``, ``("broker", "1")``; ``""``:
        the cluster's broker defaults): key -> value, None for a sensitive or unset value.
        A resource the cluster cannot describe is :class:`AdminError`."""
        deadline = self._pool.deadline()
        out: dict[tuple[str, str], dict[str, str | None]] = {}
        for target, group in self._route_resources(resources, deadline).items():
            def make(m: ModuleType, version: int, _left: float,
                     group: list[tuple[str, str]] = group) -> Any:
                return build(m.DescribeConfigsRequest, include_synonyms=False,
                             include_documentation=False, resources=tuple(
                    build(m.DescribeConfigsResource, resource_type=i8(RESOURCE_TYPES[k]),
                          resource_name=n, configuration_keys=None) for k, n in group))

            where, response = self._config_call(target, DESCRIBE_CONFIGS, 4, make, deadline)
            kinds = {v: k for k, v in RESOURCE_TYPES.items()}
            for result in response.results:
                key = (kinds.get(int(result.resource_type), "?"), result.resource_name)
                if key not in group:
                    continue
                code = error_name(result.error_code)
                if code in AUTHORIZATION:
                    raise _failure(DESCRIBE_CONFIGS, code)
                if code is not None:
                    raise AdminError(f"DescribeConfigs of {key[0]} {key[1]!r}: {code}"
                                     + (f": {result.error_message}" if result.error_message
                                        else ""), code=code)
                out[key] = {c.name: (None if c.is_sensitive else c.value)
                            for c in result.configs}
            missing = [k for k in group if k not in out]
            if missing:
                raise AdminError(f"{where} did not describe {missing[0][0]} {missing[0][1]!r}")
        return out

    def incremental_alter_configs(self, changes: Mapping[tuple[str, str],
                                                         Mapping[str, str | None]]
                                  ) -> dict[tuple[str, str], str | None]:
        """Set (a value) or delete (None) config keys of each resource; per resource: None
        when done, else ``ERROR_NAME: message``."""
        deadline = self._pool.deadline()
        out: dict[tuple[str, str], str | None] = {}
        for target, group in self._route_resources(changes, deadline).items():
            def make(m: ModuleType, version: int, _left: float,
                     group: list[tuple[str, str]] = group) -> Any:
                return build(m.IncrementalAlterConfigsRequest, validate_only=False,
                             resources=tuple(build(
                                 m.AlterConfigsResource, resource_type=i8(RESOURCE_TYPES[k]),
                                 resource_name=n, configs=tuple(
                                     build(m.AlterableConfig, name=key,
                                           config_operation=i8(_DELETE if v is None else _SET),
                                           value=v)
                                     for key, v in changes[(k, n)].items()))
                                 for k, n in group))

            _where, response = self._config_call(target, INCREMENTAL_ALTER_CONFIGS, 1, make,
                                                 deadline)
            kinds = {v: k for k, v in RESOURCE_TYPES.items()}
            for result in response.responses:
                key = (kinds.get(int(result.resource_type), "?"), result.resource_name)
                if key in group:
                    out[key] = _outcome(error_name(result.error_code), result.error_message)
            for key in group:
                out.setdefault(key, "UNKNOWN_SERVER_ERROR: the broker did not answer for it")
        return out
