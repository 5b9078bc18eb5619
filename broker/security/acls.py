"""Kafka's ACL model and its matching rules, pure (no I/O): what AclAuthorizer decides.

An ACL binds a resource pattern (type, name, LITERAL or PREFIXED; the literal name ``*`` matches
every resource of its type) to an entry (principal, host, operation, ALLOW or DENY). A request
for ``operation`` on a resource by a principal from a host is decided over the ACLs whose
pattern matches the resource:

- a super user may do anything;
- any matching DENY entry (principal or ``User:*``, host or ``*``, operation or ``All``) refuses;
- with no ACL at all on the resource, ``allow.everyone.if.no.acl.found`` decides;
- otherwise an ALLOW entry is needed, for the operation or one implying it: Read, Write, Delete
  and Alter imply Describe; AlterConfigs implies DescribeConfigs; All implies everything.

Names and codes are Kafka's (the wire codes of ResourceType, PatternType, AclOperation and
AclPermissionType; the names as Kafka writes them in its ZooKeeper ACL nodes).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum

__all__ = [
    "CLUSTER_NAME",
    "SUPPORTED_OPERATIONS",
    "WILDCARD",
    "WILDCARD_PRINCIPAL",
    "AclBinding",
    "AclBindingFilter",
    "AclEntry",
    "AclError",
    "Operation",
    "PatternType",
    "Permission",
    "ResourcePattern",
    "ResourceType",
    "authorize",
    "authorize_any",
    "parse_principal",
]

WILDCARD = "*"
"""The literal resource name matching every resource of its type (and the any-host)."""
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"
"""The one Cluster resource's name."""


class AclError(ValueError):
    """A malformed ACL, filter, or name (one line for the user)."""


class _Named(IntEnum):
    """Wire codes with Kafka's names (``Topic``, ``ClusterAction``, ``Allow``); parsing accepts
    Kafka's names in any case and with or without underscores (``CLUSTER_ACTION``)."""

    @property
    def label(self) -> str:
        return _LABELS[type(self).__name__].get(self.name, self.name.title())

    @classmethod
    def parse(cls, text: str) -> _Named:
        key = text.replace("_", "").replace("-", "").lower()
        for member in cls:
            if member.name.replace("_", "").lower() == key:
                return member
        raise AclError(f"unknown {cls.__name__} {text!r}: expected one of "
                       f"{', '.join(m.label for m in cls if m.value > 1)}")


class ResourceType(_Named):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_Named):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(_Named):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


SUPPORTED_OPERATIONS: dict[ResourceType, tuple[Operation, ...]] = {
    ResourceType.TOPIC: (Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DELETE,
                         Operation.ALTER, Operation.DESCRIBE, Operation.DESCRIBE_CONFIGS,
                         Operation.ALTER_CONFIGS),
    ResourceType.GROUP: (Operation.READ, Operation.DELETE, Operation.DESCRIBE),
    ResourceType.CLUSTER: (Operation.CREATE, Operation.ALTER, Operation.DESCRIBE,
                           Operation.CLUSTER_ACTION, Operation.DESCRIBE_CONFIGS,
                           Operation.ALTER_CONFIGS, Operation.IDEMPOTENT_WRITE),
}
"""The operations Kafka reports in the ``*_authorized_operations`` bit fields of Metadata,
DescribeCluster, DescribeGroups and ConsumerGroupDescribe, per resource type (bit ``1 << code``)."""


class Permission(_Named):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


_LABELS: dict[str, dict[str, str]] = {
    "ResourceType": {"TRANSACTIONAL_ID": "TransactionalId", "DELEGATION_TOKEN": "DelegationToken"},
    "PatternType": {"LITERAL": "LITERAL", "PREFIXED": "PREFIXED", "ANY": "ANY", "MATCH": "MATCH",
                    "UNKNOWN": "UNKNOWN"},
    "Operation": {"CLUSTER_ACTION": "ClusterAction", "DESCRIBE_CONFIGS": "DescribeConfigs",
                  "ALTER_CONFIGS": "AlterConfigs", "IDEMPOTENT_WRITE": "IdempotentWrite",
                  "CREATE_TOKENS": "CreateTokens", "DESCRIBE_TOKENS": "DescribeTokens"},
    "Permission": {},
}

_IMPLIED_BY: Mapping[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset({Operation.DESCRIBE, Operation.READ, Operation.WRITE,
                                   Operation.DELETE, Operation.ALTER}),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS}),
}
"""The ALLOW operations that grant an operation besides itself and All (Kafka's implications)."""


def parse_principal(text: str) -> str:
    """``Type:name`` (Kafka's KafkaPrincipal string), checked."""
    kind, sep, name = text.partition(":")
    if not sep or not kind or not name:
        raise AclError(f"principal {text!r} is not of the form Type:name (User:alice)")
    return text


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __post_init__(self) -> None:
        if self.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise AclError(f"a resource pattern needs a resource type, not {self.resource_type.label}")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise AclError(f"a resource pattern is LITERAL or PREFIXED, not {self.pattern_type.label}")
        if not self.name:
            raise AclError("a resource name cannot be empty")
        if self.pattern_type is PatternType.PREFIXED and self.name == WILDCARD:
            raise AclError("a PREFIXED pattern cannot be '*' (use the LITERAL '*')")
        if self.resource_type is ResourceType.CLUSTER and (
                self.name != CLUSTER_NAME or self.pattern_type is not PatternType.LITERAL):
            raise AclError(f"the Cluster resource is the LITERAL {CLUSTER_NAME!r}")

    def matches(self, resource_type: ResourceType, name: str) -> bool:
        """Whether this pattern covers the resource ``name`` of ``resource_type``."""
        if resource_type is not self.resource_type:
            return False
        if self.pattern_type is PatternType.PREFIXED:
            return name.startswith(self.name)
        return self.name == WILDCARD or self.name == name

    def __str__(self) -> str:
        return (f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
                f"patternType={self.pattern_type.name})")


@dataclass(frozen=True, slots=True, kw_only=True)
class AclEntry:
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def __post_init__(self) -> None:
        parse_principal(self.principal)
        if not self.host:
            raise AclError("a host is '*' or an address")
        if self.operation in (Operation.ANY, Operation.UNKNOWN):
            raise AclError(f"an ACL needs an operation, not {self.operation.label}")
        if self.permission not in (Permission.ALLOW, Permission.DENY):
            raise AclError(f"an ACL is ALLOW or DENY, not {self.permission.label}")

    def applies(self, principal: str, host: str) -> bool:
        return (self.principal in (principal, WILDCARD_PRINCIPAL)
                and self.host in (host, WILDCARD))

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, "
                f"operation={self.operation.name}, permissionType={self.permission.name})")


@dataclass(frozen=True, slots=True, kw_only=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AclEntry


def _opt(value: str | None, wanted: str | None) -> bool:
    return wanted is None or value == wanted


@dataclass(frozen=True, slots=True, kw_only=True)
class AclBindingFilter:
    """Kafka's AclBindingFilter: None (or ANY) for a field matches anything. A pattern type of
    MATCH matches the patterns that would apply to the named resource (its literal name, the
    literal ``*`` and the prefixes of it), as DescribeAcls and DeleteAcls take it."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def __post_init__(self) -> None:
        for field, value in (("resource type", self.resource_type), ("pattern type", self.pattern_type),
                             ("operation", self.operation), ("permission type", self.permission)):
            if value.value == 0:
                raise AclError(f"unknown {field} in the filter")

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        if self.resource_type is not ResourceType.ANY and pattern.resource_type is not self.resource_type:
            return False
        if self.pattern_type is PatternType.MATCH:
            if self.name is None:
                return True
            return pattern.matches(pattern.resource_type, self.name)
        if self.pattern_type is not PatternType.ANY and pattern.pattern_type is not self.pattern_type:
            return False
        return _opt(pattern.name, self.name)

    def matches_entry(self, entry: AclEntry) -> bool:
        return (_opt(entry.principal, self.principal) and _opt(entry.host, self.host)
                and self.operation in (Operation.ANY, entry.operation)
                and self.permission in (Permission.ANY, entry.permission))

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)


def authorize(acls: Iterable[AclBinding], *, principal: str, host: str, operation: Operation,
              resource_type: ResourceType, name: str, super_users: frozenset[str] = frozenset(),
              allow_if_no_acls: bool = False) -> bool:
    """Kafka's AclAuthorizer decision for one action (see the module's docstring); ``acls``
    may hold bindings of any resource: the matching ones are picked here."""
    if principal in super_users:
        return True
    matching = [b.entry for b in acls if b.pattern.matches(resource_type, name)]
    for entry in matching:
        if (entry.permission is Permission.DENY and entry.applies(principal, host)
                and entry.operation in (operation, Operation.ALL)):
            return False
    if not matching:
        return allow_if_no_acls
    granting = _IMPLIED_BY.get(operation, frozenset({operation})) | {Operation.ALL}
    return any(entry.permission is Permission.ALLOW and entry.applies(principal, host)
               and entry.operation in granting for entry in matching)


def authorize_any(acls: Iterable[AclBinding], *, principal: str, host: str,
                  operation: Operation, resource_type: ResourceType,
                  super_users: frozenset[str] = frozenset(),
                  allow_if_no_acls: bool = False) -> bool:
    """Kafka's authorizeByResourceType: whether ``operation`` is allowed on at least one
    resource of the type (an idempotent producer needs Write on some topic). An ALLOW counts
    unless a DENY of the principal covers every name it grants: the literal ``*``, the same
    pattern, or a prefix of it."""
    if principal in super_users:
        return True
    of_type = [b for b in acls if b.pattern.resource_type is resource_type]
    if not of_type:
        return allow_if_no_acls
    ops = {operation, Operation.ALL}
    denies = [b.pattern for b in of_type if b.entry.permission is Permission.DENY
              and b.entry.applies(principal, host) and b.entry.operation in ops]

    def denied(p: ResourcePattern) -> bool:
        return any(d.name == WILDCARD and d.pattern_type is PatternType.LITERAL
                   or d == p
                   or d.pattern_type is PatternType.PREFIXED and p.name != WILDCARD
                   and p.name.startswith(d.name) for d in denies)

    return any(b.entry.permission is Permission.ALLOW and b.entry.applies(principal, host)
               and b.entry.operation in ops and not denied(b.pattern) for b in of_type)
