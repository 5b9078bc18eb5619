"""One in-process broker (a :class:`ClusterBroker`) per coordinator backend, shared by a test
module: memory, ZooKeeper and etcd, each in a namespace of its own; and the requests the admin
API tests send."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from .cluster_harness import ClusterBroker

BACKENDS = ["memory", "zookeeper", "etcd"]

__all__ = ["BACKENDS", "backend_url", "start_cluster", "topic_name", "wait_serving"]


def topic_name(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def backend_url(request: pytest.FixtureRequest, kind: str) -> str:
    if kind == "memory":
        return f"memory://admin-{uuid.uuid4().hex[:12]}"
    server = request.getfixturevalue(f"{kind}_server")
    return server.url(f"/admin-{uuid.uuid4().hex[:10]}")


def wait_serving(broker: ClusterBroker, timeout: float = 30.0) -> None:
    """Until the broker is the controller and its cache lists it (the first UpdateMetadata)."""
    deadline = time.monotonic() + timeout
    while True:
        controller = broker.node.controller
        snap = broker.metadata.snapshot
        if controller is not None and controller.active and broker.config.broker_id in \
                snap.brokers:
            return
        if time.monotonic() > deadline:
            raise AssertionError("the broker did not become controller")
        time.sleep(0.02)


def start_cluster(request: pytest.FixtureRequest, tmp: Path, extra: str = ""
                  ) -> Iterator[ClusterBroker]:
    broker = ClusterBroker(backend_url(request, request.param), tmp / "logs", extra=extra)
    try:
        wait_serving(broker)
        yield broker
    finally:
        broker.close()
