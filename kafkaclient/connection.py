"""A small blocking Kafka-protocol client: one connection to one broker, kio for every message.

What a broker needs to talk to another broker (a follower fetching from its leader): open a
connection, learn the versions the other side serves (ApiVersions, which Kafka's clients send
first on every connection), then send one request at a time and read its response. Requests
and responses are kio's generated classes, framed as :mod:`broker.wire` describes (a 4-byte
size, the request header v1 or v2, the body); nothing here encodes a field by hand.

The connection is opened on first use and dropped on any failure (a refused or reset
connection, a timeout, a frame kio cannot read, a response to another request): the caller
gets :class:`BrokerUnreachable` and the next call connects again. Calls are serialised by a
lock, so one connection may be shared by threads, one request in flight at a time.
"""

from __future__ import annotations

import io
import socket
import struct
import threading
import time
from collections.abc import Mapping
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from kafkaclient.frames import SIZE, FrameReader, FrameTooLarge
from kafkaclient.messages import build, request_schema, response_schema
from kafkaclient.security.connector import AuthenticationFailed, Connector
from kafkaclient.wire_check import read_checked

__all__ = ["API_VERSIONS", "BrokerUnreachable", "KafkaConnection"]

API_VERSIONS = 18
_API_VERSIONS_VERSION = 3  # client software name and version, flexible (KIP-511)
_SOFTWARE_NAME = "partctl"
_SOFTWARE_VERSION = "1"
_TIMEVAL = struct.Struct("@ll")


def _kernel_timeouts(sock: socket.socket, timeout: float) -> None:
    """Bound each send and receive on the blocking ``sock`` to ``timeout`` seconds in the
    kernel (``SO_SNDTIMEO``, ``SO_RCVTIMEO``): the call fails with EAGAIN when it runs out.
    (A zero there would mean no timeout: the least is a microsecond.)"""
    timeout = max(timeout, 1e-6)
    seconds = int(timeout)
    value = _TIMEVAL.pack(seconds, int((timeout - seconds) * 1_000_000))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, value)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, value)


class BrokerUnreachable(ConnectionError):
    """The broker could not be reached, or the connection failed mid-request."""


class KafkaConnection:
    """A connection to the broker at ``host``:``port``, opened on demand.

    ``timeout`` (seconds) bounds connecting and each request; a call may give a longer one
    (a long-poll fetch waits on the broker before it answers)."""

    def __init__(self, host: str, port: int, *, client_id: str, timeout: float = 30.0,
                 connector: Connector | None = None) -> None:
        self.connector = connector
        """How to connect (TLS, SASL); None: plaintext."""
        self.host = host
        self.port = port
        self.client_id = client_id
        self.timeout = timeout
        self._sock: socket.socket | None = None
        self._reader: FrameReader | None = None
        self._kernel_timeout: float | None = None
        """The timeout the kernel holds for a plain socket (None: the socket has Python's)."""
        self._renew_at: float | None = None
        self._versions: dict[int, tuple[int, int]] = {}
        self._next_correlation = 0
        self._lock = threading.Lock()
        self._closed = False

    def __repr__(self) -> str:
        return f"KafkaConnection({self.host}:{self.port})"

    # -- connection ----------------------------------------------------------------------------

    def versions(self) -> Mapping[int, tuple[int, int]]:
        """The broker's ApiVersions answer: api key -> (min, max) version. Connects if need be."""
        with self._lock:
            self._ensure_connected()
            return dict(self._versions)

    def version(self, api_key: int, low: int, high: int) -> int | None:
        """The highest version of ``api_key`` in ``low``..``high`` the broker serves, or None
        when it serves none of them. Connects if need be."""
        served = self.versions().get(api_key)
        if served is None:
            return None
        best = min(high, served[1])
        return best if best >= max(low, served[0]) else None

    def _ensure_connected(self) -> None:
        if self._closed:
            raise BrokerUnreachable(f"{self!r} is closed")
        if self._sock is not None:
            if self._renew_at is None or time.monotonic() < self._renew_at:
                return
            self._drop()  # the SASL session ends soon: a new connection authenticates again
        try:
            if self.connector is not None:
                sock = self.connector.open(self.host, self.port, self.timeout)
            else:
                sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError as exc:
            raise BrokerUnreachable(f"cannot connect to {self.host}:{self.port}: {exc}") from exc
        if type(sock) is socket.socket:
            # A plain socket blocks, its timeouts kept by the kernel: with Python's
            # timeout, each send and receive is a poll() and then the call, and a thread
            # lets the interpreter go and waits for it again at each (a follower's fetcher
            # does this every round). TLS sockets keep Python's timeout.
            sock.settimeout(None)
            _kernel_timeouts(sock, self.timeout)
            self._kernel_timeout = self.timeout
        else:
            self._kernel_timeout = None
        self._sock = sock
        self._reader = FrameReader(sock)
        if self._closed:  # closed while connecting: close() could not abort this one
            self._drop()
            raise BrokerUnreachable(f"{self!r} is closed")
        try:
            request = build(request_schema(API_VERSIONS, _API_VERSIONS_VERSION),
                            client_software_name=_SOFTWARE_NAME,
                            client_software_version=_SOFTWARE_VERSION)
            response = self._exchange(request, self.timeout)
            if response.error_code != ErrorCode.none:
                raise BrokerUnreachable(
                    f"{self.host}:{self.port} answered ApiVersions with "
                    f"{ErrorCode(response.error_code).name}")
            self._versions = {int(k.api_key): (int(k.min_version), int(k.max_version))
                              for k in response.api_keys}
            if self.connector is not None:
                try:
                    self._renew_at = self.connector.authenticate(
                        lambda r: self._exchange(r, self.timeout))
                except AuthenticationFailed as exc:
                    raise BrokerUnreachable(f"{self.host}:{self.port}: {exc}") from exc
        except BaseException:
            self._drop()
            raise

    def _drop(self) -> None:
        sock, self._sock = self._sock, None
        self._reader = None
        self._renew_at = None
        self._versions = {}
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass

    def close(self) -> None:
        """Close the connection, failing a call under way at once (from any thread); later
        calls fail with :class:`BrokerUnreachable`."""
        self._closed = True  # first: the call under way must not connect again
        self.abort()
        with self._lock:
            self._drop()

    def abort(self) -> None:
        """Shut the socket down from another thread: a call waiting on it fails now."""
        sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    # -- requests ------------------------------------------------------------------------------

    def call(self, request: Any, timeout: float | None = None) -> Any:
        """Send ``request`` (a kio request object of the version to use) and return the kio
        response. Raises :class:`BrokerUnreachable` if the request cannot complete."""
        with self._lock:
            self._ensure_connected()
            try:
                return self._exchange(request, self.timeout if timeout is None else timeout)
            except BaseException:
                self._drop()
                raise

    def _exchange(self, request: Any, timeout: float) -> Any:
        sock, reader = self._sock, self._reader
        assert sock is not None and reader is not None
        cls = type(request)
        self._next_correlation = (self._next_correlation + 1) & 0x7FFFFFFF
        correlation_id = self._next_correlation
        header_cls = cls.__header_schema__
        buffer = io.BytesIO()
        buffer.write(b"\0\0\0\0")
        entity_writer(header_cls)(buffer, header_cls(
            request_api_key=cls.__api_key__, request_api_version=cls.__version__,
            correlation_id=correlation_id, client_id=self.client_id))
        entity_writer(cls)(buffer, request)
        frame = buffer.getbuffer()
        SIZE.pack_into(frame, 0, len(frame) - SIZE.size)
        try:
            if self._kernel_timeout is None:
                if sock.gettimeout() != timeout:  # a system call each, and the GIL let go
                    sock.settimeout(timeout)
            elif self._kernel_timeout != timeout:
                _kernel_timeouts(sock, timeout)
                self._kernel_timeout = timeout
            sock.sendall(frame)
            data = reader.next()
        except BlockingIOError:  # a kernel timeout ran out: what Python's timeout raises
            timed_out = TimeoutError("timed out")
            raise BrokerUnreachable(f"{self.host}:{self.port}: TimeoutError: {timed_out}"
                                    ) from timed_out
        except FrameTooLarge as exc:
            raise BrokerUnreachable(f"{self.host}:{self.port} sent {exc}") from exc
        except (OSError, TimeoutError) as exc:
            raise BrokerUnreachable(f"{self.host}:{self.port}: {type(exc).__name__}: "
                                    f"{exc}") from exc
        response_cls = response_schema(cls.__api_key__, cls.__version__)
        try:
            header, offset = read_checked(response_cls.__header_schema__, data)
            body, _ = read_checked(response_cls, data, offset)
        except Exception as exc:  # kio raises several types; all mean an unreadable frame
            raise BrokerUnreachable(f"{self.host}:{self.port}: cannot read "
                                    f"{response_cls.__name__}: {exc}") from exc
        if header.correlation_id != correlation_id:
            raise BrokerUnreachable(f"{self.host}:{self.port} answered correlation id "
                                    f"{header.correlation_id}, expected {correlation_id}")
        return body
