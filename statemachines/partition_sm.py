"""The partition state machine: NonExistent, New, Online, Offline (Kafka's PartitionStateMachine).

Each call moves a batch of partitions to one target state. The batch is split against the table
of legal predecessors first; refused members are logged to the state-change log and keep their
state. Going Online runs one election pass over every member (a pure decision each), writes all
the results with one fenced, chunked, pipelined ``update_partition_states`` and, for the members
whose partition epoch moved meanwhile, re-reads them in bulk and decides again. Broker requests
are only recorded in the caller's batch; the caller sends it once.

The one error that escapes is the fence's (ControllerMoved / NotController): the controller
resigns. Everything else is a per-partition result.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from coordinator import layout
from coordinator.codecs import (
    PartitionStateNode,
    TopicPartition,
    encode_partition_state,
    sorted_partitions,
)
from coordinator.configdef import InvalidConfig, parse_value
from coordinator.errors import BadVersion, CoordinatorError, NodeExists
from coordinator.metadata import MetadataClient
from coordinator.model import SetData, Stat
from coordinator.skipped import SkippedTopics
from coordinator.topic_config import TOPIC_CONFIG_KEYS
from elections.controller_election import Fence
from elections.leader import (
    NO_LEADER,
    ControlledShutdown,
    ElectionStrategy,
    LeaderAndIsr,
    Offline,
    apply_election,
    elector,
)
from interbroker.requests import RequestBatch, UpdateMetadataPartition
from statemachines.context import ControllerContext
from statemachines.reads import read_partition_states
from statemachines.state_change import (
    election_kind,
    enabled,
    log_elections,
    log_partition_transitions,
    state_change_log,
)
from statemachines.states import (
    PartitionState,
    ReplicaState,
    previous_states,
    split_transitions,
)
from statemachines.stats import ControllerStats

__all__ = [
    "ElectionOutcome",
    "PartitionStateMachine",
    "record_leader_and_isr",
    "shrink_isr",
    "state_change_log",
    "stored",
]

log = logging.getLogger(__name__)
UNCLEAN_KEY = "unclean.leader.election.enable"
MAX_WRITE_ROUNDS = 5
WRITE_SLICE = 1000
"""Partitions decided per slice of a streamed leader write: the next slice is decided while
the ones before are being written."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ElectionOutcome:
    """Per partition: the leader and ISR written, or why nothing was."""

    elected: dict[TopicPartition, LeaderAndIsr] = field(default_factory=dict)
    failed: dict[TopicPartition, str] = field(default_factory=dict)


class Refusal(str):
    """Why an election found no eligible leader for a partition among the brokers live then:
    only one of its replicas' brokers joining (or its topic allowing an unclean election,
    which elects it again itself) can change that. Any other failure (a write that failed, a
    state node missing) is an error, retried whenever any broker joins."""

    __slots__ = ()


class NoLiveReplica(Refusal):
    """A refusal of a partition none of whose assigned replicas is live: no stored leader
    and ISR can change that, so the partition is not re-read (see
    :meth:`PartitionStateMachine.write_leaders`), nor elected again out of sync."""

    __slots__ = ()


NO_LIVE_REPLICA = NoLiveReplica("none of its replicas is live")
NO_LIVE_REPLICA_FOR_NEW = NoLiveReplica("no live replica to lead a new partition")


def refusal(replicas: tuple[int, ...], isr: tuple[int, ...], live: frozenset[int]) -> Refusal:
    """The reason an election found no leader among ``replicas`` (``live``: the brokers it
    could choose from)."""
    reason = f"no eligible leader among {replicas} (isr {isr})"
    return NoLiveReplica(reason) if live.isdisjoint(replicas) else Refusal(reason)


def stored(value: LeaderAndIsr) -> PartitionStateNode:
    return PartitionStateNode(leader=value.leader, leader_epoch=value.leader_epoch,
                              isr=value.isr, controller_epoch=value.controller_epoch)


def shrink_isr(current: LeaderAndIsr, leaving: Iterable[int], controller_epoch: int
               ) -> LeaderAndIsr | None:
    """Leader and ISR without the ``leaving`` replicas (pure); None when nothing changes.

    Kafka's ``removeReplicasFromIsr``, one replica at a time in the order given: a replica
    leaves the ISR unless it is its last member, so the ISR never becomes empty and still
    names who has every committed record (removing [2, 3] from [2, 3] leaves [3]). A leaving
    leader leaves the partition leaderless. All of it is one write (one leader epoch bump),
    where Kafka writes once per replica.
    """
    leader, isr = current.leader, current.isr
    changed = False
    for r in leaving:
        if r == leader:
            leader, changed = NO_LEADER, True
        if r in isr:
            changed = True
            if len(isr) > 1:
                isr = tuple(m for m in isr if m != r)
    if not changed:
        return None
    return LeaderAndIsr(leader, current.leader_epoch + 1, isr, controller_epoch,
                        current.partition_epoch)


def record_leader_and_isr(
    ctx: ControllerContext,
    batch: RequestBatch,
    tps: Iterable[TopicPartition],
    *,
    recipients: Mapping[TopicPartition, Iterable[int]] | None = None,
    is_new: bool = False,
    metadata: bool = True,
) -> None:
    """LeaderAndIsr for each partition to its online replicas (or ``recipients``), and its
    metadata to every live broker (unless ``metadata`` is false: it was just sent). One entry
    object per partition and kind, shared by every broker's request."""
    entries = []
    brokers = ctx.brokers
    leaders = ctx.leaders
    assigned = ctx.replicas
    moving_ = ctx.reassignments
    explicit = ctx.replica_states.explicit()
    offline = ReplicaState.OFFLINE
    add = batch.add_leader_and_isr
    of = UpdateMetadataPartition.of
    # In (topic, partition) order: the batch sorts its partitions on build, cheaply when the
    # input is already in order.
    for tp in sorted_partitions(tps):
        value = leaders.get(tp)
        if value is None:
            continue
        replicas = assigned.get(tp, ())
        moving = moving_.get(tp) if moving_ else None
        if recipients is not None and tp in recipients:
            targets: Iterable[int] = recipients[tp]
        elif explicit:
            targets = [r for r in replicas
                       if r in brokers and explicit.get((tp, r)) is not offline]
        else:
            targets = [r for r in replicas if r in brokers]
        if moving is None:
            add(targets, tp, value, replicas, is_new)
        else:
            add(targets, tp, value, replicas, is_new,
                adding=moving.adding, removing=moving.removing)
        if metadata:
            entries.append((tp, of(tp, value, replicas,
                                   [r for r in replicas if r not in brokers])))
    if metadata:
        batch.add_update_metadata_entries(None, entries)


class PartitionStateMachine:
    def __init__(
        self,
        ctx: ControllerContext,
        fence: Fence,
        metadata: MetadataClient,
        *,
        unclean: bool = False,
        controller_id: int = -1,
        stats: ControllerStats | None = None,
        skipped: SkippedTopics | None = None,
    ) -> None:
        self.ctx = ctx
        self.fence = fence
        self.metadata = metadata
        self.unclean = unclean
        self.controller_id = controller_id
        """The broker id this controller runs as, for the state-change log."""
        self.stats = stats if stats is not None else ControllerStats()
        """Election counts (the controller's, which outlive this machine's term)."""
        self.skipped = skipped or SkippedTopics(log, f"controller {controller_id}")
        """Malformed state nodes met on a re-read (the view's record: one warning each)."""

    @property
    def controller_epoch(self) -> int:
        return self.fence.epoch.epoch

    def initialize(self) -> None:
        """Derive every partition's state from the view (at failover): Online where the leader
        is live, Offline where it is not, New where there is no leader and ISR yet."""
        ctx = self.ctx
        live = ctx.brokers
        leaders = ctx.leaders
        states = ctx.partition_states
        states.clear()
        states.update(dict.fromkeys(ctx.replicas, PartitionState.ONLINE))
        waiting = ctx.leaderless
        waiting.clear()
        ctx.election_errors.clear()
        offline, new = PartitionState.OFFLINE, PartitionState.NEW
        if len(leaders) != len(states):
            for tp in states:
                if tp not in leaders:
                    states[tp] = new
                    waiting.add(tp)
        for b, led in ctx.leaders_by_broker().items():
            if b not in live:
                for tp in led:
                    if tp in states:
                        states[tp] = offline
                        waiting.add(tp)
        for tp in ctx.led_by(NO_LEADER):
            if tp in states:
                states[tp] = offline
                waiting.add(tp)

    def state(self, tp: TopicPartition) -> PartitionState:
        return self.ctx.partition_states.get(tp, PartitionState.NON_EXISTENT)

    def _split(self, tps: Iterable[TopicPartition], target: PartitionState) -> list[TopicPartition]:
        """The members of ``tps`` that may move to ``target``; the others are refused (logged,
        state kept). One pass with identity tests when all may move, the common case, which
        avoids building pairs and hashing an enum in Python per set lookup."""
        states, absent = self.ctx.partition_states, PartitionState.NON_EXISTENT
        members = tps if type(tps) is list else list(tps)
        allowed = previous_states(target)
        get = states.get
        valid = [tp for tp in members if get(tp, absent) in allowed]
        if len(valid) == len(members):
            return valid
        split = split_transitions(((tp, get(tp, absent)) for tp in members), target)
        state_change_log.warning("refused %d transitions to %s, e.g. %s",
                                 len(split.invalid), target, split.invalid[0])
        for refusal in split.invalid[1:]:
            state_change_log.debug("refused: %s", refusal)
        return list(split.valid)

    def _set(self, tps: Iterable[TopicPartition], target: PartitionState) -> None:
        """Record ``tps`` (already checked against the table) in state ``target``, each move
        on the state-change log when it is on."""
        states = self.ctx.partition_states
        waiting = self.ctx.leaderless
        members = tps if type(tps) is list else list(tps)
        if members and enabled():
            absent = PartitionState.NON_EXISTENT
            log_partition_transitions(
                self.controller_id, self.controller_epoch,
                [(tp, states.get(tp, absent)) for tp in members], target, self.ctx.leaders)
        errors = self.ctx.election_errors
        if target is PartitionState.NON_EXISTENT:
            for tp in members:
                states.pop(tp, None)
                waiting.discard(tp)
            errors.difference_update(members)
            return
        states.update(dict.fromkeys(members, target))
        if target is PartitionState.ONLINE:
            waiting.difference_update(members)
            if errors:
                errors.difference_update(members)
        else:
            waiting.update(members)

    # --- the transitions -----------------------------------------------------------------

    def to_new(self, tps: Iterable[TopicPartition]) -> None:
        self._set(self._split(tps, PartitionState.NEW), PartitionState.NEW)

    def to_offline(self, tps: Iterable[TopicPartition]) -> None:
        self._set(self._split(tps, PartitionState.OFFLINE), PartitionState.OFFLINE)

    def to_non_existent(self, tps: Iterable[TopicPartition]) -> None:
        self._set(self._split(tps, PartitionState.NON_EXISTENT), PartitionState.NON_EXISTENT)

    def to_online(
        self,
        tps: Iterable[TopicPartition],
        batch: RequestBatch,
        strategy: ElectionStrategy | Mapping[TopicPartition, ElectionStrategy] | None = None,
    ) -> ElectionOutcome:
        """Elect leaders: New partitions get their first leader and ISR; Offline and Online ones
        an election by ``strategy`` (default: Offline, unclean as configured)."""
        started = time.perf_counter()
        valid = self._split(tps, PartitionState.ONLINE)
        states, new = self.ctx.partition_states, PartitionState.NEW
        fresh: list[TopicPartition] = []
        others: list[TopicPartition] = []
        for tp in valid:
            (fresh if states.get(tp) is new else others).append(tp)
        outcome = ElectionOutcome()
        if fresh:
            self._initialize_leaders(fresh, batch, outcome)
        if others:
            if strategy is None or strategy == Offline(unclean=False):
                self._elect_offline(others, batch, outcome)
            else:
                self._elect(others, batch, strategy, outcome)
        if outcome.elected:
            self.stats.elections.add(time.perf_counter() - started)
        if outcome.failed:
            state_change_log.info("no leader for %d partitions, e.g. %s: %s",
                                  len(outcome.failed), *next(iter(outcome.failed.items())))
            self._note_errors(outcome.failed)
        return outcome

    def _note_errors(self, failed: dict[TopicPartition, str]) -> None:
        """Keep the leaderless partitions of ``failed`` that failed for an error (not a
        :class:`Refusal`) in ``ctx.election_errors``; drop those refused."""
        errors, waiting = self.ctx.election_errors, self.ctx.leaderless
        for tp, why in failed.items():
            if not isinstance(why, Refusal) and tp in waiting:
                errors.add(tp)
            elif errors:
                errors.discard(tp)

    def _initialize_leaders(
        self, tps: list[TopicPartition], batch: RequestBatch, outcome: ElectionOutcome
    ) -> None:
        ctx = self.ctx
        live = ctx.live_ids()
        epoch = self.controller_epoch
        planned: dict[TopicPartition, LeaderAndIsr] = {}
        for tp in tps:
            alive = tuple(r for r in ctx.replicas.get(tp, ()) if r in live)
            if not alive:
                outcome.failed[tp] = NO_LIVE_REPLICA_FOR_NEW
                continue
            planned[tp] = LeaderAndIsr(leader=alive[0], leader_epoch=0, isr=alive,
                                       controller_epoch=epoch, partition_epoch=0)
        results = self.fence.create_partition_states({tp: stored(v) for tp, v in planned.items()})
        done, existing = [], []
        for tp, result in results.items():
            if isinstance(result, NodeExists):
                existing.append(tp)
            elif isinstance(result, Exception):
                outcome.failed[tp] = str(result)
            else:
                ctx.set_leader(tp, planned[tp])
                outcome.elected[tp] = planned[tp]
                done.append(tp)
        self._set(done, PartitionState.ONLINE)
        record_leader_and_isr(ctx, batch, done, is_new=True)
        if existing:  # created meanwhile (the view lagged): take it as it is, elect if needed
            self.refresh(existing)
            live_all = ctx.brokers
            online = [tp for tp in existing if tp in ctx.leaders
                      and ctx.leaders[tp].leader in live_all]
            self._set(online, PartitionState.ONLINE)
            record_leader_and_isr(ctx, batch, online)
            led = set(online)
            offline = [tp for tp in existing if tp in ctx.leaders and tp not in led]
            self._set(offline, PartitionState.OFFLINE)
            if offline:
                self._elect_offline(offline, batch, outcome)

    def _elect_offline(
        self, tps: list[TopicPartition], batch: RequestBatch, outcome: ElectionOutcome
    ) -> None:
        """Kafka's offline election with each topic's ``unclean.leader.election.enable``:
        clean first; the partitions left without a leader (no live replica in the ISR) are
        elected again out of sync where their topic allows it, read from its config node at
        that moment (the override, else the controller's default), as Kafka's controller reads
        the configs of exactly those partitions' topics. No read when every partition found a
        clean leader or has no live replica at all (which no election can help).

        When the live brokers host fewer replicas than there are partitions to elect (the
        first brokers back of a whole cluster), those with no live replica are found from
        the brokers' side and fail without a decision each."""
        ctx = self.ctx
        hosted = [ctx.replicas_on(b) for b in ctx.live_ids()]
        if sum(map(len, hosted)) < len(tps):
            reachable: set[TopicPartition] = set().union(*hosted)
            failed_ = outcome.failed
            for tp in tps:
                if tp not in reachable:
                    failed_[tp] = NO_LIVE_REPLICA
            tps = [tp for tp in tps if tp in reachable]
            if not tps:
                return
        self._elect(tps, batch, Offline(unclean=False), outcome)
        failed = [tp for tp in tps if tp in outcome.failed
                  and type(outcome.failed[tp]) is not NoLiveReplica]
        if not failed:
            return
        allowed = self.unclean_topics({tp.topic for tp in failed})
        retry = [tp for tp in failed if tp.topic in allowed]
        if retry:
            for tp in retry:
                del outcome.failed[tp]
            self._elect(retry, batch, Offline(unclean=True), outcome)
            self.stats.unclean_elections += sum(1 for tp in retry if tp in outcome.elected)

    def unclean_topics(self, topics: Iterable[str]) -> set[str]:
        """The topics among ``topics`` whose offline partitions may elect out of sync now:
        their ``unclean.leader.election.enable`` override, else this controller's default."""
        configs = self.metadata.topic_configs(topics)
        out = set()
        for topic in topics:
            node = configs.get(topic)
            raw = node.value.get(UNCLEAN_KEY) if node is not None else None
            allowed = self.unclean
            if raw is not None:
                try:
                    allowed = bool(parse_value(TOPIC_CONFIG_KEYS[UNCLEAN_KEY], raw))
                except InvalidConfig:
                    log.warning("topic %s: ignoring %s=%r", topic, UNCLEAN_KEY, raw)
            if allowed:
                out.add(topic)
        return out

    def _elect(
        self,
        tps: list[TopicPartition],
        batch: RequestBatch,
        strategy: ElectionStrategy | Mapping[TopicPartition, ElectionStrategy],
        outcome: ElectionOutcome,
    ) -> None:
        ctx = self.ctx
        epoch = self.controller_epoch
        shared = None if isinstance(strategy, Mapping) else strategy
        live = ctx.live_ids()
        live_all = ctx.live_or_shutting_down()
        recipients: dict[TopicPartition, list[int]] = {}

        assigned = ctx.replicas
        shared_elect = None if shared is None else elector(shared)
        shared_cs = isinstance(shared, ControlledShutdown)
        unclean: list[TopicPartition] = []
        track = enabled()

        def decide(tp: TopicPartition, current: LeaderAndIsr) -> LeaderAndIsr | str:
            replicas = assigned.get(tp, ())
            if shared_elect is not None:
                run, cs = shared_elect, shared_cs
            else:
                how = strategy[tp]  # type: ignore[index]
                run, cs = elector(how), isinstance(how, ControlledShutdown)
            chosen_from = live_all if cs else live
            election = run(replicas, current.isr, chosen_from)
            if election is None:
                return refusal(replicas, current.isr, chosen_from)
            if cs:
                recipients[tp] = [r for r in replicas if r in live_all]  # shutting down too
            if track and election.unclean:
                unclean.append(tp)
            return apply_election(current, election, epoch)

        elected = self.write_leaders(tps, decide, outcome)
        if track:
            kind = (election_kind(shared) if shared is not None else
                    {tp: election_kind(s) for tp, s in strategy.items()})  # type: ignore[union-attr]
            log_elections(self.controller_id, epoch, kind, tps,
                          {tp: outcome.elected[tp] for tp in elected}, outcome.failed, unclean)
        self._set(elected, PartitionState.ONLINE)
        record_leader_and_isr(ctx, batch, elected, recipients=recipients)

    def elect_unrecorded(
        self, tps: Iterable[TopicPartition], strategy: ElectionStrategy
    ) -> tuple[ElectionOutcome, list[TopicPartition]]:
        """Elect ``tps`` by ``strategy`` in one pass and one bulk write, as :meth:`to_online`
        does for partitions that have led before, but record nothing in a batch: the caller
        knows who must hear of it (a controlled shutdown tells the broker leaving too). A
        partition that cannot elect keeps its state; elected ones go Online.

        Returns the elections and the partitions written, in write order."""
        started = time.perf_counter()
        ctx = self.ctx
        epoch = self.controller_epoch
        candidates = self._split(tps, PartitionState.ONLINE)
        cs = isinstance(strategy, ControlledShutdown)
        live = ctx.live_or_shutting_down() if cs else ctx.live_ids()
        assigned = ctx.replicas
        run = elector(strategy)
        unclean: list[TopicPartition] = []
        track = enabled()

        def decide(tp: TopicPartition, current: LeaderAndIsr) -> LeaderAndIsr | str:
            replicas = assigned.get(tp, ())
            election = run(replicas, current.isr, live)
            if election is None:
                return refusal(replicas, current.isr, live)
            if track and election.unclean:
                unclean.append(tp)
            return apply_election(current, election, epoch)

        written_ = ElectionOutcome()
        written = self.write_leaders(candidates, decide, written_)
        elected, failed = written_.elected, written_.failed
        outcome = ElectionOutcome(elected=elected, failed={
            tp: failed.get(tp, "not written") for tp in candidates if tp not in elected})
        if track:
            log_elections(self.controller_id, epoch, election_kind(strategy), candidates,
                          elected, outcome.failed, unclean)
        self._set(written, PartitionState.ONLINE)
        if elected:
            self.stats.elections.add(time.perf_counter() - started)
        if outcome.failed:
            state_change_log.info("no leader for %d partitions, e.g. %s: %s",
                                  len(outcome.failed), *next(iter(outcome.failed.items())))
        return outcome, written

    def write_leaders(
        self,
        tps: list[TopicPartition],
        decide: Callable[[TopicPartition, LeaderAndIsr], LeaderAndIsr | str | None],
        outcome: ElectionOutcome,
    ) -> list[TopicPartition]:
        """Decide a new leader and ISR for each partition (pure ``decide``: a value to write, a
        reason for failing, or None for nothing to do), write all decisions in one fenced,
        streamed bulk write, and re-read and decide again for those whose partition epoch moved.
        The partitions ``decide`` refused are re-read once at the end, and decided again where
        their node had moved; not those it refused for want of any live replica
        (:class:`NoLiveReplica`), which no stored value can change. A whole cluster coming back
        one broker at a time finds most partitions so on the first returns: at a million
        partitions, re-reading them cost each such return seconds.

        Decisions are made a slice at a time while the slices before are being written, and a
        slice's results reach the context as soon as it is written, in order: the partitions
        first in ``tps`` get their new leaders first.

        Returns the partitions written, in order; their new values are in the context and in
        ``outcome.elected``, the failures in ``outcome.failed``.
        """
        set_leader = self.ctx.set_leader
        elected, failed = outcome.elected, outcome.failed
        refused: dict[TopicPartition, int] = {}
        rechecked = False
        pending = tps
        written: list[TopicPartition] = []
        for _ in range(MAX_WRITE_ROUNDS):
            decisions: deque[list[tuple[TopicPartition, LeaderAndIsr]]] = deque()
            retry: list[TopicPartition] = []
            slices = self._decide_slices(pending, decide, failed, decisions, refused)
            for results in self.fence.write_stream(slices):
                for (tp, v), result in zip(decisions.popleft(), results, strict=True):
                    if isinstance(result, Stat):
                        value = LeaderAndIsr(v.leader, v.leader_epoch, v.isr,
                                             v.controller_epoch, result.version)
                        set_leader(tp, value)
                        elected[tp] = value
                        written.append(tp)
                    elif isinstance(result, BadVersion):
                        retry.append(tp)
                    elif isinstance(result, CoordinatorError):
                        failed[tp] = str(result)
            if retry:
                self.refresh(retry)
            elif refused and not rechecked:
                rechecked = True
                retry = self._moved(refused, failed)
            if not retry:
                break
            pending = retry
        else:
            for tp in pending:
                failed.setdefault(tp, "partition epoch kept moving")
        return written

    def _moved(self, refused: dict[TopicPartition, int], failed: dict[TopicPartition, str]
               ) -> list[TopicPartition]:
        """Of the partitions a decision refused (at the partition epochs given), those whose
        node has moved since, re-read: decided again (their failures forgotten). A refusal
        writes nothing, so no conditional write tells that the context's value was behind the
        store (a leader's ISR change whose notification has not come yet); Kafka's
        controller reads every partition's state before it elects."""
        self.refresh(refused)
        leaders = self.ctx.leaders
        moved = [tp for tp, epoch in refused.items()
                 if (now := leaders.get(tp)) is not None and now.partition_epoch != epoch]
        for tp in moved:
            failed.pop(tp, None)
        return moved

    def _decide_slices(
        self,
        tps: list[TopicPartition],
        decide: Callable[[TopicPartition, LeaderAndIsr], LeaderAndIsr | str | None],
        failed: dict[TopicPartition, str],
        decisions: deque[list[tuple[TopicPartition, LeaderAndIsr]]],
        refused: dict[TopicPartition, int],
    ) -> Iterator[list[SetData]]:
        """The conditional writes of ``tps``' decisions, a slice at a time (each slice's
        decisions appended to ``decisions`` as its ops are yielded; failures to ``failed``,
        and those ``decide`` refused to ``refused`` with the partition epoch decided on)."""
        leaders = self.ctx.leaders
        epoch = self.controller_epoch
        path_of = layout.partition_state
        for start in range(0, len(tps), WRITE_SLICE):
            decided: list[tuple[TopicPartition, LeaderAndIsr]] = []
            ops: list[SetData] = []
            for tp in tps[start:start + WRITE_SLICE]:
                current = leaders.get(tp)
                if current is None:
                    failed[tp] = "no leader and ISR in the store"
                    continue
                if current.controller_epoch > epoch:
                    failed[tp] = f"written by a newer controller epoch {current.controller_epoch}"
                    continue
                value = decide(tp, current)
                if value is None:
                    continue
                if isinstance(value, str):
                    failed[tp] = value
                    if type(value) is not NoLiveReplica:
                        refused[tp] = current.partition_epoch
                    continue
                decided.append((tp, value))
                ops.append(SetData(path=path_of(tp.topic, tp.partition), data=encode_partition_state(value),
                                   version=current.partition_epoch))
            decisions.append(decided)
            yield ops

    def refresh(self, tps: Iterable[TopicPartition]) -> None:
        """Re-read leader and ISR of ``tps`` in one bulk read into the context. A state node
        another tool wrote malformed leaves its partition without a leader and ISR in the
        context: the election fails for it (no leader and ISR in the store), once."""
        read_partition_states(self.metadata, self.ctx, list(tps), self.skipped, drop=True)
