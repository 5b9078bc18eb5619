"""Session-wide fixtures: the real servers (ZooKeeper, etcd, PostgreSQL), started once per test
run (per worker, under pytest-xdist, each with its own range of ports) and stopped at the end;
and the long tier: tests marked ``long`` (the longer variants of tests whose short form runs
every time) are deselected unless ``PARTCTL_LONG_TESTS=1``."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from coordinator.servers import PORT_RANGE
from tests.postgres_server import PostgresServer
from tests.servers import Server, start_etcd, start_postgres, start_zookeeper

_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
if _WORKER.startswith("gw") and PORT_RANGE not in os.environ:
    # each pytest-xdist worker picks the ports of its servers from a range of its own, below
    # the kernel's ephemeral ports: a port one worker picked is never another's meanwhile
    _low = 10_000 + 5_000 * (int(_WORKER[2:]) % 4)
    os.environ[PORT_RANGE] = f"{_low}-{_low + 4_999}"


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


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL of the tests' own (initdb in a temporary directory, a free loopback port),
    never a server the machine runs."""
    server = start_postgres()
    yield server
    server.stop()


LONG_TESTS = "PARTCTL_LONG_TESTS"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave out the ``long`` tier unless ``PARTCTL_LONG_TESTS=1`` asks for it (shown as
    deselected in the summary, never as passed)."""
    if os.environ.get(LONG_TESTS) == "1":
        return
    long = [item for item in items if item.get_closest_marker("long") is not None]
    if long:
        config.hook.pytest_deselected(items=long)
        items[:] = [item for item in items if item.get_closest_marker("long") is None]
