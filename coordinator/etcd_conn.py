"""The etcd backend's connection: one gRPC channel at a time, failover over the URL's hosts, and
the one place where gRPC errors become coordinator errors.

The etcd3 client talks to one endpoint and never moves on by itself, so :class:`Connection`
keeps the list of hosts and, when a call finds the current one unavailable, builds a client for
the next host (a fresh channel also skips gRPC's reconnect backoff). Callers read the stubs
through the connection each time, so they follow a failover without knowing about it.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import etcd3
import grpc

from coordinator.errors import (
    ConnectionFailed,
    ConnectionLoss,
    CoordinatorError,
    OperationTimeout,
    RequestTooLarge,
    SessionExpired,
)

GRPC_OPTIONS = [
    ("grpc.max_receive_message_length", 256 << 20),
    ("grpc.max_send_message_length", 64 << 20),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
]


def translate(exc: BaseException, what: str) -> CoordinatorError:
    """Map a gRPC (or closed-channel) error to the coordinator hierarchy; the caller chains it."""
    if isinstance(exc, CoordinatorError):
        return exc
    if isinstance(exc, grpc.RpcError) and hasattr(exc, "code"):
        code = exc.code()
        details = exc.details() or ""
        if code == grpc.StatusCode.UNAVAILABLE:
            return ConnectionLoss(f"{what}: etcd unavailable: {details}")
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return OperationTimeout(f"{what}: no answer from etcd within the deadline")
        if code == grpc.StatusCode.CANCELLED:
            return ConnectionLoss(f"{what}: request cancelled (channel closed): {details}")
        if code == grpc.StatusCode.NOT_FOUND and "lease not found" in details:
            return SessionExpired(f"{what}: the session's lease is gone: {details}")
        if "too many operations" in details or "too large" in details or (
            code == grpc.StatusCode.RESOURCE_EXHAUSTED
        ):
            return RequestTooLarge(f"{what}: etcd refused the request: {details}")
        return CoordinatorError(f"{what}: etcd error {code.name}: {details}")
    if isinstance(exc, ValueError) and _names_a_closed_channel(str(exc)):
        return ConnectionLoss(f"{what}: channel closed during failover")
    return CoordinatorError(f"{what}: unexpected etcd client error: {exc!r}")


def _names_a_closed_channel(message: str) -> bool:
    """gRPC says so in more than one way ("Cannot invoke RPC on closed channel!", "Cannot
    invoke RPC: Channel closed!"), depending on where in the call the channel was found closed."""
    lowered = message.lower()
    return "channel" in lowered and "closed" in lowered


def is_connection_error(exc: BaseException) -> bool:
    return isinstance(exc, grpc.RpcError) and hasattr(exc, "code") and exc.code() in (
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.CANCELLED,
    )


class _Translating:
    """The context of :meth:`Connection.translating`: a class, not a generator-based context
    manager, because it wraps every chunk of a bulk write."""

    __slots__ = ("_conn", "_what", "_generation")

    def __init__(self, conn: Connection, what: str, generation: int) -> None:
        self._conn = conn
        self._what = what
        self._generation = generation

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: Any) -> bool:
        if exc is None or not isinstance(exc, (grpc.RpcError, ValueError)):
            return False
        if is_connection_error(exc):
            self._conn.failed(self._generation)
        raise translate(exc, self._what) from exc


class Connection:
    """The current endpoint's etcd3 client; ``failed()`` moves to the next host."""

    def __init__(self, hosts: tuple[tuple[str, int], ...], request_timeout: float) -> None:
        if not hosts:
            raise ConnectionFailed("an etcd URL needs at least one host")
        self.hosts = hosts
        self.request_timeout = request_timeout
        self._lock = threading.Lock()
        self._index = 0
        self.generation = 0
        self._client: Any = self._new_client(0)
        self._closed = False

    def _new_client(self, index: int) -> Any:
        host, port = self.hosts[index]
        return etcd3.client(host=host, port=port, timeout=self.request_timeout,
                            grpc_options=GRPC_OPTIONS)

    @property
    def address(self) -> str:
        host, port = self.hosts[self._index]
        return f"{host}:{port}"

    def describe_hosts(self) -> str:
        return ",".join(f"{h}:{p}" for h, p in self.hosts)

    # Stubs are read through the connection for every call, so they follow a failover.
    @property
    def kv(self) -> Any:
        return self._client.kvstub

    @property
    def lease(self) -> Any:
        return self._client.leasestub

    def watch_stub(self) -> Any:
        return etcd3.etcdrpc.WatchStub(self._client.channel)

    def translating(self, what: str, generation: int) -> _Translating:
        """A context for sending or collecting gRPC calls made on the channel of
        ``generation``: a gRPC error (or the ValueError of a channel closed under the call)
        leaves it as the coordinator error :func:`translate` makes of it, chained, after a
        failover to the next host when the connection was to blame.

        Wrap a batch's call, never each op: this is on the bulk read and write paths."""
        return _Translating(self, what, generation)

    def stream_broke(self, exc: grpc.RpcError, generation: int) -> bool:
        """A long-lived stream (keep-alive, watch) of ``generation`` ended with ``exc``: fail
        over when the connection is to blame (unavailable, cancelled, or a deadline passed)
        and say so; False for an error of the server's, which the caller logs before opening
        the stream again on the same host."""
        if is_connection_error(exc) or exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
            self.failed(generation)
            return True
        return False

    def failed(self, generation: int) -> None:
        """The channel of ``generation`` failed: switch to the next host (once per generation)."""
        with self._lock:
            if generation != self.generation or self._closed:
                return
            old = self._client
            self._index = (self._index + 1) % len(self.hosts)
            self._client = self._new_client(self._index)
            self.generation += 1
        _close_quietly(old)

    def connect(self, timeout: float) -> None:
        """Find a host that answers, in URL order, within ``timeout`` seconds; else
        ConnectionFailed (saying the timeout)."""
        from etcd3 import etcdrpc

        deadline = time.monotonic() + timeout
        last: BaseException | None = None
        while True:
            generation = self.generation
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                self.kv.Range(etcdrpc.RangeRequest(key=b"\x00", count_only=True),
                              min(remaining, max(self.request_timeout, 0.1)))
                return
            except grpc.RpcError as exc:
                last = exc
                self.failed(generation)
                if self._index == 0:
                    time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
        detail = f": {last.details()}" if isinstance(last, grpc.RpcError) else ""
        raise ConnectionFailed(
            f"could not reach etcd at {self.describe_hosts()} within {timeout:g}s{detail}"
        )

    def close(self) -> None:
        with self._lock:
            self._closed = True
            client = self._client
        _close_quietly(client)


def _close_quietly(client: Any) -> None:
    try:
        client.close()
    except Exception:  # closing a broken channel may complain; there is nothing to do about it
        pass
