"""The real ZooKeeper and etcd servers of the test session, through the product's launcher
(:mod:`coordinator.servers`), with what only tests need on top; and the PostgreSQL of the SQL
tests (:mod:`tests.postgres_server`).

Where a server's program is missing the tests that need it skip with a loud reason, unless
``PARTCTL_REQUIRE_SERVERS=1`` (CI), where a missing server fails the run. The servers do not
fsync: they are thrown away with the test session.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import NoReturn

import pytest

from coordinator import servers
from coordinator.servers import LocalServer, free_port
from tests import postgres_server
from tests.postgres_server import PostgresServer

Server = LocalServer

__all__ = ["Server", "free_port", "require_servers", "start_ensemble", "start_etcd",
           "start_postgres", "start_zookeeper", "unavailable", "zookeeper_watches"]


def require_servers() -> bool:
    return os.environ.get("PARTCTL_REQUIRE_SERVERS") == "1"


def unavailable(reason: str) -> NoReturn:
    """Skip loudly, or fail when the servers are required."""
    if require_servers():
        pytest.fail(f"PARTCTL_REQUIRE_SERVERS=1 but {reason}", pytrace=False)
    pytest.skip(f"SERVER MISSING, TEST SKIPPED: {reason}")


def _start(start: Callable[..., Server]) -> Server:
    try:
        return start(fsync=False)
    except servers.ServerNotInstalled as exc:
        unavailable(str(exc))
    except servers.ServerStartError as exc:
        pytest.fail(str(exc), pytrace=False)


def start_zookeeper() -> Server:
    return _start(servers.start_zookeeper)


def start_etcd(**options: object) -> Server:
    """An etcd without fsync; ``tls=(cert, key, ca)`` for one that talks TLS only."""
    return _start(functools.partial(servers.start_etcd, **options))


def start_ensemble(kind: str, n: int = 3, **options: object) -> servers.LocalEnsemble:
    """An ensemble of ``n`` members without fsync (skipped or failed as a server is when the
    program is missing)."""
    try:
        return servers.start_ensemble(kind, n, fsync=False, **options)  # type: ignore[arg-type]
    except servers.ServerNotInstalled as exc:
        unavailable(str(exc))
    except servers.ServerStartError as exc:
        pytest.fail(str(exc), pytrace=False)


def start_postgres() -> PostgresServer:
    """A PostgreSQL of the tests' own: initdb in a temporary directory, trust authentication,
    no fsync, a free port of 127.0.0.1."""
    try:
        return postgres_server.start_postgres()
    except servers.ServerNotInstalled as exc:
        unavailable(str(exc))
    except servers.ServerStartError as exc:
        pytest.fail(str(exc), pytrace=False)


def zookeeper_watches(server: Server) -> dict[int, set[str]]:
    """The watches the ZooKeeper server holds, by session id (four-letter word ``wchc``):
    one-shot and persistent alike, at the absolute paths they were set on."""
    out: dict[int, set[str]] = {}
    session: set[str] = set()
    for line in server.four_letter("wchc").splitlines():
        if line.startswith("0x"):
            session = out.setdefault(int(line, 16), set())
        elif line.startswith("\t"):
            session.add(line.strip())
    return out
