"""The RemoteLogMetadataManager plugin interface (Kafka's) and partctl's store behind it.

:class:`RemoteLogMetadataManager` is Kafka's interface: segment metadata is added in
COPY_SEGMENT_STARTED and moved on by updates, each checked against the legal transitions
(:mod:`replication.tiered.metadata`); segments are listed whole or by leader epoch; the segment
holding an offset of an epoch is found for reads, and the highest copied offset of an epoch
for a new leader's copier. Brokers say which partitions they lead or follow, so the manager
keeps their state warm.

:class:`RemoteLogMetadataCache` is the state, pure and in memory: what every implementation
rebuilds from its events. :class:`FileRemoteLogMetadataManager` keeps the events as files, one
per (segment, state), each written atomically (temp name, fsync, rename), in a directory per
partition that every broker reads (on a shared mount, as the filesystem remote storage): a
broker rebuilds a partition's state by reading its directory, and picks up what others wrote
with :meth:`~FileRemoteLogMetadataManager.refresh`. Events of one segment are applied in the
order of their states, so the order files are listed in does not matter, and two brokers
writing the same event (a retry after a failover) write the same file. Kafka keeps these events
in the replicated ``__remote_log_metadata`` topic instead; another store goes behind the same
interface.

Events of deleted segments are dead but for what they leave behind (the highest copied offset
of each epoch; that the segment is gone): :meth:`~EventRemoteLogMetadataManager.compact` sums
them up in one summary record, written atomically, and deletes them, so the store does not grow
with every segment ever copied; the leader's remote log manager compacts after each pass that
left enough of them. A crash at any point of a compaction leaves records that load to the same
state (see there).

The events need only an atomic put of a named record, a listing by prefix and a delete, so
the same manager runs over any :class:`EventStore`: :class:`FileRemoteLogMetadataManager` over
files, :class:`S3RemoteLogMetadataManager` over objects under ``<prefix>/__remote_log_metadata/`` in
the S3 bucket that holds the segments (no shared mount needed).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol, runtime_checkable

from replication.checkpoints import atomic_write, fsync_directory, make_private_directory
from replication.tiered.config import (
    FORGET_DELETED_AFTER_MS,
    METADATA_DIRECTORY,
    MIN_STALE_RECORDS,
)
from replication.tiered.metadata import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    TopicIdPartition,
    is_valid_transition,
    kafka_uuid_text,
)
from replication.tiered.s3 import S3ObjectStore, parse_s3_url
from replication.tiered.storage import RemoteResourceNotFoundError

__all__ = [
    "CompactableMetadata",
    "EventRemoteLogMetadataManager",
    "EventStore",
    "FileEventStore",
    "FileRemoteLogMetadataManager",
    "S3RemoteLogMetadataManager",
    "InvalidTransitionError",
    "RemoteLogMetadataCache",
    "RemoteLogMetadataManager",
    "UnknownSegmentError",
]

SUMMARY_PREFIX = "compacted-"
"""Names of the records that sum up the events of deleted segments."""

log = logging.getLogger(__name__)
state_change_log = logging.getLogger(__name__ + ".state_change")

_S = RemoteLogSegmentState


class InvalidTransitionError(ValueError):
    """A segment state change that the transition table refuses (nothing changed)."""


class UnknownSegmentError(KeyError):
    """An update for a segment whose metadata was never added (Kafka's
    RemoteResourceNotFoundException)."""


@runtime_checkable
class RemoteLogMetadataManager(Protocol):
    """Kafka's RemoteLogMetadataManager."""

    def add_remote_log_segment_metadata(self, metadata: RemoteLogSegmentMetadata) -> None:
        """Add a segment in COPY_SEGMENT_STARTED (before any of its data is copied)."""
        ...

    def update_remote_log_segment_metadata(self, update: RemoteLogSegmentMetadataUpdate
                                           ) -> None:
        """Move a segment to the update's state; raises :class:`InvalidTransitionError` or
        :class:`UnknownSegmentError`, changing nothing."""
        ...

    def list_remote_log_segments(self, partition: TopicIdPartition,
                                 leader_epoch: int | None = None
                                 ) -> list[RemoteLogSegmentMetadata]:
        """Every segment not deleted yet, by start offset; with ``leader_epoch``, only the
        COPY_SEGMENT_FINISHED ones holding records of that epoch."""
        ...

    def remote_log_segment_metadata(self, partition: TopicIdPartition, leader_epoch: int,
                                    offset: int) -> RemoteLogSegmentMetadata | None:
        """The COPY_SEGMENT_FINISHED segment holding ``offset`` written in ``leader_epoch``."""
        ...

    def highest_offset_for_epoch(self, partition: TopicIdPartition, leader_epoch: int
                                 ) -> int | None:
        """The highest offset of ``leader_epoch`` copied (COPY_SEGMENT_FINISHED), if any."""
        ...

    def refresh(self, partitions: Iterable[TopicIdPartition]) -> None:
        """Bring the state of ``partitions`` up to date with what other brokers wrote (a
        manager that is always current does nothing)."""
        ...

    def on_partition_leadership_changes(self, leaders: Iterable[TopicIdPartition],
                                        followers: Iterable[TopicIdPartition]) -> None:
        """This broker now leads or follows these partitions: keep their state."""
        ...

    def on_stop_partitions(self, partitions: Iterable[TopicIdPartition]) -> None:
        """This broker no longer hosts these partitions."""
        ...

    def remove_partition(self, partition: TopicIdPartition) -> None:
        """Forget everything of a deleted partition (its segments' data is gone)."""
        ...

    def close(self) -> None:
        ...


@runtime_checkable
class CompactableMetadata(Protocol):
    """A capability of partctl's managers besides Kafka's interface: the records of deleted
    segments can be summed up, so the store does not grow with every segment ever copied
    (:meth:`EventRemoteLogMetadataManager.compact`)."""

    def compact(self, partition: TopicIdPartition, now_ms: int, *, min_stale: int = MIN_STALE_RECORDS,
                forget_after_ms: int = FORGET_DELETED_AFTER_MS) -> int:
        """Sum up the partition's records of deleted segments; returns the records removed."""
        ...


class _PartitionState:
    __slots__ = ("deleted", "highest_by_epoch", "segments")

    def __init__(self) -> None:
        self.segments: dict[uuid.UUID, RemoteLogSegmentMetadata] = {}
        self.highest_by_epoch: dict[int, int] = {}
        self.deleted: dict[uuid.UUID, int] = {}
        """Segments seen DELETE_SEGMENT_FINISHED, with when."""


class RemoteLogMetadataCache:
    """Remote segment metadata of some partitions, in memory (Kafka's RemoteLogMetadataCache).

    A segment enters in COPY_SEGMENT_STARTED, counts for reads and the highest copied offsets
    from COPY_SEGMENT_FINISHED, leaves reads at DELETE_SEGMENT_STARTED and the cache at
    DELETE_SEGMENT_FINISHED. The highest copied offset of an epoch is kept after its segments
    are deleted (retention), so a copier never uploads them again. Not thread-safe."""

    def __init__(self) -> None:
        self._partitions: dict[TopicIdPartition, _PartitionState] = {}

    def _state(self, partition: TopicIdPartition) -> _PartitionState:
        state = self._partitions.get(partition)
        if state is None:
            state = self._partitions[partition] = _PartitionState()
        return state

    def current_state(self, segment_id: RemoteLogSegmentId) -> RemoteLogSegmentState | None:
        state = self._partitions.get(segment_id.partition)
        found = state.segments.get(segment_id.id) if state is not None else None
        return found.state if found is not None else None

    def check_add(self, metadata: RemoteLogSegmentMetadata) -> None:
        if metadata.state is not _S.COPY_SEGMENT_STARTED:
            raise InvalidTransitionError(
                f"segment {metadata.segment_id} must be added in COPY_SEGMENT_STARTED, "
                f"not {metadata.state.name}")
        current = self.current_state(metadata.segment_id)
        if not is_valid_transition(current, metadata.state):
            raise InvalidTransitionError(
                f"segment {metadata.segment_id} is already {current.name if current else None}")

    def add(self, metadata: RemoteLogSegmentMetadata) -> None:
        self.check_add(metadata)
        self._state(metadata.partition).segments[metadata.segment_id.id] = metadata

    def check_update(self, update: RemoteLogSegmentMetadataUpdate) -> RemoteLogSegmentMetadata:
        state = self._partitions.get(update.segment_id.partition)
        found = state.segments.get(update.segment_id.id) if state is not None else None
        if found is None:
            raise UnknownSegmentError(f"no remote segment {update.segment_id}")
        if not is_valid_transition(found.state, update.state):
            raise InvalidTransitionError(
                f"segment {update.segment_id}: {found.state.name} -> {update.state.name} is not "
                "a legal transition")
        return found

    def update(self, update: RemoteLogSegmentMetadataUpdate) -> None:
        found = self.check_update(update)
        state = self._state(update.segment_id.partition)
        if update.state is _S.DELETE_SEGMENT_FINISHED:
            del state.segments[update.segment_id.id]
            state.deleted[update.segment_id.id] = update.event_timestamp_ms
            return
        new = found.with_update(update)
        state.segments[update.segment_id.id] = new
        if update.state is _S.COPY_SEGMENT_FINISHED:
            for epoch, _start, end in new.epoch_ranges():
                if end > state.highest_by_epoch.get(epoch, -1):
                    state.highest_by_epoch[epoch] = end

    def segments(self, partition: TopicIdPartition, leader_epoch: int | None = None
                 ) -> list[RemoteLogSegmentMetadata]:
        state = self._partitions.get(partition)
        if state is None:
            return []
        found = list(state.segments.values())
        if leader_epoch is not None:
            found = [m for m in found if m.state is _S.COPY_SEGMENT_FINISHED
                     and any(e == leader_epoch for e, _o in m.segment_leader_epochs)]
        return sorted(found, key=lambda m: (m.start_offset, m.event_timestamp_ms))

    def segment_for(self, partition: TopicIdPartition, leader_epoch: int, offset: int
                    ) -> RemoteLogSegmentMetadata | None:
        best: RemoteLogSegmentMetadata | None = None
        for m in self.segments(partition, leader_epoch):
            for epoch, start, end in m.epoch_ranges():
                if epoch == leader_epoch and start <= offset <= end and (
                        best is None or m.start_offset > best.start_offset):
                    best = m
        return best

    def highest_offset_for_epoch(self, partition: TopicIdPartition, leader_epoch: int
                                 ) -> int | None:
        state = self._partitions.get(partition)
        return state.highest_by_epoch.get(leader_epoch) if state is not None else None

    def forget(self, partition: TopicIdPartition) -> None:
        self._partitions.pop(partition, None)

    def is_deleted(self, segment_id: RemoteLogSegmentId) -> bool:
        """Whether the segment went DELETE_SEGMENT_FINISHED (here or in a compacted summary):
        a leftover event of it is stale."""
        state = self._partitions.get(segment_id.partition)
        return state is not None and segment_id.id in state.deleted

    def summary(self, partition: TopicIdPartition) -> tuple[dict[int, int], dict[uuid.UUID, int]]:
        """What the events of deleted segments leave behind: the highest copied offset of
        each epoch and the deleted segments with when they went."""
        state = self._partitions.get(partition)
        if state is None:
            return {}, {}
        return dict(state.highest_by_epoch), dict(state.deleted)

    def absorb(self, partition: TopicIdPartition, highest_by_epoch: dict[int, int],
               deleted: dict[uuid.UUID, int]) -> None:
        """Take in a compacted summary: the highest offsets merge by max, the deleted segments
        by union (and leave the cache). Merging summaries in any order, any number of times,
        gives the same state."""
        state = self._state(partition)
        for epoch, offset in highest_by_epoch.items():
            if offset > state.highest_by_epoch.get(epoch, -1):
                state.highest_by_epoch[epoch] = offset
        for segment, when in deleted.items():
            state.segments.pop(segment, None)
            state.deleted[segment] = max(when, state.deleted.get(segment, when))

    def drop_deleted(self, partition: TopicIdPartition, segments: Iterable[uuid.UUID]) -> None:
        """Forget that these deleted segments existed (no event of theirs is left)."""
        state = self._partitions.get(partition)
        if state is not None:
            for segment in segments:
                state.deleted.pop(segment, None)


# -- the file store ----------------------------------------------------------------------------


def _encode(event: RemoteLogSegmentMetadata | RemoteLogSegmentMetadataUpdate) -> bytes:
    sid = event.segment_id
    body: dict[str, object] = {
        "topic_id": str(sid.partition.topic_id), "topic": sid.partition.topic,
        "partition": sid.partition.partition, "segment": str(sid.id),
        "state": event.state.value, "broker_id": event.broker_id,
        "event_timestamp_ms": event.event_timestamp_ms,
    }
    if isinstance(event, RemoteLogSegmentMetadata):
        body.update(start_offset=event.start_offset, end_offset=event.end_offset,
                    max_timestamp_ms=event.max_timestamp_ms,
                    segment_leader_epochs=[list(e) for e in event.segment_leader_epochs],
                    segment_size_in_bytes=event.segment_size_in_bytes)
    return json.dumps(body, sort_keys=True).encode()


def _decode(data: bytes) -> RemoteLogSegmentMetadata | RemoteLogSegmentMetadataUpdate:
    body = json.loads(data)
    partition = TopicIdPartition(topic_id=uuid.UUID(body["topic_id"]), topic=body["topic"],
                                 partition=int(body["partition"]))
    sid = RemoteLogSegmentId(partition=partition, id=uuid.UUID(body["segment"]))
    state = RemoteLogSegmentState(int(body["state"]))
    if state is _S.COPY_SEGMENT_STARTED:
        return RemoteLogSegmentMetadata(
            segment_id=sid, start_offset=int(body["start_offset"]),
            end_offset=int(body["end_offset"]), max_timestamp_ms=int(body["max_timestamp_ms"]),
            broker_id=int(body["broker_id"]),
            event_timestamp_ms=int(body["event_timestamp_ms"]),
            segment_leader_epochs=tuple((int(e), int(o))
                                        for e, o in body["segment_leader_epochs"]),
            segment_size_in_bytes=int(body["segment_size_in_bytes"]), state=state)
    return RemoteLogSegmentMetadataUpdate(
        segment_id=sid, event_timestamp_ms=int(body["event_timestamp_ms"]), state=state,
        broker_id=int(body["broker_id"]))


def _encode_summary(highest_by_epoch: dict[int, int], deleted: dict[uuid.UUID, int]) -> bytes:
    return json.dumps({
        "highest_by_epoch": sorted([e, o] for e, o in highest_by_epoch.items()),
        "deleted": sorted([str(s), t] for s, t in deleted.items()),
    }).encode()


def _decode_summary(data: bytes) -> tuple[dict[int, int], dict[uuid.UUID, int]]:
    body = json.loads(data)
    return ({int(e): int(o) for e, o in body["highest_by_epoch"]},
            {uuid.UUID(s): int(t) for s, t in body["deleted"]})


def _event_segment(name: str) -> uuid.UUID | None:
    """The segment an event record (or its temporary file) is about, from its name."""
    head, _, rest = name.partition(".")
    if not rest.startswith(tuple(f"{s.value}.json" for s in _S)):
        return None
    try:
        return uuid.UUID(head)
    except ValueError:
        return None


class EventStore(Protocol):
    """Where the metadata events live: named records in a group per partition. ``write`` is
    atomic (a reader sees the whole record or none); ``read`` answers None for a record gone;
    ``delete`` removes records (those already gone too)."""

    def names(self, group: str) -> list[str]: ...

    def read(self, group: str, name: str) -> bytes | None: ...

    def write(self, group: str, name: str, data: bytes) -> None: ...

    def delete(self, group: str, names: list[str]) -> None: ...

    def remove(self, group: str) -> None: ...


class FileEventStore:
    """Events as files, one directory per partition under ``directory``; owner-only as the
    broker's log directories (directories 0700, files 0600), a directory that already exists
    left as it is."""

    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)
        make_private_directory(self.directory)

    def names(self, group: str) -> list[str]:
        try:
            return os.listdir(self.directory / group)
        except FileNotFoundError:
            return []

    def read(self, group: str, name: str) -> bytes | None:
        try:
            return (self.directory / group / name).read_bytes()
        except FileNotFoundError:
            return None

    def write(self, group: str, name: str, data: bytes) -> None:
        path = self.directory / group / name
        make_private_directory(path.parent)
        atomic_write(path, data)

    def delete(self, group: str, names: list[str]) -> None:
        directory = self.directory / group
        for name in names:
            (directory / name).unlink(missing_ok=True)
        if names and directory.is_dir():
            fsync_directory(directory)

    def remove(self, group: str) -> None:
        directory = self.directory / group
        if directory.is_dir():
            for path in directory.iterdir():
                path.unlink(missing_ok=True)
            directory.rmdir()

    def __repr__(self) -> str:
        return str(self.directory)


class EventRemoteLogMetadataManager:
    """Segment metadata events in an :class:`EventStore` (see the module docstring).
    Thread-safe."""

    def __init__(self, store: EventStore) -> None:
        self.store = store
        self._lock = threading.RLock()
        self._cache = RemoteLogMetadataCache()
        self._seen: dict[TopicIdPartition, set[str]] = {}

    @staticmethod
    def _group(partition: TopicIdPartition) -> str:
        return (f"{partition.topic}-{kafka_uuid_text(partition.topic_id)}-"
                f"{partition.partition}")

    @staticmethod
    def _event_name(event: RemoteLogSegmentMetadata | RemoteLogSegmentMetadataUpdate) -> str:
        return f"{event.segment_id.id}.{event.state.value}.json"

    def _load(self, partition: TopicIdPartition) -> list[str]:
        """Apply the partition's summaries and events not seen yet: the summaries first, then
        the events, each segment's in state order, those of a deleted segment skipped (lock
        held). Returns the names listed."""
        seen = self._seen.setdefault(partition, set())
        group = self._group(partition)
        listed = self.store.names(group)
        seen.intersection_update(listed)  # what compaction deleted is gone for good
        names = [n for n in listed if n.endswith(".json") and n not in seen]
        for name in names:
            if not name.startswith(SUMMARY_PREFIX):
                continue
            seen.add(name)
            data = self.store.read(group, name)
            if data is None:
                continue  # compacted meanwhile into a summary listed next time
            try:
                highest, deleted = _decode_summary(data)
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("remote log metadata summary %s/%s/%s does not parse, skipped: %s",
                            self.store, group, name, exc)
                continue
            self._cache.absorb(partition, highest, deleted)
        events = []
        for name in names:
            if name.startswith(SUMMARY_PREFIX):
                continue
            data = self.store.read(group, name)
            if data is None:
                continue
            try:
                events.append((name, _decode(data)))
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("remote log metadata %s/%s/%s does not parse, skipped: %s",
                            self.store, group, name, exc)
                seen.add(name)
        events.sort(key=lambda item: (item[1].state.value, item[1].event_timestamp_ms))
        for name, event in events:
            seen.add(name)
            if self._cache.is_deleted(event.segment_id):
                continue  # a leftover of a segment a compaction summed up
            try:
                self._apply(event)
            except (InvalidTransitionError, UnknownSegmentError) as exc:
                state_change_log.warning("skipping remote log metadata event %s: %s", name, exc)
        return listed

    def _apply(self, event: RemoteLogSegmentMetadata | RemoteLogSegmentMetadataUpdate) -> None:
        if isinstance(event, RemoteLogSegmentMetadata):
            self._cache.add(event)
        else:
            self._cache.update(event)

    def _write(self, event: RemoteLogSegmentMetadata | RemoteLogSegmentMetadataUpdate) -> None:
        name = self._event_name(event)
        self.store.write(self._group(event.segment_id.partition), name, _encode(event))
        self._seen.setdefault(event.segment_id.partition, set()).add(name)

    # -- the interface -------------------------------------------------------------------------

    def add_remote_log_segment_metadata(self, metadata: RemoteLogSegmentMetadata) -> None:
        with self._lock:
            self._load(metadata.partition)
            try:
                self._cache.check_add(metadata)
            except InvalidTransitionError as exc:
                state_change_log.error("refused: %s", exc)
                raise
            self._write(metadata)
            self._cache.add(metadata)

    def update_remote_log_segment_metadata(self, update: RemoteLogSegmentMetadataUpdate
                                           ) -> None:
        with self._lock:
            self._load(update.segment_id.partition)
            try:
                self._cache.check_update(update)
            except (InvalidTransitionError, UnknownSegmentError) as exc:
                state_change_log.error("refused: %s", exc)
                raise
            self._write(update)
            self._cache.update(update)

    def list_remote_log_segments(self, partition: TopicIdPartition,
                                 leader_epoch: int | None = None
                                 ) -> list[RemoteLogSegmentMetadata]:
        with self._lock:
            self._ensure(partition)
            return self._cache.segments(partition, leader_epoch)

    def remote_log_segment_metadata(self, partition: TopicIdPartition, leader_epoch: int,
                                    offset: int) -> RemoteLogSegmentMetadata | None:
        with self._lock:
            self._ensure(partition)
            return self._cache.segment_for(partition, leader_epoch, offset)

    def highest_offset_for_epoch(self, partition: TopicIdPartition, leader_epoch: int
                                 ) -> int | None:
        with self._lock:
            self._ensure(partition)
            return self._cache.highest_offset_for_epoch(partition, leader_epoch)

    def _ensure(self, partition: TopicIdPartition) -> None:
        if partition not in self._seen:
            self._load(partition)

    def refresh(self, partitions: Iterable[TopicIdPartition]) -> None:
        """Take in what other brokers wrote for ``partitions`` since the last look."""
        with self._lock:
            for partition in partitions:
                self._load(partition)

    def on_partition_leadership_changes(self, leaders: Iterable[TopicIdPartition],
                                        followers: Iterable[TopicIdPartition]) -> None:
        self.refresh([*leaders, *followers])

    def on_stop_partitions(self, partitions: Iterable[TopicIdPartition]) -> None:
        with self._lock:
            for partition in partitions:
                self._cache.forget(partition)
                self._seen.pop(partition, None)

    def remove_partition(self, partition: TopicIdPartition) -> None:
        with self._lock:
            self._cache.forget(partition)
            self._seen.pop(partition, None)
            self.store.remove(self._group(partition))

    def compact(self, partition: TopicIdPartition, now_ms: int, *, min_stale: int = MIN_STALE_RECORDS,
                forget_after_ms: int = FORGET_DELETED_AFTER_MS) -> int:
        """Sum up the records of deleted segments; returns how many records went (0 when fewer
        than ``min_stale`` were stale and there was at most one summary: nothing done).

        The events of a segment that went DELETE_SEGMENT_FINISHED are dead but for two facts:
        the highest copied offset of each epoch (which a copier must not go below) and that
        the segment is gone (so a leftover event never brings it back). One new summary,
        written atomically under a fresh name, holds both, merged with every summary listed;
        only then are the dead events, the older summaries and the temporary files of
        compactions that crashed deleted. A crash at any point leaves records that load to
        the same state: summaries merge by max and union, in any order, and an event of a
        segment a summary names deleted is skipped. A deleted segment is left out of the
        summary ``forget_after_ms`` after it went, once none of its events is left (every
        broker has refreshed by then)."""
        with self._lock:
            listed = self._load(partition)
            group = self._group(partition)
            summaries, stale, kept_ids = [], [], set()
            for name in listed:
                if name.startswith(SUMMARY_PREFIX):
                    summaries.append(name)
                    continue
                segment = _event_segment(name)
                if segment is not None and self._cache.is_deleted(
                        RemoteLogSegmentId(partition=partition, id=segment)):
                    stale.append(name)
                    kept_ids.add(segment)
            if len(stale) < min_stale and len(summaries) <= 1:
                return 0
            highest, deleted = self._cache.summary(partition)
            forgotten = [s for s, when in deleted.items()
                         if s not in kept_ids and now_ms - when > forget_after_ms]
            for segment in forgotten:
                del deleted[segment]
            name = f"{SUMMARY_PREFIX}{uuid.uuid4()}.json"
            self.store.write(group, name, _encode_summary(highest, deleted))
            self._seen.setdefault(partition, set()).add(name)
            gone = stale + summaries
            self.store.delete(group, gone)
            self._cache.drop_deleted(partition, forgotten)
            log.info("compacted the remote log metadata of %s: %d records into %s (%d deleted "
                     "segments remembered, %d forgotten)", partition, len(gone), name,
                     len(deleted), len(forgotten))
            return len(gone)

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.store})"


class FileRemoteLogMetadataManager(EventRemoteLogMetadataManager):
    """The events as files under ``directory`` (on a mount every broker shares)."""

    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)
        super().__init__(FileEventStore(self.directory))


class S3EventStore:
    """Events as objects ``<group>/<name>`` under ``__remote_log_metadata/`` in an S3
    object store (a put is atomic; a listing by prefix finds a group's events)."""

    def __init__(self, objects: S3ObjectStore) -> None:
        self.objects = objects

    def _key(self, group: str, name: str = "") -> str:
        return f"{METADATA_DIRECTORY}/{group}/{name}"

    def names(self, group: str) -> list[str]:
        base = self._key(group)
        return [key[len(base):] for key in self.objects.list(base)]

    def read(self, group: str, name: str) -> bytes | None:
        try:
            return self.objects.get(self._key(group, name))
        except RemoteResourceNotFoundError:
            return None

    def write(self, group: str, name: str, data: bytes) -> None:
        self.objects.put(self._key(group, name), data)

    def delete(self, group: str, names: list[str]) -> None:
        if names:
            self.objects.delete([self._key(group, name) for name in names])

    def remove(self, group: str) -> None:
        keys = self.objects.list(self._key(group))
        if keys:
            self.objects.delete(keys)

    def __repr__(self) -> str:
        return f"{self.objects}/{METADATA_DIRECTORY}"


class S3RemoteLogMetadataManager(EventRemoteLogMetadataManager):
    """The events as objects under ``s3://bucket/prefix/__remote_log_metadata/``: the bucket
    that holds the segments holds their metadata, so brokers share no mount. Store failures
    raise :class:`~replication.tiered.storage.RemoteStorageError`."""

    def __init__(self, url: str, *, endpoint_url: str | None = None,
                 client: object = None) -> None:
        bucket, prefix = parse_s3_url(url)
        super().__init__(S3EventStore(S3ObjectStore(bucket, prefix, endpoint_url=endpoint_url,
                                                    client=client)))
