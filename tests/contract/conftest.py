"""The backends the contract suite runs over, each with real fault injection.

One harness per backend: ``connect()`` opens a session in a namespace of its own (a chroot on
ZooKeeper, a key prefix on etcd, a fresh named store in memory), ``expire(client)`` makes the
server end the session, ``drop(client)`` cuts the connection so the client must reconnect.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import coordinator
from coordinator import Coordinator
from tests.proxy import TcpProxy
from tests.servers import Server, free_port


class Harness:
    name = "base"

    def __init__(self) -> None:
        self.namespace = "/t" + uuid.uuid4().hex[:12]
        self.clients: list[Coordinator] = []
        self.proxies: dict[int, TcpProxy] = {}

    def url(self, proxy: TcpProxy | None = None) -> str:
        raise NotImplementedError

    def connect(self, *, proxied: bool = False, **options: Any) -> Coordinator:
        options.setdefault("timeout", 10.0)
        options.setdefault("session_timeout", 4.0)
        proxy = self._proxy() if proxied else None
        client = coordinator.connect(self.url(proxy), **options)
        self.clients.append(client)
        if proxy is not None:
            self.proxies[id(client)] = proxy
        return client

    def _proxy(self) -> TcpProxy:
        raise NotImplementedError

    def expire(self, client: Coordinator) -> None:
        raise NotImplementedError

    def drop(self, client: Coordinator, down_for: float = 0.3) -> None:
        """Cut the client's connection; keep it down ``down_for`` seconds, then let it back."""
        proxy = self.proxies[id(client)]
        proxy.hold()
        time.sleep(down_for)
        proxy.release()

    def unreachable_url(self) -> str:
        raise NotImplementedError

    def failover_url(self) -> str:
        """A URL whose first host is dead and whose second is the live server."""
        raise NotImplementedError

    def close(self) -> None:
        for client in self.clients:
            try:
                client.close()
            except Exception:
                pass
        for proxy in self.proxies.values():
            proxy.close()


class MemoryHarness(Harness):
    name = "memory"

    def __init__(self) -> None:
        super().__init__()
        self.store = "contract-" + uuid.uuid4().hex[:12]

    def url(self, proxy: TcpProxy | None = None) -> str:
        return f"memory://{self.store}"

    def connect(self, *, proxied: bool = False, **options: Any) -> Coordinator:
        options.setdefault("session_timeout", 4.0)
        client = coordinator.connect(self.url(), **options)
        self.clients.append(client)
        return client

    def expire(self, client: Coordinator) -> None:
        client.expire_session()  # type: ignore[attr-defined]

    def drop(self, client: Coordinator, down_for: float = 0.3) -> None:
        client.suspend()  # type: ignore[attr-defined]
        time.sleep(down_for)
        client.resume()  # type: ignore[attr-defined]


class ZooKeeperHarness(Harness):
    name = "zookeeper"

    def __init__(self, server: Server) -> None:
        super().__init__()
        self.server = server
        from kazoo.client import KazooClient

        root = KazooClient(hosts=server.address)
        root.start(timeout=10)
        root.ensure_path(self.namespace)
        root.stop()
        root.close()

    def url(self, proxy: TcpProxy | None = None) -> str:
        address = proxy.address if proxy is not None else self.server.address
        return f"zookeeper://{address}{self.namespace}"

    def _proxy(self) -> TcpProxy:
        return TcpProxy(self.server.host, self.server.port)

    def expire(self, client: Coordinator) -> None:
        """A second client with the same session id and password, closed: the server ends it."""
        from kazoo.client import KazooClient

        kazoo = client.kazoo  # type: ignore[attr-defined]
        session_id, password = kazoo.client_id
        twin = KazooClient(hosts=self.server.address, client_id=(session_id, password))
        twin.start(timeout=10)
        twin.stop()
        twin.close()

    def unreachable_url(self) -> str:
        return f"zookeeper://127.0.0.1:{free_port()}"

    def failover_url(self) -> str:
        return f"zookeeper://127.0.0.1:{free_port()},{self.server.address}{self.namespace}"


class EtcdHarness(Harness):
    name = "etcd"

    def __init__(self, server: Server) -> None:
        super().__init__()
        self.server = server

    def url(self, proxy: TcpProxy | None = None) -> str:
        address = proxy.address if proxy is not None else self.server.address
        return f"etcd://{address}{self.namespace}"

    def _proxy(self) -> TcpProxy:
        return TcpProxy(self.server.host, self.server.port)

    def expire(self, client: Coordinator) -> None:
        """Revoke the session's lease from another client: the server deletes its keys."""
        import etcd3

        raw = etcd3.client(host=self.server.host, port=self.server.port)
        try:
            raw.revoke_lease(client.session_id)
        finally:
            raw.close()

    def unreachable_url(self) -> str:
        return f"etcd://127.0.0.1:{free_port()}"

    def failover_url(self) -> str:
        return f"etcd://127.0.0.1:{free_port()},{self.server.address}{self.namespace}"


BACKENDS = ["memory", "zookeeper", "etcd"]
NETWORK_BACKENDS = ["zookeeper", "etcd"]


def _harness(request: pytest.FixtureRequest) -> Harness:
    if request.param == "memory":
        return MemoryHarness()
    if request.param == "zookeeper":
        return ZooKeeperHarness(request.getfixturevalue("zookeeper_server"))
    return EtcdHarness(request.getfixturevalue("etcd_server"))


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[Harness]:
    harness = _harness(request)
    yield harness
    harness.close()


@pytest.fixture(params=NETWORK_BACKENDS)
def network_backend(request: pytest.FixtureRequest) -> Iterator[Harness]:
    """Backends with servers and hosts: unreachable servers and host failover apply to them."""
    harness = _harness(request)
    yield harness
    harness.close()


@pytest.fixture
def client(backend: Harness) -> Coordinator:
    return backend.connect()


@pytest.fixture
def other(backend: Harness) -> Coordinator:
    """A second session on the same namespace."""
    return backend.connect()
