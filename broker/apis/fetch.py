"""Fetch (key 1), for consumers: committed records sent from the segment files, long polls parked.

A consumer reads up to the high watermark; a read_committed one (isolation level 1) up to the
last stable offset (the HW, or the first offset of a transaction not decided below it:
:mod:`replication.transactions`), and its answer lists the aborted transactions (producer id,
first offset) whose markers lie at or after the fetch offset and whose first offset is below
the LSO, from the segments' aborted-transaction indexes (:mod:`replication.txn_index`), so
that the consumer skips their records; a read_uncommitted answer lists none (null). Every
answer carries the LSO. Per partition, in request order, the read is at most the
partition's ``partition_max_bytes`` and what is left of the request's ``max_bytes``; the first
partition that has data returns at least its first batch whole even if it is larger (KIP-74),
later ones may end inside a batch, as Kafka's file slices do. Per partition: the current leader
epoch is checked first (FENCED_LEADER_EPOCH below ours, UNKNOWN_LEADER_EPOCH above), then
leadership (NOT_LEADER_OR_FOLLOWER, or UNKNOWN_TOPIC_OR_PARTITION when the metadata does not know
the partition), then the offset (OFFSET_OUT_OF_RANGE outside the log start and log end).

The records are :class:`~replication.log.LogSlice` values: kio encodes the response around them
and the server sends them with ``sendfile`` (see :mod:`broker.wire`). A follower's are too, of
the whole batches it is due.

An offset between a tiered partition's log start and its local log start (KIP-405) is read
from remote storage, through the remote segment's offset index, on the remote log manager's
reader threads: the response waits for that read, the event loop does not. Every such
partition of a fetch is read, in parallel, each within its share of the byte budget.

When less than ``min_bytes`` is readable and nothing failed, the fetch is parked in the
purgatory (Kafka's DelayedFetch) watching its partitions: an append or a leadership change wakes
it and it completes as soon as ``min_bytes`` are there, or after ``max_wait_ms`` with whatever
there is. A wake of one partition (an append, a moved HW) checks that partition alone (with
``min_bytes`` above 1, all of them: their bytes add up); a wake of every parked fetch (a
leadership change) checks them all. A follower's parked fetch, when it completes, reads again
the partitions woken meanwhile and those that had records or were held back by the leader's
throttle, and answers the rest as it read them on arrival (Kafka reads them all again): what
moved without a wake, such as a log start moved by retention, is told by the next fetch.

From version 7 a fetcher may keep an incremental fetch session (KIP-227,
:mod:`broker.fetch_sessions`): a full fetch with epoch 0 opens one when the cache has room,
and an incremental fetch names only the partitions that changed and those it drops. Every
partition of a consumer's session is read on each fetch, as if named (a follower's fetch
looks at those that moved since its last answer: :mod:`broker.apis.fetch_follower`); the
answer carries only the partitions with records, a moved high watermark or log
start offset, an error or a diverging epoch. A session error (FETCH_SESSION_ID_NOT_FOUND,
INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR) answers no partitions and moves
nothing; so does a parked fetch whose session another fetch moved on meanwhile.

A follower's fetch (replica id >= 0, from version 15 in ``replica_state``) is served by the data
plane (:meth:`~replication.replica_manager.ReplicaManager.fetch`, what in-process followers
call): after the same epoch and leadership checks, the leader reads up to its log end rather
than the HW, records the follower's fetch offset as its log end offset (which may bring it into
the ISR and move the HW, completing acks=all produces, and waking consumer fetches parked on
the partition), and from version 12 answers the follower's ``last_fetched_epoch`` with a
``diverging_epoch`` when the follower's log diverged (Kafka's rule: this leader's copy of that
epoch is an older epoch, or ends before the fetch offset; KIP-595). A follower fetch with too
little to read is parked like a consumer's, woken by appends (not by the HW, which followers
learn with their next fetch). A follower's offset in the remote part of a tiered partition
(below the local log start, at or after the log start) is answered
OFFSET_MOVED_TO_TIERED_STORAGE at once: followers rebuild that part from remote storage.

From version 13 topics are named by id (KIP-516), in the request and in the response: an id is
resolved through the metadata cache's topic ids (:mod:`broker.apis.topic_ids`, which reads the
ids of topics it has none for yet), and one it cannot resolve answers UNKNOWN_TOPIC_ID for its
partitions. Version 15 carries the replica id in ``replica_state``. From version 16 a partition
answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH names the current leader and its epoch,
and the response the leaders' endpoints on the request's listener (KIP-951), so the client
moves without asking for metadata first. Version 17 adds only the follower's log directory id
(KIP-853, a tagged field), which is not used; a Kafka 3.9 follower at its default
``inter.broker.protocol.version`` fetches with it and with nothing older.

The request metrics count a follower's Fetch as ``FetchFollower`` and a consumer's as
``FetchConsumer`` (Kafka's names; no request is counted as ``Fetch``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import uuid
from collections.abc import Hashable, Mapping
from concurrent.futures import Future
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.apis.base import Api, Reply, RequestContext
from broker.apis.fetch_follower import follower_fetch, readable
from broker.apis.fetch_session import (
    FetchContext,
    PartitionRead,
    Wanted,
    check_epoch,
    close_reads,
    leader_partition,
    open_context,
    replica_id_of,
)
from broker.apis.topic_ids import ensure_topic_ids
from broker.metadata_cache import MetadataSnapshot
from broker.security.acls import Operation, ResourceType
from broker.wire import response_module
from coordinator.codecs import TopicPartition
from kafkaclient.messages import build
from replication.errors import OffsetOutOfRangeError, StorageError
from replication.local_log import COPY_BELOW
from replication.log import LogSlice
from replication.tiered import RemoteStorageError

if TYPE_CHECKING:
    import kio.schema.fetch.v13
    import kio.schema.fetch.v14
    import kio.schema.fetch.v15
    import kio.schema.fetch.v16
    import kio.schema.fetch.v17
    from typing_extensions import TypeIs

    from broker.apis.messages import FetchRequest, FetchResponse
    from broker.apis.services import FetchServices

__all__ = ["APIS", "API_KEY", "CONSUMER_METRIC", "FOLLOWER_METRIC", "PartitionRead", "check_epoch",
           "leader_partition"]

API_KEY = 1
FIRST_VERSION_WITH_IDS = 13
FIRST_VERSION_WITH_LEADERS = 16
_LEADER_MOVED = (ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch)
CONSUMER_METRIC = "FetchConsumer"
FOLLOWER_METRIC = "FetchFollower"
"""The ``request`` label of a consumer's and a follower's Fetch in the request metrics: Kafka
counts them apart, never as ``Fetch``."""

log = logging.getLogger(__name__)


def _read_one(ctx: RequestContext, want: Wanted, limit: int, min_one: bool) -> PartitionRead:
    if want.unknown_id:
        return PartitionRead(index=want.tp.partition, error=ErrorCode.unknown_topic_id)
    if want.denied:
        return PartitionRead(index=want.tp.partition, error=ErrorCode.topic_authorization_failed)
    partition, error = leader_partition(ctx, want.tp, want.leader_epoch)
    if partition is None or error is not ErrorCode.none:
        return PartitionRead(index=want.tp.partition, error=error)
    status = partition.status()
    hw, start = status.high_watermark, status.log_start_offset
    if want.offset < start or want.offset > status.log_end_offset:
        return PartitionRead(index=want.tp.partition, error=ErrorCode.offset_out_of_range)
    lso = partition.log.last_stable_offset(hw)

    def remote() -> PartitionRead:
        return PartitionRead(index=want.tp.partition, error=ErrorCode.none, high_watermark=hw,
                             log_start_offset=start, last_stable_offset=lso,
                             aborted=() if want.committed else None,
                             remote=(want.offset, min(want.max_bytes, limit), min_one))

    if want.offset < status.local_log_start_offset:  # the remote part of a tiered log
        return remote()
    bound = lso if want.committed else hw
    try:
        records = partition.log.read_slice(want.offset, min(want.max_bytes, limit), bound,
                                           min_one=min_one, copy_below=COPY_BELOW)
    except OffsetOutOfRangeError:  # the log moved under us (retention, truncation)
        now = partition.status()
        if now.log_start_offset <= want.offset < now.local_log_start_offset:
            return remote()  # its segment went to remote storage meanwhile: read it there
        return PartitionRead(index=want.tp.partition, error=ErrorCode.offset_out_of_range)
    except StorageError:
        return PartitionRead(index=want.tp.partition, error=ErrorCode.kafka_storage_error)
    aborted = None
    if want.committed:
        size = len(records) if isinstance(records, bytes) else records.size if records else 0
        aborted = tuple(partition.log.aborted_in_read(want.offset, size, bound)) if size else ()
    return PartitionRead(index=want.tp.partition, error=ErrorCode.none, high_watermark=hw,
                         log_start_offset=start, last_stable_offset=lso, records=records,
                         aborted=aborted)


def _read_all(ctx: RequestContext, wanted: list[Wanted], max_bytes: int
              ) -> list[PartitionRead]:
    """Kafka's readFromLog: partitions in order, the request's byte budget shared, the first
    non-empty one at least one batch. A remote read to make counts as non-empty and takes
    its whole share of the budget (it is made later, with the others, in parallel), so the
    response never outgrows ``max_bytes`` beyond the first batch."""
    left, min_one = max_bytes, True
    reads = []
    for want in wanted:
        read = _read_one(ctx, want, left, min_one)
        used = read.remote[1] if read.remote is not None else read.size
        if used or read.remote is not None:
            min_one = False
            left = max(0, left - used)
        reads.append(read)
    return reads


def _close_unsent(future: Any) -> None:
    """Close a remote read's slice that no response will carry."""
    if not future.cancelled() and future.exception() is None:
        result = future.result()
        if isinstance(result, LogSlice):
            result.close()


def _authorize_reads(ctx: RequestContext, wanted: list[Wanted]) -> list[Wanted]:
    """Marks the partitions of topics the consumer may not Read."""
    allowed: dict[str, bool] = {}
    out = []
    for want in wanted:
        name = want.tp.topic
        if want.unknown_id:
            out.append(want)
            continue
        if name not in allowed:
            allowed[name] = ctx.authorized(Operation.READ, ResourceType.TOPIC, name)
        out.append(want if allowed[name] else dataclasses.replace(want, denied=True))
    return out


def _with_ids(request: FetchRequest, version: int) -> TypeIs[
        kio.schema.fetch.v13.FetchRequest | kio.schema.fetch.v14.FetchRequest
        | kio.schema.fetch.v15.FetchRequest | kio.schema.fetch.v16.FetchRequest
        | kio.schema.fetch.v17.FetchRequest]:
    """Whether the request (of ``version``) names its topics by id (KIP-516, v13)."""
    return version >= FIRST_VERSION_WITH_IDS


def handle(ctx: RequestContext[FetchServices], request: FetchRequest) -> Reply[FetchResponse]:
    version = ctx.api_version
    ctx.metric_name = FOLLOWER_METRIC if replica_id_of(request) >= 0 else CONSUMER_METRIC
    if not _with_ids(request, version):
        return _handle(ctx, request, None)
    names = ctx.broker.metadata.snapshot.topic_names
    if any(t.topic_id not in names for t in request.topics):
        return _resolving(ctx, request)
    return _handle(ctx, request, names)


async def _resolving(ctx: RequestContext, request: Any) -> Any:
    """Ids the cache has no name for yet: read the ids of the topics it holds, then fetch."""
    snap = await ensure_topic_ids(ctx.broker)
    result = _handle(ctx, request, snap.topic_names)
    return await result if inspect.isawaitable(result) else result


def _handle(ctx: RequestContext, request: Any, names: Mapping[uuid.UUID, str] | None) -> Any:
    version = ctx.api_version
    max_bytes = request.max_bytes if version >= 3 else 0x7FFFFFFF
    replica_id = replica_id_of(request)
    if replica_id >= 0 and not ctx.authorized(Operation.CLUSTER_ACTION, ResourceType.CLUSTER):
        return _error_response(ctx, ErrorCode.cluster_authorization_failed)
    use = open_context(ctx, request, names)
    if isinstance(use, ErrorCode):
        return _error_response(ctx, use)
    if replica_id >= 0:
        return follower_fetch(ctx, request, use, replica_id, max_bytes,
                              lambda reads: _response(ctx, request, use, reads))
    wanted = use.wanted = _authorize_reads(ctx, use.wanted)
    reads = _read_all(ctx, wanted, max_bytes)
    if any(r.remote is not None for r in reads):
        return _with_remote(ctx, request, use, reads)
    max_wait = request.max_wait / timedelta(seconds=1)
    if (max_wait <= 0 or not wanted or sum(r.size for r in reads) >= request.min_bytes
            or any(r.error is not ErrorCode.none for r in reads)):
        return _response(ctx, request, use, reads)
    close_reads(reads)
    return _park(ctx, request, use, max_bytes, max_wait)


async def _with_remote(ctx: RequestContext, request: Any, use: FetchContext,
                       reads: list[PartitionRead]) -> Any:
    """Answer at once, with every partition whose offset lies in the remote part of its log
    read from remote storage, all at the same time on the remote log manager's reader
    threads (as file slices sent with sendfile when the store's segments are local files),
    so the event loop (every other fetch) never waits for the remote store; a read_committed
    one with the aborted transactions of the remote ``.txnindex`` files (and the local ones
    after them), looked up beside it. A remote store
    that fails is KAFKA_STORAGE_ERROR for the partitions it failed, which the client
    retries; the other partitions are answered."""
    rm = ctx.broker.replica_manager
    wanted = use.wanted
    pending: list[tuple[Wanted, PartitionRead, Future[Any]]] = []
    aborted: list[tuple[Wanted, PartitionRead, Future[Any]]] = []
    for want, read in zip(wanted, reads, strict=True):
        if read.remote is None:
            continue
        offset, limit, min_one = read.remote
        if not limit and not min_one:
            continue  # the budget is spent: no records for it this time
        future = rm.tiered.read_remote(want.tp, offset, limit, zero_copy=True, min_one=min_one)
        if future is None:  # the log moved meanwhile (leadership, retention)
            read.error = ErrorCode.offset_out_of_range
            continue
        pending.append((want, read, future))
        if read.aborted is not None:  # read_committed: the remote segments' aborted ones
            listed = rm.tiered.remote_aborted_transactions(want.tp, offset)
            if listed is not None:
                aborted.append((want, read, listed))
    pending.extend(aborted)
    try:
        results = await asyncio.gather(*(asyncio.wrap_future(f) for _w, _r, f in pending),
                                       return_exceptions=True)
    except asyncio.CancelledError:  # the connection went meanwhile
        for _want, _read, future in pending:
            future.add_done_callback(_close_unsent)
        close_reads(reads)
        raise
    unexpected: BaseException | None = None
    for (want, read, _future), result in zip(pending, results, strict=True):
        if isinstance(result, OffsetOutOfRangeError):
            read.error = ErrorCode.offset_out_of_range
        elif isinstance(result, (RemoteStorageError, StorageError, OSError)):
            log.warning("remote read of %s at %d failed: %s", want.tp, want.offset, result)
            read.error = ErrorCode.kafka_storage_error
        elif isinstance(result, BaseException):
            unexpected = unexpected or result
        elif isinstance(result, list):
            read.aborted = tuple(result)
        else:
            read.records = result or None
    if unexpected is not None:
        close_reads(reads)
        raise unexpected
    close_reads([r for r in reads if r.error is not ErrorCode.none])  # no records with an error
    return _response(ctx, request, use, reads)


def _park(ctx: RequestContext, request: Any, use: FetchContext, max_bytes: int,
          max_wait: float) -> asyncio.Future:
    answer: asyncio.Future = ctx.broker.loop.create_future()
    wanted = use.wanted
    positions = use.positions()

    def complete() -> None:
        if not answer.done():
            answer.set_result(_response(ctx, request, use, _read_all(ctx, wanted, max_bytes)))

    def check() -> bool:
        return answer.done() or readable(ctx, wanted, request.min_bytes)

    def check_key(key: Hashable) -> bool:
        if request.min_bytes > 1:  # the bytes of every partition count
            return check()
        return answer.done() or readable(ctx, [wanted[i] for i in positions.get(key, ())], 1)

    ctx.broker.purgatory.park(positions, max_wait, check, complete, check_key=check_key)
    return answer


def _error_response(ctx: RequestContext, error: ErrorCode, session_id: int = 0) -> Any:
    module = response_module(API_KEY, ctx.api_version)
    return build(module.FetchResponse, throttle_time=timedelta(0), error_code=error,
                 session_id=session_id, responses=())


def _response(ctx: RequestContext, request: Any, use: FetchContext,
              reads: list[PartitionRead]) -> Any:
    answer = use.answer(ctx, reads)
    if isinstance(answer, ErrorCode):
        close_reads(reads)
        assert use.session is not None
        return _error_response(ctx, answer, use.session.id)
    session_id, wanted, sent = answer
    if len(sent) < len(reads):
        kept = {id(r) for r in sent}
        close_reads([r for r in reads if r.records is not None and id(r) not in kept])
    reads = sent
    version = ctx.api_version
    module = response_module(API_KEY, version)
    leaders = version >= FIRST_VERSION_WITH_LEADERS
    snap = ctx.broker.metadata.snapshot
    endpoints: dict[int, Any] = {}
    topics: list[tuple[str, uuid.UUID | None, list[Any]]] = []
    traffic = getattr(ctx.broker, "traffic", None)
    follower = replica_id_of(request) >= 0 if traffic is not None else False
    for want, read in zip(wanted, reads, strict=True):
        records: LogSlice | bytes = b""
        if read.records is not None:
            if isinstance(read.records, LogSlice):
                ctx.slices.append(read.records)
            records = read.records
            if traffic is not None:
                traffic.fetched(want.tp.topic, read.size, follower=follower)
        current: dict[str, Any] = {}
        if leaders and read.error in _LEADER_MOVED:
            current = _current_leader(ctx, module, snap, want.tp, endpoints)
        if read.diverging is not None:
            current["diverging_epoch"] = build(module.EpochEndOffset, epoch=read.diverging[0],
                                               end_offset=read.diverging[1])
        aborted = None if read.aborted is None else tuple(
            build(module.AbortedTransaction, producer_id=t.producer_id,
                  first_offset=t.first_offset) for t in read.aborted)
        lso = read.last_stable_offset if read.last_stable_offset >= 0 else read.high_watermark
        data = build(module.PartitionData, partition_index=read.index, error_code=read.error,
                     high_watermark=read.high_watermark, last_stable_offset=lso,
                     log_start_offset=read.log_start_offset,
                     aborted_transactions=aborted,
                     preferred_read_replica=-1, records=records, **current)
        if topics and (topics[-1][0], topics[-1][1]) == (want.tp.topic, want.topic_id):
            topics[-1][2].append(data)
        else:
            topics.append((want.tp.topic, want.topic_id, [data]))
    return build(module.FetchResponse, throttle_time=timedelta(0), error_code=ErrorCode.none,
                 session_id=session_id, responses=tuple(
                     build(module.FetchableTopicResponse, topic=name, topic_id=topic_id,
                           partitions=tuple(parts))
                     for name, topic_id, parts in topics),
                 node_endpoints=tuple(endpoints[b] for b in sorted(endpoints)))


def _current_leader(ctx: RequestContext, module: Any, snap: MetadataSnapshot,
                    tp: TopicPartition, endpoints: dict[int, Any]) -> dict[str, Any]:
    """KIP-951: the partition's leader and epoch as the cache has them, and the leader's
    endpoint on the request's listener (nothing when there is no reachable leader)."""
    state = snap.partition(tp)
    if state is None or state.leader < 0:
        return {}
    broker = snap.brokers.get(state.leader)
    if broker is None:
        return {}
    endpoint = next((e for e in broker.endpoints if e.listener == ctx.listener), None)
    if endpoint is None:
        return {}
    endpoints[state.leader] = build(module.NodeEndpoint, node_id=state.leader,
                                    host=endpoint.host, port=endpoint.port, rack=broker.rack)
    return {"current_leader": build(module.LeaderIdAndEpoch, leader_id=state.leader,
                                    leader_epoch=state.leader_epoch)}


APIS = [Api(key=API_KEY, name="Fetch", min_version=4, max_version=17, handle=handle)]
