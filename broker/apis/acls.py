"""DescribeAcls (key 29), CreateAcls (30), DeleteAcls (31): the ACLs on the coordinator.

DescribeAcls needs Describe on the Cluster, CreateAcls and DeleteAcls Alter on it
(CLUSTER_AUTHORIZATION_FAILED otherwise). Without an authorizer they answer
SECURITY_DISABLED, as Kafka's brokers without one do. Reads come from this broker's ACL cache
(what it enforces); writes go to the coordinator (``broker.security.acl_store``), off the
loop, and reach every broker by the change notifications. A creation or filter that does not
make sense is refused on its own (INVALID_REQUEST), the others proceed.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.apis.admin_support import blocking
from broker.apis.base import Api, Reply, RequestContext
from broker.security import acl_store
from broker.security.acls import (
    AclBinding,
    AclBindingFilter,
    AclEntry,
    AclError,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from broker.wire import response_module
from kafkaclient.messages import build

if TYPE_CHECKING:
    from broker.apis.messages import (
        CreateAclsRequest,
        CreateAclsResponse,
        DeleteAclsRequest,
        DeleteAclsResponse,
        DescribeAclsRequest,
        DescribeAclsResponse,
    )
    from broker.apis.services import AclServices

__all__ = ["APIS", "CREATE_ACLS", "DELETE_ACLS", "DESCRIBE_ACLS", "binding_filter"]

DESCRIBE_ACLS = 29
CREATE_ACLS = 30
DELETE_ACLS = 31
_ZERO = timedelta(0)


def _enum(cls: Any, value: int) -> Any:
    try:
        return cls(int(value))
    except ValueError:
        return cls(0)


def binding_filter(f: Any) -> AclBindingFilter:
    """A DescribeAcls request or DeleteAcls filter as an :class:`AclBindingFilter`."""
    return AclBindingFilter(
        resource_type=_enum(ResourceType, f.resource_type_filter), name=f.resource_name_filter,
        pattern_type=_enum(PatternType, getattr(f, "pattern_type_filter", PatternType.LITERAL)),
        principal=f.principal_filter, host=f.host_filter,
        operation=_enum(Operation, f.operation), permission=_enum(Permission, f.permission_type))


def _refusal(ctx: RequestContext, operation: Operation) -> ErrorCode | None:
    if getattr(ctx.broker, "authorizer", None) is None:
        return ErrorCode.security_disabled
    if not ctx.authorized(operation, ResourceType.CLUSTER):
        return ErrorCode.cluster_authorization_failed
    return None


def describe_acls(ctx: RequestContext[AclServices],
                  request: DescribeAclsRequest) -> Reply[DescribeAclsResponse]:
    module = response_module(DESCRIBE_ACLS, ctx.api_version)

    def answer(error: ErrorCode, message: str | None = None, resources: tuple = ()) -> Any:
        return build(module.DescribeAclsResponse, throttle_time=_ZERO, error_code=error,
                     error_message=message, resources=resources)

    refused = _refusal(ctx, Operation.DESCRIBE)
    if refused is not None:
        return answer(refused)
    try:
        flt = binding_filter(request)
    except AclError as exc:
        return answer(ErrorCode.invalid_request, str(exc))
    by_pattern: dict[ResourcePattern, list[AclEntry]] = {}
    for b in ctx.broker.authorizer.cache.bindings():  # type: ignore[union-attr]
        if flt.matches(b):
            by_pattern.setdefault(b.pattern, []).append(b.entry)
    resources = tuple(
        build(module.DescribeAclsResource, resource_type=p.resource_type.value,
              resource_name=p.name, pattern_type=p.pattern_type.value, acls=tuple(
                  build(module.AclDescription, principal=e.principal, host=e.host,
                        operation=e.operation.value, permission_type=e.permission.value)
                  for e in sorted(entries, key=lambda e: (e.principal, e.host, e.operation))))
        for p, entries in sorted(by_pattern.items(), key=lambda i: (
            i[0].resource_type, i[0].pattern_type, i[0].name)))
    return answer(ErrorCode.none, None, resources)


def create_acls(ctx: RequestContext[AclServices],
                request: CreateAclsRequest) -> Reply[CreateAclsResponse]:
    return _create_acls(ctx, request)


async def _create_acls(ctx: RequestContext, request: Any) -> Any:
    module = response_module(CREATE_ACLS, ctx.api_version)
    refused = _refusal(ctx, Operation.ALTER)
    results: list[tuple[ErrorCode, str | None]] = []
    valid: list[AclBinding] = []
    for c in request.creations:
        if refused is not None:
            results.append((refused, None))
            continue
        try:
            binding = AclBinding(
                pattern=ResourcePattern(
                    resource_type=_enum(ResourceType, c.resource_type), name=c.resource_name,
                    pattern_type=_enum(PatternType, getattr(c, "resource_pattern_type",
                                                            PatternType.LITERAL))),
                entry=AclEntry(principal=c.principal, host=c.host,
                               operation=_enum(Operation, c.operation),
                               permission=_enum(Permission, c.permission_type)))
            acl_store.pattern_path(binding.pattern)
        except AclError as exc:
            results.append((ErrorCode.invalid_request, str(exc)))
            continue
        valid.append(binding)
        results.append((ErrorCode.none, None))
    if valid:
        try:
            await blocking(ctx, acl_store.add_acls, ctx.broker.admin.coordinator, valid)
        except Exception as exc:  # noqa: BLE001 - the coordinator's failure is the answer
            results = [(ErrorCode.unknown_server_error, str(exc)) if e is ErrorCode.none
                       else (e, m) for e, m in results]
    return build(module.CreateAclsResponse, throttle_time=_ZERO, results=tuple(
        build(module.AclCreationResult, error_code=e, error_message=m) for e, m in results))


def delete_acls(ctx: RequestContext[AclServices],
                request: DeleteAclsRequest) -> Reply[DeleteAclsResponse]:
    return _delete_acls(ctx, request)


async def _delete_acls(ctx: RequestContext, request: Any) -> Any:
    module = response_module(DELETE_ACLS, ctx.api_version)
    refused = _refusal(ctx, Operation.ALTER)
    answers = []
    for f in request.filters:
        error, message, removed = ErrorCode.none, None, []
        if refused is not None:
            error = refused
        else:
            try:
                removed = await blocking(ctx, acl_store.delete_acls,
                                         ctx.broker.admin.coordinator,
                                         binding_filter(f))
            except AclError as exc:
                error, message = ErrorCode.invalid_request, str(exc)
            except Exception as exc:  # noqa: BLE001 - the coordinator's failure is the answer
                error, message = ErrorCode.unknown_server_error, str(exc)
        answers.append(build(
            module.DeleteAclsFilterResult, error_code=error, error_message=message,
            matching_acls=tuple(build(
                module.DeleteAclsMatchingAcl, error_code=ErrorCode.none, error_message=None,
                resource_type=b.pattern.resource_type.value, resource_name=b.pattern.name,
                pattern_type=b.pattern.pattern_type.value, principal=b.entry.principal,
                host=b.entry.host, operation=b.entry.operation.value,
                permission_type=b.entry.permission.value) for b in removed)))
    return build(module.DeleteAclsResponse, throttle_time=_ZERO, filter_results=tuple(answers))


APIS = [
    Api(key=DESCRIBE_ACLS, name="DescribeAcls", min_version=0, max_version=3,
        handle=describe_acls),
    Api(key=CREATE_ACLS, name="CreateAcls", min_version=0, max_version=3, handle=create_acls),
    Api(key=DELETE_ACLS, name="DeleteAcls", min_version=0, max_version=3, handle=delete_acls),
]
