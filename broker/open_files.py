"""The broker's open-file limit, and the share of it that partitions may take.

Every segment of a partition's log holds three descriptors while the log is open: the log
file, its offset index and its time index (:mod:`replication.segment` opens all three when it
opens a segment, for every segment, not lazily), so a partition holds three at least. A broker
asked to host more partitions than its open-file limit allows fails every open past it with
EMFILE, and then every accept, every checkpoint and every fetch as well: it stops answering
anything. Kafka has no guard against this (its brokers fail the same way); partctl refuses
the request that would get there.

At start the broker raises its soft ``RLIMIT_NOFILE`` to the hard limit, as Kafka's JVM does
(``-XX:+MaxFDLimit``), and logs the limit once it serves (:func:`raise_open_file_limit`,
:func:`log_open_file_limit`).

CreateTopics, CreatePartitions and the creation of topics on a client's request
(``auto.create.topics.enable``, ``__consumer_offsets``) are refused with POLICY_VIOLATION
(Kafka's answer for a creation a policy refuses), naming the limit and how many more
partitions fit, when an assignment would put some broker past the partitions' share of the
limit: :data:`PARTITION_SHARE` of it less :data:`RESERVED` descriptors (what is left is for
connections, the coordinator session, checkpoints being written and the process itself).

The rule (:func:`refusal`): every broker that the assignment gives replicas to is checked,
each against the limit of the broker handling the request, since a broker knows only its own
(brokers of one cluster are normally started alike; a broker with a lower limit is not
protected by a more generous one's check). What a broker holds already is three descriptors
per replica the metadata cache places on it; for the broker handling the request, the
descriptors its process has open right now when that is more (logs of several segments,
connections). A topic created elsewhere (another broker, the ``partctl topics`` CLI writing
to the coordinator directly) is counted once the controller's metadata has it.
"""

from __future__ import annotations

import logging
import os
import resource
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from broker.metadata_cache import MetadataSnapshot

__all__ = ["DESCRIPTORS_PER_PARTITION", "PARTITION_SHARE", "RESERVED", "Budget",
           "OpenFileLimit", "log_open_file_limit", "open_descriptors", "open_file_limit",
           "partition_budget", "raise_open_file_limit", "refusal", "replicas_by_broker"]

log = logging.getLogger(__name__)

DESCRIPTORS_PER_PARTITION = 3
"""The log, offset index and time index of a partition's active segment."""
PARTITION_SHARE = 0.8
"""The share of the open-file limit partitions may take."""
RESERVED = 64
"""Descriptors kept out of that share for the process itself."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenFileLimit:
    """``RLIMIT_NOFILE`` after :func:`raise_open_file_limit`: the soft limit in force, the
    hard limit, and the soft limit found at start."""

    soft: int
    hard: int
    was: int


def _finite(value: int) -> int | None:
    return None if value == resource.RLIM_INFINITY or value < 0 else value


def _nr_open() -> int | None:
    try:
        with open("/proc/sys/fs/nr_open") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def raise_open_file_limit() -> OpenFileLimit:
    """Raise the soft open-file limit to the hard one (to the system's ``nr_open`` when the
    hard one is unlimited); the limits, to log once the broker serves
    (:func:`log_open_file_limit`: a broker that fails to start says one line only)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = _finite(hard)
    if target is None:
        target = _nr_open()
    if target is not None and (_finite(soft) is not None and soft < target):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (OSError, ValueError):
            pass  # left as it was: the log line says so
    now, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return OpenFileLimit(soft=now, hard=hard, was=soft)


def log_open_file_limit(limits: OpenFileLimit) -> None:
    """One line: the open-file limit in force, and what partitions may hold of it."""
    limit = _finite(limits.soft)
    if limit is None:
        log.info("open-file limit: unlimited")
        return
    budget = partition_budget(limit)
    log.info("open-file limit: %d (hard limit %s%s); partitions may hold %d descriptors, "
             "%d partitions at %d each", limit, _finite(limits.hard) or "unlimited",
             f", raised from {limits.was}" if limits.was != limit else "", budget,
             budget // DESCRIPTORS_PER_PARTITION, DESCRIPTORS_PER_PARTITION)


def open_file_limit() -> int | None:
    """The soft open-file limit in force; None when unlimited."""
    return _finite(resource.getrlimit(resource.RLIMIT_NOFILE)[0])


def open_descriptors() -> int | None:
    """The descriptors this process has open now; None where the platform does not say."""
    for where in ("/proc/self/fd", "/dev/fd"):
        try:
            return max(len(os.listdir(where)) - 1, 0)  # less the one listing it
        except OSError:
            continue
    return None


def partition_budget(limit: int) -> int:
    """The descriptors partitions may hold under an open-file limit of ``limit``."""
    return max(int(limit * PARTITION_SHARE) - RESERVED, 0)


def replicas_by_broker(assignments: Iterable[Sequence[int]]) -> Counter[int]:
    """How many of the replicas in ``assignments`` (each partition's replica list) each broker
    has."""
    return Counter(b for replicas in assignments for b in replicas)


def refusal(limit: int | None, held: Mapping[int, int], adding: Mapping[int, int]
            ) -> str | None:
    """Why ``adding`` (new replicas by broker) must be refused under an open-file limit of
    ``limit`` when each broker holds ``held`` descriptors for partitions now (pure); None when
    every broker stays within :func:`partition_budget`."""
    if limit is None:
        return None
    budget = partition_budget(limit)
    for broker in sorted(adding):
        count = adding[broker]
        if count <= 0:
            continue
        now = held.get(broker, 0)
        need = now + count * DESCRIPTORS_PER_PARTITION
        if need > budget:
            fit = max(budget - now, 0) // DESCRIPTORS_PER_PARTITION
            return (f"Broker {broker} would need {need:,} open files for its partitions "
                    f"({count:,} new partition replica(s) at {DESCRIPTORS_PER_PARTITION} each "
                    f"on top of {now:,} held): past the safe share of the open-file limit "
                    f"({budget:,} of {limit:,}: {PARTITION_SHARE:.0%} less {RESERVED}); "
                    f"{fit:,} more partition replica(s) fit on it.")
    return None


class Budget:
    """The descriptors each broker holds for partitions, taken once for one request:
    :meth:`admit` checks an assignment against this process's limit and, when it fits,
    counts it as held, so the next topic of the same request sees it."""

    __slots__ = ("held", "limit")

    def __init__(self, limit: int | None, held: Mapping[int, int]) -> None:
        self.limit = limit
        self.held: Counter[int] = Counter(held)

    @classmethod
    def now(cls, broker_id: int, snapshot: MetadataSnapshot) -> Budget:
        """Three descriptors per replica the metadata cache places on each broker; for
        ``broker_id``, the broker asked, the descriptors its process has open when that is more
        (blocking: counts them)."""
        held = Counter({b: n * DESCRIPTORS_PER_PARTITION for b, n in replicas_by_broker(
            p.replicas for partitions in snapshot.topics.values()
            for p in partitions.values()).items()})
        mine = open_descriptors()
        if mine is not None:
            held[broker_id] = max(held[broker_id], mine)
        return cls(open_file_limit(), held)

    def admit(self, assignment: Mapping[int, Sequence[int]]) -> str | None:
        """Why ``assignment`` (partition -> replicas) must be refused (:func:`refusal`), or
        None, and then its replicas count as held from now on."""
        adding = replicas_by_broker(assignment.values())
        why = refusal(self.limit, self.held, adding)
        if why is None:
            for broker, count in adding.items():
                self.held[broker] += count * DESCRIPTORS_PER_PARTITION
        return why
