"""Leader elections an admin asks for (the ElectLeaders API): Kafka 3.9's
``processReplicaLeaderElection`` for an AdminClientTriggered election, PREFERRED or UNCLEAN.

Unlike a preferred election requested through ``/admin/preferred_replica_election`` (one
answer for the whole request: the node is deleted once processed), the API wants a result per
partition, so Kafka's controller takes it as an event and answers each partition: one that does
not exist is UNKNOWN_TOPIC_OR_PARTITION; one whose topic is being deleted INVALID_TOPIC_EXCEPTION;
one that needs no election ELECTION_NOT_NEEDED (PREFERRED: the preferred replica leads already;
UNCLEAN: a live leader leads); the rest are elected in one pass, one fenced bulk write and one
batch, by the pure rules of :mod:`elections.leader` (Preferred; Offline with unclean allowed:
a live in-sync replica first, else any live replica), and answered with the leader elected or,
when the rule found none, PREFERRED_LEADER_NOT_AVAILABLE or ELIGIBLE_LEADERS_NOT_AVAILABLE.
An UNCLEAN election by an admin is allowed whatever ``unclean.leader.election.enable`` says, as
in Kafka: it is the admin's explicit choice.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from coordinator.codecs import TopicPartition
from elections.leader import NO_LEADER, ElectionStrategy, LeaderAndIsr, Offline, Preferred
from statemachines import events as ev
from statemachines.services import ControllerServices

__all__ = ["AdminElectionResult", "needs_election", "on_leader_election_request"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class AdminElectionResult:
    """One partition's answer: the leader elected, or Kafka's error name and a message."""

    leader: int | None = None
    error: str | None = None
    message: str | None = None


def needs_election(replicas: tuple[int, ...], current: LeaderAndIsr | None,
                   live: frozenset[int], unclean: bool) -> bool:
    """Whether an admin's election of this partition is needed (pure): PREFERRED when the
    preferred replica does not lead; UNCLEAN when no live broker leads."""
    leader = current.leader if current is not None else NO_LEADER
    if unclean:
        return leader == NO_LEADER or leader not in live
    return bool(replicas) and leader != replicas[0]


def on_leader_election_request(svc: ControllerServices, event: ev.LeaderElectionRequested
                               ) -> None:
    results = elect(svc, event.partitions, unclean=event.unclean)
    if not event.reply.done():
        event.reply.set_result(results)


def elect(svc: ControllerServices, partitions: Iterable[TopicPartition], *, unclean: bool
          ) -> Mapping[TopicPartition, AdminElectionResult]:
    ctx = svc.ctx
    live = ctx.live_ids()
    results: dict[TopicPartition, AdminElectionResult] = {}
    electable: list[TopicPartition] = []
    for tp in dict.fromkeys(partitions):
        replicas = ctx.replicas.get(tp)
        if replicas is None:
            results[tp] = AdminElectionResult(error="UNKNOWN_TOPIC_OR_PARTITION",
                                              message="The partition does not exist.")
        elif ctx.is_deleting(tp):
            results[tp] = AdminElectionResult(error="INVALID_TOPIC_EXCEPTION",
                                              message="The topic is being deleted")
        elif needs_election(replicas, ctx.leaders.get(tp), live, unclean):
            electable.append(tp)
        else:
            results[tp] = AdminElectionResult(error="ELECTION_NOT_NEEDED")
    if electable:
        strategy: ElectionStrategy = Offline(unclean=True) if unclean else Preferred()
        log.info("%s election of %d partition(s) requested by an admin",
                 "unclean" if unclean else "preferred", len(electable))
        batch = svc.new_batch()
        outcome = svc.partitions.to_online(electable, batch, strategy)
        svc.send(batch)
        error = "ELIGIBLE_LEADERS_NOT_AVAILABLE" if unclean else "PREFERRED_LEADER_NOT_AVAILABLE"
        for tp in electable:
            elected = outcome.elected.get(tp)
            if elected is not None:
                results[tp] = AdminElectionResult(leader=elected.leader)
            else:
                why = outcome.failed.get(tp, "its state does not allow an election")
                results[tp] = AdminElectionResult(
                    error=error, message=f"Failed to elect leader for partition {tp}: {why}")
    return results
