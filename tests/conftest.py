"""Session-wide fixtures: the real servers, started once per test run and stopped at the end."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.servers import Server, start_etcd, start_zookeeper


@pytest.fixture(scope="session")
def zookeeper_server() -> Iterator[Server]:
    server = start_zookeeper()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def etcd_server() -> Iterator[Server]:
    server = start_etcd()
    yield server
    server.stop()
