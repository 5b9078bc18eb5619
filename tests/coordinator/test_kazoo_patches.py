"""What reaches into kazoo's internals (coordinator.kazoo_patches): the kazoo it is tested with,
refused otherwise at connect time, and the burst reads wrapped around kazoo's connection."""

from __future__ import annotations

import io
import re
import socket
import tomllib
from pathlib import Path

import pytest

import coordinator
from coordinator import kazoo_patches
from coordinator.kazoo_patches import install_bursts
from coordinator.zk_io import BURST, ReadAheadSocket, poll_select
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
    """The two methods of kazoo's ConnectionHandler that install_bursts wraps, as kazoo has
    them: _read waits and reads (here without the wait), _read_socket handles one packet."""

    def __init__(self, sock: ReadAheadSocket) -> None:
        self._socket = sock
        self.packets: list[bytes] = []
        self.slow_reads = 0

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
