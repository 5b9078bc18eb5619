"""The UpdateMetadata of every partition (a failover's, a joining broker's), kept between sends.

At a million partitions building it takes most of a second of the event thread, the entries made
in C (over a second in Python): an entry per partition, in order. The context notes the partitions whose leader or replicas changed since it
was built (``ControllerContext.metadata_changed``), so that the next send patches those entries
into a copy of the last one instead; so too, when brokers died or came back since, the entries of
the partitions they host (their offline replicas changed). A hot standby builds and patches it
while idle (:func:`prepare_full_metadata`), so that its failover sends what it has ready.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from operator import itemgetter

from coordinator.clock import SYSTEM_CLOCK, Clock
from coordinator.codecs import TopicPartition
from elections.leader import LeaderAndIsr
from interbroker.requests import UpdateMetadataPartition
from statemachines.context import ControllerContext, FullMetadata

__all__ = ["FullMetadata", "Preparation", "full_metadata", "prepare_full_metadata"]

_partition_number = itemgetter(1)

PATCH_SHARE = 5
"""Patch the last build when at most one partition in this many changed; rebuild otherwise.
At a million partitions a patch costs about a microsecond per changed partition more than a
build does per partition (its look-ups go in no order), and from a fifth up it costs more
than the build: a quarter took 1.4 s, a build 1.2 s."""


def _dead(ctx: ControllerContext) -> frozenset[int]:
    live = ctx.brokers
    return frozenset(b for b in ctx.hosting_brokers() if b not in live)


def _in_order(ctx: ControllerContext) -> list[TopicPartition]:
    """Every partition of the view's topics, by topic name, then partition number: the order
    ``sorted`` gives, a topic at a time (sorting a million partitions at once took a fifth
    of a cold failover's build)."""
    by_topic = ctx.partitions_by_topic()
    out: list[TopicPartition] = []
    for topic in sorted(by_topic):
        out.extend(sorted(by_topic[topic], key=_partition_number))
    return out


def _entries_python(ctx: ControllerContext, tps: Iterable[TopicPartition],
                    dead: frozenset[int], *, skip_missing: bool
                    ) -> tuple[list[UpdateMetadataPartition], list[TopicPartition]] | None:
    """The entries of ``tps``, naming ``dead``'s replicas offline, and the partitions they
    are for, in the order of ``tps``. A partition with no state or no replicas in the view
    is left out with ``skip_missing``, else makes the answer None. (One loop filling lists:
    a generator's resumption per entry was a fifth of a million-partition build.) The
    reference of ``statemachines._metadata_native.entries``, which does the same in C
    (:data:`NATIVE_ENTRIES`)."""
    # (a named tuple's own constructor is a Python call, a million times here: tuple.__new__
    # is one C call)
    new = tuple.__new__
    entry = UpdateMetadataPartition
    replicas_of = ctx.replicas.get
    leader_of = ctx.leaders.get
    # A partition's offline replicas, per replica list: many partitions share a list, and
    # with brokers dead (a broker loss, a full restart) making each one's was a quarter of
    # the build.
    offline: dict[tuple[int, ...], tuple[int, ...]] = {}
    entries: list[UpdateMetadataPartition] = []
    order: list[TopicPartition] = []
    append, place = entries.append, order.append
    for tp in tps:
        v = leader_of(tp)
        replicas = replicas_of(tp)
        if v is None or replicas is None:
            if skip_missing:
                continue
            return None
        if dead:
            off = offline.get(replicas)
            if off is None:
                off = offline[replicas] = tuple(r for r in replicas if r in dead)
        else:
            off = ()
        append(new(entry, (tp[0], tp[1], v.controller_epoch, v.leader, v.leader_epoch,
                           v.isr, v.partition_epoch, replicas, off)))
        place(tp)
    return entries, order


try:  # the same in C, built by the install where a C compiler is at hand (pyproject.toml)
    from statemachines._metadata_native import entries as _native_entries
except ImportError:
    _native_entries = None
NATIVE_ENTRIES = _native_entries is not None
"""Whether the entries are made by ``statemachines._metadata_native`` (else in Python,
:func:`_entries_python`). A million partitions' entries took 1.2 to 1.6 s in Python and
0.65 to 0.78 s in C, the same runs alternated: what is left is the two look-ups per partition
in dicts of a million, most of it waiting on memory."""


def _entries(ctx: ControllerContext, tps: Iterable[TopicPartition], dead: frozenset[int], *,
             skip_missing: bool) -> tuple[list[UpdateMetadataPartition], list[TopicPartition]] | None:
    """:func:`_entries_python`'s answer, from C where it is built."""
    if _native_entries is None:
        return _entries_python(ctx, tps, dead, skip_missing=skip_missing)
    made: tuple[list[UpdateMetadataPartition], list[TopicPartition]] | None = _native_entries(
        tps, ctx.leaders, ctx.replicas, dead, UpdateMetadataPartition, LeaderAndIsr,
        skip_missing)
    return made


def _build(ctx: ControllerContext, dead: frozenset[int], *, placed: bool = False
           ) -> FullMetadata:
    """Every entry made anew, in order (RequestBatch sends them in this order, unsorted),
    the order the last build worked out while no partition was added or removed since
    (``ctx.partition_order``); with ``placed`` each partition's place too (else left to the
    first patch that needs it)."""
    started = time.monotonic()
    every = ctx.partition_order
    if every is None:
        every = ctx.partition_order = _in_order(ctx)
    made = _entries(ctx, every, dead, skip_missing=True)
    assert made is not None  # (skip_missing: never None)
    entries, order = made
    if len(order) == len(every):  # (every partition has its entry: one list for both)
        order = every
    built = FullMetadata(tuple(entries), order, dead, topics=frozenset(ctx.partitions_by_topic()))
    if placed:
        built.index  # noqa: B018 - the property works it out and keeps it
    built.took = time.monotonic() - started
    return built


def _to_patch(ctx: ControllerContext, last: FullMetadata, changed: set[TopicPartition],
              dead: frozenset[int]) -> set[TopicPartition] | None:
    """The partitions whose entries in ``last`` are out of date: the ``changed`` ones, and with
    other brokers dead than at its build, those with a replica on a broker that died or came
    back (their offline replicas differ). None when they are too many for a patch to pay."""
    todo = changed
    moved = dead ^ last.dead
    if moved:
        todo = set(changed)
        for b in moved:
            todo |= ctx.replicas_on(b)
    if len(todo) * PATCH_SHARE > len(last.entries):
        return None
    return todo


def _patched(ctx: ControllerContext, last: FullMetadata, todo: set[TopicPartition],
             dead: frozenset[int]) -> FullMetadata | None:
    """``last`` with the entries of ``todo`` made again, naming ``dead``'s replicas offline;
    None when one of them was added or removed (its place in the order is not known)."""
    started = time.monotonic()
    index = last.index
    made = _entries(ctx, todo, dead, skip_missing=False)
    if made is None:
        return None
    entries = list(last.entries)
    place = index.get  # (one look-up per partition: a patch's cost is its look-ups)
    for entry, tp in zip(*made, strict=True):
        at = place(tp)
        if at is None:
            return None
        entries[at] = entry
    return FullMetadata(tuple(entries), last.order, dead, took=time.monotonic() - started,
                        _index=index, topics=last.topics)


def full_metadata(ctx: ControllerContext) -> tuple[UpdateMetadataPartition, ...]:
    """Every partition's metadata, in order (by topic, then partition): the last build
    patched where little changed since, else built anew; kept for the next call."""
    dead = _dead(ctx)
    last, changed = ctx.full_metadata, ctx.metadata_changed
    current = None
    if last is not None and changed is not None:
        if not changed and last.dead == dead:
            return last.entries
        todo = _to_patch(ctx, last, changed, dead)
        if todo is not None:
            current = _patched(ctx, last, todo, dead)
    if current is None:
        current = _build(ctx, dead)
    ctx.keep_full_metadata(current)
    return current.entries


PREPARE_FEW = 1024
"""A standby patches its build when it prepares once this many entries are out of date; its
failover patches fewer itself. It prepares only once its view has been quiet
(:class:`Preparation`), not after every event, so a patch each time is cheap beside a
failover's: when it patched only past a sixteenth of the entries, a million-partition
standby's failover after a rolling return patched 40,000 of them (0.26 s against 0.03 s)."""


def prepare_full_metadata(ctx: ControllerContext) -> bool:
    """Bring the build up to date now, as the next send would, when what it would have to do
    is big: no build yet, one that cannot be patched (partitions added or removed, too many
    changed), or a patch of :data:`PREPARE_FEW` entries or more. A hot standby's work while
    idle (:class:`Preparation` says when), so that its failover sends what it has ready. True
    if it built or patched."""
    last, changed = ctx.full_metadata, ctx.metadata_changed
    if not ctx.leaders:
        return False
    dead = _dead(ctx)
    current = None
    if last is not None and changed is not None:
        if not changed and last.dead == dead:
            return False
        few = PREPARE_FEW
        # (at most this many are out of date: below it, nothing is worked out at all; with a
        # broker dead the union of its partitions with the changed ones would be made, to be
        # dropped)
        if len(changed) + sum(len(ctx.replicas_on(b)) for b in dead ^ last.dead) < few:
            return False  # the send patches these few
        todo = _to_patch(ctx, last, changed, dead)
        if todo is not None:
            if len(todo) < few:
                return False
            current = _patched(ctx, last, todo, dead)
    # (each partition's place worked out now, while idle: the failover's patch needs it)
    ctx.keep_full_metadata(current if current is not None else _build(ctx, dead, placed=True))
    return True


QUIET = 0.5
"""Seconds without a change applied to its view after which a standby prepares, at least;
twice the last build's time after a long build (the active controller's own pauses between
the writes of one mass change, such as the replicas it moves Online before it elects, last
about as long)."""
MAX_DEFER = 10.0
"""The longest a standby defers while changes keep coming, at least; twenty builds' time after
a long build. Changes that never stop for :data:`QUIET` seconds but come few at a time leave
it little to do anyway: it patches once :data:`PREPARE_FEW` entries are out of date."""


class Preparation:
    """When a hot standby brings its build up to date: once its view has gone :data:`QUIET`
    seconds (or two builds' time) without a change, not while it follows a burst. A whole
    cluster coming back changes every partition over most of a minute at a million
    partitions; building after each batch it applied, as the standby did, took a fifth of
    its interpreter's time, on the cores the active controller needed for the elections.
    Under changes that never stop, it prepares anyway once it has deferred :data:`MAX_DEFER`
    seconds or twenty builds' time.

    Called on the event thread; ``wake`` queues an event after a delay, from a timer, whose
    handling ends with :meth:`idle` again. :meth:`wait_ready` (any thread) waits until
    nothing is deferred."""

    def __init__(self, wake: Callable[[float], Callable[[], None]],
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self._wake = wake
        self._clock = clock
        self._changed_at = -QUIET
        self._deferred_since: float | None = None
        self._cancel: Callable[[], None] | None = None
        self._ready = threading.Event()
        self._ready.set()

    def changed(self) -> None:
        """The view applied a change (a standby's tree watch)."""
        self._changed_at = self._clock.monotonic()
        self._ready.clear()

    def idle(self, ctx: ControllerContext) -> bool:
        """Nothing is queued: prepare now if the view has been quiet long enough (or has
        deferred too long), else ask to be woken when it would be. True if it prepared."""
        now = self._clock.monotonic()
        last = ctx.full_metadata
        took = last.took if last is not None else 0.0
        quiet_at = self._changed_at + max(QUIET, 2 * took)
        if now < quiet_at:
            if self._deferred_since is None:
                self._deferred_since = now
            longest = max(MAX_DEFER, 20 * took)
            if now - self._deferred_since < longest:
                if self._cancel is None:
                    self._cancel = self._wake(quiet_at - now)
                return False
        self._deferred_since = None
        ctx.replicas_on_all()  # built now if a load left it (a failover's handlers need it)
        prepared = prepare_full_metadata(ctx)
        if self._cancel is None:
            self._ready.set()
        return prepared

    def woken(self) -> None:
        """The wake asked for has come (its event is being handled)."""
        self._cancel = None

    def stop(self) -> None:
        """No more preparing (the standby became active, or closes)."""
        if self._cancel is not None:
            self._cancel()
            self._cancel = None
        self._deferred_since = None
        self._ready.set()

    def wait_ready(self, timeout: float) -> bool:
        """Wait until no preparation is deferred (any thread)."""
        return self._ready.wait(timeout)
