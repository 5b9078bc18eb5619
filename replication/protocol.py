"""The replica manager's data-plane request and response values and the fetch endpoint.

Error codes are the contract's (:class:`interbroker.errors.ErrorCode`, Kafka's numbers, so a
network transport can put them on the wire unchanged; the answers to the controller's requests
are :class:`interbroker.channel.BrokerResponse`).
Responses carry codes rather than raising: one bad partition never fails a batch, and a
follower decides what to do from the code (retry, truncate, back off).

:class:`FetchEndpoint` is all a follower needs from its leader: Fetch and OffsetsForLeaderEpoch.
A :class:`~replication.replica_manager.ReplicaManager` is one; a network client
(:mod:`broker.fetch_client`) is another, and it may offer more (see :class:`FetchEndpoint`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol, runtime_checkable

from coordinator.codecs import TopicPartition
from interbroker.errors import ErrorCode
from replication.origin import AppendOrigin

if TYPE_CHECKING:
    from replication.log import LogSlice

__all__ = [
    "ACKS_ALL",
    "AppendOrigin",
    "CONSUMER_REPLICA_ID",
    "ConsumerRead",
    "EpochAnswer",
    "OffsetAnswer",
    "QuietStamp",
    "FetchEndpoint",
    "FetchResult",
    "PartitionFetch",
    "ProduceResult",
]

ACKS_ALL = -1
"""``acks=all``: answer once every in-sync replica has the batch (the HW has passed it)."""

CONSUMER_REPLICA_ID = -1
"""The replica id of an ordinary consumer's fetch (Kafka's ``-1``)."""


class ProduceResult(NamedTuple):
    """Where a produced batch landed, or why it did not (offsets are -1 then): what a Produce
    response carries for the partition.

    ``log_append_time`` is -1 (timestamps are the producers'), except for a ``duplicate``: a
    retry of an idempotent producer's batch the log already held, answered NONE with the
    original batch's offsets and its timestamp, as Kafka answers it (nothing was appended).
    ``log_start_offset`` is the log's start when the batch was appended. ``error_message`` says
    why an idempotent producer's batch was refused (OUT_OF_ORDER_SEQUENCE_NUMBER,
    INVALID_PRODUCER_EPOCH, INVALID_RECORD), for the response's error message.

    A named tuple, not a dataclass: every produce builds one, and a frozen dataclass of seven
    fields takes about twice as long to build (0.95 against 0.4 us), a cost the smallest
    produces would notice."""

    error: ErrorCode
    base_offset: int = -1
    last_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    duplicate: bool = False
    error_message: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchResult:
    """A leader's answer to a fetch: raw batches from the fetch offset, and its offsets.

    ``log_start_offset`` and ``log_end_offset`` are filled in on OFFSET_OUT_OF_RANGE too, so a
    follower can restart its log without another round trip. ``diverging_epoch`` (>= 0 only
    when the follower sent its last fetched epoch, KIP-595) says the follower's log diverged
    from the leader's: the leader's copy of that epoch ends at ``diverging_end_offset``, where
    the follower truncates (no records come with it).
    """

    error: ErrorCode
    records: bytes | LogSlice = b""
    """Bytes, or where they lie in a segment file when the caller asked so (a broker's Fetch)."""
    high_watermark: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1
    diverging_epoch: int = -1
    diverging_end_offset: int = -1
    quiet: QuietStamp | None = None
    """Set when a follower in the ISR fetched at the log end and got nothing: the leader's
    state then (:meth:`~replication.partition.Partition.follower_unchanged` tells whether the
    same fetch would be answered the same way later)."""


QuietStamp = tuple[int, int, int, int, int]
"""A leader partition's state as a caught-up follower's fetch sees it: (leader epoch, log end,
high watermark, log start, local log start)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EpochAnswer:
    """A leader's answer to OffsetsForLeaderEpoch: the largest epoch it knows at or below the
    one asked, and where that epoch ends; -1 and -1 when it knows none."""

    error: ErrorCode
    epoch: int = -1
    end_offset: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetAnswer:
    """A leader's answer to ListOffsets for one partition: an offset and the leader epoch of
    the batch holding it (-1 when it has none)."""

    error: ErrorCode
    offset: int = -1
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerRead:
    """Committed batches for a consumer: every record in ``records`` is below
    ``high_watermark``, the leader's HW when the read was made."""

    error: ErrorCode
    records: bytes = b""
    high_watermark: int = -1
    next_offset: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionFetch:
    """One partition of a follower's batched fetch: where it fetches from, at which leader
    epoch, the epoch of its last batch (-1: none, or the leader checks nothing) and how much."""

    tp: TopicPartition
    fetch_offset: int
    leader_epoch: int
    last_fetched_epoch: int
    max_bytes: int
    log_start_offset: int = -1
    """The follower's own log start, which the leader keeps for DeleteRecords' low
    watermark (Fetch v5+; -1: not sent)."""


@runtime_checkable
class FetchEndpoint(Protocol):
    """What a follower calls on its leader's broker.

    A network endpoint may offer two more things, which the fetcher looks for: a
    ``truncates_on_fetch`` attribute, true when the leader answers ``last_fetched_epoch``
    with a diverging epoch (Fetch v12+, KIP-595), so that a new follower fetches at once and
    truncates on the answer instead of asking OffsetsForLeaderEpoch first; and
    ``fetch_partitions(replica_id, wanted)``, one request for many partitions (which may wait
    on the leader for data: a long poll), answering a :class:`FetchResult` per partition the
    leader had news of: in an incremental fetch session (KIP-227) a partition with no new
    records, high watermark, log start or error is left out.

    A follower of a tiered partition (KIP-405) also calls ``earliest_local_offset(tp,
    current_leader_epoch)``, ListOffsets EARLIEST_LOCAL (-4) from a replica, answering an
    :class:`OffsetAnswer`: where the leader's local log starts and the epoch there, so it can
    rebuild what lies below from remote storage when the leader answers a fetch with
    OFFSET_MOVED_TO_TIERED_STORAGE.
    """

    def fetch(
        self, tp: TopicPartition, offset: int, max_bytes: int, replica_id: int, leader_epoch: int
    ) -> FetchResult: ...

    def offsets_for_leader_epoch(
        self, tp: TopicPartition, epoch: int, current_leader_epoch: int
    ) -> EpochAnswer: ...
