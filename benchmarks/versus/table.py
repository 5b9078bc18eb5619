"""The figures of a run, their medians and ranges over rounds, the ratio partctl/Kafka of each
row and whether it meets issue 32's target; printed as a table, kept as JSON, drawn as a chart
and written to docs/performance.md."""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

SYSTEM_LABELS = {"partctl": "partctl", "kafka3": "Kafka 3.9 (ZK)", "kafka4": "Kafka 4 (KRaft)"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One line of the table: what is measured, its unit, which way is better, and the target
    ratio partctl/Kafka 3.9 (None: no target: the figure is shown, not judged). An
    ``absolute`` row's figure is itself a ratio of two of a system's own figures (issue 33's
    transactional against plain produce): its target applies to partctl's figure, and no
    ratio to Kafka is shown for it."""

    key: str
    label: str
    unit: str
    better: Literal["higher", "lower"]
    target: float | None = None
    absolute: bool = False


def target_for(kind: str) -> float | None:
    """Issue 32's targets, as ratios partctl/Kafka 3.9.1: throughput >= 1.0, p99/p99.9 <= 1.0,
    RSS <= 0.25, start/recovery <= 1.0, failover/controlled shutdown <= 0.2, CPU/MB <= 1.0;
    and issue 33's, on partctl's own figures (absolute rows): transactional produce >= 0.7 of
    the same records without transactions, read_committed consume >= 0.9 of
    read_uncommitted."""
    return {"throughput": 1.0, "tail": 1.0, "rss": 0.25, "start": 1.0, "controller": 0.2,
            "cpu": 1.0, "txn_share": 0.7, "committed_share": 0.9}.get(kind)


@dataclass(eq=False)
class Results:
    """The figures gathered so far (row key -> system -> one value per round) and the
    failures, each one line."""

    rows: dict[str, Row] = field(default_factory=dict)
    values: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def add(self, row: Row, system: str, value: float) -> None:
        self.rows.setdefault(row.key, row)
        self.values.setdefault(row.key, {}).setdefault(system, []).append(value)

    def fail(self, line: str) -> None:
        self.failures.append(line)

    def median(self, key: str, system: str) -> float | None:
        got = self.values.get(key, {}).get(system)
        return statistics.median(got) if got else None

    def ratio(self, key: str, system: str, against: str) -> float | None:
        """``system``'s median over ``against``'s (None for an absolute row: its figures are
        ratios already)."""
        ours, theirs = self.median(key, system), self.median(key, against)
        if ours is None or not theirs or self.rows[key].absolute:
            return None
        return ours / theirs

    def met(self, key: str) -> bool | None:
        """Whether partctl meets the row's target against Kafka 3.9, or, for an absolute row,
        with its own figure (None: no target, or a figure missing)."""
        row = self.rows[key]
        ratio = (self.median(key, "partctl") if row.absolute
                 else self.ratio(key, "partctl", "kafka3"))
        if row.target is None or ratio is None:
            return None
        return ratio >= row.target if row.better == "higher" else ratio <= row.target

    def to_json(self, meta: Mapping[str, object]) -> dict[str, object]:
        return {**meta, "failures": list(self.failures), "rows": [
            {"key": r.key, "label": r.label, "unit": r.unit, "better": r.better,
             "target": r.target, "absolute": r.absolute,
             "values": self.values.get(r.key, {}),
             "ratio_kafka3": self.ratio(r.key, "partctl", "kafka3"),
             "ratio_kafka4": self.ratio(r.key, "partctl", "kafka4"), "met": self.met(r.key)}
            for r in self.rows.values()]}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Results:
        results = cls(failures=list(data.get("failures", [])))  # type: ignore[call-overload]
        for item in data["rows"]:  # type: ignore[attr-defined]
            row = Row(key=item["key"], label=item["label"], unit=item["unit"],
                      better=item["better"], target=item["target"],
                      absolute=bool(item.get("absolute", False)))
            results.rows[row.key] = row
            results.values[row.key] = {s: list(v) for s, v in item["values"].items()}
        return results


def _figure(values: Sequence[float] | None) -> str:
    if not values:
        return "-"
    middle = statistics.median(values)
    text = _number(middle)
    if len(values) > 1:
        text += f" [{_number(min(values))}-{_number(max(values))}]"
    return text


def _number(x: float) -> str:
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    if abs(x) >= 0.1:
        return f"{x:.2f}"
    return f"{x:.3g}"


def _ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def _target(row: Row) -> str:
    if row.target is None:
        return "-"
    if row.absolute:
        return f"partctl {'>=' if row.better == 'higher' else '<='} {row.target:g}"
    return f"{'>=' if row.better == 'higher' else '<='} {row.target:g}x"


def _verdict(met: bool | None) -> str:
    return "-" if met is None else ("met" if met else "not met")


GROUPS = ("produce", "cpu", "consume", "txn", "latency", "e2e", "rss", "start", "controller")
"""The table's order of rows, by the first part of their keys (then as measured)."""


def _order(row: Row) -> int:
    group = row.key.partition(".")[0]
    return GROUPS.index(group) if group in GROUPS else len(GROUPS)


def table_rows(results: Results, systems: Iterable[str]) -> tuple[list[str], list[list[str]]]:
    """The table's header and lines, as text cells."""
    systems = [s for s in ("partctl", "kafka3", "kafka4") if s in set(systems)]
    header = ["row", "unit", *(SYSTEM_LABELS[s] for s in systems)]
    if "kafka3" in systems:
        header.append("partctl/K3.9")
    if "kafka4" in systems:
        header.append("partctl/K4")
    header += ["target", "met"]
    lines = []
    for row in sorted(results.rows.values(), key=_order):
        cells = [row.label, row.unit,
                 *(_figure(results.values.get(row.key, {}).get(s)) for s in systems)]
        if "kafka3" in systems:
            cells.append(_ratio(results.ratio(row.key, "partctl", "kafka3")))
        if "kafka4" in systems:
            cells.append(_ratio(results.ratio(row.key, "partctl", "kafka4")))
        cells += [_target(row), _verdict(results.met(row.key))]
        lines.append(cells)
    return header, lines


def render_text(results: Results, systems: Iterable[str]) -> str:
    header, lines = table_rows(results, systems)
    widths = [max(len(c) for c in column) for column in zip(header, *lines, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True)))

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *map(line, lines)])


def render_markdown(results: Results, systems: Iterable[str]) -> str:
    header, lines = table_rows(results, systems)
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(
        "---" if i == 0 else "---:" for i in range(len(header))) + "|"]
    out += ["| " + " | ".join(cells) + " |" for cells in lines]
    return "\n".join(out)


def write_chart(results: Results, path: Path) -> None:
    """A bar per row: partctl's figure as a ratio of Kafka 3.9's (log scale), better to the
    right whichever way the row counts (lower-is-better rows are drawn as Kafka/partctl), with
    the row's target as a mark; green where met, red where not, grey without a target. An
    absolute row (a system's own ratio) has no ratio to Kafka and is not drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    drawn = [(row, r) for row in sorted(results.rows.values(), key=_order)
             if (r := results.ratio(row.key, "partctl", "kafka3"))]
    fig, ax = plt.subplots(figsize=(11, 0.32 * max(4, len(drawn)) + 1.2))
    labels, bars, colours = [], [], []
    for i, (row, ratio) in enumerate(drawn):
        advantage = ratio if row.better == "higher" else 1 / ratio
        labels.append(f"{row.label} ({row.unit})")
        bars.append(advantage)
        met = results.met(row.key)
        colours.append("#8a8a8a" if met is None else ("#2e8b57" if met else "#c0392b"))
        if row.target:
            mark = row.target if row.better == "higher" else 1 / row.target
            ax.plot([mark, mark], [i - 0.4, i + 0.4], color="black", linewidth=1.5)
    # from 1x: to the right where partctl is ahead, to the left where it is behind
    ax.barh(range(len(bars)), [b - 1 for b in bars], left=1, color=colours)
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    marks = [r.target if r.better == "higher" else 1 / r.target
             for r, _ in drawn if r.target]
    ax.set_xlim(min([0.5, *bars, *marks]) / 1.3, max([2.0, *bars, *marks]) * 1.3)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: f"{x:g}x"))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda _x, _pos: ""))
    ax.axvline(1.0, color="#444", linestyle=":", linewidth=1)
    ax.set_xlabel("partctl's advantage over Kafka 3.9.1 (x, log scale; > 1: partctl ahead; "
                  "black mark: the target)", fontsize=8)
    ax.set_title("partctl side by side with Apache Kafka 3.9.1 (ZooKeeper mode)", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def write_json(results: Results, path: Path, meta: Mapping[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results.to_json(meta), indent=1) + "\n")
