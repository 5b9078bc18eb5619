"""The fuzzing loop: the regression cases one by one, then mutated seeds over a few
connections at once, with the target's checks every so often and at the end.

Each connection carries one request at a time: a mutated frame is sent, and the connection is
free again when the answer comes; when the broker closes it (what a malformed request costs),
a new one replaces it; when neither happens within :data:`SILENT_AFTER` (a size prefix that
claims more than was sent, a produce with acks=0, a parked fetch) the fuzzer drops it and
opens another. On a failed check the run stops and writes, under ``out``, ``failure.txt``
(what failed, the broker's log tail) and ``frames.txt`` (the recent frames in hex, those in
flight marked); for a traceback it replays the recent frames one by one on fresh connections to
find the one that logs it again (``culprit.txt``).
"""

from __future__ import annotations

import collections
import contextlib
import random
import re
import selectors
import socket
import struct
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .mutate import Seed, mutate
from .seeds import Case
from .target import Target

__all__ = ["Failure", "Result", "run", "run_cases"]

SILENT_AFTER = 0.5
CONNECTIONS = 4
CHECK_EVERY = 2.0
CLIENT_EVERY = 5.0
PROGRESS_EVERY = 5.0
RECENT = 256


class Failure(Exception):
    """A check failed: the message says which; ``kind`` is ``traceback`` when the broker
    logged one (and is otherwise well)."""

    def __init__(self, message: str, kind: str = "") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class Sent:
    at: float
    conn: int
    name: str
    seed: str
    data: bytes


@dataclass
class Result:
    sent: int = 0
    answers: int = 0
    closes: int = 0
    silent: int = 0
    cases: int = 0
    max_rss: int = 0
    failure: str | None = None
    tracebacks: list[str] = field(default_factory=list)
    """With ``keep_going``: the last line of each distinct traceback found."""
    by_mutation: collections.Counter = field(default_factory=collections.Counter)

    def line(self, elapsed: float, rss: int) -> str:
        return (f"fuzz: {elapsed:6.1f}s sent {self.sent} answered {self.answers} closed "
                f"{self.closes} silent {self.silent} rss {rss >> 20} MiB")


class _Conn:
    __slots__ = ("buf", "ident", "inflight", "sock", "used")

    def __init__(self, ident: int, address: tuple[str, int]) -> None:
        self.ident = ident
        self.sock = socket.create_connection(address, timeout=5)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.settimeout(2.0)
        self.buf = b""
        self.inflight: Sent | None = None
        self.used = False

    def prime(self, data: bytes) -> bool:
        """Send ``data`` and wait for its answer (blocking): whether it came."""
        try:
            self.sock.sendall(data)
            while len(self.buf) < 4 or len(self.buf) < 4 + struct.unpack_from(">i", self.buf)[0]:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return False
                self.buf += chunk
        except OSError:
            return False
        self.frames()
        return True

    def frames(self) -> int:
        """Complete response frames in the buffer, consumed."""
        n = 0
        while len(self.buf) >= 4:
            (size,) = struct.unpack_from(">i", self.buf)
            if len(self.buf) < 4 + size:
                break
            self.buf = self.buf[4 + size:]
            n += 1
        return n


def _outcome(address: tuple[str, int], data: bytes, wait: float = 2.0) -> str:
    """``answered``, ``closed`` or ``silent``: what the broker does with ``data`` sent on a
    connection of its own."""
    with socket.create_connection(address, timeout=5) as sock:
        try:
            sock.sendall(data)
        except OSError:
            return "closed"
        sock.settimeout(wait)
        buf = b""
        try:
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    return "closed"
                buf += chunk
                if len(buf) >= 4 and len(buf) >= 4 + struct.unpack_from(">i", buf)[0]:
                    return "answered"
        except TimeoutError:
            return "silent"
        except OSError:
            return "closed"


def _kind(name: str) -> str:
    """A mutation's kind, for the summary: ``len=0xffff-array:topics+size>`` -> ``len``."""
    first = name.split("+")[0].split(":")[0].split("=")[0]
    return re.sub(r"-(array|string|bytes)$", "", first)


def _unreachable(target: Target, exc: OSError) -> str:
    """Why the broker refused a connection: it exited (given a moment to be reaped), or
    it did not accept."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        target.broker.process.wait(5)
    if not target.alive():
        return f"the broker exited: {target.broker.exit_reason()}"
    return f"cannot reach the broker: {exc}"


def _check(target: Target, result: Result, *, client: bool, again: bool = True) -> None:
    if not target.alive():
        raise Failure(f"the broker exited: {target.broker.exit_reason()}")
    rss = target.rss()
    result.max_rss = max(result.max_rss, rss)
    if rss > target.rss_bound:
        raise Failure(f"the broker's RSS is {rss >> 20} MiB, over the bound of "
                      f"{target.rss_bound >> 20} MiB")
    tracebacks = target.new_tracebacks(again)
    if tracebacks:
        raise Failure("the broker logged a traceback:\n" + tracebacks[0], "traceback")
    if client:
        problem = target.fresh_client()
        if problem is not None:
            raise Failure(problem)


def run_cases(target: Target, cases: Sequence[Case], result: Result, out: Path) -> None:
    """Each case on a connection of its own, the broker checked after each. A case with a
    baseline must be answered when its baseline is."""
    for case in cases:
        result.cases += 1
        try:
            try:
                outcome = _outcome(target.address, case.data)
            except OSError as exc:
                raise Failure(_unreachable(target, exc)) from None
            _check(target, result, client=False)
            if case.baseline is not None and outcome != "answered" \
                    and _outcome(target.address, case.baseline) == "answered":
                raise Failure(f"regression case {case.name}: {outcome}, but the same request "
                              "without the unknown tagged field is answered")
        except Failure as exc:
            _write_failure(out, target, str(exc),
                           [Sent(time.monotonic(), -1, case.name, "regression", case.data)],
                           {-1})
            raise Failure(f"{exc} (case {case.name})") from None
    _check(target, result, client=True)


def run(target: Target, seeds: Sequence[Seed], *, seconds: float, count: int | None,
        seed: int, out: Path, say: Callable[[str], None] = print,
        keep_going: bool = False, one_per_connection: bool = False) -> Result:
    """Mutated seeds for ``seconds`` (or ``count`` requests, whichever ends first). With
    ``keep_going`` a traceback does not end the run: its culprit is looked for and written
    under ``out`` (``culprit-N.txt``), and the run goes on (for hunting, not for CI). With
    ``one_per_connection`` each request goes on a new connection (before authentication,
    where the first requests are the ones that matter). A seed with a ``prime`` always
    does, after its prime (a SASL handshake) is answered."""
    rng = random.Random(seed)
    result = Result()
    recent: collections.deque[Sent] = collections.deque(maxlen=RECENT)
    selector = selectors.DefaultSelector()
    conns: dict[int, _Conn] = {}
    ident = 0
    start = time.monotonic()
    last_check = last_client = last_progress = start

    def connect() -> _Conn:
        nonlocal ident
        ident += 1
        conn = _Conn(ident, target.address)
        conns[conn.ident] = conn
        selector.register(conn.sock, selectors.EVENT_READ, conn)
        return conn

    def drop(conn: _Conn) -> None:
        selector.unregister(conn.sock)
        conn.sock.close()
        del conns[conn.ident]

    try:
        for _ in range(CONNECTIONS):
            connect()
        while True:
            now = time.monotonic()
            if now - start >= seconds or (count is not None and result.sent >= count):
                break
            for conn in list(conns.values()):
                if conn.inflight is None:
                    base = rng.choice(seeds)
                    if base.prime or (one_per_connection and conn.used):
                        drop(conn)
                        conn = connect()
                        if base.prime and not conn.prime(base.prime):
                            result.closes += 1
                            drop(conn)
                            connect()
                            continue
                    conn.used = True
                    data, name = mutate(rng, base)
                    sent = Sent(now, conn.ident, name,
                                f"{base.origin} api {base.api_key} v{base.version}", data)
                    conn.inflight = sent
                    recent.append(sent)
                    result.sent += 1
                    result.by_mutation[_kind(name)] += 1
                    try:
                        conn.sock.sendall(data)
                    except OSError:
                        result.closes += 1
                        drop(conn)
                        connect()
                elif now - conn.inflight.at > SILENT_AFTER:
                    result.silent += 1
                    drop(conn)
                    connect()
            for key, _ in selector.select(timeout=0.01):
                conn = key.data
                try:
                    chunk = conn.sock.recv(65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    result.closes += 1
                    drop(conn)
                    connect()
                    continue
                conn.buf += chunk
                answered = conn.frames()
                if answered:
                    result.answers += answered
                    conn.inflight = None
            now = time.monotonic()
            if now - last_check >= CHECK_EVERY:
                last_check = now
                client = now - last_client >= CLIENT_EVERY
                if client:
                    last_client = now
                try:
                    # going on, a failure seen before is not news
                    _check(target, result, client=client, again=not keep_going)
                except Failure as exc:
                    if not (keep_going and exc.kind == "traceback" and target.alive()):
                        raise
                    lines = str(exc).strip().splitlines()
                    where = [x.strip() for x in lines if x.strip().startswith("File ")]
                    last = re.sub(r"0x[0-9a-f]+", "0x...",
                                  (where[-1] + ": " if where else "") + lines[-1])
                    say(f"fuzz: traceback: {last}")
                    if last not in result.tracebacks:
                        result.tracebacks.append(last)
                        n = len(result.tracebacks)
                        _write_failure(out, target, str(exc), list(recent), set(),
                                       f"-{n}")
                        _triage(target, list(recent), out, f"culprit-{n}.txt")
            if now - last_progress >= PROGRESS_EVERY:
                last_progress = now
                say(result.line(now - start, target.rss()))
        _check(target, result, client=True)
    except Failure as exc:
        result.failure = str(exc)
        inflight = {c.ident for c in conns.values() if c.inflight is not None}
        _write_failure(out, target, str(exc), list(recent), inflight)
        if exc.kind == "traceback" and target.alive():
            _triage(target, list(recent), out)
        raise
    except OSError as exc:  # cannot connect: the broker is gone or does not accept
        result.failure = _unreachable(target, exc)
        _write_failure(out, target, result.failure, list(recent),
                       {c.ident for c in conns.values() if c.inflight is not None})
        raise Failure(result.failure) from None
    finally:
        for conn in list(conns.values()):
            conn.sock.close()
        selector.close()
    say(result.line(time.monotonic() - start, target.rss()))
    return result


def _write_failure(out: Path, target: Target, reason: str, recent: Sequence[Sent],
                   inflight: set[int], suffix: str = "") -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"failure{suffix}.txt").write_text(
        f"{reason}\n\nbroker pid {target.pid}, log {target.broker.log_path}\n\n"
        f"--- the broker's log (tail) ---\n{target.log_tail()}\n")
    lines = []
    for s in recent:
        mark = "IN FLIGHT " if s.conn in inflight else ""
        lines.append(f"# {mark}conn {s.conn} {s.seed} mutation {s.name}\n{s.data.hex()}\n")
    (out / f"frames{suffix}.txt").write_text("".join(lines))


def _triage(target: Target, recent: Sequence[Sent], out: Path,
            name: str = "culprit.txt") -> None:
    """Replay the recent frames (newest first), one per connection, until one logs a
    traceback again: that one is written to ``culprit.txt``."""
    for sent in reversed(recent):
        try:
            _outcome(target.address, sent.data, wait=1.0)
        except OSError:
            return
        found = target.new_tracebacks()
        if found:
            out.mkdir(parents=True, exist_ok=True)
            (out / name).write_text(
                f"# {sent.seed} mutation {sent.name}\n{sent.data.hex()}\n\n{found[0]}\n")
            return
        if not target.alive():
            return
