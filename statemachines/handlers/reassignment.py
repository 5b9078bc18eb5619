"""Partition reassignment, Kafka's procedure (KIP-455 as run over ZooKeeper).

With RS = target + original, AR = target - original, RR = original - target:

Phase A, while the ISR does not cover the target:
  A1. write the topic node with RS as replicas and AR/RR as adding/removing;
  A2. bump the leader epoch and send LeaderAndIsr with RS to every replica;
  A3. AR replicas to New (LeaderAndIsr to them: they start fetching).
Phase B, once the ISR covers the target (seen in an ISR change):
  B1. AR replicas to Online;  B2. replicas = target in the context;
  B3. a Reassign election if the leader is not in the target or not live, else an epoch bump;
  B4-B6. RR replicas Offline (ISR shrink, StopReplica), DeletionStarted, DeletionSuccessful,
  NonExistent;  B7. the topic node gets replicas = target and no adding/removing;
  B8. the partition leaves /admin/reassign_partitions (deleted when empty);  B9. metadata out.

A target broker that is offline simply keeps the ISR short: phase A waits, and the broker's
return sends it its LeaderAndIsr. A new controller finds moves in progress in the topic nodes
(adding/removing) and in the admin node, and resumes them.
"""

from __future__ import annotations

import logging

from coordinator.codecs import TopicAssignment, TopicPartition
from coordinator.errors import BadVersion
from elections.leader import Reassign
from interbroker.requests import RequestBatch
from statemachines.context import OngoingReassignment
from statemachines.handlers import topics
from statemachines.partition_sm import ElectionOutcome, record_leader_and_isr
from statemachines.services import ControllerServices
from statemachines.state_change import enabled, log_isr_changes
from statemachines.states import ReplicaState

log = logging.getLogger(__name__)


def load_in_progress(svc: ControllerServices) -> list[TopicPartition]:
    """At failover: moves recorded in topic nodes, then requests in the admin node. Returns the
    requests to take out of the admin node: those already done (a controller that wrote the
    final assignment and died before it removed the request) and those that are not valid;
    :func:`resume` removes them, as Kafka's controller does at failover. (A standby ignores the
    node's changes, so nothing else would: the request would stay for good.)"""
    ctx = svc.ctx
    stale: list[TopicPartition] = []
    for topic, a in ctx.topics.items():
        for p in set(a.adding) | set(a.removing):
            rs = a.partitions.get(p)
            if rs is None:
                continue
            adding, removing = set(a.adding.get(p, ())), set(a.removing.get(p, ()))
            tp = TopicPartition(topic=topic, partition=p)
            ctx.reassignments[tp] = OngoingReassignment(
                target=tuple(r for r in rs if r not in removing),
                original=tuple(r for r in rs if r not in adding))
    node = svc.metadata.reassignment()
    if node is not None:
        for tp, target in node.value.items():
            if tp in ctx.reassignments:
                continue
            reason = invalid_reason(svc, tp, target)
            if reason is not None:
                log.warning("reassignment of %s to %s refused: %s", tp, target, reason)
                stale.append(tp)
            elif ctx.replicas[tp] == target:
                stale.append(tp)
            else:
                ctx.reassignments[tp] = OngoingReassignment(target=target,
                                                            original=ctx.replicas[tp])
    return stale


def resume(svc: ControllerServices, stale: list[TopicPartition]) -> None:
    """At failover: drop the ``stale`` requests, carry on with every move in progress."""
    remove_from_request(svc, stale)
    progress(svc, sorted(svc.ctx.reassignments))


def invalid_reason(svc: ControllerServices, tp: TopicPartition, target: tuple[int, ...]) -> str | None:
    ctx = svc.ctx
    if tp not in ctx.replicas:
        return "unknown partition"
    if ctx.is_deleting(tp):
        return "its topic is being deleted"
    if not target:
        return "empty target"
    if len(set(target)) != len(target):
        return f"duplicate replicas in {target}"
    if any(b < 0 for b in target):
        return f"negative broker id in {target}"
    return None


def on_reassignment_request(svc: ControllerServices) -> None:
    ctx = svc.ctx
    node = svc.metadata.reassignment()
    if node is None:
        return
    started, dropped, unneeded = [], [], []
    for tp, target in node.value.items():
        reason = invalid_reason(svc, tp, target)
        if reason is not None:
            log.warning("reassignment of %s to %s refused: %s", tp, target, reason)
            dropped.append(tp)
            continue
        existing = ctx.reassignments.get(tp)
        if existing is not None and existing.target == target:
            continue
        if existing is None and ctx.replicas[tp] == target:
            dropped.append(tp)
            continue
        original = existing.original if existing is not None else ctx.replicas[tp]
        moving = OngoingReassignment(target=target, original=original)
        if existing is not None:  # a new target (a cancel: the original): stop what it drops
            unneeded += [(tp, b) for b in existing.replicas if b not in moving.replicas]
        ctx.reassignments[tp] = moving
        started.append(tp)
    _stop_replicas(svc, unneeded)
    progress(svc, started)
    remove_from_request(svc, dropped)


def _stop_replicas(svc: ControllerServices, keys: list[tuple[TopicPartition, int]]) -> None:
    """Kafka's U-step: replicas an earlier target added that the new one does not keep go
    Offline (ISR shrink, StopReplica) and are deleted."""
    if not keys:
        return
    rsm = svc.replicas
    batch = svc.new_batch()
    for target in (ReplicaState.OFFLINE, ReplicaState.DELETION_STARTED,
                   ReplicaState.DELETION_SUCCESSFUL, ReplicaState.NON_EXISTENT):
        keys = rsm.handle(keys, target, batch)
    svc.send(batch)


def caught_up(svc: ControllerServices, tp: TopicPartition) -> bool:
    moving = svc.ctx.reassignments.get(tp)
    value = svc.ctx.leaders.get(tp)
    return moving is not None and value is not None and set(moving.target) <= set(value.isr)


def progress(svc: ControllerServices, tps: list[TopicPartition]) -> None:
    if not tps:
        return
    done = [tp for tp in tps if caught_up(svc, tp)]
    waiting = [tp for tp in tps if not caught_up(svc, tp)]
    if waiting:
        start_moving(svc, waiting)
    if done:
        complete(svc, done)


def complete_if_caught_up(svc: ControllerServices, tps: list[TopicPartition]) -> None:
    done = [tp for tp in tps if tp in svc.ctx.reassignments and caught_up(svc, tp)]
    if done:
        complete(svc, done)


def on_brokers_started(svc: ControllerServices, ids: list[int]) -> None:
    back = set(ids)
    progress(svc, sorted(tp for tp, r in svc.ctx.reassignments.items()
                         if back.intersection(r.target)))


def start_moving(svc: ControllerServices, tps: list[TopicPartition]) -> None:
    """Phase A."""
    ctx, rsm = svc.ctx, svc.replicas
    for tp in tps:
        ctx.set_replicas(tp, ctx.reassignments[tp].replicas)
    write_assignments(svc, tps)
    batch = svc.new_batch()
    _bump_leader_epochs(svc, [tp for tp in tps if tp in ctx.leaders], batch)
    adding = [(tp, b) for tp in tps for b in ctx.reassignments[tp].adding]
    rsm.handle([k for k in adding if rsm.state(k) is ReplicaState.NON_EXISTENT],
               ReplicaState.NEW, batch)
    svc.send(batch)


def complete(svc: ControllerServices, tps: list[TopicPartition]) -> None:
    """Phase B."""
    ctx, psm, rsm = svc.ctx, svc.partitions, svc.replicas
    batch = svc.new_batch()
    moves = {tp: ctx.reassignments[tp] for tp in tps}
    rsm.handle([(tp, b) for tp, r in moves.items() for b in r.adding], ReplicaState.ONLINE,
               batch)
    for tp, r in moves.items():
        ctx.set_replicas(tp, r.target)
    live = ctx.live_ids()
    elect = [tp for tp in tps if ctx.leaders[tp].leader not in moves[tp].target
             or ctx.leaders[tp].leader not in live]
    outcome = psm.to_online(elect, batch, {tp: Reassign(target=moves[tp].target) for tp in elect})
    for tp in outcome.failed:  # stays in phase A until a target replica can lead
        ctx.set_replicas(tp, moves[tp].replicas)
    elected = set(outcome.elected)
    _bump_leader_epochs(svc, [tp for tp in tps if tp not in elect], batch)
    finished = [tp for tp in tps if tp not in elect or tp in elected]
    removing = [(tp, b) for tp in finished for b in moves[tp].removing]
    for target in (ReplicaState.OFFLINE, ReplicaState.DELETION_STARTED,
                   ReplicaState.DELETION_SUCCESSFUL, ReplicaState.NON_EXISTENT):
        removing = rsm.handle(removing, target, batch)
    for tp in finished:
        del ctx.reassignments[tp]
    write_assignments(svc, finished)
    svc.send(batch)
    remove_from_request(svc, finished)
    if finished:
        log.info("reassignment of %d partitions completed", len(finished))


def _bump_leader_epochs(svc: ControllerServices, tps: list[TopicPartition], batch: RequestBatch
                        ) -> None:
    psm = svc.partitions
    epoch = psm.controller_epoch
    written = psm.write_leaders(
        tps, lambda tp, cur: cur._replace(leader_epoch=cur.leader_epoch + 1,
                                          controller_epoch=epoch), ElectionOutcome())
    if written and enabled():
        log_isr_changes(psm.controller_id, epoch, "reassignment: leader epoch bumped", written,
                        svc.ctx.leaders)
    record_leader_and_isr(svc.ctx, batch, written)


def write_assignments(svc: ControllerServices, tps: list[TopicPartition]) -> None:
    """Write the topic nodes of ``tps`` as the context has them (replicas, adding, removing)."""
    ctx, fence = svc.ctx, svc.fence
    by_topic: dict[str, list[TopicPartition]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp)
    for topic, members in by_topic.items():
        for _ in range(3):
            a = ctx.topics[topic]
            partitions, adding, removing = dict(a.partitions), dict(a.adding), dict(a.removing)
            for tp in members:
                moving = ctx.reassignments.get(tp)
                partitions[tp.partition] = ctx.replicas[tp]
                for field_, value in ((adding, moving.adding if moving else ()),
                                      (removing, moving.removing if moving else ())):
                    if value:
                        field_[tp.partition] = value
                    else:
                        field_.pop(tp.partition, None)
            new = TopicAssignment(topic=topic, partitions=partitions, topic_id=a.topic_id,
                                  adding=adding, removing=removing, extra=a.extra)
            try:
                version = fence.set_assignment(new, ctx.topic_versions[topic])
            except BadVersion:
                _reread_topic(svc, topic)
                continue
            ctx.topics[topic] = new
            ctx.topic_versions[topic] = version
            break


def _reread_topic(svc: ControllerServices, topic: str) -> None:
    """The topic node moved (partitions added by an admin): take them in, then write again.
    (Their states are the active controller's to write: nothing to follow.)"""
    current = svc.metadata.assignments([topic]).get(topic)
    if current is None:
        return
    added = svc.ctx.set_topic(current.value, current.version, only_new=True)
    if added:
        topics.on_new_partitions(svc, added)


def remove_from_request(svc: ControllerServices, tps: list[TopicPartition]) -> None:
    """Take finished or refused partitions out of /admin/reassign_partitions."""
    if not tps:
        return
    gone = set(tps)
    for _ in range(5):  # an admin tool may add moves to the node meanwhile: re-read and retry
        node = svc.metadata.reassignment()
        if node is None:
            return
        remaining = {tp: t for tp, t in node.value.items() if tp not in gone}
        if len(remaining) == len(node.value):
            return
        try:
            svc.fence.update_reassignment(remaining, node.version)
            return
        except BadVersion:
            continue
    log.warning("could not take %d finished moves out of the reassignment node", len(gone))
