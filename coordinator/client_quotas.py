"""Client quotas as Kafka's ZooKeeper layout keeps them, read for DescribeClientQuotas (KIP-546).

Kafka's ZooKeeper-mode tools and brokers keep a quota entity's values in its config node:
``/config/users/<user>``, ``/config/clients/<client-id>``,
``/config/users/<user>/clients/<client-id>`` and ``/config/ips/<ip>``, names sanitized
(:func:`coordinator.layout.sanitize_entity`) and ``<default>`` standing for the default entity.
A user's node also holds its SCRAM credentials: only the quota keys count here, and an entity
with no quota key is no quota entity.

An entity is a tuple of (entity type, name) pairs, the name None for the default entity, in
Kafka's order: ``user`` before ``client-id``. :func:`check_filter` and :func:`matches` are pure:
a filter component matches an entity that has its type with the exact name (match type 0), the
default name (1), or any name (2); a strict filter also wants the entity to have no other types.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

from coordinator import layout
from coordinator.codecs import CorruptMetadata, decode_entity_config
from coordinator.errors import NoNode
from coordinator.metadata import MetadataClient

__all__ = ["CLIENT_QUOTA_KEYS", "DEFAULT_ENTITY", "IP_QUOTA_KEYS", "MATCH_ANY", "MATCH_DEFAULT",
           "MATCH_EXACT", "FilterComponent", "QuotaEntity", "check_filter", "describe_quotas",
           "matches", "read_quotas"]

log = logging.getLogger(__name__)

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
DEFAULT_ENTITY = "<default>"
"""The node name of the default entity (Kafka's ConfigEntityName.DEFAULT)."""
CLIENT_QUOTA_KEYS = frozenset({"producer_byte_rate", "consumer_byte_rate",
                               "request_percentage", "controller_mutation_rate"})
"""Kafka's user and client-id quota keys (QuotaConfigs)."""
IP_QUOTA_KEYS = frozenset({"connection_creation_rate"})
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2

QuotaEntity = tuple[tuple[str, str | None], ...]
"""(entity type, name or None for the default) pairs, ``user`` before ``client-id``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FilterComponent:
    entity_type: str
    match_type: int
    match: str | None = None


def check_filter(components: Sequence[FilterComponent]) -> str | None:
    """Why a DescribeClientQuotas filter is invalid (INVALID_REQUEST's message), or None."""
    seen: set[str] = set()
    for component in components:
        if not component.entity_type:
            return "Invalid empty entity type."
        if component.entity_type in seen:
            return (f"Entity type {component.entity_type} cannot appear more than once in the "
                    "filter.")
        if component.entity_type not in (USER, CLIENT_ID, IP):
            return f"Unknown entity type {component.entity_type}"
        if component.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY):
            return f"Unknown match type {component.match_type}"
        seen.add(component.entity_type)
    if IP in seen and seen & {USER, CLIENT_ID}:
        return ("Invalid entity filter component combination, IP filter component should not "
                "be used with user or clientId filter component.")
    return None


def matches(entity: QuotaEntity, components: Sequence[FilterComponent], strict: bool) -> bool:
    """Whether ``entity`` passes every component (and, ``strict``, has no other type)."""
    names = dict(entity)
    if strict and len(names) != len(components):
        return False
    for component in components:
        if component.entity_type not in names:
            return False
        name = names[component.entity_type]
        if component.match_type == MATCH_EXACT and name != component.match:
            return False
        if component.match_type == MATCH_DEFAULT and name is not None:
            return False
    return True


def _name(node: str) -> str | None:
    return None if node == DEFAULT_ENTITY else layout.desanitize_entity(node)


def _values(path: str, data: bytes, keys: frozenset[str]) -> dict[str, float]:
    try:
        config = decode_entity_config(path, data)
    except CorruptMetadata as exc:
        log.warning("ignoring quota config: %s", exc)
        return {}
    out = {}
    for key, text in config.items():
        if key in keys:
            try:
                value = float(text)
            except ValueError:
                value = math.nan
            if math.isfinite(value):
                out[key] = value
            else:
                log.warning("ignoring quota %s=%r of %s: not a number", key, text[:40], path)
    return out


def read_quotas(metadata: MetadataClient) -> dict[QuotaEntity, dict[str, float]]:
    """Every quota entity of the store with its values (blocking; entities without a quota key
    are left out)."""
    coordinator, retry = metadata.coordinator, metadata.retry

    def children(path: str) -> list[str]:
        try:
            return sorted(retry(coordinator.children, path))
        except NoNode:
            return []

    wanted: list[tuple[QuotaEntity, str, frozenset[str]]] = []
    users = f"{layout.CONFIG}/users"
    for user in children(users):
        wanted.append((((USER, _name(user)),), f"{users}/{user}", CLIENT_QUOTA_KEYS))
        for client in children(f"{users}/{user}/clients"):
            wanted.append((((USER, _name(user)), (CLIENT_ID, _name(client))),
                           f"{users}/{user}/clients/{client}", CLIENT_QUOTA_KEYS))
    for client in children(f"{layout.CONFIG}/clients"):
        wanted.append((((CLIENT_ID, _name(client)),), f"{layout.CONFIG}/clients/{client}",
                       CLIENT_QUOTA_KEYS))
    for ip in children(f"{layout.CONFIG}/ips"):
        wanted.append((((IP, _name(ip)),), f"{layout.CONFIG}/ips/{ip}", IP_QUOTA_KEYS))
    found = retry(coordinator.get_many, [path for _, path, _ in wanted])
    out: dict[QuotaEntity, dict[str, float]] = {}
    for (entity, path, keys), item in zip(wanted, found, strict=True):
        values = _values(path, item[0], keys) if item is not None else {}
        if values:
            out[entity] = values
    return out


def describe_quotas(metadata: MetadataClient, components: Sequence[FilterComponent],
                    strict: bool) -> dict[QuotaEntity, dict[str, float]]:
    """The quota entities that pass the filter, with their values (blocking); the filter must
    have passed :func:`check_filter`."""
    return {entity: values for entity, values in read_quotas(metadata).items()
            if matches(entity, components, strict)}
