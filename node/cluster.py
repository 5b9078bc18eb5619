"""An embedded cluster: N real brokers in one process, on any coordinator URL.

Each broker (:class:`~node.broker_node.BrokerNode`) has its own coordinator session, log
directory, controller candidacy and replica manager. The controller's requests reach the replica
managers through an in-process network; followers fetch from leaders through a live map of the
running brokers; leaders' ISR changes reach the controller through the coordinator, as in Kafka.

    with EmbeddedCluster(3) as cluster:
        tps = cluster.create_topic("events", partitions=3, replication_factor=3)
        with cluster.producer() as producer:
            producer.produce(tps[0], [b"hello"])
        cluster.crash(cluster.leader(tps[0]))
        cluster.wait_for_leader(tps[0])

The wait helpers poll (every few milliseconds) until the cluster reaches the state asked for:
stored in the coordinator, known to the brokers' metadata caches (what clients see), and acted
on by the replica managers.
"""

from __future__ import annotations

import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import coordinator
from coordinator.admin import Admin, controller_status
from coordinator.codecs import PartitionStateNode, TopicPartition
from coordinator.metadata import MetadataClient
from interbroker.requests import UpdateMetadataPartition
from node.broker_node import BrokerNode
from node.clients import Consumer, Producer
from replication.config import ReplicaConfig
from replication.partition import Role
from replication.protocol import ACKS_ALL, FetchEndpoint
from replication.replica_manager import ReplicaManager
from statemachines.controller import ControllerConfig
from statemachines.in_process import InProcessNetwork

__all__ = [
    "ClusterTimeout",
    "EmbeddedCluster",
    "PartitionReport",
    "ReplicaReport",
    "embedded_replica_config",
]

T = TypeVar("T")


class ClusterTimeout(AssertionError):
    """A wait helper gave up: the cluster did not reach the state asked for in time."""


def embedded_replica_config(**overrides: Any) -> ReplicaConfig:
    """Kafka's broker defaults, except that ISR changes reach the controller within about a
    second (Kafka waits 2.5 to 5 s): an embedded cluster is watched by tests and people."""
    settings: dict[str, Any] = {
        "isr_change_check_interval_ms": 100,
        "isr_change_blackout_ms": 200,
        "isr_change_max_delay_ms": 1_000,
        "replica_fetch_backoff_ms": 50,
    }
    settings.update(overrides)
    return ReplicaConfig(**settings)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaReport:
    """One replica as its broker sees it (``online`` False: the broker is down)."""

    broker: int
    online: bool
    role: str
    high_watermark: int | None = None
    log_start_offset: int | None = None
    log_end_offset: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionReport:
    """A partition's stored leader and ISR, and each replica's offsets."""

    tp: TopicPartition
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[ReplicaReport, ...]


class _LiveEndpoints(Mapping[int, FetchEndpoint]):
    """Broker id -> replica manager, over the running brokers only (a live view)."""

    def __init__(self, nodes: Mapping[int, BrokerNode]) -> None:
        self._nodes = nodes

    def __getitem__(self, broker_id: int) -> FetchEndpoint:
        node = self._nodes.get(broker_id)
        if node is None or not node.running or node.replica_manager is None:
            raise KeyError(broker_id)
        return node.replica_manager

    def __iter__(self) -> Iterator[int]:
        return iter([b for b, n in list(self._nodes.items()) if n.running])

    def __len__(self) -> int:
        return sum(1 for n in list(self._nodes.values()) if n.running)


class EmbeddedCluster:
    """``brokers`` (a count, numbered from 1, or explicit ids) on coordinator ``url``.

    ``url`` defaults to a fresh ``memory://`` store; ``root`` (the parent of the brokers' log
    directories, ``broker-<id>``) to a temporary directory removed on :meth:`close`.

    Followers fetch from the running brokers' replica managers unless ``fetch_transport``
    gives, per broker id, the transport that broker's followers use (a network one: the
    broker package's clients, which this package cannot import); ``on_node_start`` is called
    with each broker node once it started (to put a server in front of it, say).
    """

    def __init__(
        self,
        brokers: int | Iterable[int] = 3,
        *,
        url: str | None = None,
        root: Path | str | None = None,
        replica_config: ReplicaConfig | None = None,
        controller_config: ControllerConfig | None = None,
        racks: Mapping[int, str] | None = None,
        connect_options: Mapping[str, Any] | None = None,
        fetch_transport: Callable[[int], Mapping[int, FetchEndpoint]] | None = None,
        on_node_start: Callable[[BrokerNode], None] | None = None,
    ) -> None:
        self._fetch_transport = fetch_transport
        self._on_node_start = on_node_start
        self.broker_ids = tuple(range(1, brokers + 1) if isinstance(brokers, int) else brokers)
        self._own_store = url is None
        self.url = url or f"memory://embedded-{uuid.uuid4().hex[:12]}"
        self._own_root = root is None
        self.root = Path(root) if root is not None else Path(
            tempfile.mkdtemp(prefix="partctl-cluster-"))
        self.replica_config = replica_config or embedded_replica_config()
        self.controller_config = controller_config
        self.racks = dict(racks or {})
        self.connect_options = dict(connect_options or {})
        self.network = InProcessNetwork()
        self.nodes: dict[int, BrokerNode] = {}
        self._endpoints = _LiveEndpoints(self.nodes)
        self._client = coordinator.connect(self.url, **self.connect_options)
        self.metadata = MetadataClient(self._client)
        self.admin = Admin(self._client)
        self._started = False

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self, timeout: float = 15.0) -> EmbeddedCluster:
        """Start every broker and wait for a controller."""
        self.metadata.ensure_layout()
        for b in self.broker_ids:
            self._start_node(b)
        self._started = True
        self.wait_for_controller(timeout)
        return self

    def log_dir(self, broker_id: int) -> Path:
        return self.root / f"broker-{broker_id}"

    def _start_node(self, broker_id: int) -> BrokerNode:
        transport = (self._fetch_transport(broker_id) if self._fetch_transport is not None
                     else self._endpoints)
        node = BrokerNode(
            self.url, broker_id, self.log_dir(broker_id), network=self.network,
            transport=transport, rack=self.racks.get(broker_id),
            replica_config=self.replica_config, controller_config=self.controller_config,
            connect_options=self.connect_options,
        )
        self.nodes[broker_id] = node
        node.start()
        if self._on_node_start is not None:
            self._on_node_start(node)
        return node

    def close(self) -> None:
        """Stop every broker (controllers first, so nobody reacts), then clean up."""
        for node in list(self.nodes.values()):
            if node.running and node.controller is not None:
                node.controller.close()
        for node in list(self.nodes.values()):
            node.shutdown()
        self._client.close()
        if self._own_store:
            from coordinator.memory import MemoryStore

            MemoryStore.drop(self.url.removeprefix("memory://"))
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> EmbeddedCluster:
        return self if self._started else self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- brokers -------------------------------------------------------------------------------

    def running(self) -> list[int]:
        return [b for b, n in self.nodes.items() if n.running]

    def node(self, broker_id: int) -> BrokerNode:
        return self.nodes[broker_id]

    def replica_manager(self, broker_id: int) -> ReplicaManager | None:
        """The running broker's replica manager (None while it is down)."""
        node = self.nodes.get(broker_id)
        return node.replica_manager if node is not None and node.running else None

    def crash(self, broker_id: int, *, lose_unflushed: bool = False, torn_bytes: int = 0
              ) -> None:
        """Kill the broker (see :meth:`BrokerNode.crash`)."""
        self.nodes[broker_id].crash(lose_unflushed=lose_unflushed, torn_bytes=torn_bytes)

    def restart(self, broker_id: int) -> BrokerNode:
        """Start a new incarnation on the same log directory: recovery, a new broker epoch."""
        old = self.nodes.get(broker_id)
        if old is not None and old.running:
            raise RuntimeError(f"broker {broker_id} is running")
        return self._start_node(broker_id)

    def stop(self, broker_id: int) -> None:
        """A clean shutdown that does not ask the controller first."""
        self.nodes[broker_id].shutdown()

    def controlled_shutdown(self, broker_id: int, timeout: float = 30.0) -> None:
        """Move every leadership off the broker through the controller, then stop it."""
        self.nodes[broker_id].controlled_shutdown(timeout)

    def flush_logs(self) -> None:
        """fsync every running broker's logs now and record their recovery points (what
        ``log.flush.interval.ms`` does periodically)."""
        for b in self.running():
            rm = self.replica_manager(b)
            if rm is not None:
                rm.logs.flush_logs()

    # -- metadata ------------------------------------------------------------------------------

    def partitions(self, topic: str) -> list[TopicPartition]:
        a = self.metadata.assignments([topic])[topic].value
        return [TopicPartition(topic=topic, partition=p) for p in sorted(a.partitions)]

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        return tuple(self.metadata.assignments([tp.topic])[tp.topic].value.partitions[
            tp.partition])

    def state(self, tp: TopicPartition) -> PartitionStateNode | None:
        """The stored leader, leader epoch and ISR."""
        item = self.metadata.partition_states([tp])[tp]
        return None if item is None else item.value

    def leader(self, tp: TopicPartition) -> int:
        state = self.state(tp)
        return -1 if state is None else state.leader

    def controller(self) -> tuple[int | None, int | None]:
        """(active controller's broker id, controller epoch) as stored."""
        status = controller_status(self.metadata)
        return status.broker_id, status.epoch

    def metadata_for(self, tp: TopicPartition) -> UpdateMetadataPartition | None:
        """The freshest answer the running brokers' metadata caches give for ``tp`` (what a
        client's metadata request would find)."""
        best = None
        for b in self.running():
            rm = self.replica_manager(b)
            entry = rm.metadata_for(tp) if rm is not None else None
            if entry is not None and (best is None or (entry.leader_epoch, entry.partition_epoch)
                                      > (best.leader_epoch, best.partition_epoch)):
                best = entry
        return best

    def describe(self, tp: TopicPartition) -> PartitionReport:
        state = self.state(tp)
        reports = []
        for b in self.replicas(tp):
            rm = self.replica_manager(b)
            status = rm.status(tp) if rm is not None else None
            if status is None:
                reports.append(ReplicaReport(broker=b, online=rm is not None,
                                             role="offline" if rm is None else "none"))
            else:
                reports.append(ReplicaReport(
                    broker=b, online=True, role=status.role.value,
                    high_watermark=status.high_watermark,
                    log_start_offset=status.log_start_offset,
                    log_end_offset=status.log_end_offset))
        return PartitionReport(
            tp=tp, leader=state.leader if state else -1,
            leader_epoch=state.leader_epoch if state else -1,
            isr=tuple(state.isr) if state else (), replicas=tuple(reports))

    # -- admin ---------------------------------------------------------------------------------

    def create_topic(
        self, name: str, partitions: int = 1, replication_factor: int = 3, *,
        assignment: Mapping[int, Iterable[int]] | None = None, wait: bool = True,
        timeout: float = 15.0, config: Mapping[str, str] | None = None,
    ) -> list[TopicPartition]:
        """Create a topic (``config``: its overrides, Kafka's keys); with ``wait``, return once
        every partition has a working leader with all replicas in sync."""
        if assignment is not None:
            self.admin.create_topic(name, assignment={p: list(r) for p, r in assignment.items()},
                                    config=config)
        else:
            self.admin.create_topic(name, partitions, replication_factor, config=config)
        tps = self.partitions(name)
        if wait:
            for tp in tps:
                self.wait_for_leader(tp, timeout=timeout)
                self.wait_for_isr(tp, timeout=timeout)
        return tps

    def elect_preferred(self, tps: Iterable[TopicPartition] | None = None, *,
                        wait: bool = True, timeout: float = 15.0) -> list[TopicPartition]:
        """Request preferred elections; with ``wait``, until each preferred replica leads."""
        requested = self.admin.elect_preferred(None if tps is None else list(tps))
        if wait:
            for tp in requested:
                self.wait_for_leader(tp, leader=self.replicas(tp)[0], timeout=timeout)
        return requested

    # -- waiting -------------------------------------------------------------------------------

    def _wait(self, check: Callable[[], T | None], timeout: float, what: str) -> T:
        deadline = time.monotonic() + timeout
        while True:
            value = check()
            if value is not None and value is not False:
                return value
            if time.monotonic() > deadline:
                raise ClusterTimeout(f"timed out after {timeout}s waiting for {what}")
            time.sleep(0.005)

    def wait_for_controller(self, timeout: float = 15.0) -> tuple[int, int]:
        """Until a running broker is the active controller; (its id, the controller epoch)."""
        def check() -> tuple[int, int] | None:
            b, epoch = self.controller()
            node = self.nodes.get(b) if b is not None else None
            if node is None or not node.running or node.controller is None:
                return None
            if b is None or not node.controller.active or epoch is None:
                return None
            return b, epoch

        return self._wait(check, timeout, "an active controller")

    def wait_for_leader(
        self, tp: TopicPartition, *, leader: int | None = None, excluding: Iterable[int] = (),
        min_epoch: int = -1, timeout: float = 15.0,
    ) -> PartitionStateNode:
        """Until ``tp`` has a leader (``leader`` if given; none of ``excluding``; at a leader
        epoch >= ``min_epoch``) that leads it in its replica manager and that the brokers'
        metadata caches name; returns the stored state."""
        excluded = set(excluding)

        def check() -> PartitionStateNode | None:
            state = self.state(tp)
            if state is None or state.leader < 0 or state.leader in excluded:
                return None
            if (leader is not None and state.leader != leader) or state.leader_epoch < min_epoch:
                return None
            rm = self.replica_manager(state.leader)
            status = rm.status(tp) if rm is not None else None
            if status is None or status.role is not Role.LEADER or (
                    status.leader_epoch != state.leader_epoch):
                return None
            meta = self.metadata_for(tp)
            if meta is None or meta.leader != state.leader or (
                    meta.leader_epoch != state.leader_epoch):
                return None
            return state

        want = f"leader {leader}" if leader is not None else "a leader"
        return self._wait(check, timeout, f"{want} of {tp.topic}-{tp.partition}")

    def wait_for_isr(self, tp: TopicPartition, isr: Iterable[int] | None = None, *,
                     timeout: float = 15.0) -> PartitionStateNode:
        """Until the ISR of ``tp`` is ``isr`` (all its replicas by default), as stored, as the
        leader holds it and as the controller told the brokers (so its elections can use it)."""
        want = set(isr) if isr is not None else set(self.replicas(tp))

        def check() -> PartitionStateNode | None:
            state = self.state(tp)
            if state is None or set(state.isr) != want:
                return None
            rm = self.replica_manager(state.leader) if state.leader >= 0 else None
            status = rm.status(tp) if rm is not None else None
            if status is None or set(status.isr) != want:
                return None
            meta = self.metadata_for(tp)
            if meta is None or set(meta.isr) != want or meta.leader_epoch != state.leader_epoch:
                return None
            return state

        return self._wait(check, timeout, f"ISR {sorted(want)} of {tp.topic}-{tp.partition}")

    def wait_for_caught_up(self, tp: TopicPartition, *, timeout: float = 15.0) -> int:
        """Until every running replica's log end and HW equal the leader's; returns that."""
        def check() -> int | None:
            report = self.describe(tp)
            ends = {(r.log_end_offset, r.high_watermark) for r in report.replicas if r.online}
            if len(ends) != 1:
                return None
            leo, hw = ends.pop()
            return leo if leo is not None and leo == hw else None

        return self._wait(check, timeout, f"replicas of {tp.topic}-{tp.partition} caught up")

    # -- clients -------------------------------------------------------------------------------

    def producer(self, *, acks: int = ACKS_ALL, **options: Any) -> Producer:
        return Producer(self, acks=acks, **options)

    def consumer(self, **options: Any) -> Consumer:
        return Consumer(self, **options)

    def __repr__(self) -> str:
        return f"EmbeddedCluster({self.url}, running={self.running()})"
