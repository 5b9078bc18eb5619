"""Kafka's framing, read in one place: a 4-byte big-endian size, then that many bytes.

A size that is negative or over the reader's limit is refused before any of the body is read
(:class:`FrameTooLarge`), as Kafka's NetworkReceive refuses it: the server's limit is
``socket.request.max.bytes`` (:data:`~broker.security.authenticator.SASL_MAX_RECEIVE` before
SASL authentication); clients set none (None), as Kafka's clients do, but what they hold grows
with the bytes that actually arrive, never with what a size claims.

:func:`read_frame` serves the asyncio server, :func:`receive_frame` and :class:`FrameReader`
the blocking clients (the connections between brokers, the controller's channel).
"""

from __future__ import annotations

import asyncio
import socket
import struct

__all__ = ["SIZE", "FrameReader", "FrameTooLarge", "check_size", "read_frame", "receive_frame"]

SIZE = struct.Struct(">i")

_FIRST_READ = 1 << 20
"""The most a blocking read allocates before bytes arrive; beyond it the buffer doubles as
they do (a hostile size claims no memory)."""

_CHUNK = 64 << 10
"""What :class:`FrameReader` asks the socket for at once: a frame's size and a small body (a
follower's fetch answer with nothing or a few batches) arrive in one system call."""


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


def _receive(sock: socket.socket, n: int, held: bytes = b"") -> bytes:
    """``n`` bytes: ``held`` (those already read) and the rest from ``sock``."""
    out = bytearray(min(n, max(_FIRST_READ, len(held))))
    got = len(held)
    out[:got] = held
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


class FrameReader:
    """Frames from one blocking socket, read in as few system calls as they arrive in.

    :func:`receive_frame` asks for the 4-byte size and then for the body: two system calls a
    frame, and a thread that lets the interpreter go for each and waits for it again. This
    asks for up to 64 KiB at once into a buffer it keeps, so a small frame costs one call;
    bytes past the frame wait in the buffer for the next one. A larger body is received into
    a buffer of its own, grown as :func:`receive_frame` grows it. Errors as
    :func:`receive_frame` raises them."""

    __slots__ = ("_buffer", "_end", "_start", "limit", "sock")

    def __init__(self, sock: socket.socket, limit: int | None = None) -> None:
        self.sock = sock
        self.limit = limit
        self._buffer = bytearray(_CHUNK)
        self._start = 0
        self._end = 0

    def next(self) -> bytes:
        """The next frame's body."""
        while self._end - self._start < SIZE.size:
            self._fill()
        (size,) = SIZE.unpack_from(self._buffer, self._start)
        check_size(size, self.limit)
        begin = self._start + SIZE.size
        stop = begin + size
        if stop <= self._end:
            body = bytes(self._buffer[begin:stop])
            self._start = stop
            if stop == self._end:
                self._start = self._end = 0
            return body
        held = bytes(self._buffer[begin:self._end])
        self._start = self._end = 0
        return _receive(self.sock, size, held)

    def _fill(self) -> None:
        buffer = self._buffer
        if self._start and self._end == len(buffer):  # a size split at the buffer's end
            held = self._end - self._start
            buffer[:held] = buffer[self._start:self._end]
            self._start, self._end = 0, held
        view = memoryview(buffer)
        try:
            count = self.sock.recv_into(view[self._end:])
        finally:
            view.release()
        if not count:
            raise ConnectionError(
                f"connection closed after {self._end - self._start} bytes of a frame's size")
        self._end += count
