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
from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from coordinator import layout
from coordinator.codecs import PartitionState as StoredState
from coordinator.codecs import TopicPartition, sorted_partitions
from coordinator.errors import BadVersion, CoordinatorError, NodeExists
from coordinator.metadata import MetadataClient
from coordinator.model import SetData, Stat
from elections.controller_election import Fence
from elections.leader import (
    NO_LEADER,
    ControlledShutdown,
    ElectionStrategy,
    LeaderAndIsr,
    Offline,
    apply_choice,
    chooser,
)
from statemachines.context import ControllerContext
from statemachines.requests import RequestBatch, UpdateMetadataPartition
from statemachines.states import (
    PartitionState,
    ReplicaState,
    split_transitions,
    valid_previous_states,
)

__all__ = [
    "ElectionOutcome",
    "tp_key",
    "PartitionStateMachine",
    "encode_state",
    "record_leader_and_isr",
    "shrink_isr",
    "state_change_log",
    "stored",
]

state_change_log = logging.getLogger("partctl.state.change")
MAX_WRITE_ROUNDS = 5
WRITE_SLICE = 1000
"""Partitions decided per slice of a streamed leader write: the next slice is decided while
the ones before are being written."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ElectionOutcome:
    """Per partition: the leader and ISR written, or why nothing was."""

    elected: dict[TopicPartition, LeaderAndIsr] = field(default_factory=dict)
    failed: dict[TopicPartition, str] = field(default_factory=dict)


def tp_key(tp: TopicPartition) -> tuple[str, int]:
    return (tp.topic, tp.partition)


def stored(value: LeaderAndIsr) -> StoredState:
    return StoredState(leader=value.leader, leader_epoch=value.leader_epoch, isr=value.isr,
                       controller_epoch=value.controller_epoch)


def shrink_isr(current: LeaderAndIsr, leaving: Collection[int], controller_epoch: int
               ) -> LeaderAndIsr | None:
    """Leader and ISR without the ``leaving`` replicas (pure); None when nothing changes.

    A leaving leader leaves the partition leaderless. The last ISR member is kept, so the ISR
    never becomes empty and still names who has all committed records.
    """
    if current.leader not in leaving and not any(r in leaving for r in current.isr):
        return None
    isr = tuple(r for r in current.isr if r not in leaving)
    if not isr:
        isr = current.isr[:1] if len(current.isr) == 1 else isr
    leader = NO_LEADER if current.leader in leaving else current.leader
    return LeaderAndIsr(leader, current.leader_epoch + 1, isr, controller_epoch,
                        current.partition_epoch)


_ALLOWED: dict[PartitionState, tuple[PartitionState, ...]] = {
    target: tuple(valid_previous_states(target)) for target in PartitionState}
"""Each target's legal predecessors as a tuple: membership by identity, no enum hashing."""

_ISR_JSON: dict[tuple[int, ...], bytes] = {}  # an ISR's JSON list body; a few hundred distinct
_ISR_JSON_MAX = 4096


def encode_state(value: LeaderAndIsr) -> bytes:
    """The state node's bytes for ``value``: exactly ``stored(value).encode()`` (the metadata
    codec's JSON), built without the intermediate objects on the mass-election path. ISRs
    repeat across partitions, so their text is kept (a bounded cache)."""
    isr = _ISR_JSON.get(value.isr)
    if isr is None:
        if len(_ISR_JSON) >= _ISR_JSON_MAX:
            _ISR_JSON.clear()
        isr = _ISR_JSON[value.isr] = ",".join(map(str, value.isr)).encode()
    return b'{"version":1,"leader":%d,"leader_epoch":%d,"controller_epoch":%d,"isr":[%s]}' % (
        value.leader, value.leader_epoch, value.controller_epoch, isr)


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
    ) -> None:
        self.ctx = ctx
        self.fence = fence
        self.metadata = metadata
        self.unclean = unclean

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
        state kept). One pass with identity tests when all may move, the common case: the
        general split (pairs built, an enum's ``__hash__`` in Python per set lookup) took about
        5 ms for 10,000, this about 2.5 ms."""
        states, absent = self.ctx.partition_states, PartitionState.NON_EXISTENT
        members = tps if type(tps) is list else list(tps)
        allowed = _ALLOWED[target]
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
        states = self.ctx.partition_states
        waiting = self.ctx.leaderless
        if target is PartitionState.NON_EXISTENT:
            for tp in tps:
                states.pop(tp, None)
                waiting.discard(tp)
            return
        members = tps if type(tps) is list else list(tps)
        states.update(dict.fromkeys(members, target))
        if target is PartitionState.ONLINE:
            waiting.difference_update(members)
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
            self._elect(others, batch, strategy or Offline(unclean=self.unclean), outcome)
        if outcome.failed:
            state_change_log.info("no leader for %d partitions, e.g. %s: %s",
                                  len(outcome.failed), *next(iter(outcome.failed.items())))
        return outcome

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
                outcome.failed[tp] = "no live replica to lead a new partition"
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
                self._elect(offline, batch, Offline(unclean=self.unclean), outcome)

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
        shared_elect = None if shared is None else chooser(shared)
        shared_cs = isinstance(shared, ControlledShutdown)

        def decide(tp: TopicPartition, current: LeaderAndIsr) -> LeaderAndIsr | str:
            replicas = assigned.get(tp, ())
            if shared_elect is not None:
                run, cs = shared_elect, shared_cs
            else:
                how = strategy[tp]  # type: ignore[index]
                run, cs = chooser(how), isinstance(how, ControlledShutdown)
            choice = run(replicas, current.isr, live_all if cs else live)
            if choice is None:
                return f"no eligible leader among {replicas} (isr {current.isr})"
            if cs:
                recipients[tp] = [r for r in replicas if r in live_all]  # shutting down too
            return apply_choice(current, choice, epoch)

        elected = self.write_leaders(tps, decide, outcome)
        self._set(elected, PartitionState.ONLINE)
        record_leader_and_isr(ctx, batch, elected, recipients=recipients)

    def elect_and_shrink(
        self,
        led: Iterable[TopicPartition],
        strategy: ElectionStrategy,
        leaving: Mapping[TopicPartition, Collection[int]],
        *,
        shrink_unelected: bool = False,
    ) -> tuple[ElectionOutcome, list[TopicPartition], set[TopicPartition]]:
        """Elect ``led`` by ``strategy`` and take ``leaving`` replicas out of the ISR of the
        other partitions (their replicas going Offline), in one pass and one bulk write: each
        partition is written once, the elections first. A partition of ``led`` that cannot
        elect keeps its state, or with ``shrink_unelected`` has its ``leaving`` replicas (a
        dead leader among them) written out of leader and ISR.

        Elected partitions go Online; nothing is recorded in a batch (the caller knows who
        must hear of it). Returns the elections, every partition written (in write order) and
        the other partitions whose ISR could not be written.
        """
        ctx = self.ctx
        epoch = self.controller_epoch
        candidates = self._split(led, PartitionState.ONLINE)
        led_set = set(candidates)
        followers = [tp for tp in leaving if tp not in led_set]
        cs = isinstance(strategy, ControlledShutdown)
        live = ctx.live_or_shutting_down() if cs else ctx.live_ids()
        assigned = ctx.replicas
        empty: frozenset[int] = frozenset()
        reasons: dict[TopicPartition, str] = {}

        run = chooser(strategy)

        def decide(tp: TopicPartition, current: LeaderAndIsr) -> LeaderAndIsr | str | None:
            if tp in led_set:
                replicas = assigned.get(tp, ())
                choice = run(replicas, current.isr, live)
                if choice is not None:
                    reasons.pop(tp, None)
                    return apply_choice(current, choice, epoch)
                reasons[tp] = f"no eligible leader among {replicas} (isr {current.isr})"
                if not shrink_unelected:
                    return reasons[tp]
            return shrink_isr(current, leaving.get(tp, empty), epoch)

        combined = ElectionOutcome()
        written = self.write_leaders(candidates + followers, decide, combined)
        outcome = ElectionOutcome()
        for tp in written:
            if tp in led_set and tp not in reasons:
                outcome.elected[tp] = combined.elected[tp]
        for tp in candidates:
            if tp not in outcome.elected:
                outcome.failed[tp] = combined.failed.get(tp) or reasons.get(tp, "not written")
        self._set(list(outcome.elected), PartitionState.ONLINE)
        if outcome.failed:
            state_change_log.info("no leader for %d partitions, e.g. %s: %s",
                                  len(outcome.failed), *next(iter(outcome.failed.items())))
        return outcome, written, {tp for tp in combined.failed if tp not in led_set}

    def write_leaders(
        self,
        tps: list[TopicPartition],
        decide: Callable[[TopicPartition, LeaderAndIsr], LeaderAndIsr | str | None],
        outcome: ElectionOutcome,
    ) -> list[TopicPartition]:
        """Decide a new leader and ISR for each partition (pure ``decide``: a value to write, a
        reason for failing, or None for nothing to do), write all decisions in one fenced,
        streamed bulk write, and re-read and decide again for those whose partition epoch moved.

        Decisions are made a slice at a time while the slices before are being written, and a
        slice's results reach the context as soon as it is written, in order: the partitions
        first in ``tps`` get their new leaders first.

        Returns the partitions written, in order; their new values are in the context and in
        ``outcome.elected``, the failures in ``outcome.failed``.
        """
        set_leader = self.ctx.set_leader
        elected, failed = outcome.elected, outcome.failed
        pending = tps
        written: list[TopicPartition] = []
        for _ in range(MAX_WRITE_ROUNDS):
            decisions: deque[list[tuple[TopicPartition, LeaderAndIsr]]] = deque()
            retry: list[TopicPartition] = []
            slices = self._decide_slices(pending, decide, failed, decisions)
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
            if not retry:
                break
            self.refresh(retry)
            pending = retry
        else:
            for tp in pending:
                failed.setdefault(tp, "partition epoch kept moving")
        return written

    def _decide_slices(
        self,
        tps: list[TopicPartition],
        decide: Callable[[TopicPartition, LeaderAndIsr], LeaderAndIsr | str | None],
        failed: dict[TopicPartition, str],
        decisions: deque[list[tuple[TopicPartition, LeaderAndIsr]]],
    ) -> Iterator[list[SetData]]:
        """The conditional writes of ``tps``' decisions, a slice at a time (each slice's
        decisions appended to ``decisions`` as its ops are yielded; failures to ``failed``)."""
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
                    continue
                decided.append((tp, value))
                ops.append(SetData(path=path_of(tp.topic, tp.partition), data=encode_state(value),
                                   version=current.partition_epoch))
            decisions.append(decided)
            yield ops

    def refresh(self, tps: Iterable[TopicPartition]) -> None:
        """Re-read leader and ISR of ``tps`` in one bulk read into the context."""
        from statemachines.controller import read_partition_states

        read_partition_states(self.metadata, self.ctx, list(tps))

    def offline_leaderless(self, tps: Iterable[TopicPartition]) -> list[TopicPartition]:
        """Of ``tps``, those whose leader is gone or none: to take Offline then Online."""
        ctx = self.ctx
        out = []
        for tp in tps:
            value = ctx.leaders.get(tp)
            if value is None or value.leader == NO_LEADER or value.leader not in ctx.brokers:
                out.append(tp)
        return out
