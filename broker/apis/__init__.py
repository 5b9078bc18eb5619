"""The Kafka APIs a broker serves: one module per API group, a registry keyed by api key.

Like Kafka's ``KafkaApis``, the server dispatches a parsed request by its api key; unlike it,
each group of APIs lives in its own module (:mod:`.versions`, :mod:`.metadata`,
:mod:`.produce`, :mod:`.fetch`, :mod:`.offsets`) and the registry says, per API, the versions
this broker handles: what ApiVersions advertises, exactly, and what the server accepts. A
request outside them is refused the way Kafka refuses it (see :mod:`broker.server`).

A handler takes the :class:`RequestContext` and the parsed request (a kio object: its type is
its API's union of :mod:`.messages`) and returns the response (a kio object of the request's
version), an awaitable of one when it must wait
(acks=all, a long-poll fetch, topic creation), :data:`NO_RESPONSE` (acks=0) or
:data:`CLOSE_CONNECTION`. It runs on the event loop: what it calls must not block.
"""

from __future__ import annotations

from broker.apis.base import (
    CLOSE_CONNECTION,
    NO_RESPONSE,
    Api,
    ApiRegistry,
    BrokerServices,
    ControllerNodeServices,
    Handler,
    Reply,
    RequestContext,
    TopicCreator,
)

__all__ = [
    "CLOSE_CONNECTION",
    "NO_RESPONSE",
    "Api",
    "ApiRegistry",
    "BrokerServices",
    "ControllerNodeServices",
    "Handler",
    "Reply",
    "RequestContext",
    "TopicCreator",
    "controller_registry",
    "default_registry",
]


def default_registry() -> ApiRegistry:
    """Every API this broker serves, with the versions it handles."""
    from broker.apis import (
        acls,
        cluster,
        configs,
        consumer_groups,
        controller_requests,
        delete_records,
        describe_producers,
        elections,
        fetch,
        find_coordinator,
        group_offsets,
        groups,
        log_dirs,
        metadata,
        offsets,
        produce,
        producers,
        quotas,
        reassignments,
        sasl,
        topics,
        transactions,
        txn_markers,
        versions,
    )

    return ApiRegistry([*sasl.APIS, *produce.APIS, *fetch.APIS, *offsets.APIS, *metadata.APIS,
                        *versions.APIS, *producers.APIS, *topics.APIS, *configs.APIS,
                        *cluster.APIS, *elections.APIS, *reassignments.APIS,
                        *controller_requests.APIS, *find_coordinator.APIS, *groups.APIS,
                        *group_offsets.APIS,
                        *consumer_groups.APIS, *acls.APIS, *log_dirs.APIS,
                        *delete_records.APIS, *quotas.APIS, *transactions.APIS,
                        *txn_markers.APIS, *describe_producers.APIS])


def controller_registry() -> ApiRegistry:
    """What a controller-only process serves: ApiVersions and ControlledShutdown."""
    from broker.apis import controller_requests, versions

    return ApiRegistry([*versions.APIS, *controller_requests.CONTROLLER_APIS])
