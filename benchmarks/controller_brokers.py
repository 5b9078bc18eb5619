"""The controller benchmark's stand-in brokers' registrations: one coordinator session per
broker holding its ephemeral ``/brokers/ids/<id>``, which the benchmark closes to lose a broker
and opens again to bring it back.

On ZooKeeper and etcd the sessions live in a process of their own (:class:`RemoteSessions`), as
a deployment's brokers' do: in the benchmark's process they shared the interpreter with the
first controller, whose initial load of 1,000,000 partitions held the GIL past ZooKeeper's
session timeout, and the brokers' sessions expired. The memory coordinator lives in one
process, so there they stay in it (:class:`LocalSessions`).

What the controller sends each broker is delivered in the benchmark's process (the in-process
network's handlers, see benchmarks/controller.py); only the sessions are here.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import coordinator
from coordinator.codecs import BrokerInfo
from coordinator.metadata import MetadataClient

Check = Callable[[], None]
PARALLEL = 32  # sessions opened or closed at once


def _register(url: str, b: int, session_timeout: float | None) -> tuple[Any, int]:
    options = {} if session_timeout is None else {"session_timeout": session_timeout}
    s = coordinator.connect(url, **options)
    epoch = MetadataClient(s).register_broker(BrokerInfo(id=b, host="127.0.0.1", port=9092))
    return s, epoch


class LocalSessions:
    """The brokers' sessions in this process (the memory coordinator)."""

    def __init__(self, url: str, session_timeout: float | None = None) -> None:
        self.url, self.session_timeout = url, session_timeout
        self.sessions: dict[int, Any] = {}

    def register(self, ids: Iterable[int]) -> dict[int, int]:
        """Open a session per broker of ``ids`` and register it, all at once (as a cluster's
        brokers start together): each one's broker epoch."""
        ids = list(ids)
        with ThreadPoolExecutor(min(PARALLEL, max(1, len(ids)))) as pool:
            done = list(pool.map(lambda b: _register(self.url, b, self.session_timeout), ids))
        epochs = {}
        for b, (session, epoch) in zip(ids, done, strict=True):
            self.sessions[b], epochs[b] = session, epoch
        return epochs

    def close(self, ids: Iterable[int]) -> None:
        """Close these brokers' sessions, all at once (their registrations go with them)."""
        closing = [self.sessions.pop(b) for b in ids]
        with ThreadPoolExecutor(min(PARALLEL, max(1, len(closing)))) as pool:
            list(pool.map(lambda s: s.close(), closing))

    @staticmethod
    def pid() -> int | None:
        return None

    def stop(self) -> None:
        self.close(list(self.sessions))


class RemoteSessions:
    """The brokers' sessions in a process of their own; the same calls as
    :class:`LocalSessions`, each answered once the child has done it. ``check`` is called
    while waiting (the benchmark's check that its server is alive)."""

    def __init__(self, url: str, check: Check, session_timeout: float | None = None) -> None:
        mp = multiprocessing.get_context("spawn")
        self.conn, child = mp.Pipe()
        self.check = check
        self.proc = mp.Process(target=_sessions_process, args=(url, session_timeout, child),
                               name="stand-in-brokers", daemon=True)
        self.proc.start()

    def _call(self, command: str, ids: Iterable[int], timeout: float = 600) -> Any:
        self.conn.send((command, list(ids)))
        deadline = time.monotonic() + timeout
        while not self.conn.poll(min(1.0, max(0.0, deadline - time.monotonic()))):
            self.check()
            if not self.proc.is_alive():
                raise RuntimeError(f"the stand-in brokers' process exited ({self.proc.exitcode})"
                                   f" before {command!r} was done")
            if time.monotonic() >= deadline:
                raise TimeoutError(f"the stand-in brokers' process: {command!r} not done "
                                   f"within {timeout:.0f}s")
        got, value = self.conn.recv()
        if got == "error":
            raise RuntimeError(f"the stand-in brokers' process failed: {value}")
        return value

    def register(self, ids: Iterable[int]) -> dict[int, int]:
        return dict(self._call("register", ids))

    def close(self, ids: Iterable[int]) -> None:
        self._call("close", ids)

    def pid(self) -> int | None:
        return self.proc.pid

    def stop(self) -> None:
        try:
            self.conn.send(("stop", []))
        except OSError:
            pass
        self.proc.join(30)
        if self.proc.is_alive():
            self.proc.kill()


def _sessions_process(url: str, session_timeout: float | None, conn: Any) -> None:
    """The child: registers and closes brokers' sessions as told, answering each command."""
    sessions = LocalSessions(url, session_timeout)
    try:
        while True:
            command, ids = conn.recv()
            if command == "stop":
                break
            if command == "register":
                conn.send(("ok", sessions.register(ids)))
            elif command == "close":
                sessions.close(ids)
                conn.send(("ok", None))
    except (EOFError, OSError):  # the benchmark stopped (a failed run exits at once)
        pass
    except Exception as exc:  # the parent reports it as the step's failure
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        for s in sessions.sessions.values():
            try:
                s.close()
            except Exception:  # noqa: BLE001, S110 - the process is ending
                pass
