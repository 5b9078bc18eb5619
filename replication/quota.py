"""Replication throttles: Kafka's ReplicationQuotaManager, as a token bucket per broker.

A broker keeps two quotas, one per side of replication: the leader's on the bytes it sends to
followers that are out of sync, the follower's on the bytes it fetches while behind. Each
applies only to the replicas the topics' ``leader.replication.throttled.replicas`` /
``follower.replication.throttled.replicas`` name for this broker ("partition:broker" pairs, or
``*`` for every replica), at the broker's dynamic ``leader.replication.throttled.rate`` /
``follower.replication.throttled.rate`` (bytes per second; unset: no limit).

The bucket holds up to ``burst`` seconds of the rate and may go into debt: a fetch is never cut
short (as in Kafka, a throttled partition is left out of a fetch while the quota is exceeded,
never split), so a large read is paid for by the wait that follows it. Over any window the
bytes recorded exceed ``rate * window`` by at most the burst and one read.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping

from coordinator.clock import SYSTEM_CLOCK, Clock
from coordinator.codecs import TopicPartition

__all__ = [
    "LEADER_RATE",
    "FOLLOWER_RATE",
    "LEADER_REPLICAS",
    "FOLLOWER_REPLICAS",
    "ReplicationQuota",
    "ThrottledReplicas",
    "parse_throttled_replicas",
]

log = logging.getLogger(__name__)

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"


class ReplicationQuota:
    """A byte rate, enforced as a token bucket: :meth:`record` spends, time refills;
    :meth:`exceeded` once the bucket is empty (or in debt). Thread-safe; time is
    ``clock``'s monotonic seconds."""

    def __init__(self, rate: float | None = None, *, burst: float = 0.1,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        if burst <= 0:
            raise ValueError(f"burst must be > 0 seconds, got {burst}")
        self._monotonic = clock.monotonic
        self._burst = burst
        self._lock = threading.Lock()
        self._rate: float | None = None
        self._tokens = 0.0
        self._at = self._monotonic()
        self.set_rate(rate)

    @property
    def rate(self) -> float | None:
        """Bytes per second; None: unlimited."""
        return self._rate

    def set_rate(self, rate: float | None) -> None:
        """Change the limit (None or a negative value: unlimited); the bucket starts full."""
        with self._lock:
            self._rate = None if rate is None or rate < 0 else float(rate)
            self._at = self._monotonic()
            self._tokens = self._capacity()

    def configure(self, key: str, value: str | None, where: str) -> None:
        """Take the rate a broker's dynamic config gives under ``key`` (bytes per second;
        None: no limit), logging a change; a value that does not parse is ignored with a
        warning (the limit is then lifted: it was validated where it was written)."""
        rate: float | None = None
        if value is not None:
            try:
                rate = float(int(value))
            except ValueError:
                log.warning("%s: ignoring %s=%r", where, key, value)
        if rate != self.rate:
            log.info("%s: %s is %s", where, key, "unlimited" if rate is None else f"{rate:.0f} B/s")
            self.set_rate(rate)

    def _capacity(self) -> float:
        return 0.0 if self._rate is None else self._rate * self._burst

    def _refill(self) -> None:
        now = self._monotonic()
        if self._rate is not None:
            self._tokens = min(self._capacity(), self._tokens + (now - self._at) * self._rate)
        self._at = now

    def record(self, nbytes: int) -> None:
        """``nbytes`` were sent (or fetched) for throttled replicas."""
        with self._lock:
            if self._rate is None:
                return
            self._refill()
            self._tokens -= nbytes

    def exceeded(self) -> bool:
        """Whether throttled replicas must wait (the bucket is empty)."""
        with self._lock:
            if self._rate is None:
                return False
            self._refill()
            return self._tokens <= 0

    def read_size(self, default: int) -> int:
        """How much one fetch of a throttled replica should ask for: what the bucket holds
        when full (at least 1 byte), at most ``default``; ``default`` with no limit. Small
        reads keep the rate even, where one large read would overshoot it."""
        rate = self._rate
        return default if rate is None else max(1, min(default, int(rate * self._burst)))

    def wait_time(self) -> float:
        """Seconds until the bucket holds bytes again (0 when it does, or with no limit)."""
        with self._lock:
            if self._rate is None:
                return 0.0
            self._refill()
            if self._tokens > 0:
                return 0.0
            # a millisecond more, so the bucket holds a byte or so again by then
            return (-self._tokens) / self._rate + 0.001 if self._rate > 0 else float("inf")


def parse_throttled_replicas(value: str, broker_id: int) -> set[int] | bool:
    """The partitions a ``*.replication.throttled.replicas`` value throttles on ``broker_id``:
    True for ``*`` (all), else the partition numbers paired with this broker. Entries that do
    not parse are skipped (the config is validated where it is written)."""
    value = value.strip()
    if value == "*":
        return True
    out: set[int] = set()
    for item in value.split(","):
        part, sep, broker = item.strip().partition(":")
        if not sep:
            continue
        try:
            if int(broker) == broker_id:
                out.add(int(part))
        except ValueError:
            continue
    return out


class ThrottledReplicas:
    """Which partitions one side's throttle applies to on this broker, by topic, from the
    topics' config overrides (Kafka's QuotaConfigHandler: ``markThrottled``)."""

    def __init__(self, broker_id: int, key: str) -> None:
        self.broker_id = broker_id
        self.key = key
        self._lock = threading.Lock()
        self._topics: dict[str, set[int] | bool] = {}

    def update(self, topic: str, overrides: Mapping[str, str]) -> None:
        value = overrides.get(self.key, "")
        parsed = parse_throttled_replicas(value, self.broker_id) if value else set()
        with self._lock:
            if parsed:
                self._topics[topic] = parsed
            else:
                self._topics.pop(topic, None)

    def __contains__(self, tp: object) -> bool:
        if not isinstance(tp, TopicPartition):
            return False
        with self._lock:
            parts = self._topics.get(tp.topic)
        return parts is True or (isinstance(parts, set) and tp.partition in parts)

    def topics(self) -> Iterable[str]:
        with self._lock:
            return tuple(self._topics)
