"""The checker's self-test (issue 18): a short workload on the embedded cluster, recorded in a
history with the state auditor watching, under a fault sequence that loses an acknowledged
write when followers truncate to their high watermark (the rule KIP-101 replaced: the test
double :mod:`tests.replication.hw_rule`). With that rule the checker must report lost or
divergent writes; with the leader-epoch rule the same run must be clean.

Both rules run on the memory coordinator and once more on a real ZooKeeper.

The sequence (KIP-279's fast failover, on real brokers with their own controller):
m1 is committed by followers 2 and 3 whose fetch answers carrying the new HW are lost; leader
1 crashes, 2 leads; 3 truncates (to its HW under the old rule: m1 gone) and its fetches from 2
are lost; 2 crashes, 3 leads and takes m2; 1 and 2 come back and follow 3.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

import node.broker_node
from coordinator.codecs import TopicPartition
from interbroker.errors import ErrorCode
from node.cluster import EmbeddedCluster, embedded_replica_config
from replication.protocol import FetchEndpoint, FetchResult
from replication.replica_manager import ReplicaManager
from tests.faults.checker import Verdict, check, final_partition
from tests.faults.history import History, StateAuditor, read_history
from tests.replication.hw_rule import HwRuleReplicaManager
from tests.servers import Server
from tests.waiting import wait_until

TP = TopicPartition(topic="t", partition=0)


class LossyLinks:
    """The followers' fetch links of a cluster; ``lose[(follower, leader)] = n`` loses the
    answers to that follower's fetches at offsets >= n (the fetch still reaches the leader)."""

    def __init__(self) -> None:
        self.cluster: EmbeddedCluster | None = None
        self.lose: dict[tuple[int, int], int] = {}

    def transport(self, follower: int) -> Mapping[int, FetchEndpoint]:
        return _Links(self, follower)


class _Links(Mapping[int, FetchEndpoint]):
    def __init__(self, links: LossyLinks, follower: int) -> None:
        self._links = links
        self._follower = follower

    def __getitem__(self, leader: int) -> FetchEndpoint:
        assert self._links.cluster is not None
        rm = self._links.cluster.replica_manager(leader)
        if rm is None:
            raise KeyError(leader)
        return _LossyEndpoint(self._links, self._follower, leader, rm)

    def __iter__(self) -> Iterator[int]:
        assert self._links.cluster is not None
        return iter(self._links.cluster.running())

    def __len__(self) -> int:
        assert self._links.cluster is not None
        return len(self._links.cluster.running())


class _LossyEndpoint:
    def __init__(self, links: LossyLinks, follower: int, leader: int, rm: ReplicaManager
                 ) -> None:
        self._links, self._follower, self._leader, self._rm = links, follower, leader, rm

    def fetch(self, tp: TopicPartition, offset: int, *args: Any, **kwargs: Any) -> FetchResult:
        result = self._rm.fetch(tp, offset, *args, **kwargs)
        threshold = self._links.lose.get((self._follower, self._leader))
        if threshold is not None and offset >= threshold:
            return FetchResult(error=ErrorCode.BROKER_NOT_AVAILABLE)
        return result

    def offsets_for_leader_epoch(self, *args: Any) -> Any:
        return self._rm.offsets_for_leader_epoch(*args)


class Run:
    """The workload's side: produces and reads, recorded in the history."""

    def __init__(self, cluster: EmbeddedCluster, history: History) -> None:
        self.cluster = cluster
        self.history = history
        self.producer = cluster.producer(delivery_timeout_ms=10_000)
        self.consumer = cluster.consumer(timeout=10)

    def produce(self, value: str) -> None:
        op = self.history.produce_attempt("p1", TP, [value])
        try:
            delivery = self.producer.produce(TP, [value.encode()])
        except Exception as exc:  # noqa: BLE001 - every failure is an outcome to record
            self.history.failed(op, str(exc))
        else:
            self.history.acked(op, delivery.base_offset)

    def read(self, offset: int = 0) -> None:
        records, _next, hw = self.consumer.fetch(TP, offset)
        self.history.read("c1", TP, offset, [(r.offset, r.value) for r in records], hw)


def wait_followed(cluster: EmbeddedCluster, broker: int, leader_epoch: int) -> None:
    """Until ``broker`` follows at ``leader_epoch`` and is done truncating."""
    def check() -> bool:
        rm = cluster.replica_manager(broker)
        status = rm.status(TP) if rm is not None else None
        if status is None or status.leader_epoch != leader_epoch:
            return False
        position = rm.fetcher.positions().get(TP)  # type: ignore[union-attr]
        return position is not None and not position.truncating

    wait_until(check, timeout=15, message=f"broker {broker} following at epoch {leader_epoch}")


def run_scenario(root: Path, manager: type[ReplicaManager],
                 monkeypatch: pytest.MonkeyPatch, url: str | None = None) -> Verdict:
    monkeypatch.setattr(node.broker_node, "ReplicaManager", manager)
    links = LossyLinks()
    cluster = EmbeddedCluster(3, url=url, root=root / "logs", fetch_transport=links.transport,
                              replica_config=embedded_replica_config())
    links.cluster = cluster
    root.mkdir(parents=True, exist_ok=True)
    path = root / "history.jsonl"
    with History(path) as history:
        cluster.start()
        auditor = StateAuditor(history, url=cluster.url).start()
        try:
            cluster.create_topic("t", assignment={0: [1, 2, 3]})
            run = Run(cluster, history)
            links.lose[(2, 1)] = links.lose[(3, 1)] = 1  # answers carrying HW 1 are lost
            run.produce("m1")
            run.read()
            with history.fault("crash", "broker-1"):
                links.lose[(3, 2)] = 0  # 3 hears nothing from 2
                cluster.crash(1)
                state = cluster.wait_for_leader(TP, leader=2)
                wait_followed(cluster, 3, state.leader_epoch)
                with history.fault("crash", "broker-2"):
                    cluster.crash(2)
                    cluster.wait_for_leader(TP, leader=3)
                    links.lose.clear()
                    run.produce("m2")
                    run.read()
                    cluster.restart(2)
                cluster.restart(1)
            cluster.wait_for_isr(TP, timeout=15)
            cluster.wait_for_caught_up(TP)
            run.read()
            run.producer.close()
            leader = cluster.leader(TP)
            rm = cluster.replica_manager(leader)
            assert rm is not None
            status = rm.status(TP)
            assert status is not None
            logs = {b: cluster.replica_manager(b).partition(TP).log  # type: ignore[union-attr]
                    for b in status.isr}
            final = final_partition(TP, leader, status.high_watermark, logs)
        finally:
            auditor.stop()
            cluster.close()
    return check(read_history(path), [final])


def test_the_checker_catches_the_old_truncation_rule(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    verdict = run_scenario(tmp_path, HwRuleReplicaManager, monkeypatch)
    print("\n" + verdict.summary())
    assert not verdict.ok
    assert verdict.lost.count + verdict.divergent.count > 0, verdict.summary()
    # m1 is acknowledged, then truncated away by the old rule; m2, its producer's next batch,
    # reaches a leader that holds nothing of that producer any more (UNKNOWN_PRODUCER_ID: a
    # producer a partition does not know is taken from sequence 0 only), so the producer
    # numbers it afresh in a new epoch and it is written at m1's offset: m1 is lost
    assert verdict.acknowledged == 2 and verdict.lost.count >= 1
    assert verdict.zombie.count == 0


def test_the_same_run_is_clean_with_the_leader_epoch_rule(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    verdict = run_scenario(tmp_path, ReplicaManager, monkeypatch)
    print("\n" + verdict.summary())
    assert verdict.ok, verdict.summary()
    assert verdict.counts() == dict.fromkeys(verdict.counts(), 0)
    assert verdict.acknowledged == 2 and verdict.reads >= 4
    assert len(verdict.controller_epochs) >= 1 and verdict.state_versions_seen >= 3
    assert verdict.error_rates["crash"].attempts == 1


def test_the_same_run_on_zookeeper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   zookeeper_server: Server) -> None:
    """Both rules once more with the cluster and the auditor on a real ZooKeeper (whose
    watches may coalesce versions: the verdicts must not depend on it)."""
    url = f"zookeeper://{zookeeper_server.address}/selftest{uuid.uuid4().hex[:12]}"
    verdict = run_scenario(tmp_path / "hw", HwRuleReplicaManager, monkeypatch, url)
    assert verdict.lost.count + verdict.divergent.count > 0, verdict.summary()
    url = f"zookeeper://{zookeeper_server.address}/selftest{uuid.uuid4().hex[:12]}"
    verdict = run_scenario(tmp_path / "epoch", ReplicaManager, monkeypatch, url)
    assert verdict.ok and verdict.acknowledged == 2, verdict.summary()
    assert verdict.state_versions_seen >= 3
