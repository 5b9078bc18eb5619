"""How the server puts a LogSlice on a plaintext connection: sendfile straight to the socket
while it takes the bytes, the rest through the transport once it is full, in order, and a file
cut short under a send breaks the frame (ConnectionError), never sends other bytes."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

import pytest

from broker.server import _send_slice
from replication.log import LogSlice

SIZE = 8 << 20  # more than loopback's socket buffers hold: the socket fills mid-slice


async def _send_and_read(path: Path, slices: list[tuple[int, int]], before: bytes,
                         *, slow: bool) -> bytes:
    received = bytearray()
    done = asyncio.Event()

    async def reader(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        while chunk := await r.read(1 << 16):
            received.extend(chunk)
            if slow:
                await asyncio.sleep(0.001)
        w.close()
        done.set()

    server = await asyncio.start_server(reader, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    sock = writer.transport.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 << 10)
    writer.write(before)
    for position, size in slices:
        fd = os.open(path, os.O_RDONLY)
        piece = LogSlice(fd, position, size, 0)
        try:
            await _send_slice(writer, sock.fileno(), piece)
        finally:
            piece.close()
    writer.close()
    await done.wait()
    server.close()
    return bytes(received)


@pytest.mark.parametrize("slow", [False, True])
def test_slices_arrive_whole_and_in_order_when_the_socket_fills(tmp_path: Path,
                                                                  slow: bool) -> None:
    data = os.urandom(SIZE)
    path = tmp_path / "segment.log"
    path.write_bytes(data)
    slices = [(5, SIZE // 2), (0, 3), (SIZE // 2, SIZE // 2), (100, 1000)]
    got = asyncio.run(_send_and_read(path, slices, b"header" * 1000, slow=slow))
    assert got == b"header" * 1000 + b"".join(data[p:p + n] for p, n in slices)


def test_a_file_cut_short_under_the_send_is_a_broken_frame(tmp_path: Path) -> None:
    path = tmp_path / "segment.log"
    path.write_bytes(os.urandom(1000))
    with pytest.raises(ConnectionError, match="truncated meanwhile"):
        asyncio.run(_send_and_read(path, [(0, 5000)], b"", slow=False))
