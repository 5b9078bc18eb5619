"""Coordinator URLs: ``memory://NAME``, ``zookeeper://h1:p1,h2:p2/chroot``, ``etcd://h:p/prefix``."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from coordinator.errors import InvalidURL

if TYPE_CHECKING:
    from coordinator.base import Coordinator

# scheme -> (module, class, default port); backends are imported lazily, only when used.
BACKENDS: dict[str, tuple[str, str, int | None]] = {
    "memory": ("coordinator.memory", "MemoryCoordinator", None),
    "zookeeper": ("coordinator.zookeeper", "ZooKeeperCoordinator", 2181),
    "zk": ("coordinator.zookeeper", "ZooKeeperCoordinator", 2181),
    "etcd": ("coordinator.etcd", "EtcdCoordinator", 2379),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class CoordinatorURL:
    """A parsed URL. ``hosts`` are (host, port) pairs in failover order; ``name`` is the memory
    store's name; ``root`` the chroot (ZooKeeper) or key prefix (etcd), '' for none."""

    scheme: str
    hosts: tuple[tuple[str, int], ...]
    name: str
    root: str
    raw: str


def parse(url: str) -> CoordinatorURL:
    if not isinstance(url, str) or "://" not in url:
        raise InvalidURL(f"not a coordinator URL (want scheme://...): {url!r}")
    scheme, rest = url.split("://", 1)
    scheme = scheme.lower()
    if scheme not in BACKENDS:
        known = ", ".join(sorted(BACKENDS))
        raise InvalidURL(f"unknown coordinator scheme {scheme!r} in {url!r} (known: {known})")
    netloc, _, path = rest.partition("/")
    root = ("/" + path).rstrip("/") if path else ""
    if "?" in rest or "#" in rest:
        raise InvalidURL(f"query and fragment are not supported in {url!r}")
    if scheme == "memory":
        if not netloc or "," in netloc or ":" in netloc:
            raise InvalidURL(f"memory URL needs a store name, memory://NAME: {url!r}")
        return CoordinatorURL(scheme=scheme, hosts=(), name=netloc, root=root, raw=url)
    default_port = BACKENDS[scheme][2]
    hosts = []
    for item in netloc.split(","):
        item = item.strip()
        if not item:
            raise InvalidURL(f"empty host in {url!r}")
        host, sep, port_text = item.rpartition(":") if ":" in item else (item, "", "")
        if not sep:
            host, port_text = item, ""
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if not host or any(c in host for c in " /@"):
            raise InvalidURL(f"bad host {item!r} in {url!r}")
        if port_text:
            if not port_text.isdigit() or not 0 < int(port_text) < 65536:
                raise InvalidURL(f"bad port {port_text!r} in {url!r}")
            port = int(port_text)
        else:
            assert default_port is not None
            port = default_port
        hosts.append((host, port))
    if root:
        from coordinator.paths import validate

        try:
            validate(root)
        except Exception as exc:
            raise InvalidURL(f"bad root path {root!r} in {url!r}") from exc
    return CoordinatorURL(scheme=scheme, hosts=tuple(hosts), name="", root=root, raw=url)


def connect(url: str, **options: Any) -> Coordinator:
    """Open a session on the coordinator named by ``url``.

    Options common to every backend: ``timeout`` (seconds to connect before giving up with
    :class:`~coordinator.errors.ConnectionFailed`, default 10) and ``session_timeout`` (seconds a
    session outlives a lost connection, default 10). Backends take a few more of their own.
    """
    parsed = parse(url)
    module_name, class_name, _ = BACKENDS[parsed.scheme]
    cls = getattr(importlib.import_module(module_name), class_name)
    return cls.from_url(parsed, **options)
