"""Where an admin client's requests go: the bootstrap servers as Kafka's tools take them
(``h1:9092,h2:9092``, IPv6 as ``[::1]:9092``), and the pool of connections, one
:class:`~kafkaclient.connection.KafkaConnection` per address, reused.

Every call runs against a deadline (the operation's timeout), which bounds connecting and
waiting for the answer together: a server that accepts and never answers costs what is left of
the timeout, not a timeout per attempt. A failed call is sorted once, here, into what the
caller can do with it:

- :class:`Unreachable`: the address could not be reached or dropped the connection (refused,
  timed out, reset): try another address;
- :class:`AdminError`: authentication failed (another address would fail the same way), or
  the broker sent an answer that cannot be read (a length or count out of range, a frame kio
  cannot decode): one line, the connection dropped.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from types import ModuleType
from typing import Any

from coordinator.clock import SYSTEM_CLOCK, Clock
from kafkaclient.admin_types import AdminError
from kafkaclient.connection import BrokerUnreachable, KafkaConnection
from kafkaclient.frames import FrameTooLarge
from kafkaclient.messages import request_module, request_schema
from kafkaclient.security.connector import AuthenticationFailed, Connector

__all__ = ["Address", "NodePool", "Unreachable", "api_name", "format_address",
           "parse_bootstrap"]

Address = tuple[str, int]

_MAX_SERVERS = 1000
"""More bootstrap servers than any cluster has: a longer list is a mistake."""


class Unreachable(Exception):
    """An address that could not be reached; the message is the reason, short."""


def format_address(address: Address) -> str:
    host, port = address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def parse_bootstrap(text: str) -> tuple[Address, ...]:
    """``host:port[,host:port...]`` (IPv6 hosts in brackets) as (host, port) pairs, in order,
    each once. :class:`AdminError` naming the entry that is malformed."""
    if not isinstance(text, str) or not text.strip():
        raise AdminError("no bootstrap server given (host:port[,host:port...])")
    entries = [e.strip() for e in text.split(",")]
    if len(entries) > _MAX_SERVERS:
        raise AdminError(f"{len(entries)} bootstrap servers: at most {_MAX_SERVERS}")
    out: dict[Address, None] = {}
    for entry in entries:
        if not entry:
            raise AdminError(f"bootstrap servers {text.strip()[:200]!r}: an empty entry")
        out[_parse_entry(entry)] = None
    return tuple(out)


def _parse_entry(entry: str) -> Address:
    shown = entry[:200]
    if entry.startswith("["):
        host, sep, rest = entry[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise AdminError(f"bootstrap server {shown!r}: an IPv6 address is written "
                             "[host]:port")
        port_text = rest[1:]
        if not host or ":" not in host:
            raise AdminError(f"bootstrap server {shown!r}: not an IPv6 address in brackets")
    else:
        host, sep, port_text = entry.rpartition(":")
        if not sep or not host:
            raise AdminError(f"bootstrap server {shown!r}: not host:port")
        if ":" in host:
            raise AdminError(f"bootstrap server {shown!r}: write an IPv6 address as "
                             "[host]:port")
    if any(c.isspace() or c in "/@?#[]" for c in host):
        raise AdminError(f"bootstrap server {shown!r}: {host!r} is not a host name")
    if not port_text.isascii() or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise AdminError(f"bootstrap server {shown!r}: the port must be a number from 1 "
                         "to 65535")
    return host, int(port_text)


def api_name(api_key: int, version: int = 0) -> str:
    """``AlterPartitionReassignments`` for 45: the request class's name without its suffix."""
    return request_schema(api_key, version).__name__.removesuffix("Request")


def _reason(exc: BaseException, waited: float) -> str:
    """A short reason from a connection's failure."""
    cause = exc.__cause__
    if isinstance(cause, ConnectionRefusedError):
        return "connection refused"
    if isinstance(cause, (TimeoutError, socket.timeout)):
        return f"no answer within {waited:.3g}s"
    if isinstance(cause, socket.gaierror):
        return f"unknown host ({cause.strerror or cause})"
    if isinstance(cause, FrameTooLarge):
        return f"sent {cause}"
    if isinstance(cause, ConnectionError):
        return "the connection was closed"
    if isinstance(cause, OSError):
        return cause.strerror or type(cause).__name__
    return str(exc)


class NodePool:
    """Connections by address, opened on first use with ``connector`` (None: plaintext)."""

    def __init__(self, *, client_id: str, timeout: float, connector: Connector | None,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.client_id = client_id
        self.timeout = timeout
        self.clock = clock
        self._connector = connector
        self._connections: dict[Address, KafkaConnection] = {}

    def deadline(self) -> float:
        return self.clock.monotonic() + self.timeout

    def remaining(self, deadline: float) -> float:
        return deadline - self.clock.monotonic()

    def connection(self, address: Address) -> KafkaConnection:
        connection = self._connections.get(address)
        if connection is None:
            connection = KafkaConnection(*address, client_id=self.client_id,
                                         timeout=self.timeout, connector=self._connector)
            self._connections[address] = connection
        return connection

    def close(self) -> None:
        connections, self._connections = list(self._connections.values()), {}
        for connection in connections:
            connection.close()

    def _guard(self, address: Address, deadline: float, action: Callable[[KafkaConnection,
                                                                           float], Any]) -> Any:
        left = self.remaining(deadline)
        if left <= 0:
            raise Unreachable(f"no time left of {self.timeout:g}s")
        connection = self.connection(address)
        connection.timeout = left  # bounds connecting and authenticating too
        try:
            return action(connection, left)
        except BrokerUnreachable as exc:
            cause = exc.__cause__
            if isinstance(cause, AuthenticationFailed):
                raise AdminError(str(cause)) from None
            if cause is None or not isinstance(cause, OSError):
                # an answer that cannot be read, or one that makes no sense: the broker's
                # fault, and one line
                detail = str(exc).removeprefix(f"{address[0]}:{address[1]}").lstrip(": ")[:300]
                raise AdminError(f"the broker at {format_address(address)} sent an answer "
                                 f"that cannot be used: {detail}") from None
            raise Unreachable(_reason(exc, left)) from None
        except AuthenticationFailed as exc:  # pragma: no cover - wrapped by the connection
            raise AdminError(str(exc)) from None

    def version(self, address: Address, api_key: int, low: int, high: int,
                deadline: float) -> int | None:
        """The highest version of ``api_key`` in ``low``..``high`` ``address`` serves (None:
        none of them); connects if need be."""
        return self._guard(address, deadline,
                           lambda c, _left: c.version(api_key, low, high))

    def call(self, address: Address, api_key: int, low: int, high: int,
             make: Callable[[ModuleType, int, float], Any], deadline: float) -> tuple[int, Any]:
        """``make(module, version, seconds_left)``'s request sent to ``address`` at the highest
        version in ``low``..``high`` both sides serve; (version, response).
        :class:`Unreachable` or :class:`AdminError`."""
        version = self.version(address, api_key, low, high, deadline)
        if version is None:
            served = self._connections[address].versions().get(api_key)
            raise AdminError(
                f"the broker at {format_address(address)} serves no version {low}-{high} of "
                f"{api_name(api_key)}" + (f" (it serves {served[0]}-{served[1]})"
                                          if served else " (it does not serve it)"))
        request = make(request_module(api_key, version), version, self.remaining(deadline))
        response = self._guard(address, deadline, lambda c, left: c.call(request, left))
        return version, response
