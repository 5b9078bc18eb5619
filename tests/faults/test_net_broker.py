"""A smoke test of what the fault harness stands on: ZooKeeper in one host, a broker process
(``partctl broker start``) in another, a client in a third, all in network namespaces. The broker
registers and serves; isolated, its ZooKeeper session expires and its registration goes; healed,
it registers again and serves."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from kazoo.client import KazooClient

from broker.cluster import launch_broker
from coordinator.servers import ServerNotInstalled, start_zookeeper
from tests.faults.net import Host, Network, unavailable_reason
from tests.servers import unavailable

SESSION_MS = 2000


def registered(client: Host, zookeeper: str) -> Callable[[], list[str]]:
    """A function that reads /brokers/ids through a ZooKeeper client in ``client``."""
    def read() -> list[str]:
        zk = KazooClient(hosts=zookeeper, timeout=5)
        zk.start(timeout=5)
        try:
            return sorted(zk.get_children("/brokers/ids")) if zk.exists("/brokers/ids") else []
        finally:
            zk.stop()
            zk.close()
    return lambda: client.call(read)


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout:.0f}s: {what}")
        time.sleep(0.2)


def brokers_in_metadata(client: Host, bootstrap: str) -> set[int]:
    def read() -> set[int]:
        admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 3000})
        return set(admin.list_topics(timeout=5).brokers)
    return client.call(read)


@pytest.mark.servers
def test_an_isolated_broker_loses_its_session_and_registers_again_after_heal(
        tmp_path: Path) -> None:
    reason = unavailable_reason()
    if reason is not None:
        unavailable(reason)
    with Network() as net:
        zk_host, broker_host, client = (net.add_host(n) for n in ("zk", "broker", "client"))
        try:
            zk = zk_host.call(start_zookeeper, fsync=False, host=zk_host.address)
        except ServerNotInstalled as exc:
            unavailable(str(exc))
        try:
            assert "Mode: standalone" in zk_host.call(zk.four_letter, "srvr")
            ids = registered(client, zk.address)
            broker = broker_host.call(
                launch_broker, tmp_path / "broker1", 1, zk.url(),
                extra={"listeners": f"PLAINTEXT://{broker_host.address}:9092",
                       "zookeeper.session.timeout.ms": str(SESSION_MS)})
            try:
                broker.wait_serving(60)
                bootstrap = f"{broker_host.address}:9092"
                wait_for(lambda: ids() == ["1"], 15, "broker 1 registered")
                assert brokers_in_metadata(client, bootstrap) == {1}
                with net.isolate(broker_host):
                    wait_for(lambda: ids() == [], 15, "broker 1's registration expired")
                    assert broker.running()
                wait_for(lambda: ids() == ["1"], 20, "broker 1 registered again")
                assert brokers_in_metadata(client, bootstrap) == {1}
                assert broker.running()
            finally:
                broker.kill()
        finally:
            zk.stop()
