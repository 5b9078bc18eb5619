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
TRACEBACK = re.compile(rb"^Traceback \(most recent call last\)", re.M)


@dataclass
class Target:
    broker: LaunchedBroker
    address: tuple[str, int]
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

    def new_tracebacks(self) -> list[str]:
        """Tracebacks the broker logged since the last call (each with the lines around it)."""
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
            with RawClient(self.address, timeout=deadline) as client:
                answer = client.call(versions)
                if answer.error_code != 0:
                    return f"ApiVersions answered {answer.error_code}"
                brokers = client.call(metadata).brokers
                if not brokers:
                    return "Metadata lists no broker"
        except (OSError, ConnectionError, struct.error) as exc:
            return f"a fresh client got no answer: {type(exc).__name__}: {exc}"
        return None

    def stop(self) -> int:
        return self.broker.stop(timeout=60)


def start_target(directory: Path, coordinator_url: str, *, rss_bound: int = RSS_BOUND,
                 extra: str = "", port: int = 0) -> Target:
    """A broker in ``directory`` on a fresh chroot of ``coordinator_url``, serving, with the
    topic :data:`TOPIC`."""
    url = coordinator_url.rstrip("/") + f"/fuzz-{uuid.uuid4().hex[:8]}"
    broker = start_broker(directory, 1, url, extra=SETTINGS + extra, port=port, timeout=120)
    target = Target(broker=broker, address=broker.address, rss_bound=rss_bound)
    create_topic(broker, TOPIC, 1)
    return target

