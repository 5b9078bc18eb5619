"""Following and reverting a reassignment, as Kafka's tool does: verify (per partition of a plan:
done, in progress or failed) and cancel (every partition still moving goes back to its original
replicas, its pending entry dropped).

Talks to the coordinator only (MetadataClient, Kafka's layout): no controller code here.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from coordinator import layout
from coordinator.base import Coordinator
from coordinator.codecs import TopicPartition, encode_reassignment
from coordinator.errors import BadVersion, CoordinatorError, NodeExists, NoNode
from coordinator.metadata import MetadataClient
from rebalancer.live_snapshot import cluster_state, metadata_client, target_replicas
from rebalancer.plan import Plan

__all__ = [
    "CancelReport",
    "CancelledMove",
    "MoveState",
    "MoveStatus",
    "NoActiveController",
    "VerifyReport",
    "cancel_reassignment",
    "move_status",
    "plan_moves",
    "positions",
    "require_controller",
    "verify_plan",
]


class NoActiveController(CoordinatorError):
    """No controller is active to carry the request out."""


class MoveState(enum.Enum):
    DONE = "done"
    IN_PROGRESS = "in progress"
    FAILED = "failed"


@dataclass(frozen=True, slots=True, kw_only=True)
class MoveStatus:
    """One plan entry as verify finds it on the cluster: done, in progress or failed."""

    partition: TopicPartition
    state: MoveState
    target: tuple[int, ...]
    replicas: tuple[int, ...] = ()
    """The replicas the topic node lists now (the full set while moving)."""
    reason: str | None = None
    """Why it failed (None unless FAILED)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifyReport:
    statuses: tuple[MoveStatus, ...]

    def _in(self, state: MoveState) -> tuple[MoveStatus, ...]:
        return tuple(s for s in self.statuses if s.state is state)

    @property
    def done(self) -> tuple[MoveStatus, ...]:
        return self._in(MoveState.DONE)

    @property
    def in_progress(self) -> tuple[MoveStatus, ...]:
        return self._in(MoveState.IN_PROGRESS)

    @property
    def failed(self) -> tuple[MoveStatus, ...]:
        return self._in(MoveState.FAILED)

    @property
    def all_done(self) -> bool:
        return all(s.state is MoveState.DONE for s in self.statuses)


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelledMove:
    partition: TopicPartition
    target: tuple[int, ...]
    """Where it was heading."""
    original: tuple[int, ...]
    """Where it goes back to (where it stays, when it had not started)."""
    reverted: bool
    """It had started (replicas were being added): the controller reverts it. Otherwise it had
    not started and is only dropped."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelReport:
    moves: tuple[CancelledMove, ...] = ()
    still_reverting: tuple[TopicPartition, ...] = ()
    """Partitions the controller had not finished reverting when the wait ended."""

    @property
    def reverted(self) -> tuple[CancelledMove, ...]:
        return tuple(m for m in self.moves if m.reverted)

    @property
    def dropped(self) -> tuple[CancelledMove, ...]:
        return tuple(m for m in self.moves if not m.reverted)


def plan_moves(plan: Plan) -> dict[TopicPartition, tuple[int, ...]]:
    return {TopicPartition(r.topic, r.partition): r.replicas for r in plan.partitions}


def positions(md: MetadataClient, tps: Iterable[TopicPartition]
               ) -> dict[TopicPartition, tuple[tuple[int, ...], bool] | None]:
    """Per partition: (replicas in the topic node, whether a move is recorded), None if gone."""
    tps = list(tps)
    topics = {t: v.value for t, v in md.assignments({tp.topic for tp in tps}).items()}
    out: dict[TopicPartition, tuple[tuple[int, ...], bool] | None] = {}
    for tp in tps:
        a = topics.get(tp.topic)
        replicas = a.partitions.get(tp.partition) if a is not None else None
        out[tp] = None if a is None or replicas is None else (
            tuple(replicas), bool(a.adding.get(tp.partition) or a.removing.get(tp.partition)))
    return out


def require_controller(md: MetadataClient, what: str) -> None:
    if md.controller() is None:
        raise NoActiveController(f"no controller is active to carry out the {what}")


def _write_moves(md: MetadataClient, node_version: int | None,
                 moves: Mapping[TopicPartition, Iterable[int]]) -> bool:
    """Create the admin node, or replace its content at the version read; False on a conflict
    (the controller wrote in between: re-read and decide again). For cancel, which needs no
    claim: it is how a run is stopped."""
    data = encode_reassignment(moves)
    try:
        if node_version is None:
            md.coordinator.create(layout.REASSIGN_PARTITIONS, data, make_parents=True)
        else:
            md.coordinator.set(layout.REASSIGN_PARTITIONS, data, node_version)
    except (NodeExists, NoNode, BadVersion):
        return False
    return True


# --- verification ------------------------------------------------------------------------------


def verify_plan(coordinator: Coordinator | MetadataClient, plan: Plan) -> VerifyReport:
    """Per partition of ``plan``: DONE (at its target, no move recorded), IN_PROGRESS (its move
    to the target is pending), or FAILED with the reason (elsewhere, and not moving there)."""
    md = metadata_client(coordinator)
    node = md.reassignment()
    pending = node.value if node is not None else {}
    targets = plan_moves(plan)
    topics = {t: v.value for t, v in md.assignments({tp.topic for tp in targets}).items()}
    out = []
    for tp, target in sorted(targets.items()):
        a = topics.get(tp.topic)
        if a is None or tp.partition not in a.partitions:
            out.append(move_status(tp, target, None, None))
            continue
        replicas = tuple(a.partitions[tp.partition])
        moving = bool(a.adding.get(tp.partition) or a.removing.get(tp.partition))
        heading = pending.get(tp) or (target_replicas(a, tp.partition) if moving else None)
        out.append(move_status(tp, target, replicas, heading))
    return VerifyReport(statuses=tuple(out))


def move_status(tp: TopicPartition, target: tuple[int, ...], replicas: tuple[int, ...] | None,
                heading: tuple[int, ...] | None) -> MoveStatus:
    """One plan entry's state from where the partition is (``replicas``, None when it does not
    exist) and where a move in progress takes it (``heading``, None when none is). Pure: both
    ways of reaching a cluster verify by it."""
    if replicas is None:
        return MoveStatus(partition=tp, state=MoveState.FAILED, target=target,
                          reason="the partition does not exist")
    if heading == target:
        state, reason = MoveState.IN_PROGRESS, None
    elif heading is not None:
        state, reason = MoveState.FAILED, f"another move, to {list(heading)}, is in progress"
    elif replicas == target:
        state, reason = MoveState.DONE, None
    else:
        state, reason = MoveState.FAILED, (f"replicas are {list(replicas)}, not "
                                           f"{list(target)}, and no move is pending")
    return MoveStatus(partition=tp, state=state, target=target, replicas=replicas,
                      reason=reason)


# --- cancel ------------------------------------------------------------------------------------


def cancel_reassignment(coordinator: Coordinator | MetadataClient, *, wait: float = 30.0,
                        poll_interval: float = 0.2) -> CancelReport:
    """Revert pending moves as Kafka does: every partition still moving goes back to its original
    replicas (current replicas minus the adding ones) and its pending entry is dropped; an entry
    the controller has not started is dropped. Waits up to ``wait`` seconds for the controller
    to finish; what it has not finished by then is in ``still_reverting``."""
    md = metadata_client(coordinator)
    for _ in range(20):
        node = md.reassignment()
        pending = dict(node.value) if node is not None else {}
        _, topics, _ = cluster_state(md)
        recorded = {TopicPartition(t, p) for t, a in topics.items()
                    for p in (*a.adding, *a.removing) if p in a.partitions}
        moves: list[CancelledMove] = []
        revert: dict[TopicPartition, tuple[int, ...]] = {}
        for tp in sorted(set(pending) | recorded):
            a = topics.get(tp.topic)
            if a is None or tp.partition not in a.partitions:
                continue  # gone: the controller drops its entry itself
            replicas = a.partitions[tp.partition]
            adding = set(a.adding.get(tp.partition, ()))
            original = tuple(r for r in replicas if r not in adding)
            started = tp in recorded
            target = pending.get(tp) or target_replicas(a, tp.partition)
            revert[tp] = original
            moves.append(CancelledMove(partition=tp, target=tuple(target), original=original,
                                       reverted=started and original != tuple(target)))
        if not revert:
            return CancelReport()
        require_controller(md, "cancellation")
        if _write_moves(md, node.version if node is not None else None, revert):
            break
    else:
        raise CoordinatorError("the reassignment node kept changing: try the cancel again")
    deadline = time.monotonic() + wait
    left = set(revert)
    while left:
        node = md.reassignment()
        entries = node.value if node is not None else {}
        where = positions(md, left)
        left = {tp for tp in left if tp in entries or (where[tp] or ((), False))[1]}
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(poll_interval)
    return CancelReport(moves=tuple(moves), still_reverting=tuple(sorted(left)))
