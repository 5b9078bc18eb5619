"""Carrying out a plan through the controller: validate, execute in batches, verify, cancel.

Plans reach the controller the way Kafka's tools reached it: through
``/admin/reassign_partitions`` (target replicas per partition). The controller watches that node's
data, starts every entry it has not seen, and takes an entry out when its move completes (the node
is deleted when empty). The executor keeps at most N entries in the node: it creates the node with
the first N moves and, as the controller takes finished ones out, adds more with a conditional
write (re-read and retried when the controller wrote in between), until the plan is done.

Cancel is Kafka's: a partition still moving goes back to its original replicas (its current
replicas minus the adding ones) and its pending entry is dropped. The executor writes the original
replicas as the new target; the controller stops the replicas that target does not keep.

Talks to the coordinator only (MetadataClient, Kafka's layout): no controller code here.
"""

from __future__ import annotations

import enum
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from coordinator import layout
from coordinator.base import Coordinator
from coordinator.codecs import TopicAssignment, TopicPartition, encode_reassignment
from coordinator.errors import BadVersion, CoordinatorError, NodeExists, NoNode
from coordinator.metadata import MetadataClient, RequestInProgress
from rebalancer.live_snapshot import (
    cluster_state,
    metadata_client,
    parse_sizes,
    parse_topics_to_move,
    scope_snapshot,
    snapshot_from_coordinator,
    target_replicas,
)
from rebalancer.plan import Plan, PlanError, parse_plan, render_plan
from rebalancer.snapshot import Broker, PartitionReplicas, Snapshot

__all__ = [
    "CancelReport",
    "CancelledMove",
    "ExecutionProgress",
    "ExecutionResult",
    "MoveState",
    "NoActiveController",
    "PartitionStatus",
    "ReassignmentInProgress",
    "VerifyReport",
    "cancel_reassignment",
    "execute_plan",
    "parse_sizes",
    "parse_topics_to_move",
    "read_plan",
    "scope_snapshot",
    "snapshot_from_coordinator",
    "validate_plan",
    "verify_plan",
]


class ReassignmentInProgress(RequestInProgress):
    """``/admin/reassign_partitions`` exists: finish, verify or cancel that reassignment first."""


class NoActiveController(CoordinatorError):
    """No controller is active to carry the request out."""


# --- values ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionProgress:
    """Counts of the plan's partitions: finished, in the admin node now, failed (the rest wait)."""

    total: int
    done: int
    in_flight: int
    failed: int

    @property
    def waiting(self) -> int:
        return self.total - self.done - self.in_flight - self.failed


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionResult:
    """``done``: partitions at their target (including those already there). ``failed``: the rest,
    each with why (refused or cancelled; or, after the timeout, still moving or never started)."""

    done: tuple[TopicPartition, ...]
    failed: Mapping[TopicPartition, str]
    elapsed: float
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return not self.failed


class MoveState(enum.Enum):
    DONE = "done"
    IN_PROGRESS = "in progress"
    FAILED = "failed"


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionStatus:
    partition: TopicPartition
    state: MoveState
    target: tuple[int, ...]
    replicas: tuple[int, ...] = ()
    """The replicas the topic node lists now (the full set while moving)."""
    reason: str | None = None
    """Why it failed (None unless FAILED)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifyReport:
    statuses: tuple[PartitionStatus, ...]

    def _in(self, state: MoveState) -> tuple[PartitionStatus, ...]:
        return tuple(s for s in self.statuses if s.state is state)

    @property
    def done(self) -> tuple[PartitionStatus, ...]:
        return self._in(MoveState.DONE)

    @property
    def in_progress(self) -> tuple[PartitionStatus, ...]:
        return self._in(MoveState.IN_PROGRESS)

    @property
    def failed(self) -> tuple[PartitionStatus, ...]:
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


# --- validation --------------------------------------------------------------------------------


def _live_snapshot(brokers: Mapping[int, str | None], topics: Mapping[str, TopicAssignment]
                   ) -> Snapshot:
    """The live cluster as parse_plan needs it (not validated: offline brokers and mixed racks
    do not matter to a plan's validity)."""
    return Snapshot(
        brokers=tuple(Broker(id=b, rack=r) for b, r in sorted(brokers.items())),
        partitions=tuple(PartitionReplicas(topic=t, partition=p, replicas=target_replicas(a, p))
                         for t, a in sorted(topics.items()) for p in sorted(a.partitions)))


def _rf_problems(text: str | bytes, snap: Snapshot) -> list[str]:
    """A plan may change a topic's replication factor only for all its partitions at once, to
    one count (a topic with mixed RF is a mistake). One line per offending partition."""
    try:
        doc = json.loads(text)
        entries = [e for e in doc["partitions"] if isinstance(e, dict)]
    except (ValueError, TypeError, KeyError):
        return []  # malformed: parse_plan reports it
    current = {p.key: len(p.replicas) for p in snap.partitions}
    per_topic: dict[str, list[int]] = {}
    for p in snap.partitions:
        per_topic.setdefault(p.topic, []).append(p.partition)
    new: dict[tuple[str, int], int] = {}
    for e in entries:
        key = (e.get("topic"), e.get("partition"))
        if key in current and isinstance(e.get("replicas"), list):
            new.setdefault(key, len(e["replicas"]))  # type: ignore[arg-type]
    problems = []
    for key, rf in sorted(new.items()):
        topic, num = key
        if rf == current[key]:
            continue
        others = {new.get((topic, p), current[(topic, p)]) for p in per_topic[topic]}
        if len(others) > 1:
            problems.append(f"partition {topic}-{num} changes replication factor "
                            f"{current[key]} -> {rf}, but not every partition of topic "
                            f"{topic} goes to {rf} replicas")
    return problems


def read_plan(text: str | bytes) -> Plan:
    """A plan file on its own (format, types, duplicates; no cluster): for verify, which must
    report on partitions that may no longer exist. PlanError lists every problem."""
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise PlanError([f"not valid JSON: {e}"]) from e
    entries = doc.get("partitions") if isinstance(doc, dict) else None
    parts: dict[tuple[str, int], PartitionReplicas] = {}
    for e in entries if isinstance(entries, list) else ():
        if (isinstance(e, dict) and isinstance(e.get("topic"), str)
                and isinstance(e.get("partition"), int) and isinstance(e.get("replicas"), list)
                and all(isinstance(r, int) for r in e["replicas"])):
            key = (e["topic"], e["partition"])
            parts.setdefault(key, PartitionReplicas(topic=key[0], partition=key[1],
                                                    replicas=tuple(e["replicas"])))
    ids = {r for p in parts.values() for r in p.replicas}
    as_is = Snapshot(brokers=tuple(Broker(id=b) for b in sorted(ids)),
                     partitions=tuple(parts.values()))
    return parse_plan(text, as_is, allow_rf_change=True)


def validate_plan(coordinator: Coordinator | MetadataClient, plan_text_or_plan: str | bytes | Plan
                  ) -> Plan:
    """Check a plan against the live cluster; PlanError lists every problem, one line each.

    Refused: malformed JSON, unknown partitions, partitions listed twice, brokers that are not
    registered, duplicate or no replicas, a partition of a topic being deleted, and a changed
    replication factor unless it changes for every partition of the topic alike.
    """
    text = (render_plan(plan_text_or_plan) if isinstance(plan_text_or_plan, Plan)
            else plan_text_or_plan)
    md = metadata_client(coordinator)
    brokers, topics, deleting = cluster_state(md)
    snap = _live_snapshot(brokers, topics)
    problems: list[str] = []
    plan: Plan | None = None
    try:
        plan = parse_plan(text, snap, allow_rf_change=True)
    except PlanError as e:
        problems += e.problems
    problems += _rf_problems(text, snap)
    if plan is not None:
        problems += [f"partition {r.topic}-{r.partition}: topic {r.topic} is being deleted"
                     for r in plan.partitions if r.topic in deleting]
    if problems:
        raise PlanError(problems)
    assert plan is not None
    return plan


# --- execution ---------------------------------------------------------------------------------


def _moves(plan: Plan) -> dict[TopicPartition, tuple[int, ...]]:
    return {TopicPartition(r.topic, r.partition): r.replicas for r in plan.partitions}


def _positions(md: MetadataClient, tps: Iterable[TopicPartition]
               ) -> dict[TopicPartition, tuple[tuple[int, ...], bool] | None]:
    """Per partition: (replicas in the topic node, whether a move is recorded), None if gone."""
    tps = list(tps)
    topics = {t: v.value for t, v in md.assignments({tp.topic for tp in tps}).items()}
    out: dict[TopicPartition, tuple[tuple[int, ...], bool] | None] = {}
    for tp in tps:
        a = topics.get(tp.topic)
        replicas = a.partitions.get(tp.partition) if a is not None else None
        out[tp] = None if replicas is None else (
            tuple(replicas), bool(a.adding.get(tp.partition) or a.removing.get(tp.partition)))
    return out


def _require_controller(md: MetadataClient, what: str) -> None:
    if md.controller() is None:
        raise NoActiveController(f"no controller is active to carry out the {what}")


def _write_moves(md: MetadataClient, node_version: int | None,
                 moves: Mapping[TopicPartition, Iterable[int]]) -> bool:
    """Create the admin node, or replace its content at the version read; False on a conflict
    (the controller wrote in between: re-read and decide again)."""
    data = encode_reassignment(moves)
    try:
        if node_version is None:
            md.coordinator.create(layout.REASSIGN_PARTITIONS, data, make_parents=True)
        else:
            md.coordinator.set(layout.REASSIGN_PARTITIONS, data, node_version)
    except (NodeExists, NoNode, BadVersion):
        return False
    return True


def execute_plan(coordinator: Coordinator | MetadataClient, plan: Plan, *,
                 max_concurrent_moves: int = 50, poll_interval: float = 0.5,
                 timeout: float | None = None,
                 progress: Callable[[ExecutionProgress], None] | None = None) -> ExecutionResult:
    """Have the controller carry out ``plan``, at most ``max_concurrent_moves`` partitions at once.

    The plan is validated against the live cluster first (PlanError, nothing written). Refused
    with ReassignmentInProgress when a reassignment is pending, and NoActiveController when no
    controller could carry it out. Returns when every partition is done or failed, or when
    ``timeout`` seconds have passed: moves still in the node are left to the controller (verify
    follows them, cancel reverts them) and reported failed with the reason, as are moves never
    submitted. Once a pending move is retargeted or dropped before completing (a cancel, or a
    refusal), no more moves are submitted.
    """
    if max_concurrent_moves < 1:
        raise ValueError(f"max_concurrent_moves must be >= 1, got {max_concurrent_moves}")
    started = time.monotonic()
    md = metadata_client(coordinator)
    plan = validate_plan(md, plan)
    if md.reassignment() is not None:
        raise ReassignmentInProgress(
            "a partition reassignment is already in progress: verify or cancel it first")
    _require_controller(md, "reassignment")
    targets = _moves(plan)
    now = _positions(md, targets)
    done = [tp for tp in sorted(targets) if now[tp] == (targets[tp], False)]
    pending = deque(tp for tp in sorted(targets) if tp not in set(done))
    in_flight: dict[TopicPartition, tuple[int, ...]] = {}
    failed: dict[TopicPartition, str] = {}
    wake = threading.Event()
    watch = md.coordinator.watch_data(layout.REASSIGN_PARTITIONS, lambda _event: wake.set())
    timed_out = False

    def report() -> None:
        if progress is not None:
            progress(ExecutionProgress(total=len(targets), done=len(done),
                                       in_flight=len(in_flight), failed=len(failed)))

    try:
        while pending or in_flight:
            wake.clear()
            node = md.reassignment()
            entries = node.value if node is not None else {}
            left = [tp for tp in in_flight if tp not in entries]
            halted = False
            if left:
                for tp, pos in _positions(md, left).items():
                    target = in_flight.pop(tp)
                    if pos == (target, False):
                        done.append(tp)
                    else:
                        where = "gone" if pos is None else f"at {list(pos[0])}"
                        failed[tp] = (f"dropped before reaching {list(target)} (cancelled, or "
                                      f"refused by the controller); it is {where}")
                        halted = True
            for tp in [tp for tp, t in in_flight.items() if entries.get(tp, t) != t]:
                failed[tp] = f"cancelled: another tool changed its target to {list(entries[tp])}"
                del in_flight[tp]
                halted = True
            if halted:  # a cancel (or a refusal we could not foresee): submit nothing more
                while pending:
                    failed[pending.popleft()] = ("not started: a pending move was cancelled "
                                                 "or refused, so execution stopped")
            if timeout is not None and time.monotonic() - started >= timeout:
                timed_out = True
                break
            free = max_concurrent_moves - len(entries)
            if pending and free > 0:
                batch = [pending[i] for i in range(min(free, len(pending)))]
                merged = {**entries, **{tp: targets[tp] for tp in batch}}
                if not _write_moves(md, node.version if node is not None else None, merged):
                    continue  # the controller wrote in between: re-read at once
                for tp in batch:
                    pending.popleft()
                    in_flight[tp] = targets[tp]
            report()
            if pending or in_flight:
                wait = poll_interval
                if timeout is not None:
                    wait = max(0.0, min(wait, timeout - (time.monotonic() - started)))
                wake.wait(wait)
    finally:
        watch.cancel()
    if timed_out:
        for tp, target in in_flight.items():
            failed[tp] = (f"still moving to {list(target)} when the timeout passed (the "
                          f"controller carries on: verify follows it, cancel reverts it)")
        for tp in pending:
            failed[tp] = "not started: the timeout passed first"
        in_flight.clear()
        pending.clear()
    report()
    return ExecutionResult(done=tuple(sorted(done)),
                           failed=MappingProxyType(dict(sorted(failed.items()))),
                           elapsed=time.monotonic() - started, timed_out=timed_out)


# --- verification ------------------------------------------------------------------------------


def verify_plan(coordinator: Coordinator | MetadataClient, plan: Plan) -> VerifyReport:
    """Per partition of ``plan``: DONE (at its target, no move recorded), IN_PROGRESS (its move
    to the target is pending), or FAILED with the reason (elsewhere, and not moving there)."""
    md = metadata_client(coordinator)
    node = md.reassignment()
    pending = node.value if node is not None else {}
    targets = _moves(plan)
    topics = {t: v.value for t, v in md.assignments({tp.topic for tp in targets}).items()}
    out = []
    for tp, target in sorted(targets.items()):
        a = topics.get(tp.topic)
        if a is None or tp.partition not in a.partitions:
            out.append(PartitionStatus(partition=tp, state=MoveState.FAILED, target=target,
                                       reason="the partition does not exist"))
            continue
        replicas = tuple(a.partitions[tp.partition])
        moving = bool(a.adding.get(tp.partition) or a.removing.get(tp.partition))
        heading = pending.get(tp) or (target_replicas(a, tp.partition) if moving else None)
        if heading == target:
            state, reason = MoveState.IN_PROGRESS, None
        elif heading is not None:
            state, reason = MoveState.FAILED, f"another move, to {list(heading)}, is in progress"
        elif replicas == target:
            state, reason = MoveState.DONE, None
        else:
            state, reason = MoveState.FAILED, (f"replicas are {list(replicas)}, not "
                                               f"{list(target)}, and no move is pending")
        out.append(PartitionStatus(partition=tp, state=state, target=target, replicas=replicas,
                                   reason=reason))
    return VerifyReport(statuses=tuple(out))


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
        _require_controller(md, "cancellation")
        if _write_moves(md, node.version if node is not None else None, revert):
            break
    else:
        raise CoordinatorError("the reassignment node kept changing: try the cancel again")
    deadline = time.monotonic() + wait
    left = set(revert)
    while left:
        node = md.reassignment()
        entries = node.value if node is not None else {}
        positions = _positions(md, left)
        left = {tp for tp in left if tp in entries or (positions[tp] or ((), False))[1]}
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(poll_interval)
    return CancelReport(moves=tuple(moves), still_reverting=tuple(sorted(left)))
