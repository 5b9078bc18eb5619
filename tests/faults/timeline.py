"""A fault run's history as one picture: a Jepsen-style timeline PNG.

Four panels share the x axis (seconds since the history's first event), and every fault
window is a shaded span across all of them, so a dip or a stall lines up with its cause:

1. produce outcomes per second: acknowledged, failed and unknown (by the second the outcome
   was recorded);
2. produce latency, attempt to outcome in milliseconds, one point per attempt (at its attempt
   time) coloured by outcome, on a log scale;
3. the leader of each partition over time, from the auditor's partition-state writes: a bar
   per partition coloured by its leader, a marker at each leader change, offline (leader -1)
   hatched red with a red cross;
4. the controller epoch the auditor saw (a step line).

What goes on the picture is computed by pure functions (:func:`throughput`,
:func:`latencies`, :func:`leader_rows`); :func:`figure` lays them out, and :func:`draw`
renders it with matplotlib's Agg canvas (no display, no pyplot state). matplotlib is a test
dependency only, imported inside those two, so importing this module costs nothing.

    python -m tests.faults.timeline history.jsonl out.png [--title T]
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tests.faults.history import (
    ACKED,
    FAILED,
    OUTCOMES,
    UNKNOWN,
    ControllerEpochSeen,
    Event,
    FaultWindow,
    HistoryError,
    ProduceAttempt,
    ProduceOutcome,
    StateDeleted,
    StateWrite,
    fault_windows,
    read_history,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["LeaderRow", "draw", "figure", "latencies", "leader_rows", "main", "throughput"]

WIDTH, HEIGHT, DPI = 16, 10, 100  # inches at DPI: a 1600x1000 picture
OFFLINE = -1
COLOURS = {ACKED: "tab:green", FAILED: "tab:red", UNKNOWN: "tab:orange"}
LEGEND = {"loc": "upper left", "bbox_to_anchor": (1.0, 1.0), "fontsize": 8}  # right of a panel
LATENCY_FLOOR_MS = 0.1  # a log scale cannot show 0; nothing real is faster than this

# Artist ids (``gid``) that tests and readers of the figure look artists up by.
GID_FAULT = "fault"                  # the shaded span of each fault window, on every panel
GID_LEADER_CHANGE = "leader-change"  # one marker per change to a live leader
GID_LEADER_OFFLINE = "leader-offline"  # one marker per change to no leader (-1)
GID_EPOCH = "controller-epoch"


# -- what to draw (pure) -----------------------------------------------------------------------


def throughput(events: Sequence[Event], origin: float, seconds: int
               ) -> dict[str, list[int]]:
    """Produce outcomes per whole second since ``origin``, by outcome: ``seconds`` bins each."""
    counts = {outcome: [0] * seconds for outcome in OUTCOMES}
    for e in events:
        if isinstance(e, ProduceOutcome):
            second = min(seconds - 1, max(0, int(e.t - origin)))
            counts[e.outcome][second] += 1
    return counts


def latencies(events: Sequence[Event], origin: float
              ) -> dict[str, tuple[list[float], list[float]]]:
    """Per outcome, the attempts' times (seconds since ``origin``) and their latencies (ms,
    attempt to outcome). An outcome whose attempt is not in the history is left out."""
    attempts: dict[int, float] = {}
    points: dict[str, tuple[list[float], list[float]]] = {o: ([], []) for o in OUTCOMES}
    for e in events:
        if isinstance(e, ProduceAttempt):
            attempts[e.op] = e.t
        elif isinstance(e, ProduceOutcome) and e.op in attempts:
            start = attempts.pop(e.op)
            xs, ys = points[e.outcome]
            xs.append(start - origin)
            ys.append(max(LATENCY_FLOOR_MS, (e.t - start) * 1000))
    return points


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderRow:
    """One partition's leaders over time (seconds since the origin): ``segments`` are
    (start, end, leader), back to back while the partition exists; ``changes`` are (time,
    new leader), one per change of leader within one incarnation of the partition's state."""

    topic: str
    partition: int
    segments: tuple[tuple[float, float, int], ...]
    changes: tuple[tuple[float, int], ...]

    @property
    def label(self) -> str:
        return f"{self.topic}-{self.partition}"


def leader_rows(events: Sequence[Event], origin: float, horizon: float) -> list[LeaderRow]:
    """The leader of every partition the auditor saw, sorted by topic and partition.

    A segment runs from a state write to the next write of that partition, its deletion, or
    ``horizon``. A change is a write whose leader differs from the previous write of the same
    node incarnation (``create_id``): the first state of a partition, or of a topic created
    again, is a start, not a change."""
    open_: dict[tuple[str, int], tuple[float, int, int]] = {}  # tp -> (start, leader, create id)
    last: dict[tuple[str, int], tuple[int, int]] = {}  # tp -> (create id, leader) seen last
    segments: dict[tuple[str, int], list[tuple[float, float, int]]] = {}
    changes: dict[tuple[str, int], list[tuple[float, int]]] = {}

    def close(tp: tuple[str, int], at: float) -> None:
        if tp in open_:
            start, leader, _ = open_.pop(tp)
            segments.setdefault(tp, []).append((start, at, leader))

    for e in events:
        if isinstance(e, StateWrite):
            tp, at = (e.topic, e.partition), e.t - origin
            segments.setdefault(tp, [])
            previous = last.get(tp)
            if previous is not None and previous[0] == e.create_id and previous[1] == e.leader:
                continue  # same leader (an ISR change, a resync's read): the segment goes on
            if previous is not None and previous[0] == e.create_id:
                changes.setdefault(tp, []).append((at, e.leader))
            close(tp, at)
            open_[tp] = (at, e.leader, e.create_id)
            last[tp] = (e.create_id, e.leader)
        elif isinstance(e, StateDeleted):
            close((e.topic, e.partition), e.t - origin)
    for tp in list(open_):
        close(tp, horizon - origin)
    return [LeaderRow(topic=tp[0], partition=tp[1], segments=tuple(segments[tp]),
                      changes=tuple(changes.get(tp, ())))
            for tp in sorted(segments)]


# -- drawing -----------------------------------------------------------------------------------


def _broker_colour(broker: int) -> str:
    # no green, red or orange: those are the outcomes' colours, and red is offline
    palette = ("tab:blue", "tab:purple", "tab:olive", "tab:cyan", "tab:brown", "tab:pink",
               "tab:gray")
    return palette[(broker - 1) % len(palette)]  # broker ids count from 1


def _summary(events: Sequence[Event], windows: Sequence[FaultWindow]) -> str:
    outcomes = {o: 0 for o in OUTCOMES}
    for e in events:
        if isinstance(e, ProduceOutcome):
            outcomes[e.outcome] += 1
    attempts = sum(isinstance(e, ProduceAttempt) for e in events)
    return (f"{attempts} produce attempts: {outcomes[ACKED]} acked, {outcomes[FAILED]} failed, "
            f"{outcomes[UNKNOWN]} unknown; {len(windows)} fault windows")


def figure(events: Sequence[Event], *, title: str = "") -> Figure:
    """The timeline of ``events`` as a matplotlib figure, 1600x1000 pixels, not yet rendered.

    Artists carry ids to find them by (``artist.get_gid()``): each fault span is
    ``fault:<kind>`` (one per panel), the leader-change markers ``leader-change`` and
    ``leader-offline`` (one line each, a point per change), the epoch line
    ``controller-epoch``. ValueError for a history without events."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    if not events:
        raise ValueError("the history has no events to draw")
    origin = events[0].t
    horizon = max(e.t for e in events)
    span = max(horizon - origin, 1.0)
    windows = fault_windows(events)
    rows = leader_rows(events, origin, horizon)

    fig = Figure(figsize=(WIDTH, HEIGHT), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    fig.suptitle(f"{title}\n{_summary(events, windows)}" if title else _summary(events, windows),
                 fontsize=12)
    ratios = [2.0, 2.5, max(2.0, min(4.0, 0.25 * len(rows))), 1.2]
    ax_rate, ax_lat, ax_lead, ax_epoch = fig.subplots(
        4, 1, sharex=True, gridspec_kw={"height_ratios": ratios})

    # 1. outcomes per second
    seconds = max(1, math.ceil(span))
    counts = throughput(events, origin, seconds)
    xs = [s + 0.5 for s in range(seconds)]
    for outcome in OUTCOMES:
        ax_rate.plot(xs, counts[outcome], color=COLOURS[outcome], label=f"{outcome}/s",
                     drawstyle="steps-mid",
                     linewidth=1.5 if outcome == ACKED else 1.0,
                     marker="." if outcome != ACKED else None, markersize=4)
    ax_rate.set_ylabel("produce outcomes / s")
    ax_rate.set_ylim(bottom=0)
    ax_rate.legend(**LEGEND)

    # 2. latency
    points = latencies(events, origin)
    for outcome in OUTCOMES:
        lx, ly = points[outcome]
        ax_lat.scatter(lx, ly, s=6, color=COLOURS[outcome], label=f"{outcome} ({len(lx)})",
                       alpha=0.6, linewidths=0)
    ax_lat.set_yscale("log")
    ax_lat.set_ylabel("produce latency (ms)")
    ax_lat.legend(markerscale=2, **LEGEND)

    # 3. leaders
    brokers = sorted({leader for row in rows for (_s, _e, leader) in row.segments} - {OFFLINE})
    live_changes: tuple[list[float], list[int]] = ([], [])
    offline_changes: tuple[list[float], list[int]] = ([], [])
    for y, row in enumerate(rows):
        for start, end, leader in row.segments:
            if leader == OFFLINE:
                ax_lead.broken_barh([(start, end - start)], (y - 0.3, 0.6), facecolor="mistyrose",
                                    edgecolor="tab:red", hatch="xx", linewidth=0.5)
            else:
                ax_lead.broken_barh([(start, end - start)], (y - 0.3, 0.6),
                                    facecolor=_broker_colour(leader), alpha=0.7)
        for at, leader in row.changes:
            target = offline_changes if leader == OFFLINE else live_changes
            target[0].append(at)
            target[1].append(y)
    ax_lead.plot(*live_changes, linestyle="none", marker="v", color="black", markersize=6,
                 gid=GID_LEADER_CHANGE)
    ax_lead.plot(*offline_changes, linestyle="none", marker="X", color="tab:red", markersize=8,
                 gid=GID_LEADER_OFFLINE)
    ax_lead.set_yticks(range(len(rows)), [row.label for row in rows],
                       fontsize=8 if len(rows) <= 24 else 6)
    ax_lead.set_ylim(-0.6, max(len(rows), 1) - 0.4)
    ax_lead.invert_yaxis()
    ax_lead.set_ylabel("leader (topic-partition)")
    handles = [Patch(facecolor=_broker_colour(b), alpha=0.7, label=f"broker {b}")
               for b in brokers]
    handles.append(Patch(facecolor="mistyrose", edgecolor="tab:red", hatch="xx",
                         label="offline (-1)"))
    handles.append(Line2D([], [], linestyle="none", marker="v", color="black",
                          label=f"new leader ({len(live_changes[0])})"))
    handles.append(Line2D([], [], linestyle="none", marker="X", color="tab:red",
                          label=f"went offline ({len(offline_changes[0])})"))
    ax_lead.legend(handles=handles, **LEGEND)
    if not rows:
        ax_lead.text(0.5, 0.5, "no partition states recorded", transform=ax_lead.transAxes,
                     ha="center", va="center", color="gray")

    # 4. controller epoch
    epochs = [(e.t - origin, e.epoch) for e in events if isinstance(e, ControllerEpochSeen)]
    if epochs:
        ex = [t for t, _ in epochs] + [horizon - origin]
        ey = [epoch for _, epoch in epochs] + [epochs[-1][1]]
        ax_epoch.step(ex, ey, where="post", color="tab:purple", gid=GID_EPOCH)
        ax_epoch.plot(ex[:-1], ey[:-1], linestyle="none", marker="o", markersize=3,
                      color="tab:purple")
        ax_epoch.yaxis.set_major_locator(MaxNLocator(integer=True))
        low, high = min(ey), max(ey)
        ax_epoch.set_ylim(low - 0.5, high + 0.5)
    else:
        ax_epoch.text(0.5, 0.5, "no controller epochs recorded", transform=ax_epoch.transAxes,
                      ha="center", va="center", color="gray")
    ax_epoch.set_ylabel("controller epoch")
    ax_epoch.set_xlabel("seconds since the first event")
    ax_epoch.set_xlim(0, span)

    # fault windows across every panel, labelled on the top one
    kinds = sorted({w.kind for w in windows})
    shades = ("tab:gray", "tab:blue", "tab:brown", "tab:purple", "tab:cyan", "tab:olive",
              "tab:pink", "tab:red", "tab:orange", "tab:green")
    shade = {kind: shades[i % len(shades)] for i, kind in enumerate(kinds)}
    for w in windows:
        start = w.start - origin
        end = (w.end if w.end is not None else horizon) - origin
        for ax in (ax_rate, ax_lat, ax_lead, ax_epoch):
            ax.axvspan(start, end, color=shade[w.kind], alpha=0.12, linewidth=0,
                       hatch="//" if w.end is None else None, gid=f"{GID_FAULT}:{w.kind}")
        label = w.kind if w.end is not None else f"{w.kind} (never healed)"
        ax_rate.text(start, 1.0, f" {label}", transform=ax_rate.get_xaxis_transform(),
                     rotation=90, ha="left", va="top", fontsize=9, color=shade[w.kind],
                     clip_on=True, bbox={"facecolor": "white", "alpha": 0.6, "linewidth": 0,
                                         "pad": 1})
    for ax in (ax_rate, ax_lat, ax_lead, ax_epoch):
        ax.grid(True, axis="x", alpha=0.3)
    return fig


def draw(events: Sequence[Event], path: Path, *, title: str = "") -> Path:
    """Render the timeline of ``events`` (see :func:`figure`) as a PNG at ``path``."""
    path = Path(path)
    figure(events, title=title).savefig(path, format="png", dpi=DPI)
    return path


# -- command line ------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tests.faults.timeline history.jsonl out.png [--title T]``: a user error (an
    unreadable or corrupt history, an unwritable output) is one line on stderr and exit 2."""
    parser = argparse.ArgumentParser(
        prog="python -m tests.faults.timeline",
        description="Draw a fault run's history (JSONL) as a timeline PNG.")
    parser.add_argument("history", type=Path, help="the history file (JSONL)")
    parser.add_argument("out", type=Path, help="the PNG to write")
    parser.add_argument("--title", default="", help="a title above the panels")
    args = parser.parse_args(argv)
    try:
        events = read_history(args.history)
        if not events:
            raise HistoryError(f"{args.history}: no events")
        draw(events, args.out, title=args.title)
    except (HistoryError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: cannot write {args.out}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(f"{args.out}: {len(events)} events drawn")
    return 0


if __name__ == "__main__":
    sys.exit(main())
