"""ElectLeaders (key 43): preferred or unclean elections an admin asks for, per partition.

As in Kafka 3.9's ZooKeeper mode, the request becomes an event of the active controller
(:mod:`statemachines.handlers.elect_leaders`), which answers each partition: the leader it
elected, or ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE (PREFERRED: the preferred
replica is not live or not in sync), ELIGIBLE_LEADERS_NOT_AVAILABLE (UNCLEAN: no live replica),
UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION (its topic is being deleted). A partition
elected is answered once this broker's metadata cache shows that leader (Kafka's
DelayedElectLeader), or REQUEST_TIMED_OUT at the request's timeout. A broker that is not the
controller answers NOT_CONTROLLER for every partition (clients send the request to the
controller). No partitions named means every partition in the metadata cache, and then those
needing no election are left out of the answer, as Kafka leaves them out. Version 0 has
PREFERRED elections only; an election type other than 0 (PREFERRED) and 1 (UNCLEAN) is
INVALID_REQUEST.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.apis.admin_support import controller_reply, milliseconds, wait_for
from broker.apis.base import Api, Reply, RequestContext
from broker.security.acls import Operation, ResourceType
from broker.wire import response_module
from coordinator.codecs import TopicPartition
from elections.controller_election import NotController
from kafkaclient.messages import build
from statemachines.handlers.elect_leaders import AdminElectionResult

if TYPE_CHECKING:
    from broker.apis.messages import ElectLeadersRequest, ElectLeadersResponse
    from broker.apis.services import ElectionServices

__all__ = ["API_KEY", "APIS"]

API_KEY = 43
PREFERRED, UNCLEAN = 0, 1

_Answer = tuple[ErrorCode, str | None]


def handle(ctx: RequestContext[ElectionServices],
           request: ElectLeadersRequest) -> Reply[ElectLeadersResponse]:
    return _elect(ctx, request)


async def _elect(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    election = getattr(request, "election_type", PREFERRED)
    everything = request.topic_partitions is None
    if everything:
        snap = broker.metadata.snapshot
        wanted = [TopicPartition(t, p) for t in sorted(snap.topics) for p in sorted(snap.topics[t])]
    else:
        wanted = list(dict.fromkeys(TopicPartition(t.topic, p)
                                    for t in request.topic_partitions for p in t.partitions))
    if not ctx.authorized(Operation.ALTER, ResourceType.CLUSTER):
        return _response(ctx, ErrorCode.cluster_authorization_failed,
                         {tp: (ErrorCode.cluster_authorization_failed, None) for tp in wanted})
    if election not in (PREFERRED, UNCLEAN):
        message = f"Unknown election type {election}"
        return _response(ctx, ErrorCode.invalid_request,
                         {tp: (ErrorCode.invalid_request, message) for tp in wanted})
    controller = broker.controller() if broker.controller is not None else None
    answers: dict[TopicPartition, _Answer]
    if controller is None or not controller.active or not wanted:
        answers = {tp: (ErrorCode.not_controller, None) for tp in wanted}
        return _response(ctx, ErrorCode.none, answers)
    try:
        results: Mapping[TopicPartition, AdminElectionResult] = await controller_reply(
            controller.request_leader_election(wanted, unclean=election == UNCLEAN))
    except NotController:
        return _response(ctx, ErrorCode.none, {tp: (ErrorCode.not_controller, None)
                                               for tp in wanted})
    answers = {}
    expected: dict[TopicPartition, int] = {}
    for tp in wanted:
        result = results.get(tp)
        if result is None:
            answers[tp] = (ErrorCode.unknown_server_error, "no answer from the controller")
        elif result.error is not None:
            answers[tp] = (ErrorCode[result.error.lower()], result.message)
        else:
            assert result.leader is not None
            expected[tp] = result.leader
    if expected:
        metadata = broker.metadata

        def waiting() -> list[TopicPartition]:
            snap = metadata.snapshot
            return [tp for tp, leader in expected.items()
                    if (p := snap.partition(tp)) is None or p.leader != leader]

        await wait_for(ctx, milliseconds(request.timeout), lambda: not waiting())
        late = set(waiting())
        for tp in expected:
            answers[tp] = (ErrorCode.request_timed_out, None) if tp in late else (
                ErrorCode.none, None)
    if everything:
        answers = {tp: a for tp, a in answers.items() if a[0] != ErrorCode.election_not_needed}
    return _response(ctx, ErrorCode.none, answers)


def _response(ctx: RequestContext, error: ErrorCode, answers: dict[TopicPartition, _Answer]
              ) -> Any:
    module = response_module(API_KEY, ctx.api_version)
    by_topic: dict[str, list[Any]] = {}
    for tp, (code, message) in answers.items():
        by_topic.setdefault(tp.topic, []).append(build(
            module.PartitionResult, partition_id=tp.partition, error_code=code,
            error_message=message))
    return build(module.ElectLeadersResponse, throttle_time=timedelta(0), error_code=error,
                 replica_election_results=tuple(
                     build(module.ReplicaElectionResult, topic=topic, partition_result=tuple(ps))
                     for topic, ps in by_topic.items()))


APIS = [Api(key=API_KEY, name="ElectLeaders", min_version=0, max_version=2, handle=handle)]
