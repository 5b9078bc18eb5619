"""The nemesis of the fault harness: faults scheduled from a seed, injected into a live
:class:`~tests.faults.cluster.FaultCluster` one at a time, each held for its duration and healed.

:func:`plan` turns a seed into a schedule of :class:`PlannedFault`\\ s: which kind, when, for how
long, and a seeded number (``pick``) that chooses the target. The plan is a pure function of its
arguments, so a seed that found a defect finds it again; it never resolves a target, because
which broker leads a partition or holds the controller is only known at the moment of injection.
Faults never overlap, and a quiet gap follows every heal, so a window of the history is
attributable to one kind; every fault is planned to be healed (its heal allowance included)
before the run's duration ends, and one that does not fit is left out.

:class:`Nemesis` runs a plan in a thread of its own (:meth:`Nemesis.run`): at each fault's time
it resolves the target from ``pick`` against the live cluster (the controller now, the leader of
partition ``pick % n`` of topic ``pick % len(topics)``, member ``pick % 3``), records
``fault_start(kind, target)`` in the history, injects, holds, heals and records ``fault_end``.
The target text names the resolved brokers or members and their role (``b2 (controller)``), so a
window in the history or the timeline says what was hit. Under faults the coordinator may be
slow or briefly unreachable, so its reads are retried for a few seconds; when a role cannot be
resolved (no controller right now, a partition without a leader) another target is chosen by the
seed and the target text says so.

The "failover during" kinds start an operation through the product's own paths and SIGKILL the
controller while it runs: a reassignment (:meth:`coordinator.admin.Admin.reassign`), the deletion
of a scratch topic the nemesis made itself (:meth:`~coordinator.admin.Admin.delete_topic`), a
broker's controlled shutdown (SIGTERM, which ``partctl broker start`` answers with one). After the
heal the nemesis waits for the operation to complete (the reassignment done, the scratch topic
gone, the broker stopped after "controlled shutdown succeeded"); one that does not within its
wait is checked again by :meth:`Nemesis.heal_all`, and then it is an error in
:attr:`Nemesis.errors`.

Nothing raises out of :meth:`Nemesis.run`: an error while injecting or healing is said and kept,
and whatever that fault had already done is undone. :meth:`Nemesis.heal_all` brings everything
back whatever happened (network faults healed, paused processes resumed, killed brokers and
members started) and waits until every broker serves and is registered, or raises
:class:`NemesisError` with one line saying what is missing.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import random
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from broker.cluster import BrokerStartError, LaunchedBroker
from coordinator.admin import Admin
from coordinator.codecs import TopicPartition
from coordinator.metadata import MetadataClient, RequestInProgress, TopicExists
from tests.faults.cluster import FaultCluster
from tests.faults.history import History
from tests.faults.net import Fault

__all__ = ["KINDS", "Nemesis", "NemesisError", "PlannedFault", "plan"]

log = logging.getLogger(__name__)
T = TypeVar("T")

KINDS: tuple[str, ...] = (
    "kill-controller", "kill-leader", "kill-follower", "pause-controller", "pause-leader",
    "kill-member", "kill-majority", "isolate-leader-from-followers", "isolate-from-coordinator",
    "split", "one-way", "slow-links", "failover-during-reassignment", "failover-during-deletion",
    "failover-during-controlled-shutdown", "bounce",
)


@dataclass(frozen=True, slots=True)
class _Shape:
    shortest: float
    longest: float
    heal: float
    """Seconds the heal itself is allowed in the plan (a broker restart, an operation's check)."""


# Pauses are held past the brokers' 4 s session (6-10 s); kills and partitions long enough for
# the session to expire and a new leader or controller to act; the failovers long enough for the
# new controller to take the operation over.
_SHAPES: dict[str, _Shape] = {
    "kill-controller": _Shape(5, 12, 6),
    "kill-leader": _Shape(5, 12, 6),
    "kill-follower": _Shape(5, 12, 6),
    "pause-controller": _Shape(6, 10, 2),
    "pause-leader": _Shape(6, 10, 2),
    "kill-member": _Shape(5, 12, 4),
    "kill-majority": _Shape(4, 10, 6),
    "isolate-leader-from-followers": _Shape(6, 14, 2),
    "isolate-from-coordinator": _Shape(6, 14, 2),
    "split": _Shape(6, 14, 2),
    "one-way": _Shape(6, 14, 2),
    "slow-links": _Shape(5, 12, 2),
    "failover-during-reassignment": _Shape(6, 12, 10),
    "failover-during-deletion": _Shape(6, 12, 10),
    "failover-during-controlled-shutdown": _Shape(6, 12, 15),
    "bounce": _Shape(6, 10, 4),
}
assert set(_SHAPES) == set(KINDS)

QUIET = (3.0, 8.0)
"""The quiet gap after each fault's heal (seconds, drawn uniformly)."""
MIN_QUIET = 2.0
"""Never inject sooner than this after the previous heal ended, even when running late."""
RESOLVE_SECONDS = 10.0
"""How long a coordinator read is retried before the nemesis gives up on it."""
CHECK_SECONDS = 20.0
"""How long a heal waits for its operation to complete before leaving it to heal_all."""
SHUTDOWN_SECONDS = 45.0
"""How long a broker's controlled shutdown may take (3 attempts 5 s apart, a failover)."""
RESTART_SECONDS = 90.0
"""How long a killed broker's restart may take (its old session expiring included)."""
SCRATCH = "nemesis-scratch"


@dataclass(frozen=True)
class PlannedFault:
    """One fault of a plan: injected ``at`` seconds after the run's start, held ``duration``
    seconds, its target chosen at injection from ``pick``."""

    at: float
    kind: str
    duration: float
    pick: int

    @property
    def end(self) -> float:
        return self.at + self.duration


def heal_allowance(kind: str) -> float:
    """The seconds the plan leaves after a fault of ``kind`` for its heal."""
    return _SHAPES[kind].heal


def plan(seed: int, duration: float, kinds: Sequence[str] = KINDS) -> list[PlannedFault]:
    """The faults of a run of ``duration`` seconds from ``seed``: one at a time, each followed
    by its heal allowance and a quiet gap, all healed before ``duration``.

    Kinds are drawn from a shuffled deck (every kind once before any twice); a kind that does
    not fit in the time left is left out and the next one of the deck tried. Deterministic:
    the same arguments give the same plan."""
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise ValueError(f"unknown fault kind(s) {unknown} (known: {', '.join(KINDS)})")
    if not kinds:
        return []
    rng = random.Random(seed)
    deck: list[str] = []
    faults: list[PlannedFault] = []
    t = rng.uniform(*QUIET)
    while True:
        if not deck:
            deck = list(dict.fromkeys(kinds))
            rng.shuffle(deck)
        fitting = [k for k in deck if t + _SHAPES[k].shortest + _SHAPES[k].heal <= duration]
        if not fitting:
            break
        kind = fitting[0]
        deck.remove(kind)
        shape = _SHAPES[kind]
        longest = min(shape.longest, duration - t - shape.heal)
        length = round(rng.uniform(shape.shortest, longest), 3)
        faults.append(PlannedFault(at=round(t, 3), kind=kind, duration=length,
                                   pick=rng.randrange(1 << 30)))
        t += length + shape.heal + rng.uniform(*QUIET)
    return faults


class NemesisError(RuntimeError):
    """The cluster could not be brought back (or a target not resolved); one line says why."""


@dataclass(eq=False)
class Held:
    """A fault in place: what it hit and how to undo it (steps run last first)."""

    kind: str
    target: str
    brokers: tuple[int, ...] = ()
    """Brokers the fault touched (killed, paused, cut, stopped)."""
    members: tuple[int, ...] = ()
    """Coordinator members (numbers, 1-based) the fault killed."""
    undo: list[tuple[str, Callable[[], None]]] = field(default_factory=list)
    checks: list[tuple[str, Callable[[], str | None]]] = field(default_factory=list)
    """After the heal: what must have completed, and a probe returning why not (None: done)."""
    record: int | None = None
    started: float = 0.0


@dataclass(frozen=True, slots=True)
class _Partition:
    tp: TopicPartition
    replicas: tuple[int, ...]
    leader: int
    isr: tuple[int, ...]


class Nemesis:
    """Injects planned faults into ``cluster`` and records them in ``history``; ``topics`` are
    the workload's (partitions to hit, reassignments to run; never deleted)."""

    def __init__(self, cluster: FaultCluster, history: History, topics: Sequence[str], *,
                 say: Callable[[str], None] = log.info) -> None:
        if not topics:
            raise ValueError("the nemesis needs at least one workload topic")
        self.cluster = cluster
        self.history = history
        self.topics = list(topics)
        self.say = say
        self.injected: collections.Counter[str] = collections.Counter()
        self.fault_seconds = 0.0
        self.errors: list[str] = []
        self.current: Held | None = None
        """The fault in place now (None between faults)."""
        self._lock = threading.RLock()
        self._pending: list[tuple[str, Callable[[], str | None]]] = []
        self._scratch = 0

    # --- the run -----------------------------------------------------------------------------

    def run(self, faults: Sequence[PlannedFault], stop: threading.Event, start: float) -> None:
        """Inject ``faults`` at their times after ``start`` (``time.monotonic()``), each held
        for its duration, then healed. Returns when done or soon after ``stop`` is set (healing
        the fault it holds). Never raises: errors are said and kept in :attr:`errors`."""
        last_heal = -float("inf")
        for fault in faults:
            due = max(start + fault.at, last_heal + MIN_QUIET)
            if stop.wait(max(0.0, due - time.monotonic())):
                return
            held = self._inject(fault)
            if held is not None:
                stop.wait(max(0.0, held.started + fault.duration - time.monotonic()))
                self._heal(held)
            last_heal = time.monotonic()
            if stop.is_set():
                return

    def _error(self, text: str) -> None:
        line = " ".join(text.split())
        with self._lock:
            self.errors.append(line)
        self.say(f"nemesis: {line}")

    def _inject(self, fault: PlannedFault) -> Held | None:
        inject = getattr(self, "_" + fault.kind.replace("-", "_"))
        held = Held(kind=fault.kind, target="?")
        try:
            inject(fault, held)
        except Exception as exc:  # noqa: BLE001 - said and kept; what was done is undone
            self._error(f"{fault.kind} (pick {fault.pick}): injecting failed: "
                        f"{type(exc).__name__}: {exc}")
            with self._lock:
                self.current = held
            self._heal(held)
            return None
        return held

    def _begin(self, held: Held, target: str, *, brokers: Sequence[int] = (),
               members: Sequence[int] = ()) -> None:
        """Record the fault's start: called by an injector just before it strikes."""
        held.target = target
        held.brokers = tuple(brokers)
        held.members = tuple(members)
        held.started = time.monotonic()
        held.record = self.history.fault_start(held.kind, target)
        with self._lock:
            self.current = held
            self.injected[held.kind] += 1
        self.say(f"nemesis: {held.kind}: {target}")

    def _heal(self, held: Held) -> None:
        """Undo ``held`` (every step, last first, each on its own), end its window, then wait
        for its operations to complete (those that do not yet are left to heal_all)."""
        with self._lock:
            if self.current is not held:
                return  # healed already (heal_all, from another thread)
            self.current = None
        while held.undo:
            what, step = held.undo.pop()
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - the other steps still run
                self._error(f"{held.kind} {held.target}: healing ({what}) failed: "
                            f"{type(exc).__name__}: {exc}")
        if held.record is not None:
            self.history.fault_end(held.record)
            with self._lock:
                self.fault_seconds += time.monotonic() - held.started
            self.say(f"nemesis: healed {held.kind}: {held.target}")
        for what, probe in held.checks:
            reason = _wait_done(probe, CHECK_SECONDS)
            if reason is not None:
                with self._lock:
                    self._pending.append((f"{held.kind} {held.target}: {what}", probe))

    # --- reading the live cluster ------------------------------------------------------------

    def _read(self, fn: Callable[[MetadataClient], T], what: str,
              seconds: float = RESOLVE_SECONDS) -> T:
        """``fn`` on a coordinator session from the client host, retried for ``seconds``."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                return self.cluster.on_coordinator(fn, timeout=5.0)
            except Exception as exc:  # noqa: BLE001 - retried, then said in one line
                if time.monotonic() > deadline:
                    raise NemesisError(f"cannot read {what} from the coordinator: "
                                       f"{type(exc).__name__}: {exc}") from exc
            time.sleep(0.5)

    def _controller(self) -> int | None:
        def read(meta: MetadataClient) -> int | None:
            held = meta.controller()
            return None if held is None else held[0].broker_id
        deadline = time.monotonic() + RESOLVE_SECONDS
        while True:
            found = self._read(read, "the controller")
            if found is not None and self._running(found):
                return found
            if time.monotonic() > deadline:
                return None
            time.sleep(0.5)

    def _running(self, broker: int) -> bool:
        launched = self.cluster.brokers.get(broker)
        return launched is not None and launched.running() and broker not in self.cluster.paused

    def _by_pick(self, pick: int, exclude: Sequence[int] = ()) -> int:
        """A running broker chosen by ``pick`` (not one of ``exclude`` when there is another)."""
        ids = [i for i in self.cluster.ids if self._running(i)] or list(self.cluster.ids)
        choice = [i for i in ids if i not in exclude] or ids
        return choice[pick % len(choice)]

    def _partition(self, pick: int) -> _Partition | None:
        """The partition ``pick`` names (partition ``pick % n`` of topic ``pick %
        len(topics)``) or, when it has no live leader, the next one that has; None if none."""
        def read(meta: MetadataClient) -> list[_Partition]:
            assignments = meta.assignments(self.topics)
            tps = [TopicPartition(topic=t, partition=p) for t in self.topics
                   if t in assignments for p in sorted(assignments[t].value.partitions)]
            states = meta.partition_states(tps)
            out = []
            for tp in tps:
                state = states.get(tp)
                replicas = tuple(assignments[tp.topic].value.partitions[tp.partition])
                if state is not None:
                    out.append(_Partition(tp, replicas, state.value.leader,
                                          tuple(state.value.isr)))
            return out
        found = self._read(read, "the partition states")
        by_topic: dict[str, list[_Partition]] = collections.defaultdict(list)
        for part in found:
            by_topic[part.tp.topic].append(part)
        topic = self.topics[pick % len(self.topics)]
        first = by_topic.get(topic, [])
        start = first[pick % len(first)] if first else None
        ordered = ([start] if start else []) + [p for p in first if p is not start] + [
            p for t in self.topics if t != topic for p in by_topic.get(t, [])]
        for part in ordered:
            if part.leader >= 0 and self._running(part.leader):
                return part
        return None

    def _leader(self, pick: int) -> tuple[int, str, _Partition | None]:
        part = self._partition(pick)
        if part is None:
            broker = self._by_pick(pick)
            return broker, f"b{broker} (no partition of {self.topics} has a live leader: " \
                           f"picked by seed)", None
        role = f"leader of {part.tp.topic}-{part.tp.partition}"
        return part.leader, f"b{part.leader} ({role}{self._also_controller(part.leader)})", part

    def _also_controller(self, broker: int) -> str:
        with contextlib.suppress(NemesisError):
            if self._read(lambda m: (c := m.controller()) is not None
                          and c[0].broker_id == broker, "the controller", 3.0):
                return ", controller"
        return ""

    def _controller_target(self, pick: int) -> tuple[int, str]:
        ctrl = self._controller()
        if ctrl is None:
            broker = self._by_pick(pick)
            return broker, f"b{broker} (no controller found: picked by seed)"
        return ctrl, f"b{ctrl} (controller)"

    # --- broker and member steps ---------------------------------------------------------------

    def _kill(self, held: Held, broker: int) -> None:
        """SIGKILL ``broker``; its heal starts it again (same id and log directory)."""
        held.undo.append((f"restart b{broker}", lambda: self._restart(broker)))
        self.cluster.kill_broker(broker)

    def _restart(self, broker: int) -> None:
        if broker in self.cluster.paused:
            self.cluster.resume_broker(broker)
        if not self.cluster.broker(broker).running():
            self._launch(broker, RESTART_SECONDS)

    def _launch(self, broker: int, seconds: float) -> None:
        """Start ``broker`` again and wait until it serves. A broker started while its
        killed predecessor's registration lives (its session not yet expired) waits for it
        to go, up to its session timeout and a margin, then exits ("already registered by
        another session"): started again until that registration is gone, as a supervisor
        would."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                self.cluster.restart_broker(broker, max(1.0, deadline - time.monotonic()))
                return
            except BrokerStartError as exc:
                if "already registered" not in str(exc) or time.monotonic() > deadline:
                    raise
            time.sleep(0.25)

    def _pause(self, held: Held, broker: int) -> None:
        held.undo.append((f"resume b{broker}", lambda: self._resume(broker)))
        self.cluster.pause_broker(broker)

    def _resume(self, broker: int) -> None:
        if broker in self.cluster.paused:
            self.cluster.resume_broker(broker)

    def _kill_members(self, held: Held, numbers: Sequence[int]) -> None:
        ensemble = self.cluster.ensemble
        assert ensemble is not None, "the cluster is not started"
        members = [ensemble.members[n - 1] for n in numbers]

        def start_again() -> None:
            for member in members:
                member.start()
            self.cluster.ensemble_call(ensemble.wait_serving, 60.0, ensemble.members)
        held.undo.append((f"start member(s) {list(numbers)}", start_again))
        for member in members:
            member.kill()

    def _member_roles(self) -> dict[int, str | None]:
        ensemble = self.cluster.ensemble
        assert ensemble is not None, "the cluster is not started"
        return {m.number: self.cluster.ensemble_call(m.role) for m in ensemble.members}

    def _network(self, held: Held, fault: Fault) -> None:
        held.undo.append((fault.description, fault.heal))

    @property
    def _net(self):  # noqa: ANN202 - the started cluster's Network
        assert self.cluster.network is not None, "the cluster is not started"
        return self.cluster.network

    # --- the kinds ---------------------------------------------------------------------------

    def _kill_controller(self, fault: PlannedFault, held: Held) -> None:
        broker, target = self._controller_target(fault.pick)
        self._begin(held, target, brokers=[broker])
        self._kill(held, broker)

    def _kill_leader(self, fault: PlannedFault, held: Held) -> None:
        broker, target, _ = self._leader(fault.pick)
        self._begin(held, target, brokers=[broker])
        self._kill(held, broker)

    def _kill_follower(self, fault: PlannedFault, held: Held) -> None:
        part = self._partition(fault.pick)
        followers = [] if part is None else [
            r for r in part.isr if r != part.leader and self._running(r)]
        if part is None or not followers:
            broker = self._by_pick(fault.pick)
            target = f"b{broker} (no partition with a live follower: picked by seed)"
        else:
            broker = followers[fault.pick % len(followers)]
            target = f"b{broker} (follower of {part.tp.topic}-{part.tp.partition})"
        self._begin(held, target, brokers=[broker])
        self._kill(held, broker)

    def _pause_controller(self, fault: PlannedFault, held: Held) -> None:
        broker, target = self._controller_target(fault.pick)
        self._begin(held, target, brokers=[broker])
        self._pause(held, broker)

    def _pause_leader(self, fault: PlannedFault, held: Held) -> None:
        broker, target, _ = self._leader(fault.pick)
        self._begin(held, target, brokers=[broker])
        self._pause(held, broker)

    def _kill_member(self, fault: PlannedFault, held: Held) -> None:
        roles = self._member_roles()
        number = sorted(roles)[fault.pick % len(roles)]
        self._begin(held, f"coord{number} ({roles[number] or 'not serving'})",
                    members=[number])
        self._kill_members(held, [number])

    def _kill_majority(self, fault: PlannedFault, held: Held) -> None:
        roles = self._member_roles()
        numbers = sorted(roles)
        chosen = [numbers[(fault.pick + k) % len(numbers)] for k in range(len(numbers) // 2 + 1)]
        names = ", ".join(f"coord{n} ({roles[n] or 'not serving'})" for n in chosen)
        self._begin(held, f"{names}: a majority", members=chosen)
        self._kill_members(held, chosen)

    def _isolate_leader_from_followers(self, fault: PlannedFault, held: Held) -> None:
        broker, target, part = self._leader(fault.pick)
        others = ([r for r in part.replicas if r != broker] if part is not None
                  else [i for i in self.cluster.ids if i != broker])
        self._begin(held, f"{target} cut from {', '.join(f'b{o}' for o in others)}",
                    brokers=[broker, *others])
        for other in others:
            self._network(held, self._net.cut(f"b{broker}", f"b{other}"))

    def _isolate_from_coordinator(self, fault: PlannedFault, held: Held) -> None:
        broker = self._by_pick(fault.pick)
        role = "controller" if self._controller() == broker else "broker"
        self._begin(held, f"b{broker} ({role}) cut from coord1-3", brokers=[broker])
        self._network(held, self._net.partition([f"b{broker}"], ["coord1", "coord2", "coord3"]))

    def _split(self, fault: PlannedFault, held: Held) -> None:
        broker = self._by_pick(fault.pick)
        ids = self.cluster.ids
        others = [f"b{i}" for i in ids if i != broker]
        if fault.pick % 2 == 0 or len(ids) < 4:
            member = (fault.pick // 2) % 3 + 1
            one = [f"b{broker}", f"coord{member}"]
            two = others + [f"coord{m}" for m in (1, 2, 3) if m != member]
        else:
            rotated = ids[ids.index(broker):] + ids[:ids.index(broker)]
            half = len(ids) // 2
            one = [f"b{i}" for i in rotated[:half]]
            two = [f"b{i}" for i in rotated[half:]]
        controller = self._controller()
        role = f" (controller b{controller})" if controller is not None else ""
        self._begin(held, f"{{{', '.join(one)}}} | {{{', '.join(two)}}}{role}",
                    brokers=[int(h[1:]) for h in one + two if h.startswith("b")])
        self._network(held, self._net.partition(one, two))

    def _one_way(self, fault: PlannedFault, held: Held) -> None:
        broker = self._by_pick(fault.pick)
        if fault.pick % 2 == 0 and len(self.cluster.ids) > 1:
            other = self._by_pick(fault.pick // 2, exclude=[broker])
            self._begin(held, f"b{broker} -> b{other} dropped", brokers=[broker, other])
            self._network(held, self._net.drop(f"b{broker}", f"b{other}"))
        else:
            self._begin(held, f"b{broker} -> coord1-3 dropped", brokers=[broker])
            for member in (1, 2, 3):
                self._network(held, self._net.drop(f"b{broker}", f"coord{member}"))

    def _slow_links(self, fault: PlannedFault, held: Held) -> None:
        broker = self._by_pick(fault.pick)
        ms = 50 + (fault.pick // 7) % 251
        others = [i for i in self.cluster.ids if i != broker]
        self._begin(held, f"b{broker} <-> {', '.join(f'b{o}' for o in others)} "
                          f"delayed {ms}±{ms // 5} ms", brokers=[broker, *others])
        for other in others:
            self._network(held, self._net.delay(f"b{broker}", f"b{other}", ms, ms // 5,
                                                both_ways=True))

    def _bounce(self, fault: PlannedFault, held: Held) -> None:
        broker = self._by_pick(fault.pick)
        role = "controller" if self._controller() == broker else "broker"
        self._begin(held, f"b{broker} ({role}) bounced twice", brokers=[broker])
        held.undo.append((f"restart b{broker}", lambda: self._restart(broker)))
        for _ in range(2):
            self.cluster.kill_broker(broker)
            self._launch(broker, RESTART_SECONDS)

    # --- failover during an operation ----------------------------------------------------------

    def _failover_during_reassignment(self, fault: PlannedFault, held: Held) -> None:
        part = self._partition(fault.pick)
        if part is None:
            raise NemesisError(f"no partition of {self.topics} to reassign")
        current = list(part.replicas)
        spare = [i for i in self.cluster.ids if i not in current]
        if spare:   # move one replica to a broker that holds none
            target = list(current)
            target[fault.pick % len(target)] = spare[fault.pick % len(spare)]
        else:       # reorder: another preferred leader
            shift = 1 + fault.pick % max(1, len(current) - 1)
            target = current[shift:] + current[:shift]
        ctrl, who = self._controller_target(fault.pick)
        tp = part.tp

        def submit(meta: MetadataClient) -> None:
            deadline = time.monotonic() + RESOLVE_SECONDS
            while True:
                try:
                    Admin(meta.coordinator).reassign({tp: target})
                    return
                except RequestInProgress:   # the workload's own; wait for it to finish
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.25)

        self._begin(held, f"{who} killed during reassignment of {tp.topic}-{tp.partition} "
                          f"{current} -> {target}", brokers=[ctrl])
        self._read(submit, f"a reassignment of {tp.topic}-{tp.partition}", RESOLVE_SECONDS)
        self._kill(held, ctrl)

        def done(meta: MetadataClient) -> str | None:
            pending = Admin(meta.coordinator).reassignments_in_progress()
            if tp in pending:
                return f"still pending in /admin/reassign_partitions: {list(pending[tp])}"
            got = meta.assignments([tp.topic])[tp.topic].value
            replicas = list(got.partitions[tp.partition])
            if set(replicas) != set(target) or got.adding.get(tp.partition) \
                    or got.removing.get(tp.partition):
                return f"replicas {replicas} (adding {list(got.adding.get(tp.partition, ()))}, " \
                       f"removing {list(got.removing.get(tp.partition, ()))}), wanted {target}"
            return None
        held.checks.append(("the reassignment completes", lambda: self._probe(done)))

    def _failover_during_deletion(self, fault: PlannedFault, held: Held) -> None:
        size = len(self.cluster.ids)

        def create(meta: MetadataClient) -> str:
            admin = Admin(meta.coordinator)
            while True:
                self._scratch += 1
                name = f"{SCRATCH}-{fault.pick % 100000}-{self._scratch}"
                try:
                    admin.create_topic(name, 3, min(3, size))
                    return name
                except TopicExists:
                    continue
        name = self._read(create, "a scratch topic's creation")

        def led(meta: MetadataClient) -> bool:
            tps = [TopicPartition(topic=name, partition=p) for p in meta.partitions_of(name)]
            states = meta.partition_states(tps)
            return bool(tps) and all(s is not None and s.value.leader >= 0
                                     for s in states.values())
        deadline = time.monotonic() + 30.0
        while self._probe(lambda m: None if led(m) else "no leaders") is not None:
            if time.monotonic() > deadline:
                raise NemesisError(f"scratch topic {name} got no leaders within 30s")
            time.sleep(0.25)
        ctrl, who = self._controller_target(fault.pick)
        self._begin(held, f"{who} killed during deletion of {name}", brokers=[ctrl])
        self._read(lambda meta: Admin(meta.coordinator).delete_topic(name),
                   f"the deletion of {name}")
        self._kill(held, ctrl)

        def gone(meta: MetadataClient) -> str | None:
            if name in meta.topics():
                return f"topic {name} still exists" + (
                    " (deletion pending)" if name in meta.topics_to_delete() else "")
            if name in meta.topics_to_delete():
                return f"the deletion request of {name} is still there"
            return None
        held.checks.append((f"scratch topic {name} is deleted", lambda: self._probe(gone)))

    def _failover_during_controlled_shutdown(self, fault: PlannedFault, held: Held) -> None:
        if len(self.cluster.ids) < 2:
            raise NemesisError("a controlled shutdown during a failover needs two brokers")
        ctrl, who = self._controller_target(fault.pick)
        leaders: set[int] = set()
        with contextlib.suppress(NemesisError):
            part = self._partition(fault.pick)
            if part is not None:
                leaders.add(part.leader)
        candidates = [i for i in sorted(leaders) if i != ctrl]
        broker = candidates[0] if candidates else self._by_pick(fault.pick, exclude=[ctrl])
        if broker == ctrl:
            raise NemesisError(f"no broker other than the controller b{ctrl} to shut down")
        launched = self.cluster.broker(broker)
        self._begin(held, f"{who} killed during controlled shutdown of b{broker}",
                    brokers=[ctrl, broker])
        held.undo.append((f"restart b{broker}", lambda: self._restart(broker)))
        # Checked before the restart (undo runs last first): how the shutdown ended.
        outcome: list[str | None] = []
        held.undo.append((f"b{broker}'s controlled shutdown",
                          lambda: outcome.append(_shutdown_outcome(launched))))
        launched.signal(signal.SIGTERM)
        deadline = time.monotonic() + 3.0
        while "SIGTERM: shutting down" not in launched.log() and launched.running() \
                and time.monotonic() < deadline:
            time.sleep(0.02)
        self._kill(held, ctrl)
        held.checks.append((f"b{broker}'s controlled shutdown completes",
                            lambda: outcome[0] if outcome else "not checked"))

    def _probe(self, fn: Callable[[MetadataClient], str | None]) -> str | None:
        """A completion probe's answer; a failed read is an answer too (not yet)."""
        try:
            return self.cluster.on_coordinator(fn, timeout=5.0)
        except Exception as exc:  # noqa: BLE001 - probed again until the wait ends
            return f"cannot read the coordinator: {type(exc).__name__}: {exc}"

    # --- heal everything ---------------------------------------------------------------------

    def heal_all(self, timeout: float = 120.0) -> None:
        """Bring everything back: the fault in place healed, every network fault removed,
        paused brokers resumed, killed brokers and members started; wait until every member
        serves, every broker serves and every broker is registered. Operations left to complete
        are checked last (an error in :attr:`errors` if one does not). :class:`NemesisError`,
        one line, when the cluster is not back within ``timeout``."""
        deadline = time.monotonic() + timeout
        left = lambda: max(1.0, deadline - time.monotonic())  # noqa: E731
        with self._lock:
            held = self.current
        if held is not None:
            self._heal(held)
        cluster = self.cluster
        ensemble = cluster.ensemble
        assert ensemble is not None and cluster.network is not None, "the cluster is not started"
        cluster.network.heal_all()
        for broker in list(cluster.paused):
            cluster.resume_broker(broker)
        for member in ensemble.members:
            member.resume()
            member.start()
        try:
            cluster.ensemble_call(ensemble.wait_serving, left(), ensemble.members)
        except Exception as exc:  # noqa: BLE001 - one line for the caller
            raise NemesisError(f"heal_all: the {cluster.kind} ensemble did not serve within "
                               f"{timeout:g}s") from exc
        for broker in cluster.ids:
            if not cluster.broker(broker).running():
                try:
                    self._launch(broker, left())
                except Exception as exc:  # noqa: BLE001 - one line for the caller
                    raise NemesisError(f"heal_all: broker {broker} did not start: "
                                       f"{' '.join(str(exc).split())}") from exc
        try:
            cluster.wait_serving(left())
        except Exception as exc:  # noqa: BLE001 - one line for the caller
            raise NemesisError(f"heal_all: a broker did not serve: "
                               f"{' '.join(str(exc).split())}") from exc
        last: object = None
        while True:
            try:
                last = cluster.on_coordinator(lambda m: m.broker_ids(), timeout=5.0)
                if last == cluster.ids:
                    break
            except Exception as exc:  # noqa: BLE001 - retried until the deadline
                last = f"{type(exc).__name__}: {exc}"
            if time.monotonic() > deadline:
                raise NemesisError(f"heal_all: brokers registered {last}, wanted {cluster.ids}, "
                                   f"after {timeout:g}s")
            time.sleep(0.25)
        with self._lock:
            pending, self._pending = self._pending, []
        for what, probe in pending:
            reason = _wait_done(probe, max(0.0, deadline - time.monotonic()))
            if reason is not None:
                self._error(f"{what}: not done after the heal: {reason}")


def _wait_done(probe: Callable[[], str | None], seconds: float) -> str | None:
    """Poll ``probe`` until it answers None (done) or ``seconds`` pass; its last answer."""
    deadline = time.monotonic() + seconds
    while True:
        reason = probe()
        if reason is None or time.monotonic() >= deadline:
            return reason
        time.sleep(0.5)


def _shutdown_outcome(broker: LaunchedBroker) -> str | None:
    """How a broker's controlled shutdown ended, once it exits (None: it succeeded). A broker
    still running after :data:`SHUTDOWN_SECONDS` is killed, and that is the answer."""
    try:
        status = broker.wait(SHUTDOWN_SECONDS)
    except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired: it hung
        broker.kill()
        return f"b{broker.broker_id} still running {SHUTDOWN_SECONDS:g}s after SIGTERM (killed)"
    said = broker.log()
    if status != 0:
        return f"b{broker.broker_id} exited with {broker.exit_reason()}"
    if "controlled shutdown succeeded" not in said:
        lines = [ln for ln in said.splitlines() if "controlled shutdown" in ln]
        return f"b{broker.broker_id} stopped without completing it: " + (
            lines[-1].strip() if lines else "no controlled shutdown line in its log")
    return None
