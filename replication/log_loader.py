"""Opening a log directory: recovery (Kafka's LogLoader).

Opening a log without the clean-shutdown marker recovers it: every batch from the recovery point
on is re-checked (size, magic, CRC, increasing offsets), the log is cut at the first that fails,
later segments are dropped, indexes are rebuilt and the epoch cache is cut to what survived.
Segments wholly below the recovery point were fsynced and are trusted, as Kafka trusts them:
damage an open finds there is reported in one warning and kept (see
:meth:`LogSegment.open_flushed`), never a reason to cut the log or drop a later segment.
With the marker, each segment is trusted up to its last index entry and the batches past it (the
only ones an open reads anyway) get the same checks; one that fails sends its segment through the
same recovery, since a marker says the log was closed whole, not that nothing touched it since.
A ``leader-epoch-checkpoint`` that does not parse is moved aside (``.corrupt-<ms>``) and the
epoch cache is rebuilt from the leader epochs in the batch headers of the whole log.

The producer state is rebuilt on the way: from the latest snapshot and the trusted segments up to
the first segment recovery walks, then from the batches recovery checks, in the same pass.
A cleaner's swap interrupted by a crash is settled first (see :func:`scan_directory`).
"""

from __future__ import annotations

import logging
import os
from bisect import bisect_right
from pathlib import Path

from coordinator.clock import Clock
from replication.checkpoints import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    clear_clean_shutdown,
    fsync_directory,
    has_clean_shutdown,
    move_aside,
)
from replication.epochs import LeaderEpochCache
from replication.errors import CorruptCheckpointError
from replication.local_log import SWAP_SUFFIX, LocalLog
from replication.producer_state import ProducerStateManager
from replication.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    next_offset_of_file,
)

__all__ = ["initial_log_start", "load_log", "open_epoch_cache", "scan_directory"]

_logger = logging.getLogger(__name__)

_CLEANED_SUFFIX = ".cleaned"
_STRAY_SUFFIXES = (".tmp", ".deleted", _CLEANED_SUFFIX, SWAP_SUFFIX)


def open_epoch_cache(directory: Path, clock: Clock) -> tuple[LeaderEpochCache, bool]:
    """The epoch cache from its checkpoint, and whether it was lost. A corrupt checkpoint is
    moved aside, with one warning, and the cache starts empty, to be rebuilt from the batches
    once the segments are open: one partition's bad file must not keep a broker's other
    partitions down, and the log holds every epoch that wrote a batch in it."""
    path = directory / LEADER_EPOCH_CHECKPOINT_FILE
    try:
        return LeaderEpochCache(path), False
    except CorruptCheckpointError as exc:
        moved = move_aside(path, clock.now_ms())
        _logger.warning(
            "%s is corrupt (%s); moved to %s, rebuilding the leader epoch cache from the "
            "batches of the log", path, exc, moved.name,
        )
        return LeaderEpochCache(path), True


def _rebuild_epoch_cache(local: LocalLog, cache: LeaderEpochCache) -> None:
    """Fill the (empty) epoch cache from the leader epochs stamped in every batch header,
    as recovery does for the batches it checks: an entry where each larger epoch first
    appears."""
    found: list[tuple[int, int]] = []

    def on_epoch(epoch: int, base: int) -> None:
        if not found or epoch > found[-1][0]:
            found.append((epoch, base))

    for segment in local.segments:
        segment.scan_epochs(on_epoch)
    cache.assign_all(found)


def load_log(local: LocalLog, recovery_point: int, *, cache: LeaderEpochCache,
             epochs_lost: bool, producers: ProducerStateManager, now: int,
             tiered: bool) -> None:
    """Open the segments of ``local``'s directory into it (empty before), recovering those
    that need it (see the module's docstring), and bring the epoch ``cache`` and the
    ``producers`` state to the log end. ``tiered``: a log in remote storage keeps the epochs
    below its first local segment."""
    directory = local.directory
    interval = local.config.index_interval_bytes
    clean = has_clean_shutdown(directory)
    bases = scan_directory(local)
    # Segments wholly below the recovery point were fsynced: trusted, never cut (Kafka's
    # rule); from the one holding it on, recovered after a crash, checked after a clean one.
    flushed = max(bisect_right(bases, recovery_point) - 1, 0)
    first_unchecked = len(bases) if clean else flushed
    damage: list[str] = []
    latest = [cache.latest_epoch if cache.latest_epoch is not None else -1]
    rebuilt_epochs: list[tuple[int, int]] = []

    def on_epoch(epoch: int, base: int) -> None:
        if epoch > latest[0]:
            latest[0] = epoch
            rebuilt_epochs.append((epoch, base))

    recovering = False
    for i, base in enumerate(bases):
        if i < flushed:
            seg, found = LogSegment.open_flushed(
                directory, base, index_interval_bytes=interval, now_ms=now,
                next_base=bases[i + 1])
            if found is not None:
                damage.append(found)
            cut = 0
        elif i < first_unchecked:
            seg, cut = LogSegment.open_existing(
                directory, base, index_interval_bytes=interval, now_ms=now
            )
        else:
            if not recovering:
                # The producer state up to the first segment recovery walks, from the
                # snapshots and the trusted segments below it; recovery feeds it the rest
                # in the same pass.
                local.bases = [s.base_offset for s in local.segments]
                producers.start_load(segment_bases=bases, log_start=bases[0], upto=base,
                                     replay=local.producer_batches)
                recovering = True
            seg, cut = LogSegment.recover_existing(
                directory,
                base,
                index_interval_bytes=interval,
                now_ms=now,
                on_epoch=on_epoch,
                on_producer=producers.replay_batch,
            )
            seg.flush()
        local.segments.append(seg)
        if cut:
            _logger.warning(
                "%s: cut %d bytes that failed validation off the end of segment %d%s",
                directory, cut, base,
                f"; dropped {len(bases) - i - 1} later segments" if i + 1 < len(bases) else "",
            )
            # Whatever follows a corrupt batch cannot be trusted to continue the log.
            for later in bases[i + 1 :]:
                local.delete_files(later)
            break
    if damage:
        _logger.warning(
            "%s: damage below the recovery point %d, in segments that were flushed and are "
            "kept whole, as Kafka keeps them (a fetch of a damaged batch gets its bytes as "
            "they are): %s", directory, recovery_point, "; ".join(damage))
    if not local.segments:
        local.segments.append(local.create_segment(0, now))
    local.bases = [s.base_offset for s in local.segments]
    local.leo = local.segments[-1].next_offset
    if epochs_lost:
        _rebuild_epoch_cache(local, cache)
    elif clean:
        # An epoch may start at the log end (a leader that has not appended yet), not past it.
        cache.truncate_from_end(local.leo + 1)
    else:
        cache.assign_all(rebuilt_epochs)
        cache.truncate_from_end(local.leo)
    if not tiered:
        # A tiered log keeps the epochs of its remote part: the log start cuts them later.
        cache.truncate_from_start(local.first_base)
    local.recovery_point = local.leo
    _load_producer_state(local, producers, recovered=recovering)
    fsync_directory(directory)
    clear_clean_shutdown(directory)


def _load_producer_state(local: LocalLog, producers: ProducerStateManager, *,
                         recovered: bool) -> None:
    """The producer state at the log end: the latest snapshot at or below it, and the batch
    headers after it (``recovered``: the recovery walk has built it already, up to the log
    end it found). When the log had to be replayed past its latest snapshot, the result is
    snapshotted at the log end (as Kafka does), so the next open need not replay it."""
    if recovered:
        producers.finish_load(local.leo)
    else:
        producers.load(segment_bases=local.bases, log_start=local.first_base,
                       log_end=local.leo, replay=local.producer_batches)
    snapshots = producers.snapshot_offsets
    if local.leo > (snapshots[-1] if snapshots else local.first_base):
        producers.take_snapshot(local.leo, sync=True)


def initial_log_start(local: LocalLog, checkpointed: int | None, *, tiered: bool) -> int:
    """The log start of a log just loaded, from ``checkpointed`` (the
    ``log-start-offset-checkpoint`` entry; None: none). Never past the log end."""
    if not tiered:
        start = local.first_base if checkpointed is None else max(checkpointed,
                                                                  local.first_base)
        return min(start, local.leo)
    # Without a checkpointed one (a broker killed before it wrote one), a tiered log starts
    # at 0, as Kafka's does: the remote log manager's first pass moves it up to what remote
    # storage holds; starting at the first local offset would hide the remote part for good,
    # as the log start never moves back.
    start = 0 if checkpointed is None else checkpointed
    return min(max(start, 0), local.leo)


def scan_directory(local: LocalLog) -> list[int]:
    """Base offsets of the segments on disk; clears leftovers of interrupted operations.

    A cleaner's swap interrupted by a crash is settled as Kafka's LogLoader settles it: a
    ``.cleaned`` file was never complete and goes; a ``.log.swap`` file is complete (it is
    fsynced before it gets that name), so it replaces every segment whose base offset lies
    in its range (its own base up to its next offset), which the cleaner had begun to
    delete in offset order, and becomes a segment. Its indexes are rebuilt on open."""
    directory = local.directory
    bases = []
    index_files = []
    swaps = []
    for path in directory.iterdir():
        name = path.name
        if name.endswith(LOG_SUFFIX + SWAP_SUFFIX) and name[:20].isdigit():
            swaps.append(path)
        elif name.endswith(_STRAY_SUFFIXES):
            path.unlink()
        elif name.endswith(LOG_SUFFIX) and len(name) == 24 and name[:20].isdigit():
            bases.append(int(name[:20]))
        elif name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX)):
            index_files.append(path)
    for swap in sorted(swaps):
        base = int(swap.name[:20])
        end = max(next_offset_of_file(swap), base + 1)
        replaced = [b for b in bases if base <= b < end]
        for b in replaced:
            local.delete_files(b)
            bases.remove(b)
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            (directory / f"{base:020d}{suffix}").unlink(missing_ok=True)
        os.replace(swap, directory / f"{base:020d}{LOG_SUFFIX}")
        bases.append(base)
        _logger.warning("%s: finished an interrupted clean: segment %d replaces %s",
                        directory, base, replaced)
    if swaps:
        fsync_directory(directory)
    index_files = [p for p in index_files if p.exists()]
    known = set(bases)
    for path in index_files:
        if not path.name[:20].isdigit() or int(path.name[:20]) not in known:
            path.unlink()  # an index without its log is meaningless
    return sorted(bases)
