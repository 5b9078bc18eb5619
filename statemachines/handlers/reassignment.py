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
from typing import TYPE_CHECKING

from coordinator.codecs import TopicAssignment, TopicPartition
from coordinator.errors import BadVersion
from elections.leader import Reassign
from statemachines.context import Reassignment
from statemachines.partition_sm import ElectionOutcome, record_leader_and_isr
from statemachines.states import ReplicaState

if TYPE_CHECKING:
    from statemachines.controller import Controller

log = logging.getLogger(__name__)


def load_in_progress(ctl: Controller) -> None:
    """At failover: moves recorded in topic nodes, then requests in the admin node."""
    ctx = ctl.ctx
    for topic, a in ctx.topics.items():
        for p in set(a.adding) | set(a.removing):
            rs = a.partitions.get(p)
            if rs is None:
                continue
            adding, removing = set(a.adding.get(p, ())), set(a.removing.get(p, ()))
            tp = TopicPartition(topic=topic, partition=p)
            ctx.reassignments[tp] = Reassignment(
                target=tuple(r for r in rs if r not in removing),
                original=tuple(r for r in rs if r not in adding))
    node = ctl.metadata.reassignment()
    if node is not None:
        for tp, target in node.value.items():
            if tp not in ctx.reassignments and invalid_reason(ctl, tp, target) is None \
                    and ctx.replicas[tp] != target:
                ctx.reassignments[tp] = Reassignment(target=target, original=ctx.replicas[tp])


def resume(ctl: Controller) -> None:
    progress(ctl, sorted(ctl.ctx.reassignments))


def invalid_reason(ctl: Controller, tp: TopicPartition, target: tuple[int, ...]) -> str | None:
    ctx = ctl.ctx
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


def on_reassignment_request(ctl: Controller) -> None:
    ctx = ctl.ctx
    node = ctl.metadata.reassignment()
    if node is None:
        return
    started, dropped, unneeded = [], [], []
    for tp, target in node.value.items():
        reason = invalid_reason(ctl, tp, target)
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
        moving = Reassignment(target=target, original=original)
        if existing is not None:  # a new target (a cancel: the original): stop what it drops
            unneeded += [(tp, b) for b in existing.replicas if b not in moving.replicas]
        ctx.reassignments[tp] = moving
        started.append(tp)
    _stop_replicas(ctl, unneeded)
    progress(ctl, started)
    remove_from_request(ctl, dropped)


def _stop_replicas(ctl: Controller, keys: list[tuple[TopicPartition, int]]) -> None:
    """Kafka's U-step: replicas an earlier target added that the new one does not keep go
    Offline (ISR shrink, StopReplica) and are deleted."""
    if not keys:
        return
    rsm = ctl.replicas
    assert rsm is not None
    batch = ctl.new_batch()
    for target in (ReplicaState.OFFLINE, ReplicaState.DELETION_STARTED,
                   ReplicaState.DELETION_SUCCESSFUL, ReplicaState.NON_EXISTENT):
        keys = rsm.handle(keys, target, batch)
    ctl.send(batch)


def caught_up(ctl: Controller, tp: TopicPartition) -> bool:
    moving = ctl.ctx.reassignments.get(tp)
    value = ctl.ctx.leaders.get(tp)
    return moving is not None and value is not None and set(moving.target) <= set(value.isr)


def progress(ctl: Controller, tps: list[TopicPartition]) -> None:
    if not tps:
        return
    done = [tp for tp in tps if caught_up(ctl, tp)]
    waiting = [tp for tp in tps if not caught_up(ctl, tp)]
    if waiting:
        start_moving(ctl, waiting)
    if done:
        complete(ctl, done)


def complete_if_caught_up(ctl: Controller, tps: list[TopicPartition]) -> None:
    done = [tp for tp in tps if tp in ctl.ctx.reassignments and caught_up(ctl, tp)]
    if done:
        complete(ctl, done)


def on_brokers_started(ctl: Controller, ids: list[int]) -> None:
    back = set(ids)
    progress(ctl, sorted(tp for tp, r in ctl.ctx.reassignments.items()
                         if back.intersection(r.target)))


def start_moving(ctl: Controller, tps: list[TopicPartition]) -> None:
    """Phase A."""
    ctx, psm, rsm = ctl.ctx, ctl.partitions, ctl.replicas
    assert psm is not None and rsm is not None
    for tp in tps:
        ctx.set_replicas(tp, ctx.reassignments[tp].replicas)
    write_assignments(ctl, tps)
    batch = ctl.new_batch()
    _bump_leader_epochs(ctl, [tp for tp in tps if tp in ctx.leaders], batch)
    adding = [(tp, b) for tp in tps for b in ctx.reassignments[tp].adding]
    rsm.handle([k for k in adding if rsm.state(k) is ReplicaState.NON_EXISTENT],
               ReplicaState.NEW, batch)
    ctl.send(batch)


def complete(ctl: Controller, tps: list[TopicPartition]) -> None:
    """Phase B."""
    ctx, psm, rsm = ctl.ctx, ctl.partitions, ctl.replicas
    assert psm is not None and rsm is not None
    batch = ctl.new_batch()
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
    _bump_leader_epochs(ctl, [tp for tp in tps if tp not in elect], batch)
    finished = [tp for tp in tps if tp not in elect or tp in elected]
    removing = [(tp, b) for tp in finished for b in moves[tp].removing]
    for target in (ReplicaState.OFFLINE, ReplicaState.DELETION_STARTED,
                   ReplicaState.DELETION_SUCCESSFUL, ReplicaState.NON_EXISTENT):
        removing = rsm.handle(removing, target, batch)
    for tp in finished:
        del ctx.reassignments[tp]
    write_assignments(ctl, finished)
    ctl.send(batch)
    remove_from_request(ctl, finished)
    if finished:
        log.info("reassignment of %d partitions completed", len(finished))


def _bump_leader_epochs(ctl: Controller, tps: list[TopicPartition], batch) -> None:  # type: ignore[no-untyped-def]
    psm = ctl.partitions
    assert psm is not None
    epoch = psm.controller_epoch
    written = psm.write_leaders(
        tps, lambda tp, cur: cur._replace(leader_epoch=cur.leader_epoch + 1,
                                          controller_epoch=epoch), ElectionOutcome())
    record_leader_and_isr(ctl.ctx, batch, written)


def write_assignments(ctl: Controller, tps: list[TopicPartition]) -> None:
    """Write the topic nodes of ``tps`` as the context has them (replicas, adding, removing)."""
    ctx, fence = ctl.ctx, ctl.fence
    assert fence is not None
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
                _reread_topic(ctl, topic)
                continue
            ctx.topics[topic] = new
            ctx.topic_versions[topic] = version
            break


def _reread_topic(ctl: Controller, topic: str) -> None:
    """The topic node moved (partitions added by an admin): take them in, then write again."""
    from statemachines.handlers.topics import on_new_partitions

    current = ctl.metadata.assignments([topic]).get(topic)
    if current is None:
        return
    added = ctl.ctx.set_topic(current.value, current.version, only_new=True)
    if added:
        ctl.watch_partition_states(added)
        on_new_partitions(ctl, added)


def remove_from_request(ctl: Controller, tps: list[TopicPartition]) -> None:
    """Take finished or refused partitions out of /admin/reassign_partitions."""
    if not tps:
        return
    gone = set(tps)
    for _ in range(5):  # an admin tool may add moves to the node meanwhile: re-read and retry
        node = ctl.metadata.reassignment()
        if node is None:
            return
        remaining = {tp: t for tp, t in node.value.items() if tp not in gone}
        if len(remaining) == len(node.value):
            return
        assert ctl.fence is not None
        try:
            ctl.fence.update_reassignment(remaining, node.version)
            return
        except BadVersion:
            continue
    log.warning("could not take %d finished moves out of the reassignment node", len(gone))
