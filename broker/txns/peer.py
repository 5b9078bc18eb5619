"""A transaction coordinator's (or a partition leader's) link to one other broker: a blocking
:class:`~kafkaclient.connection.KafkaConnection` over the inter-broker listener, used from a
thread of its own so that the event loop never waits on the network. The marker channel
(:mod:`broker.txns.markers`) and the verifier (:mod:`broker.txns.verifier`) each keep one per
broker they send to, one request in flight at a time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from kafkaclient.connection import KafkaConnection
from kafkaclient.security.connector import Connector

__all__ = ["PeerLink"]

T = TypeVar("T")


class PeerLink:
    """Broker ``broker_id`` as seen by broker ``owner_id`` for ``purpose`` (in the client id
    and the thread's name)."""

    def __init__(self, owner_id: int, broker_id: int, purpose: str, *, timeout_ms: int,
                 connector: Connector | None) -> None:
        self.client_id = f"broker-{owner_id}-{purpose}"
        self.timeout_s = timeout_ms / 1000
        self.connector = connector
        self.connection: KafkaConnection | None = None
        self.executor = ThreadPoolExecutor(max_workers=1,
                                           thread_name_prefix=f"{purpose}-{broker_id}")

    def _connect(self, address: tuple[str, int]) -> KafkaConnection:
        """The connection to ``address``, a new one when the broker moved."""
        conn = self.connection
        if conn is not None and (conn.host, conn.port) == address:
            return conn
        if conn is not None:
            conn.close()
        self.connection = KafkaConnection(*address, client_id=self.client_id,
                                          timeout=self.timeout_s, connector=self.connector)
        return self.connection

    async def call(self, address: tuple[str, int],
                   send: Callable[[KafkaConnection, Any], T], what: Any) -> T:
        """``send(connection, what)`` on the link's thread (it raises what the connection
        raises: :class:`~kafkaclient.connection.BrokerUnreachable`, OSError, kio's errors)."""
        conn = self._connect(address)
        return await asyncio.get_running_loop().run_in_executor(self.executor, send, conn, what)

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
        self.executor.shutdown(wait=False)
