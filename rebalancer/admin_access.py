"""A cluster through Kafka's Admin API: :class:`AdminAccess`, the :class:`ClusterAccess` of any
Kafka cluster (3.x and 4.x, KRaft or ZooKeeper mode, partctl's own brokers) reached by
``--bootstrap-server`` alone.

- The view: brokers and racks (DescribeCluster), partitions with replicas, leader and ISR
  (Metadata, by batches of topics), the moves in progress (ListPartitionReassignments: a moving
  partition is taken where it is heading), and with ``sizes`` every replica's size and every log
  directory's usage (DescribeLogDirs, one broker at a time: a replica's size is its size in the
  directory holding it, the leader's copy preferred; future replicas, a move between
  directories, are left out).
- Internal topics: ``__consumer_offsets`` and ``__transaction_state`` are partitions like any
  other, planned as Kafka's tool plans them (``kafka-reassign-partitions --generate`` moves any
  topic it is given, internal ones included, and so does the coordinator's way in, which reads
  every topic node); ``__cluster_metadata``, KRaft's metadata log, is not a topic Metadata
  lists, nor one AlterPartitionReassignments can move, and is left out should a broker list it.
- Execution (:mod:`rebalancer.admin_execution`), verify and cancel by the reassignment APIs;
  throttles as Kafka's tool sets them, by IncrementalAlterConfigs; preferred leaders by
  ElectLeaders. The client's errors become :class:`AccessError` lines.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from coordinator.clock import SYSTEM_CLOCK, Clock
from coordinator.codecs import TopicPartition
from rebalancer.access import (
    NO_LEADER,
    AccessError,
    ClusterView,
    ElectionResult,
    LivePartition,
    LogDirUsage,
    MovingPartition,
)
from rebalancer.admin_execution import (
    asking,
    current_replicas,
    moves_in_progress,
    overlap_decision,
    run_plan,
)
from rebalancer.execution import ClaimRefused, ReassignmentInProgress
from rebalancer.plan import Plan, PlanError, render_plan
from rebalancer.snapshot import PartitionReplicas, Snapshot, SnapshotBroker
from rebalancer.throttles import (
    BROKER_RATE_KEYS,
    TOPIC_REPLICA_KEYS,
    ThrottleChange,
    throttle_targets,
)
from rebalancer.validation import check_plan, read_plan
from rebalancer.verification import (
    CancelledMove,
    CancelReport,
    VerifyReport,
    move_status,
    plan_moves,
)

if TYPE_CHECKING:
    from kafkaclient.admin import AdminClient, TopicInfo
    from rebalancer.execution import ExecutionProgress, ExecutionResult

__all__ = ["HIDDEN_TOPICS", "AdminAccess"]

HIDDEN_TOPICS = frozenset({"__cluster_metadata"})
"""Topics never planned: KRaft's metadata log is not moved by partition reassignments."""

UNLIMITED_RATE = str(2**63 - 1)
"""Kafka's default of the two throttle rates (Long.MAX_VALUE): no throttle."""


def _needs(failed: Mapping[tuple[str, str], str]) -> str:
    """What a principal refused IncrementalAlterConfigs lacks, as Kafka's authorizer checks it:
    ALTER_CONFIGS on the cluster for a broker's configs, on the topic for a topic's."""
    refused = [(kind, name) for (kind, name), e in failed.items()
               if e.split(":", 1)[0] in ("CLUSTER_AUTHORIZATION_FAILED",
                                         "TOPIC_AUTHORIZATION_FAILED")]
    if not refused:
        return ""
    where = (["the cluster"] if any(kind == "broker" for kind, _ in refused) else []) + [
        f"topic {name}" for kind, name in refused if kind == "topic"][:5]
    return f" (the principal needs ALTER_CONFIGS on {' and on '.join(where)})"


class AdminAccess:
    """A cluster through Kafka's Admin API (see the module's docstring). ``admin`` is closed
    with this access."""

    def __init__(self, admin: AdminClient, *, description: str,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.admin = admin
        self.description = description
        self.clock = clock

    # --- reading -------------------------------------------------------------------------------

    def _brokers(self) -> tuple[dict[int, str | None], int | None]:
        with asking("cannot describe the cluster"):
            info = self.admin.describe_cluster()
        return {b.id: b.rack for b in info.brokers}, info.controller_id

    def _topics(self, names: Iterable[str] | None) -> dict[str, TopicInfo]:
        with asking("cannot read the topics' metadata"):
            topics = self.admin.topics(None if names is None else sorted(set(names)))
        return {n: t for n, t in topics.items() if n not in HIDDEN_TOPICS}

    def _partitions(self, topics: Mapping[str, TopicInfo],
                    moving: Mapping[TopicPartition, MovingPartition],
                    sizes: Mapping[tuple[TopicPartition, int], int] | None
                    ) -> list[LivePartition]:
        out: list[LivePartition] = []
        for name in sorted(topics):
            for p in sorted(topics[name].partitions, key=lambda p: p.partition):
                tp = TopicPartition(name, p.partition)
                move = moving.get(tp)
                replicas = move.target if move is not None else tuple(p.replicas)
                if not replicas:
                    continue
                size = None
                if sizes is not None:
                    held = [sizes[(tp, b)] for b in (p.leader, *p.replicas) if (tp, b) in sizes]
                    size = held[0] if held else None
                out.append(LivePartition(topic=name, partition=p.partition, replicas=replicas,
                                         leader=p.leader if p.leader >= 0 else NO_LEADER,
                                         isr=tuple(p.isr), moving=move is not None,
                                         size_bytes=size))
        return out

    def _log_dirs(self, brokers: Iterable[int]
                  ) -> tuple[dict[tuple[TopicPartition, int], int], list[LogDirUsage]]:
        """Replica sizes (partition, broker) -> bytes and every directory's usage, asking one
        broker at a time so that one answer at most is held beside the sizes."""
        sizes: dict[tuple[TopicPartition, int], int] = {}
        usage: list[LogDirUsage] = []
        for b in sorted(brokers):
            with asking(f"cannot describe the log directories of broker {b}"):
                dirs = self.admin.log_dirs([b]).get(b, ())
            for d in dirs:
                held = 0
                if d.error is None:
                    for r in d.replicas:
                        if r.future:
                            continue  # a copy moving between directories: not the replica yet
                        sizes[(TopicPartition(r.topic, r.partition), b)] = r.size
                        held += r.size
                usage.append(LogDirUsage(broker=b, path=d.path, total_bytes=d.total_bytes,
                                         usable_bytes=d.usable_bytes, replica_bytes=held,
                                         error=d.error))
        return sizes, usage

    def view(self, *, sizes: bool = True) -> ClusterView:
        brokers, controller = self._brokers()
        moving = self.in_progress()
        topics = self._topics(None)
        replica_sizes, usage = self._log_dirs(brokers) if sizes else (None, [])
        parts = self._partitions(topics, moving, replica_sizes)
        del topics, replica_sizes
        return ClusterView(brokers=brokers, partitions=tuple(parts), controller=controller,
                           log_dirs=tuple(usage), sizes_known=sizes, source=self.description)

    def in_progress(self) -> dict[TopicPartition, MovingPartition]:
        return moves_in_progress(self.admin)

    # --- plans ---------------------------------------------------------------------------------

    def validate(self, plan: Plan | str) -> Plan:
        """The plan checked against the plan's topics and the live brokers: every problem of
        :func:`rebalancer.validation.check_plan`, and one line per topic the plan names that
        does not exist (deleted since the plan was made)."""
        text = render_plan(plan) if isinstance(plan, Plan) else plan
        named = read_plan(text)
        brokers, _ = self._brokers()
        names = {r.topic for r in named.partitions}
        topics = self._topics(names)
        moving = {tp: m for tp, m in self.in_progress().items() if tp.topic in names}
        missing = sorted(names - topics.keys())
        problems = [f"topic {t} does not exist (deleted since the plan was made?): the plan "
                    f"moves {sum(r.topic == t for r in named.partitions)} partition(s) of it; "
                    f"nothing was moved" for t in missing]
        if missing:
            text = render_plan(Plan(partitions=tuple(r for r in named.partitions
                                                     if r.topic not in missing)))
        snap = Snapshot(
            brokers=tuple(SnapshotBroker(id=b, rack=r) for b, r in sorted(brokers.items())),
            partitions=tuple(PartitionReplicas(topic=p.topic, partition=p.partition,
                                               replicas=p.replicas)
                             for p in self._partitions(topics, moving, None)))
        try:
            checked = check_plan(text, snap)
        except PlanError as exc:
            problems += exc.problems
        if problems:
            raise PlanError(problems)
        return checked

    def execute(self, plan: Plan, *, max_concurrent_moves: int = 50,
                max_moves_per_broker: int | None = None, throttle: int | None = None,
                additional: bool = False, timeout: float | None = None,
                poll_interval: float = 0.5,
                progress: Callable[[ExecutionProgress], None] | None = None,
                label: str = "") -> ExecutionResult:
        """Validate, refuse an overlap (ReassignmentInProgress, nothing set or moved), set the
        throttles, then :func:`rebalancer.admin_execution.run_plan`; with ``throttle``, the
        throttles are removed at the end when every move finished (else verify removes them
        once they have)."""
        if max_concurrent_moves < 1:
            raise ValueError(f"max_concurrent_moves must be >= 1, got {max_concurrent_moves}")
        if max_moves_per_broker is not None and max_moves_per_broker < 1:
            raise ValueError(f"max_moves_per_broker must be >= 1, got {max_moves_per_broker}")
        started = self.clock.monotonic()
        plan = self.validate(plan)
        targets = plan_moves(plan)
        moving = {tp: m.target for tp, m in self.in_progress().items()}
        decision = overlap_decision(targets, moving, additional=additional)
        if isinstance(decision, ClaimRefused):
            raise ReassignmentInProgress(decision.reason, pending=moving)
        current = {tp: where for tp, where in current_replicas(self.admin, targets).items()
                   if where is not None}
        if throttle is not None:
            self.set_throttles(plan, throttle, current=current)
        result = run_plan(self.admin, targets, current, moving,
                          max_concurrent_moves=max_concurrent_moves,
                          max_moves_per_broker=max_moves_per_broker, timeout=timeout,
                          poll_interval=poll_interval, progress=progress, clock=self.clock,
                          started=started)
        if throttle is not None and result.ok and not result.in_flight:
            self.remove_throttles({r.topic for r in plan.partitions})
        return result

    def verify(self, plan: Plan) -> VerifyReport:
        targets = plan_moves(plan)
        moving = self.in_progress()
        where = current_replicas(self.admin, targets)
        return VerifyReport(statuses=tuple(
            move_status(tp, target, where[tp],
                        moving[tp].target if tp in moving else None)
            for tp, target in sorted(targets.items())))

    # --- throttles -----------------------------------------------------------------------------

    def _alter_configs(self, changes: Mapping[tuple[str, str], Mapping[str, str | None]],
                       what: str, *, all_or_none: bool = False) -> None:
        """Apply ``changes`` (value None: delete the key). With ``all_or_none``, a change
        refused for some resources is taken back on the others (their values as read before,
        where the principal may read them), so that a refusal changes nothing."""
        from kafkaclient.admin import AdminError

        if not changes:
            return
        before = self._throttle_values(changes) if all_or_none else None
        with asking(f"cannot {what}"):
            answers = self.admin.incremental_alter_configs(changes)
        failed = {r: e for r, e in sorted(answers.items()) if e is not None}
        if not failed:
            return
        problems = "; ".join(f"{kind} {name}: {e}" for (kind, name), e in failed.items())
        applied = sorted(r for r in changes if r not in failed)
        undone = ""
        if all_or_none and applied:
            before = before or {}
            unread = [r for r in applied if r not in before]
            applied = [r for r in applied if r in before]
            undo = {r: {k: before[r].get(k) for k in changes[r]} for r in applied}
            names = ", ".join(f"{kind} {name}" for kind, name in applied)
            left: dict[tuple[str, str], str] = {}
            if undo:
                try:
                    left = {r: e for r, e in self.admin.incremental_alter_configs(undo).items()
                            if e is not None}
                except AdminError as exc:
                    left = dict.fromkeys(applied, str(exc))
            kept = sorted({*left, *unread})
            undone = (f"; what was set on {names} was taken back" if applied and not left
                      else "")
            if kept:
                undone += (f"; what was set on {', '.join(f'{k} {n}' for k, n in kept)} could "
                           f"not be taken back")
        raise AccessError(f"cannot {what}: {problems}{_needs(failed)}{undone}")

    def _throttle_values(self, resources: Iterable[tuple[str, str]]
                         ) -> dict[tuple[str, str], dict[str, str | None]] | None:
        """The values to restore the throttle keys to (None: delete the key: it was unset or
        at its default), of the resources the principal may read (one refused is read alone,
        and left out: what is set on it cannot be taken back), or None when none can be read."""
        from kafkaclient.admin import AdminError

        wanted = list(resources)
        try:
            configs = self.admin.describe_configs(wanted)
        except AdminError:
            configs = {}
            for r in wanted:
                try:
                    configs.update(self.admin.describe_configs([r]))
                except AdminError:
                    continue
        if not configs:
            return None
        out: dict[tuple[str, str], dict[str, str | None]] = {}
        for r in wanted:
            if r not in configs:
                continue
            values = configs[r]
            out[r] = {}
            for k in (*BROKER_RATE_KEYS, *TOPIC_REPLICA_KEYS):
                v = values.get(k)
                out[r][k] = v if v not in (None, "", UNLIMITED_RATE) else None
        return out

    def set_throttles(self, plan: Plan, rate: int, *,
                      current: Mapping[TopicPartition, tuple[int, ...]] | None = None
                      ) -> ThrottleChange:
        """Kafka's tool's throttles: both rates on the live brokers the moves involve, the two
        throttled replica lists on the topics moved (:func:`rebalancer.throttles
        .throttle_targets`). Set before the moves start, so no byte of theirs goes
        unthrottled."""
        if rate < 1:
            raise ValueError(f"rate must be >= 1 byte per second, got {rate}")
        if current is None:
            current = {tp: where for tp, where in
                       current_replicas(self.admin, plan_moves(plan)).items()
                       if where is not None}
        involved, lists = throttle_targets(current, plan)
        live, _ = self._brokers()
        brokers = sorted(b for b in involved if b in live)  # a dead broker takes no config
        changes: dict[tuple[str, str], dict[str, str | None]] = {
            ("broker", str(b)): dict.fromkeys(BROKER_RATE_KEYS, str(rate)) for b in brokers}
        for topic, values in sorted(lists.items()):
            changes[("topic", topic)] = {k: v or None for k, v in values.items()}
        self._alter_configs(changes, "set the replication throttles", all_or_none=True)
        return ThrottleChange(brokers=tuple(brokers), topics=lists, rate=rate)

    def remove_throttles(self, topics: Iterable[str]) -> ThrottleChange:
        """As Kafka's tool once the moves are done: the two rates go from every live broker,
        the replica lists from ``topics`` (those that exist). Reports where they were set."""
        live, _ = self._brokers()
        wanted = set(topics)
        names = sorted(wanted & set(self._topics(wanted))) if wanted else []
        resources = [("broker", str(b)) for b in sorted(live)] + [("topic", t) for t in names]
        with asking("cannot read the throttle configs"):
            configs = self.admin.describe_configs(resources)
        had = [b for b in sorted(live) if any(
            configs.get(("broker", str(b)), {}).get(k) not in (None, "", UNLIMITED_RATE)
            for k in BROKER_RATE_KEYS)]
        done: dict[str, dict[str, str]] = {}
        for t in names:
            values = configs.get(("topic", t), {})
            set_ = {k: v for k in TOPIC_REPLICA_KEYS if (v := values.get(k))}
            if set_:
                done[t] = set_
        changes: dict[tuple[str, str], dict[str, str | None]] = {
            ("broker", str(b)): dict.fromkeys(BROKER_RATE_KEYS) for b in had}
        changes.update({("topic", t): dict.fromkeys(TOPIC_REPLICA_KEYS) for t in done})
        self._alter_configs(changes, "remove the replication throttles")
        return ThrottleChange(brokers=tuple(had), topics=done)

    # --- cancel, elections ---------------------------------------------------------------------

    def cancel(self, *, wait: float = 30.0, poll_interval: float = 0.2) -> CancelReport:
        """Every move in progress gets a null target (AlterPartitionReassignments): its replicas
        go back. Waits up to ``wait`` seconds for the controller to finish reverting."""
        moving = self.in_progress()
        if not moving:
            return CancelReport()
        with asking("cannot cancel the reassignments"):
            answers = self.admin.alter_reassignments(dict.fromkeys(moving))
        errors = {tp: e for tp, e in answers.items()
                  if e is not None and not e.startswith("NO_REASSIGNMENT_IN_PROGRESS")}
        if errors:
            raise AccessError(f"cannot cancel {len(errors)} move(s): " + "; ".join(
                f"{tp}: {e}" for tp, e in sorted(errors.items())[:5]))
        cancelled = sorted(tp for tp, e in answers.items() if e is None)
        moves = tuple(CancelledMove(partition=tp, target=moving[tp].target,
                                    original=tuple(r for r in moving[tp].replicas
                                                   if r not in moving[tp].adding),
                                    reverted=True) for tp in cancelled)
        deadline = self.clock.monotonic() + wait
        left = set(cancelled)
        while left:
            left &= set(self.in_progress())
            if not left or self.clock.monotonic() >= deadline:
                break
            self.clock.sleep(poll_interval)
        return CancelReport(moves=moves, still_reverting=tuple(sorted(left)))

    def elect_preferred(self, partitions: Iterable[TopicPartition] | None = None
                        ) -> ElectionResult:
        with asking("cannot elect the preferred leaders"):
            answers = self.admin.elect_leaders(None if partitions is None else list(partitions))
        elected = tuple(sorted(tp for tp, e in answers.items() if e is None))
        not_needed = tuple(sorted(tp for tp, e in answers.items()
                                  if e is not None and e.startswith("ELECTION_NOT_NEEDED")))
        failed = {tp: e for tp, e in sorted(answers.items())
                  if e is not None and not e.startswith("ELECTION_NOT_NEEDED")}
        return ElectionResult(elected=elected, not_needed=not_needed, failed=failed)

    def close(self) -> None:
        self.admin.close()

    def __enter__(self) -> AdminAccess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
