"""A broker as a broker process composes it, in this process: a real :class:`BrokerNode` on a
coordinator (memory, ZooKeeper or etcd), registered and standing for controller, its replica
manager behind the handler that keeps the metadata cache, and the real server on a free
loopback port with its event loop on a thread of its own. For the admin APIs, which need the
coordinator, the controller and the cache together; the test can also reach into each."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path

from broker.apis import BrokerServices, default_registry
from broker.config import parse_config
from broker.fetch_client import NetworkTransport, broker_fetch_transport
from broker.metadata_cache import MetadataCache, ObservingHandler
from broker.process import registration
from broker.purgatory import Purgatory
from broker.server import KafkaServer
from coordinator.admin import Admin
from interbroker.channel import RequestHandler
from interbroker.requests import LiveBroker
from node.broker_node import BrokerNode
from replication.config import ReplicaConfig
from replication.protocol import FetchEndpoint
from statemachines.in_process import InProcessNetwork

__all__ = ["ClusterBroker", "LiveEndpoints"]


class LiveEndpoints(Mapping[int, FetchEndpoint]):
    """Broker id -> the replica manager its followers fetch from, over the brokers added."""

    def __init__(self) -> None:
        self.nodes: dict[int, BrokerNode] = {}

    def __getitem__(self, broker_id: int) -> FetchEndpoint:
        node = self.nodes.get(broker_id)
        if node is None or not node.running or node.replica_manager is None:
            raise KeyError(broker_id)
        return node.replica_manager

    def __iter__(self) -> Iterator[int]:
        return iter([b for b, n in list(self.nodes.items()) if n.running])

    def __len__(self) -> int:
        return sum(1 for n in list(self.nodes.values()) if n.running)


class ClusterBroker:
    def __init__(self, url: str, log_dir: Path, *, broker_id: int = 1,
                 network: InProcessNetwork | None = None, extra: str = "",
                 transport: Mapping[int, FetchEndpoint] | None = None,
                 replica_config: ReplicaConfig | None = None,
                 fetch_over_network: bool = False) -> None:
        """``extra``: server.properties lines added to the ones that place the broker;
        ``network`` and ``transport`` are shared with other brokers of this process (the
        controller's requests, the followers' fetches); with ``fetch_over_network`` the
        followers fetch over Kafka's protocol instead, through the transport a broker process
        builds (the leaders found in the controller's requests)."""
        self.config = parse_config(
            f"broker.id={broker_id}\npartctl.coordinator={url}\n"
            f"listeners=PLAINTEXT://127.0.0.1:0\nlog.dirs={log_dir}\n" + extra).config
        self.metadata = MetadataCache()
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.purgatory = Purgatory(self.loop)
        self.registry = default_registry()
        self.server = KafkaServer(self.config.listeners, self.registry,
                                  max_request_bytes=self.config.socket_request_max_bytes)
        ports = self._run(self.server.bind())
        self.port = ports["PLAINTEXT"]

        def wrap(handler: RequestHandler) -> RequestHandler:
            return ObservingHandler(handler, self.metadata, self.purgatory.wake_threadsafe)

        self.fetch_transport: NetworkTransport | None = None
        if fetch_over_network:
            transport = self.fetch_transport = broker_fetch_transport(
                self.config, [self._live_leaders, lambda: self.metadata.snapshot.brokers])
        self.node = BrokerNode(
            url, broker_id, log_dir, network=network or InProcessNetwork(),
            transport=transport if transport is not None else {},
            replica_config=replica_config or self.config.replica_config(),
            controller_config=self.config.controller_config(),
            connect_options={"timeout": 10.0, "session_timeout": 6.0},
            registration=registration(self.config, ports), wrap_handler=wrap)
        self.node.start()
        node = self.node
        assert node.coordinator is not None and node.replica_manager is not None
        assert node.participant is not None
        self.admin = Admin(node.coordinator)
        self.server.services = BrokerServices(
            broker_id=broker_id, config=self.config, replica_manager=node.replica_manager,
            metadata=self.metadata, purgatory=self.purgatory, loop=self.loop,
            cluster_id=node.participant.cluster_id, registry=self.registry, admin=self.admin,
            controller=lambda: node.controller, producer_ids=node.producer_ids)
        self._run(self.server.start_serving())

    def _live_leaders(self) -> Mapping[int, LiveBroker]:
        rm = self.node.replica_manager if hasattr(self, "node") else None
        return rm.live_brokers if rm is not None else {}

    @property
    def address(self) -> tuple[str, int]:
        return "127.0.0.1", self.port

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _run(self, coro):  # noqa: ANN001, ANN202
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def close(self) -> None:
        self._run(self.server.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()
        if self.fetch_transport is not None:
            self.fetch_transport.close()
        self.node.shutdown()
