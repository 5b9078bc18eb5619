"""The Kafka-protocol server: listeners, connections, framing, in-order responses.

One asyncio event loop serves every connection. Per connection a reader takes frames off the
socket and dispatches each through the API registry at once (so pipelined produce requests
append in the order they came), and a writer sends the responses in request order: a response
that is ready waits for the ones before it, as Kafka's muted channels keep them in order.
At most :data:`MAX_IN_FLIGHT` requests of a connection are waiting for their responses; the
reader stops reading until one leaves.

A frame larger than ``socket.request.max.bytes`` (or of a negative size) is refused before its
body is read. What Kafka answers by closing the connection costs the connection here too, and
nothing else: a malformed header or body, an api key this broker does not serve, a version
outside the served range, an unexpected error in a handler. Only ApiVersions is answered at an
unknown version, with UNSUPPORTED_VERSION (KIP-511). Responses already due on that connection
are sent before it closes.

On a TLS listener (SSL, SASL_SSL) the connection is wrapped in TLS before any frame (TLS 1.2 and
up; a client certificate as ``ssl.client.auth`` says), and the principal is the certificate's
subject (``User:CN=...``; ``User:ANONYMOUS`` without one). On a SASL listener (SASL_PLAINTEXT,
SASL_SSL) each connection's frames are fed to its
:class:`~broker.security.authenticator.Authenticator` (Kafka's SaslServerAuthenticator, with no
I/O of its own), and the connection does what it answers: dispatch the request as the
authenticated principal, send its answer (then perhaps close), send a raw token, or close.
Before authentication the frames are read one at a time, each answered before the next is
read; a re-authentication (KIP-368) is answered in order with the connection's other requests.

A connection that neither completes a request nor receives a response for
``connections.max.idle.ms`` is closed, one holding part of a request too; descriptors running
out fail an accept (asyncio retries it a second later) or a request, one log line per interval
(:mod:`broker.connection_limits`).

Fetch responses carry their records as :class:`~replication.log.LogSlice` parts, sent with
``os.sendfile`` on plaintext sockets while the transport has nothing unsent and the socket
takes them (what the socket does not take is read and written through the transport), the
rest of the frame around them with the transport, TCP_CORK holding the pieces together where
the platform has it; on a TLS connection the slices are read and written through the TLS
transport.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import os
import socket
import time
from collections.abc import Mapping, Sequence
from typing import Any

from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2

from broker.apis import (
    CLOSE_CONNECTION,
    NO_RESPONSE,
    ApiRegistry,
    BrokerServices,
    ControllerNodeServices,
    RequestContext,
)
from broker.apis import versions as api_versions
from broker.config import Listener
from broker.connection_limits import expire_idle, guard_out_of_descriptors, log_failure
from broker.metrics.traffic import RequestTimes
from broker.security.authenticator import Answer, Authenticator, Close, Dispatch, Token
from broker.security.sasl import ListenerAuth
from broker.wire import Encoded, FrameError, encode_response, parse_header, parse_request, peek
from kafkaclient.frames import SIZE, FrameTooLarge, read_frame
from kafkaclient.security.tls import principal_of
from replication.log import LogSlice

__all__ = ["MAX_IN_FLIGHT", "KafkaServer"]

log = logging.getLogger(__name__)

MAX_IN_FLIGHT = 32
"""Requests of one connection waiting for their responses before its reader pauses."""

READ_LIMIT = 1 << 20
"""The stream reader's buffer target (it pauses the socket beyond twice this)."""

SSL_HANDSHAKE_TIMEOUT = 10.0
SEND_GRACE = 5.0
"""Seconds a response already being written may take to finish once its client has hung up:
the client may hold all of it (a sendfile completes before this process resumes), so it is
finished and counted rather than cut off."""
ANONYMOUS = "User:ANONYMOUS"

_CORK = getattr(socket, "TCP_CORK", None)
_WRITE_CHUNK = 256 << 10


async def _write_in_pieces(writer: asyncio.StreamWriter, data: bytes) -> None:
    """``data`` written ``_WRITE_CHUNK`` bytes at a time, draining in between. The transport
    keeps what the socket did not take in one buffer from whose front each send deletes
    (Python 3.11), which costs a move of the whole rest per send: megabytes of records from
    remote storage written at once would be moved over and over.
    Each piece leaves at most a piece in that buffer."""
    if len(data) <= _WRITE_CHUNK:
        writer.write(data)
        return
    view = memoryview(data)
    for start in range(0, len(view), _WRITE_CHUNK):
        writer.write(view[start:start + _WRITE_CHUNK])
        await writer.drain()


async def _send_slice(writer: asyncio.StreamWriter, fileno: int, chunk: LogSlice) -> None:
    """``chunk``'s bytes onto the connection whose socket is ``fileno`` (-1: none to use):
    ``os.sendfile`` from the segment file straight to the socket while the transport holds
    nothing unsent and the socket takes them, else the next piece read and written through
    the transport. (asyncio's ``loop.sendfile`` costs a fifth of a millisecond of the event
    loop per call, more than copying a fetch of 64 KiB; this costs a system call.)"""
    transport = writer.transport
    position, end = chunk.position, chunk.position + chunk.size
    while position < end:
        if transport.is_closing():
            raise ConnectionError("the connection closed while a log segment was being sent")
        if fileno >= 0 and not transport.get_write_buffer_size():
            try:
                sent = os.sendfile(fileno, chunk.fd, position, end - position)
            except (BlockingIOError, InterruptedError):
                sent = -1  # the socket is full: the transport waits for it
            if sent > 0:
                position += sent
                continue
        else:
            sent = -1
        piece = os.pread(chunk.fd, min(_WRITE_CHUNK, end - position), position) if sent else b""
        if not piece:  # the file shrank under us: the frame is broken
            raise ConnectionError(f"sent {position - chunk.position} of {chunk.size} bytes of a "
                                  "log segment (truncated meanwhile)")
        writer.write(piece)
        position += len(piece)
        await writer.drain()


_CLOSE = object()


class _Connection:
    """One client connection: its reader, its writer, the queue of responses in order."""

    def __init__(self, server: KafkaServer, listener: str, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.server = server
        self.listener = listener
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.slots = asyncio.Semaphore(MAX_IN_FLIGHT)
        self.pending: list[tuple[RequestContext | None, Any]] = []
        self.principal = ANONYMOUS
        self.sending: asyncio.Event | None = None
        """Set once the response being written (if any) is written and counted."""
        self.active = time.monotonic()
        """When a request last came in whole or a response went out (idle expiry)."""
        self.answering = False
        """Whether the writer waits for a handler's answer (not idle meanwhile)."""
        auth = server.security.get(listener)
        if auth is not None and auth.ssl_context is not None:
            self.principal = principal_of(writer.get_extra_info("peercert"))
        self.authenticator: Authenticator | None = None
        """The SASL state (:mod:`broker.security.authenticator`) on a SASL listener."""
        if auth is not None and auth.sasl is not None:
            self.authenticator = Authenticator(auth.sasl, auth.credentials, peer=self.peer,
                                               listener=listener)

    async def run(self) -> None:
        if self.authenticator is not None:
            try:
                authenticated = await self._authenticate(self.authenticator)
            except (ConnectionError, asyncio.IncompleteReadError):
                authenticated = False
            if not authenticated:
                self.writer.close()
                return
        reading = asyncio.create_task(self._read_loop())
        writing = asyncio.create_task(self._write_loop())
        try:
            done, _ = await asyncio.wait({reading, writing},
                                         return_when=asyncio.FIRST_COMPLETED)
            if reading in done and not reading.cancelled() and reading.exception() is None \
                    and reading.result():
                # a refused request: send what is due before it, then close
                self.queue.put_nowait(_CLOSE)
                with contextlib.suppress(Exception):
                    await writing
            elif reading in done and self.sending is not None:
                # the client hung up while a response was being written: let that one finish
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self.sending.wait(), SEND_GRACE)
        finally:
            for task in (reading, writing):
                task.cancel()
            for task in (reading, writing):
                with contextlib.suppress(BaseException):
                    await task
            self._drop_pending()
            self.writer.close()

    def busy(self) -> bool:
        return self.answering

    def expire(self) -> None:
        """Close at once (idle expiry): a client that reads nothing holds no write back."""
        self.writer.transport.abort()

    def _drop_pending(self) -> None:
        while not self.queue.empty():
            entry = self.queue.get_nowait()
            if isinstance(entry, tuple):
                self.pending.append(entry)
        for ctx, result in self.pending:
            if isinstance(result, asyncio.Future):
                result.cancel()
            elif inspect.iscoroutine(result):  # an answer never started: close it unrun
                result.close()
            if ctx is not None:
                ctx.close_slices()
        self.pending.clear()

    async def _frame(self, limit: int | None) -> bytes | None:
        """The next frame before authentication, or None at the end of the stream or for one
        over ``limit``."""
        try:
            frame = await read_frame(self.reader, limit)
        except FrameTooLarge as exc:
            log.warning("closing %s: a request of %d bytes before authentication exceeds %s",
                        self.peer, exc.size, limit)
            return None
        if frame is not None:
            self.active = time.monotonic()
        return frame

    async def _authenticate(self, authenticator: Authenticator) -> bool:
        """The SASL exchange before any other request, fed to ``authenticator``; True once
        authenticated (the principal set), False when the connection must close."""
        while not authenticator.authenticated:
            frame = await self._frame(authenticator.max_receive)
            if frame is None:
                return False
            step = authenticator.receive(frame, time.monotonic())
            if isinstance(step, Dispatch):  # ApiVersions before the handshake
                entry = self.server.dispatch(frame, self.listener, self.peer)
                if entry is _CLOSE:
                    return False
                ctx, result = entry
                if inspect.isawaitable(result):
                    result = await result
                await self._send(encode_response(ctx.correlation_id, result))
            elif isinstance(step, Answer):
                await self._send(encode_response(step.correlation_id, step.response))
                if step.close:
                    return False
            elif isinstance(step, Token):
                self.writer.write(SIZE.pack(len(step.token)) + step.token)
                await self.writer.drain()
                self.active = time.monotonic()
            else:
                return False
        assert authenticator.principal is not None
        self.principal = authenticator.principal
        return True

    async def _read_loop(self) -> bool:
        """Read and dispatch frames; True when the connection must close after the responses
        already due (a refused request), False at the end of the stream."""
        limit = self.server.max_request_bytes
        authenticator = self.authenticator
        while True:
            try:
                frame = await read_frame(self.reader, limit)
            except FrameTooLarge as exc:
                log.warning("closing %s: a request of %d bytes exceeds "
                            "socket.request.max.bytes (%d)", self.peer, exc.size, limit)
                return True
            if frame is None:
                return False
            self.active = time.monotonic()
            await self.slots.acquire()
            if authenticator is not None:
                step = authenticator.receive(frame, time.monotonic())
                if isinstance(step, Close | Token):
                    return True
                if isinstance(step, Answer):  # re-authentication, answered in order
                    assert self.server.services is not None
                    ctx = RequestContext(self.server.services, api_key=step.api_key,
                                         api_version=step.api_version,
                                         correlation_id=step.correlation_id,
                                         client_id=step.client_id, listener=self.listener,
                                         peer=self.peer, principal=self.principal)
                    self.queue.put_nowait((ctx, step.response))
                    if step.close:
                        return True
                    continue
            entry = self.server.dispatch(frame, self.listener, self.peer,
                                         principal=self.principal)
            if entry is _CLOSE:
                return True
            self.queue.put_nowait(entry)

    async def _write_loop(self) -> None:
        while True:
            entry = await self.queue.get()
            if entry is _CLOSE:
                return
            self.pending.append(entry)
            ctx, result = entry
            try:
                if inspect.isawaitable(result):
                    self.answering = True
                    try:
                        result = await result
                    finally:
                        self.answering = False
                        self.active = time.monotonic()
                if result is CLOSE_CONNECTION:
                    return
                if result is not NO_RESPONSE:
                    assert ctx is not None
                    self.sending = sent = asyncio.Event()
                    try:
                        await self._send(encode_response(ctx.correlation_id, result,
                                                         scatter=bool(ctx.slices)))
                        if self.server.request_times is not None:
                            self.server.answered(ctx)
                    finally:
                        self.sending = None
                        sent.set()
                elif ctx is not None and self.server.request_times is not None:
                    self.server.answered(ctx)
            except (ConnectionError, asyncio.CancelledError):
                raise
            except Exception as exc:
                log_failure(exc, "closing %s: answering api %s failed", self.peer,
                            ctx.api_key if ctx is not None else "?")
                return
            finally:
                if ctx is not None:
                    ctx.close_slices()
            self.pending.remove(entry)
            self.slots.release()

    async def _send(self, encoded: Encoded) -> None:
        writer = self.writer
        if not encoded.slices:
            # without slices, chunks() is this one frame: the size prefix and the parts joined
            frame = b"".join([SIZE.pack(encoded.size), *encoded.plain_parts()])
            if encoded.size <= _WRITE_CHUNK:
                writer.write(frame)
            else:
                await _write_in_pieces(writer, frame)
            await writer.drain()
            self.active = time.monotonic()
            return
        transport = writer.transport
        if transport.get_extra_info("sslcontext") is not None:
            # TLS encrypts in this process: the log bytes are read and written through it
            # (Kafka copies them on TLS channels too)
            for chunk in encoded.chunks():
                writer.write(chunk.read() if isinstance(chunk, LogSlice) else chunk)
            await writer.drain()
            self.active = time.monotonic()
            return
        sock = transport.get_extra_info("socket")
        corked = _CORK is not None and sock is not None
        if corked:
            sock.setsockopt(socket.IPPROTO_TCP, _CORK, 1)
        try:
            fileno = sock.fileno() if sock is not None else -1
            for chunk in encoded.chunks():
                if isinstance(chunk, LogSlice):
                    await _send_slice(writer, fileno, chunk)
                elif chunk:
                    await _write_in_pieces(writer, chunk)
            await writer.drain()
            self.active = time.monotonic()
        finally:
            if corked and not transport.is_closing():
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.IPPROTO_TCP, _CORK, 0)


class KafkaServer:
    """Serves ``registry`` on ``listeners`` for the broker behind ``services`` (set before
    :meth:`start_serving`).

    ``gate``, when set to an unset event, holds every request but those of ``ungated`` keys
    until it is set: a broker process serves the controller's requests at once but answers
    clients only once the controller's first metadata is in."""

    def __init__(self, listeners: Sequence[Listener], registry: ApiRegistry, *,
                 max_request_bytes: int,
                 security: Mapping[str, ListenerAuth] | None = None,
                 connections_max_idle_ms: int = -1) -> None:
        self.listeners = tuple(listeners)
        self.security: Mapping[str, ListenerAuth] = dict(security or {})
        """Per listener name: its TLS context and SASL settings (absent: plaintext)."""
        self.registry = registry
        self.max_request_bytes = max_request_bytes
        self.services: BrokerServices | ControllerNodeServices | None = None
        self.gate: asyncio.Event | None = None
        self.ungated: frozenset[int] = frozenset()
        self._servers: dict[str, asyncio.Server] = {}
        self._connections: set[asyncio.Task] = set()
        self._open: set[_Connection] = set()
        self.connections_max_idle_ms = connections_max_idle_ms
        """Idle connections are closed after this long (negative: never)."""
        self._expiry: asyncio.Task | None = None
        self.request_times: RequestTimes | None = None
        """Where answered requests are counted with their total time (the metrics); None:
        they are not."""
        self._api_names: dict[int, str] = {}

    def answered(self, ctx: RequestContext) -> None:
        """Count ``ctx``'s request, answered now, under its own metric name if its handler
        gave one, else its API's name."""
        times = self.request_times
        if times is None:
            return
        name = ctx.metric_name or self._api_names.get(ctx.api_key)
        if name is None:
            api = self.registry.get(ctx.api_key)
            name = self._api_names[ctx.api_key] = api.name if api is not None else str(
                ctx.api_key)
        times.observe(name, time.monotonic() - ctx.received)

    async def bind(self) -> dict[str, int]:
        """Listen on every listener without accepting yet; returns the ports bound, by listener
        name (a port of 0 binds a free one). Raises OSError when an address is taken."""
        ports = {}
        try:
            for listener in self.listeners:
                auth = self.security.get(listener.name)
                context = auth.ssl_context if auth is not None else None
                tls: dict[str, Any] = ({"ssl": context,
                                        "ssl_handshake_timeout": SSL_HANDSHAKE_TIMEOUT}
                                       if context is not None else {})
                server = await asyncio.start_server(
                    functools.partial(self._accept, listener.name),
                    host=listener.host or None, port=listener.port, limit=READ_LIMIT,
                    start_serving=False, reuse_address=True, **tls)
                self._servers[listener.name] = server
                ports[listener.name] = server.sockets[0].getsockname()[1]
        except OSError:
            await self.close()
            raise
        return ports

    async def start_serving(self) -> None:
        if self.services is None:
            raise RuntimeError("no broker services to serve")
        guard_out_of_descriptors(asyncio.get_running_loop())
        if self.connections_max_idle_ms >= 0 and self._expiry is None:
            self._expiry = asyncio.create_task(
                expire_idle(lambda: self._open, self.connections_max_idle_ms))
        for server in self._servers.values():
            await server.start_serving()

    async def _accept(self, listener: str, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        connection = _Connection(self, listener, reader, writer)
        self._open.add(connection)
        try:
            await connection.run()
        except asyncio.CancelledError:
            # close() ends connections so; ending the task normally keeps asyncio's stream
            # callback (which asks a finished connection task for its exception) quiet
            pass
        except Exception as exc:
            log_failure(exc, "connection on %s failed", listener)
        finally:
            self._open.discard(connection)
            self._connections.discard(task)

    def dispatch(self, frame: bytes, listener: str, peer: str, *,
                 principal: str = ANONYMOUS) -> Any:
        """Parse one frame and hand it to its API: (context, response or awaitable), or
        ``_CLOSE`` when Kafka would close the connection."""
        services = self.services
        assert services is not None
        try:
            key, version, correlation_id = peek(frame)
            api = self.registry.get(key)
            if key == api_versions.API_KEY and (api is None or not api.supports(version)):
                header = parse_header(frame, RequestHeaderV2 if version >= 3 else RequestHeaderV1)
                ctx = RequestContext(services, api_key=key, api_version=0,
                                     correlation_id=correlation_id, client_id=header.client_id,
                                     listener=listener)
                return ctx, api_versions.unsupported_version(self.registry)
            if api is None or not api.supports(version):
                log.info("closing %s: api key %d version %d is not served", peer, key, version)
                return _CLOSE
            header, request = parse_request(frame, key, version)
        except FrameError as exc:
            log.info("closing %s: %s", peer, exc)
            return _CLOSE
        ctx = RequestContext(services, api_key=key, api_version=version,
                             correlation_id=correlation_id, client_id=header.client_id,
                             listener=listener, peer=peer, principal=principal)
        gate = self.gate
        if gate is not None and not gate.is_set() and key not in self.ungated:
            return ctx, self._after(gate, ctx, api.handle, request)
        try:
            return ctx, api.handle(ctx, request)
        except Exception as exc:
            log_failure(exc, "closing %s: %s v%d failed", peer, api.name, version)
            ctx.close_slices()
            return _CLOSE

    async def _after(self, gate: asyncio.Event, ctx: RequestContext, handle: Any,
                     request: Any) -> Any:
        """A held request, handled once ``gate`` is set (waiters wake in the order they came,
        so a connection's requests are still handled in order)."""
        await gate.wait()
        result = handle(ctx, request)
        return await result if inspect.isawaitable(result) else result

    async def close(self) -> None:
        """Stop accepting and close every connection (parked requests are dropped)."""
        if self._expiry is not None:
            self._expiry.cancel()
            with contextlib.suppress(BaseException):
                await self._expiry
            self._expiry = None
        for server in self._servers.values():
            server.close()
        for task in list(self._connections):
            task.cancel()
        for task in list(self._connections):
            with contextlib.suppress(BaseException):
                await task
        for server in self._servers.values():
            with contextlib.suppress(Exception):
                await server.wait_closed()
        self._servers.clear()
