"""The controller's context: its view of the store plus the state machines' states, indexed.

Two halves. The *view* (registered brokers with their epochs, topic assignments, leader and ISR
with partition epochs) mirrors the store; a standby keeps it warm from watches so that a failover
reads nothing. The *controller state* (partition and replica states, brokers shutting down,
reassignments and deletions in progress) exists only on the active controller and is rebuilt
from the view at failover.

Owned by the event thread alone. Mutations go through methods, which keep the indexes (the
partitions on each broker, the partitions each broker leads) consistent, so that a broker loss
touches its own partitions and never scans the cluster.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from coordinator.codecs import BrokerInfo, TopicAssignment, TopicPartition
from coordinator.metadata import RegisteredBroker
from elections.leader import LeaderAndIsr
from interbroker.requests import Endpoint, LiveBroker, UpdateMetadataPartition
from statemachines.states import PartitionState, ReplicaState

__all__ = ["ControllerContext", "OngoingReassignment", "ReplicaKey", "ReplicaStates",
           "live_broker_of"]

ReplicaKey = tuple[TopicPartition, int]
"""One replica: a partition on a broker."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OngoingReassignment:
    """A reassignment in progress, as the controller keeps it (Kafka's ReplicaAssignment with
    its adding and removing replicas): where the partition goes and where it was."""

    target: tuple[int, ...]
    original: tuple[int, ...]

    @property
    def adding(self) -> tuple[int, ...]:
        return tuple(r for r in self.target if r not in self.original)

    @property
    def removing(self) -> tuple[int, ...]:
        return tuple(r for r in self.original if r not in self.target)

    @property
    def replicas(self) -> tuple[int, ...]:
        """The full replica set while moving: target first, then the original ones leaving."""
        return self.target + self.removing


def _add_hosted(on: dict[int, set[TopicPartition]],
                pairs: Iterable[tuple[TopicPartition, tuple[int, ...]]]) -> None:
    """Each partition of ``pairs`` into the sets of its replicas' brokers in ``on``: the
    partitions of each replica list first, then each list's brokers given them at once
    (partitions share few lists, and a set's update runs in C where an add per (partition,
    replica) was a sixth of a cold load)."""
    groups: dict[tuple[int, ...], list[TopicPartition]] = {}
    for tp, replicas in pairs:
        group = groups.get(replicas)
        if group is None:
            groups[replicas] = [tp]
        else:
            group.append(tp)
    for replicas, group in groups.items():
        for b in replicas:
            hosted = on.get(b)
            if hosted is None:
                hosted = on[b] = set()
            hosted.update(group)


class ReplicaStates:
    """Replica states as a mapping, with the common case derived instead of stored.

    A replica that no transition has named since failover is in the state Kafka's
    ``ReplicaStateMachine.startup`` gives it: Online on a live broker, else Offline (Ineligible
    when its topic is being deleted). Only the states that differ from that rule are stored
    (Offline on a live broker, the deletion states, New), and Ineligible, which must outlast
    its broker's return. A failover stores nothing for 300,000 replicas of a healthy
    cluster, a broker's loss nothing for the replicas it held (they read Offline while it is
    gone, and its return takes them Online), and taking a broker's replicas Online again
    forgets them. A replica leaving a partition's assignment keeps the state it had (pinned
    by :meth:`ControllerContext.set_replicas`) until a transition to NonExistent drops it.
    """

    __slots__ = ("_ctx", "_explicit", "tracking")

    def __init__(self, ctx: ControllerContext) -> None:
        self._ctx = ctx
        self._explicit: dict[ReplicaKey, ReplicaState] = {}
        self.tracking = False
        """True on the active controller (from the replica machine's initialize)."""

    def derived(self, key: ReplicaKey) -> ReplicaState:
        tp, b = key
        ctx = self._ctx
        if b not in ctx.replicas.get(tp, ()):
            return ReplicaState.NON_EXISTENT
        if b in ctx.brokers:
            return ReplicaState.ONLINE
        return (ReplicaState.DELETION_INELIGIBLE if tp.topic in ctx.deleting
                else ReplicaState.OFFLINE)

    def get(self, key: ReplicaKey, default: ReplicaState | None = None) -> ReplicaState | None:
        state = self._explicit.get(key)
        if state is None:
            state = self.derived(key)
        return default if state is ReplicaState.NON_EXISTENT else state

    def states_of(self, keys: list[ReplicaKey], *, live_hosts: bool = False
                  ) -> list[ReplicaState]:
        """The state of each of ``keys`` (NonExistent for none), as :meth:`get` gives it, in
        one pass: a whole cluster's replicas move at once when it comes back. With
        ``live_hosts`` the caller vouches that each key's broker is live and in its
        partition's assignment (a returning broker's hosted partitions), where the rule gives
        Online: only the stored states are looked up."""
        if live_hosts:
            online = ReplicaState.ONLINE
            if not self._explicit:
                return [online] * len(keys)
            stored = self._explicit.get
            return [stored(key, online) for key in keys]
        explicit = self._explicit.get
        replicas = self._ctx.replicas.get
        brokers = self._ctx.brokers
        deleting = self._ctx.deleting
        absent, online = ReplicaState.NON_EXISTENT, ReplicaState.ONLINE
        offline, ineligible = ReplicaState.OFFLINE, ReplicaState.DELETION_INELIGIBLE
        out: list[ReplicaState] = []
        append = out.append
        for key in keys:
            state = explicit(key)
            if state is None:
                tp, b = key
                if b not in replicas(tp, ()):
                    state = absent
                elif b in brokers:
                    state = online
                else:
                    state = ineligible if tp.topic in deleting else offline
            append(state)
        return out

    def set_all(self, keys: Iterable[ReplicaKey], state: ReplicaState, *,
                live_hosts: bool = False) -> None:
        """``self[key] = state`` for each of ``keys``, in one pass. ``live_hosts`` as for
        :meth:`states_of`: Online is then what the rule gives each, and is stored for none."""
        stored = self._explicit
        if state is ReplicaState.OFFLINE:
            self._set_offline(keys)
            return
        if state is not ReplicaState.ONLINE:
            stored.update(dict.fromkeys(keys, state))
            return
        if live_hosts:
            if stored:
                for key in keys:
                    stored.pop(key, None)
            return
        replicas = self._ctx.replicas.get
        brokers = self._ctx.brokers
        forget = stored.pop
        for key in keys:
            tp, b = key
            if b in brokers and b in replicas(tp, ()):
                forget(key, None)
            else:
                stored[key] = state

    def _set_offline(self, keys: Iterable[ReplicaKey]) -> None:
        """Offline for each of ``keys``. Stored where the rule gives another state: on a live
        broker (a controlled shutdown's followers, replicas a reassignment removes), of a
        topic being deleted (the rule: Ineligible), out of the assignment (NonExistent).
        Forgotten where the rule gives Offline already, on a broker that is not live: the
        state a failover derives for the same view. Stored one by one, a whole cluster lost
        at a million partitions kept three million entries on the active controller, some
        300 MB, and its brokers' return took them out again one by one."""
        stored = self._explicit
        ctx = self._ctx
        brokers, deleting, replicas = ctx.brokers, ctx.deleting, ctx.replicas.get
        offline = ReplicaState.OFFLINE
        forget = stored.pop
        for key in keys:
            tp, b = key
            if b in brokers or (deleting and tp.topic in deleting) or b not in replicas(tp, ()):
                stored[key] = offline
            elif stored:
                forget(key, None)

    def __getitem__(self, key: ReplicaKey) -> ReplicaState:
        state = self.get(key)
        if state is None:
            raise KeyError(key)
        return state

    def __contains__(self, key: object) -> bool:
        return self.get(key) is not None  # type: ignore[arg-type]

    def __setitem__(self, key: ReplicaKey, state: ReplicaState) -> None:
        self.set_all((key,), state)

    def pin(self, key: ReplicaKey) -> None:
        """Store the derived state of ``key``: its replica is about to leave the assignment."""
        if self.tracking and key not in self._explicit:
            state = self.derived(key)
            if state is not ReplicaState.NON_EXISTENT:
                self._explicit[key] = state

    def added(self, key: ReplicaKey) -> None:
        """A replica joined the assignment after failover: it is NonExistent until a
        transition (New) names it."""
        if self.tracking and key not in self._explicit:
            self._explicit[key] = ReplicaState.NON_EXISTENT

    def pop(self, key: ReplicaKey, default: ReplicaState | None = None) -> ReplicaState | None:
        state = self.get(key, default)
        self._explicit.pop(key, None)
        return state

    def clear(self) -> None:
        self._explicit.clear()
        self.tracking = False

    def drop_topic(self, topic: str) -> None:
        self._explicit = {k: s for k, s in self._explicit.items() if k[0].topic != topic}

    def explicit(self) -> dict[ReplicaKey, ReplicaState]:
        """The stored states (read-only use: the hot paths test membership in it)."""
        return self._explicit

    def start_tracking(self, explicit: dict[ReplicaKey, ReplicaState]) -> None:
        self._explicit = explicit
        self.tracking = True

    def __iter__(self) -> Iterator[ReplicaKey]:
        seen = set()
        for tp, replicas in self._ctx.replicas.items():
            for b in replicas:
                key = (tp, b)
                seen.add(key)
                if self.get(key) is not None:
                    yield key
        for key in list(self._explicit):
            if key not in seen:
                yield key

    def items(self) -> Iterator[tuple[ReplicaKey, ReplicaState]]:
        for key in self:
            yield key, self[key]

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __bool__(self) -> bool:
        return any(True for _ in self)


def live_broker_of(info: BrokerInfo) -> LiveBroker:
    endpoints = []
    for listener in info.listeners:
        name, _, address = listener.partition("://")
        host, _, port = address.rpartition(":")
        endpoints.append(Endpoint(listener=name, host=host or info.host,
                                  port=int(port) if port.isdigit() else info.port,
                                  security_protocol=info.security_protocol_map.get(name, name)))
    return LiveBroker(id=info.id, endpoints=tuple(endpoints), rack=info.rack)


@dataclass(slots=True, eq=False)
class FullMetadata:
    """One build: the entries in order, the partitions in that order, and the brokers that
    were dead (offline replicas) when they were built. Each partition's place in the entries
    (``index``) is worked out when a patch first needs it, not by the build: at a million
    partitions that was a sixth of a cold failover's time before its metadata went out."""

    entries: tuple[UpdateMetadataPartition, ...]
    order: Sequence[TopicPartition]
    dead: frozenset[int]
    took: float = 0.0  # seconds the build took
    done: float = field(default_factory=time.monotonic)
    _index: dict[TopicPartition, int] | None = None
    topics: frozenset[str] | None = None
    """Every topic of the entries (some with none, perhaps), or None when not known."""

    @property
    def index(self) -> dict[TopicPartition, int]:
        if self._index is None:
            self._index = dict(zip(self.order, range(len(self.order)), strict=True))
        return self._index


class ControllerContext:
    def __init__(self) -> None:
        # --- the view ---
        self.brokers: dict[int, RegisteredBroker] = {}
        self.live_brokers: dict[int, LiveBroker] = {}
        self.topics: dict[str, TopicAssignment] = {}
        self.topic_versions: dict[str, int] = {}
        self.replicas: dict[TopicPartition, tuple[int, ...]] = {}
        self.leaders: dict[TopicPartition, LeaderAndIsr] = {}
        self.unstated = 0
        """How many partitions of ``replicas`` have no entry in ``leaders`` (a state not read
        or not written yet): a failover reads those again, and needs this to know of none
        without a pass over a million partitions."""
        self._replicas_on: dict[int, set[TopicPartition]] | None = {}
        """Per broker named in an assignment, the partitions it hosts. None after a cold load
        until first asked for (:meth:`replicas_on_all` builds it from ``replicas``): a cold
        failover's metadata needs only the brokers (:meth:`hosting_brokers`), and building it
        while a million partitions were loaded was part of what kept that metadata back."""
        self._hosts: set[int] = set()
        """While ``_replicas_on`` is None: every broker named in an assignment since it was
        dropped (a few may host nothing any more)."""
        self._led_by: dict[int, set[TopicPartition]] = {}
        self._partitions_of: dict[str, set[TopicPartition]] = {}
        self.full_metadata: FullMetadata | None = None
        """The last full UpdateMetadata built (statemachines.full_metadata)."""
        self.partition_order: list[TopicPartition] | None = None
        """Every partition of ``replicas`` in the full UpdateMetadata's order (by topic, then
        partition), as its last build worked it out; None once a partition is added or
        removed. Kept when that build is dropped (:meth:`_changed`): a failover in the middle
        of a whole cluster's return builds anew, in the same order (at a million partitions
        working it out took a sixth of the build)."""
        self.metadata_changed: set[TopicPartition] | None = None
        """Partitions whose leader or replicas changed since it was built (None: no build, or
        too many changed to patch it: the next one is built anew)."""
        # --- controller state (active only) ---
        self.partition_states: dict[TopicPartition, PartitionState] = {}
        self.leaderless: set[TopicPartition] = set()
        """Partitions in state New or Offline: the ones a broker joining may bring online."""
        self.election_errors: set[TopicPartition] = set()
        """Leaderless partitions whose last election failed for a reason other than finding no
        eligible replica (a write that failed, a state node missing): any broker joining
        elects them again, as Kafka's controller retries every offline partition then. The
        others wait for a broker of their own replicas (``handlers.brokers``). Always a subset
        of ``leaderless``: wherever a partition leaves that, it leaves this."""
        self.replica_states = ReplicaStates(self)
        self.shutting_down: set[int] = set()
        self.reassignments: dict[TopicPartition, OngoingReassignment] = {}
        self.deleting: set[str] = set()
        self.deletion_ineligible: set[str] = set()

    # --- brokers -------------------------------------------------------------------------

    def add_broker(self, broker: RegisteredBroker) -> None:
        self.brokers[broker.info.id] = broker
        self.live_brokers[broker.info.id] = live_broker_of(broker.info)

    def remove_broker(self, broker_id: int) -> None:
        self.brokers.pop(broker_id, None)
        self.live_brokers.pop(broker_id, None)
        self.shutting_down.discard(broker_id)

    def broker_epochs(self) -> dict[int, int]:
        return {b: r.epoch for b, r in self.brokers.items()}

    def live_ids(self) -> frozenset[int]:
        """Brokers that may lead and stay in the ISR: registered and not shutting down."""
        if not self.shutting_down:
            return frozenset(self.brokers)
        return frozenset(b for b in self.brokers if b not in self.shutting_down)

    def live_or_shutting_down(self) -> frozenset[int]:
        return frozenset(self.brokers)

    def replicas_on(self, broker_id: int) -> set[TopicPartition]:
        return self.replicas_on_all().get(broker_id, set())

    def replicas_on_all(self) -> dict[int, set[TopicPartition]]:
        """Every broker named in an assignment (live or not) and the partitions it hosts."""
        on = self._replicas_on
        if on is None:
            on = {}
            _add_hosted(on, self.replicas.items())
            self._replicas_on, self._hosts = on, set()
        return on

    def hosting_brokers(self) -> Collection[int]:
        """Every broker named in an assignment, without building :meth:`replicas_on_all`
        (after a cold load it may name a few that host nothing any more)."""
        on = self._replicas_on
        return self._hosts if on is None else on.keys()

    def leaders_by_broker(self) -> dict[int, set[TopicPartition]]:
        """Every broker named as a leader (live or not) and the partitions it leads."""
        return self._led_by

    def led_by(self, broker_id: int) -> set[TopicPartition]:
        return self._led_by.get(broker_id, set())

    def partitions_of(self, topic: str) -> set[TopicPartition]:
        return self._partitions_of.get(topic, set())

    def partitions_by_topic(self) -> dict[str, set[TopicPartition]]:
        """Every topic with partitions in the view and its partitions (every key of
        ``replicas`` is in exactly one of these sets)."""
        return self._partitions_of

    # --- assignments ---------------------------------------------------------------------

    def set_topic(
        self, assignment: TopicAssignment, version: int, *, only_new: bool = False,
        every: list[TopicPartition] | None = None,
    ) -> list[TopicPartition]:
        """Record a topic's assignment; returns the partitions that are new to the context.

        With ``only_new`` the replicas of known partitions are kept (the active controller's
        view of them is authoritative; Kafka ignores edits of existing partitions). ``every``
        gets each of the assignment's partitions appended (the keys the context holds: a
        cold load reads their states with them rather than another object per partition).
        """
        topic = assignment.topic
        self.topics[topic] = assignment
        self.topic_versions[topic] = version
        if (topic not in self._partitions_of and not self.replica_states.tracking
                and self.metadata_changed is None):
            return self._set_new_topic(topic, assignment.partitions, every)
        added = []
        keep = every.append if every is not None else None
        for p, replicas in assignment.partitions.items():
            tp = TopicPartition(topic, p)
            if keep is not None:
                keep(tp)
            if tp not in self.replicas:
                added.append(tp)
            elif only_new:
                continue
            self.set_replicas(tp, replicas)
        return added

    def _set_new_topic(self, topic: str, partitions: Mapping[int, tuple[int, ...]],
                       every: list[TopicPartition] | None) -> list[TopicPartition]:
        """set_topic of a topic none of whose partitions the context holds, with no replica
        states tracked and no metadata changes noted (a cold load's every topic): what
        set_replicas would do per partition, a topic at a time."""
        new = tuple.__new__  # (a named tuple's constructor is a Python call: a million here)
        tps = [new(TopicPartition, (topic, p)) for p in partitions]
        lists = [tuple(r) for r in partitions.values()]
        self.replicas.update(zip(tps, lists, strict=True))
        leaders = self.leaders
        self.unstated += (sum(1 for tp in tps if tp not in leaders) if leaders else len(tps))
        on = self._replicas_on
        if not on:  # a cold load: the brokers only, the rest when first asked for
            self._replicas_on = None
            hosts = self._hosts
            for replicas in set(lists):
                hosts.update(replicas)
        else:
            _add_hosted(on, zip(tps, lists, strict=True))
        if tps:
            self._partitions_of[topic] = set(tps)
            self.partition_order = None
        if every is not None:
            every.extend(tps)
        return tps

    def keep_full_metadata(self, built: FullMetadata) -> None:
        """Keep a full UpdateMetadata build; changes are noted against it from here."""
        self.full_metadata = built
        self.metadata_changed = set()

    def _changed(self, tp: TopicPartition) -> None:
        changed = self.metadata_changed
        if changed is not None:
            changed.add(tp)
            if len(changed) > len(self.leaders) // 2:  # it will be built anew: let it go
                self.full_metadata = self.metadata_changed = None

    def set_replicas(self, tp: TopicPartition, replicas: Iterable[int]) -> None:
        new = tuple(replicas)
        old = self.replicas.get(tp)  # None: new to the context (every partition of a cold load)
        if old == new:
            return
        states, on = self.replica_states, self._replicas_on
        if old:
            for b in old:
                if b not in new:
                    states.pin((tp, b))
                    hosted = on.get(b) if on is not None else None
                    if hosted is not None:
                        hosted.discard(tp)
        tracking = states.tracking  # (no replica states to keep before a failover's end)
        for b in new:
            if tracking and (old is None or b not in old):
                states.added((tp, b))
            if on is None:
                self._hosts.add(b)
                continue
            hosted = on.get(b)
            if hosted is None:
                hosted = on[b] = set()
            hosted.add(tp)
        self.replicas[tp] = new
        if self.metadata_changed is not None:
            self._changed(tp)
        if old is None:
            self.partition_order = None
            if tp not in self.leaders:
                self.unstated += 1
            of = self._partitions_of.get(tp.topic)
            if of is None:  # (not setdefault: that builds a set per call)
                of = self._partitions_of[tp.topic] = set()
            of.add(tp)

    def remove_topic(self, topic: str) -> None:
        self.full_metadata = self.metadata_changed = None
        if topic in self._partitions_of:
            self.partition_order = None
        self.topics.pop(topic, None)
        self.topic_versions.pop(topic, None)
        for tp in self._partitions_of.pop(topic, set()):
            if tp in self.replicas and tp not in self.leaders:
                self.unstated -= 1
            hosted_by = self._replicas_on
            for b in self.replicas.pop(tp, ()):
                on = hosted_by.get(b) if hosted_by is not None else None
                if on is not None:
                    on.discard(tp)
            self.remove_leader(tp)
            self.partition_states.pop(tp, None)
            self.leaderless.discard(tp)
            self.election_errors.discard(tp)
            self.reassignments.pop(tp, None)
        self.replica_states.drop_topic(topic)
        self.deleting.discard(topic)
        self.deletion_ineligible.discard(topic)

    # --- leader and ISR ------------------------------------------------------------------

    def set_leader(self, tp: TopicPartition, value: LeaderAndIsr) -> None:
        old = self.leaders.get(tp)
        if old is None:
            if tp in self.replicas:
                self.unstated -= 1
        elif old.leader != value.leader:
            led = self._led_by.get(old.leader)
            if led is not None:
                led.discard(tp)
        self.leaders[tp] = value
        led = self._led_by.get(value.leader)
        if led is None:  # (not setdefault: that builds a set per call)
            led = self._led_by[value.leader] = set()
        led.add(tp)
        if self.metadata_changed is not None:
            self._changed(tp)

    def remove_leader(self, tp: TopicPartition) -> None:
        old = self.leaders.pop(tp, None)
        if self.metadata_changed is not None:
            self._changed(tp)
        if old is not None:
            if tp in self.replicas:
                self.unstated += 1
            led = self._led_by.get(old.leader)
            if led is not None:
                led.discard(tp)

    # --- controller state ----------------------------------------------------------------

    def reset_controller_state(self) -> None:
        """Forget what only an active controller knows (on resignation)."""
        self.partition_states.clear()
        self.leaderless.clear()
        self.election_errors.clear()
        self.replica_states.clear()
        self.shutting_down.clear()
        self.reassignments.clear()
        self.deleting.clear()
        self.deletion_ineligible.clear()

    def is_deleting(self, tp: TopicPartition) -> bool:
        return tp.topic in self.deleting

    def replica_online(self, tp: TopicPartition, broker_id: int) -> bool:
        if broker_id not in self.brokers:
            return False
        explicit = self.replica_states.explicit()
        return not explicit or explicit.get((tp, broker_id)) is not ReplicaState.OFFLINE
