"""Who may do what on the cluster page: the Host allow-list, the slowing of failed logins, and
each action's ACL check.

- **Host allow-list** (DNS rebinding): a page served on 127.0.0.1 can be reached by a site whose
  name its owner re-points at 127.0.0.1; the browser then sends that site's name as ``Host``.
  Every request whose ``Host`` is not one the server answers for is refused (421).
- **Failed logins** are slowed per client address: each failure from an address is answered
  after a delay that doubles with the failures in a row (``base``, 2 x ``base``, ... at most
  ``most`` seconds), and that address's next attempt waits for it; other addresses are not
  held up (every request has its own thread). A success, or ``forget`` seconds without a
  failure, starts the count again; at most ``max_clients`` addresses are remembered.
- **Actions are authorized as the brokers authorize the Kafka APIs that do the same**: a
  preferred election is ElectLeaders and a reassignment's cancellation
  AlterPartitionReassignments, both Alter on the Cluster resource. The decision is Kafka's
  AclAuthorizer (:func:`broker.security.acls.authorize`) over the Cluster ACLs the coordinator
  holds, for the principal ``User:<login>`` from the client's address: a super user
  (``--super-users``, Kafka's ``super.users``) may; a matching DENY refuses; with no ACL on the
  Cluster, ``--allow-everyone-if-no-acl-found`` (Kafka's ``allow.everyone.if.no.acl.found``,
  false by default) decides; else an ALLOW of Alter (or All) is needed.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from broker.security.acl_store import decode_acls, pattern_path
from broker.security.acls import (
    CLUSTER_NAME,
    AclBinding,
    Operation,
    ResourcePattern,
    ResourceType,
    authorize,
)
from coordinator.errors import NoNode

__all__ = ["ACTIONS", "ActionRule", "LoginThrottle", "allowed_hosts", "cluster_bindings",
           "host_allowed", "may"]

CLUSTER = ResourcePattern(resource_type=ResourceType.CLUSTER, name=CLUSTER_NAME)


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionRule:
    """What an action of the page needs: the Kafka API doing the same, and its ACL."""

    api: str
    operation: Operation
    resource_type: ResourceType = ResourceType.CLUSTER
    name: str = CLUSTER_NAME


ACTIONS = {
    "/actions/elect-preferred": ActionRule(api="ElectLeaders", operation=Operation.ALTER),
    "/actions/cancel-reassignment": ActionRule(api="AlterPartitionReassignments",
                                               operation=Operation.ALTER),
}
"""Every action of the page and its rule (an action without one is not served)."""


def cluster_bindings(client: object) -> tuple[AclBinding, ...]:
    """The ACLs of the Cluster resource, as the coordinator holds them (Kafka's layout)."""
    try:
        data, _ = client.get(pattern_path(CLUSTER))  # type: ignore[attr-defined]
    except NoNode:
        return ()
    return tuple(AclBinding(pattern=CLUSTER, entry=e) for e in decode_acls(data))


def may(bindings: Iterable[AclBinding], rule: ActionRule, *, user: str, host: str,
        super_users: frozenset[str], allow_if_no_acls: bool) -> bool:
    """Whether ``User:<user>`` from ``host`` may do what ``rule`` needs (AclAuthorizer)."""
    return authorize(bindings, principal=f"User:{user}", host=host, operation=rule.operation,
                     resource_type=rule.resource_type, name=rule.name,
                     super_users=super_users, allow_if_no_acls=allow_if_no_acls)


# --- the Host header ----------------------------------------------------------------------------


def _split(host: str, default_port: int) -> tuple[str, int] | None:
    """``name[:port]`` or ``[v6][:port]`` as (lower-case name, port); None when malformed."""
    text = host.strip().lower()
    if text.startswith("["):
        name, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            return None
        port_text = rest[1:]
    else:
        name, _, port_text = text.partition(":")
    if not name:
        return None
    if not port_text:
        return name, default_port
    if not port_text.isdigit() or int(port_text) > 65535:
        return None
    return name, int(port_text)


def allowed_hosts(names: Iterable[str], bound: tuple[str, int]) -> frozenset[tuple[str, int]]:
    """The (name, port) pairs the server answers for: each of ``names`` (``NAME[:PORT]``, the
    served port unless one is given), or by default the address it listens on, ``localhost``
    and ``127.0.0.1`` at its port (``[::1]`` too when it listens on an IPv6 address)."""
    host, port = bound
    given = list(names)
    if not given:
        given = ["localhost", "127.0.0.1"]
        if host not in ("", "0.0.0.0", "::"):
            given.append(f"[{host}]" if ":" in host else host)
        if ":" in host:
            given.append("[::1]")
    out = set()
    for name in given:
        split = _split(name, port)
        if split is None:
            raise ValueError(f"--allowed-host {name!r}: want NAME or NAME:PORT")
        out.add(split)
    return frozenset(out)


def host_allowed(header: str | None, allowed: frozenset[tuple[str, int]]) -> bool:
    """Whether a request's ``Host`` header names a host and port the server answers for (a
    Host without a port is port 80, as HTTP says)."""
    if not header:
        return False
    split = _split(header, 80)
    return split is not None and split in allowed


# --- failed logins ------------------------------------------------------------------------------


@dataclass(slots=True)
class _Client:
    lock: threading.Lock = field(default_factory=threading.Lock)
    failures: int = 0
    last: float = 0.0
    waiting: int = 0


class LoginThrottle:
    """Slows failed logins per client address (see the module's docstring)."""

    def __init__(self, *, base: float = 0.5, most: float = 8.0, forget: float = 600.0,
                 max_clients: int = 10_000, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.base, self.most, self.forget = base, most, forget
        self.max_clients = max_clients
        self._clock, self._sleep = clock, sleep
        self._clients: OrderedDict[str, _Client] = OrderedDict()
        self._lock = threading.Lock()

    def delay(self, failures: int) -> float:
        """Seconds a failure answers after, the ``failures``-th in a row."""
        if failures <= 0 or self.base <= 0:
            return 0.0
        return min(self.most, self.base * 2 ** min(failures - 1, 32))

    def _client(self, address: str) -> _Client:
        with self._lock:
            client = self._clients.get(address)
            if client is None:
                client = self._clients[address] = _Client()
                while len(self._clients) > self.max_clients:  # the oldest idle one goes
                    idle = next((a for a, c in self._clients.items()
                                 if c.waiting == 0 and a != address), None)
                    if idle is None:
                        break
                    del self._clients[idle]
            self._clients.move_to_end(address)
            client.waiting += 1
            return client

    def check(self, address: str, verify: Callable[[], bool]) -> bool:
        """``verify()`` for a login from ``address``, one at a time per address; a failure
        answers after :meth:`delay` (and holds the address's next attempt as long)."""
        client = self._client(address)
        try:
            with client.lock:
                now = self._clock()
                if client.failures and now - client.last > self.forget:
                    client.failures = 0
                if verify():
                    client.failures = 0
                    return True
                client.failures += 1
                client.last = now
                self._sleep(self.delay(client.failures))
                return False
        finally:
            with self._lock:
                client.waiting -= 1
