"""The checker: a history (:mod:`tests.faults.history`) and the logs read back at the end,
judged.

The final state is given per partition (:class:`FinalPartition`): its high watermark, its
leader, and each in-sync replica's log below the HW as (offset, value) records and as batch
digests (base offset, last offset, leader epoch, CRC: equal digests mean equal bytes, the CRC
covering everything after it in the batch). :func:`final_partition` reads them from
replication logs.

The verdicts (each a count and a few examples, in a :class:`Verdict`):

- **lost**: an acknowledged value absent from the leader's final log, or from an in-sync
  replica's, below the HW;
- **duplicated**: a value at two offsets (in a final log, or across reads);
- **reordered**: for one producer and partition, acknowledged values whose log offsets do not
  follow the order the producer sent them in (what an idempotent producer promises);
- **offset conflicts**: an offset holding another value than the one acknowledged there, or
  than one a consumer read there below the HW (or holding nothing any more); a read at or above
  the HW it was served with; two reads of one offset that disagree;
- **divergent**: in-sync replicas whose batches below the HW differ;
- **zombie**: a partition-state write carrying a controller epoch older than one written
  before it. Two rules, both over the auditor's store order: along one node's versions the
  controller epoch never decreases; and a write that moves the leader or the leader epoch (a
  controller's write) carries the newest controller epoch established in ``/controller_epoch``
  before it (a leader's own ISR change keeps the epoch of the LeaderAndIsr it acts on, which
  may legitimately be older).

Beside them, information, not violations: the share of time each partition had a leader (from
the audited state writes, from the partition's first audited state to the end of the
history), the produce error rate per fault kind (attempts whose life overlapped a window of
that kind; ``none`` for those that overlapped none), and the state versions the auditor never
saw (gaps: coalesced watch events; the zombie rules could not judge those), and values in a
final log that nobody acknowledged and that were never sent or were reported failed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from coordinator.codecs import TopicPartition

from .history import (
    ACKED,
    FAILED,
    ControllerEpochSeen,
    Event,
    FaultWindow,
    ProduceAttempt,
    ProduceOutcome,
    Read,
    StateDeleted,
    StateWrite,
    fault_windows,
    value_text,
)

if TYPE_CHECKING:
    from replication.log import Log

__all__ = [
    "KINDS",
    "BatchDigest",
    "ErrorRate",
    "FinalPartition",
    "ReplicaLog",
    "Tally",
    "Verdict",
    "check",
    "final_from_log_dirs",
    "final_partition",
    "remote_batches",
]

KINDS = ("lost", "duplicated", "reordered", "offset_conflicts", "divergent", "zombie")
NO_FAULT = "none"


@dataclass(frozen=True, slots=True)
class BatchDigest:
    """One batch of a replica's log: equal digests on two replicas mean equal batches."""

    base_offset: int
    last_offset: int
    leader_epoch: int
    crc: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaLog:
    """One in-sync replica's log below the final HW."""

    broker: int
    records: tuple[tuple[int, str | None], ...]
    batches: tuple[BatchDigest, ...]
    writers: Mapping[int, tuple[int, int, int]] = field(default_factory=dict)
    """offset -> (producer id, producer epoch, sequence) of the records an idempotent producer
    wrote (batch headers: the sequence is the batch's base sequence plus the record's place)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FinalPartition:
    """A partition at the end of a run: its HW, its leader (-1: none) and its in-sync replicas'
    logs (by broker id)."""

    tp: TopicPartition
    high_watermark: int
    leader: int
    replicas: Mapping[int, ReplicaLog]


@dataclass(slots=True)
class Tally:
    """A count of violations of one kind, and the first few, described."""

    limit: int = 5
    count: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, example: str) -> None:
        self.count += 1
        if len(self.examples) < self.limit:
            self.examples.append(example)


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorRate:
    """Produce attempts that overlapped faults of one kind, and how many did not succeed
    (failed or unknown)."""

    attempts: int
    errors: int

    @property
    def rate(self) -> float:
        return self.errors / self.attempts if self.attempts else 0.0


@dataclass(slots=True, kw_only=True)
class Verdict:
    """What the checker found. ``ok``: no violation of any kind."""

    acknowledged: int = 0
    reads: int = 0
    """Records read (each record of each read below its HW counts once)."""
    lost: Tally = field(default_factory=Tally)
    duplicated: Tally = field(default_factory=Tally)
    reordered: Tally = field(default_factory=Tally)
    offset_conflicts: Tally = field(default_factory=Tally)
    divergent: Tally = field(default_factory=Tally)
    zombie: Tally = field(default_factory=Tally)
    availability: dict[TopicPartition, float] = field(default_factory=dict)
    availability_by_fault: dict[str, float] = field(default_factory=dict)
    write_availability_by_fault: dict[str, float] = field(default_factory=dict)
    """By fault kind (and ``none``), the clients' view: the share of (partition, second)
    pairs inside that kind's windows in which some write to the partition was acknowledged.
    A leader the auditor still sees but that is dead or cut off counts as available in
    :attr:`availability_by_fault`, never here."""
    """By fault kind (and ``none``: outside every window): the share of partition-time inside
    that kind's windows in which the partition had a leader, as the auditor saw the states."""
    error_rates: dict[str, ErrorRate] = field(default_factory=dict)
    state_versions_seen: int = 0
    state_version_gaps: int = 0
    resent: Tally = field(default_factory=Tally)
    """Information, not a violation: a value at two offsets of a final log written by one
    producer id under two producer epochs. The client bumped its epoch and sent the value
    again as a new record (librdkafka renumbers messages whose first attempt is "possibly
    persisted" when an epoch bump drains the producer: confluentinc/librdkafka#4953); a
    broker's idempotence is scoped to one producer epoch and cannot see it. A duplicate with
    one producer epoch (or no producer id) is a broker's and counts as ``duplicated``."""
    unexpected: Tally = field(default_factory=Tally)
    """Information, not a violation: values in a final log that no attempt acknowledged and
    that either were never sent or whose attempt was reported failed (certainly not written).
    Either the workload's outcomes are misclassified (a failure that was ambiguous) or a log
    holds what nobody wrote."""
    controller_epochs: tuple[int, ...] = ()

    def tally(self, kind: str) -> Tally:
        if kind not in KINDS:
            raise KeyError(f"unknown verdict kind {kind!r}: one of {KINDS}")
        return getattr(self, kind)  # type: ignore[no-any-return]

    def counts(self) -> dict[str, int]:
        return {kind: self.tally(kind).count for kind in KINDS}

    @property
    def ok(self) -> bool:
        return not any(self.counts().values())

    def summary(self) -> str:
        """One screen of text: the counts, a few examples of each violation, availability and
        error rates."""
        lines = [
            f"verdict: {'OK' if self.ok else 'VIOLATIONS'}  acknowledged {self.acknowledged}, "
            f"reads {self.reads}, state versions seen {self.state_versions_seen} "
            f"(gaps {self.state_version_gaps}), controller epochs "
            f"{list(self.controller_epochs) or '-'}",
            "  " + "  ".join(f"{kind} {n}" for kind, n in self.counts().items()),
        ]
        for kind in KINDS:
            for example in self.tally(kind).examples:
                lines.append(f"  {kind}: {example}")
        if self.resent.count:
            lines.append(f"  re-sent by the client under a new producer epoch (not counted "
                         f"against ok): {self.resent.count}, e.g. "
                         f"{'; '.join(self.resent.examples)}")
        if self.unexpected.count:
            lines.append(f"  unexpected values in the logs (not counted against ok): "
                         f"{self.unexpected.count}, e.g. {'; '.join(self.unexpected.examples)}")
        if self.availability:
            worst = sorted(self.availability.items(), key=lambda item: item[1])[:5]
            lines.append("  availability (lowest): " + ", ".join(
                f"{tp.topic}-{tp.partition} {share:.1%}" for tp, share in worst))
        if self.write_availability_by_fault:
            lines.append("  writes acknowledged by fault (partition-seconds): " + ", ".join(
                f"{kind} {share:.1%}"
                for kind, share in sorted(self.write_availability_by_fault.items())))
        if self.availability_by_fault:
            lines.append("  availability by fault: " + ", ".join(
                f"{kind} {share:.1%}" for kind, share in sorted(self.availability_by_fault.items())))
        if self.error_rates:
            lines.append("  produce errors by fault: " + ", ".join(
                f"{kind} {r.errors}/{r.attempts} ({r.rate:.0%})"
                for kind, r in sorted(self.error_rates.items())))
        return "\n".join(lines)


def _name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


def _tp(event: ProduceAttempt | ProduceOutcome | Read | StateWrite | StateDeleted
        ) -> TopicPartition:
    return TopicPartition(topic=event.topic, partition=event.partition)


def check(events: Iterable[Event], final: Iterable[FinalPartition], *, examples: int = 5
          ) -> Verdict:
    """Judge a history (its events, in order) against the final partitions."""
    history = list(events)
    finals = {f.tp: f for f in final}
    verdict = Verdict()
    for kind in (*KINDS, "resent", "unexpected"):
        setattr(verdict, kind, Tally(limit=examples))
    _check_produces(history, finals, verdict)
    _check_reads(history, finals, verdict)
    _check_duplicates(history, finals, verdict)
    _check_divergence(finals, verdict)
    _check_states(history, verdict)
    _check_error_rates(history, verdict)
    _check_write_availability(history, verdict)
    return verdict


# -- the data --------------------------------------------------------------------------------


def _final_values(final: FinalPartition) -> dict[int, str | None] | None:
    """offset -> value of the leader's final log (or, without a leader, the first in-sync
    replica's); None if no replica was read."""
    replica = final.replicas.get(final.leader)
    if replica is None and final.replicas:
        replica = final.replicas[min(final.replicas)]
    return None if replica is None else dict(replica.records)


def _check_produces(history: Sequence[Event], finals: Mapping[TopicPartition, FinalPartition],
                    verdict: Verdict) -> None:
    attempts: dict[int, int] = {}  # op -> position in the history (send order)
    acked: list[tuple[int, ProduceOutcome]] = []
    sent: set[tuple[TopicPartition, str]] = set()
    failed: set[tuple[TopicPartition, str]] = set()
    for position, e in enumerate(history):
        if isinstance(e, ProduceAttempt):
            attempts[e.op] = position
            sent.update((_tp(e), v) for v in e.values)
        elif isinstance(e, ProduceOutcome):
            if e.outcome == ACKED:
                acked.append((attempts.get(e.op, position), e))
            elif e.outcome == FAILED:
                failed.update((_tp(e), v) for v in e.values)
    for tp, final in sorted(finals.items(), key=lambda item: _name(item[0])):
        for offset, value in sorted((_final_values(final) or {}).items()):
            if value is None or ((tp, value) in sent and (tp, value) not in failed):
                continue
            why = "reported failed" if (tp, value) in sent else "never sent"
            verdict.unexpected.add(f"{value!r} at {_name(tp)}@{offset}: {why}")
    acked.sort(key=lambda item: item[0])
    logs = {tp: _final_values(f) for tp, f in finals.items()}
    where: dict[TopicPartition, dict[str | None, list[int]]] = {}
    for tp, values in logs.items():
        index: dict[str | None, list[int]] = defaultdict(list)
        for offset, value in (values or {}).items():
            index[value].append(offset)
        where[tp] = index
    claimed: dict[tuple[TopicPartition, int], str] = {}
    last: dict[tuple[str, TopicPartition], tuple[str, int]] = {}
    for _position, e in acked:
        tp = _tp(e)
        final = finals.get(tp)
        for i, value in enumerate(e.values):
            verdict.acknowledged += 1
            offset = e.offset + i if e.offset is not None else None
            if offset is not None:
                other = claimed.setdefault((tp, offset), value)
                if other != value:
                    verdict.offset_conflicts.add(
                        f"{_name(tp)} offset {offset} acknowledged for {other!r} and {value!r}")
            if final is None:
                verdict.lost.add(f"{value!r} acknowledged on {_name(tp)}, which has no final log")
                continue
            missing = sorted(b for b, r in final.replicas.items()
                             if value not in {v for _o, v in r.records})
            found = where[tp].get(value, [])
            if not found or missing:
                verdict.lost.add(f"{value!r} acknowledged at {_name(tp)}@{offset} is missing "
                                 f"from the final log of broker(s) {missing or [final.leader]}")
                continue
            if offset is not None and offset not in found:
                verdict.offset_conflicts.add(
                    f"{value!r} acknowledged at {_name(tp)}@{offset} is at {found} (offset "
                    f"{offset} holds {(logs[tp] or {}).get(offset)!r})")
            key = (e.producer, tp)
            log_offset = found[0]
            previous = last.get(key)
            if previous is not None and log_offset <= previous[1]:
                verdict.reordered.add(
                    f"{e.producer} sent {previous[0]!r} before {value!r} to {_name(tp)}, "
                    f"but the log has them at {previous[1]} and {log_offset}")
            last[key] = (value, log_offset)


def _check_reads(history: Sequence[Event], finals: Mapping[TopicPartition, FinalPartition],
                 verdict: Verdict) -> None:
    logs = {tp: _final_values(f) for tp, f in finals.items()}
    seen: dict[tuple[TopicPartition, int], str | None] = {}
    for e in history:
        if not isinstance(e, Read):
            continue
        tp = _tp(e)
        for offset, value in e.records:
            verdict.reads += 1
            if offset >= e.high_watermark:
                verdict.offset_conflicts.add(
                    f"{e.reader} read {value!r} at {_name(tp)}@{offset}, at or above the HW "
                    f"{e.high_watermark} it was served with")
                continue
            before = seen.setdefault((tp, offset), value)
            if before != value:
                verdict.offset_conflicts.add(
                    f"{_name(tp)}@{offset} was read as {before!r}, later as {value!r}")
            values = logs.get(tp)
            final = finals.get(tp)
            if values is None or final is None or offset >= final.high_watermark:
                verdict.offset_conflicts.add(
                    f"{_name(tp)}@{offset} was read as {value!r}, is gone from the final log")
            elif offset not in values or values[offset] != value:
                verdict.offset_conflicts.add(
                    f"{_name(tp)}@{offset} was read as {value!r}, the final log holds "
                    f"{values.get(offset)!r}")


def _check_duplicates(history: Sequence[Event], finals: Mapping[TopicPartition, FinalPartition],
                      verdict: Verdict) -> None:
    offsets: dict[tuple[TopicPartition, str], set[int]] = defaultdict(set)
    for tp, final in finals.items():
        for replica in final.replicas.values():
            per_replica: dict[str, list[int]] = defaultdict(list)
            for offset, value in replica.records:
                if value is not None:
                    per_replica[value].append(offset)
            for value, where in per_replica.items():
                offsets[(tp, value)].update(where)
    for e in history:
        if isinstance(e, Read):
            for offset, value in e.records:
                if value is not None and offset < e.high_watermark:
                    offsets[(_tp(e), value)].add(offset)
    for (tp, value), where in offsets.items():
        if len(where) <= 1:
            continue
        text = f"{value!r} at {_name(tp)} offsets {sorted(where)}"
        writers = _writers_of(finals.get(tp), where)
        if writers is not None and len({pid for pid, _e, _s in writers}) == 1 \
                and len({epoch for _p, epoch, _s in writers}) == len(writers):
            epochs = ", ".join(f"epoch {e} seq {q}" for _p, e, q in writers)
            verdict.resent.add(f"{text} (producer {writers[0][0]}: {epochs})")
        else:
            verdict.duplicated.add(text)


def _writers_of(final: FinalPartition | None, offsets: Iterable[int]
                ) -> list[tuple[int, int, int]] | None:
    """The (producer id, epoch, sequence) of each of ``offsets`` in the leader's final log (or
    any replica's), None if one of them was not written by an idempotent producer there."""
    if final is None:
        return None
    for broker in sorted(final.replicas, key=lambda b: b != final.leader):
        known = final.replicas[broker].writers
        if all(o in known for o in offsets):
            return [known[o] for o in sorted(offsets)]
    return None


def _check_divergence(finals: Mapping[TopicPartition, FinalPartition], verdict: Verdict) -> None:
    for tp, final in finals.items():
        if len(final.replicas) < 2:
            continue
        reference_id = final.leader if final.leader in final.replicas else min(final.replicas)
        reference = final.replicas[reference_id]
        for broker, replica in sorted(final.replicas.items()):
            if broker == reference_id:
                continue
            if replica.batches == reference.batches and replica.records == reference.records:
                continue
            first = _first_difference(reference.batches, replica.batches)
            verdict.divergent.add(
                f"{_name(tp)}: broker {broker} differs from broker {reference_id} below the HW "
                f"{final.high_watermark}, from offset {first}")


def _first_difference(a: Sequence[BatchDigest], b: Sequence[BatchDigest]) -> int:
    for x, y in zip(a, b, strict=False):
        if x != y:
            return min(x.base_offset, y.base_offset)
    shorter = a if len(a) < len(b) else b
    return shorter[-1].last_offset + 1 if shorter else 0


# -- the coordinator ---------------------------------------------------------------------------


def _check_states(history: Sequence[Event], verdict: Verdict) -> None:
    end = max((e.t for e in history), default=0.0)
    newest_epoch = -1  # the newest /controller_epoch seen so far, in store order
    epochs: list[ControllerEpochSeen] = []
    writes: list[StateWrite] = []
    deletions: list[StateDeleted] = []
    for e in history:
        if isinstance(e, ControllerEpochSeen):
            epochs.append(e)
        elif isinstance(e, StateWrite):
            writes.append(e)
        elif isinstance(e, StateDeleted):
            deletions.append(e)
    verdict.controller_epochs = tuple(sorted({e.epoch for e in epochs}))
    verdict.state_versions_seen = len(writes)
    # Walk the store's order: epoch bumps and state writes by revision (the epoch first on a
    # tie: a controller's first write comes after its election's).
    timeline = sorted([(e.revision, 0, e) for e in epochs]
                      + [(w.revision, 1, w) for w in writes], key=lambda x: (x[0], x[1]))
    previous: dict[tuple[TopicPartition, int], StateWrite] = {}  # (tp, create id) -> last
    for _revision, _order, item in timeline:
        if isinstance(item, ControllerEpochSeen):
            newest_epoch = max(newest_epoch, item.epoch)
            continue
        assert isinstance(item, StateWrite)
        tp = _tp(item)
        before = previous.get((tp, item.create_id))
        if before is not None:
            verdict.state_version_gaps += max(0, item.version - before.version - 1)
            if item.controller_epoch < before.controller_epoch:
                verdict.zombie.add(
                    f"{_name(tp)} version {item.version} carries controller epoch "
                    f"{item.controller_epoch} after version {before.version}'s "
                    f"{before.controller_epoch}")
                previous[(tp, item.create_id)] = item
                continue
        # A controller's write: the node's creation, or a new leader or leader epoch. The first
        # version seen of a node that already existed (an auditor started late, a gap) may be
        # a leader's ISR change: not judged by this rule.
        if before is None:
            controllers_write = item.version == 0
        else:
            controllers_write = (item.leader, item.leader_epoch) != (
                before.leader, before.leader_epoch)
        if controllers_write and item.controller_epoch < newest_epoch:
            verdict.zombie.add(
                f"{_name(tp)} version {item.version} (leader {item.leader}, epoch "
                f"{item.leader_epoch}) written by controller epoch {item.controller_epoch} "
                f"after epoch {newest_epoch} was elected")
        previous[(tp, item.create_id)] = item
    # Availability, in the auditor's time: from each partition's first state to the end.
    spans: dict[TopicPartition, list[tuple[float, bool | None]]] = defaultdict(list)
    windows = fault_windows(history)
    inside: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])  # kind -> [led, total]
    # A deleted node's partition is absent (None) until it is created again; only partitions
    # the workload wrote to count when it wrote to any (scratch topics of admin operations do
    # not).
    produced = {_tp(e) for e in history if isinstance(e, ProduceAttempt)}
    for e in history:
        if isinstance(e, StateWrite):
            spans[_tp(e)].append((e.t, e.leader >= 0))
        elif isinstance(e, StateDeleted):
            spans[_tp(e)].append((e.t, None))
    for tp, changes in spans.items():
        if produced and tp not in produced:
            continue
        led = total = 0.0
        for (t, has_leader), (t_next, _h) in zip(changes, [*changes[1:], (end, None)],
                                                  strict=True):
            if has_leader is None:
                continue
            total += t_next - t
            if has_leader:
                led += t_next - t
            for kind, seconds in _time_by_fault(t, t_next, windows, end).items():
                inside[kind][1] += seconds
                if has_leader:
                    inside[kind][0] += seconds
        if total <= 0:
            verdict.availability[tp] = 1.0 if changes[-1][1] else 0.0
        else:
            verdict.availability[tp] = led / total
    verdict.availability_by_fault = {kind: led / total for kind, (led, total) in inside.items()
                                     if total > 0}


def _time_by_fault(start: float, stop: float, windows: Sequence[FaultWindow], horizon: float
                   ) -> dict[str, float]:
    """How much of [start, stop] lies inside the windows of each fault kind, and outside every
    window (``none``). Windows of one kind that overlap count once."""
    out: dict[str, float] = {}
    covered: list[tuple[float, float]] = []
    for kind in {w.kind for w in windows}:
        parts = [(max(start, w.start), min(stop, horizon if w.end is None else w.end))
                 for w in windows if w.kind == kind]
        merged = _merge([(a, b) for a, b in parts if b > a])
        if merged:
            out[kind] = sum(b - a for a, b in merged)
            covered.extend(merged)
    outside = (stop - start) - sum(b - a for a, b in _merge(covered))
    if outside > 0:
        out[NO_FAULT] = outside
    return out


def _merge(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for a, b in sorted(intervals):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def _check_write_availability(history: Sequence[Event], verdict: Verdict) -> None:
    acked: dict[TopicPartition, set[int]] = defaultdict(set)  # partition -> seconds with an ack
    partitions: set[TopicPartition] = set()
    first = last = None
    for e in history:
        if isinstance(e, ProduceAttempt):
            partitions.add(_tp(e))
            first = e.t if first is None else first
        elif isinstance(e, ProduceOutcome):
            last = e.t
            if e.outcome == ACKED:
                acked[_tp(e)].add(int(e.t))
    if first is None or last is None or not partitions:
        return
    windows = fault_windows(history)
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # kind -> [available, total]
    for second in range(int(first), int(last)):
        kinds = {w.kind for w in windows if w.covers(second, second + 1, last)} or {NO_FAULT}
        up = sum(second in acked[tp] for tp in partitions)
        for kind in kinds:
            counts[kind][0] += up
            counts[kind][1] += len(partitions)
    verdict.write_availability_by_fault = {kind: a / n for kind, (a, n) in counts.items() if n}


def _check_error_rates(history: Sequence[Event], verdict: Verdict) -> None:
    windows = fault_windows(history)
    end = max((e.t for e in history), default=0.0)
    started: dict[int, float] = {}
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for e in history:
        if isinstance(e, ProduceAttempt):
            started[e.op] = e.t
        elif isinstance(e, ProduceOutcome):
            begin = started.get(e.op, e.t)
            kinds = {w.kind for w in windows if w.covers(begin, e.t, end)} or {NO_FAULT}
            for kind in kinds:
                counts[kind][0] += 1
                counts[kind][1] += e.outcome != ACKED
    verdict.error_rates = {kind: ErrorRate(attempts=a, errors=n)
                           for kind, (a, n) in counts.items()}


# -- reading the final logs --------------------------------------------------------------------


def final_partition(tp: TopicPartition, leader: int, high_watermark: int,
                    logs: Mapping[int, Log], remote: Sequence[bytes] = ()) -> FinalPartition:
    """A :class:`FinalPartition` from replication logs (:class:`replication.log.Log`, by
    broker id: the in-sync replicas'), each read below ``high_watermark``. ``remote``: the
    batches of the partition's remote part (tiered storage, KIP-405, in offset order), which
    every replica's log reads as its own below its local log start."""
    replicas: dict[int, ReplicaLog] = {}
    for broker, log in logs.items():
        reader = _ReplicaReader(high_watermark)
        local = log.log_start_offset
        for batch in remote:
            reader.take(batch, min_offset=0, below=min(local, high_watermark))
        offset = local
        while offset < high_watermark:
            data = log.read(offset, 1 << 22).records
            if not data:
                break
            nxt = reader.take(data, min_offset=offset, below=high_watermark)
            if nxt <= offset:
                break
            offset = nxt
        replicas[broker] = ReplicaLog(broker=broker, records=tuple(reader.records),
                                      batches=tuple(reader.batches), writers=reader.writers)
    return FinalPartition(tp=tp, high_watermark=high_watermark, leader=leader,
                          replicas=replicas)


class _ReplicaReader:
    """The records, batch digests and writers of one replica's log, batch by batch."""

    def __init__(self, high_watermark: int) -> None:
        self.high_watermark = high_watermark
        self.records: list[tuple[int, str | None]] = []
        self.batches: list[BatchDigest] = []
        self.writers: dict[int, tuple[int, int, int]] = {}

    def take(self, data: bytes, *, min_offset: int, below: int) -> int:
        """Take the batches of ``data`` ending below ``below`` (digests) and their records
        from ``min_offset`` on; returns the offset after the last batch of ``data``."""
        from replication.records import decode_batch, iter_batches, validate_batches

        nxt = min_offset
        for header in iter_batches(data):
            nxt = header.last_offset + 1
            if header.last_offset < below:
                self.batches.append(BatchDigest(header.base_offset, header.last_offset,
                                                header.partition_leader_epoch, header.crc))
        for pos, *_ in validate_batches(data):
            batch = decode_batch(data, pos)
            head = batch.header
            for record in batch.records:
                if min_offset <= record.offset < below and record.offset < self.high_watermark:
                    self.records.append((record.offset, value_text(record.value)))
                    if head.producer_id >= 0 and head.base_sequence >= 0:
                        self.writers[record.offset] = (
                            head.producer_id, head.producer_epoch,
                            head.base_sequence + record.offset - head.base_offset)
        return nxt


def remote_batches(tp: TopicPartition, remote: Path) -> list[bytes]:
    """The batches of ``tp``'s remote part in a filesystem remote store (``remote``, the
    directory of a ``file://`` ``remote.log.storage.url``, its metadata under
    ``__remote_log_metadata``), in offset order: from the first offset of a finished copy,
    each offset from one finished copy holding it, until an offset no copy holds."""
    import base64
    import uuid

    from replication.records import iter_batches
    from replication.tiered import (
        FileRemoteLogMetadataManager,
        FileSystemRemoteStorageManager,
        RemoteLogSegmentState,
        TopicIdPartition,
    )

    metadata_dir = remote / "__remote_log_metadata"
    head, tail = f"{tp.topic}-", f"-{tp.partition}"
    groups = [d.name for d in metadata_dir.iterdir() if d.is_dir()
              and d.name.startswith(head) and d.name.endswith(tail)] \
        if metadata_dir.is_dir() else []
    rlmm = FileRemoteLogMetadataManager(metadata_dir)
    rsm = FileSystemRemoteStorageManager(remote)
    out: list[bytes] = []
    for group in groups:
        text = group[len(head):len(group) - len(tail)]
        try:
            topic_id = uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))
        except ValueError:
            continue  # another topic whose name starts alike
        tid = TopicIdPartition(topic_id=topic_id, topic=tp.topic, partition=tp.partition)
        copies = [m for m in rlmm.list_remote_log_segments(tid)
                  if m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED]
        offset = min((m.start_offset for m in copies), default=0)
        while True:
            holding = [m for m in copies if m.start_offset <= offset <= m.end_offset]
            if not holding:
                break
            segment = max(holding, key=lambda m: m.end_offset)
            with rsm.fetch_log_segment(segment, 0) as f:
                data = f.read()
            pos = 0
            for header in iter_batches(data):
                if header.last_offset >= offset:
                    out.append(data[pos:pos + header.size])
                pos += header.size
            offset = segment.end_offset + 1
    rsm.close()
    rlmm.close()
    return out


def final_from_log_dirs(tp: TopicPartition, leader: int, high_watermark: int,
                        log_dirs: Mapping[int, Path | str], remote: Path | None = None
                        ) -> FinalPartition:
    """:func:`final_partition` from the log directories of *stopped* brokers (by broker id:
    the in-sync replicas'), as a multi-process run leaves them: each partition log is opened
    (recovered, as its broker would on start), read and closed again. ``remote``: the
    filesystem remote store of a tiered run, whose part of the log (:func:`remote_batches`)
    each replica reads below its local log start."""
    from replication.log import Log

    logs: dict[int, Log] = {}
    try:
        for broker, log_dir in log_dirs.items():
            directory = Path(log_dir) / f"{tp.topic}-{tp.partition}"
            if not directory.is_dir():
                raise FileNotFoundError(f"broker {broker} has no log of {_name(tp)} "
                                        f"in {log_dir}")
            logs[broker] = Log.open(directory)
        prefix = remote_batches(tp, remote) if remote is not None else []
        return final_partition(tp, leader, high_watermark, logs, prefix)
    finally:
        for log in logs.values():
            log.close()
