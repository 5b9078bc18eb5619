"""The controller: election, failover, resignation, and dispatch to the handlers.

Every candidate runs one :class:`Controller`. It stands for election; while it is not active it
keeps its view of the store warm from watches (hot standby: :mod:`statemachines.view`). On
winning it makes the view complete up to its election (flushes the coordinator's event queue
and applies what was pending), builds the state machines on the view and hands them, with the
fence and the few operations they need, to the handlers (:mod:`statemachines.services`): the
failover handler sends UpdateMetadata to every broker and then does what a new controller
must: elect leaderless partitions, resume reassignments and deletions, run a requested
preferred election.

Every write goes through the :class:`~elections.Fence` of the epoch it won. A fenced write that
fails (ControllerMoved), a closed fence (session LOST seen by the listener) or a lost
connection mid-handler makes it resign at once: drain the queue, fail pending requests with
NotController, write nothing more, and stand again.

Any other error in a handler is a bug, after which the context may no longer match the store:
the controller resigns too, giving up ``/controller`` (Kafka's triggerControllerMove), and
holds back its own candidacy for a while (:class:`StandBackoff`) so that another candidate wins
and rebuilds its view from the store, and so that a bug that strikes again cannot make one
process resign and win in a loop.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from coordinator import layout
from coordinator.base import Coordinator
from coordinator.codecs import TopicPartition
from coordinator.config_changes import ConfigChangeListener
from coordinator.errors import CoordinatorError
from coordinator.metadata import ControllerMoved, MetadataClient
from coordinator.model import SessionState, Stat, Watch
from elections.controller_election import Fence, NotController, stand_for_controller
from interbroker.channel import BrokerChannel, BrokerResponse, Target
from interbroker.fencing import log_fenced
from interbroker.requests import BrokerRequest, RequestBatch, StopReplicaRequest
from statemachines import events as ev
from statemachines.answers import AwaitedAnswers
from statemachines.config import ControllerConfig, StandBackoff
from statemachines.context import ControllerContext
from statemachines.event_manager import EventManager
from statemachines.full_metadata import Preparation
from statemachines.handlers import (
    alter_partition,
    brokers,
    configs,
    deletion,
    elect_leaders,
    failover,
    isr,
    preferred,
    reassignment,
    rebalance,
    shutdown,
    topics,
)
from statemachines.partition_sm import PartitionStateMachine
from statemachines.reads import apply_broker_node
from statemachines.replica_sm import ReplicaStateMachine
from statemachines.services import ControllerServices
from statemachines.stats import ControllerStats
from statemachines.view import View

log = logging.getLogger(__name__)

__all__ = ["Controller", "ControllerConfig", "FailoverTimings", "StandBackoff"]


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



def _broker_change(event: ev.ControllerEvent) -> bool:
    """A registration changed, or /brokers/ids' children did (what each registration and
    deletion also sets off): the run of these a registration change takes with it
    (:meth:`EventManager.take_leading`, :func:`brokers.on_broker_nodes`)."""
    return isinstance(event, ev.BrokerNodeChanged | ev.BrokerIdsChanged)


FREEZE_AFTER = 100_000
"""Objects (tracked by the cyclic collector) an event may leave behind before what survives it
is frozen: see :func:`settle_garbage`."""


def settle_garbage() -> None:
    """After an event that left many new objects (a view loaded or rebuilt, a mass election):
    freeze them (``gc.freeze``), so that no collection walks the view again.

    A full collection walks every live object: over a view of 1,000,000 partitions (about six
    million objects) it held the GIL for 13-14 s on a busy two-core machine, longer than a
    coordinator session's 10 s, and the process's sessions expired. Collecting the young
    generations first, to leave the event's own cyclic garbage out, walks them all once as
    well (8.8 s over the four million objects of a bare 1,000,000-partition context, at a
    load of 13; freezing alone, no time). So that garbage (an event makes little:
    the view's values are tuples and dicts) is frozen with the rest. Frozen objects are still
    freed when their last reference goes; only cycles among them stay until the process
    ends."""
    if gc.get_count()[0] >= FREEZE_AFTER:
        gc.freeze()


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
        self.events = EventManager(self.process, name=f"partctl-controller-{broker_id}",
                                   threaded=threaded)
        self.fence: Fence | None = None
        self.services: ControllerServices | None = None
        """What the handlers are given: set when a failover has the view ready, dropped on
        resignation (so also: whether the state machines run)."""
        self.last_failover: FailoverTimings | None = None
        self.stats = ControllerStats()
        self.resignations = 0
        self.error_resignations = 0
        """Resignations over an unexpected error in a handler (in all)."""
        self._errors_in_a_row = 0
        self._active_since: float | None = None
        self.stand_held_until: float | None = None
        """While set and not yet reached (on ``config.error_backoff.clock``), this candidate
        does not stand: it resigned over an error."""
        self._stand_timer: threading.Timer | None = None
        self._awaiting: set[AwaitedAnswers] = set()
        """Batches whose answers an event waits for (:meth:`send_then`)."""
        self.on_active: list[Callable[[Controller], None]] = []
        self._controller_watch: Watch | None = None
        self._channel_targets: dict[int, Target] = {}
        """The brokers the channel was last told of (see :meth:`_sync_channel`)."""
        self._started = False
        self._closed = False
        self._timer: _Ticker | None = None
        self._stand_requested_at: float | None = None
        self.view = View(coordinator, self.metadata, self.events, self.config, broker_id,
                         active=lambda: self.active, running=lambda: self.services is not None)
        self._preparation = Preparation(self._wake_later)
        """When a hot standby makes its failover's metadata ready."""
        self._config_changes = ConfigChangeListener(coordinator, self._on_config_change)

    # --- lifecycle -----------------------------------------------------------------------

    @property
    def active(self) -> bool:
        return self.fence is not None and self.fence.is_open

    @property
    def epoch(self) -> int | None:
        return self.fence.epoch.epoch if self.active and self.fence else None

    @property
    def partitions(self) -> PartitionStateMachine | None:
        return self.services.partitions if self.services is not None else None

    @property
    def replicas(self) -> ReplicaStateMachine | None:
        return self.services.replicas if self.services is not None else None

    def start(self) -> None:
        """Listen to the session, arm the watches, stand for election."""
        if self._started:
            return
        self._started = True
        self.coordinator.add_listener(self._on_session)
        if self.config.hot_standby:
            # Before /controller's watch, which may make this candidate stand: the view's
            # first reports are then queued ahead of any election it wins.
            self.view.watch_partition_states([])
            self.view.arm_cluster_watches()
        self._controller_watch = self.coordinator.watch_data(
            layout.CONTROLLER, lambda e: self.events.put(
                ev.ControllerNodeChanged(data=e.data, stat=e.stat)))
        self._config_changes.start()
        self.events.put(ev.Stand())

    def close(self) -> None:
        """Stop the event thread, then resign (deleting /controller if still ours)."""
        if self._closed:
            return
        self._closed = True
        self.coordinator.remove_listener(self._on_session)
        self.events.stop()
        self._preparation.stop()
        if self._stand_timer is not None:
            self._stand_timer.cancel()
        if self.fence is not None and self.fence.is_open:
            self.fence.resign()
            self._resign("closing", stand_again=False)
        if self._controller_watch is not None:
            self._controller_watch.cancel()
            self._controller_watch = None
        self._config_changes.close()
        self.view.close()
        self._stop_awaiting(NotController(f"controller {self.broker_id} closed"))
        self._reset_channel()

    def _on_config_change(self, entity_type: str, name: str) -> None:
        """A config change notification (the watch's thread): topics' become events."""
        if entity_type == "topics":
            self.events.put(ev.TopicConfigChanged(topic=name))

    def request_controlled_shutdown(self, broker_id: int, broker_epoch: int) -> Future[Any]:
        event = ev.ControlledShutdownRequested(broker_id=broker_id, broker_epoch=broker_epoch)
        if not self.active:
            event.reply.set_exception(NotController(f"broker {self.broker_id} is not controller"))
        else:
            self.events.put(event)
        return event.reply

    def request_alter_partition(self, event: ev.AlterPartitionRequested) -> Future[Any]:
        """A partition leader's AlterPartition: the future gets a result per proposal
        (:mod:`statemachines.handlers.alter_partition`), or fails with NotController or
        StaleBrokerEpoch."""
        if not self.active:
            event.reply.set_exception(NotController(f"broker {self.broker_id} is not controller"))
        else:
            self.events.put(event)
        return event.reply

    def request_leader_election(self, partitions: Iterable[TopicPartition], *,
                                unclean: bool = False) -> Future[Any]:
        """An admin's preferred (or unclean) elections of ``partitions``: the future gets a
        result per partition (:mod:`statemachines.handlers.elect_leaders`), or fails with
        NotController when this candidate is not (or stops being) the controller."""
        event = ev.LeaderElectionRequested(partitions=tuple(partitions), unclean=unclean)
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
            if (not self.active and self.config.hot_standby and self.events.pending() == 0
                    and not self._closed):
                self._preparation.idle(self.ctx)  # what its failover will send, made ready
        finally:
            if paused:
                settle_garbage()
                gc.enable()

    def _process(self, event: ev.ControllerEvent) -> None:
        try:
            self._dispatch(event)
        except (ControllerMoved, NotController) as exc:
            self._fail_request(event, exc)
            if self.fence is not None:
                log.warning("controller %d (epoch %d) fenced off: %s", self.broker_id,
                            self.fence.epoch.epoch, exc)
                if isinstance(exc, ControllerMoved):  # the store's epoch check said no
                    log_fenced("controller", self.broker_id, f"write in {type(event).__name__}",
                               "stale controller epoch", given=self.fence.epoch.epoch)
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
        except Exception as exc:  # a bug: the context may no longer match the store
            self._fail_request(event, NotController(
                f"controller {self.broker_id} resigned after an internal error: {exc!r}"))
            if self.fence is not None and (self.fence.is_open or self.services is not None):
                log.exception("controller %d (epoch %d): unexpected error processing %.500r, "
                              "resigning", self.broker_id, self.fence.epoch.epoch, event)
                self._resign_after_error(f"{type(event).__name__} failed: {exc!r}")
            else:
                log.exception("controller %d: unexpected error processing %.500r while not "
                              "active", self.broker_id, event)

    def _fail_request(self, event: ev.ControllerEvent, exc: Exception) -> None:
        reply = getattr(event, "reply", None)
        if isinstance(reply, Future) and not reply.done():
            reply.set_exception(exc)

    def _running(self) -> ControllerServices | None:
        """The handlers' services while this controller is active, else None."""
        return self.services if self.active else None

    def _dispatch(self, event: ev.ControllerEvent) -> None:
        match event:
            case ev.Stand():
                self._stand()
            case ev.SessionChanged(state=state):
                self._on_session_event(state)
            case ev.ControllerNodeChanged(stat=stat):
                self._on_controller_node(stat)
            case ev.BrokerIdsChanged() | ev.TopicsChanged():
                self.view.arm_children(event)
            case ev.BrokerNodeChanged():
                if (svc := self._running()) is not None:
                    # with the registration changes queued right after it, handled together
                    run = [event, *self.events.take_leading(_broker_change)]
                    brokers.on_broker_nodes(
                        svc, [e for e in run if isinstance(e, ev.BrokerNodeChanged)])
                    for e in run:  # the watches to arm on new ids, in their order
                        if isinstance(e, ev.BrokerIdsChanged):
                            self.view.arm_children(e)
                else:
                    apply_broker_node(self.ctx, event)
                    self._preparation.changed()
            case ev.TopicNodeChanged():
                if (svc := self._running()) is not None:
                    added = self.view.apply_topic_node(event, only_new=True)
                    if added:
                        topics.on_new_partitions(svc, added)
                else:
                    self.view.apply_topic_node(event)
                    self._preparation.changed()
            case ev.PartitionStatesPending():
                changed = self.view.apply_pending_states()
                if changed and not self.active:
                    self._preparation.changed()
                if changed and (svc := self._running()) is not None and svc.ctx.reassignments:
                    moving = [tp for tp in changed if tp in svc.ctx.reassignments]
                    if moving:
                        reassignment.complete_if_caught_up(svc, moving)
            case ev.StandbyQuiet():
                self._preparation.woken()
            case ev.IsrChangeNotified():
                if (svc := self._running()) is not None:
                    isr.on_isr_change_notification(svc)
            case ev.ReassignmentChanged():
                if (svc := self._running()) is not None:
                    reassignment.on_reassignment_request(svc)
            case ev.PreferredElectionChanged():
                if (svc := self._running()) is not None:
                    preferred.on_preferred_election_request(svc)
            case ev.DeleteTopicsChanged():
                if (svc := self._running()) is not None:
                    deletion.on_delete_topics_request(svc)
            case ev.TopicConfigChanged():
                if (svc := self._running()) is not None:
                    configs.on_topic_config_change(svc, event.topic)
            case ev.AutoRebalanceTick():
                if (svc := self._running()) is not None:
                    rebalance.on_auto_rebalance(svc)
            case ev.ReplicaDeletionFinished():
                if (svc := self._running()) is not None and event.controller_epoch == svc.epoch:
                    deletion.on_replica_deletion_finished(svc, event)
            case ev.ControlledShutdownRequested():
                if (svc := self._running()) is None:
                    raise NotController(f"broker {self.broker_id} is not the controller")
                shutdown.on_controlled_shutdown(svc, event)
            case ev.ControlledShutdownLeadersMoved():
                svc = self._running()
                if svc is None or svc.epoch != event.controller_epoch:
                    # the term that moved the leaders is over: the broker asks the new one
                    self._fail_request(event, NotController(
                        f"controller {self.broker_id} resigned during the controlled shutdown "
                        f"of broker {event.broker_id}"))
                else:
                    shutdown.on_leaders_moved(svc, event)
            case ev.LeaderElectionRequested():
                if (svc := self._running()) is None:
                    raise NotController(f"broker {self.broker_id} is not the controller")
                elect_leaders.on_leader_election_request(svc, event)
            case ev.AlterPartitionRequested():
                if (svc := self._running()) is None:
                    raise NotController(f"broker {self.broker_id} is not the controller")
                alter_partition.on_alter_partition(svc, event)
            case _:
                raise TypeError(f"not a controller event: {event!r}")

    # --- batches -------------------------------------------------------------------------

    def send(self, batch: RequestBatch) -> None:
        """Build the batch once and send each broker its requests, with this epoch."""
        for broker_id, reqs in self._requests(batch).items():
            self.channel.send(broker_id, reqs, self._on_response)

    def send_then(self, batch: RequestBatch, then: ev.ControllerEvent) -> None:
        """Send ``batch`` as :meth:`send` does; queue ``then`` once every broker not shutting
        down has answered its requests of it or been dropped from the channel (its
        registration gone or replaced), or after ``config.shutdown_answers_wait`` seconds (a
        broker that hangs). Brokers shutting down are not waited for: they may be stopping,
        their server closed before their registration goes."""
        requests = self._requests(batch)
        leaving = self.ctx.shutting_down
        awaited = AwaitedAnswers(
            then, {b: len(r) for b, r in requests.items() if b not in leaving},
            self.config.shutdown_answers_wait, handle=self._on_response, put=self.events.put,
            done=self._awaiting.discard)
        self._awaiting.add(awaited)
        for broker_id, reqs in requests.items():
            self.channel.send(broker_id, reqs, awaited.on_response)
        awaited.start()

    def _requests(self, batch: RequestBatch) -> Mapping[int, Sequence[BrokerRequest]]:
        """``batch`` built once, each broker's requests with this epoch (the channel told of
        the registered brokers first); NotController once this controller has resigned."""
        fence = self.fence
        if fence is None or not fence.is_open:
            raise NotController("not sending: this controller resigned")
        if batch.is_empty:
            return {}
        epochs = self.ctx.broker_epochs()
        self._sync_channel(epochs)
        return batch.build(self.broker_id, fence.epoch.epoch, epochs, self._topic_id)

    def _sync_channel(self, epochs: dict[int, int]) -> None:
        """Tell the channel the registered brokers when they changed since it was last told
        (a broker gone, a new one, a new registration, new endpoints): its queues follow
        them, as Kafka's controller adds and removes brokers of its channel manager."""
        live = self.ctx.live_brokers
        known = self._channel_targets
        if len(known) == len(epochs) and all(
                (t := known.get(b)) is not None and t.epoch == e and t.broker == live.get(b)
                for b, e in epochs.items()):
            return
        targets = {b: Target(e, live[b]) for b, e in epochs.items() if b in live}
        dropped = [b for b, t in known.items()
                   if (now := targets.get(b)) is None or now.epoch != t.epoch]
        self._channel_targets = targets
        self.channel.update_brokers(dict(targets))
        for awaited in list(self._awaiting):  # their queues are gone: no answer will come
            awaited.forget(dropped)

    def _topic_id(self, topic: str) -> str | None:
        assignment = self.ctx.topics.get(topic)
        return assignment.topic_id if assignment is not None else None

    def _reset_channel(self) -> None:
        self._channel_targets = {}
        self.channel.reset()

    def _on_response(self, broker_id: int, request: BrokerRequest, response: BrokerResponse
                     ) -> None:
        """Any thread: turn StopReplica-with-delete answers into events."""
        if not isinstance(request, StopReplicaRequest):
            return
        deleting = [TopicPartition(topic=p.topic, partition=p.partition)
                    for p in request.partitions if p.delete]
        if not deleting:
            return
        if response.error:
            failed, deleted = tuple(deleting), tuple[TopicPartition, ...]()
        else:
            errors = response.partition_errors
            failed = tuple(tp for tp in deleting if errors.get(tp))
            deleted = tuple(tp for tp in deleting if not errors.get(tp))
        self.events.put(ev.ReplicaDeletionFinished(
            broker_id=broker_id, controller_epoch=request.controller_epoch,
            deleted=deleted, failed=failed))

    # --- election, failover, resignation -------------------------------------------------

    def _stand(self) -> None:
        if self.active or self._closed or not self.config.candidate:
            return
        held = self.stand_held_until
        if held is not None:
            if self.config.error_backoff.clock.monotonic() < held:
                return  # resigned over an error: another candidate first (a timer stands later)
            self.stand_held_until = None
        started = self._stand_requested_at or time.monotonic()
        self._stand_requested_at = None
        epoch = stand_for_controller(self.metadata, self.broker_id)
        if epoch is None:
            return
        elected = time.monotonic()
        self.fence = Fence(self.metadata, epoch)
        self._active_since = self.config.error_backoff.clock.monotonic()
        log.info("broker %d is the controller at epoch %d", self.broker_id, epoch.epoch)
        self._take_over(started, elected)
        for hook in list(self.on_active):
            hook(self)

    def _take_over(self, started: float, elected: float) -> None:
        """The failover (Kafka's onControllerFailover): the view made ready for this term, the
        state machines built on it, and the handlers' failover run with them."""
        fence = self.fence
        assert fence is not None
        self._preparation.stop()
        exact = self.view.prepare_failover(fence.epoch.revision)
        ctx = self.ctx
        partitions = PartitionStateMachine(
            ctx, fence, self.metadata, unclean=self.config.unclean_leader_election_enable,
            controller_id=self.broker_id, stats=self.stats, skipped=self.view.skipped)
        view_ready = time.monotonic()
        self.services = ControllerServices(
            broker_id=self.broker_id, ctx=ctx, partitions=partitions,
            replicas=ReplicaStateMachine(ctx, partitions), fence=fence, metadata=self.metadata,
            config=self.config, send=self.send, send_then=self.send_then,
            unwatch_topic=self.view.unwatch_topic)
        metadata_sent = failover.on_controller_failover(self.services)
        self.view.finish_failover()
        self._start_rebalance_timer()
        self.last_failover = FailoverTimings(
            epoch=fence.epoch.epoch, started=started, elected=elected, view_ready=view_ready,
            metadata_sent=metadata_sent, done=time.monotonic(), warm=self.config.hot_standby,
            exact=exact)

    def _resign(self, reason: str, *, stand_again: bool = True) -> None:
        fence = self.fence
        if fence is not None:
            fence.close()
        log.info("controller %d resigns: %s", self.broker_id, reason)
        self.resignations += 1
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        resigned = NotController(f"controller {self.broker_id} resigned")
        self._stop_awaiting(resigned)
        for event in self.events.drain():
            if isinstance(event, ev.VIEW_EVENTS) and not isinstance(
                    event, ev.ControllerNodeChanged):
                self.view.apply(event)
            else:
                self._fail_request(event, resigned)
        self.ctx.reset_controller_state()
        self.services = None
        self._reset_channel()  # what the old term queued is not sent
        if not self._closed:
            self.view.watch_partition_states(list(self.ctx.replicas))
        if stand_again and not self._closed:
            self.events.put(ev.Stand())

    def _stop_awaiting(self, exc: Exception) -> None:
        """No more waiting for answers (:meth:`send_then`): what waited fails with ``exc``."""
        for awaited in list(self._awaiting):
            if awaited.cancel():
                self._fail_request(awaited.then, exc)

    def _resign_after_error(self, reason: str) -> None:
        """Resign over an unexpected error: close the fence, give up ``/controller`` (fenced
        by this epoch: Kafka's triggerControllerMove) so that the election chooses again, and
        hold back from standing (see :class:`StandBackoff`)."""
        backoff = self.config.error_backoff
        now = backoff.clock.monotonic()
        if self._active_since is not None and now - self._active_since >= backoff.cap:
            self._errors_in_a_row = 0
        self._errors_in_a_row += 1
        self.error_resignations += 1
        hold = backoff.hold(self._errors_in_a_row)
        self.stand_held_until = now + hold
        self.view.suspect = True
        assert self.fence is not None
        self.fence.resign()
        self._resign(reason, stand_again=False)
        log.warning("controller %d will not stand again for %.1f s", self.broker_id, hold)
        if self.events.threaded and not self._closed:
            if self._stand_timer is not None:
                self._stand_timer.cancel()
            self._stand_timer = threading.Timer(hold, lambda: self.events.put(ev.Stand()))
            self._stand_timer.daemon = True
            self._stand_timer.start()

    def _start_rebalance_timer(self) -> None:
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
                self.services is not None):
            self._resign("session lost", stand_again=False)
        elif state is SessionState.CONNECTED and not self.active:
            self.view.watch_partition_states([])  # if arming it failed while disconnected
            self.view.wake()  # and a re-read it left behind
            self._stand()

    def _on_controller_node(self, stat: Stat | None) -> None:
        """Watch events report past states: while active, check the node itself before
        resigning over one."""
        if self.services is not None and self.fence is not None:
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

    @property
    def ctx(self) -> ControllerContext:
        """The context: the view's half (kept by :attr:`view`) and the state machines'."""
        return self.view.ctx

    def caught_up(self, revision: int, timeout: float = 10.0) -> bool:
        """Wait until this candidate's view has followed the store up to the write
        ``revision`` (see :meth:`View.caught_up`) and, a hot standby, has made ready what its
        failover would send."""
        deadline = time.monotonic() + timeout
        if not self.view.caught_up(revision, timeout):
            return False
        if self.active or not self.config.hot_standby:
            return True
        return (self._preparation.wait_ready(max(0.0, deadline - time.monotonic()))
                and self.events.wait_idle(max(0.0, deadline - time.monotonic())))

    def _wake_later(self, delay: float) -> Callable[[], None]:
        """Queue :class:`~statemachines.events.StandbyQuiet` in ``delay`` seconds; returns
        what cancels it."""
        timer = threading.Timer(delay, lambda: self.events.put(ev.StandbyQuiet()))
        timer.daemon = True
        timer.start()
        return timer.cancel


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
