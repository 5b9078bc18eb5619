"""The UpdateMetadata of every partition (a failover's, a joining broker's), kept between sends.

At a million partitions building it takes a second or more of the event thread: an entry per
partition, in order. The context notes the partitions whose leader or replicas changed since it
was built (``ControllerContext.metadata_changed``), so that the next send patches those entries
into a copy of the last one instead. A hot standby builds it while idle
(:func:`prepare_full_metadata`), so that its failover sends what it has ready.
"""

from __future__ import annotations

import time

from coordinator.codecs import TopicPartition
from interbroker.requests import UpdateMetadataPartition
from statemachines.context import ControllerContext, FullMetadata

__all__ = ["FullMetadata", "full_metadata", "prepare_full_metadata"]

PATCH_SHARE = 4
"""Patch the last build when at most one partition in this many changed; rebuild otherwise."""


def _dead(ctx: ControllerContext) -> frozenset[int]:
    live = ctx.brokers
    return frozenset(b for b in ctx.replicas_on_all() if b not in live)


def _build(ctx: ControllerContext, dead: frozenset[int]) -> FullMetadata:
    # (a named tuple's own constructor is a Python call, a million times here: tuple.__new__
    # is one C call; the entries go out in build's order, so RequestBatch does not sort them)
    new = tuple.__new__
    entry = UpdateMetadataPartition
    get = ctx.replicas.get
    leaders = ctx.leaders
    started = time.monotonic()
    entries: list[UpdateMetadataPartition] = []
    order: list[TopicPartition] = []
    append, place = entries.append, order.append
    # A partition's offline replicas, per replica list: many partitions share a list, and
    # with brokers dead (a broker loss, a full restart) making each one's was a quarter of
    # the build.
    offline: dict[tuple[int, ...], tuple[int, ...]] = {}
    for tp in sorted(leaders):
        replicas = get(tp)
        if replicas is None:
            continue
        v = leaders[tp]
        if dead:
            off = offline.get(replicas)
            if off is None:
                off = offline[replicas] = tuple(r for r in replicas if r in dead)
        else:
            off = ()
        append(new(entry, (tp[0], tp[1], v.controller_epoch, v.leader, v.leader_epoch, v.isr,
                           v.partition_epoch, replicas, off)))
        place(tp)
    return FullMetadata(tuple(entries), dict(zip(order, range(len(order)), strict=True)),
                        dead,
                        took=time.monotonic() - started)


def _patched(ctx: ControllerContext, last: FullMetadata,
             changed: set[TopicPartition]) -> FullMetadata | None:
    """``last`` with the entries of ``changed`` made again; None when one of them was added or
    removed (its place in the order is not known)."""
    entries = list(last.entries)
    dead = last.dead
    for tp in changed:
        i = last.index.get(tp)
        replicas = ctx.replicas.get(tp)
        v = ctx.leaders.get(tp)
        if i is None or replicas is None or v is None:
            return None
        entries[i] = UpdateMetadataPartition(
            tp[0], tp[1], v.controller_epoch, v.leader, v.leader_epoch, v.isr,
            v.partition_epoch, replicas,
            tuple(r for r in replicas if r in dead) if dead else ())
    return FullMetadata(tuple(entries), last.index, dead, took=last.took, done=last.done)


def full_metadata(ctx: ControllerContext) -> tuple[UpdateMetadataPartition, ...]:
    """Every partition's metadata, in order (by topic, then partition): the last build
    patched where little changed since, else built anew; kept for the next call."""
    dead = _dead(ctx)
    last, changed = ctx.full_metadata, ctx.metadata_changed
    current = None
    if last is not None and changed is not None and last.dead == dead:
        if not changed:
            return last.entries
        if len(changed) * PATCH_SHARE <= len(last.entries):
            current = _patched(ctx, last, changed)
    if current is None:
        current = _build(ctx, dead)
    ctx.keep_full_metadata(current)
    return current.entries


def prepare_full_metadata(ctx: ControllerContext) -> bool:
    """Build it now if the next send could not patch the last build (none yet, partitions
    added or removed, too many changed, other brokers dead): a hot standby's work while idle.
    Not again within twice the last build's time of it (a standby loading its view is idle
    often), so it takes at most a third of an idle standby's thread. True if it built."""
    last, changed = ctx.full_metadata, ctx.metadata_changed
    if not ctx.leaders:
        return False
    if last is not None and changed is not None and last.dead == _dead(ctx):
        if len(changed) * PATCH_SHARE <= len(last.entries) and all(
                tp in last.index for tp in changed):
            return False
        if time.monotonic() - last.done < 2 * last.took:
            return False
    ctx.keep_full_metadata(_build(ctx, _dead(ctx)))
    return True
