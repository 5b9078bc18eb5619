"""Which cluster a job reaches, and how: a coordinator URL (ZooKeeper, etcd, the embedded
store), or Kafka bootstrap servers with the path of a client properties file (Kafka's
``--command-config``: ``security.protocol``, ``sasl.*``, ``ssl.*``).

A job stores no secret: a coordinator URL is stored without its credentials (the job
authenticates with those of the environment it runs in), and a properties file is stored by its
path and read each time the job runs. Every run reaches the cluster through one
:class:`~rebalancer.access.ClusterAccess`, whichever way in it is.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rebalancer.jobs.errors import JobSpecError

if TYPE_CHECKING:
    from rebalancer.access import ClusterAccess

__all__ = ["ClusterTarget", "check_bootstrap", "check_command_config", "open_cluster",
           "target_of"]

MAX_BOOTSTRAP = 1000
_HOST = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:\.[A-Za-z0-9-]{1,63})*\.?"
                   r"|\[[0-9A-Fa-f:.]{2,45}\])")


class ClusterUnavailable(Exception):
    """The job's cluster cannot be opened (one line, never a secret)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterTarget:
    """A job's cluster: exactly one of ``coordinator`` and ``bootstrap``; ``command_config``
    only with ``bootstrap``."""

    coordinator: str | None = None
    bootstrap: str | None = None
    command_config: str | None = None

    def describe(self) -> str:
        """Where, as shown: a coordinator URL without credentials, or the bootstrap servers."""
        from coordinator.url import redact

        if self.coordinator is not None:
            return redact(self.coordinator)
        return f"bootstrap {self.bootstrap}"


def check_bootstrap(name: str, value: Any) -> str:
    """``HOST:PORT[,HOST:PORT...]`` (an IPv6 host in brackets), as Kafka's tools take
    ``--bootstrap-server``: no credentials, no spaces, ports 1 to 65535."""
    if not isinstance(value, str) or not value or len(value) > MAX_BOOTSTRAP:
        raise JobSpecError(f"argument {name} must be HOST:PORT[,HOST:PORT...], not "
                           f"{value!r:.80}")
    for item in value.split(","):
        host, colon, port = item.rpartition(":")
        if (not colon or not _HOST.fullmatch(host) or not port.isdigit() or not port.isascii()
                or not 0 < int(port) < 65536):
            raise JobSpecError(f"argument {name}: {item[:80]!r} is not HOST:PORT "
                               f"(in {value[:120]!r})")
    return value


def check_command_config(name: str, value: Any) -> str | None:
    """The path of a client properties file, read when the job runs: absolute (the scheduler
    need not run where the job was added), no control characters."""
    if value is None:
        return None
    if (not isinstance(value, str) or not value or len(value) > 4096
            or not all(c.isprintable() for c in value)):
        raise JobSpecError(f"argument {name} must be the path of a properties file, not "
                           f"{value!r:.80}")
    if not os.path.isabs(value):
        raise JobSpecError(f"argument {name} must be an absolute path, not {value!r:.80}")
    return value


def target_of(arguments: dict[str, Any]) -> ClusterTarget:
    """The cluster of checked job arguments; JobSpecError unless exactly one way in is given
    (and a properties file only with bootstrap servers)."""
    coordinator = arguments.get("coordinator")
    bootstrap = arguments.get("bootstrap")
    command_config = arguments.get("command_config")
    if coordinator is not None and bootstrap is not None:
        raise JobSpecError("a job reaches its cluster by coordinator or by bootstrap servers, "
                           "not both")
    if coordinator is None and bootstrap is None:
        raise JobSpecError("argument coordinator is missing (or bootstrap: the job's "
                           "cluster)")
    if command_config is not None and bootstrap is None:
        raise JobSpecError("argument command_config goes with bootstrap servers, not with a "
                           "coordinator")
    return ClusterTarget(coordinator=coordinator, bootstrap=bootstrap,
                         command_config=command_config)


def open_cluster(target: ClusterTarget, *, timeout: float) -> ClusterAccess:
    """The job's cluster, opened for one run (close it after): through the coordinator, or
    through Kafka's Admin API with the security of the properties file, read now.
    ClusterUnavailable (one line) when it cannot be opened."""
    from rebalancer.access import AccessError, open_access

    try:
        return open_access(coordinator_url=target.coordinator, bootstrap=target.bootstrap,
                           command_config=target.command_config, timeout=timeout)
    except AccessError as exc:
        raise ClusterUnavailable(str(exc).splitlines()[0] if str(exc) else
                                 type(exc).__name__) from None
