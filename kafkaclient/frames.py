"""Kafka's framing, read in one place: a 4-byte big-endian size, then that many bytes.

A size that is negative or over the reader's limit is refused before any of the body is read
(:class:`FrameTooLarge`), as Kafka's NetworkReceive refuses it: the server's limit is
``socket.request.max.bytes`` (:data:`~broker.security.authenticator.SASL_MAX_RECEIVE` before
SASL authentication); clients set none (None), as Kafka's clients do, but what they hold grows
with the bytes that actually arrive, never with what a size claims.

:func:`read_frame` serves the asyncio server, :func:`receive_frame` the blocking clients (the
connections between brokers, the controller's channel).
"""

from __future__ import annotations

import asyncio
import socket
import struct

__all__ = ["SIZE", "FrameTooLarge", "check_size", "read_frame", "receive_frame"]

SIZE = struct.Struct(">i")

_FIRST_READ = 1 << 20
"""The most a blocking read allocates before bytes arrive; beyond it the buffer doubles as
they do (a hostile size claims no memory)."""


class FrameTooLarge(ConnectionError):
    """A frame's size is negative or over the limit: the connection must close."""

    def __init__(self, size: int, limit: int | None) -> None:
        super().__init__(f"a frame of {size} bytes" + ("" if limit is None or size < 0
                                                        else f" exceeds {limit}"))
        self.size = size
        self.limit = limit


def check_size(size: int, limit: int | None) -> None:
    """Raise :class:`FrameTooLarge` unless ``0 <= size <= limit`` (None: no upper limit)."""
    if size < 0 or (limit is not None and size > limit):
        raise FrameTooLarge(size, limit)


async def read_frame(reader: asyncio.StreamReader, limit: int | None) -> bytes | None:
    """The next frame's body; None at the end of the stream (a connection lost mid-frame
    too). :class:`FrameTooLarge` for a size out of bounds, its body unread."""
    try:
        head = await reader.readexactly(SIZE.size)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    (size,) = SIZE.unpack(head)
    check_size(size, limit)
    try:
        return await reader.readexactly(size)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None


def receive_frame(sock: socket.socket, limit: int | None = None) -> bytes:
    """The next frame's body from a blocking socket; ConnectionError when the peer closes
    mid-frame, :class:`FrameTooLarge` for a size out of bounds, OSError (a timeout too) as
    the socket raises it."""
    (size,) = SIZE.unpack(_receive(sock, SIZE.size))
    check_size(size, limit)
    return _receive(sock, size)


def _receive(sock: socket.socket, n: int) -> bytes:
    out = bytearray(min(n, _FIRST_READ))
    got = 0
    while got < n:
        if got == len(out):
            out.extend(bytes(min(len(out), n - got)))
        view = memoryview(out)
        try:
            count = sock.recv_into(view[got:], len(out) - got)
        finally:
            view.release()
        if not count:
            raise ConnectionError(f"connection closed after {got} of {n} bytes")
        got += count
    return bytes(out)
