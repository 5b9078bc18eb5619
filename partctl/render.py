"""Rendering for the reassignment commands: per-broker summaries, scores, statuses, progress;
and the plain tables other commands print (``groups``).

Pure text in and out, except :class:`ProgressDisplay`, which draws a rich progress bar on a
terminal and prints plain status lines, now and then, anywhere else (logs, pipes, CI).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from collections.abc import Mapping

    from coordinator.codecs import TopicPartition
    from rebalancer.access import ElectionResult, MovingPartition
    from rebalancer.execution import ExecutionProgress, ExecutionResult
    from rebalancer.plan import Plan, Scores
    from rebalancer.scoring import LowerBounds
    from rebalancer.snapshot import Snapshot
    from rebalancer.verification import CancelReport, VerifyReport


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerLoad:
    broker: int
    rack: str | None
    replicas: tuple[int, int]
    """Before, after."""
    leaders: tuple[int, int]
    bytes: tuple[int, int] | None
    leaving: bool


def broker_loads(snap: Snapshot, plan: Plan) -> list[BrokerLoad]:
    """Replicas, preferred leaders and bytes per broker, before and after ``plan``."""
    after = plan.assignment(snap)
    sizes = {p.key: p.size_bytes or 0 for p in snap.partitions}
    counts: list[tuple[Counter[int], Counter[int], Counter[int]]] = []
    for assignment in ({p.key: p.replicas for p in snap.partitions}, after):
        reps: Counter[int] = Counter()
        leads: Counter[int] = Counter()
        byts: Counter[int] = Counter()
        for key, replicas in assignment.items():
            for b in replicas:
                reps[b] += 1
                byts[b] += sizes.get(key, 0)
            if replicas:
                leads[replicas[0]] += 1
        counts.append((reps, leads, byts))
    (r0, l0, b0), (r1, l1, b1) = counts
    return [BrokerLoad(broker=b.id, rack=b.rack, replicas=(r0[b.id], r1[b.id]),
                       leaders=(l0[b.id], l1[b.id]),
                       bytes=(b0[b.id], b1[b.id]) if snap.has_sizes else None,
                       leaving=b.id in snap.decommission)
            for b in sorted(snap.brokers, key=lambda x: x.id)]


def human_bytes(n: int | None) -> str:
    """``1.5 GiB``, ``12.0 MiB``, ``512 B``; ``-`` when unknown."""
    if n is None:
        return "-"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def id_list_text(ids: Sequence[int]) -> str:
    """Broker ids as ``1,2,3``; ``-`` for none."""
    return ",".join(str(i) for i in ids) or "-"


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f}"


def render_loads(loads: Sequence[BrokerLoad]) -> str:
    """``Broker Rack Replicas Leaders [GiB]`` with ``before -> after`` columns."""
    sized = any(x.bytes is not None for x in loads)
    head = ["Broker", "Rack", "Replicas", "Leaders"] + (["GiB"] if sized else [])
    rows = []
    for x in loads:
        row = [f"{x.broker}{' (leaving)' if x.leaving else ''}", x.rack or "-",
               f"{x.replicas[0]} -> {x.replicas[1]}", f"{x.leaders[0]} -> {x.leaders[1]}"]
        if sized:
            row.append(f"{_gib(x.bytes[0])} -> {_gib(x.bytes[1])}" if x.bytes else "-")
        rows.append(row)
    return render_table(head, rows)


def render_table(head: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Columns left-aligned to their widest cell, two spaces apart, no trailing blanks."""
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
             for r in [head, *rows]]
    return "\n".join(lines)


def render_scores(before: Scores, after: Scores, *, bounds: LowerBounds | None = None,
                  disk: bool = False) -> str:
    """The plan's scores next to the current state's; with ``bounds``, the bytes a count
    balance must move at least beside the bytes moved, and with ``disk`` the bytes max/mean no
    plan can beat beside the one reached."""
    lines = [
        f"Replica spread (max-min per broker): {before.replicas_per_broker.spread} -> "
        f"{after.replicas_per_broker.spread}",
        f"Leader spread (max-min per broker):  {before.leaders_per_broker.spread} -> "
        f"{after.leaders_per_broker.spread}",
        f"Rack violations:                     {before.rack_violations} -> "
        f"{after.rack_violations}",
    ]
    if before.bytes_per_broker is not None and after.bytes_per_broker is not None:
        line = (f"Bytes max/mean per broker:           "
                f"{before.bytes_per_broker.max_over_mean} -> "
                f"{after.bytes_per_broker.max_over_mean}")
        if disk and bounds is not None and bounds.bytes_max_over_mean is not None:
            line += f" (lower bound {bounds.bytes_max_over_mean})"
        lines.append(line)
    moved = (f"Partitions moved: {after.partitions_moved}, replicas moved: "
             f"{after.replicas_moved}, leader changes: {after.leader_changes}")
    if after.bytes_moved is not None:
        moved += f", GiB moved: {after.bytes_moved_gib}"
    if after.rf_changes:
        moved += f", replication factor changes: {after.rf_changes}"
    lines.append(moved)
    if bounds is not None:
        lines.append(f"Lower bounds: replicas moved {bounds.best_replicas_moved}"
                     + (f", GiB moved for count balance {_gib(bounds.bytes_moved_count_balance)}"
                        if bounds.bytes_moved_count_balance is not None else ""))
    return "\n".join(lines)


def render_problems(problems: Sequence[str], limit: int) -> list[str]:
    """The first ``limit`` problems and, past them, one line counting the rest: a 9 MB plan
    that is wrong everywhere is 150,000 problems, which nobody reads past the first screen."""
    if len(problems) <= limit:
        return list(problems)
    rest = len(problems) - limit
    return [*problems[:limit], f"... and {rest:,} more problem{'s' if rest > 1 else ''} "
                               f"({len(problems):,} in all)"]


def render_result(result: ExecutionResult) -> str:
    """The outcome, and when the run ended before the plan did: what was submitted (the
    controller carries on), what was never sent, and how to resume or revert."""
    head = (f"Reassignment {'finished' if result.ok else 'stopped'}: {len(result.done)} done, "
            f"{len(result.failed)} failed in {result.elapsed:.1f}s"
            f"{' (timed out)' if result.timed_out else ''}.")
    lines = [head]
    if result.stopped and not result.timed_out:
        lines.append(f"Stopped: {result.stopped}.")
    lines += [f"  {tp}: {why}" for tp, why in result.failed.items()]
    if result.done and not result.ok:
        lines.append(f"Done: {_tps(result.done)}.")
    if result.in_flight:
        lines.append(f"Submitted, still moving (the controller carries on): "
                     f"{_tps(result.in_flight)}.")
    if result.not_sent:
        lines.append(f"Not yet sent: {_tps(result.not_sent)}.")
    if result.in_flight or result.not_sent:
        lines.append("To resume, run `partctl reassign execute` again with the same plan file "
                     "(it takes over the moves still pending); `partctl reassign cancel` "
                     "reverts them instead; `partctl reassign verify` follows them.")
    elif not result.ok:
        lines.append("Check with `partctl reassign verify`; `partctl reassign cancel` reverts "
                     "the moves still pending.")
    return "\n".join(lines)


def _tps(tps: Sequence[TopicPartition]) -> str:
    return f"{len(tps)} partition(s): " + ", ".join(str(tp) for tp in tps)


def render_verify(report: VerifyReport) -> str:
    lines = []
    for s in report.statuses:
        match s.state.name:
            case "DONE":
                lines.append(f"Reassignment of partition {s.partition} is completed.")
            case "IN_PROGRESS":
                lines.append(f"Reassignment of partition {s.partition} is still in progress.")
            case _:
                lines.append(f"Reassignment of partition {s.partition} failed: {s.reason}.")
    lines.append(f"{len(report.done)} done, {len(report.in_progress)} in progress, "
                 f"{len(report.failed)} failed.")
    return "\n".join(lines)


def render_in_progress(moving: Mapping[TopicPartition, MovingPartition]) -> str:
    """``reassign list``, as Kafka's ``kafka-reassign-partitions --list`` prints it."""
    if not moving:
        return "No partition reassignments found."
    lines = ["Current partition reassignments:"]
    for tp, m in sorted(moving.items()):
        line = f"{tp}: replicas: {','.join(map(str, m.replicas))}."
        if m.adding:
            line += f" adding: {','.join(map(str, m.adding))}."
        if m.removing:
            line += f" removing: {','.join(map(str, m.removing))}."
        lines.append(line)
    return "\n".join(lines)


def render_election(result: ElectionResult) -> str:
    """``elect preferred``: what the Admin API's ElectLeaders did, or (a coordinator) what was
    handed to the controller."""
    if result.requested and not (result.elected or result.not_needed or result.failed):
        return (f"Requested a preferred replica election for {len(result.requested)} "
                f"partition(s).")
    lines = [f"Elected the preferred leader of {len(result.elected)} partition(s); "
             f"{len(result.not_needed)} already led by it; {len(result.failed)} failed."]
    lines += [f"  {tp}: {why}" for tp, why in sorted(result.failed.items())]
    return "\n".join(lines)


def render_cancel(report: CancelReport) -> str:
    if not report.moves:
        return "No reassignment is in progress: nothing to cancel."
    lines = []
    for m in report.moves:
        if m.reverted:
            lines.append(f"{m.partition}: reverted to {list(m.original)} "
                         f"(was moving to {list(m.target)})")
        else:
            lines.append(f"{m.partition}: dropped before it started, stays at "
                         f"{list(m.original)} (was to move to {list(m.target)})")
    lines.append(f"Cancelled {len(report.moves)} pending move(s): {len(report.reverted)} "
                 f"reverted, {len(report.dropped)} dropped.")
    if report.still_reverting:
        lines.append("Still reverting when the wait ended: "
                     + ", ".join(str(tp) for tp in report.still_reverting)
                     + " (the controller carries on).")
    return "\n".join(lines)


class ProgressDisplay:
    """A progress callback: a rich bar on a terminal, else a status line every ``every``
    seconds (and the first and last one)."""

    def __init__(self, out: TextIO, *, every: float = 5.0, header: str | None = None,
                 force_plain: bool = False) -> None:
        """``header`` is printed before the first progress report (not at all if the run is
        refused before it starts)."""
        self.out = out
        self.header = header
        self.every = every
        self._plain = force_plain or not _isatty(out)
        self._last_line = float("-inf")
        self._last: ExecutionProgress | None = None
        self._printed: ExecutionProgress | None = None
        self._started = time.monotonic()
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> ProgressDisplay:
        if not self._plain:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self._bar = Progress(TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), TimeElapsedColumn(),
                                 console=Console(file=self.out), transient=False)
            self._bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)
        elif self._last is not None and self._last != self._printed:
            self._print(self._last)

    def __call__(self, p: ExecutionProgress) -> None:
        if self._last is None and self.header:
            if self._bar is not None:
                self._bar.console.print(self.header, highlight=False)
            else:
                print(self.header, file=self.out, flush=True)
        self._last = p
        if self._bar is not None:
            desc = f"moving {p.in_flight}, failed {p.failed}"
            if self._task is None:
                self._task = self._bar.add_task(desc, total=p.total)
            self._bar.update(self._task, completed=p.done + p.failed, description=desc)
        elif time.monotonic() - self._last_line >= self.every:
            self._print(p)

    def _print(self, p: ExecutionProgress) -> None:
        self._printed = p
        self._last_line = time.monotonic()
        print(f"{p.done}/{p.total} done, {p.in_flight} moving, {p.failed} failed, "
              f"{p.waiting} waiting ({self._last_line - self._started:.0f}s)",
              file=self.out, flush=True)


def _isatty(out: TextIO) -> bool:
    try:
        return out.isatty()
    except (AttributeError, ValueError):
        return False
