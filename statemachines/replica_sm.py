"""The replica state machine (Kafka's ReplicaStateMachine): New, Online, Offline, the three
deletion states and NonExistent, for one replica = one partition on one broker.

Like the partition machine: split each batch against the legal-predecessor table, refuse and log
the illegal members, act on the rest, record broker requests in the caller's batch. Taking
replicas Offline shrinks their partitions' ISRs in one fenced bulk write (with re-read and retry
for moved partition epochs), one replica after another as Kafka does: never to an empty ISR.
"""

from __future__ import annotations

from collections.abc import Iterable

from coordinator.codecs import TopicPartition
from interbroker.requests import EPOCH_DURING_DELETE, NO_EPOCH, RequestBatch
from statemachines.context import ControllerContext, ReplicaKey
from statemachines.partition_sm import (
    ElectionOutcome,
    PartitionStateMachine,
    record_leader_and_isr,
    shrink_isr,
)
from statemachines.state_change import (
    DEBUG,
    enabled,
    log_isr_changes,
    log_replica_transitions,
    state_change_log,
)
from statemachines.states import ReplicaState, previous_states, split_transitions

__all__ = ["ReplicaStateMachine", "shrink_isr"]


class ReplicaStateMachine:
    def __init__(self, ctx: ControllerContext, partitions: PartitionStateMachine) -> None:
        self.ctx = ctx
        self.partitions = partitions

    def initialize(self) -> None:
        """Derive every replica's state from the view (at failover): Online on a live broker,
        else Offline (Ineligible if its topic is being deleted). Nothing is stored but the
        Ineligible replicas, which must stay so when their broker returns (until deletion
        resumes); the others are derived on demand (see ReplicaStates)."""
        ctx = self.ctx
        live = ctx.brokers
        ineligible = ReplicaState.DELETION_INELIGIBLE
        explicit = {}
        for topic in ctx.deleting:
            for tp in ctx.partitions_of(topic):
                for b in ctx.replicas.get(tp, ()):
                    if b not in live:
                        explicit[(tp, b)] = ineligible
        ctx.replica_states.start_tracking(explicit)

    def state(self, key: ReplicaKey) -> ReplicaState:
        state = self.ctx.replica_states.get(key)
        return ReplicaState.NON_EXISTENT if state is None else state

    def handle(
        self, keys: Iterable[ReplicaKey], target: ReplicaState, batch: RequestBatch, *,
        derived_was: ReplicaState | None = None, tell: bool = True, live_hosts: bool = False,
    ) -> list[ReplicaKey]:
        """Move ``keys`` to ``target``; returns the replicas that moved.

        ``tell`` false, for New and Online: the brokers are not sent the LeaderAndIsr the move
        calls for; the caller sends it (:meth:`send_leader_and_isr`) or an election does.

        ``derived_was``, for the state-change log only: the state that a replica with no
        stored state was in before the event being handled, its state being derived from the
        live brokers: Online for a broker's loss (it reads Offline as soon as the broker is
        gone), Offline for its return (it reads Online as soon as the broker is back).

        ``live_hosts``: the caller vouches that each key's broker is live and in its
        partition's assignment (a returning broker's hosted partitions), so that the rule gives
        each Online (:meth:`ReplicaStates.states_of`). With nothing stored, no key is looked
        at: a whole cluster's return moves three million replicas Online, and deriving each
        one's state, to find it Online, was a sixth of the controller's time in it."""
        members = keys if type(keys) is list else list(keys)
        replica_states = self.ctx.replica_states
        allowed = previous_states(target)
        track = enabled(DEBUG)
        if (live_hosts and not track and not replica_states.explicit()
                and ReplicaState.ONLINE in allowed):
            return self._apply(members, target, batch, tell, live_hosts) if members else []
        states = replica_states.states_of(members, live_hosts=live_hosts)
        valid = [k for k, state in zip(members, states, strict=True) if state in allowed]
        # (pairs and a split only when one is refused or the log wants them: three million
        # replicas go Online when a whole cluster comes back)
        if len(valid) < len(members) or track:
            pairs = list(zip(members, states, strict=True))
            split = split_transitions(pairs, target)
            if split.invalid:
                state_change_log.warning("refused %d replica transitions to %s, e.g. %s",
                                         len(split.invalid), target, split.invalid[0])
            valid = list(split.valid)
        if not valid:
            return []
        if track:
            before = dict(pairs)
            if derived_was is not None:
                stored = self.ctx.replica_states.explicit()
                before.update((k, derived_was) for k in valid if k not in stored)
        moved = self._apply(valid, target, batch, tell, live_hosts)
        if track:
            log_replica_transitions(self.partitions.controller_id,
                                    self.partitions.controller_epoch,
                                    [(k, before[k]) for k in moved], target)
        return moved

    def store_derived(self, keys: list[ReplicaKey], state: ReplicaState, *,
                      was: ReplicaState) -> None:
        """Store ``state`` for ``keys``, which read it by derivation only (nothing stored for
        them), where it must outlast what it is derived from: a replica of a topic being
        deleted reads Ineligible while its broker is down, and stays so when the broker
        returns, until deletion resumes. The state-change log shows each as moved from
        ``was``, the state the rule gave before (Offline, before its topic's deletion)."""
        if not keys:
            return
        self.ctx.replica_states.set_all(keys, state)
        if enabled(DEBUG):
            log_replica_transitions(self.partitions.controller_id,
                                    self.partitions.controller_epoch,
                                    [(k, was) for k in keys], state)

    def _apply(self, valid: list[ReplicaKey], target: ReplicaState, batch: RequestBatch,
               tell: bool, live_hosts: bool = False) -> list[ReplicaKey]:
        ctx = self.ctx
        states = ctx.replica_states
        match target:
            case ReplicaState.NEW | ReplicaState.ONLINE:
                if tell:
                    self.send_leader_and_isr(valid, batch)
            case ReplicaState.OFFLINE:
                valid = self._take_offline(valid, batch)
            case ReplicaState.DELETION_STARTED:
                for tp, b in valid:
                    batch.add_stop_replica([b], tp, delete=True,
                                           leader_epoch=self._delete_epoch(tp))
            case ReplicaState.NON_EXISTENT:
                for tp, b in valid:
                    replicas = ctx.replicas.get(tp)
                    if replicas is not None and b in replicas:
                        ctx.set_replicas(tp, [r for r in replicas if r != b])
                    states.pop((tp, b), None)
                return valid
        states.set_all(valid, target, live_hosts=live_hosts)
        return valid

    def _delete_epoch(self, tp: TopicPartition) -> int:
        """The leader epoch a deleting StopReplica carries, as Kafka's controller sets it:
        EPOCH_DURING_DELETE only when the topic itself is being deleted (which tells a tiered
        replica to delete the remote data too), else the partition's current leader epoch (a
        replica leaving by reassignment: the data stays for the replicas that remain)."""
        if self.ctx.is_deleting(tp):
            return EPOCH_DURING_DELETE
        current = self.ctx.leaders.get(tp)
        return current.leader_epoch if current is not None else NO_EPOCH

    def send_leader_and_isr(self, keys: list[ReplicaKey], batch: RequestBatch) -> None:
        """Each replica of ``keys`` on a live broker is sent its partition's leader and ISR
        (none for a partition that has none yet), and every live broker the metadata."""
        ctx = self.ctx
        by_tp: dict[TopicPartition, list[int]] = {}
        for tp, b in keys:
            if tp in ctx.leaders and b in ctx.brokers:
                by_tp.setdefault(tp, []).append(b)
        if by_tp:
            record_leader_and_isr(ctx, batch, list(by_tp), recipients=by_tp)

    def _take_offline(self, keys: list[ReplicaKey], batch: RequestBatch) -> list[ReplicaKey]:
        ctx = self.ctx
        leaving: dict[TopicPartition, list[int]] = {}  # in the order given: see shrink_isr
        for tp, b in keys:
            if b in ctx.brokers:
                batch.add_stop_replica([b], tp, delete=False)
            leaving.setdefault(tp, []).append(b)
        with_leader = [tp for tp in leaving if tp in ctx.leaders and not ctx.is_deleting(tp)]
        epoch = self.partitions.controller_epoch
        outcome = ElectionOutcome()
        written = self.partitions.write_leaders(
            with_leader, lambda tp, cur: shrink_isr(cur, leaving[tp], epoch), outcome)
        if written and enabled():
            log_isr_changes(self.partitions.controller_id, epoch, "replicas offline", written,
                            ctx.leaders)
        recipients = {tp: [r for r in ctx.replicas.get(tp, ())
                           if r not in leaving[tp] and ctx.replica_online(tp, r)]
                      for tp in written}
        record_leader_and_isr(ctx, batch, written, recipients=recipients)
        if outcome.failed:
            state_change_log.warning("could not shrink the ISR of %d partitions, e.g. %s: %s",
                                     len(outcome.failed), *next(iter(outcome.failed.items())))
            return [k for k in keys if k[0] not in outcome.failed]
        return keys
