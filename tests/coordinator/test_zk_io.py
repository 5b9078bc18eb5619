"""kazoo's connection I/O: read-ahead sockets and the one-poll select (coordinator.zk_io)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from coordinator.zk_io import (
    BURST,
    CHUNK,
    ReadAheadHandler,
    ReadAheadSocket,
    install_bursts,
    poll_select,
)


@pytest.fixture
def pair() -> Iterator[tuple[ReadAheadSocket, socket.socket]]:
    a, b = socket.socketpair()
    a.setblocking(False)
    yield ReadAheadSocket(a), b
    a.close()
    b.close()


def _wait_readable(sock: ReadAheadSocket) -> None:
    assert poll_select([sock], [], 5.0)[0] == [sock]


def test_one_recv_takes_what_the_kernel_holds_and_serves_later_reads(
        pair: tuple[ReadAheadSocket, socket.socket]) -> None:
    sock, peer = pair
    peer.sendall(b"\x00\x00\x00\x03abc\x00\x00\x00\x02de")
    _wait_readable(sock)
    assert sock.recv(4) == b"\x00\x00\x00\x03"
    assert sock.buffered() == 9 and sock.pending() == 9
    assert sock.recv(3) == b"abc"
    assert sock.recv(4) == b"\x00\x00\x00\x02"
    assert sock.recv(100) == b"de"  # a short read: only what is buffered, no wait
    assert sock.buffered() == 0 and sock.pending() == 0


def test_select_reports_buffered_data_the_kernel_no_longer_holds(
        pair: tuple[ReadAheadSocket, socket.socket]) -> None:
    sock, peer = pair
    peer.sendall(b"0123456789")
    _wait_readable(sock)
    assert sock.recv(2) == b"01"
    # The kernel's buffer is empty now: a plain poll would not report the socket.
    assert poll_select([sock.fileno()], [], 0)[0] == []
    assert poll_select([sock], [], 2.0)[0] == [sock]


def test_buffered_socket_does_not_starve_the_other_readers(
        pair: tuple[ReadAheadSocket, socket.socket]) -> None:
    sock, peer = pair
    wake_r, wake_w = socket.socketpair()
    try:
        peer.sendall(b"xyz")
        _wait_readable(sock)
        sock.recv(1)
        wake_w.send(b"\0")
        readable, _, _ = poll_select([sock, wake_r], [], 1.0)
        assert sock in readable and wake_r in readable
        wake_r.recv(1)
        assert poll_select([sock, wake_r], [], 1.0)[0] == [sock]
    finally:
        wake_r.close()
        wake_w.close()


def test_select_times_out_and_reports_writable(
        pair: tuple[ReadAheadSocket, socket.socket]) -> None:
    sock, _ = pair
    assert poll_select([sock], [], 0.01) == ([], [], [])
    assert poll_select([], [sock], 1.0) == ([], [sock], [])
    assert poll_select([sock], [sock], 1.0) == ([], [sock], [])


def test_large_reads_are_not_capped_by_the_chunk(
        pair: tuple[ReadAheadSocket, socket.socket]) -> None:
    sock, peer = pair
    blob = bytes(range(256)) * (3 * CHUNK // 256)
    peer.setblocking(True)
    got = bytearray()
    sender = threading.Thread(target=peer.sendall, args=(blob + b"tail",))
    sender.start()
    while len(got) < len(blob):
        _wait_readable(sock)
        got += sock.recv(len(blob) - len(got))
    sender.join()
    assert bytes(got) == blob
    _wait_readable(sock)
    assert sock.recv(4) == b"tail"


def test_end_of_stream_and_closed_sockets(pair: tuple[ReadAheadSocket, socket.socket]) -> None:
    sock, peer = pair
    peer.close()
    _wait_readable(sock)
    assert sock.recv(4) == b""  # kazoo turns this into ConnectionDropped
    sock.close()
    with pytest.raises(ValueError):
        poll_select([sock], [], 0)
    with pytest.raises(ValueError):
        poll_select([], [], -1)


def test_handler_makes_read_ahead_connections() -> None:
    server = socket.create_server(("127.0.0.1", 0))
    try:
        handler = ReadAheadHandler()
        conn = handler.create_connection(server.getsockname(), timeout=5)
        try:
            assert isinstance(conn, ReadAheadSocket)
            accepted, _ = server.accept()
            accepted.sendall(b"hello")
            assert handler.select([conn], [], [], 5.0)[0] == [conn]
            assert conn.recv(2) == b"he" and conn.pending() == 3
            accepted.close()
        finally:
            conn.close()
    finally:
        server.close()


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
