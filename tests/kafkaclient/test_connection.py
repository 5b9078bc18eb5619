"""kafkaclient's blocking connection: frames read in as few system calls as they arrive in
(FrameReader), and a plain socket whose timeouts the kernel keeps (no poll before each call),
failing a request to a listener that never answers within its timeout."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest

from kafkaclient.connection import BrokerUnreachable, KafkaConnection
from kafkaclient.frames import FrameReader, FrameTooLarge

SIZE = struct.Struct(">i")


class _Counting:
    """A socket's recv_into, counted."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.calls = 0

    def recv_into(self, buffer: memoryview, nbytes: int = 0) -> int:
        self.calls += 1
        return self.sock.recv_into(buffer, nbytes)


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair()
    a.settimeout(10)
    yield a, b
    a.close()
    b.close()


def _frame(body: bytes) -> bytes:
    return SIZE.pack(len(body)) + body


def test_small_frames_sent_together_are_read_with_one_call(pair) -> None:
    a, b = pair
    b.sendall(_frame(b"first") + _frame(b"") + _frame(b"third"))
    counting = _Counting(a)
    reader = FrameReader(counting)  # type: ignore[arg-type]
    assert [reader.next(), reader.next(), reader.next()] == [b"first", b"", b"third"]
    assert counting.calls == 1


def test_a_frame_arriving_a_byte_at_a_time_is_whole(pair) -> None:
    a, b = pair
    data = _frame(bytes(range(200))) + _frame(b"next")

    def send() -> None:
        for i in range(len(data)):
            b.send(data[i:i + 1])
            time.sleep(0.0005)

    sender = threading.Thread(target=send)
    sender.start()
    reader = FrameReader(a)
    assert reader.next() == bytes(range(200))
    assert reader.next() == b"next"
    sender.join()


def test_large_frames_and_a_size_split_at_the_buffers_end(pair) -> None:
    a, b = pair
    big = bytes(i % 251 for i in range(3 << 20))  # past the first allocation, doubled
    # the first frame leaves 2 bytes of the 64 KiB buffer: the next size straddles its end
    first = b"x" * ((64 << 10) - SIZE.size - 2)
    data = _frame(first) + _frame(big) + _frame(b"after")
    sender = threading.Thread(target=b.sendall, args=(data,))
    sender.start()
    reader = FrameReader(a)
    assert reader.next() == first
    assert reader.next() == big
    assert reader.next() == b"after"
    sender.join()


def test_a_size_over_the_limit_is_refused_before_its_body(pair) -> None:
    a, b = pair
    b.sendall(SIZE.pack(1 << 30) + b"abc")
    with pytest.raises(FrameTooLarge, match="exceeds 1024"):
        FrameReader(a, limit=1024).next()
    b.sendall(SIZE.pack(-5))
    with pytest.raises(FrameTooLarge):
        FrameReader(a).next()


def test_a_peer_closing_mid_frame_is_a_connection_error(pair) -> None:
    a, b = pair
    b.sendall(SIZE.pack(100) + b"only this")
    b.shutdown(socket.SHUT_WR)
    with pytest.raises(ConnectionError, match="closed after 9 of 100 bytes"):
        FrameReader(a).next()


def test_a_peer_closing_inside_the_size_is_a_connection_error(pair) -> None:
    a, b = pair
    b.sendall(b"\0\0")
    b.shutdown(socket.SHUT_WR)
    with pytest.raises(ConnectionError, match="2 bytes of a frame's size"):
        FrameReader(a).next()


@pytest.fixture
def silent() -> Iterator[tuple[int, list[socket.socket]]]:
    """A listener on 127.0.0.1 that accepts and never answers."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.05)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except TimeoutError:
                continue
            except OSError:
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    stop.set()
    thread.join()
    server.close()
    for conn in accepted:
        conn.close()


def test_a_listener_that_never_answers_fails_the_call_within_its_timeout(silent) -> None:
    port, _ = silent
    conn = KafkaConnection("127.0.0.1", port, client_id="t", timeout=0.3)
    started = time.monotonic()
    with pytest.raises(BrokerUnreachable, match=r"TimeoutError: timed out") as raised:
        conn.versions()
    assert isinstance(raised.value.__cause__, TimeoutError)  # what callers look for
    assert time.monotonic() - started < 5
    conn.close()


def test_a_plain_socket_blocks_with_its_timeouts_in_the_kernel(silent) -> None:
    """Python's timeout would put a poll() before every send and receive; the kernel's
    bounds each call the same without it."""
    port, _ = silent
    conn = KafkaConnection("127.0.0.1", port, client_id="t", timeout=0.3)
    seen: dict[str, object] = {}
    original = conn._exchange

    def spy(request: object, timeout: float) -> object:
        sock = conn._sock
        assert sock is not None
        seen["python timeout"] = sock.gettimeout()
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.calcsize("@ll"))
        seconds, micros = struct.unpack("@ll", raw)
        seen["kernel timeout"] = round(seconds + micros / 1e6, 1)  # the kernel keeps jiffies
        return original(request, timeout)

    conn._exchange = spy  # type: ignore[method-assign]
    with pytest.raises(BrokerUnreachable):
        conn.versions()
    assert seen == {"python timeout": None, "kernel timeout": 0.3}
    conn.close()


def test_a_call_waiting_on_a_silent_broker_fails_at_once_when_closed(silent) -> None:
    port, _ = silent
    conn = KafkaConnection("127.0.0.1", port, client_id="t", timeout=30)
    failed: list[BaseException] = []

    def call() -> None:
        try:
            conn.versions()
        except BrokerUnreachable as exc:
            failed.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    deadline = time.monotonic() + 10
    while conn._sock is None and time.monotonic() < deadline:
        time.sleep(0.01)  # the call's connection is open: it waits for the answer
    started = time.monotonic()
    conn.close()
    thread.join(10)
    assert failed and time.monotonic() - started < 5
