"""The full UpdateMetadata's entries made in C (statemachines._metadata_native) against their
Python reference (statemachines.full_metadata._entries_python): the extension is built here
and used; both make equal entries of the same type, in the same order, skip or refuse the same
partitions, for random views with brokers dead; a value of the wrong type is refused with
TypeError, and no call leaks a reference."""

from __future__ import annotations

import random
import sys

import pytest

from coordinator.codecs import BrokerInfo, TopicAssignment, TopicPartition
from coordinator.metadata_base import RegisteredBroker
from elections.leader import LeaderAndIsr
from interbroker.requests import UpdateMetadataPartition
from statemachines import full_metadata
from statemachines.context import ControllerContext

try:
    from statemachines import _metadata_native
except ImportError:  # reported by test_the_native_entries_are_built_and_used
    _metadata_native = None

needs_native = pytest.mark.skipif(_metadata_native is None, reason="not built")


@pytest.mark.processes
def test_the_native_entries_are_built_and_used() -> None:
    assert _metadata_native is not None, (
        "statemachines._metadata_native was not built: the editable install compiles it "
        "(pyproject.toml's ext-modules) and needs a C compiler and Python's headers")
    assert full_metadata.NATIVE_ENTRIES
    assert full_metadata._native_entries is _metadata_native.entries


def _random_view(rng: random.Random) -> ControllerContext:
    """Topics of random sizes on up to eight brokers (some never registered), replica lists
    of one to four (many shared), some partitions with no state yet, some states with no
    partition."""
    ctx = ControllerContext()
    for b in range(1, 7):
        ctx.add_broker(RegisteredBroker(info=BrokerInfo(id=b, host="h", port=9092), epoch=b))
    for t in range(rng.randint(1, 6)):
        name = f"topic-{rng.randint(0, 50)}"
        parts = {p: tuple(rng.sample(range(1, 9), rng.randint(1, 4)))
                 for p in rng.sample(range(40), rng.randint(1, 30))}
        ctx.set_topic(TopicAssignment(topic=name, partitions=parts), t)
        for p, replicas in parts.items():
            if rng.random() < 0.9:
                isr = replicas[:rng.randint(1, len(replicas))]
                ctx.set_leader(TopicPartition(name, p), LeaderAndIsr(
                    replicas[0], rng.randint(0, 9), isr, rng.randint(1, 3), rng.randint(0, 9)))
    for p in range(rng.randint(0, 3)):
        ctx.set_leader(TopicPartition("no-such-topic", p), LeaderAndIsr(1, 0, (1,), 1, 0))
    return ctx


def _native(ctx: ControllerContext, tps: object, dead: frozenset[int], skip_missing: bool
            ) -> object:
    assert _metadata_native is not None
    return _metadata_native.entries(tps, ctx.leaders, ctx.replicas, dead,
                                    UpdateMetadataPartition, LeaderAndIsr, skip_missing)


@needs_native
@pytest.mark.parametrize("seed", range(12))
def test_native_and_python_make_the_same_entries(seed: int) -> None:
    rng = random.Random(seed)
    ctx = _random_view(rng)
    every = full_metadata._in_order(ctx)
    for dead in (frozenset(), frozenset({4}), frozenset(rng.sample(range(1, 9), 3)),
                 frozenset(range(1, 9))):
        for tps in (every, set(rng.sample(every, len(every) // 2)),
                    every + [TopicPartition("no-such-topic", 0)]):
            for skip in (True, False):
                expected = full_metadata._entries_python(ctx, tps, dead, skip_missing=skip)
                got = _native(ctx, tps, dead, skip)
                assert got == expected, (dead, skip)
                if expected is not None:
                    assert isinstance(got, tuple)
                    assert all(type(e) is UpdateMetadataPartition for e in got[0])
                    assert [e.offline_replicas for e in got[0]] == [
                        tuple(r for r in ctx.replicas[tp] if r in dead) for tp in got[1]]
    # a partition with no state: skipped, or the answer is None (a patch cannot place it)
    unstated = [tp for tp in every if tp not in ctx.leaders]
    if unstated:
        assert _native(ctx, unstated, frozenset(), False) is None
        assert _native(ctx, unstated, frozenset(), True) == ([], [])


@needs_native
@pytest.mark.parametrize("bad, says", [
    ("leader", "leader is not a LeaderAndIsr"),
    ("replicas", "replicas are not a tuple"),
    ("partition", "not a (topic, partition) tuple"),
])
def test_a_value_of_another_type_is_refused_and_nothing_changes(bad: str, says: str) -> None:
    ctx = _random_view(random.Random(7))
    every = full_metadata._in_order(ctx)
    tp = next(tp for tp in every if tp in ctx.leaders)
    if bad == "leader":
        ctx.leaders[tp] = tuple(ctx.leaders[tp])  # type: ignore[assignment]
    elif bad == "replicas":
        ctx.replicas[tp] = list(ctx.replicas[tp])  # type: ignore[assignment]
    else:
        every = [*every, ("t", 0, 1)]  # type: ignore[list-item]
    leaders, replicas = dict(ctx.leaders), dict(ctx.replicas)
    with pytest.raises(TypeError, match=says.replace("(", r"\(").replace(")", r"\)")):
        _native(ctx, every, frozenset({2}), True)
    assert ctx.leaders == leaders and ctx.replicas == replicas


@needs_native
def test_its_arguments_are_checked() -> None:
    ctx = _random_view(random.Random(3))
    assert _metadata_native is not None
    with pytest.raises(TypeError, match="dead must be a set"):
        _metadata_native.entries([], ctx.leaders, ctx.replicas, [2],
                                 UpdateMetadataPartition, LeaderAndIsr, True)
    with pytest.raises(TypeError, match="must be tuple types"):
        _metadata_native.entries([], ctx.leaders, ctx.replicas, frozenset(), dict,
                                 LeaderAndIsr, True)
    with pytest.raises(TypeError):
        _metadata_native.entries([], list(ctx.leaders), ctx.replicas, frozenset(),
                                 UpdateMetadataPartition, LeaderAndIsr, True)


@needs_native
def test_no_call_leaks_a_reference() -> None:
    """The values every entry shares (a replica list, an ISR, a topic's name) are held once
    per entry while the entries live, and no more once they are gone, on every path: made,
    skipped, refused."""
    ctx = ControllerContext()
    replicas, isr = (1, 2, 3), (1, 2)
    ctx.set_topic(TopicAssignment(topic="t", partitions=dict.fromkeys(range(50), replicas)), 0)
    for p in range(40):
        ctx.set_leader(TopicPartition("t", p), LeaderAndIsr(1, 0, isr, 1, 0))
    every = full_metadata._in_order(ctx)
    topic = every[0].topic

    def counts() -> tuple[int, int, int]:
        return sys.getrefcount(replicas), sys.getrefcount(isr), sys.getrefcount(topic)

    before = counts()
    for _ in range(3):
        for dead in (frozenset(), frozenset({2})):
            for skip in (True, False):
                made = _native(ctx, every, dead, skip)
                if made is not None:
                    assert sys.getrefcount(isr) == before[1] + 40
                del made
    bad = dict(ctx.leaders)
    bad[every[20]] = (1, 0, isr, 1)  # type: ignore[assignment]
    with pytest.raises(TypeError):
        _metadata_native.entries(every, bad, ctx.replicas, frozenset({2}),  # type: ignore
                                 UpdateMetadataPartition, LeaderAndIsr, True)
    del bad
    assert counts() == before
