"""Replica managers behind real Kafka servers on loopback ports, for the replication scenarios
run over the network transport: followers then reach their leaders through
:class:`broker.fetch_client.NetworkTransport` (Kafka's Fetch and OffsetsForLeaderEpoch on a
socket) instead of calling the leader's replica manager. The controller's side stays in process
(the tests play it, or an embedded cluster runs it).

One event loop on a thread of its own serves every broker; each broker gets a server of its own
(its listener on 127.0.0.1, a free port), with an empty metadata cache and its own purgatory,
woken by every append to its replica manager so that parked follower fetches see appends made
in process (the scenarios produce by calling the replica manager)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping
from typing import Any

from broker.apis import BrokerServices, default_registry
from broker.config import BrokerConfig, Listener
from broker.fetch_client import NetworkTransport
from broker.metadata_cache import MetadataCache
from broker.purgatory import Purgatory
from broker.server import KafkaServer
from replication.protocol import FetchEndpoint
from replication.replica_manager import ReplicaManager

__all__ = ["IN_PROCESS", "NETWORK", "TRANSPORTS", "LoopbackServers"]

IN_PROCESS = "in-process"
NETWORK = "network"
TRANSPORTS = (IN_PROCESS, NETWORK)


class _Served:
    __slots__ = ("address", "purgatory", "replica_manager", "server")

    def __init__(self, replica_manager: ReplicaManager, server: KafkaServer,
                 purgatory: Purgatory, address: tuple[str, int]) -> None:
        self.replica_manager = replica_manager
        self.server = server
        self.purgatory = purgatory
        self.address = address


class LoopbackServers:
    """Broker id -> a Kafka server in front of that broker's current replica manager."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="loopback-servers",
                                        daemon=True)
        self._thread.start()
        self._served: dict[int, _Served] = {}
        self._lock = threading.Lock()
        self._transports: list[NetworkTransport] = []

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def serve(self, broker_id: int, replica_manager: ReplicaManager) -> tuple[str, int]:
        """Put ``replica_manager`` behind a new server (replacing the broker's old one)."""
        self.stop(broker_id)
        config = BrokerConfig(broker_id=broker_id, coordinator_url="memory://unused",
                              listeners=(Listener(name="PLAINTEXT", host="127.0.0.1", port=0),),
                              log_dir=replica_manager.log_dir)
        registry = default_registry()
        server = KafkaServer(config.listeners, registry,
                             max_request_bytes=config.socket_request_max_bytes)
        port = self._run(server.bind())["PLAINTEXT"]
        purgatory = Purgatory(self.loop)
        server.services = BrokerServices(
            broker_id=broker_id, config=config, replica_manager=replica_manager,
            metadata=MetadataCache(), purgatory=purgatory, loop=self.loop, cluster_id=None,
            registry=registry)
        self._run(server.start_serving())
        replica_manager.add_append_listener(purgatory.wake_threadsafe)
        served = _Served(replica_manager, server, purgatory, ("127.0.0.1", port))
        with self._lock:
            self._served[broker_id] = served
        return served.address

    def address(self, broker_id: int) -> tuple[str, int] | None:
        """Where ``broker_id`` is served, while its replica manager runs."""
        with self._lock:
            served = self._served.get(broker_id)
        if served is None or not served.replica_manager.running:
            return None
        return served.address

    def transport(self, replica_id: int, *, max_wait_ms: int = 0,
                  addresses: Callable[[int], tuple[str, int] | None] | None = None,
                  ) -> Mapping[int, FetchEndpoint]:
        """The network transport of follower ``replica_id`` (closed with the servers)."""
        transport = NetworkTransport(replica_id, addresses or self.address,
                                     max_wait_ms=max_wait_ms, request_timeout_ms=10_000)
        self._transports.append(transport)
        return transport

    def stop(self, broker_id: int) -> None:
        with self._lock:
            served = self._served.pop(broker_id, None)
        if served is None:
            return
        served.replica_manager.remove_append_listener(served.purgatory.wake_threadsafe)
        self.loop.call_soon_threadsafe(served.purgatory.complete_all)
        self._run(served.server.close())

    def close(self) -> None:
        for transport in self._transports:
            transport.close()
        for broker_id in list(self._served):
            self.stop(broker_id)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()
