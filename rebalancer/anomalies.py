"""What self-healing sees and what it decides: pure functions of the live cluster.

:func:`detect` reads a :class:`~rebalancer.access.ClusterView` against the job's
:class:`Thresholds` and the anomalies still open from the previous runs, and returns the
anomalies there are now, each keeping the time it was first seen (so a grace period runs from
then, across runs):

- ``broker-gone``: a broker holds replicas but is not live;
- ``rack-violation``: partitions whose replicas span fewer racks than they could
  (rebalancer.scoring's rack violations);
- ``replica-imbalance`` / ``leader-imbalance``: replicas, or preferred leaders, per broker
  spread (max - min) beyond the threshold;
- ``disk-imbalance``: the fullest broker's bytes over the mean beyond the threshold (only where
  the cluster reports replica sizes: the Admin API's way in);
- ``log-dir-full``: a log directory's volume fuller than the threshold (only where brokers
  report it: DescribeLogDirs, Kafka 3.3+).

While a broker is gone the balance figures are not judged (its replicas are missing from every
count until it is drained), so only ``broker-gone`` and ``log-dir-full`` are reported.

:func:`decide` turns the anomalies into one decision: nothing to do, skip (a fix of this job is
still running, or partitions are moving), wait (an anomaly younger than the grace period), or
act: ``remove-brokers`` (drain the gone brokers onto live ones), ``disk`` (plan with the disk
goal) or ``rebalance`` (plan with the balance goal).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from rebalancer.access import ClusterView
from rebalancer.scoring import score_plan

__all__ = ["Action", "Anomaly", "AnomalyKind", "Decision", "Thresholds", "Verdict", "decide",
           "detect"]


class AnomalyKind(StrEnum):
    BROKER_GONE = "broker-gone"
    RACK_VIOLATION = "rack-violation"
    REPLICA_IMBALANCE = "replica-imbalance"
    LEADER_IMBALANCE = "leader-imbalance"
    DISK_IMBALANCE = "disk-imbalance"
    LOG_DIR_FULL = "log-dir-full"


class Verdict(StrEnum):
    ACT = "act"
    WAIT = "wait"
    SKIP = "skip"
    NOTHING_TO_DO = "nothing_to_do"


class Action(StrEnum):
    REMOVE_BROKERS = "remove-brokers"
    REBALANCE = "rebalance"
    DISK = "disk"


@dataclass(frozen=True, slots=True, kw_only=True)
class Thresholds:
    """When the cluster is unhealthy. ``grace``: seconds an anomaly must last before it is
    acted on. A threshold of None is not watched; a spread or ratio must be *beyond* its
    threshold."""

    grace: float
    replica_spread: float | None = None
    leader_spread: float | None = None
    disk_max_over_mean: float | None = None
    rack_violations: bool = True
    disk_usage: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Anomaly:
    kind: AnomalyKind
    subject: str
    """What it is about: ``broker 4``, ``cluster``, ``broker 1 /var/lib/kafka``."""
    first_seen: datetime
    last_seen: datetime
    figures: Mapping[str, Any] = field(default_factory=dict)
    brokers: tuple[int, ...] = ()

    @property
    def key(self) -> tuple[str, str]:
        return (self.kind.value, self.subject)

    def age(self, now: datetime) -> float:
        return max(0.0, (now - self.first_seen).total_seconds())


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    verdict: Verdict
    reason: str
    action: Action | None = None
    brokers: tuple[int, ...] = ()
    """The brokers to remove (``remove-brokers``)."""
    anomalies: tuple[Anomaly, ...] = ()
    """The anomalies the decision is about (acted on, or waited for)."""


def _seen(kind: AnomalyKind, subject: str, figures: Mapping[str, Any], now: datetime,
          previous: Mapping[tuple[str, str], Anomaly], brokers: tuple[int, ...] = ()
          ) -> Anomaly:
    before = previous.get((kind.value, subject))
    return Anomaly(kind=kind, subject=subject, figures=dict(figures), brokers=brokers,
                   first_seen=before.first_seen if before is not None else now, last_seen=now)


def detect(view: ClusterView, thresholds: Thresholds, previous: Iterable[Anomaly],
           now: datetime) -> tuple[Anomaly, ...]:
    """The anomalies of ``view`` now; one still open in ``previous`` (same kind and subject)
    keeps its first sighting. SnapshotError when the view cannot be scored (no broker)."""
    before = {a.key: a for a in previous}
    found: list[Anomaly] = []
    offline = view.offline_brokers
    for b in offline:
        held = sum(1 for p in view.partitions if b in p.replicas)
        found.append(_seen(AnomalyKind.BROKER_GONE, f"broker {b}", {"replicas": held}, now,
                           before, (b,)))
    if thresholds.disk_usage is not None:
        for d in view.log_dirs:
            used = d.used_fraction
            if used is not None and used > thresholds.disk_usage:
                found.append(_seen(AnomalyKind.LOG_DIR_FULL, f"broker {d.broker} {d.path}",
                                   {"used": round(used, 4), "threshold": thresholds.disk_usage,
                                    "replica_bytes": d.replica_bytes}, now, before,
                                   (d.broker,)))
    if offline:
        return tuple(found)
    scores = score_plan(view.snapshot())
    if thresholds.rack_violations and scores.rack_violations:
        found.append(_seen(AnomalyKind.RACK_VIOLATION, "cluster",
                           {"partitions": scores.rack_violations}, now, before))
    for kind, spread, limit in (
            (AnomalyKind.REPLICA_IMBALANCE, scores.replicas_per_broker,
             thresholds.replica_spread),
            (AnomalyKind.LEADER_IMBALANCE, scores.leaders_per_broker,
             thresholds.leader_spread)):
        if limit is not None and spread.spread > limit:
            found.append(_seen(kind, "cluster", {"spread": spread.spread, "max": spread.max,
                                                 "min": spread.min, "threshold": limit},
                               now, before))
    load = scores.bytes_per_broker
    if (thresholds.disk_max_over_mean is not None and view.sizes_known and load is not None
            and load.max_over_mean > thresholds.disk_max_over_mean):
        found.append(_seen(AnomalyKind.DISK_IMBALANCE, "cluster",
                           {"max_over_mean": load.max_over_mean,
                            "threshold": thresholds.disk_max_over_mean}, now, before))
    return tuple(found)


def _waiting(anomalies: Iterable[Anomaly], grace: float, now: datetime) -> str:
    return "; ".join(f"{a.kind.value} {a.subject} seen for {a.age(now):.0f}s of the "
                     f"{grace:g}s grace period" for a in anomalies)


def decide(anomalies: Iterable[Anomaly], thresholds: Thresholds, now: datetime, *,
           fix_running: str | None = None, moving: int = 0) -> Decision:
    """One decision for the anomalies seen now. ``fix_running``: what says a fix this job
    started is still running (its execution), else None: then nothing is started, whatever is
    seen (a view shows moves by their targets, so the anomaly being fixed looks gone before it
    is); ``moving``: partitions being moved in the cluster (by anyone). An anomaly is acted on once it has lasted ``grace`` seconds; a
    gone broker is drained only when every gone broker has (a plan can only be made with every
    one of them drained)."""
    found = tuple(anomalies)
    if fix_running is not None:  # even when the cluster's targets look healthy meanwhile
        return Decision(verdict=Verdict.SKIP, reason=f"a fix is already running: {fix_running}",
                        anomalies=found)
    if not found:
        return Decision(verdict=Verdict.NOTHING_TO_DO, reason="no anomaly")
    if moving:
        return Decision(verdict=Verdict.SKIP, anomalies=found,
                        reason=f"{moving} partition(s) are being moved; not planning on a "
                               f"cluster that is moving")
    grace = thresholds.grace
    ripe = [a for a in found if a.age(now) >= grace]
    young = [a for a in found if a.age(now) < grace]
    gone = [a for a in found if a.kind is AnomalyKind.BROKER_GONE]
    if gone:
        waiting = [a for a in gone if a in young]
        if waiting:
            return Decision(verdict=Verdict.WAIT, reason=_waiting(waiting, grace, now),
                            anomalies=tuple(waiting))
        brokers = tuple(sorted(b for a in gone for b in a.brokers))
        return Decision(verdict=Verdict.ACT, action=Action.REMOVE_BROKERS, brokers=brokers,
                        anomalies=tuple(gone),
                        reason=f"broker(s) {', '.join(map(str, brokers))} gone for longer "
                               f"than the {grace:g}s grace period: drain them")
    if not ripe:
        return Decision(verdict=Verdict.WAIT, reason=_waiting(young, grace, now),
                        anomalies=tuple(young))
    disk = [a for a in ripe if a.kind in (AnomalyKind.LOG_DIR_FULL, AnomalyKind.DISK_IMBALANCE)]
    if disk:
        return Decision(verdict=Verdict.ACT, action=Action.DISK, anomalies=tuple(disk),
                        reason="; ".join(f"{a.kind.value} {a.subject}" for a in disk)
                        + ": move bytes off the fullest brokers (goal disk)")
    return Decision(verdict=Verdict.ACT, action=Action.REBALANCE, anomalies=tuple(ripe),
                    reason="; ".join(f"{a.kind.value} {a.subject}" for a in ripe)
                    + ": rebalance (goal balance)")
