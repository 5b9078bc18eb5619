"""The broker under fuzzing: a real ``partctl broker start`` process (through
:func:`broker.cluster.start_broker`) over a ZooKeeper, and the checks that say it is well:
the process is alive, a fresh client gets ApiVersions and Metadata answered within a deadline,
its resident memory (VmRSS) stays under a bound, and its log holds no traceback."""

from __future__ import annotations

import re
import struct
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from broker.cluster import LaunchedBroker, start_broker
from tests.broker.processes import create_topic
from tests.broker.wire_client import RawClient, request

from .seeds import SASL_PASSWORD, SASL_USER

__all__ = ["RSS_BOUND", "TOPIC", "Target", "start_target"]

RSS_BOUND = 1 << 30
"""1 GiB: a broker serving a handful of small topics sits near 100-150 MiB; a length lie that
gets an allocation through shows as GiBs (or as an abort)."""
TOPIC = "fuzz"
"""The topic the recorded clients used (and that the target creates, so that their produce and
fetch requests reach a partition)."""
SETTINGS = ("num.partitions=1\n"
            "zookeeper.connection.timeout.ms=20000\n"
            "controlled.shutdown.retry.backoff.ms=200\n")
LISTENING = re.compile(r"(\w+)://127\.0\.0\.1:(\d+)")
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
TRACEBACK = re.compile(rb"^Traceback \(most recent call last\)", re.M)
AGAIN = re.compile(r"^.* failed: .* \(again\)$", re.M)
"""The line the server logs for a handler failure it has logged with a traceback before."""


@dataclass
class Target:
    """The broker; ``address`` is the listener fuzzed, ``check_address`` the PLAINTEXT one
    the fresh-client check uses (the same unless the fuzzed listener is SASL's, where the
    check also logs in there)."""

    broker: LaunchedBroker
    address: tuple[str, int]
    check_address: tuple[str, int]
    sasl: bool = False
    rss_bound: int = RSS_BOUND
    _log_read: int = 0
    _carry: bytes = b""
    tracebacks: list[str] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.broker.pid

    def alive(self) -> bool:
        return self.broker.running()

    def rss(self) -> int:
        """The broker's VmRSS in bytes (0 once it has exited)."""
        try:
            status = Path(f"/proc/{self.pid}/status").read_text()
        except OSError:
            return 0
        match = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
        return int(match.group(1)) * 1024 if match else 0

    def new_tracebacks(self, again: bool = True) -> list[str]:
        """Tracebacks the broker logged since the last call (each with the log line before it
        and its exception line); with ``again``, also the lines saying a handler failed as
        it failed before (logged once with a traceback, then in one line)."""
        try:
            with open(self.broker.log_path, "rb") as f:
                f.seek(max(self._log_read, self.broker.log_offset))
                data = f.read()
        except OSError:
            return []
        self._log_read = max(self._log_read, self.broker.log_offset) + len(data)
        text = self._carry + data
        # keep the last partial line for the next read (a traceback header split in two)
        cut = text.rfind(b"\n") + 1
        self._carry, text = text[cut:], text[:cut]
        found = []
        for match in TRACEBACK.finditer(text):
            start = text.rfind(b"\n", 0, max(0, match.start() - 1)) + 1
            lines = text[start:].decode(errors="replace").splitlines()
            # the log line before, the traceback, and its exception line (the first line
            # after the frames that is not indented)
            end = next((i for i in range(2, len(lines))
                        if lines[i] and not lines[i][0].isspace()
                        and not lines[i].startswith(("Traceback", "During handling",
                                                     "The above exception"))),
                       len(lines) - 1)
            found.append("\n".join(lines[:end + 1]))
        if again:
            found += AGAIN.findall(text.decode(errors="replace"))
        self.tracebacks += found
        return found

    def log_tail(self, lines: int = 200) -> str:
        return "\n".join(self.broker.log().splitlines()[-lines:])

    def fresh_client(self, deadline: float = 10.0) -> str | None:
        """None when a new connection gets ApiVersions v3 and Metadata v12 answered within
        ``deadline`` seconds, else what went wrong."""
        versions = request(18, 3, client_software_name="fuzz-check",
                           client_software_version="1")
        metadata = request(3, 12, topics=None, allow_auto_topic_creation=False,
                           include_topic_authorized_operations=False)
        try:
            with RawClient(self.check_address, timeout=deadline) as client:
                answer = client.call(versions)
                if answer.error_code != 0:
                    return f"ApiVersions answered {answer.error_code}"
                # answered is what counts: what it says may be what a forged UpdateMetadata
                # told the broker (docs/fuzzing.md)
                client.call(metadata)
            if self.sasl:
                with RawClient(self.address, timeout=deadline) as client:
                    if client.call(request(17, 1, mechanism="PLAIN")).error_code != 0:
                        return "SaslHandshake PLAIN refused"
                    token = f"\0{SASL_USER}\0{SASL_PASSWORD}".encode()
                    answer = client.call(request(36, 2, auth_bytes=token))
                    if answer.error_code != 0:
                        return f"SASL PLAIN login failed: {answer.error_code}"
                    client.call(metadata)
        except (OSError, ConnectionError, struct.error) as exc:
            return f"a fresh client got no answer: {type(exc).__name__}: {exc}"
        return None

    def stop(self) -> int:
        return self.broker.stop(timeout=60)


def _sasl_settings() -> str:
    jaas = (f'{PLAIN_MODULE} required user_{SASL_USER}="{SASL_PASSWORD}";')
    return ("listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0\n"
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT\n"
            "inter.broker.listener.name=PLAINTEXT\n"
            "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512\n"
            f"listener.name.sasl_plaintext.plain.sasl.jaas.config={jaas}\n")


def start_target(directory: Path, coordinator_url: str, *, rss_bound: int = RSS_BOUND,
                 extra: str = "", port: int = 0, sasl: bool = False) -> Target:
    """A broker in ``directory`` on a fresh chroot of ``coordinator_url``, serving, with the
    topic :data:`TOPIC`; with ``sasl`` the fuzzed listener is a SASL_PLAINTEXT one (PLAIN
    and SCRAM enabled, the PLAIN user :data:`~tests.fuzz.seeds.SASL_USER`)."""
    url = coordinator_url.rstrip("/") + f"/fuzz-{uuid.uuid4().hex[:8]}"
    extra = SETTINGS + (_sasl_settings() if sasl else "") + extra
    broker = start_broker(directory, 1, url, extra=extra, port=port, timeout=120)
    address = broker.address
    if sasl:
        line = next(x for x in broker.log().splitlines() if ": serving " in x)
        port_of = dict(LISTENING.findall(line.split(" on ")[0]))
        address = ("127.0.0.1", int(port_of["SASL_PLAINTEXT"]))
    target = Target(broker=broker, address=address, check_address=broker.address, sasl=sasl,
                    rss_bound=rss_bound)
    create_topic(broker, TOPIC, 1)
    return target

