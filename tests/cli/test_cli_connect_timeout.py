"""``--timeout`` bounds the wait for an unreachable coordinator: a ZooKeeper "server" that accepts
connections and never answers is given up at the connect timeout, not when kazoo's read of the
connect reply (as long as the session timeout) ends."""

from __future__ import annotations

import socket
import threading

import coordinator
from tests.waiting import wait_until


def test_zookeeper_gives_up_at_the_connect_timeout() -> None:
    outcome: list[BaseException] = []
    with socket.create_server(("127.0.0.1", 0)) as silent:
        url = f"zookeeper://127.0.0.1:{silent.getsockname()[1]}"

        def connect() -> None:
            try:
                coordinator.connect(url, timeout=0.3, session_timeout=120)
            except BaseException as exc:
                outcome.append(exc)

        threading.Thread(target=connect, daemon=True).start()
        # kazoo's own start() would stop its client and wait out the 120 s read first
        wait_until(lambda: outcome, timeout=60, message="connect() to give up")
    assert isinstance(outcome[0], coordinator.ConnectionFailed)
    assert str(outcome[0]).endswith("within 0.3s")
