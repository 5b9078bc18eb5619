"""AlterPartitionReassignments (key 45) and ListPartitionReassignments (key 46), KIP-455, onto
the controller's reassignment through ``/admin/reassign_partitions``.

A target is written into ``/admin/reassign_partitions`` (merged with the moves there, with a
write conditional on the node's version, read again and redone on a conflict), where the
controller takes it up as it takes up any tool's: it starts the move (the topic node gets the
full replica set with adding and removing replicas), and takes the partition out of the node
when the move completes. A new target for a partition already moving replaces the old one; a
null target cancels a move: its target becomes the original replicas (the current ones less
those being added), which the controller carries out as Kafka's cancellation (replicas the move
added are stopped and deleted; a move it had not started is dropped). The answer comes once the
node is written: the controller's own work is what ListPartitionReassignments shows.

Kafka 3.9's ZooKeeper-mode controller took the API's moves as events and kept them out of that
node; here the node is the one way in, for the API and for tools alike, so a move is carried
out, resumed after a failover and listed the same whoever asked for it. That has one
consequence: ``partctl reassign execute`` claims the node while it runs (an ephemeral owner
node beside it; see :mod:`rebalancer.execution`), tops it up as moves finish and stops when
foreign moves appear. While such a run owns the node, a change through this API is refused with
REASSIGNMENT_IN_PROGRESS (naming the run): writing into its window would stop it half way.
Once it has finished, or its process ended, the API writes again.

Per partition: a topic or partition that does not exist, or whose topic is being deleted, is
UNKNOWN_TOPIC_OR_PARTITION; a target that is empty, names a broker twice or a negative id, or
adds a broker that is not registered (live), INVALID_REPLICA_ASSIGNMENT; a cancellation of a
partition that is not moving NO_REASSIGNMENT_IN_PROGRESS. Any broker serves both APIs (Kafka's
answered NOT_CONTROLLER unless it was the controller).

ListPartitionReassignments lists the partitions being moved (of the ones named, or all): the
full replica set, adding and removing replicas, from the topic nodes; a move still waiting in
the admin node for the controller is listed as the controller will start it. Partitions named
that are not moving are left out, as Kafka leaves them out.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.apis.admin_support import blocking
from broker.apis.base import Api, Reply, RequestContext
from broker.security.acls import Operation, ResourceType
from broker.wire import response_module
from coordinator import layout
from coordinator.admin import Admin
from coordinator.codecs import TopicAssignment, TopicPartition, encode_reassignment
from coordinator.errors import BadVersion, CoordinatorError, NodeExists, NoNode
from coordinator.skipped import readable_assignments
from kafkaclient.messages import build

if TYPE_CHECKING:
    from broker.apis.messages import (
        AlterPartitionReassignmentsRequest,
        AlterPartitionReassignmentsResponse,
        ListPartitionReassignmentsRequest,
        ListPartitionReassignmentsResponse,
    )
    from broker.apis.services import AdminServices

__all__ = ["ALTER", "APIS", "LIST", "Moving", "moving_partition"]

ALTER = 45
LIST = 46
WRITE_ATTEMPTS = 10

_Answer = tuple[ErrorCode, str | None]
Moving = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]
"""A move as listed: the full replica set, the replicas being added, those being removed."""


def moving_partition(a: TopicAssignment, partition: int, pending: tuple[int, ...] | None
                     ) -> Moving | None:
    """A partition's move as the topic node records it, or as the controller will start the
    target ``pending`` in the admin node (Kafka's ReplicaAssignment.reassignTo: the target,
    then the original replicas it drops); None when it is not moving (pure)."""
    replicas = tuple(a.partitions[partition])
    adding, removing = tuple(a.adding.get(partition, ())), tuple(a.removing.get(partition, ()))
    if adding or removing:
        return replicas, adding, removing
    if pending is None or tuple(pending) == replicas:
        return None
    target = tuple(pending)
    return (target + tuple(r for r in replicas if r not in target),
            tuple(r for r in target if r not in replicas),
            tuple(r for r in replicas if r not in target))


def _check_target(target: tuple[int, ...], original: tuple[int, ...], live: set[int]
                  ) -> str | None:
    """Kafka's validateReplicas: why a target is an INVALID_REPLICA_ASSIGNMENT, or None."""
    if not target:
        return "Empty replica list specified in partition reassignment."
    if len(set(target)) != len(target):
        return f"Duplicate replica ids in partition reassignment replica list: {list(target)}"
    if any(b < 0 for b in target):
        return f"Invalid broker id in replica list: {list(target)}"
    adding = sorted(set(target) - set(original))
    if not set(adding) <= live:
        return (f"Replica assignment has brokers that are not alive. Replica list: {adding}, "
                f"live broker list: {sorted(live)}")
    return None


def _alter(admin: Admin, requested: Mapping[TopicPartition, tuple[int, ...] | None]
           ) -> dict[TopicPartition, _Answer]:
    md = admin.metadata
    for _ in range(WRITE_ATTEMPTS):
        node, owner = md.reassignment_and_owner()
        entries = dict(node.value) if node is not None else {}
        topics = md.assignments({tp.topic for tp in requested})
        deleting = set(md.topics_to_delete())
        live = set(md.broker_ids())
        answers: dict[TopicPartition, _Answer] = {}
        updates: dict[TopicPartition, tuple[int, ...]] = {}
        for tp, target in requested.items():
            versioned = topics.get(tp.topic)
            if (versioned is None or tp.partition not in versioned.value.partitions
                    or tp.topic in deleting):
                answers[tp] = (ErrorCode.unknown_topic_or_partition,
                               "The partition does not exist.")
                continue
            a = versioned.value
            adding = set(a.adding.get(tp.partition, ()))
            original = tuple(r for r in a.partitions[tp.partition] if r not in adding)
            if target is None:
                if moving_partition(a, tp.partition, entries.get(tp)) is None:
                    answers[tp] = (ErrorCode.no_reassignment_in_progress, None)
                else:
                    updates[tp] = original
                continue
            problem = _check_target(target, original, live)
            if problem is not None:
                answers[tp] = (ErrorCode.invalid_replica_assignment, problem)
            else:
                updates[tp] = target
        if not updates:
            return answers
        if owner is not None:
            message = (f"{layout.REASSIGN_PARTITIONS} is claimed by partctl reassign execute: "
                       f"{owner[0].describe()}; wait for it to finish, or cancel it")
            answers.update({tp: (ErrorCode.reassignment_in_progress, message) for tp in updates})
            return answers
        data = encode_reassignment({**entries, **updates})
        try:
            if node is None:
                md.coordinator.create(layout.REASSIGN_PARTITIONS, data, make_parents=True)
            else:
                md.coordinator.set(layout.REASSIGN_PARTITIONS, data, node.version)
        except (NodeExists, NoNode, BadVersion):
            continue  # the controller or a tool wrote meanwhile: read again
        answers.update({tp: (ErrorCode.none, None) for tp in updates})
        return answers
    return {tp: (ErrorCode.unknown_server_error,
                 f"{layout.REASSIGN_PARTITIONS} kept changing; try again") for tp in requested}


def handle_alter(
        ctx: RequestContext[AdminServices], request: AlterPartitionReassignmentsRequest,
) -> Reply[AlterPartitionReassignmentsResponse]:
    return _alter_reassignments(ctx, request)


async def _alter_reassignments(ctx: RequestContext, request: Any) -> Any:
    module = response_module(ALTER, ctx.api_version)
    requested = {TopicPartition(t.name, p.partition_index):
                 None if p.replicas is None else tuple(p.replicas)
                 for t in request.topics for p in t.partitions}
    admin = ctx.broker.admin
    top: _Answer = (ErrorCode.none, None)
    answers: dict[TopicPartition, _Answer]
    if not ctx.authorized(Operation.ALTER, ResourceType.CLUSTER):
        top, answers = (ErrorCode.cluster_authorization_failed, None), {}
    elif admin is None:
        answers = {tp: (ErrorCode.unknown_server_error, "this broker has no admin path")
                   for tp in requested}
    else:
        try:
            answers = await blocking(ctx, _alter, admin, requested)
        except CoordinatorError as exc:
            top, answers = (ErrorCode.unknown_server_error, str(exc)), {}
    by_topic: dict[str, list[Any]] = {}
    for tp, (code, message) in answers.items():
        by_topic.setdefault(tp.topic, []).append(build(
            module.ReassignablePartitionResponse, partition_index=tp.partition, error_code=code,
            error_message=message))
    return build(module.AlterPartitionReassignmentsResponse, throttle_time=timedelta(0),
                 error_code=top[0], error_message=top[1], responses=tuple(
                     build(module.ReassignableTopicResponse, name=name, partitions=tuple(ps))
                     for name, ps in by_topic.items()))


def _list(admin: Admin, wanted: Mapping[str, tuple[int, ...]] | None
          ) -> dict[TopicPartition, Moving]:
    md = admin.metadata
    node = md.reassignment()
    entries = dict(node.value) if node is not None else {}
    names = sorted(md.topics()) if wanted is None else list(wanted)
    out: dict[TopicPartition, Moving] = {}
    for name, versioned in readable_assignments(md, names).items():
        a = versioned.value
        partitions = sorted(a.partitions) if wanted is None else wanted[name]
        for p in partitions:
            if p not in a.partitions:
                continue
            tp = TopicPartition(name, p)
            move = moving_partition(a, p, entries.get(tp))
            if move is not None:
                out[tp] = move
    return out


def handle_list(
        ctx: RequestContext[AdminServices], request: ListPartitionReassignmentsRequest,
) -> Reply[ListPartitionReassignmentsResponse]:
    return _list_reassignments(ctx, request)


async def _list_reassignments(ctx: RequestContext, request: Any) -> Any:
    module = response_module(LIST, ctx.api_version)
    wanted = None if request.topics is None else {
        t.name: tuple(t.partition_indexes) for t in request.topics}
    admin = ctx.broker.admin
    error: _Answer = (ErrorCode.none, None)
    moves: dict[TopicPartition, Moving] = {}
    if not ctx.authorized(Operation.DESCRIBE, ResourceType.CLUSTER):
        error = (ErrorCode.cluster_authorization_failed, None)
    elif admin is None:
        error = (ErrorCode.unknown_server_error, "this broker has no admin path")
    else:
        try:
            moves = await blocking(ctx, _list, admin, wanted)
        except CoordinatorError as exc:
            error = (ErrorCode.unknown_server_error, str(exc))
    by_topic: dict[str, list[Any]] = {}
    for tp, (replicas, adding, removing) in sorted(moves.items()):
        by_topic.setdefault(tp.topic, []).append(build(
            module.OngoingPartitionReassignment, partition_index=tp.partition,
            replicas=replicas, adding_replicas=adding, removing_replicas=removing))
    return build(module.ListPartitionReassignmentsResponse, throttle_time=timedelta(0),
                 error_code=error[0], error_message=error[1], topics=tuple(
                     build(module.OngoingTopicReassignment, name=name, partitions=tuple(ps))
                     for name, ps in by_topic.items()))


APIS = [
    Api(key=ALTER, name="AlterPartitionReassignments", min_version=0, max_version=0,
        handle=handle_alter),
    Api(key=LIST, name="ListPartitionReassignments", min_version=0, max_version=0,
        handle=handle_list),
]
