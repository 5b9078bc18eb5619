"""kazoo's connection I/O: read-ahead sockets and the one-poll select (coordinator.zk_io).
(The burst reads that patch kazoo's connection are in test_kazoo_patches.)"""

from __future__ import annotations

import socket
import struct
import threading

import pytest

from coordinator.zk_io import CHUNK, ReadAheadHandler, ReadAheadSocket, poll_select


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


def test_a_notification_is_taken_only_whole_and_long_enough(
        pair: tuple[ReadAheadSocket, socket.socket]) -> None:
    """take_notification hands out a buffered packet whose xid is -1 only when all of it is
    here and its length can hold a notification; anything else stays for kazoo's reader."""
    sock, _ = pair
    event = struct.pack("!iqiiii", -1, 5, 0, 3, 3, 2) + b"/a"
    short = struct.pack("!ii", 8, -1) + b"\0" * 4  # xid -1, but no room for an event
    sock._buf, sock._pos = struct.pack("!i", len(event)) + event + short, 0  # (as if read)
    assert sock.take_notification() == event
    assert sock.take_notification() is None and sock.buffered() == len(short)
    reply = struct.pack("!iiqi", 16, 9, 5, 0)  # a reply (xid 9): not a notification
    sock._buf, sock._pos = reply + struct.pack("!i", 40) + struct.pack("!i", -1), 0
    assert sock.take_notification() is None and sock.buffered() == len(reply) + 8
    sock._pos = len(reply)  # a notification of 40 bytes of which 4 are here
    assert sock.take_notification() is None and sock.buffered() == 8
