"""A loopback TCP proxy whose connections a test can cut, to force a real reconnect."""

from __future__ import annotations

import contextlib
import socket
import threading

from tests.servers import free_port


class TcpProxy:
    """Forwards 127.0.0.1:<port> to a target; ``cut()`` drops every open connection.

    While ``hold()`` is in force, new connections are accepted and closed at once, so a client
    stays disconnected until ``release()``. ``swallow_replies()`` makes the connections open
    at that moment drop what the target sends: requests still arrive, their answers never do
    (until ``cut()``; connections made later are not affected).
    """

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = free_port()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._listener.settimeout(0.2)
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._held = False
        self._swallowing: set[socket.socket] = set()
        self._running = True
        self._thread = threading.Thread(target=self._accept_loop, daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _accept_loop(self) -> None:
        while self._running:
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if self._held:
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=2)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if src not in self._swallowing:
                    dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()

    def swallow_replies(self) -> None:
        with self._lock:
            self._swallowing = set(self._conns[1::2])  # the upstream side of each pair

    def cut(self) -> None:
        with self._lock:
            conns, self._conns = self._conns, []
        for s in conns:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
        with self._lock:
            self._swallowing = set()  # only once nothing of theirs can be forwarded any more

    def hold(self) -> None:
        self._held = True
        self.cut()

    def release(self) -> None:
        self._held = False

    def close(self) -> None:
        self._running = False
        self.cut()
        self._listener.close()
        self._thread.join(timeout=2)


class SilentServer:
    """A 127.0.0.1 listener that accepts connections and never answers (nor closes them): a
    server that hangs, as opposed to one that refuses."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port = self._listener.getsockname()[1]
        self._conns: list[socket.socket] = []
        self._running = True
        self._thread = threading.Thread(target=self._accept_loop, daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _accept_loop(self) -> None:
        while self._running:
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._conns.append(conn)

    def close(self) -> None:
        self._running = False
        self._listener.close()
        self._thread.join(timeout=2)
        for conn in self._conns:
            conn.close()
