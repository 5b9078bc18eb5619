"""AlterPartition (KIP-497): a partition leader asks the controller to change its ISR, as Kafka's
brokers do from ``inter.broker.protocol.version`` 2.7 on instead of writing the state node
themselves. Kafka 3.9's ZooKeeper-mode controller (``processAlterPartition``) is the model:

- the request is refused whole with STALE_BROKER_EPOCH when its broker is not registered or
  its broker epoch is not the registration's;
- each proposal is decided against the controller's leader and ISR (:func:`decide`, pure):
  a partition it does not know is UNKNOWN_TOPIC_OR_PARTITION (a topic id it does not know,
  UNKNOWN_TOPIC_ID); a leader or partition epoch newer than its own is NOT_CONTROLLER (the
  leader may have heard of a newer controller); an older leader epoch FENCED_LEADER_EPOCH; a
  proposal equal to what is stored (but for a stale partition epoch) is answered with what
  is stored, unwritten, so that a retry is idempotent; an older partition epoch is
  INVALID_UPDATE_VERSION; an ISR naming a broker that is not live (or shutting down) is
  INELIGIBLE_REPLICA (OPERATION_NOT_ATTEMPTED before version 2), KIP-841's rule;
- the rest are written in one fenced bulk write (the controller epoch checked), conditional on
  the partition epoch; a write that finds the node moved is INVALID_UPDATE_VERSION;
- every broker gets UpdateMetadata for the proposed partitions, reassignments that caught up
  complete, and each proposal is answered with the leader, ISR and new partition epoch.

Where Kafka's ZooKeeper-mode controller checks nothing, this one refuses, as Kafka's KRaft
controller does, with INVALID_REQUEST: a proposal from a broker that is not the partition's
leader, an ISR that is empty, repeats a broker, leaves the leader out or names a broker outside
the assignment, and a leader recovery state other than RECOVERED (the partition state nodes
keep no recovery state here, so a RECOVERING leader is never one this controller elected).
"""

from __future__ import annotations

import logging

from coordinator.codecs import TopicPartition
from elections.leader import LeaderAndIsr
from interbroker.errors import ErrorCode, StaleBrokerEpoch
from interbroker.fencing import log_fenced
from interbroker.requests import AlterPartitionResult, IsrProposal, UpdateMetadataPartition
from statemachines import events as ev
from statemachines.handlers import reassignment
from statemachines.partition_sm import ElectionOutcome
from statemachines.services import ControllerServices

__all__ = ["decide", "on_alter_partition"]

log = logging.getLogger(__name__)

RECOVERED = 0


def decide(broker_id: int, proposal: IsrProposal, current: LeaderAndIsr | None,
           replicas: tuple[int, ...], eligible: frozenset[int], controller_epoch: int,
           version: int = 3) -> LeaderAndIsr | ErrorCode:
    """What to do with one proposal (pure): the value to write, the ``current`` value itself
    (nothing to write: it is what was proposed), or Kafka's error code."""
    if current is None or not replicas:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if (proposal.partition_epoch > current.partition_epoch
            or proposal.leader_epoch > current.leader_epoch):
        return ErrorCode.NOT_CONTROLLER
    if proposal.leader_epoch < current.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    isr = proposal.new_isr
    if (broker_id != current.leader or not isr or len(set(isr)) != len(isr)
            or broker_id not in isr or any(r not in replicas for r in isr)):
        return ErrorCode.INVALID_REQUEST
    if isr == current.isr and proposal.leader_recovery_state == RECOVERED:
        return current
    if proposal.partition_epoch < current.partition_epoch:
        return ErrorCode.INVALID_UPDATE_VERSION
    if proposal.leader_recovery_state != RECOVERED:
        return ErrorCode.INVALID_REQUEST
    if any(r not in eligible for r in isr):
        return (ErrorCode.INELIGIBLE_REPLICA if version > 1
                else ErrorCode.OPERATION_NOT_ATTEMPTED)
    return LeaderAndIsr(current.leader, current.leader_epoch, isr, controller_epoch,
                        current.partition_epoch)


def on_alter_partition(svc: ControllerServices, event: ev.AlterPartitionRequested) -> None:
    ctx, version = svc.ctx, event.version
    b = event.broker_id
    registered = ctx.brokers.get(b)
    if registered is None or registered.epoch != event.broker_epoch:
        current = registered.epoch if registered is not None else -1
        log_fenced("controller", svc.broker_id, f"AlterPartition of broker {b}",
                   "stale broker epoch", given=event.broker_epoch, current=current)
        event.reply.set_exception(StaleBrokerEpoch(b, event.broker_epoch, current))
        return
    names = ({a.topic_id: t for t, a in ctx.topics.items() if a.topic_id is not None}
             if version >= 2 else None)
    eligible = ctx.live_ids()
    epoch = svc.epoch
    results: dict[int, AlterPartitionResult] = {}
    proposed: dict[TopicPartition, int] = {}
    for i, proposal in enumerate(event.proposals):
        topic = names.get(proposal.topic) if names is not None else proposal.topic
        if topic is None:
            results[i] = AlterPartitionResult(proposal=proposal, error=ErrorCode.UNKNOWN_TOPIC_ID)
            continue
        tp = TopicPartition(topic, proposal.partition)
        if tp in proposed:  # the same partition twice: the first one counts
            results[i] = AlterPartitionResult(proposal=proposal, error=ErrorCode.INVALID_REQUEST)
            continue
        decided = decide(b, proposal, ctx.leaders.get(tp), ctx.replicas.get(tp, ()),
                         eligible, epoch, version)
        if isinstance(decided, ErrorCode):
            results[i] = AlterPartitionResult(proposal=proposal, error=decided)
        elif decided is ctx.leaders.get(tp):
            results[i] = AlterPartitionResult(proposal=proposal, state=decided)
        else:
            proposed[tp] = i
    if proposed:
        by_tp = {tp: event.proposals[i] for tp, i in proposed.items()}

        refused: dict[TopicPartition, ErrorCode] = {}

        def again(tp: TopicPartition, current: LeaderAndIsr) -> LeaderAndIsr | str | None:
            # the first round decides as above; after a conflicting write, against what the
            # store holds now (a newer partition epoch: INVALID_UPDATE_VERSION, as Kafka's
            # answer to a bad version, unless it holds the proposal already)
            decided = decide(b, by_tp[tp], current, ctx.replicas.get(tp, ()), eligible, epoch,
                             version)
            if isinstance(decided, ErrorCode):
                refused[tp] = decided
                return decided.name
            return None if decided is current else decided

        outcome = ElectionOutcome()
        svc.partitions.write_leaders(list(proposed), again, outcome)
        for tp, i in proposed.items():
            proposal = event.proposals[i]
            if tp in outcome.elected:
                results[i] = AlterPartitionResult(proposal=proposal, state=outcome.elected[tp])
            elif tp in outcome.failed:
                why = outcome.failed[tp]
                error = refused.get(tp) or (
                    ErrorCode.NOT_CONTROLLER if "newer controller epoch" in why else
                    ErrorCode.INVALID_UPDATE_VERSION if "epoch kept moving" in why else
                    ErrorCode.UNKNOWN_SERVER_ERROR)
                if error == ErrorCode.UNKNOWN_SERVER_ERROR:
                    log.warning("AlterPartition of %s from broker %d failed: %s", tp, b, why)
                results[i] = AlterPartitionResult(proposal=proposal, error=error)
            else:  # found as proposed on a second read
                results[i] = AlterPartitionResult(proposal=proposal, state=ctx.leaders.get(tp))
        if outcome.elected:
            log.info("AlterPartition from broker %d: ISR of %d partition(s) changed, e.g. %s",
                     b, len(outcome.elected), next(iter(outcome.elected.items())))
    known = [TopicPartition(names.get(p.topic, "") if names is not None else p.topic,
                            p.partition) for p in event.proposals]
    tps = [tp for tp in dict.fromkeys(known) if tp in ctx.leaders and tp in ctx.replicas]
    if tps:
        live = ctx.brokers
        batch = svc.new_batch()
        batch.add_update_metadata(None, [
            UpdateMetadataPartition.of(tp, ctx.leaders[tp], ctx.replicas[tp],
                                       [r for r in ctx.replicas[tp] if r not in live])
            for tp in tps])
        svc.send(batch)
    if not event.reply.done():
        event.reply.set_result(tuple(results[i] for i in range(len(event.proposals))))
    written = [tp for tp, i in proposed.items() if results[i].error is None]
    if written:
        reassignment.complete_if_caught_up(svc, written)
