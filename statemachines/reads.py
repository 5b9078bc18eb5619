"""Reading the store into the controller's context: the decoders of the nodes the view holds,
and the bulk read of partition states.

Below the controller, the view, the state machines and the handlers, which all read through
here: the partition machine re-reads the states whose epoch moved, the view follows and loads
them and applies topic nodes, the view and the broker handler apply registrations. The node
formats themselves are the metadata codecs' (:mod:`coordinator.codecs`); this only turns them
into the context's values.
"""

from __future__ import annotations

from coordinator import layout
from coordinator.codecs import (
    BrokerInfo,
    CorruptMetadata,
    TopicAssignment,
    TopicPartition,
    decode_partition_state,
)
from coordinator.metadata import MetadataClient, RegisteredBroker
from coordinator.model import Stat
from coordinator.skipped import SkippedTopics
from elections.leader import LeaderAndIsr
from statemachines import events as ev
from statemachines.context import ControllerContext

__all__ = [
    "apply_broker_node",
    "decode_assignment",
    "read_partition_states",
    "registered_broker",
    "shared_state",
]


SHARED_STATES = 1 << 16
"""At most this many distinct states are kept for sharing during one bulk read (its memory
stays a few MB whatever the cluster; beyond it, each further state is built on its own)."""


def read_partition_states(
    metadata: MetadataClient, ctx: ControllerContext, tps: list[TopicPartition],
    skipped: SkippedTopics | None = None, *, drop: bool = False,
) -> None:
    """Read the leader and ISR of ``tps`` in one bulk read into the view (what
    ``MetadataClient.partition_states`` does, with its read retry, decoding straight into the
    view's values). A malformed state node (another tool's) leaves the view's value as it was
    (with ``drop``, removes it), and is reported to ``skipped`` (without, CorruptMetadata)."""
    items = metadata.retry(metadata.coordinator.get_many, layout.partition_states(tps))
    set_leader, remove_leader = ctx.set_leader, ctx.remove_leader
    # Equal nodes (the same bytes at the same version: most partitions of a cluster whose
    # brokers each lead alike) give one shared value, immutable, decoded and built once: a
    # cold load's million partitions hold a few thousand distinct states. A value already
    # made is looked up here, in the loop, not through shared_state's call.
    made: dict[tuple[bytes, int], LeaderAndIsr] = {}
    known = made.get
    for tp, item in zip(tps, items, strict=True):
        if item is None:
            remove_leader(tp)
            continue
        data, version = item[0], item[1].version
        value = known((data, version))
        if value is None:
            try:
                value = shared_state(made, tp, data, version)
            except CorruptMetadata as exc:
                if skipped is None:
                    raise
                skipped.corrupt_state(tp, exc)
                if drop:
                    remove_leader(tp)
                continue
        set_leader(tp, value)


def shared_state(made: dict[tuple[bytes, int], LeaderAndIsr], tp: TopicPartition, data: bytes,
                 version: int) -> LeaderAndIsr:
    """The state node ``data`` at ``version`` decoded, or the value ``made`` already holds for
    an equal node (kept there while it holds fewer than :data:`SHARED_STATES`); raises
    CorruptMetadata for a malformed node."""
    key = (data, version)
    value = made.get(key)
    if value is None:
        value = decode_partition_state(tp, data, version, LeaderAndIsr)
        if len(made) < SHARED_STATES:
            made[key] = value
    return value


def registered_broker(broker_id: int, data: bytes, stat: Stat) -> RegisteredBroker:
    """A broker's registration node, with its broker epoch (the node's creation id)."""
    info = BrokerInfo.decode(layout.broker(broker_id), data, broker_id)
    return RegisteredBroker(info=info, epoch=stat.create_id)


def decode_assignment(topic: str, data: bytes) -> TopicAssignment:
    """A topic node's replica assignment."""
    return TopicAssignment.decode(layout.topic(topic), data, topic)


def apply_broker_node(ctx: ControllerContext, event: ev.BrokerNodeChanged) -> str | None:
    """Apply a registration change to the view; what it was: joined, left, bounced, updated."""
    known = ctx.brokers.get(event.broker_id)
    if event.stat is None or event.data is None:
        if known is None:
            return None
        ctx.remove_broker(event.broker_id)
        return "left"
    new = registered_broker(event.broker_id, event.data, event.stat)
    ctx.add_broker(new)
    if known is None:
        return "joined"
    if known.epoch != new.epoch:
        return "bounced"
    return "updated" if known.info != new.info else None
