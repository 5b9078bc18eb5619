"""A broker's server in this process, for tests of the APIs' answers: a real replica manager
on a temporary log directory, told to lead or follow by the requests the controller would send
(no coordinator: the test is the controller), and the real server on a free loopback port, its
event loop on a thread of its own."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from broker.apis import ApiRegistry, BrokerServices, default_registry
from broker.config import BrokerConfig, Listener
from broker.fetch_sessions import FetchSessionCache
from broker.groups import GroupCoordinator
from broker.metadata_cache import MetadataCache
from broker.purgatory import Purgatory
from broker.server import KafkaServer
from coordinator.clock import SYSTEM_CLOCK
from interbroker.requests import (
    Endpoint,
    LeaderAndIsrPartition,
    LeaderAndIsrRequest,
    LiveBroker,
    UpdateMetadataPartition,
    UpdateMetadataRequest,
)
from replication.protocol import FetchEndpoint
from replication.replica_manager import ReplicaManager

__all__ = ["InProcessBroker"]

BROKER_ID = 1


class InProcessBroker:
    """``registry`` replaces the APIs served (default: every one); ``transport`` is where
    the replica manager's followers fetch from (default: nowhere)."""

    def __init__(self, log_dir: Path, *, broker_id: int = BROKER_ID,
                 registry: ApiRegistry | None = None,
                 transport: Mapping[int, FetchEndpoint] | None = None,
                 **settings: object) -> None:
        self.broker_id = broker_id
        self.config = BrokerConfig(
            broker_id=broker_id, coordinator_url="memory://unused",
            listeners=(Listener(name="PLAINTEXT", host="127.0.0.1", port=0),),
            log_dir=log_dir, **settings)  # type: ignore[arg-type]
        rc = self.config.replica_config()
        self.replica_manager = ReplicaManager(broker_id, log_dir, None, SYSTEM_CLOCK, rc,
                                              transport=transport)
        self.replica_manager.start()
        self.metadata = MetadataCache()
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.purgatory = Purgatory(self.loop)
        self.registry = registry if registry is not None else default_registry()
        self.server = KafkaServer(self.config.listeners, self.registry,
                                  max_request_bytes=self.config.socket_request_max_bytes)
        ports = self._run(self.server.bind())
        self.port = ports["PLAINTEXT"]
        self.groups = GroupCoordinator(broker_id, self.replica_manager, self.metadata,
                                       self.purgatory, self.loop, self.config.groups)
        self.loop.call_soon_threadsafe(self.groups.manager.start)
        # consumers get sessions too here, so the protocol tests reach every rule with a
        # consumer's fetch (the broker process opens them for followers only)
        self.fetch_sessions = FetchSessionCache(
            self.config.max_incremental_fetch_session_cache_slots, consumers=True)
        self.server.services = BrokerServices(
            broker_id=broker_id, config=self.config, replica_manager=self.replica_manager,
            metadata=self.metadata, purgatory=self.purgatory, loop=self.loop,
            cluster_id="test-cluster", registry=self.registry, groups=self.groups,
            fetch_sessions=self.fetch_sessions)
        self._run(self.server.start_serving())
        self._controller_epoch = 1
        self._live = {broker_id}

    @property
    def address(self) -> tuple[str, int]:
        return "127.0.0.1", self.port

    def _run(self, coro):  # noqa: ANN001, ANN202
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def set_partition(self, topic: str, partition: int, *, leader: int | None = None,
                      leader_epoch: int = 0, replicas: Sequence[int] | None = None,
                      isr: Sequence[int] | None = None, partition_epoch: int = 0,
                      topic_id: str | None = None) -> None:
        """What the controller would send: LeaderAndIsr to this broker, then UpdateMetadata
        (``topic_id``: the topic's id in Kafka's text form, if it has one)."""
        me = self.broker_id
        leader = me if leader is None else leader
        replicas = (me,) if replicas is None else tuple(replicas)
        isr = tuple(replicas if isr is None else isr)
        if me in replicas:  # the controller tells the replicas only
            entry = LeaderAndIsrPartition(topic, partition, self._controller_epoch, leader,
                                          leader_epoch, isr, partition_epoch, tuple(replicas))
            response = self.replica_manager.handle_leader_and_isr(LeaderAndIsrRequest(
                controller_id=me, controller_epoch=self._controller_epoch,
                broker_epoch=-1, partitions=(entry,),
                topic_ids={topic: topic_id} if topic_id else {}))
            assert response.ok, response
        self._live.update(replicas)
        brokers = tuple(
            LiveBroker(id=b, endpoints=(Endpoint(listener="PLAINTEXT", host="127.0.0.1",
                                                 port=self.port + b - me),))
            for b in sorted(self._live))
        self.metadata.update(UpdateMetadataRequest(
            controller_id=me, controller_epoch=self._controller_epoch, broker_epoch=-1,
            partitions=(UpdateMetadataPartition(topic, partition, self._controller_epoch,
                                                leader, leader_epoch, isr, partition_epoch,
                                                tuple(replicas)),),
            live_brokers=brokers))
        self.purgatory.wake_threadsafe()
        self.groups.manager.leadership_changed()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.groups.manager.stop)
        self._run(self.server.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()
        self.replica_manager.shutdown()
