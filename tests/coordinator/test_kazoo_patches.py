"""What reaches into kazoo's internals (coordinator.kazoo_patches): the kazoo it is tested with,
refused otherwise at connect time, and the burst reads wrapped around kazoo's connection."""

from __future__ import annotations

import io
import re
import socket
import struct
import tomllib
from pathlib import Path

import pytest

import coordinator
from coordinator import kazoo_patches
from coordinator.kazoo_patches import install_bursts
from coordinator.zk_io import BURST, NOTIFICATIONS, ReadAheadSocket, poll_select
from partctl.cli import main
from tests.servers import Server

REPO = Path(__file__).resolve().parents[2]


def test_the_installed_kazoo_is_the_supported_one_and_pyproject_pins_it() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    pins = [d for d in project["dependencies"] if re.match(r"kazoo\b", d)]
    assert pins == [f"kazoo=={kazoo_patches.SUPPORTED}"]
    assert kazoo_patches.installed_version() == kazoo_patches.SUPPORTED


@pytest.mark.servers
def test_another_kazoo_is_refused_at_connect_in_one_line_naming_both_versions(
        zookeeper_server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kazoo_patches, "installed_version", lambda: "2.12.0")
    url = f"zookeeper://{zookeeper_server.address}"
    with pytest.raises(coordinator.CoordinatorError) as info:
        coordinator.connect(url, timeout=5)
    message = str(info.value)
    assert "\n" not in message
    assert "kazoo 2.12.0 is installed" in message and "kazoo 2.11.0 only" in message
    out, err = io.StringIO(), io.StringIO()
    assert main(["topics", "list", "--coordinator", url], out=out, err=err) == 1
    assert err.getvalue() == f"partctl: error: {message}\n"
    monkeypatch.undo()
    with coordinator.connect(url, timeout=5) as client:  # the supported one connects
        assert client.exists("/") is not None


def _wait_readable(sock: ReadAheadSocket) -> None:
    assert poll_select([sock], [], 5.0)[0] == [sock]


class _Connection:
    """The methods of kazoo's ConnectionHandler that install_bursts wraps or calls, as kazoo
    has them: _read waits and reads (here without the wait), _read_socket handles one packet,
    _read_watch_event one notification (the packet without its length, and where its event
    starts)."""

    def __init__(self, sock: ReadAheadSocket) -> None:
        self._socket = sock
        self.packets: list[bytes] = []
        self.slow_reads = 0
        self.log: list[tuple[str, bytes]] = []  # both kinds, in the order handled

    def _read_watch_event(self, buffer: bytes, offset: int) -> None:
        assert offset == 16
        self.log.append(("notification", buffer))

    def _read(self, length: int, timeout: float) -> bytes:
        self.slow_reads += 1
        out = b""
        while len(out) < length:
            _wait_readable(self._socket)
            out += self._socket.recv(length - len(out))
        return out

    def _read_socket(self, read_timeout: float) -> int | None:
        from kazoo.protocol.connection import CLOSE_RESPONSE

        length = int.from_bytes(self._read(4, read_timeout), "big")
        body = self._read(length, read_timeout)
        self.packets.append(body)
        self.log.append(("packet", body))
        return CLOSE_RESPONSE if body == b"close" else None


def _packet(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body


def test_buffered_packets_are_read_in_bursts_straight_from_the_buffer(
        pair: tuple[ReadAheadSocket, socket.socket]) -> None:
    sock, peer = pair
    conn = _Connection(sock)
    install_bursts(conn)
    bodies = [b"p%02d" % i for i in range(2 * BURST + 3)]
    peer.sendall(b"".join(_packet(b) for b in bodies))
    _wait_readable(sock)
    conn._read_socket(1.0)
    assert conn.packets == bodies[:BURST]  # one turn of kazoo's loop: a burst
    assert conn.slow_reads == 1  # the first length; everything else came from the buffer
    conn._read_socket(1.0)
    conn._read_socket(1.0)
    assert conn.packets == bodies
    assert sock.buffered() == 0


def test_a_burst_stops_at_a_partial_packet_and_at_close(
        pair: tuple[ReadAheadSocket, socket.socket]) -> None:
    from kazoo.protocol.connection import CLOSE_RESPONSE

    sock, peer = pair
    conn = _Connection(sock)
    install_bursts(conn)
    whole = _packet(b"one") + _packet(b"two")
    tail = _packet(b"three")
    peer.sendall(whole + tail[:5])
    _wait_readable(sock)
    conn._read_socket(1.0)
    assert conn.packets == [b"one", b"two"]  # the third is not all here: back to the loop
    peer.sendall(tail[5:] + _packet(b"close") + _packet(b"after"))
    # "three" completes through kazoo's own read, which buffers the rest: the burst goes on
    # to "close" and stops there.
    assert conn._read_socket(1.0) == CLOSE_RESPONSE
    assert conn.packets == [b"one", b"two", b"three", b"close"]
    assert sock.has_packet()  # "after" stays for whoever reads next


def _notification(n: int) -> bytes:
    """Reply header (xid -1, zxid, err), then the event: type (changed), state, path."""
    path = b"/n/%d" % n
    return struct.pack("!iqiiii", -1, 100 + n, 0, 3, 3, len(path)) + path


def test_buffered_notifications_go_to_kazoos_handler_of_them_in_order(
        pair: tuple[ReadAheadSocket, socket.socket]) -> None:
    """Whole notifications in the buffer (xid -1) are handed to _read_watch_event as kazoo's
    packet reader would hand them, without it; replies still go through it; the order of
    both is the order they came in. A notification not all here waits for the next turn."""
    sock, peer = pair
    conn = _Connection(sock)
    install_bursts(conn)
    reply = struct.pack("!iqi", 7, 100, 0)
    sequence = [reply + b"first", _notification(1), _notification(2), reply + b"between",
                _notification(3)]
    tail = _packet(_notification(4))
    peer.sendall(b"".join(_packet(p) for p in sequence) + tail[:9])
    _wait_readable(sock)
    conn._read_socket(1.0)
    assert conn.log == [("packet", sequence[0]), ("notification", sequence[1]),
                        ("notification", sequence[2]), ("packet", sequence[3]),
                        ("notification", sequence[4])]
    peer.sendall(tail[9:])
    conn._read_socket(1.0)  # (kazoo's own read completes it)
    assert conn.log[-1] == ("packet", _notification(4)) and sock.buffered() == 0


def test_a_turn_hands_on_a_bounded_number_of_notifications(
        pair: tuple[ReadAheadSocket, socket.socket]) -> None:
    """Past NOTIFICATIONS in one turn of kazoo's loop the burst goes on as before, a packet at a
    time up to BURST, and the rest wait for the next turns: a flood of notifications does not
    keep the loop from its requests and pings. Nothing is lost or reordered."""
    sock, peer = pair
    conn = _Connection(sock)
    install_bursts(conn)
    sent = [b"reply"] + [_notification(i) for i in range(2 * NOTIFICATIONS + 10)]
    peer.sendall(b"".join(_packet(p) for p in sent))  # (about 20 KiB: one recv takes it all)
    _wait_readable(sock)
    conn._read_socket(1.0)
    assert [kind for kind, _ in conn.log].count("notification") == NOTIFICATIONS
    assert len(conn.log) <= 1 + NOTIFICATIONS + BURST
    while sock.buffered():
        conn._read_socket(1.0)
    assert [body for _, body in conn.log] == sent
