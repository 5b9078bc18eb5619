"""The failures of truncating to the high watermark, and the leader-epoch rule that fixes them.

Every scenario runs twice: with the leader-epoch rule (KIP-101 as refined by KIP-279), where it
must end well, and with the old rule (followers cut their log to their HW on becoming follower:
the test double :class:`~tests.replication.hw_rule.HwRuleReplicaManager`), where it must end
badly: an acknowledged record lost, or replicas that disagree for good. The second run is what
shows each scenario actually tests the rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from interbroker.errors import ErrorCode
from replication.protocol import ACKS_ALL
from replication.replica_manager import ReplicaManager

from .hw_rule import HwRuleReplicaManager
from .loopback import IN_PROCESS, NETWORK
from .test_replica_manager_cluster import (
    TP,
    MiniCluster,
    batch_signature,
    values_by_offset,
)

EPOCH_RULE = ReplicaManager
HW_RULE = HwRuleReplicaManager
RULES = [
    pytest.param(EPOCH_RULE, IN_PROCESS, id="epoch-rule"),
    pytest.param(EPOCH_RULE, NETWORK, id="epoch-rule-network"),
    pytest.param(HW_RULE, IN_PROCESS, id="hw-rule"),
]
"""The epoch rule runs over both transports (over the network, a new follower truncates on the
diverging epoch its fetch is answered with, KIP-595, where the leader's fetches reach it; the
rounds run when the scenario loses fetch answers); the old rule, a test double, in process."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    acked_survived: bool  # every acknowledged record is on the leader, at its offset
    converged: bool  # the live replicas hold identical batches (offset, epoch, CRC)


def outcome(cluster: MiniCluster, *acked: dict[int, bytes]) -> Outcome:
    """Settle, then judge. Each of ``acked`` maps offsets to the values acknowledged there
    (kept apart: under the old rule two acknowledged writes can claim one offset)."""
    cluster.settle()
    leader_values = values_by_offset(cluster.log(cluster.leader()))
    signatures = {tuple(batch_signature(cluster.log(b))) for b in cluster.brokers}
    return Outcome(
        acked_survived=all(
            leader_values.get(o) == v for written in acked for o, v in written.items()
        ),
        converged=len(signatures) == 1,
    )


def check(rule: type[ReplicaManager], result: Outcome, *, legacy_fails: tuple[str, ...]
          ) -> None:
    if rule is HW_RULE:
        assert not all(getattr(result, name) for name in legacy_fails), result
    else:
        assert result == Outcome(acked_survived=True, converged=True)


def acked(future, values: list[bytes]) -> dict[int, bytes]:
    result = future.result(timeout=0)
    assert result.error == ErrorCode.NONE, result
    return {result.base_offset + i: v for i, v in enumerate(values)}


def answer_lost(cluster: MiniCluster, follower: int, offset: int) -> None:
    """``follower``'s fetch at ``offset`` reaches the leader, but its answer (which carries the
    new HW) never reaches the follower."""
    leader = cluster.leader_manager()
    result = leader.fetch(TP, offset, 1 << 20, follower, leader.status(TP).leader_epoch)
    assert result.error == ErrorCode.NONE


@pytest.mark.parametrize(("rule", "transport"), RULES)
def test_scenario_1_a_restarted_follower_keeps_what_the_leader_committed(
    tmp_path: Path, rule: type[ReplicaManager], transport: str
) -> None:
    """A commits m1 once B has it, but B restarts before it learns the new HW; B comes back
    and the leader dies before B fetches again. B is elected: m1 must be there."""
    cluster = MiniCluster(tmp_path, (1, 2), manager=rule, transport=transport)
    try:
        cluster.create(replicas=(1, 2))
        future, values = cluster.produce(n=1, acks=ACKS_ALL)
        cluster.step([2])
        answer_lost(cluster, 2, 1)
        m1 = acked(future, values)
        cluster.crash(2, notice=False)  # its HW (0) was never checkpointed past m1
        cluster.lost_fetches.add((2, 1))
        cluster.start(2)
        cluster.step([2])  # truncation happens; its fetch gets no answer: the leader died
        cluster.crash(1)
        assert cluster.leader() == 2
        cluster.lost_fetches.clear()
        cluster.start(1)
        check(rule, outcome(cluster, m1), legacy_fails=("acked_survived",))
    finally:
        cluster.shutdown()


@pytest.mark.parametrize(("rule", "transport"), RULES)
def test_scenario_2_replicas_converge_after_both_crash(
    tmp_path: Path, rule: type[ReplicaManager], transport: str
) -> None:
    """A and B both hold m1, m2 (committed); power fails; B had not flushed m2. B comes back
    first, is elected, takes m3 at offset 1. A comes back: it must drop m2 and take m3."""
    cluster = MiniCluster(tmp_path, (1, 2), manager=rule, transport=transport)
    try:
        cluster.create(replicas=(1, 2))
        f1, v1 = cluster.produce(n=1, acks=ACKS_ALL)
        cluster.settle()
        m1 = acked(f1, v1)
        for b in (1, 2):
            cluster.brokers[b].logs.flush_logs()
        f2, v2 = cluster.produce(n=1, acks=ACKS_ALL)
        cluster.settle()
        acked(f2, v2)
        for b in (1, 2):
            cluster.brokers[b].logs.checkpoint_high_watermarks()
        cluster.brokers[1].logs.flush_logs()  # B's m2 is only in its page cache
        cluster.crash_many([1, 2], lose_unflushed=True)  # the controller keeps B in the ISR
        cluster.start(2)
        assert cluster.leader() == 2 and cluster.log(2).log_end_offset == 1
        f3, v3 = cluster.produce(n=1, acks=ACKS_ALL)
        m3 = acked(f3, v3)
        assert list(m3) == [1]
        cluster.start(1)
        result = outcome(cluster, m1, m3)
        check(rule, result, legacy_fails=("converged", "acked_survived"))
        if rule is EPOCH_RULE:
            assert values_by_offset(cluster.log(1)) == {**m1, **m3}
    finally:
        cluster.shutdown()


@pytest.mark.parametrize(("rule", "transport"), RULES)
def test_kip279_fast_failover_across_three_epochs_with_multi_record_batches(
    tmp_path: Path, rule: type[ReplicaManager], transport: str
) -> None:
    """Epoch 0 (A): a1 (3 records) committed, a2 (2) reaches B only; C never learns the HW.
    A dies; epoch 1 (B): b1 (2 records) reaches nobody; B dies before C fetches; epoch 2 (C):
    c2 (3 records). A and B return. Everyone must end with a1 + c2."""
    cluster = MiniCluster(tmp_path, (1, 2, 3), manager=rule, transport=transport)
    try:
        cluster.create(replicas=(1, 2, 3))
        fa1, va1 = cluster.produce(n=3, acks=ACKS_ALL)
        cluster.step([3])  # C has a1
        cluster.step([3])  # C's fetch at 3 says so, but B is at 0: HW 0 in the answer
        cluster.produce(n=2, acks=1)  # a2
        cluster.step([2])  # B has a1 and a2 in one fetch
        answer_lost(cluster, 2, 5)  # the HW moves to 3: a1 is committed
        a1 = acked(fa1, va1)
        assert cluster.brokers[3].status(TP).high_watermark == 0
        cluster.crash(1)
        assert cluster.leader() == 2
        cluster.produce(n=2, acks=1)  # b1
        cluster.lost_fetches.add((3, 2))
        cluster.step([3])  # C truncates (or not), but gets no data from B
        cluster.crash(2)
        assert cluster.leader() == 3 and cluster.state()[0].leader_epoch == 2
        fc2, vc2 = cluster.produce(n=3, acks=ACKS_ALL)
        c2 = acked(fc2, vc2)
        cluster.lost_fetches.clear()
        cluster.start(1)
        cluster.start(2)
        result = outcome(cluster, a1, c2)
        check(rule, result, legacy_fails=("acked_survived", "converged"))
        if rule is EPOCH_RULE:
            epochs = [e for _b, _l, e, _c in batch_signature(cluster.log(1))]
            assert epochs == [0, 2]
    finally:
        cluster.shutdown()


def alternate_leaders(cluster: MiniCluster, leaders: list[int]) -> None:
    """Move leadership along ``leaders``, one epoch each, each leader writing a 2-record batch
    with acks=1 that nobody fetches (the followers' fetches are lost meanwhile)."""
    cluster.lost_fetches |= {(1, 2), (2, 1)}
    for leader in leaders:
        assert cluster.elect(prefer=leader) == leader
        future, _ = cluster.produce(n=2, acks=1)
        assert future.result(timeout=0).error == ErrorCode.NONE


@pytest.mark.parametrize(("rule", "transport"), RULES)
def test_a_follower_with_several_unknown_epochs_truncates_in_rounds(
    tmp_path: Path, rule: type[ReplicaManager], transport: str
) -> None:
    """P (3 records) is committed at epoch 0, but B never learned it. Leadership then
    alternates B, A, B, A, B, A before anyone fetches: B holds epochs 0, 1, 3, 5 and A
    0, 2, 4, 6. B must ask three times (5 -> A says 4; 3 -> 2; 1 -> 0) and keep exactly P; A
    dies right after; B is elected and P must be there."""
    cluster = MiniCluster(tmp_path, (1, 2), manager=rule, transport=transport)
    try:
        cluster.create(replicas=(1, 2))
        future, values = cluster.produce(n=3, acks=ACKS_ALL)
        cluster.step([2])
        answer_lost(cluster, 2, 3)
        p = acked(future, values)
        alternate_leaders(cluster, [2, 1, 2, 1, 2, 1])
        if rule is EPOCH_RULE:  # (the old rule cut both at every change)
            assert [e.epoch for e in cluster.log(1).leader_epoch_cache.entries] == [0, 2, 4, 6]
            assert [e.epoch for e in cluster.log(2).leader_epoch_cache.entries] == [0, 1, 3, 5]
        fetcher = cluster.brokers[2].fetcher
        asked_before = fetcher.epoch_requests
        cluster.step([2])  # the rounds (fetches still lost)
        if rule is EPOCH_RULE:
            assert fetcher.epoch_requests - asked_before == 3
            assert cluster.log(2).log_end_offset == 3
            assert [e.epoch for e in cluster.log(2).leader_epoch_cache.entries] == [0]
        cluster.crash(1)
        assert cluster.leader() == 2
        cluster.lost_fetches.clear()
        cluster.start(1)
        check(rule, outcome(cluster, p), legacy_fails=("acked_survived",))
    finally:
        cluster.shutdown()


@pytest.mark.parametrize(("rule", "transport"), RULES)
def test_a_leader_reelected_at_a_new_epoch_makes_followers_truncate_again(
    tmp_path: Path, rule: type[ReplicaManager], transport: str
) -> None:
    """m1 is committed by B's fetch whose answer is lost. The controller re-elects A at a new
    epoch: B goes through truncation again, which must keep m1; A dies; B is elected."""
    cluster = MiniCluster(tmp_path, (1, 2), manager=rule, transport=transport)
    try:
        cluster.create(replicas=(1, 2))
        cluster.settle()
        future, values = cluster.produce(n=2, acks=ACKS_ALL)
        cluster.step([2])
        answer_lost(cluster, 2, 2)
        m1 = acked(future, values)
        fetcher = cluster.brokers[2].fetcher
        asked_before = fetcher.epoch_requests
        cluster.lost_fetches.add((2, 1))
        assert cluster.elect() == 1  # same leader, epoch 1
        assert fetcher.positions()[TP].truncating
        cluster.step([2])
        assert not fetcher.positions()[TP].truncating
        if rule is EPOCH_RULE:
            assert fetcher.epoch_requests - asked_before == 1
        cluster.crash(1)
        assert cluster.leader() == 2
        cluster.lost_fetches.clear()
        cluster.start(1)
        check(rule, outcome(cluster, m1), legacy_fails=("acked_survived",))
    finally:
        cluster.shutdown()


@pytest.mark.parametrize("transport", [IN_PROCESS, NETWORK])
def test_an_epoch_led_without_a_write_does_not_hold_the_follower_back(
    tmp_path: Path, transport: str
) -> None:
    """A is re-elected at epoch 1 (a reassignment that reorders replicas bumps the epoch so)
    and loses the leadership to B at epoch 2 before it appends anything: A's epoch cache ends
    with an entry for epoch 1 at its log end, with no batch behind it. As B's follower, A is
    told that epoch 1 diverged at A's own log end: the truncation must still drop the entry,
    or A asks about epoch 1 for ever and never catches up (the fault harness found this: the
    reordered partitions' ISRs stayed short after the heal)."""
    cluster = MiniCluster(tmp_path, (1, 2), transport=transport)
    try:
        cluster.create(replicas=(1, 2))
        cluster.settle()
        future, values = cluster.produce(n=2, acks=ACKS_ALL)
        cluster.settle()
        m1 = acked(future, values)
        assert cluster.elect() == 1  # same leader, epoch 1, nothing written in it
        assert cluster.elect(prefer=2) == 2  # epoch 2
        cluster.settle()  # raised "did not settle": A's fetcher looped on epoch 1
        epochs = [e.epoch for e in cluster.log(1).leader_epoch_cache.entries]
        assert 1 not in epochs
        future, more = cluster.produce(n=1, acks=ACKS_ALL)
        cluster.settle()
        m2 = acked(future, more)
        assert set(cluster.state()[0].isr) == {1, 2}
        assert outcome(cluster, m1, m2) == Outcome(acked_survived=True, converged=True)
    finally:
        cluster.shutdown()
