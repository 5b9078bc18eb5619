"""The full UpdateMetadata a failover or a joining broker gets, kept between sends: a patched
build equals one made anew, whatever changed in between."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from coordinator.clock import ManualClock
from coordinator.codecs import BrokerInfo, TopicAssignment, TopicPartition
from coordinator.metadata_base import RegisteredBroker
from elections.leader import LeaderAndIsr
from statemachines.context import ControllerContext
from statemachines.full_metadata import (
    MAX_DEFER,
    PREPARE_FEW,
    QUIET,
    Preparation,
    _dead,
    _entries_python,
    _in_order,
    full_metadata,
    prepare_full_metadata,
)


def _context(partitions: int = 8) -> ControllerContext:
    ctx = ControllerContext()
    for b in (1, 2, 3):
        ctx.add_broker(RegisteredBroker(info=BrokerInfo(id=b, host="h", port=9092), epoch=b))
    for name in ("b", "a"):
        ctx.set_topic(TopicAssignment(topic=name, partitions={
            p: (1 + p % 3, 1 + (p + 1) % 3, 4) for p in range(partitions)}), 0)
        for p in range(partitions):
            r = (1 + p % 3, 1 + (p + 1) % 3)
            ctx.set_leader(TopicPartition(name, p), LeaderAndIsr(r[0], 0, r, 1, 0))
    return ctx


def _fresh(ctx: ControllerContext) -> tuple:
    """The entries worked out from scratch, in Python: the order sorted anew, every entry
    made by the reference function."""
    made = _entries_python(ctx, _in_order(ctx), _dead(ctx), skip_missing=True)
    assert made is not None
    return tuple(made[0])


def test_the_entries_are_in_order_and_name_dead_replicas_offline() -> None:
    ctx = _context()
    entries = full_metadata(ctx)
    assert [(e.topic, e.partition) for e in entries] == sorted(ctx.leaders)
    assert all(e.offline_replicas == (4,) for e in entries)  # broker 4 never registered


def test_a_patched_build_equals_a_fresh_one() -> None:
    ctx = _context()
    first = full_metadata(ctx)
    assert full_metadata(ctx) is first  # nothing changed: the same entries
    ctx.set_leader(TopicPartition("a", 3), LeaderAndIsr(2, 5, (2,), 1, 7))
    ctx.set_replicas(TopicPartition("b", 0), (3, 1, 2))
    patched = full_metadata(ctx)
    assert patched is not first and patched == _fresh(ctx)
    assert patched[3].leader == 2 and patched[3].leader_epoch == 5


def test_added_partitions_removed_topics_and_dead_brokers_build_anew() -> None:
    ctx = _context()
    full_metadata(ctx)
    ctx.set_topic(TopicAssignment(topic="a", partitions={
        **{p: (1 + p % 3, 1 + (p + 1) % 3, 4) for p in range(8)}, 8: (1, 2)}), 1)
    ctx.set_leader(TopicPartition("a", 8), LeaderAndIsr(1, 0, (1, 2), 1, 0))
    assert full_metadata(ctx) == _fresh(ctx)
    ctx.remove_topic("b")
    assert full_metadata(ctx) == _fresh(ctx)
    ctx.remove_broker(3)
    after = full_metadata(ctx)
    assert after == _fresh(ctx) and any(3 in e.offline_replicas for e in after)


def test_a_standby_prepares_it_only_when_a_send_could_not_patch() -> None:
    ctx = _context()
    assert prepare_full_metadata(ctx)
    assert not prepare_full_metadata(ctx)  # nothing changed
    ctx.set_leader(TopicPartition("a", 0), LeaderAndIsr(3, 1, (3,), 1, 1))
    assert not prepare_full_metadata(ctx)  # a patch will do
    assert full_metadata(ctx) == _fresh(ctx)


def _wide(brokers: int = 10, partitions: int = 40) -> ControllerContext:
    """Partitions spread over ``brokers`` brokers, two replicas each: a broker hosts a fifth."""
    ctx = ControllerContext()
    for b in range(1, brokers + 1):
        ctx.add_broker(RegisteredBroker(info=BrokerInfo(id=b, host="h", port=9092), epoch=b))
    assignment = {p: (1 + p % brokers, 1 + (p + 1) % brokers) for p in range(partitions)}
    ctx.set_topic(TopicAssignment(topic="t", partitions=assignment), 0)
    for p, r in assignment.items():
        ctx.set_leader(TopicPartition("t", p), LeaderAndIsr(r[0], 0, r, 1, 0))
    return ctx


def test_a_broker_lost_or_back_patches_only_the_partitions_it_hosts() -> None:
    ctx = _wide()
    first = full_metadata(ctx)
    ctx.remove_broker(3)
    lost = full_metadata(ctx)
    assert lost == _fresh(ctx)
    hosting = {i for i, e in enumerate(lost) if 3 in e.replicas}
    assert all(lost[i].offline_replicas == (3,) for i in hosting)
    # the others are the very entries of the first build: patched, not built anew
    assert all(lost[i] is first[i] for i in range(len(lost)) if i not in hosting)
    ctx.add_broker(RegisteredBroker(info=BrokerInfo(id=3, host="h", port=9092), epoch=11))
    back = full_metadata(ctx)
    assert back == _fresh(ctx) == first
    assert all(back[i] is lost[i] for i in range(len(back)) if i not in hosting)


def test_a_standby_patches_it_once_many_entries_are_out_of_date() -> None:
    ctx = _wide(brokers=20, partitions=6000)  # (a broker hosts a tenth)
    assert prepare_full_metadata(ctx)
    built = ctx.full_metadata
    assert built is not None
    assert built._index is not None  # the places too, while idle: a failover patches at once
    for p in range(600):
        ctx.set_leader(TopicPartition("t", p), LeaderAndIsr(1 + (p + 1) % 20, 1, (1,), 1, 1))
    assert not prepare_full_metadata(ctx)  # fewer than 1,024: the send patches them
    ctx.remove_broker(7)  # and those hosted on broker 7: 1,140 in all, under a fifth
    assert prepare_full_metadata(ctx)
    assert ctx.metadata_changed == set() and ctx.full_metadata is not None
    assert ctx.full_metadata.entries == _fresh(ctx)
    assert ctx.full_metadata.entries[4000] is built.entries[4000]  # patched, not built anew


def test_a_build_knows_its_topics_and_a_patch_keeps_them() -> None:
    ctx = _wide()
    full_metadata(ctx)
    built = ctx.full_metadata
    assert built is not None and built.topics == {"t"}
    ctx.remove_broker(3)
    full_metadata(ctx)
    assert ctx.full_metadata is not built and ctx.full_metadata.topics is built.topics


def test_a_large_standby_patches_once_a_thousand_entries_are_out_of_date() -> None:
    """However large the build: a failover would patch what the standby left (at a million
    partitions, a sixteenth of them took a quarter of a second)."""
    ctx = _wide(partitions=40_000)
    assert prepare_full_metadata(ctx)
    for p in range(PREPARE_FEW + 200):
        ctx.set_leader(TopicPartition("t", p), LeaderAndIsr(1 + (p + 1) % 10, 1, (1,), 1, 1))
    assert prepare_full_metadata(ctx)
    assert ctx.metadata_changed == set() and ctx.full_metadata is not None
    assert ctx.full_metadata.entries == _fresh(ctx)


def test_the_build_is_in_sorted_order_whatever_order_the_view_learnt_it_in() -> None:
    ctx = ControllerContext()
    ctx.add_broker(RegisteredBroker(info=BrokerInfo(id=1, host="h", port=9092), epoch=1))
    for name in ("b", "a-x", "a"):
        ctx.set_topic(TopicAssignment(topic=name, partitions={p: (1,) for p in (10, 2, 1)}), 0)
        for p in (2, 10, 1):
            ctx.set_leader(TopicPartition(name, p), LeaderAndIsr(1, 0, (1,), 1, 0))
    ctx.set_topic(TopicAssignment(topic="c", partitions={0: (1,)}), 0)  # no state yet
    ctx.set_leader(TopicPartition("gone", 0), LeaderAndIsr(1, 0, (1,), 1, 0))  # no topic
    entries = full_metadata(ctx)
    assert [(e.topic, e.partition) for e in entries] == [
        (t, p) for t in ("a", "a-x", "b") for p in (1, 2, 10)]
    assert ctx.full_metadata is not None
    assert ctx.full_metadata.index[TopicPartition("b", 10)] == 8


class _Wakes:
    """The wakes a :class:`Preparation` asks for: their delays, and whether cancelled."""

    def __init__(self) -> None:
        self.delays: list[float] = []
        self.cancelled = 0

    def __call__(self, delay: float) -> Callable[[], None]:
        self.delays.append(delay)
        return self._cancel

    def _cancel(self) -> None:
        self.cancelled += 1


def test_a_standby_prepares_once_its_view_is_quiet_not_while_changes_come() -> None:
    ctx = _wide(partitions=5000)
    clock = ManualClock()
    wakes = _Wakes()
    prep = Preparation(wakes, clock=clock)
    assert prep.wait_ready(0)
    prep.changed()
    assert not prep.idle(ctx)  # a change just came: deferred, a wake asked for
    assert ctx.full_metadata is None and wakes.delays == [QUIET]
    assert not prep.wait_ready(0)
    clock.sleep(0.3)
    prep.changed()  # the burst goes on
    assert not prep.idle(ctx) and len(wakes.delays) == 1  # the wake asked for still stands
    clock.sleep(0.2)
    prep.woken()
    assert not prep.idle(ctx)  # quiet for 0.2 s only: woken again when it will be 0.5 s
    assert wakes.delays == [QUIET, pytest.approx(0.3)] and ctx.full_metadata is None
    clock.sleep(0.3)
    prep.woken()
    assert ctx._replicas_on is None  # noqa: SLF001 (a cold load's: built when asked for)
    assert prep.idle(ctx)  # quiet long enough: built
    assert ctx.full_metadata is not None and ctx.full_metadata.entries == _fresh(ctx)
    # so is the hosted index, which a failover's handlers would otherwise build
    assert ctx._replicas_on is not None  # noqa: SLF001
    assert prep.wait_ready(0)


def test_a_standby_waits_two_builds_time_after_a_long_build() -> None:
    ctx = _wide(partitions=5000)
    full_metadata(ctx)
    built = ctx.full_metadata
    assert built is not None
    ctx.keep_full_metadata(replace(built, took=2.0))
    for p in range(2000):  # out of date enough to patch
        ctx.set_leader(TopicPartition("t", p), LeaderAndIsr(1 + (p + 1) % 10, 1, (1,), 1, 1))
    clock = ManualClock()
    wakes = _Wakes()
    prep = Preparation(wakes, clock=clock)
    prep.changed()
    clock.sleep(1.0)
    assert not prep.idle(ctx) and wakes.delays == [pytest.approx(3.0)]
    clock.sleep(3.0)
    prep.woken()
    assert prep.idle(ctx) and ctx.metadata_changed == set()


def test_changes_that_never_stop_defer_it_no_longer_than_the_cap() -> None:
    ctx = _wide(partitions=5000)
    clock = ManualClock()
    wakes = _Wakes()
    prep = Preparation(wakes, clock=clock)
    prepared_at = None
    for step in range(int(MAX_DEFER / 0.1) + 5):
        prep.changed()
        if prep.idle(ctx):
            prepared_at = step * 0.1
            break
        clock.sleep(0.1)
    assert prepared_at == pytest.approx(MAX_DEFER)
    assert ctx.full_metadata is not None


def test_stopping_cancels_the_wake_and_leaves_nothing_deferred() -> None:
    ctx = _wide()
    wakes = _Wakes()
    prep = Preparation(wakes)
    prep.changed()
    assert not prep.idle(ctx) and not prep.wait_ready(0)
    prep.stop()
    assert wakes.cancelled == 1 and prep.wait_ready(0)


def test_a_fifth_changed_or_more_is_built_anew() -> None:
    """A patch's look-ups go in no order: past a fifth of a million partitions it cost more
    than a build (a quarter: 1.4 s against 1.2 s), so from there the send builds anew."""
    ctx = _wide(partitions=1000)
    first = full_metadata(ctx)
    for p in range(199):
        ctx.set_leader(TopicPartition("t", p), LeaderAndIsr(1 + (p + 1) % 10, 1, (1,), 1, 1))
    patched = full_metadata(ctx)
    assert patched == _fresh(ctx) and patched[500] is first[500]
    for p in range(199, 400):  # 201 more: over a fifth since the last build
        ctx.set_leader(TopicPartition("t", p), LeaderAndIsr(1 + (p + 1) % 10, 1, (1,), 1, 1))
    built = full_metadata(ctx)
    assert built == _fresh(ctx) and built[500] is not patched[500]


def test_the_order_is_kept_until_a_partition_is_added_or_removed() -> None:
    """A build anew reuses the order the last one worked out while no partition came or
    went, also once the build itself was dropped for too many changes (a failover in the
    middle of a whole cluster's return)."""
    ctx = _wide(partitions=100)
    full_metadata(ctx)
    order = ctx.partition_order
    assert order is not None and order == sorted(ctx.replicas)
    for p in range(60):  # over half: the build is dropped, its order kept
        ctx.set_leader(TopicPartition("t", p), LeaderAndIsr(1 + (p + 1) % 10, 1, (1,), 1, 1))
    assert ctx.full_metadata is None and ctx.partition_order is order
    assert full_metadata(ctx) == _fresh(ctx) and ctx.partition_order is order
    ctx.set_replicas(TopicPartition("t", 100), (1, 2))  # a partition added
    ctx.set_leader(TopicPartition("t", 100), LeaderAndIsr(1, 0, (1, 2), 1, 0))
    assert ctx.partition_order is None
    assert full_metadata(ctx) == _fresh(ctx) and len(full_metadata(ctx)) == 101
    ctx.set_topic(TopicAssignment(topic="s", partitions={0: (1,)}), 0)  # a topic added
    ctx.set_leader(TopicPartition("s", 0), LeaderAndIsr(1, 0, (1,), 1, 0))
    assert ctx.partition_order is None
    assert full_metadata(ctx) == _fresh(ctx) and full_metadata(ctx)[0].topic == "s"
    ctx.remove_topic("s")
    assert ctx.partition_order is None
    assert full_metadata(ctx) == _fresh(ctx) and len(full_metadata(ctx)) == 101


def test_a_new_topic_of_a_cold_load_drops_the_order() -> None:
    """A cold load's topics take their own path into the context (no metadata noted yet);
    it too drops a kept order."""
    ctx = _wide(partitions=10)
    full_metadata(ctx)
    ctx.full_metadata = ctx.metadata_changed = None  # as a load leaves it
    assert ctx.partition_order is not None
    ctx.set_topic(TopicAssignment(topic="a", partitions={0: (1,), 1: (2,)}), 0)
    for p in (0, 1):
        ctx.set_leader(TopicPartition("a", p), LeaderAndIsr(p + 1, 0, (p + 1,), 1, 0))
    assert ctx.partition_order is None
    assert full_metadata(ctx) == _fresh(ctx) and full_metadata(ctx)[1].partition == 1
