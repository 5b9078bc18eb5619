"""The history of a fault run: one JSON object a line, appended as things happen.

What goes in: every produce attempt and its outcome (acknowledged at an offset, failed, or
unknown: a timeout that may or may not have written), every consumer read (the records and the
high watermark the read was served with), the controller epochs an outside observer saw in
``/controller_epoch``, every version of every partition-state node
(``/brokers/topics/<t>/partitions/<p>/state``) that observer saw, and the fault windows. The
checker (:mod:`tests.faults.checker`) judges a history; a kept history lets a failed run be
judged again, or read by a person.

Each line carries ``type`` (the event's kind), ``t`` (``time.monotonic()`` of the recording
process, for order and durations) and ``wall`` (``time.time()``, to line events up with logs).
Lines are written under one lock, so ``t`` never decreases down the file.

Values are text: a harness produces unique text values; bytes are decoded as UTF-8 (bytes
that are not UTF-8 are kept as backslash escapes, so distinct values stay distinct).

The observer is :class:`StateAuditor`: its own coordinator session, outside the cluster, with
a tree watch over ``/brokers/topics`` and a data watch on ``/controller_epoch``. A watch may
coalesce rapid changes into the latest state, so the auditor records each node *version* it
sees; the checker tells a gap (versions never observed) from a clean sequence.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import re
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import IO, Any, ClassVar

import coordinator
from coordinator import layout
from coordinator.base import Coordinator
from coordinator.codecs import CorruptMetadata, PartitionStateNode, TopicPartition, decode_epoch
from coordinator.errors import CoordinatorError
from coordinator.metadata import MetadataClient
from coordinator.model import DataEvent, Stat, TreeEvent, Watch

__all__ = [
    "ABORTED",
    "ACKED",
    "COMMITTED",
    "FAILED",
    "OUTCOMES",
    "UNKNOWN",
    "ControllerEpochSeen",
    "Event",
    "FaultEnd",
    "FaultStart",
    "FaultWindow",
    "History",
    "HistoryError",
    "ProduceAttempt",
    "ProduceOutcome",
    "Read",
    "StateAuditor",
    "StateDeleted",
    "StateWrite",
    "TXN_OUTCOMES",
    "TxnAttempt",
    "TxnOutcome",
    "fault_windows",
    "load_history",
    "read_history",
    "value_text",
]

log = logging.getLogger(__name__)

ACKED = "acked"
FAILED = "failed"
UNKNOWN = "unknown"
OUTCOMES = (ACKED, FAILED, UNKNOWN)


class HistoryError(ValueError):
    """A history file that cannot be read: the message names the file and line."""


def value_text(value: bytes | str | None) -> str | None:
    """A produced or read value as the history keeps it (text; see the module's note)."""
    if value is None or isinstance(value, str):
        return value
    return bytes(value).decode("utf-8", "backslashreplace")


# -- events ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """What every line has: when it was recorded (monotonic seconds, and wall-clock time)."""

    type: ClassVar[str] = ""
    t: float
    wall: float


@dataclass(frozen=True, slots=True, kw_only=True)
class ProduceAttempt(Event):
    """A producer sends ``values`` (one batch, in this order) to a partition. ``op`` joins the
    attempt to its outcome."""

    type: ClassVar[str] = "produce"
    op: int
    producer: str
    topic: str
    partition: int
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProduceOutcome(Event):
    """How attempt ``op`` ended: ``acked`` (``offset`` is the batch's base offset: value ``i``
    is at ``offset + i``), ``failed`` (certainly not written; ``error`` says why) or ``unknown``
    (may or may not have been written: a timeout, a lost connection)."""

    type: ClassVar[str] = "produce_result"
    op: int
    producer: str
    topic: str
    partition: int
    values: tuple[str, ...]
    outcome: str
    offset: int | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Read(Event):
    """A consumer's read at ``offset``: the ``records`` it got, (offset, value) pairs, and the
    high watermark the answer carried."""

    type: ClassVar[str] = "read"
    reader: str
    topic: str
    partition: int
    offset: int
    records: tuple[tuple[int, str | None], ...]
    high_watermark: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerEpochSeen(Event):
    """``/controller_epoch`` as the auditor saw it: the epoch, the node's version and its
    store revision (the modify id: comparable with the state writes' revisions)."""

    type: ClassVar[str] = "controller_epoch"
    epoch: int
    version: int
    revision: int


@dataclass(frozen=True, slots=True, kw_only=True)
class StateWrite(Event):
    """One version of a partition-state node as the auditor saw it. ``create_id`` tells
    incarnations of the node apart (a topic deleted and created again); ``revision`` is the
    store's order of writes; ``source`` is ``watch``, or ``read`` for a version read when the
    auditor started or resynchronised (it may have been written long before)."""

    type: ClassVar[str] = "state"
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    version: int
    create_id: int
    revision: int
    source: str = "watch"


@dataclass(frozen=True, slots=True, kw_only=True)
class StateDeleted(Event):
    """A partition-state node disappeared (its topic was deleted)."""

    type: ClassVar[str] = "state_deleted"
    topic: str
    partition: int
    revision: int


@dataclass(frozen=True, slots=True, kw_only=True)
class FaultStart(Event):
    """A fault began: ``kind`` (kill, pause, partition, ...) against ``target`` (a broker, a
    link, a coordinator member); ``fault`` joins it to its end."""

    type: ClassVar[str] = "fault_start"
    fault: int
    kind: str
    target: str


@dataclass(frozen=True, slots=True, kw_only=True)
class FaultEnd(Event):
    """Fault ``fault`` was healed."""

    type: ClassVar[str] = "fault_end"
    fault: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnAttempt(Event):
    """A transactional producer is about to end transaction ``op``: the values it sent in it,
    as (topic, partition, value) in send order, and, for a consume-transform-produce step,
    the ``inputs`` it read (read_committed) before it began and whose results it sent."""

    type: ClassVar[str] = "txn"
    op: int
    producer: str
    sends: tuple[tuple[str, int, str], ...]
    inputs: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnOutcome(Event):
    """How transaction ``op`` ended: ``committed`` (commit_transaction returned), ``aborted``
    (abort_transaction returned, or the producer was fenced before any commit was asked) or
    ``unknown`` (the commit was asked and its answer lost: it may have committed)."""

    type: ClassVar[str] = "txn_result"
    op: int
    producer: str
    outcome: str
    error: str | None = None


COMMITTED = "committed"
ABORTED = "aborted"
TXN_OUTCOMES = (COMMITTED, ABORTED, UNKNOWN)

EVENT_TYPES: dict[str, type[Event]] = {
    cls.type: cls for cls in (ProduceAttempt, ProduceOutcome, Read, ControllerEpochSeen,
                              StateWrite, StateDeleted, FaultStart, FaultEnd, TxnAttempt,
                              TxnOutcome)
}


@dataclass(frozen=True, slots=True, kw_only=True)
class FaultWindow:
    """A fault from its start to its heal (``end`` None: never healed in the history)."""

    fault: int
    kind: str
    target: str
    start: float
    end: float | None

    def covers(self, start: float, end: float, horizon: float) -> bool:
        """Whether the window overlaps the interval [start, end]; an unhealed window lasts to
        ``horizon``."""
        stop = self.end if self.end is not None else horizon
        return self.start <= end and start <= stop


def fault_windows(events: Iterable[Event]) -> list[FaultWindow]:
    """The fault windows of a history, in start order."""
    started: dict[int, FaultStart] = {}
    ended: dict[int, float] = {}
    for e in events:
        if isinstance(e, FaultStart):
            started[e.fault] = e
        elif isinstance(e, FaultEnd):
            ended[e.fault] = e.t
    return [FaultWindow(fault=f, kind=s.kind, target=s.target, start=s.t, end=ended.get(f))
            for f, s in sorted(started.items(), key=lambda item: item[1].t)]


# -- encoding ----------------------------------------------------------------------------------


def _encode(event: Event) -> str:
    obj: dict[str, Any] = {"type": event.type}
    for f in fields(event):
        value = getattr(event, f.name)
        obj[f.name] = [list(v) for v in value] if f.name in ("records", "sends") else (
            list(value) if isinstance(value, tuple) else value)
    return json.dumps(obj, separators=(",", ":"))


def _is_int(v: object) -> bool:
    return type(v) is int


def _check(name: str, value: object, kind: str) -> object:
    """``value`` as field ``name`` of kind ``kind`` holds it, or ValueError."""
    ok: bool
    if kind == "int":
        ok = _is_int(value)
    elif kind == "float":
        ok = type(value) in (int, float)
    elif kind == "str":
        ok = isinstance(value, str)
    elif kind == "int?":
        ok = value is None or _is_int(value)
    elif kind == "str?":
        ok = value is None or isinstance(value, str)
    elif kind == "values":
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
        value = tuple(value) if ok else value  # type: ignore[arg-type]
    elif kind == "ints":
        ok = isinstance(value, list) and all(_is_int(v) for v in value)
        value = tuple(value) if ok else value  # type: ignore[arg-type]
    elif kind == "sends":
        ok = isinstance(value, list) and all(
            isinstance(r, list) and len(r) == 3 and isinstance(r[0], str) and _is_int(r[1])
            and isinstance(r[2], str) for r in value)
        value = tuple((r[0], r[1], r[2]) for r in value) if ok else value  # type: ignore[union-attr]
    elif kind == "records":
        ok = isinstance(value, list) and all(
            isinstance(r, list) and len(r) == 2 and _is_int(r[0])
            and (r[1] is None or isinstance(r[1], str)) for r in value)
        value = tuple((r[0], r[1]) for r in value) if ok else value  # type: ignore[union-attr]
    else:  # pragma: no cover - a field kind missing from _KINDS
        raise AssertionError(kind)
    if not ok:
        raise ValueError(f"field {name!r}: expected {kind}, got {json.dumps(value)[:60]}")
    return value


_KINDS: dict[str, str] = {
    "t": "float", "wall": "float", "op": "int", "producer": "str", "topic": "str",
    "partition": "int", "values": "values", "outcome": "str", "offset": "int?", "error": "str?",
    "reader": "str", "records": "records", "high_watermark": "int", "epoch": "int",
    "version": "int", "revision": "int", "leader": "int", "leader_epoch": "int", "isr": "ints",
    "controller_epoch": "int", "create_id": "int", "source": "str", "fault": "int",
    "kind": "str", "target": "str", "sends": "sends", "inputs": "values",
}
_REQUIRED_OFFSET = {"offset"}  # optional in ProduceOutcome, required in Read


def _decode(line: str) -> Event:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc.msg} at column {exc.colno}") from None
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    kind = obj.pop("type", None)
    cls = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValueError(f"unknown event type {kind!r}")
    names = {f.name: f for f in fields(cls)}
    unknown = sorted(set(obj) - set(names))
    if unknown:
        raise ValueError(f"{kind}: unknown fields {unknown}")
    args: dict[str, object] = {}
    for name, f in names.items():
        if name not in obj:
            if f.default is MISSING:
                raise ValueError(f"{kind}: missing field {name!r}")
            continue
        field_kind = _KINDS[name]
        if name in _REQUIRED_OFFSET and cls is Read:
            field_kind = "int"
        args[name] = _check(name, obj[name], field_kind)
    event = cls(**args)
    if isinstance(event, ProduceOutcome) and event.outcome not in OUTCOMES:
        raise ValueError(f"produce_result: outcome {event.outcome!r} is not one of {OUTCOMES}")
    if isinstance(event, TxnOutcome) and event.outcome not in TXN_OUTCOMES:
        raise ValueError(f"txn_result: outcome {event.outcome!r} is not one of {TXN_OUTCOMES}")
    return event


def load_history(path: Path | str) -> Iterator[Event]:
    """The events of a history file, in order. A line that is not a valid event raises
    :class:`HistoryError` naming the file and line (an empty last line is fine)."""
    p = Path(path)
    try:
        handle = p.open(encoding="utf-8")
    except OSError as exc:
        raise HistoryError(f"{p}: cannot read: {exc.strerror}") from None
    with handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                yield _decode(line)
            except ValueError as exc:
                raise HistoryError(f"{p}, line {number}: {exc}") from None


def read_history(path: Path | str) -> list[Event]:
    """:func:`load_history` as a list."""
    return list(load_history(path))


# -- recording ---------------------------------------------------------------------------------


class History:
    """An append-only history file, safe to record into from any thread.

    Each method writes one line at once (flushed, so a run that dies leaves everything up to
    its last event). The file must not exist yet: op and fault ids count from 1 per history,
    and two runs in one file would mix them. Also usable as a context manager that closes it."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self._file: IO[str] | None = self.path.open("x", encoding="utf-8")
        except FileExistsError:
            raise FileExistsError(f"history {self.path} exists already: one run, one file"
                                  ) from None
        self._ops = itertools.count(1)
        self._faults = itertools.count(1)
        self._attempts: dict[int, ProduceAttempt] = {}
        self.events = 0

    def _write(self, cls: type[Event], **values: Any) -> Event:
        with self._lock:
            if self._file is None:
                raise RuntimeError(f"history {self.path} is closed")
            event = cls(t=time.monotonic(), wall=time.time(), **values)
            self._file.write(_encode(event) + "\n")
            self._file.flush()
            self.events += 1
            return event

    # -- the workload ------------------------------------------------------------------------

    def produce_attempt(self, producer: str, tp: TopicPartition, values: Sequence[bytes | str]
                        ) -> int:
        """Record that ``producer`` sends ``values`` to ``tp``; returns the op id its outcome
        is recorded with."""
        op = next(self._ops)
        texts = tuple(value_text(v) or "" for v in values)
        event = self._write(ProduceAttempt, op=op, producer=producer, topic=tp.topic,
                            partition=tp.partition, values=texts)
        assert isinstance(event, ProduceAttempt)
        with self._lock:
            self._attempts[op] = event
        return op

    def _outcome(self, op: int, outcome: str, offset: int | None, error: str | None) -> None:
        with self._lock:
            attempt = self._attempts.pop(op, None)
        if attempt is None:
            raise KeyError(f"no open produce attempt {op}")
        self._write(ProduceOutcome, op=op, producer=attempt.producer, topic=attempt.topic,
                    partition=attempt.partition, values=attempt.values, outcome=outcome,
                    offset=offset, error=error)

    def acked(self, op: int, offset: int | None) -> None:
        """Attempt ``op`` was acknowledged; its first value is at ``offset`` (None: the client
        did not say where, as librdkafka's idempotent producer may report a batch it learns
        was written from a later answer; the checker then looks for the value anywhere)."""
        self._outcome(op, ACKED, offset, None)

    def failed(self, op: int, error: str) -> None:
        """Attempt ``op`` certainly wrote nothing."""
        self._outcome(op, FAILED, None, error)

    def unknown(self, op: int, error: str) -> None:
        """Attempt ``op`` may or may not have written (a timeout)."""
        self._outcome(op, UNKNOWN, None, error)

    def txn_attempt(self, producer: str, sends: Sequence[tuple[str, int, str]],
                    inputs: Sequence[str] = ()) -> int:
        """Record that ``producer`` ends a transaction of ``sends`` (and ``inputs`` read);
        returns the op id its outcome is recorded with."""
        op = next(self._ops)
        self._write(TxnAttempt, op=op, producer=producer,
                    sends=tuple((t, p, v) for t, p, v in sends), inputs=tuple(inputs))
        return op

    def txn_outcome(self, op: int, producer: str, outcome: str, error: str | None = None
                    ) -> None:
        """Transaction ``op`` of ``producer`` ended ``outcome`` (one of :data:`TXN_OUTCOMES`)."""
        if outcome not in TXN_OUTCOMES:
            raise ValueError(f"outcome {outcome!r} is not one of {TXN_OUTCOMES}")
        self._write(TxnOutcome, op=op, producer=producer, outcome=outcome, error=error)

    def read(self, reader: str, tp: TopicPartition, offset: int,
             records: Iterable[tuple[int, bytes | str | None]], high_watermark: int) -> None:
        """A read at ``offset`` got ``records`` (offset, value), served at ``high_watermark``."""
        self._write(Read, reader=reader, topic=tp.topic, partition=tp.partition, offset=offset,
                    records=tuple((o, value_text(v)) for o, v in records),
                    high_watermark=high_watermark)

    # -- faults ------------------------------------------------------------------------------

    def fault_start(self, kind: str, target: str) -> int:
        """A fault begins; returns its id for :meth:`fault_end`."""
        fault = next(self._faults)
        self._write(FaultStart, fault=fault, kind=kind, target=target)
        return fault

    def fault_end(self, fault: int) -> None:
        self._write(FaultEnd, fault=fault)

    @contextlib.contextmanager
    def fault(self, kind: str, target: str) -> Iterator[int]:
        """A fault window around the block (ended even if the block raises)."""
        fault = self.fault_start(kind, target)
        try:
            yield fault
        finally:
            self.fault_end(fault)

    # -- the coordinator, as the auditor sees it ---------------------------------------------

    def controller_epoch(self, epoch: int, version: int, revision: int) -> None:
        self._write(ControllerEpochSeen, epoch=epoch, version=version, revision=revision)

    def state(self, tp: TopicPartition, state: PartitionStateNode, stat: Stat, *,
              source: str = "watch") -> None:
        self._write(StateWrite, topic=tp.topic, partition=tp.partition, leader=state.leader,
                    leader_epoch=state.leader_epoch, isr=tuple(state.isr),
                    controller_epoch=state.controller_epoch, version=stat.version,
                    create_id=stat.create_id, revision=stat.modify_id, source=source)

    def state_deleted(self, tp: TopicPartition, revision: int) -> None:
        self._write(StateDeleted, topic=tp.topic, partition=tp.partition, revision=revision)

    # -- end ---------------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def __enter__(self) -> History:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_STATE_PATH = re.compile(r"^/brokers/topics/([^/]+)/partitions/(\d+)/state$")


def state_path_partition(path: str) -> TopicPartition | None:
    """The partition whose state node ``path`` is, or None for any other node."""
    m = _STATE_PATH.match(path)
    return None if m is None else TopicPartition(topic=m.group(1), partition=int(m.group(2)))


class StateAuditor:
    """Watches the coordinator from outside the cluster and records into ``history`` every
    version of every partition-state node and of ``/controller_epoch`` it observes.

    It opens its own session on ``url`` (or uses ``session``, which it then does not close).
    A tree watch on ``/brokers/topics`` reports the state nodes' writes in store order; after
    arming it, the auditor reads every existing state once (recorded with ``source="read"``),
    and reads them all again when the watch says changes may have been missed (a resync). A
    version is recorded once per incarnation of a node, whichever way it arrived; versions a
    watch coalesced away are never seen, and the checker counts them as gaps."""

    def __init__(self, history: History, *, url: str | None = None,
                 session: Coordinator | None = None, **connect_options: Any) -> None:
        if (url is None) == (session is None):
            raise ValueError("give a coordinator url or a session, not both")
        self.history = history
        self._own = session is None
        self._session: Coordinator | None = session
        self._url = url
        self._connect_options = connect_options
        self._lock = threading.Lock()
        self._seen: dict[TopicPartition, tuple[int, int]] = {}  # (create id, version)
        self._epoch_seen: tuple[int, int] = (-1, -1)  # (create id, version)
        self._watches: list[Watch] = []
        self.resyncs = 0
        self.errors: list[str] = []

    @property
    def session(self) -> Coordinator:
        if self._session is None:
            raise RuntimeError("the auditor is not started")
        return self._session

    def start(self) -> StateAuditor:
        if self._session is None:
            assert self._url is not None
            self._session = coordinator.connect(self._url, **self._connect_options)
        session = self._session
        self._watches.append(session.watch_tree(layout.TOPICS, self._on_tree))
        self._watches.append(session.watch_data(layout.CONTROLLER_EPOCH, self._on_epoch))
        self._read_all()
        return self

    def stop(self) -> None:
        for watch in self._watches:
            watch.cancel()
        self._watches.clear()
        if self._own and self._session is not None:
            self._session.close()
            self._session = None

    def __enter__(self) -> StateAuditor:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def versions_seen(self) -> dict[TopicPartition, int]:
        """The newest version seen of each live state node."""
        with self._lock:
            return {tp: version for tp, (_c, version) in self._seen.items()}

    # -- recording ---------------------------------------------------------------------------

    def _record(self, tp: TopicPartition, data: bytes | None, stat: Stat | None,
                revision: int, source: str) -> None:
        with self._lock:
            if data is None or stat is None:
                if self._seen.pop(tp, None) is not None:
                    self.history.state_deleted(tp, revision)
                return
            seen = self._seen.get(tp)
            if seen is not None and seen[0] == stat.create_id and seen[1] >= stat.version:
                return
            try:
                state = PartitionStateNode.decode(
                    layout.partition_state(tp.topic, tp.partition), data)
            except CorruptMetadata as exc:
                self.errors.append(str(exc))
                return
            self._seen[tp] = (stat.create_id, stat.version)
            self.history.state(tp, state, stat, source=source)

    def _on_tree(self, event: TreeEvent) -> None:
        if event.resync:
            self.resyncs += 1
            self._read_all(resync=True)
            return
        for path, data, stat, revision in event.changes:
            tp = state_path_partition(path)
            if tp is not None:
                self._record(tp, data, stat, revision, "watch")

    def _on_epoch(self, event: DataEvent) -> None:
        if event.data is None or event.stat is None:
            return
        stat = event.stat
        with self._lock:
            if (stat.create_id, stat.version) <= self._epoch_seen:
                return
            self._epoch_seen = (stat.create_id, stat.version)
        try:
            epoch = decode_epoch(layout.CONTROLLER_EPOCH, event.data)
        except CorruptMetadata as exc:
            self.errors.append(str(exc))
            return
        self.history.controller_epoch(epoch, stat.version, stat.modify_id)

    def _read_all(self, *, resync: bool = False) -> None:
        """Read every state node (at start, and after a resync) and record what is new.

        After a resync (on the dispatcher thread, so no change of the watch runs meanwhile)
        a node seen before and absent now was deleted in the gap: recorded with revision 0
        (unknown). Not at start: a change the watch reports during the first read would
        look deleted."""
        session = self.session
        metadata = MetadataClient(session)
        try:
            tps = [TopicPartition(topic=t, partition=p)
                   for t in metadata.topics() for p in metadata.partitions_of(t)]
            paths = [layout.partition_state(tp.topic, tp.partition) for tp in tps]
            items = session.get_many(paths)
        except CoordinatorError as exc:
            self.errors.append(f"reading the states: {exc}")
            return
        present = set()
        for tp, item in zip(tps, items, strict=True):
            if item is not None:
                present.add(tp)
                self._record(tp, item[0], item[1], item[1].modify_id, "read")
        if resync:
            with self._lock:
                gone = [tp for tp in self._seen if tp not in present]
            for tp in gone:
                self._record(tp, None, None, 0, "read")
