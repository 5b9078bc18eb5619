"""The group metadata manager: the ``__consumer_offsets`` partitions this broker answers for,
their groups and committed offsets, and every append to them (Kafka's
``GroupMetadataManager``).

A group belongs to one partition of ``__consumer_offsets`` (:func:`~broker.groups.records.
partition_for`), and the broker leading that partition is the group's coordinator. Everything
a coordinator decides is written to that partition before it is answered (acks=all through
the replica manager, so an acknowledged commit is on every in-sync replica); a broker that
becomes leader of a partition reads it from the start and rebuilds its groups before it answers
for them (COORDINATOR_LOAD_IN_PROGRESS until then), and one that stops leading drops them
(NOT_COORDINATOR), as Kafka's GroupMetadataManager does on election and resignation.

The manager holds the classic groups (:class:`~broker.groups.group.Group`, which carry the
committed offsets of every group id, a KIP-848 group's too) and what is stored of them: offset
commits, fetches, deletes and expiry, a generation's record, the descriptions DescribeGroups
and ListGroups show. The protocols run above it: the classic coordinator
(:mod:`broker.groups.coordinator`) and the KIP-848 one (:mod:`broker.groups.
consumer_coordinator`) register as :class:`PartitionListener` to hear of partitions loaded and
unloaded. All of it runs on the broker's event loop; the only work off the loop is reading a
partition when it is loaded.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Protocol

from kio.schema.errors import ErrorCode

from broker.groups.group import (
    CONSUMER_PROTOCOL,
    CommittedOffset,
    Group,
    GroupState,
    Member,
    expired_offsets,
)
from broker.groups.loading import Loaded, LoadedPartition, build_groups, read_records
from broker.groups.records import (
    COORDINATOR_HEADER,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_key,
    encode_value,
    partition_for,
)
from broker.metadata_cache import MetadataCache
from broker.purgatory import Purgatory
from coordinator.codecs import TopicPartition
from interbroker.errors import ErrorCode as DataErrorCode
from replication.partition import Role
from replication.protocol import AppendOrigin, ProduceResult
from replication.records import NO_PRODUCER_ID, Record, encode_batch
from replication.replica_manager import ReplicaManager

__all__ = [
    "OFFSETS_TOPIC",
    "GroupConfig",
    "GroupMetadataManager",
    "GroupSummary",
    "PartitionListener",
    "resolved",
]

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
_MARKED = (COORDINATOR_HEADER,)
LEADERSHIP_CHECK_S = 0.2
S = GroupState
Records = list[tuple[bytes, bytes | None]]


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupConfig:
    """The broker settings the coordinator runs on (Kafka's keys and defaults)."""

    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    offsets_topic_segment_bytes: int = 100 * 1024 * 1024
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600_000
    offsets_commit_timeout_ms: int = 5_000
    offset_metadata_max_bytes: int = 4096
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3_000
    group_max_size: int = (1 << 31) - 1
    consumer_session_timeout_ms: int = 45_000
    consumer_heartbeat_interval_ms: int = 5_000
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    """KIP-848 groups: ``group.consumer.*`` (the first assignor is the default)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupSummary:
    """What DescribeGroups and ListGroups show of a group."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[tuple[Member, bytes, bytes], ...] = ()
    """(member, its metadata, its assignment): both empty unless the group is Stable."""


class PartitionListener(Protocol):
    """A coordinator of one kind of group, told of the partitions the manager loads and drops
    (Kafka's ``onGroupLoaded`` and ``onGroupUnloaded``)."""

    def loaded(self, partition: int, records: Loaded, /) -> object:
        """Partition ``partition`` is loaded: its classic groups are held, ``records`` are its
        records in log order."""

    def unloaded(self, partition: int, /) -> None:
        """Partition ``partition`` is dropped (its classic groups are still held, for the last
        time)."""

    def keeps_offsets(self, group_id: str, /) -> bool:
        """Whether ``group_id``'s committed offsets must not expire now (it has members)."""


@dataclass(slots=True)
class _Partition:
    epoch: int
    loaded: bool = False
    groups: set[str] = field(default_factory=set)


def _now_ms() -> int:
    return int(time.time() * 1000)


def resolved(loop: asyncio.AbstractEventLoop, result: object) -> asyncio.Future:
    """A loop future already holding ``result``."""
    future: asyncio.Future = loop.create_future()
    future.set_result(result)
    return future


_PRODUCER_ERRORS = frozenset({ErrorCode.invalid_producer_epoch, ErrorCode.producer_fenced,
                              ErrorCode.invalid_txn_state, ErrorCode.transaction_abortable})
"""Errors of a transactional append the producer is told as they are (Kafka passes them)."""


def _commit_error(error: int) -> ErrorCode:
    """Kafka's mapping of an append's error to what a committer is told."""
    if error in ErrorCode._value2member_map_ and ErrorCode(error) in _PRODUCER_ERRORS:
        return ErrorCode(error)
    match DataErrorCode(error) if error in DataErrorCode._value2member_map_ else None:
        case DataErrorCode.NONE:
            return ErrorCode.none
        case (DataErrorCode.UNKNOWN_TOPIC_OR_PARTITION | DataErrorCode.NOT_LEADER_OR_FOLLOWER
              | DataErrorCode.KAFKA_STORAGE_ERROR | DataErrorCode.BROKER_NOT_AVAILABLE):
            return ErrorCode.not_coordinator
        case (DataErrorCode.NOT_ENOUGH_REPLICAS | DataErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
              | DataErrorCode.REQUEST_TIMED_OUT):
            return ErrorCode.coordinator_not_available
        case DataErrorCode.MESSAGE_TOO_LARGE | DataErrorCode.RECORD_LIST_TOO_LARGE:
            return ErrorCode.invalid_commit_offset_size
        case _:
            return ErrorCode.unknown_server_error


class GroupMetadataManager:
    """The ``__consumer_offsets`` partitions of broker ``broker_id`` and what they hold; every
    method runs on ``loop`` except :meth:`leadership_changed`, which any thread may call."""

    def __init__(self, broker_id: int, replica_manager: ReplicaManager, metadata: MetadataCache,
                 purgatory: Purgatory, loop: asyncio.AbstractEventLoop,
                 config: GroupConfig | None = None,
                 now_ms: Callable[[], int] | None = None) -> None:
        self.broker_id = broker_id
        self.replica_manager = replica_manager
        self.metadata = metadata
        self.purgatory = purgatory
        self.loop = loop
        self.config = config or GroupConfig()
        self.now_ms = now_ms or _now_ms
        self._groups: dict[str, Group] = {}
        self._partitions: dict[int, _Partition] = {}
        self._listeners: list[PartitionListener] = []
        self._timer: asyncio.TimerHandle | None = None
        self._next_expiry = 0.0
        self._running = False
        self.creating: asyncio.Future | None = None
        """The creation of ``__consumer_offsets`` under way (FindCoordinator starts it)."""

    def listen(self, listener: PartitionListener) -> None:
        """Tell ``listener`` of the partitions loaded (in the order listeners were added) and
        dropped (in the reverse order)."""
        self._listeners.append(listener)

    # -- life cycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Start watching leadership of ``__consumer_offsets`` (call on the loop)."""
        self._running = True
        self._next_expiry = self.loop.time() + self.config.offsets_retention_check_interval_ms / 1000
        self._tick()

    def stop(self) -> None:
        """Drop every group (the broker is stopping); parked answers get NOT_COORDINATOR."""
        self._running = False
        if self._timer is not None:
            self._timer.cancel()
        for p in list(self._partitions):
            self._unload(p)

    def leadership_changed(self) -> None:
        """Something changed in what this broker leads (any thread): check now."""
        try:
            self.loop.call_soon_threadsafe(self._check_leadership)
        except RuntimeError:  # the loop is closed
            pass

    def _tick(self) -> None:
        if not self._running:
            return
        self._check_leadership()
        if self.loop.time() >= self._next_expiry:
            self._next_expiry = (self.loop.time()
                                 + self.config.offsets_retention_check_interval_ms / 1000)
            self.expire_offsets()
        self._timer = self.loop.call_later(LEADERSHIP_CHECK_S, self._tick)

    # -- partitions: leadership, loading, unloading ----------------------------------------------

    def partition_count(self) -> int:
        """Partitions of ``__consumer_offsets`` (0: the topic does not exist yet)."""
        return len(self.metadata.snapshot.topics.get(OFFSETS_TOPIC, {}))

    def partition_of(self, group_id: str) -> int | None:
        count = self.partition_count()
        return partition_for(group_id, count) if count else None

    def _leadership(self, p: int) -> int | None:
        """The leader epoch this broker's present leadership of partition ``p`` began at
        (None: it does not lead it). Kept through the later epochs of the same leadership (an
        ISR shrink, a reassignment), which therefore keep the loaded groups and their members,
        as Kafka's coordinator hears only of a partition it newly leads."""
        partition = self.replica_manager.partition(TopicPartition(OFFSETS_TOPIC, p))
        if partition is None:
            return None
        status = partition.status()
        return status.leading_since if status.role is Role.LEADER else None

    def _check_leadership(self) -> None:
        if not self._running:
            return
        for p in list(self._partitions):
            if self._leadership(p) != self._partitions[p].epoch:
                self._unload(p)
        # only __consumer_offsets' partitions are looked at: this runs five times a second on
        # a broker that may host tens of thousands of other partitions
        for p in range(self.partition_count()):
            if p not in self._partitions:
                since = self._leadership(p)
                if since is not None:
                    self._load(p, since)

    def _state_of(self, p: int) -> ErrorCode:
        """NONE when partition ``p``'s groups are here and loaded; else the error to answer."""
        epoch = self._leadership(p)
        held = self._partitions.get(p)
        if held is not None and held.epoch != epoch:
            self._unload(p)
            held = None
        if epoch is None:
            return ErrorCode.not_coordinator
        if held is None:
            self._load(p, epoch)
            held = self._partitions[p]
        return ErrorCode.none if held.loaded else ErrorCode.coordinator_load_in_progress

    @property
    def running(self) -> bool:
        return self._running

    def loading(self, p: int) -> bool | None:
        """Whether partition ``p``'s groups are being loaded (None: not held here)."""
        held = self._partitions.get(p)
        return None if held is None else not held.loaded

    def reload(self, p: int) -> None:
        """Read partition ``p`` again from its log (a load under way may have missed a record
        written since it started reading)."""
        held = self._partitions.get(p)
        if held is not None:
            self._unload(p)
            self._load(p, held.epoch)

    def check_group(self, group_id: str | None) -> ErrorCode:
        """Whether this broker answers for ``group_id`` now: NONE, INVALID_GROUP_ID,
        NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS."""
        if not group_id:
            return ErrorCode.invalid_group_id
        if not self._running:
            return ErrorCode.not_coordinator
        p = self.partition_of(group_id)
        if p is None:
            return ErrorCode.not_coordinator
        return self._state_of(p)

    def _load(self, p: int, epoch: int) -> None:
        mine = self._partitions[p] = _Partition(epoch=epoch)
        log.info("loading the groups of %s-%d (leader epoch %d)", OFFSETS_TOPIC, p, epoch)
        started = time.monotonic()
        reading = self.loop.run_in_executor(None, self._read_partition, p)

        def done(future: asyncio.Future) -> None:
            held = self._partitions.get(p)
            if held is not mine or held.loaded:
                return  # unloaded (or read again) meanwhile
            if future.cancelled() or future.exception() is not None:
                log.error("loading %s-%d failed: %s", OFFSETS_TOPIC, p,
                          None if future.cancelled() else future.exception())
                del self._partitions[p]  # the next request or tick tries again
                return
            self._apply_loaded(p, future.result())
            held.loaded = True
            log.info("loaded %d group(s) of %s-%d in %.0f ms", len(held.groups), OFFSETS_TOPIC,
                     p, (time.monotonic() - started) * 1000)

        reading.add_done_callback(done)

    def _read_partition(self, p: int) -> LoadedPartition:
        """Every record of partition ``p``, in log order (off the loop)."""
        partition = self.replica_manager.partition(TopicPartition(OFFSETS_TOPIC, p))
        if partition is None:
            return LoadedPartition([])
        return read_records(partition.log, f"{OFFSETS_TOPIC}-{p}")

    def _apply_loaded(self, p: int, loaded: LoadedPartition) -> None:
        held = self._partitions[p]
        for group in build_groups(p, loaded):
            self._groups[group.group_id] = group
            held.groups.add(group.group_id)
        records: Loaded = loaded.records
        for listener in self._listeners:
            listener.loaded(p, records)

    def _unload(self, p: int) -> None:
        held = self._partitions.get(p)
        if held is None:
            return
        for listener in reversed(self._listeners):
            listener.unloaded(p)
        del self._partitions[p]
        for group_id in held.groups:
            self._groups.pop(group_id, None)
        log.info("unloaded %d group(s) of %s-%d", len(held.groups), OFFSETS_TOPIC, p)

    # -- the groups held -------------------------------------------------------------------------

    def group(self, group_id: str) -> Group | None:
        return self._groups.get(group_id)

    def groups_in(self, p: int) -> list[Group]:
        """The classic groups of partition ``p`` held here (in the order they came)."""
        return [g for g in self._groups.values() if g.partition == p]

    def new_group(self, group_id: str) -> Group:
        """A new Empty group, held here (``group_id``'s partition is loaded)."""
        partition = self.partition_of(group_id)
        assert partition is not None
        group = Group(group_id=group_id, partition=partition, state_timestamp=self.now_ms())
        self._groups[group.group_id] = group
        self._partitions[group.partition].groups.add(group.group_id)
        return group

    def drop_group(self, group: Group) -> None:
        self._groups.pop(group.group_id, None)
        held = self._partitions.get(group.partition)
        if held is not None:
            held.groups.discard(group.group_id)

    def has_classic_members(self, group_id: str) -> bool:
        group = self._groups.get(group_id)
        return group is not None and bool(group.members or group.pending_members)

    def committed_offsets(self) -> dict[str, dict[tuple[str, int], int]]:
        """The committed offsets of every group held here: group id -> (topic, partition) ->
        offset (for the metrics' consumer lag; on the loop, as everything here)."""
        return {group_id: {tp: committed.offset for tp, committed in group.offsets.items()}
                for group_id, group in self._groups.items() if group.offsets}

    # -- writing to __consumer_offsets -----------------------------------------------------------

    def append(self, p: int, records: Records) -> asyncio.Future:
        """Append ``records`` to partition ``p`` with acks=all: a loop future of the error
        (a committer's view of it, see :func:`_commit_error`)."""
        answer: asyncio.Future = self.loop.create_future()

        def written(f: asyncio.Future) -> None:
            if not answer.done():  # cancelled: the request's connection is gone
                answer.set_result(f.result()[0])

        self.write(p, records).add_done_callback(written)
        return answer

    def write(self, p: int, records: Records, producer_id: int = NO_PRODUCER_ID,
               producer_epoch: int = -1, guard: int | None = None) -> asyncio.Future:
        """Append ``records`` to partition ``p`` with acks=all, as one batch (a transactional
        one of ``producer_id``'s when given, with KIP-890's ``guard``): a loop future of (the
        error, the batch's base offset)."""
        answer: asyncio.Future = self.loop.create_future()
        now = self.now_ms()
        transactional = producer_id != NO_PRODUCER_ID
        batch = encode_batch([Record(key=k, value=v, timestamp=now, headers=_MARKED)
                              for k, v in records], producer_id=producer_id,
                             producer_epoch=producer_epoch,
                             base_sequence=0 if transactional else -1,
                             transactional=transactional)
        tp = TopicPartition(OFFSETS_TOPIC, p)
        produced: Future = self.replica_manager.produce(
            tp, batch, -1, self.config.offsets_commit_timeout_ms, AppendOrigin.COORDINATOR,
            guard)
        self.purgatory.wake(tp)

        def finish(result: ProduceResult) -> None:
            if not answer.done():
                answer.set_result((_commit_error(result.error), result.base_offset))

        def on_done(future: Future) -> None:
            try:
                result = future.result()
            except Exception:  # noqa: BLE001 - the append failed: nothing was acknowledged
                log.exception("appending to %s failed", tp)
                result = ProduceResult(error=DataErrorCode.UNKNOWN_SERVER_ERROR)
            try:
                self.loop.call_soon_threadsafe(finish, result)
            except RuntimeError:
                pass

        produced.add_done_callback(on_done)
        return answer

    def store_group(self, group: Group, assignments: dict[str, bytes] | None = None
                    ) -> asyncio.Future:
        """Append ``group``'s generation (with ``assignments``, when given, for its members'):
        a future of the error."""
        members = []
        for member in group.members.values():
            record = member.record(group.protocol)
            if assignments is not None:
                record = dataclasses.replace(
                    record, assignment=assignments.get(member.member_id, b""))
            members.append(record)
        value = GroupMetadataValue(protocol_type=group.protocol_type or "",
                                   generation=group.generation, protocol=group.protocol,
                                   leader=group.leader_id, current_state_timestamp=
                                   group.state_timestamp, members=tuple(members))
        return self.append(group.partition, [(encode_key(GroupMetadataKey(group.group_id)),
                                              encode_value(value))])

    def tombstones(self, group: Group, partitions: Iterable[tuple[str, int]], *,
                   whole_group: bool = False) -> asyncio.Future:
        """Append the deletion of ``group``'s offsets of ``partitions`` (and of the group):
        a future of the error."""
        records: Records = [
            (encode_key(OffsetCommitKey(group.group_id, t, p)), None) for t, p in partitions]
        if whole_group:
            records.append((encode_key(GroupMetadataKey(group.group_id)), None))
        if not records:
            return resolved(self.loop, ErrorCode.none)
        return self.append(group.partition, records)

    # -- offsets ---------------------------------------------------------------------------------

    @staticmethod
    def offset_records(group: Group,
                        offsets: dict[tuple[str, int], CommittedOffset]) -> Records:
        return [(encode_key(OffsetCommitKey(group.group_id, t, p)),
                 encode_value(OffsetCommitValue(
                     offset=o.offset, leader_epoch=o.leader_epoch, metadata=o.metadata,
                     commit_timestamp=o.commit_timestamp, expire_timestamp=o.expire_timestamp)))
                for (t, p), o in offsets.items()]

    def store_offsets(self, group: Group,
                      offsets: dict[tuple[str, int], CommittedOffset]) -> asyncio.Future:
        """Append ``offsets`` committed for ``group``; held once written (where a transaction
        committed later in the log has not replaced them meanwhile): a future of the error."""
        answer: asyncio.Future = self.loop.create_future()

        def written(f: asyncio.Future) -> None:
            error, position = f.result()
            if error is ErrorCode.none and self._groups.get(group.group_id) is group:
                for tp, offset in offsets.items():
                    if group.positions.get(tp, -1) > position:
                        continue
                    group.offsets[tp] = offset
                    group.positions[tp] = position
            if not answer.done():  # cancelled: the request's connection is gone
                answer.set_result(error)

        self.write(group.partition, self.offset_records(group, offsets)).add_done_callback(
            written)
        return answer

    def fetch_offsets(self, group_id: str, partitions: list[tuple[str, int]] | None
                      ) -> tuple[ErrorCode, dict[tuple[str, int], CommittedOffset | None]]:
        """OffsetFetch for one group: (error, offsets); ``partitions`` None means every
        partition the group committed for."""
        error = self.check_group(group_id)
        if error is not ErrorCode.none:
            return error, {}
        group = self._groups.get(group_id)
        held = group.offsets if group is not None and not group.is_(S.DEAD) else {}
        if partitions is None:
            return ErrorCode.none, dict(sorted(held.items()))
        return ErrorCode.none, {tp: held.get(tp) for tp in partitions}

    def unstable(self, group_id: str, partitions: list[tuple[str, int]] | None
                 ) -> set[tuple[str, int]]:
        """Of ``partitions`` (None: those ``group_id`` committed for), the ones an open
        transaction committed an offset for: an OffsetFetch with ``require_stable`` answers
        them UNSTABLE_OFFSET_COMMIT (KIP-447)."""
        group = self._groups.get(group_id)
        if group is None or group.is_(S.DEAD) or not group.pending_txn:
            return set()
        asked = group.offsets if partitions is None else partitions
        return {tp for tp in asked if group.has_pending(tp)}

    def delete_offsets(self, group_id: str, partitions: Sequence[tuple[str, int]]
                       ) -> asyncio.Future:
        """OffsetDelete: a future of (the group's error, the error per partition)."""
        error = self.check_group(group_id)
        if error is not ErrorCode.none:
            return resolved(self.loop, (error, {}))
        group = self._groups.get(group_id)
        if group is None or group.is_(S.DEAD):
            return resolved(self.loop, (ErrorCode.group_id_not_found, {}))
        subscribed: set[str] | None = set()
        if not group.is_(S.EMPTY):
            if group.protocol_type != CONSUMER_PROTOCOL:
                return resolved(self.loop, (ErrorCode.non_empty_group, {}))
            subscribed = group.subscribed_topics()
        results: dict[tuple[str, int], ErrorCode] = {}
        doomed = []
        for tp in partitions:
            if subscribed is None or tp[0] in subscribed:
                results[tp] = ErrorCode.group_subscribed_to_topic
            else:
                results[tp] = ErrorCode.none
                if tp in group.offsets or group.has_pending(tp):
                    doomed.append(tp)
        if not doomed:
            return resolved(self.loop, (ErrorCode.none, results))
        for tp in doomed:
            group.offsets.pop(tp, None)
            group.positions.pop(tp, None)
        group.drop_pending(doomed)
        answer: asyncio.Future = self.loop.create_future()

        def written(f: asyncio.Future) -> None:
            error = f.result()
            if error is not ErrorCode.none:
                for tp in doomed:
                    results[tp] = error
            answer.set_result((ErrorCode.none, results))

        self.tombstones(group, doomed).add_done_callback(written)
        return answer

    def expire_offsets(self) -> None:
        """Drop the offsets past ``offsets.retention.minutes`` (Kafka's rules: an Empty group's
        from when it became empty, a consumer group's for topics it no longer subscribes to,
        a group without a protocol's from its commit time) and the Empty groups left with
        none; tombstones go to the log."""
        now = self.now_ms()
        for group in list(self._groups.values()):
            held = self._partitions.get(group.partition)
            if held is None or not held.loaded or group.is_(S.DEAD):
                continue
            if any(listener.keeps_offsets(group.group_id) for listener in self._listeners):
                continue  # a consumer group's offsets are kept while it has members
            expired = expired_offsets(group, now, self.config.offsets_retention_ms)
            for tp in expired:
                del group.offsets[tp]
                group.positions.pop(tp, None)
            # a group with an open transaction's offsets stays (Kafka: it still has offsets)
            dead = group.is_(S.EMPTY) and not group.offsets and not group.pending_txn
            if dead:
                group.transition(S.DEAD, now)
                self.drop_group(group)
            if expired or dead:
                log.info("group %s: %d offset(s) expired%s", group.group_id, len(expired),
                         "; the group is removed" if dead else "")
                self.tombstones(group, expired, whole_group=dead)

    # -- describing ------------------------------------------------------------------------------

    def describe(self, group_id: str) -> tuple[ErrorCode, GroupSummary | None]:
        error = self.check_group(group_id)
        if error is not ErrorCode.none:
            return error, None
        group = self._groups.get(group_id)
        if group is None or group.is_(S.DEAD):
            return ErrorCode.none, GroupSummary(group_id=group_id, state=S.DEAD.value,
                                                protocol_type="", protocol="")
        stable = group.is_(S.STABLE)
        members = tuple((m, m.metadata(group.protocol or "") if stable else b"",
                         m.assignment if stable else b"") for m in group.members.values())
        return ErrorCode.none, GroupSummary(group_id=group_id, state=group.state.value,
                                            protocol_type=group.protocol_type or "",
                                            protocol=(group.protocol or "") if stable else "",
                                            members=members)

    def list_groups(self) -> tuple[ErrorCode, list[GroupSummary]]:
        """Every group held here; COORDINATOR_LOAD_IN_PROGRESS while a partition loads."""
        if self._running:
            self._check_leadership()
        loading = any(not p.loaded for p in self._partitions.values())
        groups = [GroupSummary(group_id=g.group_id, state=g.state.value,
                               protocol_type=g.protocol_type or "", protocol="")
                  for g in self._groups.values() if not g.is_(S.DEAD)]
        return (ErrorCode.coordinator_load_in_progress if loading else ErrorCode.none), groups
