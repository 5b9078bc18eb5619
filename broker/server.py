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

Fetch responses carry their records as :class:`~replication.log.LogSlice` parts, sent with
``loop.sendfile`` (``os.sendfile`` on plaintext sockets), the rest of the frame around them
with the transport, TCP_CORK holding the pieces together where the platform has it.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import socket
from collections.abc import Sequence
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
from broker.wire import (
    SIZE,
    Encoded,
    FrameError,
    encode_response,
    parse_header,
    parse_request,
    peek,
)
from replication.log import LogSlice

__all__ = ["MAX_IN_FLIGHT", "KafkaServer"]

log = logging.getLogger(__name__)

MAX_IN_FLIGHT = 32
"""Requests of one connection waiting for their responses before its reader pauses."""

READ_LIMIT = 1 << 20
"""The stream reader's buffer target (it pauses the socket beyond twice this)."""

_CORK = getattr(socket, "TCP_CORK", None)
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

    async def run(self) -> None:
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
        finally:
            for task in (reading, writing):
                task.cancel()
            for task in (reading, writing):
                with contextlib.suppress(BaseException):
                    await task
            self._drop_pending()
            self.writer.close()

    def _drop_pending(self) -> None:
        while not self.queue.empty():
            entry = self.queue.get_nowait()
            if isinstance(entry, tuple):
                self.pending.append(entry)
        for ctx, result in self.pending:
            if isinstance(result, asyncio.Future):
                result.cancel()
            if ctx is not None:
                ctx.close_slices()
        self.pending.clear()

    async def _read_loop(self) -> bool:
        """Read and dispatch frames; True when the connection must close after the responses
        already due (a refused request), False at the end of the stream."""
        limit = self.server.max_request_bytes
        while True:
            try:
                head = await self.reader.readexactly(SIZE.size)
            except (asyncio.IncompleteReadError, ConnectionError):
                return False
            (size,) = SIZE.unpack(head)
            if size < 0 or size > limit:
                log.warning("closing %s: a request of %d bytes exceeds "
                            "socket.request.max.bytes (%d)", self.peer, size, limit)
                return True
            try:
                frame = await self.reader.readexactly(size)
            except (asyncio.IncompleteReadError, ConnectionError):
                return False
            await self.slots.acquire()
            entry = self.server.dispatch(frame, self.listener, self.peer)
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
                    result = await result
                if result is CLOSE_CONNECTION:
                    return
                if result is not NO_RESPONSE:
                    assert ctx is not None
                    await self._send(encode_response(ctx.correlation_id, result,
                                                     scatter=bool(ctx.slices)))
            except (ConnectionError, asyncio.CancelledError):
                raise
            except Exception:
                log.exception("closing %s: answering api %s failed", self.peer,
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
            writer.write(b"".join([SIZE.pack(encoded.size), *encoded.parts]))
            await writer.drain()
            return
        transport = writer.transport
        sock = transport.get_extra_info("socket")
        corked = _CORK is not None and sock is not None
        if corked:
            sock.setsockopt(socket.IPPROTO_TCP, _CORK, 1)
        try:
            loop = asyncio.get_running_loop()
            for chunk in encoded.chunks():
                if type(chunk) is LogSlice:
                    with os.fdopen(chunk.fd, "rb", buffering=0, closefd=False) as file:
                        sent = await loop.sendfile(transport, file, chunk.position, chunk.size)
                    if sent != chunk.size:  # the file shrank under us: the frame is broken
                        raise ConnectionError(f"sent {sent} of {chunk.size} bytes of a log "
                                              "segment (truncated meanwhile)")
                elif chunk:
                    writer.write(chunk)
            await writer.drain()
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
                 max_request_bytes: int) -> None:
        self.listeners = tuple(listeners)
        self.registry = registry
        self.max_request_bytes = max_request_bytes
        self.services: BrokerServices | ControllerNodeServices | None = None
        self.gate: asyncio.Event | None = None
        self.ungated: frozenset[int] = frozenset()
        self._servers: dict[str, asyncio.Server] = {}
        self._connections: set[asyncio.Task] = set()

    async def bind(self) -> dict[str, int]:
        """Listen on every listener without accepting yet; returns the ports bound, by listener
        name (a port of 0 binds a free one). Raises OSError when an address is taken."""
        ports = {}
        try:
            for listener in self.listeners:
                server = await asyncio.start_server(
                    lambda r, w, name=listener.name: self._accept(name, r, w),
                    host=listener.host or None, port=listener.port, limit=READ_LIMIT,
                    start_serving=False, reuse_address=True)
                self._servers[listener.name] = server
                ports[listener.name] = server.sockets[0].getsockname()[1]
        except OSError:
            await self.close()
            raise
        return ports

    async def start_serving(self) -> None:
        if self.services is None:
            raise RuntimeError("no broker services to serve")
        for server in self._servers.values():
            await server.start_serving()

    async def _accept(self, listener: str, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await _Connection(self, listener, reader, writer).run()
        except asyncio.CancelledError:
            # close() ends connections so; ending the task normally keeps asyncio's stream
            # callback (which asks a finished connection task for its exception) quiet
            pass
        except Exception:
            log.exception("connection on %s failed", listener)
        finally:
            self._connections.discard(task)

    def dispatch(self, frame: bytes, listener: str, peer: str) -> Any:
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
                             listener=listener, peer=peer)
        gate = self.gate
        if gate is not None and not gate.is_set() and key not in self.ungated:
            return ctx, self._after(gate, ctx, api.handle, request)
        try:
            return ctx, api.handle(ctx, request)
        except Exception:
            log.exception("closing %s: %s v%d failed", peer, api.name, version)
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
