"""The controller: election, failover, resignation, the view, and dispatch to the handlers.

Every candidate runs one :class:`Controller`. It stands for election; while it is not active it
keeps its view of the store warm from watches (hot standby). On winning it makes the view
complete up to its election (flushes the coordinator's event queue and applies what was
pending), rebuilds the state machines from the view, sends UpdateMetadata to every broker and
then does what a new controller must: elect leaderless partitions, resume reassignments and
deletions, run a requested preferred election.

Every write goes through the :class:`~elections.Fence` of the epoch it won. A fenced write that
fails (ControllerMoved), a closed fence (session LOST seen by the listener) or a lost
connection mid-handler makes it resign at once: drain the queue, fail pending requests with
NotController, write nothing more, and stand again.
"""

from __future__ import annotations

import gc
import json
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from coordinator import layout
from coordinator.base import Coordinator
from coordinator.codecs import BrokerInfo, TopicAssignment, TopicPartition, is_int_list
from coordinator.codecs import PartitionState as StoredState
from coordinator.errors import CoordinatorError
from coordinator.metadata import ControllerMoved, MetadataClient, RegisteredBroker
from coordinator.model import ChildrenEvent, DataEvent, SessionState, Stat, TreeEvent, Watch
from elections.controller_election import Fence, NotController, stand_for_controller
from elections.leader import LeaderAndIsr
from statemachines import events as ev
from statemachines.channel import BrokerChannel, BrokerResponse
from statemachines.context import ControllerContext
from statemachines.event_manager import EventManager
from statemachines.handlers import (
    brokers,
    deletion,
    failover,
    isr,
    preferred,
    reassignment,
    rebalance,
    shutdown,
    topics,
)
from statemachines.partition_sm import PartitionStateMachine
from statemachines.replica_sm import ReplicaStateMachine
from statemachines.requests import BrokerRequest, RequestBatch, StopReplicaRequest

log = logging.getLogger(__name__)

__all__ = ["Controller", "ControllerConfig", "FailoverTimings"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerConfig:
    """Kafka's controller settings that apply here, with Kafka's defaults."""

    leader_imbalance_check_interval_seconds: float = 300.0
    leader_imbalance_per_broker_percentage: float = 10.0
    auto_leader_rebalance_enable: bool = True
    unclean_leader_election_enable: bool = False
    delete_topic_enable: bool = True
    hot_standby: bool = True
    """Keep the view warm from watches while not active (else read everything on winning)."""
    view_sync_timeout: float = 5.0
    """How long a new controller waits for its watches to reach the election's write before
    it re-reads what they might have missed instead."""
    pause_gc_during_events: bool = True
    """Hold Python's cyclic garbage collector while an event is handled. A mass election
    allocates some 100,000 objects, which would set off full collections over the millions of
    long-lived objects a large view holds (up to half the time of a broker loss); the
    collector runs again as soon as the event is done. It is re-enabled only if this handler
    disabled it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FailoverTimings:
    """Monotonic seconds of one failover's steps (for benchmarks and logs)."""

    epoch: int
    started: float
    elected: float
    view_ready: float
    metadata_sent: float
    done: float
    warm: bool
    exact: bool = False
    """The warm view was known complete up to the election's write (no re-reads needed)."""


class Controller:
    def __init__(
        self,
        coordinator: Coordinator,
        broker_id: int,
        channel: BrokerChannel,
        *,
        config: ControllerConfig | None = None,
        threaded: bool = True,
    ) -> None:
        self.coordinator = coordinator
        self.metadata = MetadataClient(coordinator)
        self.broker_id = broker_id
        self.channel = channel
        self.config = config or ControllerConfig()
        self.ctx = ControllerContext()
        self.events = EventManager(self.process, name=f"partctl-controller-{broker_id}",
                                   threaded=threaded)
        self.fence: Fence | None = None
        self.partitions: PartitionStateMachine | None = None
        self.replicas: ReplicaStateMachine | None = None
        self.last_failover: FailoverTimings | None = None
        self.resignations = 0
        self.on_active: list[Callable[[Controller], None]] = []
        self._watches: dict[str, Watch] = {}
        self._started = False
        self._closed = False
        self._timer: _Ticker | None = None
        self._stand_requested_at: float | None = None
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
        self.topic_revisions: dict[str, int] = {}
        """The store revision of each topic node as last applied to the view: older reports
        (one watch may lag another on etcd) are ignored."""

    # --- lifecycle -----------------------------------------------------------------------

    @property
    def active(self) -> bool:
        return self.fence is not None and self.fence.is_open

    @property
    def epoch(self) -> int | None:
        return self.fence.epoch.epoch if self.active and self.fence else None

    def start(self) -> None:
        """Listen to the session, arm the watches, stand for election."""
        if self._started:
            return
        self._started = True
        self.coordinator.add_listener(self._on_session)
        if self.config.hot_standby:
            # Before /controller's watch, which may make this candidate stand: the view's
            # first reports are then queued ahead of any election it wins.
            self.watch_partition_states([])
            self._arm_cluster_watches()
        self._watch("controller", lambda: self.coordinator.watch_data(
            layout.CONTROLLER, lambda e: self.events.put(
                ev.ControllerNodeChanged(data=e.data, stat=e.stat))))
        self.events.put(ev.Stand())

    def close(self) -> None:
        """Stop the event thread, then resign (deleting /controller if still ours)."""
        if self._closed:
            return
        self._closed = True
        self.coordinator.remove_listener(self._on_session)
        self.events.stop()
        if self.fence is not None and self.fence.is_open:
            self.fence.resign()
            self._resign("closing", stand_again=False)
        for watch in list(self._watches.values()):
            watch.cancel()
        self._watches.clear()

    def request_controlled_shutdown(self, broker_id: int, broker_epoch: int) -> Future[Any]:
        event = ev.ControlledShutdownRequested(broker_id=broker_id, broker_epoch=broker_epoch)
        if not self.active:
            event.reply.set_exception(NotController(f"broker {self.broker_id} is not controller"))
        else:
            self.events.put(event)
        return event.reply

    # --- event processing ----------------------------------------------------------------

    def process(self, event: ev.ControllerEvent) -> None:
        """Handle one event (the event thread calls it; tests may call it directly)."""
        if self._closed:
            return
        paused = self.config.pause_gc_during_events and gc.isenabled()
        if paused:
            gc.disable()
        try:
            self._process(event)
        finally:
            if paused:
                gc.enable()

    def _process(self, event: ev.ControllerEvent) -> None:
        try:
            self._dispatch(event)
        except (ControllerMoved, NotController) as exc:
            self._fail_request(event, exc)
            if self.fence is not None:
                log.warning("controller %d (epoch %d) fenced off: %s", self.broker_id,
                            self.fence.epoch.epoch, exc)
                self._resign(str(exc))
        except CoordinatorError as exc:
            self._fail_request(event, exc)
            if self.active:
                log.warning("controller %d: coordinator error in %s, resigning: %s",
                            self.broker_id, type(event).__name__, exc)
                self._resign(str(exc))
            else:
                log.info("controller %d: %s while not active: %s", self.broker_id,
                         type(event).__name__, exc)

    def _fail_request(self, event: ev.ControllerEvent, exc: Exception) -> None:
        reply = getattr(event, "reply", None)
        if isinstance(reply, Future) and not reply.done():
            reply.set_exception(exc)

    def _dispatch(self, event: ev.ControllerEvent) -> None:
        match event:
            case ev.Stand():
                self._stand()
            case ev.SessionChanged(state=state):
                self._on_session_event(state)
            case ev.ControllerNodeChanged(stat=stat):
                self._on_controller_node(stat)
            case ev.BrokerIdsChanged() | ev.TopicsChanged():
                self._arm_children(event)
            case ev.BrokerNodeChanged():
                brokers.on_broker_node(self, event)
            case ev.TopicNodeChanged():
                topics.on_topic_node(self, event)
            case ev.PartitionStatesPending():
                self._apply_pending_states()
            case ev.IsrChangeNotified():
                if self.active:
                    isr.on_isr_change_notification(self)
            case ev.ReassignmentChanged():
                if self.active:
                    reassignment.on_reassignment_request(self)
            case ev.PreferredElectionChanged():
                if self.active:
                    preferred.on_preferred_election_request(self)
            case ev.DeleteTopicsChanged():
                if self.active:
                    deletion.on_delete_topics_request(self)
            case ev.AutoRebalanceTick():
                if self.active:
                    rebalance.on_auto_rebalance(self)
            case ev.ReplicaDeletionFinished():
                if self.active and self.fence and event.controller_epoch == self.fence.epoch.epoch:
                    deletion.on_replica_deletion_finished(self, event)
            case ev.ControlledShutdownRequested():
                if not self.active:
                    raise NotController(f"broker {self.broker_id} is not the controller")
                shutdown.on_controlled_shutdown(self, event)
            case _:
                raise TypeError(f"not a controller event: {event!r}")

    # --- batches -------------------------------------------------------------------------

    def new_batch(self) -> RequestBatch:
        """A batch whose UpdateMetadata names the live brokers, not those shutting down (as
        Kafka's liveBrokerIds): leaders do not take a stopping broker back into an ISR."""
        ctx = self.ctx
        shutting = ctx.shutting_down
        live = (ctx.live_brokers.values() if not shutting
                else [b for b_id, b in ctx.live_brokers.items() if b_id not in shutting])
        return RequestBatch(live_brokers=live)

    def send(self, batch: RequestBatch) -> None:
        """Build the batch once and send each broker its requests, with this epoch."""
        fence = self.fence
        if fence is None or not fence.is_open:
            raise NotController("not sending: this controller resigned")
        if batch.is_empty:
            return
        requests = batch.build(self.broker_id, fence.epoch.epoch, self.ctx.broker_epochs())
        for broker_id, reqs in requests.items():
            self.channel.send(broker_id, reqs, self._on_response)

    def _on_response(self, broker_id: int, request: BrokerRequest, response: BrokerResponse
                     ) -> None:
        """Any thread: turn StopReplica-with-delete answers into events."""
        if not isinstance(request, StopReplicaRequest):
            return
        deleting = [TopicPartition(topic=p.topic, partition=p.partition)
                    for p in request.partitions if p.delete]
        if not deleting:
            return
        if response.error is not None:
            failed, deleted = tuple(deleting), ()
        else:
            errors = response.partition_errors
            failed = tuple(tp for tp in deleting if tp in errors)
            deleted = tuple(tp for tp in deleting if tp not in errors)
        self.events.put(ev.ReplicaDeletionFinished(
            broker_id=broker_id, controller_epoch=request.controller_epoch,
            deleted=deleted, failed=failed))

    # --- election, failover, resignation -------------------------------------------------

    def _stand(self) -> None:
        if self.active or self._closed:
            return
        started = self._stand_requested_at or time.monotonic()
        self._stand_requested_at = None
        epoch = stand_for_controller(self.metadata, self.broker_id)
        if epoch is None:
            return
        elected = time.monotonic()
        self.fence = Fence(self.metadata, epoch)
        log.info("broker %d is the controller at epoch %d", self.broker_id, epoch.epoch)
        failover.on_controller_failover(self, started, elected)
        for hook in list(self.on_active):
            hook(self)

    def _resign(self, reason: str, *, stand_again: bool = True) -> None:
        fence = self.fence
        if fence is not None:
            fence.close()
        log.info("controller %d resigns: %s", self.broker_id, reason)
        self.resignations += 1
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        for event in self.events.drain():
            if isinstance(event, ev.VIEW_EVENTS) and not isinstance(
                    event, ev.ControllerNodeChanged):
                self._apply_view(event)
            else:
                self._fail_request(event, NotController(f"controller {self.broker_id} resigned"))
        self.ctx.reset_controller_state()
        self.partitions = None
        self.replicas = None
        if not self._closed:
            self.watch_partition_states(list(self.ctx.replicas))
        if stand_again and not self._closed:
            self.events.put(ev.Stand())

    def start_rebalance_timer(self) -> None:
        if self.config.auto_leader_rebalance_enable and self.events.threaded:
            self._timer = _Ticker(self.config.leader_imbalance_check_interval_seconds,
                                  lambda: self.events.put(ev.AutoRebalanceTick()))

    def _on_session(self, state: SessionState) -> None:
        """Dispatcher thread: close the fence at once on LOST, then let the event thread act."""
        if state in (SessionState.LOST, SessionState.CLOSED):
            fence = self.fence
            if fence is not None:
                fence.close()
        if state is SessionState.LOST:
            self._stand_requested_at = time.monotonic()
        self.events.put(ev.SessionChanged(state=state))

    def _on_session_event(self, state: SessionState) -> None:
        if state is SessionState.LOST and self.fence is not None and (
                self.partitions is not None):
            self._resign("session lost", stand_again=False)
        elif state is SessionState.CONNECTED and not self.active:
            self.watch_partition_states([])  # if arming it failed while disconnected
            self._wake_states()  # and a re-read it left behind
            self._stand()

    def _on_controller_node(self, stat: Stat | None) -> None:
        """Watch events report past states: while active, check the node itself before
        resigning over one."""
        if self.partitions is not None and self.fence is not None:
            holder = self.metadata.controller()
            current = self.metadata.controller_epoch()
            if (holder is not None and self.fence.is_open
                    and holder[1].ephemeral_owner == self.coordinator.session_id
                    and current == self.fence.epoch):
                return
            self._resign("/controller is no longer ours", stand_again=False)
            if holder is not None and holder[1].ephemeral_owner != self.coordinator.session_id:
                return
        elif stat is not None:
            return
        if self._stand_requested_at is None:
            self._stand_requested_at = time.monotonic()
        self._stand()

    # --- the view ------------------------------------------------------------------------

    def _watch(self, key: str, arm: Callable[[], Watch]) -> None:
        if key not in self._watches:
            self._watches[key] = arm()

    def _unwatch(self, key: str) -> None:
        watch = self._watches.pop(key, None)
        if watch is not None:
            watch.cancel()

    def _arm_cluster_watches(self) -> None:
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

    def _arm_children(self, event: ev.BrokerIdsChanged | ev.TopicsChanged) -> None:
        c, put = self.coordinator, self.events.put
        if isinstance(event, ev.BrokerIdsChanged):
            for b in event.ids:
                self._watch(f"broker:{b}", lambda b=b: c.watch_data(
                    layout.broker(b), lambda e, b=b: put(ev.BrokerNodeChanged(
                        broker_id=b, data=e.data, stat=e.stat))))
        else:
            for t in event.topics:
                self.watch_topic(t)

    def watch_topic(self, topic: str) -> None:
        c, put = self.coordinator, self.events.put
        self._watch(f"topic:{topic}", lambda: c.watch_data(
            layout.topic(topic), lambda e: put(ev.TopicNodeChanged(
                topic=topic, data=e.data, stat=e.stat))))

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
        if not self.config.hot_standby or self.partitions is not None:
            return
        try:
            self._watch("states", lambda: self.coordinator.watch_tree(
                "/", self._states_changed))
            if tps:
                read_partition_states(self.metadata, self.ctx, tps)
        except CoordinatorError as exc:
            log.info("controller %d: standby could not follow partition states yet: %s",
                     self.broker_id, exc)
            with self._states_lock:
                self._states_resync = True

    def _states_changed(self, event: TreeEvent) -> None:
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
        self._wake_states()
        # Only now: whoever waits for this revision then finds its changes queued.
        with self._states_lock:
            if event.revision > self._tree_revision:
                self._tree_revision = event.revision
                self._tree_moved.notify_all()

    def _wake_states(self) -> None:
        """Queue one PartitionStatesPending if there is something to apply and none is queued."""
        with self._states_lock:
            wake = not self._states_queued and bool(
                self._states_pending or self._topics_pending or self._states_resync)
            if wake:
                self._states_queued = True
        if wake:
            self.events.put(ev.PartitionStatesPending())

    def _apply_pending_states(self) -> None:
        with self._states_lock:
            pending, self._states_pending = self._states_pending, {}
            nodes, self._topics_pending = self._topics_pending, {}
            resync, self._states_resync = self._states_resync, False
            self._states_queued = False
        ctx = self.ctx
        if nodes and not self.active:  # the active controller follows topics by their watches
            for topic, (data, stat, revision) in nodes.items():
                topics.apply_topic_node(self, ev.TopicNodeChanged(
                    topic=topic, data=data, stat=stat), revision=revision)
        if resync:  # changes may have been missed: read every state the view knows
            try:
                read_partition_states(self.metadata, ctx, list(ctx.replicas))
            except CoordinatorError:
                with self._states_lock:
                    self._states_resync = True
                raise
        topics_ = ctx.topics
        changed = [tp for tp, (data, stat) in pending.items()
                   if (data is None or tp.topic in topics_) and self._apply_state(tp, data, stat)]
        if changed and self.active and self.ctx.reassignments:
            moving = [tp for tp in changed if tp in self.ctx.reassignments]
            if moving:
                reassignment.complete_if_caught_up(self, moving)

    def unwatch_partition_states(self) -> None:
        """Stop following the store as a standby (the active controller's own writes and
        leaders' notifications keep its view; on ZooKeeper this also removes the server's
        persistent watch, which would otherwise report every write the controller makes)."""
        self._unwatch("states")

    def unwatch_topic(self, topic: str) -> None:
        """Stop following a topic's node (its partition states stop counting with it)."""
        self._unwatch(f"topic:{topic}")

    def _apply_view(self, event: ev.ControllerEvent) -> None:
        """Apply a node event to the view only (standby, draining, completing at failover)."""
        match event:
            case ev.BrokerIdsChanged() | ev.TopicsChanged():
                self._arm_children(event)
            case ev.BrokerNodeChanged():
                brokers.apply_broker_node(self.ctx, event)
            case ev.TopicNodeChanged():
                topics.apply_topic_node(self, event)
            case ev.PartitionStatesPending():
                self._apply_pending_states()

    def _apply_state(self, tp: TopicPartition, data: bytes | None, stat: Stat | None) -> bool:
        ctx = self.ctx
        if stat is None or data is None:
            if tp in ctx.leaders and not ctx.is_deleting(tp) and tp not in ctx.replicas:
                ctx.remove_leader(tp)
            return False
        current = ctx.leaders.get(tp)
        if current is not None and stat.version <= current.partition_epoch:
            return False
        ctx.set_leader(tp, decode_leader_and_isr(tp, data, stat.version))
        return True

    # --- loading the view cold -----------------------------------------------------------

    def load_view(self) -> None:
        """Read the whole cluster with bulk reads (a cold candidate at failover)."""
        ctx, md = self.ctx, self.metadata
        md.ensure_layout()
        registered = md.brokers()
        for b in list(ctx.brokers):
            if b not in registered:
                ctx.remove_broker(b)
        for broker in registered.values():
            ctx.add_broker(broker)
        names = md.topics()
        assignments = md.assignments(names)
        for t in list(ctx.topics):
            if t not in assignments:
                ctx.remove_topic(t)
        tps: list[TopicPartition] = []
        for t, versioned in assignments.items():
            ctx.set_topic(versioned.value, versioned.version)
            tps.extend(TopicPartition(t, p) for p in versioned.value.partitions)
        read_partition_states(md, ctx, tps)

    def complete_view(self, revision: int) -> bool:
        """Make the warm view complete up to the store's write ``revision`` (the election's):
        wait until the tree watch has shown it (where there is one), then flush the
        coordinator's watch events and apply every queued view event, until none are left.

        True if the view is known complete: the tree watch reached ``revision``. Otherwise
        the partition states are re-read, and the caller re-reads what else it needs.
        """
        exact = "states" in self._watches and self._await_tree(revision)
        if not exact:
            with self._states_lock:
                self._states_resync = True
        for _ in range(100):
            exact = self.coordinator.sync() and exact
            taken = self.events.take(lambda e: isinstance(e, ev.VIEW_EVENTS)
                                     and not isinstance(e, ev.ControllerNodeChanged))
            if not taken:
                if self._states_resync:  # a re-read asked for, or left behind by a failed one
                    self._apply_pending_states()
                return exact
            for event in taken:
                self._apply_view(event)
        return False

    def caught_up(self, revision: int, timeout: float = 10.0) -> bool:
        """A standby: wait until its view has followed the store up to the write ``revision``
        (its tree watch has shown it and the view events it queued are applied). The active
        controller, which keeps its view by its own writes, only waits for its queue."""
        deadline = time.monotonic() + timeout
        if not self.active and "states" in self._watches and not self._tree_reached(
                revision, timeout):
            return False
        return self.events.wait_idle(max(0.0, deadline - time.monotonic()))

    def _await_tree(self, revision: int) -> bool:
        """Wait until the tree watch has shown the store up to ``revision``."""
        if self._tree_reached(revision, self.config.view_sync_timeout):
            return True
        log.warning("controller %d: the tree watch is at revision %d, not %d: re-reading the "
                    "view", self.broker_id, self._tree_revision, revision)
        return False

    def _tree_reached(self, revision: int, timeout: float) -> bool:
        with self._states_lock:
            return self._tree_moved.wait_for(lambda: self._tree_revision >= revision, timeout)

    def arm_watches_after_load(self) -> None:
        self._arm_cluster_watches()
        for b in self.ctx.brokers:
            self._arm_children(ev.BrokerIdsChanged(ids=(b,)))
        for t in self.ctx.topics:
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


def read_partition_states(
    metadata: MetadataClient, ctx: ControllerContext, tps: list[TopicPartition]
) -> None:
    """Read the leader and ISR of ``tps`` in one bulk read into the view (what
    ``MetadataClient.partition_states`` does, with its read retry, decoding straight into the
    view's values)."""
    items = metadata.retry(metadata.coordinator.get_many,
                           [layout.partition_state(tp.topic, tp.partition) for tp in tps])
    set_leader, remove_leader = ctx.set_leader, ctx.remove_leader
    for tp, item in zip(tps, items, strict=True):
        if item is None:
            remove_leader(tp)
        else:
            set_leader(tp, decode_leader_and_isr(tp, item[0], item[1].version))


_scan_json = json.JSONDecoder().scan_once  # (text, index) -> (value, end); StopIteration if none


def decode_leader_and_isr(tp: TopicPartition, data: bytes, version: int) -> LeaderAndIsr:
    """A state node's leader and ISR at ``version``. The common, well-formed node is read
    straight from its JSON; anything else goes through the metadata codec, which says what is
    wrong with it."""
    try:
        text = data.decode()
        obj, end = _scan_json(text, 0)  # json.loads without its checks: a third of the time
        if end != len(text):
            raise ValueError("trailing data")
        leader, leader_epoch = obj["leader"], obj["leader_epoch"]
        controller_epoch, isr = obj["controller_epoch"], obj["isr"]
        if (type(leader) is int and type(leader_epoch) is int and type(controller_epoch) is int
                and is_int_list(isr)):
            return LeaderAndIsr(leader, leader_epoch, tuple(isr), controller_epoch, version)
    except (ValueError, UnicodeDecodeError, KeyError, TypeError, StopIteration):
        pass
    s = StoredState.decode(layout.partition_state(tp.topic, tp.partition), data)
    return LeaderAndIsr(leader=s.leader, leader_epoch=s.leader_epoch, isr=tuple(s.isr),
                        controller_epoch=s.controller_epoch, partition_epoch=version)


def registered_broker(broker_id: int, data: bytes, stat: Stat) -> RegisteredBroker:
    info = BrokerInfo.decode(layout.broker(broker_id), data, broker_id)
    return RegisteredBroker(info=info, epoch=stat.create_id)


def decode_assignment(topic: str, data: bytes) -> TopicAssignment:
    return TopicAssignment.decode(layout.topic(topic), data, topic)


class _Ticker:
    """A daemon thread calling ``fn`` every ``interval`` seconds until stopped."""

    def __init__(self, interval: float, fn: Callable[[], None]) -> None:
        self._stop = threading.Event()
        self._interval = interval
        self._fn = fn
        self._thread = threading.Thread(target=self._run, name="partctl-rebalance", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._fn()

    def stop(self) -> None:
        self._stop.set()
