"""What a broker counts on its hot path for the metrics: bytes and records per topic, requests
and their total times per API.

Plain counters in dictionaries, one addition per partition of a request (no metrics library on
the path): :mod:`broker.metrics.collector` turns them into Prometheus families when a scrape
asks. Counts only grow; one read from the scrape thread may miss an increment made at that
instant, never go back.
"""

from __future__ import annotations

import bisect

from replication.records import LENGTH_OFFSET, LOG_OVERHEAD, RECORDS_OFFSET

Buffer = bytes | bytearray | memoryview

__all__ = ["REQUEST_TIME_BUCKETS_MS", "RequestTimes", "TopicTraffic", "record_count"]

_COUNT_OFFSET = RECORDS_OFFSET - 4
"""Where a v2 batch header keeps its record count (the last field of the header)."""

REQUEST_TIME_BUCKETS_MS = (0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0,
                           2500.0, 5000.0, 10000.0, 30000.0)
"""The upper bounds (milliseconds) of the request total-time histogram's buckets (+Inf last)."""


def record_count(records: Buffer) -> int:
    """The records in ``records`` (v2 batches, as a Produce request carries them), read from
    each batch header's count: a batch cut short counts what its header says, nothing after."""
    view = memoryview(records)
    total, pos, size = 0, 0, len(view)
    while pos + RECORDS_OFFSET <= size:
        total += int.from_bytes(view[pos + _COUNT_OFFSET:pos + RECORDS_OFFSET], "big")
        length = int.from_bytes(view[pos + LENGTH_OFFSET:pos + LOG_OVERHEAD], "big", signed=True)
        if length <= 0:
            break
        pos += LOG_OVERHEAD + length
    return total


class TopicTraffic:
    """Per topic: the bytes and records produced to this broker as leader (Kafka's
    BytesInPerSec and MessagesInPerSec), the bytes fetched by consumers (BytesOutPerSec) and
    by followers (ReplicationBytesOutPerSec)."""

    __slots__ = ("bytes_in", "bytes_out", "messages_in", "replication_bytes_out")

    def __init__(self) -> None:
        self.bytes_in: dict[str, int] = {}
        self.messages_in: dict[str, int] = {}
        self.bytes_out: dict[str, int] = {}
        self.replication_bytes_out: dict[str, int] = {}

    def produced(self, topic: str, records: Buffer) -> None:
        """A partition's records accepted for appending (they passed the request checks)."""
        self.bytes_in[topic] = self.bytes_in.get(topic, 0) + len(memoryview(records))
        self.messages_in[topic] = self.messages_in.get(topic, 0) + record_count(records)

    def fetched(self, topic: str, size: int, *, follower: bool) -> None:
        """``size`` bytes of ``topic``'s records in a Fetch response."""
        counts = self.replication_bytes_out if follower else self.bytes_out
        counts[topic] = counts.get(topic, 0) + size


class RequestTimes:
    """Per API name: the requests answered and a histogram of their total time (read to
    response sent, milliseconds; Kafka's RequestsPerSec and TotalTimeMs)."""

    __slots__ = ("_by_name",)

    def __init__(self) -> None:
        self._by_name: dict[str, list[float]] = {}
        """name -> [count per bucket (the last for +Inf), ..., sum of the times]"""

    def observe(self, name: str, seconds: float) -> None:
        ms = seconds * 1000.0
        row = self._by_name.get(name)
        if row is None:
            row = self._by_name[name] = [0.0] * (len(REQUEST_TIME_BUCKETS_MS) + 2)
        row[bisect.bisect_left(REQUEST_TIME_BUCKETS_MS, ms)] += 1
        row[-1] += ms

    def snapshot(self) -> dict[str, tuple[list[float], float]]:
        """Per name: the counts per bucket (not cumulative, +Inf last) and the sum."""
        return {name: (row[:-1], row[-1]) for name, row in list(self._by_name.items())}
