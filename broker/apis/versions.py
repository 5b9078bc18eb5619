"""ApiVersions (key 18): the APIs and version ranges this broker handles, exactly.

Clients open every connection with it and pick, per API, the highest version both sides have.
The list comes from the registry, so what is advertised is what the server dispatches. A client
asking with a newer ApiVersions than this broker knows gets a version 0 answer with
UNSUPPORTED_VERSION and the ApiVersions range (KIP-511), and asks again within it: the server
builds that answer (:func:`unsupported_version`) before parsing a body it does not know.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.apis.base import Api, ApiRegistry, Reply, RequestContext
from broker.wire import response_module
from kafkaclient.messages import build

if TYPE_CHECKING:
    import kio.schema.api_versions.v3
    import kio.schema.api_versions.v4
    from typing_extensions import TypeIs

    from broker.apis.messages import ApiVersionsRequest, ApiVersionsResponse
    from broker.apis.services import VersionServices

__all__ = ["APIS", "API_KEY", "unsupported_version"]

API_KEY = 18
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")
"""Kafka's rule for client_software_name and _version (v3+): else INVALID_REQUEST."""


def _keys(module: Any, registry: ApiRegistry, only: int | None = None) -> tuple[Any, ...]:
    return tuple(
        module.ApiVersion(api_key=api.key, min_version=api.min_version,
                          max_version=api.max_version)
        for api in registry.values() if only is None or api.key == only)


def _names_software(request: ApiVersionsRequest, version: int) -> TypeIs[
        kio.schema.api_versions.v3.ApiVersionsRequest
        | kio.schema.api_versions.v4.ApiVersionsRequest]:
    """Whether the request (of ``version``) names the client's software: v3 and later."""
    return version >= 3


def handle(ctx: RequestContext[VersionServices],
           request: ApiVersionsRequest) -> Reply[ApiVersionsResponse]:
    module = response_module(API_KEY, ctx.api_version)
    registry = ctx.broker.registry
    assert registry is not None
    if _names_software(request, ctx.api_version) and not (
        _SOFTWARE.fullmatch(request.client_software_name or "")
        and _SOFTWARE.fullmatch(request.client_software_version or "")
    ):
        return build(module.ApiVersionsResponse, error_code=ErrorCode.invalid_request,
                     api_keys=(), throttle_time=timedelta(0))
    return build(module.ApiVersionsResponse, error_code=ErrorCode.none,
                 api_keys=_keys(module, registry), throttle_time=timedelta(0))


def unsupported_version(registry: ApiRegistry) -> Any:
    """The version 0 answer to an ApiVersions request of a version this broker lacks: the
    error and, as Kafka sends it, the ApiVersions range alone."""
    module = response_module(API_KEY, 0)
    return module.ApiVersionsResponse(error_code=ErrorCode.unsupported_version,
                                      api_keys=_keys(module, registry, only=API_KEY))


APIS = [Api(key=API_KEY, name="ApiVersions", min_version=0, max_version=4, handle=handle)]
