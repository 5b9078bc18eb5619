"""The full UpdateMetadata a failover or a joining broker gets, kept between sends: a patched
build equals one made anew, whatever changed in between."""

from __future__ import annotations

from coordinator.codecs import BrokerInfo, TopicAssignment, TopicPartition
from coordinator.metadata_base import RegisteredBroker
from elections.leader import LeaderAndIsr
from statemachines.context import ControllerContext
from statemachines.full_metadata import _build, _dead, full_metadata, prepare_full_metadata


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
    return _build(ctx, _dead(ctx)).entries


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
