"""A few replica managers wired in process, with the test playing the controller.

:class:`MiniCluster` is shared by the replication scenario tests (imported from here); the tests
at the bottom pin the harness itself. The "controller" is only what the scenarios need: it holds
partition states in a memory coordinator (fenced by a real controller epoch), elects leaders
with ``elections.elect_offline`` over the live ISR, bumps leader epochs, and sends LeaderAndIsr
to the replicas, as Kafka's controller does on broker failure and start-up. Fetching is driven
round by round (:meth:`MiniCluster.step`), time by a manual clock.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future
from pathlib import Path

import pytest

import coordinator
from coordinator.clock import Clock, ManualClock
from coordinator.codecs import PartitionStateNode, TopicAssignment, TopicPartition
from coordinator.metadata import MetadataClient
from elections.leader import NO_LEADER, elect_offline
from interbroker.controller_client import ControllerClient
from interbroker.errors import ErrorCode
from interbroker.requests import LeaderAndIsrPartition, LeaderAndIsrRequest
from replication.config import ReplicaConfig
from replication.log import Log
from replication.protocol import ACKS_ALL, EpochAnswer, FetchEndpoint, FetchResult
from replication.records import Record, decode_batch, encode_batch, iter_batches, validate_batches
from replication.replica_manager import ReplicaManager
from statemachines.in_process import InProcessNetwork

from .loopback import IN_PROCESS, NETWORK, TRANSPORTS, LoopbackServers

TP = TopicPartition(topic="t", partition=0)
_values = itertools.count()


def make_batch(n: int = 1, *, tag: str = "v", size: int = 16) -> tuple[bytes, list[bytes]]:
    """A producer batch of ``n`` records with unique values; returns it and the values."""
    values = [f"{tag}-{next(_values)}".encode().ljust(size, b".") for _ in range(n)]
    records = [Record(key=None, value=v, timestamp=1_000) for v in values]
    return encode_batch(records), values


def batch_signature(log: Log) -> list[tuple[int, int, int, int]]:
    """(base offset, last offset, leader epoch, CRC) of every batch in ``log``."""
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 22).records
        if not data:
            break
        for header in iter_batches(data):
            out.append((header.base_offset, header.last_offset,
                        header.partition_leader_epoch, header.crc))
        offset = out[-1][1] + 1
    return out


def values_by_offset(log: Log) -> dict[int, bytes | None]:
    out: dict[int, bytes | None] = {}
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 22).records
        if not data:
            break
        for pos, *_ in validate_batches(data):
            for record in decode_batch(data, pos).records:
                out[record.offset] = record.value
        offset = max(out) + 1
    return out


class _NoFetch:
    """A leader whose fetch answers are lost on the way (its other answers arrive)."""

    def __init__(self, endpoint: ReplicaManager) -> None:
        self._endpoint = endpoint

    def fetch(self, *args: object) -> FetchResult:
        return FetchResult(error=ErrorCode.BROKER_NOT_AVAILABLE)

    def offsets_for_leader_epoch(self, *args: object) -> EpochAnswer:
        return self._endpoint.offsets_for_leader_epoch(*args)  # type: ignore[arg-type]


class _Links(Mapping):
    """What one broker's fetcher can reach: the live brokers, minus links cut by the test.
    Over the network transport, the leaders' servers through the follower's network client."""

    def __init__(self, cluster: MiniCluster, follower: int) -> None:
        self._cluster = cluster
        self._follower = follower
        self._network = (cluster.servers.transport(follower)
                         if cluster.servers is not None else None)

    def __getitem__(self, leader: int) -> FetchEndpoint:
        cluster = self._cluster
        endpoint = cluster.brokers[leader]
        if self._network is not None:
            endpoint = self._network[leader]
        if (self._follower, leader) in cluster.lost_fetches:
            return _NoFetch(endpoint)
        return endpoint

    def __iter__(self) -> Iterator[int]:
        return iter(self._cluster.brokers)

    def __len__(self) -> int:
        return len(self._cluster.brokers)


class MiniCluster:
    """Replica managers for ``broker_ids`` under ``root``, one controller played by the test.

    ``manager`` builds each broker's replica manager (a test double may change its rules).
    ``transport`` is how followers reach leaders: ``"in-process"`` (the leader's replica
    manager) or ``"network"`` (each replica manager behind a Kafka server on a loopback port,
    followers fetching with Kafka's Fetch; fetches do not wait on the leader, so that a round
    stays one step)."""

    def __init__(
        self,
        root: Path,
        broker_ids: Iterable[int] = (1, 2, 3),
        *,
        config: ReplicaConfig | None = None,
        clock: Clock | None = None,
        manager: type[ReplicaManager] = ReplicaManager,
        transport: str = IN_PROCESS,
    ) -> None:
        if transport not in TRANSPORTS:
            raise ValueError(f"transport {transport!r}: one of {TRANSPORTS}")
        self.root = root
        self.manager = manager
        self.servers = LoopbackServers() if transport == NETWORK else None
        self.clock: ManualClock = clock or ManualClock()  # type: ignore[assignment]
        self.config = config or ReplicaConfig()
        self.configs: dict[int, ReplicaConfig] = {}
        self.coordinator = coordinator.connect(f"memory://replication-{uuid.uuid4().hex}")
        self.metadata = MetadataClient(self.coordinator)
        self.metadata.ensure_layout()
        self.epoch = self.metadata.register_controller(0)
        self.brokers: dict[int, ReplicaManager] = {}  # the live ones
        self.lost_fetches: set[tuple[int, int]] = set()  # (follower, leader): answers lost
        self.broker_ids = tuple(broker_ids)
        self.assignments: dict[TopicPartition, tuple[int, ...]] = {}
        self.topic_ids: dict[str, str] = {}
        """Topic ids (Kafka's text form) sent with LeaderAndIsr, for topics that have one."""
        for b in self.broker_ids:
            self.start(b)

    # -- partition state, as the controller keeps it ------------------------------------------

    def state(self, tp: TopicPartition = TP) -> tuple[PartitionStateNode, int]:
        stored = self.metadata.partition_states([tp])[tp]
        assert stored is not None
        return stored.value, stored.version

    def leader(self, tp: TopicPartition = TP) -> int:
        return self.state(tp)[0].leader

    def leader_manager(self, tp: TopicPartition = TP) -> ReplicaManager:
        return self.brokers[self.leader(tp)]

    def create(self, tp: TopicPartition = TP, replicas: tuple[int, ...] = (1, 2, 3)) -> None:
        """Create ``tp`` led by its first live replica, every live replica in sync."""
        self.assignments[tp] = replicas
        if tp.topic not in self.metadata.topics():
            self.metadata.create_topic(
                TopicAssignment(topic=tp.topic, partitions={tp.partition: replicas}))
        live = [r for r in replicas if r in self.brokers]
        state = PartitionStateNode(leader=live[0], leader_epoch=0, isr=tuple(live),
                                   controller_epoch=self.epoch.epoch)
        result = self.metadata.create_partition_states(self.epoch, {tp: state})
        assert result[tp] == 0, result
        self.send(tp, live)

    def write(self, tp: TopicPartition, decide) -> PartitionStateNode:
        """Conditionally write ``decide(current state)``, re-reading on conflicts (the leader
        may be changing the ISR at the same time)."""
        for _ in range(10):
            current, version = self.state(tp)
            new = decide(current)
            outcome = self.metadata.update_partition_states(self.epoch, {tp: (new, version)})
            if tp in outcome.finished:
                return new
            assert not outcome.failed, outcome.failed
        raise AssertionError(f"could not write the state of {tp}")

    def send(self, tp: TopicPartition, brokers: Iterable[int]) -> dict[int, ErrorCode]:
        """LeaderAndIsr with the stored state to each of ``brokers`` that is live."""
        state, version = self.state(tp)
        entry = LeaderAndIsrPartition(
            topic=tp.topic, partition=tp.partition, controller_epoch=state.controller_epoch,
            leader=state.leader, leader_epoch=state.leader_epoch, isr=state.isr,
            partition_epoch=version, replicas=self.assignments[tp],
        )
        ids = {tp.topic: self.topic_ids[tp.topic]} if tp.topic in self.topic_ids else {}
        request = LeaderAndIsrRequest(controller_id=0, controller_epoch=self.epoch.epoch,
                                      broker_epoch=-1, partitions=(entry,), topic_ids=ids)
        out = {}
        for b in brokers:
            if b in self.brokers:
                response = self.brokers[b].handle_leader_and_isr(request)
                assert response.error == ErrorCode.NONE, response
                out[b] = response.partition_errors[tp]
        return out

    def elect(self, tp: TopicPartition = TP, *, prefer: int | None = None) -> int:
        """Offline election over the live ISR (``prefer`` moves a replica to the front of the
        assignment, as a preferred election would); bumps the leader epoch. Returns the leader
        (NO_LEADER if none is eligible)."""
        assignment = self.assignments[tp]
        if prefer is not None:
            assignment = (prefer, *[r for r in assignment if r != prefer])

        def decide(current: PartitionStateNode) -> PartitionStateNode:
            election = elect_offline(assignment, current.isr, self.brokers)
            if election is None:
                # Kafka's controller then drops the dead leader from the ISR, but never the
                # last member: the partition waits for it.
                return PartitionStateNode(leader=NO_LEADER, leader_epoch=current.leader_epoch + 1,
                                          isr=_without(current.isr, current.leader),
                                          controller_epoch=self.epoch.epoch)
            return PartitionStateNode(leader=election.leader, leader_epoch=current.leader_epoch + 1,
                                      isr=tuple(election.isr), controller_epoch=self.epoch.epoch)

        new = self.write(tp, decide)
        self.send(tp, self.assignments[tp])
        return new.leader

    def remove_from_isr(self, tp: TopicPartition, broker: int) -> None:
        """The controller's reaction to a dead follower: out of the ISR, epoch bumped."""
        self.write(tp, lambda s: PartitionStateNode(
            leader=s.leader, leader_epoch=s.leader_epoch + 1,
            isr=_without(s.isr, broker), controller_epoch=self.epoch.epoch))
        self.send(tp, self.assignments[tp])

    # -- brokers -------------------------------------------------------------------------------

    def start(self, broker: int, config: ReplicaConfig | None = None) -> ReplicaManager:
        """Start (or restart) ``broker`` and tell it its partitions, electing a leader for any
        that has none, as the controller does on broker start-up."""
        cfg = config or self.configs.get(broker) or self.config
        self.configs[broker] = cfg
        # ISR changes reach the store as a broker's would; no controller runs to ask anything
        # else (the test plays it), so its network has no controller in it.
        client = ControllerClient(self.metadata, InProcessNetwork(), broker, lambda: None)
        rm = self.manager(broker, self.root / f"broker-{broker}", client, self.clock, cfg,
                          transport=_Links(self, broker))
        self.brokers[broker] = rm
        if self.servers is not None:
            self.servers.serve(broker, rm)
        for tp, replicas in self.assignments.items():
            if broker in replicas:
                if self.leader(tp) == NO_LEADER:
                    self.elect(tp)
                else:
                    self.send(tp, [broker])
        return rm

    def crash(self, broker: int, *, lose_unflushed: bool = False, notice: bool = True) -> None:
        """Kill ``broker``. With ``notice`` the controller reacts at once: partitions it led
        get a new leader, partitions it followed drop it from the ISR. Without, the broker
        comes back before its session expires and the controller never saw it go."""
        self.crash_many([broker], lose_unflushed=lose_unflushed, notice=notice)

    def crash_many(self, brokers: Iterable[int], *, lose_unflushed: bool = False,
                   notice: bool = True) -> None:
        """Kill ``brokers`` at once (a power failure); the controller then handles them one
        by one, in the order given."""
        ids = list(brokers)
        for broker in ids:
            if self.servers is not None:
                self.servers.stop(broker)
            self.brokers.pop(broker).crash(lose_unflushed=lose_unflushed)
        if not notice:
            return
        for broker in ids:
            for tp, replicas in self.assignments.items():
                if broker in replicas:
                    state, _ = self.state(tp)
                    if state.leader == broker:
                        self.elect(tp)
                    elif broker in state.isr:
                        self.remove_from_isr(tp, broker)

    def shutdown(self) -> None:
        if self.servers is not None:
            self.servers.close()
        for rm in list(self.brokers.values()):
            rm.shutdown()
        self.brokers.clear()
        self.coordinator.close()

    # -- driving -------------------------------------------------------------------------------

    def step(self, brokers: Iterable[int] | None = None) -> int:
        """One fetch round on each live broker (of ``brokers``)."""
        ids = list(self.brokers) if brokers is None else list(brokers)
        return sum(self.brokers[b].fetcher.run_once() for b in ids if b in self.brokers)

    def settle(self, max_rounds: int = 200) -> None:
        """Fetch until nothing moves for two rounds: followers caught up, HWs propagated."""
        idle = 0
        for _ in range(max_rounds):
            idle = idle + 1 if self.step() == 0 else 0
            if idle >= 2:
                return
        raise AssertionError("the cluster did not settle")

    def produce(self, tp: TopicPartition = TP, n: int = 1, *, acks: int = ACKS_ALL,
                tag: str = "v") -> tuple[Future, list[bytes]]:
        data, values = make_batch(n, tag=tag)
        return self.leader_manager(tp).produce(tp, data, acks=acks), values

    def log(self, broker: int, tp: TopicPartition = TP) -> Log:
        partition = self.brokers[broker].partition(tp)
        assert partition is not None
        return partition.log


def _without(isr: tuple[int, ...], broker: int) -> tuple[int, ...]:
    return isr if len(isr) == 1 else tuple(r for r in isr if r != broker)


# -- tests of the harness itself ---------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_created_partition_replicates_and_commits(tmp_path: Path, transport: str) -> None:
    cluster = MiniCluster(tmp_path, transport=transport)
    try:
        cluster.create()
        future, values = cluster.produce(n=3)
        assert not future.done()
        cluster.settle()
        result = future.result(timeout=0)
        assert result.error == ErrorCode.NONE and (result.base_offset, result.last_offset) == (0, 2)
        signatures = {b: batch_signature(cluster.log(b)) for b in cluster.brokers}
        assert len({tuple(s) for s in signatures.values()}) == 1
        assert values_by_offset(cluster.log(3)) == dict(enumerate(values))
        assert {cluster.brokers[b].status(TP).high_watermark for b in cluster.brokers} == {3}
    finally:
        cluster.shutdown()


def test_crash_with_notice_moves_leadership_within_the_isr(tmp_path: Path) -> None:
    cluster = MiniCluster(tmp_path)
    try:
        cluster.create()
        cluster.crash(1)
        state, _ = cluster.state()
        assert (state.leader, state.leader_epoch, state.isr) == (2, 1, (2, 3))
        cluster.crash(3)
        state, _ = cluster.state()
        assert (state.leader, state.leader_epoch, state.isr) == (2, 2, (2,))
        cluster.start(1)  # out of sync: not eligible, follows 2
        assert cluster.brokers[1].status(TP).leader == 2
    finally:
        cluster.shutdown()
