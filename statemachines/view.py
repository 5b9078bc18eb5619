"""The controller's view of the store, kept by watches: the hot standby.

Every candidate keeps one. While it is not active it follows the whole store (hot standby):
watches on the broker and topic nodes and the admin nodes queue their events, and one tree
watch on the store reports every partition state (the active controller writes them, and hears
of leaders' ISR changes by notification) and every topic node, buffered and coalesced on the
watch's thread and applied on the event thread in one event. A failover then reads nothing:
the new controller makes its view complete up to its own election's write (the tree watch has
shown it, the queued events are applied), re-reads the few brokers, and goes on. Without hot
standby (or with a view it no longer trusts) the failover reads the view whole instead.

The view is the context's first half (brokers, assignments, leaders and ISRs); the controller
owns the second (the state machines'), and handlers see the context through the controller's
services, never this object. Owned by the event thread, but for the tree watch's buffers.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from coordinator import layout
from coordinator.base import Coordinator
from coordinator.codecs import CorruptMetadata, TopicPartition
from coordinator.errors import CoordinatorError
from coordinator.metadata import MetadataClient
from coordinator.model import ChildrenEvent, DataEvent, Stat, TreeEvent, Watch
from coordinator.skipped import SkippedTopics
from elections.leader import LeaderAndIsr
from statemachines import events as ev
from statemachines.config import ControllerConfig
from statemachines.context import ControllerContext
from statemachines.event_manager import EventManager
from statemachines.reads import (
    apply_broker_node,
    decode_assignment,
    read_partition_states,
    shared_state,
)

log = logging.getLogger(__name__)

__all__ = ["View"]


class View:
    """One candidate's view of the store and the watches that keep it.

    ``active`` tells whether this candidate is the controller (its fence open); ``running``
    whether its state machines run (from the end of its failover's view step to its
    resignation): the active controller keeps its view by its own writes and drops the tree
    watch, and a standby follows and applies topic nodes itself.
    """

    def __init__(
        self,
        coordinator: Coordinator,
        metadata: MetadataClient,
        events: EventManager,
        config: ControllerConfig,
        broker_id: int,
        *,
        active: Callable[[], bool],
        running: Callable[[], bool],
    ) -> None:
        self.coordinator = coordinator
        self.metadata = metadata
        self.events = events
        self.config = config
        self.broker_id = broker_id
        self._active = active
        self._running = running
        self.ctx = ControllerContext()
        self.suspect = False
        """Set on resigning over an error: the view this process kept may not match the store,
        and is read whole again should it win (Kafka's controller always reads it whole)."""
        self.topic_revisions: dict[str, int] = {}
        """The store revision of each topic node as last applied to the view: older reports
        (one watch may lag another on etcd) are ignored."""
        self._watches: dict[str, Watch] = {}
        self._states_lock = threading.Lock()
        self._states_pending: dict[TopicPartition, tuple[bytes | None, Stat | None]] = {}
        self._states_resync = False
        self._states_queued = False
        self._tp_of_path: dict[str, TopicPartition | str | None] = {}
        # The standby's tree watch: the topic nodes it reported and the newest store revision
        # it has shown, which the failover waits on.
        self._tree_revision = 0
        self._tree_moved = threading.Condition(self._states_lock)
        self._topics_pending: dict[str, tuple[bytes | None, Stat | None, int]] = {}
        self.skipped = SkippedTopics(log, f"controller {broker_id}")
        """Topic nodes another tool wrote that Kafka's layout forbids (an illegal name, a
        malformed assignment or state): never in the view, each warned of once."""

    # --- watches -------------------------------------------------------------------------

    def _watch(self, key: str, arm: Callable[[], Watch]) -> None:
        if key not in self._watches:
            self._watches[key] = arm()

    def _unwatch(self, key: str) -> None:
        watch = self._watches.pop(key, None)
        if watch is not None:
            watch.cancel()

    def close(self) -> None:
        """Cancel every watch."""
        for watch in list(self._watches.values()):
            watch.cancel()
        self._watches.clear()

    @property
    def following(self) -> bool:
        """Whether the tree watch follows the store (a standby's)."""
        return "states" in self._watches

    def arm_cluster_watches(self) -> None:
        c, put = self.coordinator, self.events.put

        def children(path: str, make: Callable[[ChildrenEvent], ev.ControllerEvent]) -> None:
            self._watch(path, lambda: c.watch_children(path, lambda e: put(make(e))))

        def data(path: str, make: Callable[[DataEvent], ev.ControllerEvent]) -> None:
            self._watch(path, lambda: c.watch_data(path, lambda e: put(make(e))))

        self.metadata.ensure_layout()
        children(layout.BROKER_IDS, lambda e: ev.BrokerIdsChanged(
            ids=tuple(int(i) for i in e.children or () if i.isdigit())))
        children(layout.TOPICS, lambda e: ev.TopicsChanged(topics=tuple(e.children or ())))
        children(layout.ISR_CHANGE_NOTIFICATION, lambda e: ev.IsrChangeNotified())
        children(layout.DELETE_TOPICS, lambda e: ev.DeleteTopicsChanged())
        data(layout.REASSIGN_PARTITIONS, lambda e: ev.ReassignmentChanged())
        data(layout.PREFERRED_REPLICA_ELECTION, lambda e: ev.PreferredElectionChanged())

    def arm_children(self, event: ev.BrokerIdsChanged | ev.TopicsChanged) -> None:
        if isinstance(event, ev.BrokerIdsChanged):
            for b in event.ids:
                self.watch_broker(b)
        else:
            for t in event.topics:
                if self.skipped.legal(t):
                    self.watch_topic(t)

    def watch_broker(self, broker_id: int) -> None:
        c, put = self.coordinator, self.events.put
        self._watch(f"broker:{broker_id}", lambda: c.watch_data(
            layout.broker(broker_id), lambda e: put(ev.BrokerNodeChanged(
                broker_id=broker_id, data=e.data, stat=e.stat))))

    def watch_topic(self, topic: str) -> None:
        c, put = self.coordinator, self.events.put
        self._watch(f"topic:{topic}", lambda: c.watch_data(
            layout.topic(topic), lambda e: put(ev.TopicNodeChanged(
                topic=topic, data=e.data, stat=e.stat))))

    def unwatch_topic(self, topic: str) -> None:
        """Stop following a topic's node (its partition states stop counting with it)."""
        self._unwatch(f"topic:{topic}")

    def watch_partition_states(self, tps: list[TopicPartition]) -> None:
        """Hot standby: follow every partition's leader and ISR while not active, with one
        tree watch on the whole store (the active controller writes the states itself and
        hears of leaders' ISR changes by notification), and read the states of ``tps``, new
        to the view, in one bulk read.

        The tree watch also reports the topic nodes, and every other write: when it has shown
        the election's own write, the view is complete up to it (etcd's watches of different
        keys need not keep pace with each other, one watch's revisions are in order).

        A read that fails for want of a connection leaves a resync behind: the next batch of
        states (at the latest, the failover) re-reads them all."""
        if not self.config.hot_standby or self._running():
            return
        try:
            self._watch("states", lambda: self.coordinator.watch_tree(
                "/", self.on_tree_event))
            if tps:
                read_partition_states(self.metadata, self.ctx, tps, self.skipped)
        except CoordinatorError as exc:
            log.info("controller %d: standby could not follow partition states yet: %s",
                     self.broker_id, exc)
            with self._states_lock:
                self._states_resync = True

    def unwatch_partition_states(self) -> None:
        """Stop following the store as a standby (the active controller's own writes and
        leaders' notifications keep its view; on ZooKeeper this also removes the server's
        persistent watch, which would otherwise report every write the controller makes)."""
        self._unwatch("states")

    # --- following the store -------------------------------------------------------------

    def on_tree_event(self, event: TreeEvent) -> None:
        """Dispatcher thread: keep each partition's latest state and each topic node's in
        the buffers, note how far the store has been shown, and queue one event when the
        buffers stop being empty."""
        cache = self._tp_of_path
        prefix = _STATE_PREFIX
        with self._states_lock:
            pending, topics_ = self._states_pending, self._topics_pending
            if event.resync:
                self._states_resync = True
            for path, data, stat, revision in event.changes:
                if not path.startswith(prefix):
                    continue
                node = cache.get(path, _UNPARSED)
                if node is _UNPARSED:
                    node = cache[path] = _view_node(path)
                if node is None:
                    continue
                if type(node) is str:
                    topics_[node] = (data, stat, revision)
                else:
                    pending[node] = (data, stat)
        self.wake()
        # Only now: whoever waits for this revision then finds its changes queued.
        with self._states_lock:
            if event.revision > self._tree_revision:
                self._tree_revision = event.revision
                self._tree_moved.notify_all()

    def wake(self) -> None:
        """Queue one PartitionStatesPending if there is something to apply and none is queued."""
        with self._states_lock:
            wake = not self._states_queued and bool(
                self._states_pending or self._topics_pending or self._states_resync)
            if wake:
                self._states_queued = True
        if wake:
            self.events.put(ev.PartitionStatesPending())

    def apply_pending_states(self) -> list[TopicPartition]:
        """Apply what the tree watch buffered (and re-read every state if asked to); returns
        the partitions whose leader and ISR changed."""
        with self._states_lock:
            pending, self._states_pending = self._states_pending, {}
            nodes, self._topics_pending = self._topics_pending, {}
            resync, self._states_resync = self._states_resync, False
            self._states_queued = False
        ctx = self.ctx
        if nodes and not self._active():  # the active controller follows topics by their watches
            for topic, (data, stat, revision) in nodes.items():
                self.apply_topic_node(ev.TopicNodeChanged(
                    topic=topic, data=data, stat=stat), revision=revision)
        if resync:  # changes may have been missed: read every state the view knows
            try:
                read_partition_states(self.metadata, ctx, list(ctx.replicas), self.skipped)
            except CoordinatorError:
                with self._states_lock:
                    self._states_resync = True
                raise
        topics_ = ctx.topics
        made: dict[tuple[bytes, int], LeaderAndIsr] = {}  # equal nodes share one value
        return [tp for tp, (data, stat) in pending.items()
                if (data is None or tp.topic in topics_)
                and self._apply_state(tp, data, stat, made)]

    def apply(self, event: ev.ControllerEvent) -> None:
        """Apply a node event to the view only (standby, draining, completing at failover)."""
        match event:
            case ev.BrokerIdsChanged() | ev.TopicsChanged():
                self.arm_children(event)
            case ev.BrokerNodeChanged():
                apply_broker_node(self.ctx, event)
            case ev.TopicNodeChanged():
                self.apply_topic_node(event)
            case ev.PartitionStatesPending():
                self.apply_pending_states()

    def apply_topic_node(self, event: ev.TopicNodeChanged, *, only_new: bool = False,
                         revision: int | None = None) -> list[TopicPartition]:
        """Apply a topic node to the view; returns the partitions new to it.

        ``revision`` is the store's id of the change (a deletion's too), known to tree watches;
        a node's own stat gives it otherwise. A report older than the last one applied is
        ignored: watches of different keys need not keep pace with each other (etcd). With
        ``only_new`` the replicas of known partitions are kept (the active controller's)."""
        ctx, topic = self.ctx, event.topic
        if not self.skipped.legal(topic):
            return []
        if revision is None and event.stat is not None:
            revision = event.stat.modify_id
        if revision is not None:
            if revision < self.topic_revisions.get(topic, 0):
                return []
            self.topic_revisions[topic] = revision
        if event.stat is None or event.data is None:
            if topic in ctx.topics and not (self._active() and topic in ctx.deleting):
                ctx.remove_topic(topic)
                self.unwatch_topic(topic)
            return []
        if topic in ctx.topics and event.stat.version <= ctx.topic_versions.get(topic, -1):
            return []
        try:
            assignment = decode_assignment(topic, event.data)
        except CorruptMetadata as exc:  # another tool's writing: the view keeps what it had
            self.skipped.corrupt(topic, exc)
            return []
        self.skipped.fixed(topic)
        added = ctx.set_topic(assignment, event.stat.version, only_new=only_new)
        self.watch_partition_states(added)
        return added

    def _apply_state(self, tp: TopicPartition, data: bytes | None, stat: Stat | None,
                     made: dict[tuple[bytes, int], LeaderAndIsr]) -> bool:
        """Apply one reported state; equal nodes (the same bytes at the same version) share
        the value in ``made``, as a bulk read's do. A mass election writes many alike: a value
        each was as many objects for the standby to hold and its collector to walk (loaded
        with 300,000 partitions after a full restart, it held 400 MB instead of 497)."""
        ctx = self.ctx
        if stat is None or data is None:
            if tp in ctx.leaders and not ctx.is_deleting(tp) and tp not in ctx.replicas:
                ctx.remove_leader(tp)
            return False
        current = ctx.leaders.get(tp)
        if current is not None and stat.version <= current.partition_epoch:
            return False
        try:
            value = shared_state(made, tp, data, stat.version)
        except CorruptMetadata as exc:  # another tool's writing: the view keeps what it had
            self.skipped.corrupt_state(tp, exc)
            return False
        ctx.set_leader(tp, value)
        return True

    def caught_up(self, revision: int, timeout: float = 10.0) -> bool:
        """A standby: wait until its view has followed the store up to the write ``revision``
        (its tree watch has shown it and the view events it queued are applied). The active
        controller, which keeps its view by its own writes, only waits for its queue."""
        deadline = time.monotonic() + timeout
        if not self._active() and self.following and not self._tree_reached(revision, timeout):
            return False
        return self.events.wait_idle(max(0.0, deadline - time.monotonic()))

    def _tree_reached(self, revision: int, timeout: float) -> bool:
        with self._states_lock:
            return self._tree_moved.wait_for(lambda: self._tree_revision >= revision, timeout)

    # --- at failover ---------------------------------------------------------------------

    def prepare_failover(self, revision: int) -> bool:
        """Make the view ready for a new controller elected by the store's write ``revision``:
        complete a warm view up to it, or read a cold one whole (a suspect one too), then
        re-read what a warm view may lack. True if the view was known complete up to the
        election without re-reading the states and topics (``FailoverTimings.exact``)."""
        warm = self.config.hot_standby
        exact = False
        if warm:
            exact = self._complete(revision)
        else:
            self.load()
        if self.suspect:  # it resigned over an error earlier: read it whole, as Kafka does
            self._rebuild()
            exact = False
        if warm:
            # The brokers come from watches of their own, which on etcd need not have kept
            # pace with the tree watch: re-read the few of them. A view not known complete up
            # to the election also re-reads the topic list (and in bulk any topic it lacks).
            self._reconcile_brokers()
            if not exact:
                self._reconcile_topics()
            # Partitions whose state the view lacks (none written yet, or a re-read that failed).
            # (counted as the view changes: a pass over a million partitions to find none
            # took a fifth of a hot failover's time before its metadata went out)
            if self.ctx.unstated:
                replicas, leaders = self.ctx.replicas, self.ctx.leaders
                missing = [tp for tp in replicas if tp not in leaders]
                read_partition_states(self.metadata, self.ctx, missing, self.skipped)
        return exact

    def finish_failover(self) -> None:
        """The failover is done: a warm view stops following the store (the controller's own
        writes keep it), a cold one arms the watches it was loaded without."""
        if self.config.hot_standby:
            self.unwatch_partition_states()
        else:
            self.arm_cluster_watches()
            for b in self.ctx.brokers:
                self.arm_children(ev.BrokerIdsChanged(ids=(b,)))
            for t in self.ctx.topics:
                self.watch_topic(t)

    def load(self) -> None:
        """Read the whole cluster with bulk reads (a cold candidate at failover)."""
        ctx, md = self.ctx, self.metadata
        md.ensure_layout()
        registered = md.brokers()
        for b in list(ctx.brokers):
            if b not in registered:
                ctx.remove_broker(b)
        for broker in registered.values():
            ctx.add_broker(broker)
        names = [t for t in md.topics() if self.skipped.legal(t)]
        assignments = md.assignments(names, on_corrupt=self.skipped.corrupt)
        for t in list(ctx.topics):
            if t not in assignments:
                ctx.remove_topic(t)
        tps: list[TopicPartition] = []
        for versioned in assignments.values():
            ctx.set_topic(versioned.value, versioned.version, every=tps)
        read_partition_states(md, ctx, tps, self.skipped)

    def _rebuild(self) -> None:
        """Forget the view and read it whole from the store (a candidate whose view is
        suspect: it resigned over an error while it held it)."""
        self.ctx = ControllerContext()
        self.topic_revisions.clear()
        self.load()
        self.suspect = False

    def _complete(self, revision: int) -> bool:
        """Make the warm view complete up to the store's write ``revision`` (the election's):
        wait until the tree watch has shown it (where there is one), then flush the
        coordinator's watch events and apply every queued view event, until none are left.

        True if the view is known complete: the tree watch reached ``revision``. Otherwise
        the partition states are re-read, and the caller re-reads what else it needs.
        """
        exact = self.following and self._await_tree(revision)
        if not exact:
            with self._states_lock:
                self._states_resync = True
        for _ in range(100):
            exact = self.coordinator.sync() and exact
            taken = self.events.take(lambda e: isinstance(e, ev.VIEW_EVENTS)
                                     and not isinstance(e, ev.ControllerNodeChanged))
            if not taken:
                if self._states_resync:  # a re-read asked for, or left behind by a failed one
                    self.apply_pending_states()
                return exact
            for event in taken:
                self.apply(event)
        return False

    def _await_tree(self, revision: int) -> bool:
        """Wait until the tree watch has shown the store up to ``revision``."""
        if self._tree_reached(revision, self.config.view_sync_timeout):
            return True
        log.warning("controller %d: the tree watch is at revision %d, not %d: re-reading the "
                    "view", self.broker_id, self._tree_revision, revision)
        return False

    def _reconcile_brokers(self) -> None:
        ctx = self.ctx
        registered = self.metadata.brokers()
        for b in [b for b in ctx.brokers if b not in registered]:
            ctx.remove_broker(b)
        for broker in registered.values():
            ctx.add_broker(broker)

    def _reconcile_topics(self) -> None:
        ctx = self.ctx
        names = {t for t in self.metadata.topics() if self.skipped.legal(t)}
        for t in [t for t in ctx.topics if t not in names]:
            ctx.remove_topic(t)
            self.unwatch_topic(t)
        missing = [t for t in names if t not in ctx.topics]
        if not missing:
            return
        for t, versioned in self.metadata.assignments(
                missing, on_corrupt=self.skipped.corrupt).items():
            ctx.set_topic(versioned.value, versioned.version)
            self.watch_topic(t)


_UNPARSED: Any = object()
_STATE_PREFIX = layout.TOPICS + "/"


def _view_node(path: str) -> TopicPartition | str | None:
    """What node ``path`` below the topics is to the view: the partition of a state node
    (``/brokers/topics/T/partitions/P/state``), the topic of a topic node, or None."""
    rest = path[len(_STATE_PREFIX):]
    if "/" not in rest:
        return rest or None
    parts = rest.split("/")
    if len(parts) != 4 or parts[1] != "partitions" or parts[3] != "state" or not (
            parts[2].isdigit()):
        return None
    return TopicPartition(topic=parts[0], partition=int(parts[2]))
