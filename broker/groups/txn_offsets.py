"""Offsets committed in transactions (KIP-98, KIP-447): the group coordinator's side.

A transactional producer that consumed from a group commits the group's offsets with
TxnOffsetCommit inside its transaction. The coordinator checks the committer against the
group (:func:`check_committer`: from TxnOffsetCommit v3 the generation, member id and instance
id, when given), writes the offsets to the group's partition of ``__consumer_offsets`` as one
transactional batch of the producer's id and epoch (acks=all, answered after), and holds them
as *pending* for that producer id (:attr:`~broker.groups.group.Group.pending_txn`): OffsetFetch
does not show them, and with ``require_stable`` answers the partition UNSTABLE_OFFSET_COMMIT.
The transaction coordinator ends the transaction by writing a marker into that partition
(WriteTxnMarkers); once the marker is written, the replica manager tells
(:meth:`TxnOffsets.marker_written`): a commit moves the producer's pending offsets into the
committed ones, except where a later record of the log already committed the same partition
(Kafka's rule, by position in the log: a plain OffsetCommit acknowledged after the
transactional one wins), an abort drops them. Loading a partition replays the same rules from
the log (:mod:`broker.groups.loading`), so a new coordinator holds what the old one held.

The rules are Kafka 3.9's (``GroupMetadata``'s pending transactional offset commits and the
new coordinator's ``OffsetMetadataManager``, which agree on them): a group with pending
offsets is not expired, nor an offset with a pending one for its partition; OffsetDelete and
DeleteGroups delete pending offsets with the committed ones (a tombstone for each partition).

The bookkeeping of one group's pending offsets is pure (:func:`prepare`, :func:`appended`,
:func:`failed`, :func:`complete`, and :func:`check_committer`); :class:`TxnOffsets` runs it
over the group metadata manager, on the broker's event loop, and hears the markers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping

from kio.schema.errors import ErrorCode

from broker.groups.group import CommittedOffset, Group, GroupState, PendingOffset
from broker.groups.loading import Loaded
from broker.groups.metadata_manager import OFFSETS_TOPIC, GroupMetadataManager
from coordinator.codecs import TopicPartition

Verify = Callable[[TopicPartition], Awaitable[tuple[ErrorCode, int | None]]]
"""KIP-890's question for a transactional offset commit's partition: (the error, and the
guard the append presents when there is none)."""

__all__ = [
    "TxnOffsets",
    "Verify",
    "appended",
    "check_committer",
    "complete",
    "failed",
    "prepare",
]

log = logging.getLogger(__name__)

TP = tuple[str, int]


# --- one group's pending offsets (pure) --------------------------------------------------------


def check_committer(group: Group, generation: int, member_id: str,
                    instance_id: str | None) -> ErrorCode:
    """Whether a TxnOffsetCommit may commit into classic ``group`` (Kafka's
    ``validateOffsetCommit`` for a transactional commit): a Dead group is
    COORDINATOR_NOT_AVAILABLE; a generation of -1 into an Empty group, or a request naming no
    member at all (versions below 3), goes in unchecked; otherwise the instance id must be the
    member's (FENCED_INSTANCE_ID, UNKNOWN_MEMBER_ID), the member known (UNKNOWN_MEMBER_ID) and
    the generation the group's (ILLEGAL_GENERATION). Unlike OffsetCommit, the group's state is
    not asked: the transaction decides when the offsets count."""
    if group.is_(GroupState.DEAD):
        return ErrorCode.coordinator_not_available
    if generation < 0 and group.is_(GroupState.EMPTY):
        return ErrorCode.none
    if generation < 0 and not member_id and not instance_id:
        return ErrorCode.none
    if instance_id:
        known = group.static_members.get(instance_id)
        if known is None:
            return ErrorCode.unknown_member_id
        if known != member_id:
            return ErrorCode.fenced_instance_id
    if member_id not in group.members:
        return ErrorCode.unknown_member_id
    if generation != group.generation:
        return ErrorCode.illegal_generation
    return ErrorCode.none


def prepare(group: Group, producer_id: int, offsets: Mapping[TP, CommittedOffset]) -> None:
    """``offsets`` are being written for ``producer_id``'s transaction: pending, unplaced."""
    held = group.pending_txn.setdefault(producer_id, {})
    for tp, offset in offsets.items():
        held[tp] = PendingOffset(offset=offset)


def appended(group: Group, producer_id: int, offsets: Mapping[TP, CommittedOffset],
             position: int) -> None:
    """``offsets`` were written at ``position`` (Kafka's ``onTxnOffsetCommitAppend``)."""
    held = group.pending_txn.get(producer_id, {})
    for tp, offset in offsets.items():
        pending = held.get(tp)
        if pending is not None and pending.offset == offset:
            held[tp] = PendingOffset(offset=offset, position=position)


def failed(group: Group, producer_id: int, offsets: Mapping[TP, CommittedOffset]) -> None:
    """Writing ``offsets`` failed: they are not pending (the producer is told, and retries)."""
    held = group.pending_txn.get(producer_id)
    if held is None:
        return
    for tp, offset in offsets.items():
        pending = held.get(tp)
        if pending is not None and pending.offset == offset and pending.position is None:
            del held[tp]
    if not held:
        del group.pending_txn[producer_id]


def complete(group: Group, producer_id: int, commit: bool) -> list[TP]:
    """``producer_id``'s transaction ended: on a commit its pending offsets become the
    committed ones, unless a later record committed the partition; the partitions that took
    them."""
    held = group.pending_txn.pop(producer_id, None)
    if not held or not commit:
        return []
    taken = []
    for tp, pending in held.items():
        if pending.position is None:
            # the marker came before the write was acknowledged: a transaction coordinator
            # sends markers after EndTxn, which the producer sends after the answer
            log.warning("group %s: producer %d's offset of %s-%d committed before its write "
                        "was acknowledged; taking it", group.group_id, producer_id, *tp)
        current = group.positions.get(tp)
        if tp in group.offsets and current is not None and (
                pending.position is None or current > pending.position):
            continue  # a plain commit written after it won (Kafka: the later record)
        group.offsets[tp] = pending.offset
        if pending.position is None:
            group.positions.pop(tp, None)
        else:
            group.positions[tp] = pending.position
        taken.append(tp)
    return taken


# --- the coordinator's side -------------------------------------------------------------------


class TxnOffsets:
    """Transactional offset commits over ``manager``'s partitions: TxnOffsetCommit's writes
    and the markers that end them. It listens to the manager (as a
    :class:`~broker.groups.metadata_manager.PartitionListener`) to index the pending offsets
    of the groups loaded (per partition and producer id, the group ids: Kafka's
    ``openGroupsForProducer``, so a marker finds its groups without a scan), and to the
    replica manager for the markers written. On the event loop."""

    def __init__(self, manager: GroupMetadataManager) -> None:
        self.manager = manager
        self._open: dict[tuple[int, int], set[str]] = {}
        manager.replica_manager.add_marker_listener(self.marker_written, manager.loop)

    # -- the partitions loaded and dropped ------------------------------------------------------

    def loaded(self, partition: int, records: Loaded) -> None:
        for group in self.manager.groups_in(partition):
            for producer_id in group.pending_txn:
                self._opened(group, producer_id)

    def unloaded(self, partition: int) -> None:
        for key in [k for k in self._open if k[0] == partition]:
            del self._open[key]

    def keeps_offsets(self, group_id: str) -> bool:
        return False  # Group.pending_txn keeps what it must (see expired_offsets)

    def _opened(self, group: Group, producer_id: int) -> None:
        self._open.setdefault((group.partition, producer_id), set()).add(group.group_id)

    def _closed(self, group: Group, producer_id: int) -> None:
        if producer_id in group.pending_txn:
            return
        key = (group.partition, producer_id)
        held = self._open.get(key, set())
        held.discard(group.group_id)
        if not held:
            self._open.pop(key, None)

    def open_producers(self) -> int:
        """How many (partition, producer id) pairs have pending offsets here."""
        return len(self._open)

    # -- TxnOffsetCommit ------------------------------------------------------------------------

    def commit(self, *, group_id: str, producer_id: int, producer_epoch: int, generation: int,
               member_id: str, instance_id: str | None,
               offsets: dict[TP, CommittedOffset], verify: Verify | None = None
               ) -> asyncio.Future:
        """TxnOffsetCommit for the partitions that passed the request's checks: a future of
        the error that applies to all of them. A group not held yet is created (Empty) when
        the committer passes :func:`check_committer`. A negative producer id (which no
        transaction has) is INVALID_PRODUCER_ID_MAPPING, a negative epoch
        INVALID_PRODUCER_EPOCH: nothing is written for them. ``verify`` (KIP-890 part 1: None
        when the broker does not verify) asks the transaction coordinator whether the group's
        partition is in the transaction, after the group's checks and before the committer's,
        as Kafka orders them: its error is the answer, its guard goes with the append."""
        manager = self.manager
        error = manager.check_group(group_id)
        if error is ErrorCode.none and producer_id < 0:
            error = ErrorCode.invalid_producer_id_mapping  # no transaction has no producer
        elif error is ErrorCode.none and producer_epoch < 0:
            error = ErrorCode.invalid_producer_epoch
        partition = manager.partition_of(group_id)
        if error is not ErrorCode.none or not offsets or verify is None or partition is None:
            return self._committed(error, group_id, producer_id, producer_epoch, generation,
                                   member_id, instance_id, offsets, None)

        async def verified() -> ErrorCode:
            found, guard = await verify(TopicPartition(OFFSETS_TOPIC, partition))
            return await self._committed(found, group_id, producer_id, producer_epoch,
                                         generation, member_id, instance_id, offsets, guard)
        return asyncio.ensure_future(verified())

    def _committed(self, error: ErrorCode, group_id: str, producer_id: int, producer_epoch: int,
                   generation: int, member_id: str, instance_id: str | None,
                   offsets: dict[TP, CommittedOffset], guard: int | None) -> asyncio.Future:
        manager = self.manager
        group = manager.group(group_id) if error is ErrorCode.none else None
        if error is ErrorCode.none:
            error = check_committer(group or Group(group_id=group_id, partition=-1),
                                    generation, member_id, instance_id)
        if error is not ErrorCode.none or not offsets:
            done: asyncio.Future = manager.loop.create_future()
            done.set_result(error)
            return done
        if group is None:
            group = manager.new_group(group_id)
        return self._store(group, producer_id, producer_epoch, offsets, guard)

    def _store(self, group: Group, producer_id: int, producer_epoch: int,
               offsets: dict[TP, CommittedOffset], guard: int | None) -> asyncio.Future:
        """Append ``offsets`` as one transactional batch of ``producer_id`` and its epoch,
        pending until the marker: a future of the error (INVALID_PRODUCER_EPOCH or
        PRODUCER_FENCED for a stale epoch, as the log's producer state says)."""
        prepare(group, producer_id, offsets)
        self._opened(group, producer_id)
        answer: asyncio.Future = self.manager.loop.create_future()

        def written(f: asyncio.Future) -> None:
            error, position = f.result()
            if self.manager.group(group.group_id) is group:
                if error is ErrorCode.none:
                    appended(group, producer_id, offsets, position)
                else:
                    failed(group, producer_id, offsets)
                    self._closed(group, producer_id)
            if not answer.done():  # cancelled: the request's connection is gone
                answer.set_result(error)

        self.manager.write(group.partition, self.manager.offset_records(group, offsets),
                           producer_id, producer_epoch, guard).add_done_callback(written)
        return answer

    # -- markers --------------------------------------------------------------------------------

    def marker_written(self, tp: TopicPartition, producer_id: int, producer_epoch: int,
                       commit: bool) -> None:
        """The replica manager wrote an end-transaction marker as leader of ``tp`` and it
        completed (acks=all): one in ``__consumer_offsets`` ends the producer's pending offsets
        of the groups there (called on the manager's loop)."""
        if tp.topic != OFFSETS_TOPIC:
            return
        p = tp.partition
        manager = self.manager
        loading = manager.loading(p)
        if loading is None or not manager.running:
            return  # not held here: whoever loads the partition reads the marker in the log
        if loading:
            log.info("%s-%d: a transaction marker came while loading; loading again",
                     OFFSETS_TOPIC, p)
            manager.reload(p)
            return
        for group_id in sorted(self._open.pop((p, producer_id), ())):
            group = manager.group(group_id)
            if group is None:
                continue  # deleted meanwhile, with what it held
            taken = complete(group, producer_id, commit)
            log.debug("group %s: producer %d's transaction %s (%d offset(s) taken)", group_id,
                      producer_id, "committed" if commit else "aborted", len(taken))
