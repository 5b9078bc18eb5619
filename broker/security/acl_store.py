"""ACLs on the coordinator, as Kafka's ZooKeeper-mode AclAuthorizer stores them.

- LITERAL patterns at ``/kafka-acl/<Type>/<name>``, PREFIXED ones at
  ``/kafka-acl-extended/prefixed/<Type>/<name>`` (``<Type>`` as Kafka names it: ``Topic``,
  ``Group``, ``Cluster``, ``TransactionalId``), each node's data
  ``{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read",
  "host":"*"}]}``; a node left with no ACL is deleted.
- A change to a LITERAL pattern is announced by a sequential ``/kafka-acl-changes/acl_changes_<seq>``
  holding ``Topic:name``; to a PREFIXED one by ``/kafka-acl-extended-changes/acl_changes_<seq>``
  holding ``{"version":1,"resourceType":"Topic","name":"...","patternType":"PREFIXED"}``.

Writers update a node conditionally on its version (re-reading on a conflict, as Kafka's
``updateResourceAcls`` does), then announce the change. :class:`AclCache` reads everything at
start and re-reads each announced resource: the notification is only a trigger. The same paths
work on every backend (under the etcd prefix).
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable

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
from coordinator.base import Coordinator
from coordinator.config_changes import CHANGE_EXPIRATION_MS
from coordinator.errors import BadVersion, CoordinatorError, NodeExists, NoNode
from coordinator.model import ChildrenEvent, Watch

__all__ = [
    "ACL_CHANGE_PREFIX",
    "EXTENDED_ACL_CHANGES",
    "EXTENDED_ACL_ROOT",
    "LITERAL_ACL_CHANGES",
    "LITERAL_ACL_ROOT",
    "AclCache",
    "add_acls",
    "decode_acls",
    "delete_acls",
    "encode_acls",
    "pattern_path",
    "read_all",
]

log = logging.getLogger(__name__)

LITERAL_ACL_ROOT = "/kafka-acl"
EXTENDED_ACL_ROOT = "/kafka-acl-extended/prefixed"
LITERAL_ACL_CHANGES = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"
_STORED_TYPES = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                 ResourceType.TRANSACTIONAL_ID, ResourceType.DELEGATION_TOKEN, ResourceType.USER)


def _root(pattern_type: PatternType) -> str:
    return LITERAL_ACL_ROOT if pattern_type is PatternType.LITERAL else EXTENDED_ACL_ROOT


def pattern_path(pattern: ResourcePattern) -> str:
    if "/" in pattern.name:
        raise AclError(f"a resource name cannot hold '/': {pattern.name!r}")
    return f"{_root(pattern.pattern_type)}/{pattern.resource_type.label}/{pattern.name}"


def encode_acls(entries: Iterable[AclEntry]) -> bytes:
    acls = [{"principal": e.principal, "permissionType": e.permission.label,
             "operation": e.operation.label, "host": e.host}
            for e in sorted(entries, key=lambda e: (e.principal, e.host, e.operation, e.permission))]
    return json.dumps({"version": 1, "acls": acls}, separators=(",", ":")).encode()


def decode_acls(data: bytes) -> frozenset[AclEntry]:
    if not data:
        return frozenset()
    doc = json.loads(data)
    return frozenset(
        AclEntry(principal=a["principal"], host=a["host"],
                 operation=Operation.parse(a["operation"]),  # type: ignore[arg-type]
                 permission=Permission.parse(a["permissionType"]))  # type: ignore[arg-type]
        for a in doc.get("acls", []))


def _read(coordinator: Coordinator, pattern: ResourcePattern) -> tuple[frozenset[AclEntry], int]:
    """The entries of one pattern and its node's version (-1: no node)."""
    try:
        data, stat = coordinator.get(pattern_path(pattern))
    except NoNode:
        return frozenset(), -1
    return decode_acls(data), stat.version


def read_all(coordinator: Coordinator) -> dict[ResourcePattern, frozenset[AclEntry]]:
    """Every stored ACL by pattern."""
    out: dict[ResourcePattern, frozenset[AclEntry]] = {}
    for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
        for rtype in _STORED_TYPES:
            base = f"{_root(pattern_type)}/{rtype.label}"
            try:
                names = coordinator.children(base)
            except NoNode:
                continue
            nodes = coordinator.get_many([f"{base}/{n}" for n in names])
            for name, node in zip(names, nodes, strict=True):
                if node is None:
                    continue
                try:
                    pattern = ResourcePattern(resource_type=rtype, name=name, pattern_type=pattern_type)
                    entries = decode_acls(node[0])
                except (AclError, ValueError, KeyError, TypeError) as exc:
                    log.warning("ACL node %s/%s not read: %s", base, name, exc)
                    continue
                if entries:
                    out[pattern] = entries
    return out


def _notify(coordinator: Coordinator, pattern: ResourcePattern) -> None:
    if pattern.pattern_type is PatternType.LITERAL:
        path = f"{LITERAL_ACL_CHANGES}/{ACL_CHANGE_PREFIX}"
        data = f"{pattern.resource_type.label}:{pattern.name}".encode()
    else:
        path = f"{EXTENDED_ACL_CHANGES}/{ACL_CHANGE_PREFIX}"
        data = json.dumps({"version": 1, "resourceType": pattern.resource_type.label,
                           "name": pattern.name, "patternType": pattern.pattern_type.name},
                          separators=(",", ":")).encode()
    coordinator.create(path, data, sequential=True, make_parents=True)


def _update(coordinator: Coordinator, pattern: ResourcePattern,
            change: Callable[[frozenset[AclEntry]], frozenset[AclEntry]]) -> bool:
    """Apply ``change`` to the pattern's entries, conditionally on the node's version, retrying
    on a conflict; announces and returns True when the entries changed."""
    path = pattern_path(pattern)
    while True:
        current, version = _read(coordinator, pattern)
        wanted = change(current)
        if wanted == current:
            return False
        try:
            if not wanted:
                coordinator.delete(path, version)
            elif version < 0:
                coordinator.create(path, encode_acls(wanted), make_parents=True)
            else:
                coordinator.set(path, encode_acls(wanted), version)
        except (BadVersion, NodeExists, NoNode):
            continue
        _notify(coordinator, pattern)
        return True


def _adding(new: frozenset[AclEntry]) -> Callable[[frozenset[AclEntry]], frozenset[AclEntry]]:
    return lambda cur: cur | new


def _removing(gone: frozenset[AclEntry]) -> Callable[[frozenset[AclEntry]], frozenset[AclEntry]]:
    return lambda cur: cur - gone


def add_acls(coordinator: Coordinator, bindings: Iterable[AclBinding]) -> None:
    by_pattern: dict[ResourcePattern, set[AclEntry]] = {}
    for b in bindings:
        by_pattern.setdefault(b.pattern, set()).add(b.entry)
    for pattern, entries in by_pattern.items():
        _update(coordinator, pattern, _adding(frozenset(entries)))


def delete_acls(coordinator: Coordinator, flt: AclBindingFilter) -> list[AclBinding]:
    """Remove the ACLs ``flt`` matches; returns those removed."""
    removed: list[AclBinding] = []
    for pattern, entries in read_all(coordinator).items():
        if not flt.matches_pattern(pattern):
            continue
        gone = frozenset(e for e in entries if flt.matches_entry(e))
        if gone:
            _update(coordinator, pattern, _removing(gone))
            removed += [AclBinding(pattern=pattern, entry=e) for e in gone]
    return removed


def _change_number(name: str) -> int:
    suffix = name.removeprefix(ACL_CHANGE_PREFIX)
    return int(suffix) if suffix != name and suffix.isdigit() else -1


def _decode_change(root: str, data: bytes) -> ResourcePattern:
    text = data.decode()
    if root == LITERAL_ACL_CHANGES:
        rtype, _, name = text.partition(":")
        return ResourcePattern(resource_type=ResourceType.parse(rtype),  # type: ignore[arg-type]
                               name=name, pattern_type=PatternType.LITERAL)
    doc = json.loads(text)
    return ResourcePattern(resource_type=ResourceType.parse(doc["resourceType"]),  # type: ignore[arg-type]
                           name=doc["name"],
                           pattern_type=PatternType.parse(doc["patternType"]))  # type: ignore[arg-type]


class AclCache:
    """Every ACL, loaded at start and kept current by the change notifications (both roots):
    each new notification's resource is re-read. Thread-safe; :meth:`bindings` is a snapshot.
    Processed notifications older than ``expiration_ms`` (Kafka's 15 minutes; aged from when
    this cache first saw them, as :mod:`coordinator.config_changes` ages config changes) are
    deleted."""

    def __init__(self, coordinator: Coordinator, *,
                 clock: Callable[[], float] = time.monotonic,
                 expiration_ms: int = CHANGE_EXPIRATION_MS) -> None:
        self._clock = clock
        self._expiration_ms = expiration_ms
        self._first_seen: dict[str, float] = {}
        self._coordinator = coordinator
        self._lock = threading.Lock()
        self._acls: dict[ResourcePattern, frozenset[AclEntry]] = {}
        self._snapshot: tuple[AclBinding, ...] = ()
        self._last = {LITERAL_ACL_CHANGES: -1, EXTENDED_ACL_CHANGES: -1}
        self._watches: list[Watch] = []

    def start(self) -> AclCache:
        """Watch the notifications first, then read everything (no change falls between)."""
        for root in (LITERAL_ACL_CHANGES, EXTENDED_ACL_CHANGES):
            self._coordinator.ensure_path(root)
            self._watches.append(self._coordinator.watch_children(
                root, functools.partial(self._on_event, root)))
        acls = read_all(self._coordinator)
        with self._lock:
            self._acls = acls
            self._rebuild()
        return self

    def close(self) -> None:
        watches, self._watches = self._watches, []
        for w in watches:
            w.cancel()

    def bindings(self) -> tuple[AclBinding, ...]:
        return self._snapshot

    def _rebuild(self) -> None:
        self._snapshot = tuple(AclBinding(pattern=p, entry=e)
                               for p, entries in self._acls.items() for e in entries)

    def _on_event(self, root: str, event: ChildrenEvent) -> None:
        names = sorted((n for n in event.children or [] if _change_number(n) >= 0),
                       key=_change_number)
        try:
            for name in names:
                if _change_number(name) <= self._last[root]:
                    continue
                try:
                    data, _ = self._coordinator.get(f"{root}/{name}")
                    pattern = _decode_change(root, data)
                except NoNode:
                    pattern = None
                except (AclError, ValueError, KeyError, TypeError) as exc:
                    log.warning("ACL change %s/%s not understood: %s", root, name, exc)
                    pattern = None
                if pattern is not None:
                    entries, _ = _read(self._coordinator, pattern)
                    with self._lock:
                        if entries:
                            self._acls[pattern] = entries
                        else:
                            self._acls.pop(pattern, None)
                        self._rebuild()
                    log.info("ACLs of %s now %d", pattern, len(entries))
                self._last[root] = _change_number(name)
            self._purge(root, names)
        except CoordinatorError as exc:
            log.warning("ACL change notifications not processed: %s", exc)

    def _purge(self, root: str, names: list[str]) -> None:
        now = self._clock()
        present = {f"{root}/{n}" for n in names}
        for path in [p for p in self._first_seen if p.startswith(root + "/") and p not in present]:
            del self._first_seen[path]
        for name in names:
            path = f"{root}/{name}"
            first = self._first_seen.setdefault(path, now)
            if (_change_number(name) <= self._last[root]
                    and (now - first) * 1000 > self._expiration_ms):
                try:
                    self._coordinator.delete(path)
                except NoNode:
                    pass
                self._first_seen.pop(path, None)
