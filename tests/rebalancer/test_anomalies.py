"""Self-healing's eyes and judgement (rebalancer.anomalies), pure: hand-built cluster views in,
anomalies and one decision out. A gone broker waits out the grace period, then is drained; a
fix still running is not started twice; imbalances count only beyond their thresholds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from rebalancer.access import ClusterView, LivePartition, LogDirUsage
from rebalancer.anomalies import (
    Action,
    Anomaly,
    AnomalyKind,
    Thresholds,
    Verdict,
    decide,
    detect,
)

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def view(assignment: dict[int, tuple[int, ...]], racks: dict[int, str | None], *,
         log_dirs: tuple[LogDirUsage, ...] = (), sizes: dict[int, int] | None = None
         ) -> ClusterView:
    return ClusterView(
        brokers=racks, sizes_known=sizes is not None, log_dirs=log_dirs,
        partitions=tuple(LivePartition(topic="t", partition=p, replicas=r, leader=r[0], isr=r,
                                       size_bytes=(sizes or {}).get(p))
                         for p, r in assignment.items()))


BALANCED = {0: (1, 2), 1: (2, 3), 2: (3, 1)}
RACKS = {1: "a", 2: "b", 3: "c"}


def test_a_healthy_cluster_has_no_anomaly_and_nothing_to_do() -> None:
    found = detect(view(BALANCED, RACKS), Thresholds(grace=60, replica_spread=1,
                                                     leader_spread=1, disk_usage=0.8),
                   (), T0)
    assert found == ()
    assert decide(found, Thresholds(grace=60), T0).verdict is Verdict.NOTHING_TO_DO


def test_a_gone_broker_waits_out_the_grace_period_then_is_drained() -> None:
    thresholds = Thresholds(grace=60, replica_spread=0)
    gone = view({0: (1, 4), 1: (2, 4), 2: (3, 1)}, RACKS)  # broker 4 holds replicas, not live
    (first,) = detect(gone, thresholds, (), T0)
    assert (first.kind, first.subject, first.brokers) == (AnomalyKind.BROKER_GONE, "broker 4",
                                                          (4,))
    assert first.figures == {"replicas": 2} and first.first_seen == T0
    waiting = decide([first], thresholds, T0)
    assert waiting.verdict is Verdict.WAIT and waiting.action is None
    assert "broker-gone broker 4 seen for 0s of the 60s grace period" in waiting.reason

    # seen again at the next runs: the first sighting is kept, so the grace runs from it
    (again,) = detect(gone, thresholds, [first], T0 + timedelta(seconds=59))
    assert again.first_seen == T0 and again.last_seen == T0 + timedelta(seconds=59)
    assert decide([again], thresholds, T0 + timedelta(seconds=59)).verdict is Verdict.WAIT
    (ripe,) = detect(gone, thresholds, [again], T0 + timedelta(seconds=60))
    acting = decide([ripe], thresholds, T0 + timedelta(seconds=60))
    assert (acting.verdict, acting.action, acting.brokers) == (
        Verdict.ACT, Action.REMOVE_BROKERS, (4,))
    assert acting.anomalies == (ripe,)


def test_balance_is_not_judged_while_a_broker_is_gone() -> None:
    lopsided = view({0: (1, 4), 1: (1, 2), 2: (1, 3), 3: (1, 2)}, RACKS)
    kinds = {a.kind for a in detect(lopsided, Thresholds(grace=0, replica_spread=0,
                                                         leader_spread=0), (), T0)}
    assert kinds == {AnomalyKind.BROKER_GONE}


def test_every_gone_broker_must_be_past_the_grace_period() -> None:
    thresholds = Thresholds(grace=60)
    old = Anomaly(kind=AnomalyKind.BROKER_GONE, subject="broker 4", brokers=(4,),
                  first_seen=T0, last_seen=T0)
    young = Anomaly(kind=AnomalyKind.BROKER_GONE, subject="broker 5", brokers=(5,),
                    first_seen=T0 + timedelta(seconds=50), last_seen=T0)
    now = T0 + timedelta(seconds=70)
    waiting = decide([old, young], thresholds, now)
    assert waiting.verdict is Verdict.WAIT and waiting.anomalies == (young,)
    later = now + timedelta(seconds=40)
    assert decide([old, young], thresholds, later).brokers == (4, 5)


def test_a_fix_running_or_moves_in_progress_are_not_acted_on_twice() -> None:
    ripe = Anomaly(kind=AnomalyKind.BROKER_GONE, subject="broker 4", brokers=(4,),
                   first_seen=T0, last_seen=T0)
    now = T0 + timedelta(hours=1)
    skipped = decide([ripe], Thresholds(grace=60), now,
                     fix_running="remove-brokers (plan 7, execution 3) with 2 partition(s) "
                                 "still moving")
    assert skipped.verdict is Verdict.SKIP and skipped.action is None
    assert "a fix is already running: remove-brokers (plan 7" in skipped.reason
    moving = decide([ripe], Thresholds(grace=60), now, moving=5)
    assert moving.verdict is Verdict.SKIP and "5 partition(s) are being moved" in moving.reason
    # while a fix runs the view shows its targets, where the anomaly looks gone: still skip
    assert decide([], Thresholds(grace=60), now, fix_running="x").verdict is Verdict.SKIP
    assert decide([], Thresholds(grace=60), now, moving=5).verdict is Verdict.NOTHING_TO_DO


@pytest.mark.parametrize(("threshold", "expected"), [(None, False), (2, False), (1, True),
                                                     (0, True)])
def test_replica_imbalance_counts_only_beyond_its_threshold(threshold: int | None,
                                                            expected: bool) -> None:
    # replicas per broker 3, 2, 1: spread 2
    skewed = view({0: (1, 2), 1: (1, 3), 2: (1, 2)}, {1: None, 2: None, 3: None})
    found = detect(skewed, Thresholds(grace=0, replica_spread=threshold), (), T0)
    assert [a.kind for a in found] == ([AnomalyKind.REPLICA_IMBALANCE] if expected else [])
    if expected:
        assert found[0].figures == {"spread": 2, "max": 3, "min": 1, "threshold": threshold}
        acting = decide(found, Thresholds(grace=0), T0)
        assert (acting.verdict, acting.action) == (Verdict.ACT, Action.REBALANCE)


def test_leader_imbalance_and_rack_violations_rebalance_after_the_grace() -> None:
    # preferred leaders 3, 0, 0 and partition 1 has both replicas on rack a
    skewed = view({0: (1, 2), 1: (1, 3), 2: (1, 2)}, {1: "a", 2: "b", 3: "a"})
    thresholds = Thresholds(grace=30, leader_spread=2)
    found = detect(skewed, thresholds, (), T0)
    assert {a.kind: dict(a.figures) for a in found} == {
        AnomalyKind.RACK_VIOLATION: {"partitions": 1},
        AnomalyKind.LEADER_IMBALANCE: {"spread": 3, "max": 3, "min": 0, "threshold": 2}}
    assert decide(found, thresholds, T0 + timedelta(seconds=29)).verdict is Verdict.WAIT
    acting = decide(found, thresholds, T0 + timedelta(seconds=30))
    assert (acting.verdict, acting.action) == (Verdict.ACT, Action.REBALANCE)
    assert "rack-violation cluster" in acting.reason
    assert detect(skewed, Thresholds(grace=0, rack_violations=False), (), T0) == ()


def test_a_full_log_directory_moves_bytes_with_the_disk_goal() -> None:
    dirs = (LogDirUsage(broker=1, path="/data/1", total_bytes=1000, usable_bytes=50,
                        replica_bytes=900),
            LogDirUsage(broker=2, path="/data/2", total_bytes=1000, usable_bytes=600),
            LogDirUsage(broker=3, path="/data/3"))  # the broker does not say: not judged
    cluster = view(BALANCED, RACKS, log_dirs=dirs, sizes={0: 10, 1: 10, 2: 10})
    found = detect(cluster, Thresholds(grace=0, disk_usage=0.9), (), T0)
    assert [(a.kind, a.subject, dict(a.figures)) for a in found] == [
        (AnomalyKind.LOG_DIR_FULL, "broker 1 /data/1",
         {"used": 0.95, "threshold": 0.9, "replica_bytes": 900})]
    acting = decide(found, Thresholds(grace=0), T0)
    assert (acting.verdict, acting.action) == (Verdict.ACT, Action.DISK)
    assert detect(cluster, Thresholds(grace=0, disk_usage=0.96), (), T0) == ()


def test_disk_imbalance_needs_the_sizes_the_cluster_reports() -> None:
    heavy = {0: 1000, 1: 10, 2: 10}  # broker 1 and 2 hold partition 0
    thresholds = Thresholds(grace=0, disk_max_over_mean=1.2)
    (found,) = detect(view(BALANCED, RACKS, sizes=heavy), thresholds, (), T0)
    assert found.kind is AnomalyKind.DISK_IMBALANCE and found.figures["max_over_mean"] > 1.2
    assert detect(view(BALANCED, RACKS), thresholds, (), T0) == ()  # no sizes: not judged


def test_an_anomaly_no_longer_seen_starts_afresh() -> None:
    thresholds = Thresholds(grace=60)
    gone = view({0: (1, 4), 1: (2, 3), 2: (3, 1)}, RACKS)
    (first,) = detect(gone, thresholds, (), T0)
    assert detect(view(BALANCED, RACKS), thresholds, [first], T0 + timedelta(seconds=30)) == ()
    (back,) = detect(gone, thresholds, [], T0 + timedelta(seconds=90))
    assert back.first_seen == T0 + timedelta(seconds=90)
