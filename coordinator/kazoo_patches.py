"""Every place the ZooKeeper backend reaches into kazoo's private internals, and the version of
kazoo they are known to hold for.

kazoo gives no promise about these: a release may rename or reshape any of them and the backend
would break, silently or not. So they live here, each with what it relies on and why it exists,
and :func:`check_version` refuses, at connect time, any kazoo but :data:`SUPPORTED` (the one the
suite runs on; pyproject.toml pins the same). Upgrading kazoo means reading kazoo's
``client.py`` and ``protocol/connection.py`` against this list, running the suite, and moving
the pin and :data:`SUPPORTED` together.

The patches:

* :func:`send` -- requests kazoo does not have, through ``KazooClient._call(request,
  async_result)``. Relies on the shape kazoo's ``ConnectionHandler`` expects of a request (``type``
  (the opcode), ``serialize()``, ``deserialize(buffer, offset)``), on a reply's error code being
  raised as ``kazoo.exceptions.EXCEPTIONS[code]``, and on kazoo passing the str items of an
  opcode-14 answer through ``Transaction.unchroot``. Why: ZooKeeper's read-only multi (opcode 22)
  and ``addWatch`` / ``removeWatches`` (106, 18), which kazoo 2.11 lacks, a multi codec without
  kazoo's per-op objects (:mod:`coordinator.zk_protocol`; the bulk-write path runs 100,000 ops
  through it), and creating the chroot by its absolute path. No figure for these is recorded in
  git log (83f27e8 brought them with the backend).
* :func:`install_bursts` -- wraps ``ConnectionHandler._read`` and ``._read_socket`` and reads
  ``._socket`` and ``kazoo.protocol.connection.CLOSE_RESPONSE`` (the connection is
  ``KazooClient._connection``), so that packets already in the read-ahead buffer are taken a
  burst at a time. Gain (73781af): a tree watch's 30,000 notifications cost 0.35 s of CPU, was
  0.6 s. Notifications whole in that buffer (xid -1) are passed straight to
  ``ConnectionHandler._read_watch_event(packet, 16)``, which is all kazoo's ``_read_socket``
  does with one after parsing its reply header (``kazoo.protocol.connection.WATCH_XID``), up to
  :data:`~coordinator.zk_io.NOTIFICATIONS` per turn. Gain (868ebca): a tree watch's CPU for
  200,000 changes 2.38 and 2.28 s -> 1.58 and 1.77 s (``benchmarks/watch.py --backend
  zookeeper --kind tree --nodes 200000``, two alternated pairs).
* :func:`route_node_events` -- wraps ``ConnectionHandler._read_watch_event(buffer, offset)``,
  decodes the watch event itself (reply header, then type, state and path) and reads
  ``KazooClient._data_watchers`` and ``._child_watchers`` (path -> set of one-shot watchers,
  replaced whole when a session's watches are reset). Why: kazoo 2.11 knows nothing of persistent
  recursive watches; their notifications reach it as ordinary events, which it would hand only to
  its one-shot watchers of that path. The tree watches of :mod:`coordinator.zk_tree` are fed from
  here: one watch for a standby's whole store instead of a data watch per partition state, which
  cost the server and the standby about 0.2 ms of CPU per change, 30,000 changes in a mass
  election (27af756). kazoo's own pass is skipped for a path it holds no watcher of, which is
  every event of a tree but a few (495f5b6; no separate figure recorded).
* :func:`mask_auth_in_logs` -- a filter on kazoo's client logger (``kazoo.client``, which its
  ``ConnectionHandler`` logs through) that shows the ``Auth`` request of a digest login as
  ``auth='***'``: kazoo logs every request it sends at DEBUG, the digest's ``user:password``
  with it. Relies on the request being one of the record's args, as a
  ``kazoo.protocol.serialization.Auth``.

Relied on without patching: :class:`coordinator.zk_io.ReadAheadHandler` subclasses kazoo's
``SequentialThreadingHandler`` through its public handler interface (``create_connection``,
``select``), but its read-ahead works only because ``ConnectionHandler._read`` reads without
waiting when the socket's ``pending()`` is above 0 (kazoo's TLS path). Gain (b664a54): a
watcher's CPU for 20,000 data notifications 7.6 s -> 2.1 s.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from kazoo.client import KazooClient
from kazoo.protocol.connection import CLOSE_RESPONSE
from kazoo.protocol.serialization import Auth

from coordinator.errors import CoordinatorError
from coordinator.zk_io import BURST, NOTIFICATIONS, ReadAheadSocket

SUPPORTED = "2.11.0"
"""The kazoo these patches are tested with; pyproject.toml pins ``kazoo==`` this."""

CREATED, DELETED, CHANGED = 1, 2, 3  # ZooKeeper's event types (4, children, is not ours)
_event_head = struct.Struct("!iqiii")  # reply header (xid, zxid, err), then type and state
_int = struct.Struct("!i")
_REPLY_HEADER = 16  # xid, zxid, err: where a notification's event starts


def installed_version() -> str:
    """The version of the kazoo distribution installed ("unknown" without its metadata)."""
    try:
        return version("kazoo")
    except PackageNotFoundError:
        return "unknown"


def check_version() -> None:
    """Refuse a kazoo other than :data:`SUPPORTED`: one line saying both."""
    installed = installed_version()
    if installed != SUPPORTED:
        raise CoordinatorError(
            f"kazoo {installed} is installed, but partctl's ZooKeeper backend patches kazoo's "
            f"internals and supports kazoo {SUPPORTED} only: pip install 'kazoo=={SUPPORTED}'")


class _MaskAuth(logging.Filter):
    """Shows an ``Auth`` request among a record's args without its credential."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and any(isinstance(a, Auth) for a in args):
            record.args = tuple(f"Auth(scheme={a.scheme!r}, auth='***')"
                                if isinstance(a, Auth) else a for a in args)
        return True


_MASK_AUTH = _MaskAuth()


def mask_auth_in_logs(logger: logging.Logger | None = None) -> None:
    """Install the filter on kazoo's client logger (once; idempotent)."""
    logger = logger or logging.getLogger("kazoo.client")
    if _MASK_AUTH not in logger.filters:
        logger.addFilter(_MASK_AUTH)


def patch_client(client: KazooClient) -> None:
    """The patches every client of the backend gets, before it starts (tree watches add
    :func:`route_node_events` when the first is armed)."""
    install_bursts(client._connection)
    mask_auth_in_logs(client.logger)


def send(client: KazooClient, request: Any) -> Any:
    """Queue a request object (see :mod:`coordinator.zk_protocol`) on the client's
    connection, as kazoo's own methods do; returns kazoo's async result for it."""
    result = client.handler.async_result()
    client._call(request, result)
    return result


def install_bursts(connection: Any) -> None:
    """Make kazoo's ``connection`` (a ``ConnectionHandler``) read buffered packets in bursts.

    Its ``_read`` takes bytes already buffered straight from the :class:`ReadAheadSocket`
    (kazoo's own code, with its wait and error handling, reads the rest), and its
    ``_read_socket`` (one packet) goes on with the next while a whole one is buffered, up to
    :data:`~coordinator.zk_io.BURST`: kazoo's loop then sends queued requests and pings as
    before.
    """
    read, read_socket = connection._read, connection._read_socket

    def read_buffered(length: int, timeout: float) -> bytes:
        sock = connection._socket
        if type(sock) is ReadAheadSocket and sock.buffered() >= length:
            return sock.take(length)
        data: bytes = read(length, timeout)
        return data

    def read_burst(read_timeout: float) -> Any:
        response = read_socket(read_timeout)
        sock = connection._socket
        if type(sock) is not ReadAheadSocket:
            return response
        # Notifications whole in the buffer go straight to the connection's handler of them,
        # as kazoo's packet reader would pass them (after the 16-byte reply header), without
        # its generic header parsing: a standby behind a mass election is told of a million.
        notification = sock.take_notification
        watch_event = connection._read_watch_event
        told = 0
        for _ in range(BURST - 1):
            if response == CLOSE_RESPONSE:
                break
            while told < NOTIFICATIONS and (packet := notification()) is not None:
                watch_event(packet, _REPLY_HEADER)
                told += 1
            if not sock.has_packet():
                break
            response = read_socket(read_timeout)
        return response

    connection._read = read_buffered
    connection._read_socket = read_burst


def route_node_events(client: KazooClient, route: Callable[[str, bool, int], None]) -> None:
    """Call ``route(path, deleted, zxid)``, on kazoo's connection thread, for every node
    created, changed or deleted that the session is told of (``path`` with the chroot, as
    the server sends it; ``zxid`` 0 from a server before 3.9), after kazoo's own one-shot
    watchers of that path, if any, had it as before."""
    connection = client._connection
    original = connection._read_watch_event

    def read_watch_event(buffer: bytes, offset: int) -> None:
        _, zxid, _, kind, _ = _event_head.unpack_from(buffer, 0)  # zxid: -1 before 3.9
        if kind not in (CREATED, DELETED, CHANGED):
            original(buffer, offset)
            return
        start = _event_head.size
        length = _int.unpack_from(buffer, start)[0]
        path = bytes(buffer[start + 4:start + 4 + length]).decode()
        # kazoo's own watchers, as before; its pass is skipped when it holds none here,
        # which is every event of a tree but the few nodes also watched one-shot.
        if client._data_watchers.get(path) or client._child_watchers.get(path):
            original(buffer, offset)
        route(path, kind == DELETED, max(zxid, 0))

    connection._read_watch_event = read_watch_event
