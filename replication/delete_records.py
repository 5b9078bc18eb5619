"""DeleteRecords' rules (Kafka's Partition.deleteRecordsOnLeader and lowWatermarkIfLeader), pure.

A leader takes a request to delete the records below an offset (-1: its high watermark) by
moving its log start there; the answer's low watermark is the lowest log start over the
leader and the replicas on live brokers (a follower's as its latest fetch carried it, -1 until
it fetched), and the request is done once that reaches the offset. The data plane
(:meth:`replication.partition.Partition.delete_records`) applies these; the broker answers and
parks the request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from interbroker.errors import ErrorCode

__all__ = ["HIGH_WATERMARK", "DeleteRecordsResult", "low_watermark", "resolve_delete_offset"]

HIGH_WATERMARK = -1
"""The offset that names the partition's high watermark (Kafka's
DeleteRecordsRequest.HIGH_WATERMARK)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteRecordsResult:
    """One partition's outcome on its leader: the offset the log start was asked to reach
    (the HW for -1), and the low watermark when the log start moved (-1 on an error)."""

    error: ErrorCode
    requested_offset: int = -1
    low_watermark: int = -1


def resolve_delete_offset(offset: int, high_watermark: int) -> int | None:
    """The offset a DeleteRecords request names for a partition whose HW is
    ``high_watermark``: -1 is the HW; None when it is out of range (negative, or above the
    HW: records not yet committed are not deleted)."""
    resolved = high_watermark if offset == HIGH_WATERMARK else offset
    if resolved < 0 or resolved > high_watermark:
        return None
    return resolved


def low_watermark(own_log_start: int, follower_log_starts: Mapping[int, int],
                  live: Callable[[int], bool]) -> int:
    """The lowest log start over the leader (``own_log_start``) and its followers on live
    brokers (``follower_log_starts``, -1 for a follower not heard from)."""
    lowest = own_log_start
    for replica, start in follower_log_starts.items():
        if start < lowest and live(replica):
            lowest = start
    return lowest
