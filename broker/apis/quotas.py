"""DescribeClientQuotas (key 48, KIP-546): the client quotas kept at Kafka's ZooKeeper paths.

``kafka-configs --entity-type users|clients --describe`` asks it before anything else (the
SCRAM credentials of a user come after, from DescribeUserScramCredentials), so a broker without
it fails the tool whatever the user has. The quotas are read from the coordinator
(:mod:`coordinator.client_quotas`: ``/config/users``, ``/config/clients``,
``/config/users/<u>/clients``, ``/config/ips``), where Kafka's ZooKeeper-mode tools write them;
partctl brokers do not enforce them, and do not serve AlterClientQuotas (key 49), which a client
is told is unsupported.

Kafka's answers: CLUSTER_AUTHORIZATION_FAILED without DESCRIBE_CONFIGS on the cluster;
INVALID_REQUEST for an empty or repeated entity type, an unknown one or match type, an ip
component beside a user or client-id one; the matching entities otherwise, each with its quota
values (SCRAM credentials and other keys of the node left out).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.apis.admin_support import blocking
from broker.apis.base import Api, RequestContext
from broker.security.acls import Operation, ResourceType
from broker.wire import response_module
from coordinator.client_quotas import FilterComponent, check_filter, describe_quotas
from coordinator.errors import CoordinatorError
from coordinator.metadata import MetadataClient
from kafkaclient.messages import build

if TYPE_CHECKING:
    from broker.apis.messages import DescribeClientQuotasRequest, DescribeClientQuotasResponse
    from broker.apis.services import AdminServices

__all__ = ["APIS", "DESCRIBE_CLIENT_QUOTAS"]

DESCRIBE_CLIENT_QUOTAS = 48


async def _describe(ctx: RequestContext[AdminServices],
                    request: DescribeClientQuotasRequest) -> DescribeClientQuotasResponse:
    module = response_module(DESCRIBE_CLIENT_QUOTAS, ctx.api_version)

    def answer(code: ErrorCode, message: str | None, entries: tuple[Any, ...] | None) -> Any:
        return build(module.DescribeClientQuotasResponse, throttle_time=timedelta(0),
                     error_code=code, error_message=message, entries=entries)

    if not ctx.authorized(Operation.DESCRIBE_CONFIGS, ResourceType.CLUSTER):
        return answer(ErrorCode.cluster_authorization_failed, None, None)
    components = [FilterComponent(entity_type=c.entity_type, match_type=int(c.match_type),
                                  match=c.match) for c in request.components]
    problem = check_filter(components)
    if problem is not None:
        return answer(ErrorCode.invalid_request, problem, None)
    admin = getattr(ctx.broker, "admin", None)
    if admin is None:
        return answer(ErrorCode.coordinator_not_available, None, None)
    try:
        found = await blocking(ctx, describe_quotas, MetadataClient(admin.coordinator),
                               components, bool(request.strict))
    except CoordinatorError as exc:
        return answer(ErrorCode.unknown_server_error, str(exc), None)
    entries = tuple(
        build(module.EntryData,
              entity=tuple(build(module.EntityData, entity_type=kind, entity_name=name)
                           for kind, name in entity),
              values=tuple(build(module.ValueData, key=key, value=value)
                           for key, value in sorted(values.items())))
        for entity, values in found.items())
    return answer(ErrorCode.none, None, entries)


APIS = [Api(key=DESCRIBE_CLIENT_QUOTAS, name="DescribeClientQuotas", min_version=0,
            max_version=1, handle=_describe)]
