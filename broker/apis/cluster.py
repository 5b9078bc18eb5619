"""DescribeCluster (key 60): the live brokers, the controller and the cluster id.

Answered from the metadata cache as Kafka's brokers answer it: the live brokers that have an
endpoint on the listener the request came in on, the controller's id (-1 when it is not among
them, or unknown), the cluster id. Cluster authorized operations are -2147483648 (Kafka's "not
asked") unless asked; asked, they are every operation Kafka defines on a cluster (CREATE,
ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE), as a Kafka
broker without an authorizer answers: this broker enforces no ACLs yet. From version 1 the
request names the endpoint type it wants: a broker answers BROKER (1) requests only
(MISMATCHED_ENDPOINT_TYPE for CONTROLLER, UNSUPPORTED_ENDPOINT_TYPE for others; INVALID_REQUEST
in version 0).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from broker.apis.base import Api, Reply, RequestContext
from broker.security.acls import SUPPORTED_OPERATIONS, Operation, ResourceType
from broker.wire import response_module
from kafkaclient.messages import build

if TYPE_CHECKING:
    from broker.apis.messages import DescribeClusterRequest, DescribeClusterResponse
    from broker.apis.services import ClusterServices

__all__ = ["API_KEY", "APIS", "CLUSTER_OPERATIONS", "NOT_ASKED", "cluster_operations"]

API_KEY = 60
NOT_ASKED = -(1 << 31)
BROKER_ENDPOINT, CONTROLLER_ENDPOINT = 1, 2
CLUSTER_OPERATIONS = sum(1 << op for op in SUPPORTED_OPERATIONS[ResourceType.CLUSTER])
"""Every cluster operation Kafka reports (CREATE, ALTER, DESCRIBE, CLUSTER_ACTION,
DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE)."""


def cluster_operations(ctx: RequestContext) -> int:
    """The cluster operations the principal may do (Kafka: none unless it may Describe the
    cluster); every one without an authorizer."""
    if not ctx.authorized(Operation.DESCRIBE, ResourceType.CLUSTER):
        return 0
    return ctx.authorized_operations(ResourceType.CLUSTER)


def handle(ctx: RequestContext[ClusterServices],
           request: DescribeClusterRequest) -> Reply[DescribeClusterResponse]:
    version = ctx.api_version
    module = response_module(API_KEY, version)
    endpoint_type = getattr(request, "endpoint_type", BROKER_ENDPOINT)
    if endpoint_type != BROKER_ENDPOINT:
        if version == 0:
            error = ErrorCode.invalid_request
        elif endpoint_type == CONTROLLER_ENDPOINT:
            error = ErrorCode.mismatched_endpoint_type
        else:
            error = ErrorCode.unsupported_endpoint_type
        message = ("The request was sent to an endpoint of type BROKER, but we wanted an "
                   "endpoint of type CONTROLLER" if endpoint_type == CONTROLLER_ENDPOINT
                   else f"Unsupported endpoint type {endpoint_type}")
        return build(module.DescribeClusterResponse, throttle_time=timedelta(0),
                     error_code=error, error_message=message, endpoint_type=BROKER_ENDPOINT,
                     cluster_id=ctx.broker.cluster_id or "", controller_id=-1, brokers=(),
                     cluster_authorized_operations=NOT_ASKED)
    snap = ctx.broker.metadata.snapshot
    brokers = []
    for broker_id, broker in sorted(snap.brokers.items()):
        for endpoint in broker.endpoints:
            if endpoint.listener == ctx.listener:
                brokers.append(build(module.DescribeClusterBroker, broker_id=broker_id,
                                     host=endpoint.host, port=endpoint.port, rack=broker.rack))
                break
    listed = {b.broker_id for b in brokers}
    controller = snap.controller_id if snap.controller_id in listed else -1
    operations = (cluster_operations(ctx) if request.include_cluster_authorized_operations
                  else NOT_ASKED)
    return build(module.DescribeClusterResponse, throttle_time=timedelta(0),
                 error_code=ErrorCode.none, error_message=None, endpoint_type=BROKER_ENDPOINT,
                 cluster_id=ctx.broker.cluster_id or "", controller_id=controller,
                 brokers=tuple(brokers), cluster_authorized_operations=operations)


APIS = [Api(key=API_KEY, name="DescribeCluster", min_version=0, max_version=1, handle=handle)]
