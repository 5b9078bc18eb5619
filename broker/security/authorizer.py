"""The broker's authorizer: Kafka's AclAuthorizer over the ACLs the coordinator holds.

:class:`Authorizer` decides with :func:`broker.security.acls.authorize` over an
:class:`~broker.security.acl_store.AclCache` (loaded at start, following the change
notifications) and the broker's ``super.users`` and ``allow.everyone.if.no.acl.found``.
"""

from __future__ import annotations

from broker.security.acl_store import AclCache
from broker.security.acls import (
    CLUSTER_NAME,
    Operation,
    ResourceType,
    authorize,
    authorize_any,
)
from coordinator.base import Coordinator

__all__ = ["Authorizer", "peer_host"]


def peer_host(peer: str) -> str:
    """The address of a ``host:port`` peer (``[v6]:port`` too)."""
    host = peer.rpartition(":")[0] if ":" in peer else peer
    return host.strip("[]")


class Authorizer:
    def __init__(self, coordinator: Coordinator, *, super_users: frozenset[str],
                 allow_if_no_acls: bool) -> None:
        self.cache = AclCache(coordinator)
        self.super_users = super_users
        self.allow_if_no_acls = allow_if_no_acls

    def start(self) -> Authorizer:
        self.cache.start()
        return self

    def close(self) -> None:
        self.cache.close()

    def authorized(self, principal: str, peer: str, operation: Operation,
                   resource_type: ResourceType, name: str = CLUSTER_NAME) -> bool:
        return authorize(self.cache.bindings(), principal=principal, host=peer_host(peer),
                         operation=operation, resource_type=resource_type, name=name,
                         super_users=self.super_users, allow_if_no_acls=self.allow_if_no_acls)

    def authorized_any(self, principal: str, peer: str, operation: Operation,
                       resource_type: ResourceType) -> bool:
        """Whether ``operation`` is allowed on some resource of the type."""
        return authorize_any(self.cache.bindings(), principal=principal, host=peer_host(peer),
                             operation=operation, resource_type=resource_type,
                             super_users=self.super_users,
                             allow_if_no_acls=self.allow_if_no_acls)
