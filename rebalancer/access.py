"""How the rebalancer reaches a cluster: one seam, two ways in.

Everything that plans on or acts on a live cluster (the CLI's ``reassign``, ``elect``, ``cluster
snapshot`` and ``rebalance`` commands, the scheduled jobs, self-healing) goes through a
:class:`ClusterAccess`:

- :class:`CoordinatorAccess`: through the coordinator's admin nodes (ZooKeeper, etcd, the
  embedded store), as Kafka's ZooKeeper-era tools did: ``/admin/reassign_partitions``, the
  dynamic configs under ``/config``, ``/admin/preferred_replica_election``.
- ``rebalancer.admin_access.AdminAccess``: through Kafka's Admin API on any cluster (Kafka 3.x
  and 4.x, KRaft or ZooKeeper mode, partctl's own brokers) by ``--bootstrap-server`` alone.

A :class:`ClusterView` is what both read: the live brokers and their racks, each partition's
replicas, leader and ISR, and (where the way in can tell) replica sizes and log-directory usage.
The planner's :class:`~rebalancer.snapshot.Snapshot` is derived from it.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from coordinator.codecs import TopicPartition
from rebalancer.snapshot import (
    PartitionReplicas,
    Snapshot,
    SnapshotError,
    live_brokers,
    liveness_problems,
)

if TYPE_CHECKING:
    from coordinator.base import Coordinator
    from coordinator.metadata import MetadataClient
    from rebalancer.execution import ExecutionProgress, ExecutionResult
    from rebalancer.plan import Plan
    from rebalancer.throttles import ThrottleChange
    from rebalancer.verification import CancelReport, VerifyReport

__all__ = [
    "AccessError", "ClusterAccess", "ClusterView", "CoordinatorAccess", "ElectionResult",
    "LivePartition", "LogDirUsage", "MovingPartition", "NO_LEADER", "open_access",
]

NO_LEADER = -1


class AccessError(Exception):
    """The cluster could not be read or asked: one line, naming what failed, never a secret
    (an unreachable bootstrap server, a refused login, a missing ACL)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LivePartition:
    """One partition as the cluster has it now. ``replicas`` is the assignment it is heading
    for (the target, when it is being moved; ``replicas[0]`` the preferred leader)."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    leader: int = NO_LEADER
    isr: tuple[int, ...] = ()
    moving: bool = False
    size_bytes: int | None = None

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True, slots=True, kw_only=True)
class LogDirUsage:
    """One log directory of one broker (DescribeLogDirs): its size and free space where the
    broker reports them (Kafka 3.3+, KIP-827), the bytes of the replicas it holds, its error."""

    broker: int
    path: str
    total_bytes: int | None = None
    usable_bytes: int | None = None
    replica_bytes: int = 0
    error: str | None = None

    @property
    def used_fraction(self) -> float | None:
        """How full the directory's volume is (0..1), None when the broker does not say."""
        if not self.total_bytes or self.usable_bytes is None:
            return None
        return max(0.0, min(1.0, 1 - self.usable_bytes / self.total_bytes))


@dataclass(frozen=True, slots=True, kw_only=True)
class MovingPartition:
    """A reassignment in progress: the full replica set and the replicas it adds and removes
    (ListPartitionReassignments; on a coordinator, the topic node and
    ``/admin/reassign_partitions``)."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)


@dataclass(frozen=True, slots=True, kw_only=True)
class ElectionResult:
    """What a preferred-leader election did, per partition."""

    elected: tuple[TopicPartition, ...] = ()
    not_needed: tuple[TopicPartition, ...] = ()
    failed: Mapping[TopicPartition, str] = field(default_factory=dict)
    requested: tuple[TopicPartition, ...] = ()
    """Partitions handed to the controller to elect later (the coordinator's way in, whose
    ``/admin/preferred_replica_election`` is carried out after the call returns)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterView:
    """The live cluster as the rebalancer reads it.

    ``brokers`` maps every live (registered) broker to its rack (None: no rack); a broker that
    holds replicas but is not live is in ``offline_brokers``. ``sizes_known`` says whether
    ``size_bytes`` was read (DescribeLogDirs; a coordinator knows no sizes)."""

    brokers: Mapping[int, str | None]
    partitions: tuple[LivePartition, ...]
    controller: int | None = None
    log_dirs: tuple[LogDirUsage, ...] = ()
    sizes_known: bool = False
    source: str = ""
    taken_at: str = field(default_factory=lambda: _dt.datetime.now(_dt.UTC)
                          .isoformat(timespec="seconds"))

    @property
    def offline_brokers(self) -> tuple[int, ...]:
        hosting = {r for p in self.partitions for r in p.replicas}
        return tuple(sorted(hosting - self.brokers.keys()))

    @property
    def moving(self) -> tuple[LivePartition, ...]:
        return tuple(p for p in self.partitions if p.moving)

    def snapshot(self, *, decommission: Iterable[int] = (), new_brokers: Iterable[int] = (),
                 sizes: Mapping[tuple[str, int], int] | None = None) -> Snapshot:
        """The planner's input: SnapshotError lists every problem, one line each.

        As the coordinator's snapshot: a broker that holds replicas but is not live must be
        in ``decommission`` (a plan can only drain it), and is given a placeholder rack of the
        cluster (``meta['offline_brokers']``). ``sizes`` (a ``--sizes`` file) overrides the
        sizes read."""
        decommission, new_brokers = frozenset(decommission), frozenset(new_brokers)
        racks = dict(self.brokers)
        offline = self.offline_brokers
        problems = liveness_problems(racks, offline, decommission, new_brokers)
        if problems:
            raise SnapshotError(problems)
        brokers = live_brokers(racks, offline)
        override = sizes or {}
        parts = tuple(PartitionReplicas(
            topic=p.topic, partition=p.partition, replicas=p.replicas,
            size_bytes=override.get((p.topic, p.partition), p.size_bytes))
            for p in sorted(self.partitions, key=lambda p: (p.topic, p.partition)))
        meta: dict[str, Any] = {"source": self.source, "taken_at": self.taken_at,
                                "moving_partitions": len(self.moving)}
        if offline:
            meta["offline_brokers"] = list(offline)
        snap = Snapshot(brokers=brokers, partitions=parts, decommission=decommission,
                        new_brokers=new_brokers, meta=MappingProxyType(meta))
        snap.validate()
        return snap


@runtime_checkable
class ClusterAccess(Protocol):
    """One cluster, reached one way. Every method raises :class:`AccessError` (one line) when
    the cluster cannot be reached or refuses; plan problems are ``PlanError``."""

    description: str
    """Where: a coordinator URL without credentials, or ``bootstrap HOST:PORT,...``."""

    def view(self, *, sizes: bool = True) -> ClusterView:
        """The live cluster; ``sizes``: read replica sizes and log-dir usage where possible."""
        ...

    def in_progress(self) -> dict[TopicPartition, MovingPartition]:
        """The reassignments in progress, whoever started them."""
        ...

    def validate(self, plan: Plan | str) -> Plan:
        """``plan`` checked against the live cluster (PlanError listing every problem)."""
        ...

    def execute(self, plan: Plan, *, max_concurrent_moves: int = 50,
                max_moves_per_broker: int | None = None, throttle: int | None = None,
                additional: bool = False, timeout: float | None = None,
                poll_interval: float = 0.5,
                progress: Callable[[ExecutionProgress], None] | None = None,
                label: str = "") -> ExecutionResult:
        """Carry ``plan`` out in batches within the limits, throttled when ``throttle`` (bytes
        per second) is given; refuses (ReassignmentInProgress, naming the partitions) a plan
        that overlaps moves in progress."""
        ...

    def verify(self, plan: Plan) -> VerifyReport:
        """Where each move of ``plan`` stands."""
        ...

    def remove_throttles(self, topics: Iterable[str]) -> ThrottleChange:
        """Take the reassignment throttles off every broker and off ``topics``."""
        ...

    def cancel(self, *, wait: float = 30.0) -> CancelReport:
        """Cancel every reassignment in progress (their replicas go back)."""
        ...

    def elect_preferred(self, partitions: Iterable[TopicPartition] | None = None
                        ) -> ElectionResult:
        """Make the preferred replica the leader (every partition when None)."""
        ...

    def close(self) -> None:
        ...


class CoordinatorAccess:
    """A cluster through its coordinator's admin nodes (Kafka's ZooKeeper layout)."""

    def __init__(self, coordinator: Coordinator, *, description: str = "",
                 owns_session: bool = False) -> None:
        from rebalancer.execution import execution_client

        self.coordinator = coordinator
        # one metadata client for everything the access does, an execution's included (whose
        # reads ride out a coordinator outage: rebalancer.execution.outage_retry)
        self.metadata: MetadataClient = execution_client(coordinator)
        self.description = description or "the coordinator"
        self._owns = owns_session

    def view(self, *, sizes: bool = True) -> ClusterView:
        from rebalancer.live_snapshot import cluster_state, target_replicas

        md = self.metadata
        racks, topics, deleting = cluster_state(md)
        tps = [TopicPartition(t, p) for t in sorted(topics) if t not in deleting
               for p in sorted(topics[t].partitions)]
        states = md.partition_states(tps)
        parts: list[LivePartition] = []
        for tp in tps:
            a = topics[tp.topic]
            node = states.get(tp)
            state = node.value if node is not None else None
            parts.append(LivePartition(
                topic=tp.topic, partition=tp.partition,
                replicas=target_replicas(a, tp.partition),
                leader=state.leader if state is not None else NO_LEADER,
                isr=tuple(state.isr) if state is not None else (),
                moving=bool(a.adding.get(tp.partition) or a.removing.get(tp.partition))))
        holder = md.controller()
        return ClusterView(brokers=racks, partitions=tuple(parts),
                           controller=holder[0].broker_id if holder is not None else None,
                           source="coordinator")

    def in_progress(self) -> dict[TopicPartition, MovingPartition]:
        from rebalancer.live_snapshot import cluster_state

        _, topics, _ = cluster_state(self.metadata)
        out: dict[TopicPartition, MovingPartition] = {}
        for topic, a in topics.items():
            for p, replicas in a.partitions.items():
                adding, removing = a.adding.get(p) or (), a.removing.get(p) or ()
                if adding or removing:
                    out[TopicPartition(topic, p)] = MovingPartition(
                        topic=topic, partition=p, replicas=tuple(replicas),
                        adding=tuple(adding), removing=tuple(removing))
        node = self.metadata.reassignment()
        for tp, target in (node.value.items() if node is not None else ()):
            if tp not in out:  # written, not yet started by the controller
                out[tp] = MovingPartition(topic=tp.topic, partition=tp.partition,
                                          replicas=tuple(target), adding=tuple(target))
        return out

    def validate(self, plan: Plan | str) -> Plan:
        from rebalancer.validation import validate_plan

        return validate_plan(self.metadata, plan)

    def execute(self, plan: Plan, *, max_concurrent_moves: int = 50,
                max_moves_per_broker: int | None = None, throttle: int | None = None,
                additional: bool = False, timeout: float | None = None,
                poll_interval: float = 0.5,
                progress: Callable[[ExecutionProgress], None] | None = None,
                label: str = "") -> ExecutionResult:
        from rebalancer.execution import execute_plan

        return execute_plan(self.metadata, plan,
                            max_concurrent_moves=max_concurrent_moves,
                            max_moves_per_broker=max_moves_per_broker, throttle=throttle,
                            additional=additional, timeout=timeout,
                            poll_interval=poll_interval, progress=progress, label=label)

    def verify(self, plan: Plan) -> VerifyReport:
        from rebalancer.verification import verify_plan

        return verify_plan(self.metadata, plan)

    def remove_throttles(self, topics: Iterable[str]) -> ThrottleChange:
        from rebalancer.throttles import remove_throttles

        return remove_throttles(self.metadata, topics)

    def cancel(self, *, wait: float = 30.0) -> CancelReport:
        from rebalancer.verification import cancel_reassignment

        return cancel_reassignment(self.coordinator, wait=wait)

    def elect_preferred(self, partitions: Iterable[TopicPartition] | None = None
                        ) -> ElectionResult:
        from coordinator.admin import Admin

        requested = Admin(self.metadata).elect_preferred(partitions)
        return ElectionResult(requested=tuple(requested))

    def close(self) -> None:
        if self._owns:
            self.coordinator.close()

    def __enter__(self) -> CoordinatorAccess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_access(*, coordinator_url: str | None = None, bootstrap: str | None = None,
                command_config: str | None = None, timeout: float = 30.0,
                connect_timeout: float | None = None,
                coordinator_options: Mapping[str, Any] | None = None) -> ClusterAccess:
    """The cluster one of the two ways in, for a ``with`` block or ``close()``: a coordinator
    URL (ZooKeeper, etcd, memory; ``coordinator_options`` go to ``coordinator.connect``), or
    Kafka's Admin API by ``bootstrap`` servers (``HOST:PORT,...``) with the client properties of
    ``command_config`` (Kafka's ``--command-config``). ValueError (one line) for both or
    neither, or ``command_config`` without ``bootstrap``; AccessError when the cluster cannot
    be reached (a coordinator's own errors are its own).

    By bootstrap servers, ``timeout`` bounds each Admin API call; ``connect_timeout`` (when
    shorter) bounds the first contact: the cluster is described within it (connected,
    authenticated, answering), so a server that accepts and never answers, or a wrong
    password, is said within the wait the user gave, not the longer one of a big
    DescribeLogDirs."""
    if coordinator_url and bootstrap:
        raise ValueError("give --bootstrap-server or --coordinator, not both")
    if command_config and not bootstrap:
        raise ValueError("--command-config goes with --bootstrap-server")
    if bootstrap:
        from kafkaclient.admin import AdminClient, AdminError
        from rebalancer.admin_access import AdminAccess

        first_contact = min(timeout, connect_timeout or timeout)
        try:
            admin = AdminClient.from_command_config(bootstrap, command_config,
                                                    timeout=first_contact)
        except AdminError as exc:  # the properties file: said as it is
            raise AccessError(str(exc)) from exc
        if first_contact < timeout:
            try:
                with admin:
                    admin.describe_cluster()
            except AdminError as exc:
                raise AccessError(f"cannot describe the cluster: {exc}") from exc
            admin = AdminClient.from_command_config(bootstrap, command_config, timeout=timeout)
        return AdminAccess(admin, description=f"bootstrap {bootstrap}")
    if coordinator_url:
        import coordinator
        from coordinator.url import redact

        session = coordinator.connect(coordinator_url, timeout=timeout,
                                      **dict(coordinator_options or {}))
        return CoordinatorAccess(session, description=redact(coordinator_url),
                                 owns_session=True)
    raise ValueError("no cluster: pass --bootstrap-server HOST:PORT or --coordinator URL")
