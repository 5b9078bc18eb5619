"""Socket I/O for kazoo's connection thread: read ahead, handle buffered packets in bursts,
and wait with one ``poll`` call.

kazoo's connection loop reads one packet per turn and waits before every read: once for the
loop, once for the packet's length and once for its body, each wait building, using and closing
an epoll selector (four system calls). A burst of watch notifications or small replies therefore
costs kazoo a dozen system calls and most of a hundred microseconds per packet, on the thread
that every reply of the session also needs.

:class:`ReadAheadHandler` is kazoo's threading handler with two changes, both behind kazoo's own
extension points (``KazooClient(handler=...)``; ``handler.create_connection`` and
``handler.select``):

* its connections are :class:`ReadAheadSocket`: a ``recv`` takes everything the kernel holds (up
  to :data:`CHUNK`) and serves later reads from that, and ``pending()`` tells kazoo there is
  buffered data, so kazoo reads it without waiting (kazoo asks ``pending()`` for TLS sockets, which
  buffer the same way);
* its ``select`` reports a socket holding buffered data as readable at once (polling the others
  without waiting, so queued requests are still sent between replies as kazoo intends), and
  otherwise waits with a single ``poll``.

:func:`coordinator.kazoo_patches.install_bursts` then lets kazoo's connection take the packets
already buffered a burst at a time (up to :data:`BURST` per turn of its loop, each whole packet
read straight from the buffer), where it would go once round its loop, with a wait and a timer,
for every one; notifications whole in the buffer go to kazoo's handler of them without its
generic packet reader (:meth:`ReadAheadSocket.take_notification`). Packets are still read one
at a time and in order; only the waiting and copying change.
"""

from __future__ import annotations

import math
import select as _select
import struct
from typing import Any

from kazoo.handlers.threading import SequentialThreadingHandler

CHUNK = 1 << 18  # bytes taken from the kernel per recv when kazoo asks for less
BURST = 8  # buffered packets read per turn of kazoo's loop before it looks at its requests
NOTIFICATIONS = 256  # buffered notifications handled per turn besides (each a few microseconds)
NOTIFICATION_XID = -1  # the xid of a notification's reply header

_int = struct.Struct("!i")
_length_and_xid = struct.Struct("!ii")
_NOTIFICATION_LEAST = 28  # reply header (16), then type, state and the path's length
_READ = _select.POLLIN | _select.POLLPRI | _select.POLLHUP | _select.POLLERR | _select.POLLNVAL
_WRITE = _select.POLLOUT | _select.POLLHUP | _select.POLLERR | _select.POLLNVAL


class ReadAheadSocket:
    """A connected socket whose reads take what the kernel holds and serve later reads from it."""

    __slots__ = ("_sock", "_buf", "_pos")

    def __init__(self, sock: Any) -> None:
        self._sock = sock
        self._buf = b""
        self._pos = 0

    def buffered(self) -> int:
        return len(self._buf) - self._pos

    def has_packet(self) -> bool:
        """Whether a whole length-prefixed packet is buffered."""
        buf, pos = self._buf, self._pos
        return len(buf) - pos >= 4 and len(buf) - pos >= 4 + _int.unpack_from(buf, pos)[0]

    def take_notification(self) -> bytes | None:
        """A whole buffered notification (a packet whose reply header's xid is -1), without
        its length prefix, or None when the next buffered packet is not one or not whole."""
        buf, pos = self._buf, self._pos
        held = len(buf) - pos
        if held < 8:
            return None
        size, xid = _length_and_xid.unpack_from(buf, pos)
        if xid != NOTIFICATION_XID or size < _NOTIFICATION_LEAST or held < 4 + size:
            return None  # (a length too short for one is left to kazoo's reader, as before)
        self._pos = pos + 4
        return self.take(size)

    def take(self, size: int) -> bytes:
        """``size`` buffered bytes (the caller knows they are there)."""
        pos = self._pos
        end = pos + size
        data = self._buf[pos:end]
        if end >= len(self._buf):
            self._buf, self._pos = b"", 0
        else:
            self._pos = end
        return data

    def pending(self) -> int:
        """Bytes readable without waiting: ours, plus a TLS socket's own."""
        inner = getattr(self._sock, "pending", None)
        return len(self._buf) - self._pos + (inner() if inner is not None else 0)

    def recv(self, size: int) -> bytes:
        held = len(self._buf) - self._pos
        if held:
            return self.take(min(size, held))
        data: bytes = self._sock.recv(max(size, CHUNK))
        if len(data) > size:
            self._buf, self._pos = data, size
            return data[:size]
        return data

    def fileno(self) -> int:
        return int(self._sock.fileno())

    def __getattr__(self, name: str) -> Any:  # send, sendall, setblocking, close, ...
        return getattr(self._sock, name)


class ReadAheadHandler(SequentialThreadingHandler):
    """kazoo's threading handler with read-ahead connections and a one-call ``select``."""

    name = "read-ahead threading"

    def create_connection(self, *args: Any, **kwargs: Any) -> ReadAheadSocket:
        return ReadAheadSocket(super().create_connection(*args, **kwargs))

    def select(self, rlist: list[Any], wlist: list[Any], xlist: list[Any],
               timeout: float | None = None) -> tuple[list[Any], list[Any], list[Any]]:
        return poll_select(rlist, wlist, timeout)


def poll_select(rlist: list[Any], wlist: list[Any],
                timeout: float | None) -> tuple[list[Any], list[Any], list[Any]]:
    """``select.select`` for kazoo's connection (no exceptional conditions) over one ``poll``.

    An object with buffered data is readable at once; the rest are then polled without waiting.
    Raises ValueError for a closed socket, as kazoo's selector-based select does.
    """
    ready = [obj for obj in rlist if type(obj) is ReadAheadSocket and obj.buffered()]
    if timeout is not None and timeout < 0:
        raise ValueError("timeout must be non-negative")
    wait = 0 if ready else (-1 if timeout is None else math.ceil(timeout * 1000))
    poller = _select.poll()
    owners: dict[int, tuple[list[Any], list[Any]]] = {}
    for objs, mask, side in ((rlist, _select.POLLIN, 0), (wlist, _select.POLLOUT, 1)):
        for obj in objs:
            if side == 0 and ready and obj in ready:
                continue
            fd = obj if type(obj) is int else obj.fileno()
            if fd < 0:
                raise ValueError("Invalid event mask or fd")
            entry = owners.get(fd)
            if entry is None:
                entry = owners[fd] = ([], [])
            entry[side].append(obj)
            poller.register(fd, mask | (_select.POLLIN if entry[0] else 0)
                            | (_select.POLLOUT if entry[1] else 0))
    readable, writable = ready, []
    if owners:
        for fd, events in poller.poll(wait):
            reads, writes = owners[fd]
            if events & _READ:
                readable.extend(reads)
            if events & _WRITE:
                writable.extend(writes)
    return readable, writable, []
