"""WriteTxnMarkers (key 27, versions 0 and 1 as Kafka 3.9 serves them): a transaction
coordinator asks the leaders of a transaction's partitions to end it with a commit or abort
marker (:meth:`~replication.replica_manager.ReplicaManager.write_txn_marker`).

An inter-broker API: CLUSTER_ACTION on the cluster, else every partition is answered
CLUSTER_AUTHORIZATION_FAILED (Kafka's error response). Per marker, per partition, as Kafka's
handler answers: a partition this broker does not host is UNKNOWN_TOPIC_OR_PARTITION, one it
hosts but does not lead NOT_LEADER_OR_FOLLOWER, a marker the partition's producer state
refuses INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED, and a producer id or epoch
below zero INVALID_PRODUCER_ID_MAPPING or INVALID_PRODUCER_EPOCH (Kafka would append that
marker blindly; no coordinator sends one): nothing is appended for any of them. A partition
named twice in one marker is written once. Markers are appended with acks=all to internal
topics too, and the answer leaves once every append is complete (the HW passed it, it failed,
or ``request.timeout.ms`` passed: REQUEST_TIMED_OUT).

As Kafka's, the answer holds one entry per producer id: two markers of one producer id in a
request share it, a later one's code for a partition standing.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from broker.apis.base import Api, Reply, RequestContext
from broker.apis.produce import when_all_done
from broker.security.acls import Operation, ResourceType
from broker.wire import error_code, response_module
from coordinator.codecs import TopicPartition
from interbroker.errors import ErrorCode
from kafkaclient.messages import build

if TYPE_CHECKING:
    from broker.apis.messages import WriteTxnMarkersRequest, WriteTxnMarkersResponse
    from broker.apis.services import ProduceServices

__all__ = ["APIS", "API_KEY"]

log = logging.getLogger(__name__)

API_KEY = 27

_Outcome = ErrorCode | Future
_Results = dict[int, dict[tuple[str, int], _Outcome]]
"""Producer id -> (topic, partition) -> a code, or the future of the marker's append."""


def handle(ctx: RequestContext[ProduceServices],
           request: WriteTxnMarkersRequest) -> Reply[WriteTxnMarkersResponse]:
    results: _Results = {}
    if not ctx.authorized(Operation.CLUSTER_ACTION, ResourceType.CLUSTER):
        for marker in request.markers:
            errors = results.setdefault(marker.producer_id, {})
            for topic in marker.topics:
                for index in topic.partition_indexes:
                    errors[(topic.name, index)] = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return _response(ctx, results)
    broker = ctx.broker
    rm = broker.replica_manager
    waiting: list[Future] = []
    for marker in request.markers:
        errors = results.setdefault(marker.producer_id, {})
        written: set[tuple[str, int]] = set()
        for topic in marker.topics:
            for index in topic.partition_indexes:
                key = (topic.name, index)
                if key in written:
                    continue
                written.add(key)
                tp = TopicPartition(topic.name, index)
                future = rm.write_txn_marker(
                    tp, producer_id=marker.producer_id, producer_epoch=marker.producer_epoch,
                    commit=marker.transaction_result,
                    coordinator_epoch=marker.coordinator_epoch)
                if future.done():
                    result = future.result()
                    if result.error != ErrorCode.NONE:
                        errors[key] = result.error
                        continue
                broker.purgatory.wake(tp)
                errors[key] = future
                if not future.done():
                    waiting.append(future)
    if not waiting:
        return _response(ctx, results)
    return when_all_done(broker.loop, waiting, lambda: _response(ctx, results))


def _code(outcome: _Outcome) -> ErrorCode:
    if isinstance(outcome, Future):
        return outcome.result().error
    return outcome


def _response(ctx: RequestContext, results: _Results) -> Any:
    module = response_module(API_KEY, ctx.api_version)
    markers = []
    for producer_id, outcomes in results.items():
        topics: dict[str, list[Any]] = {}
        for (name, index), outcome in outcomes.items():
            topics.setdefault(name, []).append(build(
                module.WritableTxnMarkerPartitionResult, partition_index=index,
                error_code=error_code(_code(outcome))))
        markers.append(build(module.WritableTxnMarkerResult, producer_id=producer_id,
                             topics=tuple(build(module.WritableTxnMarkerTopicResult, name=name,
                                                partitions=tuple(parts))
                                          for name, parts in topics.items())))
    return build(module.WriteTxnMarkersResponse, markers=tuple(markers))


APIS = [Api(key=API_KEY, name="WriteTxnMarkers", min_version=0, max_version=1, handle=handle)]
