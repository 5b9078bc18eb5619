"""broker.garbage on this process's own collector: what a full pass leaves is frozen, cycles
made since are still collected, a cycle among frozen objects waits for the next thaw, and
every pass is timed by generation. Automatic collections are off in each test (the explicit
``gc.collect`` calls are the passes), and the collector's state is put back after it."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from broker import garbage as garbage_module
from broker.config import ConfigError, parse_config
from broker.garbage import PAUSE_BUCKETS, THAW_LIMIT, GarbageCollection
from coordinator.clock import ManualClock


class Node:
    """A tracked object that can be weakly referenced and put in a cycle."""

    def __init__(self) -> None:
        self.other: Node | None = None


def cycle() -> tuple[Node, weakref.ref[Node]]:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return a, weakref.ref(a)


@pytest.fixture(autouse=True)
def quiet_collector() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.unfreeze()
        if enabled:
            gc.enable()


def _walked(objects: list[Node]) -> int:
    """How many of ``objects`` a collection still walks (any generation; not frozen)."""
    ids = {id(o) for o in objects}
    return sum(1 for o in gc.get_objects() if id(o) in ids)


def test_install_freezes_what_lives_and_a_full_pass_freezes_what_survived_it() -> None:
    """Told by where the objects are, not by the freeze count alone: a frozen object that
    dies leaves the count (the test run's own temporaries, frozen at install, do)."""
    clock = ManualClock()
    garbage = GarbageCollection(thaw_interval=600.0, clock=clock)
    garbage.install()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 1000  # the modules, the test run's objects
        kept = [Node() for _ in range(500)]
        gc.collect(0)  # a young pass freezes nothing
        assert gc.get_freeze_count() <= frozen and _walked(kept) == len(kept)
        gc.collect()
        assert _walked(kept) == 0  # frozen: out of the walks
        assert all(gc.is_tracked(node) for node in kept)
    finally:
        garbage.remove()
    assert garbage.snapshot().freezes == 2  # at install, after the full pass
    assert _walked(kept) == 0  # removing thaws nothing
    gc.collect()
    assert garbage.snapshot().freezes == 2  # removed: no more freezing


def test_a_cycle_made_after_a_full_pass_is_collected_by_the_next() -> None:
    garbage = GarbageCollection(thaw_interval=600.0, clock=ManualClock())
    garbage.install()
    try:
        gc.collect()
        a, alive = cycle()
        del a
        assert alive() is not None  # a cycle: reference counts alone do not free it
        gc.collect()
        assert alive() is None
    finally:
        garbage.remove()


def test_a_cycle_among_frozen_objects_is_freed_by_the_first_full_pass_after_the_thaw() -> None:
    clock = ManualClock()
    garbage = GarbageCollection(thaw_interval=600.0, clock=clock)
    garbage.install()
    try:
        a, alive = cycle()
        gc.collect()  # a and b survive it: frozen
        del a
        gc.collect()
        assert alive() is not None  # frozen: not walked
        assert garbage.thaws == 0
        clock.advance(599_000)
        gc.collect(1)  # no thaw before a young pass, nor before the interval
        gc.collect()
        assert alive() is not None
        clock.advance(1_000)
        gc.collect(1)
        assert alive() is not None and garbage.thaws == 0
        gc.collect()
        assert alive() is None
        assert garbage.thaws == 1
        assert gc.get_freeze_count() > 0  # what survived the thawing pass, frozen again
        clock.advance(599_000)
        gc.collect()
        assert garbage.thaws == 1  # the next thaw is due 600 s after this one
    finally:
        garbage.remove()


def test_without_a_thaw_interval_nothing_is_frozen_and_passes_are_timed() -> None:
    ticks = iter(range(10_000))
    garbage = GarbageCollection(thaw_interval=None, timer=lambda: next(ticks) * 0.03)
    garbage.install()
    try:
        assert gc.get_freeze_count() == 0
        a, alive = cycle()
        gc.collect()
        gc.collect(0)
        gc.collect(0)
        gc.collect(1)
        assert gc.get_freeze_count() == 0
        del a
        gc.collect()
        assert alive() is None
        seen = garbage.snapshot()
    finally:
        garbage.remove()
    at = PAUSE_BUCKETS.index(0.05)  # each pass took 0.03 s by this timer
    assert seen.buckets[0][at] == 2 and sum(seen.buckets[0]) == 2
    assert seen.buckets[1][at] == 1 and sum(seen.buckets[1]) == 1
    assert seen.buckets[2][at] == 2 and sum(seen.buckets[2]) == 2
    assert seen.seconds == pytest.approx((0.06, 0.03, 0.06))
    assert seen.longest == pytest.approx((0.03, 0.03, 0.03))
    assert seen.freezes == 0 and seen.thaws == 0 and seen.thaws_skipped == 0


def test_a_pass_longer_than_the_last_bound_is_counted_beyond_it() -> None:
    ticks = iter(range(10_000))
    garbage = GarbageCollection(thaw_interval=600.0, clock=ManualClock(),
                                timer=lambda: next(ticks) * 2.0)
    garbage.install()
    try:
        gc.collect()
    finally:
        garbage.remove()
    seen = garbage.snapshot()
    assert seen.buckets[2][-1] == 1 and sum(seen.buckets[2]) == 1
    assert seen.seconds[2] == pytest.approx(2.0)
    assert seen.longest == pytest.approx((0.0, 0.0, 2.0))


def test_a_thaw_is_skipped_while_more_than_the_limit_is_frozen(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A controller's view frozen in the same process: walking it would hold the interpreter
    for seconds, so the thaw waits an interval and looks again."""
    clock = ManualClock()
    garbage = GarbageCollection(thaw_interval=600.0, clock=clock)
    garbage.install()
    try:
        a, alive = cycle()
        gc.collect()
        del a
        monkeypatch.setattr(garbage_module, "THAW_LIMIT", 10)
        clock.advance(600_000)
        gc.collect()
        assert alive() is not None
        assert (garbage.thaws, garbage.thaws_skipped) == (0, 1)
        monkeypatch.setattr(garbage_module, "THAW_LIMIT", THAW_LIMIT)
        gc.collect()
        assert alive() is not None  # skipped: due again an interval later, not at once
        clock.advance(600_000)
        gc.collect()
        assert alive() is None
        assert (garbage.thaws, garbage.thaws_skipped) == (1, 1)
    finally:
        garbage.remove()


def test_install_and_remove_are_idempotent() -> None:
    garbage = GarbageCollection(thaw_interval=600.0, clock=ManualClock())
    garbage.install()
    garbage.install()
    assert gc.callbacks.count(garbage._callback) == 1
    garbage.remove()
    garbage.remove()
    assert garbage._callback not in gc.callbacks
    assert not garbage.installed


@pytest.mark.parametrize(("value", "expected"), [(None, 600_000), ("-1", -1), ("0", 0),
                                                 ("3600000", 3_600_000)])
def test_the_thaw_interval_is_a_broker_key(value: str | None, expected: int) -> None:
    text = "broker.id=1\nzookeeper.connect=127.0.0.1:2181\n"
    if value is not None:
        text += f"partctl.gc.thaw.interval.ms={value}\n"
    loaded = parse_config(text)
    assert loaded.config.gc_thaw_interval_ms == expected
    assert loaded.warnings == ()


def test_a_thaw_interval_below_minus_one_is_one_error_naming_the_key() -> None:
    with pytest.raises(ConfigError) as error:
        parse_config("broker.id=1\nzookeeper.connect=127.0.0.1:2181\n"
                     "partctl.gc.thaw.interval.ms=-2\n")
    assert str(error.value) == ("server.properties line 3: invalid value '-2' for "
                                "partctl.gc.thaw.interval.ms: must be at least -1")
